//! `inference.transport: process`: the real Claude Code and Codex CLIs (pinned in
//! `tests/node/package-lock.json`, installed by `scripts/node-env` under `target/node-clis`)
//! as the capsule's model, each against the provider emulator on loopback, with the capsule's
//! tools served to it over the run's own MCP server. No network, no key: Claude Code reaches
//! the emulator through `ANTHROPIC_BASE_URL`, Codex through a provider entry in a private
//! `CODEX_HOME`. Fake CLIs (shell scripts) play the CLIs that misbehave.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use murmur_testkit::emulator::{Emulator, Recorded, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-process";

/// Where the pinned CLIs' commands are.
fn clis() -> PathBuf {
    let bin = repo_root().join("target/node-clis/node_modules/.bin");
    assert!(
        bin.join("claude").exists() && bin.join("codex").exists(),
        "the agent CLIs are not installed: run ./scripts/setup --tests (it runs scripts/node-env)"
    );
    bin
}

/// A capsule whose model is `command`, with read-file and write-file, `hooks` (artifact entry
/// lines) and `inference_extra` lines.
fn capsule(dir: &Path, command: &str, model: &str, hooks: &str, inference_extra: &str) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: harnessed
version: "0.1.0"
artifacts:
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: "{read_file}" }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: "{write_file}" }}
{hooks}
inference:
  transport: process
  command: {command}
  model: {model}
  system_prompt: "Keep notes with write-file and read them with read-file."
  max_turns: 6
{inference_extra}
"#,
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

/// `mur run --json` of the capsule in `dir` with one task, its CLI found on `path`, pointed
/// at `emulator` (Claude Code by `ANTHROPIC_BASE_URL`, Codex by a provider entry in a
/// private `CODEX_HOME`).
fn run(dir: &Path, path: &str, emulator: Option<&Emulator>, task: &str) -> (MurOutput, Value) {
    run_with(dir, path, emulator.map(Emulator::url).as_deref(), task, &[])
}

/// [`run`] with the provider at `provider` (an emulator's URL, which may be gone by now) and
/// `extra` arguments.
fn run_with(
    dir: &Path,
    path: &str,
    provider: Option<&str>,
    task: &str,
    extra: &[&str],
) -> (MurOutput, Value) {
    let home = dir.join("home");
    let codex_home = dir.join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&codex_home).unwrap();
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PATH", path)
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", dir.join("claude-config"))
        .env("CODEX_HOME", &codex_home)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("EMULATOR_KEY", KEY);
    if let Some(url) = provider {
        std::fs::write(
            codex_home.join("config.toml"),
            format!(
                "model_provider = \"emulator\"\n\n[model_providers.emulator]\nname = \"emulator\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\nenv_key = \"EMULATOR_KEY\"\n",
            ),
        )
        .unwrap();
        mur = mur.env("ANTHROPIC_BASE_URL", url);
    }
    let output = mur
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--json", "--task", task])
        .args(extra)
        .run();
    let report = output.json();
    (output, report)
}

fn with_clis() -> String {
    format!(
        "{}:{}",
        clis().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn trace(report: &Value) -> Vec<Value> {
    let path = report["trace_path"].as_str().expect("trace_path");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Each `tool_call` event's tool name and status, in order.
fn names_and_statuses<'a>(calls: &[&'a Value]) -> Vec<(&'a str, &'a str)> {
    calls
        .iter()
        .map(|c| {
            (
                c["tool_name"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect()
}

fn of_type<'a>(events: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

/// The session's record: its trace and `out/result.txt`.
fn workdir_of(report: &Value) -> PathBuf {
    PathBuf::from(report["workdir"].as_str().unwrap())
}

/// The session's workspace: the CLI's cwd, where the capsule's tools write.
fn workspace_of(report: &Value) -> PathBuf {
    PathBuf::from(report["workspace"].as_str().unwrap())
}

/// The requests that took a turn of the script, in order.
fn answered(emulator: &Emulator) -> Vec<Recorded> {
    emulator
        .requests()
        .into_iter()
        .filter(|r| r.turn.is_some())
        .collect()
}

/// Every tool name a request offered the model (Anthropic `tools[].name`; Responses functions
/// and the functions inside namespaces, as `namespace.name`).
fn offered(request: &Recorded) -> Vec<String> {
    let mut names = Vec::new();
    for tool in request.body["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("namespace") => {
                for inner in tool["tools"].as_array().into_iter().flatten() {
                    names.push(format!(
                        "{}.{}",
                        tool["name"].as_str().unwrap_or(""),
                        inner["name"].as_str().unwrap_or("")
                    ));
                }
            }
            _ => names.push(tool["name"].as_str().unwrap_or_default().to_string()),
        }
    }
    names
}

/// Claude Code sends thinking, so each of its scripted replies carries some.
const CLAUDE_NOTES: &str = r#"
turns:
  - reply:
      thinking: { text: "Save it first." }
      text: "Saving the note."
      tool_calls: [ { id: toolu_w1, name: mcp__murmur__write-file, input: { path: notes/today.md, content: "buy milk" } } ]
      usage: { input: 200, output: 20, cache_read: 150, cache_write: 10 }
  - reply:
      thinking: { text: "Now read it back." }
      tool_calls: [ { id: toolu_r1, name: mcp__murmur__read-file, input: { path: notes/today.md } } ]
      usage: { input: 260, output: 15, cache_read: 200 }
  - reply:
      thinking: { text: "It is saved." }
      text: "Saved: buy milk."
      usage: { input: 320, output: 9, cache_read: 250 }
"#;

#[test]
fn claude_code_calls_the_capsules_tools_and_its_answer_is_the_result() {
    let emulator = emulator(CLAUDE_NOTES);
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "claude", "claude-sonnet-4-5", "", "");
    let (output, report) = run(dir.path(), &with_clis(), Some(&emulator), "Note: buy milk");
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let workdir = workdir_of(&report);
    assert_eq!(
        std::fs::read_to_string(workspace_of(&report).join("notes/today.md")).unwrap(),
        "buy milk"
    );
    assert_eq!(
        std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
        "Saved: buy milk."
    );

    // Every request offered the capsule's tools and nothing of the CLI's own.
    let requests = answered(&emulator);
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for request in &requests {
        let mut names = offered(request);
        names.sort();
        assert_eq!(names, ["mcp__murmur__read-file", "mcp__murmur__write-file"]);
    }
    // The read ran for real: its result reached the model, fenced as a tool's output.
    let last = requests[2].body["messages"].to_string();
    assert!(
        last.contains("buy milk") && last.contains("untrusted-content"),
        "{last}"
    );

    // The trace: one turn per assistant message, with the usage Claude Code reported, and the
    // tool calls under their turns.
    let events = trace(&report);
    let start = of_type(&events, "session_start")[0];
    assert_eq!(start["driver"], "claude-code");
    assert_eq!(start["containment"]["achieved"], "scoped", "{start}");
    assert_eq!(start["credential_source"], "cli");
    let cli = start["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["runtime"] == "process")
        .expect("the CLI's grants are listed");
    assert_eq!(cli["name"], "claude");
    assert_eq!(cli["network"][0], emulator.url());
    assert!(
        cli["env"]
            .as_array()
            .unwrap()
            .contains(&"ANTHROPIC_API_KEY".into())
    );
    let turns = of_type(&events, "inference");
    assert_eq!(turns.len(), 3);
    let reported: Vec<_> = turns
        .iter()
        .map(|t| {
            (
                t["turn"].as_u64(),
                t["input_tokens_actual"].as_u64(),
                t["output_tokens_actual"].as_u64(),
                t["cached_tokens_actual"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        reported,
        [
            (Some(1), Some(200), Some(20), Some(150)),
            (Some(2), Some(260), Some(15), Some(200)),
            (Some(3), Some(320), Some(9), Some(250)),
        ]
    );
    assert_eq!(turns[0]["cache_write_tokens_actual"], 10);
    assert_eq!(turns[0]["model"], "claude-sonnet-4-5");
    assert_eq!(turns[2]["decision"], "finish");
    let calls = of_type(&events, "tool_call");
    let seen: Vec<_> = calls
        .iter()
        .map(|c| {
            (
                c["tool_name"].as_str().unwrap(),
                c["call_id"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("write-file", "toolu_w1", "passed"),
            ("read-file", "toolu_r1", "passed")
        ]
    );
    assert_eq!(calls[0]["parent_id"], turns[0]["event_id"]);
    assert_eq!(calls[1]["parent_id"], turns[1]["event_id"]);
    let end = of_type(&events, "task_end")[0];
    assert_eq!(end["turns"], 3);
    assert_eq!(report["tasks"][0]["turns"], 3);
}

const CODEX_NOTES: &str = r#"
turns:
  - reply:
      text: "Saving the note."
      tool_calls: [ { id: call_w1, name: write_file, namespace: mcp__murmur, input: { path: notes/today.md, content: "buy milk" } } ]
      usage: { input: 200, output: 20, cache_read: 150 }
  - reply:
      tool_calls: [ { id: call_r1, name: read_file, namespace: mcp__murmur, input: { path: notes/today.md } } ]
      usage: { input: 260, output: 15, cache_read: 200 }
  - reply:
      text: "Saved: buy milk."
      usage: { input: 320, output: 9, cache_read: 250 }
"#;

#[test]
fn codex_runs_in_a_sealed_root_too() {
    let emulator = emulator(CODEX_NOTES);
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "codex", "gpt-5", "", "");
    let (output, report) = run_with(
        dir.path(),
        &with_clis(),
        Some(&emulator.url()),
        "Note: buy milk",
        &["--containment", "sealed"],
    );
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let start = &trace(&report)[0];
    assert_eq!(start["containment"]["achieved"], "sealed", "{start}");
    assert_eq!(
        std::fs::read_to_string(workspace_of(&report).join("notes/today.md")).unwrap(),
        "buy milk"
    );
}

#[test]
fn codex_calls_the_capsules_tools_and_its_answer_is_the_result() {
    let emulator = emulator(CODEX_NOTES);
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "codex", "gpt-5", "", "");
    let (output, report) = run(dir.path(), &with_clis(), Some(&emulator), "Note: buy milk");
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let workdir = workdir_of(&report);
    assert_eq!(
        std::fs::read_to_string(workspace_of(&report).join("notes/today.md")).unwrap(),
        "buy milk"
    );
    assert_eq!(
        std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
        "Saved: buy milk."
    );

    let requests = answered(&emulator);
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for request in &requests {
        let names = offered(request);
        // Codex's MCP resource helpers and its question to the user stay; no tool of its own
        // that runs anything (shell, exec, patch, web search, images) is offered.
        assert!(
            names.contains(&"mcp__murmur.read_file".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"mcp__murmur.write_file".to_string()),
            "{names:?}"
        );
        for builtin in [
            "shell",
            "exec_command",
            "apply_patch",
            "web_search",
            "view_image",
            "write_stdin",
        ] {
            assert!(
                !names.iter().any(|n| n == builtin),
                "{builtin} offered: {names:?}"
            );
        }
    }
    let last = requests[2].body["input"].to_string();
    assert!(
        last.contains("buy milk") && last.contains("untrusted-content"),
        "{last}"
    );

    let events = trace(&report);
    let start = of_type(&events, "session_start")[0];
    assert_eq!(start["driver"], "codex");
    assert_eq!(start["containment"]["achieved"], "scoped", "{start}");
    let calls = of_type(&events, "tool_call");
    assert_eq!(
        names_and_statuses(&calls),
        [("write-file", "passed"), ("read-file", "passed")]
    );
    let turns = of_type(&events, "inference");
    assert_eq!(turns.len(), 3, "one turn per tool call, then the answer");
    for (call, turn) in calls.iter().zip(&turns) {
        assert_eq!(call["parent_id"], turn["event_id"]);
    }
    // Codex reports its usage once for the whole run: it is on the last turn.
    let last = turns[2];
    assert_eq!(last["input_tokens_actual"], 780);
    assert_eq!(last["output_tokens_actual"], 44);
    assert_eq!(last["cached_tokens_actual"], 600);
}

/// A fake `codex` that drives the run's tools server itself, making its calls in the order a
/// race between its stdout and its socket can produce: the first call reaches the server
/// before any line of the turn, the second before the line naming it.
const CODEX_CALLING_BEFORE_ITS_LINES: &str = r#"#!/usr/bin/env python3
import json, os, re, sys, threading, time, urllib.request

sys.stdin.read()
url = re.search(r'url = "([^"]+)"', " ".join(sys.argv)).group(1)
token = os.environ["MURMUR_MCP_TOKEN"]
session = None

def rpc(method, params, id=None):
    global session
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    if id is not None:
        body["id"] = id
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "Authorization": "Bearer " + token}
    if session:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request) as response:
        session = response.headers.get("Mcp-Session-Id") or session
        text = response.read().decode()
    for line in text.splitlines():
        line = line[5:] if line.startswith("data:") else line
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("id") == id:
            return message

def say(event):
    print(json.dumps(event), flush=True)

def call_before_its_line(call, lines_after):
    answered = {}
    thread = threading.Thread(target=lambda: answered.update(
        rpc("tools/call", {"name": call["tool"], "arguments": call["arguments"]}, call["id"])))
    thread.start()
    time.sleep(0.5)
    for line in lines_after:
        say(line)
    thread.join()
    say({"type": "item.completed", "item": call})
    return answered["result"]["content"][0]["text"]

rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "fake-codex", "version": "0"}}, "init")
rpc("notifications/initialized", {})
say({"type": "thread.started", "thread_id": "fake-thread"})
say({"type": "turn.started"})
write = {"id": "w1", "type": "mcp_tool_call", "server": "murmur", "tool": "write-file",
         "arguments": {"path": "notes/today.md", "content": "buy milk"}}
call_before_its_line(write, [
    {"type": "item.completed", "item": {"id": "m1", "type": "agent_message", "text": "Saving the note."}},
    {"type": "item.started", "item": write},
])
read = {"id": "r1", "type": "mcp_tool_call", "server": "murmur", "tool": "read-file",
        "arguments": {"path": "notes/today.md"}}
text = call_before_its_line(read, [{"type": "item.started", "item": read}])
say({"type": "item.completed", "item": {"id": "m2", "type": "agent_message", "text": "Read back: " + text}})
say({"type": "turn.completed", "usage": {"input_tokens": 30, "cached_input_tokens": 0, "output_tokens": 9}})
"#;

#[test]
fn a_call_that_reaches_the_tools_before_the_line_naming_it_is_answered_under_that_lines_turn() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    std::fs::write(&codex, CODEX_CALLING_BEFORE_ITS_LINES).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    capsule(dir.path(), "codex", "gpt-5", "", "");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let (output, report) = run(dir.path(), &path, None, "Note: buy milk");
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let workdir = workdir_of(&report);
    let result = std::fs::read_to_string(workdir.join("out/result.txt")).unwrap();
    assert!(
        result.starts_with("Read back: <untrusted-content") && result.contains("\nbuy milk\n"),
        "{result}"
    );

    // Three turns, as the CLI's lines tell them: the note and its write, the read, the
    // answer. Neither call made a turn of its own, and no line made one a second time.
    let events = trace(&report);
    let turns = of_type(&events, "inference");
    let calls = of_type(&events, "tool_call");
    assert_eq!(turns.len(), 3, "{turns:#?}");
    let decisions: Vec<_> = turns.iter().map(|t| t["decision"].clone()).collect();
    assert_eq!(
        decisions,
        ["call_tools", "call_tools", "finish"],
        "{turns:#?}"
    );
    assert_eq!(
        names_and_statuses(&calls),
        [("write-file", "passed"), ("read-file", "passed")]
    );
    for (call, turn) in calls.iter().zip(&turns) {
        assert_eq!(call["parent_id"], turn["event_id"]);
    }
    // Each call is recorded under the id the CLI gave it.
    let ids: Vec<_> = calls.iter().map(|c| c["call_id"].clone()).collect();
    assert_eq!(ids, ["w1", "r1"], "{calls:#?}");
}

#[test]
fn a_cli_built_in_the_model_asks_for_runs_nothing() {
    // Claude Code: Bash and Write asked for by name.
    let emulator_claude = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Use the shell." }
      tool_calls:
        - { id: toolu_b1, name: Bash, input: { command: "touch pwned-bash" } }
        - { id: toolu_b2, name: Write, input: { file_path: "pwned-write", content: "x" } }
  - reply:
      thinking: { text: "No shell here." }
      text: "I have no shell."
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "claude", "claude-sonnet-4-5", "", "");
    let (output, report) = run(
        dir.path(),
        &with_clis(),
        Some(&emulator_claude),
        "Make a file",
    );
    let workspace = workspace_of(&report);
    assert!(workspace.is_dir(), "{output:#?}");
    assert!(!workspace.join("pwned-bash").exists() && !workspace.join("pwned-write").exists());
    let events = trace(&report);
    assert!(of_type(&events, "tool_call").is_empty(), "{output:#?}");
    // The model was told the tools do not exist.
    let requests = answered(&emulator_claude);
    assert_eq!(requests.len(), 2, "{output:#?}");
    let results = requests[1].body["messages"].to_string();
    assert!(
        results.contains("toolu_b1") && results.contains("is_error"),
        "{results}"
    );
    assert_eq!(report["exit_status"], "ok", "{output:#?}");

    // Codex: its shell, exec and patch tools.
    let emulator_codex = emulator(
        r#"
turns:
  - reply:
      tool_calls:
        - { id: call_s1, name: shell, input: { command: ["touch", "pwned-shell"] } }
        - { id: call_e1, name: exec_command, input: { cmd: "touch pwned-exec" } }
        - { id: call_p1, name: apply_patch, input: { input: "*** Begin Patch\n*** Add File: pwned-patch\n+x\n*** End Patch\n" } }
  - reply:
      text: "I have no shell."
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "codex", "gpt-5", "", "");
    let (output, report) = run(
        dir.path(),
        &with_clis(),
        Some(&emulator_codex),
        "Make a file",
    );
    let workspace = workspace_of(&report);
    assert!(workspace.is_dir(), "{output:#?}");
    for file in ["pwned-shell", "pwned-exec", "pwned-patch"] {
        assert!(!workspace.join(file).exists(), "{file}: {output:#?}");
    }
    assert!(
        of_type(&trace(&report), "tool_call").is_empty(),
        "{output:#?}"
    );
    let requests = answered(&emulator_codex);
    assert_eq!(requests.len(), 2, "{output:#?}");
    let outputs = requests[1].body["input"].to_string();
    assert!(
        outputs.contains("call_s1") && outputs.contains("call_p1"),
        "{outputs}"
    );
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
}

#[test]
fn a_hooks_deny_refuses_the_capsule_tool_under_the_cli_too() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Write the key." }
      tool_calls: [ { id: toolu_s1, name: mcp__murmur__write-file, input: { path: secrets/key, content: "x" } } ]
  - reply:
      thinking: { text: "Refused." }
      text: "I may not write there."
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let policy = format!(
        r#"  - {{ name: policy, version: "0.1.0", runtime: hook, path: "{}", config: {{ rules: [ {{ tool: write-file, input: {{ path: "^secrets/" }}, reason: "secrets/ is read-only" }} ] }} }}"#,
        repo_root().join("artifacts/policy").display()
    );
    capsule(dir.path(), "claude", "claude-sonnet-4-5", &policy, "");
    let (output, report) = run(dir.path(), &with_clis(), Some(&emulator), "Store the key");
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    assert!(!workspace_of(&report).join("secrets/key").exists());
    let events = trace(&report);
    assert!(
        of_type(&events, "tool_call").is_empty(),
        "the tool never ran"
    );
    let denied = of_type(&events, "call_denied");
    assert_eq!(denied.len(), 1, "{output:#?}");
    assert_eq!(denied[0]["hook"], "policy");
    assert_eq!(denied[0]["target"], "write-file");
    let told = answered(&emulator)[1].body["messages"].to_string();
    assert!(told.contains("secrets/ is read-only"), "{told}");
}

#[test]
fn past_max_turns_the_cli_is_stopped() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Read." }
      tool_calls: [ { id: toolu_1, name: mcp__murmur__read-file, input: { path: a.md } } ]
  - reply:
      thinking: { text: "Read again." }
      tool_calls: [ { id: toolu_2, name: mcp__murmur__read-file, input: { path: b.md } } ]
  - reply:
      thinking: { text: "Done." }
      text: "never reached"
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "claude", "claude-sonnet-4-5", "", "");
    murmur_testkit::replace_in(&file, "max_turns: 6", "max_turns: 1");
    let (output, report) = run(dir.path(), &with_clis(), Some(&emulator), "Read both");
    assert_eq!(report["exit_status"], "max_turns_reached", "{output:#?}");
    assert_eq!(report["tasks"][0]["error"]["code"], "E-RUN-015");
    assert_eq!(report["tasks"][0]["turns"], 1);
    assert_eq!(of_type(&trace(&report), "inference").len(), 1);
}

#[test]
fn a_cli_not_on_path_stops_the_run_before_staging() {
    for (command, package) in [
        ("claude", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        capsule(dir.path(), command, "m", "", "");
        let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("PATH", "/usr/bin:/bin")
            .arg("run")
            .arg(dir.path())
            .args(["--workdir"])
            .arg(dir.path().join("work"))
            .args(["--task", "hi"])
            .run();
        assert_eq!(output.code, 2, "{output:#?}");
        assert!(output.stderr.contains("E-RUN-027"), "{}", output.stderr);
        assert!(output.stderr.contains(package), "{}", output.stderr);
        assert!(!dir.path().join("work").exists(), "no session was started");
    }
}

/// A fake Claude Code: a shell script at `dir/bin/claude`.
fn fake_claude(dir: &Path, script: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let file = bin.join("claude");
    std::fs::write(&file, format!("#!/bin/sh\n{script}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", bin.display())
}

/// Lets the capsule of `manifest` run `binaries` (`capabilities.shell.allow`): under `scoped`
/// a CLI executes its own closure and those binaries only, so a fake CLI (a shell script)
/// declares the tools it runs.
fn allow_shell(manifest: &Path, binaries: &[&str]) {
    let text = std::fs::read_to_string(manifest).unwrap();
    std::fs::write(
        manifest,
        format!(
            "{text}capabilities:\n  shell:\n    allow: [{}]\n",
            binaries.join(", ")
        ),
    )
    .unwrap();
}

#[test]
fn a_cli_that_fails_ends_the_task_failed_quoting_it_and_nothing_hangs() {
    let cases = [
        (
            "echo 'this is not an event'; sleep 600",
            "",
            "this is not an event",
        ),
        (
            "echo 'login expired: run claude /login' >&2; exit 3",
            "",
            "login expired",
        ),
        (
            r#"echo '{"type":"system","subtype":"init","session_id":"s"}'; sleep 600"#,
            "  timeout_seconds: 2",
            "timeout_seconds",
        ),
        (
            r#"echo '{"type":"result","subtype":"success","is_error":false,"result":"no","permission_denials":[{"tool_name":"Bash"}]}'"#,
            "",
            "refused a permission for Bash",
        ),
    ];
    for (script, extra, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = fake_claude(dir.path(), script);
        let manifest = capsule(dir.path(), "claude", "m", "", extra);
        allow_shell(&manifest, &["sleep"]);
        let started = Instant::now();
        let (output, report) = run(dir.path(), &path, None, "hi");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{script}: it hung"
        );
        assert_eq!(report["exit_status"], "failed", "{script}: {output:#?}");
        let error = &report["tasks"][0]["error"];
        assert_eq!(error["code"], "E-RUN-028", "{script}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(said),
            "{script}: {error}"
        );
    }
}

#[test]
fn stream_prints_the_clis_text_as_it_comes() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Say it." }
      text: "Streamed words arrive."
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "claude", "claude-sonnet-4-5", "", "");
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PATH", with_clis())
        .env("HOME", dir.path().join("home"))
        .env("CLAUDE_CONFIG_DIR", dir.path().join("claude-config"))
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", emulator.url())
        .arg("run")
        .arg(dir.path())
        .args(["--stream", "--task", "Speak"])
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output.stdout.contains("Streamed words arrive."),
        "{output:#?}"
    );
}

#[test]
fn the_door_streams_the_clis_text_and_its_tool_results() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Look." }
      text: "Reading."
      tool_calls: [ { id: toolu_1, name: mcp__murmur__read-file, input: { path: missing.md } } ]
  - reply:
      thinking: { text: "Gone." }
      text: "It is not there."
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "claude", "claude-sonnet-4-5", "", "");
    let manifest = dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{text}lifecycle: {{ task_acceptance: queue }}\n"),
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (path, url) = (with_clis(), emulator.url());
    let config = dir.path().join("claude-config");
    let served = murmur_testkit::door::Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        dir.path(),
        &[
            ("PATH", &path),
            ("HOME", home.to_str().unwrap()),
            ("CLAUDE_CONFIG_DIR", config.to_str().unwrap()),
            ("ANTHROPIC_API_KEY", KEY),
            ("ANTHROPIC_BASE_URL", &url),
        ],
    );
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "read missing.md"}]}}});
    let events = served.stream(&request, &[]);
    let artifacts: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.data["result"].get("artifactUpdate"))
        .collect();
    let streamed: String = artifacts
        .iter()
        .filter(|a| a["artifact"]["artifactId"] == "response")
        .filter_map(|a| a["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert!(
        streamed.contains("Reading.") && streamed.contains("It is not there."),
        "{events:#?}"
    );
    let tool = artifacts
        .iter()
        .find(|a| a["artifact"]["artifactId"] == "tool-toolu_1")
        .expect("the tool result as an artifact");
    assert_eq!(tool["artifact"]["name"], "read-file");
    let last = events.last().unwrap();
    let state = last.data["result"]["statusUpdate"]["status"]["state"]
        .as_str()
        .or(last.data["result"]["task"]["status"]["state"].as_str());
    assert_eq!(state, Some("TASK_STATE_COMPLETED"), "{events:#?}");
}

#[test]
fn the_cli_runs_confined_with_only_the_environment_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "host secret").unwrap();
    // The fake CLI reports what it could do as its result.
    let script = format!(
        r#"read=$(cat {o}/secret.txt 2>/dev/null || echo denied)
touch {o}/planted 2>/dev/null && w=wrote || w=denied
touch ./in-workdir 2>/dev/null && here=wrote || here=denied
names=$(env | cut -d= -f1 | sort | tr '\n' ' ')
printf '{{"type":"result","subtype":"success","is_error":false,"result":"read=%s write=%s workdir=%s env=%s"}}\n' "$read" "$w" "$here" "$names""#,
        o = outside.display()
    );
    let path = fake_claude(dir.path(), &script);
    let manifest = capsule(dir.path(), "claude", "m", "", "");
    allow_shell(&manifest, &["cat", "touch", "env", "cut", "sort", "tr"]);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PATH", &path)
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("HOST_SECRET", "do-not-pass")
        .env("AWS_SECRET_ACCESS_KEY", "do-not-pass")
        .arg("run")
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .args(["--json", "--task", "report"])
        .run();
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let said = std::fs::read_to_string(workdir_of(&report).join("out/result.txt")).unwrap();
    assert!(
        said.contains("read=denied") && said.contains("write=denied"),
        "{said}"
    );
    assert!(said.contains("workdir=wrote"), "{said}");
    // Its cwd is the session's workspace: what it wrote there is there, not in the record.
    assert!(workspace_of(&report).join("in-workdir").is_file());
    assert!(!workdir_of(&report).join("in-workdir").exists());
    assert!(!outside.join("planted").exists());
    let names: Vec<&str> = said
        .split("env=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(names.contains(&"ANTHROPIC_API_KEY"), "{names:?}");
    for absent in [
        "HOST_SECRET",
        "AWS_SECRET_ACCESS_KEY",
        "MURMUR_HOME",
        "CARGO",
    ] {
        assert!(
            !names.contains(&absent),
            "{absent} reached the CLI: {names:?}"
        );
    }
}

#[test]
fn the_example_capsule_runs_claude_code_against_its_emulator_script() {
    example_runs_claude_code_under(None);
}

#[test]
fn the_example_capsule_runs_claude_code_in_a_sealed_root_too() {
    example_runs_claude_code_under(Some("sealed"));
}

/// The hello-claude-code example against its emulator script, under `class` (the default
/// when `None`): the CLI calls both tools and answers with the note.
fn example_runs_claude_code_under(class: Option<&str>) {
    let example = repo_root().join("examples/hello-claude-code");
    let script = Script::from_file(example.join("emulator.yaml")).expect("the example's script");
    let emulator = Emulator::builder(script)
        .api_key(KEY)
        .start()
        .expect("emulator");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PATH", with_clis())
        .env("HOME", dir.path().join("home"))
        .env("CLAUDE_CONFIG_DIR", dir.path().join("claude-config"))
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", emulator.url())
        .arg("run")
        .arg(&example)
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .args(class.map(|class| format!("--containment={class}")))
        .arg("--json")
        .run();
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let workdir = workdir_of(&report);
    let start = &trace(&report)[0];
    assert_eq!(
        start["containment"]["achieved"],
        class.unwrap_or("scoped"),
        "{start}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace_of(&report).join("notes/hello.md")).unwrap(),
        "Hello from Murmur!\n"
    );
    assert_eq!(
        std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
        "The note in notes/hello.md says: \"Hello from Murmur!\""
    );
    assert_eq!(report["totals"]["tool_calls"], 2);
}

#[test]
fn with_no_tools_declared_the_cli_answers_from_the_model_alone() {
    let emulator = emulator(
        r#"
turns:
  - reply:
      thinking: { text: "Nothing to call." }
      text: "Paris."
      usage: { input: 40, output: 3 }
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: bare\nversion: \"0.1.0\"\ninference:\n  transport: process\n  command: claude\n  model: claude-sonnet-4-5\n  max_turns: 2\n",
    )
    .unwrap();
    let (output, report) = run(
        dir.path(),
        &with_clis(),
        Some(&emulator),
        "Capital of France?",
    );
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    assert_eq!(
        std::fs::read_to_string(workdir_of(&report).join("out/result.txt")).unwrap(),
        "Paris."
    );
    // The model was offered no tool at all: neither the capsule's (none) nor the CLI's own.
    let requests = answered(&emulator);
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(offered(&requests[0]), Vec::<String>::new());
    let events = trace(&report);
    assert_eq!(of_type(&events, "inference").len(), 1);
    assert!(of_type(&events, "tool_call").is_empty());
}

#[test]
fn claude_code_and_codex_sessions_record_and_replay_through_the_relay_with_the_provider_gone() {
    for (command, script, model) in [
        ("claude", CLAUDE_NOTES, "claude-sonnet-4-5"),
        ("codex", CODEX_NOTES, "gpt-5"),
    ] {
        let emulator = emulator(script);
        let url = emulator.url();
        let dir = tempfile::tempdir().unwrap();
        capsule(dir.path(), command, model, "", "");
        let cassette = dir.path().join("cli.cassette.json");
        let record = ["--record", cassette.to_str().unwrap()];
        let (output, report) = run_with(
            dir.path(),
            &with_clis(),
            Some(&url),
            "Note: buy milk",
            &record,
        );
        assert_eq!(report["exit_status"], "ok", "{command}: {output:#?}");
        assert_eq!(answered(&emulator).len(), 3, "{command}");
        let text = std::fs::read_to_string(&cassette).unwrap();
        assert!(
            !text.contains(KEY),
            "{command}: the CLI's key is in the cassette"
        );
        let recorded: Value = serde_json::from_str(&text).unwrap();
        let exchanges = recorded["exchanges"].as_array().unwrap();
        assert!(exchanges.len() >= 3, "{command}: {}", exchanges.len());
        let path = if command == "claude" {
            "/v1/messages"
        } else {
            "/v1/responses"
        };
        assert!(
            exchanges
                .iter()
                .all(|e| e["request"]["url"].as_str().unwrap().contains(path)),
            "{command}: {text}"
        );

        // The emulator gone: the CLI's requests are answered from the cassette, its tools run.
        drop(emulator);
        let replay = ["--replay", cassette.to_str().unwrap()];
        let (output, report) = run_with(
            dir.path(),
            &with_clis(),
            Some(&url),
            "Note: buy milk",
            &replay,
        );
        assert_eq!(report["exit_status"], "ok", "{command}: {output:#?}");
        let workdir = workdir_of(&report);
        assert_eq!(
            std::fs::read_to_string(workspace_of(&report).join("notes/today.md")).unwrap(),
            "buy milk",
            "{command}"
        );
        assert_eq!(
            std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
            "Saved: buy milk.",
            "{command}"
        );

        // Another task is not the recorded one: the replay refuses it, naming the difference.
        let (output, _) = run_with(
            dir.path(),
            &with_clis(),
            Some(&url),
            "Note: buy bread",
            &replay,
        );
        assert_eq!(output.code, 1, "{command}: {output:#?}");
        assert!(
            output.stdout.contains("E-RUN-029"),
            "{command}: {}",
            output.stdout
        );
        assert!(
            output.stdout.contains("buy bread"),
            "{command}: {}",
            output.stdout
        );
    }
}

/// A fake `command` (`claude` or `codex`) whose run reports `$said` (a shell expression set by
/// `script`) as its answer, in its dialect.
fn fake_cli(dir: &Path, command: &str, script: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let answer = if command == "codex" {
        r#"printf '{"type":"item.completed","item":{"id":"m1","type":"agent_message","text":"%s"}}\n' "$said"
printf '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n'"#
    } else {
        r#"printf '{"type":"result","subtype":"success","is_error":false,"result":"%s"}\n' "$said""#
    };
    let file = bin.join(command);
    std::fs::write(&file, format!("#!/bin/sh\n{script}\n{answer}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", bin.display())
}

/// The value of `name=` in a fake CLI's report (up to the next ` | `).
fn reported<'a>(said: &'a str, name: &str) -> &'a str {
    let start = said
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("no {name}= in {said}"))
        + name.len()
        + 1;
    let rest = &said[start..];
    rest.split(" | ").next().unwrap().trim()
}

#[test]
fn a_cli_writes_only_its_sessions_copy_of_its_config_never_the_users() {
    // (command, its config directory, the file a hook or a provider is planted in, the login
    // file copied into the session, the variable that names the directory)
    for (command, config, planted_in, login, variable) in [
        (
            "claude",
            ".claude",
            "settings.json",
            ".credentials.json",
            "CLAUDE_CONFIG_DIR",
        ),
        ("codex", ".codex", "config.toml", "auth.json", "CODEX_HOME"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // The user's own home, as `mur` is given it.
        let home = dir.path().join("home");
        let users = home.join(config);
        std::fs::create_dir_all(users.join("projects")).unwrap();
        let original = "# the user's own\n";
        std::fs::write(users.join(planted_in), original).unwrap();
        std::fs::write(users.join(login), format!("{{login-of-{command}}}")).unwrap();
        std::fs::write(users.join("projects/history.jsonl"), "the user's history").unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"oauthAccount": {"emailAddress": "user@example.com"}, "projects": {"/secret/project": {}}}"#,
        )
        .unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        // The CLI looks at what its home holds, then plants a hook (a provider) in its own
        // config and tries the user's, and tries to read the user's login file.
        let hook = r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}"#;
        let script = format!(
            r#"seen=$(ls -A "${variable}" | tr '\n' ' ')
copy=$(cat "${variable}/{login}")
state=$(cat "${variable}/.claude.json" 2>&1)
own=$( {{ printf '%s' '{hook}' > "${variable}/{planted_in}"; }} 2>&1 && echo wrote)
real=$( {{ printf '%s' '{hook}' > "{users}/{planted_in}"; }} 2>&1 && echo wrote)
read=$(cat "{users}/{login}" 2>&1)
said=$(printf 'home=%s | config=%s | seen=%s | copy=%s | state=%s | own=%s | real=%s | read=%s' "$HOME" "${variable}" "$seen" "$copy" "$state" "$own" "$real" "$read" | tr -d '"\\' | tr '\n' ' ')"#,
            users = users.display(),
        );
        let path = fake_cli(dir.path(), command, &script);
        let manifest = capsule(dir.path(), command, "m", "", "");
        allow_shell(&manifest, &["ls", "cat", "tr"]);
        let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("PATH", &path)
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .arg("run")
            .arg(dir.path())
            .arg("--workdir")
            .arg(dir.path().join("work"))
            .args(["--json", "--task", "plant a hook"])
            .run();
        let report = output.json();
        assert_eq!(report["exit_status"], "ok", "{command}: {output:#?}");
        let start = of_type(&trace(&report), "session_start")[0].clone();
        assert_eq!(start["containment"]["achieved"], "scoped", "{start}");
        let said = std::fs::read_to_string(workdir_of(&report).join("out/result.txt")).unwrap();

        // The user's config is untouched: the write was refused by the kernel (EACCES), and
        // the user's login file could not be read either.
        assert_eq!(
            std::fs::read_to_string(users.join(planted_in)).unwrap(),
            original,
            "{command}: {said}"
        );
        assert!(
            reported(&said, "real").ends_with("Permission denied"),
            "{command}: {said}"
        );
        assert!(
            reported(&said, "read").ends_with("Permission denied"),
            "{command}: {said}"
        );
        // The CLI's home is a directory of the session's (under mur's TMPDIR), its config
        // directory inside it, holding copies of the login files only; its write landed there.
        let cli_home = PathBuf::from(reported(&said, "home"));
        assert!(
            cli_home.starts_with(&tmp) && !cli_home.starts_with(&home),
            "{command}: {said}"
        );
        assert_eq!(
            reported(&said, "config"),
            cli_home.join(config).display().to_string(),
            "{command}"
        );
        assert_eq!(reported(&said, "own"), "wrote", "{command}: {said}");
        assert_eq!(
            reported(&said, "copy"),
            format!("{{login-of-{command}}}"),
            "{command}: {said}"
        );
        if command == "claude" {
            assert_eq!(
                reported(&said, "seen"),
                ".claude.json .credentials.json",
                "{said}"
            );
            // Of the state file, the account only: not the user's projects.
            let state = reported(&said, "state");
            assert!(
                state.contains("user@example.com") && !state.contains("/secret/project"),
                "{said}"
            );
        } else {
            assert_eq!(reported(&said, "seen"), "auth.json config.toml", "{said}");
        }
        // The session's home went with the session.
        assert!(
            !cli_home.exists(),
            "{command}: {} is left",
            cli_home.display()
        );
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "{command}");
    }
}

/// A fake npm install of `package` at `version` under `dir/node_modules` (its `package.json`
/// and `bin/file`, a shell script that prints `version` to `--version` and otherwise answers
/// `ok` in `command`'s dialect), linked as `node_modules/.bin/command` as npm links it.
/// Returns the `PATH` that finds it.
fn fake_npm_install(dir: &Path, package: &str, version: &str, command: &str, file: &str) -> String {
    let package_dir = dir.join("node_modules").join(package);
    std::fs::create_dir_all(package_dir.join("bin")).unwrap();
    std::fs::write(
        package_dir.join("package.json"),
        format!(r#"{{"name": "{package}", "version": "{version}", "bin": {{"{command}": "bin/{file}"}}}}"#),
    )
    .unwrap();
    let answer = if command == "codex" {
        r#"printf '{"type":"item.completed","item":{"id":"m1","type":"agent_message","text":"ok"}}\n'
printf '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n'"#
    } else {
        r#"printf '{"type":"result","subtype":"success","is_error":false,"result":"ok"}\n'"#
    };
    let script = package_dir.join("bin").join(file);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\n{answer}\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(format!("../{package}/bin/{file}"), bin.join(command)).unwrap();
    format!("{}:/usr/bin:/bin", bin.display())
}

#[test]
fn a_cli_older_than_the_lowest_that_runs_is_refused_naming_both_versions() {
    // (command, package, its file, a version too old, the lowest that runs)
    for (command, package, file, old, lowest) in [
        (
            "claude",
            "@anthropic-ai/claude-code",
            "claude.exe",
            "2.1.197",
            "2.1.314",
        ),
        ("codex", "@openai/codex", "codex.js", "0.153.4", "0.154.0"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = fake_npm_install(dir.path(), package, old, command, file);
        capsule(dir.path(), command, "m", "", "");
        let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("PATH", &path)
            .env("HOME", dir.path())
            .arg("run")
            .arg(dir.path())
            .arg("--workdir")
            .arg(dir.path().join("work"))
            .args(["--task", "hi"])
            .run();
        assert_eq!(output.code, 2, "{command}: {output:#?}");
        let said = &output.stderr;
        assert!(said.contains("error[E-RUN-036]"), "{command}: {said}");
        assert!(
            said.contains(&format!(
                "is {package} {old}; `transport: process` needs {lowest} or newer"
            )),
            "{command}: {said}"
        );
        assert!(
            said.contains(&format!("npm install -g {package}@latest")),
            "{command}: {said}"
        );
        // Refused before anything ran: no session, and the CLI itself was never executed.
        assert!(
            !dir.path().join("work").exists(),
            "{command}: a session was started"
        );
    }
}

#[test]
fn a_cli_at_the_lowest_version_that_runs_is_run() {
    for (command, package, file, lowest) in [
        (
            "claude",
            "@anthropic-ai/claude-code",
            "claude.exe",
            "2.1.314",
        ),
        ("codex", "@openai/codex", "codex.js", "0.154.0"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = fake_npm_install(dir.path(), package, lowest, command, file);
        capsule(dir.path(), command, "m", "", "");
        let (output, report) = run(dir.path(), &path, None, "hi");
        assert_eq!(report["exit_status"], "ok", "{command}: {output:#?}");
        assert_eq!(
            std::fs::read_to_string(workdir_of(&report).join("out/result.txt")).unwrap(),
            "ok",
            "{command}"
        );
    }
}

#[test]
fn a_cli_that_dies_by_a_signal_is_quoted_by_the_last_lines_it_printed() {
    // Twenty 1000-character lines, then twelve numbered ones, on stderr; then SIGABRT. (Under
    // `advisory`: under `scoped` the CLI is the first process of its own PID namespace, which
    // a signal it sends itself does not end.)
    let noisy = r#"i=0; while [ $i -lt 20 ]; do printf '%01000d\n' 0 >&2; i=$((i+1)); done
i=1; while [ $i -le 12 ]; do echo "runtime line $i" >&2; i=$((i+1)); done
kill -ABRT $$"#;
    let dir = tempfile::tempdir().unwrap();
    let path = fake_claude(dir.path(), noisy);
    capsule(dir.path(), "claude", "m", "", "");
    let (output, report) = run_with(
        dir.path(),
        &path,
        None,
        "hi",
        &["--containment", "advisory"],
    );
    assert_eq!(report["exit_status"], "failed", "{output:#?}");
    let error = &report["tasks"][0]["error"];
    assert_eq!(error["code"], "E-RUN-028", "{error}");
    let message = error["message"].as_str().unwrap();
    let last: Vec<String> = (5..=12).map(|i| format!("runtime line {i}")).collect();
    assert_eq!(
        message,
        format!(
            "claude exited with signal: 6 (SIGABRT); it said: {}",
            last.join(" | ")
        ),
        "{error}"
    );

    // One that prints nothing before it dies says so.
    let dir = tempfile::tempdir().unwrap();
    let path = fake_claude(dir.path(), "kill -ABRT $$");
    capsule(dir.path(), "claude", "m", "", "");
    let (output, report) = run_with(
        dir.path(),
        &path,
        None,
        "hi",
        &["--containment", "advisory"],
    );
    assert_eq!(report["exit_status"], "failed", "{output:#?}");
    assert_eq!(
        report["tasks"][0]["error"]["message"],
        "claude exited with signal: 6 (SIGABRT); it printed nothing on stderr"
    );

    // The tail is bounded: a last line of 10,000 characters is quoted from its last 4 KiB
    // (under `scoped`, the class a run gets unless it asks for another).
    let dir = tempfile::tempdir().unwrap();
    let path = fake_claude(dir.path(), "printf 'x%09999d\\n' 0 >&2; exit 3");
    capsule(dir.path(), "claude", "m", "", "");
    let (output, report) = run(dir.path(), &path, None, "hi");
    assert_eq!(report["exit_status"], "failed", "{output:#?}");
    let message = report["tasks"][0]["error"]["message"].as_str().unwrap();
    let quoted = message.split("; it said: ").nth(1).expect(message);
    assert_eq!(
        quoted,
        "0".repeat(4095),
        "quoted {} characters",
        quoted.len()
    );
}
