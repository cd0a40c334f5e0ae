//! The HTTP front every server of `mur` stands behind, attacked as a web page or a hostile
//! client would attack it: through raw sockets on loopback against the real `mur run --serve`
//! and `mur mcp serve`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::repo_root;
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-front";

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

/// A capsule that answers `first answer`, then `second answer`, with `door` as its `door:`.
fn capsule(door: &str) -> Capsule {
    let script =
        "turns:\n  - reply: { text: \"first answer\" }\n  - reply: { text: \"second answer\" }\n";
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = emulator.capsule_manifest(
        "fronted",
        "",
        &format!("lifecycle: {{ task_acceptance: queue }}\n{door}"),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

impl Capsule {
    fn serve(&self, extra: &[&str]) -> Served {
        Served::start_with_args(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY)],
            &murmur_testkit::shared_home(),
            extra,
        )
    }

    /// How many requests reached the model.
    fn model_calls(&self) -> usize {
        self.emulator.requests().len()
    }
}

fn mur() -> murmur_testkit::Mur {
    murmur_testkit::Mur::new(env!("CARGO_BIN_EXE_mur"))
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|port| port.trim_end_matches('/').parse().ok())
        .expect("a port in the door's URL")
}

/// A `SendMessage` asking `text`.
fn send(text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"blocking": true}}})
    .to_string()
}

/// The answer to a raw `POST /` carrying `headers` (each `Name: value`) and `body`: the status
/// and the whole answer.
fn raw_post(port: u16, headers: &[&str], body: &str) -> (u16, String) {
    raw_post_to(port, "/", headers, body)
}

/// The JSON body of a raw answer.
fn body_of(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or(Value::Null)
}

#[test]
fn a_web_page_cannot_start_a_task_on_a_door_without_auth() {
    let capsule = capsule("");
    let served = capsule.serve(&[]);
    let port = port_of(&served.url);
    let own_host = format!("Host: 127.0.0.1:{port}");
    let evil_host = format!("Host: evil.example:{port}");

    // What a page sends without a preflight: a "simple" text/plain POST from its own origin,
    // to a name it rebound to 127.0.0.1.
    let (status, answer) = raw_post(
        port,
        &[
            &evil_host,
            "Content-Type: text/plain",
            "Origin: http://evil.example",
        ],
        &send("delete everything"),
    );
    assert_eq!(status, 403, "{answer}");
    // Each check on its own.
    let (status, answer) = raw_post(
        port,
        &[&own_host, "Content-Type: text/plain"],
        &send("delete everything"),
    );
    assert_eq!(status, 415, "{answer}");
    assert_eq!(
        body_of(&answer)["error"]["code"],
        -32005,
        "a body that is not JSON is A2A's content-type error: {answer}"
    );
    let (status, answer) = raw_post(
        port,
        &[&evil_host, "Content-Type: application/json"],
        &send("delete everything"),
    );
    assert_eq!(status, 403, "a rebound name: {answer}");
    let (status, answer) = raw_post(
        port,
        &[
            &own_host,
            "Content-Type: application/json",
            "Origin: http://evil.example",
        ],
        &send("delete everything"),
    );
    assert_eq!(status, 403, "another page's origin: {answer}");
    let (status, answer) = raw_post(
        port,
        &[&own_host, "Content-Type: application/json", "Origin: null"],
        &send("delete everything"),
    );
    assert_eq!(status, 403, "an opaque origin: {answer}");
    assert_eq!(capsule.model_calls(), 0, "no refused request became a task");

    // A client that sends JSON properly, from the door's own page or none, is served.
    let (status, answer) = raw_post(
        port,
        &[
            &own_host,
            "Content-Type: application/json",
            &format!("Origin: http://127.0.0.1:{port}"),
        ],
        &send("hello"),
    );
    assert_eq!(status, 200, "{answer}");
    let task = &body_of(&answer)["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_eq!(capsule.model_calls(), 1);
    // The card, for discovery, is served to a client reaching the door by its address.
    let (status, _) = served.get("/.well-known/agent-card.json", &[]);
    assert_eq!(status, 200);
}

#[test]
fn names_and_pages_the_operator_lists_are_taken_and_answered_cors() {
    let capsule = capsule(
        "door:\n  allowed_hosts: [agent.internal]\n  allowed_origins: [\"https://console.example.com\"]",
    );
    let served = capsule.serve(&[]);
    let port = port_of(&served.url);
    let (status, answer) = raw_post(
        port,
        &[
            "Host: agent.internal",
            "Content-Type: application/json",
            "Origin: https://console.example.com",
        ],
        &send("hello"),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://console.example.com"),
        "{answer}"
    );
    // Its preflight is answered too; another page's is not.
    let preflight = |origin: &str| {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "OPTIONS / HTTP/1.1\r\nHost: agent.internal\r\nOrigin: {origin}\r\n\
             Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\
             Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let listed = preflight("https://console.example.com");
    assert!(listed.starts_with("HTTP/1.1 204"), "{listed}");
    assert!(
        listed
            .to_ascii_lowercase()
            .contains("access-control-allow-methods")
    );
    assert!(preflight("https://other.example.com").starts_with("HTTP/1.1 403"));

    // A manifest whose entries are no names or origins is refused before anything starts.
    let bad = capsule_dir_with("door:\n  allowed_origins: [\"*\"]\n  allowed_hosts: [\"a b\"]");
    let output = mur().args(["check", "--json"]).arg(bad.path()).run();
    let report = output.json();
    let codes: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert_eq!(codes, ["E-A2A-020", "E-A2A-020"], "{}", output.stdout);
}

/// A capsule directory whose manifest has `door` as its `door:` (not run).
fn capsule_dir_with(door: &str) -> tempfile::TempDir {
    let capsule = capsule(door);
    capsule.dir
}

/// A connection from `source` (a loopback address) to the door.
async fn connect_from(source: [u8; 4], port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
}

/// Whether the server has closed `stream` (it reads the end, or the connection is reset).
async fn closed_by_server(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buffer = [0u8; 512];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[test]
fn half_sent_requests_from_one_client_do_not_starve_the_others() {
    use tokio::io::AsyncWriteExt;
    let capsule = capsule("");
    let served = capsule.serve(&[]);
    let port = port_of(&served.url);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // 1,100 requests whose headers never end, from 127.0.0.2.
        let head = format!("POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: applic");
        let mut held = Vec::new();
        for _ in 0..1_100 {
            let Ok(mut stream) = connect_from([127, 0, 0, 2], port).await else {
                continue;
            };
            let _ = stream.write_all(head.as_bytes()).await;
            held.push(stream);
        }
        // A client elsewhere is answered at once.
        let started = Instant::now();
        let answer = tokio::task::spawn_blocking(move || {
            raw_post(
                port,
                &[
                    &format!("Host: 127.0.0.1:{port}"),
                    "Content-Type: application/json",
                ],
                &json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
                    .to_string(),
            )
        })
        .await
        .unwrap();
        assert_eq!(answer.0, 200, "{}", answer.1);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the other client waited {:?}",
            started.elapsed()
        );
        // Past its share (64 connections) the holder's connections were closed at once.
        let mut still_open = Vec::new();
        for mut stream in held {
            if !closed_by_server(&mut stream, Duration::from_millis(5)).await {
                still_open.push(stream);
            }
        }
        assert!(
            still_open.len() <= 64,
            "{} half-sent connections are held open",
            still_open.len()
        );
        assert!(!still_open.is_empty(), "its share was served");
        // And the share it kept is closed when its headers do not come in time (10 s).
        let mut open_after = 0;
        for stream in &mut still_open {
            if !closed_by_server(stream, Duration::from_secs(15)).await {
                open_after += 1;
            }
        }
        assert_eq!(
            open_after, 0,
            "half-sent requests outlived the header timeout"
        );
    });
    drop(served);
}

#[test]
fn an_mcp_client_holds_at_most_its_share_of_sessions() {
    let dir = tempfile::tempdir().unwrap();
    // Its model is never called.
    let emulator = Emulator::builder(Script::from_yaml("turns: []").unwrap())
        .start()
        .unwrap();
    let text = emulator.capsule_manifest(
        "mcp-front",
        &format!(
            "  - {{ name: read-file, version: \"0.1.0\", runtime: tool, path: \"{}\" }}",
            repo_root().join("artifacts/read-file").display()
        ),
        "",
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    let port = murmur_testkit::free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["mcp", "serve"])
        .arg(dir.path())
        .args(["--http", &format!("127.0.0.1:{port}"), "--workdir"])
        .arg(dir.path().join("sessions"))
        .env("MURMUR_MCP_TOKEN", "mcp-front-token")
        .env("EMU_KEY", "sk-unused")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "mur mcp serve did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "greedy", "version": "1"}}})
    .to_string();
    let open = |token: &str| {
        raw_post_to(
            port,
            "/mcp",
            &[
                &format!("Host: 127.0.0.1:{port}"),
                "Content-Type: application/json",
                "Accept: application/json, text/event-stream",
                &format!("Authorization: Bearer {token}"),
            ],
            &initialize,
        )
    };
    let mut sessions = Vec::new();
    for _ in 0..32 {
        let (status, answer) = open("mcp-front-token");
        assert_eq!(status, 200, "{answer}");
        let id = answer
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_string())
            })
            .expect("a session id");
        sessions.push(id);
    }
    let (status, answer) = open("mcp-front-token");
    assert_eq!(status, 429, "a 33rd session: {answer}");
    // A wrong token of another length is refused like any other.
    assert_eq!(open("x").0, 401);
    // A session deleted makes room for another.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer mcp-front-token\r\n\
         Mcp-Session-Id: {}\r\nConnection: close\r\n\r\n",
        sessions[0]
    )
    .unwrap();
    let mut deleted = String::new();
    let _ = stream.read_to_string(&mut deleted);
    assert!(deleted.starts_with("HTTP/1.1 2"), "{deleted}");
    assert_eq!(open("mcp-front-token").0, 200, "room was made");
    let _ = child.kill();
    let _ = child.wait();
}

/// [`raw_post`] to `path`.
fn raw_post_to(port: u16, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("POST {path} HTTP/1.1\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    // An SSE answer may stay open: read what comes within the timeout.
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
        if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"\n\n") {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files in `dir`.
fn certificate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = dir.join("door.crt");
    let key = dir.join("door.key");
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

#[test]
fn a_door_with_tls_is_reached_over_https_by_clients_that_trust_its_certificate() {
    let capsule = capsule("");
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(certs.path());
    let served = capsule.serve(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        served.url.starts_with("https://127.0.0.1:"),
        "{}",
        served.url
    );
    let port = port_of(&served.url);
    // Plain HTTP gets no answer from it.
    let (status, _) = raw_post(
        port,
        &[
            &format!("Host: 127.0.0.1:{port}"),
            "Content-Type: application/json",
        ],
        &send("hello"),
    );
    assert_eq!(status, 0, "a plain HTTP request was answered");
    let mur_send = |extra: &[&str]| {
        mur()
            .args(["send", &format!("{}/", served.url), "--text", "hello"])
            .args(extra)
            .run()
    };
    // A client that does not trust the certificate does not send the task.
    let untrusted = mur_send(&[]);
    assert!(untrusted.code != 0, "{}", untrusted.stdout);
    assert!(
        untrusted.stderr.contains("E-A2A-003") && untrusted.stderr.contains("certificate"),
        "{}",
        untrusted.stderr
    );
    assert_eq!(capsule.model_calls(), 0);
    let trusted = mur_send(&["--ca-file", cert.to_str().unwrap()]);
    assert!(trusted.code == 0, "{}", trusted.stderr);
    assert!(
        trusted.stdout.contains("first answer"),
        "{}",
        trusted.stdout
    );
    // The control plane on the same listener: `mur control` trusts the certificate the door
    // wrote beside its token, and no other.
    let control = mur()
        .args(["control", "show", "--json", &format!("{}/", served.url)])
        .run();
    assert_eq!(control.code, 0, "{}", control.stderr);
    assert!(control.json()["settings"].is_object(), "{}", control.stdout);
    // A key that is not the certificate's is refused before the door listens.
    let other = tempfile::tempdir().unwrap();
    let (_, other_key) = certificate(other.path());
    let refused = mur()
        .env("EMU_KEY", KEY)
        .args(["run", "--serve"])
        .arg(capsule.dir.path())
        .args(["--tls-cert", cert.to_str().unwrap(), "--tls-key"])
        .arg(&other_key)
        .run();
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("E-A2A-021"), "{}", refused.stderr);
}

#[test]
fn a_capsule_delegates_over_https_only_to_a_peer_whose_certificate_it_trusts() {
    let peer = capsule("");
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(certs.path());
    let peer_served = peer.serve(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let peer_url = format!("{}/", peer_served.url);
    let script = "turns:\n  - reply: { tool_calls: [ { id: d1, name: ask-geographer, input: { message: \"What is the capital of Peru?\" } } ] }\n  - reply: { text: done }\n";
    let delegate = |ca_file: Option<&Path>| {
        let emulator = Emulator::builder(Script::from_yaml(script).unwrap())
            .api_key(KEY)
            .start()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let text = emulator.capsule_manifest(
            "delegator",
            "",
            &format!(
                "capabilities:\n  network: {{ allow: [\"{}\"] }}\npeers:\n  - {{ url: \"{peer_url}\", name: geographer, description: \"Knows capitals.\", bearer: \"${{GEO_TOKEN}}\" }}",
                peer_served.url
            ),
        );
        std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
        let mut run = mur()
            .env("EMU_KEY", KEY)
            .env("GEO_TOKEN", "geo-token-0123")
            .args(["run", "--task", "Ask the geographer.", "--workdir"])
            .arg(dir.path().join("work"))
            .arg(dir.path());
        if let Some(ca_file) = ca_file {
            run = run.env("MURMUR_CA_FILE", ca_file);
        }
        let ran = run.run();
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        // What the sender's model was told of the send.
        emulator.requests()[1].body.to_string()
    };
    let untrusted = delegate(None);
    assert!(
        untrusted.contains("invalid peer certificate"),
        "{untrusted}"
    );
    assert_eq!(peer.model_calls(), 0, "nothing reached a peer not trusted");
    let trusted = delegate(Some(&cert));
    assert!(
        trusted.contains("The peer `geographer` answered") && trusted.contains("first answer"),
        "{trusted}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while peer.model_calls() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(peer.model_calls(), 1, "the trusted peer took the task");
}

#[test]
fn a_door_beyond_loopback_without_tls_needs_insecure_no_tls() {
    let capsule = capsule("door:\n  auth:\n    - { principal: ops, bearer: \"${OPS_TOKEN}\" }");
    let refused = mur()
        .env("EMU_KEY", KEY)
        .env("OPS_TOKEN", "ops-front-token")
        .args(["run", "--serve", "--host", "0.0.0.0"])
        .arg(capsule.dir.path())
        .run();
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("E-A2A-022"), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--insecure-no-tls"),
        "{}",
        refused.stderr
    );
    let served = Served::start_with_args(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        capsule.dir.path(),
        &[("EMU_KEY", KEY), ("OPS_TOKEN", "ops-front-token")],
        &murmur_testkit::shared_home(),
        &["--host", "0.0.0.0", "--insecure-no-tls"],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !served.stderr().contains("W-A2A-023") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(served.stderr().contains("W-A2A-023"), "{}", served.stderr());
}
