//! Cassettes: a driver's HTTP exchanges recorded, and served back without a network.
//!
//! What this module promises:
//!
//! - **Recording** ([`Cassette::recording`]) happens where a driver's request leaves the host,
//!   after the network grant allowed it and the credential was attached: the request the
//!   driver sent (method, URL, headers, body) and the answer it got (status, headers, the whole
//!   body, streamed or not) are kept in order. **No credential is kept**: the credential's
//!   header, and `authorization`, `x-api-key`, `api-key`, `cookie` and `set-cookie`, are
//!   dropped; and every credential value the session knows of ([`Secret`]: the drivers' keys,
//!   the `capabilities.env.allow` values whose names look like credentials
//!   ([`looks_like_credential`]), `control.secrets` values, injected ones too, peers' and MCP
//!   servers' header credentials) is replaced by `<scrubbed:NAME>` wherever it stands: URL,
//!   headers, request and response bodies, as it is and in the forms it takes inside JSON
//!   strings (escaped once, twice or three times, non-ASCII as `\uXXXX`, `/` as `\/`) and
//!   URLs (percent-encoded). A value shorter than [`MIN_SCRUBBED_LEN`] bytes is not scrubbed:
//!   it would hit ordinary words and numbers of the conversation.
//! - **Replaying** ([`Cassette::replaying`]) answers each request from the cassette and sends
//!   nothing. `strict`: the request must be one recorded and not served yet (method, path and
//!   query, and body; JSON bodies compared as JSON with volatile ids normalized), the first
//!   such in recording order, the live request scrubbed as a recording scrubs it before it
//!   is compared (so a credential, the same or another value under the same name, matches
//!   its placeholder); a request no unserved exchange holds, or one past the last
//!   recorded, is refused, and [`Cassette::mismatch`] says
//!   which exchange and where the first difference is. `lenient`: the next recorded answer is
//!   served whatever was asked (a turn for a turn).
//! - **Agent CLIs** reach their provider themselves: a [`Relay`] on loopback stands in for the
//!   provider, and takes their requests through the same recording and replaying.
//! - **Peer capsules** ([`PeerEntry`]): the runtime's peer tools record each call (the A2A
//!   request and the peer's settled task or failure) and each agent card read at session start
//!   ([`Cassette::record_peer`]), scrubbed as the drivers' exchanges are, and are answered
//!   from the cassette when replaying ([`Cassette::serve_peer`]), the peer not contacted:
//!   `strict`, the first unserved entry of the kind recorded with the same peer URL and
//!   request (JSON, volatile ids normalized), else refused naming it and the first difference;
//!   `lenient`, the first unserved entry of the kind for that peer, whatever was asked.
//! - A cassette file is JSON (`{"format": 1, "exchanges": [...]}`, or format 2 with
//!   `"peers": [...]` when it holds peer entries; both are read, and one with none is written
//!   as format 1); bodies are text, or base64 under `body_base64` when not UTF-8. A file that is not one is refused on load,
//!   naming why; so is one over [`CASSETTE_MAX_BYTES`] (256 MiB), told from its size before it
//!   is read.

use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// The newest cassette format this code reads and writes: 2 adds the exchanges with peer
/// capsules (`peers`). A cassette with none is written as format 1, which every reader of the
/// format reads; both are read.
pub const FORMAT: u64 = 2;
/// The oldest cassette format this code reads: driver exchanges only.
pub const FIRST_FORMAT: u64 = 1;
/// The shortest credential value scrubbed, in bytes: a shorter one would hit ordinary text
/// (a word, a number) and is left as it is.
pub const MIN_SCRUBBED_LEN: usize = 8;
/// What a scrubbed credential reads as: `<scrubbed:NAME>`, NAME the variable it came from.
pub fn placeholder(name: &str) -> String {
    format!("<scrubbed:{name}>")
}
/// The words that make a variable's name look like a credential's ([`looks_like_credential`]).
pub const CREDENTIAL_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Whether the variable `name` looks like it holds a credential: one of its `_`-separated
/// words, in any case, is one of [`CREDENTIAL_WORDS`] or ends with one, or with one and an `S`
/// (`GITHUB_TOKEN`, `API_KEY`, `OPENAI_APIKEY`, `db_password`, `AWS_CREDENTIALS`, `OAUTH_ID`;
/// not `KEYBOARD_LAYOUT` nor `HOME`).
pub fn looks_like_credential(name: &str) -> bool {
    name.split('_').any(|word| {
        let word = word.to_ascii_uppercase();
        let singular = word.strip_suffix('S').unwrap_or(&word);
        CREDENTIAL_WORDS
            .iter()
            .any(|term| word.ends_with(term) || singular.ends_with(term))
    })
}

/// Reads the credentials injected so far (a session's `control.secrets` store), at each
/// exchange.
pub type Injected = Arc<dyn Fn() -> Vec<Secret> + Send + Sync>;

/// A credential value the session knows of, and the name it is scrubbed as.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The variable it came from (or what else names it): the placeholder's `NAME`.
    pub name: String,
    pub value: String,
}

impl Secret {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Secret {
        Secret {
            name: name.into(),
            value: value.into(),
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("value", &format_args!("<{} bytes>", self.value.len()))
            .finish()
    }
}
/// What a driver credential set nowhere stands as while replaying: never sent, as nothing is.
pub const REPLAY_CREDENTIAL: &str = "replayed-without-a-key";
/// Headers that carry credentials: never recorded, whatever the driver, and an MCP server's
/// literal value in one is scrubbed as a credential.
pub const CREDENTIAL_HEADERS: &[&str] = &[
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
    /// `bytes` as text, or as base64 when they are not UTF-8.
    pub fn of(bytes: &[u8]) -> RecordedBody {
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

    /// The bytes it holds (none when its base64 does not decode).
    pub fn bytes(&self) -> Vec<u8> {
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

/// What a peer entry holds: a runtime peer tool's call (`ask`), or the read of a peer's agent
/// card at session start (`card`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    Ask,
    Card,
}

impl std::fmt::Display for PeerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PeerKind::Ask => "peer call",
            PeerKind::Card => "agent card read",
        })
    }
}

/// One exchange with a peer capsule, recorded whole: the peer's URL, what was sent (the A2A
/// request: its method, stamped headers and params) and what came of it (the peer's settled
/// task, or why there was none; for a card, its bytes). Scrubbed as a driver's exchange is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerEntry {
    pub kind: PeerKind,
    pub peer: String,
    pub request: Value,
    pub answer: Value,
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    format: u64,
    exchanges: Vec<Exchange>,
    /// Format 2: the exchanges with peer capsules, in the order they happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    peers: Vec<PeerEntry>,
}

enum Mode {
    Recording,
    Replaying {
        lenient: bool,
        /// Which recorded exchanges were served.
        served: Vec<bool>,
        /// Which recorded peer entries were served.
        peers_served: Vec<bool>,
        mismatch: Option<String>,
    },
}

struct State {
    mode: Mode,
    exchanges: Vec<Exchange>,
    peers: Vec<PeerEntry>,
    /// What is scrubbed, recording and replaying alike.
    secrets: Vec<Secret>,
    /// Values a controller injects (`control.secrets`), read at each exchange.
    injected: Option<Injected>,
}

impl State {
    /// Every credential known now: those given, then those injected so far.
    fn scrubber(&self) -> Scrubber {
        let injected = self
            .injected
            .as_ref()
            .map(|read| read())
            .unwrap_or_default();
        Scrubber::new(self.secrets.iter().cloned().chain(injected))
    }
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
    /// A cassette that records, scrubbing each of `secrets` (and those [`Cassette::scrubbing`]
    /// adds later).
    pub fn recording(secrets: Vec<Secret>) -> Cassette {
        let cassette = Cassette(Arc::new(Mutex::new(State {
            mode: Mode::Recording,
            exchanges: Vec::new(),
            peers: Vec::new(),
            secrets: Vec::new(),
            injected: None,
        })));
        cassette.scrubbing(secrets);
        cassette
    }

    /// Scrubs `secrets` too from now on: from what is recorded, and from a live request
    /// before it is compared with the recorded ones. A value shorter than
    /// [`MIN_SCRUBBED_LEN`], the stand-in [`REPLAY_CREDENTIAL`] and one already known are
    /// left out.
    pub fn scrubbing(&self, secrets: impl IntoIterator<Item = Secret>) {
        let mut state = self.lock();
        for secret in secrets {
            if secret.value.len() >= MIN_SCRUBBED_LEN
                && secret.value != REPLAY_CREDENTIAL
                && !state.secrets.contains(&secret)
            {
                state.secrets.push(secret);
            }
        }
    }

    /// Scrubs too, at each exchange, what `injected` reads then (the values a controller
    /// injected so far).
    pub fn scrubbing_injected(&self, injected: Injected) {
        self.lock().injected = Some(injected);
    }

    /// The cassette at `path`, to replay (`lenient`: a turn for a turn).
    pub fn replaying(path: &Path, lenient: bool) -> Result<Cassette, String> {
        let text = read_bounded(path)?;
        let file: File = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a cassette: {e}", path.display()))?;
        if !(FIRST_FORMAT..=FORMAT).contains(&file.format) {
            return Err(format!(
                "{} is cassette format {}; this mur reads formats {FIRST_FORMAT} to {FORMAT}",
                path.display(),
                file.format
            ));
        }
        if file.format < 2 && !file.peers.is_empty() {
            return Err(format!(
                "{} is cassette format {} yet holds peer entries, which format 2 brought",
                path.display(),
                file.format
            ));
        }
        Ok(Cassette(Arc::new(Mutex::new(State {
            mode: Mode::Replaying {
                lenient,
                served: vec![false; file.exchanges.len()],
                peers_served: vec![false; file.peers.len()],
                mismatch: None,
            },
            exchanges: file.exchanges,
            peers: file.peers,
            secrets: Vec::new(),
            injected: None,
        }))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes what was recorded to `path` (through a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let file = {
            let state = self.lock();
            File {
                format: if state.peers.is_empty() {
                    FIRST_FORMAT
                } else {
                    FORMAT
                },
                exchanges: state.exchanges.clone(),
                peers: state.peers.clone(),
            }
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
            Mode::Recording => 0,
        }
    }

    /// Whether it serves recorded answers (`--replay`) rather than records (`--record`).
    pub fn is_replaying(&self) -> bool {
        matches!(self.lock().mode, Mode::Replaying { .. })
    }

    /// How many peer entries it holds (recorded so far, or to replay).
    pub fn peer_len(&self) -> usize {
        self.lock().peers.len()
    }

    /// When replaying: how many peer entries were served.
    pub fn peers_served(&self) -> usize {
        match &self.lock().mode {
            Mode::Replaying { peers_served, .. } => peers_served.iter().filter(|s| **s).count(),
            Mode::Recording => 0,
        }
    }

    /// When recording: keeps a peer exchange of `kind` with `peer`, `request` and `answer`
    /// scrubbed as a driver's exchange is (every credential known, in every form).
    pub fn record_peer(&self, kind: PeerKind, peer: &str, request: Value, answer: Value) {
        let mut state = self.lock();
        if !matches!(state.mode, Mode::Recording) {
            return;
        }
        let scrubber = state.scrubber();
        let entry = PeerEntry {
            kind,
            peer: scrubber.text(peer),
            request: scrubbed_value(&scrubber, &request),
            answer: scrubbed_value(&scrubber, &answer),
        };
        state.peers.push(entry);
    }

    /// When replaying: the recorded answer to the peer exchange of `kind` with `peer` and
    /// `request`, which is then served. `strict`: the first unserved entry of that kind
    /// recorded with the same peer URL and request (both scrubbed as the recording was, the
    /// request's JSON compared with volatile ids normalized). `lenient`: the first unserved
    /// entry of that kind with that peer, whatever was asked. None: refused (kept as the
    /// cassette's mismatch), naming the exchange and the first difference.
    pub fn serve_peer(&self, kind: PeerKind, peer: &str, request: &Value) -> Result<Value, String> {
        let mut state = self.lock();
        let scrubber = state.scrubber();
        let peer = scrubber.text(peer);
        let request = scrubbed_value(&scrubber, request);
        let Mode::Replaying {
            lenient,
            peers_served,
            mismatch,
            ..
        } = &state.mode
        else {
            return Err(format!(
                "the {kind} to {peer} was not recorded: the cassette records"
            ));
        };
        if let Some(earlier) = mismatch {
            return Err(earlier.clone());
        }
        let lenient = *lenient;
        let number = state
            .peers
            .iter()
            .zip(peers_served)
            .filter(|(entry, served)| entry.kind == kind && **served)
            .count()
            + 1;
        let unserved: Vec<usize> = (0..state.peers.len())
            .filter(|at| !peers_served[*at] && state.peers[*at].kind == kind)
            .collect();
        let same_peer: Vec<usize> = unserved
            .iter()
            .copied()
            .filter(|at| state.peers[*at].peer == peer)
            .collect();
        let found = if lenient {
            same_peer.first().copied().ok_or(None)
        } else {
            same_peer
                .iter()
                .copied()
                .find(|at| peer_difference(&state.peers[*at].request, &request).is_none())
                .ok_or_else(|| {
                    same_peer
                        .first()
                        .and_then(|at| peer_difference(&state.peers[*at].request, &request))
                })
        };
        let at = match found {
            Ok(at) => at,
            Err(difference) => {
                let recorded = state.peers.iter().filter(|e| e.kind == kind).count();
                let why = match difference {
                    Some(difference) => format!(
                        "{kind} {number} (to {peer}) differs from the recorded one: {difference}"
                    ),
                    None => format!(
                        "{kind} {number} (to {peer}) is not in the cassette, which holds {recorded} {kind}s, {} of them unserved to that peer",
                        same_peer.len()
                    ),
                };
                if let Mode::Replaying { mismatch, .. } = &mut state.mode {
                    *mismatch = Some(why.clone());
                }
                return Err(why);
            }
        };
        if let Mode::Replaying { peers_served, .. } = &mut state.mode {
            peers_served[at] = true;
        }
        Ok(state.peers[at].answer.clone())
    }

    /// When replaying: the first request that was refused, and why.
    pub fn mismatch(&self) -> Option<String> {
        match &self.lock().mode {
            Mode::Replaying { mismatch, .. } => mismatch.clone(),
            Mode::Recording => None,
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
        let recording = matches!(self.lock().mode, Mode::Recording);
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
        let scrubber = state.scrubber();
        let scrub = |text: &str| scrubber.text(text);
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
        let scrub_body = |bytes: &[u8]| RecordedBody::of(&scrubber.bytes(bytes));
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
        // Compared as recorded: scrubbed.
        let scrubber = state.scrubber();
        let body = scrubber.bytes(body);
        let path = scrubber.text(
            parts
                .uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/"),
        );
        let total = state.exchanges.len();
        let Mode::Replaying {
            lenient,
            served,
            mismatch,
            ..
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
                path.split('?').next().unwrap_or_default()
            );
            return refuse(&mut state, why);
        };
        // Strict: the first unserved exchange recorded with this very request (an agent CLI
        // may send its requests in another order than it did while recording).
        let at = if lenient {
            first
        } else {
            let same = unserved.iter().copied().find(|at| {
                difference(&state.exchanges[*at].request, parts, &path, &body).is_none()
            });
            match same {
                Some(at) => at,
                None => {
                    let difference =
                        difference(&state.exchanges[first].request, parts, &path, &body)
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

/// The first difference between a recorded request and this one (its `path` and query and
/// its `body` scrubbed as the recording was), or none: method, path and query (the origin is
/// the gateway's, wherever it is now), then the body, as JSON when both are JSON.
fn difference(
    recorded: &RecordedRequest,
    parts: &http::request::Parts,
    path: &str,
    body: &[u8],
) -> Option<String> {
    if recorded.method != parts.method.as_str() {
        return Some(format!(
            "method {} where {} was recorded",
            parts.method, recorded.method
        ));
    }
    let recorded_path = path_and_query(&recorded.url);
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

/// `value` with every credential `scrubber` knows replaced by its placeholder, wherever it
/// stands (a placeholder never breaks the JSON; were it to, the scrubbed text is kept as one
/// string, so a credential is never kept).
fn scrubbed_value(scrubber: &Scrubber, value: &Value) -> Value {
    let text = value.to_string();
    let scrubbed = scrubber.text(&text);
    if scrubbed == text {
        return value.clone();
    }
    serde_json::from_str(&scrubbed).unwrap_or(Value::String(scrubbed))
}

/// The first difference between a recorded peer request and this one (both scrubbed), as
/// JSON with volatile ids normalized.
fn peer_difference(recorded: &Value, now: &Value) -> Option<String> {
    let (mut was, mut now) = (recorded.clone(), now.clone());
    normalize(&mut was);
    normalize(&mut now);
    first_difference(&was, &now, "").map(|found| found.replacen("the body", "the request", 1))
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

/// The path and query of a recorded URL, read as text (a placeholder in it is no URL's):
/// `http://host:1/v1/messages?x=1` → `/v1/messages?x=1`, `http://host` → `/`.
fn path_and_query(url: &str) -> String {
    let rest = match url.split_once("://") {
        Some((_, after)) => after.find(['/', '?']).map_or("", |at| &after[at..]),
        None => url,
    };
    if rest.starts_with('/') {
        rest.to_string()
    } else {
        format!("/{rest}")
    }
}

/// Every credential known, each in every form it takes in a request or an answer, replaced by
/// its placeholder in one pass (the longest form where two overlap, so a value holding
/// another is scrubbed whole, and a placeholder is never scrubbed again).
struct Scrubber {
    forms: Option<(aho_corasick::AhoCorasick, Vec<String>)>,
}

impl Scrubber {
    fn new(secrets: impl IntoIterator<Item = Secret>) -> Scrubber {
        let mut patterns: Vec<String> = Vec::new();
        let mut placeholders: Vec<String> = Vec::new();
        for secret in secrets {
            if secret.value.len() < MIN_SCRUBBED_LEN {
                continue;
            }
            for form in forms(&secret.value) {
                if !patterns.contains(&form) {
                    patterns.push(form);
                    placeholders.push(placeholder(&secret.name));
                }
            }
        }
        if patterns.is_empty() {
            return Scrubber { forms: None };
        }
        let matcher = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&patterns)
            .ok();
        Scrubber {
            forms: matcher.map(|matcher| (matcher, placeholders)),
        }
    }

    fn bytes(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.forms {
            Some((matcher, placeholders)) => matcher.replace_all_bytes(bytes, placeholders),
            None => bytes.to_vec(),
        }
    }

    fn text(&self, text: &str) -> String {
        match &self.forms {
            Some((matcher, placeholders)) => matcher.replace_all(text, placeholders),
            None => text.to_string(),
        }
    }
}

/// The forms `value` takes where a request or an answer carries it: as it is; inside a JSON
/// string, escaped once (a tool's result in a request), twice (JSON text a tool returned,
/// inside a request) or three times, with non-ASCII as `\uXXXX` and `/` as `\/` as some
/// encoders write them; and percent-encoded in a URL (every byte but letters and digits, or
/// but the unreserved `-._~`; a space as `+` in a form).
fn forms(value: &str) -> Vec<String> {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    const UNRESERVED: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    let once = json_escaped(value);
    let twice = json_escaped(&once);
    let thrice = json_escaped(&twice);
    let ascii = ascii_escaped(&once);
    let ascii_twice = json_escaped(&ascii);
    let slashes = once.replace('/', "\\/");
    let percent = utf8_percent_encode(value, NON_ALPHANUMERIC).to_string();
    let unreserved = utf8_percent_encode(value, UNRESERVED).to_string();
    let form = unreserved.replace("%20", "+");
    let mut forms = vec![value.to_string()];
    for form in [
        once,
        twice,
        thrice,
        ascii,
        ascii_twice,
        slashes,
        percent,
        unreserved,
        form,
    ] {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// `text` as it stands between the quotes of a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// JSON-escaped `text` with every non-ASCII character as `\uXXXX` (UTF-16, lower-case hex).
fn ascii_escaped(escaped: &str) -> String {
    let mut out = String::with_capacity(escaped.len());
    for c in escaped.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
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

/// The largest cassette [`Cassette::replaying`] reads: 256 MiB.
pub const CASSETTE_MAX_BYTES: u64 = 256 << 20;

/// The text of the cassette at `path`, at most [`CASSETTE_MAX_BYTES`] of it.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let unreadable = |e: std::io::Error| format!("{} cannot be read: {e}", path.display());
    let over = || {
        format!(
            "{} is over the {} MiB bound a cassette is read to",
            path.display(),
            CASSETTE_MAX_BYTES >> 20
        )
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    if file.metadata().map_err(unreadable)?.len() > CASSETTE_MAX_BYTES {
        return Err(over());
    }
    let mut bytes = Vec::new();
    file.take(CASSETTE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > CASSETTE_MAX_BYTES {
        return Err(over());
    }
    String::from_utf8(bytes).map_err(|e| format!("{} cannot be read: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cassette_over_its_bound_is_refused_from_its_size_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cassette.json");
        std::fs::write(&path, r#"{"format": 1, "exchanges": []}"#).unwrap();
        assert!(Cassette::replaying(&path, false).is_ok());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(16 << 30)
            .unwrap();
        let started = std::time::Instant::now();
        let Err(error) = Cassette::replaying(&path, false) else {
            panic!("a 16 GiB cassette was read");
        };
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            error.ends_with("is over the 256 MiB bound a cassette is read to"),
            "{error}"
        );
    }

    #[test]
    fn credentials_are_scrubbed_in_every_form_longest_first_and_headers_never_kept() {
        let scrubber = Scrubber::new([
            Secret::new("SHORT", "sk-abc1234"),
            Secret::new("LONG", "sk-abc1234-and-more"),
            Secret::new("TINY", "abc"),
            Secret::new("QUOTED", "pa\"ss/wörd\\x"),
        ]);
        assert_eq!(
            scrubber.text("key sk-abc1234 and sk-abc1234-and-more, abc"),
            "key <scrubbed:SHORT> and <scrubbed:LONG>, abc",
            "a value shorter than the minimum is left"
        );
        // In a JSON string, escaped once and twice, non-ASCII as \u, `/` as `\/`, in a URL.
        let value = "pa\"ss/wörd\\x";
        let once = json_escaped(value);
        let twice = json_escaped(&once);
        for text in [
            value.to_string(),
            once.clone(),
            twice,
            ascii_escaped(&once),
            once.replace('/', "\\/"),
            percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        ] {
            let scrubbed = scrubber.text(&format!("{{\"v\": \"{text}\"}}"));
            assert_eq!(scrubbed, "{\"v\": \"<scrubbed:QUOTED>\"}", "{text}");
        }
        // Bytes that are not UTF-8 are scrubbed too.
        let mut binary = vec![0xff, 0xfe];
        binary.extend_from_slice(b"sk-abc1234");
        assert_eq!(scrubber.bytes(&binary), b"\xff\xfe<scrubbed:SHORT>");
        assert!(CREDENTIAL_HEADERS.contains(&"x-api-key"));
    }

    #[test]
    fn a_value_injected_later_is_scrubbed_from_then_on_and_short_ones_never() {
        let store: Arc<Mutex<Vec<Secret>>> = Arc::default();
        let cassette = Cassette::recording(vec![Secret::new("DRIVER_KEY", "sk-driver-0001")]);
        let reader = store.clone();
        cassette.scrubbing_injected(Arc::new(move || reader.lock().unwrap().clone()));
        let text = "sk-driver-0001 then injected-value-01";
        assert_eq!(
            cassette.lock().scrubber().text(text),
            "<scrubbed:DRIVER_KEY> then injected-value-01"
        );
        store
            .lock()
            .unwrap()
            .push(Secret::new("INJECTED", "injected-value-01"));
        assert_eq!(
            cassette.lock().scrubber().text(text),
            "<scrubbed:DRIVER_KEY> then <scrubbed:INJECTED>"
        );
        // Too short to tell from words, and the replay stand-in: never scrubbed.
        cassette.scrubbing([
            Secret::new("PIN", "1234567"),
            Secret::new("NONE", REPLAY_CREDENTIAL),
        ]);
        assert_eq!(
            cassette
                .lock()
                .scrubber()
                .text("1234567 replayed-without-a-key"),
            "1234567 replayed-without-a-key"
        );
    }

    #[test]
    fn a_name_looks_like_a_credential_by_its_words() {
        for name in [
            "GITHUB_TOKEN",
            "API_KEY",
            "openai_apikey",
            "DB_PASSWORD",
            "MYSQL_PASSWD",
            "SMTP_PASS",
            "AWS_CREDENTIALS",
            "OAUTH_CLIENT",
            "SESSION_COOKIE",
            "PRIVATE_PEM",
            "CLIENT_SECRET",
            "SSH_KEYS",
            "some_token",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in [
            "HOME",
            "PATH",
            "KEYBOARD_LAYOUT",
            "TOKENIZER_MODEL",
            "LANG",
            "PASSAGE",
        ] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }

    #[test]
    fn a_recorded_url_is_read_for_its_path_and_query() {
        assert_eq!(path_and_query("http://h:1/v1/m?x=1"), "/v1/m?x=1");
        assert_eq!(path_and_query("http://h:1"), "/");
        assert_eq!(
            path_and_query("http://h:1?k=<scrubbed:K>"),
            "/?k=<scrubbed:K>"
        );
        assert_eq!(
            path_and_query("https://h/a/<scrubbed:K>"),
            "/a/<scrubbed:K>"
        );
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

    /// A peer call's request as the host's send path makes it.
    fn ask_request(text: &str, message_id: &str) -> Value {
        serde_json::json!({
            "method": "SendMessage",
            "headers": {"x-murmur-task-origin": "peer", "x-murmur-task-trust": "operator"},
            "params": {"message": {"messageId": message_id, "role": "ROLE_USER",
                "parts": [{"text": text}]}, "configuration": {"returnImmediately": true}},
        })
    }

    /// `cassette` saved and loaded back to replay (`lenient` or strict).
    fn reloaded(cassette: &Cassette, lenient: bool) -> (tempfile::TempDir, Cassette) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        cassette.save(&path).unwrap();
        let replaying = Cassette::replaying(&path, lenient).unwrap();
        (dir, replaying)
    }

    #[test]
    fn a_peer_entry_is_scrubbed_and_saved_as_format_2_and_a_driver_only_one_as_format_1() {
        let token = "peer-bearer-token-0001";
        let cassette = Cassette::recording(vec![Secret::new("PEER_TOKEN", token)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        cassette.save(&path).unwrap();
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            saved["format"], 1,
            "no peer entry: readable by every reader"
        );
        assert!(saved.get("peers").is_none());

        cassette.record_peer(
            PeerKind::Ask,
            &format!("http://127.0.0.1:9/?key={token}"),
            ask_request(
                &format!("my token is {token}"),
                "3f2c1a9e-0b1d-4c5e-9f00-123456789abc",
            ),
            serde_json::json!({"task": {"id": "t-1", "status": {"message":
                {"parts": [{"text": format!("you said \"{token}\"")}]}}}}),
        );
        cassette.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(token), "{text}");
        let saved: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(saved["format"], 2);
        let entry = &saved["peers"][0];
        assert_eq!(entry["kind"], "ask");
        assert_eq!(
            entry["peer"],
            "http://127.0.0.1:9/?key=<scrubbed:PEER_TOKEN>"
        );
        assert_eq!(
            entry["request"]["params"]["message"]["parts"][0]["text"],
            "my token is <scrubbed:PEER_TOKEN>"
        );
        assert_eq!(
            entry["answer"]["task"]["status"]["message"]["parts"][0]["text"],
            "you said \"<scrubbed:PEER_TOKEN>\""
        );
        // Format 2 reads back; a format-1 file that holds peer entries, or a newer format, not.
        assert_eq!(Cassette::replaying(&path, false).unwrap().peer_len(), 1);
        let mut old = saved.clone();
        old["format"] = 1.into();
        std::fs::write(&path, old.to_string()).unwrap();
        let error = Cassette::replaying(&path, false).unwrap_err();
        assert!(error.contains("holds peer entries"), "{error}");
        old["format"] = 3.into();
        std::fs::write(&path, old.to_string()).unwrap();
        let error = Cassette::replaying(&path, false).unwrap_err();
        assert!(error.contains("reads formats 1 to 2"), "{error}");
    }

    #[test]
    fn a_peer_call_replays_strictly_by_peer_and_request_with_ids_normalized() {
        let token = "peer-bearer-token-0001";
        let cassette = Cassette::recording(vec![Secret::new("PEER_TOKEN", token)]);
        let (lima, quito) = (
            serde_json::json!({"task": {"id": "t-1", "answer": "Lima"}}),
            serde_json::json!({"task": {"id": "t-2", "answer": "Quito"}}),
        );
        let peer = "http://127.0.0.1:9/";
        let first_id = "3f2c1a9e-0b1d-4c5e-9f00-123456789abc";
        cassette.record_peer(
            PeerKind::Ask,
            peer,
            ask_request(&format!("Peru? ({token})"), first_id),
            lima.clone(),
        );
        cassette.record_peer(
            PeerKind::Ask,
            peer,
            ask_request("Ecuador?", first_id),
            quito.clone(),
        );
        cassette.record_peer(
            PeerKind::Card,
            peer,
            serde_json::json!({}),
            serde_json::json!({"body": "{}"}),
        );
        assert!(!cassette.is_replaying());
        let (_dir, replaying) = reloaded(&cassette, false);
        assert!(replaying.is_replaying());
        // Another message id (a UUID), another value of the same credential: the same call.
        // Asked in another order than recorded: each finds its own.
        let other_id = "0a1b2c3d-4e5f-4a6b-8c7d-0123456789ab";
        assert_eq!(
            replaying.serve_peer(PeerKind::Ask, peer, &ask_request("Ecuador?", other_id)),
            Ok(quito)
        );
        replaying.scrubbing([Secret::new("PEER_TOKEN", "another-token-value")]);
        assert_eq!(
            replaying.serve_peer(
                PeerKind::Ask,
                peer,
                &ask_request("Peru? (another-token-value)", other_id)
            ),
            Ok(lima)
        );
        assert_eq!(
            replaying.serve_peer(PeerKind::Card, peer, &serde_json::json!({})),
            Ok(serde_json::json!({"body": "{}"}))
        );
        assert_eq!(replaying.peers_served(), 3);
        // One past the cassette: refused naming it, and kept as the mismatch.
        let error = replaying
            .serve_peer(PeerKind::Ask, peer, &ask_request("Chile?", other_id))
            .unwrap_err();
        assert_eq!(
            error,
            "peer call 3 (to http://127.0.0.1:9/) is not in the cassette, which holds 2 peer calls, 0 of them unserved to that peer"
        );
        assert_eq!(replaying.mismatch(), Some(error));
    }

    #[test]
    fn a_changed_peer_call_is_refused_naming_the_difference_unless_lenient() {
        let cassette = Cassette::recording(Vec::new());
        let peer = "http://127.0.0.1:9/";
        let id = "3f2c1a9e-0b1d-4c5e-9f00-123456789abc";
        let answer = serde_json::json!({"task": {"id": "t-1"}});
        cassette.record_peer(
            PeerKind::Ask,
            peer,
            ask_request("Peru?", id),
            answer.clone(),
        );

        let (_dir, strict) = reloaded(&cassette, false);
        let error = strict
            .serve_peer(PeerKind::Ask, peer, &ask_request("Chile?", id))
            .unwrap_err();
        assert_eq!(
            error,
            "peer call 1 (to http://127.0.0.1:9/) differs from the recorded one: `params.message.parts[0].text` is \"Chile?\" where \"Peru?\" was recorded"
        );
        // Once refused, the replay stays stopped.
        assert_eq!(
            strict.serve_peer(PeerKind::Ask, peer, &ask_request("Peru?", id)),
            Err(error)
        );
        // Another peer, or a card where a call was recorded: not in the cassette.
        let (_dir, strict) = reloaded(&cassette, false);
        let error = strict
            .serve_peer(
                PeerKind::Ask,
                "http://127.0.0.1:10/",
                &ask_request("Peru?", id),
            )
            .unwrap_err();
        assert!(error.contains("is not in the cassette"), "{error}");
        let (_dir, strict) = reloaded(&cassette, false);
        let error = strict
            .serve_peer(PeerKind::Card, peer, &serde_json::json!({}))
            .unwrap_err();
        assert!(error.starts_with("agent card read 1"), "{error}");

        // Lenient: the peer's next recorded answer, whatever was asked; none past the end.
        let (_dir, lenient) = reloaded(&cassette, true);
        assert_eq!(
            lenient.serve_peer(PeerKind::Ask, peer, &ask_request("Chile?", id)),
            Ok(answer)
        );
        assert!(
            lenient
                .serve_peer(PeerKind::Ask, peer, &ask_request("Chile?", id))
                .unwrap_err()
                .contains("is not in the cassette")
        );
    }

    proptest::proptest! {
        #[test]
        fn no_value_or_text_makes_the_scrubber_panic_or_keep_the_value(
            value in "\\PC{8,24}",
            before in ".{0,32}",
            after in ".{0,32}",
        ) {
            let scrubber = Scrubber::new([Secret::new("NAME", value.clone())]);
            let text = format!("{before}{value}{after}");
            let scrubbed = scrubber.text(&text);
            proptest::prop_assert!(!scrubbed.contains(&value));
            proptest::prop_assert!(scrubbed.contains("<scrubbed:NAME>"));
            let body = serde_json::json!({"content": text}).to_string();
            proptest::prop_assert!(!scrubber.text(&body).contains(&json_escaped(&value)));
        }

        #[test]
        fn no_json_makes_the_comparison_panic(a in ".{0,64}", b in ".{0,64}") {
            let was = serde_json::from_str::<Value>(&a).unwrap_or(Value::String(a.clone()));
            let now = serde_json::from_str::<Value>(&b).unwrap_or(Value::String(b.clone()));
            let _ = first_difference(&was, &now, "");
        }
    }
}
