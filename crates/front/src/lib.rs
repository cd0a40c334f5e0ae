//! The HTTP front: every server Murmur runs (the A2A door with its `/control` plane, and
//! `mur mcp serve`) listens through [`serve`], so each holds the same line against hostile
//! clients and web pages.
//!
//! What the front promises, for every request before the server's own routes see it:
//!
//! - **Only names the server answers to** ([`rules`]). Bound to a loopback address, a request
//!   whose `Host` is not a loopback name (`localhost`, `127.0.0.1`, `[::1]`, the bound address)
//!   with the bound port, nor a name the operator listed, is refused 403: a web page that
//!   rebinds its own DNS name to 127.0.0.1 cannot reach it. Bound elsewhere, any `Host` is
//!   taken unless names are listed (the server asks for credentials there).
//! - **Only pages the operator trusts.** A request that carries a browser's `Origin` is
//!   refused 403 unless that origin is the server's own (the scheme and `Host` it was reached
//!   by) or listed; `Origin: null` is refused. A listed origin gets its CORS answers
//!   (preflight and `Access-Control-Allow-Origin`); no other does.
//! - **JSON bodies only.** A `POST`, `PUT` or `PATCH` whose `Content-Type` is not JSON
//!   (`application/json` or `application/<x>+json`) is refused 415 with JSON-RPC error
//!   -32005, before its body is read: a page cannot send a simple `text/plain` form that
//!   skips the browser's preflight.
//! - **Time limits.** A client has [`Limits::header_timeout`] to send a request's headers
//!   (and, between requests on a kept-alive connection, to start the next one) and
//!   [`Limits::body_timeout`] from then on to send its body; past either the request fails and
//!   the connection is closed. Over TLS the handshake has the header timeout too.
//! - **Connection caps.** At most [`Limits::connections_per_address`] connections from one
//!   client address and [`Limits::connections`] in all are open at once; a connection over a
//!   cap is answered 503 (in plain HTTP) and closed at once, never queued, so clients that
//!   hold connections open cannot starve the others beyond their own share.
//! - **TLS when given** ([`tls`]): the server speaks HTTPS only, with the operator's
//!   certificate; the server's own routes are the same.
//! - **Refusals are JSON**: `{"jsonrpc": "2.0", "id": null, "error": {"code", "message"}}`,
//!   the shape of every server behind the front, with the status above.
//!
//! Secrets presented to any of these servers (door principals' credentials, the control token,
//! `mur mcp serve`'s bearer token) are compared through [`secret::same_secret`] alone.

pub mod rules;
pub mod secret;
pub mod tls;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower::ServiceExt;

pub use rules::Rules;

/// How long clients may take and how many connections they may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// For a request's headers (and a TLS handshake), and for an idle kept-alive connection
    /// to start its next request.
    pub header_timeout: Duration,
    /// For a request's whole body, from when its headers were read.
    pub body_timeout: Duration,
    /// Open connections in all.
    pub connections: usize,
    /// Open connections from one client address.
    pub connections_per_address: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            connections: 1024,
            connections_per_address: 64,
        }
    }
}

/// What a server behind the front is given.
#[derive(Clone)]
pub struct Front {
    /// Who may reach it (`Host`, `Origin`).
    pub rules: Rules,
    pub limits: Limits,
    /// HTTPS with this configuration; plain HTTP without.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Front {
    /// A front for a server bound at `bound`, with the names and origins the operator listed,
    /// the default limits and no TLS.
    pub fn new(bound: SocketAddr, hosts: &[String], origins: &[String]) -> Front {
        Front {
            rules: Rules::new(bound, hosts, origins, false),
            limits: Limits::default(),
            tls: None,
        }
    }

    /// The same front speaking HTTPS with `tls`.
    pub fn with_tls(mut self, tls: &tls::Tls) -> Front {
        self.rules.set_tls(true);
        self.tls = Some(tls.config.clone());
        self
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

/// Serves `router` on `listener` behind `front` until `stop` resolves, then lets the open
/// connections finish their requests (idle ones are closed) and returns. Every request
/// carries the client's address as `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    front: Front,
    stop: impl Future<Output = ()> + Send,
) {
    let counts = Arc::new(Counts::new(front.limits));
    let tls = front.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let shared = Arc::new(Shared { router, front });
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of descriptors or a connection reset before it was taken: go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let Some(admitted) = counts.admit(peer.ip()) else {
            refuse_busy(stream, tls.is_none());
            continue;
        };
        let shared = shared.clone();
        let stopping = stopping.subscribe();
        let tls = tls.clone();
        connections.spawn(async move {
            let _admitted = admitted;
            let header_timeout = shared.front.limits.header_timeout;
            match tls {
                None => connection(stream, peer, shared, stopping).await,
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(header_timeout, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    connection(stream, peer, shared, stopping).await
                }
            }
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    while connections.join_next().await.is_some() {}
}

/// Answers a connection over a cap 503 (when nothing has to be negotiated first) and closes it.
fn refuse_busy(stream: tokio::net::TcpStream, plain: bool) {
    if plain {
        let _ = stream.try_write(
            b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
        );
    }
    drop(stream);
}

struct Shared {
    router: Router,
    front: Front,
}

/// One connection's requests, until the client goes, a limit is passed or the server stops.
async fn connection<I>(
    io: I,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = shared.front.limits;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(request, peer, &shared).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let stopped = tokio::select! {
        _ = connection.as_mut() => false,
        stop = stopping.wait_for(|stop| *stop) => stop.is_ok(),
    };
    if stopped {
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

/// One request: the front's rules, then the server's routes.
async fn handle(request: Request<Incoming>, peer: SocketAddr, shared: &Shared) -> Response<Body> {
    let rules = &shared.front.rules;
    let admitted = match rules.admit(request.method(), request.headers()) {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal.response(),
    };
    if let Some(preflight) = admitted.preflight(request.method(), request.headers()) {
        return preflight;
    }
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(ConnectInfo(peer));
    let body = Body::new(TimedBody::new(body, shared.front.limits.body_timeout));
    let Ok(mut response) = shared
        .router
        .clone()
        .oneshot(Request::from_parts(parts, body))
        .await;
    admitted.decorate(response.headers_mut());
    response
}

/// A request body that fails once its time is up.
struct TimedBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl TimedBody {
    fn new(inner: Incoming, within: Duration) -> TimedBody {
        TimedBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(within)),
        }
    }
}

/// The error a body gives when its time is up.
#[derive(Debug)]
struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Open connections, in all and per client address.
struct Counts {
    limits: Limits,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; it is counted until dropped.
struct Admitted {
    counts: Arc<Counts>,
    address: IpAddr,
}

impl Counts {
    fn new(limits: Limits) -> Counts {
        Counts {
            limits,
            open: Mutex::new((0, HashMap::new())),
        }
    }

    /// Counts a connection from `address` in, unless a cap is reached.
    fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per_address) = &mut *open;
        let from_address = per_address.entry(address).or_default();
        if *total >= self.limits.connections || *from_address >= self.limits.connections_per_address
        {
            if *from_address == 0 {
                per_address.remove(&address);
            }
            return None;
        }
        *total += 1;
        *from_address += 1;
        Some(Admitted {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, per_address) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(count) = per_address.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                per_address.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_per_address_and_in_all_and_released_when_dropped() {
        let counts = Arc::new(Counts::new(Limits {
            connections: 3,
            connections_per_address: 2,
            ..Limits::default()
        }));
        let a: IpAddr = [127, 0, 0, 2].into();
        let b: IpAddr = [127, 0, 0, 3].into();
        let first = counts.admit(a).unwrap();
        let _second = counts.admit(a).unwrap();
        assert!(counts.admit(a).is_none(), "a third from one address");
        let _third = counts.admit(b).unwrap();
        assert!(counts.admit(b).is_none(), "a fourth in all");
        drop(first);
        assert!(counts.admit(b).is_some(), "a place freed is taken again");
        assert!(
            counts.open.lock().unwrap().1.values().all(|&n| n > 0),
            "no address is kept with nothing open"
        );
    }
}
