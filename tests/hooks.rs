//! Hooks: one test per row of the hook contract's tables and
//! per event-field note, through the real `mur` with fixture hooks built from source, the real
//! Anthropic driver and the provider emulator.
//!
//! A test's hooks are artifact directories written by the test: each its own `murmur.yaml`
//! (name, binding, policy, mode) pointing at a fixture's component (`hook-probe` unless said
//! otherwise), configured by the capsule's entry.

use std::path::{Path, PathBuf};
use std::time::Duration;

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, replace_in, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-hooks";

/// A hook of a test's capsule.
struct Hook {
    name: &'static str,
    fixture: &'static str,
    binding: Option<&'static str>,
    policy: &'static str,
    mode: &'static str,
    config: Value,
    grants: &'static [&'static str],
    entry_extra: &'static str,
}

impl Hook {
    fn probe(name: &'static str, config: Value) -> Hook {
        Hook {
            name,
            fixture: "hook-probe",
            binding: None,
            policy: "none",
            mode: "blocking",
            config: with_log(name, config),
            grants: &[
                "runtime/inference",
                "runtime/tokens",
                "task-io/read",
                "conversation/read",
            ],
            entry_extra: "",
        }
    }

    fn bound(mut self, binding: &'static str, policy: &'static str) -> Hook {
        self.binding = Some(binding);
        self.policy = policy;
        self
    }
}

/// The probe's log file is named after the hook, so several probes can share a session.
fn with_log(name: &str, mut config: Value) -> Value {
    if config.is_null() {
        config = json!({});
    }
    config["log"] = json!(format!("{name}.jsonl"));
    config["state"] = json!(format!("{name}.state.json"));
    config
}

fn write_hook(root: &Path, hook: &Hook) -> PathBuf {
    let binding = hook
        .binding
        .map(|b| format!("binding: {b}\n"))
        .unwrap_or_default();
    murmur_testkit::fixture_hook(
        &root.join("hooks"),
        hook.name,
        hook.fixture,
        &format!(
            "{binding}execution_mode: {}\ncommit_policy: {}\n",
            hook.mode, hook.policy
        ),
    )
}

fn capsule(dir: &Path, endpoint: &str, hooks: &[Hook], extra: &str) -> PathBuf {
    let root = repo_root();
    let mut entries = String::new();
    for hook in hooks {
        let path = write_hook(dir, hook);
        let grants = if hook.grants.is_empty() {
            String::new()
        } else {
            format!(", grants: [{}]", hook.grants.join(", "))
        };
        // Every fixture hook logs to the session's workspace, so each entry grants it.
        entries.push_str(&format!(
            "  - {{ name: {}, version: \"0.1.0\", runtime: hook, path: {}, config: {}{grants}, capabilities: {{ filesystem: {{ scope: write }} }}{} }}\n",
            hook.name,
            path.display(),
            hook.config,
            hook.entry_extra
        ));
    }
    let text = format!(
        r#"name: hooked
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write_file} }}
{entries}inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  max_turns: 8
{extra}
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        read_file = root.join("artifacts/read-file").display(),
        write_file = root.join("artifacts/write-file").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn emulator(yaml: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(yaml).expect("script"))
        .api_key(KEY)
        .start()
        .expect("emulator")
}

/// A session's results: the report, the trace, its record (`workdir`: trace, result,
/// conversations, the runtime's logs) and its workspace (what hooks and tools wrote).
struct Session {
    output: MurOutput,
    report: Value,
    trace: Vec<Value>,
    workdir: PathBuf,
    workspace: PathBuf,
}

impl Session {
    fn events(&self, event_type: &str) -> Vec<&Value> {
        self.trace
            .iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }

    /// The lines a hook-probe named `name` logged (in the workspace, its filesystem grant).
    fn log(&self, name: &str) -> Vec<Value> {
        read_lines(&self.workspace.join(format!("{name}.jsonl")))
    }

    fn handlers(&self, name: &str) -> Vec<String> {
        self.log(name)
            .iter()
            .map(|l| l["handler"].as_str().unwrap().to_string())
            .collect()
    }

    fn hook_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.workdir.join(format!("logs/hook-{name}.log")))
            .unwrap_or_default()
    }
}

/// The capsule in `dir` served over A2A, with the emulator's key.
fn serve(dir: &Path) -> murmur_testkit::door::Served {
    murmur_testkit::door::Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        dir,
        &[("EMU_KEY", KEY)],
    )
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn run(file: &Path, tasks: &[&str]) -> Session {
    let dir = file.parent().unwrap();
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json"])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"));
    for task in tasks {
        mur = mur.args(["--task", task]);
    }
    let output = mur.run();
    let report: Value = serde_json::from_str(&output.stdout)
        .unwrap_or_else(|_| panic!("no JSON report: {output:#?}"));
    let workdir = PathBuf::from(
        report["workdir"]
            .as_str()
            .unwrap_or_else(|| panic!("{output:#?}")),
    );
    let workspace = PathBuf::from(
        report["workspace"]
            .as_str()
            .unwrap_or_else(|| panic!("{output:#?}")),
    );
    let trace = read_lines(&workdir.join("trace.jsonl"));
    Session {
        output,
        report,
        trace,
        workdir,
        workspace,
    }
}

/// The workspace of the session a capsule served from `capsule_dir` runs, as its trace's
/// `session_start` names it.
fn served_workspace(capsule_dir: &Path) -> PathBuf {
    let record = murmur_testkit::door::session_dir(capsule_dir);
    let trace = read_lines(&record.join("trace.jsonl"));
    let start = trace
        .iter()
        .find(|e| e["event_type"] == "session_start")
        .unwrap_or_else(|| panic!("no session_start: {trace:#?}"));
    PathBuf::from(
        start["workspace"]
            .as_str()
            .unwrap_or_else(|| panic!("no workspace: {start:#}")),
    )
}

const ONE_TOOL_CALL: &str = r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: write-file, input: { path: a.md, content: hi } } ] }
  - reply: { text: done }
"#;

// ---------------------------------------------------------------------------------------------
// When each handler fires.

#[test]
fn every_handler_fires_at_its_moment_in_order_with_one_session_id() {
    let emulator = emulator(&format!(
        "{}\n  - reply: {{ text: second }}\n",
        ONE_TOOL_CALL.trim_end()
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[Hook::probe("watcher", Value::Null)],
        "",
    );
    let session = run(&file, &["first", "second"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(
        session.handlers("watcher"),
        [
            "on-stage",
            "on-session-start",
            "on-task-start",
            "on-inference",
            "on-tool-call",
            "on-inference",
            "on-task-end",
            "on-task-start",
            "on-inference",
            "on-task-end",
            "on-session-end",
        ]
    );
    let session_id = session.report["session_id"].as_str().unwrap();
    for line in session.log("watcher") {
        if line["handler"] != "on-stage" {
            assert_eq!(line["event"]["session_id"], session_id, "{line}");
        }
    }
}

#[test]
fn a_hook_without_the_optional_handlers_and_on_stage_loads_and_is_not_dispatched_for_them() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let partial = Hook {
        fixture: "hook-partial",
        grants: &[],
        ..Hook::probe("hook-partial", Value::Null)
    };
    let file = capsule(dir.path(), &emulator.url(), &[partial], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let handlers: Vec<String> = read_lines(&session.workspace.join("hook-partial.jsonl"))
        .iter()
        .map(|l| l["handler"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        handlers,
        [
            "on-session-start",
            "on-inference",
            "on-tool-call",
            "on-inference",
            "on-session-end"
        ]
    );
    // A missing on-stage is a warning, not a refusal.
    assert!(
        session.output.stderr.contains("W-HOOK-005"),
        "{}",
        session.output.stderr
    );
}

#[test]
fn a_hook_missing_a_required_handler_fails_to_load_naming_it() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let missing = Hook {
        fixture: "hook-missing",
        grants: &[],
        ..Hook::probe("hook-missing", Value::Null)
    };
    capsule(dir.path(), &emulator.url(), &[missing], "");
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "go"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 3, "{output:#?}");
    let error = &output.json()["error"];
    assert_eq!(error["code"], "E-RUN-001");
    assert!(
        error["message"].as_str().unwrap().contains("on-inference"),
        "{error}"
    );
    assert!(emulator.requests().is_empty());
}

/// A hook may import an interface its entry does not grant (toolchains that import their whole
/// world do): it loads, and each call of what was not granted fails, naming the grant, while
/// what was granted answers. Nothing reaches the model for it.
#[test]
fn a_hook_calling_what_it_was_not_granted_is_refused_at_the_call() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let ungranted = Hook {
        grants: &["runtime/tokens"],
        ..Hook::probe(
            "greedy",
            json!({"call": {"on-task-start": ["tokens", "inference"]}}),
        )
    };
    let file = capsule(dir.path(), &emulator.url(), &[ungranted], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    // The refused call trapped the handler: the fault names the interface and the grant.
    let faults = session.events("hook_dispatch_error");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0]["handler"], "on-task-start");
    let message = faults[0]["message"].as_str().unwrap();
    assert!(message.contains("murmur:runtime/inference"), "{message}");
    assert!(
        message.contains("`runtime/inference`") && message.contains("grants"),
        "{message}"
    );
    // The model was asked only by the agent loop, never for the hook.
    assert!(
        session
            .events("inference")
            .iter()
            .all(|e| e["origin"] != "hook:greedy"),
        "{:?}",
        session.events("inference")
    );
}

#[test]
fn a_binding_that_cannot_honor_its_policy_fails_staging_before_any_compile() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let wrong = Hook::probe("wrong", Value::Null).bound("on-stage", "reopen-task");
    capsule(dir.path(), &emulator.url(), &[wrong], "");
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "go"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 2, "{output:#?}");
    let diagnostics = output.json()["diagnostics"].to_string();
    assert!(diagnostics.contains("E-HOOK-001"), "{diagnostics}");
    assert!(diagnostics.contains("write-manifests"), "{diagnostics}");
}

// ---------------------------------------------------------------------------------------------
// The two dispatches of a gated event.

#[test]
fn only_a_deny_policy_hook_sees_the_decision_point_and_its_deny_refuses_the_call() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let gate = Hook::probe(
        "gate",
        json!({"respond": {"on-tool-call": {"arm": "deny", "value": "no writes today", "at": "decision"}}}),
    )
    .bound("on-tool-call", "deny");
    let watcher = Hook::probe("watcher", Value::Null);
    let file = capsule(dir.path(), &emulator.url(), &[gate, watcher], "");
    let session = run(&file, &["write"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    // The call was not made.
    assert!(!session.workspace.join("a.md").exists());
    // The gate saw the decision point (outcome none) and then the observation.
    let gate_calls: Vec<Value> = session
        .log("gate")
        .into_iter()
        .filter(|l| l["handler"] == "on-tool-call")
        .collect();
    assert_eq!(gate_calls.len(), 2);
    assert_eq!(gate_calls[0]["event"]["outcome"], Value::Null);
    assert!(gate_calls[1]["event"]["outcome"].is_object());
    // The watcher (no deny policy) saw only the observation.
    let watched: Vec<Value> = session
        .log("watcher")
        .into_iter()
        .filter(|l| l["handler"] == "on-tool-call")
        .collect();
    assert_eq!(watched.len(), 1);
    assert!(watched[0]["event"]["outcome"].is_object());
    // The agent's result names the hook and the reason; the trace has call_denied.
    let second = emulator.requests()[1].body.to_string();
    assert!(
        second.contains("denied by hook `gate`: no writes today"),
        "{second}"
    );
    let denied = session.events("call_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["hook"], "gate");
    assert_eq!(denied[0]["target"], "write-file");
    assert_eq!(denied[0]["reason"], "no writes today");
    assert!(session.events("tool_call").is_empty());
}

#[test]
fn nothing_returned_at_the_observation_changes_a_call_that_ran() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let late = Hook::probe(
        "late",
        json!({"respond": {"on-tool-call": {"arm": "deny", "value": "too late", "at": "observation"}}}),
    )
    .bound("on-tool-call", "deny");
    let file = capsule(dir.path(), &emulator.url(), &[late], "");
    let session = run(&file, &["write"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(
        std::fs::read_to_string(session.workspace.join("a.md")).unwrap(),
        "hi"
    );
    assert!(session.events("call_denied").is_empty());
    let faults = session.events("hook_dispatch_error");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0]["kind"], "unhonored_arm");
    assert!(session.hook_log("late").contains("on-tool-call"));
}

#[test]
fn a_policy_hook_that_errs_or_times_out_at_the_decision_point_denies() {
    for (arm, extra) in [("error", ""), ("spin", ", deadline_seconds: 1")] {
        let emulator = emulator(ONE_TOOL_CALL);
        let dir = tempfile::tempdir().unwrap();
        let broken = Hook {
            entry_extra: extra,
            ..Hook::probe(
                "broken",
                json!({"respond": {"on-tool-call": {"arm": arm, "value": "policy store offline", "at": "decision"}}}),
            )
            .bound("on-tool-call", "deny")
        };
        let file = capsule(dir.path(), &emulator.url(), &[broken], "");
        let session = run(&file, &["write"]);
        assert_eq!(session.output.code, 0, "{arm}: {:#?}", session.output);
        assert!(
            !session.workspace.join("a.md").exists(),
            "{arm}: fail-closed"
        );
        let denied = session.events("call_denied");
        assert_eq!(denied.len(), 1, "{arm}");
        assert!(
            denied[0]["reason"]
                .as_str()
                .unwrap()
                .contains("the policy hook failed"),
            "{arm}: {}",
            denied[0]
        );
        assert!(!session.events("hook_dispatch_error").is_empty(), "{arm}");
    }
}

#[test]
fn the_manifest_check_runs_before_a_policy_hook_is_asked() {
    let emulator = emulator(
        "turns:\n  - reply: { tool_calls: [ { id: c1, name: rm-rf, input: {} } ] }\n  - reply: { text: done }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let gate = Hook::probe("gate", json!({})).bound("on-tool-call", "deny");
    let file = capsule(dir.path(), &emulator.url(), &[gate], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let decisions = session
        .log("gate")
        .into_iter()
        .filter(|l| l["handler"] == "on-tool-call" && l["event"]["outcome"].is_null())
        .count();
    assert_eq!(
        decisions, 0,
        "an undeclared tool is refused before any hook"
    );
    assert_eq!(session.events("tool_call")[0]["error"]["code"], "E-RUN-014");
}

// ---------------------------------------------------------------------------------------------
// What each handler can commit.

#[test]
fn on_stage_commits_write_manifests_into_the_workspace_tools() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let stager = Hook::probe(
        "stager",
        json!({"respond": {"on-stage": {"arm": "write-manifests", "value": [
            {"binary": "git", "manifest": "name: git\nversion: \"0.1.0\"\nruntime: tool\n"},
            {"binary": "../escape", "manifest": "nope"}
        ]}}}),
    )
    .bound("on-stage", "write-manifests");
    let file = capsule(dir.path(), &emulator.url(), &[stager], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(
        std::fs::read_to_string(session.workspace.join("tools/git/murmur.yaml")).unwrap(),
        "name: git\nversion: \"0.1.0\"\nruntime: tool\n"
    );
    // `../escape` lands nowhere: not beside `tools/`, not in the record, not in the root.
    assert!(!session.workspace.join("escape").exists());
    assert!(!session.workdir.join("escape").exists());
    assert!(!dir.path().join("work/escape").exists());
    assert!(session.hook_log("stager").contains("not a binary name"));
    // on-stage ran before the trace existed: its event is the session's first.
    assert_eq!(session.trace[0]["event_type"], "session_start");
}

#[test]
fn on_inference_commits_an_artifact() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let scribe = Hook::probe(
        "scribe",
        json!({"respond": {"on-inference": {"arm": "artifact", "value": {"name": "turn.md", "media_type": "text/markdown", "content": "# turn"}}}}),
    )
    .bound("on-inference", "artifact");
    let file = capsule(dir.path(), &emulator.url(), &[scribe], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(
        std::fs::read_to_string(session.workspace.join("out/artifacts/turn.md")).unwrap(),
        "# turn"
    );
    let inference = &session.log("scribe")[0]["event"];
    assert_eq!(inference["turn"], 1);
    assert_eq!(inference["stop_reason"], "end_turn");
    assert_eq!(inference["model"], "test-model");
}

#[test]
fn a_handler_that_commits_nothing_faults_loudly_on_any_other_arm_and_goes_on() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let noisy = Hook::probe(
        "noisy",
        json!({"respond": {
            "on-stage": {"arm": "deny", "value": "not here"},
            "on-session-start": {"arm": "reopen-task", "value": "again"},
            "on-session-end": {"arm": "none"},
            "on-inference": {"arm": "seed-context", "value": [{"role": "user", "text": "x"}]}
        }}),
    );
    let file = capsule(dir.path(), &emulator.url(), &[noisy], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let faults = session.events("hook_dispatch_error");
    let handlers: Vec<&str> = faults
        .iter()
        .map(|f| f["handler"].as_str().unwrap())
        .collect();
    // `on-stage` runs before the trace exists: its fault is in the hook's log only.
    assert_eq!(handlers, ["on-session-start", "on-inference"]);
    let log = session.hook_log("noisy");
    assert!(log.contains("on-stage") && log.contains("deny"), "{log}");
    assert!(
        faults
            .iter()
            .all(|f| f["kind"] == "unhonored_arm" && f["hook"] == "noisy")
    );
    let log = session.hook_log("noisy");
    assert!(
        log.contains("on-session-start") && log.contains("reopen-task"),
        "{log}"
    );
    assert!(
        log.contains("on-inference") && log.contains("seed-context"),
        "{log}"
    );
    assert!(session.events("task_reopened").is_empty());
}

#[test]
fn a_handler_error_is_logged_and_the_session_goes_on() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let failing = Hook::probe(
        "failing",
        json!({"respond": {"on-session-start": {"arm": "error", "value": "database down"}}}),
    );
    let file = capsule(dir.path(), &emulator.url(), &[failing], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert!(session.hook_log("failing").contains("database down"));
    let faults = session.events("hook_dispatch_error");
    assert_eq!(faults[0]["kind"], "error");
    assert_eq!(session.report["exit_status"], "ok");
}

// ---------------------------------------------------------------------------------------------
// reopen-task

#[test]
fn reopen_task_reruns_the_loop_with_the_feedback_within_max_task_reopens() {
    let emulator = emulator("turns:\n  - reply: { text: draft }\n  - reply: { text: final }\n");
    let dir = tempfile::tempdir().unwrap();
    let reviewer = Hook::probe(
        "reviewer",
        json!({"respond": {"on-task-end": {"arm": "reopen-task", "value": "add a title", "times": 1}}}),
    )
    .bound("on-task-end", "reopen-task");
    let file = capsule(dir.path(), &emulator.url(), &[reviewer], "");
    let session = run(&file, &["write"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let reopened = session.events("task_reopened");
    assert_eq!(reopened.len(), 1);
    assert_eq!(reopened[0]["hook"], "reviewer");
    assert_eq!(reopened[0]["reopen_count"], 1);
    let end = session.events("task_end")[0];
    assert_eq!(end["reopen_count"], 1);
    assert_eq!(end["turns"], 2);
    assert_eq!(end["exit_status"], "ok");
    assert_eq!(
        std::fs::read_to_string(session.workdir.join("out/result.txt")).unwrap(),
        "final"
    );
    let second = emulator.requests()[1].body.to_string();
    assert!(second.contains("add a title"), "{second}");
    // The hook saw the first result text at the first on-task-end.
    let ends: Vec<Value> = session
        .log("reviewer")
        .into_iter()
        .filter(|l| l["handler"] == "on-task-end")
        .collect();
    assert_eq!(ends[0]["event"]["result_text"], "draft");
    assert_eq!(ends[1]["event"]["reopen_count"], 1);
}

#[test]
fn reopening_past_the_budget_ends_the_task_reopen_budget_exhausted() {
    let emulator = emulator("turns:\n  - reply: { text: one }\n  - reply: { text: two }\n");
    let dir = tempfile::tempdir().unwrap();
    let never_happy = Hook::probe(
        "never-happy",
        json!({"respond": {"on-task-end": {"arm": "reopen-task", "value": "again"}}}),
    )
    .bound("on-task-end", "reopen-task");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[never_happy],
        "lifecycle: { max_task_reopens: 1 }",
    );
    let session = run(&file, &["write"]);
    assert_eq!(session.output.code, 1, "{:#?}", session.output);
    assert_eq!(session.report["exit_status"], "reopen_budget_exhausted");
    let end = session.events("task_end")[0];
    assert_eq!(end["exit_status"], "reopen_budget_exhausted");
    assert_eq!(end["reopen_count"], 1);
    // `on-task-end` heard each return of the loop: the first, and the reopened one.
    let ends = session.handlers("never-happy");
    assert_eq!(ends, ["on-task-end", "on-task-end"], "{ends:?}");
}

/// A hook bound to `on-task-end` that asks every task to be reopened.
fn reopener() -> Hook {
    Hook::probe(
        "reopener",
        json!({"respond": {"on-task-end": {"arm": "reopen-task", "value": "again"}}}),
    )
    .bound("on-task-end", "reopen-task")
}

#[test]
fn a_task_ended_by_the_spend_ceiling_reaches_on_task_end_and_is_not_reopened() {
    let emulator = emulator("turns:\n  - reply: { text: never sent }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &emulator.url(), &[reopener()], "");
    replace_in(
        &file,
        "  max_turns: 8\n",
        "  max_turns: 8\n  max_session_tokens: 5\n",
    );
    let session = run(&file, &["write"]);
    assert_eq!(
        session.report["exit_status"], "spend_ceiling_reached",
        "{:#?}",
        session.output
    );
    assert!(emulator.requests().is_empty(), "the call was never made");
    assert_eq!(session.handlers("reopener"), ["on-task-end"]);
    let end = &session.log("reopener")[0]["event"];
    assert_eq!(end["exit_status"], "spend_ceiling_reached", "{end}");
    assert!(session.events("task_reopened").is_empty());
    assert!(
        session
            .hook_log("reopener")
            .contains("reopen-task ignored: the spend ceiling was reached"),
        "{}",
        session.hook_log("reopener")
    );
}

#[test]
fn max_task_reopens_zero_disables_reopening() {
    let emulator = emulator("turns:\n  - reply: { text: one }\n");
    let dir = tempfile::tempdir().unwrap();
    let reopener = Hook::probe(
        "reopener",
        json!({"respond": {"on-task-end": {"arm": "reopen-task", "value": "again"}}}),
    )
    .bound("on-task-end", "reopen-task");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[reopener],
        "lifecycle: { max_task_reopens: 0 }",
    );
    let session = run(&file, &["write"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert!(session.events("task_reopened").is_empty());
    assert_eq!(emulator.requests().len(), 1);
}

#[test]
fn a_reopened_task_shares_the_turn_budget() {
    let emulator = emulator(
        "turns:\n  - reply: { tool_calls: [ { id: c1, name: read-file, input: { path: x } } ] }\n  - reply: { text: one }\n  - reply: { tool_calls: [ { id: c2, name: read-file, input: { path: x } } ] }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let reopener = Hook::probe(
        "reopener",
        json!({"respond": {"on-task-end": {"arm": "reopen-task", "value": "again", "times": 1}}}),
    )
    .bound("on-task-end", "reopen-task");
    let file = capsule(dir.path(), &emulator.url(), &[reopener], "");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("max_turns: 8", "max_turns: 3");
    std::fs::write(&file, text).unwrap();
    let session = run(&file, &["go"]);
    assert_eq!(
        session.report["exit_status"], "max_turns_reached",
        "{:#?}",
        session.output
    );
    assert_eq!(session.events("inference").len(), 3);
    assert_eq!(session.events("task_end")[0]["turns"], 3);
}

// ---------------------------------------------------------------------------------------------
// seed-context

fn seed_capsule(
    dir: &Path,
    endpoint: &str,
    seed: Value,
    context: &str,
    with_compactor: bool,
) -> PathBuf {
    let mut hooks = vec![
        Hook::probe(
            "seeder",
            json!({"respond": {"on-task-start": {"arm": "seed-context", "value": seed}}}),
        )
        .bound("on-task-start", "seed-context"),
    ];
    if with_compactor {
        hooks.push(
            Hook::probe(
                "summarizer",
                json!({"respond": {"on-compaction": {"arm": "replace-context", "value": [
                    {"role": "user", "text": "S", "source_id": "summary"}
                ]}}}),
            )
            .bound("on-compaction", "replace-context"),
        );
    }
    capsule(dir, endpoint, &hooks, context)
}

fn long(n: usize) -> String {
    "word ".repeat(n)
}

#[test]
fn a_seed_that_fits_is_committed_whole_at_the_head_of_the_context() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let seed = json!([
        {"role": "user", "text": "earlier question", "source_id": "memory:1", "id": "msg_from_hook"},
        {"role": "assistant", "text": "earlier answer"}
    ]);
    let file = seed_capsule(
        dir.path(),
        &emulator.url(),
        seed,
        "context: { max_tokens: 10000, seed_budget: 0.25 }",
        false,
    );
    let session = run(&file, &["now"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let seed_event = session.events("context_seed")[0];
    assert_eq!(seed_event["outcome"], "committed");
    assert_eq!(seed_event["committed_messages"], 2);
    assert_eq!(seed_event["budget_tokens"], 2500);
    let messages = &emulator.requests()[0].body["messages"];
    assert_eq!(messages[0]["content"][0]["text"], "earlier question");
    assert_eq!(messages[2]["content"][0]["text"], "now");
    // The history keeps the hook's source-id and replaces its id; neither reaches the wire.
    let context = session.report["tasks"][0]["context_id"].as_str().unwrap();
    let history: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            session
                .workdir
                .join(format!("contexts/{context}/history.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(history[0]["source_id"], "memory:1");
    assert_ne!(history[0]["id"], "msg_from_hook");
    assert!(history[0]["id"].as_str().unwrap().starts_with("msg_"));
    assert!(history[1].get("source_id").is_none());
    let wire = emulator.requests()[0].body.to_string();
    assert!(
        !wire.contains("memory:1") && !wire.contains("msg_"),
        "{wire}"
    );
}

#[test]
fn the_first_bound_blocking_hook_to_return_a_seed_wins() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let seeder = |name: &'static str, text: &str| {
        Hook::probe(
            name,
            json!({"respond": {"on-task-start": {"arm": "seed-context",
                   "value": [{"role": "user", "text": text}]}}}),
        )
        .bound("on-task-start", "seed-context")
    };
    // `quiet` comes first and returns nothing; of the two that seed, the earlier declared wins.
    let quiet = Hook::probe("quiet", Value::Null).bound("on-task-start", "seed-context");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[
            quiet,
            seeder("first", "from the first"),
            seeder("second", "from the second"),
        ],
        "context: { max_tokens: 10000, seed_budget: 0.25 }",
    );
    let session = run(&file, &["now"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let seeds = session.events("context_seed");
    assert_eq!(seeds.len(), 1, "{seeds:#?}");
    assert_eq!(seeds[0]["hook"], "first", "{:#}", seeds[0]);
    let wire = emulator.requests()[0].body.to_string();
    assert!(wire.contains("from the first"), "{wire}");
    assert!(!wire.contains("from the second"), "{wire}");
}

#[test]
fn an_oversized_seed_loses_its_oldest_messages_whole_exchanges_at_a_time() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    // Dropping the long question alone would leave the context opening with an answer: the
    // whole exchange goes, so the seed still opens with a user message.
    let seed = json!([
        {"role": "user", "text": long(300)},
        {"role": "assistant", "text": "old answer"},
        {"role": "user", "text": "recent question"},
        {"role": "assistant", "text": "recent answer"}
    ]);
    let file = seed_capsule(
        dir.path(),
        &emulator.url(),
        seed,
        "context: { max_tokens: 1000, seed_budget: 0.1 }",
        false,
    );
    let session = run(&file, &["now"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let seed_event = session.events("context_seed")[0];
    assert_eq!(seed_event["outcome"], "dropped_oldest", "{seed_event}");
    assert_eq!(seed_event["committed_messages"], 2);
    assert!(seed_event["committed_tokens"].as_u64().unwrap() <= 100);
    let messages = &emulator.requests()[0].body["messages"];
    assert_eq!(messages[0]["content"][0]["text"], "recent question");
}

#[test]
fn an_oversized_seed_front_is_summarized_through_the_compaction_hook() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let seed = json!([
        {"role": "user", "text": long(300)},
        {"role": "assistant", "text": "recent answer"}
    ]);
    let file = seed_capsule(
        dir.path(),
        &emulator.url(),
        seed,
        "context: { max_tokens: 1000, seed_budget: 0.1 }",
        true,
    );
    let session = run(&file, &["now"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let seed_event = session.events("context_seed")[0];
    assert_eq!(seed_event["outcome"], "summarized", "{seed_event}");
    let messages = &emulator.requests()[0].body["messages"];
    assert_eq!(messages[0]["content"][0]["text"], "S");
    assert_eq!(messages[1]["content"][0]["text"], "recent answer");
}

#[test]
fn a_seed_that_cannot_fit_is_refused_and_the_task_goes_on() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let seed = json!([{"role": "user", "text": long(500)}]);
    // No context block: the budget is 0.
    let file = seed_capsule(dir.path(), &emulator.url(), seed, "", false);
    let session = run(&file, &["now"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let seed_event = session.events("context_seed")[0];
    assert_eq!(seed_event["outcome"], "refused");
    assert_eq!(seed_event["budget_tokens"], 0);
    assert!(seed_event["reason"].is_string());
    assert_eq!(
        emulator.requests()[0].body["messages"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

// ---------------------------------------------------------------------------------------------
// Event field notes.

#[test]
fn task_start_event_carries_window_budget_and_prior_tokens() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[Hook::probe("watcher", Value::Null)],
        "context: { max_tokens: 200001, seed_budget: 0.25 }",
    );
    let session = run(&file, &["go"]);
    let start = &session.log("watcher")[2]["event"];
    assert_eq!(start["context_window"], 200001);
    assert_eq!(start["budget_tokens"], 50000);
    assert_eq!(start["prior_tokens"], 0);
    assert_eq!(start["input"], "go");

    // Without a context block: 0 and 0.
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[Hook::probe("watcher", Value::Null)],
        "",
    );
    let session = run(&file, &["go"]);
    let start = &session.log("watcher")[2]["event"];
    assert_eq!(start["context_window"], 0);
    assert_eq!(start["budget_tokens"], 0);
}

#[test]
fn prior_tokens_under_a_threaded_conversation_count_the_loaded_history() {
    // Two door tasks in one threaded context: the second's `on-task-start` says how many
    // tokens the history it loads holds (the runtime's count, message by message).
    let emulator = emulator(
        "turns:\n  - reply: { text: \"noted: 42\" }\n  - reply: { text: \"it was 42\" }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    capsule(
        dir.path(),
        &emulator.url(),
        &[Hook::probe("watcher", Value::Null)],
        "lifecycle: { task_acceptance: queue, conversation: threaded }",
    );
    let served = serve(dir.path());
    for (id, text) in [("m-1", "remember 42"), ("m-2", "what was it?")] {
        let (status, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 1,
            "method": "SendMessage", "params": {"message": {"messageId": id,
            "role": "ROLE_USER", "contextId": "thread-1", "parts": [{"text": text}]}}}));
        assert_eq!(status, 200, "{answer:#}");
    }
    let session = murmur_testkit::door::session_dir(dir.path());
    let starts: Vec<Value> = read_lines(&served_workspace(dir.path()).join("watcher.jsonl"))
        .into_iter()
        .filter(|line| line["handler"] == "on-task-start")
        .map(|line| line["event"].clone())
        .collect();
    assert_eq!(starts.len(), 2, "{starts:#?}");
    assert_eq!(starts[0]["prior_tokens"], 0, "nothing to load yet");
    // What the second task loaded: the first task's two messages, as saved.
    let history: Vec<murmur_runtime::inference::neutral::StoredMessage> = serde_json::from_str(
        &std::fs::read_to_string(session.join("contexts/thread-1/history.json")).unwrap(),
    )
    .unwrap();
    let loaded: u64 = history[..2]
        .iter()
        .map(|m| {
            murmur_runtime::inference::tokens::count(&serde_json::to_string(&m.message).unwrap())
        })
        .sum();
    assert!(loaded > 0);
    assert_eq!(starts[1]["prior_tokens"], loaded, "{:#}", starts[1]);
}

/// Under a threaded conversation a task's seed goes ahead of the history it loads: the second
/// task's model gets the seed first, then the first task's exchange, then its own message.
#[test]
fn a_seed_is_placed_ahead_of_the_loaded_threaded_history() {
    let emulator = emulator(
        "turns:\n  - reply: { text: \"noted: 42\" }\n  - reply: { text: \"it was 42\" }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    seed_capsule(
        dir.path(),
        &emulator.url(),
        json!([{"role": "user", "text": "SEED: the user likes numbers", "source_id": "memory:1"}]),
        "context: { max_tokens: 4000 }\nlifecycle: { task_acceptance: queue, conversation: threaded }",
        false,
    );
    let served = serve(dir.path());
    for (id, text) in [("m-1", "remember 42"), ("m-2", "what was it?")] {
        let (status, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 1,
            "method": "SendMessage", "params": {"message": {"messageId": id,
            "role": "ROLE_USER", "contextId": "thread-1", "parts": [{"text": text}]}}}));
        assert_eq!(status, 200, "{answer:#}");
    }
    let requests = emulator.requests();
    assert_eq!(requests.len(), 2);
    // Every text block sent, in order (the driver may join consecutive user messages).
    let texts: Vec<&str> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter_map(|block| block["text"].as_str())
        .collect();
    let at = |needle: &str| {
        texts
            .iter()
            .position(|t| *t == needle)
            .unwrap_or_else(|| panic!("{needle} not sent: {texts:#?}"))
    };
    assert_eq!(at("SEED: the user likes numbers"), 0, "{texts:#?}");
    assert!(
        texts
            .iter()
            .rposition(|t| *t == "SEED: the user likes numbers")
            .unwrap()
            < at("remember 42"),
        "this task's seed and the first task's, then the loaded exchange: {texts:#?}"
    );
    assert!(at("remember 42") < at("noted: 42"), "{texts:#?}");
    assert_eq!(at("what was it?"), texts.len() - 1, "{texts:#?}");
}

#[test]
fn host_imports_answer_a_granted_hook_and_inference_is_traced_as_the_hooks() {
    let emulator =
        emulator("turns:\n  - reply: { text: hi from the model }\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let caller = Hook::probe(
        "caller",
        json!({"call": {"on-task-start": ["tokens", "task-io", "conversation", "inference"]}, "inference_model": "summary-model"}),
    );
    let file = capsule(dir.path(), &emulator.url(), &[caller], "");
    let session = run(&file, &["the task text"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let calls = &session
        .log("caller")
        .into_iter()
        .find(|l| l["handler"] == "on-task-start")
        .unwrap()["calls"];
    assert_eq!(calls["tokens"]["ok"], 2, "{calls}");
    assert_eq!(calls["task-io"]["ok"]["task_input"], "the task text");
    assert_eq!(calls["task-io"]["ok"]["task_result"], Value::Null);
    assert!(calls["conversation"]["ok"].is_array(), "{calls}");
    assert_eq!(calls["inference"]["ok"]["text"], "hi from the model");
    // One inference of the hook's own, with its model, traced with its origin.
    let inference = session.events("inference");
    let hooked: Vec<&&Value> = inference
        .iter()
        .filter(|e| e["origin"] == "hook:caller")
        .collect();
    assert_eq!(hooked.len(), 1);
    assert_eq!(hooked[0]["model"], "summary-model");
    assert_eq!(emulator.requests()[0].body["model"], "summary-model");
    // Its prompt cache key is the form without a context id: `<capsule>:<task-id>`.
    let task_id = session.report["tasks"][0]["task_id"].as_str().unwrap();
    assert_eq!(hooked[0]["prompt_cache_key"], format!("hooked:{task_id}"));
}

#[test]
fn a_hook_reads_a_context_a_client_named_from_another_task() {
    // Two tasks through the door: the first in the client's context `chat-42`, the second in
    // `other-1`, whose `on-task-start` asks for `chat-42` as it was saved.
    let emulator =
        emulator("turns:\n  - reply: { text: \"noted: 42\" }\n  - reply: { text: \"ok\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let reader = Hook::probe(
        "reader",
        json!({"call": {"on-task-start": ["conversation:chat-42"]}}),
    );
    capsule(
        dir.path(),
        &emulator.url(),
        &[reader],
        "lifecycle: { task_acceptance: queue, conversation: threaded }",
    );
    let served = serve(dir.path());
    for (id, context, text) in [
        ("m-1", "chat-42", "remember 42"),
        ("m-2", "other-1", "and?"),
    ] {
        let (status, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 1,
            "method": "SendMessage", "params": {"message": {"messageId": id,
            "role": "ROLE_USER", "contextId": context, "parts": [{"text": text}]}}}));
        assert_eq!(status, 200, "{answer:#}");
        assert_eq!(answer["result"]["task"]["contextId"], context, "{answer:#}");
    }
    let lines = read_lines(&served_workspace(dir.path()).join("reader.jsonl"));
    let starts: Vec<&Value> = lines
        .iter()
        .filter(|line| line["handler"] == "on-task-start")
        .collect();
    assert_eq!(starts.len(), 2, "{lines:#?}");
    let saved = &starts[1]["calls"]["conversation:chat-42"];
    let texts = saved["ok"].to_string();
    assert!(
        texts.contains("remember 42") && texts.contains("noted: 42"),
        "the second task reads the first's saved context: {saved:#}"
    );
    assert_eq!(
        starts[0]["calls"]["conversation:chat-42"]["ok"]
            .as_array()
            .map(Vec::len),
        Some(0),
        "the first task's own context is empty at on-task-start, not an error: {:#}",
        starts[0]["calls"]
    );
}

#[test]
fn a_hooks_inference_with_a_model_that_fails_never_falls_back() {
    let emulator = emulator(
        "turns:\n  - reply: { text: never }\n    faults: [ { status: 404, type: not_found_error, message: \"model: no-such-model\" } ]\n  - reply: { text: done }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let caller = Hook::probe(
        "caller",
        json!({"call": {"on-task-start": ["inference"]}, "inference_model": "no-such-model"}),
    );
    let file = capsule(dir.path(), &emulator.url(), &[caller], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let calls = &session.log("caller")[2]["calls"];
    assert!(
        calls["inference"]["err"]
            .as_str()
            .unwrap()
            .contains("no-such-model"),
        "{calls}"
    );
    // Exactly one request with that model, and no retry with the capsule's model.
    let models: Vec<String> = emulator
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(models, ["no-such-model", "test-model"]);
}

#[test]
fn compaction_event_carries_model_and_prompt_verbatim_or_absent() {
    for (compaction, model, prompt) in [
        (
            "  compaction: { threshold: 0.5, model: small-model, system_prompt: \"Summarize tersely.\" }",
            json!("small-model"),
            json!("Summarize tersely."),
        ),
        ("  compaction: { threshold: 0.5 }", Value::Null, Value::Null),
    ] {
        let emulator = emulator(ONE_TOOL_CALL);
        let dir = tempfile::tempdir().unwrap();
        let watcher = Hook::probe("watcher", Value::Null).bound("on-compaction", "replace-context");
        let file = capsule(
            dir.path(),
            &emulator.url(),
            &[watcher],
            "context: { max_tokens: 200 }",
        );
        let text = std::fs::read_to_string(&file).unwrap().replace(
            "  max_turns: 8\n",
            &format!("  max_turns: 8\n{compaction}\n"),
        );
        std::fs::write(&file, text).unwrap();
        let session = run(&file, &["go"]);
        assert_eq!(session.output.code, 0, "{:#?}", session.output);
        let event = &session.log("watcher")[0]["event"];
        assert_eq!(event["model"], model);
        assert_eq!(event["system_prompt"], prompt);
        assert_eq!(event["context_window"], 200);
        assert!(event["messages"].as_array().unwrap().len() >= 3);
    }
}

/// `compaction.system_prompt_file` is handed to `on-compaction` hooks as its contents; a file
/// that cannot be read stops the run before the model is called, never an empty prompt.
#[test]
fn a_compaction_prompt_file_is_delivered_as_its_contents_and_an_unreadable_one_stops_the_run() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let watcher = Hook::probe("watcher", Value::Null).bound("on-compaction", "replace-context");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[watcher],
        "context: { max_tokens: 200 }",
    );
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "  max_turns: 8\n",
        "  max_turns: 8\n  compaction: { threshold: 0.5, system_prompt_file: prompts/compact.md }\n",
    );
    std::fs::write(&file, text).unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(
        dir.path().join("prompts/compact.md"),
        "Keep the decisions.\nDrop the chatter.\n",
    )
    .unwrap();
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let event = &session.log("watcher")[0]["event"];
    assert_eq!(
        event["system_prompt"],
        "Keep the decisions.\nDrop the chatter.\n"
    );

    // A file that cannot be read (here a directory by that name).
    let asked = emulator.requests().len();
    std::fs::remove_file(dir.path().join("prompts/compact.md")).unwrap();
    std::fs::create_dir(dir.path().join("prompts/compact.md")).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "go"])
        .arg(&file)
        .run();
    assert_eq!(output.code, 2, "{output:#?}");
    let text = format!("{}{}", output.stdout, output.stderr);
    assert!(text.contains("compact.md"), "{output:#?}");
    assert_eq!(emulator.requests().len(), asked, "the model was not called");
}

// ---------------------------------------------------------------------------------------------
// Compaction

#[test]
fn replace_context_commits_and_drops_a_held_continuation() {
    // The Responses driver holds a continuation; compaction must make the next turn a full
    // resend of the replaced history.
    let script = r#"
turns:
  - reply: { id: resp_1, tool_calls: [ { id: c1, name: read-file, input: { path: a.md } } ] }
  - reply: { id: resp_2, text: done }
"#;
    let emulator = emulator(script);
    let dir = tempfile::tempdir().unwrap();
    let compactor = Hook::probe(
        "squeezer",
        json!({"respond": {"on-compaction": {"arm": "replace-context", "value": [
            {"role": "user", "text": "Summary: read a.md", "source_id": "squeezer:summary"}
        ]}}}),
    )
    .bound("on-compaction", "replace-context");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[compactor],
        "context: { max_tokens: 300 }",
    )
    .to_path_buf();
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("driver-anthropic", "driver-openai-responses");
    std::fs::write(&file, text).unwrap();
    let session = run(&file, &["read a.md"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let compaction = session.events("compaction");
    assert_eq!(compaction.len(), 1);
    assert_eq!(compaction[0]["hook"], "squeezer");
    assert!(compaction[0]["tokens_after"].as_u64() < compaction[0]["tokens_before"].as_u64());
    assert_eq!(compaction[0]["messages_after"], 1);
    let second = &emulator.requests()[1].body;
    assert!(second.get("previous_response_id").is_none(), "{second}");
    assert!(second.to_string().contains("Summary: read a.md"));
    let inference = session.events("inference");
    assert_eq!(inference[1]["sent"]["full_resend"], true);
    // The prompt cache key is the conversation's, not its content's: unchanged across the
    // compaction, in the trace and on the wire.
    let key = inference[0]["prompt_cache_key"].as_str().unwrap();
    assert!(!key.is_empty());
    assert_eq!(inference[1]["prompt_cache_key"], key);
    let sent: Vec<Value> = emulator
        .requests()
        .iter()
        .map(|r| r.body["prompt_cache_key"].clone())
        .collect();
    assert_eq!(sent, [json!(key), json!(key)]);
}

#[test]
fn a_compaction_hook_error_ends_the_session_failed() {
    let emulator = emulator(&format!(
        "{}\n  - reply: {{ text: never }}\n",
        ONE_TOOL_CALL.trim_end()
    ));
    let dir = tempfile::tempdir().unwrap();
    let broken = Hook::probe(
        "broken",
        json!({"respond": {"on-compaction": {"arm": "error", "value": "summarizer unavailable"}}}),
    )
    .bound("on-compaction", "replace-context");
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[broken, reopener()],
        "context: { max_tokens: 200 }",
    );
    let session = run(&file, &["first", "second"]);
    assert_eq!(session.output.code, 1, "{:#?}", session.output);
    // The task the failed compaction ended still reaches `on-task-end`, once, and a reopen
    // asked for it is not honored: the session is ending.
    assert_eq!(session.handlers("reopener"), ["on-task-end"]);
    assert_eq!(session.log("reopener")[0]["event"]["exit_status"], "failed");
    assert!(session.events("task_reopened").is_empty());
    assert!(
        session
            .hook_log("reopener")
            .contains("reopen-task ignored: the session is ending"),
        "{}",
        session.hook_log("reopener")
    );
    assert_eq!(session.report["exit_status"], "failed");
    assert_eq!(
        session.report["tasks"].as_array().unwrap().len(),
        1,
        "the session stopped"
    );
    assert_eq!(session.report["tasks"][0]["error"]["code"], "E-HOOK-006");
    assert_eq!(session.trace.last().unwrap()["event_type"], "session_end");
    assert_eq!(session.trace.last().unwrap()["exit_status"], "failed");
}

#[test]
fn a_session_a_failed_compaction_ends_answers_its_queued_tasks_failed_with_why() {
    // The first task's compaction fails (E-HOOK-006): the session ends, and the task queued
    // behind it is answered failed, naming why, instead of never being answered.
    let emulator = emulator(
        "turns:\n  - reply: { tool_calls: [ { id: c1, name: write-file, input: { path: a.md, content: hi } } ] }\n    first_byte_delay_ms: 400\n  - reply: { text: never }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let broken = Hook::probe(
        "broken",
        json!({"respond": {"on-compaction": {"arm": "error", "value": "summarizer unavailable"}}}),
    )
    .bound("on-compaction", "replace-context");
    capsule(
        dir.path(),
        &emulator.url(),
        &[broken],
        "context: { max_tokens: 200 }\nlifecycle: { task_acceptance: queue }",
    );
    let mut served = serve(dir.path());
    let send = |id: &str, immediately: bool| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "write"}]},
            "configuration": {"returnImmediately": immediately}}})
    };
    let (_, first) = served.rpc(&send("m-1", true));
    assert!(first["result"]["task"]["id"].is_string(), "{first:#}");
    // Blocks until the second task ends: it is queued behind the first.
    let (status, second) = served.rpc(&send("m-2", false));
    assert_eq!(status, 200, "{second:#}");
    let task = &second["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{second:#}");
    let why = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        why.starts_with("the session ended before this task started: error[E-HOOK-006]"),
        "{why}"
    );
    assert_eq!(served.wait(Duration::from_secs(30)), Some(1));
}

#[test]
fn a_compaction_summary_the_spend_ceiling_refuses_ends_the_session_spend_ceiling_reached() {
    // The compaction hook asks for a summary (`run-inference`), the ceiling refuses it, and the
    // hook errs: the session ends `spend_ceiling_reached`, and the second task never starts.
    let summarizer = || {
        Hook::probe(
            "summarizer",
            json!({"call": {"on-compaction": ["inference"]},
                   "respond": {"on-compaction": {"arm": "error", "value": "no summary"}}}),
        )
        .bound("on-compaction", "replace-context")
    };
    let with_ceiling = |file: &Path, ceiling: u64| {
        replace_in(
            file,
            "  max_turns: 8\n",
            &format!("  max_turns: 8\n  max_session_tokens: {ceiling}\n"),
        )
    };
    // Measured first, with room for everything: what the first turn and the summary cost.
    let measure = emulator(&format!(
        "{}\n  - reply: {{ text: summary }}\n",
        ONE_TOOL_CALL.trim_end()
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        &measure.url(),
        &[summarizer()],
        "context: { max_tokens: 200 }",
    );
    with_ceiling(&file, 1_000_000);
    let measured = run(&file, &["first"]);
    let inference = measured.events("inference");
    assert_eq!(inference.len(), 2, "{inference:#?}");
    let turn = inference[0]["input_tokens_estimated"].as_u64().unwrap()
        + inference[0]["output_tokens_estimated"].as_u64().unwrap();
    assert_eq!(inference[1]["origin"], "hook:summarizer");
    let summary = inference[1]["input_tokens_estimated"].as_u64().unwrap();
    assert!(summary >= 2, "{summary}");

    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &[summarizer()],
        "context: { max_tokens: 200 }",
    );
    with_ceiling(&file, turn + summary / 2);
    let session = run(&file, &["first", "second"]);
    assert_eq!(
        session.report["exit_status"], "spend_ceiling_reached",
        "{:#?}",
        session.output
    );
    let tasks = session.report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "the second task never started: {tasks:#?}");
    assert_eq!(tasks[0]["exit_status"], "spend_ceiling_reached");
    assert_eq!(tasks[0]["error"]["code"], "E-RUN-018");
    assert_eq!(emulator.requests().len(), 1, "the summary was never sent");
    let end = session.trace.last().unwrap();
    assert_eq!(end["event_type"], "session_end");
    assert_eq!(end["exit_status"], "spend_ceiling_reached");
}

/// The two-task session of the next test: the first task is reopened past
/// `lifecycle.max_task_reopens: 1` (it ends `reopen_budget_exhausted`), the second makes one
/// tool call, after which its history is past the compaction threshold.
fn after_an_exhausted_task(dir: &Path, endpoint: &str, compactor: Hook, ceiling: u64) -> PathBuf {
    let file = capsule(
        dir,
        endpoint,
        &[compactor, reopener(), Hook::probe("watcher", Value::Null)],
        "context: { max_tokens: 200 }\nlifecycle: { max_task_reopens: 1 }",
    );
    replace_in(
        &file,
        "  max_turns: 8\n",
        &format!("  max_turns: 8\n  max_session_tokens: {ceiling}\n"),
    );
    file
}

const EXHAUSTED_THEN_A_TOOL_CALL: &str = r#"
turns:
  - reply: { text: one }
  - reply: { text: two }
  - reply: { tool_calls: [ { id: c1, name: write-file, input: { path: a.md, content: hi } } ] }
  - reply: { text: summary }
"#;

#[test]
fn a_compaction_error_decides_the_sessions_exit_status_whatever_an_earlier_task_ended_with() {
    // The first task ends `reopen_budget_exhausted`; the second's compaction hook errs. The
    // session ends as the compaction error says: `failed`, or `spend_ceiling_reached` when
    // the hook's summary (`run-inference`) was refused by the ceiling.
    let summarizer = || {
        Hook::probe(
            "summarizer",
            json!({"call": {"on-compaction": ["inference"]},
                   "respond": {"on-compaction": {"arm": "error", "value": "no summary"}}}),
        )
        .bound("on-compaction", "replace-context")
    };
    // Measured first, with room for everything: what the agent's calls and the summary cost.
    let measure = emulator(EXHAUSTED_THEN_A_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let file = after_an_exhausted_task(dir.path(), &measure.url(), summarizer(), 1_000_000);
    let measured = run(&file, &["first", "second"]);
    let statuses: Vec<&Value> = measured
        .events("task_end")
        .iter()
        .map(|e| &e["exit_status"])
        .collect();
    assert_eq!(
        statuses,
        ["reopen_budget_exhausted", "failed"],
        "{:#?}",
        measured.output
    );
    assert_eq!(
        measured.report["exit_status"], "failed",
        "{:#?}",
        measured.output
    );
    assert_eq!(measured.trace.last().unwrap()["exit_status"], "failed");
    assert_eq!(measured.report["tasks"][1]["error"]["code"], "E-HOOK-006");
    let inference = measured.events("inference");
    assert_eq!(inference.len(), 4, "{inference:#?}");
    assert_eq!(inference[3]["origin"], "hook:summarizer");
    let agent: u64 = inference[..3]
        .iter()
        .map(|e| {
            e["input_tokens_estimated"].as_u64().unwrap()
                + e["output_tokens_estimated"].as_u64().unwrap()
        })
        .sum();
    let summary = inference[3]["input_tokens_estimated"].as_u64().unwrap();
    assert!(summary >= 2, "{summary}");

    // The same session under a ceiling the summary passes: `spend_ceiling_reached`.
    let emulator = emulator(EXHAUSTED_THEN_A_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let file = after_an_exhausted_task(
        dir.path(),
        &emulator.url(),
        summarizer(),
        agent + summary / 2,
    );
    let session = run(&file, &["first", "second"]);
    let tasks = session.report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{:#?}", session.output);
    assert_eq!(tasks[0]["exit_status"], "reopen_budget_exhausted");
    assert_eq!(tasks[1]["exit_status"], "spend_ceiling_reached");
    assert_eq!(tasks[1]["error"]["code"], "E-RUN-018");
    assert_eq!(
        session.report["exit_status"], "spend_ceiling_reached",
        "{:#?}",
        session.output
    );
    assert_eq!(emulator.requests().len(), 3, "the summary was never sent");
    let end = session.trace.last().unwrap();
    assert_eq!(end["event_type"], "session_end");
    assert_eq!(end["exit_status"], "spend_ceiling_reached");
    // `on-session-end` heard the same status.
    let ends: Vec<Value> = session
        .log("watcher")
        .into_iter()
        .filter(|l| l["handler"] == "on-session-end")
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["event"]["exit_status"], "spend_ceiling_reached");
}

// ---------------------------------------------------------------------------------------------
// Async hooks

#[test]
fn an_async_hook_hears_every_event_in_order_and_its_faults_reach_the_trace() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let background = Hook {
        mode: "async",
        ..Hook::probe(
            "background",
            json!({"respond": {"on-inference": {"arm": "artifact", "value": {"name": "x", "media_type": "text/plain", "content": "x"}}}}),
        )
    };
    let file = capsule(dir.path(), &emulator.url(), &[background], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(
        session.handlers("background"),
        [
            "on-stage",
            "on-session-start",
            "on-task-start",
            "on-inference",
            "on-tool-call",
            "on-inference",
            "on-task-end",
            "on-session-end",
        ]
    );
    // An async hook's return is never committed: each non-none arm is a fault.
    assert!(!session.workspace.join("out/artifacts/x").exists());
    let faults = session.events("hook_dispatch_error");
    assert_eq!(faults.len(), 2, "{faults:?}");
    // Everything was drained before session_end.
    let end = session
        .trace
        .iter()
        .position(|e| e["event_type"] == "session_end")
        .unwrap();
    assert!(
        session
            .trace
            .iter()
            .position(|e| e["event_type"] == "hook_dispatch_error")
            .unwrap()
            < end
    );
}

#[test]
fn a_full_async_queue_drops_events_when_told_and_traces_each_drop() {
    let emulator = emulator(ONE_TOOL_CALL);
    let dir = tempfile::tempdir().unwrap();
    let slow = Hook {
        mode: "async",
        // It spins until its deadline: short, so the test does not spin a core for the
        // default's 30 s; still past the 2 s drain.
        entry_extra: ", queue: { capacity: 1, on_overflow: drop, drain_seconds: 2 }, deadline_seconds: 4",
        ..Hook::probe("slow", json!({"respond": {"on-stage": {"arm": "spin"}}}))
    };
    let file = capsule(dir.path(), &emulator.url(), &[slow], "");
    let session = run(&file, &["go"]);
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let faults = session.events("hook_dispatch_error");
    let kinds: Vec<&str> = faults.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"dropped"), "{kinds:?}");
    assert!(
        kinds.contains(&"drain_timeout") || kinds.contains(&"stopped"),
        "{kinds:?}"
    );
}
