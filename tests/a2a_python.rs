//! Interop with the official A2A Python SDK (`a2a-sdk`, pinned in tests/python/a2a/requirements.txt):
//! its real client (card resolver, client factory, JSON-RPC transport, SSE parsing) drives
//! `mur run --serve` through a human-in-the-loop task and a cancel, once in A2A 1.0 and once
//! through the SDK's v0.3 compat transport (which the SDK picks from the 0.3 agent card). The
//! client side is tests/python/a2a/a2a_sdk_client.py, which prints one JSON line per event it
//! observed; this test serves the capsule, runs it, and checks those lines.
//!
//! A door guarded by `door.auth` (a bearer) is driven too, from the discovery card (fetched
//! with no `A2A-Version` header) by both that SDK and the SDK of the 0.3 line (`a2a-sdk` 0.3.26,
//! pinned in tests/python/a2a03/requirements.txt, client tests/python/a2a03/a2a03_client.py):
//! with the bearer every call works; without it every send is a 401.
//!
//! The venvs come from `scripts/python-env a2a a2a03`; without them these tests fail (never
//! skip).

use std::path::{Path, PathBuf};
use std::process::Command;

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::repo_root;
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-a2a-python";
/// The bearer of the guarded capsule's `ops` principal (its `OPS_TOKEN`).
const OPS: &str = "ops-token-a2a-python-0123456789";

/// The `door` section of a capsule whose every JSON-RPC call must carry `OPS_TOKEN`'s bearer.
const BEARER_DOOR: &str = r#"door:
  auth:
    - { principal: ops, bearer: "${OPS_TOKEN}" }
"#;

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

/// A capsule with the Anthropic driver pointed at an emulator playing `script`, and the probe
/// tool (whose `request_input` action asks the human).
fn capsule(script: &str) -> Capsule {
    capsule_with(script, "")
}

/// [`capsule`] with `extra` manifest text at its end (a `door` section, say).
fn capsule_with(script: &str, extra: &str) -> Capsule {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    let text = format!(
        r#"name: sdk-interop
version: "0.1.0"
description: A capsule driven by the A2A Python SDK.
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
lifecycle: {{ task_acceptance: queue }}
{extra}"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        probe = root.join("tests/fixtures/probe").display(),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

impl Capsule {
    fn serve(&self) -> Served {
        Served::start(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY), ("OPS_TOKEN", OPS)],
        )
    }
}

/// One of the SDKs: the folder of tests/python that pins it (and names its venv,
/// `target/<folder>-python-venv`), its client script there, and the A2A protocol it speaks
/// when it picks from the discovery card.
#[derive(Clone, Copy)]
struct Sdk {
    folder: &'static str,
    client: &'static str,
    /// The protocol version it must read from the card.
    protocol: &'static str,
    /// The JSON-RPC methods of its send, streamed send, get-task and cancel.
    methods: [&'static str; 4],
    /// The `A2A-Version` header its calls carry.
    version_header: Option<&'static str>,
}

/// a2a-sdk 1.x (tests/python/a2a).
const SDK_1: Sdk = Sdk {
    folder: "a2a",
    client: "a2a_sdk_client.py",
    protocol: "1.0",
    methods: [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "CancelTask",
    ],
    version_header: Some("1.0"),
};

/// a2a-sdk 0.3.26, the 0.3 line (tests/python/a2a03).
const SDK_03: Sdk = Sdk {
    folder: "a2a03",
    client: "a2a03_client.py",
    protocol: "0.3",
    methods: [
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
    ],
    version_header: None,
};

/// The venv's Python. Its stamp is written by `scripts/python-env <folder>` only once every
/// pinned package is installed (the client itself checks that the pinned a2a-sdk is the one
/// there).
fn venv_python(sdk: Sdk) -> PathBuf {
    let venv = repo_root().join(format!("target/{}-python-venv", sdk.folder));
    let python = venv.join("bin/python");
    assert!(
        python.exists() && venv.join(".requirements.sha256").exists(),
        "{} is missing or half-installed: run `scripts/python-env {}` (it installs the pinned \
         A2A Python SDK from tests/python/{}/requirements.txt) and run this test again",
        venv.display(),
        sdk.folder,
        sdk.folder
    );
    python
}

/// Runs the SDK client's `scenario` against the door, in A2A `protocol` (`1.0` or `0.3`); the
/// JSON lines it printed.
fn sdk_client(served: &Served, scenario: &str, protocol: &str) -> Vec<Value> {
    run_client(SDK_1, served, &[scenario, protocol])
}

/// Runs `sdk`'s client with `args` after the door's URL; the JSON lines it printed. It must
/// exit 0.
fn run_client(sdk: Sdk, served: &Served, args: &[&str]) -> Vec<Value> {
    let python = venv_python(sdk);
    let output = Command::new(&python)
        .arg(
            repo_root()
                .join("tests/python")
                .join(sdk.folder)
                .join(sdk.client),
        )
        .arg(&served.url)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let shown: Vec<&str> = args
        .iter()
        .map(|a| if *a == OPS { "<OPS_TOKEN>" } else { a })
        .collect();
    assert!(
        output.status.success(),
        "the A2A SDK client {} failed ({}) with {shown:?}\n--- stdout\n{stdout}--- stderr\n{stderr}\n--- mur stderr\n{}",
        sdk.client,
        output.status,
        served.stderr()
    );
    stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect()
}

/// The lines of one `event`.
fn lines<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == event).collect()
}

/// The task states the lines of `event` carried, in order, repeats folded.
fn states(all: &[Value], event: &str) -> Vec<String> {
    let mut states: Vec<String> = Vec::new();
    for line in lines(all, event) {
        if let Some(state) = line["state"].as_str()
            && states.last().map(String::as_str) != Some(state)
        {
            states.push(state.to_string());
        }
    }
    states
}

/// Asserts that `seen` follows `expected` in order and ends on its last state. A stream opens
/// with the task as it stands when it is first read, so it may start past the first states.
fn assert_states(seen: &[String], expected: &[&str], all: &[Value]) {
    let mut rest = expected.iter();
    assert!(
        seen.iter().all(|state| rest.any(|e| e == state)),
        "states {seen:?} out of the order {expected:?}\n{all:#?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        expected.last().copied(),
        "{all:#?}"
    );
}

fn the_card_was_resolved(all: &[Value], served: &Served, protocol: &str) {
    let card = lines(all, "card");
    assert_eq!(card.len(), 1, "{all:#?}");
    assert_eq!(card[0]["name"], "sdk-interop");
    assert_eq!(card[0]["streaming"], true);
    let interface = &card[0]["interfaces"][0];
    assert_eq!(interface["url"], format!("{}/", served.url), "{card:#?}");
    assert_eq!(interface["binding"], "JSONRPC", "{card:#?}");
    assert!(
        interface["version"].as_str().unwrap().starts_with(protocol),
        "{card:#?}"
    );
}

const ASKS_FOR_INPUT: &str = r#"
turns:
  - reply: { text: "Let me ask.", tool_calls: [ { id: ask, name: probe, input: { action: request_input, prompt: "Which color?" } } ] }
  - reply: { text: "Painted the fence blue." }
"#;

#[test]
fn the_python_sdk_streams_a_task_through_input_required_to_its_answer() {
    input_required_then_answer("1.0");
}

#[test]
fn the_python_sdks_v03_transport_streams_a_task_through_input_required_to_its_answer() {
    input_required_then_answer("0.3");
}

fn input_required_then_answer(protocol: &str) {
    let capsule = capsule(ASKS_FOR_INPUT);
    let served = capsule.serve();
    let all = sdk_client(&served, "hitl", protocol);
    the_card_was_resolved(&all, &served, protocol);

    // First stream: the task works, then stops for the human with the tool's prompt.
    let first = states(&all, "first");
    assert_states(&first, &["submitted", "working", "input-required"], &all);
    let asked = lines(&all, "input_required");
    assert_eq!(asked.len(), 1, "{all:#?}");
    assert_eq!(asked[0]["prompt"], "Which color?");
    let task_id = asked[0]["task_id"].as_str().unwrap();
    assert!(task_id.starts_with("tsk_"), "{task_id}");

    // Second stream, on the same task: working again, then completed with the answer.
    let second = states(&all, "second");
    assert_states(&second, &["working", "completed"], &all);
    assert!(
        lines(&all, "second")
            .iter()
            .all(|l| l["task_id"] == task_id && l["context_id"] == asked[0]["context_id"]),
        "{all:#?}"
    );
    let done = lines(&all, "completed");
    assert_eq!(done.len(), 1, "{all:#?}");
    assert_eq!(done[0]["task_id"], task_id);
    assert_eq!(done[0]["answer"], "Painted the fence blue.");

    // The task as GetTask has it: the answer, the artifacts, the whole exchange.
    let got = lines(&all, "get_task");
    assert_eq!(got.len(), 1, "{all:#?}");
    assert_eq!(got[0]["state"], "completed");
    assert_eq!(got[0]["text"], "Painted the fence blue.");
    let artifacts = &got[0]["artifacts"];
    assert_eq!(
        artifacts["response"], "Let me ask.\n\nPainted the fence blue.",
        "{got:#?}"
    );
    assert!(
        artifacts["tool-ask"]
            .as_str()
            .unwrap()
            .contains(r#"{"ok":true,"reply":"blue"}"#),
        "{got:#?}"
    );
    // What the SDK client assembled from the stream's chunks is that same text.
    assert_eq!(done[0]["artifacts"], *artifacts, "{all:#?}");
    let history: Vec<(&str, &str)> = got[0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        history,
        [
            ("ROLE_USER", "paint the fence"),
            ("ROLE_AGENT", "Which color?"),
            ("ROLE_USER", "blue"),
            ("ROLE_AGENT", "Painted the fence blue."),
        ]
    );

    // The reply reached the tool, and the model saw it.
    let requests = capsule.emulator.requests();
    assert_eq!(
        requests.len(),
        2,
        "one model call before the question, one after"
    );
    let to_model = requests[1].body.to_string();
    assert!(
        to_model.contains("\\\"reply\\\":\\\"blue\\\""),
        "{to_model}"
    );
}

#[test]
fn the_python_sdk_cancels_a_running_task() {
    cancel_while_working("1.0");
}

#[test]
fn the_python_sdks_v03_transport_cancels_a_running_task() {
    cancel_while_working("0.3");
}

fn cancel_while_working(protocol: &str) {
    // The model takes 5 s to answer: the task is still working when the SDK cancels it.
    let capsule =
        capsule("turns:\n  - reply: { text: \"too late\" }\n    first_byte_delay_ms: 5000\n");
    let served = capsule.serve();
    let all = sdk_client(&served, "cancel", protocol);
    the_card_was_resolved(&all, &served, protocol);

    let canceled = lines(&all, "cancel_task");
    assert_eq!(canceled.len(), 1, "{all:#?}");
    assert_eq!(canceled[0]["state"], "canceled");
    let task_id = canceled[0]["task_id"].as_str().unwrap();
    let stream = states(&all, "stream");
    assert_states(&stream, &["submitted", "working", "canceled"], &all);
    assert!(stream.contains(&"working".to_string()), "{stream:?}");
    let got = lines(&all, "get_task");
    assert_eq!(got.len(), 1, "{all:#?}");
    assert_eq!(got[0]["task_id"], task_id);
    assert_eq!(got[0]["state"], "canceled");
    assert_eq!(lines(&all, "canceled").len(), 1, "{all:#?}");
    // The slow answer never reached the client.
    assert!(
        lines(&all, "stream")
            .iter()
            .all(|l| !l.to_string().contains("too late")),
        "{all:#?}"
    );
}

/// The guarded capsule's script: an answer to the plain send, one to the streamed send, and a
/// slow one (5 s before its first byte) that the cancel beats.
const THREE_SENDS: &str = r#"
turns:
  - reply: { text: "Hello from behind the door." }
  - reply: { text: "Streamed from behind the door." }
  - reply: { text: "too late" }
    first_byte_delay_ms: 5000
"#;

#[test]
fn the_python_sdk_works_a_bearer_guarded_door_from_its_discovery_card() {
    guarded_door(SDK_1);
}

#[test]
fn the_python_sdk_v03_works_a_bearer_guarded_door_from_its_discovery_card() {
    guarded_door(SDK_03);
}

/// `sdk` reads the discovery card of a door that asks for a bearer, then sends, streams, gets
/// and cancels with the bearer (`basic`), and is refused 401 without it (`unauthenticated`).
fn guarded_door(sdk: Sdk) {
    let capsule = capsule_with(THREE_SENDS, BEARER_DOOR);
    let served = capsule.serve();
    let all = run_client(sdk, &served, &["basic", OPS]);
    the_discovery_card_was_read(&all, &served, sdk.protocol);
    // Every call went to the JSON-RPC endpoint with the bearer, in the SDK's protocol.
    let calls: Vec<&Value> = lines(&all, "http")
        .into_iter()
        .filter(|l| l["path"] == "/")
        .collect();
    assert!(!calls.is_empty(), "{all:#?}");
    for call in &calls {
        assert_eq!(call["method"], "POST", "{call:#}");
        assert_eq!(call["authorization"], true, "{call:#}");
        assert_eq!(call["a2a_version"], json!(sdk.version_header), "{call:#}");
        assert!(
            sdk.methods
                .contains(&call["rpc"].as_str().unwrap_or_default()),
            "{call:#} is not one of {:?}",
            sdk.methods
        );
    }
    for method in sdk.methods {
        assert!(
            calls.iter().any(|c| c["rpc"] == method),
            "no {method} call\n{all:#?}"
        );
    }

    // Without streaming: the task as it ended, with the first answer.
    let sent = lines(&all, "send");
    assert_eq!(sent.len(), 1, "{all:#?}");
    assert_eq!(sent[0]["state"], "completed", "{all:#?}");
    assert_eq!(sent[0]["answer"], "Hello from behind the door.");
    let first = sent[0]["task_id"].as_str().unwrap();
    assert!(first.starts_with("tsk_"), "{first}");

    // Streaming: a new task, through working, to the second answer.
    assert_states(
        &states(&all, "stream"),
        &["submitted", "working", "completed"],
        &all,
    );
    let streamed = lines(&all, "streamed");
    assert_eq!(streamed.len(), 1, "{all:#?}");
    assert_eq!(streamed[0]["state"], "completed");
    assert_eq!(streamed[0]["answer"], "Streamed from behind the door.");
    assert_ne!(streamed[0]["task_id"], first, "{all:#?}");

    // GetTask of the first task: still completed, still its answer.
    let got = lines(&all, "get_task");
    assert_eq!(got.len(), 1, "{all:#?}");
    assert_eq!(got[0]["task_id"], first);
    assert_eq!(got[0]["state"], "completed");
    assert_eq!(got[0]["answer"], "Hello from behind the door.");

    // The slow task, canceled while working: canceled in the answer, the stream, a GetTask.
    let canceled = lines(&all, "cancel_task");
    assert_eq!(canceled.len(), 1, "{all:#?}");
    assert_eq!(canceled[0]["state"], "canceled");
    assert_states(
        &states(&all, "cancel_stream"),
        &["submitted", "working", "canceled"],
        &all,
    );
    let got = lines(&all, "get_canceled");
    assert_eq!(got.len(), 1, "{all:#?}");
    assert_eq!(got[0]["task_id"], canceled[0]["task_id"]);
    assert_eq!(got[0]["state"], "canceled");
    assert_eq!(lines(&all, "canceled").len(), 1, "{all:#?}");
    assert!(
        lines(&all, "cancel_stream")
            .iter()
            .all(|l| !l.to_string().contains("too late")),
        "{all:#?}"
    );

    // No bearer: the card still reads (it is public), and each send is a 401.
    let all = run_client(sdk, &served, &["unauthenticated"]);
    the_discovery_card_was_read(&all, &served, sdk.protocol);
    assert!(
        lines(&all, "http")
            .iter()
            .all(|l| l["authorization"] == false),
        "{all:#?}"
    );
    let refused = lines(&all, "unauthorized");
    let calls: Vec<&str> = refused
        .iter()
        .map(|l| l["call"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["send", "stream"], "{all:#?}");
    for refusal in refused {
        assert_eq!(refusal["status"], 401, "{refusal:#}");
        assert!(
            refusal["www_authenticate"]
                .as_str()
                .is_some_and(|c| c.starts_with("Bearer")),
            "{refusal:#}"
        );
        // The JSON-RPC error of the 401's body, when the SDK had read it.
        if let Some(code) = refusal.get("code") {
            assert_eq!(*code, -32030, "{refusal:#}");
        }
    }

    // Three model calls in all: none for a refused send.
    assert_eq!(capsule.emulator.requests().len(), 3);
}

/// The card `sdk` read from `/.well-known/agent-card.json` with no `A2A-Version` header: the
/// capsule's, in the SDK's `protocol`, at the door's JSON-RPC endpoint, asking for the bearer.
fn the_discovery_card_was_read(all: &[Value], served: &Served, protocol: &str) {
    let fetched: Vec<&Value> = lines(all, "http")
        .into_iter()
        .filter(|l| l["path"] == "/.well-known/agent-card.json")
        .collect();
    assert_eq!(fetched.len(), 1, "{all:#?}");
    assert_eq!(fetched[0]["method"], "GET");
    assert_eq!(fetched[0]["a2a_version"], Value::Null, "{all:#?}");
    let card = lines(all, "card");
    assert_eq!(card.len(), 1, "{all:#?}");
    let card = card[0];
    assert_eq!(card["name"], "sdk-interop");
    assert_eq!(card["streaming"], true);
    assert_eq!(card["url"], format!("{}/", served.url), "{card:#}");
    assert_eq!(card["binding"], "JSONRPC", "{card:#}");
    assert!(
        card["protocol_version"]
            .as_str()
            .is_some_and(|v| v.starts_with(protocol)),
        "{card:#}"
    );
    assert_eq!(card["security_schemes"], json!(["bearer"]), "{card:#}");
    assert_eq!(card["security"], json!([["bearer"]]), "{card:#}");
}
