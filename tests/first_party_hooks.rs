//! The first-party hooks, through `mur run` with the real Anthropic driver and the provider
//! emulator: the compactor keeps a 40-turn session inside a small context window and it still
//! finishes with the right result; the policy hook denies by its rules; the debug hook writes
//! one JSON line per event.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-first-party";

fn capsule(dir: &Path, endpoint: &str, hooks: &str, extra: &str) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: first-party
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write_file} }}
{hooks}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  max_turns: 45
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

fn artifact(name: &str) -> String {
    repo_root()
        .join("artifacts")
        .join(name)
        .display()
        .to_string()
}

/// A finished session's report, trace, record (trace, result, the runtime's logs) and
/// workspace (what the tools and hooks wrote).
struct Run {
    report: Value,
    trace: Vec<Value>,
    record: PathBuf,
    workspace: PathBuf,
}

fn run(file: &Path, task: &str) -> Run {
    let dir = file.parent().unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", task])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .run();
    let report: Value =
        serde_json::from_str(&output.stdout).unwrap_or_else(|_| panic!("no report: {output:#?}"));
    assert_eq!(output.code, 0, "{output:#?}");
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    let trace = std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Run {
        report,
        trace,
        record,
        workspace,
    }
}

fn of_type<'a>(trace: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    trace
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

#[test]
fn the_compactor_keeps_a_40_turn_session_in_a_small_window_and_it_finishes_right() {
    // 39 turns each writing a note, then the answer. The summarizer model has a standing reply.
    let mut script = String::from("turns:\n");
    for n in 1..=39 {
        script.push_str(&format!(
            "  - reply: {{ text: \"Writing note {n}.\", tool_calls: [ {{ id: call_{n}, name: write-file, input: {{ path: notes/n{n}.md, content: \"note number {n} with some words to take up room in the context\" }} }} ] }}\n"
        ));
    }
    script.push_str("  - reply: { text: \"All 39 notes are written.\" }\n");
    script.push_str("by_model:\n  summary-model: { text: \"The assistant has been writing numbered notes, one per turn.\" }\n");
    let emulator = Emulator::builder(Script::from_yaml(&script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = format!(
        "  - {{ name: compactor, version: \"0.1.0\", runtime: hook, path: {}, config: {{ keep_last: 4 }}, grants: [ runtime/inference ] }}",
        artifact("compactor")
    );
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &hooks,
        "  compaction: { threshold: 0.6, model: summary-model }\ncontext: { max_tokens: 3000 }",
    );
    let Run {
        report,
        trace,
        record,
        workspace,
    } = run(&file, "Write 39 numbered notes.");
    assert_eq!(report["exit_status"], "ok");
    assert_eq!(
        std::fs::read_to_string(record.join("out/result.txt")).unwrap(),
        "All 39 notes are written."
    );
    for n in 1..=39 {
        assert!(
            workspace.join(format!("notes/n{n}.md")).is_file(),
            "note {n}"
        );
    }
    let agent_turns = of_type(&trace, "inference")
        .iter()
        .filter(|e| e["origin"] == "agent")
        .count();
    assert_eq!(agent_turns, 40);

    let compactions = of_type(&trace, "compaction");
    assert!(compactions.len() >= 2, "{} compactions", compactions.len());
    for compaction in &compactions {
        assert_eq!(compaction["hook"], "compactor");
        assert!(compaction["tokens_after"].as_u64() < compaction["tokens_before"].as_u64());
        assert!(
            compaction["tokens_before"].as_u64().unwrap() > 1800,
            "{compaction}"
        );
    }
    // Each compaction made one summarization call through the primary driver, traced as the
    // hook's, with the compaction model.
    let summaries: Vec<&Value> = of_type(&trace, "inference")
        .into_iter()
        .filter(|e| e["origin"] == "hook:compactor")
        .collect();
    assert_eq!(summaries.len(), compactions.len());
    assert!(summaries.iter().all(|e| e["model"] == "summary-model"));
    // Every request the provider got was valid: tool calls and results were never split.
    let requests = emulator.requests();
    assert!(
        requests.iter().all(|r| r.status == 200),
        "{:#?}",
        requests
            .iter()
            .filter(|r| r.status != 200)
            .collect::<Vec<_>>()
    );
    // After a compaction the conversation opens with the summary.
    let after_first = requests
        .iter()
        .filter(|r| r.body["model"] == "test-model")
        .find(|r| {
            r.body
                .to_string()
                .contains("Summary of the earlier conversation")
        })
        .expect("a request after compaction");
    assert_eq!(after_first.body["messages"][0]["role"], "user");
}

#[test]
fn the_policy_hook_denies_by_its_rules_and_lets_the_rest_through() {
    let script = r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: write-file, input: { path: secrets/key.txt, content: hunter2 } } ] }
  - reply: { tool_calls: [ { id: c2, name: write-file, input: { path: notes/ok.md, content: fine } } ] }
  - reply: { text: done }
"#;
    let emulator = Emulator::builder(Script::from_yaml(script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = format!(
        "  - {{ name: policy, version: \"0.1.0\", runtime: hook, path: {}, config: {{ rules: [ {{ tool: write-file, input: {{ path: \"^secrets/\" }}, reason: \"secrets are off limits\" }} ] }} }}",
        artifact("policy")
    );
    let file = capsule(dir.path(), &emulator.url(), &hooks, "");
    let Run {
        trace, workspace, ..
    } = run(&file, "save things");
    assert!(!workspace.join("secrets/key.txt").exists());
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/ok.md")).unwrap(),
        "fine"
    );
    let denied = of_type(&trace, "call_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["hook"], "policy");
    assert_eq!(denied[0]["reason"], "secrets are off limits");
    let second = emulator.requests()[1].body.to_string();
    assert!(
        second.contains("denied by hook `policy`: secrets are off limits"),
        "{second}"
    );
}

#[test]
fn the_debug_hook_writes_one_json_line_per_event() {
    let script = r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: read-file, input: { path: missing.md } } ] }
  - reply: { text: done }
"#;
    let emulator = Emulator::builder(Script::from_yaml(script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = format!(
        "  - {{ name: debug-hook, version: \"0.1.0\", runtime: hook, path: {}, capabilities: {{ filesystem: {{ scope: write }} }} }}",
        artifact("debug-hook")
    );
    let file = capsule(dir.path(), &emulator.url(), &hooks, "");
    let Run {
        report,
        trace,
        record,
        workspace,
    } = run(&file, "look");
    // The hook writes through its filesystem grant: into the workspace, never the record.
    assert!(!record.join("logs/debug-hook.jsonl").exists());
    assert!(
        !workspace.join("logs").exists(),
        "nothing among the agent's own files"
    );
    let lines: Vec<Value> =
        std::fs::read_to_string(workspace.join(".murmur-scratch/debug-hook.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let handlers: Vec<&str> = lines
        .iter()
        .map(|l| l["handler"].as_str().unwrap())
        .collect();
    assert_eq!(
        handlers,
        [
            "on-stage",
            "on-session-start",
            "on-task-start",
            "on-inference",
            "on-tool-call",
            "on-inference",
            "on-task-end",
            "on-session-end"
        ]
    );
    assert_eq!(lines[1]["event"]["session_id"], report["session_id"]);
    assert!(of_type(&trace, "hook_dispatch_error").is_empty());
}

/// Spend: the compactor's summary goes through the session's one spend meter; when the ceiling
/// refuses it, the session ends `spend_ceiling_reached`, not as a failed hook.
#[test]
fn a_summary_the_spend_ceiling_refuses_ends_the_task_at_the_ceiling() {
    let mut script = String::from("turns:\n");
    for n in 1..=12 {
        script.push_str(&format!(
            "  - reply: {{ text: \"Writing note {n}.\", tool_calls: [ {{ id: call_{n}, name: write-file, input: {{ path: notes/n{n}.md, content: \"note number {n} with some words to take up room in the context\" }} }} ] }}\n"
        ));
    }
    script.push_str("  - reply: { text: \"Done.\" }\n");
    script.push_str("by_model:\n  summary-model: { text: \"Numbered notes were written.\" }\n");
    let hooks = format!(
        "  - {{ name: compactor, version: \"0.1.0\", runtime: hook, path: {}, config: {{ keep_last: 4 }}, grants: [ runtime/inference ] }}",
        artifact("compactor")
    );
    let extra =
        "  compaction: { threshold: 0.6, model: summary-model }\ncontext: { max_tokens: 3000 }";
    let start = || {
        Emulator::builder(Script::from_yaml(&script).unwrap())
            .api_key(KEY)
            .start()
            .unwrap()
    };

    // Unbounded: what was spent before the first summary, and what the summary asks.
    let emulator = start();
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &emulator.url(), &hooks, extra);
    let Run { trace, .. } = run(&file, "Write 12 numbered notes.");
    let inferences = of_type(&trace, "inference");
    let first_summary = inferences
        .iter()
        .position(|e| e["origin"] == "hook:compactor")
        .expect("a compaction happened");
    let spent_before: u64 = inferences[..first_summary]
        .iter()
        .map(|e| {
            e["input_tokens_estimated"].as_u64().unwrap()
                + e["output_tokens_estimated"].as_u64().unwrap()
        })
        .sum();
    let summary_input = inferences[first_summary]["input_tokens_estimated"]
        .as_u64()
        .unwrap();

    // A ceiling halfway into the summary: every agent call before it fits, the summary does
    // not (the summary's payload carries message ids, so its count varies by a few tokens).
    let emulator = start();
    let dir = tempfile::tempdir().unwrap();
    let ceiling = spent_before + summary_input / 2;
    let file = capsule(
        dir.path(),
        &emulator.url(),
        &hooks,
        &format!("  max_session_tokens: {ceiling}\n{extra}"),
    );
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "Write 12 numbered notes."])
        .arg(file.parent().unwrap())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    assert_eq!(output.code, 1, "{output:#?}");
    let report = output.json();
    assert_eq!(report["exit_status"], "spend_ceiling_reached");
    assert_eq!(report["tasks"][0]["error"]["code"], "E-RUN-018");
    let summaries = emulator
        .requests()
        .iter()
        .filter(|r| r.body["model"] == "summary-model")
        .count();
    assert_eq!(summaries, 0, "the refused summary never left");
}
