//! Credentials never enter the sandbox: a driver's key is attached by the host to requests
//! bound for its gateway, as the driver's `upstream_auth` says. A probe driver that reads its
//! environment and scans its own memory finds no key, while the gateway receives it in the
//! header `upstream_auth` names.

use std::path::{Path, PathBuf};

use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::Value;

const KEY: &str = "sk-test-4f1c9a7e2b";

fn capsule(dir: &Path, endpoint: &str) -> PathBuf {
    let needle_hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
    let text = format!(
        r#"name: keyholder
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{PROBE_KEY}}" }}
inference:
  model: probe-model
  driver: {{ artifact: probe-driver, config: {{ needle_hex: "{needle_hex}" }} }}
  max_turns: 2
"#,
        driver = repo_root().join("tests/fixtures/probe-driver").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn run(capsule: &Path, workdir: &Path, env: &[(&str, &str)]) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--json", "--task", "report"])
        .arg(capsule.parent().unwrap())
        .arg("--workdir")
        .arg(workdir);
    for (name, value) in env {
        mur = mur.env(name, value);
    }
    mur.run()
}

#[test]
fn the_driver_never_holds_the_key_and_the_gateway_receives_it() {
    let gateway = RecordingServer::start("gateway says hi");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let output = run(&file, &dir.path().join("work"), &[("PROBE_KEY", KEY)]);
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    let result_path = report["tasks"][0]["result_path"].as_str().unwrap();
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(result_path).unwrap()).unwrap();

    // The gateway was reached, with the key in the header the driver's upstream_auth names.
    assert_eq!(seen["gateway"]["status"], 200, "{seen:#}");
    let requests = gateway.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .headers
            .iter()
            .any(|(name, value)| name == "x-api-key" && value == KEY),
        "{:?}",
        requests[0].headers
    );
    // Inside the sandbox: no key in the environment, none in memory.
    assert_eq!(seen["scan"]["ok"], true, "{seen:#}");
    assert_eq!(seen["scan"]["found"], false, "{seen:#}");
    assert!(seen["scan"]["memory_bytes"].as_u64().unwrap() > 0);
    for (name, value) in seen["env"].as_object().unwrap() {
        assert!(
            !value.as_str().unwrap().contains(KEY),
            "{name} holds the key"
        );
    }
    assert_eq!(seen["env"]["MURMUR_INFERENCE_ENDPOINT"], gateway.url());
    assert_eq!(seen["env"]["MURMUR_INFERENCE_MODEL"], "probe-model");
    assert_eq!(seen["env"]["MURMUR_INFERENCE_DRIVER"], "probe-driver");
    // Nor does the key reach the trace or the history.
    let record = Path::new(report["workdir"].as_str().unwrap());
    let workspace = Path::new(report["workspace"].as_str().unwrap());
    for file in [record.join("trace.jsonl"), workspace.join("MURMUR.md")] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(KEY), "{} holds the key", file.display());
    }
}

#[test]
fn the_driver_reaches_only_its_gateway() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    // The gateway is on one port; the driver probes `{endpoint}/probe`, so point the endpoint at
    // a closed-off origin and check a second server on another port is never contacted.
    let elsewhere = RecordingServer::start("elsewhere");
    let file = capsule(dir.path(), &gateway.url());
    let output = run(&file, &dir.path().join("work"), &[("PROBE_KEY", KEY)]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert_eq!(elsewhere.connections(), 0);
    assert_eq!(gateway.requests().len(), 1);
}

#[test]
fn an_unset_credential_stops_staging_by_name() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let output = run(&file, &dir.path().join("work"), &[]);
    assert_eq!(output.code, 2, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["error"]["code"], "E-RUN-012");
    assert!(
        printed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PROBE_KEY")
    );
    assert_eq!(gateway.connections(), 0);
}

#[test]
fn the_key_may_come_from_the_dotenv_beside_the_manifest() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    std::fs::write(dir.path().join(".env"), format!("PROBE_KEY={KEY}\n")).unwrap();
    let output = run(&file, &dir.path().join("work"), &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        gateway.requests()[0]
            .headers
            .iter()
            .any(|(name, value)| name == "x-api-key" && value == KEY)
    );
}

/// A murmur home of its own, sharing the suite's compiled-component cache, with
/// `credentials.yaml` holding `text` under `mode`.
fn home_with_credentials(text: &str, mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let cache = murmur_testkit::shared_home().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, home.path().join("cache")).unwrap();
    let file = home.path().join("credentials.yaml");
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    home
}

fn run_with_home(capsule: &Path, workdir: &Path, home: &Path, env: &[(&str, &str)]) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home)
        .args(["run", "--json", "--task", "report"])
        .arg(capsule.parent().unwrap())
        .arg("--workdir")
        .arg(workdir);
    for (name, value) in env {
        mur = mur.env(name, value);
    }
    mur.run()
}

fn gateway_saw_key(gateway: &RecordingServer, key: &str) -> bool {
    gateway.requests()[0]
        .headers
        .iter()
        .any(|(name, value)| name == "x-api-key" && value == key)
}

#[test]
fn the_key_may_come_from_the_users_credentials_file() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let home = home_with_credentials(
        &format!("# mine\nOTHER_KEY: sk-other\nPROBE_KEY: \"{KEY}\"\n"),
        0o600,
    );
    let output = run_with_home(&file, &dir.path().join("work"), home.path(), &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(!output.stderr.contains("W-RUN-020"), "{}", output.stderr);
    assert!(gateway_saw_key(&gateway, KEY));
    let report = output.json();
    let workdir = Path::new(report["workdir"].as_str().unwrap());
    let trace = std::fs::read_to_string(workdir.join("trace.jsonl")).unwrap();
    let start: Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(start["credential_source"], "config", "{start:#}");
    assert!(!trace.contains(KEY), "the trace holds the key");
}

#[test]
fn the_environment_comes_before_the_credentials_file() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let home = home_with_credentials("PROBE_KEY: sk-from-the-file\n", 0o600);
    let output = run_with_home(
        &file,
        &dir.path().join("work"),
        home.path(),
        &[("PROBE_KEY", KEY)],
    );
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(gateway_saw_key(&gateway, KEY));
}

#[test]
fn w_run_020_a_credentials_file_others_may_read_is_used_with_a_warning() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let home = home_with_credentials(&format!("PROBE_KEY: {KEY}\n"), 0o644);
    let output = run_with_home(&file, &dir.path().join("work"), home.path(), &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output.stderr.contains("warning[W-RUN-020]"),
        "{}",
        output.stderr
    );
    assert!(output.stderr.contains("mode 644"), "{}", output.stderr);
    let credentials = home.path().join("credentials.yaml");
    assert!(
        output
            .stderr
            .contains(&format!("chmod 600 {}", credentials.display())),
        "{}",
        output.stderr
    );
    assert!(!output.stderr.contains(KEY));
    assert!(gateway_saw_key(&gateway, KEY));
}

#[test]
fn e_run_019_a_malformed_credentials_file_is_refused_at_its_line() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), &gateway.url());
    let home = home_with_credentials(&format!("PROBE_KEY: {KEY}\nPORT_KEY: 8080\n"), 0o600);
    let output = run_with_home(&file, &dir.path().join("work"), home.path(), &[]);
    assert_eq!(output.code, 2, "{output:#?}");
    let printed = output.json();
    let diagnostic = &printed["diagnostics"][0];
    assert_eq!(diagnostic["code"], "E-RUN-019", "{printed:#}");
    assert_eq!(diagnostic["line"], 2, "{printed:#}");
    assert_eq!(
        diagnostic["file"],
        home.path().join("credentials.yaml").display().to_string()
    );
    assert!(diagnostic["message"].as_str().unwrap().contains("PORT_KEY"));
    assert!(diagnostic["hint"].as_str().unwrap().contains("quote"));
    assert!(!output.stdout.contains(KEY) && !output.stderr.contains(KEY));
    assert_eq!(gateway.connections(), 0);

    let home = home_with_credentials("PROBE_KEY: [unclosed\n", 0o600);
    let output = run_with_home(&file, &dir.path().join("work"), home.path(), &[]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert_eq!(output.json()["diagnostics"][0]["code"], "E-RUN-019");
}

#[test]
fn e_run_019_an_unreadable_credentials_file_names_it() {
    let gateway = RecordingServer::start("gateway");
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &gateway.url());
    let home = tempfile::tempdir().unwrap();
    // A directory where the file should be: unreadable as a file, even for root.
    std::fs::create_dir(home.path().join("credentials.yaml")).unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .args(["run", "--task", "report"])
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(
        output.stderr.contains("error[E-RUN-019]"),
        "{}",
        output.stderr
    );
    assert!(
        output.stderr.contains("credentials.yaml"),
        "{}",
        output.stderr
    );
    assert_eq!(gateway.connections(), 0);
}
