//! The other side of the door: an A2A client, for `murmur:message/send` and `mur send`.
//!
//! What it promises:
//!
//! - **One protocol version per client**, 1.0 unless asked otherwise: that version's method
//!   names and JSON, and `A2A-Version` on every request. A peer is addressed by its JSON-RPC
//!   endpoint (a door's is its base URL, `http://host:port/`).
//! - **Every failure is a [`PeerError`]** saying where it happened: the connection, the peer's
//!   JSON-RPC error (with its code), an HTTP status with no JSON-RPC error, or an answer that is
//!   not A2A. Nothing a peer sends makes it panic.
//! - **Bounded reads.** A response body, or one SSE event, is read chunk by chunk as it
//!   arrives, and refused ([`PeerError::TooLarge`], `E-A2A-016`) as soon as it passes
//!   [`MAX_ANSWER_BYTES`]: never a buffer that grows without end, never a whole body read
//!   before it is measured. The connection is then dropped.
//! - **Only the headers it is given.** It adds `content-type`, `accept` and `A2A-Version`;
//!   origin, trust and `traceparent` are the caller's (the runtime's `murmur:message/send` grant). It never
//!   attaches a credential.
//! - **A peer's agent card** ([`PeerClient::get_card`]) is read from its origin's
//!   `/.well-known/agent-card.json` (A2A 1.0), else, only when that is 404, from
//!   `/.well-known/agent.json` (A2A 0.3): at most [`MAX_CARD_BYTES`], within [`CARD_TIMEOUT`]
//!   for both tries together, no redirect followed (a 3xx is an HTTP status error, so a card
//!   never comes from an origin the caller did not check). Its bytes come back as they were
//!   read, with what a caller tells a model of the peer ([`CardSummary`]), read leniently from
//!   either version's card shape.
//! - `http` and `https` (rustls with the system's roots, and a CA file's when given:
//!   [`PeerClient::trusting`]); a certificate that does not verify is a connection error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::rpc::{self, Method, WireDyn};
use crate::sse::{Decoder, SseEvent};
use crate::{
    CancelTaskParams, GetTaskParams, RpcError, SendMessageParams, SendMessageResult, StreamEvent,
    Task, Version, Wire,
};
use murmur_manifest::Coded;
use serde_json::Value;

/// The largest response body, or single SSE event, read from a peer: 16 MiB.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The largest agent card read from a peer: 1 MiB.
pub const MAX_CARD_BYTES: usize = 1024 * 1024;

/// How long fetching a peer's agent card may take, both tries together.
pub const CARD_TIMEOUT: Duration = Duration::from_secs(10);

/// Where an A2A 1.0 agent serves its card, under its origin.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// Where an A2A 0.3 agent serves its card, under its origin.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// What a caller tells a model of a peer, read from its agent card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSummary {
    /// The card's `name` (empty when it has none).
    pub name: String,
    /// The card's `description` (empty when it has none).
    pub description: String,
    /// The names of its skills, in the card's order (a skill with no name is left out).
    pub skills: Vec<String>,
    /// Whether `capabilities.streaming` is true.
    pub streaming: bool,
}

impl CardSummary {
    /// The card whose bytes are `bytes`: a JSON object read as an A2A 1.0 card when it has
    /// `supportedInterfaces`, else as a 0.3 card when it has `protocolVersion` or `url`, else
    /// as 1.0. Missing fields are empty; a field of the wrong type is [`PeerError::Invalid`]
    /// naming it. Never panics.
    pub fn parse(bytes: &[u8]) -> Result<CardSummary, PeerError> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|error| PeerError::Invalid(format!("the agent card is not JSON: {error}")))?;
        let Some(fields) = value.as_object() else {
            return Err(PeerError::Invalid(
                "the agent card is not a JSON object".to_string(),
            ));
        };
        let version = if fields.contains_key("supportedInterfaces") {
            Version::V1_0
        } else if fields.contains_key("protocolVersion") || fields.contains_key("url") {
            Version::V0_3
        } else {
            Version::V1_0
        };
        let card = crate::AgentCard::from_wire(version, &value).map_err(|problem| {
            PeerError::Invalid(format!(
                "the agent card (A2A {}): {problem}",
                version.as_str()
            ))
        })?;
        Ok(CardSummary {
            name: card.name,
            description: card.description,
            skills: card
                .skills
                .into_iter()
                .map(|skill| skill.name)
                .filter(|name| !name.trim().is_empty())
                .collect(),
            streaming: card.capabilities.streaming,
        })
    }
}

/// How long connecting to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to a peer did not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// No HTTP answer: the URL is not usable, the connection failed or broke.
    #[error("cannot reach {url}: {detail}")]
    Unreachable { url: String, detail: String },
    /// The peer answered with a JSON-RPC error.
    #[error("the peer answered error {}: {}", .0.code, .0.message)]
    Rpc(RpcError),
    /// The peer answered an HTTP error status with no JSON-RPC error in it.
    #[error("the peer answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// The answer is not an A2A JSON-RPC response.
    #[error("the peer's answer is not A2A: {0}")]
    Invalid(String),
    /// A body, or one event of a stream, went past [`MAX_ANSWER_BYTES`].
    #[error("{url} sent {what} larger than {} MiB; it was not read further", .limit >> 20)]
    TooLarge {
        url: String,
        what: &'static str,
        /// The bound it went past, in bytes.
        limit: usize,
    },
}

impl Coded for PeerError {
    /// `E-A2A-004` for an answer that is not A2A, `E-A2A-016` for one past
    /// [`MAX_ANSWER_BYTES`], `E-A2A-003` else.
    fn code(&self) -> &'static str {
        match self {
            PeerError::Invalid(_) => "E-A2A-004",
            PeerError::TooLarge { .. } => "E-A2A-016",
            _ => "E-A2A-003",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    fn hint(&self) -> String {
        match self {
            PeerError::Unreachable { url, .. } => format!("check that an agent listens at {url}"),
            PeerError::Rpc(_) => "the agent refused the request; see its message".to_string(),
            PeerError::Status { .. } | PeerError::Invalid(_) => {
                "check that the peer's URL is an A2A JSON-RPC endpoint".to_string()
            }
            PeerError::TooLarge { limit, .. } if *limit == MAX_CARD_BYTES => format!(
                "Murmur reads at most {} MiB of a peer's agent card: check that the URL is an \
                 A2A agent you trust",
                MAX_CARD_BYTES >> 20
            ),
            PeerError::TooLarge { .. } => format!(
                "Murmur reads at most {} MiB of one answer or one streamed event from a peer: \
                 check that the URL is an A2A agent you trust, or have it send less at once",
                MAX_ANSWER_BYTES >> 20
            ),
        }
    }
}

/// An A2A JSON-RPC client. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    /// The same roots, following no redirect: for agent cards.
    cards: reqwest::Client,
    version: Version,
    next_id: Arc<AtomicU64>,
}

impl PeerClient {
    /// A client speaking `version`, trusting the system's roots.
    pub fn new(version: Version) -> Result<PeerClient, PeerError> {
        PeerClient::trusting(version, None)
    }

    /// A client speaking `version` that trusts, beside the system's roots, the certificates
    /// of the PEM file `ca_file` (a private CA, a peer's own certificate).
    pub fn trusting(
        version: Version,
        ca_file: Option<&std::path::Path>,
    ) -> Result<PeerClient, PeerError> {
        // reqwest's rustls backend uses the process's default crypto provider; install ring
        // unless someone already installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
        let mut cards = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca_file) = ca_file {
            let unusable = |detail: String| PeerError::Unreachable {
                url: String::new(),
                detail: format!("the CA file {} {detail}", ca_file.display()),
            };
            let pem = std::fs::read(ca_file)
                .map_err(|error| unusable(format!("cannot be read: {error}")))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|error| unusable(format!("is not PEM: {error}")))?;
            if certificates.is_empty() {
                return Err(unusable("holds no certificate".to_string()));
            }
            cards = cards.tls_certs_merge(certificates.clone());
            builder = builder.tls_certs_merge(certificates);
        }
        let cannot_start = |error: reqwest::Error| PeerError::Unreachable {
            url: String::new(),
            detail: format!("the HTTP client cannot start: {error}"),
        };
        let http = builder.build().map_err(cannot_start)?;
        let cards = cards.build().map_err(cannot_start)?;
        Ok(PeerClient {
            http,
            cards,
            version,
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// The protocol version this client speaks.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The agent card of the peer at `peer_url` (any URL of its origin), sent with `headers`:
    /// its bytes as read and what they say ([`CardSummary`]). See the module docs for where it
    /// is looked for and the bounds.
    pub async fn get_card(
        &self,
        peer_url: &str,
        headers: &[(String, String)],
    ) -> Result<(Vec<u8>, CardSummary), PeerError> {
        let started = std::time::Instant::now();
        let base = reqwest::Url::parse(peer_url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| PeerError::Unreachable {
                url: peer_url.to_string(),
                detail: "not an http(s) URL".to_string(),
            })?;
        let mut tried = Vec::new();
        for path in [CARD_PATH, LEGACY_CARD_PATH] {
            let Ok(url) = base.join(path) else {
                continue;
            };
            let url = url.to_string();
            let left = CARD_TIMEOUT.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            let mut request = self
                .cards
                .get(&url)
                .timeout(left)
                .header("accept", "application/json");
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let response = request
                .send()
                .await
                .map_err(|error| unreachable(&url, &error))?;
            let status = response.status();
            if status == reqwest::StatusCode::NOT_FOUND {
                tried.push(url);
                continue;
            }
            let body = read_limited(&url, response, MAX_CARD_BYTES, "an agent card").await?;
            if !status.is_success() {
                return Err(PeerError::Status {
                    status: status.as_u16(),
                    body: excerpt(&body),
                });
            }
            let summary = CardSummary::parse(&body)?;
            return Ok((body, summary));
        }
        Err(PeerError::Status {
            status: 404,
            body: if tried.is_empty() {
                format!("no agent card within {} s", CARD_TIMEOUT.as_secs())
            } else {
                format!("no agent card at {}", tried.join(" nor at "))
            },
        })
    }

    /// `SendMessage` / `message/send`: the task the message started or continued (when
    /// `params` asks to wait, in a terminal or interrupted state), or the peer's direct reply.
    pub async fn send_message(
        &self,
        url: &str,
        params: &SendMessageParams,
        headers: &[(String, String)],
    ) -> Result<SendMessageResult, PeerError> {
        let result = self
            .call(url, self.body(Method::SendMessage, params)?, headers, false)
            .await?;
        self.answer(url, result).await
    }

    /// `SendStreamingMessage` / `message/stream`: the events of the task, as they come.
    pub async fn stream_message(
        &self,
        url: &str,
        params: &SendMessageParams,
        headers: &[(String, String)],
    ) -> Result<PeerStream, PeerError> {
        let response = self
            .call(
                url,
                self.body(Method::SendStreamingMessage, params)?,
                headers,
                true,
            )
            .await?;
        self.stream(url, response).await
    }

    /// `GetTask` / `tasks/get`.
    pub async fn get_task(
        &self,
        url: &str,
        params: &GetTaskParams,
        headers: &[(String, String)],
    ) -> Result<Task, PeerError> {
        let response = self
            .call(url, self.body(Method::GetTask, params)?, headers, false)
            .await?;
        self.answer(url, response).await
    }

    /// `CancelTask` / `tasks/cancel`.
    pub async fn cancel_task(
        &self,
        url: &str,
        task_id: &str,
        headers: &[(String, String)],
    ) -> Result<Task, PeerError> {
        let params = CancelTaskParams {
            id: task_id.to_string(),
            metadata: None,
        };
        let response = self
            .call(url, self.body(Method::CancelTask, &params)?, headers, false)
            .await?;
        self.answer(url, response).await
    }

    /// A JSON-RPC request body calling `method` in this client's version.
    fn body(&self, method: Method, params: &dyn WireDyn) -> Result<Value, PeerError> {
        let id = Value::from(self.next_id.fetch_add(1, Ordering::Relaxed));
        rpc::request(&id, method, self.version, Some(params)).ok_or_else(|| {
            PeerError::Rpc(RpcError::unsupported_operation(format!(
                "{method:?} does not exist in A2A {}",
                self.version.as_str()
            )))
        })
    }

    /// Posts one JSON-RPC request.
    async fn call(
        &self,
        url: &str,
        body: Value,
        headers: &[(String, String)],
        streaming: bool,
    ) -> Result<reqwest::Response, PeerError> {
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header(
                "accept",
                if streaming {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .header("a2a-version", self.version.as_str());
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
            .body(body.to_string())
            .send()
            .await
            .map_err(|error| unreachable(url, &error))
    }

    /// Reads a whole JSON-RPC answer as `T`.
    async fn answer<T: Wire>(
        &self,
        url: &str,
        response: reqwest::Response,
    ) -> Result<T, PeerError> {
        let status = response.status();
        let body = read_bounded(url, response).await?;
        let parsed = match rpc::parse_response(&body) {
            Ok(parsed) => parsed,
            Err(_) if !status.is_success() => {
                return Err(PeerError::Status {
                    status: status.as_u16(),
                    body: excerpt(&body),
                });
            }
            Err(problem) => return Err(PeerError::Invalid(problem.message)),
        };
        let result = parsed.outcome.map_err(PeerError::Rpc)?;
        T::from_wire(self.version, &result)
            .map_err(|problem| PeerError::Invalid(problem.to_string()))
    }

    /// The event stream of an answer, or the error the peer answered instead of one.
    async fn stream(
        &self,
        url: &str,
        response: reqwest::Response,
    ) -> Result<PeerStream, PeerError> {
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if !is_sse {
            // An error comes back as a plain JSON-RPC response.
            let status = response.status();
            let body = read_bounded(url, response).await?;
            return Err(match rpc::parse_response(&body) {
                Ok(rpc::Response {
                    outcome: Err(error),
                    ..
                }) => PeerError::Rpc(error),
                _ if !status.is_success() => PeerError::Status {
                    status: status.as_u16(),
                    body: excerpt(&body),
                },
                _ => PeerError::Invalid("a streaming answer that is not an event stream".into()),
            });
        }
        Ok(PeerStream {
            url: url.to_string(),
            response,
            version: self.version,
            decoder: Decoder::new(),
            ended: false,
        })
    }
}

/// One event of a peer's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerEvent {
    /// The SSE event id, to resume after it.
    pub id: Option<String>,
    pub event: StreamEvent,
}

/// The SSE events of one answer, read as they arrive.
pub struct PeerStream {
    url: String,
    response: reqwest::Response,
    version: Version,
    decoder: Decoder,
    ended: bool,
}

impl PeerStream {
    /// The next event; `None` when the peer closed the stream.
    pub async fn next(&mut self) -> Option<Result<PeerEvent, PeerError>> {
        loop {
            if let Some(event) = self.decoder.next_event() {
                return Some(self.read(event));
            }
            if self.ended {
                let last = self.decoder.finish()?;
                return Some(self.read(last));
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => {
                    self.decoder.push(&bytes);
                    if self.decoder.pending() > MAX_ANSWER_BYTES {
                        self.ended = true;
                        self.decoder = Decoder::new();
                        return Some(Err(PeerError::TooLarge {
                            url: self.url.clone(),
                            what: "an event",
                            limit: MAX_ANSWER_BYTES,
                        }));
                    }
                }
                Ok(None) => self.ended = true,
                Err(error) => {
                    self.ended = true;
                    self.decoder = Decoder::new();
                    return Some(Err(unreachable(&self.url, &error)));
                }
            }
        }
    }

    /// An event's data as a stream event, or the error the peer sent in its place.
    fn read(&self, event: SseEvent) -> Result<PeerEvent, PeerError> {
        let parsed = rpc::parse_response(event.data.as_bytes())
            .map_err(|problem| PeerError::Invalid(problem.message))?;
        let result = parsed.outcome.map_err(PeerError::Rpc)?;
        StreamEvent::from_wire(self.version, &result)
            .map(|stream_event| PeerEvent {
                id: event.id,
                event: stream_event,
            })
            .map_err(|problem| PeerError::Invalid(problem.to_string()))
    }
}

fn unreachable(url: &str, error: &reqwest::Error) -> PeerError {
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    PeerError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

/// A response body, at most [`MAX_ANSWER_BYTES`].
async fn read_bounded(url: &str, response: reqwest::Response) -> Result<Vec<u8>, PeerError> {
    read_limited(url, response, MAX_ANSWER_BYTES, "an answer").await
}

/// A response body, at most `limit` bytes; `what` names it in the error.
async fn read_limited(
    url: &str,
    mut response: reqwest::Response,
    limit: usize,
    what: &'static str,
) -> Result<Vec<u8>, PeerError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| unreachable(url, &error))?
    {
        if body.len() + chunk.len() > limit {
            return Err(PeerError::TooLarge {
                url: url.to_string(),
                what,
                limit,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The start of a body, for an error message.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentCard, AgentSkill, Wire};
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One answer of the test server: a path, its status, its body.
    type Route = (&'static str, u16, Vec<u8>);

    /// A loopback HTTP server answering `routes` (404 for any other path), one request per
    /// connection; the request lines it got are in the returned list.
    async fn serve(routes: Vec<Route>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.unwrap_or(0) == 1
                {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                log.lock().unwrap().push(head.clone());
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let (status, body) = routes
                    .iter()
                    .find(|(p, _, _)| *p == path)
                    .map(|(_, status, body)| (*status, body.clone()))
                    .unwrap_or((404, b"not found".to_vec()));
                let extra = if status == 302 {
                    "location: http://127.0.0.1:1/elsewhere\r\n"
                } else {
                    ""
                };
                let _ = socket
                    .write_all(
                        format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
                let _ = socket.write_all(&body).await;
            }
        });
        (base, seen)
    }

    fn card(streaming: bool) -> AgentCard {
        let mut card = AgentCard::new("Researcher", "Finds papers.", "1.0.0", "http://x/");
        card.capabilities.streaming = streaming;
        card.skills = vec![
            AgentSkill::new("search", "Search", "Searches.", vec!["s".into()]),
            AgentSkill::new("cite", "Cite", "Cites.", vec!["c".into()]),
        ];
        card
    }

    fn client() -> PeerClient {
        PeerClient::new(Version::V1_0).unwrap()
    }

    #[tokio::test]
    async fn an_a2a_1_0_card_is_read_from_agent_card_json_with_the_headers_given() {
        let bytes = serde_json::to_vec(&card(true).to_wire(Version::V1_0)).unwrap();
        let (base, seen) = serve(vec![(CARD_PATH, 200, bytes.clone())]).await;
        let headers = [("authorization".to_string(), "Bearer t0k".to_string())];
        let (got, summary) = client()
            .get_card(&format!("{base}/a2a/rpc"), &headers)
            .await
            .unwrap();
        assert_eq!(got, bytes);
        assert_eq!(
            summary,
            CardSummary {
                name: "Researcher".into(),
                description: "Finds papers.".into(),
                skills: vec!["Search".into(), "Cite".into()],
                streaming: true,
            }
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].starts_with("GET /.well-known/agent-card.json "));
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains("authorization: bearer t0k")
        );
    }

    #[tokio::test]
    async fn an_a2a_0_3_card_is_read_from_agent_json_after_a_404() {
        let bytes = serde_json::to_vec(&card(false).to_wire(Version::V0_3)).unwrap();
        let (base, seen) = serve(vec![(LEGACY_CARD_PATH, 200, bytes.clone())]).await;
        let (got, summary) = client().get_card(&base, &[]).await.unwrap();
        assert_eq!(got, bytes);
        assert_eq!(summary.name, "Researcher");
        assert_eq!(summary.skills, ["Search", "Cite"]);
        assert!(!summary.streaming);
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_card_past_one_mib_is_refused_and_a_redirect_is_not_followed() {
        let mut big = b"{\"name\":\"".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_CARD_BYTES));
        big.extend(b"\"}");
        let (base, _) = serve(vec![(CARD_PATH, 200, big)]).await;
        let error = client().get_card(&base, &[]).await.unwrap_err();
        assert!(
            matches!(error, PeerError::TooLarge { limit, .. } if limit == MAX_CARD_BYTES),
            "{error}"
        );
        assert_eq!(error.code(), "E-A2A-016");
        assert!(error.to_string().contains("1 MiB"), "{error}");

        // A redirect is an HTTP status, never followed; a 500 is not retried at the 0.3 path.
        let (base, seen) = serve(vec![(CARD_PATH, 302, Vec::new())]).await;
        let error = client().get_card(&base, &[]).await.unwrap_err();
        assert!(
            matches!(error, PeerError::Status { status: 302, .. }),
            "{error}"
        );
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn no_card_at_either_path_names_both() {
        let (base, _) = serve(Vec::new()).await;
        let error = client().get_card(&base, &[]).await.unwrap_err();
        let text = error.to_string();
        assert!(text.contains("HTTP 404"), "{text}");
        assert!(
            text.contains(CARD_PATH) && text.contains(LEGACY_CARD_PATH),
            "{text}"
        );
        let error = client()
            .get_card("ftp://127.0.0.1/", &[])
            .await
            .unwrap_err();
        assert!(matches!(error, PeerError::Unreachable { .. }), "{error}");
    }

    #[test]
    fn a_card_of_the_wrong_shape_is_not_a2a() {
        for bad in [
            &b"[]"[..],
            b"not json",
            br#"{"name": 7}"#,
            br#"{"skills": "x"}"#,
        ] {
            let error = CardSummary::parse(bad).unwrap_err();
            assert_eq!(error.code(), "E-A2A-004", "{error}");
        }
        // Leniency: what is missing is empty.
        assert_eq!(
            CardSummary::parse(b"{}").unwrap(),
            CardSummary {
                name: String::new(),
                description: String::new(),
                skills: Vec::new(),
                streaming: false
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = CardSummary::parse(&bytes);
        }

        #[test]
        fn parsing_any_card_like_object_never_panics(
            name in proptest::option::of("[a-z\"{}]{0,8}"),
            streaming in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just("true".to_string()),
                proptest::strategy::Just("1".to_string()),
                proptest::strategy::Just("null".to_string()),
                proptest::strategy::Just("{}".to_string()),
            ]),
            skills in proptest::option::of("\\[(\\{\"name\":(1|\"a\"|null)\\},?){0,3}\\]"),
            shape in 0..3u8,
        ) {
            let mut fields = Vec::new();
            if let Some(name) = name { fields.push(format!("\"name\":{}", serde_json::Value::from(name))); }
            if let Some(streaming) = streaming { fields.push(format!("\"capabilities\":{{\"streaming\":{streaming}}}")); }
            if let Some(skills) = skills { fields.push(format!("\"skills\":{skills}")); }
            match shape {
                0 => fields.push("\"supportedInterfaces\":[{\"url\":1}]".to_string()),
                1 => fields.push("\"protocolVersion\":\"0.3.0\"".to_string()),
                _ => {}
            }
            let _ = CardSummary::parse(format!("{{{}}}", fields.join(",")).as_bytes());
        }
    }
}
