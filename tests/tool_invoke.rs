//! `mur tool invoke`: the tool contract as a tool author meets it: first-party tools round trip,
//! `data` over `data-path`, every `data-path` rule of the contract, reserved metadata, bad
//! input, and the compiled-component cache across processes.

use std::path::{Path, PathBuf};

use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::{Value, json};

fn artifact(name: &str) -> PathBuf {
    let first_party = repo_root().join("artifacts").join(name);
    if first_party.is_dir() {
        first_party
    } else {
        repo_root().join("tests/fixtures").join(name)
    }
}

fn invoke(tool: &str, input: &Value, workdir: &Path) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact(tool))
        .arg("--input")
        .arg(input.to_string())
        .arg("--workdir")
        .arg(workdir)
        .run()
}

fn passed(output: &MurOutput) -> Value {
    assert_eq!(output.code, 0, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "passed", "{printed:#}");
    printed
}

#[test]
fn write_file_then_read_file_round_trip_with_declared_effects() {
    let workdir = tempfile::tempdir().unwrap();
    let written = passed(&invoke(
        "write-file",
        &json!({"path": "notes/today.md", "content": "line one\nline two\n"}),
        workdir.path(),
    ));
    assert_eq!(written["state_effect"], "mutate");
    assert_eq!(written["resource_id"], "file:notes/today.md");
    assert_eq!(
        std::fs::read_to_string(workdir.path().join("notes/today.md")).unwrap(),
        "line one\nline two\n"
    );

    let read = passed(&invoke(
        "read-file",
        &json!({"path": "./notes/today.md"}),
        workdir.path(),
    ));
    assert_eq!(read["state_effect"], "read");
    assert_eq!(read["resource_id"], "file:notes/today.md");
    assert!(
        read["output"].as_str().unwrap().contains("line two"),
        "{read:#}"
    );
}

#[test]
fn reading_a_missing_file_is_a_failed_result_not_a_crash() {
    let workdir = tempfile::tempdir().unwrap();
    let output = invoke("read-file", &json!({"path": "absent.md"}), workdir.path());
    assert_eq!(output.code, 1, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "failed");
    assert!(
        printed["output"]
            .as_str()
            .unwrap_or_default()
            .contains("absent.md")
            || printed["result"]["summary"]
                .as_str()
                .unwrap_or_default()
                .contains("absent.md"),
        "{printed:#}"
    );
}

#[test]
fn a_large_read_comes_back_through_data_path() {
    let workdir = tempfile::tempdir().unwrap();
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
    let content = line.repeat(300 * 1024 / line.len());
    std::fs::write(workdir.path().join("big.txt"), &content).unwrap();
    let read = passed(&invoke(
        "read-file",
        &json!({"path": "big.txt"}),
        workdir.path(),
    ));
    assert_eq!(read["result"]["data"], Value::Null);
    assert!(
        read["result"]["data_path"].is_string(),
        "{}",
        read["result"]
    );
    assert_eq!(read["output"].as_str().unwrap(), content);
}

fn probe_result(result: Value, workdir: &Path) -> MurOutput {
    let mut input = result;
    input["action"] = json!("result");
    invoke("probe", &input, workdir)
}

#[test]
fn data_is_used_verbatim_and_data_path_is_then_never_opened() {
    let workdir = tempfile::tempdir().unwrap();
    let printed = passed(&probe_result(
        json!({"status": "passed", "data": "  verbatim\n", "data_path": "../../etc/passwd"}),
        workdir.path(),
    ));
    assert_eq!(printed["output"], "  verbatim\n");
}

#[test]
fn a_data_path_under_the_workdir_becomes_the_result() {
    let workdir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(workdir.path().join("out")).unwrap();
    std::fs::write(workdir.path().join("out/full.txt"), "the whole output").unwrap();
    for data_path in ["out/full.txt", "./out/full.txt", "out%2Ffull.txt"] {
        let printed = passed(&probe_result(
            json!({"status": "passed", "data_path": data_path}),
            workdir.path(),
        ));
        assert_eq!(printed["output"], "the whole output", "{data_path}");
    }
}

#[test]
fn every_refused_data_path_fails_the_call() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "the secret").unwrap();
    let workdir = outside.path().join("work");
    std::fs::create_dir_all(workdir.join("out")).unwrap();
    std::fs::write(workdir.join("out/ok.txt"), "fine").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), workdir.join("link.txt"))
        .unwrap();
    std::os::unix::fs::symlink(workdir.join("out"), workdir.join("dirlink")).unwrap();
    let big = std::fs::File::create(workdir.join("big.bin")).unwrap();
    big.set_len(10 * 1024 * 1024 + 1).unwrap();

    let absolute = outside.path().join("secret.txt").display().to_string();
    let cases = [
        (absolute.as_str(), "absolute"),
        ("../secret.txt", ".."),
        ("%2e%2e/secret.txt", ".."),
        ("out/%2E%2E/%2E%2E/secret.txt", ".."),
        ("link.txt", "symlink"),
        ("dirlink/ok.txt", "symlink"),
        ("missing.txt", "does not exist"),
        ("big.bin", "limit"),
    ];
    for (data_path, reason) in cases {
        let output = probe_result(
            json!({"status": "passed", "data_path": data_path}),
            &workdir,
        );
        assert_eq!(output.code, 3, "{data_path}: {output:#?}");
        let printed = output.json();
        assert_eq!(printed["error"]["code"], "E-RUN-006", "{data_path}");
        let message = printed["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{data_path}: {message}");
        assert!(!output.stdout.contains("the secret"));
    }
}

#[test]
fn metadata_is_kept_and_reserved_keys_take_their_first_tuple() {
    let workdir = tempfile::tempdir().unwrap();
    let printed = passed(&probe_result(
        json!({"status": "passed", "data": "x", "metadata": [
            ["state_effect", "read"], ["resource_id", "sym:Foo::bar"],
            ["continuation_id", "cont_1"], ["state_effect", "mutate"],
            ["resource_id", "sym:Other"], ["continuation_id", "cont_2"], ["custom", "kept"]
        ]}),
        workdir.path(),
    ));
    assert_eq!(printed["state_effect"], "read");
    assert_eq!(printed["resource_id"], "sym:Foo::bar");
    assert_eq!(printed["continuation_id"], "cont_1");
    assert_eq!(printed["result"]["metadata"].as_array().unwrap().len(), 7);
    assert_eq!(printed["result"]["metadata"][6], json!(["custom", "kept"]));
}

#[test]
fn a_failed_status_exits_1_and_still_prints_the_result() {
    let workdir = tempfile::tempdir().unwrap();
    let output = probe_result(
        json!({"status": "error", "summary": "upstream said no", "data": "details"}),
        workdir.path(),
    );
    assert_eq!(output.code, 1);
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "error");
    assert_eq!(printed["result"]["summary"], "upstream said no");
    assert_eq!(printed["output"], "details");
}

#[test]
fn streamed_chunks_reach_stderr_in_order() {
    let workdir = tempfile::tempdir().unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke"])
        .arg(artifact("probe"))
        .arg("--input")
        .arg(json!({"action": "emit", "chunks": ["alpha ", "beta ", "gamma"]}).to_string())
        .arg("--workdir")
        .arg(workdir.path())
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output.stderr.contains("alpha beta gamma"),
        "{}",
        output.stderr
    );
}

#[test]
fn input_that_is_not_json_is_refused_before_any_call() {
    let workdir = tempfile::tempdir().unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact("read-file"))
        .args(["--input", "{not json"])
        .arg("--workdir")
        .arg(workdir.path())
        .run();
    assert_eq!(output.code, 2, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], "E-RUN-009");
}

#[test]
fn input_the_input_schema_does_not_describe_is_refused_as_a_session_would() {
    let workdir = tempfile::tempdir().unwrap();
    std::fs::write(workdir.path().join("notes.md"), "kept").unwrap();
    for (input, said) in [
        (json!({}), "\"path\" is a required property"),
        (json!({"path": 7}), "/path"),
        (json!({"path": "notes.md", "limit": -1}), "/limit"),
        (json!({"path": "notes.md", "mode": "x"}), "mode"),
    ] {
        let output = invoke("read-file", &input, workdir.path());
        assert_eq!(output.code, 2, "{input}: {output:#?}");
        let error = &output.json()["error"];
        assert_eq!(error["code"], "E-RUN-009", "{input}: {output:#?}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("input_schema of `read-file`") && message.contains(said),
            "{input}: {message}"
        );
        assert!(
            output.json().get("result").is_none(),
            "nothing was called: {output:#?}"
        );
    }
    // No input is `{}`: refused too, since `path` is required.
    let none = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact("read-file"))
        .arg("--workdir")
        .arg(workdir.path())
        .run();
    assert_eq!(none.json()["error"]["code"], "E-RUN-009", "{none:#?}");
    passed(&invoke(
        "read-file",
        &json!({"path": "notes.md"}),
        workdir.path(),
    ));
}

#[test]
fn request_input_is_answered_by_reply_and_says_how_without_one() {
    let workdir = tempfile::tempdir().unwrap();
    let ask = json!({"action": "request_input", "prompt": "Which file?"});
    let answered = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact("probe"))
        .arg("--input")
        .arg(ask.to_string())
        .args(["--reply", "notes.md", "--workdir"])
        .arg(workdir.path())
        .run();
    let printed = passed(&answered);
    assert!(
        printed["output"]
            .as_str()
            .unwrap()
            .contains("\"reply\":\"notes.md\""),
        "{printed:#}"
    );
    assert_eq!(
        printed["inputs"],
        json!([{"prompt": "Which file?", "reply": "notes.md"}])
    );
    // Without --reply the call fails as outside an A2A task, saying how to answer it here.
    let unanswered = invoke("probe", &ask, workdir.path());
    assert_eq!(unanswered.code, 3, "{unanswered:#?}");
    let error = &unanswered.json()["error"];
    assert_eq!(error["code"], "E-RUN-005");
    assert!(
        error["message"].as_str().unwrap().contains("--reply TEXT"),
        "{error}"
    );
}

#[test]
fn a_missing_component_without_a_build_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: ghost\nversion: \"0.1.0\"\nruntime: tool\ndescription: has no component\ninput_schema: { type: object }\n",
    )
    .unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 1, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["error"]["code"], "E-RUN-008");
    assert!(
        printed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("component.wasm")
    );
}

#[test]
fn a_file_that_is_not_a_component_fails_to_load_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: bogus\nversion: \"0.1.0\"\nruntime: tool\ndescription: not wasm\ninput_schema: { type: object }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("component.wasm"), b"\0asm but not really").unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 3, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], "E-RUN-001");
}

#[test]
fn a_second_process_loads_the_compiled_component_from_the_cache() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let run = || {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home.path())
            .args(["tool", "invoke", "--json"])
            .arg(artifact("read-file"))
            .args(["--input", r#"{"path": "x"}"#])
            .arg("--workdir")
            .arg(workdir.path())
            .run()
    };
    let first = run().json();
    let second = run().json();
    assert_eq!(first["component"]["cache"], "compiled", "{first:#}");
    assert_eq!(second["component"]["cache"], "hit", "{second:#}");
    assert_eq!(first["component"]["sha256"], second["component"]["sha256"]);
    let entries = std::fs::read_dir(home.path().join("cache/components"))
        .unwrap()
        .count();
    assert_eq!(entries, 1);
}

#[test]
fn an_artifact_that_is_not_a_tool_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: watcher\nversion: \"0.1.0\"\nruntime: hook\ndescription: a hook\nbinding: on-session-end\n",
    )
    .unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(dir.path())
        .run();
    assert_eq!(output.code, 2, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["error"]["code"], "E-RUN-010");
    assert!(
        printed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`watcher` is a hook")
    );
}
