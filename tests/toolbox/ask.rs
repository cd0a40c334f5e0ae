//! `ask` through the real `mur`: answered by `mur tool invoke --reply`, by the client of a
//! served task (`mur run --serve` then `mur send`, the A2A input-required round trip), and by an
//! MCP client's user (`mur mcp serve`, elicitation); failing at once, never waiting, where no
//! one can answer (no `--reply` left, a plain `mur run`, an MCP client that takes no
//! questions); bad input named before anyone is asked. Repeated asks are never redundant reads.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, mcp_python, repo_root};
use serde_json::{Value, json};

use super::KEY;

/// A capsule with `ask` on the emulator at `endpoint`; `extra` is appended.
fn capsule(dir: &Path, endpoint: &str, extra: &str) -> PathBuf {
    super::capsule(
        dir,
        endpoint,
        "asker",
        &["ask"],
        &format!("  system_prompt: \"You paint fences.\"\n  max_turns: 6\n{extra}"),
    )
}

/// The prompt `ask` puts for "Which color?" with the choices red and blue.
const COLOR_PROMPT: &str = "Which color?\n\nChoices:\n1. red\n2. blue\n\nAnswer with one of the \
                            choices or its number, or in your own words.";

fn artifact() -> PathBuf {
    super::artifact("ask")
}

fn invoke(input: &Value, replies: &[&str]) -> MurOutput {
    let workdir = tempfile::tempdir().unwrap();
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact())
        .arg("--input")
        .arg(input.to_string())
        .arg("--workdir")
        .arg(workdir.path());
    for reply in replies {
        mur = mur.args(["--reply", reply]);
    }
    mur.run()
}

fn passed(output: &MurOutput) -> Value {
    assert_eq!(output.code, 0, "{output:#?}");
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "passed", "{printed:#}");
    printed
}

#[test]
fn a_reply_is_the_answer_a_choice_by_text_or_number_and_any_other_marked() {
    let color = json!({"question": "Which color?", "choices": ["red", "blue"]});
    let by_number = passed(&invoke(&color, &["2"]));
    assert_eq!(by_number["output"], "blue");
    assert_eq!(by_number["result"]["summary"], "picked choice 2: blue");
    assert_eq!(
        by_number["inputs"],
        json!([{"prompt": COLOR_PROMPT, "reply": "2"}])
    );
    assert_eq!(by_number["state_effect"], "read");
    let by_text = passed(&invoke(&color, &["  Red "]));
    assert_eq!(by_text["output"], "red");

    let other = passed(&invoke(&color, &["green, if you can"]));
    assert_eq!(
        other["output"],
        "(the person's answer is not one of the choices; as given:)\ngreen, if you can"
    );
    assert_eq!(
        other["result"]["summary"],
        "answered with none of the choices"
    );

    let open = passed(&invoke(
        &json!({"question": "Which file?"}),
        &["notes/today.md"],
    ));
    assert_eq!(open["output"], "notes/today.md");
    assert_eq!(
        open["inputs"],
        json!([{"prompt": "Which file?", "reply": "notes/today.md"}])
    );
    // Every call is a resource of its own: asking again is not reading the same thing again.
    let again = passed(&invoke(
        &json!({"question": "Which file?"}),
        &["notes/today.md"],
    ));
    let id = open["resource_id"].as_str().unwrap();
    assert!(id.starts_with("ask:"), "{id}");
    assert_ne!(again["resource_id"], open["resource_id"]);
}

#[test]
fn with_no_one_to_answer_the_call_fails_at_once_saying_why() {
    let started = Instant::now();
    let unanswered = invoke(&json!({"question": "Which color?"}), &[]);
    assert_eq!(unanswered.code, 3, "{unanswered:#?}");
    let error = &unanswered.json()["error"];
    // Named as input no one answered, with where a person can: not as the tool's own failure.
    assert_eq!(error["code"], "E-RUN-035");
    let hint = error["hint"].as_str().unwrap();
    assert!(
        hint.contains("mur send") && hint.contains("--reply"),
        "{hint}"
    );
    assert!(!hint.contains("fix the component"), "{hint}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("asked for input and got no answer"),
        "{message}"
    );
    assert!(
        message.contains("request-input is only available while the capsule runs an A2A task"),
        "{message}"
    );
    assert!(message.contains("--reply TEXT"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn bad_input_is_named_and_no_one_is_asked() {
    // The schema refuses an empty question before the tool runs…
    let empty = invoke(&json!({"question": ""}), &["unused"]);
    assert_eq!(empty.code, 2, "{empty:#?}");
    let error = &empty.json()["error"];
    assert_eq!(error["code"], "E-RUN-009");
    assert!(
        error["message"].as_str().unwrap().contains("/question"),
        "{error}"
    );
    // …and the tool a blank one, or choices that cannot be told apart.
    for (input, says) in [
        (
            json!({"question": " \n "}),
            "invalid input: `question` is empty; say what you want to know",
        ),
        (
            json!({"question": "Which?", "choices": ["Yes", "yes "]}),
            "invalid input: `choices[1]` repeats `choices[0]` (\"yes\")",
        ),
        (
            json!({"question": "Which?", "choices": ["a", "  "]}),
            "invalid input: `choices[1]` is empty",
        ),
    ] {
        let output = invoke(&input, &["unused"]);
        assert_eq!(output.code, 1, "{output:#?}");
        let printed = output.json();
        assert_eq!(printed["result"]["status"], "failed");
        assert_eq!(printed["output"], says);
        assert_eq!(printed["inputs"], json!([]), "no one was asked");
    }
}

fn emulator(script: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap()
}

fn events(trace: &Path) -> Vec<Value> {
    std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const ASK_THEN_PAINT: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: a1, name: ask, input: { question: "Which color?", choices: [red, blue] } } ]
  - reply: { text: "Painting it." }
"#;

#[test]
fn in_a_plain_run_no_one_can_answer_and_the_model_is_told_so_at_once() {
    let root = tempfile::tempdir().unwrap();
    let emulator = emulator(ASK_THEN_PAINT);
    let dir = capsule(&root.path().join("capsule"), &emulator.url(), "");
    let started = Instant::now();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json"])
        .arg(&dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--task", "paint the fence"])
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(started.elapsed() < Duration::from_secs(120));
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let calls: Vec<Value> = events(Path::new(report["trace_path"].as_str().unwrap()))
        .into_iter()
        .filter(|e| e["event_type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["status"], "error");
    assert_eq!(calls[0]["error"]["code"], "E-RUN-035");
    let requests = emulator.requests();
    assert_eq!(requests.len(), 2, "the model was asked again, once");
    let second = requests[1].body.to_string();
    assert!(
        second.contains("request-input is only available while the capsule runs an A2A task"),
        "{second}"
    );
}

/// Asks the same question twice, gets two answers, and quotes the second.
const ASK_TWICE: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: a1, name: ask, input: { question: "Which color?", choices: [red, blue] } } ]
  - reply:
      tool_calls: [ { id: a2, name: ask, input: { question: "Which color?", choices: [red, blue] } } ]
  - reply: { text: "Painting it {{tool_result:a2}}." }
"#;

#[test]
fn served_the_task_waits_for_the_question_and_mur_send_answers_it() {
    let root = tempfile::tempdir().unwrap();
    let emulator = emulator(ASK_TWICE);
    let dir = capsule(
        &root.path().join("capsule"),
        &emulator.url(),
        "lifecycle: { task_acceptance: queue, input_timeout_secs: 60 }",
    );
    let mut served = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        &dir,
        &[("EMU_KEY", KEY)],
    );
    let url = format!("{}/", served.url);
    let send = |args: &[&str]| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .arg("send")
            .arg(&url)
            .args(args)
            .run()
    };

    // The task stops at the question, which `mur send` prints with how to answer it.
    let first = send(&["--text", "paint the fence", "--json"]);
    assert_eq!(first.code, 4, "{first:#?}");
    let task = first.json();
    let task_id = task["id"].as_str().unwrap().to_string();
    let state = task["status"]["state"].as_str().unwrap();
    assert!(
        state.contains("INPUT_REQUIRED") || state == "input-required",
        "{task:#}"
    );
    assert_eq!(task["status"]["message"]["parts"][0]["text"], COLOR_PROMPT);
    assert!(
        first.stderr.contains(&format!("--task {task_id}")),
        "{first:#?}"
    );

    // The first answer is off the list; the model asks again and gets a choice by number.
    let second = send(&["--task", &task_id, "--text", "green", "--json"]);
    assert_eq!(second.code, 4, "{second:#?}");
    let third = send(&["--task", &task_id, "--text", "2"]);
    assert_eq!(third.code, 0, "{third:#?}");
    // The model's last answer quotes the second result (fenced as every tool result is).
    assert!(third.stdout.contains("Painting it <"), "{third:#?}");
    assert!(third.stdout.contains("call=\"a2\">\nblue\n<"), "{third:#?}");

    // Each answer reached the model as the tool's result.
    let requests = emulator.requests();
    assert_eq!(requests.len(), 3);
    let after_first = requests[1].body.to_string();
    assert!(
        after_first.contains("not one of the choices; as given:)\\ngreen"),
        "{after_first}"
    );
    assert!(requests[2].body.to_string().contains("blue"));
    served.stop();

    // Both asks are reads of resources of their own: `mur trace` flags neither as redundant.
    let trace = murmur_testkit::door::session_dir(&dir).join("trace.jsonl");
    let calls: Vec<Value> = events(&trace)
        .into_iter()
        .filter(|e| e["event_type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    for call in &calls {
        assert_eq!(call["status"], "passed", "{call}");
        assert_eq!(call["state_effect"], "read", "{call}");
    }
    assert_ne!(calls[0]["resource_id"], calls[1]["resource_id"]);
    let show = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", "show", "--json"])
        .arg(&trace)
        .run();
    assert_eq!(show.code, 0, "{show:#?}");
    assert_eq!(show.json()["redundant_calls"], json!([]));
}

/// What the MCP Python SDK's client printed after calling `ask` on `mur mcp serve` over stdio;
/// with `reply`, its user answers every question so.
fn mcp_client(dir: &Path, reply: Option<&str>) -> Value {
    let venv = mcp_python();
    let calls = json!([
        {"name": "ask", "arguments": {"question": "Which color?", "choices": ["red", "blue"]}},
    ]);
    let mut command = Command::new(&venv.python);
    command
        .arg(repo_root().join("tests/python/mcp/serve_client.py"))
        .arg("stdio")
        .arg(calls.to_string())
        .arg(env!("CARGO_BIN_EXE_mur"))
        .args(["mcp", "serve"])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("sessions"))
        .env("EMU_KEY", "sk-unused")
        .env_remove("REPLY");
    if let Some(reply) = reply {
        command.env("REPLY", reply);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn under_mcp_serve_the_clients_user_answers_by_elicitation() {
    let root = tempfile::tempdir().unwrap();
    let dir = capsule(&root.path().join("capsule"), "http://127.0.0.1:9", "");

    let answered = mcp_client(&dir, Some("blue"));
    assert_eq!(answered["asked"], json!([COLOR_PROMPT]), "{answered:#}");
    let call = &answered["calls"][0];
    assert_eq!(call["is_error"], false, "{call:#}");
    assert!(call["text"].as_str().unwrap().contains("blue"), "{call:#}");
    assert!(!call["text"].as_str().unwrap().contains("red"), "{call:#}");

    // A client that takes no questions: the call fails at once, an error result.
    let unasked = mcp_client(&dir, None);
    assert_eq!(unasked["asked"], json!([]));
    let call = &unasked["calls"][0];
    assert_eq!(call["is_error"], true, "{call:#}");
    assert!(
        call["text"]
            .as_str()
            .unwrap()
            .contains("only available while the capsule runs an A2A task"),
        "{call:#}"
    );
}
