//! `mur trace show|report|diff` on the traces of real sessions: the real `mur` binary runs a
//! capsule with the first-party driver, `read-file` and `write-file` against the provider
//! emulator, then reads its trace back (`state_effect`/`resource_id`, `docs/trace.md`).

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-0001";

/// A capsule on driver-anthropic against `endpoint`, with read-file and write-file. Its
/// sessions go to `workdir/` beside the manifest (the default of `mur run` and `mur trace`).
fn capsule(dir: &Path, endpoint: &str) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: notes
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write_file} }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  system_prompt: "You keep notes."
  max_turns: 10
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        read_file = root.join("artifacts/read-file").display(),
        write_file = root.join("artifacts/write-file").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

/// Writes the note, reads it twice, rewrites it, reads it again, and answers.
const READ_TWICE_WRITE_READ: &str = r#"
turns:
  - reply:
      text: "Writing the note."
      tool_calls: [ { id: call_w1, name: write-file, input: { path: notes.md, content: "buy milk" } } ]
      usage: { input: 100, output: 10, cache_read: 50, cache_write: 20 }
  - reply:
      tool_calls: [ { id: call_r1, name: read-file, input: { path: notes.md } } ]
  - reply:
      tool_calls: [ { id: call_r2, name: read-file, input: { path: notes.md } } ]
  - reply:
      tool_calls: [ { id: call_w2, name: write-file, input: { path: notes.md, content: "buy bread" } } ]
  - reply:
      tool_calls: [ { id: call_r3, name: read-file, input: { path: notes.md } } ]
  - reply:
      text: "The note says: buy bread."
"#;

/// Writes the note and answers.
const WRITE_ONCE: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: call_w1, name: write-file, input: { path: notes.md, content: "buy bread" } } ]
  - reply:
      text: "Saved."
"#;

/// Runs one session of a capsule in `dir` (made on first use) under `script`; returns the
/// session id.
fn run_session(dir: &Path, script: &str, task: &str) -> String {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .expect("emulator");
    capsule(dir, &emulator.url());
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", task])
        .arg(dir)
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    output.json()["session_id"]
        .as_str()
        .expect("session_id")
        .to_string()
}

/// `mur trace ARGS…` run in `dir`.
fn trace(dir: &Path, args: &[&str]) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .current_dir(dir)
        .arg("trace")
        .args(args)
        .run()
}

fn trace_json(dir: &Path, args: &[&str]) -> Value {
    let output = trace(dir, args);
    assert_eq!(output.code, 0, "{output:#?}");
    output.json()
}

/// Every call row of a `show --json`, in order.
fn calls(show: &Value) -> Vec<&Value> {
    show["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|task| task["turns"].as_array().unwrap())
        .flat_map(|turn| turn["calls"].as_array().unwrap())
        .collect()
}

#[test]
fn show_flags_the_repeated_read_and_not_the_read_after_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let session = run_session(dir.path(), READ_TWICE_WRITE_READ, "Note: buy milk");

    // No argument: the newest session under ./workdir.
    let show = trace_json(dir.path(), &["show", "--json"]);
    assert_eq!(show["session"]["session_id"], session.as_str());
    assert!(
        show["trace_path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{session}/trace.jsonl"))
    );
    assert_eq!(show["session"]["exit_status"], "ok");
    assert_eq!(show["session"]["ended"], true);

    // Exactly the second read is redundant: it repeats the first, by read-file's resource_id.
    let redundant = show["redundant_calls"].as_array().unwrap();
    assert_eq!(redundant.len(), 1, "{redundant:#?}");
    assert_eq!(redundant[0]["call_id"], "call_r2");
    assert_eq!(redundant[0]["turn"], 3);
    assert_eq!(redundant[0]["tool_name"], "read-file");
    assert_eq!(redundant[0]["key"], "file:notes.md");
    assert_eq!(redundant[0]["key_kind"], "resource_id");
    assert_eq!(redundant[0]["repeats"]["call_id"], "call_r1");
    assert_eq!(redundant[0]["repeats"]["turn"], 2);

    // Six turns, each with the tool it called; the calls carry what the tools declared.
    let task = &show["tasks"][0];
    assert_eq!(task["exit_status"], "ok");
    assert_eq!(task["source"], "cli");
    let turns = task["turns"].as_array().unwrap();
    let tools: Vec<Vec<&str>> = turns
        .iter()
        .map(|turn| {
            turn["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        tools,
        vec![
            vec!["write-file"],
            vec!["read-file"],
            vec!["read-file"],
            vec!["write-file"],
            vec!["read-file"],
            vec![],
        ]
    );
    assert_eq!(turns[5]["decision"], "finish");
    assert_eq!(turns[0]["input_tokens_actual"], 100);
    assert_eq!(turns[0]["cached_tokens_actual"], 50);
    assert_eq!(turns[0]["cache_write_tokens_actual"], 20);
    // The emulator's other replies report no cache figures: absent, not 0.
    assert_eq!(turns[1]["cached_tokens_actual"], Value::Null);
    let calls = calls(&show);
    let summary: Vec<(&str, &str, bool)> = calls
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap(),
                c["state_effect"].as_str().unwrap(),
                c["redundant"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("call_w1", "mutate", false),
            ("call_r1", "read", false),
            ("call_r2", "read", true),
            ("call_w2", "mutate", false),
            ("call_r3", "read", false),
        ]
    );
    assert!(calls.iter().all(|c| c["status"] == "passed"));
    assert!(calls.iter().all(|c| c["resource_id"] == "file:notes.md"));
    assert_eq!(show["totals_from"], "session_end");
    assert_eq!(show["totals"]["tool_calls"], 5);
}

#[test]
fn show_prints_the_turns_and_the_redundant_calls_as_tables() {
    let dir = tempfile::tempdir().unwrap();
    let session = run_session(dir.path(), READ_TWICE_WRITE_READ, "Note: buy milk");
    let session_dir = dir.path().join("workdir").join(&session);
    // By session id, by the session's directory, and by the trace file: the same view.
    let by_id = trace(dir.path(), &["show", &session]);
    assert_eq!(by_id.code, 0, "{by_id:#?}");
    let by_dir = trace(Path::new("/"), &["show", session_dir.to_str().unwrap()]);
    let by_file = trace(
        Path::new("/"),
        &["show", session_dir.join("trace.jsonl").to_str().unwrap()],
    );
    assert_eq!(by_dir.stdout, by_id.stdout);
    assert_eq!(by_file.stdout, by_id.stdout);
    // A prefix of the id is enough when it names one session.
    let by_prefix = trace(dir.path(), &["show", &session[..12]]);
    assert_eq!(by_prefix.stdout, by_id.stdout);

    let text = by_id.stdout;
    assert!(text.contains(&format!("session {session}")), "{text}");
    assert!(text.contains("capsule notes 0.1.0"), "{text}");
    // The turns table: a header, then one row a turn, columns aligned.
    let header = text
        .lines()
        .find(|line| line.trim_start().starts_with("turn  choice"))
        .unwrap_or_else(|| panic!("no turn table:\n{text}"));
    for column in [
        "model", "decision", "tools", "in est", "in act", "cache rd", "stop",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let decision_at = header.find("decision").unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != header)
        .skip(1)
        .take_while(|line| !line.trim().is_empty() && !line.trim_start().starts_with("calls"))
        .collect();
    assert_eq!(rows.len(), 6, "{text}");
    assert!(rows[0][decision_at..].starts_with("call_tools"), "{text}");
    assert!(rows[5][decision_at..].starts_with("finish"), "{text}");
    assert!(rows[1].contains("read-file"), "{text}");
    // The calls table marks the redundant read and names the read it repeats.
    let redundant_row = text
        .lines()
        .find(|line| line.contains("call_r2") && line.contains("redundant"))
        .unwrap_or_else(|| panic!("no redundant call row:\n{text}"));
    assert!(
        redundant_row.contains("repeats turn 2 call_r1"),
        "{redundant_row}"
    );
    assert!(
        !text
            .lines()
            .any(|line| line.contains("call_r3") && line.contains("redundant")),
        "{text}"
    );
    // The redundant section.
    assert!(text.contains("redundant calls: 1"), "{text}");
    let section: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("redundant calls"))
        .collect();
    assert!(section.iter().any(|line| line.contains("call_r2")
        && line.contains("file:notes.md")
        && line.contains("resource_id")));
    assert!(text.contains("totals (from session_end)"), "{text}");
}

#[test]
fn report_gives_tokens_and_cache_per_choice_and_calls_per_tool() {
    let dir = tempfile::tempdir().unwrap();
    run_session(dir.path(), READ_TWICE_WRITE_READ, "Note: buy milk");
    let report = trace_json(dir.path(), &["report", "--json"]);
    let choices = report["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1, "{choices:#?}");
    let primary = &choices[0];
    assert_eq!(primary["choice"], "primary");
    assert_eq!(primary["driver"], "driver-anthropic");
    assert_eq!(primary["calls"], 6);
    // Anthropic's input excludes the cache: 50 read of 100 + 50 + 20 prompt tokens, over the
    // one call that reported a cache figure.
    assert_eq!(primary["input_includes_cached"], false);
    assert_eq!(primary["cache_ratio_calls"], 1);
    let ratio = primary["cache_hit_ratio"].as_f64().unwrap();
    assert!((ratio - 50.0 / 170.0).abs() < 1e-9, "{ratio}");
    assert_eq!(primary["cached_tokens_actual"], 50);
    assert_eq!(
        primary["input_tokens_actual"],
        report["totals"]["input_tokens_actual"]
    );

    let tool = |name: &str| {
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tool_name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {report:#}"))
            .clone()
    };
    let read_file = tool("read-file");
    assert_eq!(read_file["calls"], 3);
    assert_eq!(read_file["passed"], 3);
    assert_eq!(read_file["redundant_reads"], 1);
    assert!(read_file["output_bytes"].as_u64().unwrap() > 0);
    assert_eq!(tool("write-file")["calls"], 2);
    assert_eq!(report["hooks"], Value::Array(Vec::new()));
    assert_eq!(report["redundant_reads"], 1);

    let text = trace(dir.path(), &["report"]).stdout;
    assert!(text.contains("cache hit"), "{text}");
    assert!(text.contains("29.4%"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.trim_start().starts_with("read-file")),
        "{text}"
    );
}

#[test]
fn diff_tells_two_sessions_apart_by_task_input_and_turns() {
    let dir = tempfile::tempdir().unwrap();
    let first = run_session(dir.path(), READ_TWICE_WRITE_READ, "Note: buy milk");
    let second = run_session(dir.path(), WRITE_ONCE, "Note: buy bread");

    // With no argument, show picks the newer session.
    let newest = trace_json(dir.path(), &["show", "--json"]);
    assert_eq!(newest["session"]["session_id"], second.as_str());

    let diff = trace_json(dir.path(), &["diff", &first, &second, "--json"]);
    assert_eq!(diff["a"]["session_id"], first.as_str());
    assert_eq!(diff["b"]["session_id"], second.as_str());
    assert_eq!(diff["warnings"], Value::Array(Vec::new()));
    assert_eq!(diff["capsule"]["changed"], false);
    assert_eq!(diff["system_prompt_sha256"]["changed"], false);
    assert_eq!(diff["model"]["changed"], false);
    assert_eq!(diff["tools_added"], Value::Array(Vec::new()));
    let task = &diff["tasks"][0];
    assert_eq!(task["input_changed"], true);
    assert_ne!(task["a"]["input_sha256"], task["b"]["input_sha256"]);
    assert_eq!(task["turns"]["a"], 6);
    assert_eq!(task["turns"]["b"], 2);
    assert_eq!(task["turns"]["delta"], -4);
    assert_eq!(task["tool_sequence_changed"], true);
    assert_eq!(
        task["b"]["tool_sequence"],
        serde_json::json!(["write-file"])
    );
    assert!(
        task["tokens"]["input_tokens_estimated"]["delta"]
            .as_i64()
            .unwrap()
            < 0
    );
    assert_eq!(task["exit_status"]["changed"], false);
    assert_eq!(diff["exit_status"]["changed"], false);
    assert_eq!(diff["tool_calls"]["delta"], -4);

    // The same session against itself: nothing changed.
    let same = trace_json(dir.path(), &["diff", &first, &first, "--json"]);
    assert_eq!(same["tasks"][0]["input_changed"], false);
    assert_eq!(same["tasks"][0]["turns"]["delta"], 0);

    let text = trace(dir.path(), &["diff", &first, &second]).stdout;
    let input_row = text
        .lines()
        .find(|line| line.trim_start().starts_with("input"))
        .unwrap_or_else(|| panic!("no input row:\n{text}"));
    assert!(input_row.ends_with("changed"), "{input_row}");
    let turns_rows: Vec<&str> = text
        .lines()
        .filter(|line| line.trim_start().starts_with("turns"))
        .collect();
    assert!(turns_rows.iter().any(|row| row.ends_with("-4")), "{text}");
}

#[test]
fn diff_of_two_capsules_warns_and_still_compares() {
    let dir = tempfile::tempdir().unwrap();
    let first = run_session(dir.path(), WRITE_ONCE, "Note: buy bread");
    // The same session under another capsule name.
    let trace_file = dir.path().join("workdir").join(&first).join("trace.jsonl");
    let renamed = std::fs::read_to_string(&trace_file)
        .unwrap()
        .replace("\"name\":\"notes\"", "\"name\":\"letters\"");
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, renamed).unwrap();
    let output = trace(
        dir.path(),
        &["diff", &first, other.to_str().unwrap(), "--json"],
    );
    assert_eq!(output.code, 0, "{output:#?}");
    let diff = output.json();
    assert_eq!(diff["capsule"]["changed"], true);
    let warnings = diff["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("`notes` and `letters`")
    );
    assert_eq!(diff["tasks"][0]["input_changed"], false);
    let text = trace(dir.path(), &["diff", &first, other.to_str().unwrap()]).stdout;
    assert!(
        text.contains("warning: the sessions ran two capsules"),
        "{text}"
    );
}

#[test]
fn an_unknown_session_is_bad_input_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("workdir")).unwrap();
    let output = trace(
        dir.path(),
        &["show", "ses_0000000000000000000000000000dead"],
    );
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("error[E-TRC-002]"), "{output:#?}");
    assert!(
        output
            .stderr
            .contains("no session `ses_0000000000000000000000000000dead`"),
        "{output:#?}"
    );
    assert!(output.stderr.contains("hint:"), "{output:#?}");
    assert!(output.stdout.is_empty(), "{output:#?}");

    let output = trace(dir.path(), &["report", "ses_nope", "--json"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], "E-TRC-002");

    // No session at all under the root.
    let output = trace(dir.path(), &["show"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("no session under"), "{output:#?}");
    let output = trace(dir.path(), &["show", "--workdir", "nowhere"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("E-TRC-002"), "{output:#?}");

    // diff names the one it cannot find.
    let output = trace(dir.path(), &["diff", "ses_a", "ses_b"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("no session `ses_a`"), "{output:#?}");
}

#[test]
fn a_malformed_trace_is_bad_input_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("workdir").join("ses_0123");
    std::fs::create_dir_all(&session).unwrap();
    let start = r#"{"session_id":"ses_0123","timestamp":1700000000000,"event_id":"evt_1","parent_id":null,"event_type":"session_start","capsule":{"name":"notes","version":"0.1.0"},"murmur_version":"0.1.0","workdir":"/w","components":[],"tools":[],"containment":null}"#;
    let file = session.join("trace.jsonl");
    std::fs::write(
        &file,
        format!("{start}\n{{\"event_type\": \"task_start\",\n"),
    )
    .unwrap();

    let output = trace(dir.path(), &["show", "ses_0123"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("error[E-TRC-003]"), "{output:#?}");
    assert!(
        output.stderr.contains("trace.jsonl:2: not JSON"),
        "{output:#?}"
    );

    std::fs::write(
        &file,
        format!("{start}\n{}\n", start.replace("session_start", "séance")),
    )
    .unwrap();
    let output = trace(dir.path(), &["report", file.to_str().unwrap(), "--json"]);
    assert_eq!(output.code, 2, "{output:#?}");
    let error = &output.json()["error"];
    assert_eq!(error["code"], "E-TRC-003");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .ends_with("trace.jsonl:2: unknown event type `séance`"),
        "{error}"
    );

    // An empty trace, and one with no session_start.
    std::fs::write(&file, "").unwrap();
    let output = trace(dir.path(), &["show", "ses_0123"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert!(output.stderr.contains("is empty"), "{output:#?}");

    // A trace cut before session_end still shows, and says so.
    std::fs::write(&file, format!("{start}\n")).unwrap();
    let output = trace(dir.path(), &["show"]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        output
            .stdout
            .contains("no session_end: the session died or is still running"),
        "{output:#?}"
    );
    assert!(
        output.stdout.contains("summed from the events"),
        "{output:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Terminal injection: what components, models and peers wrote reaches the terminal escaped
// (docs/cli.md, "What `mur` prints from outside").

/// A failure summary that, printed raw, writes the clipboard (OSC 52), sets the window title
/// (OSC 0), clears the screen and homes the cursor (redrawing whatever table it sits in), moves
/// back to the line's start, opens an 8-bit CSI and reverses the text's direction.
const HOSTILE: &str = "probe failed \x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b[Hfake row\r\u{9b}31m\u{202e}gnp.exe";

/// The same, as `mur` shows it.
const SHOWN: &str = r"probe failed \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[Hfake row\u{d}\u{9b}31m\u{202e}gnp.exe";

/// Fails unless `printed` holds nothing a terminal acts on: no control character but `\n` and
/// `\t`, no C1 control, no bidi override or isolate.
fn assert_nothing_raw(what: &str, printed: &str) {
    let raw: Vec<char> = printed
        .chars()
        .filter(|c| {
            (c.is_control() && *c != '\n' && *c != '\t')
                || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(raw.is_empty(), "{what} printed {raw:?} raw:\n{printed}");
}

/// A capsule on driver-anthropic against `endpoint` with the probe tool, its sessions in
/// `workdir/` beside the manifest.
fn probe_capsule(dir: &Path, emulator: &Emulator) -> PathBuf {
    let probe = format!(
        "  - {{ name: probe, version: \"0.1.0\", runtime: tool, path: {} }}",
        repo_root().join("tests/fixtures/probe").display()
    );
    // Under `inference:`, which the manifest ends with.
    let inference = "  system_prompt: \"You probe.\"\n  max_turns: 4";
    let file = dir.join("murmur.yaml");
    std::fs::write(
        &file,
        emulator.capsule_manifest("hostile", &probe, inference),
    )
    .unwrap();
    file
}

fn emulator_of(script: Value) -> Emulator {
    Emulator::builder(Script::from_json(script).expect("script"))
        .api_key(KEY)
        .start()
        .expect("emulator")
}

/// `mur run ARGS… DIR` with the emulator's key.
fn mur_run(dir: &Path, args: &[&str]) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .arg("run")
        .args(args)
        .arg(dir)
        .run()
}

/// Whether `value` holds the string `text` anywhere.
fn holds_string(value: &Value, text: &str) -> bool {
    match value {
        Value::String(s) => s == text,
        Value::Array(items) => items.iter().any(|v| holds_string(v, text)),
        Value::Object(fields) => fields.values().any(|v| holds_string(v, text)),
        _ => false,
    }
}

#[test]
fn trace_show_prints_a_tool_failure_summary_escaped_and_json_keeps_it_exact() {
    let emulator = emulator_of(serde_json::json!({"turns": [
        {"reply": {"tool_calls": [{"id": "call_p1", "name": "probe",
            "input": {"action": "result", "status": "failed", "summary": HOSTILE}}]}},
        {"reply": {"text": "The probe failed."}},
    ]}));
    let dir = tempfile::tempdir().unwrap();
    probe_capsule(dir.path(), &emulator);
    let run = mur_run(dir.path(), &["--json", "--task", "probe it"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_nothing_raw("mur run --json", &run.stdout);
    assert_nothing_raw("mur run --json (stderr)", &run.stderr);

    let show = trace(dir.path(), &["show"]);
    assert_eq!(show.code, 0, "{show:#?}");
    assert_nothing_raw("mur trace show", &show.stdout);
    assert_nothing_raw("mur trace show (stderr)", &show.stderr);
    // The call's row keeps the whole summary on its one line, each control shown.
    let row = show
        .stdout
        .lines()
        .find(|line| line.contains("call_p1"))
        .unwrap_or_else(|| panic!("no row for call_p1:\n{}", show.stdout));
    assert!(row.contains("failed"), "{row}");
    assert!(row.ends_with(SHOWN), "{row}");

    // `--json` is the same value the trace holds, and still nothing raw reaches the terminal.
    let json = trace(dir.path(), &["show", "--json"]);
    assert_eq!(json.code, 0, "{json:#?}");
    assert_nothing_raw("mur trace show --json", &json.stdout);
    let view = json.json();
    assert_eq!(calls(&view)[0]["detail"], HOSTILE, "{view:#}");

    let session = view["session"]["session_id"].as_str().unwrap().to_string();
    for args in [
        vec!["report"],
        vec!["report", "--json"],
        vec!["diff", &session, &session],
    ] {
        let output = trace(dir.path(), &args);
        assert_eq!(output.code, 0, "{args:?}: {output:#?}");
        assert_nothing_raw(&format!("mur trace {args:?}"), &output.stdout);
    }
}

#[test]
fn mur_run_streams_a_hostile_answer_escaped_and_writes_the_result_exact() {
    let answer = format!("Answer: {HOSTILE}\nsecond line\tend");
    let thinking = format!("thinking {HOSTILE}");
    let emulator = emulator_of(serde_json::json!({"turns": [
        {"reply": {"thinking": {"text": thinking, "signature": "sig"}, "text": answer}},
    ]}));
    let dir = tempfile::tempdir().unwrap();
    probe_capsule(dir.path(), &emulator);
    let run = mur_run(dir.path(), &["--stream", "--task", "answer"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_nothing_raw("mur run --stream", &run.stdout);
    assert_nothing_raw("mur run --stream (stderr)", &run.stderr);
    // Lines and tabs of the answer are kept; everything else is shown.
    assert!(
        run.stdout
            .starts_with(&format!("Answer: {SHOWN}\nsecond line\tend")),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(&format!("thinking {SHOWN}")),
        "{}",
        run.stderr
    );
    // The result file is not the terminal: it holds the answer byte for byte.
    let result = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("result: "))
        .unwrap_or_else(|| panic!("no result line:\n{}", run.stdout));
    let written = std::fs::read_to_string(result).unwrap();
    assert!(written.contains(&answer), "{written:?}");
}

#[test]
fn tool_invoke_prints_a_hostile_tool_result_as_exact_json_with_nothing_raw() {
    let input = serde_json::json!({"action": "result", "status": "failed", "summary": HOSTILE});
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke"])
        .arg(repo_root().join("tests/fixtures/probe"))
        .args(["--input", &input.to_string()])
        .run();
    assert_eq!(output.code, 1, "a failed result exits 1: {output:#?}");
    assert_nothing_raw("mur tool invoke", &output.stdout);
    assert_nothing_raw("mur tool invoke (stderr)", &output.stderr);
    let printed = output.json();
    assert!(holds_string(&printed, HOSTILE), "{printed:#}");
    // DEL, C1 and bidi, which serde_json leaves raw, are JSON escapes.
    assert!(
        output.stdout.contains(r"\u009b31m\u202egnp.exe"),
        "{}",
        output.stdout
    );
}

#[test]
fn mur_send_prints_a_hostile_peer_answer_escaped() {
    let emulator = emulator_of(serde_json::json!({"turns": [
        {"reply": {"text": HOSTILE}},
        {"reply": {"text": HOSTILE, "thinking": {"text": HOSTILE, "signature": "sig"}}},
        {"reply": {"text": HOSTILE}},
    ]}));
    let dir = tempfile::tempdir().unwrap();
    let file = probe_capsule(dir.path(), &emulator);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!("{text}lifecycle: {{ task_acceptance: queue }}\n"),
    )
    .unwrap();
    let served = murmur_testkit::door::Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        dir.path(),
        &[("EMU_KEY", KEY)],
    );
    let send = |args: &[&str]| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .args(["send", &served.url, "--text", "hi"])
            .args(args)
            .run()
    };

    let plain = send(&[]);
    assert_eq!(plain.code, 0, "{plain:#?}");
    assert_nothing_raw("mur send", &plain.stdout);
    assert_nothing_raw("mur send (stderr)", &plain.stderr);
    assert_eq!(plain.stdout, format!("{SHOWN}\n"));

    let streamed = send(&["--stream"]);
    assert_eq!(streamed.code, 0, "{streamed:#?}");
    assert_nothing_raw("mur send --stream", &streamed.stdout);
    assert_nothing_raw("mur send --stream (stderr)", &streamed.stderr);
    assert_eq!(streamed.stdout, format!("{SHOWN}\n"));
    assert!(streamed.stderr.contains(SHOWN), "{}", streamed.stderr);

    let json = send(&["--json"]);
    assert_eq!(json.code, 0, "{json:#?}");
    assert_nothing_raw("mur send --json", &json.stdout);
    assert!(holds_string(&json.json(), HOSTILE), "{}", json.stdout);
}

// ---------------------------------------------------------------------------------------------
// What a session changed in its workspace, and where its record and workspace are.

/// A capsule in `dir` whose model is `emulator`, with the shell (bash and what its scripts
/// run).
fn shell_capsule(dir: &Path, emulator: &Emulator) {
    let manifest = emulator.capsule_manifest(
        "changer",
        "",
        "capabilities:\n  shell: { allow: [ bash, mkdir, rm, ln ] }",
    );
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
}

/// A script whose turns each run `bash -c SCRIPT` then answer, one pair a task.
fn shell_turns(scripts: &[&str]) -> Value {
    let mut turns = Vec::new();
    for (n, script) in scripts.iter().enumerate() {
        turns.push(serde_json::json!({"reply": {"tool_calls": [{
            "id": format!("call_s{}", n + 1), "name": "shell",
            "input": {"binary": "bash", "args": ["-c", script]}}]}}));
        turns.push(serde_json::json!({"reply": {"text": "done"}}));
    }
    serde_json::json!({ "turns": turns })
}

/// The `mur trace show` line that starts with `start` (after its indent).
fn line_starting<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|line| line.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line starting `{start}`:\n{text}"))
}

/// The rows of the `workspace changes` table: `[change, path, size]` each.
fn change_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|line| !line.starts_with("workspace changes:"))
        .skip(2)
        .take_while(|line| {
            let cells = line.trim_start();
            ["created", "modified", "deleted"]
                .iter()
                .any(|kind| cells.starts_with(kind))
        })
        .map(|line| {
            let (kind, rest) = line.trim_start().split_once("  ").unwrap();
            let rest = rest.trim_start();
            let (path, size) = rest.split_once("  ").unwrap();
            vec![
                kind.trim().to_string(),
                path.trim().to_string(),
                size.trim().to_string(),
            ]
        })
        .collect()
}

#[test]
fn show_lists_what_a_session_created_modified_and_deleted_in_its_workspace() {
    let emulator = emulator_of(shell_turns(&[
        "printf newer > edit.txt; rm gone.txt; printf fresh > fresh.txt; ln -s edit.txt alias; \
         mkdir many; for i in {01..25}; do printf x > many/f$i; done",
        "printf again >> fresh.txt",
    ]));
    let dir = tempfile::tempdir().unwrap();
    shell_capsule(dir.path(), &emulator);
    // An existing directory, worked on in place.
    let place = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("edit.txt", "old"),
        ("gone.txt", "bye"),
        ("keep.txt", "same"),
    ] {
        std::fs::write(place.path().join(name), text).unwrap();
    }
    let run = mur_run(
        dir.path(),
        &[
            "--json",
            "--task",
            "edit",
            "--task",
            "append",
            "--workspace",
            place.path().to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let report = run.json();

    let show = trace_json(dir.path(), &["show", "--json"]);
    assert_eq!(show["places"]["record"], report["workdir"], "{show:#}");
    assert_eq!(show["places"]["workspace"], report["workspace"], "{show:#}");
    assert_eq!(show["places"]["in_place"], true);
    assert_eq!(show["places"]["record_layout"], 2);
    let changes = &show["changes"];
    assert_eq!(
        changes["counts"],
        serde_json::json!({"created": 27, "modified": 1, "deleted": 1}),
        "{changes:#}"
    );
    let created: Vec<&str> = changes["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(created.len(), 27);
    assert_eq!(created[..3], ["alias", "fresh.txt", "many/f01"]);
    assert_eq!(changes["modified"][0]["path"], "edit.txt");
    assert_eq!(changes["modified"][0]["size_before"], 3);
    assert_eq!(changes["modified"][0]["size_after"], 5);
    assert_eq!(
        changes["deleted"],
        serde_json::json!([{"path": "gone.txt", "size": 3, "sha256_before": sha256_hex(b"bye")}])
    );
    assert_eq!(show["git"], Value::Null, "not a checkout");
    // Each task's own changes.
    let tasks = show["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(
        tasks[0]["changes"]["counts"],
        serde_json::json!({"created": 27, "modified": 1, "deleted": 1})
    );
    assert_eq!(
        tasks[1]["changes"]["counts"],
        serde_json::json!({"created": 0, "modified": 1, "deleted": 0})
    );
    assert_eq!(tasks[1]["changes"]["modified"][0]["path"], "fresh.txt");

    let text = trace(dir.path(), &["show"]).stdout;
    let record = report["workdir"].as_str().unwrap();
    let workspace = report["workspace"].as_str().unwrap();
    assert_eq!(
        line_starting(&text, "record "),
        format!("record {record}  (record layout 2)")
    );
    assert_eq!(
        line_starting(&text, "workspace /"),
        format!("workspace {workspace}  (in place)")
    );
    let task_lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("  workspace: "))
        .collect();
    assert_eq!(
        task_lines,
        [
            "  workspace: 29 files changed: 27 created, 1 modified, 1 deleted",
            "  workspace: 1 file changed: 1 modified",
        ]
    );
    assert_eq!(
        line_starting(&text, "workspace changes:"),
        "workspace changes: 29 files changed: 27 created, 1 modified, 1 deleted"
    );
    // A page of paths in path order, with their sizes; the rest counted.
    let rows = change_rows(&text);
    assert_eq!(rows.len(), 20, "{text}");
    assert_eq!(rows[0], ["created (link)", "alias", "8 B"]);
    assert_eq!(rows[1], ["modified", "edit.txt", "3 B -> 5 B"]);
    assert_eq!(rows[2], ["created", "fresh.txt", "10 B"]);
    assert_eq!(rows[3], ["deleted", "gone.txt", "3 B"]);
    assert_eq!(rows[4], ["created", "many/f01", "1 B"]);
    assert_eq!(rows[19], ["created", "many/f16", "1 B"]);
    assert!(!text.contains("keep.txt"), "{text}");
    assert_eq!(
        line_starting(&text, "and "),
        "  and 9 more (`--json` has up to 1000 of each kind)"
    );
    assert!(!text.contains("truncated"), "{text}");
    assert!(!text.lines().any(|line| line.starts_with("git ")), "{text}");

    // A fresh workspace: the record's `workspace/`, not in place.
    let emulator = emulator_of(shell_turns(&["printf hi > hello.txt"]));
    shell_capsule(dir.path(), &emulator);
    let run = mur_run(dir.path(), &["--json", "--task", "greet"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let report = run.json();
    let session = report["session_id"].as_str().unwrap();
    let show = trace_json(dir.path(), &["show", session, "--json"]);
    assert_eq!(show["places"]["in_place"], false);
    assert_eq!(show["places"]["workspace"], report["workspace"]);
    let text = trace(dir.path(), &["show", session]).stdout;
    let record = report["workdir"].as_str().unwrap();
    assert_eq!(
        line_starting(&text, "workspace /"),
        format!("workspace {record}/workspace")
    );
    assert_eq!(
        line_starting(&text, "workspace changes:"),
        "workspace changes: 1 file changed: 1 created"
    );
    assert_eq!(change_rows(&text), [["created", "hello.txt", "2 B"]]);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The session of `tests/fixtures/trace-layout-1.jsonl`: written before the record and the
/// workspace were apart (no `record_layout`, no `workspace`; the agent's files beside the
/// trace).
const LAYOUT_1_SESSION: &str = "ses_3f9c2d0a7b1e4c58a6d2e9f1b4c7a301";
const LAYOUT_1_WORKDIR: &str = "/home/ana/notes/workdir/ses_3f9c2d0a7b1e4c58a6d2e9f1b4c7a301";

#[test]
fn a_session_of_record_layout_1_is_read_its_workspace_the_record_itself() {
    let dir = tempfile::tempdir().unwrap();
    // Laid out as layout 1 left it: the agent's files, the result and logs beside the trace.
    let session = dir.path().join("workdir").join(LAYOUT_1_SESSION);
    std::fs::create_dir_all(session.join("out")).unwrap();
    std::fs::create_dir_all(session.join("logs")).unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/trace-layout-1.jsonl"),
        session.join("trace.jsonl"),
    )
    .unwrap();
    for (name, text) in [
        ("notes.md", "buy bread"),
        ("todo.md", "- buy bread\n- call mo"),
        ("out/result.txt", "Noted."),
        ("logs/shell-0001.log", "notes.md:1:buy bread\n"),
    ] {
        std::fs::write(session.join(name), text).unwrap();
    }

    // No argument: the newest (only) session under ./workdir.
    let show = trace_json(dir.path(), &["show", "--json"]);
    assert_eq!(show["session"]["session_id"], LAYOUT_1_SESSION);
    assert_eq!(show["session"]["exit_status"], "ok");
    assert!(
        show["trace_path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{LAYOUT_1_SESSION}/trace.jsonl"))
    );
    assert_eq!(
        show["places"],
        serde_json::json!({
            "record": LAYOUT_1_WORKDIR,
            "workspace": LAYOUT_1_WORKDIR,
            "in_place": false,
            "record_layout": 1,
        })
    );
    assert_eq!(
        show["changes"]["counts"],
        serde_json::json!({"created": 1, "modified": 1, "deleted": 0})
    );
    assert_eq!(show["tasks"][0]["changes"], show["changes"]);
    assert_eq!(show["git"], Value::Null);
    let calls = calls(&show);
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["toolu_01", "toolu_02", "toolu_03"]);
    assert_eq!(calls[1]["kind"], "shell");
    assert_eq!(show["totals"]["turns"], 4);

    let text = trace(dir.path(), &["show"]).stdout;
    assert_eq!(
        line_starting(&text, "record "),
        format!("record {LAYOUT_1_WORKDIR}  (record layout 1)")
    );
    assert_eq!(
        line_starting(&text, "workspace /"),
        format!(
            "workspace {LAYOUT_1_WORKDIR}  (the record itself: layout 1 kept the agent's files beside the trace)"
        )
    );
    assert_eq!(
        line_starting(&text, "workspace:"),
        "  workspace: 2 files changed: 1 created, 1 modified"
    );
    assert_eq!(
        change_rows(&text),
        [
            ["created", "notes.md", "9 B"],
            ["modified", "todo.md", "20 B -> 21 B"],
        ]
    );
    // By id, by its start, by the directory, by the file: the same view.
    for given in [
        LAYOUT_1_SESSION.to_string(),
        LAYOUT_1_SESSION[..10].to_string(),
        session.display().to_string(),
        session.join("trace.jsonl").display().to_string(),
    ] {
        let output = trace(dir.path(), &["show", &given]);
        assert_eq!(output.code, 0, "{given}: {output:#?}");
        assert_eq!(output.stdout, text, "{given}");
    }

    // report, diff and export read it too.
    let report = trace_json(dir.path(), &["report", "--json"]);
    let tools: Vec<(&str, u64)> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tool_name"].as_str().unwrap(),
                t["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [("write-file", 1), ("shell", 1), ("read-file", 1)],
        "{report:#}"
    );
    assert_eq!(report["choices"][0]["calls"], 4);
    let text = trace(dir.path(), &["report"]).stdout;
    assert!(
        text.contains(&format!("session {LAYOUT_1_SESSION}")),
        "{text}"
    );

    let diff = trace_json(
        dir.path(),
        &["diff", LAYOUT_1_SESSION, LAYOUT_1_SESSION, "--json"],
    );
    assert_eq!(diff["warnings"], Value::Array(Vec::new()));
    assert_eq!(diff["tasks"][0]["input_changed"], false);
    assert_eq!(diff["tasks"][0]["turns"]["delta"], 0);

    let receiver = murmur_testkit::RecordingServer::start("");
    let exported = trace(
        dir.path(),
        &[
            "export",
            LAYOUT_1_SESSION,
            "--endpoint",
            &receiver.url(),
            "--json",
        ],
    );
    assert_eq!(exported.code, 0, "{exported:#?}");
    let received = murmur_testkit::otlp::spans(&receiver.requests());
    // The session, its task, four turns, two tool calls and a shell call.
    assert_eq!(received.len(), 9, "{received:#?}");
    assert_eq!(exported.json()["spans"], 9);
}

/// `mur trace show | head`: the reader leaves before `mur` has written its first line (the
/// pipe's read end is closed before `mur` starts). The output ends there, quietly: no panic,
/// no message, exit 0, as for any output cut short by its reader. A child `mur` writes to that
/// dies is still an error `mur` survives (`SIGPIPE` stays ignored: the shell tests show it).
#[test]
fn output_cut_short_by_its_reader_ends_quietly() {
    let trace = repo_root().join("tests/fixtures/trace-layout-1.jsonl");
    for args in [
        vec!["trace", "show"],
        vec!["trace", "show", "--json"],
        vec!["trace", "report"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
            .args(&args)
            .arg(&trace)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}
