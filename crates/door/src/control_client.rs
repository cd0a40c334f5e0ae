//! The controller's side of the control plane: finding a served capsule's token file and
//! calling its `/control` routes. `mur control` is built on it.
//!
//! What it promises:
//!
//! - **Finding the capsule.** Without a URL: the one token file in the control directory whose
//!   process is alive; none, or several, is an error that lists every file found and what is
//!   wrong with it. With a URL: the live token file whose `url` names the same scheme, host and
//!   port (`localhost` and loopback addresses count as one host). A token file named by the
//!   caller is used as it is, and a URL given with it is where the token is sent.
//! - **The token goes only where it was meant to go**: to the URL of its own token file, or to
//!   the URL the caller gave; never through a proxy the environment names.
//! - **Every failure says what it is** ([`ControlError`]): no capsule found or several, a URL
//!   that is not usable, no connection, the token refused (401), a refusal with the control
//!   plane's status, reason and message, or an answer that is not the control plane's.
//! - **Bounded reads.** An answer over [`MAX_ANSWER_BYTES`] is an error, never a buffer that
//!   grows without end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use murmur_manifest::Coded;
use serde_json::{Value, json};

use crate::control::{TokenFile, pid_alive};

/// The largest answer read from a control plane: 1 MiB.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// How long connecting, and a whole call, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a control call did not give an answer, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No token file names a live capsule (at that URL, when one was given).
    #[error("{0}")]
    NotFound(String),
    /// Several live capsules, and no URL to choose between them.
    #[error("{0}")]
    Ambiguous(String),
    /// The token file the caller named cannot be used.
    #[error("{0}")]
    BadTokenFile(String),
    /// The URL the caller gave is not an http URL with a host.
    #[error("{0}")]
    BadUrl(String),
    /// No HTTP answer.
    #[error("cannot reach the control plane at {url}: {detail}")]
    Unreachable { url: String, detail: String },
    /// 401: the token is not this session's.
    #[error("the control plane at {url} refused the token: {message}")]
    Unauthorized { url: String, message: String },
    /// The control plane refused the request.
    #[error("{reason}: {message}")]
    Refused {
        status: u16,
        reason: String,
        message: String,
    },
    /// The answer is not the control plane's.
    #[error("the answer from {url} is not the control plane's: {detail}")]
    Invalid { url: String, detail: String },
}

impl Coded for ControlError {
    /// `E-CTL-003` for a change the control plane refused, `E-CTL-004` when there is no
    /// control plane to talk to.
    fn code(&self) -> &'static str {
        match self {
            ControlError::Refused { .. } => "E-CTL-003",
            _ => "E-CTL-004",
        }
    }

    fn message(&self) -> String {
        match self {
            ControlError::Refused {
                status,
                reason,
                message,
            } => format!("the control plane refused ({status} {reason}): {message}"),
            other => other.to_string(),
        }
    }

    fn hint(&self) -> String {
        match self {
            ControlError::Refused { reason, .. } => refusal_hint(reason),
            ControlError::Ambiguous(_) => "pass the URL of the capsule to control",
            ControlError::BadUrl(_) => {
                "give the URL `mur run --serve` printed: http://127.0.0.1:PORT/"
            }
            ControlError::BadTokenFile(_) => {
                "name the token file `mur run --serve` printed as `control:`"
            }
            ControlError::Unauthorized { .. } => {
                "the token file belongs to another session: use the one the capsule printed as `control:`"
            }
            ControlError::Invalid { .. } => {
                "check the URL: it should be a capsule served by `mur run --serve`"
            }
            ControlError::NotFound(_) | ControlError::Unreachable { .. } => {
                "serve the capsule with `mur run DIR --serve`, and check that it is still running"
            }
        }
        .to_string()
    }
}

/// What to do about a refusal, by its reason.
fn refusal_hint(reason: &str) -> &'static str {
    match reason {
        "credential_unresolvable" => {
            "inject the choice's credential first: `mur control secret NAME` with the value on stdin"
        }
        "in_use" => "switch to another choice first: `mur control set inference.driver primary`",
        "not_granted" => {
            "a controller may change only what the capsule's `control.settings` lists; add it there and relaunch"
        }
        "unknown_setting" => "the settings are inference.driver and inference.max_tokens",
        "unknown_secret" => "only names the capsule's `control.secrets` lists can be injected",
        "unknown_choice" | "invalid_value" => {
            "`mur control show` lists the choices and the settings' current values"
        }
        "loopback_only" => "run `mur control` on the machine that serves the capsule",
        _ => "`mur control show` shows what may be changed",
    }
}

/// One file of the control directory, as found.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    /// The file's content, or why it cannot be read.
    pub file: Result<TokenFile, String>,
    /// Whether its process is alive.
    pub alive: bool,
}

impl Found {
    fn usable(&self) -> Option<&TokenFile> {
        self.file.as_ref().ok().filter(|_| self.alive)
    }

    /// One line saying what the file is.
    pub fn describe(&self) -> String {
        match &self.file {
            Ok(file) if self.alive => format!(
                "{}: {} (process {})",
                self.path.display(),
                file.url,
                file.pid
            ),
            Ok(file) => format!(
                "{}: {} (process {} has ended; the file is stale)",
                self.path.display(),
                file.url,
                file.pid
            ),
            Err(why) => why.clone(),
        }
    }
}

/// Every `*.json` file in `dir`, by name; none when `dir` does not exist.
pub fn token_files(dir: &Path) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let file = TokenFile::read(&path);
            let alive = file.as_ref().is_ok_and(|file| pid_alive(file.pid));
            Found { path, file, alive }
        })
        .collect()
}

/// An http or https URL with a host; the path is ignored (the control routes are at the root).
fn parse_url(given: &str) -> Result<url::Url, ControlError> {
    let url = url::Url::parse(given).map_err(|error| {
        ControlError::BadUrl(format!("`{given}` is not an absolute URL: {error}"))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ControlError::BadUrl(format!(
            "`{given}` uses `{}`; a control plane is reached over http",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ControlError::BadUrl(format!("`{given}` names no host")));
    }
    Ok(url)
}

fn is_loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `a` and `b` reach the same door.
fn same_door(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.port_or_known_default() == b.port_or_known_default()
        && (a.host() == b.host() || (is_loopback_host(a) && is_loopback_host(b)))
}

fn listing(found: &[Found]) -> String {
    found
        .iter()
        .map(|f| format!("\n  {}", f.describe()))
        .collect()
}

/// A served capsule's control plane, and the token to reach it with.
pub struct Controller {
    /// The door's base URL.
    pub url: url::Url,
    /// The token file the token came from.
    pub token_file: PathBuf,
    token: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("url", &self.url.as_str())
            .field("token_file", &self.token_file)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// The control plane to call: see the module's docs. `dir` is the control directory,
    /// `url` and `token_file` what the caller named.
    pub fn locate(
        dir: &Path,
        url: Option<&str>,
        token_file: Option<&Path>,
    ) -> Result<Controller, ControlError> {
        let wanted = url.map(parse_url).transpose()?;
        let (path, file) = match token_file {
            Some(path) => {
                let file = TokenFile::read(path).map_err(ControlError::BadTokenFile)?;
                (path.to_path_buf(), file)
            }
            None => {
                let found = token_files(dir);
                let live: Vec<(&Found, &TokenFile)> = found
                    .iter()
                    .filter_map(|f| f.usable().map(|file| (f, file)))
                    .filter(|(_, file)| match &wanted {
                        Some(wanted) => {
                            parse_url(&file.url).is_ok_and(|url| same_door(&url, wanted))
                        }
                        None => true,
                    })
                    .collect();
                let seen = if found.is_empty() {
                    format!(" ({} holds no token file)", dir.display())
                } else {
                    format!("; found:{}", listing(&found))
                };
                match (live.as_slice(), &wanted) {
                    ([(one, file)], _) => (one.path.clone(), (*file).clone()),
                    ([], Some(wanted)) => {
                        return Err(ControlError::NotFound(format!(
                            "no running capsule serves {wanted}{seen}"
                        )));
                    }
                    ([], None) => {
                        return Err(ControlError::NotFound(format!(
                            "no running capsule was found{seen}"
                        )));
                    }
                    (several, _) => {
                        return Err(ControlError::Ambiguous(format!(
                            "{} running capsules were found; name one by its URL:{}",
                            several.len(),
                            several
                                .iter()
                                .map(|(f, _)| format!("\n  {}", f.describe()))
                                .collect::<String>()
                        )));
                    }
                }
            }
        };
        let url = match wanted {
            Some(url) => url,
            None => parse_url(&file.url).map_err(|error| {
                ControlError::BadTokenFile(format!("{}: {error}", path.display()))
            })?,
        };
        // reqwest's rustls backend uses the process's default crypto provider; install ring
        // unless someone already installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .no_proxy();
        // A door that speaks HTTPS wrote its certificate beside its token: trust exactly it.
        if let Some(cert) = &file.cert {
            let certificates =
                reqwest::Certificate::from_pem_bundle(cert.as_bytes()).map_err(|error| {
                    ControlError::BadTokenFile(format!(
                        "{}: its certificate is not PEM: {error}",
                        path.display()
                    ))
                })?;
            builder = builder.tls_certs_only(certificates);
        }
        let http = builder.build().map_err(|error| ControlError::Unreachable {
            url: url.to_string(),
            detail: format!("the HTTP client cannot start: {error}"),
        })?;
        Ok(Controller {
            url,
            token_file: path,
            token: file.token,
            http,
        })
    }

    /// The URL of the route `segments` under the door's root.
    fn route(&self, segments: &[&str]) -> url::Url {
        let mut url = self.url.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear().extend(segments);
        }
        url
    }

    /// `GET /control`.
    pub async fn show(&self) -> Result<Value, ControlError> {
        self.call(reqwest::Method::GET, &["control"], None).await
    }

    /// `PUT /control/settings/<name>`: the settings in force after it.
    pub async fn set(&self, name: &str, value: &Value) -> Result<Value, ControlError> {
        self.call(
            reqwest::Method::PUT,
            &["control", "settings", name],
            Some(json!({ "value": value })),
        )
        .await
    }

    /// `PUT /control/secrets/<name>`: the secrets after it.
    pub async fn inject(&self, name: &str, value: &str) -> Result<Value, ControlError> {
        self.call(
            reqwest::Method::PUT,
            &["control", "secrets", name],
            Some(json!({ "value": value })),
        )
        .await
    }

    /// `DELETE /control/secrets/<name>`: the secrets after it.
    pub async fn forget(&self, name: &str) -> Result<Value, ControlError> {
        self.call(reqwest::Method::DELETE, &["control", "secrets", name], None)
            .await
    }

    async fn call(
        &self,
        method: reqwest::Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> Result<Value, ControlError> {
        let url = self.route(segments);
        let mut request = self
            .http
            .request(method, url.clone())
            .bearer_auth(&self.token)
            .header("accept", "application/json");
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| ControlError::Unreachable {
                url: url.to_string(),
                detail: detail(&error),
            })?;
        let status = response.status().as_u16();
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(ControlError::Invalid {
                            url: url.to_string(),
                            detail: format!("the answer is over {MAX_ANSWER_BYTES} bytes"),
                        });
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(error) => {
                    return Err(ControlError::Unreachable {
                        url: url.to_string(),
                        detail: detail(&error),
                    });
                }
            }
        }
        let answer: Option<Value> = serde_json::from_slice(&bytes).ok();
        let field = |name: &str| {
            answer
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match (status, &answer) {
            (200, Some(answer @ Value::Object(_))) => Ok(answer.clone()),
            (401, _) => Err(ControlError::Unauthorized {
                url: self.url.to_string(),
                message: field("message").unwrap_or_else(|| "HTTP 401".to_string()),
            }),
            (400..=599, _) if field("error").is_some() => Err(ControlError::Refused {
                status,
                reason: field("error").unwrap_or_default(),
                message: field("message").unwrap_or_default(),
            }),
            _ => Err(ControlError::Invalid {
                url: url.to_string(),
                detail: format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                ),
            }),
        }
    }
}

/// An HTTP error with its causes (reqwest's own message alone says little).
fn detail(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::token_file_path;

    fn write(dir: &Path, port: u16, pid: u32) {
        std::fs::create_dir_all(dir).unwrap();
        let file = TokenFile {
            url: format!("http://127.0.0.1:{port}/"),
            token: "a".repeat(64),
            pid,
            cert: None,
        };
        std::fs::write(
            token_file_path(dir, port),
            serde_json::to_string(&file).unwrap(),
        )
        .unwrap();
    }

    /// A pid no process has: past the kernel's largest.
    const DEAD: u32 = 0x7fff_fff0;

    #[test]
    fn this_process_is_alive_and_an_impossible_pid_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(DEAD));
        assert!(!pid_alive(0));
    }

    #[test]
    fn the_one_live_token_file_is_found_and_stale_ones_are_skipped() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        write(&dir, 4001, std::process::id());
        write(&dir, 4002, DEAD);
        std::fs::write(dir.join("junk.json"), "{").unwrap();
        let controller = Controller::locate(&dir, None, None).unwrap();
        assert_eq!(controller.url.as_str(), "http://127.0.0.1:4001/");
        assert_eq!(controller.token_file, token_file_path(&dir, 4001));
        assert!(!format!("{controller:?}").contains(&"a".repeat(64)));
    }

    #[test]
    fn none_or_several_is_an_error_listing_what_was_found() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        let Err(ControlError::NotFound(message)) = Controller::locate(&dir, None, None) else {
            panic!("found one in an empty home")
        };
        assert!(message.contains("holds no token file"), "{message}");
        write(&dir, 4002, DEAD);
        let Err(ControlError::NotFound(message)) = Controller::locate(&dir, None, None) else {
            panic!("a stale file was used")
        };
        assert!(message.contains("4002.json"), "{message}");
        assert!(message.contains("has ended"), "{message}");
        write(&dir, 4003, std::process::id());
        write(&dir, 4004, std::process::id());
        let Err(ControlError::Ambiguous(message)) = Controller::locate(&dir, None, None) else {
            panic!("one of several was chosen")
        };
        assert!(message.contains("4003.json") && message.contains("4004.json"));
        // A URL chooses, whatever loopback name it uses.
        for url in [
            "http://127.0.0.1:4004/",
            "http://localhost:4004",
            "http://[::1]:4004/",
        ] {
            let controller = Controller::locate(&dir, Some(url), None).unwrap();
            assert_eq!(controller.token_file, token_file_path(&dir, 4004), "{url}");
        }
        let Err(ControlError::NotFound(message)) =
            Controller::locate(&dir, Some("http://127.0.0.1:4999/"), None)
        else {
            panic!("a URL no file names was matched")
        };
        assert!(message.contains("4999"), "{message}");
    }

    #[test]
    fn a_named_token_file_is_used_as_it_is() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        write(&dir, 4005, DEAD);
        let path = token_file_path(&dir, 4005);
        let controller = Controller::locate(&dir, None, Some(&path)).unwrap();
        assert_eq!(controller.url.as_str(), "http://127.0.0.1:4005/");
        let Err(ControlError::BadTokenFile(_)) =
            Controller::locate(&dir, None, Some(&dir.join("missing.json")))
        else {
            panic!("a missing token file was accepted")
        };
        let Err(ControlError::BadUrl(_)) =
            Controller::locate(&dir, Some("ftp://127.0.0.1/"), Some(&path))
        else {
            panic!("an ftp URL was accepted")
        };
    }

    #[test]
    fn routes_are_at_the_root_with_names_encoded() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("control");
        write(&dir, 4006, std::process::id());
        let controller =
            Controller::locate(&dir, Some("http://127.0.0.1:4006/some/path?q=1"), None).unwrap();
        assert_eq!(
            controller.route(&["control", "secrets", "A/B"]).as_str(),
            "http://127.0.0.1:4006/control/secrets/A%2FB"
        );
    }
}
