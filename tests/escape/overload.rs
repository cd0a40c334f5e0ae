//! Escape cases: a provider that reports overload in the middle of a stream. While nothing of
//! the answer reached the caller the driver asks again (same backoff, same retry budget as a
//! 529); once a text chunk was streamed out the call fails and says it was not retried.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-0001";

const DRIVERS: [&str; 3] = [
    "driver-anthropic",
    "driver-openai-chat",
    "driver-openai-responses",
];

fn capsule(dir: &Path, driver: &str, endpoint: &str) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: overload
version: "0.1.0"
artifacts:
  - name: {driver}
    version: "0.1.0"
    runtime: driver
    path: {driver_path}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: test-model
  driver: {{ artifact: {driver} }}
  system_prompt: "You test."
  max_turns: 4
"#,
        driver_path = root.join("artifacts").join(driver).display(),
        probe = root.join("tests/fixtures/probe").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn run_streaming(capsule: &Path) -> (MurOutput, Value) {
    let dir = capsule.parent().unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--stream", "--json", "--task", "go"])
        .run();
    let start = output.stdout.find("{\n").expect("a JSON report");
    let report: Value = serde_json::from_str(&output.stdout[start..]).expect("report");
    (output, report)
}

/// Every line of the session's trace parses, and the last is `session_end`.
fn whole_trace(report: &Value) -> Vec<Value> {
    let path = report["trace_path"].as_str().expect("trace_path");
    let events: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a trace line parses"))
        .collect();
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
    events
}

fn emulator(yaml: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(yaml).expect("script"))
        .api_key(KEY)
        .start()
        .expect("emulator")
}

#[test]
fn an_in_stream_overload_before_any_text_is_retried_and_the_task_succeeds() {
    for driver in DRIVERS {
        // The first attempt streams the start of a tool call (no text), then the provider's
        // in-stream overload error; the second attempt answers whole.
        let emulator = emulator(
            r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: probe, input: { action: result, status: passed, data: "probed" } } ] }
    faults: [ stream_error ]
  - reply: { text: "done after the overload" }
"#,
        );
        let dir = tempfile::tempdir().unwrap();
        let file = capsule(dir.path(), driver, &emulator.url());
        let started = std::time::Instant::now();
        let (output, report) = run_streaming(&file);
        assert_eq!(output.code, 0, "{driver}: {output:#?}");
        assert_eq!(report["exit_status"], "ok", "{driver}");
        assert!(
            output.stdout.contains("done after the overload"),
            "{driver}: {}",
            output.stdout
        );
        // The retry waited the first backoff step, as after a 529.
        assert!(
            started.elapsed() >= std::time::Duration::from_secs(1),
            "{driver}"
        );
        // Three requests: the overloaded one, its retry, and the turn after the tool call.
        assert_eq!(emulator.requests().len(), 3, "{driver}");
        let events = whole_trace(&report);
        assert_eq!(
            events
                .iter()
                .filter(|e| e["event_type"] == "tool_call")
                .count(),
            1,
            "{driver}"
        );
    }
}

#[test]
fn an_in_stream_overload_after_text_reached_the_caller_fails_and_says_so() {
    for driver in DRIVERS {
        let emulator = emulator(
            r#"
turns:
  - reply: { text: "Several words of an answer that starts streaming before the overload arrives." }
    faults: [ stream_error ]
"#,
        );
        let dir = tempfile::tempdir().unwrap();
        let file = capsule(dir.path(), driver, &emulator.url());
        let (output, report) = run_streaming(&file);
        assert_eq!(output.code, 1, "{driver}: {output:#?}");
        assert_eq!(report["exit_status"], "failed", "{driver}");
        let message = report["tasks"][0]["error"]["message"]
            .as_str()
            .expect("error message");
        assert!(message.contains("not retried"), "{driver}: {message}");
        assert_eq!(emulator.requests().len(), 1, "{driver}: never asked again");
        whole_trace(&report);
    }
}

#[test]
fn an_in_stream_overload_is_retried_only_within_the_budget() {
    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: probe, input: { action: result, status: passed, data: "x" } } ] }
    faults: [ stream_error, stream_error ]
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "driver-anthropic", &emulator.url());
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "driver: { artifact: driver-anthropic }",
        "driver: { artifact: driver-anthropic, config: { max_retries: 1 } }",
    );
    std::fs::write(&file, text).unwrap();
    let (output, report) = run_streaming(&file);
    assert_eq!(output.code, 1, "{output:#?}");
    let message = report["tasks"][0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("Overloaded"), "{message}");
    assert_eq!(emulator.requests().len(), 2, "one try and one retry");
    whole_trace(&report);
}
