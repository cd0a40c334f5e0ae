//! The egress proxy inside `mur`: the only way out of a native child's network namespace
//! ([`crate::netns`]).
//!
//! What it promises:
//!
//! - **Every connection is decided by host and port** against the capsule's
//!   `capabilities.network.allow` ([`NetworkRule::permits`]) before anything is connected.
//!   A refusal is answered (`403`, one line naming `host:port` and
//!   "not in capabilities.network.allow") and told to [`EgressEvents`] as it happens.
//! - **The proxy speaks HTTP/1.1**: `CONNECT host:port` (answered `200 Connection Established`,
//!   then bytes are relayed both ways, each direction closed on its own) and plain HTTP in
//!   absolute form (`GET http://host:port/path HTTP/1.1`: the request goes upstream in origin
//!   form with `Host` set to the target and `Connection: close`, so one connection carries one
//!   request to one destination). `CONNECT` to port 443 needs an entry permitting `https` there;
//!   to any other port, one permitting `http` or `https` (a tunnel's content is not seen). A plain
//!   request needs `http`.
//! - **Names are resolved by the proxy, on the host**: an allowed name is connected to whatever
//!   it resolves to; an IP literal is allowed only by an entry naming that address. The child has
//!   no resolver of its own (no route for its queries).
//! - **Forwarded ports are transparent**: a connection accepted on the child's `127.0.0.1:P` is
//!   relayed to `127.0.0.1:P` of the host, when an entry permits `127.0.0.1:P` or `localhost:P`
//!   (else it is closed at once, and told as a refusal).
//! - **Bounds** ([`EgressLimits`]): a request head of at most 16 KiB read within 10 s (else `431`
//!   or `408`), an upstream connect within 10 s (else `504`), a tunnel idle for 300 s is closed,
//!   and at most 256 connections at once per proxy (past it: `503`, or a forwarded connection
//!   closed at once).
//! - **What a child sent before it ended is delivered**: [`Egress::finish`], once the child is
//!   gone, accepts the connections it left queued and carries each of them and every open one
//!   until what the child sent has reached the upstream (the upstream's answer has no reader
//!   left), at most for the time it is given. A child that connects, writes and exits at once
//!   loses nothing.
//! - **Dropping an [`Egress`]** stops accepting (the child's listeners close) and ends every open
//!   tunnel.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use murmur_manifest::NetworkRule;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// A refused connection, as the egress proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EgressRefusal {
    pub host: String,
    pub port: u16,
    pub reason: String,
}

/// Told of every connection a child's egress proxy refuses, as it happens.
pub type OnRefused = Arc<dyn Fn(&EgressRefusal) + Send + Sync>;

/// Why a connection was refused by the allowlist.
pub(crate) const NOT_ALLOWED: &str = "not in capabilities.network.allow";
/// Distinct refused destinations kept; past it they are counted only.
pub(crate) const REFUSED_KEPT: usize = 64;

/// The environment that sends a child's HTTP clients through its proxy at
/// `127.0.0.1:proxy_port`. With forwarded ports, loopback destinations go direct (`NO_PROXY`);
/// without, `NO_PROXY` is empty.
pub(crate) fn proxy_env(proxy_port: u16, forwarded: bool) -> Vec<(String, String)> {
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    let no_proxy = if forwarded {
        "127.0.0.1,localhost,::1"
    } else {
        ""
    };
    [
        ("HTTP_PROXY", proxy.as_str()),
        ("HTTPS_PROXY", &proxy),
        ("ALL_PROXY", &proxy),
        ("NO_PROXY", no_proxy),
    ]
    .into_iter()
    .flat_map(|(name, value)| {
        [
            (name.to_string(), value.to_string()),
            (name.to_ascii_lowercase(), value.to_string()),
        ]
    })
    .collect()
}

/// What an [`Egress`] did: refusals as they happen (to the hook) and counts. Clones share.
#[derive(Clone, Default)]
pub(crate) struct EgressEvents {
    inner: Arc<EventsInner>,
}

#[derive(Default)]
struct EventsInner {
    hook: Option<OnRefused>,
    refused: AtomicU64,
    allowed: AtomicU64,
    busy: AtomicU64,
    distinct: Mutex<Distinct>,
}

#[derive(Default)]
struct Distinct {
    kept: Vec<EgressRefusal>,
    /// Refusals of destinations not kept (past the first [`REFUSED_KEPT`]), repeats included.
    more: u64,
}

impl EgressEvents {
    /// Events told to `hook` (when there is one) as they happen.
    pub(crate) fn new(hook: Option<OnRefused>) -> EgressEvents {
        EgressEvents {
            inner: Arc::new(EventsInner {
                hook,
                ..EventsInner::default()
            }),
        }
    }

    /// A connection to `host:port` was refused, for `reason`.
    pub(crate) fn on_refused(&self, host: &str, port: u16, reason: &str) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
        let refusal = EgressRefusal {
            host: host.to_string(),
            port,
            reason: reason.to_string(),
        };
        if let Ok(mut distinct) = self.inner.distinct.lock() {
            let seen = distinct
                .kept
                .iter()
                .any(|kept| kept.host == refusal.host && kept.port == port);
            if !seen {
                if distinct.kept.len() < REFUSED_KEPT {
                    distinct.kept.push(refusal.clone());
                } else {
                    distinct.more += 1;
                }
            }
        }
        if let Some(hook) = &self.inner.hook {
            hook(&refusal);
        }
    }

    fn on_allowed(&self) {
        self.inner.allowed.fetch_add(1, Ordering::Relaxed);
    }

    fn on_busy(&self) {
        self.inner.busy.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections refused (every one, repeats included).
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "for the caller's report; the tests read it")
    )]
    pub(crate) fn refused_total(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Connections allowed.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "for the caller's report; the tests read it")
    )]
    pub(crate) fn allowed_total(&self) -> u64 {
        self.inner.allowed.load(Ordering::Relaxed)
    }

    /// Connections turned away because the proxy had [`EgressLimits::max_connections`] open.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "for the caller's report; the tests read it")
    )]
    pub(crate) fn busy_total(&self) -> u64 {
        self.inner.busy.load(Ordering::Relaxed)
    }

    /// The distinct destinations refused (the first [`REFUSED_KEPT`], with the first reason
    /// each was refused for), and how many refusals of other destinations were not kept.
    pub(crate) fn refused(&self) -> (Vec<EgressRefusal>, u64) {
        match self.inner.distinct.lock() {
            Ok(distinct) => (distinct.kept.clone(), distinct.more),
            Err(_) => (Vec::new(), 0),
        }
    }
}

/// The bounds an [`Egress`] keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EgressLimits {
    pub head_bytes: usize,
    pub head_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for EgressLimits {
    fn default() -> Self {
        EgressLimits {
            head_bytes: 16 * 1024,
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_connections: 256,
        }
    }
}

/// One child's egress proxy and forwarded ports, served on the current tokio runtime.
pub(crate) struct Egress {
    /// Dropped to end every connection's task.
    stop: Option<watch::Sender<()>>,
    /// Set when the child is gone ([`Egress::finish`]).
    finishing: watch::Sender<bool>,
    accepts: Vec<JoinHandle<()>>,
    events: EgressEvents,
    shared: Arc<Shared>,
}

struct Shared {
    rules: Vec<NetworkRule>,
    events: EgressEvents,
    limits: EgressLimits,
    /// One per open connection: all of them back means no connection is open.
    permits: Arc<Semaphore>,
    finishing: watch::Receiver<bool>,
}

impl Egress {
    /// Serves `proxy` (the child's proxy listener) and `forwards` (each forwarded port with its
    /// listener), deciding by `rules`. Must be called within a tokio runtime. A listener that
    /// cannot be served is closed (the child's connections to it are refused) and told to
    /// `events` as a refusal naming its port.
    pub(crate) fn serve(
        proxy: std::net::TcpListener,
        forwards: Vec<(u16, std::net::TcpListener)>,
        rules: Vec<NetworkRule>,
        events: EgressEvents,
    ) -> Egress {
        Egress::serve_with(proxy, forwards, rules, events, EgressLimits::default())
    }

    /// [`Egress::serve`] with other bounds.
    pub(crate) fn serve_with(
        proxy: std::net::TcpListener,
        forwards: Vec<(u16, std::net::TcpListener)>,
        rules: Vec<NetworkRule>,
        events: EgressEvents,
        limits: EgressLimits,
    ) -> Egress {
        let (stop, stopped) = watch::channel(());
        let (finishing, finishing_seen) = watch::channel(false);
        let shared = Arc::new(Shared {
            rules,
            events: events.clone(),
            limits,
            permits: Arc::new(Semaphore::new(limits.max_connections)),
            finishing: finishing_seen,
        });
        let mut accepts = Vec::new();
        let listeners = std::iter::once((None, proxy))
            .chain(forwards.into_iter().map(|(port, l)| (Some(port), l)));
        for (forward, listener) in listeners {
            match tokio_listener(listener) {
                Ok(listener) => accepts.push(tokio::spawn(accept_loop(
                    listener,
                    forward,
                    shared.clone(),
                    stopped.clone(),
                ))),
                Err((port, error)) => events.on_refused(
                    "127.0.0.1",
                    forward.unwrap_or(port),
                    &format!("the egress proxy cannot serve this port: {error}"),
                ),
            }
        }
        Egress {
            stop: Some(stop),
            finishing,
            accepts,
            events,
            shared,
        }
    }

    /// Called once the child is gone: the connections it left queued are accepted, and this
    /// returns when every connection has delivered what the child sent (or after `limit`, when
    /// the rest are ended). Nothing new can arrive: the child is gone.
    pub(crate) async fn finish(&mut self, limit: Duration) {
        let _ = self.finishing.send(true);
        let all_delivered = async {
            for accept in &mut self.accepts {
                let _ = accept.await;
            }
            let open = u32::try_from(self.shared.limits.max_connections).unwrap_or(u32::MAX);
            let _ = self.shared.permits.acquire_many(open).await;
        };
        if tokio::time::timeout(limit, all_delivered).await.is_err() {
            self.stop.take();
        }
    }

    /// What this proxy did.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "for the caller's report; the tests read it")
    )]
    pub(crate) fn events(&self) -> &EgressEvents {
        &self.events
    }

    /// The distinct destinations refused so far (at most [`REFUSED_KEPT`]).
    pub(crate) fn refused(&self) -> Vec<EgressRefusal> {
        self.events.refused().0
    }

    /// Stops accepting, ends every open tunnel, and returns once the listeners are closed.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "for the caller's report; the tests read it")
    )]
    pub(crate) async fn shutdown(mut self) {
        self.stop.take();
        for accept in std::mem::take(&mut self.accepts) {
            accept.abort();
            let _ = accept.await;
        }
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.stop.take();
        for accept in &self.accepts {
            accept.abort();
        }
    }
}

fn tokio_listener(
    listener: std::net::TcpListener,
) -> Result<tokio::net::TcpListener, (u16, io::Error)> {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    if tokio::runtime::Handle::try_current().is_err() {
        return Err((port, io::Error::other("no tokio runtime")));
    }
    listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|error| (port, error))
}

/// Accepts on `listener` (the proxy's, or forwarded port `forward`'s) until aborted, or until
/// the child is gone: then what it left queued is accepted, and no more.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    forward: Option<u16>,
    shared: Arc<Shared>,
    stopped: watch::Receiver<()>,
) {
    let mut finishing = shared.finishing.clone();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = finishing.wait_for(|gone| *gone) => break,
        };
        match accepted {
            Ok((stream, _)) => take(stream, forward, &shared, &stopped),
            Err(_) => {
                // Out of descriptors, or the child reset before it was accepted: breathe.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // The listener is non-blocking: accepting ends with the queue.
    let Ok(listener) = listener.into_std() else {
        return;
    };
    while let Ok((stream, _)) = listener.accept() {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(stream));
        if let Ok(stream) = stream {
            take(stream, forward, &shared, &stopped);
        }
    }
}

/// One accepted connection, served on a task of its own (or turned away past the bound).
fn take(
    stream: TcpStream,
    forward: Option<u16>,
    shared: &Arc<Shared>,
    stopped: &watch::Receiver<()>,
) {
    let Ok(permit) = shared.permits.clone().try_acquire_owned() else {
        shared.events.on_busy();
        if forward.is_none() {
            // A new socket's send buffer is empty: this short answer fits without waiting.
            let _ = stream.try_write(&response(
                503,
                "the egress proxy is at its limit of connections",
            ));
        }
        return;
    };
    let shared = shared.clone();
    let mut stopped = stopped.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let work = async {
            match forward {
                None => proxy(stream, &shared).await,
                Some(port) => forward_to(stream, port, &shared).await,
            }
        };
        tokio::select! {
            () = work => {}
            _ = stopped.changed() => {}
        }
    });
}

/// A complete response with a one-line body.
fn response(status: u16, line: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("{line}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn answer(mut client: TcpStream, status: u16, line: &str) {
    let _ = client.write_all(&response(status, line)).await;
    let _ = client.shutdown().await;
    // Closing with a request body unread would reset the connection, and the client could lose
    // the answer: what it still sends is read (at most 64 KiB, for at most a second) and dropped.
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut left = 64 * 1024usize;
        while left > 0 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// One connection to the proxy: its request head, the decision, and the relay.
async fn proxy(mut client: TcpStream, shared: &Shared) {
    let limits = shared.limits;
    let (buffer, head) = match tokio::time::timeout(
        limits.head_timeout,
        read_head(&mut client, limits.head_bytes),
    )
    .await
    {
        Err(_) => return answer(client, 408, "the request head did not arrive in time").await,
        Ok(Err(ReadHead::Closed)) => return,
        Ok(Err(ReadHead::Bad(HeadError::TooLarge))) => {
            return answer(client, 431, "the request head is too large").await;
        }
        Ok(Err(ReadHead::Bad(error))) => {
            return answer(client, 400, &format!("bad request: {error}")).await;
        }
        Ok(Ok(read)) => read,
    };
    let rest = &buffer[head.length..];
    let (authority, allowed) = match &head.target {
        Target::Connect(authority) => {
            let schemes: &[&str] = if authority.port == 443 {
                &["https"]
            } else {
                &["http", "https"]
            };
            (authority, shared.permits(schemes, authority))
        }
        Target::Http { authority, .. } => (authority, shared.permits(&["http"], authority)),
    };
    if !allowed {
        shared
            .events
            .on_refused(&authority.host.to_string(), authority.port, NOT_ALLOWED);
        let line = format!("{authority} is {NOT_ALLOWED}");
        return answer(client, 403, &line).await;
    }
    shared.events.on_allowed();
    let upstream = match connect(authority, limits.connect_timeout).await {
        Ok(upstream) => upstream,
        Err(Connect::TimedOut) => {
            return answer(client, 504, &format!("{authority} did not answer in time")).await;
        }
        Err(Connect::Failed(reason)) => {
            return answer(
                client,
                502,
                &format!("{authority} cannot be reached: {reason}"),
            )
            .await;
        }
    };
    let mut upstream = upstream;
    if let Target::Http { .. } = &head.target
        && upstream.write_all(&head.origin_request()).await.is_err()
    {
        return;
    }
    // What the child sent after the head goes upstream before the tunnel is answered: a child
    // that is already gone cannot take the answer, and what it sent is delivered all the same.
    if !rest.is_empty() && upstream.write_all(rest).await.is_err() {
        return;
    }
    if let Target::Connect(_) = &head.target
        && client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
    {
        return;
    }
    relay(
        client,
        upstream,
        limits.idle_timeout,
        shared.finishing.clone(),
    )
    .await;
}

/// A connection accepted on forwarded port `port`: relayed to the host's `127.0.0.1:port`.
async fn forward_to(client: TcpStream, port: u16, shared: &Shared) {
    let allowed = ["127.0.0.1", "localhost"].iter().any(|host| {
        shared
            .rules
            .iter()
            .any(|rule| rule.permits("http", host, port) || rule.permits("https", host, port))
    });
    if !allowed {
        shared.events.on_refused("127.0.0.1", port, NOT_ALLOWED);
        return;
    }
    shared.events.on_allowed();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(Ok(upstream)) =
        tokio::time::timeout(shared.limits.connect_timeout, TcpStream::connect(address)).await
    else {
        return;
    };
    relay(
        client,
        upstream,
        shared.limits.idle_timeout,
        shared.finishing.clone(),
    )
    .await;
}

impl Shared {
    /// Whether some rule permits `authority` over one of `schemes`.
    fn permits(&self, schemes: &[&str], authority: &Authority) -> bool {
        let host = authority.host.to_string();
        self.rules.iter().any(|rule| {
            schemes
                .iter()
                .any(|scheme| rule.permits(scheme, &host, authority.port))
        })
    }
}

enum Connect {
    TimedOut,
    Failed(String),
}

/// A connection to `authority` from the host: an address as it is, a name as the host
/// resolves it (each address it gives in turn).
async fn connect(authority: &Authority, limit: Duration) -> Result<TcpStream, Connect> {
    let attempt = async {
        let addresses: Vec<SocketAddr> = match &authority.host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, authority.port)],
            Host::Name(name) => tokio::net::lookup_host((name.as_str(), authority.port))
                .await
                .map_err(|e| Connect::Failed(format!("resolving it failed: {e}")))?
                .collect(),
        };
        if addresses.is_empty() {
            return Err(Connect::Failed("it resolves to no address".to_string()));
        }
        TcpStream::connect(&addresses[..])
            .await
            .map_err(|e| Connect::Failed(e.to_string()))
    };
    tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or(Err(Connect::TimedOut))
}

/// Milliseconds since a start, shared by the two directions of a relay.
struct Clock {
    start: Instant,
    last: AtomicU64,
}

impl Clock {
    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Relays bytes both ways between `child` and `upstream` until both directions end (each end's
/// EOF is passed on as a half-close), until nothing moved for `idle`, or, once the child is
/// gone (`finishing`), as soon as what it sent has gone upstream.
async fn relay(
    child: TcpStream,
    upstream: TcpStream,
    idle: Duration,
    mut finishing: watch::Receiver<bool>,
) {
    let clock = Clock {
        start: Instant::now(),
        last: AtomicU64::new(0),
    };
    let (child_read, child_write) = child.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let both = async {
        let mut sent = std::pin::pin!(pump(child_read, upstream_write, &clock));
        let mut answered = std::pin::pin!(pump(upstream_read, child_write, &clock));
        let (mut sent_done, mut answered_done) = (false, false);
        while !(sent_done && answered_done) {
            tokio::select! {
                () = &mut sent, if !sent_done => sent_done = true,
                () = &mut answered, if !answered_done => answered_done = true,
                // No one is left to read the answer.
                _ = finishing.wait_for(|gone| *gone), if sent_done => return,
            }
        }
    };
    let watchdog = async {
        loop {
            let quiet = clock.idle();
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    };
    tokio::select! {
        _ = both => {}
        () = watchdog => {}
    }
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, clock: &Clock) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                clock.touch();
                if to.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
                clock.touch();
            }
        }
    }
    let _ = to.shutdown().await;
}

enum ReadHead {
    Closed,
    Bad(HeadError),
}

/// Reads until a whole request head is in; returns everything read and the head.
async fn read_head(
    client: &mut TcpStream,
    limit: usize,
) -> Result<(Vec<u8>, RequestHead), ReadHead> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|_| ReadHead::Closed)?;
        if n == 0 {
            return Err(ReadHead::Closed);
        }
        buffer.extend_from_slice(&chunk[..n]);
        match parse_head(&buffer, limit) {
            Ok(Some(head)) => return Ok((buffer, head)),
            Ok(None) => {}
            Err(error) => return Err(ReadHead::Bad(error)),
        }
    }
}

/// The host of a target: a name (lowercase, no trailing dot) or an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    Name(String),
    Ip(IpAddr),
}

impl std::fmt::Display for Host {
    /// As `permits` and events take it: a name, or an address (IPv6 unbracketed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    pub host: Host,
    pub port: u16,
}

impl std::fmt::Display for Authority {
    /// `host:port`, an IPv6 address bracketed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `CONNECT host:port`.
    Connect(Authority),
    /// `METHOD http://host[:port]/path`: `origin` is the path and query (`/` when none).
    Http {
        authority: Authority,
        origin: String,
    },
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestHead {
    pub method: String,
    pub target: Target,
    /// Its header lines as received (validated: no control characters, no folding).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The head's length in bytes, the blank line included.
    pub length: usize,
}

/// Why a request head is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeadError {
    #[error("the request head is larger than the limit")]
    TooLarge,
    #[error("the request is not HTTP/1.x ({0})")]
    Malformed(String),
    #[error("{0}")]
    Target(String),
}

/// Headers a request head may carry.
const MAX_HEADERS: usize = 100;

/// Parses a request head from the start of `bytes`: `None` while it is incomplete (and within
/// `limit` bytes).
pub(crate) fn parse_head(bytes: &[u8], limit: usize) -> Result<Option<RequestHead>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => {
            return if bytes.len() >= limit {
                Err(HeadError::TooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(error) => return Err(HeadError::Malformed(error.to_string())),
    };
    if length > limit {
        return Err(HeadError::TooLarge);
    }
    let method = request.method.unwrap_or_default().to_string();
    let target = request.path.unwrap_or_default();
    let target = if method == "CONNECT" {
        Target::Connect(parse_authority(target, None)?)
    } else {
        parse_absolute(target)?
    };
    Ok(Some(RequestHead {
        method,
        target,
        headers: request
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        length,
    }))
}

/// `http://authority[/path]`: any other form is refused.
fn parse_absolute(target: &str) -> Result<Target, HeadError> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err(HeadError::Target(format!(
            "`{}` is not a URL: this is a proxy, send `http://host/path` or CONNECT",
            shown(target)
        )));
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(HeadError::Target(format!(
            "scheme `{}` is not proxied in plain form (use CONNECT for https)",
            shown(scheme)
        )));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, origin) = rest.split_at(end);
    // A fragment never travels.
    let origin = origin.split('#').next().unwrap_or_default();
    let origin = match origin {
        "" => "/".to_string(),
        o if o.starts_with('/') => o.to_string(),
        o => format!("/{o}"),
    };
    Ok(Target::Http {
        authority: parse_authority(authority, Some(80))?,
        origin,
    })
}

/// `host:port`, `[v6]:port`, or with `default_port`, the host alone.
fn parse_authority(text: &str, default_port: Option<u16>) -> Result<Authority, HeadError> {
    let bad = |why: &str| HeadError::Target(format!("`{}`: {why}", shown(text)));
    if text.contains('@') {
        return Err(bad("user information is not accepted"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("`[` is never closed"))?;
        let ip: std::net::Ipv6Addr = inside.parse().map_err(|_| bad("not an IPv6 address"))?;
        let port = match after {
            "" => None,
            after => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| bad("junk after `]`"))?,
            ),
        };
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        if host.contains(':') {
            return Err(bad("an IPv6 address must be bracketed"));
        }
        (
            parse_host(host).ok_or_else(|| bad("not a host name or address"))?,
            port,
        )
    };
    let port = match port {
        Some(digits) => match digits.parse::<u16>() {
            Ok(port) if port != 0 && digits.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(bad("the port is not a port")),
        },
        None => default_port.ok_or_else(|| bad("a port is required"))?,
    };
    Ok(Authority { host, port })
}

/// A DNS name (letters, digits, `-`, `_`, dots) or an IPv4 address.
fn parse_host(host: &str) -> Option<Host> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return None;
    }
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some(Host::Ip(IpAddr::V4(ip)));
    }
    let valid = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    // All-digit labels that are not an address (`1.2.3`) are refused rather than guessed at.
    let numeric = host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    (valid && !numeric).then(|| Host::Name(host.to_ascii_lowercase()))
}

/// At most 100 characters of outside text, for a message.
fn shown(text: &str) -> String {
    text.chars().take(100).collect()
}

impl RequestHead {
    /// The request as it goes upstream: origin form, `Host` set to the target, hop-by-hop and
    /// proxy headers dropped, `Connection: close`.
    fn origin_request(&self) -> Vec<u8> {
        let Target::Http { authority, origin } = &self.target else {
            return Vec::new();
        };
        let host = match authority.port {
            80 => match authority.host {
                Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
                _ => authority.host.to_string(),
            },
            _ => authority.to_string(),
        };
        let mut out = format!("{} {origin} HTTP/1.1\r\nHost: {host}\r\n", self.method).into_bytes();
        for (name, value) in &self.headers {
            let dropped = [
                "host",
                "connection",
                "proxy-connection",
                "proxy-authorization",
                "keep-alive",
            ]
            .iter()
            .any(|d| name.eq_ignore_ascii_case(d));
            if !dropped {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::{Read, Write};

    use proptest::prelude::*;

    use super::*;
    use crate::netns::NetnsPlan;
    use crate::netns::testkit::{output_of, python_in_netns, spawn_in_netns};

    const LIMIT: usize = 16 * 1024;

    fn head(text: &str) -> Result<Option<RequestHead>, HeadError> {
        parse_head(text.as_bytes(), LIMIT)
    }

    fn target(text: &str) -> Target {
        head(text).unwrap().unwrap().target
    }

    fn name(host: &str, port: u16) -> Authority {
        Authority {
            host: Host::Name(host.to_string()),
            port,
        }
    }

    #[test]
    fn connect_needs_a_port_and_takes_names_and_addresses() {
        assert_eq!(
            target("CONNECT API.example.com.:8443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Target::Connect(name("api.example.com", 8443))
        );
        let v6 = target("CONNECT [::1]:443 HTTP/1.1\r\n\r\n");
        let Target::Connect(authority) = &v6 else {
            panic!("{v6:?}")
        };
        assert_eq!(authority.host, Host::Ip("::1".parse().unwrap()));
        assert_eq!(authority.to_string(), "[::1]:443");
        assert_eq!(authority.host.to_string(), "::1");
        assert_eq!(
            target("CONNECT 127.0.0.2:8080 HTTP/1.1\r\n\r\n"),
            Target::Connect(Authority {
                host: Host::Ip("127.0.0.2".parse().unwrap()),
                port: 8080
            })
        );
        for refused in [
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT example.com: HTTP/1.1\r\n\r\n",
            "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
            "CONNECT example.com:+80 HTTP/1.1\r\n\r\n",
            "CONNECT example.com:70000 HTTP/1.1\r\n\r\n",
            "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
            "CONNECT [::1 HTTP/1.1\r\n\r\n",
            "CONNECT [nope]:443 HTTP/1.1\r\n\r\n",
            "CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            "CONNECT exa%6dple.com:443 HTTP/1.1\r\n\r\n",
            "CONNECT 1.2.3:443 HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(head(refused), Err(HeadError::Target(_))),
                "{refused:?} gave {:?}",
                head(refused)
            );
        }
    }

    #[test]
    fn absolute_form_takes_the_default_port_and_keeps_path_and_query() {
        assert_eq!(
            target("GET http://Example.COM/a/b?c=d#frag HTTP/1.1\r\n\r\n"),
            Target::Http {
                authority: name("example.com", 80),
                origin: "/a/b?c=d".into()
            }
        );
        assert_eq!(
            target("POST HTTP://example.com:8080 HTTP/1.1\r\n\r\n"),
            Target::Http {
                authority: name("example.com", 8080),
                origin: "/".into()
            }
        );
        assert_eq!(
            target("GET http://[::1]:81?q HTTP/1.1\r\n\r\n"),
            Target::Http {
                authority: Authority {
                    host: Host::Ip("::1".parse().unwrap()),
                    port: 81
                },
                origin: "/?q".into()
            }
        );
        // Not a proxy request: origin form, https in plain form, other schemes.
        for refused in [
            "GET / HTTP/1.1\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "GET ftp://example.com/ HTTP/1.1\r\n\r\n",
            "GET http:///x HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(head(refused), Err(HeadError::Target(_))),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn junk_is_malformed_and_an_oversized_head_too_large() {
        for junk in [
            &b"\x00\x01\x02 garbage\r\n\r\n"[..],
            b"GET http://a/ HTTP/9.9\r\n\r\n",
            b"GET http://a/\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(junk, LIMIT), Err(HeadError::Malformed(_))),
                "{junk:?}"
            );
        }
        // Incomplete: more is awaited, up to the limit.
        assert_eq!(head("CONNECT a:1 HTTP/1.1\r\nHost: a"), Ok(None));
        let big = format!("GET http://a/ HTTP/1.1\r\nX: {}", "y".repeat(LIMIT));
        assert_eq!(head(&big), Err(HeadError::TooLarge));
        let big_complete = format!("{big}\r\n\r\n");
        assert_eq!(head(&big_complete), Err(HeadError::TooLarge));
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("H{i}: v\r\n"))
            .collect();
        assert_eq!(
            head(&format!("GET http://a/ HTTP/1.1\r\n{many}\r\n")),
            Err(HeadError::TooLarge)
        );
    }

    #[test]
    fn a_header_line_cannot_be_injected_and_the_request_goes_upstream_clean() {
        // A bare CR, a NUL, an obsolete folded line: refused, never passed on.
        for injected in [
            "GET http://a/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nX: a\r\n Host: evil\r\n\r\n",
            "GET http://a/\rHost:evil HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(head(injected), Err(HeadError::Malformed(_))),
                "{injected:?} gave {:?}",
                head(injected)
            );
        }
        let text = "GET http://api.example.com:8080/v1?x HTTP/1.1\r\nHost: evil.example\r\n\
             Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
             Connection: keep-alive\r\nAccept: */*\r\n\r\nbody";
        let request = head(text).unwrap().unwrap();
        assert_eq!(request.length, text.len() - "body".len());
        assert_eq!(
            String::from_utf8(request.origin_request()).unwrap(),
            "GET /v1?x HTTP/1.1\r\nHost: api.example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    proptest! {
        #[test]
        fn no_bytes_make_the_head_parser_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = parse_head(&bytes, LIMIT);
            let _ = parse_head(&bytes, 64);
        }

        #[test]
        fn any_target_parses_or_is_refused_and_what_parses_says_itself_again(
            target in "\\PC{0,80}",
            method in prop::sample::select(vec!["CONNECT", "GET", "POST"]),
        ) {
            let text = format!("{method} {target} HTTP/1.1\r\nHost: h\r\n\r\n");
            if let Ok(Some(parsed)) = parse_head(text.as_bytes(), LIMIT) {
                let again = match &parsed.target {
                    Target::Connect(a) => format!("CONNECT {a} HTTP/1.1\r\n\r\n"),
                    Target::Http { authority, origin } => format!("GET http://{authority}{origin} HTTP/1.1\r\n\r\n"),
                };
                let reparsed = parse_head(again.as_bytes(), LIMIT).unwrap().unwrap();
                prop_assert_eq!(reparsed.target, parsed.target.clone());
                let _ = parsed.origin_request();
            }
        }

        #[test]
        fn authorities_of_names_and_ports_round_trip(
            host in "[a-z][a-z0-9-]{0,20}(\\.[a-z][a-z0-9-]{0,20}){0,3}",
            port in 1u16..,
        ) {
            let parsed = parse_authority(&format!("{host}:{port}"), None).unwrap();
            prop_assert_eq!(parsed, name(&host, port));
        }
    }

    #[test]
    fn the_child_environment_names_the_proxy() {
        let env: BTreeMap<String, String> = proxy_env(3128, false).into_iter().collect();
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            assert_eq!(env[name], "http://127.0.0.1:3128");
        }
        assert_eq!(env["NO_PROXY"], "");
        assert_eq!(env["no_proxy"], "");
        let env: BTreeMap<String, String> = proxy_env(3130, true).into_iter().collect();
        assert_eq!(env["https_proxy"], "http://127.0.0.1:3130");
        assert_eq!(env["NO_PROXY"], "127.0.0.1,localhost,::1");
        assert_eq!(env["no_proxy"], "127.0.0.1,localhost,::1");
        assert_eq!(env.len(), 8);
    }

    // ---- Real connections -------------------------------------------------------------

    fn rules(entries: &[String]) -> Vec<NetworkRule> {
        entries
            .iter()
            .map(|e| NetworkRule::parse(e).unwrap())
            .collect()
    }

    /// An HTTP server of the host at `address` answering `hello from <address> <request line>`;
    /// its count of requests.
    async fn http_server(listener: tokio::net::TcpListener) -> Arc<AtomicU64> {
        let count = Arc::new(AtomicU64::new(0));
        let counted = count.clone();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    let line = text.lines().next().unwrap_or_default();
                    let body = format!("hello from {address} {line}\n");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        count
    }

    /// Listeners on 127.0.0.1:P and 127.0.0.2:P, the same P.
    async fn twin_listeners() -> (tokio::net::TcpListener, tokio::net::TcpListener, u16) {
        for _ in 0..50 {
            let first = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = first.local_addr().unwrap().port();
            if let Ok(second) = tokio::net::TcpListener::bind(("127.0.0.2", port)).await {
                return (first, second, port);
            }
        }
        panic!("no port free on both 127.0.0.1 and 127.0.0.2");
    }

    /// Events that also keep what the hook was told.
    fn recorded() -> (EgressEvents, Arc<Mutex<Vec<EgressRefusal>>>) {
        let told = Arc::new(Mutex::new(Vec::new()));
        let kept = told.clone();
        let hook: OnRefused = Arc::new(move |refusal: &EgressRefusal| {
            kept.lock().unwrap().push(refusal.clone());
        });
        (EgressEvents::new(Some(hook)), told)
    }

    fn child_env(extra: &[(&str, String)], forwarded: bool) -> Vec<(String, String)> {
        let mut env = proxy_env(3128, forwarded);
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    }

    async fn wait_output(child: std::process::Child) -> String {
        tokio::task::spawn_blocking(move || output_of(child))
            .await
            .unwrap()
    }

    const PYTHON_CLIENT: &str = r#"
import os, socket, urllib.request, urllib.error
P = int(os.environ["P"])
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return f"{r.status} {r.read().decode().strip()}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.read().decode().strip()}"
    except Exception as e:
        return f"error {e}"
def connect(host):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {host}:{P} HTTP/1.1\r\nHost: {host}:{P}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            break
        head += c
    status = head.split(b"\r\n")[0].decode()
    if " 200 " not in status:
        return status
    s.sendall(f"GET /tunnel HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    s.shutdown(socket.SHUT_WR)
    body = b""
    while True:
        c = s.recv(4096)
        if not c:
            break
        body += c
    return status + " | " + body.decode().split("\r\n\r\n", 1)[1].strip()
print(get(f"http://127.0.0.1:{P}/hello?x=1"))
print(connect("127.0.0.1"))
print(get(f"http://127.0.0.2:{P}/"))
print(connect("127.0.0.2"))
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_child_reaches_an_allowed_host_through_the_proxy_and_not_another_host_on_its_port() {
        let (allowed, other, port) = twin_listeners().await;
        http_server(allowed).await;
        let other_hits = http_server(other).await;
        let plan = NetnsPlan::new(3128, &[]);
        let (child, proxy, forwards) = python_in_netns(
            &plan,
            PYTHON_CLIENT,
            &child_env(&[("P", port.to_string())], false),
        );
        let (events, told) = recorded();
        let egress = Egress::serve(
            proxy,
            forwards.into_iter().map(|l| (0, l)).collect(),
            rules(&[format!("http://127.0.0.1:{port}")]),
            events.clone(),
        );
        let out = wait_output(child).await;
        assert_eq!(
            out,
            format!(
                "200 hello from 127.0.0.1:{port} GET /hello?x=1 HTTP/1.1\n\
                 HTTP/1.1 200 Connection Established | hello from 127.0.0.1:{port} GET /tunnel HTTP/1.1\n\
                 403 127.0.0.2:{port} is not in capabilities.network.allow\n\
                 HTTP/1.1 403 Forbidden\n"
            )
        );
        let refusal = EgressRefusal {
            host: "127.0.0.2".into(),
            port,
            reason: NOT_ALLOWED.into(),
        };
        assert_eq!(events.refused_total(), 2);
        assert_eq!(events.allowed_total(), 2);
        assert_eq!(events.refused(), (vec![refusal.clone()], 0));
        assert_eq!(egress.refused(), vec![refusal.clone()]);
        assert_eq!(*told.lock().unwrap(), vec![refusal.clone(), refusal]);
        assert_eq!(
            other_hits.load(Ordering::Relaxed),
            0,
            "127.0.0.2 was reached"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn curl_in_the_namespace_goes_through_the_proxy_and_nowhere_else() {
        let (allowed, other, port) = twin_listeners().await;
        let hits = http_server(allowed).await;
        let other_hits = http_server(other).await;
        let script = format!(
            "curl -sS http://127.0.0.1:{port}/plain; \
             curl -sS -p http://127.0.0.1:{port}/tunnel; \
             curl -sS -w '%{{http_code}}\\n' http://127.0.0.2:{port}/other; \
             curl -sS -p http://127.0.0.2:{port}/other 2>&1 | tr -d '\\n'; echo; \
             curl -sS --noproxy '*' http://127.0.0.1:{port}/direct >/dev/null 2>&1; echo direct=$?"
        );
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args(["-c", &script])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(proxy_env(3128, false));
        let plan = NetnsPlan::new(3128, &[]);
        let (child, proxy, _) = spawn_in_netns(&plan, command).unwrap();
        let (events, _) = recorded();
        let _egress = Egress::serve(
            proxy,
            Vec::new(),
            rules(&[format!("127.0.0.1:{port}")]),
            events.clone(),
        );
        let out = wait_output(child).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            format!("hello from 127.0.0.1:{port} GET /plain HTTP/1.1"),
            "{out}"
        );
        assert_eq!(
            lines[1],
            format!("hello from 127.0.0.1:{port} GET /tunnel HTTP/1.1"),
            "{out}"
        );
        assert_eq!(
            lines[2],
            format!("127.0.0.2:{port} is not in capabilities.network.allow"),
            "{out}"
        );
        assert_eq!(lines[3], "403", "{out}");
        assert!(lines[4].contains("403"), "{out}");
        // Without the proxy: curl cannot connect (exit 7), there is no other route.
        assert_eq!(lines[5], "direct=7", "{out}");
        assert_eq!(hits.load(Ordering::Relaxed), 2);
        assert_eq!(other_hits.load(Ordering::Relaxed), 0);
        assert_eq!(events.refused_total(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_forwarded_port_reaches_the_hosts_listener_transparently() {
        let gateway = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = gateway.local_addr().unwrap().port();
        let hits = http_server(gateway).await;
        // A second forwarded port the rules do not allow.
        let unlisted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let unlisted_port = unlisted.local_addr().unwrap().port();
        let script = r#"
import os, socket, urllib.request
P, Q = int(os.environ["P"]), int(os.environ["Q"])
s = socket.create_connection(("127.0.0.1", P), timeout=10)
s.sendall(b"GET /raw HTTP/1.1\r\nHost: g\r\n\r\n")
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    c = s.recv(4096)
    if not c:
        break
    data += c
print(data.decode().split("\r\n\r\n", 1)[1].strip())
print(urllib.request.urlopen(f"http://127.0.0.1:{P}/no-proxy", timeout=10).read().decode().strip())
s = socket.create_connection(("127.0.0.1", Q), timeout=10)
try:
    print("unlisted", repr(s.recv(100)))
except OSError as e:
    print("unlisted", e.__class__.__name__)
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5)
    print("proxy connected")
except OSError as e:
    print("proxy", e.__class__.__name__)
"#;
        let plan = NetnsPlan::new(3128, &[port, unlisted_port]);
        let env = child_env(
            &[("P", port.to_string()), ("Q", unlisted_port.to_string())],
            true,
        );
        let (child, proxy, forwards) = python_in_netns(&plan, script, &env);
        // The proxy's own listener is closed: whatever arrives went through the forward.
        drop(proxy);
        let stand_in = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (events, told) = recorded();
        let forwards = plan
            .forwarded_ports()
            .iter()
            .copied()
            .zip(forwards)
            .collect();
        let egress = Egress::serve(
            stand_in,
            forwards,
            rules(&[format!("http://127.0.0.1:{port}")]),
            events.clone(),
        );
        let out = wait_output(child).await;
        assert_eq!(
            out,
            format!(
                "hello from 127.0.0.1:{port} GET /raw HTTP/1.1\n\
                 hello from 127.0.0.1:{port} GET /no-proxy HTTP/1.1\n\
                 unlisted b''\n\
                 proxy ConnectionRefusedError\n"
            )
        );
        assert_eq!(hits.load(Ordering::Relaxed), 2);
        assert_eq!(events.allowed_total(), 2);
        let refusal = EgressRefusal {
            host: "127.0.0.1".into(),
            port: unlisted_port,
            reason: NOT_ALLOWED.into(),
        };
        assert_eq!(*told.lock().unwrap(), vec![refusal]);
        // The host's listener on the unlisted port was never connected to.
        unlisted.set_nonblocking(true).unwrap();
        assert_eq!(
            unlisted.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(egress);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_child_sent_before_it_ended_is_delivered_when_it_is_finished() {
        // The host's listeners accept only once everything is over.
        let forwarded = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let forwarded_port = forwarded.local_addr().unwrap().port();
        let tunneled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tunneled_port = tunneled.local_addr().unwrap().port();
        let script = r#"
import os, socket
P, Q = int(os.environ["P"]), int(os.environ["Q"])
s = socket.create_connection(("127.0.0.1", P), timeout=10)
s.sendall(b"forwarded, then gone")
s.close()
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\ntunneled, then gone" % Q)
s.close()
print("sent")
"#;
        let plan = NetnsPlan::new(3128, &[forwarded_port]);
        let env = child_env(
            &[
                ("P", forwarded_port.to_string()),
                ("Q", tunneled_port.to_string()),
            ],
            true,
        );
        let (child, proxy, forwards) = python_in_netns(&plan, script, &env);
        // Nothing is served before the child has ended: all it did waits in the queues.
        assert_eq!(wait_output(child).await, "sent\n");
        let mut egress = Egress::serve(
            proxy,
            plan.forwarded_ports()
                .iter()
                .copied()
                .zip(forwards)
                .collect(),
            rules(&[
                format!("127.0.0.1:{forwarded_port}"),
                format!("127.0.0.1:{tunneled_port}"),
            ]),
            EgressEvents::default(),
        );
        let started = Instant::now();
        egress.finish(Duration::from_secs(10)).await;
        let finished = started.elapsed();
        let received = tokio::task::spawn_blocking(move || {
            [forwarded, tunneled].map(|listener| {
                listener.set_nonblocking(true).unwrap();
                let (mut stream, _) = listener.accept().expect("the host was connected to");
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let mut got = String::new();
                stream.read_to_string(&mut got).unwrap();
                got
            })
        })
        .await
        .unwrap();
        assert_eq!(received, ["forwarded, then gone", "tunneled, then gone"]);
        // Done when delivered, not at the bound.
        assert!(finished < Duration::from_secs(5), "{finished:?}");
    }

    /// A proxy on a host listener (the bounds do not depend on the namespace).
    fn host_proxy(rules_: Vec<NetworkRule>, limits: EgressLimits) -> (Egress, u16) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let egress = Egress::serve_with(
            listener,
            Vec::new(),
            rules_,
            EgressEvents::default(),
            limits,
        );
        (egress, port)
    }

    /// Sends `request` to the proxy at `port` and reads until it closes (at most 5 s).
    fn exchange(port: u16, request: &[u8]) -> String {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(request).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn status(answer: &str) -> &str {
        answer.lines().next().unwrap_or_default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_slow_oversized_and_unreachable_requests_are_answered_and_closed() {
        let closed_port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let limits = EgressLimits {
            head_timeout: Duration::from_millis(300),
            ..EgressLimits::default()
        };
        let (egress, port) = host_proxy(rules(&[format!("127.0.0.1:{closed_port}")]), limits);
        let answers = tokio::task::spawn_blocking(move || {
            [
                exchange(port, b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n"),
                exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                exchange(
                    port,
                    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
                ),
                exchange(port, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost:"),
                exchange(
                    port,
                    format!(
                        "GET http://a/ HTTP/1.1\r\nX: {}\r\n\r\n",
                        "y".repeat(20_000)
                    )
                    .as_bytes(),
                ),
                exchange(
                    port,
                    format!("CONNECT 127.0.0.1:{closed_port} HTTP/1.1\r\n\r\n").as_bytes(),
                ),
            ]
        })
        .await
        .unwrap();
        assert_eq!(
            status(&answers[0]),
            "HTTP/1.1 400 Bad Request",
            "{}",
            answers[0]
        );
        assert!(
            answers[0].ends_with("a port is required\n"),
            "{}",
            answers[0]
        );
        assert_eq!(status(&answers[1]), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(&answers[2]), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(&answers[3]), "HTTP/1.1 408 Request Timeout");
        assert_eq!(
            status(&answers[4]),
            "HTTP/1.1 431 Request Header Fields Too Large"
        );
        assert_eq!(
            status(&answers[5]),
            "HTTP/1.1 502 Bad Gateway",
            "{}",
            answers[5]
        );
        assert!(answers[5].contains("Connection refused"), "{}", answers[5]);
        assert_eq!(egress.events().refused_total(), 0);
        assert_eq!(egress.events().allowed_total(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_request_with_a_body_still_gets_its_answer() {
        let (egress, port) = host_proxy(Vec::new(), EgressLimits::default());
        // An uploader sends its head, then its body a piece at a time, and reads the answer
        // only once it has sent everything.
        let answer = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let pieces = 32;
            let head = format!(
                "POST http://a.example/upload HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                pieces * 1024
            );
            stream.write_all(head.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            for piece in 0..pieces {
                if let Err(error) = stream.write_all(&[b'x'; 1024]) {
                    panic!("piece {piece} of the body was refused: {error}");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer);
            String::from_utf8_lossy(&answer).into_owned()
        })
        .await
        .unwrap();
        assert_eq!(status(&answer), "HTTP/1.1 403 Forbidden");
        assert!(
            answer.ends_with("a.example:80 is not in capabilities.network.allow\n"),
            "{answer}"
        );
        assert_eq!(egress.events().refused_total(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn names_resolve_on_the_host_and_an_address_needs_an_entry_of_its_own() {
        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = server.local_addr().unwrap().port();
        http_server(server).await;
        let (egress, port) = host_proxy(
            rules(&[format!("localhost:{target}")]),
            EgressLimits::default(),
        );
        let answers = tokio::task::spawn_blocking(move || {
            [
                exchange(
                    port,
                    format!("GET http://LOCALHOST:{target}/n HTTP/1.1\r\n\r\n").as_bytes(),
                ),
                exchange(
                    port,
                    format!("GET http://127.0.0.1:{target}/a HTTP/1.1\r\n\r\n").as_bytes(),
                ),
                exchange(
                    port,
                    format!("GET http://localhost:{}/p HTTP/1.1\r\n\r\n", target ^ 1).as_bytes(),
                ),
            ]
        })
        .await
        .unwrap();
        assert!(
            answers[0].ends_with(&format!("hello from 127.0.0.1:{target} GET /n HTTP/1.1\n")),
            "{}",
            answers[0]
        );
        assert_eq!(status(&answers[1]), "HTTP/1.1 403 Forbidden");
        assert_eq!(status(&answers[2]), "HTTP/1.1 403 Forbidden");
        let (refused, more) = egress.events().refused();
        let refused: Vec<(String, u16)> = refused.into_iter().map(|r| (r.host, r.port)).collect();
        assert_eq!(
            refused,
            vec![
                ("127.0.0.1".to_string(), target),
                ("localhost".to_string(), target ^ 1)
            ]
        );
        assert_eq!(more, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_its_bound_the_proxy_answers_503_and_the_refused_list_is_bounded() {
        let limits = EgressLimits {
            max_connections: 1,
            head_timeout: Duration::from_secs(5),
            ..EgressLimits::default()
        };
        let (egress, port) = host_proxy(Vec::new(), limits);
        let answers = tokio::task::spawn_blocking(move || {
            // The first holds the only place (it sends nothing yet).
            let mut holder = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let busy = exchange(port, b"CONNECT a.example:443 HTTP/1.1\r\n\r\n");
            holder
                .write_all(b"CONNECT a.example:443 HTTP/1.1\r\n\r\n")
                .unwrap();
            let mut first = String::new();
            let _ = holder.read_to_string(&mut first);
            drop(holder);
            // Its place is free again.
            std::thread::sleep(Duration::from_millis(200));
            let after = exchange(port, b"CONNECT b.example:443 HTTP/1.1\r\n\r\n");
            (busy, first, after)
        })
        .await
        .unwrap();
        assert_eq!(status(&answers.0), "HTTP/1.1 503 Service Unavailable");
        assert_eq!(status(&answers.1), "HTTP/1.1 403 Forbidden");
        assert_eq!(status(&answers.2), "HTTP/1.1 403 Forbidden");
        assert_eq!(egress.events().busy_total(), 1);

        let events = EgressEvents::default();
        for i in 0..100u16 {
            events.on_refused(&format!("h{i}.example"), 443, NOT_ALLOWED);
            events.on_refused(&format!("h{i}.example"), 443, NOT_ALLOWED);
        }
        let (kept, more) = events.refused();
        // Every refusal of a destination past the first 64 is counted, not kept.
        assert_eq!(
            (kept.len(), more),
            (REFUSED_KEPT, 2 * (100 - REFUSED_KEPT as u64))
        );
        assert_eq!(kept[63].host, "h63.example");
        assert_eq!(events.refused_total(), 200);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_tunnel_is_closed_and_shutting_down_ends_the_rest() {
        // An echo server that never closes on its own.
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    std::future::pending::<()>().await;
                });
            }
        });
        let open_tunnel = move |port: u16| {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream
                .write_all(format!("CONNECT 127.0.0.1:{target} HTTP/1.1\r\n\r\nping").as_bytes())
                .unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let expected = b"HTTP/1.1 200 Connection Established\r\n\r\nping";
            let mut got = vec![0u8; expected.len()];
            stream.read_exact(&mut got).unwrap();
            assert_eq!(&got[..], &expected[..]);
            // The tunnel's last traffic: its idle time counts from here.
            (stream, Instant::now())
        };
        let limits = EgressLimits {
            idle_timeout: Duration::from_millis(400),
            ..EgressLimits::default()
        };
        let (_idle_egress, idle_port) = host_proxy(rules(&[format!("127.0.0.1:{target}")]), limits);
        let (egress, port) = host_proxy(
            rules(&[format!("127.0.0.1:{target}")]),
            EgressLimits::default(),
        );
        let ((mut idle, started), (mut busy, _)) =
            tokio::task::spawn_blocking(move || (open_tunnel(idle_port), open_tunnel(port)))
                .await
                .unwrap();
        let idle_end = tokio::task::spawn_blocking(move || {
            let mut rest = Vec::new();
            let read = idle.read_to_end(&mut rest);
            (read.map_err(|e| e.kind()), started.elapsed())
        })
        .await
        .unwrap();
        assert_eq!(idle_end.0, Ok(0));
        // Not at once: some time after its last traffic (400 ms, less the moment between the
        // proxy passing the echo on and this side reading it).
        assert!(idle_end.1 >= Duration::from_millis(200), "{:?}", idle_end.1);
        assert!(idle_end.1 < Duration::from_secs(3), "{:?}", idle_end.1);

        egress.shutdown().await;
        let ended = tokio::task::spawn_blocking(move || {
            let mut rest = Vec::new();
            let read = busy.read_to_end(&mut rest).map_err(|e| e.kind());
            let again = std::net::TcpStream::connect(("127.0.0.1", port))
                .map(|_| ())
                .map_err(|e| e.kind());
            (read, again)
        })
        .await
        .unwrap();
        assert_eq!(ended.0, Ok(0));
        assert_eq!(ended.1, Err(io::ErrorKind::ConnectionRefused));
    }
}
