//! POST a JSON body to the provider with the protocol's retries, and read the answer as it
//! streams in (on `wstd`, WASI 0.2 HTTP). Only in a component: on another target every call
//! panics.
//!
//! ```no_run
//! # async fn f() -> Result<(), murmur_guest::inference::InferenceError> {
//! use murmur_guest::inference::{http, retry::RetryPolicy};
//!
//! let mut reply = http::post_json(
//!     "http://127.0.0.1:4000/v1/messages",
//!     &[("anthropic-version".to_string(), "2023-06-01".to_string())],
//!     br#"{"model": "m"}"#.to_vec(),
//!     &RetryPolicy::default(),
//! )
//! .await?;
//! while let Some(chunk) = reply.chunk().await? {
//!     // feed an SseParser …
//! #   let _ = chunk;
//! }
//! # Ok(()) }
//! ```

use wstd::http::body::util::BodyExt;
use wstd::http::body::{Bytes, Frame};
use wstd::http::error::ErrorCode;
use wstd::http::{Body, Client, Request};

use super::retry::{Attempt, Decision, RetryPolicy, decide};
use super::types::InferenceError;

pub use wstd::runtime::block_on;

/// An answer whose head arrived; its body is read with [`chunk`](Self::chunk) or
/// [`bytes`](Self::bytes).
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The response headers (names lowercase).
    pub headers: Vec<(String, String)>,
    body: wstd::http::body::util::combinators::UnsyncBoxBody<Bytes, wstd::http::Error>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl Reply {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next piece of the body as it arrives; `None` at its end. A body that breaks off
    /// is a `stream_error`.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, InferenceError> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(InferenceError::stream(format!(
                        "the provider's answer broke off: {}",
                        describe(&e)
                    )));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = Frame::into_data(frame)
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body.
    pub async fn bytes(mut self) -> Result<Vec<u8>, InferenceError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }
}

/// POST `body` (JSON) to `url` with `content-type: application/json`, `content-length` and
/// `headers`, retrying per `policy`: 429 and 5xx answers and connection failures are tried
/// again after the backoff or `retry-after` wait (each retry is noted on stderr). Returns the
/// last answer, whatever its status (a final 4xx, or a 429/5xx once retries ran out); a
/// connection that still fails after the last retry is a `connection_error`.
pub async fn post_json(
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    policy: &RetryPolicy,
) -> Result<Reply, InferenceError> {
    post_json_counting(url, headers, body, policy, &mut 0).await
}

/// [`post_json`] for one more attempt of a call that already made `retries_done` retries (a
/// stream that failed in-stream and is tried again): the retries made here are added to it,
/// and the call as a whole never retries more than `policy` allows.
pub async fn post_json_counting(
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    policy: &RetryPolicy,
    retries_done: &mut u32,
) -> Result<Reply, InferenceError> {
    let body = Bytes::from(body);
    loop {
        let request = build(url, headers, body.clone())?;
        let (attempt, outcome) = match Client::new().send(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let headers: Vec<(String, String)> = response
                    .headers()
                    .iter()
                    .map(|(n, v)| {
                        (
                            n.as_str().to_ascii_lowercase(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect();
                let reply = Reply {
                    status,
                    headers,
                    body: response.into_body().into_boxed_body(),
                };
                (status, Ok(reply))
            }
            Err(e) => {
                let error =
                    InferenceError::connection(format!("no answer from {url}: {}", describe(&e)));
                let retryable = e
                    .downcast_ref::<ErrorCode>()
                    .is_some_and(is_connect_failure);
                if !retryable {
                    return Err(error);
                }
                (0, Err(error))
            }
        };
        let decision = match &outcome {
            Ok(reply) => decide(
                policy,
                *retries_done,
                Attempt::Answered {
                    status: attempt,
                    retry_after: reply.header("retry-after"),
                },
            ),
            Err(_) => decide(policy, *retries_done, Attempt::ConnectFailed),
        };
        let wait = match decision {
            Decision::Done => return outcome,
            Decision::Retry(wait) => wait,
        };
        *retries_done += 1;
        let why = match outcome {
            Ok(reply) => {
                // Drain the answer so the connection can be reused; its content does not matter.
                let _ = reply.bytes().await;
                format!("HTTP {attempt}")
            }
            Err(e) => e.message,
        };
        eprintln!(
            "murmur driver: {why}; retry {retries_done} of {} in {:.1} s",
            policy.max_retries,
            wait.as_secs_f64()
        );
        wstd::task::sleep(wait.into()).await;
    }
}

fn build(
    url: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<Request<Body>, InferenceError> {
    let mut builder = Request::post(url)
        .header("content-type", "application/json")
        .header("content-length", body.len().to_string());
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder.body(Body::from(body)).map_err(|e| {
        InferenceError::invalid_request(format!("cannot build a request to {url}: {e}"))
    })
}

/// The innermost description of a `wstd` error (its WASI error code when it has one).
fn describe(error: &wstd::http::Error) -> String {
    match error.downcast_ref::<ErrorCode>() {
        Some(code) => format!("{code:?}"),
        None => format!("{error:#}"),
    }
}

/// Whether a WASI HTTP error code means the connection failed before any response byte, so
/// that trying again may succeed. A refused request (the host's network policy), a bad
/// request, or a certificate problem is not such a failure.
///
/// `HTTP-protocol-error` counts: it is what Wasmtime reports when the peer closes the
/// connection before a response head (every transport error without a more precise code maps
/// to it), and this function only ever sees errors from before the response head arrived.
pub fn is_connect_failure(code: &ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::DnsTimeout
            | ErrorCode::DnsError(_)
            | ErrorCode::DestinationNotFound
            | ErrorCode::DestinationUnavailable
            | ErrorCode::DestinationIpUnroutable
            | ErrorCode::ConnectionRefused
            | ErrorCode::ConnectionTerminated
            | ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::ConnectionLimitReached
            | ErrorCode::TlsProtocolError
            | ErrorCode::HttpProtocolError
            | ErrorCode::HttpResponseTimeout
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_failures_are_told_from_refusals() {
        for code in [
            ErrorCode::ConnectionRefused,
            ErrorCode::ConnectionTimeout,
            ErrorCode::DnsTimeout,
            ErrorCode::DestinationUnavailable,
            ErrorCode::HttpResponseTimeout,
            ErrorCode::HttpProtocolError,
        ] {
            assert!(is_connect_failure(&code), "{code:?}");
        }
        for code in [
            ErrorCode::HttpRequestDenied,
            ErrorCode::HttpRequestUriInvalid,
            ErrorCode::DestinationIpProhibited,
            ErrorCode::TlsCertificateError,
            ErrorCode::InternalError(None),
            ErrorCode::HttpResponseIncomplete,
        ] {
            assert!(!is_connect_failure(&code), "{code:?}");
        }
    }
}
