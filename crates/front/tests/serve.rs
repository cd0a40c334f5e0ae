//! The front over real sockets on loopback, with short limits: what a slow or greedy client
//! gets, and that the server behind it is reached as usual.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use murmur_front::{Front, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SHORT: Duration = Duration::from_millis(300);

fn router() -> Router {
    Router::new()
        .route(
            "/",
            post(|body: Body| async move {
                match axum::body::to_bytes(body, 1 << 20).await {
                    Ok(bytes) => format!("read {} bytes", bytes.len()),
                    Err(_) => "the body broke off".to_string(),
                }
            }),
        )
        .route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
        )
}

/// Serves [`router`] behind a front with `limits` (and `tls`) until the returned
/// sender is dropped.
async fn serve(
    limits: Limits,
    tls: Option<&murmur_front::tls::Tls>,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let mut front = Front::new(address, &[], &[]);
    front.limits = limits;
    if let Some(tls) = tls {
        front = front.with_tls(tls);
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(murmur_front::serve(listener, router(), front, async {
        let _ = stopped.await;
    }));
    (address.port(), stop, server)
}

fn short_limits() -> Limits {
    Limits {
        header_timeout: SHORT,
        body_timeout: SHORT,
        connections: 8,
        connections_per_address: 2,
    }
}

/// Everything the server sends until it closes the connection, and how long that took;
/// `None` when it is still open after `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<(String, Duration)> {
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let left = within.checked_sub(started.elapsed())?;
        match tokio::time::timeout(left, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => {
                return Some((
                    String::from_utf8_lossy(&seen).to_string(),
                    started.elapsed(),
                ));
            }
            Ok(Ok(n)) => seen.extend_from_slice(&buffer[..n]),
        }
    }
}

#[tokio::test]
async fn a_request_whose_headers_do_not_come_in_time_is_closed() {
    let (port, _stop, _server) = serve(short_limits(), None).await;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let (_, after) = until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("the half-sent request's connection was closed");
    assert!(after >= SHORT / 2, "closed after {after:?}");
}

#[tokio::test]
async fn a_body_that_does_not_come_in_time_fails_and_is_not_waited_for() {
    let (port, _stop, _server) = serve(short_limits(), None).await;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"half\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (answer, after) = until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("the slow body's connection was closed");
    assert!(!answer.contains("read 100 bytes"), "{answer}");
    assert!(after < Duration::from_secs(3), "closed after {after:?}");
}

#[tokio::test]
async fn connections_past_an_addresss_share_are_answered_503_and_closed() {
    let (port, _stop, _server) = serve(short_limits(), None).await;
    let _first = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let _second = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // Let the server take both before the third comes.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut third = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (answer, _) = until_closed(&mut third, Duration::from_secs(2))
        .await
        .expect("the third connection was closed at once");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
}

#[tokio::test]
async fn a_request_within_the_rules_reaches_the_server_with_its_clients_address() {
    let (port, stop, server) = serve(Limits::default(), None).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let answer = reqwest::get(format!("http://127.0.0.1:{port}/peer"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(answer, "127.0.0.1");
    let posted = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/"))
        .header("content-type", "application/json")
        .body("{\"whole\": true}")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(posted, "read 15 bytes");
    // Stopped, the server lets idle connections go and returns.
    drop(stop);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stopped")
        .unwrap();
}

/// A self-signed certificate for 127.0.0.1.
fn self_signed() -> rcgen::CertifiedKey<rcgen::KeyPair> {
    rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap()
}

/// `cert`'s certificate and `key`'s private key as `cert.pem` and `key.pem` in `dir`.
fn write_pem(
    dir: &std::path::Path,
    cert: &rcgen::CertifiedKey<rcgen::KeyPair>,
    key: &rcgen::CertifiedKey<rcgen::KeyPair>,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert_file, key_file) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, key.signing_key.serialize_pem()).unwrap();
    (cert_file, key_file)
}

#[tokio::test]
async fn a_tls_handshake_that_does_not_come_in_time_is_closed_and_one_that_does_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let made = self_signed();
    let (cert, key) = write_pem(dir.path(), &made, &made);
    let tls = murmur_front::tls::Tls::read(&cert, &key).unwrap();
    assert!(tls.chain_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    let (port, _stop, _server) = serve(short_limits(), Some(&tls)).await;
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    until_closed(&mut silent, Duration::from_secs(5))
        .await
        .expect("a connection that never says hello is closed");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(tls.chain_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let answer = client
        .get(format!("https://127.0.0.1:{port}/peer"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(answer, "127.0.0.1");
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused_naming_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = write_pem(dir.path(), &self_signed(), &self_signed());
    let error = murmur_front::tls::Tls::read(&cert, &key).unwrap_err();
    assert!(
        error.0.contains("cert.pem") && error.0.contains("key.pem"),
        "{error}"
    );
    std::fs::write(&cert, "not a certificate").unwrap();
    let error = murmur_front::tls::Tls::read(&cert, &key).unwrap_err();
    assert!(error.0.contains("no certificate"), "{error}");
}
