//! The control plane, on the door's listener: a controller reads a running capsule's
//! settings and changes them, and injects and forgets its secrets.
//!
//! What it promises:
//!
//! - **Four routes.** `GET /control` answers the settings in force, the driver choices (each
//!   with `available`: whether a switch to it would be accepted now), what may be changed, and
//!   which secrets hold a value (never the value). `PUT /control/settings/<name>` with
//!   `{"value": <json>}` changes a setting and answers `{"settings": …}` as they stand after it.
//!   `PUT /control/secrets/<name>` with `{"value": "<string>"}` injects a secret and `DELETE`
//!   forgets it; both answer `{"secrets": …}` as they stand after it.
//! - **The session's token, on every route.** A request without `Authorization: Bearer
//!   <token>`, or with another token, is answered 401 `unauthorized`, and nothing is read or
//!   changed. The token is compared in constant time. It is 256 random bits in hex, made when
//!   the door starts; nothing but the token file holds it.
//! - **The token file.** When the door is given a directory, `<dir>/<port>.json` holds
//!   `{"url", "token", "pid"}`: the directory is made 0700, the file is created 0600 and
//!   appears whole (written beside it, then renamed). It is removed when the door stops. A file
//!   left by a process that was killed names a pid that is no longer alive; readers skip it.
//! - **Secrets from this machine only.** The secrets routes answer only a loopback peer; any
//!   other is answered 403 `loopback_only`, whatever token it holds.
//! - **Every answer is JSON, every refusal `{"error": <reason>, "message": …}`.** 422
//!   `invalid_value` for a body that is not JSON, has no `value`, or gives a secret a value that
//!   is not a string; 413 `too_large` for a body over the door's limit. What a change may do
//!   is decided (and traced) by [`ControlState`]; its refusals are answered with their own
//!   status and reason: 403 not granted, 404 no such setting or secret, 409
//!   `credential_unresolvable` or `in_use`, 422.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use murmur_runtime::session::control::{ControlRefusal, ControlState, Principal};

/// The session's control token. Its value is never printed by `Debug`.
#[derive(Clone)]
pub(crate) struct ControlToken(String);

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlToken(…)")
    }
}

impl ControlToken {
    /// 256 bits from the system's random source, as 64 hex digits.
    pub(crate) fn generate() -> std::io::Result<ControlToken> {
        let mut bits = [0u8; 32];
        getrandom::fill(&mut bits).map_err(|error| {
            std::io::Error::other(format!("the system's random source failed: {error}"))
        })?;
        Ok(ControlToken(hex::encode(bits)))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`.
    fn authorizes(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(murmur_front::secret::bearer_token)
            .is_some_and(|presented| {
                murmur_front::secret::same_secret(presented.as_bytes(), self.0.as_bytes())
            })
    }
}

/// Whether a peer may use the secrets routes: it connects from this machine.
fn is_loopback(peer: &SocketAddr) -> bool {
    match peer.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
    }
}

/// What a token file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenFile {
    /// The door's URL, as a controller on this machine reaches it: `http://127.0.0.1:PORT/`.
    pub url: String,
    /// The session's bearer token.
    pub token: String,
    /// The serving process.
    pub pid: u32,
    /// The door's certificate chain (PEM) when it speaks HTTPS: a controller trusts exactly it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
}

impl TokenFile {
    /// Reads and parses the token file at `path`.
    pub fn read(path: &Path) -> Result<TokenFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("{} cannot be read: {error}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|error| format!("{} is not a token file: {error}", path.display()))
    }
}

/// The URL a controller on this machine reaches a door listening on `addr` at: a door
/// listening on every address is reached on loopback.
pub(crate) fn local_url(addr: SocketAddr, scheme: &str) -> String {
    let host = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("{scheme}://{}/", SocketAddr::new(host, addr.port()))
}

/// Whether process `pid` exists (it may belong to another user).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; kill only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The token file of the door on `port`, in `dir`.
pub fn token_file_path(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("{port}.json"))
}

/// A written token file; removed when dropped.
#[derive(Debug)]
pub(crate) struct WrittenTokenFile {
    path: PathBuf,
}

impl Drop for WrittenTokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `content` as the token file of the door on `port` in `dir`: `dir` made 0700, the file
/// created 0600 beside its final name, then renamed onto it.
pub(crate) fn write_token_file(
    dir: &Path,
    port: u16,
    content: &TokenFile,
) -> std::io::Result<WrittenTokenFile> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let mut temporary = tempfile::Builder::new()
        .prefix(".token-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    let text = serde_json::to_string(content).map_err(std::io::Error::other)?;
    temporary.write_all(text.as_bytes())?;
    temporary.as_file().sync_all()?;
    let path = token_file_path(dir, port);
    temporary.persist(&path).map_err(|error| error.error)?;
    remove_stale(dir);
    Ok(WrittenTokenFile { path })
}

/// Removes the token files in `dir` whose process has ended (a door that was killed).
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        if path.extension().is_some_and(|e| e == "json")
            && let Ok(file) = TokenFile::read(&path)
            && !pid_alive(file.pid)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// What the control routes serve: the launch's control state, the bearer token they want,
/// and the largest body they read.
pub(crate) struct ControlPlane {
    pub control: Arc<ControlState>,
    pub token: ControlToken,
    pub body_limit: usize,
}

/// The control routes over `plane`, to be merged into the door's router (whatever its state).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(plane: Arc<ControlPlane>) -> Router<S> {
    Router::new()
        .route("/control", get(show))
        .route("/control/settings/{name}", put(set_setting))
        .route(
            "/control/secrets/{name}",
            put(inject_secret).delete(forget_secret),
        )
        .with_state(plane)
}

fn answer(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

/// A request answered with a refusal: its status, reason and message.
#[derive(Debug)]
struct Denied {
    status: StatusCode,
    reason: &'static str,
    message: String,
}

impl Denied {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Denied {
        Denied {
            status,
            reason,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Denied {
        Denied::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_value", message)
    }
}

impl From<ControlRefusal> for Denied {
    fn from(refusal: ControlRefusal) -> Denied {
        Denied {
            status: StatusCode::from_u16(refusal.status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            reason: refusal.reason,
            message: refusal.message,
        }
    }
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        let mut response = answer(
            self.status,
            &json!({"error": self.reason, "message": self.message}),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// 200 with `value`, or the refusal.
fn respond(outcome: Result<Value, Denied>) -> Response {
    match outcome {
        Ok(value) => answer(StatusCode::OK, &value),
        Err(denied) => denied.into_response(),
    }
}

/// 401, unless `headers` carry the session's token.
fn authorize(door: &ControlPlane, headers: &HeaderMap) -> Result<(), Denied> {
    if door.token.authorizes(headers) {
        return Ok(());
    }
    Err(Denied::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "the control plane wants `Authorization: Bearer <token>` with this session's token (in the token file `mur run --serve` names as `control:`)",
    ))
}

/// 403, unless `peer` is on this machine.
fn from_loopback(peer: &SocketAddr) -> Result<(), Denied> {
    if is_loopback(peer) {
        Ok(())
    } else {
        Err(Denied::new(
            StatusCode::FORBIDDEN,
            "loopback_only",
            "secrets are injected and forgotten only from this machine (a loopback address)",
        ))
    }
}

/// The body's `value`: 413 over the door's limit, 422 when the body is not a JSON object with
/// a `value`.
async fn value_of(door: &ControlPlane, body: Body) -> Result<Value, Denied> {
    let bytes = crate::body::read_body(body, door.body_limit)
        .await
        .ok_or_else(|| {
            Denied::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the request body is over the door's limit of {} bytes",
                    door.body_limit
                ),
            )
        })?;
    let body: Value = serde_json::from_slice(&bytes)
        .map_err(|error| Denied::invalid(format!("the request body is not JSON: {error}")))?;
    match body {
        Value::Object(mut object) if object.contains_key("value") => {
            Ok(object.remove("value").unwrap_or(Value::Null))
        }
        _ => Err(Denied::invalid(
            "the request body is not a JSON object with a `value`: send {\"value\": …}",
        )),
    }
}

/// The secrets as they stand, as the secrets routes answer them.
fn secrets(control: &ControlState) -> Value {
    json!({ "secrets": control.snapshot()["secrets"] })
}

async fn show(State(door): State<Arc<ControlPlane>>, headers: HeaderMap) -> Response {
    respond(authorize(&door, &headers).map(|()| door.control.snapshot()))
}

async fn set_setting(
    State(door): State<Arc<ControlPlane>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let outcome = async {
        authorize(&door, &headers)?;
        let value = value_of(&door, body).await?;
        let settings = door
            .control
            .set(&name, &value, Principal::Controller, None)?;
        Ok(json!({ "settings": settings }))
    };
    respond(outcome.await)
}

async fn inject_secret(
    State(door): State<Arc<ControlPlane>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let outcome = async {
        authorize(&door, &headers)?;
        from_loopback(&peer)?;
        let Value::String(value) = value_of(&door, body).await? else {
            return Err(Denied::invalid("a secret's `value` is a string"));
        };
        door.control.put_secret(&name, &value)?;
        Ok(secrets(&door.control))
    };
    respond(outcome.await)
}

async fn forget_secret(
    State(door): State<Arc<ControlPlane>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let outcome = (|| {
        authorize(&door, &headers)?;
        from_loopback(&peer)?;
        door.control.forget_secret(&name)?;
        Ok(secrets(&door.control))
    })();
    respond(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_peers_may_touch_secrets() {
        for peer in [
            "127.0.0.1:9",
            "127.8.9.10:9",
            "[::1]:9",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_loopback(&peer.parse().unwrap()), "{peer}");
        }
        for peer in [
            "10.0.0.1:9",
            "192.168.1.20:9",
            "0.0.0.0:9",
            "[::]:9",
            "[fe80::1]:9",
            "[::ffff:10.0.0.1]:9",
            "[2001:db8::1]:9",
        ] {
            assert!(!is_loopback(&peer.parse().unwrap()), "{peer}");
        }
    }

    #[test]
    fn the_token_is_256_random_bits_in_hex() {
        let one = ControlToken::generate().unwrap();
        let two = ControlToken::generate().unwrap();
        assert_eq!(one.as_str().len(), 64);
        assert!(one.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(one.as_str(), two.as_str());
        assert!(!format!("{one:?}").contains(one.as_str()));
    }

    #[test]
    fn only_the_bearer_token_authorizes() {
        let token = ControlToken("abc123".to_string());
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            token.authorizes(&headers)
        };
        assert!(with("Bearer abc123"));
        assert!(with("bearer  abc123 "));
        assert!(!with("Bearer abc124"));
        assert!(!with("Bearer abc12"));
        assert!(!with("Bearer "));
        assert!(!with("Basic abc123"));
        assert!(!with("abc123"));
        assert!(!token.authorizes(&HeaderMap::new()));
    }

    #[test]
    fn a_door_on_every_address_is_reached_on_loopback() {
        assert_eq!(
            local_url("0.0.0.0:8080".parse().unwrap(), "http"),
            "http://127.0.0.1:8080/"
        );
        assert_eq!(
            local_url("[::]:8080".parse().unwrap(), "http"),
            "http://[::1]:8080/"
        );
        assert_eq!(
            local_url("127.0.0.1:9".parse().unwrap(), "http"),
            "http://127.0.0.1:9/"
        );
    }

    #[test]
    fn the_token_file_is_private_whole_and_removed_when_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        let content = TokenFile {
            url: "http://127.0.0.1:4321/".to_string(),
            token: "f".repeat(64),
            pid: std::process::id(),
            cert: None,
        };
        let written = write_token_file(&dir, 4321, &content).unwrap();
        let path = token_file_path(&dir, 4321);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(TokenFile::read(&path).unwrap(), content);
        // Nothing but the token file is left in the directory.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("4321.json")]);
        drop(written);
        assert!(!path.exists());
    }

    #[test]
    fn a_starting_door_removes_the_token_files_of_ended_processes() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        let file = |pid: u32| TokenFile {
            url: "http://127.0.0.1:1/".to_string(),
            token: "0".repeat(64),
            pid,
            cert: None,
        };
        // Neither dropped: as a killed door would leave them.
        std::mem::forget(write_token_file(&dir, 1, &file(0x7fff_fff0)).unwrap());
        std::mem::forget(write_token_file(&dir, 2, &file(std::process::id())).unwrap());
        std::fs::write(dir.join("notes.txt"), "kept").unwrap();
        let _written = write_token_file(&dir, 3, &file(std::process::id())).unwrap();
        assert!(
            !token_file_path(&dir, 1).exists(),
            "the stale file is still there"
        );
        assert!(token_file_path(&dir, 2).exists());
        assert!(token_file_path(&dir, 3).exists());
        assert!(dir.join("notes.txt").exists());
    }

    #[test]
    fn a_loose_control_directory_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let content = TokenFile {
            url: "http://127.0.0.1:1/".to_string(),
            token: "0".repeat(64),
            pid: 1,
            cert: None,
        };
        let _written = write_token_file(&dir, 1, &content).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
