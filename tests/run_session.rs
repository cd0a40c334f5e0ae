//! `mur run` drives an agent capsule end to end: the real binary, the real first-party driver
//! components, the provider emulator on loopback. Each test names the rule it
//! holds.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Recorded, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-0001";

/// The three first-party drivers.
const DRIVERS: [&str; 3] = [
    "driver-anthropic",
    "driver-openai-chat",
    "driver-openai-responses",
];

/// A capsule named `name` on `driver` against `emulator`, with read-file, write-file and the
/// probe tool; `extra` is appended to the `inference:` block.
fn capsule(dir: &Path, name: &str, driver: &str, endpoint: &str, inference_extra: &str) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: {name}
version: "0.1.0"
artifacts:
  - name: {driver}
    version: "0.1.0"
    runtime: driver
    path: {driver_path}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write_file} }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: test-model
  driver: {{ artifact: {driver} }}
  system_prompt: "You keep notes."
  max_turns: 6
{inference_extra}
"#,
        driver_path = root.join("artifacts").join(driver).display(),
        read_file = root.join("artifacts/read-file").display(),
        write_file = root.join("artifacts/write-file").display(),
        probe = root.join("tests/fixtures/probe").display(),
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

/// `mur run` of `capsule`'s directory with `tasks`, its sessions under `work/` beside it.
fn mur_run(capsule: &Path, tasks: &[&str], extra: &[&str]) -> Mur {
    let dir = capsule.parent().unwrap();
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(extra);
    for task in tasks {
        mur = mur.args(["--task", task]);
    }
    mur
}

fn run(capsule: &Path, tasks: &[&str], extra: &[&str]) -> MurOutput {
    mur_run(capsule, tasks, extra).run()
}

fn run_json(capsule: &Path, tasks: &[&str]) -> (MurOutput, Value) {
    let output = run(capsule, tasks, &["--json"]);
    let report = output.json();
    (output, report)
}

fn trace(report: &Value) -> Vec<Value> {
    let path = report["trace_path"].as_str().expect("trace_path");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

/// Requests the emulator answered (not refused), in order.
fn answered(emulator: &Emulator) -> Vec<Recorded> {
    emulator
        .requests()
        .into_iter()
        .filter(|r| r.turn.is_some())
        .collect()
}

const WRITE_THEN_DONE: &str = r#"
turns:
  - reply:
      text: "I'll write it."
      tool_calls: [ { id: call_w1, name: write-file, input: { path: notes/today.md, content: "buy milk" } } ]
      usage: { input: 120, output: 30, cache_read: 100, cache_write: 20 }
  - reply:
      text: "Saved your note."
      usage: { input: 160, output: 8 }
"#;

#[test]
fn every_driver_runs_a_tool_using_task_to_the_end() {
    for driver in DRIVERS {
        let emulator = emulator(WRITE_THEN_DONE);
        let dir = tempfile::tempdir().unwrap();
        let file = capsule(dir.path(), "hello", driver, &emulator.url(), "");
        let (output, report) = run_json(&file, &["Note: buy milk"]);
        assert_eq!(output.code, 0, "{driver}: {output:#?}");
        assert_eq!(report["exit_status"], "ok", "{driver}");
        let workdir = PathBuf::from(report["workdir"].as_str().unwrap());
        let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(workspace.join("notes/today.md")).unwrap(),
            "buy milk",
            "{driver}"
        );
        assert_eq!(
            std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
            "Saved your note.",
            "{driver}"
        );
        assert!(workspace.join("MURMUR.md").is_file());

        // Two requests, both valid for the provider (the emulator refuses invalid ones).
        let requests = emulator.requests();
        assert!(
            requests.iter().all(|r| r.turn.is_some()),
            "{driver}: refused: {:#?}",
            requests
                .iter()
                .filter(|r| r.turn.is_none())
                .collect::<Vec<_>>()
        );
        assert_eq!(requests.len(), 2, "{driver}");
        // No envelope key reaches the provider.
        for request in &requests {
            let body = request.body.to_string();
            assert!(!body.contains("msg_"), "{driver}: envelope id sent: {body}");
            assert!(!body.contains("source_id"), "{driver}");
            assert!(!body.contains("produced_by"), "{driver}");
        }
        // The tool's result reaches the model fenced.
        let second = requests[1].body.to_string();
        assert!(
            second.contains("untrusted-content source=\\\"tool:write-file\\\""),
            "{driver}: {second}"
        );

        // The history holds the four messages with their envelope.
        let context = report["tasks"][0]["context_id"].as_str().unwrap();
        let history: Vec<Value> = serde_json::from_str(
            &std::fs::read_to_string(workdir.join("contexts").join(context).join("history.json"))
                .unwrap(),
        )
        .unwrap();
        let roles: Vec<&str> = history
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant", "tool", "assistant"],
            "{driver}"
        );
        assert!(
            history
                .iter()
                .all(|m| m["id"].as_str().unwrap().starts_with("msg_"))
        );
    }
}

#[test]
fn the_trace_tells_the_whole_session_and_its_totals_are_the_sums() {
    let emulator = emulator(WRITE_THEN_DONE);
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "hello", "driver-anthropic", &emulator.url(), "");
    let (output, report) = run_json(&file, &["Note: buy milk"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let events = trace(&report);
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "session_start",
            "task_start",
            "inference",
            "tool_call",
            "inference",
            "history_saved",
            "task_end",
            "session_end"
        ]
    );
    let session_id = report["session_id"].as_str().unwrap();
    assert!(session_id.starts_with("ses_") && session_id.len() == 36);
    for event in &events {
        assert_eq!(event["session_id"], session_id);
        assert!(event["timestamp"].as_u64().unwrap() > 1_700_000_000_000);
        assert!(event["event_id"].as_str().unwrap().starts_with("evt_"));
    }
    // The tree: session → task → turn → tool call; the saved history and the task's end
    // under the task.
    let id = |i: usize| events[i]["event_id"].clone();
    assert_eq!(events[0]["parent_id"], Value::Null);
    assert_eq!(events[1]["parent_id"], id(0));
    assert_eq!(events[2]["parent_id"], id(1));
    assert_eq!(events[3]["parent_id"], id(2));
    assert_eq!(events[5]["parent_id"], id(1));
    assert_eq!(events[6]["parent_id"], id(1));
    assert_eq!(events[7]["parent_id"], id(0));

    let first = &events[2];
    assert_eq!(first["turn"], 1);
    assert_eq!(first["decision"], "call_tools");
    assert_eq!(first["stop_reason"], "tool_call");
    assert_eq!(first["tool_name"], "write-file");
    assert_eq!(first["input_tokens_actual"], 120);
    assert_eq!(first["output_tokens_actual"], 30);
    assert_eq!(first["cached_tokens_actual"], 100);
    assert_eq!(first["cache_write_tokens_actual"], 20);
    assert!(first["input_tokens_estimated"].as_u64().unwrap() > 0);
    let second = &events[4];
    assert_eq!(second["decision"], "finish");
    // Not reported: absent, never 0.
    assert!(second.get("cached_tokens_actual").is_none(), "{second}");

    let tool = &events[3];
    assert_eq!(tool["tool_name"], "write-file");
    assert_eq!(tool["state_effect"], "mutate");
    assert_eq!(tool["resource_id"], "file:notes/today.md");
    assert_eq!(tool["status"], "passed");

    let end = &events[7];
    assert_eq!(end["exit_status"], "ok");
    let totals = &end["totals"];
    let sum = |field: &str| -> u64 {
        of_type(&events, "inference")
            .iter()
            .filter_map(|e| e[field].as_u64())
            .sum()
    };
    assert_eq!(totals["turns"], 2);
    assert_eq!(totals["tool_calls"], 1);
    assert_eq!(
        totals["input_tokens_estimated"],
        sum("input_tokens_estimated")
    );
    assert_eq!(
        totals["output_tokens_estimated"],
        sum("output_tokens_estimated")
    );
    assert_eq!(totals["input_tokens_actual"], 280);
    assert_eq!(totals["cached_tokens_actual"], 100);
}

#[test]
fn the_capsule_block_opens_the_system_prompt_byte_identical_across_launches() {
    let mut systems = Vec::new();
    for _ in 0..2 {
        let emulator = emulator("turns:\n  - reply: { text: done }\n");
        let dir = tempfile::tempdir().unwrap();
        let file = capsule(dir.path(), "hello", "driver-anthropic", &emulator.url(), "");
        let (output, _) = run_json(&file, &["go"]);
        assert_eq!(output.code, 0, "{output:#?}");
        let body = &answered(&emulator)[0].body;
        let system = match &body["system"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        assert!(system.contains("[Capsule]"), "{system}");
        assert!(system.contains("You keep notes."));
        systems.push(system);
    }
    assert_eq!(systems[0], systems[1]);
}

#[test]
fn prompt_cache_key_is_fixed_per_task_forwarded_where_defined_and_differs_between_runs() {
    let script = r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: read-file, input: { path: missing.md } } ] }
  - reply: { text: done }
"#;
    let mut keys = Vec::new();
    for _ in 0..2 {
        let emulator = emulator(script);
        let dir = tempfile::tempdir().unwrap();
        // A two-letter name: `<name>:<ctx>:<task>` fits in 64 characters.
        let file = capsule(dir.path(), "cr", "driver-openai-chat", &emulator.url(), "");
        let (output, report) = run_json(&file, &["read it"]);
        assert_eq!(output.code, 0, "{output:#?}");
        let requests = answered(&emulator);
        let first = requests[0].body["prompt_cache_key"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            requests[1].body["prompt_cache_key"], first,
            "fixed for every turn"
        );
        let task = &report["tasks"][0];
        assert_eq!(
            first,
            format!(
                "cr:{}:{}",
                task["context_id"].as_str().unwrap(),
                task["task_id"].as_str().unwrap()
            )
        );
        let events = trace(&report);
        assert_eq!(
            of_type(&events, "inference")[0]["prompt_cache_key"],
            first.as_str()
        );
        keys.push(first);
    }
    assert_ne!(keys[0], keys[1], "two runs differ");
}

#[test]
fn a_long_prompt_cache_key_is_shortened_with_a_hex_suffix_and_never_sent_to_anthropic() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "pull-request-reviewer",
        "driver-openai-responses",
        &emulator.url(),
        "",
    );
    let (output, _) = run_json(&file, &["review"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let key = answered(&emulator)[0].body["prompt_cache_key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(key.chars().count(), 64);
    assert!(key.starts_with("pull-request-reviewer:ctx_"), "{key}");
    let suffix = key.rsplit(':').next().unwrap();
    assert_eq!(suffix.len(), 16);
    assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()));

    let anthropic = emulator_for_anthropic_run();
    assert!(anthropic.get("prompt_cache_key").is_none(), "{anthropic}");
}

/// The body of one Anthropic request (the emulator refuses unknown fields, so a forwarded
/// `prompt_cache_key` would fail the run).
fn emulator_for_anthropic_run() -> Value {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "hello", "driver-anthropic", &emulator.url(), "");
    let (output, _) = run_json(&file, &["go"]);
    assert_eq!(output.code, 0, "{output:#?}");
    answered(&emulator)[0].body.clone()
}

const TWO_TOOL_TURNS: &str = r#"
turns:
  - reply: { id: resp_a1, tool_calls: [ { id: c1, name: read-file, input: { path: a.md } } ] }
  - reply: { id: resp_a2, tool_calls: [ { id: c2, name: read-file, input: { path: b.md } } ] }
  - reply: { id: resp_a3, text: "first done" }
  - reply: { id: resp_b1, text: "second done" }
"#;

#[test]
fn a_held_continuation_sends_only_new_messages_on_the_same_context_and_never_crosses_tasks() {
    let emulator = emulator(TWO_TOOL_TURNS);
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "cont",
        "driver-openai-responses",
        &emulator.url(),
        "",
    );
    let (output, report) = run_json(&file, &["first task", "second task"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let requests = answered(&emulator);
    assert_eq!(requests.len(), 4);
    // Turn 1: full resend, no previous_response_id.
    assert!(requests[0].body.get("previous_response_id").is_none());
    // Turn 2 and 3: the held id, and only the tool result appended since.
    for (request, held) in [(&requests[1], "resp_a1"), (&requests[2], "resp_a2")] {
        assert_eq!(request.body["previous_response_id"], held);
        let input = request.body["input"].as_array().unwrap();
        assert_eq!(input.len(), 1, "{input:?}");
        assert_eq!(input[0]["type"], "function_call_output");
    }
    // The second task has another context: a full resend, the held id not reused.
    assert!(requests[3].body.get("previous_response_id").is_none());
    let events = trace(&report);
    let sent: Vec<&Value> = of_type(&events, "inference")
        .iter()
        .map(|e| &e["sent"])
        .collect();
    assert_eq!(sent[0]["full_resend"], true);
    assert_eq!(sent[1]["full_resend"], false);
    assert_eq!(sent[1]["continuation_id"], "resp_a1");
    assert_eq!(sent[1]["messages"], 1);
    assert_eq!(sent[3]["full_resend"], true);
    // Token accounting counts the whole conversation, not the smaller payload.
    let estimates: Vec<u64> = of_type(&events, "inference")
        .iter()
        .map(|e| e["input_tokens_estimated"].as_u64().unwrap())
        .collect();
    assert!(
        estimates[1] > estimates[0] && estimates[2] > estimates[1],
        "{estimates:?}"
    );
}

#[test]
fn the_chat_driver_holds_the_conversation_in_its_instance_and_is_sent_only_what_is_new() {
    let emulator = emulator(TWO_TOOL_TURNS);
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "held",
        "driver-openai-chat",
        &emulator.url(),
        "",
    );
    let (output, report) = run_json(&file, &["first task", "second task"]);
    assert_eq!(output.code, 0, "{output:#?}");
    // The runtime sends the driver the task, then one tool result a turn, then (another
    // task) the whole conversation again.
    let events = trace(&report);
    let sent: Vec<&Value> = of_type(&events, "inference")
        .iter()
        .map(|e| &e["sent"])
        .collect();
    assert_eq!(sent.len(), 4, "{sent:#?}");
    assert_eq!(sent[0]["full_resend"], true);
    for turn in [1, 2] {
        assert_eq!(sent[turn]["full_resend"], false, "{sent:#?}");
        assert_eq!(sent[turn]["messages"], 1, "{sent:#?}");
        let id = sent[turn]["continuation_id"].as_str().unwrap();
        assert!(id.starts_with("instance:"), "{id}");
    }
    assert_ne!(sent[1]["continuation_id"], sent[2]["continuation_id"]);
    assert_eq!(
        sent[3]["full_resend"], true,
        "an instance's id ends with its task"
    );
    // The provider still gets the whole conversation each turn: the last body's messages
    // are the one before's, then the answer and its tool result, as a whole resend gives.
    let requests = answered(&emulator);
    let messages =
        |n: usize| -> Vec<Value> { requests[n].body["messages"].as_array().unwrap().clone() };
    for turn in [1, 2] {
        let (before, now) = (messages(turn - 1), messages(turn));
        assert_eq!(now.len(), before.len() + 2, "{now:#?}");
        assert_eq!(now[..before.len()], before[..]);
        let call = format!("c{turn}");
        assert_eq!(now[before.len()]["role"], "assistant");
        assert_eq!(now[before.len()]["tool_calls"][0]["id"], call.as_str());
        assert_eq!(now[before.len() + 1]["role"], "tool");
        assert_eq!(now[before.len() + 1]["tool_call_id"], call.as_str());
    }
    assert_eq!(messages(0)[0]["role"], "system");
    assert!(
        requests
            .iter()
            .all(|r| r.body.get("continuation_id").is_none())
    );
    assert_eq!(
        messages(3).len(),
        2,
        "the second task starts over: system and task"
    );
}

#[test]
fn the_capsule_manifest_is_read_once_even_from_a_pipe() {
    // murmur.yaml is a named pipe written once: a second read would wait for a writer that
    // never comes. Every step (which kind of capsule, staging, its sha256) reads that once.
    let emulator = emulator(TWO_TOOL_TURNS);
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "piped",
        "driver-openai-chat",
        &emulator.url(),
        "",
    );
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let path = std::ffi::CString::new(file.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let (pipe, written) = (file.clone(), text.clone());
    // Opening the pipe to write waits for `mur` to open it to read; then it is closed.
    std::thread::spawn(move || std::fs::write(pipe, written));
    let mut child = mur_run(&file, &["first task"], &["--json"]).spawn();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mur waited on murmur.yaml: it opened the manifest a second time");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{status}: {stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let start = &of_type(&trace(&report), "session_start")[0].clone();
    assert_eq!(
        start["manifest_sha256"],
        murmur_registry::sha256_hex(text.as_bytes()),
        "the sha256 of the text read"
    );
}

#[test]
fn a_driver_that_returns_no_continuation_gets_a_full_resend() {
    let emulator = emulator(TWO_TOOL_TURNS);
    let dir = tempfile::tempdir().unwrap();
    // `store: false`: the provider keeps nothing, so the driver returns no continuation id.
    let file = capsule(
        dir.path(),
        "nocont",
        "driver-openai-responses",
        &emulator.url(),
        "",
    );
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "driver: { artifact: driver-openai-responses }",
        "driver: { artifact: driver-openai-responses, config: { store: false } }",
    );
    std::fs::write(&file, text).unwrap();
    let (output, report) = run_json(&file, &["only task"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let requests = answered(&emulator);
    for request in &requests {
        assert!(request.body.get("previous_response_id").is_none());
    }
    assert!(requests[1].body["input"].as_array().unwrap().len() >= 3);
    let events = trace(&report);
    assert!(
        of_type(&events, "inference")
            .iter()
            .all(|e| e["sent"]["full_resend"] == true)
    );
}

#[test]
fn tool_input_is_validated_against_the_schema_and_a_mismatch_goes_back_to_the_model() {
    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: write-file, input: { path: x.md } } ] }
  - reply: { tool_calls: [ { id: c2, name: no-such-tool, input: {} } ] }
  - reply: { text: "gave up" }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "strict",
        "driver-anthropic",
        &emulator.url(),
        "",
    );
    let (output, report) = run_json(&file, &["write"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    assert!(workspace.is_dir(), "{report:#}");
    assert!(
        !workspace.join("x.md").exists(),
        "the tool must not run on invalid input"
    );
    let requests = answered(&emulator);
    let second = requests[1].body.to_string();
    assert!(
        second.contains("does not match the input_schema"),
        "{second}"
    );
    assert!(
        second.contains("content"),
        "names the missing field: {second}"
    );
    let third = requests[2].body.to_string();
    assert!(
        third.contains("there is no tool named `no-such-tool`"),
        "{third}"
    );
    assert!(
        third.contains("the tools are: read-file, write-file, probe"),
        "the refusal lists what was offered: {third}"
    );
    let events = trace(&report);
    let calls = of_type(&events, "tool_call");
    assert_eq!(calls[0]["status"], "refused");
    assert_eq!(calls[0]["error"]["code"], "E-RUN-009");
    assert_eq!(calls[1]["error"]["code"], "E-RUN-014");
}

#[test]
fn data_is_used_over_data_path_inside_a_session() {
    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: probe, input: { action: result, status: passed, data: "inline wins", data_path: "../../etc/passwd" } } ] }
  - reply: { text: ok }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "paths", "driver-anthropic", &emulator.url(), "");
    let (output, _) = run_json(&file, &["go"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let second = answered(&emulator)[1].body.to_string();
    assert!(second.contains("inline wins"), "{second}");
    assert!(!second.contains("root:"), "{second}");
}

#[test]
fn max_turns_ends_the_task_with_its_own_status() {
    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: c1, name: read-file, input: { path: a.md } } ] }
  - reply: { tool_calls: [ { id: c2, name: read-file, input: { path: a.md } } ] }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "loop", "driver-anthropic", &emulator.url(), "");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("max_turns: 6", "max_turns: 2");
    std::fs::write(&file, text).unwrap();
    let (output, report) = run_json(&file, &["loop"]);
    assert_eq!(output.code, 1, "{output:#?}");
    assert_eq!(report["exit_status"], "max_turns_reached");
    let events = trace(&report);
    assert_eq!(
        of_type(&events, "task_end")[0]["exit_status"],
        "max_turns_reached"
    );
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
    assert_eq!(events.last().unwrap()["exit_status"], "max_turns_reached");
}

#[test]
fn rate_limits_and_server_errors_are_retried_then_succeed() {
    let emulator = emulator(
        r#"
turns:
  - reply: { text: "after retries" }
    faults: [ { status: 429, retry_after: 1 }, { status: 500 } ]
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "retry",
        "driver-openai-chat",
        &emulator.url(),
        "",
    );
    let started = std::time::Instant::now();
    let (output, report) = run_json(&file, &["go"]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert_eq!(report["exit_status"], "ok");
    assert_eq!(emulator.requests().len(), 3);
    // retry-after: 1 was honoured.
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
}

#[test]
fn a_cut_stream_and_malformed_json_fail_the_task_and_the_trace_still_closes() {
    for (fault, stream) in [("cut_stream", true), ("malformed_json", false)] {
        for driver in DRIVERS {
            let emulator = emulator(&format!("turns:\n  - fault: {fault}\n"));
            let dir = tempfile::tempdir().unwrap();
            let file = capsule(dir.path(), "faulty", driver, &emulator.url(), "");
            let mut extra = vec!["--json"];
            if stream {
                extra.push("--stream");
            }
            let output = run(&file, &["go"], &extra);
            assert_eq!(output.code, 1, "{fault} {driver}: {output:#?}");
            // With --stream, stdout may carry streamed text before the report.
            let report: Value = serde_json::from_str(
                &output.stdout[output.stdout.find("{\n").expect("a JSON report")..],
            )
            .unwrap();
            assert_eq!(report["exit_status"], "failed", "{fault} {driver}");
            assert_eq!(
                report["tasks"][0]["error"]["code"], "E-RUN-011",
                "{fault} {driver}"
            );
            let events = trace(&report);
            let last = events.last().unwrap();
            assert_eq!(last["event_type"], "session_end", "{fault} {driver}");
            assert_eq!(last["exit_status"], "failed");
            assert_eq!(of_type(&events, "inference")[0]["stop_reason"], "error");
        }
    }
}

#[test]
fn a_provider_4xx_is_reported_with_the_providers_message() {
    let emulator = emulator(
        r#"
turns:
  - reply: { text: never }
    faults: [ { status: 400, type: invalid_request_error, message: "model: unknown model test-model" } ]
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "bad", "driver-anthropic", &emulator.url(), "");
    let (output, report) = run_json(&file, &["go"]);
    assert_eq!(output.code, 1, "{output:#?}");
    let message = report["tasks"][0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("unknown model test-model"), "{message}");
    assert!(message.contains("400"), "{message}");
    assert_eq!(emulator.requests().len(), 1, "a 4xx is not retried");
}

#[test]
fn stream_prints_text_as_it_arrives_and_the_end_says_where_things_are() {
    let emulator = emulator(
        "turns:\n  - reply: { text: \"Streaming words arrive one by one.\" }\n    event_delay_ms: 20\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "streamer",
        "driver-anthropic",
        &emulator.url(),
        "",
    );
    let output = run(&file, &["go"], &["--stream"]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output
            .stdout
            .starts_with("Streaming words arrive one by one."),
        "{}",
        output.stdout
    );
    for line in ["exit: ok", "result: ", "trace: ", "turns: 1"] {
        assert!(output.stdout.contains(line), "{line}: {}", output.stdout);
    }
    assert_eq!(answered(&emulator)[0].body["stream"], true);
}

#[test]
fn task_md_is_the_task_when_none_is_given_and_no_task_is_an_error() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "fromfile",
        "driver-anthropic",
        &emulator.url(),
        "",
    );
    let none = run(&file, &[], &["--json"]);
    assert_eq!(none.code, 2, "{none:#?}");
    assert_eq!(none.json()["error"]["code"], "E-RUN-016");

    std::fs::write(dir.path().join("task.md"), "Summarize the notes.\n").unwrap();
    let (output, report) = run_json(&file, &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    let body = answered(&emulator)[0].body.to_string();
    assert!(body.contains("Summarize the notes."), "{body}");
    assert_eq!(
        of_type(&trace(&report), "task_start")[0]["source"],
        "task.md"
    );
}

/// `capsule(…)` with the `skill-style` fixture declared by `path:` (at `skill_dir`).
fn capsule_with_skill(dir: &Path, endpoint: &str, skill_dir: &Path) -> PathBuf {
    let file = capsule(dir, "stylist", "driver-anthropic", endpoint, "");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "inference:\n",
        &format!(
            "  - {{ name: skill-style, version: \"0.1.0\", runtime: skill, path: {} }}\ninference:\n",
            skill_dir.display()
        ),
    );
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn a_skill_is_offered_as_a_tool_and_its_markdown_reaches_the_model_verbatim_and_fenced() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      text: "Checking the house style."
      tool_calls: [ { id: call_s1, name: skill-style, input: {} } ]
  - reply: { text: "Noted, in house style." }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let skill_dir = repo_root().join("tests/fixtures/skill-style");
    let file = capsule_with_skill(dir.path(), &emulator.url(), &skill_dir);
    let (output, report) = run_json(&file, &["Note: call the plumber"]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert_eq!(report["exit_status"], "ok");
    let markdown = std::fs::read_to_string(skill_dir.join("skill.md")).unwrap();

    // Offered in the first request, with its manifest's description.
    let requests = answered(&emulator);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let tools = requests[0].body["tools"].as_array().expect("tools");
    let offered = tools
        .iter()
        .find(|tool| tool["name"] == "skill-style")
        .unwrap_or_else(|| panic!("the skill is not offered: {tools:#?}"));
    assert_eq!(
        offered["description"],
        "How to write notes in the house style. Call it before writing a note."
    );
    assert_eq!(offered["input_schema"]["type"], "object");

    // The next request carries the markdown, whole, inside the fence naming the skill.
    let fenced = format!(
        "<untrusted-content source=\"tool:skill-style\" call=\"call_s1\">\n{markdown}\n</untrusted-content>"
    );
    let escaped = serde_json::to_string(&fenced).unwrap();
    let second = requests[1].body.to_string();
    assert!(
        second.contains(escaped.trim_matches('"')),
        "the fenced markdown is not in: {second}"
    );
    assert!(
        !second.contains("\"is_error\":true"),
        "a skill's answer is not an error: {second}"
    );

    // One `skill_call` under the turn's `inference`, counted in the totals.
    let events = trace(&report);
    let calls = of_type(&events, "skill_call");
    assert_eq!(calls.len(), 1, "{events:#?}");
    let call = calls[0];
    use sha2::Digest;
    assert_eq!(
        call["sha256"],
        hex::encode(sha2::Sha256::digest(markdown.as_bytes()))
    );
    assert_eq!(call["skill"], "skill-style");
    assert_eq!(call["version"], "0.1.0");
    assert_eq!(call["call_id"], "call_s1");
    assert_eq!(call["turn"], 1);
    assert_eq!(call["output_bytes"], markdown.len() as u64);
    let first_turn = of_type(&events, "inference")[0];
    assert_eq!(call["parent_id"], first_turn["event_id"]);
    assert!(of_type(&events, "tool_call").is_empty());
    let totals = &of_type(&events, "session_end")[0]["totals"];
    assert_eq!(totals["skill_calls"], 1);
    assert_eq!(totals["tool_calls"], 0);

    // Listed like the other tools: in `session_start.tools` and in MURMUR.md.
    let start = of_type(&events, "session_start")[0];
    assert!(
        start["tools"]
            .as_array()
            .unwrap()
            .contains(&Value::from("skill-style")),
        "{start}"
    );
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    let murmur_md = std::fs::read_to_string(workspace.join("MURMUR.md")).unwrap();
    assert!(
        murmur_md.contains(
            "- `skill-style`: How to write notes in the house style. Call it before writing a note."
        ),
        "{murmur_md}"
    );
}

#[test]
fn a_skill_whose_markdown_is_missing_fails_staging_with_e_man_023() {
    let emulator = emulator("turns:\n  - reply: { text: done }\n");
    let dir = tempfile::tempdir().unwrap();
    let skill_dir = dir.path().join("skill-style");
    std::fs::create_dir(&skill_dir).unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/skill-style/murmur.yaml"),
        skill_dir.join("murmur.yaml"),
    )
    .unwrap();
    let file = capsule_with_skill(dir.path(), &emulator.url(), &skill_dir);
    let output = run(&file, &["go"], &["--json"]);
    assert_eq!(output.code, 2, "{output:#?}");
    let printed = output.json();
    let diagnostic = &printed["diagnostics"][0];
    assert_eq!(diagnostic["code"], "E-MAN-023", "{printed:#}");
    assert!(
        diagnostic["message"].as_str().unwrap().contains("skill.md"),
        "{printed:#}"
    );
    assert!(
        diagnostic["hint"]
            .as_str()
            .is_some_and(|hint| !hint.is_empty()),
        "{printed:#}"
    );
    assert!(emulator.requests().is_empty(), "nothing ran");
}

#[test]
fn a_hooks_deny_at_the_tool_call_decision_point_refuses_a_skill_call() {
    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: call_s1, name: skill-style, input: {} } ] }
  - reply: { text: "Fine, no style." }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let gate = murmur_testkit::fixture_hook(
        dir.path(),
        "gate",
        "hook-probe",
        "binding: on-tool-call\ncommit_policy: deny\n",
    );
    let skill_dir = repo_root().join("tests/fixtures/skill-style");
    let file = capsule_with_skill(dir.path(), &emulator.url(), &skill_dir);
    let config = r#"{"respond": {"on-tool-call": {"arm": "deny", "value": "no style today", "at": "decision"}}}"#;
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "inference:\n",
        &format!(
            "  - {{ name: gate, version: \"0.1.0\", runtime: hook, path: {}, config: {config}, grants: [runtime/inference, runtime/tokens, task-io/read, conversation/read], capabilities: {{ filesystem: {{ scope: write }} }} }}\ninference:\n",
            gate.display()
        ),
    );
    std::fs::write(&file, text).unwrap();
    let (output, report) = run_json(&file, &["go"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let second = answered(&emulator)[1].body.to_string();
    assert!(
        second.contains("denied by hook `gate`: no style today"),
        "{second}"
    );
    assert!(!second.contains("House style"), "{second}");
    let events = trace(&report);
    let denied = of_type(&events, "call_denied");
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert_eq!(denied[0]["kind"], "skill");
    assert_eq!(denied[0]["target"], "skill-style");
    assert!(of_type(&events, "skill_call").is_empty());
    assert_eq!(
        of_type(&events, "session_end")[0]["totals"]["skill_calls"],
        0
    );
}

#[test]
fn a_skill_installed_from_a_registry_is_offered_and_answered_like_a_local_one() {
    let home = tempfile::tempdir().unwrap();
    let registry = tempfile::tempdir().unwrap();
    let mur = || Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", home.path());
    let skill_dir = repo_root().join("tests/fixtures/skill-style");
    // Packed and published through the registry library: `mur publish` asks every artifact for
    // a component to build, which a skill has not.
    let artifact = murmur_registry::source::LocalArtifact::open(&skill_dir, &|_| None).unwrap();
    let packed = murmur_registry::archive::pack(&artifact).unwrap();
    murmur_registry::index::publish(
        registry.path(),
        "skill-style",
        "0.1.0",
        "skill",
        &packed.bytes,
    )
    .unwrap();

    let emulator = emulator(
        r#"
turns:
  - reply: { tool_calls: [ { id: call_s1, name: skill-style, input: {} } ] }
  - reply: { text: "Styled." }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "installed-skill",
        "driver-anthropic",
        &emulator.url(),
        "",
    );
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "inference:\n",
        "  - { name: skill-style, version: \"0.1.0\", runtime: skill }\ninference:\n",
    );
    std::fs::write(&file, text).unwrap();
    let installed = mur()
        .args(["install", "--json", "--registry"])
        .arg(registry.path())
        .arg(dir.path())
        .run();
    assert_eq!(installed.code, 0, "{installed:#?}");
    assert!(
        std::fs::read_to_string(dir.path().join("murmur.lock"))
            .unwrap()
            .contains("skill-style")
    );

    let (output, report) = run_json(&file, &["go"]);
    assert_eq!(output.code, 0, "{output:#?}");
    let markdown = std::fs::read_to_string(skill_dir.join("skill.md")).unwrap();
    let requests = answered(&emulator);
    assert!(
        requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "skill-style")
    );
    let escaped = serde_json::to_string(&markdown).unwrap();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains(escaped.trim_matches('"')),
        "{}",
        requests[1].body
    );
    let events = trace(&report);
    let calls = of_type(&events, "skill_call");
    assert_eq!(calls.len(), 1, "{events:#?}");
    use sha2::Digest;
    assert_eq!(
        calls[0]["sha256"],
        hex::encode(sha2::Sha256::digest(markdown.as_bytes()))
    );
}
