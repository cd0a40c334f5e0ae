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

/// A tool or driver built for another Murmur runtime streams through `murmur:stream/events`
/// instead of `murmur:text/chunks`: it loads in both worlds and its chunks stream the same (its
/// tool-call progress signals are accepted and not shown).
#[test]
fn chunks_through_another_runtimes_streaming_interface_stream_the_same() {
    let workdir = tempfile::tempdir().unwrap();
    for fixture in ["probe", "probe-driver"] {
        let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .args(["tool", "invoke"])
            .arg(artifact(fixture))
            .arg("--input")
            .arg(
                json!({"action": "emit_events", "chunks": ["alpha ", "beta"], "thinking": ["hm"]})
                    .to_string(),
            )
            .arg("--workdir")
            .arg(workdir.path())
            .run();
        assert_eq!(output.code, 0, "{fixture}: {output:#?}");
        assert!(
            output.stderr.contains("alpha beta[thinking] hm"),
            "{fixture}: {}",
            output.stderr
        );
    }
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
    assert_eq!(error["code"], "E-RUN-035");
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

/// The compile cache says when it compiles, keeps itself under its bound (least recently used
/// out, never the entry just stored), and `mur cache list|prune` show and trim it, touching
/// nothing that is not an entry.
#[test]
fn the_compile_cache_is_bounded_listed_and_pruned() {
    let home = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let mur = |max_mb: Option<&str>| {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", home.path());
        if let Some(max) = max_mb {
            mur = mur.env("MURMUR_CACHE_MAX_MB", max);
        }
        mur
    };
    let invoke = |tool: &str, max_mb: Option<&str>| {
        let input = if tool == "write-file" {
            r#"{"path": "x", "content": "y"}"#
        } else {
            r#"{"path": "x"}"#
        };
        mur(max_mb)
            .args(["tool", "invoke", "--json"])
            .arg(artifact(tool))
            .args(["--input", input])
            .arg("--workdir")
            .arg(workdir.path())
            .run()
    };
    let list = || {
        let out = mur(None).args(["cache", "list", "--json"]).run();
        assert_eq!(out.code, 0, "{out:?}");
        out.json()
    };
    let first = invoke("read-file", None);
    assert!(
        first.stderr.contains("compiling `read-file`")
            && first.stderr.contains("compiled `read-file` in"),
        "{}",
        first.stderr
    );
    let again = invoke("read-file", None);
    assert!(!again.stderr.contains("compiling"), "{}", again.stderr);
    invoke("write-file", None);
    let listed = list();
    assert_eq!(listed["entries"].as_array().unwrap().len(), 2, "{listed:#}");
    assert_eq!(listed["limit_bytes"], 1u64 << 30);
    assert!(
        listed["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["current"] == true)
    );
    let total: u64 = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(listed["total_bytes"], total);

    // A bound of 0: storing one entry evicts every other, never the one just stored.
    let probe = mur(Some("0"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact("probe"))
        .args(["--input", r#"{"action": "env"}"#])
        .arg("--workdir")
        .arg(workdir.path())
        .run();
    assert_eq!(probe.code, 0, "{probe:?}");
    let listed = list();
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed:#}");
    assert_eq!(
        entries[0]["component_sha256"],
        probe.json()["component"]["sha256"]
    );

    // An entry another mur compiled is stale: listed so, pruned first; other files stay.
    let dir = home.path().join("cache/components");
    std::fs::write(
        dir.join(format!("{}-ffffffffffffffff.cwasm", "ab".repeat(32))),
        "old",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let listed = list();
    assert!(
        listed["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["current"] == false),
        "{listed:#}"
    );
    let human = mur(None).args(["cache", "list"]).run();
    assert!(human.stdout.contains("stale"), "{}", human.stdout);
    let pruned = mur(None).args(["cache", "prune", "--json"]).run();
    assert_eq!(pruned.code, 0, "{pruned:?}");
    let pruned = pruned.json();
    assert_eq!(pruned["removed"].as_array().unwrap().len(), 1, "{pruned:#}");
    assert_eq!(pruned["removed"][0]["current"], false);
    assert_eq!(list()["entries"].as_array().unwrap().len(), 1);
    let all = mur(None).args(["cache", "prune", "--all"]).run();
    assert!(all.stdout.contains("removed 1 entry"), "{}", all.stdout);
    assert!(list()["entries"].as_array().unwrap().is_empty());
    assert!(dir.join("notes.txt").exists());

    // A bound that is not a number is refused, naming the variable.
    let bad = invoke("read-file", Some("lots"));
    assert_eq!(bad.code, 3, "{bad:?}");
    assert!(bad.stderr.contains("MURMUR_CACHE_MAX_MB"), "{}", bad.stderr);
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

/// A driver invoked with `--capsule` is called as a session of that capsule would call it: to
/// its gateway (told by `MURMUR_INFERENCE_ENDPOINT`), the credential attached outside the
/// sandbox, the model of its choice; without `--capsule` it has no network at all.
#[test]
fn a_driver_reaches_its_capsules_gateway_with_the_credential_only_under_capsule() {
    use murmur_testkit::emulator::{Emulator, Script};
    const KEY: &str = "sk-emulator-invoke-driver";
    let emulator = Emulator::builder(
        Script::from_yaml("turns:\n  - reply: { text: \"Hello from the gateway.\" }\n").unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!(
            r#"name: invoker
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
inference:
  model: claude-test
  driver: {{ artifact: driver-anthropic }}
"#,
            driver = artifact("driver-anthropic").display(),
            endpoint = emulator.url(),
        ),
    )
    .unwrap();
    let request = json!({
        "model": "",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi."}]}],
        "tools": [],
        "prompt_cache_key": "invoke",
    });
    let call = |capsule: bool| {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .args(["tool", "invoke", "--json"])
            .arg(artifact("driver-anthropic"))
            .arg("--input")
            .arg(request.to_string())
            .arg("--workdir")
            .arg(dir.path().join("work"));
        if capsule {
            mur = mur.arg("--capsule").arg(dir.path());
        }
        mur.run()
    };
    let answered = passed(&call(true));
    let response: Value = serde_json::from_str(answered["output"].as_str().unwrap()).unwrap();
    assert_eq!(response["content"][0]["text"], "Hello from the gateway.");
    let requests = emulator.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let header = |name: &str| {
        requests[0]
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("x-api-key").as_deref(), Some(KEY));
    // The request names no model: the driver took its choice's.
    assert_eq!(requests[0].body["model"], "claude-test");
    // No key in anything the driver could see or print.
    assert!(!answered.to_string().contains(KEY));

    // Without the capsule there is no gateway: nothing is sent.
    let alone = call(false);
    assert_ne!(alone.code, 0, "{alone:?}");
    assert_eq!(emulator.requests().len(), 1);
}

/// A driver invoked under `--capsule` sees its choice's config twice: as
/// `MURMUR_ARTIFACT_CONFIG` and as `MURMUR_INFERENCE_DRIVER_CONFIG` (the name drivers written
/// for another Murmur runtime read); without a gateway it has no `MURMUR_INFERENCE_ENDPOINT`.
#[test]
fn a_driver_sees_its_config_under_both_names() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!(
            "name: configured\nversion: \"0.1.0\"\nartifacts:\n  - {{ name: probe-driver, version: \"0.1.0\", runtime: driver, path: {} }}\ninference:\n  model: m-1\n  driver: {{ artifact: probe-driver, config: {{ temperature: 0.5 }} }}\n",
            artifact("probe-driver").display()
        ),
    )
    .unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact("probe-driver"))
        .args(["--input", r#"{"action": "env"}"#])
        .arg("--capsule")
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    let printed = passed(&output);
    let vars: Value = serde_json::from_str(printed["output"].as_str().unwrap()).unwrap();
    let vars = &vars["vars"];
    assert_eq!(
        vars["MURMUR_ARTIFACT_CONFIG"], r#"{"temperature":0.5}"#,
        "{vars:#}"
    );
    assert_eq!(
        vars["MURMUR_INFERENCE_DRIVER_CONFIG"],
        vars["MURMUR_ARTIFACT_CONFIG"]
    );
    assert_eq!(vars["MURMUR_INFERENCE_MODEL"], "m-1");
    assert_eq!(vars["MURMUR_INFERENCE_DRIVER"], "probe-driver");
    assert!(vars.get("MURMUR_INFERENCE_ENDPOINT").is_none(), "{vars:#}");
}

#[test]
fn a_temporary_workdir_the_call_left_empty_is_removed_and_one_it_wrote_to_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let made = |tool: &str, input: Value| {
        let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("TMPDIR", tmp.path())
            .args(["tool", "invoke", "--json"])
            .arg(artifact(tool))
            .arg("--input")
            .arg(input.to_string())
            .run();
        assert!(output.stderr.contains("workdir: "), "{output:#?}");
        output
    };
    let workdirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("mur-invoke-")
            })
            .collect()
    };
    // Reading a file that is not there writes nothing: no directory is left behind.
    let read = made("read-file", json!({"path": "absent.md"}));
    assert_eq!(read.code, 1, "{read:#?}");
    assert_eq!(workdirs(), Vec::<std::path::PathBuf>::new());
    // A write is the call's work: its workdir stays, with the file in it.
    let wrote = made("write-file", json!({"path": "note.md", "content": "kept"}));
    assert_eq!(wrote.code, 0, "{wrote:#?}");
    let kept = workdirs();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(kept[0].join("note.md")).unwrap(),
        "kept"
    );
}
