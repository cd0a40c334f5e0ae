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
    #[error("{url} sent {what} larger than {} MiB; it was not read further", MAX_ANSWER_BYTES >> 20)]
    TooLarge { url: String, what: &'static str },
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
            builder = builder.tls_certs_merge(certificates);
        }
        let http = builder.build().map_err(|error| PeerError::Unreachable {
            url: String::new(),
            detail: format!("the HTTP client cannot start: {error}"),
        })?;
        Ok(PeerClient {
            http,
            version,
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// The protocol version this client speaks.
    pub fn version(&self) -> Version {
        self.version
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
async fn read_bounded(url: &str, mut response: reqwest::Response) -> Result<Vec<u8>, PeerError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| unreachable(url, &error))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(PeerError::TooLarge {
                url: url.to_string(),
                what: "an answer",
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
