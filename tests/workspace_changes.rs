//! What a session changed in the directory its agent works in: `task_end.changes`,
//! `session_end.changes` and the summary line of `mur run`, with the emulator scripting
//! `shell` calls that create, modify and delete files.

use murmur_testkit::Mur;
use murmur_testkit::emulator::{Emulator, Script};
use serde_json::Value;

const KEY: &str = "sk-emulator-changes-41";

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn task_end_lists_the_files_a_shell_call_created_modified_and_deleted() {
    let call = |id: &str, script: &str| {
        format!(
            "  - reply: {{ tool_calls: [ {{ id: {id}, name: shell, input: {{ binary: bash, args: [ \"-c\", \"{script}\" ] }} }} ] }}\n  - reply: {{ text: done }}\n"
        )
    };
    let script = format!(
        "turns:\n{}{}",
        call(
            "s1",
            "printf old > edit.txt; printf bye > gone.txt; mkdir -p d .murmur/artifacts; printf keep > d/keep.txt; printf pin > .murmur/artifacts/pin"
        ),
        call(
            "s2",
            "printf newer > edit.txt; rm gone.txt; printf fresh > d/new.txt; printf report > out/report.md; ln -s /etc/passwd link"
        ),
    );
    let emulator = Emulator::builder(Script::from_yaml(&script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest = emulator.capsule_manifest(
        "changer",
        "",
        "capabilities:\n  shell: { allow: [ bash, mkdir, rm, ln ] }",
    );
    std::fs::write(dir.path().join("murmur.yaml"), manifest).unwrap();
    let work = dir.path().join("work");
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--task", "one", "--task", "two"])
        .arg(dir.path())
        .arg("--workdir")
        .arg(&work)
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let session = std::fs::read_dir(&work).unwrap().next().unwrap().unwrap();
    let trace: Vec<Value> = std::fs::read_to_string(session.path().join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ends: Vec<&Value> = trace
        .iter()
        .filter(|event| event["event_type"] == "task_end")
        .collect();
    assert_eq!(ends.len(), 2);
    // The session's total: `gone.txt` came and went; `edit.txt` is new to the session.
    assert!(
        output
            .stderr
            .lines()
            .any(|line| line == "6 files changed: 6 created"),
        "{output:#?} {trace:#?}"
    );
    let first = &ends[0]["changes"];
    let created: Vec<&str> = first["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    // The runtime's own files (trace, history, result, MURMUR.md, logs, its scratch) are not
    // listed; a capsule's project store `.murmur/` is the agent's like any directory.
    assert_eq!(
        created,
        [
            ".murmur/artifacts/pin",
            "d/keep.txt",
            "edit.txt",
            "gone.txt"
        ],
        "{first}"
    );
    let second = &ends[1]["changes"];
    assert_eq!(
        second["counts"],
        serde_json::json!({"created": 3, "modified": 1, "deleted": 1}),
        "{second}"
    );
    let created = second["created"].as_array().unwrap();
    assert_eq!(created[0]["path"], "d/new.txt");
    assert_eq!(created[0]["sha256"], sha(b"fresh"));
    assert_eq!(created[1]["path"], "link");
    assert_eq!(created[1]["link"], true);
    assert_eq!(created[1]["sha256"], sha(b"/etc/passwd"));
    assert_eq!(created[2]["path"], "out/report.md");
    assert_eq!(
        second["modified"][0],
        serde_json::json!({
            "path": "edit.txt",
            "size_before": 3,
            "size_after": 5,
            "sha256_before": sha(b"old"),
            "sha256_after": sha(b"newer"),
        })
    );
    assert_eq!(
        second["deleted"][0],
        serde_json::json!({"path": "gone.txt", "size": 3, "sha256_before": sha(b"bye")})
    );
    let end = trace.last().unwrap();
    assert_eq!(end["event_type"], "session_end");
    assert_eq!(
        end["changes"]["counts"],
        serde_json::json!({"created": 6, "modified": 0, "deleted": 0})
    );
    // Not a git checkout: no git state.
    assert!(end.get("git").is_none(), "{end}");
}

/// `git` with a fixed identity and no user or system configuration, in `dir`.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Fixture")
        .env("GIT_AUTHOR_EMAIL", "fixture@example.invalid")
        .env("GIT_COMMITTER_NAME", "Fixture")
        .env("GIT_COMMITTER_EMAIL", "fixture@example.invalid")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A small checkout: `src/greet.txt` with a typo, a README, one commit on `main`.
fn checkout() -> (tempfile::TempDir, String) {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join("src")).unwrap();
    std::fs::write(repo.path().join("src/greet.txt"), "hello wrold\n").unwrap();
    std::fs::write(repo.path().join("README.md"), "# greet\n").unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-q", "-m", "start"]);
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    (repo, head)
}

/// A capsule with read-file, write-file and `shell` allowing `wc`, `bash`, `seq` and `sleep`,
/// on `emulator`.
fn editor(dir: &std::path::Path, emulator: &Emulator) {
    let root = murmur_testkit::repo_root();
    let tools = format!(
        "  - {{ name: read-file, version: \"0.1.0\", runtime: tool, path: {} }}\n  - {{ name: write-file, version: \"0.1.0\", runtime: tool, path: {} }}",
        root.join("artifacts/read-file").display(),
        root.join("artifacts/write-file").display()
    );
    let manifest = emulator.capsule_manifest(
        "editor",
        &tools,
        "capabilities:\n  shell: { allow: [ wc, bash, seq, sleep ] }",
    );
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
}

/// An agent works on an existing git checkout in place: it reads a file, fixes it through
/// `write-file` and checks it with `shell`. Exactly that file is listed as changed, the commit
/// the session started from is recorded, and nothing of the session's record (trace, result,
/// conversations, logs, `MURMUR.md`, Murmur's scratch) is left in the checkout.
#[test]
fn an_agent_fixes_a_checkout_in_place_and_its_record_stays_out_of_it() {
    let (repo, head) = checkout();
    let script = r#"turns:
  - reply: { tool_calls: [ { id: r1, name: read-file, input: { path: src/greet.txt } } ] }
  - reply: { tool_calls: [ { id: w1, name: write-file, input: { path: src/greet.txt, content: "hello world\n" } } ] }
  - reply: { tool_calls: [ { id: s1, name: shell, input: { binary: wc, args: [ "-c", src/greet.txt ] } } ] }
  - reply: { text: fixed }
"#;
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let capsule = tempfile::tempdir().unwrap();
    editor(capsule.path(), &emulator);
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "fix the typo"])
        .arg(capsule.path())
        .arg("--workdir")
        .arg(capsule.path().join("work"))
        .arg("--workspace")
        .arg(repo.path())
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    let checkout = repo.path().canonicalize().unwrap();
    assert_eq!(report["workspace"], checkout.display().to_string());
    let record = std::path::PathBuf::from(report["workdir"].as_str().unwrap());
    assert!(record.starts_with(capsule.path().canonicalize().unwrap()));

    // The file was fixed in place; the shell saw the fixed file.
    assert_eq!(
        std::fs::read_to_string(checkout.join("src/greet.txt")).unwrap(),
        "hello world\n"
    );
    let sent = emulator.requests().last().unwrap().body.to_string();
    assert!(sent.contains("12 src/greet.txt"), "{sent}");

    // Exactly the changed file is listed, with its hashes; the start commit is recorded.
    let trace: Vec<Value> = std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let start = &trace[0];
    assert_eq!(start["in_place"], true, "{start}");
    assert_eq!(start["workspace"], checkout.display().to_string());
    let end = trace.last().unwrap();
    assert_eq!(
        end["changes"]["counts"],
        serde_json::json!({"created": 0, "modified": 1, "deleted": 0}),
        "{end}"
    );
    assert_eq!(
        end["changes"]["modified"][0],
        serde_json::json!({
            "path": "src/greet.txt",
            "size_before": 12,
            "size_after": 12,
            "sha256_before": sha(b"hello wrold\n"),
            "sha256_after": sha(b"hello world\n"),
        })
    );
    assert_eq!(end["git"]["commit"], head.as_str(), "{end}");
    assert_eq!(end["git"]["branch"], "main", "{end}");
    assert_eq!(end["git"]["clean"], true, "{end}");

    // Nothing of the record in the checkout: only what was there, the fix aside.
    let mut names: Vec<String> = std::fs::read_dir(&checkout)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".git", "README.md", "src"]);
    assert_eq!(
        git(&checkout, &["status", "--porcelain"]),
        "M src/greet.txt"
    );
    for own in ["trace.jsonl", "out/result.txt", "contexts", "logs"] {
        assert!(record.join(own).exists(), "{own}");
    }
    assert!(!record.join("workspace").exists());
    assert_eq!(
        std::fs::read_to_string(record.join("out/result.txt")).unwrap(),
        "fixed"
    );
}

/// A checkout one session works in is refused to a second (`E-RUN-034`, naming the holder's
/// process) until the first ends; a workspace over the records' root is refused
/// (`E-RUN-033`) before anything runs.
#[test]
fn a_workspace_is_held_by_one_session_and_never_overlaps_the_records() {
    let (repo, _) = checkout();
    let script = r#"turns:
  - reply: { tool_calls: [ { id: s1, name: shell, input: { binary: bash, args: [ "-c", "echo x > .started; for n in $(seq 300); do [ -e .go ] && break; sleep 0.1; done" ] } } ] }
  - reply: { text: done }
"#;
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let capsule = tempfile::tempdir().unwrap();
    editor(capsule.path(), &emulator);
    let mur = |workspace: &std::path::Path| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .args(["run", "--json", "--task", "hold it"])
            .arg(capsule.path())
            .arg("--workdir")
            .arg(capsule.path().join("work"))
            .arg("--workspace")
            .arg(workspace)
    };
    let mut first = mur(repo.path()).spawn();
    let started = std::time::Instant::now();
    while !repo.path().join(".started").exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the first session's shell call never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let second = mur(repo.path()).run();
    assert_eq!(second.code, 1, "{second:#?}");
    let error = &second.json()["error"];
    assert_eq!(error["code"], "E-RUN-034", "{second:#?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("pid {}", first.id())) && message.contains("mur"),
        "{message}"
    );
    // The second session left no record behind.
    let records = std::fs::read_dir(capsule.path().join("work"))
        .unwrap()
        .count();
    assert_eq!(records, 1);
    std::fs::write(repo.path().join(".go"), "go\n").unwrap();
    assert!(first.wait().unwrap().success());
    assert_eq!(emulator.requests().len(), 2);

    // The capsule's own directory holds the default records' root (`workdir/`): refused.
    let over = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "x", "--workspace"])
        .arg(capsule.path())
        .arg(capsule.path())
        .run();
    assert_eq!(over.code, 2, "{over:#?}");
    let error = &over.json()["error"];
    assert_eq!(error["code"], "E-RUN-033", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("overlaps"),
        "{error}"
    );
    assert_eq!(emulator.requests().len(), 2, "the model was never asked");

    // A directory holding Murmur's home (the credentials file, the control tokens): refused.
    let holder = tempfile::tempdir().unwrap();
    std::fs::create_dir(holder.path().join("home")).unwrap();
    std::fs::write(holder.path().join("home/credentials.yaml"), "KEY: secret\n").unwrap();
    let homed = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("MURMUR_HOME", holder.path().join("home"))
        .args(["run", "--json", "--task", "x", "--workspace"])
        .arg(holder.path())
        .arg(capsule.path())
        .arg("--workdir")
        .arg(capsule.path().join("work"))
        .run();
    assert_eq!(homed.code, 2, "{homed:#?}");
    let error = &homed.json()["error"];
    assert_eq!(error["code"], "E-RUN-033", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("Murmur's home"),
        "{error}"
    );
    assert_eq!(emulator.requests().len(), 2, "the model was never asked");
}
