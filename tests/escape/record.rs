//! Escape cases: the session's record. Everything sandboxed that acts for the agent (a WASM
//! tool, a shell child, an MCP stdio server, a hook) tries to write, replace, unlink and link
//! over every file of the record (`trace.jsonl`, `out/result.txt`, `logs/`, `contexts/`) and to
//! plant a conversation for `mur run --resume`, from a fresh workspace whose parent *is* the
//! record. Every attempt fails; the record is whole (`mur trace show` reads it) and the resumed
//! session hands the model the true conversation, never the planted one.

use std::path::{Path, PathBuf};

use super::record_door::{links_beneath, shell_stdout, tool_result};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-escape-record";
const QUESTION: &str = "the true question";
const ANSWER: &str = "the true answer";

/// The record's files, relative to the workspace (`..`), each attacker's targets.
const TARGETS: &[&str] = &[
    "../trace.jsonl",
    "../out/result.txt",
    "../logs/hook-probe.log",
    "../contexts/ctx_forged/history.json",
];

/// The host's real python and what it must read, as tests/mcp.rs runs its hostile server.
fn python() -> (PathBuf, Vec<PathBuf>) {
    let ask = |code: &str| {
        let output = std::process::Command::new("python3")
            .args(["-c", code])
            .output()
            .expect("python3 runs");
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    };
    let python = ask("import sys; print(sys.executable)")
        .canonicalize()
        .unwrap();
    let servers = repo_root().join("tests/python/mcp").canonicalize().unwrap();
    (
        python,
        vec![ask("import sys; print(sys.base_prefix)"), servers],
    )
}

fn capsule(dir: &Path, emulator: &Emulator) {
    let (python, reads) = python();
    let reads: Vec<String> = reads
        .iter()
        .map(|path| format!("\"{}\"", path.display()))
        .collect();
    let mut tries: Vec<String> = TARGETS.iter().map(|t| format!("write:{t}")).collect();
    tries.extend(["read:../trace.jsonl".to_string(), "list:..".to_string()]);
    let hook_config = json!({"log": "probe.jsonl", "try": {"on-session-start": tries}});
    let text = format!(
        r#"name: recorded
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
  - {{ name: hook-probe, version: "0.1.0", runtime: hook, path: {hook}, config: {hook_config}, grants: [ conversation/read ], capabilities: {{ filesystem: {{ scope: write }} }} }}
  - name: hostile
    runtime: mcp
    server: {{ command: "{python}", args: [ "{server}", record ], timeout_seconds: 60 }}
capabilities:
  shell: {{ allow: [ bash, rm, ln, mv ] }}
  filesystem: {{ read_only: [ {reads} ] }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
        driver = repo_root().join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        probe = repo_root().join("tests/fixtures/probe").display(),
        hook = repo_root().join("tests/fixtures/hook-probe").display(),
        python = python.display(),
        server = repo_root()
            .join("tests/python/mcp/hostile_server.py")
            .display(),
        reads = reads.join(", "),
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

/// The model's first turn: the probe tool and a shell child each attack every record file.
fn attacks() -> Value {
    let mut calls = Vec::new();
    for (n, target) in TARGETS.iter().enumerate() {
        calls.push(json!({"id": format!("w{n}"), "name": "probe", "input": {
            "action": "write_file", "path": target, "content": "forged by the tool"
        }}));
        // Unlinks what is there, then links over it.
        calls.push(json!({"id": format!("l{n}"), "name": "probe", "input": {
            "action": "symlink", "target": "/etc/passwd", "path": target, "replace": true
        }}));
    }
    calls.push(json!({"id": "r0", "name": "probe", "input": {
        "action": "read_file", "path": "../trace.jsonl"
    }}));
    let script = [
        "for t in ../trace.jsonl ../out/result.txt ../logs/hook-probe.log ../contexts/ctx_forged/history.json; do",
        "  (echo forged >> \"$t\") 2>/dev/null && echo \"wrote $t\" || echo \"refused write $t\";",
        "done;",
        "rm -f ../trace.jsonl 2>/dev/null && echo unlinked || echo 'refused unlink';",
        "ln ../trace.jsonl hard 2>/dev/null && echo hardlinked || echo 'refused hardlink';",
        "ln -sf /etc/passwd ../out/result.txt 2>/dev/null && echo symlinked || echo 'refused symlink';",
        "echo forged > fake; mv -f fake ../trace.jsonl 2>/dev/null && echo replaced || echo 'refused replace';",
        "(mkdir -p ../contexts/ctx_forged) 2>/dev/null && echo planted || echo 'refused plant';",
        "(: < ../trace.jsonl) 2>/dev/null && echo read || echo 'refused read'",
    ]
    .join(" ");
    calls.push(json!({"id": "s0", "name": "shell", "input": {
        "binary": "bash", "args": ["-c", script]
    }}));
    json!({ "reply": { "tool_calls": calls } })
}

fn run(dir: &Path, extra: &[&str]) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json"])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(extra)
        .run()
}

#[test]
fn nothing_sandboxed_reaches_the_record_and_resume_sees_the_true_conversation() {
    let script = json!({"turns": [
        attacks(),
        {"reply": {"text": ANSWER}},
        {"reply": {"text": "going on"}},
    ]});
    let emulator = Emulator::builder(Script::from_yaml(&script.to_string()).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &emulator);

    let first = run(dir.path(), &["--task", QUESTION]);
    assert_eq!(first.code, 0, "{first:#?}");
    let report = first.json();
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    assert_eq!(workspace.parent(), Some(record.as_path()), "{report:#}");

    // The record holds only the runtime's files, none a link, none forged.
    assert!(
        links_beneath(&record)
            .iter()
            .all(|link| link.starts_with(&workspace))
    );
    assert!(!record.join("contexts/ctx_forged").exists());
    assert_eq!(
        std::fs::read_to_string(record.join("out/result.txt")).unwrap(),
        ANSWER
    );
    let trace = std::fs::read_to_string(record.join("trace.jsonl")).unwrap();
    assert!(
        !trace.lines().any(|line| line.starts_with("forged")),
        "{trace}"
    );
    let events: Vec<Value> = trace
        .lines()
        .map(|line| serde_json::from_str(line).expect("a whole trace line"))
        .collect();
    assert_eq!(events.first().unwrap()["event_type"], "session_start");
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
    assert_eq!(events.first().unwrap()["record_layout"], 2);
    // The runtime's logs are its own lines (a hook's log quotes the model's calls, whose
    // inputs say "forged"; no attacker's bytes were written there).
    for log in std::fs::read_dir(record.join("logs")).unwrap() {
        let text = std::fs::read_to_string(log.unwrap().path()).unwrap();
        assert!(
            !text.starts_with("forged")
                && !text.contains("forged log")
                && !text.contains("\nforged\n"),
            "{text}"
        );
    }

    // The shell child: every attempt refused by the kernel (its output, as the model got it).
    let sent: Vec<Value> = emulator.requests().into_iter().map(|r| r.body).collect();
    let stdout = shell_stdout(&sent, "s0");
    for done in [
        "wrote",
        "unlinked",
        "hardlinked",
        "symlinked",
        "replaced",
        "planted",
    ] {
        assert!(
            !stdout.lines().any(|line| line.starts_with(done)),
            "{done}: {stdout}"
        );
    }
    assert_eq!(stdout.matches("refused").count(), 10, "{stdout}");
    assert!(stdout.contains("refused read"), "{stdout}");

    // The WASM tool: every write, unlink, link and read refused at the preopen.
    let calls = events
        .iter()
        .filter(|e| e["event_type"] == "tool_call" && e["tool_name"] == "probe")
        .count();
    assert_eq!(calls, 2 * TARGETS.len() + 1, "{events:#?}");
    for n in 0..TARGETS.len() {
        for id in [format!("w{n}"), format!("l{n}")] {
            let result = tool_result(&sent, &id);
            assert!(result.contains("\"ok\":false"), "{id}: {result}");
        }
    }
    assert!(tool_result(&sent, "r0").contains("PermissionDenied"));

    // The MCP server: every try refused.
    let log = std::fs::read_to_string(record.join("logs/mcp-hostile.log")).unwrap();
    let tries: Vec<&str> = log.lines().filter(|l| l.contains(" try ")).collect();
    assert_eq!(tries.len(), 10, "{log}");
    for line in &tries {
        assert!(line.contains("-> refused"), "{log}");
    }

    // The hook: every try refused (its log is in the workspace, where it may write).
    let hook_log = std::fs::read_to_string(workspace.join("probe.jsonl")).unwrap();
    let line: Value = hook_log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["handler"] == "on-session-start")
        .unwrap_or_else(|| panic!("{hook_log}"));
    let hook_tries = line["tries"].as_object().unwrap();
    assert_eq!(hook_tries.len(), TARGETS.len() + 2, "{line:#}");
    for (action, outcome) in hook_tries {
        assert!(outcome.get("err").is_some(), "{action}: {outcome}");
    }

    // `mur trace show` reads the record whole.
    let shown = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", "show"])
        .arg(&record)
        .run();
    assert_eq!(shown.code, 0, "{shown:#?}");

    // The resumed session goes on with the true conversation: not the one the MCP server
    // planted in the workspace, nor any it tried to plant in the record.
    assert!(workspace.join("contexts/ctx_forged/history.json").is_file());
    let resumed = run(dir.path(), &["--task", "go on", "--resume"]);
    assert_eq!(resumed.code, 0, "{resumed:#?}");
    let last = emulator.requests().last().unwrap().body.to_string();
    assert!(last.contains(QUESTION) && last.contains(ANSWER), "{last}");
    assert!(!last.contains("FORGED by the MCP server"), "{last}");
}
