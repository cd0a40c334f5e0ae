//! Peers that answer without end, through the real `mur`: an A2A agent whose answer, or one
//! event of whose stream, never ends (`mur send` refuses it with `E-A2A-016` once past 16 MiB,
//! having read little more), and push-notification webhooks that answer an endless body or
//! never answer (the door goes on serving its tasks; the stalled POST is given up within its
//! time limit). Every peer is a raw socket on 127.0.0.1 served by the test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use murmur_testkit::Mur;
use murmur_testkit::door::{Served, post};
use murmur_testkit::emulator::{Emulator, Script};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-hostile-peers";

/// Reads what a client sent until the end of its headers (and a little more), so the answer
/// does not race the request.
fn read_request(stream: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
        }
    }
}

/// A loopback server answering every request `head`, then `prefix` and an endless run of
/// `filler` bytes, until the client goes away; `sent` counts the bytes written, over all
/// connections.
fn endless_server(head: &'static str, prefix: &'static [u8], filler: u8) -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                read_request(&mut stream);
                let chunk = vec![filler; 64 * 1024];
                if stream.write_all(head.as_bytes()).is_err() || stream.write_all(prefix).is_err() {
                    return;
                }
                while stream.write_all(&chunk).is_ok() {
                    counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                }
            });
        }
    });
    (port, sent)
}

/// `mur send` to an agent whose answer never ends is refused with `E-A2A-016` (exit 3), having
/// read no more than the bound and what the sockets held: the agent was cut off.
#[test]
fn mur_send_refuses_an_endless_answer_and_an_endless_event() {
    for (stream, head, prefix) in [
        (
            false,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
            &b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": \""[..],
        ),
        (
            true,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
            &b"data: {\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": \""[..],
        ),
    ] {
        let (port, sent) = endless_server(head, prefix, b'x');
        let started = Instant::now();
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur")).args([
            "send",
            &format!("http://127.0.0.1:{port}/"),
            "--text",
            "hello",
        ]);
        if stream {
            mur = mur.arg("--stream");
        }
        let output = mur.run();
        let took = started.elapsed();
        assert_eq!(output.code, 3, "stream {stream}: {output:#?}");
        assert!(
            output.stderr.contains("error[E-A2A-016]")
                && output.stderr.contains("larger than 16 MiB"),
            "stream {stream}: {output:#?}"
        );
        assert!(took < Duration::from_secs(60), "stream {stream}: {took:?}");
        // What the agent got out: the bound, plus what loopback's socket buffers held.
        std::thread::sleep(Duration::from_millis(500));
        let sent = sent.load(Ordering::SeqCst);
        assert!(
            sent < 40 << 20,
            "stream {stream}: {} MiB went out",
            sent >> 20
        );
    }
}

/// A capsule on the emulator (replies `replies`) served on loopback, whose tasks may post
/// webhooks to `hook_port`.
fn served(replies: &[&str], hook_port: u16) -> (tempfile::TempDir, Emulator, Served) {
    let turns: Vec<Value> = replies
        .iter()
        .map(|text| json!({"reply": {"text": text}}))
        .collect();
    let emulator =
        Emulator::builder(Script::from_yaml(&json!({ "turns": turns }).to_string()).unwrap())
            .api_key(KEY)
            .start()
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = emulator.capsule_manifest(
        "notifier",
        "",
        &format!(
            "lifecycle: {{ task_acceptance: queue }}\ncapabilities:\n  network: {{ allow: [ \"http://127.0.0.1:{hook_port}\" ] }}"
        ),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    let served = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        dir.path(),
        &[("EMU_KEY", KEY)],
    );
    (dir, emulator, served)
}

fn rpc(served: &Served, body: &Value) -> Value {
    let (status, answer) = post(
        &format!("{}/", served.url),
        body.to_string().into_bytes(),
        &[],
    );
    assert_eq!(status, 200, "{answer:#}");
    answer
}

/// A task sent with a webhook at `hook`, waited for: its id, after checking it completed.
fn completed_with_hook(served: &Served, text: &str, hook: Option<String>) -> String {
    let mut params = json!({"message": {"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let Some(url) = hook {
        params["configuration"] = json!({"taskPushNotificationConfig": {"url": url, "token": "t"}});
    }
    let done = rpc(
        served,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}),
    );
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{done:#}\n{}",
        served.stderr()
    );
    done["result"]["task"]["id"].as_str().unwrap().to_string()
}

fn get_task(served: &Served, id: &str) -> Value {
    rpc(
        served,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}}),
    )
}

/// A webhook answering `200` and a body that never ends: the door reads none of it (the
/// connection is closed after the status), its tasks complete, and it goes on serving.
#[test]
fn a_webhook_answering_an_endless_body_costs_the_door_nothing() {
    let (port, sent) = endless_server(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
        b"",
        b'x',
    );
    let (_dir, _emulator, served) = served(&["First.", "Second."], port);
    let first = completed_with_hook(
        &served,
        "one",
        Some(format!("http://127.0.0.1:{port}/hook")),
    );
    let got = get_task(&served, &first);
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got:#}"
    );
    let second = completed_with_hook(&served, "two", None);
    assert_ne!(first, second);
    // Both notifications (working, completed) went out, each answered endlessly; the door
    // read no more than its sockets held.
    std::thread::sleep(Duration::from_secs(2));
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent < 40 << 20, "{} MiB went out", sent >> 20);
    assert!(
        !served.stderr().contains("W-A2A-011"),
        "a 200 is a delivery: {}",
        served.stderr()
    );
}

/// A webhook that takes the POST and never answers: the task completes and the door answers
/// GetTask and further tasks at once; the stalled POST is closed by the door within its 10 s
/// time limit (then tried again, and given up with `W-A2A-011`).
#[test]
fn a_webhook_that_never_answers_holds_no_task_and_is_cut_off() {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Of each connection: how long the door held it open.
    let held: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let record = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let record = record.clone();
            std::thread::spawn(move || {
                let accepted = Instant::now();
                stream
                    .set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let mut buffer = [0u8; 16 * 1024];
                // Read until the door closes (never answering).
                while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
                record.lock().unwrap().push(accepted.elapsed());
            });
        }
    });
    let (_dir, _emulator, served) = served(&["First.", "Second."], port);
    let started = Instant::now();
    let first = completed_with_hook(
        &served,
        "one",
        Some(format!("http://127.0.0.1:{port}/hook")),
    );
    let got = get_task(&served, &first);
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got:#}"
    );
    completed_with_hook(&served, "two", None);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the door waited on the webhook: {:?}",
        started.elapsed()
    );
    // The first POST is cut off at its time limit.
    let deadline = Instant::now() + Duration::from_secs(30);
    while held.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the door never let go of the webhook"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let first_held = held.lock().unwrap()[0];
    assert!(
        first_held >= Duration::from_secs(9) && first_held < Duration::from_secs(15),
        "held {first_held:?}"
    );
    // Still serving.
    let again = get_task(&served, &first);
    assert_eq!(again["result"]["id"], first.as_str(), "{again:#}");
}
