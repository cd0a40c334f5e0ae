//! Capsule components through the real `mur` (`murmur:capsule/run`,
//! `murmur:artifact-manager/manage`, `murmur:tool-registry/invoke`): a capsule without
//! `inference:` runs its component's `run`; the component pulls `write-file` mid-session from a
//! directory registry and invokes it; only allowlisted tools are callable; a tampered archive
//! is refused before anything is written.
//!
//! The component is the fixture `tests/fixtures/capsule-puller`, which writes what it saw to
//! `report.json` in its workspace.

use std::path::{Path, PathBuf};

use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

fn mur(home: &Path) -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", home)
}

/// A directory registry holding the first-party `write-file`.
fn registry(home: &Path, dir: &Path) {
    let output = mur(home)
        .args(["publish", "--json", "--registry"])
        .arg(dir)
        .arg(repo_root().join("artifacts/write-file"))
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
}

/// A capsule with no `inference:` whose one artifact is the capsule-puller component.
pub(crate) fn capsule(dir: &Path) -> PathBuf {
    let fixture = repo_root().join("tests/fixtures/capsule-puller");
    let text = format!(
        r#"name: puller
version: "0.1.0"
artifacts:
  - name: capsule-puller
    version: "0.1.0"
    runtime: capsule
    path: "{}"
"#,
        fixture.display()
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
    dir.to_path_buf()
}

fn run(home: &Path, dir: &Path, registry: &Path) -> MurOutput {
    mur(home)
        .args(["run", "--json", "--registry"])
        .arg(registry)
        .arg(dir)
        .run()
}

/// The session's report, its workspace (where the component and its tools write),
/// `report.json` (written there by the component) and the record's trace's events.
pub(crate) fn session(output: &MurOutput) -> (Value, PathBuf, Value, Vec<Value>) {
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{output:#?}");
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(workspace.join("report.json")).unwrap())
            .unwrap();
    let events = std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (report, workspace, seen, events)
}

fn registry_sha256(reg: &Path) -> String {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(reg.join("index.json")).unwrap()).unwrap();
    index["artifacts"]["write-file"]["0.1.0"]["sha256"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_capsule_component_pulls_a_tool_mid_session_and_invokes_it() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = capsule(&work.path().join("capsule"));

    let output = run(home.path(), &dir, reg.path());
    let (report, workspace, seen, events) = session(&output);
    assert!(
        report["session_id"].as_str().unwrap().starts_with("ses_"),
        "{report:#}"
    );

    // Absent before the pull, present after it, in list and diagnostics alike.
    assert_eq!(
        seen["list_before"],
        serde_json::json!(["capsule-puller"]),
        "{seen:#}"
    );
    assert_eq!(
        seen["list_after"],
        serde_json::json!(["capsule-puller", "write-file"]),
        "{seen:#}"
    );
    assert_eq!(seen["diagnostics"]["session_id"], report["session_id"]);
    assert_eq!(
        seen["diagnostics"]["installed"],
        serde_json::json!(["capsule-puller", "write-file"])
    );
    let sha256 = registry_sha256(reg.path());
    assert_eq!(seen["pull"]["ok"], true, "{seen:#}");
    assert_eq!(seen["pull"]["info"]["sha256"], sha256.as_str());
    assert_eq!(seen["pull"]["info"]["runtime"], "tool");

    // The pulled tool was called, in the session's workspace.
    assert_eq!(seen["invoke"]["ok"], true, "{seen:#}");
    assert_eq!(seen["invoke"]["status"], "passed", "{seen:#}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("pulled.md")).unwrap(),
        "pulled and written"
    );
    assert_eq!(seen["describe"]["ok"], true, "{seen:#}");
    assert_eq!(seen["describe"]["runtime"], "tool");
    assert_eq!(seen["describe"]["has_input_schema"], true);
    assert_eq!(seen["describe"]["manifest_names_it"], true);

    // search, remove and an undeclared tool are errors, never calls.
    assert!(seen["search_error"].as_str().is_some(), "{seen:#}");
    assert!(seen["remove_error"].as_str().is_some(), "{seen:#}");
    assert_eq!(seen["undeclared_invoke"]["ok"], false, "{seen:#}");
    assert!(
        seen["undeclared_invoke"]["error"]
            .as_str()
            .unwrap()
            .contains("not an allowlisted tool"),
        "{seen:#}"
    );
    // Input its schema refuses is refused before the tool runs.
    assert_eq!(seen["bad_input_invoke"]["ok"], false, "{seen:#}");
    assert!(
        seen["bad_input_invoke"]["error"]
            .as_str()
            .unwrap()
            .starts_with("error[E-RUN-009]"),
        "{seen:#}"
    );

    // Installed in the project store and pinned in the lock with the registry's sha256.
    let lock = murmur_manifest::Lock::load(&dir.join("murmur.lock"))
        .unwrap()
        .expect("murmur.lock is written");
    let pin = lock.get("write-file").expect("write-file is pinned");
    assert_eq!(pin.sha256, sha256);
    assert_eq!(pin.version, "0.1.0");
    assert!(
        dir.join(".murmur/artifacts/write-file/0.1.0/murmur.yaml")
            .is_file()
    );

    // The trace: the pull, the calls (the refused one too), and the session's frame.
    let types: Vec<&str> = events
        .iter()
        .map(|event| event["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"session_start"), "{types:?}");
    assert_eq!(types.last(), Some(&"session_end"), "{types:?}");
    let pulled: Vec<&Value> = events
        .iter()
        .filter(|event| event["event_type"] == "artifact_pulled")
        .collect();
    assert_eq!(pulled.len(), 1, "{types:?}");
    assert_eq!(pulled[0]["name"], "write-file");
    assert_eq!(pulled[0]["sha256"], sha256.as_str());
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter(|event| event["event_type"] == "tool_call")
        .map(|event| {
            (
                event["tool_name"].as_str().unwrap(),
                event["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("write-file", "passed"),
            ("nope", "refused"),
            ("write-file", "refused")
        ]
    );
    // The component's call is traced with what the tool declared, as an agent's would be.
    let written = events
        .iter()
        .find(|event| event["event_type"] == "tool_call" && event["status"] == "passed")
        .unwrap();
    assert_eq!(written["state_effect"], "mutate", "{written}");
    assert_eq!(written["resource_id"], "file:pulled.md", "{written}");
    assert_eq!(written["input_path"], "pulled.md", "{written}");

    // A second session finds it pinned and installed: the pull changes nothing.
    let again = run(home.path(), &dir, reg.path());
    let (_, _, seen, _) = session(&again);
    assert_eq!(seen["pull"]["ok"], true, "{seen:#}");
    assert_eq!(seen["invoke"]["status"], "passed", "{seen:#}");
}

#[test]
fn a_tampered_archive_is_refused_to_the_component_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    // Flip one byte of the published archive: its sha256 is no longer the index's.
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(reg.path().join("index.json")).unwrap())
            .unwrap();
    let url = index["artifacts"]["write-file"]["0.1.0"]["url"]
        .as_str()
        .unwrap();
    let archive = reg.path().join(url);
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&archive, bytes).unwrap();

    let work = tempfile::tempdir().unwrap();
    let dir = capsule(&work.path().join("capsule"));
    let output = run(home.path(), &dir, reg.path());
    let (_, workspace, seen, events) = session(&output);

    assert_eq!(seen["pull"]["ok"], false, "{seen:#}");
    assert!(
        seen["pull"]["error"]
            .as_str()
            .unwrap()
            .contains("E-REG-004"),
        "{seen:#}"
    );
    assert_eq!(
        seen["list_after"],
        serde_json::json!(["capsule-puller"]),
        "{seen:#}"
    );
    assert_eq!(seen["invoke"]["ok"], false, "{seen:#}");
    assert!(!workspace.join("pulled.md").exists());
    assert!(!dir.join("murmur.lock").exists(), "no lock is written");
    assert!(!dir.join(".murmur").exists(), "nothing is installed");
    assert!(
        !home.path().join("artifacts").exists()
            || std::fs::read_dir(home.path().join("artifacts"))
                .unwrap()
                .next()
                .is_none(),
        "the user's store is not written"
    );
    assert!(
        events
            .iter()
            .all(|event| event["event_type"] != "artifact_pulled")
    );
}

/// A pull that conflicts with the lock's pin (other bytes for the same version) errs to the
/// component before anything is written; the lock is left as it was.
#[test]
fn a_pull_against_the_locks_pin_is_refused_and_the_lock_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = capsule(&work.path().join("capsule"));
    let pinned = format!(
        "version: 1\nartifacts:\n  - {{ name: \"write-file\", version: \"0.1.0\", runtime: \"tool\", sha256: \"{}\", source: \"elsewhere\" }}\n",
        "cd".repeat(32)
    );
    std::fs::write(dir.join("murmur.lock"), &pinned).unwrap();
    let output = run(home.path(), &dir, reg.path());
    let (_, workspace, seen, events) = session(&output);
    assert_eq!(seen["pull"]["ok"], false, "{seen:#}");
    assert!(
        seen["pull"]["error"]
            .as_str()
            .unwrap()
            .contains("E-REG-005"),
        "{seen:#}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("murmur.lock")).unwrap(),
        pinned
    );
    assert!(!dir.join(".murmur/artifacts/write-file").exists());
    assert!(!workspace.join("pulled.md").exists());
    assert!(
        events
            .iter()
            .all(|event| event["event_type"] != "artifact_pulled")
    );
}

/// A declared tool whose `input_schema` is a mapping but not a JSON Schema is refused before
/// the component runs, as an agent's tool is: its calls are never left unchecked.
#[test]
fn a_declared_tool_whose_input_schema_does_not_compile_stops_staging() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = capsule(&work.path().join("capsule"));
    let tool = work.path().join("odd-tool");
    std::fs::create_dir_all(&tool).unwrap();
    let built = repo_root().join("artifacts/write-file/component.wasm");
    std::fs::copy(&built, tool.join("component.wasm")).unwrap();
    std::fs::write(
        tool.join("murmur.yaml"),
        "name: odd-tool\nversion: \"0.1.0\"\nruntime: tool\ncomponent: component.wasm\ninput_schema:\n  type: 12\n",
    )
    .unwrap();
    let mut manifest = std::fs::read_to_string(dir.join("murmur.yaml")).unwrap();
    manifest.push_str(&format!(
        "  - name: odd-tool\n    version: \"0.1.0\"\n    runtime: tool\n    path: \"{}\"\n",
        tool.display()
    ));
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
    let output = run(home.path(), &dir, reg.path());
    assert_ne!(output.code, 0, "{output:#?}");
    let error = &output.json()["error"];
    assert_eq!(error["code"], "E-MAN-018", "{output:#?}");
    assert!(
        error["message"].as_str().unwrap().contains("odd-tool"),
        "{output:#?}"
    );
}

/// A capsule with no `inference:` whose component is the capsule-shell fixture, allowing
/// `allow` in its shell, with `hooks` (artifact entries, one a line) after the component's.
fn shell_capsule(dir: &Path, allow: &str, hooks: &str) -> PathBuf {
    let text = format!(
        r#"name: shell-user
version: "0.1.0"
capabilities:
  shell: {{ allow: [{allow}] }}
artifacts:
  - name: capsule-shell
    version: "0.1.0"
    runtime: capsule
    path: "{}"
{hooks}"#,
        repo_root().join("tests/fixtures/capsule-shell").display()
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
    dir.to_path_buf()
}

fn of_type<'a>(events: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["event_type"] == event_type)
        .collect()
}

/// `murmur:shell/execute` goes the model's shell path: the allowlist (nothing spawned for an
/// unlisted binary), the `on-shell` decision point of a `deny` hook (the first-party
/// policy-shell), the run (a non-zero exit is data, stdin reaches the child, the time limit
/// ends it), a `shell` event for each, a `call_denied` for the denied one, and the `on-shell`
/// observation for every call that got past the allowlist.
#[test]
fn a_capsule_component_runs_the_shell_under_its_grant_hooks_and_trace() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let probe = murmur_testkit::fixture_hook(
        &work.path().join("hooks"),
        "shell-probe",
        "hook-probe",
        "binding: on-shell\nexecution_mode: blocking\ncommit_policy: none\n",
    );
    let hooks = format!(
        "  - {{ name: policy-shell, version: \"0.1.0\", runtime: hook, path: \"{}\", config: {{ rules: [ {{ argv: \"^denied-word$\", reason: \"no denied words\" }} ] }} }}\n  - {{ name: shell-probe, version: \"0.1.0\", runtime: hook, path: \"{}\", config: {{ log: probe.jsonl, call: {{ on-shell: [inference] }} }}, grants: [runtime/inference, runtime/tokens, task-io/read, conversation/read], capabilities: {{ filesystem: {{ scope: write }} }} }}\n",
        repo_root().join("artifacts/policy-shell").display(),
        probe.display()
    );
    let dir = shell_capsule(
        &work.path().join("capsule"),
        "echo, sh, cat, sleep, touch",
        &hooks,
    );

    let output = run(home.path(), &dir, reg.path());
    let (_, workspace, seen, events) = session(&output);
    assert!(!output.stderr.contains("W-HOOK-008"), "{output:#?}");

    assert_eq!(seen["echo"]["ok"]["exit_code"], 0, "{seen:#}");
    assert_eq!(seen["echo"]["ok"]["stdout"], "from capsule\n", "{seen:#}");
    assert_eq!(seen["exit3"]["ok"]["exit_code"], 3, "{seen:#}");
    assert_eq!(seen["exit3"]["ok"]["stderr"], "oops\n", "{seen:#}");
    assert_eq!(seen["stdin"]["ok"]["stdout"], "piped in", "{seen:#}");
    let unlisted = seen["unlisted"]["err"].as_str().unwrap();
    assert!(unlisted.starts_with("error[E-CAP-006]"), "{seen:#}");
    assert_eq!(
        seen["denied"]["err"], "denied by hook `policy-shell`: no denied words",
        "{seen:#}"
    );
    assert_eq!(seen["touch"]["ok"]["exit_code"], 0, "{seen:#}");
    assert!(workspace.join("made-by-shell").is_file());
    assert_eq!(seen["slow"]["ok"]["exit_code"], Value::Null, "{seen:#}");

    // A `shell` event for each call but the denied one, under the task; the refused one with
    // its error and nothing run.
    let task_start = of_type(&events, "task_start")[0];
    let shells = of_type(&events, "shell");
    assert_eq!(shells.len(), 6, "{shells:#?}");
    assert!(
        shells
            .iter()
            .all(|event| event["parent_id"] == task_start["event_id"]
                && event["task_id"] == task_start["task_id"]),
        "{shells:#?}"
    );
    let refused = shells
        .iter()
        .find(|event| event["argv"] == serde_json::json!(["/"]))
        .unwrap();
    assert_eq!(refused["error"]["code"], "E-CAP-006", "{refused:#}");
    assert_eq!(refused["exit_code"], Value::Null, "{refused:#}");
    let slow = shells
        .iter()
        .find(|event| event["argv"] == serde_json::json!(["5"]))
        .unwrap();
    assert_eq!(slow["timed_out"], true, "{slow:#}");
    let denied = of_type(&events, "call_denied");
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0]["kind"], "shell");
    assert_eq!(denied[0]["hook"], "policy-shell");

    // The probe (bound to on-shell, policy none) hears each admitted call's observation: the
    // six past the allowlist, the denied one with its denial as the error.
    let heard: Vec<Value> = std::fs::read_to_string(workspace.join("probe.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(heard.iter().all(|line| line["handler"] == "on-shell"));
    let outcomes: Vec<&Value> = heard.iter().map(|line| &line["event"]["outcome"]).collect();
    assert_eq!(outcomes.len(), 6, "{heard:#?}");
    assert!(
        outcomes.iter().all(|outcome| outcome.is_object()),
        "{heard:#?}"
    );
    let denied_seen = heard
        .iter()
        .find(|line| line["event"]["argv"] == serde_json::json!(["denied-word"]))
        .unwrap();
    assert_eq!(
        denied_seen["event"]["outcome"]["error"],
        "denied by hook `policy-shell`: no denied words"
    );
    assert_eq!(
        denied_seen["event"]["task_id"], task_start["task_id"],
        "{denied_seen:#}"
    );
    // There is no model for a hook to call here: its `run-inference` errs, and says why.
    let inference = denied_seen["calls"]["inference"]["err"].as_str().unwrap();
    assert!(inference.contains("no `inference:`"), "{denied_seen:#}");
}

/// Without `capabilities.shell.allow`, `murmur:shell/execute` refuses every binary: nothing
/// runs (the file the component asks `sh` to make is never made), each refusal is traced.
#[test]
fn a_capsule_component_without_a_shell_grant_runs_nothing() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = shell_capsule(&work.path().join("capsule"), "", "");

    let output = run(home.path(), &dir, reg.path());
    let (_, workspace, seen, events) = session(&output);
    let seen = seen.as_object().unwrap();
    assert_eq!(seen.len(), 7, "{seen:#?}");
    for (call, outcome) in seen {
        let error = outcome["err"].as_str().unwrap_or_default();
        assert!(error.starts_with("error[E-CAP-006]"), "{call}: {outcome}");
    }
    assert!(!workspace.join("made-by-shell").exists());
    let shells = of_type(&events, "shell");
    assert_eq!(shells.len(), 7, "{shells:#?}");
    assert!(
        shells
            .iter()
            .all(|event| event["error"]["code"] == "E-CAP-006" && event["exit_code"].is_null()),
        "{shells:#?}"
    );
}

/// A hook bound to anything but `on-shell` would never run in a capsule component's session:
/// staging says so.
#[test]
fn a_capsule_component_warns_of_a_hook_that_never_runs() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let hooks = format!(
        "  - {{ name: policy, version: \"0.1.0\", runtime: hook, path: \"{}\", config: {{ rules: [] }} }}\n",
        repo_root().join("artifacts/policy").display()
    );
    let dir = shell_capsule(&work.path().join("capsule"), "echo", &hooks);
    let output = run(home.path(), &dir, reg.path());
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(output.stderr.contains("W-HOOK-008"), "{output:#?}");
    assert!(output.stderr.contains("`policy`"), "{output:#?}");
}

/// A capsule component cannot call MCP servers: a capsule declaring one says so before
/// anything runs, rather than run without them.
#[test]
fn a_capsule_component_with_an_mcp_server_is_refused_before_it_runs() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let hooks = "  - { name: notes, runtime: mcp, server: { command: notes-server } }\n";
    let dir = shell_capsule(&work.path().join("capsule"), "echo", hooks);
    let output = run(home.path(), &dir, reg.path());
    assert_eq!(output.code, 2, "{output:#?}");
    let error = &output.json()["error"];
    assert_eq!(error["code"], "E-RUN-026", "{output:#?}");
    assert!(
        error["message"].as_str().unwrap().contains("`notes`"),
        "{output:#?}"
    );
    assert!(!work.path().join("capsule/workdir").exists());
}

/// Whether a process whose command line is exactly `argv` is alive.
fn running(argv: &[&str]) -> bool {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted)
    })
}

/// SIGTERM, then SIGINT in a second run, to `mur run` of a capsule component mid-way through a
/// shell call: the run ends as an agent session does: the call is stopped and its child
/// killed, the task and session end `canceled` with the trace closed, and `mur` exits 128 +
/// the signal's number.
#[test]
fn a_signal_ends_a_capsule_components_run_canceled_with_its_trace_closed() {
    for (signal, number, seconds) in [(libc::SIGTERM, 143, "4243"), (libc::SIGINT, 130, "4244")] {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let dir = shell_capsule(&work.path().join("capsule"), "sleep", "");
        let manifest = dir.join("murmur.yaml");
        let text = std::fs::read_to_string(&manifest).unwrap().replace(
            "capabilities:\n",
            "capabilities:\n  env: { allow: [ CAPSULE_SHELL_SLEEP ] }\n",
        );
        std::fs::write(&manifest, text).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home.path())
            .env("CAPSULE_SHELL_SLEEP", seconds)
            .args(["run", "--json"])
            .arg(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !running(&["sleep", seconds]) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the shell call never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        unsafe { libc::kill(child.id() as i32, signal) };
        let stopped = std::time::Instant::now();
        let output = child.wait_with_output().unwrap();
        assert!(stopped.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(
            output.status.code(),
            Some(number),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["exit_status"], "canceled", "{report:#}");
        let record = PathBuf::from(report["workdir"].as_str().unwrap());
        let events: Vec<Value> = std::fs::read_to_string(record.join("trace.jsonl"))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(of_type(&events, "task_end")[0]["exit_status"], "canceled");
        let end = events.last().unwrap();
        assert_eq!(end["event_type"], "session_end", "{events:#?}");
        assert_eq!(end["exit_status"], "canceled");
        let gone = std::time::Instant::now();
        while running(&["sleep", seconds]) {
            assert!(
                gone.elapsed() < std::time::Duration::from_secs(5),
                "the shell call's child outlived the run"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// `murmur:message/send` from a capsule component: a send to a served peer whose origin
/// `network.allow` permits goes out with the `peers:` entry's credential (the component never
/// sees it) and comes back with the peer's task; the peer hears the text, from a `peer`
/// origin, nested under the sending task; a send to an origin not allowed is refused with no
/// connection. Both are `a2a_send` events of the capsule's task.
#[test]
fn a_capsule_component_sends_to_an_allowed_peer_and_is_refused_another() {
    use murmur_testkit::emulator::{Emulator, Script};
    const TOKEN: &str = "capsule-to-peer-token-0123456789";
    let emulator = Emulator::builder(
        Script::from_yaml("turns:\n  - reply: { text: \"hello back\" }\n").unwrap(),
    )
    .api_key("sk-peer")
    .start()
    .unwrap();
    let peer_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        peer_dir.path().join("murmur.yaml"),
        emulator.capsule_manifest(
            "peer",
            "",
            "door:\n  auth:\n    - { principal: capsule, bearer: \"${CAPSULE_TOKEN}\", trust: peer }\n",
        ),
    )
    .unwrap();
    let served = murmur_testkit::door::Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        peer_dir.path(),
        &[("EMU_KEY", "sk-peer"), ("CAPSULE_TOKEN", TOKEN)],
    );
    // A listener nobody may reach: it must never be connected to.
    let unlisted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    unlisted.set_nonblocking(true).unwrap();
    let unlisted_url = format!("http://{}/", unlisted.local_addr().unwrap());

    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = shell_capsule(&work.path().join("capsule"), "echo", "");
    let manifest = dir.join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "capabilities:\n",
        &format!(
            "peers:\n  - {{ url: \"{url}/\", bearer: \"${{PEER_TOKEN}}\" }}\ncapabilities:\n  env: {{ allow: [ CAPSULE_SHELL_PEERS ] }}\n  network: {{ allow: [ \"{url}\" ] }}\n",
            url = served.url
        ),
    );
    std::fs::write(&manifest, text).unwrap();
    let output = mur(home.path())
        .env(
            "CAPSULE_SHELL_PEERS",
            format!("{}/ {unlisted_url}", served.url),
        )
        .env("PEER_TOKEN", TOKEN)
        .args(["run", "--json", "--registry"])
        .arg(reg.path())
        .arg(&dir)
        .run();
    let (_, _, seen, events) = session(&output);

    let sent = &seen["send-0"]["ok"];
    assert_eq!(sent["state"], "TaskState::Completed", "{seen:#}");
    let peer_task = sent["task_id"].as_str().unwrap();
    assert!(!peer_task.is_empty());
    let refused = seen["send-1"]["err"].as_str().unwrap();
    assert!(
        refused.contains("not in capabilities.network.allow"),
        "{seen:#}"
    );
    assert!(
        unlisted.accept().is_err(),
        "the unlisted origin was connected to"
    );
    // The peer's model heard the text once.
    let requests = emulator.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("hello from a capsule")
    );

    // Both sends are the capsule's task's `a2a_send` events.
    let task_id = of_type(&events, "task_start")[0]["task_id"].clone();
    let sends = of_type(&events, "a2a_send");
    assert_eq!(sends.len(), 2, "{sends:#?}");
    assert_eq!(sends[0]["task_id"], task_id);
    assert_eq!(sends[0]["peer_task_id"], peer_task);
    assert!(sends[0].get("error").is_none(), "{:#}", sends[0]);
    assert!(
        sends[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not in capabilities.network.allow")
    );
    // The peer took it as from a peer, nested under the sending task's span.
    let peer_trace = murmur_testkit::door::session_dir(peer_dir.path()).join("trace.jsonl");
    let peer_events: Vec<Value> = std::fs::read_to_string(peer_trace)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let received = of_type(&peer_events, "a2a_task_received");
    assert_eq!(received.len(), 1, "{peer_events:#?}");
    assert_eq!(received[0]["origin"], "peer");
    assert_eq!(received[0]["traceparent"], sends[0]["traceparent"]);
}
