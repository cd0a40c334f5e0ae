//! How the runtime reads a driver's answer: a malformed `usage`
//! degrades to no report, member by member, and an absent number is never written as 0. The
//! probe driver returns exactly the answer its config holds.

use std::path::Path;

use murmur_testkit::{Mur, RecordingServer, repo_root};
use serde_json::{Value, json};

/// Runs a capsule whose driver answers `answer`, and returns its one `inference` event.
fn inference_event(answer: Value) -> Value {
    let gateway = RecordingServer::start("unused");
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"name: answers
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}" }}
inference:
  model: probe-model
  driver: {{ artifact: probe-driver, config: {{ answer: {answer} }} }}
"#,
        driver = repo_root().join("tests/fixtures/probe-driver").display(),
        endpoint = gateway.url(),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--json", "--task", "go"])
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    let trace = std::fs::read_to_string(Path::new(report["trace_path"].as_str().unwrap())).unwrap();
    let events: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = events.last().unwrap().clone();
    let inference = events
        .into_iter()
        .find(|e| e["event_type"] == "inference")
        .unwrap();
    // Totals follow the same rule: absent when no call reported.
    for member in ["input", "output", "cached", "cache_write"] {
        let field = format!("{member}_tokens_actual");
        assert_eq!(end["totals"].get(&field), inference.get(&field), "{field}");
    }
    inference
}

fn answer(usage: Option<Value>) -> Value {
    let mut answer =
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "hi"}]});
    if let Some(usage) = usage {
        answer["usage"] = usage;
    }
    answer
}

const ACTUAL: [&str; 4] = [
    "input_tokens_actual",
    "output_tokens_actual",
    "cached_tokens_actual",
    "cache_write_tokens_actual",
];

#[test]
fn no_usage_records_nothing() {
    let event = inference_event(answer(None));
    for field in ACTUAL {
        assert!(event.get(field).is_none(), "{field}: {event}");
    }
}

#[test]
fn a_usage_that_is_not_an_object_records_nothing() {
    let event = inference_event(answer(Some(json!([120, 30]))));
    for field in ACTUAL {
        assert!(event.get(field).is_none(), "{field}: {event}");
    }
}

#[test]
fn a_malformed_member_is_dropped_and_its_siblings_kept() {
    let event = inference_event(answer(Some(json!({
        "input_tokens": 120, "output_tokens": -4, "cached_tokens": 2.5, "cache_write_tokens": "7"
    }))));
    assert_eq!(event["input_tokens_actual"], 120);
    for field in &ACTUAL[1..] {
        assert!(event.get(*field).is_none(), "{field}: {event}");
    }
}

#[test]
fn an_undefined_member_is_dropped_and_zero_stays_zero() {
    let event = inference_event(answer(Some(json!({
        "input_tokens": 0, "reasoning_tokens": 55
    }))));
    assert_eq!(event["input_tokens_actual"], 0);
    assert!(event.get("reasoning_tokens_actual").is_none());
    assert!(event.get("output_tokens_actual").is_none());
    assert!(!event.to_string().contains("reasoning"));
}
