//! A loopback HTTP server that answers every request with a fixed body (or, started with
//! [`RecordingServer::serve_dir`], with the files of a directory) and records what reached it:
//! each accepted TCP connection and each request (method, path, headers, body).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::serve::ListenerExt;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Recorded {
    connections: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    body: String,
    /// Serve the files under this directory instead of `body` (404 for anything else).
    root: Option<std::path::PathBuf>,
    /// Answer the first this many requests `503 Service Unavailable` (they are recorded too).
    fail_first: usize,
}

/// A server on 127.0.0.1 with an OS-assigned port. Stops when dropped.
pub struct RecordingServer {
    addr: SocketAddr,
    recorded: Arc<Recorded>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordingServer {
    /// Starts a server answering `200 OK` with `body` to every request.
    pub fn start(body: &str) -> RecordingServer {
        RecordingServer::start_with(Recorded {
            body: body.to_string(),
            ..Recorded::default()
        })
    }

    /// Starts a server answering the first `fail_first` requests `503 Service Unavailable`,
    /// then `200 OK` with `body`: a webhook that is down for a while.
    pub fn start_failing(body: &str, fail_first: usize) -> RecordingServer {
        RecordingServer::start_with(Recorded {
            body: body.to_string(),
            fail_first,
            ..Recorded::default()
        })
    }

    /// Starts a server answering `GET /<path>` with the file at `<root>/<path>` (404 when there
    /// is none, or when the path leaves `root`): a static registry, say.
    pub fn serve_dir(root: impl Into<std::path::PathBuf>) -> RecordingServer {
        RecordingServer::start_with(Recorded {
            root: Some(root.into()),
            ..Recorded::default()
        })
    }

    fn start_with(recorded: Recorded) -> RecordingServer {
        let recorded = Arc::new(recorded);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let state = recorded.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("test server runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("binding a loopback port");
                addr_tx
                    .send(listener.local_addr().expect("local address"))
                    .expect("reporting the address");
                let counter = state.clone();
                let listener = listener.tap_io(move |_| {
                    counter.connections.fetch_add(1, Ordering::SeqCst);
                });
                let app = axum::Router::new().fallback(record).with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = shutdown_rx.await;
                    })
                    .await
                    .expect("serving");
            });
        });
        let addr = addr_rx.recv().expect("the test server's address");
        RecordingServer {
            addr,
            recorded,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.recorded.connections.load(Ordering::SeqCst)
    }

    /// Requests received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.recorded
            .requests
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn record(
    State(recorded): State<Arc<Recorded>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let request = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    };
    let seen = {
        let mut requests = recorded
            .requests
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        requests.push(request);
        requests.len()
    };
    if seen <= recorded.fail_first {
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
    }
    let Some(root) = &recorded.root else {
        return recorded.body.clone().into_response();
    };
    let relative = uri.path().trim_start_matches('/');
    let inside = std::path::Path::new(relative)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    match std::fs::read(root.join(relative)) {
        Ok(bytes) if inside && !relative.is_empty() => bytes.into_response(),
        _ => (axum::http::StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
