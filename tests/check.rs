//! `mur check`: what a user sees for a good manifest, a broken one, a capsule whose local hook
//! artifact breaks the hook contract, and the `--json` form scripts read. (Each diagnostic code
//! has its own test in the manifest crate; these prove the command presents them.)

use std::path::Path;

use murmur_testkit::{Mur, MurOutput, repo_root};

fn check(path: &Path, json: bool) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur")).arg("check");
    if json {
        mur = mur.arg("--json");
    }
    mur.arg(path).run()
}

fn write(dir: &Path, relative: &str, text: &str) -> std::path::PathBuf {
    let file = dir.join(relative);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn the_example_capsule_is_clean() {
    // With its key set, as `mur run` against the real API needs it.
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("ANTHROPIC_API_KEY", "sk-ant-check")
        .arg("check")
        .arg(repo_root().join("examples/hello"))
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output.stdout.trim_end().ends_with(": ok"),
        "{}",
        output.stdout
    );
    assert_eq!(output.stderr, "");
}

#[test]
fn first_party_artifacts_are_clean() {
    for artifact in [
        "artifacts/read-file",
        "artifacts/write-file",
        "tests/fixtures/probe",
    ] {
        let output = check(&repo_root().join(artifact), false);
        assert_eq!(output.code, 0, "{artifact}: {output:#?}");
    }
}

const BROKEN: &str = r#"name: broken
version: "1.0"
artifacts:
  - name: driver-anthropic
    version: "1.0.0"
    runtime: driver
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  alternates:
    - { name: fast, model: claude-haiku-4-5, driver: driver-x }
capabilities:
  network: { allow: [ "ftp://example.com" ] }
colour: blue
"#;

#[test]
fn a_broken_capsule_lists_every_problem_with_file_line_and_hint() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "murmur.yaml", BROKEN);
    let output = check(&file, false);
    assert_eq!(output.code, 1, "{output:#?}");
    let stderr = &output.stderr;
    for (code, line) in [("E-MAN-006", 2), ("E-MAN-009", 11), ("E-CAP-001", 13)] {
        let at = stderr
            .find(&format!("error[{code}]"))
            .unwrap_or_else(|| panic!("{code} missing:\n{stderr}"));
        let block = &stderr[at..];
        let block = &block[..block.find("\n\n").unwrap_or(block.len())];
        assert!(
            block.contains(&format!("--> {}:{line}:", file.display())),
            "{code} not at line {line}:\n{block}"
        );
        assert!(block.contains("  hint: "), "{code} has no hint:\n{block}");
    }
    assert!(stderr.contains("warning[W-MAN-013]"), "{stderr}");
    assert!(
        output.stdout.contains("3 errors, 1 warning"),
        "{}",
        output.stdout
    );
}

#[test]
fn json_output_carries_the_same_diagnostics_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "murmur.yaml", BROKEN);
    let output = check(&file, true);
    assert_eq!(output.code, 1);
    let report = output.json();
    assert_eq!(report["kind"], serde_json::Value::Null);
    assert_eq!(report["errors"], 3);
    assert_eq!(report["warnings"], 1);
    let alternate = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "E-MAN-009")
        .expect("E-MAN-009");
    assert_eq!(alternate["severity"], "error");
    assert_eq!(alternate["line"], 11);
    assert!(alternate["message"].as_str().unwrap().contains("driver-x"));
    assert!(
        alternate["hint"]
            .as_str()
            .unwrap()
            .contains("driver-anthropic")
    );
}

#[test]
fn a_local_hook_whose_policy_its_binding_cannot_honor_is_reported_against_its_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let capsule = write(
        dir.path(),
        "murmur.yaml",
        "name: watched\nversion: \"0.1.0\"\nartifacts:\n  - { name: gate, version: \"0.1.0\", runtime: hook, path: ./hooks/gate }\n",
    );
    let hook = write(
        dir.path(),
        "hooks/gate/murmur.yaml",
        "name: gate\nversion: \"0.1.0\"\nruntime: hook\ndescription: a gate\nbinding: on-stage\ncommit_policy: reopen-task\n",
    );
    let output = check(&capsule, true);
    assert_eq!(output.code, 1, "{output:#?}");
    let report = output.json();
    let diagnostic = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "E-HOOK-001")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(diagnostic["file"], hook.display().to_string());
    let message = diagnostic["message"].as_str().unwrap();
    for named in ["on-stage", "reopen-task", "write-manifests"] {
        assert!(message.contains(named), "{message}");
    }
}

#[test]
fn warnings_alone_do_not_fail_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "murmur.yaml",
        "name: tidy\nversion: \"0.1.0\"\nlifecycle: { task_acceptance: single, mood: calm }\n",
    );
    let output = check(&file, false);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(output.stderr.contains("warning[W-MAN-013]"));
    assert!(output.stdout.contains("0 errors, 1 warning"));
}

#[test]
fn an_unset_variable_is_named_and_a_dotenv_beside_the_manifest_fills_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "murmur.yaml",
        "name: \"${CAPSULE_NAME}\"\nversion: \"0.1.0\"\n",
    );
    let output = check(&file, false);
    assert_eq!(output.code, 1);
    assert!(
        output.stderr.contains("error[E-MAN-012]"),
        "{}",
        output.stderr
    );
    assert!(output.stderr.contains("CAPSULE_NAME"));

    write(dir.path(), ".env", "CAPSULE_NAME=from-dotenv\n");
    assert_eq!(check(&file, false).code, 0);
}

/// A capsule whose primary driver is keyed by `${PRIMARY_KEY}` and whose alternate's driver by
/// `${ALT_KEY}`.
const KEYED: &str = r#"name: keyed
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    gateway: { endpoint: "https://api.anthropic.com", api_key: "${PRIMARY_KEY}" }
  - name: driver-openai-chat
    version: "0.1.0"
    runtime: driver
    gateway: { endpoint: "https://api.openai.com", api_key: "${ALT_KEY}" }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  alternates:
    - { name: fast, model: gpt-5-mini, driver: driver-openai-chat }
"#;

#[test]
fn a_door_or_peer_credential_set_nowhere_is_a_warning_naming_what_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "murmur.yaml",
        &format!(
            "{KEYED}capabilities:\n  network: {{ allow: [ \"http://127.0.0.1:9000\" ] }}\ndoor:\n  auth:\n    - {{ principal: ops, bearer: \"${{OPS_TOKEN}}\" }}\npeers:\n  - {{ url: \"http://127.0.0.1:9000\", api_key: \"${{PEER_KEY}}\" }}\n"
        ),
    );
    let check = |extra: &[(&str, &str)]| {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home.path())
            .env("PRIMARY_KEY", "sk-1")
            .env("ALT_KEY", "sk-2");
        for (name, value) in extra {
            mur = mur.env(name, value);
        }
        mur.args(["check", "--json"]).arg(&file).run()
    };
    let output = check(&[]);
    assert_eq!(output.code, 0, "warnings only: {output:#?}");
    let report: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    let warnings: Vec<&serde_json::Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "W-A2A-012")
        .collect();
    assert_eq!(warnings.len(), 2, "{report:#}");
    let door = warnings[0]["message"].as_str().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_eq!(warnings[0]["line"], line_of("${OPS_TOKEN}"), "{door}");
    assert_eq!(warnings[1]["line"], line_of("${PEER_KEY}"));
    assert!(
        door.contains("${OPS_TOKEN}") && door.contains("door principal `ops`"),
        "{door}"
    );
    assert!(door.contains("`mur run --serve` will not start"), "{door}");
    assert!(
        warnings[1]["message"]
            .as_str()
            .unwrap()
            .contains("${PEER_KEY}")
    );
    // Set: nothing to say.
    let output = check(&[("OPS_TOKEN", "t"), ("PEER_KEY", "k")]);
    let report: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(report["warnings"], 0, "{report:#}");
}

#[test]
fn a_credential_set_nowhere_is_named_with_every_place_looked() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "murmur.yaml", KEYED);
    let check_in = |home: &Path| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home)
            .args(["check", "--json"])
            .arg(&file)
            .run()
    };
    let output = check_in(home.path());
    assert_eq!(output.code, 1, "{output:#?}");
    let report: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    let diagnostics = report["diagnostics"].as_array().unwrap();
    let of = |code: &str| -> Vec<&serde_json::Value> {
        diagnostics.iter().filter(|d| d["code"] == code).collect()
    };
    // The primary's key stops a run: an error naming it and where it was looked for.
    let primary = of("E-MAN-012");
    assert_eq!(primary.len(), 1, "{diagnostics:#?}");
    let message = primary[0]["message"].as_str().unwrap();
    assert!(message.contains("${PRIMARY_KEY}"), "{message}");
    assert!(
        message.contains("artifacts[0].gateway.api_key"),
        "{message}"
    );
    assert!(message.contains("the environment"), "{message}");
    assert!(
        message.contains(&dir.path().join(".env").display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&home.path().join("credentials.yaml").display().to_string()),
        "{message}"
    );
    // Placed like every manifest diagnostic: the file, and the line of the value.
    let line_of = |needle: &str| KEYED.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert_eq!(primary[0]["line"], line_of("${PRIMARY_KEY}"), "{message}");
    assert!(primary[0]["column"].as_u64().unwrap() > 1);
    assert_eq!(primary[0]["file"], file.display().to_string());
    // The alternate's only stages that choice unavailable: a warning.
    let alternate = of("W-RUN-003");
    assert_eq!(alternate.len(), 1, "{diagnostics:#?}");
    assert_eq!(alternate[0]["line"], line_of("${ALT_KEY}"));
    assert!(
        alternate[0]["message"]
            .as_str()
            .unwrap()
            .contains("${ALT_KEY}")
    );

    // Found in the .env and the credentials file: nothing to report.
    write(dir.path(), ".env", "PRIMARY_KEY=sk-from-dotenv\n");
    let credentials = home.path().join("credentials.yaml");
    std::fs::write(&credentials, "ALT_KEY: sk-from-credentials\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = check_in(home.path());
    assert_eq!(output.code, 0, "{output:#?}");
    let report: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(report["warnings"], 0, "{report:#}");

    // A name injected at run time (`control.secrets`) is not looked for.
    std::fs::remove_file(dir.path().join(".env")).unwrap();
    write(
        dir.path(),
        "murmur.yaml",
        &format!("{KEYED}control:\n  secrets: [PRIMARY_KEY]\n"),
    );
    let output = check_in(home.path());
    assert_eq!(output.code, 0, "{output:#?}");
}

#[test]
fn a_missing_manifest_is_a_diagnostic_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let output = check(dir.path(), false);
    assert_eq!(output.code, 1, "{output:#?}");
    assert!(
        output.stderr.contains("error[E-MAN-001]"),
        "{}",
        output.stderr
    );
}

/// A capsule with a tool, a hook and a driver; `hook_capabilities` goes in the hook's entry.
fn granted_capsule(dir: &Path, hook_capabilities: &str) -> std::path::PathBuf {
    write(
        dir,
        "murmur.yaml",
        &format!(
            r#"name: granted
version: "0.1.0"
artifacts:
  - {{ name: driver-x, version: "0.1.0", runtime: driver, gateway: {{ endpoint: "https://gw.example" }} }}
  - {{ name: read-file, version: "0.1.0", runtime: tool }}
  - {{ name: watcher, version: "0.1.0", runtime: hook, capabilities: {hook_capabilities} }}
capabilities:
  network: {{ allow: [ "https://api.example.com" ] }}
  env: {{ allow: [ LANG ] }}
inference:
  model: m
  driver: {{ artifact: driver-x }}
"#
        ),
    )
}

#[test]
fn json_output_lists_what_each_artifact_holds() {
    let dir = tempfile::tempdir().unwrap();
    let file = granted_capsule(dir.path(), "{ filesystem: { scope: read, path: logs } }");
    let output = check(&file, true);
    assert_eq!(output.code, 0, "{output:#?}");
    let grants = output.json()["grants"].clone();
    let of = |name: &str| {
        grants
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("{grants:#}"))
            .clone()
    };
    let tool = of("read-file");
    assert_eq!(tool["runtime"], "tool");
    assert_eq!(tool["filesystem"]["scope"], "write");
    assert_eq!(tool["filesystem"]["path"], serde_json::Value::Null);
    assert_eq!(
        tool["network"]["allow"],
        serde_json::json!(["https://api.example.com"])
    );
    assert_eq!(tool["env"], serde_json::json!(["LANG"]));
    let hook = of("watcher");
    assert_eq!(hook["filesystem"]["scope"], "read");
    assert_eq!(hook["filesystem"]["path"], "logs");
    assert_eq!(hook["network"]["allow"], serde_json::json!([]));
    let driver = of("driver-x");
    assert_eq!(driver["filesystem"]["scope"], "none");
    assert_eq!(driver["network"]["gateway"], "https://gw.example");
    assert_eq!(driver["network"]["allow"], serde_json::json!([]));
}

#[test]
fn an_entry_wider_than_the_capsule_is_reported_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    for (capabilities, code, gist) in [
        (
            "{ network: { allow: [ \"https://evil.example\" ] } }",
            "E-CAP-009",
            "`https://evil.example`",
        ),
        (
            "{ filesystem: { scope: write, path: ../../etc } }",
            "E-CAP-010",
            "`../../etc`",
        ),
    ] {
        let file = granted_capsule(dir.path(), capabilities);
        let output = check(&file, false);
        assert_eq!(output.code, 1, "{output:#?}");
        assert!(
            output.stderr.contains(&format!("error[{code}]")),
            "{}",
            output.stderr
        );
        assert!(
            output.stderr.contains("artifact `watcher`"),
            "{}",
            output.stderr
        );
        assert!(output.stderr.contains(gist), "{}", output.stderr);
        assert!(output.stderr.contains("hint:"), "{}", output.stderr);
    }
}

/// MCP servers are checked like every entry: a clean pair passes; a header credential set
/// nowhere is named with where it was looked for; a run whose server's program is not there
/// stops before the model is called, naming the server.
#[test]
fn mcp_servers_are_checked_and_a_run_names_a_server_that_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "murmur.yaml",
        &format!(
            r#"name: notes-user
version: "0.1.0"
artifacts:
  - {{ name: driver-anthropic, version: "0.1.0", runtime: driver, path: "{}", gateway: {{ endpoint: "http://127.0.0.1:9", api_key: "${{ANT_KEY}}" }} }}
  - {{ name: notes, runtime: mcp, server: {{ command: notes-server }} }}
  - {{ name: remote, runtime: mcp, server: {{ url: "http://127.0.0.1:8123/mcp", headers: {{ Authorization: "Bearer ${{NOTES_TOKEN}}" }} }} }}
inference:
  model: claude-sonnet-4-5
  driver: {{ artifact: driver-anthropic }}
capabilities:
  network: {{ allow: [ "http://127.0.0.1:8123" ] }}
"#,
            repo_root().join("artifacts/driver-anthropic").display()
        ),
    );
    let home = tempfile::tempdir().unwrap();
    let checked = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .env("NOTES_TOKEN", "t0ken")
        .env("ANT_KEY", "k")
        .arg("check")
        .arg(&file)
        .run();
    assert_eq!(checked.code, 0, "{checked:#?}");

    let unset = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .env("ANT_KEY", "k")
        .arg("check")
        .arg(&file)
        .run();
    assert_ne!(unset.code, 0, "{unset:#?}");
    assert!(
        unset.stderr.contains("E-MAN-012") || unset.stdout.contains("E-MAN-012"),
        "{unset:#?}"
    );
    let said = format!("{}{}", unset.stdout, unset.stderr);
    assert!(
        said.contains("${NOTES_TOKEN}") && said.contains("MCP server `remote`"),
        "{said}"
    );

    let run = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .env("NOTES_TOKEN", "t0ken")
        .env("ANT_KEY", "k")
        .args(["run", "--json", "--task", "go"])
        .arg(dir.path())
        .run();
    assert_ne!(run.code, 0, "{run:#?}");
    let error = &run.json()["error"];
    assert_eq!(error["code"], "E-MCP-001", "{run:#?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`notes`") && message.contains("`notes-server` is not an executable"),
        "{message}"
    );
}

/// The component file is read (not compiled): missing, not WebAssembly, a core module, or a
/// component of another world is said, pointing at `component:`, and a good one passes. A
/// capsule's local artifact is checked the same way, against its own file.
#[test]
fn a_component_that_is_missing_not_a_component_or_of_another_world_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = |build: &str| {
        format!(
            "name: checked\nversion: \"0.1.0\"\nruntime: tool\ndescription: d\ncomponent: tool.wasm\ninput_schema: {{ type: object }}\n{build}"
        )
    };
    let artifact = dir.path().join("checked");
    write(&artifact, "murmur.yaml", &manifest(""));
    let component = artifact.join("tool.wasm");
    let said = |expect_code: i32, expect: &[&str]| {
        let output = check(&artifact, false);
        assert_eq!(output.code, expect_code, "{output:#?}");
        for text in expect {
            assert!(output.stderr.contains(text), "{text}: {}", output.stderr);
        }
        output
    };
    let output = said(
        1,
        &[
            "error[E-MAN-023]",
            "tool.wasm does not exist",
            "declares no `build:`",
        ],
    );
    assert!(
        output.stderr.contains("murmur.yaml:5:"),
        "{}",
        output.stderr
    );
    write(
        &artifact,
        "murmur.yaml",
        &manifest("build: { command: [make] }\n"),
    );
    said(0, &["warning[W-MAN-030]", "not built yet"]);
    std::fs::write(&component, "not wasm").unwrap();
    said(1, &["error[E-MAN-031]", "is not WebAssembly"]);
    std::fs::write(&component, b"\0asm\x01\0\0\0").unwrap();
    said(
        1,
        &[
            "error[E-MAN-031]",
            "core WebAssembly module, not a component",
        ],
    );
    // A hook's component declared as a tool.
    let hook = repo_root().join("tests/fixtures/hook-noop/component.wasm");
    std::fs::copy(&hook, &component).unwrap();
    said(
        1,
        &[
            "does not export `murmur:tool/run@0.1.0`",
            "murmur:hook/lifecycle@0.1.0",
        ],
    );
    let probe = repo_root().join("tests/fixtures/probe/component.wasm");
    std::fs::copy(&probe, &component).unwrap();
    let output = said(0, &[]);
    assert!(output.stdout.trim_end().ends_with(": ok"), "{output:#?}");

    // In a capsule: reported against the artifact's own manifest.
    std::fs::write(&component, b"\0asm\x01\0\0\0").unwrap();
    let capsule = write(
        dir.path(),
        "murmur.yaml",
        "name: c\nversion: \"0.1.0\"\nartifacts:\n  - { name: checked, version: \"0.1.0\", runtime: tool, path: checked }\n",
    );
    let output = check(&capsule, true);
    assert_eq!(output.code, 1, "{output:#?}");
    let report = output.json();
    let found = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "E-MAN-031")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert!(
        found["file"]
            .as_str()
            .unwrap()
            .ends_with("checked/murmur.yaml"),
        "{found:#}"
    );
    assert_eq!(found["line"], 5);
}

/// Another Murmur runtime's artifact manifest spellings load, each with a warning saying what
/// it was read as.
#[test]
fn another_runtimes_artifact_spellings_load_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let artifact = dir.path().join("echo");
    write(
        &artifact,
        "murmur.yaml",
        "name: echo\nversion: 0.1.0\nruntime: wasm\nrequires_files: [echo-tool.wasm]\ninput: '{\"type\": \"object\"}'\n",
    );
    std::fs::copy(
        repo_root().join("tests/fixtures/probe/component.wasm"),
        artifact.join("echo-tool.wasm"),
    )
    .unwrap();
    let output = check(&artifact, true);
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    let warnings: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        warnings.iter().filter(|c| **c == "W-MAN-032").count(),
        4,
        "runtime, requires_files, input, JSON text: {report:#}"
    );
    assert_eq!(report["errors"], 0, "{report:#}");
    // And it runs as the tool it is.
    let invoked = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(&artifact)
        .args([
            "--input",
            r#"{"action": "result", "status": "passed", "data": "echoed"}"#,
        ])
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    assert_eq!(invoked.code, 0, "{invoked:#?}");
    assert_eq!(invoked.json()["output"], "echoed");
}

/// A `murmur.lock` or credentials file grown past its cap (8 MiB, 1 MiB) is refused with its
/// code, read no further than one byte past the cap (the files here are sparse: a reader of the
/// whole would still finish, but the answer names the cap, not a parse error).
#[test]
fn a_lock_or_credentials_file_past_its_cap_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "murmur.yaml", KEYED);
    let credentials = std::fs::File::create(home.path().join("credentials.yaml")).unwrap();
    credentials.set_len((1 << 20) + 1).unwrap();
    let checked = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .args(["check", "--json"])
        .arg(&file)
        .run();
    let report: serde_json::Value = serde_json::from_str(&checked.stdout).unwrap();
    let unusable: Vec<&serde_json::Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "E-RUN-019")
        .collect();
    assert_eq!(unusable.len(), 1, "{report:#}");
    assert!(
        unusable[0]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 1 MiB"),
        "{report:#}"
    );

    std::fs::remove_file(home.path().join("credentials.yaml")).unwrap();
    let lock = std::fs::File::create(dir.path().join("murmur.lock")).unwrap();
    lock.set_len((8 << 20) + 1).unwrap();
    let installed = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .args(["install", "--json", "--registry"])
        .arg(repo_root().join("target/registry"))
        .arg(dir.path())
        .run();
    assert_eq!(installed.code, 2, "{installed:#?}");
    let report = installed.json();
    assert_eq!(report["diagnostics"][0]["code"], "E-REG-008", "{report:#}");
    assert!(
        report["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 8 MiB"),
        "{report:#}"
    );
}

/// A capsule manifest written for the other Murmur runtime: `mur check` names each key it
/// read in this runtime's spelling (a `W-MAN-032` each, at its line), and the capsule checks
/// clean otherwise; the gateway key it mapped is looked for as any driver credential is.
#[test]
fn another_runtimes_capsule_spellings_are_each_named_with_what_they_were_read_as() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name: ported
version: "1.0.0"
artifacts:
  - { name: driver-anthropic, version: "0.1.0", runtime: driver }
inference:
  model: claude-sonnet-4-5
  driver: { artifact: driver-anthropic }
  endpoint: https://api.anthropic.com
  api_key: "${PORTED_KEY}"
network:
  internal_port: 8080
lifecycle:
  queue_depth: 4
"#;
    write(dir.path(), "murmur.yaml", text);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PORTED_KEY", "sk-ported")
        .args(["check", "--json"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    assert_eq!(report["errors"], 0, "{report:#}");
    let mapped: Vec<(u64, String)> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "W-MAN-032")
        .map(|d| {
            (
                d["line"].as_u64().unwrap(),
                d["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        (
            "endpoint:",
            "`inference.endpoint`",
            "`artifacts[0].gateway.endpoint`",
        ),
        (
            "api_key:",
            "`inference.api_key`",
            "`artifacts[0].gateway.api_key`",
        ),
        ("internal_port", "`network.internal_port`", "`door.port`"),
        (
            "queue_depth",
            "`lifecycle.queue_depth`",
            "`task_acceptance: queue`",
        ),
    ];
    assert_eq!(mapped.len(), expected.len(), "{report:#}");
    for ((line, message), (at, from, to)) in mapped.iter().zip(expected) {
        assert_eq!(*line as usize, line_of(at), "{message}");
        assert!(message.contains(from) && message.contains(to), "{message}");
    }

    // In words, each named with its line; unset, the mapped key is named where it was written.
    let plain = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .arg("check")
        .arg(dir.path())
        .run();
    assert_eq!(plain.code, 1, "{plain:#?}");
    let shown = format!("{}{}", plain.stdout, plain.stderr);
    for (at, from, _) in expected {
        assert!(
            shown.contains(&format!("murmur.yaml:{}:", line_of(at))) && shown.contains(from),
            "{at}: {shown}"
        );
    }
    let unset = shown
        .split("error[E-MAN-012]")
        .nth(1)
        .unwrap_or_else(|| panic!("no E-MAN-012: {shown}"));
    assert!(
        unset.contains(&format!("murmur.yaml:{}:", line_of("api_key:"))),
        "{shown}"
    );

    // Written both ways, the two are an error naming both.
    let both = text.replace(
        "runtime: driver }",
        "runtime: driver, gateway: { endpoint: \"https://gw.example\" } }",
    );
    write(dir.path(), "murmur.yaml", &both);
    let refused = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("PORTED_KEY", "sk-ported")
        .arg("check")
        .arg(dir.path())
        .run();
    assert_eq!(refused.code, 1, "{refused:#?}");
    let shown = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        shown.contains("error[E-MAN-018]: `inference.endpoint` and `artifacts[0].gateway`"),
        "{shown}"
    );
}
