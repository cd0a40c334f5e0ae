//! Escape cases: hooks and drivers holding only the grants their artifact entry gives them.
//!
//! A `hook-probe` (`tests/fixtures/hook-probe`) tries, at `on-session-start`, to read, write and
//! list the session's workspace and to reach a loopback server over `wasi:http`; a hook that cannot write
//! its log hands its whole report back as an error, which the runtime traces as
//! `hook_dispatch_error`. The `probe` fixture, as a driver, tries a second server beside its
//! gateway. Every server here is a `RecordingServer` on 127.0.0.1 that the capsule's allowlist
//! names, so only the artifact entry stands between the component and it.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-escape-hooks";

/// A capsule with the Anthropic driver (at the emulator) and one `hook-probe` named `probe`
/// whose entry carries `capabilities` (`""` for none); the capsule allows `allow`.
fn hook_capsule(
    dir: &Path,
    endpoint: &str,
    capabilities: &str,
    allow: &str,
    tries: Value,
) -> PathBuf {
    let root = repo_root();
    let hook = murmur_testkit::fixture_hook(
        &dir.join("hooks"),
        "probe",
        "hook-probe",
        "execution_mode: blocking\ncommit_policy: none\n",
    );
    let config = json!({"log": "probe.jsonl", "try": {"on-session-start": tries}});
    let capabilities = if capabilities.is_empty() {
        String::new()
    } else {
        format!(", capabilities: {capabilities}")
    };
    let text = format!(
        r#"name: escaping
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: hook, path: {hook}, config: {config}, grants: [ runtime/inference, runtime/tokens, task-io/read, conversation/read ]{capabilities} }}
capabilities:
  network: {{ allow: [ {allow} ] }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  max_turns: 2
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        hook = hook.display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn emulator() -> Emulator {
    Emulator::builder(Script::from_yaml("turns:\n  - reply: { text: done }\n").unwrap())
        .api_key(KEY)
        .start()
        .expect("emulator")
}

fn run(file: &Path) -> MurOutput {
    let dir = file.parent().unwrap();
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "go"])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .run()
}

/// The session's record (its `workdir`: trace, result, the runtime's logs), its workspace (what
/// a hook's filesystem grant reaches) and its trace, asserting the trace is whole (every line
/// parses, one `session_end`).
fn finished(output: &MurOutput) -> (PathBuf, PathBuf, Vec<Value>) {
    let report = output.json();
    let path = |key: &str| {
        PathBuf::from(
            report[key]
                .as_str()
                .unwrap_or_else(|| panic!("no {key}: {output:#?}")),
        )
    };
    let (record, workspace) = (path("workdir"), path("workspace"));
    let trace: Vec<Value> = std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a trace line that parses"))
        .collect();
    assert_eq!(
        trace
            .iter()
            .filter(|e| e["event_type"] == "session_end")
            .count(),
        1,
        "{trace:#?}"
    );
    (record, workspace, trace)
}

/// What the probe tried at `on-session-start`: from its log when it could write one, else
/// from the line its error carried into `hook_dispatch_error`.
fn tries(workspace: &Path, trace: &[Value]) -> Value {
    if let Ok(text) = std::fs::read_to_string(workspace.join("probe.jsonl")) {
        return session_start_tries(&text);
    }
    let error = trace
        .iter()
        .find(|e| e["event_type"] == "hook_dispatch_error" && e["handler"] == "on-session-start")
        .unwrap_or_else(|| panic!("no log and no dispatch error: {trace:#?}"));
    let message = error["message"].as_str().unwrap();
    let (_, line) = message
        .split_once("; line: ")
        .unwrap_or_else(|| panic!("{message}"));
    serde_json::from_str::<Value>(line).unwrap()["tries"].clone()
}

/// The `tries` of the `on-session-start` line of a probe log.
fn session_start_tries(log: &str) -> Value {
    log.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["handler"] == "on-session-start")
        .unwrap_or_else(|| panic!("no on-session-start line: {log}"))["tries"]
        .clone()
}

fn grants_of<'a>(trace: &'a [Value], name: &str) -> &'a Value {
    trace[0]["grants"]
        .as_array()
        .unwrap_or_else(|| panic!("{:#}", trace[0]))
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no grants for {name}: {:#}", trace[0]))
}

fn all_tries(server: &RecordingServer) -> Value {
    json!([
        "read:MURMUR.md",
        "write:planted.txt",
        "list:.",
        format!("http:{}/hook", server.url())
    ])
}

#[test]
fn a_hook_without_an_entry_grant_neither_reads_writes_nor_reaches_the_network() {
    let server = RecordingServer::start("reached");
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("\"{}\"", server.url());
    let file = hook_capsule(dir.path(), &emulator.url(), "", &allow, all_tries(&server));
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let (record, workspace, trace) = finished(&output);
    let seen = tries(&workspace, &trace);
    for action in ["read:MURMUR.md", "write:planted.txt", "list:."] {
        assert!(seen[action]["err"].is_string(), "{action}: {seen:#}");
    }
    let http = format!("http:{}/hook", server.url());
    assert!(
        seen[&http]["err"]
            .as_str()
            .unwrap()
            .contains("HttpRequestDenied"),
        "{seen:#}"
    );
    // Nothing arrived, nothing was planted anywhere, and the log could not be written.
    assert_eq!(server.connections(), 0);
    assert!(!workspace.join("planted.txt").exists());
    assert!(!record.join("planted.txt").exists());
    assert!(!dir.path().join("planted.txt").exists());
    assert!(!workspace.join("probe.jsonl").exists());
    assert!(!record.join("probe.jsonl").exists());
    // `session_start` says so: no directory, no network; the driver holds its gateway only.
    let hook = grants_of(&trace, "probe");
    assert_eq!(hook["runtime"], "hook");
    assert_eq!(hook["filesystem"], "none");
    assert_eq!(hook["network"], json!([]));
    let driver = grants_of(&trace, "driver-anthropic");
    assert_eq!(driver["filesystem"], "none");
    assert_eq!(driver["network"].as_array().unwrap().len(), 1, "{driver:#}");
    let tool_like = trace[0]["grants"].to_string();
    assert!(!tool_like.contains(KEY), "a credential in session_start");
}

#[test]
fn a_hook_granted_read_reads_the_workdir_but_cannot_write_it() {
    // The directory it reads is the session's workspace.
    let server = RecordingServer::start("reached");
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("\"{}\"", server.url());
    let file = hook_capsule(
        dir.path(),
        &emulator.url(),
        "{ filesystem: { scope: read } }",
        &allow,
        all_tries(&server),
    );
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let (record, workspace, trace) = finished(&output);
    let seen = tries(&workspace, &trace);
    assert!(
        seen["read:MURMUR.md"]["ok"]
            .as_str()
            .unwrap()
            .contains("escaping"),
        "{seen:#}"
    );
    assert!(
        seen["list:."]["ok"]
            .as_array()
            .unwrap()
            .contains(&json!("MURMUR.md")),
        "{seen:#}"
    );
    assert!(seen["write:planted.txt"]["err"].is_string(), "{seen:#}");
    assert!(!workspace.join("planted.txt").exists());
    assert!(!record.join("planted.txt").exists());
    // Its log is a write too: refused.
    assert!(!workspace.join("probe.jsonl").exists());
    assert!(!record.join("probe.jsonl").exists());
    // Reading grants no network.
    assert_eq!(server.connections(), 0);
    assert_eq!(grants_of(&trace, "probe")["filesystem"], "read");
}

#[test]
fn a_hook_granted_a_subdirectory_writes_there_and_sees_nothing_else() {
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    let file = hook_capsule(
        dir.path(),
        &emulator.url(),
        "{ filesystem: { scope: write, path: hook-space/probe } }",
        "\"http://127.0.0.1:9\"",
        json!([
            "read:MURMUR.md",
            "read:../MURMUR.md",
            "read:../../MURMUR.md",
            "write:planted.txt",
            "list:."
        ]),
    );
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let (record, workspace, trace) = finished(&output);
    let space = workspace.join("hook-space/probe");
    // The log and the planted file land in its directory, and MURMUR.md above it is out of reach.
    let seen = &session_start_tries(&std::fs::read_to_string(space.join("probe.jsonl")).unwrap());
    assert!(seen["read:MURMUR.md"]["err"].is_string(), "{seen:#}");
    assert!(seen["read:../MURMUR.md"]["err"].is_string(), "{seen:#}");
    assert!(seen["read:../../MURMUR.md"]["err"].is_string(), "{seen:#}");
    assert_eq!(seen["write:planted.txt"]["ok"], true, "{seen:#}");
    assert_eq!(
        std::fs::read_to_string(space.join("planted.txt")).unwrap(),
        "hook-probe"
    );
    assert!(workspace.join("MURMUR.md").is_file());
    assert!(!workspace.join("planted.txt").exists());
    assert!(!record.join("planted.txt").exists());
    let hook = grants_of(&trace, "probe");
    assert_eq!(hook["filesystem"], "write");
    assert_eq!(hook["path"], "hook-space/probe");
}

#[test]
fn a_hook_granted_a_host_reaches_it_and_only_it() {
    let server = RecordingServer::start("reached");
    let other = RecordingServer::start("other");
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("\"{}\", \"{}\"", server.url(), other.url());
    let file = hook_capsule(
        dir.path(),
        &emulator.url(),
        &format!("{{ network: {{ allow: [ \"{}\" ] }} }}", server.url()),
        &allow,
        json!([
            format!("http:{}/hook", server.url()),
            format!("http:{}/hook", other.url())
        ]),
    );
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let (_, workspace, trace) = finished(&output);
    let seen = tries(&workspace, &trace);
    assert_eq!(
        seen[format!("http:{}/hook", server.url())]["ok"],
        200,
        "{seen:#}"
    );
    assert!(
        seen[format!("http:{}/hook", other.url())]["err"].is_string(),
        "{seen:#}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/hook");
    assert_eq!(other.connections(), 0);
    assert_eq!(grants_of(&trace, "probe")["network"], json!([server.url()]));
}

#[test]
fn a_hook_asking_for_a_host_outside_the_capsule_fails_check_and_run() {
    let server = RecordingServer::start("reached");
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    let file = hook_capsule(
        dir.path(),
        &emulator.url(),
        &format!("{{ network: {{ allow: [ \"{}\" ] }} }}", server.url()),
        "\"https://api.example.com\"",
        all_tries(&server),
    );
    let check = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["check", "--json"])
        .arg(&file)
        .run();
    assert_eq!(check.code, 1, "{check:#?}");
    let report = check.json();
    let diagnostic = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "E-CAP-009")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert!(
        diagnostic["message"]
            .as_str()
            .unwrap()
            .contains("artifact `probe`")
    );
    assert!(
        diagnostic["message"]
            .as_str()
            .unwrap()
            .contains(&server.url())
    );
    assert!(
        diagnostic["hint"]
            .as_str()
            .unwrap()
            .contains("capabilities.network.allow")
    );
    let output = run(&file);
    assert_ne!(output.code, 0, "{output:#?}");
    assert!(
        format!("{}{}", output.stdout, output.stderr).contains("E-CAP-009"),
        "{output:#?}"
    );
    assert_eq!(server.connections(), 0);
    assert_eq!(emulator.requests().len(), 0);
}

/// A capsule whose driver is the `probe` fixture, at `gateway`, also trying `also`, which the
/// capsule's allowlist names; the driver's entry carries `capabilities` (`""` for none).
fn driver_capsule(dir: &Path, gateway: &str, also: &str, capabilities: &str) -> PathBuf {
    let capabilities = if capabilities.is_empty() {
        String::new()
    } else {
        format!("\n    capabilities: {capabilities}")
    };
    let text = format!(
        r#"name: driven
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{gateway}" }}{capabilities}
capabilities:
  network: {{ allow: [ "{also}" ] }}
inference:
  model: probe-model
  driver: {{ artifact: probe-driver, config: {{ also_get: "{also}/driver" }} }}
  max_turns: 2
"#,
        driver = repo_root().join("tests/fixtures/probe-driver").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

/// What the probe driver reported as its answer.
fn driver_report(output: &MurOutput) -> Value {
    let report = output.json();
    let path = report["tasks"][0]["result_path"]
        .as_str()
        .unwrap_or_else(|| panic!("{output:#?}"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_driver_reaches_only_its_gateway_unless_its_entry_says_more() {
    let gateway = RecordingServer::start("gateway");
    let also = RecordingServer::start("also");
    let dir = tempfile::tempdir().unwrap();
    let file = driver_capsule(dir.path(), &gateway.url(), &also.url(), "");
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let seen = driver_report(&output);
    assert_eq!(seen["gateway"]["status"], 200, "{seen:#}");
    assert_eq!(seen["also"]["error"], "HttpRequestDenied", "{seen:#}");
    assert_eq!(gateway.requests().len(), 1);
    assert_eq!(also.connections(), 0);
    let (_, _, trace) = finished(&output);
    let driver = grants_of(&trace, "probe-driver");
    assert_eq!(driver["network"].as_array().unwrap().len(), 1, "{driver:#}");
    assert_eq!(driver["filesystem"], "none");

    // Its entry may add a host the capsule allows.
    let dir = tempfile::tempdir().unwrap();
    let file = driver_capsule(
        dir.path(),
        &gateway.url(),
        &also.url(),
        &format!("{{ network: {{ allow: [ \"{}\" ] }} }}", also.url()),
    );
    let output = run(&file);
    assert_eq!(output.code, 0, "{output:#?}");
    let seen = driver_report(&output);
    assert_eq!(seen["also"]["status"], 200, "{seen:#}");
    assert_eq!(also.requests().len(), 1);
    assert_eq!(also.requests()[0].path, "/driver");
}
