//! Escape cases: the A2A door. A hostile client sends ids that would be paths (absolute, `..`,
//! too long, holding a NUL), page tokens and `Last-Event-ID`s that are not what the door gave,
//! and headers claiming a peer's trust; and an operator asks the door to listen beyond
//! loopback. Each id is refused with invalid-params naming its field before anything uses it,
//! nothing outside the workdir is read or written, the door keeps serving, claimed trust is
//! recorded and never granted, and the trace is whole.

use std::path::{Path, PathBuf};

use murmur_testkit::door::{Served, post};
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, repo_root};
use serde_json::{Value, json};

use super::workdir::whole_trace;

const KEY: &str = "sk-emulator-escape-door";
const SECRET: &str = "the host's secret history";

/// A served capsule (threaded conversations, a queue of tasks) in a temp dir, with `victim/`
/// beside it: a directory outside the workdir holding a planted `ctx/history.json`.
struct Door {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

impl Door {
    fn new(script: &str) -> Door {
        let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
            .api_key(KEY)
            .start()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("victim/ctx");
        std::fs::create_dir_all(&planted).unwrap();
        let history = json!([{ "role": "user", "content": [{ "type": "text", "text": SECRET }] }]);
        std::fs::write(planted.join("history.json"), history.to_string()).unwrap();
        let text = format!(
            r#"name: doorway
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
lifecycle: {{ task_acceptance: queue, conversation: threaded }}
"#,
            driver = repo_root().join("artifacts/driver-anthropic").display(),
            endpoint = emulator.url(),
        );
        std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
        Door { dir, emulator }
    }

    fn victim(&self) -> PathBuf {
        self.dir.path().join("victim")
    }

    fn serve(&self) -> Served {
        Served::start(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY)],
        )
    }

    /// The served session's trace, whole and ended.
    fn trace(&self) -> Vec<Value> {
        let session = std::fs::read_dir(self.dir.path().join("work"))
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with("ses_"))
            .expect("a session directory")
            .path();
        whole_trace(&session.join("trace.jsonl"))
    }

    /// `victim/` holds only what was planted, unchanged.
    fn assert_victim_untouched(&self) {
        let mut found = Vec::new();
        let mut stack = vec![self.victim()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    found.push(path.strip_prefix(self.victim()).unwrap().to_path_buf());
                }
            }
        }
        assert_eq!(
            found,
            vec![PathBuf::from("ctx/history.json")],
            "written outside"
        );
    }

    fn assert_secret_never_read(&self) {
        for request in self.emulator.requests() {
            assert!(
                !request.body.to_string().contains(SECRET),
                "a history outside the workdir reached the model"
            );
        }
    }
}

fn send(message: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": { "message": message }})
}

fn message(extra: Value) -> Value {
    let mut message = json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    for (key, value) in extra.as_object().unwrap() {
        message[key] = value.clone();
    }
    message
}

fn call(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

/// The answer is JSON-RPC -32602 and its message names `field`.
fn assert_invalid_params(answer: &Value, field: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{field}: {answer:#}");
    let text = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains(field), "{field} not named: {answer:#}");
}

#[test]
fn ids_that_would_be_paths_are_refused_before_use_and_the_door_keeps_serving() {
    let door = Door::new("turns:\n  - reply: { text: \"fine\" }\n");
    let mut served = door.serve();
    let outside = door.victim().join("ctx");
    let outside = outside.to_str().unwrap();
    let long = "c".repeat(300);
    let hostile_ids = [
        outside,
        "../../victim/ctx",
        "..",
        ".hidden",
        "a\u{0}b",
        &long,
    ];
    for bad in hostile_ids {
        let (_, answer) = served.rpc(&send(message(json!({ "contextId": bad }))));
        assert_invalid_params(&answer, "message.contextId");
        let (_, answer) = served.rpc(&send(message(json!({ "messageId": bad }))));
        assert_invalid_params(&answer, "message.messageId");
        let (_, answer) = served.rpc(&send(message(json!({ "taskId": bad }))));
        assert_invalid_params(&answer, "message.taskId");
        let (_, answer) = served.rpc(&send(message(json!({ "referenceTaskIds": ["ok", bad] }))));
        assert_invalid_params(&answer, "message.referenceTaskIds[1]");
        for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
            let (_, answer) = served.rpc(&call(method, json!({ "id": bad })));
            assert_invalid_params(&answer, "id");
        }
        let (_, answer) = served.rpc(&call("ListTasks", json!({ "contextId": bad })));
        assert_invalid_params(&answer, "contextId");
    }
    for token in ["abc", "-1", "1e3", "99999999999999999999999"] {
        let (_, answer) = served.rpc(&call("ListTasks", json!({ "pageToken": token })));
        assert_invalid_params(&answer, "pageToken");
    }
    // The 0.3 names are held to the same rule.
    let (_, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "m-1", "role": "user",
        "contextId": outside, "parts": [{"kind": "text", "text": "hi"}]}}}));
    assert_invalid_params(&answer, "message.contextId");

    // Nothing was taken: no task exists, and a well-formed task still runs.
    let (_, listed) = served.rpc(&call("ListTasks", json!({})));
    assert_eq!(listed["result"]["totalSize"], 0, "{listed:#}");
    let (_, done) = served.rpc(&send(message(json!({ "contextId": "ctx-plain" }))));
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    served.stop();
    door.assert_victim_untouched();
    door.assert_secret_never_read();
    assert_eq!(door.emulator.requests().len(), 1);
    let trace = door.trace();
    let started: Vec<&Value> = trace
        .iter()
        .filter(|e| e["event_type"] == "task_start")
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["context_id"], "ctx-plain");
}

#[test]
fn a_last_event_id_the_stream_never_sent_is_refused() {
    let door = Door::new("turns:\n  - reply: { text: \"slow\" }\n    first_byte_delay_ms: 3000\n");
    let mut served = door.serve();
    let mut request = send(message(json!({})));
    request["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, accepted) = served.rpc(&request);
    let task_id = accepted["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for bad in ["abc", "-1", "18446744073709551616", "999999"] {
        let (_, answer) = post(
            &format!("{}/", served.url),
            call("SubscribeToTask", json!({ "id": task_id }))
                .to_string()
                .into_bytes(),
            &[("Last-Event-ID", bad)],
        );
        assert_invalid_params(&answer, "Last-Event-ID");
    }
    // A number the stream did send is taken.
    let resumed = served.stream(
        &call("SubscribeToTask", json!({ "id": task_id })),
        &[("Last-Event-ID", "0")],
    );
    assert!(
        resumed
            .iter()
            .any(|e| e.data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"),
        "{resumed:?}"
    );
    served.stop();
    door.trace();
}

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

#[test]
fn claimed_peer_trust_is_recorded_and_never_granted() {
    let door = Door::new("turns:\n  - reply: { text: ok }\n");
    let mut served = door.serve();
    let (_, done) = post(
        &format!("{}/", served.url),
        send(message(json!({}))).to_string().into_bytes(),
        &[
            ("x-murmur-task-origin", "peer"),
            (
                "x-murmur-task-trust",
                &format!("operator{}", "!".repeat(500)),
            ),
            ("traceparent", TRACEPARENT),
        ],
    );
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    served.stop();
    let trace = door.trace();
    let received = trace
        .iter()
        .find(|e| e["event_type"] == "a2a_task_received")
        .expect("a2a_task_received");
    assert_eq!(received["origin"], "client");
    assert_eq!(received["trust"], "external");
    assert_eq!(received["claimed_origin"], "peer");
    let claimed = received["claimed_trust"].as_str().unwrap();
    assert!(claimed.starts_with("operator!"), "{claimed}");
    assert_eq!(claimed.chars().count(), 128, "a claim is kept bounded");
    // What is not a grant is still recorded as received.
    assert_eq!(received["traceparent"], TRACEPARENT);
    assert_eq!(received["method"], "SendMessage");
}

#[test]
fn a_door_beyond_loopback_needs_insecure_no_auth_and_says_so_loudly() {
    let door = Door::new("turns:\n  - reply: { text: ok }\n");
    for host in ["0.0.0.0", "::", "192.0.2.1"] {
        let refused = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .args(["run", "--serve", "--json", "--host", host])
            .arg(door.dir.path())
            .arg("--workdir")
            .arg(door.dir.path().join("work"))
            .run();
        assert_eq!(refused.code, 1, "{host}: {refused:#?}");
        assert_eq!(refused.json()["error"]["code"], "E-A2A-005", "{refused:#?}");
        assert!(!refused.stdout.contains("listening on"), "{refused:#?}");
    }
    // With the flag it goes on, warning first (192.0.2.1 is a documentation address no machine
    // has, so the door then cannot listen: nothing is ever served beyond loopback here).
    let allowed = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--serve", "--json", "--insecure-no-auth"])
        .args(["--host", "192.0.2.1"])
        .arg(door.dir.path())
        .arg("--workdir")
        .arg(door.dir.path().join("work"))
        .run();
    assert!(
        allowed.stderr.contains("warning[W-A2A-006]"),
        "{allowed:#?}"
    );
    assert_eq!(allowed.json()["error"]["code"], "E-A2A-001", "{allowed:#?}");
    // On loopback the card names where the door listens.
    let mut served = door.serve();
    let (_, card) = served.get("/.well-known/agent-card.json", &[]);
    let url = card["supportedInterfaces"][0]["url"].as_str().unwrap();
    assert_eq!(url, format!("{}/", served.url), "{card:#}");
    served.stop();
    door.trace();
}

#[test]
fn a_task_streaming_7_mb_keeps_a_bounded_copy_and_lists_in_bounded_pages() {
    // 7,000 words of 999 bytes (7 MB; a driver answer holds at most 10 MiB): 3,500 chunks.
    let word = "w".repeat(999);
    let answer = format!("{word} ").repeat(7_000);
    let script = serde_json::to_string(&json!({"turns": [{"reply": {"text": answer}}]})).unwrap();
    let door = Door::new(&script);
    let mut served = door.serve();
    let (_, done) = served.rpc(&send(message(json!({}))));
    let task = &done["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{}",
        task["status"]
    );
    let limit = 4 * 1024 * 1024;
    let kept = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(kept.len() <= limit + 200, "{} bytes kept", kept.len());
    assert!(
        kept.contains("more bytes were streamed"),
        "{}",
        &kept[kept.len() - 200..]
    );
    let status = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        status.len() <= limit + 200,
        "{} bytes in the status",
        status.len()
    );
    let (_, listed) = served.rpc(&call("ListTasks", json!({"includeArtifacts": true})));
    assert!(
        listed.to_string().len() < 10 * 1024 * 1024,
        "a ListTasks answer of {} bytes",
        listed.to_string().len()
    );
    served.stop();
    // The session's own files keep the whole answer.
    let trace = door.trace();
    let end = trace
        .iter()
        .find(|e| e["event_type"] == "task_end")
        .unwrap();
    let result = std::fs::read_to_string(end["result_path"].as_str().unwrap()).unwrap();
    assert_eq!(result.trim_end(), answer.trim_end());
}

#[test]
fn past_a_thousand_unfinished_tasks_a_new_one_is_refused_and_the_door_goes_on() {
    // The model takes longer on the first task than the test can last (sending a thousand
    // tasks on a loaded machine has taken over a minute): the rest wait in the queue.
    let door =
        Door::new("turns:\n  - reply: { text: \"slow\" }\n    first_byte_delay_ms: 900000\n");
    let mut served = door.serve();
    let mut request = send(message(json!({})));
    request["params"]["configuration"] = json!({"returnImmediately": true});
    for n in 0..1000 {
        let (_, accepted) = served.rpc(&request);
        assert!(accepted.get("result").is_some(), "task {n}: {accepted:#}");
    }
    // The capsule unavailable for now, as a full queue is: -32603, which a client may send
    // again on (not -32004, an operation it should never try again).
    let (_, refused) = served.rpc(&request);
    assert_eq!(refused["error"]["code"], -32603, "{refused:#}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("1000 tasks that have not ended") && why.contains("send again"),
        "{refused:#}"
    );
    let (_, listed) = served.rpc(&call("ListTasks", json!({"pageSize": 100})));
    assert_eq!(listed["result"]["totalSize"], 1000);
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 100);
    assert_eq!(listed["result"]["nextPageToken"], "100");
    // A task that ends makes room for the next.
    let waiting = listed["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["status"]["state"] == "TASK_STATE_SUBMITTED")
        .expect("a waiting task");
    let (_, canceled) = served.rpc(&call("CancelTask", json!({"id": waiting["id"]})));
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let (_, taken) = served.rpc(&request);
    assert_eq!(
        taken["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{taken:#}"
    );
    served.stop();
    door.trace();
}
