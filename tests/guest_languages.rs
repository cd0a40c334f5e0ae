//! Tools, drivers and hooks in Python, JavaScript and Rust, made by `mur new` from its
//! templates and built by the real componentize-py (pinned in `tests/python/componentize/`,
//! installed by `scripts/python-env`), componentize-js (pinned in `tests/node/package-lock.json`,
//! installed by `scripts/node-env`) and cargo (offline, against the crates the workspace has).
//! The Python and JavaScript tools are invoked alone, then run in one session with a Rust
//! driver against the provider emulator: inside the workdir they read and write; outside it
//! they are refused; what they throw reaches the model and the trace with its message. A
//! JavaScript driver with no gateway is a capsule's model; each language's hook denies in a
//! session.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-guest-languages";

/// `PATH` with the pinned componentize-py and componentize-js first.
fn builders_path() -> String {
    let root = repo_root();
    let python = root.join("target/componentize-python-venv/bin");
    let node = root.join("target/node-clis/node_modules/.bin");
    assert!(
        python.join("componentize-py").exists() && node.join("componentize-js").exists(),
        "componentize-py or componentize-js is not installed: run ./scripts/setup --tests"
    );
    format!(
        "{}:{}:{}",
        python.display(),
        node.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn mur() -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur")).env("PATH", builders_path())
}

/// `mur new KIND NAME --lang LANG` into `dir`, then `mur build` of it: the artifact's
/// directory. Compiled for this machine at build time, with progress, not at the first call.
/// A Rust template builds offline against the crates the workspace already has, in a target
/// directory of its own under `target/`.
fn made(dir: &Path, kind: &str, name: &str, lang: &str) -> PathBuf {
    let out = mur()
        .args(["new", kind, name, "--lang", lang, "--dir"])
        .arg(dir.join(name))
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("mur build"), "{}", out.stdout);
    let out = mur()
        .env("CARGO_TARGET_DIR", repo_root().join("target/templates"))
        .env("CARGO_NET_OFFLINE", "true")
        .args(["build", "--no-pack", "--json"])
        .arg(dir.join(name))
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    // `hit` when an earlier run compiled the same bytes.
    match out.json()["built"][0]["cache"].as_str() {
        Some("compiled") => assert!(
            out.stderr.contains(&format!("compiling `{name}`")),
            "{out:?}"
        ),
        Some("hit") => {}
        _ => panic!("{out:?}"),
    }
    dir.join(name)
}

/// The two tools, made and built once for every test of this file: `notes-py` (Python) and
/// `notes-js` (JavaScript), each the `mur new tool` template unchanged.
fn tools() -> &'static (PathBuf, PathBuf) {
    static TOOLS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    TOOLS.get_or_init(|| {
        // In the build tree, emptied first: the tools outlive every test of the file.
        let dir = repo_root().join("target/test-guest-languages");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (
            made(&dir, "tool", "notes-py", "python"),
            made(&dir, "tool", "notes-js", "js"),
        )
    })
}

fn invoke(tool: &Path, workdir: &Path, input: &str) -> (MurOutput, Value) {
    let out = mur()
        .args(["tool", "invoke"])
        .arg(tool)
        .arg("--workdir")
        .arg(workdir)
        .args(["--input", "-"])
        .stdin(input.as_bytes().to_vec())
        .run();
    let report = out.json();
    (out, report)
}

/// `mur run --json` of the capsule in `dir` with `task`, its workdir root `dir/work`: the
/// report and the trace's events.
fn session(dir: &Path, task: &str) -> (Value, Vec<Value>) {
    let out = mur()
        .env("EMU_KEY", KEY)
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--task", task, "--json"])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    let trace = std::fs::read_to_string(report["trace_path"].as_str().unwrap())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (report, trace)
}

fn of_type<'a>(trace: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    trace
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

/// The provider emulator on loopback, replaying `script`.
fn emulator(script: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap()
}

/// Writes `dir/murmur.yaml`: a capsule whose model is the first-party Anthropic driver (Rust)
/// against `emulator`, with the artifact entries `entries` (YAML lines) beside it.
fn capsule_on_emulator(dir: &Path, emulator: &Emulator, entries: &str, max_turns: u32) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        format!(
            r#"name: polyglot
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
{entries}inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  max_turns: {max_turns}
"#,
            driver = repo_root().join("artifacts/driver-anthropic").display(),
            endpoint = emulator.url(),
        ),
    )
    .unwrap();
}

#[test]
fn a_python_and_a_javascript_tool_from_the_templates_read_and_write_the_workdir_only() {
    let (python, js) = tools();
    for tool in [python, js] {
        let temp = tempfile::tempdir().unwrap();
        let workdir = temp.path().join("work");
        std::fs::create_dir(&workdir).unwrap();
        std::fs::write(temp.path().join("secret.txt"), "outside the workdir").unwrap();

        // The template's own test input writes a note.
        let input = std::fs::read_to_string(tool.join("input.json")).unwrap();
        let (out, report) = invoke(tool, &workdir, &input);
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(report["result"]["status"], "passed", "{report:#}");
        assert_eq!(report["component"]["cache"], "hit", "{report:#}");
        assert_eq!(report["state_effect"], "mutate", "{report:#}");
        assert_eq!(
            std::fs::read_to_string(workdir.join("notes.md")).unwrap(),
            "Hello from a Murmur tool."
        );

        let (out, report) = invoke(tool, &workdir, r#"{"path": "notes.md"}"#);
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(report["output"], "Hello from a Murmur tool.", "{report:#}");
        assert_eq!(report["resource_id"], "file:notes.md");

        // Out of the workdir: refused by the runtime, the refusal the tool's own error, with
        // its message; nothing of the file comes back.
        let (out, report) = invoke(tool, &workdir, r#"{"path": "../secret.txt"}"#);
        assert_eq!(out.code, 1, "{out:?}");
        assert_eq!(report["result"]["status"], "error", "{report:#}");
        let summary = report["result"]["summary"].as_str().unwrap();
        assert!(
            summary.contains("../secret.txt") && summary.contains("ermitted"),
            "{summary}"
        );
        assert!(
            !out.stdout.contains("outside the workdir"),
            "{}",
            out.stdout
        );
        let (out, _) = invoke(
            tool,
            &workdir,
            r#"{"path": "../secret.txt", "write": "overwritten"}"#,
        );
        assert_eq!(out.code, 1, "{out:?}");
        assert_eq!(
            std::fs::read_to_string(temp.path().join("secret.txt")).unwrap(),
            "outside the workdir"
        );
    }
}

#[test]
fn python_and_javascript_tools_run_in_one_session_with_a_rust_driver() {
    let (python, js) = tools();
    let emulator = emulator(
        r#"
turns:
  - reply:
      tool_calls: [ { id: call_1, name: notes-py, input: { path: plan.md, write: "ship it" } } ]
  - reply:
      tool_calls: [ { id: call_2, name: notes-js, input: { path: plan.md } } ]
  - reply:
      tool_calls:
        - { id: call_3, name: notes-py, input: { path: ../secret.txt } }
        - { id: call_4, name: notes-js, input: { path: ../secret.txt } }
  - reply: { text: "The plan says: ship it." }
"#,
    );
    let temp = tempfile::tempdir().unwrap();
    capsule_on_emulator(
        temp.path(),
        &emulator,
        &format!(
            "  - {{ name: notes-py, version: \"0.1.0\", runtime: tool, path: {} }}\n  - {{ name: notes-js, version: \"0.1.0\", runtime: tool, path: {} }}\n",
            python.display(),
            js.display()
        ),
        6,
    );
    std::fs::write(temp.path().join("secret.txt"), "outside the workdir").unwrap();
    let (_, trace) = session(temp.path(), "Write the plan, read it back.");
    let calls = of_type(&trace, "tool_call");
    assert_eq!(calls.len(), 4, "{calls:#?}");
    assert_eq!(calls[0]["status"], "passed", "{:#}", calls[0]);
    assert_eq!(calls[1]["status"], "passed", "{:#}", calls[1]);
    // Each thrown error, with its own message, in the trace.
    for refused in &calls[2..] {
        assert_eq!(refused["status"], "error", "{refused:#}");
    }
    let summary = |call: &Value| call["summary"].as_str().unwrap_or_default().to_string();
    assert!(
        summary(calls[2]).starts_with("PermissionError:"),
        "{:#}",
        calls[2]
    );
    assert_eq!(summary(calls[3]), "Error: ../secret.txt: not-permitted");
    // What the model was told: the note read back by the JavaScript tool, and each thrown
    // error's own message.
    let last = emulator.requests().last().unwrap().body.to_string();
    assert!(last.contains("ship it"), "{last}");
    assert!(last.contains("PermissionError"), "{last}");
    assert!(last.contains("../secret.txt: not-permitted"), "{last}");
    assert!(!last.contains("outside the workdir"), "{last}");
}

/// A JavaScript driver from the template is the capsule's model with no gateway at all: it
/// needs no network, so it declares none, and the session runs on it; `mur tool invoke` calls
/// it alone with the template's test input.
#[test]
fn a_javascript_driver_without_a_gateway_is_a_capsules_model() {
    let dir = tempfile::tempdir().unwrap();
    let driver = made(dir.path(), "driver", "echo-js", "js");
    let input = std::fs::read_to_string(driver.join("input.json")).unwrap();
    let (out, report) = invoke(&driver, &dir.path().join("alone"), &input);
    assert_eq!(out.code, 0, "{out:?}");
    let response: Value = serde_json::from_str(report["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        response["content"][0]["text"],
        "(echo-1) you said: Hello, driver."
    );

    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!(
            "name: echoing\nversion: \"0.1.0\"\nartifacts:\n  - {{ name: echo-js, version: \"0.1.0\", runtime: driver, path: {} }}\ninference:\n  model: echo-1\n  driver: {{ artifact: echo-js }}\n",
            driver.display()
        ),
    )
    .unwrap();
    let (report, _) = session(dir.path(), "Say it back.");
    let result =
        std::fs::read_to_string(report["tasks"][0]["result_path"].as_str().unwrap()).unwrap();
    assert_eq!(result.trim(), "(echo-1) you said: Say it back.");
}

/// The hook template in each language, built and bound in a session: the model's call naming
/// a path under `.git/` is denied with the hook's reason, the other call runs.
#[test]
fn the_hook_template_denies_in_every_language() {
    let dir = tempfile::tempdir().unwrap();
    for lang in ["python", "js", "rust"] {
        let name = format!("guard-{lang}");
        let hook = made(dir.path(), "hook", &name, lang);
        let emulator = emulator(
            r#"
turns:
  - reply:
      tool_calls:
        - { id: c1, name: read-file, input: { path: .git/config } }
        - { id: c2, name: read-file, input: { path: notes.md } }
  - reply: { text: "done" }
"#,
        );
        let capsule = dir.path().join(format!("capsule-{lang}"));
        capsule_on_emulator(
            &capsule,
            &emulator,
            &format!(
                "  - {{ name: read-file, version: \"0.1.0\", runtime: tool, path: {} }}\n  - {{ name: {name}, version: \"0.1.0\", runtime: hook, path: {} }}\n",
                repo_root().join("artifacts/read-file").display(),
                hook.display()
            ),
            4,
        );
        let (_, trace) = session(&capsule, "Read the notes.");
        let denied = of_type(&trace, "call_denied");
        assert_eq!(denied.len(), 1, "{lang}: {trace:#?}");
        assert_eq!(denied[0]["hook"], name.as_str());
        assert_eq!(
            denied[0]["reason"],
            "read-file: paths under .git/ are off limits"
        );
        let calls = of_type(&trace, "tool_call");
        // The other call ran (the note is not there: `failed`, not denied).
        assert_eq!(calls.len(), 1, "{lang}: {calls:#?}");
        assert_eq!(calls[0]["input_path"], "notes.md");
        assert_eq!(calls[0]["status"], "failed");
    }
}

/// The Rust tool and driver templates build (offline, against the crates the workspace has)
/// and answer their own test input.
#[test]
fn the_rust_tool_and_driver_templates_build_and_answer_their_test_input() {
    let dir = tempfile::tempdir().unwrap();
    let tool = made(dir.path(), "tool", "notes-rs", "rust");
    let input = std::fs::read_to_string(tool.join("input.json")).unwrap();
    let workdir = dir.path().join("work");
    std::fs::create_dir(&workdir).unwrap();
    let (out, report) = invoke(&tool, &workdir, &input);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(report["state_effect"], "mutate", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(workdir.join("notes.md")).unwrap(),
        "Hello from a Murmur tool."
    );
    let (out, report) = invoke(&tool, &workdir, r#"{"path": "../outside.md"}"#);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(report["result"]["status"], "failed", "{report:#}");

    let driver = made(dir.path(), "driver", "echo-rs", "rust");
    let input = std::fs::read_to_string(driver.join("input.json")).unwrap();
    let (out, report) = invoke(&driver, &workdir, &input);
    assert_eq!(out.code, 0, "{out:?}");
    let response: Value = serde_json::from_str(report["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        response["content"][0]["text"],
        "(echo-1) you said: Hello, driver."
    );
}
