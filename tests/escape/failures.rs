//! Escape cases: failures are named for what failed, and a trace stays readable. A tool fills
//! the disk the session workdir is on (a 256 KiB tmpfs mounted in a private mount namespace,
//! so nothing outside the test sees it); a trace cut mid-line is still read.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-escape-failures";

fn capsule(dir: &Path, emulator: &Emulator) {
    let text = format!(
        r#"name: filler
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
        driver = repo_root().join("artifacts/driver-anthropic").display(),
        probe = repo_root().join("tests/fixtures/probe").display(),
        endpoint = emulator.url(),
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

/// The trace's lines: each must be a whole JSON event (the file ends with a newline).
fn whole_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a cut line: {text}"
    );
    text.lines()
        .map(|line| serde_json::from_str(line).expect("a whole event"))
        .collect()
}

#[test]
fn a_disk_that_fills_mid_session_names_what_failed_and_leaves_whole_lines() {
    // The tool writes 320 KiB into a 256 KiB disk: its write fails part-way and the disk is
    // full. What fails next depends on which file still has room in its last page: the trace
    // (`E-TRC-001`, naming `trace.jsonl`) or the task's result (`E-RUN-022`, naming
    // `out/result.txt`: the task ends failed, the session goes on). Either way the failure
    // names the file that could not be written, and every line of the trace is whole.
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"id": "w1", "name": "probe", "input": {
            "action": "write_file", "path": "fill.bin", "content": "x".repeat(320 << 10)
        }}]}},
        {"reply": {"text": "done"}},
    ]});
    let emulator = Emulator::builder(Script::from_yaml(&script.to_string()).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &emulator);
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let kept = dir.path().join("kept");
    let mur = env!("CARGO_BIN_EXE_mur");
    // Inside a private mount namespace: mount the small disk, run, copy the session out.
    let shell = format!(
        "mount -t tmpfs -o size=256k none {disk} || exit 97; \
         {mur} run --json --task go {capsule} --workdir {disk}/work; code=$?; \
         cp -r {disk}/work {kept}; exit $code",
        disk = disk.display(),
        capsule = dir.path().display(),
        kept = kept.display(),
    );
    let output = Mur::new("unshare")
        .env("EMU_KEY", KEY)
        .args(["-m", "sh", "-c", &shell])
        .run();
    assert_ne!(
        output.code, 97,
        "the test disk could not be mounted: {output:#?}"
    );
    assert!(!output.stderr.contains("panicked"), "{output:#?}");
    let printed = output.json();
    assert_eq!(output.code, 1, "{output:#?}");
    let error = if printed["error"].is_object() {
        printed["error"].clone()
    } else {
        printed["tasks"][0]["error"].clone()
    };
    let named = match error["code"].as_str() {
        Some("E-TRC-001") => "trace.jsonl",
        Some("E-RUN-022") => "out/result.txt",
        other => panic!("unexpected failure {other:?}: {output:#?}"),
    };
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(named), "{message}");
    assert!(message.contains("No space left on device"), "{message}");
    let session: PathBuf = std::fs::read_dir(&kept)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = session.join("trace.jsonl");
    let events = whole_lines(&trace);
    assert_eq!(events[0]["event_type"], "session_start");
    // A result that could not be saved ends the task with its code, in the trace too; a trace
    // that could not be written holds whole lines up to the one that failed.
    if named == "out/result.txt" {
        let end = events
            .iter()
            .find(|e| e["event_type"] == "task_end")
            .unwrap();
        assert_eq!(end["error"]["code"], "E-RUN-022", "{end:#}");
    }
    let shown = Mur::new(mur)
        .args(["trace", "show", "--json"])
        .arg(&trace)
        .run();
    assert_eq!(shown.code, 0, "{shown:#?}");
}

#[test]
fn a_trace_cut_mid_line_is_read_up_to_its_last_whole_line() {
    // A session's real trace, then the first half of one more line (as a full disk or a
    // killed writer leaves it).
    let script = json!({"turns": [{"reply": {"text": "done"}}]});
    let emulator = Emulator::builder(Script::from_yaml(&script.to_string()).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &emulator);
    let mur = env!("CARGO_BIN_EXE_mur");
    let run = Mur::new(mur)
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "go"])
        .arg(dir.path())
        .run();
    assert_eq!(run.code, 0, "{run:#?}");
    let trace = PathBuf::from(run.json()["trace_path"].as_str().unwrap().to_string());
    let whole = std::fs::read_to_string(&trace).unwrap();
    let lines = whole.lines().count();
    let last = whole.lines().last().unwrap();
    std::fs::write(&trace, format!("{whole}{}", &last[..last.len() / 2])).unwrap();
    for view in ["show", "report"] {
        let shown = Mur::new(mur).args(["trace", view]).arg(&trace).run();
        assert_eq!(shown.code, 0, "{view}: {shown:#?}");
        assert!(
            shown.stderr.contains(&format!(
                "warning[W-TRC-007]: {}:{}: the trace ends in a cut line",
                trace.display(),
                lines + 1
            )),
            "{view}: {shown:#?}"
        );
    }
}
