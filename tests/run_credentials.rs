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
    let workdir = Path::new(report["workdir"].as_str().unwrap());
    for file in ["trace.jsonl", "MURMUR.md"] {
        let text = std::fs::read_to_string(workdir.join(file)).unwrap();
        assert!(!text.contains(KEY), "{file} holds the key");
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
