//! Cassettes: a driver's HTTP exchanges recorded, and served back without a network.
//!
//! What this module promises:
//!
//! - **Recording** ([`Cassette::recording`]) happens where a driver's request leaves the host,
//!   after the network grant allowed it and the credential was attached: the request the
//!   driver sent (method, URL, headers, body) and the answer it got (status, headers, the whole
//!   body, streamed or not) are kept in order. **No credential is kept**: the credential's
//!   header, and `authorization`, `x-api-key`, `api-key`, `cookie` and `set-cookie`, are
//!   dropped; every secret value the caller names is replaced by `[scrubbed]` wherever it
//!   appears (URL, headers, bodies).
//! - **Replaying** ([`Cassette::replaying`]) answers each request from the cassette and sends
//!   nothing. `strict`: the request must be one recorded and not served yet (method, path and
//!   query, and body; JSON bodies compared as JSON with volatile ids normalized), the first
//!   such in recording order; a request no unserved exchange holds, or one past the last
//!   recorded, is refused, and [`Cassette::mismatch`] says
//!   which exchange and where the first difference is. `lenient`: the next recorded answer is
//!   served whatever was asked (a turn for a turn).
//! - **Agent CLIs** reach their provider themselves: a [`Relay`] on loopback stands in for the
//!   provider, and takes their requests through the same recording and replaying.
//! - A cassette file is JSON (`{"format": 1, "exchanges": [...]}`); bodies are text, or
//!   base64 under `body_base64` when not UTF-8. A file that is not one is refused on load,
//!   naming why.

use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// The cassette format this code reads and writes.
pub const FORMAT: u64 = 1;
/// What a scrubbed secret reads as.
pub const SCRUBBED: &str = "[scrubbed]";
/// What a driver credential set nowhere stands as while replaying: never sent, as nothing is.
pub const REPLAY_CREDENTIAL: &str = "replayed-without-a-key";
/// Headers never recorded, whatever the driver: they carry credentials.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "set-cookie",
];
/// The largest body recorded or replayed.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub request: RecordedRequest,
    pub response: RecordedResponse,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    #[serde(flatten)]
    pub body: RecordedBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    #[serde(flatten)]
    pub body: RecordedBody,
}

/// A body as text, or as base64 when it is not UTF-8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedBody {
    Text { body: String },
    Binary { body_base64: String },
}

impl RecordedBody {
    fn of(bytes: &[u8]) -> RecordedBody {
        match std::str::from_utf8(bytes) {
            Ok(text) => RecordedBody::Text {
                body: text.to_string(),
            },
            Err(_) => {
                use base64::Engine;
                RecordedBody::Binary {
                    body_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                }
            }
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            RecordedBody::Text { body } => body.as_bytes().to_vec(),
            RecordedBody::Binary { body_base64 } => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(body_base64)
                    .unwrap_or_default()
            }
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    format: u64,
    exchanges: Vec<Exchange>,
}

enum Mode {
    Recording {
        secrets: Vec<String>,
    },
    Replaying {
        lenient: bool,
        /// Which recorded exchanges were served.
        served: Vec<bool>,
        mismatch: Option<String>,
    },
}

struct State {
    mode: Mode,
    exchanges: Vec<Exchange>,
}

/// A cassette shared by every driver call of a session. Cloning shares it.
#[derive(Clone)]
pub struct Cassette(Arc<Mutex<State>>);

impl std::fmt::Debug for Cassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Cassette")
            .field("exchanges", &state.exchanges.len())
            .finish()
    }
}

impl Cassette {
    /// A cassette that records, scrubbing each of `secrets` (empty ones ignored).
    pub fn recording(secrets: Vec<String>) -> Cassette {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        // Longest first, so a secret holding another is scrubbed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Cassette(Arc::new(Mutex::new(State {
            mode: Mode::Recording { secrets },
            exchanges: Vec::new(),
        })))
    }

    /// The cassette at `path`, to replay (`lenient`: a turn for a turn).
    pub fn replaying(path: &Path, lenient: bool) -> Result<Cassette, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
        let file: File = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a cassette: {e}", path.display()))?;
        if file.format != FORMAT {
            return Err(format!(
                "{} is cassette format {}; this mur reads format {FORMAT}",
                path.display(),
                file.format
            ));
        }
        Ok(Cassette(Arc::new(Mutex::new(State {
            mode: Mode::Replaying {
                lenient,
                served: vec![false; file.exchanges.len()],
                mismatch: None,
            },
            exchanges: file.exchanges,
        }))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes what was recorded to `path` (through a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let file = File {
            format: FORMAT,
            exchanges: self.lock().exchanges.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut temp, text.as_bytes())?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// How many exchanges it holds (recorded so far, or to replay).
    pub fn len(&self) -> usize {
        self.lock().exchanges.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When replaying: how many exchanges were served.
    pub fn served(&self) -> usize {
        match &self.lock().mode {
            Mode::Replaying { served, .. } => served.iter().filter(|s| **s).count(),
            Mode::Recording { .. } => 0,
        }
    }

    /// When replaying: the first request that was refused, and why.
    pub fn mismatch(&self) -> Option<String> {
        match &self.lock().mode {
            Mode::Replaying { mismatch, .. } => mismatch.clone(),
            Mode::Recording { .. } => None,
        }
    }

    /// Answers `request` (already allowed, its credential attached): sent and recorded, or
    /// served from the cassette. `credential_header` is the header the host attached a
    /// credential in, never recorded.
    pub(crate) async fn exchange(
        self,
        request: http::Request<WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        credential_header: Option<http::HeaderName>,
    ) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
        let (parts, body) = request.into_parts();
        let body = collect(body).await?;
        let recording = matches!(self.lock().mode, Mode::Recording { .. });
        if !recording {
            return self.serve(&parts, &body);
        }
        let request = http::Request::from_parts(parts.clone(), full(body.clone()));
        let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
        // The connection is driven by `io`: it runs beside the body's collection (a streamed
        // body arrives only while it does).
        tokio::spawn(async move {
            let _ = io.await;
        });
        let (response_parts, response_body) = response.into_parts();
        let response_body = collect(response_body.boxed_unsync()).await?;
        let mut state = self.lock();
        let Mode::Recording { secrets } = &state.mode else {
            unreachable!("the mode never changes");
        };
        let scrub = |text: &str| scrub(text, secrets);
        let headers = |headers: &http::HeaderMap| -> Vec<(String, String)> {
            headers
                .iter()
                .filter(|(name, _)| {
                    !CREDENTIAL_HEADERS.contains(&name.as_str())
                        && credential_header.as_ref() != Some(*name)
                })
                .map(|(name, value)| {
                    (
                        name.to_string(),
                        scrub(&String::from_utf8_lossy(value.as_bytes())),
                    )
                })
                .collect()
        };
        let scrub_body = |bytes: &[u8]| match RecordedBody::of(bytes) {
            RecordedBody::Text { body } => RecordedBody::Text { body: scrub(&body) },
            binary => binary,
        };
        let exchange = Exchange {
            request: RecordedRequest {
                method: parts.method.to_string(),
                url: scrub(&parts.uri.to_string()),
                headers: headers(&parts.headers),
                body: scrub_body(&body),
            },
            response: RecordedResponse {
                status: response_parts.status.as_u16(),
                headers: headers(&response_parts.headers),
                body: scrub_body(&response_body),
            },
        };
        state.exchanges.push(exchange);
        drop(state);
        Ok(http::Response::from_parts(
            response_parts,
            full(response_body),
        ))
    }

    /// The recorded answer to the request of `parts` and `body`, or a refusal (kept as the
    /// mismatch).
    fn serve(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
    ) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
        let mut state = self.lock();
        let total = state.exchanges.len();
        let Mode::Replaying {
            lenient,
            served,
            mismatch,
        } = &state.mode
        else {
            unreachable!("the mode never changes");
        };
        if let Some(earlier) = mismatch {
            return Err(HttpError::InternalError(Some(earlier.clone())));
        }
        let lenient = *lenient;
        let number = served.iter().filter(|s| **s).count() + 1;
        let unserved: Vec<usize> = (0..total).filter(|at| !served[*at]).collect();
        let refuse = |state: &mut State, why: String| {
            if let Mode::Replaying { mismatch, .. } = &mut state.mode {
                *mismatch = Some(why.clone());
            }
            Err(HttpError::InternalError(Some(why)))
        };
        let Some(&first) = unserved.first() else {
            let why = format!(
                "request {number} ({} {}) is past the end of the cassette, which holds {total}",
                parts.method,
                parts.uri.path()
            );
            return refuse(&mut state, why);
        };
        // Strict: the first unserved exchange recorded with this very request (an agent CLI
        // may send its requests in another order than it did while recording).
        let at = if lenient {
            first
        } else {
            let same = unserved
                .iter()
                .copied()
                .find(|at| difference(&state.exchanges[*at].request, parts, body).is_none());
            match same {
                Some(at) => at,
                None => {
                    let difference = difference(&state.exchanges[first].request, parts, body)
                        .unwrap_or_else(|| "it differs".to_string());
                    let why =
                        format!("request {number} differs from the recorded one: {difference}");
                    return refuse(&mut state, why);
                }
            }
        };
        let recorded = state.exchanges[at].clone();
        if let Mode::Replaying { served, .. } = &mut state.mode {
            served[at] = true;
        }
        drop(state);
        let mut response = http::Response::builder().status(recorded.response.status);
        for (name, value) in &recorded.response.headers {
            // The body is served whole: its recorded length and encoding no longer apply.
            if matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "content-encoding" | "connection"
            ) {
                continue;
            }
            response = response.header(name, value);
        }
        response
            .body(full(recorded.response.body.bytes()))
            .map_err(|e| HttpError::InternalError(Some(e.to_string())))
    }
}

/// A provider relay on loopback: what an agent CLI (`transport: process`), which talks to its
/// provider itself, is pointed at so that its exchanges go through a cassette. Stopped when
/// dropped.
pub struct Relay {
    /// The upstream base URL with its origin replaced by the relay's
    /// (`http://127.0.0.1:PORT` + the upstream's path).
    pub base_url: String,
    pub port: u16,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Cassette {
    /// Starts a relay on `127.0.0.1` for the provider at `upstream` (a base URL): each request
    /// it takes is sent on to the upstream's origin, same path, and recorded, or answered from
    /// the cassette with nothing sent, as a driver's request is. Credentials the CLI sends are
    /// dropped from the recording as a driver's are; a refused replay answers `400`
    /// with why (final: a client would retry a `5xx`), a failed send `502`.
    pub async fn relay(&self, upstream: &str) -> std::io::Result<Relay> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        let uri: http::Uri = upstream
            .parse()
            .map_err(|e| invalid(format!("the provider URL `{upstream}` is not a URL: {e}")))?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(invalid(format!(
                "the provider URL `{upstream}` names no scheme and host"
            )));
        };
        let origin = format!("{scheme}://{authority}");
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let cassette = self.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = &mut stopped => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let (cassette, origin) = (cassette.clone(), origin.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        relayed(cassette.clone(), origin.clone(), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Relay {
            base_url: format!(
                "http://127.0.0.1:{port}{}",
                uri.path().trim_end_matches('/')
            ),
            port,
            _stop: stop,
        })
    }
}

/// One request through the relay: sent on to `origin` (or served from the cassette), the answer
/// given back whole.
async fn relayed(
    cassette: Cassette,
    origin: String,
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::convert::Infallible> {
    let failed = |status: u16, why: String| {
        let body =
            serde_json::json!({"type": "error", "error": {"type": "murmur_relay", "message": why}});
        let mut response = http::Response::new(Full::new(Bytes::from(body.to_string())));
        *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    };
    let (mut parts, body) = request.into_parts();
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            return Ok(failed(
                413,
                format!("the request body was refused: {error}"),
            ));
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    parts.uri = match format!("{origin}{path}").parse() {
        Ok(uri) => uri,
        Err(error) => {
            return Ok(failed(
                400,
                format!("the request path is not a URL's: {error}"),
            ));
        }
    };
    parts.headers.remove(http::header::HOST);
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let request = http::Request::from_parts(parts, full(body));
    let response = match cassette.clone().exchange(request, None, None).await {
        Ok(response) => response,
        // A refused replay is final (a client retries a 5xx): 400.
        Err(error) if cassette.mismatch().is_some() => return Ok(failed(400, error.to_string())),
        Err(error) => return Ok(failed(502, error.to_string())),
    };
    let (mut parts, body) = response.into_parts();
    let body = match collect(body).await {
        Ok(body) => body,
        Err(error) => return Ok(failed(502, error.to_string())),
    };
    for name in [
        http::header::CONTENT_LENGTH,
        http::header::TRANSFER_ENCODING,
        http::header::CONNECTION,
    ] {
        parts.headers.remove(name);
    }
    Ok(http::Response::from_parts(parts, Full::new(body)))
}

/// The first difference between a recorded request and this one, or none: method, path and
/// query (the origin is the gateway's, wherever it is now), then the body, as JSON when both
/// are JSON.
fn difference(
    recorded: &RecordedRequest,
    parts: &http::request::Parts,
    body: &[u8],
) -> Option<String> {
    if recorded.method != parts.method.as_str() {
        return Some(format!(
            "method {} where {} was recorded",
            parts.method, recorded.method
        ));
    }
    let recorded_path = recorded
        .url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.path_and_query().map(|p| p.to_string()))
        .unwrap_or_default();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    if recorded_path != path {
        return Some(format!(
            "path `{path}` where `{recorded_path}` was recorded"
        ));
    }
    let recorded_body = recorded.body.bytes();
    match (
        serde_json::from_slice::<Value>(&recorded_body),
        serde_json::from_slice::<Value>(body),
    ) {
        (Ok(mut was), Ok(mut now)) => {
            normalize(&mut was);
            normalize(&mut now);
            first_difference(&was, &now, "")
        }
        _ if recorded_body == body => None,
        _ => Some("the body differs (not JSON)".to_string()),
    }
}

/// Volatile ids as placeholders, wherever they stand in a string: Murmur's own (`ses_…`,
/// `tsk_…`, `ctx_…`, `msg_…`, `evt_…`), UUIDs (with a provider's prefix such as `fco_`), and
/// runs of 12 or more hex digits (hashes derived from them, as in a prompt cache key); and
/// measured times with a decimal point (`0.0095 seconds`, as an agent CLI reports a tool's).
fn normalize(value: &mut Value) {
    match value {
        Value::String(text) => {
            let ids = volatile().replace_all(text, "<id>");
            let times = elapsed().replace_all(&ids, "<time>");
            if matches!(times, std::borrow::Cow::Owned(_))
                || matches!(ids, std::borrow::Cow::Owned(_))
            {
                *text = times.into_owned();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => map.values_mut().for_each(normalize),
        _ => {}
    }
}

fn elapsed() -> &'static regex::Regex {
    static ELAPSED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\b\d+\.\d+ ?(?:ms|s|sec|secs|seconds?)\b")
            .expect("the elapsed-time pattern compiles")
    });
    &ELAPSED
}

fn volatile() -> &'static regex::Regex {
    static VOLATILE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\b(?:(?:ses|tsk|ctx|msg|evt)_[0-9A-Za-z-]+|(?:[A-Za-z]{2,8}_)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-f]{12,})\b",
        )
        .expect("the volatile-id pattern compiles")
    });
    &VOLATILE
}

/// Where `now` first differs from `was`, as a JSON path with both values.
fn first_difference(was: &Value, now: &Value, at: &str) -> Option<String> {
    let here = || {
        if at.is_empty() {
            "the body".to_string()
        } else {
            format!("`{at}`")
        }
    };
    let show = |v: &Value| {
        let text = v.to_string();
        if text.chars().count() > 80 {
            format!("{}…", text.chars().take(80).collect::<String>())
        } else {
            text
        }
    };
    match (was, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => {
                        if let Some(found) = first_difference(x, y, &path) {
                            return Some(found);
                        }
                    }
                    (Some(x), None) => {
                        return Some(format!("`{path}` is missing (recorded: {})", show(x)));
                    }
                    (None, Some(y)) => {
                        return Some(format!("`{path}` was not recorded (now: {})", show(y)));
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if let Some(found) = first_difference(x, y, &format!("{at}[{i}]")) {
                    return Some(found);
                }
            }
            (a.len() != b.len()).then(|| {
                format!(
                    "{} has {} items where {} were recorded",
                    here(),
                    b.len(),
                    a.len()
                )
            })
        }
        _ if was == now => None,
        _ => Some(format!(
            "{} is {} where {} was recorded",
            here(),
            show(now),
            show(was)
        )),
    }
}

fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), SCRUBBED);
        }
    }
    text
}

async fn collect(body: WasiBody) -> wasmtime_wasi_http::Result<Bytes> {
    let bytes = body.collect().await?.to_bytes();
    if bytes.len() > MAX_BODY {
        return Err(HttpError::InternalError(Some(format!(
            "a body of {} bytes is more than a cassette keeps ({MAX_BODY})",
            bytes.len()
        ))));
    }
    Ok(bytes)
}

fn full(bytes: impl Into<Bytes>) -> WasiBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed_longest_first_and_credential_headers_never_kept() {
        assert_eq!(
            scrub(
                "key sk-abc and sk-abcdef",
                &["sk-abcdef".into(), "sk-abc".into()]
            ),
            "key [scrubbed] and [scrubbed]"
        );
        assert!(CREDENTIAL_HEADERS.contains(&"x-api-key"));
    }

    #[test]
    fn the_first_difference_names_its_path_and_both_values() {
        let was =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let now =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "bye"}]});
        let found = first_difference(&was, &now, "").unwrap();
        assert_eq!(
            found,
            "`messages[0].content` is \"bye\" where \"hi\" was recorded"
        );
        let mut a = serde_json::json!({"id": "ses_0123456789abcdef0123456789abcdef",
            "key": "hello:ctx_49ffc762483d466ba4e3b938:tsk_5:7b961e43be43fec9"});
        let mut b = serde_json::json!({"id": "ses_fedcba9876543210fedcba9876543210",
            "key": "hello:ctx_e6356daccd67456c9ac9da81:tsk_2:962382a02cda0e9a"});
        normalize(&mut a);
        normalize(&mut b);
        assert_eq!(first_difference(&a, &b, ""), None);
        let mut c = serde_json::json!({"text": "write a note"});
        normalize(&mut c);
        assert_eq!(c["text"], "write a note", "words are not ids");
        // An agent CLI's ids with a provider's prefix, and the times it measured.
        let mut d = serde_json::json!({"id": "fco_01a24a32-dd26-76b2-a07e-0123456789ab",
            "text": "Wall time: 0.0095 seconds\nOutput: 3 notes"});
        let mut e = serde_json::json!({"id": "fco_01a24a32-db26-7673-8fe7-ba9876543210",
            "text": "Wall time: 0.0088 seconds\nOutput: 3 notes"});
        normalize(&mut d);
        normalize(&mut e);
        assert_eq!(first_difference(&d, &e, ""), None);
        assert_eq!(d["text"], "Wall time: <time>\nOutput: 3 notes");
    }

    proptest::proptest! {
        #[test]
        fn no_json_makes_the_comparison_panic(a in ".{0,64}", b in ".{0,64}") {
            let was = serde_json::from_str::<Value>(&a).unwrap_or(Value::String(a.clone()));
            let now = serde_json::from_str::<Value>(&b).unwrap_or(Value::String(b.clone()));
            let _ = first_difference(&was, &now, "");
        }
    }
}
