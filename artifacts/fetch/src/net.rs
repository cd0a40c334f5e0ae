//! The requests themselves, through the runtime's `wasi:http` (with `wstd`). Only in a
//! component: on another target every call panics.
//!
//! - Each request, the first and every redirect's, is a new `wasi:http` request, so the
//!   runtime checks each against the capsule's `network.allow` (and attaches nothing a tool
//!   may not see). A request the runtime refuses fails with `HTTP-request-denied`, which
//!   becomes [`Failure::NotAllowed`].
//! - Redirects (301, 302, 303, 307, 308 with a `Location`) are followed, at most
//!   [`MAX_REDIRECTS`]; the method stays what was asked (GET or HEAD) and nothing but the
//!   tool's own `user-agent`, `accept` and `accept-encoding: identity` is sent.
//! - The body is read frame by frame (at most 64 KiB each) and reading stops once `max_bytes`
//!   are held, or at the call's deadline ([`DEADLINE`] for the whole call): memory and time
//!   stay bounded whatever the server sends.

use url::Url;
use wstd::future::FutureExt;
use wstd::http::body::util::{self, BodyExt};
use wstd::http::body::{Bytes, Frame};
use wstd::http::error::ErrorCode;
use wstd::http::{Body, Client, Request};
use wstd::time::{Duration, Instant};

use crate::answer::{Ending, Hop, Method, Response};

/// The most redirects followed in one call.
pub const MAX_REDIRECTS: usize = 5;
/// The whole call, every redirect and the body's reading included, ends by this.
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Why no response came back.
#[derive(Debug)]
pub enum Failure {
    /// The runtime refused the request: `url` is not in `network.allow`. `via` is the redirect
    /// that led there, if one did.
    NotAllowed { url: Url, via: Option<Hop> },
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects { hops: Vec<Hop> },
    /// A redirect to a URL this tool does not fetch.
    BadRedirect(String),
    /// The request could not be made or got no answer.
    Unreachable { url: Url, why: String },
    /// No answer within [`DEADLINE`].
    TimedOut { url: Url },
}

/// Sends `method` to `url`, following redirects, and reads the answer's body as
/// `read_body` says (given the final answer's headers: how many bytes to read, at most, or
/// `None` to leave the body unread).
pub async fn fetch(
    method: Method,
    url: Url,
    read_body: impl Fn(&[(String, String)]) -> Option<usize>,
) -> Result<Response, Failure> {
    let deadline = Instant::now() + Duration::from(DEADLINE);
    let mut url = url;
    let mut hops: Vec<Hop> = Vec::new();
    loop {
        let answer = match send(method, &url).timeout(deadline).await {
            Err(_) => return Err(Failure::TimedOut { url }),
            Ok(Err(e)) if is_denied(&e) => {
                return Err(Failure::NotAllowed {
                    url,
                    via: hops.last().cloned(),
                });
            }
            Ok(Err(e)) => {
                return Err(Failure::Unreachable {
                    url,
                    why: describe(&e),
                });
            }
            Ok(Ok(answer)) => answer,
        };
        let status = answer.status().as_u16();
        let headers: Vec<(String, String)> = answer
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let location = headers
            .iter()
            .find(|(n, _)| n == "location")
            .map(|(_, v)| v.clone());
        if let (true, Some(location)) = (is_redirect(status), location) {
            // The answer's body is dropped unread: it closes with it.
            drop(answer);
            hops.push(Hop {
                from: url.clone(),
                status,
            });
            if hops.len() > MAX_REDIRECTS {
                return Err(Failure::TooManyRedirects { hops });
            }
            url = crate::target::redirect(&url, &location).map_err(Failure::BadRedirect)?;
            continue;
        }
        let body = match read_body(&headers) {
            Some(max) if method == Method::Get => {
                Some(read(answer.into_body(), max, deadline).await)
            }
            _ => None,
        };
        return Ok(Response {
            url,
            hops,
            status,
            headers,
            body,
        });
    }
}

async fn send(method: Method, url: &Url) -> Result<wstd::http::Response<Body>, wstd::http::Error> {
    let builder = match method {
        Method::Get => Request::get(url.as_str()),
        Method::Head => Request::head(url.as_str()),
    };
    let request = builder
        .header(
            "user-agent",
            concat!("murmur-fetch/", env!("CARGO_PKG_VERSION")),
        )
        .header(
            "accept",
            "text/html, application/xhtml+xml, text/*;q=0.9, application/json;q=0.9, */*;q=0.5",
        )
        .header("accept-encoding", "identity")
        // Not `Body::empty()`: that writes (nothing) to the outgoing body stream once the
        // request is handed over, and a bodiless request's stream may be closed by then: the
        // write fails, and a `ConnectionReset` comes back in place of the answer. An empty
        // `http_body` finishes the body without a write.
        .body(Body::from_http_body(util::Empty::<Bytes>::new()))?;
    Client::new().send(request).await
}

/// Up to `max` bytes of `body`, and how reading ended. Once `max` bytes are held one more
/// frame is awaited to tell a body of exactly `max` bytes from a longer one.
async fn read(body: Body, max: usize, deadline: Instant) -> (Vec<u8>, Ending) {
    let mut body = body.into_boxed_body();
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let frame = match body.frame().timeout(deadline).await {
            Err(_) => return (bytes, Ending::TimedOut),
            Ok(frame) => frame,
        };
        let data: Bytes = match frame {
            None => return (bytes, Ending::Complete),
            Some(Err(e)) => return (bytes, Ending::Broke(describe(&e))),
            Some(Ok(frame)) => match Frame::into_data(frame) {
                Ok(data) => data,
                // Trailers: nothing to show.
                Err(_) => continue,
            },
        };
        if data.is_empty() {
            continue;
        }
        let room = max - bytes.len();
        if data.len() > room || room == 0 {
            bytes.extend_from_slice(&data[..room.min(data.len())]);
            return (bytes, Ending::Cut);
        }
        bytes.extend_from_slice(&data);
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn is_denied(error: &wstd::http::Error) -> bool {
    matches!(
        error.downcast_ref::<ErrorCode>(),
        Some(ErrorCode::HttpRequestDenied)
    )
}

/// A `wstd` error in words a model can act on.
fn describe(error: &wstd::http::Error) -> String {
    let Some(code) = error.downcast_ref::<ErrorCode>() else {
        return format!("{error:#}");
    };
    match code {
        ErrorCode::DnsTimeout => "the DNS lookup timed out".to_string(),
        ErrorCode::DnsError(e) => format!(
            "the host name did not resolve ({})",
            e.rcode.as_deref().unwrap_or("DNS error")
        ),
        ErrorCode::DestinationNotFound => "no such host".to_string(),
        ErrorCode::ConnectionRefused => "connection refused".to_string(),
        ErrorCode::ConnectionTerminated => "the connection was closed".to_string(),
        ErrorCode::ConnectionTimeout => "connecting timed out".to_string(),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => {
            "the server did not answer in time".to_string()
        }
        ErrorCode::TlsCertificateError => "the server's TLS certificate was refused".to_string(),
        ErrorCode::TlsProtocolError => "the TLS handshake failed".to_string(),
        ErrorCode::HttpProtocolError => {
            "the server closed the connection or did not speak HTTP".to_string()
        }
        ErrorCode::HttpRequestUriInvalid => "the URL was refused as invalid".to_string(),
        other => format!("{other:?}"),
    }
}
