//! Peer tools: a lead capsule's model asks a researcher capsule through the runtime's own tool
//! `ask-researcher`. Both run on the provider emulator; the researcher is served by
//! `mur run --serve` with `door.auth`, the lead's `peers:` entry presenting its bearer.

use std::path::Path;

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, repo_root};
use serde_json::Value;

const KEY: &str = "sk-emulator-peer-tools";
const LEAD_TOKEN: &str = "lead-token-0123456789";

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

fn emulator(script: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap()
}

/// The probe tool's entry in a capsule's `artifacts:`.
fn probe_entry() -> String {
    format!(
        "  - {{ name: probe, version: \"0.1.0\", runtime: tool, path: {} }}",
        repo_root().join("tests/fixtures/probe").display()
    )
}

/// The capsule `name` on its own emulator answering `script`, with the probe tool and `extra`.
fn capsule(name: &str, script: &str, extra: &str) -> Capsule {
    let emulator = emulator(script);
    let dir = tempfile::tempdir().unwrap();
    let text = emulator.capsule_manifest(name, &probe_entry(), extra);
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

/// The researcher, served: its door knows the lead as the principal `lead` (`trust: peer`).
fn researcher(script: &str) -> (Capsule, Served) {
    let capsule = capsule(
        "researcher",
        script,
        "lifecycle: { task_acceptance: queue }\ndoor:\n  auth:\n    - { principal: lead, bearer: \"${LEAD_TOKEN}\", trust: peer }\n",
    );
    let served = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        capsule.dir.path(),
        &[("EMU_KEY", KEY), ("LEAD_TOKEN", LEAD_TOKEN)],
    );
    (capsule, served)
}

/// The lead, allowed to reach `origin`, naming the peer `researcher` at it with `credential`.
fn lead(script: &str, origin: &str, credential: &str) -> Capsule {
    capsule(
        "lead",
        script,
        &format!(
            "capabilities:\n  network: {{ allow: [ \"{origin}\" ] }}\npeers:\n  - {{ url: \"{origin}/\", name: researcher, description: \"Finds facts about places.\", bearer: \"${{{credential}}}\" }}\n"
        ),
    )
}

/// Runs the lead's task with `env`; its `--json` report.
fn run(lead: &Capsule, env: &[(&str, &str)]) -> Value {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur")).env("EMU_KEY", KEY);
    for (name, value) in env {
        mur = mur.env(name, value);
    }
    let ran = mur
        .args(["run", "--json", "--task", "Find out about Lima."])
        .arg(lead.dir.path())
        .arg("--workdir")
        .arg(lead.dir.path().join("work"))
        .run();
    assert_eq!(ran.code, 0, "{ran:#?}");
    ran.json()
}

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event_type"] == kind).collect()
}

/// The text of the tool result for `call_id` in a request the lead's model got.
fn tool_result(request: &Value, call_id: &str) -> String {
    let mut found = String::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == call_id {
                found = block.to_string();
            }
        }
    }
    found
}

fn ask(id: &str, input: &str) -> String {
    format!("{{ id: {id}, name: ask-researcher, input: {input} }}")
}

#[test]
fn the_lead_asks_the_researcher_and_answers_with_its_answer() {
    let (researcher, mut served) =
        researcher("turns:\n  - reply: { text: \"Lima is the capital of Peru.\" }\n");
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: \"Lima, says the researcher: {{{{tool_result:q1}}}}\" }}\n",
            ask("q1", "{ message: \"Capital of Peru?\" }")
        ),
        &served.url,
        "LEAD_TOKEN",
    );
    let report = run(&lead, &[("LEAD_TOKEN", LEAD_TOKEN)]);
    assert_eq!(report["exit_status"], "ok", "{report:#}");

    let requests = lead.emulator.requests();
    // The tool is offered with the manifest's description.
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("ask-researcher"), "{offered}");
    assert!(offered.contains("Finds facts about places."), "{offered}");
    // The next request carries the researcher's answer, fenced as untrusted content.
    let result = tool_result(&requests[1].body, "q1");
    assert!(
        result.contains("untrusted-content source=\\\"tool:ask-researcher\\\""),
        "{result}"
    );
    assert!(result.contains("Lima is the capital of Peru."), "{result}");
    assert!(
        result.contains("The peer `researcher` answered"),
        "{result}"
    );
    // The researcher's model got the question.
    let asked = researcher.emulator.requests()[0].body.to_string();
    assert!(asked.contains("Capital of Peru?"), "{asked}");
    let answer = std::fs::read_to_string(report["result_path"].as_str().unwrap_or_default())
        .unwrap_or_else(|_| report.to_string());
    // The lead's answer is made of the researcher's (the scripted model quotes the result).
    assert!(answer.contains("Lima, says the researcher:"), "{answer}");
    assert!(answer.contains("Lima is the capital of Peru."), "{answer}");

    // The lead's trace: the call (mutate, the peer URL) and its send.
    let peer_url = format!("{}/", served.url);
    let lead_events = events(Path::new(report["trace_path"].as_str().unwrap()));
    let calls = of_type(&lead_events, "tool_call");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["tool_name"], "ask-researcher");
    assert_eq!(calls[0]["status"], "passed");
    assert_eq!(calls[0]["state_effect"], "mutate");
    assert_eq!(calls[0]["resource_id"], peer_url.as_str());
    let sends = of_type(&lead_events, "a2a_send");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    let send = sends[0];
    assert_eq!(send["peer"], peer_url.as_str());
    assert_eq!(send["trust"], "operator");
    assert!(send.get("error").is_none(), "{send}");

    // The researcher's trace: the task came from a peer, with the lead's trust, continuing
    // the lead's trace.
    served.stop();
    let session = murmur_testkit::door::session_dir(researcher.dir.path());
    let peer_events = events(&session.join("trace.jsonl"));
    let received = of_type(&peer_events, "a2a_task_received");
    assert_eq!(received.len(), 1, "{received:#?}");
    assert_eq!(received[0]["origin"], "peer");
    assert_eq!(received[0]["principal"], "lead");
    assert_eq!(received[0]["trust"], "operator");
    assert_eq!(received[0]["traceparent"], send["traceparent"]);
    assert_eq!(received[0]["task_id"], send["peer_task_id"]);
}

#[test]
fn a_peer_whose_credential_is_set_nowhere_is_never_contacted() {
    let listener = murmur_testkit::RecordingServer::start("{}");
    let origin = listener.url().trim_end_matches('/').to_string();
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
            ask("q1", "{ message: \"Capital of Peru?\" }")
        ),
        &origin,
        "NOWHERE_SET_TOKEN",
    );
    let report = run(&lead, &[]);
    let result = tool_result(&lead.emulator.requests()[1].body, "q1");
    assert!(result.contains("E-RUN-012"), "{result}");
    assert!(result.contains("NOWHERE_SET_TOKEN"), "{result}");
    assert!(listener.requests().is_empty(), "the peer was contacted");
    let lead_events = events(Path::new(report["trace_path"].as_str().unwrap()));
    let sends = of_type(&lead_events, "a2a_send");
    assert_eq!(sends[0]["error"]["code"], "E-RUN-012", "{sends:#?}");
    let calls = of_type(&lead_events, "tool_call");
    assert_eq!(calls[0]["status"], "failed", "{calls:#?}");
}

#[test]
fn a_researcher_that_asks_for_input_is_answered_on_the_second_call() {
    let (researcher, mut served) = researcher(
        "turns:\n  - reply: { tool_calls: [ { id: ask, name: probe, input: { action: request_input, prompt: \"Which century?\" } } ] }\n  - reply: { text: \"Founded in 1535.\" }\n",
    );
    // The lead names its own context on the first call, and goes on in it on the second.
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: \"1535.\" }}\n",
            ask(
                "q1",
                "{ message: \"When was Lima founded?\", context: ctx_lima }"
            ),
            ask("q2", "{ message: \"The sixteenth.\", context: ctx_lima }"),
        ),
        &served.url,
        "LEAD_TOKEN",
    );
    let report = run(&lead, &[("LEAD_TOKEN", LEAD_TOKEN)]);
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let requests = lead.emulator.requests();
    let first = tool_result(&requests[1].body, "q1");
    assert!(first.contains("asks for input"), "{first}");
    assert!(first.contains("Which century?"), "{first}");
    assert!(first.contains("ctx_lima"), "{first}");
    let second = tool_result(&requests[2].body, "q2");
    assert!(second.contains("Founded in 1535."), "{second}");
    // The researcher's tool got the lead's answer.
    let resumed = researcher.emulator.requests()[1].body.to_string();
    assert!(resumed.contains("The sixteenth."), "{resumed}");
    served.stop();
    let session = murmur_testkit::door::session_dir(researcher.dir.path());
    let received = of_type(&events(&session.join("trace.jsonl")), "a2a_task_received").len();
    assert_eq!(
        received, 1,
        "the answer went to the waiting task, not a new one"
    );
}

#[test]
fn a_researcher_that_fails_is_a_failed_result_naming_why() {
    let (_researcher, _served) = researcher(
        "turns:\n  - reply: { text: unused }\n    faults: [ { status: 400 }, { status: 400 }, { status: 400 }, { status: 400 } ]\n",
    );
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
            ask("q1", "{ message: \"Capital of Peru?\" }")
        ),
        &_served.url,
        "LEAD_TOKEN",
    );
    let report = run(&lead, &[("LEAD_TOKEN", LEAD_TOKEN)]);
    let result = tool_result(&lead.emulator.requests()[1].body, "q1");
    assert!(result.contains("ended `failed`"), "{result}");
    assert!(result.contains("E-RUN-011"), "{result}");
    let lead_events = events(Path::new(report["trace_path"].as_str().unwrap()));
    let calls = of_type(&lead_events, "tool_call");
    assert_eq!(calls[0]["status"], "failed", "{calls:#?}");
    assert_eq!(calls[0]["is_error"], true);
}

/// A researcher whose task leaves a text file under `out/` answers with it as a file part: the
/// lead saves it beneath its own workspace at `peers/researcher/<task-id>/`, lists it in the
/// result, and nothing of it lands anywhere else.
#[test]
fn a_researchers_file_lands_in_the_leads_workspace_under_its_task() {
    let report_text = "# Lima\nThe capital of Peru.\n";
    let (_researcher, mut served) = researcher(&format!(
        "turns:\n  - reply: {{ tool_calls: [ {{ id: w1, name: probe, input: {{ action: write_file, path: out/report.txt, content: {report_text:?} }} }} ] }}\n  - reply: {{ text: \"See the report.\" }}\n"
    ));
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
            ask("q1", "{ message: \"Write me a report on Lima.\" }")
        ),
        &served.url,
        "LEAD_TOKEN",
    );
    let report = run(&lead, &[("LEAD_TOKEN", LEAD_TOKEN)]);
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let lead_events = events(Path::new(report["trace_path"].as_str().unwrap()));
    let send = of_type(&lead_events, "a2a_send")[0].clone();
    let task_id = send["peer_task_id"].as_str().unwrap().to_string();
    let workspace = Path::new(report["workspace"].as_str().unwrap());
    let saved = workspace
        .join("peers/researcher")
        .join(&task_id)
        .join("report.txt");
    // Listed in what the model got back, by the path it can read.
    let result = tool_result(&lead.emulator.requests()[1].body, "q1");
    assert_eq!(
        std::fs::read_to_string(&saved).ok().as_deref(),
        Some(report_text),
        "{result}"
    );
    assert!(result.contains("See the report."), "{result}");
    assert!(
        result.contains(&format!("peers/researcher/{task_id}/report.txt")),
        "{result}"
    );
    // Nowhere else in the lead's workspace, nor in its record.
    let record = Path::new(report["workdir"].as_str().unwrap());
    assert!(!record.join("report.txt").exists());
    assert!(!workspace.join("report.txt").exists());
    assert!(!workspace.join("out/report.txt").exists());
    served.stop();
}

/// A lead stopped (SIGTERM) while its `ask-researcher` call waits on a slow researcher cancels
/// the researcher's task: the lead ends `canceled` (exit 143), and the researcher's task ends
/// `canceled` before its model has answered.
#[test]
fn a_canceled_lead_cancels_the_researchers_task() {
    let (researcher, mut served) =
        researcher("turns:\n  - reply: { text: \"Too late.\" }\n    first_byte_delay_ms: 60000\n");
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
            ask("q1", "{ message: \"Take your time.\" }")
        ),
        &served.url,
        "LEAD_TOKEN",
    );
    let mut running = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("LEAD_TOKEN", LEAD_TOKEN)
        .args(["run", "--json", "--task", "Ask and wait."])
        .arg(lead.dir.path())
        .arg("--workdir")
        .arg(lead.dir.path().join("work"))
        .spawn();
    let started = std::time::Instant::now();
    while researcher.emulator.requests().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the researcher's model was never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let asked = std::time::Instant::now();
    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(running.id() as i32, libc::SIGTERM) };
    let status = running.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    // While the researcher still serves, and well before its model would have answered,
    // its task ends canceled: the lead's CancelTask, not the researcher's own stop.
    let session = murmur_testkit::door::session_dir(researcher.dir.path());
    let ended = loop {
        let peer_events = events(&session.join("trace.jsonl"));
        if let Some(end) = of_type(&peer_events, "task_end").first() {
            break (*end).clone();
        }
        // Its model answers 60 s after it was asked: a task ending well before that was
        // canceled, however slowly a loaded machine got there.
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(45),
            "the researcher's task did not end: {peer_events:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(ended["exit_status"], "canceled", "{ended:#}");
    served.stop();
}

/// A call of a peer tool meets the hooks' decision as any tool call does: a policy hook that
/// denies `ask-researcher` for a message refuses the call (`call_denied`, the reason handed to
/// the model) and the researcher is never asked; another message goes through.
#[test]
fn a_hook_denies_a_peer_call_and_the_peer_is_never_asked() {
    let (researcher, mut served) =
        researcher("turns:\n  - reply: { text: \"Lima is the capital of Peru.\" }\n");
    let lead = lead(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
            ask("q1", "{ message: \"Send me the admin password.\" }"),
            ask("q2", "{ message: \"Capital of Peru?\" }")
        ),
        &served.url,
        "LEAD_TOKEN",
    );
    let path = lead.dir.path().join("murmur.yaml");
    let policy = format!(
        "  - {{ name: policy, version: \"0.1.0\", runtime: hook, path: {}, config: {{ rules: [ {{ tool: ask-researcher, input: {{ message: \"password\" }}, reason: \"no secrets from peers\" }} ] }} }}\ninference:\n",
        repo_root().join("artifacts/policy").display()
    );
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("inference:\n", &policy, 1);
    std::fs::write(&path, text).unwrap();
    let report = run(&lead, &[("LEAD_TOKEN", LEAD_TOKEN)]);
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let lead_events = events(Path::new(report["trace_path"].as_str().unwrap()));
    let denied = of_type(&lead_events, "call_denied");
    assert_eq!(denied.len(), 1, "{lead_events:#?}");
    assert_eq!(denied[0]["hook"], "policy");
    assert_eq!(denied[0]["reason"], "no secrets from peers");
    let handed = tool_result(&lead.emulator.requests()[1].body, "q1");
    assert!(
        handed.contains("denied by hook `policy`: no secrets from peers"),
        "{handed}"
    );
    // Only the second message reached the researcher.
    let asked: Vec<String> = researcher
        .emulator
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(asked[0].contains("Capital of Peru?") && !asked[0].contains("password"));
    assert_eq!(of_type(&lead_events, "a2a_send").len(), 1);
    served.stop();
}
