//! A hostile component fails cleanly and the runtime survives; allowed access works.
//!
//! Every test drives the real `mur` binary (`mur tool invoke`) against the `probe` fixture
//! component (tests/fixtures/probe), built from source, under a capsule manifest written by the
//! test. The probe reports what really happened; the tests check that denials deny and grants
//! grant.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::{Value, json};

fn probe_dir() -> PathBuf {
    repo_root().join("tests/fixtures/probe")
}

/// A capsule manifest granting the probe `capabilities` (a YAML mapping body).
fn capsule(dir: &Path, capabilities: &str) -> PathBuf {
    let file = dir.join("murmur.yaml");
    let text = format!(
        "name: sandbox-test\nversion: \"0.1.0\"\nartifacts:\n  - name: probe\n    version: \"0.1.0\"\n    runtime: tool\n    path: {}\n    config: {{ mode: strict }}\ncapabilities:\n{}\n",
        probe_dir().display(),
        capabilities
    );
    std::fs::write(&file, text).unwrap();
    file
}

fn invoke(input: Value, capsule: Option<&Path>, workdir: &Path) -> MurOutput {
    invoke_with_env(input, capsule, workdir, &[])
}

fn invoke_with_env(
    input: Value,
    capsule: Option<&Path>,
    workdir: &Path,
    env: &[(&str, &str)],
) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(probe_dir())
        .arg("--input")
        .arg(input.to_string())
        .arg("--workdir")
        .arg(workdir);
    if let Some(capsule) = capsule {
        mur = mur.arg("--capsule").arg(capsule);
    }
    for (name, value) in env {
        mur = mur.env(name, value);
    }
    mur.run()
}

/// The probe's report (its `data`, as JSON). The probe returns `passed` when its action
/// succeeded and `failed` (exit 1) when it did not; anything else is a broken call.
fn probe_report(output: &MurOutput) -> Value {
    let printed = output.json();
    let report: Value =
        serde_json::from_str(printed["output"].as_str().expect("the probe's data")).unwrap();
    let (code, status) = if report["ok"] == true {
        (0, "passed")
    } else {
        (1, "failed")
    };
    assert_eq!(output.code, code, "{output:#?}");
    assert_eq!(printed["result"]["status"], status, "{printed:#}");
    report
}

fn error_code(output: &MurOutput) -> String {
    output.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn reading_etc_passwd_fails_inside_the_sandbox() {
    let workdir = tempfile::tempdir().unwrap();
    let output = invoke(
        json!({"action": "read_file", "path": "/etc/passwd"}),
        None,
        workdir.path(),
    );
    let report = probe_report(&output);
    assert_eq!(report["ok"], false, "{report}");
    assert!(!output.stdout.contains("root:"), "{}", output.stdout);
}

#[test]
fn paths_outside_the_workdir_do_not_exist_for_the_component() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "the secret").unwrap();
    let workdir = outside.path().join("work");
    std::fs::create_dir(&workdir).unwrap();
    std::os::unix::fs::symlink(&secret, workdir.join("link.txt")).unwrap();

    for path in [
        "../secret.txt".to_string(),
        secret.display().to_string(),
        "link.txt".to_string(),
    ] {
        let output = invoke(json!({"action": "read_file", "path": path}), None, &workdir);
        let report = probe_report(&output);
        assert_eq!(report["ok"], false, "{path}: {report}");
        assert!(!output.stdout.contains("the secret"), "{path} leaked");
    }
}

#[test]
fn the_workdir_itself_is_readable_and_writable() {
    let workdir = tempfile::tempdir().unwrap();
    let output = invoke(
        json!({"action": "write_file", "path": "a.txt", "content": "hello"}),
        None,
        workdir.path(),
    );
    assert_eq!(probe_report(&output)["ok"], true);
    assert_eq!(
        std::fs::read_to_string(workdir.path().join("a.txt")).unwrap(),
        "hello"
    );
}

#[test]
fn a_host_not_in_the_allow_list_receives_nothing() {
    let server = RecordingServer::start("hello from loopback");
    let other = RecordingServer::start("the allowed one");
    let dir = tempfile::tempdir().unwrap();
    // Only the other server is allowed: same host, different port.
    let manifest = capsule(
        dir.path(),
        &format!(
            "  network: {{ allow: [\"127.0.0.1:{}\"] }}",
            other.addr().port()
        ),
    );
    let output = invoke(
        json!({"action": "http_get", "url": format!("{}/probe", server.url())}),
        Some(&manifest),
        dir.path(),
    );
    assert_refused_uncontacted(&output, &server, "/probe");
}

/// The probe's request to `server` at `path` was refused as the network grant refuses (the
/// guest read `HttpRequestDenied`, the refusal was reported), and the server never reached.
fn assert_refused_uncontacted(output: &MurOutput, server: &RecordingServer, path: &str) {
    let report = probe_report(output);
    assert_eq!(report["ok"], false, "{report}");
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("HttpRequestDenied"),
        "{report}"
    );
    assert_eq!(server.connections(), 0);
    assert!(server.requests().is_empty());
    let refusals = &output.json()["refusals"];
    assert_eq!(refusals[0]["grant"], "network", "{refusals}");
    assert_eq!(
        refusals[0]["target"],
        format!("http://{}{path}", server.addr())
    );
}

#[test]
fn a_refused_request_with_a_body_reads_as_refused_not_as_a_broken_stream() {
    let server = RecordingServer::start("hello from loopback");
    let dir = tempfile::tempdir().unwrap();
    let manifest = capsule(dir.path(), "  network: { allow: [] }");
    // A body written after the request is handed over, as every HTTP client writes one (the
    // drivers' requests among them), and larger than any buffer between the guest and the host.
    let output = invoke(
        json!({"action": "http_post", "url": format!("{}/upload", server.url()), "bytes": 300_000}),
        Some(&manifest),
        dir.path(),
    );
    assert_refused_uncontacted(&output, &server, "/upload");
    // The same request, allowed, reaches the server whole.
    let allowed = capsule(
        dir.path(),
        &format!(
            "  network: {{ allow: [\"127.0.0.1:{}\"] }}",
            server.addr().port()
        ),
    );
    let output = invoke(
        json!({"action": "http_post", "url": format!("{}/upload", server.url()), "bytes": 300_000}),
        Some(&allowed),
        dir.path(),
    );
    assert_eq!(probe_report(&output)["ok"], true, "{}", output.stdout);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body.len(), 300_000);
}

#[test]
fn under_a_capsule_a_tool_holds_only_what_its_entry_grants_as_in_a_session() {
    let server = RecordingServer::start("hello from loopback");
    let dir = tempfile::tempdir().unwrap();
    // The capsule allows the server; the probe's entry narrows to reading, with no network.
    let manifest = dir.path().join("murmur.yaml");
    std::fs::write(
        &manifest,
        format!(
            "name: narrowed\nversion: \"0.1.0\"\nartifacts:\n  - name: probe\n    version: \"0.1.0\"\n    runtime: tool\n    path: {}\n    capabilities: {{ filesystem: {{ scope: read }}, network: {{ allow: [] }} }}\ncapabilities:\n  network: {{ allow: [\"127.0.0.1:{}\"] }}\n",
            probe_dir().display(),
            server.addr().port()
        ),
    )
    .unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let fetched = invoke(
        json!({"action": "http_get", "url": format!("{}/narrowed", server.url())}),
        Some(&manifest),
        workdir.path(),
    );
    assert_eq!(probe_report(&fetched)["ok"], false, "{fetched:#?}");
    assert_eq!(server.connections(), 0);
    let wrote = invoke(
        json!({"action": "write_file", "path": "a.txt", "content": "x"}),
        Some(&manifest),
        workdir.path(),
    );
    assert_eq!(probe_report(&wrote)["ok"], false, "{wrote:#?}");
    assert!(!workdir.path().join("a.txt").exists());
}

#[test]
fn no_allow_list_means_no_network() {
    let server = RecordingServer::start("hello");
    let workdir = tempfile::tempdir().unwrap();
    let output = invoke(
        json!({"action": "http_get", "url": server.url()}),
        None,
        workdir.path(),
    );
    assert_eq!(probe_report(&output)["ok"], false);
    assert_eq!(server.connections(), 0);
}

#[test]
fn an_allowed_host_is_reached() {
    let server = RecordingServer::start("hello from loopback");
    for rule in [
        format!("127.0.0.1:{}", server.addr().port()),
        format!("http://127.0.0.1:{}", server.addr().port()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let manifest = capsule(dir.path(), &format!("  network: {{ allow: [\"{rule}\"] }}"));
        let output = invoke(
            json!({"action": "http_get", "url": format!("{}/allowed", server.url())}),
            Some(&manifest),
            dir.path(),
        );
        let report = probe_report(&output);
        assert_eq!(report["ok"], true, "{rule}: {report}");
        assert_eq!(report["status"], 200);
        assert_eq!(report["body"], "hello from loopback");
        assert_eq!(output.json()["refusals"], json!([]));
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == "/allowed"));
}

#[test]
fn host_environment_variables_are_not_visible() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = capsule(dir.path(), "  env: { allow: [ LANG ] }");
    let env = [("SECRET_TOKEN", "hunter2"), ("LANG", "C.UTF-8")];
    let output = invoke_with_env(json!({"action": "env"}), Some(&manifest), dir.path(), &env);
    let vars = &probe_report(&output)["vars"];
    assert_eq!(vars.get("SECRET_TOKEN"), None, "{vars}");
    assert_eq!(vars["LANG"], "C.UTF-8");
    assert_eq!(vars["MURMUR_CAPSULE_NAME"], "sandbox-test");
    assert_eq!(vars["MURMUR_CAPSULE_VERSION"], "0.1.0");
    assert_eq!(vars["MURMUR_ARTIFACT_CONFIG"], r#"{"mode":"strict"}"#);
    assert!(!output.stdout.contains("hunter2"));

    // Without a capsule nothing of the host's is let through.
    let bare = invoke_with_env(json!({"action": "env"}), None, dir.path(), &env);
    let vars = probe_report(&bare)["vars"].clone();
    assert_eq!(vars.get("SECRET_TOKEN"), None);
    assert_eq!(vars.get("LANG"), None);
}

#[test]
fn a_spin_loop_is_stopped_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = capsule(dir.path(), "  limits: { deadline_seconds: 1 }");
    let started = Instant::now();
    let output = invoke(json!({"action": "spin"}), Some(&manifest), dir.path());
    let elapsed = started.elapsed();
    assert_eq!(output.code, 3, "{output:#?}");
    assert_eq!(error_code(&output), "E-RUN-002");
    assert!(
        output.stderr.contains("exceeded its deadline of 1s"),
        "{}",
        output.stderr
    );
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
}

#[test]
fn a_memory_balloon_is_stopped_by_the_limiter() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = capsule(dir.path(), "  limits: { memory_bytes: 33554432 }");
    let output = invoke(json!({"action": "balloon"}), Some(&manifest), dir.path());
    assert_eq!(output.code, 3, "{output:#?}");
    assert_eq!(error_code(&output), "E-RUN-004");
    assert!(
        output
            .stderr
            .contains("exceeded its memory limit of 33554432 bytes"),
        "{}",
        output.stderr
    );
}

#[test]
fn an_ordinary_trap_is_reported_as_a_trap() {
    let workdir = tempfile::tempdir().unwrap();
    let output = invoke(json!({"action": "trap"}), None, workdir.path());
    assert_eq!(output.code, 3, "{output:#?}");
    assert_eq!(error_code(&output), "E-RUN-005");
    assert!(output.stderr.contains("trapped"), "{}", output.stderr);
}

#[test]
fn a_trap_reports_what_the_component_last_said_whatever_blank_lines_follow() {
    let workdir = tempfile::tempdir().unwrap();
    let dying = "Error: the input had no rows\n    at main (tool.js:12:9)\n\n\n\n\n\n\n";
    let output = invoke(
        json!({"action": "trap", "stderr": dying}),
        None,
        workdir.path(),
    );
    assert_eq!(output.code, 3, "{output:#?}");
    let error = &output.json()["error"];
    assert_eq!(error["code"], "E-RUN-005");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Error: the input had no rows | "),
        "{message}"
    );
    assert!(message.contains("at main (tool.js:12:9)"), "{message}");
    assert!(
        !error["hint"].as_str().unwrap().contains("mur tool invoke"),
        "the hint does not send the author back to what they ran: {error}"
    );
}

#[test]
fn a_declared_read_only_path_is_readable_but_not_writable() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("guide.md"), "read me").unwrap();
    let manifest = capsule(dir.path(), "  filesystem: { read_only: [ ./docs ] }");
    let workdir = dir.path().join("work");
    let docs = docs.canonicalize().unwrap();

    let read = invoke(
        json!({"action": "read_file", "path": docs.join("guide.md")}),
        Some(&manifest),
        &workdir,
    );
    let report = probe_report(&read);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["content"], "read me");

    let write = invoke(
        json!({"action": "write_file", "path": docs.join("guide.md"), "content": "changed"}),
        Some(&manifest),
        &workdir,
    );
    assert_eq!(probe_report(&write)["ok"], false);
    assert_eq!(
        std::fs::read_to_string(docs.join("guide.md")).unwrap(),
        "read me"
    );

    // Without the grant the same path does not exist for the component.
    let ungranted = invoke(
        json!({"action": "read_file", "path": docs.join("guide.md")}),
        None,
        &workdir,
    );
    assert_eq!(probe_report(&ungranted)["ok"], false);
}
