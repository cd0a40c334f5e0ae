//! The control state of a staged capsule: credential sources per choice as staging
//! resolves them, and every rule of a change and its refusal, with the trace events each leaves.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use murmur_runtime::inference::choices::CredentialSource;
use murmur_runtime::session::control::{ControlState, Principal};
use murmur_runtime::session::staging::{Lookups, stage_with};
use murmur_runtime::{Engine, EngineConfig};
use murmur_trace::{Trace, TraceWriter};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A capsule whose primary is the probe driver (keyless), with the alternates `haiku` (the
/// Anthropic driver, keyed by `${ANT_KEY}`) and `gpt` (the Responses driver, keyed by the
/// injectable `${GPT_KEY}`).
fn capsule(dir: &Path, control: &str) -> PathBuf {
    let root = root();
    let text = format!(
        r#"name: controlled
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {probe}
    gateway: {{ endpoint: "http://127.0.0.1:9" }}
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {anthropic}
    gateway: {{ endpoint: "http://127.0.0.1:9", api_key: "${{ANT_KEY}}" }}
  - name: driver-openai-responses
    version: "0.1.0"
    runtime: driver
    path: {responses}
    gateway: {{ endpoint: "http://127.0.0.1:9", api_key: "${{GPT_KEY}}" }}
inference:
  model: probe-model
  driver: {{ artifact: probe-driver }}
  alternates:
    - {{ name: haiku, model: claude-haiku-4-5, driver: driver-anthropic }}
    - {{ name: gpt, model: gpt-5, driver: driver-openai-responses }}
{control}
"#,
        probe = root.join("tests/fixtures/probe-driver").display(),
        anthropic = root.join("artifacts/driver-anthropic").display(),
        responses = root.join("artifacts/driver-openai-responses").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn engine() -> Engine {
    Engine::new(EngineConfig {
        cache_dir: None,
        pooling: false,
        ..EngineConfig::default()
    })
    .unwrap()
}

const CONTROL: &str = "control:\n  settings: [inference.driver, inference.max_tokens]\n  secrets: [GPT_KEY]\n  agent_settings: [inference.driver]";

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn staging_records_where_each_choices_credential_comes_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), CONTROL);
    let engine = engine();
    // ANT_KEY only in the credentials file; GPT_KEY injectable, with nothing at launch.
    let staged = stage_with(
        &file,
        &engine,
        &Lookups {
            env: &|_| None,
            config: &|name| (name == "ANT_KEY").then(|| "sk-from-config".to_string()),
        },
    )
    .unwrap();
    let sources: Vec<(&str, CredentialSource)> = staged
        .choices
        .iter()
        .map(|c| (c.name.as_str(), c.credential_source))
        .collect();
    assert_eq!(
        sources,
        [
            ("primary", CredentialSource::Keyless),
            ("haiku", CredentialSource::Config),
            ("gpt", CredentialSource::Injected),
        ]
    );
    assert!(staged.warnings.iter().all(|d| d.code != "W-RUN-003"));

    // The environment wins over the credentials file; an injectable name found at launch is
    // its first value; a name found nowhere stages the alternate unavailable, by name.
    let staged = stage_with(
        &file,
        &engine,
        &Lookups {
            env: &|name| (name == "GPT_KEY").then(|| "sk-env".to_string()),
            config: &|_| None,
        },
    )
    .unwrap();
    let haiku = staged.choices.get(1).unwrap();
    assert_eq!(haiku.credential_source, CredentialSource::None);
    assert_eq!(haiku.unresolved_credential.as_deref(), Some("ANT_KEY"));
    let warning = staged
        .warnings
        .iter()
        .find(|d| d.code == "W-RUN-003")
        .expect("W-RUN-003");
    assert!(warning.message.contains("haiku") && warning.message.contains("ANT_KEY"));
    assert!(staged.secrets.has("GPT_KEY"));

    // Each choice's limits come from its own model.
    let staged = Arc::new(staged);
    assert_eq!(
        staged
            .choices
            .get(2)
            .unwrap()
            .limits
            .limits
            .max_output_tokens,
        128_000
    );
    assert_eq!(
        staged
            .choices
            .get(1)
            .unwrap()
            .limits
            .limits
            .max_output_tokens,
        64_000
    );
    assert_eq!(
        staged.max_tokens, 4096,
        "an unknown model takes the default"
    );
}

#[test]
fn every_change_is_checked_and_traced_and_no_secret_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), CONTROL);
    let engine = engine();
    let staged = Arc::new(
        stage_with(
            &file,
            &engine,
            &Lookups {
                env: &|name| (name == "ANT_KEY").then(|| "sk-ant".to_string()),
                config: &|_| None,
            },
        )
        .unwrap(),
    );
    let control = ControlState::new(staged.clone());
    let refused = |result: Result<Value, murmur_runtime::session::control::ControlRefusal>| {
        let refusal = result.unwrap_err();
        (refusal.status, refusal.reason)
    };

    // Before the trace exists: kept, and written when it is attached.
    assert_eq!(
        refused(control.set(
            "inference.driver",
            &json!("gpt"),
            Principal::Controller,
            None
        )),
        (409, "credential_unresolvable")
    );
    let listing = control.snapshot();
    assert_eq!(listing["settings"]["inference.driver"], "primary");
    let available: Vec<bool> = listing["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["available"].as_bool().unwrap())
        .collect();
    assert_eq!(available, [true, true, false]);

    let trace_path = dir.path().join("trace.jsonl");
    let trace = Trace::new(TraceWriter::create(&trace_path, "ses_test").unwrap());
    control
        .attach_trace(trace.clone(), "evt_session".to_string())
        .unwrap();

    assert_eq!(
        refused(control.set(
            "inference.temperature",
            &json!(1),
            Principal::Controller,
            None
        )),
        (404, "unknown_setting")
    );
    assert_eq!(
        refused(control.set(
            "inference.driver",
            &json!("nope"),
            Principal::Controller,
            None
        )),
        (422, "unknown_choice")
    );
    assert_eq!(
        refused(control.set("inference.driver", &json!(3), Principal::Controller, None)),
        (422, "invalid_value")
    );
    assert_eq!(
        refused(control.set(
            "inference.max_tokens",
            &json!(0),
            Principal::Controller,
            None
        )),
        (422, "invalid_value")
    );
    assert_eq!(
        refused(control.set("inference.max_tokens", &json!(10), Principal::Agent, None)),
        (403, "not_granted")
    );
    assert_eq!(control.put_secret("OTHER", "x").unwrap_err().status, 404);

    control.put_secret("GPT_KEY", "sk-injected-secret").unwrap();
    control
        .set(
            "inference.driver",
            &json!("gpt"),
            Principal::Agent,
            Some("tsk_1"),
        )
        .unwrap();
    assert_eq!(control.selected(), 2);
    let in_use = control.forget_secret("GPT_KEY").unwrap_err();
    assert_eq!((in_use.status, in_use.reason), (409, "in_use"));
    assert!(staged.secrets.has("GPT_KEY"), "nothing changed");
    control
        .set(
            "inference.driver",
            &json!("haiku"),
            Principal::Controller,
            None,
        )
        .unwrap();
    control.forget_secret("GPT_KEY").unwrap();
    assert!(!staged.secrets.has("GPT_KEY"));
    control
        .set(
            "inference.max_tokens",
            &json!(1234),
            Principal::Controller,
            None,
        )
        .unwrap();
    assert_eq!(control.max_tokens_for(staged.choices.get(2).unwrap()), 1234);
    assert_eq!(control.snapshot()["settings"]["inference.max_tokens"], 1234);

    let written = events(&trace_path);
    let text = std::fs::read_to_string(&trace_path).unwrap();
    assert!(!text.contains("sk-injected-secret"));
    let kinds: Vec<(&str, &str, &str)> = written
        .iter()
        .map(|e| {
            (
                e["event_type"].as_str().unwrap(),
                e["principal"].as_str().unwrap(),
                e["target"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("control_refused", "controller", "inference.driver"),
            ("control_refused", "controller", "inference.temperature"),
            ("control_refused", "controller", "inference.driver"),
            ("control_refused", "controller", "inference.driver"),
            ("control_refused", "controller", "inference.max_tokens"),
            ("control_refused", "agent", "inference.max_tokens"),
            ("control_refused", "controller", "secrets/OTHER"),
            ("control_change", "controller", "secrets/GPT_KEY"),
            ("control_change", "agent", "inference.driver"),
            ("control_refused", "controller", "secrets/GPT_KEY"),
            ("control_change", "controller", "inference.driver"),
            ("control_change", "controller", "secrets/GPT_KEY"),
            ("control_change", "controller", "inference.max_tokens"),
        ]
    );
    assert!(written.iter().all(|e| e["parent_id"] == "evt_session"));
    assert_eq!(written[8]["task_id"], "tsk_1");
    assert_eq!(written[8]["from"], "primary");
    assert_eq!(written[8]["to"], "gpt");
}

/// A relaunch starts on `primary`: the control state belongs to one launch.
#[test]
fn a_new_launch_starts_on_primary() {
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), CONTROL);
    let engine = engine();
    let lookups = Lookups {
        env: &|name| (name == "ANT_KEY").then(|| "sk-ant".to_string()),
        config: &|_| None,
    };
    let first = ControlState::new(Arc::new(stage_with(&file, &engine, &lookups).unwrap()));
    first
        .set(
            "inference.driver",
            &json!("haiku"),
            Principal::Controller,
            None,
        )
        .unwrap();
    let again = ControlState::new(Arc::new(stage_with(&file, &engine, &lookups).unwrap()));
    assert_eq!(again.selected(), 0);
    assert_eq!(again.snapshot()["settings"]["inference.driver"], "primary");
}
