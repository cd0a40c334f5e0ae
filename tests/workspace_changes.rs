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
            "printf old > edit.txt; printf bye > gone.txt; mkdir -p d; printf keep > d/keep.txt"
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
            .any(|line| line == "5 files changed: 5 created"),
        "{output:#?} {trace:#?}"
    );
    let first = &ends[0]["changes"];
    let created: Vec<&str> = first["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    // The runtime's own files (trace, history, result, MURMUR.md, logs) are not listed.
    assert_eq!(created, ["d/keep.txt", "edit.txt", "gone.txt"], "{first}");
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
        serde_json::json!({"created": 5, "modified": 0, "deleted": 0})
    );
    // Not a git checkout: no git state.
    assert!(end.get("git").is_none(), "{end}");
}
