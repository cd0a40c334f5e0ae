//! The A2A door: `mur run --serve` driven over real HTTP on loopback, in both
//! protocol versions, every answer checked against the published schema of its version.

use std::path::Path;
use std::time::Duration;

use murmur_testkit::a2a_schema::{
    assert_v1, assert_v1_error_response, assert_v03, split_discovery_card,
};
use murmur_testkit::door::{Served, SseEvent, post};
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::repo_root;
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-door";

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

fn capsule(script: &str, extra: &str) -> Capsule {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    let text = format!(
        r#"name: doorman
version: "0.2.0"
description: A capsule behind the A2A door.
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
{extra}
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        read_file = root.join("artifacts/read-file").display(),
        probe = root.join("tests/fixtures/probe").display(),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

impl Capsule {
    fn serve(&self) -> Served {
        Served::start(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY)],
        )
    }
}

const QUEUE: &str = "lifecycle: { task_acceptance: queue }";

fn v1_send(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}})
}

fn v03_send(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": "r-1", "method": "message/send", "params": {
        "message": {"kind": "message", "messageId": "m-1", "role": "user",
                    "parts": [{"kind": "text", "text": text}]}}})
}

fn trace(served_dir: &Path) -> Vec<Value> {
    let session = murmur_testkit::door::session_dir(served_dir);
    std::fs::read_to_string(session.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_agent_card_is_served_in_both_versions() {
    let capsule = capsule("turns: []\n", QUEUE);
    // With a skill beside the tools: the card's tags name everything the agent is offered.
    let manifest = capsule.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "\ninference:",
        &format!(
            "\n  - {{ name: skill-style, version: \"0.1.0\", runtime: skill, path: {} }}\ninference:",
            repo_root().join("tests/fixtures/skill-style").display()
        ),
    );
    std::fs::write(&manifest, text).unwrap();
    let served = capsule.serve();
    let (status, v1) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "1.0")]);
    assert_eq!(status, 200);
    assert_v1("AgentCard", &v1);
    assert_eq!(v1["name"], "doorman");
    assert_eq!(v1["version"], "0.2.0");
    assert_eq!(v1["capabilities"]["streaming"], true);
    assert_eq!(
        v1["skills"][0]["tags"],
        json!(["murmur", "read-file", "probe", "skill-style"])
    );
    assert_eq!(
        v1["supportedInterfaces"][0]["url"],
        format!("{}/", served.url)
    );
    for (path, headers) in [
        ("/.well-known/agent.json", vec![]),
        ("/.well-known/agent-card.json", vec![("A2A-Version", "0.3")]),
    ] {
        let (status, v03) = served.get(path, &headers);
        assert_eq!(status, 200);
        assert_v03("AgentCard", &v03);
        assert_eq!(v03["url"], format!("{}/", served.url));
        assert_eq!(v03["preferredTransport"], "JSONRPC");
    }
    // Asked with no version (as a 0.3 client asks), the card carries both versions' fields:
    // 1.0's, valid by its schema once 0.3's are set aside, and 0.3's, valid by its schema.
    let (status, both) = served.get("/.well-known/agent-card.json", &[]);
    assert_eq!(status, 200);
    assert_eq!(both["url"], format!("{}/", served.url));
    assert_eq!(both["protocolVersion"], "0.3.0");
    let (v1_part, v03_part) = split_discovery_card(&both);
    assert_eq!(v1_part, v1, "the 1.0 fields are the 1.0 card's");
    let (_, v03) = served.get("/.well-known/agent.json", &[]);
    assert_eq!(v03_part, v03, "the 0.3 fields are the 0.3 card's");
    // A version the door does not speak still discovers it.
    let (status, unknown) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "9.9")]);
    assert_eq!(status, 200);
    assert_eq!(unknown, both);
}

#[test]
fn send_message_in_each_version_runs_a_task_to_its_answer() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"first answer\" }\n  - reply: { text: \"second answer\" }\n",
        QUEUE,
    );
    let served = capsule.serve();
    let (status, v1) = served.rpc(&v1_send("hello"));
    assert_eq!(status, 200);
    assert_eq!(v1["id"], 1);
    assert_v1("SendMessageResponse", &v1["result"]);
    let task = &v1["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v1:#}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "first answer"
    );
    assert!(task["id"].as_str().unwrap().starts_with("tsk_"));

    let (_, v03) = served.rpc(&v03_send("again"));
    assert_v03("SendMessageSuccessResponse", &v03);
    assert_eq!(v03["id"], "r-1");
    assert_eq!(v03["result"]["kind"], "task");
    assert_eq!(v03["result"]["status"]["state"], "completed");
    assert_eq!(
        v03["result"]["status"]["message"]["parts"][0]["text"],
        "second answer"
    );

    // Both tasks are there to get, in either version.
    let id = task["id"].as_str().unwrap();
    let (_, got) = served
        .rpc(&json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": id}}));
    assert_v03("GetTaskSuccessResponse", &got);
    assert_eq!(got["result"]["status"]["state"], "completed");
    let (_, listed) =
        served.rpc(&json!({"jsonrpc": "2.0", "id": 8, "method": "ListTasks", "params": {}}));
    assert_v1("ListTasksResponse", &listed["result"]);
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 2);
}

fn states(events: &[SseEvent], version_1: bool) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            let result = &e.data["result"];
            if version_1 {
                result["statusUpdate"]["status"]["state"]
                    .as_str()
                    .or(result["task"]["status"]["state"].as_str())
            } else {
                result["status"]["state"].as_str()
            }
            .map(str::to_string)
        })
        .collect()
}

#[test]
fn a_streamed_task_sends_status_text_chunks_and_tool_results_each_with_an_id() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"Reading.\", tool_calls: [ { id: t1, name: read-file, input: { path: missing.md } } ] }\n  - reply: { text: \"It is not there.\" }\n",
        QUEUE,
    );
    let served = capsule.serve();
    let mut request = v1_send("read missing.md");
    request["method"] = json!("SendStreamingMessage");
    let events = served.stream(&request, &[]);
    for event in &events {
        assert_v1("StreamResponse", &event.data["result"]);
        assert_eq!(event.data["id"], 1);
    }
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e.id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1] || w[0] == 0), "{ids:?}");
    let states = states(&events, true);
    assert_eq!(states.last().unwrap(), "TASK_STATE_COMPLETED", "{states:?}");
    assert!(
        states.contains(&"TASK_STATE_WORKING".to_string()),
        "{states:?}"
    );
    let artifacts: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.data["result"].get("artifactUpdate"))
        .collect();
    let text: String = artifacts
        .iter()
        .filter(|a| a["artifact"]["artifactId"] == "response")
        .filter_map(|a| a["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "Reading.\n\nIt is not there.");
    let tool = artifacts
        .iter()
        .find(|a| a["artifact"]["artifactId"] == "tool-t1")
        .expect("the tool result as an artifact");
    assert_eq!(tool["artifact"]["name"], "read-file");
    assert!(
        tool["artifact"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("missing.md")
    );

    // The same in 0.3: kinds, `final` on the last status update.
    let mut v03 = v03_send("again");
    v03["method"] = json!("message/stream");
    let capsule = capsule_with_turn("done in 0.3");
    let served = capsule.serve();
    let events = served.stream(&v03, &[]);
    for event in &events {
        assert_v03("SendStreamingMessageSuccessResponse", &event.data);
    }
    let last = &events.last().unwrap().data["result"];
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
}

fn capsule_with_turn(text: &str) -> Capsule {
    capsule(
        &format!("turns:\n  - reply: {{ text: \"{text}\" }}\n"),
        QUEUE,
    )
}

#[test]
fn a_subscriber_that_reconnects_with_last_event_id_misses_nothing() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"one two three four five six seven eight\" }\n    event_delay_ms: 150\n",
        QUEUE,
    );
    let served = capsule.serve();
    let mut request = v1_send("count");
    request["method"] = json!("SendStreamingMessage");
    let mut stream = served.open_stream(&request, &[]);
    let first: Vec<SseEvent> = stream.by_ref().take(3).collect();
    drop(stream);
    let task_id = first[0].data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let last_seen = first.last().unwrap().id.clone().unwrap();
    let rest = served.stream(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}),
        &[("Last-Event-ID", &last_seen)],
    );
    let seen: u64 = last_seen.parse().unwrap();
    assert!(!rest.is_empty());
    assert!(
        rest.iter()
            .all(|e| e.id.as_ref().unwrap().parse::<u64>().unwrap() > seen)
    );
    for event in &rest {
        assert_v1("StreamResponse", &event.data["result"]);
    }
    let mut all = first.clone();
    all.extend(rest);
    let text: String = all
        .iter()
        .filter_map(|e| e.data["result"].get("artifactUpdate"))
        .filter_map(|a| a["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "one two three four five six seven eight");
    assert_eq!(states(&all, true).last().unwrap(), "TASK_STATE_COMPLETED");
}

const ASKS_FOR_INPUT: &str = r#"
turns:
  - reply: { tool_calls: [ { id: ask, name: probe, input: { action: request_input, prompt: "Which color?" } } ] }
  - reply: { text: "Painting it." }
"#;

#[test]
fn request_input_moves_the_task_to_input_required_and_the_next_message_resumes_it() {
    let capsule = capsule(ASKS_FOR_INPUT, QUEUE);
    let served = capsule.serve();
    let (_, first) = served.rpc(&v1_send("paint the fence"));
    assert_v1("SendMessageResponse", &first["result"]);
    let task = &first["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{first:#}"
    );
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "Which color?"
    );
    let task_id = task["id"].as_str().unwrap();

    let reply = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
        "messageId": "m-2", "role": "ROLE_USER", "taskId": task_id, "parts": [{"text": "blue"}]}}});
    let (_, second) = served.rpc(&reply);
    assert_v1("SendMessageResponse", &second["result"]);
    assert_eq!(
        second["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{second:#}"
    );
    // The tool got the reply, and the model saw it.
    let to_model = capsule.emulator.requests()[1].body.to_string();
    assert!(
        to_model.contains("\\\"reply\\\":\\\"blue\\\""),
        "{to_model}"
    );
    // A message on a finished task is refused.
    let (_, again) = served.rpc(&reply);
    assert_v1_error_response(&again, -32004);
}

#[test]
fn no_input_within_input_timeout_secs_fails_the_task() {
    let capsule = capsule(
        ASKS_FOR_INPUT,
        "lifecycle: { task_acceptance: queue, input_timeout_secs: 1 }",
    );
    let served = capsule.serve();
    let mut request = v1_send("paint");
    request["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, sent) = served.rpc(&request);
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    let get = json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task_id}});
    let mut state = String::new();
    for _ in 0..100 {
        let (_, got) = served.rpc(&get);
        state = got["result"]["status"]["state"]
            .as_str()
            .unwrap()
            .to_string();
        if state == "TASK_STATE_FAILED" {
            let why = got["result"]["status"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap();
            assert!(why.contains("input_timeout_secs"), "{why}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the task never failed: {state}");
}

#[test]
fn a_running_task_can_be_canceled_once_and_unknown_tasks_are_not_found() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"too late\" }\n    first_byte_delay_ms: 3000\n",
        QUEUE,
    );
    let served = capsule.serve();
    let mut request = v1_send("take your time");
    request["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, sent) = served.rpc(&request);
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let cancel =
        json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": task_id}});
    let (_, canceled) = served.rpc(&cancel);
    assert_v1("Task", &canceled["result"]);
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let (_, twice) = served.rpc(&cancel);
    assert_v1_error_response(&twice, -32002);
    let (_, v03) = served.rpc(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/cancel", "params": {"id": "tsk_nope"}}),
    );
    assert_v03("JSONRPCErrorResponse", &v03);
    assert_eq!(v03["error"]["code"], -32001);
    // It stays canceled once the slow answer arrives.
    std::thread::sleep(Duration::from_millis(3500));
    let (_, got) = served
        .rpc(&json!({"jsonrpc": "2.0", "id": 6, "method": "GetTask", "params": {"id": task_id}}));
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_CANCELED");
}

#[test]
fn malformed_input_gets_its_error_and_the_door_keeps_serving() {
    let capsule = capsule("turns:\n  - reply: { text: fine }\n", QUEUE);
    let served = capsule.serve();
    let url = format!("{}/", served.url);
    let (_, truncated) = post(
        &url,
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"Send".to_vec(),
        &[],
    );
    assert_eq!(truncated["error"]["code"], -32700);
    assert_eq!(truncated["id"], Value::Null);
    let (_, unknown) = served.rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "Frobnicate"}));
    assert_v1_error_response(&unknown, -32601);
    let (_, wrong) = served.rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {"messageId": 5, "role": "ROLE_USER", "parts": "hi"}}}));
    assert_v1_error_response(&wrong, -32602);
    let (_, not_rpc) = served.rpc(&json!({"jsonrpc": "1.0", "id": 4, "method": "GetTask"}));
    assert_eq!(not_rpc["error"]["code"], -32600);
    let (_, missing) = served.rpc(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "tsk_missing"}}),
    );
    assert_v1_error_response(&missing, -32001);
    let huge = vec![b' '; 5 * 1024 * 1024];
    let (status, too_big) = post(&url, huge, &[]);
    assert_eq!(status, 413);
    assert_eq!(too_big["error"]["code"], -32600);
    // Still serving.
    let (_, fine) = served.rpc(&v1_send("still there?"));
    assert_eq!(
        fine["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn task_acceptance_none_runs_task_md_and_refuses_messages() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"from task.md\" }\n    first_byte_delay_ms: 800\n",
        "lifecycle: { task_acceptance: none }",
    );
    std::fs::write(capsule.dir.path().join("task.md"), "Do the file task.\n").unwrap();
    let mut served = capsule.serve();
    let (_, refused) = served.rpc(&v1_send("may I?"));
    assert_v1_error_response(&refused, -32004);
    assert_eq!(
        served.wait(Duration::from_secs(30)),
        Some(0),
        "exits after task.md"
    );
    let body = capsule.emulator.requests()[0].body.to_string();
    assert!(body.contains("Do the file task."));
}

#[test]
fn task_acceptance_single_takes_one_task_then_exits() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"the one\" }\n    first_byte_delay_ms: 500\n",
        "lifecycle: { task_acceptance: single, after_task: exit }",
    );
    let mut served = capsule.serve();
    let mut first = v1_send("one");
    first["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, taken) = served.rpc(&first);
    // Answered at once: still queued, or already taken by the session.
    let state = &taken["result"]["task"]["status"]["state"];
    assert!(
        state == "TASK_STATE_SUBMITTED" || state == "TASK_STATE_WORKING",
        "{taken:#}"
    );
    let (_, refused) = served.rpc(&v1_send("two"));
    assert_v1_error_response(&refused, -32004);
    assert_eq!(served.wait(Duration::from_secs(30)), Some(0));
}

#[test]
fn a_queue_runs_tasks_one_after_another() {
    let capsule = capsule(
        "turns:\n  - reply: { text: a }\n    first_byte_delay_ms: 1500\n  - reply: { text: b }\n",
        QUEUE,
    );
    let served = capsule.serve();
    let mut request = v1_send("first");
    request["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, one) = served.rpc(&request);
    let (_, two) = served.rpc(&request);
    let ids = [&one, &two].map(|r| r["result"]["task"]["id"].as_str().unwrap().to_string());
    // The second waits while the first runs.
    assert_eq!(state_of(&served, &ids[1]), "TASK_STATE_SUBMITTED");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while state_of(&served, &ids[1]) != "TASK_STATE_COMPLETED" {
        assert!(std::time::Instant::now() < deadline, "the second never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state_of(&served, &ids[0]), "TASK_STATE_COMPLETED");
    // Each ran its own turn.
    assert_eq!(capsule.emulator.requests().len(), 2);
}

#[test]
fn a_threaded_conversation_keeps_a_contexts_history_across_tasks() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"noted: 42\" }\n  - reply: { text: \"it was 42\" }\n",
        "lifecycle: { task_acceptance: queue, conversation: threaded }",
    );
    let served = capsule.serve();
    let (_, first) = served.rpc(&v1_send("remember 42"));
    let context = first["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_string();
    let follow = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
        "messageId": "m-2", "role": "ROLE_USER", "contextId": context, "parts": [{"text": "what was it?"}]}}});
    let (_, second) = served.rpc(&follow);
    assert_eq!(second["result"]["task"]["contextId"], context.as_str());
    let body = capsule.emulator.requests()[1].body.to_string();
    assert!(
        body.contains("remember 42") && body.contains("noted: 42"),
        "{body}"
    );
}

#[test]
fn a_held_continuation_lasts_into_the_next_task_on_the_same_threaded_context() {
    // The Responses driver returns its response id; the next task on `thread-1` sends only its
    // own message with it, and a task on another context resends everything.
    let capsule = capsule(
        "turns:\n  - reply: { id: resp_1, text: \"noted: 42\" }\n  - reply: { id: resp_2, text: \"it was 42\" }\n  - reply: { id: resp_3, text: \"fresh\" }\n",
        "lifecycle: { task_acceptance: queue, conversation: threaded }",
    );
    let manifest = capsule.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("driver-anthropic", "driver-openai-responses");
    std::fs::write(&manifest, text).unwrap();
    let served = capsule.serve();
    for (id, context, text) in [
        ("m-1", "thread-1", "remember 42"),
        ("m-2", "thread-1", "what was it?"),
        ("m-3", "thread-2", "something else"),
    ] {
        let (status, answer) = served.rpc(&json!({"jsonrpc": "2.0", "id": 1,
            "method": "SendMessage", "params": {"message": {"messageId": id,
            "role": "ROLE_USER", "contextId": context, "parts": [{"text": text}]}}}));
        assert_eq!(status, 200, "{answer:#}");
        assert_eq!(
            answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answer:#}"
        );
    }
    let requests: Vec<Value> = capsule
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.turn.is_some())
        .map(|r| r.body)
        .collect();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].get("previous_response_id").is_none());
    // The second task, same context: the held id and only its own message.
    assert_eq!(
        requests[1]["previous_response_id"], "resp_1",
        "{:#}",
        requests[1]
    );
    let input = requests[1]["input"].as_array().unwrap();
    assert_eq!(input.len(), 1, "{input:#?}");
    assert!(input[0].to_string().contains("what was it?"), "{input:#?}");
    // Another context: everything, no id.
    assert!(
        requests[2].get("previous_response_id").is_none(),
        "{:#}",
        requests[2]
    );
    let sent: Vec<Value> = trace(capsule.dir.path())
        .into_iter()
        .filter(|e| e["event_type"] == "inference")
        .map(|e| e["sent"].clone())
        .collect();
    assert_eq!(sent[1]["continuation_id"], "resp_1");
    assert_eq!(sent[1]["full_resend"], false);
    assert_eq!(sent[2]["full_resend"], true);
}

/// A capsule whose model asks the peer `geographer` through its tool `ask-geographer`, then
/// answers `done`.
const DELEGATING_SCRIPT: &str = "turns:\n  - reply: { tool_calls: [ { id: d1, name: ask-geographer, input: { message: \"What is the capital of Peru?\" } } ] }\n  - reply: { text: done }\n";

/// The `peers:` entry naming `peer_url` `geographer`, presenting the bearer `GEO_TOKEN`.
fn geographer(peer_url: &str) -> String {
    format!(
        "peers:\n  - {{ url: \"{peer_url}\", name: geographer, description: \"Knows capitals.\", bearer: \"${{GEO_TOKEN}}\" }}"
    )
}

/// The `a2a_send` events of a trace.
fn sends(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["event_type"] == "a2a_send")
        .collect()
}

#[test]
fn one_capsule_delegates_to_another_and_uses_its_answer() {
    let peer = capsule(
        "turns:\n  - reply: { text: \"Lima is the capital of Peru.\" }\n",
        QUEUE,
    );
    let mut peer_served = peer.serve();
    let peer_url = format!("{}/", peer_served.url);
    let sender = capsule(
        DELEGATING_SCRIPT,
        &format!(
            "{QUEUE}\ncapabilities:\n  network: {{ allow: [\"{}\"] }}\n{}",
            peer_served.url,
            geographer(&peer_url)
        ),
    );
    let mut served = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        sender.dir.path(),
        &[("EMU_KEY", KEY), ("GEO_TOKEN", "geo-token-0123")],
    );
    let client_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (_, answer) = post(
        &format!("{}/", served.url),
        v1_send("Ask the geographer.").to_string().into_bytes(),
        &[("traceparent", client_parent)],
    );
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer:#}"
    );

    // The peer's answer reached the sender's model as the tool's result.
    let to_model = sender.emulator.requests()[1].body.to_string();
    assert!(
        to_model.contains("Lima is the capital of Peru."),
        "{to_model}"
    );
    assert!(
        to_model.contains("The peer `geographer` answered"),
        "{to_model}"
    );
    // The peer's model got the question.
    let peer_saw = peer.emulator.requests()[0].body.to_string();
    assert!(
        peer_saw.contains("What is the capital of Peru?"),
        "{peer_saw}"
    );

    served.stop();
    peer_served.stop();
    let sent = trace(sender.dir.path());
    let sent = sends(&sent);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    let send = sent[0];
    assert_eq!(send["peer"], peer_url.as_str());
    // The peer's state as it took the task (the ask then followed it to `completed`).
    assert!(
        ["submitted", "working", "completed"].contains(&send["state"].as_str().unwrap_or("")),
        "{send}"
    );
    // A task from a plain client runs as `external`, and passes that on.
    assert_eq!(send["trust"], "external");
    let traceparent = send["traceparent"].as_str().unwrap();
    assert!(
        traceparent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "the send continues the client's trace: {traceparent}"
    );
    assert!(send.get("error").is_none(), "{send}");

    let peer_events = trace(peer.dir.path());
    let received = peer_events
        .iter()
        .find(|e| e["event_type"] == "a2a_task_received")
        .expect("a2a_task_received");
    assert_eq!(received["origin"], "client");
    assert_eq!(received["claimed_origin"], "peer");
    assert_eq!(received["trust"], "external");
    assert_eq!(received["claimed_trust"], "external");
    assert_eq!(received["traceparent"], traceparent);
    assert_eq!(received["task_id"], send["peer_task_id"]);
}

#[test]
fn a_peer_outside_the_network_allowlist_is_never_contacted() {
    let listener = murmur_testkit::RecordingServer::start("{}");
    let peer_url = format!("{}/", listener.url().trim_end_matches('/'));
    // Allowed: another port of the same host. Not allowed: the peer. The door does not open:
    // the capsule is refused at load, naming the peer, before any model call or send.
    let sender = capsule(
        DELEGATING_SCRIPT,
        &format!(
            "{QUEUE}\ncapabilities:\n  network: {{ allow: [\"127.0.0.1:1\"] }}\n{}",
            geographer(&peer_url)
        ),
    );
    let refused = murmur_testkit::Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("GEO_TOKEN", "geo-token-0123")
        .args(["run", "--serve"])
        .arg(sender.dir.path())
        .run();
    assert_ne!(refused.code, 0, "{refused:#?}");
    assert!(refused.stderr.contains("E-CAP-008"), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "peer `{peer_url}` is not in `capabilities.network.allow`"
        )),
        "{}",
        refused.stderr
    );
    assert_eq!(listener.connections(), 0, "nothing may reach the peer");
    assert!(
        sender.emulator.requests().is_empty(),
        "the model was called"
    );
}

// `mur send`: the client for people and scripts.

fn mur_send(args: &[&str]) -> murmur_testkit::MurOutput {
    murmur_testkit::Mur::new(env!("CARGO_BIN_EXE_mur"))
        .arg("send")
        .args(args)
        .run()
}

#[test]
fn mur_send_prints_the_answer_and_the_task_state() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"Hello from the capsule.\" }\n  - reply: { text: \"Streamed answer.\", thinking: { text: \"pondering\", signature: sig } }\n",
        QUEUE,
    );
    let served = capsule.serve();
    let url = format!("{}/", served.url);

    let out = mur_send(&[&served.url, "--text", "hi"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "Hello from the capsule.\n");
    assert!(out.stderr.contains(": completed"), "{}", out.stderr);

    let out = mur_send(&[&url, "--text", "again", "--stream"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "Streamed answer.\n");
    assert!(out.stderr.contains("[working]"), "{}", out.stderr);
    assert!(out.stderr.contains("pondering"), "{}", out.stderr);
    assert!(out.stderr.contains(": completed"), "{}", out.stderr);
}

#[test]
fn mur_send_answers_a_task_that_waits_for_input() {
    let capsule = capsule(ASKS_FOR_INPUT, QUEUE);
    let served = capsule.serve();

    let out = mur_send(&[&served.url, "--text", "paint the fence", "--stream"]);
    assert_eq!(out.code, 4, "input-required exits 4: {out:?}");
    assert_eq!(out.stdout, "Which color?\n");
    let task_id = out
        .stderr
        .split_whitespace()
        .find(|word| word.starts_with("tsk_"))
        .expect("the task id on stderr")
        .to_string();
    assert!(
        out.stderr
            .contains(&format!("mur send {}/ --task {task_id}", served.url)),
        "{}",
        out.stderr
    );

    let out = mur_send(&[&served.url, "--task", &task_id, "--text", "blue", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let task = out.json();
    assert_v1("Task", &task);
    assert_eq!(task["id"], task_id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let to_model = capsule.emulator.requests()[1].body.to_string();
    assert!(
        to_model.contains("\\\"reply\\\":\\\"blue\\\""),
        "{to_model}"
    );
}

#[test]
fn mur_send_speaks_a2a_0_3_on_request() {
    let capsule = capsule("turns:\n  - reply: { text: \"Old school.\" }\n", QUEUE);
    let served = capsule.serve();
    let out = mur_send(&[
        &served.url,
        "--text",
        "hi",
        "--json",
        "--a2a-version",
        "0.3",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let task = out.json();
    assert_v03("Task", &task);
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
}

#[test]
fn mur_send_says_why_when_there_is_no_answer() {
    // Nothing listens on a port that was just released.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let out = mur_send(&[&format!("http://127.0.0.1:{closed}/"), "--text", "hi"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.stderr.contains("error[E-A2A-003]: cannot reach"),
        "{}",
        out.stderr
    );

    // Something answers, but not A2A.
    let not_a2a = murmur_testkit::RecordingServer::start("{\"hello\": 1}");
    let out = mur_send(&[&not_a2a.url(), "--text", "hi", "--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.json()["error"]["code"], "E-A2A-004");

    // The agent refuses: an unknown task.
    let capsule = capsule("turns: []\n", QUEUE);
    let served = capsule.serve();
    let out = mur_send(&[&served.url, "--task", "tsk_nope", "--text", "hi"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("error -32001"), "{}", out.stderr);

    // Bad arguments.
    for (args, expected) in [
        (
            vec!["ftp://127.0.0.1/", "--text", "hi"],
            "over http or https",
        ),
        (vec!["not a url", "--text", "hi"], "not an absolute URL"),
        (
            vec![served.url.as_str(), "--text", "  "],
            "the message text is empty",
        ),
    ] {
        let out = mur_send(&args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
    }
    let out = mur_send(&[&served.url, "--text", "hi", "--a2a-version", "2.0"]);
    assert_eq!(out.code, 2, "{out:?}");
}

#[test]
fn stopping_the_capsule_cancels_what_has_not_ended_and_exits_promptly() {
    // input_timeout_secs is long: only the stop can end the waiting task.
    let capsule = capsule(
        ASKS_FOR_INPUT,
        "lifecycle: { task_acceptance: queue, input_timeout_secs: 600 }",
    );
    let mut served = capsule.serve();
    let (_, first) = served.rpc(&v1_send("paint the fence"));
    let waiting = first["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        first["result"]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let mut queued = v1_send("and the shed");
    queued["params"]["configuration"] = json!({"returnImmediately": true});
    let (_, second) = served.rpc(&queued);
    let queued_id = second["result"]["task"]["id"].as_str().unwrap().to_string();
    let subscribe = |id: &str| {
        served.open_stream(
            &json!({"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": id}}),
            &[],
        )
    };
    // A stream of the task in the queue (a task waiting for input has no open stream: its
    // stream ended at `input-required`).
    let queued_stream = subscribe(&queued_id);

    let started = std::time::Instant::now();
    let printed = served.stop();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the stop took {:?}",
        started.elapsed()
    );
    assert!(printed.contains("canceled"), "{printed}");
    let events: Vec<SseEvent> = queued_stream.collect();
    let last = &events.last().expect("events").data["result"];
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED",
        "{events:#?}"
    );
    let events = trace(capsule.dir.path());
    let ended = events
        .iter()
        .find(|e| e["event_type"] == "task_end" && e["task_id"] == waiting.as_str())
        .expect("the waiting task's task_end");
    assert_eq!(ended["exit_status"], "canceled", "{ended}");
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
}

/// The bytes of the regular files under `dir`, at any depth (no link followed).
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                bytes_under(&entry.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

#[test]
fn a_served_capsule_keeps_its_inputs_on_disk_within_their_bound_dropping_the_oldest_first() {
    // The capsule's own bound (the default, 256 MiB, is the same code with more tasks).
    const CONVERSATIONS_MAX_BYTES: u64 = 24 << 20;
    let capsule = capsule(
        "conversations:\n  - task: \"\"\n    turns:\n      - { text: ok }\n",
        &format!("{QUEUE}\ndoor: {{ conversations_max_bytes: {CONVERSATIONS_MAX_BYTES} }}"),
    );
    let served = capsule.serve();
    // Each input just under the door's 4 MiB body limit, words as a client sends them;
    // enough of them to pass the bound.
    let input: String = (0..)
        .map(|n| format!("word{} ", n % 997))
        .take_while({
            let mut len = 0;
            move |word: &String| {
                len += word.len();
                len <= 4_000_000
            }
        })
        .collect();
    let count = (CONVERSATIONS_MAX_BYTES / 4_000_000) as usize + 6;
    let started = std::time::Instant::now();
    let mut contexts = Vec::new();
    for n in 0..count {
        let (status, done) = served.rpc(&v1_send(&format!("task {n}: {input}")));
        assert_eq!(status, 200);
        let task = &done["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "task {n}");
        contexts.push(task["contextId"].as_str().unwrap().to_string());
    }
    eprintln!("{count} tasks of 4 MB in {:?}", started.elapsed());
    let session = murmur_testkit::door::session_dir(capsule.dir.path());
    let kept: Vec<bool> = contexts
        .iter()
        .map(|c| {
            session
                .join("contexts")
                .join(c)
                .join("history.json")
                .is_file()
        })
        .collect();
    // The oldest went first: what is left is the latest tasks', every one of them.
    let first_kept = kept.iter().position(|k| *k).expect("none kept");
    assert!(first_kept > 0, "nothing was dropped: {kept:?}");
    assert!(kept[first_kept..].iter().all(|k| *k), "{kept:?}");
    assert!(
        !session.join("contexts").join(&contexts[0]).exists(),
        "a dropped context leaves no directory"
    );
    // What is left on disk: the conversations within their bound, and close to it; the whole
    // workdir little more.
    let conversations = bytes_under(&session.join("contexts"));
    assert!(conversations <= CONVERSATIONS_MAX_BYTES, "{conversations}");
    assert!(
        conversations > CONVERSATIONS_MAX_BYTES - 3 * 4_100_000,
        "{conversations}"
    );
    let workdir = bytes_under(&session);
    assert!(workdir < conversations + (1 << 20), "{workdir}");
}

/// `door.a2a_versions: ["1.0"]`: the card is the 1.0 card alone, which the 1.0 schema takes
/// and the 0.3 schema refuses (it has no `url`, `protocolVersion`, `preferredTransport`), and
/// every 0.3 call is refused with VersionNotSupported naming 1.0. The default card, which
/// carries both versions' fields, is refused by the 1.0 schema as a whole: the reason a
/// deployment may choose one version.
#[test]
fn a_door_serving_a2a_1_0_alone_shows_a_card_valid_under_1_0_and_refuses_0_3_calls() {
    use murmur_testkit::a2a_schema::{is_v1, is_v03};
    let capsule = capsule(
        "turns:\n  - reply: { text: \"only 1.0\" }\n",
        &format!("{QUEUE}\ndoor: {{ a2a_versions: [ \"1.0\" ] }}"),
    );
    let served = capsule.serve();
    for headers in [
        vec![],
        vec![("A2A-Version", "0.3")],
        vec![("A2A-Version", "1.0")],
    ] {
        let (status, card) = served.get("/.well-known/agent-card.json", &headers);
        assert_eq!(status, 200);
        assert_v1("AgentCard", &card);
        assert!(!is_v03("AgentCard", &card), "{card:#}");
        for v03_field in ["url", "protocolVersion", "preferredTransport"] {
            assert!(card.get(v03_field).is_none(), "{v03_field} in {card:#}");
        }
        assert!(card["capabilities"].get("stateTransitionHistory").is_none());
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": format!("{}/", served.url), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
        );
    }
    let (status, _) = served.get("/.well-known/agent.json", &[]);
    assert_eq!(status, 404, "no 0.3 card on a 1.0-only door");

    let (_, refused) = served.rpc(&v03_send("in 0.3"));
    assert_eq!(refused["error"]["code"], -32009, "{refused:#}");
    let detail = &refused["error"]["data"][0];
    assert_eq!(detail["reason"], "VERSION_NOT_SUPPORTED");
    assert_eq!(detail["metadata"]["requestedVersion"], "0.3");
    assert_eq!(detail["metadata"]["supportedVersions"], "1.0");
    // A 1.0 method sent saying it speaks 0.3 is refused too.
    let (_, said_03) = post(
        &format!("{}/", served.url),
        serde_json::to_vec(&v1_send("1.0 said to be 0.3")).unwrap(),
        &[("A2A-Version", "0.3")],
    );
    assert_v1_error_response(&said_03, -32009);
    // Nothing of either reached the model; a 1.0 call runs.
    assert!(capsule.emulator.requests().is_empty());
    let (_, done) = served.rpc(&v1_send("in 1.0"));
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    assert_eq!(capsule.emulator.requests().len(), 1);

    // The default door's discovery card: valid in halves, refused by 1.0's schema whole.
    let both = capsule_default_card();
    assert!(!is_v1("AgentCard", &both), "{both:#}");
    split_discovery_card(&both);
}

/// The card of a door with no `door.a2a_versions`.
fn capsule_default_card() -> Value {
    let capsule = capsule("turns: []\n", QUEUE);
    let served = capsule.serve();
    let (status, card) = served.get("/.well-known/agent-card.json", &[]);
    assert_eq!(status, 200);
    card
}

/// `door.a2a_versions: ["0.3"]`: the card is the 0.3 card alone (valid under the closed 0.3
/// schema, refused by 1.0's), and 1.0 calls are refused with VersionNotSupported naming 0.3.
#[test]
fn a_door_serving_a2a_0_3_alone_shows_a_0_3_card_and_refuses_1_0_calls() {
    use murmur_testkit::a2a_schema::is_v1;
    let capsule = capsule(
        "turns:\n  - reply: { text: \"only 0.3\" }\n",
        &format!("{QUEUE}\ndoor: {{ a2a_versions: [ 0.3 ] }}"),
    );
    let served = capsule.serve();
    let (_, card) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "1.0")]);
    assert_v03("AgentCard", &card);
    assert!(!is_v1("AgentCard", &card), "{card:#}");
    assert!(card.get("supportedInterfaces").is_none());
    assert_eq!(card["url"], format!("{}/", served.url));
    let (status, same) = served.get("/.well-known/agent.json", &[]);
    assert_eq!((status, &same), (200, &card));

    let (_, refused) = served.rpc(&v1_send("in 1.0"));
    assert_eq!(refused["error"]["code"], -32009, "{refused:#}");
    assert_eq!(
        refused["error"]["data"][0]["metadata"]["supportedVersions"],
        "0.3"
    );
    let (_, done) = served.rpc(&v03_send("in 0.3"));
    assert_v03("SendMessageSuccessResponse", &done);
    assert_eq!(done["result"]["status"]["state"], "completed", "{done:#}");
}

/// The state of task `id`, in 1.0 names.
fn state_of(served: &Served, id: &str) -> String {
    let (_, got) =
        served.rpc(&json!({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": id}}));
    got["result"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `lifecycle.queue_depth` (here written as the other Murmur runtime writes it, without
/// `task_acceptance`, which reads it as a queue): while one task runs, that many may wait, and
/// one more is refused with JSON-RPC -32603 naming the bound; a canceled waiting task makes
/// room again.
#[test]
fn queue_depth_bounds_the_tasks_waiting_and_refuses_past_it() {
    let capsule = capsule(
        "turns:\n  - reply: { text: first }\n    first_byte_delay_ms: 1500\n  - reply: { text: third }\n",
        "lifecycle: { queue_depth: 1 }",
    );
    let served = capsule.serve();
    let send = |text: &str| {
        let mut request = v1_send(text);
        request["params"]["configuration"] = json!({"returnImmediately": true});
        request["params"]["message"]["messageId"] = json!(format!("m-{text}"));
        served.rpc(&request).1
    };
    let first = send("first");
    let first_id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while state_of(&served, &first_id) != "TASK_STATE_WORKING" {
        assert!(std::time::Instant::now() < deadline, "never taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = send("second");
    assert_eq!(
        second["result"]["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
        "{second:#}"
    );
    let second_id = second["result"]["task"]["id"].as_str().unwrap().to_string();
    let refused = send("third");
    assert_v1_error_response(&refused, -32603);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("queue is full") && message.contains("lifecycle.queue_depth: 1"),
        "{refused:#}"
    );
    // The waiting one canceled, there is room again.
    let (_, canceled) = served.rpc(
        &json!({"jsonrpc": "2.0", "id": 6, "method": "CancelTask", "params": {"id": second_id}}),
    );
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    let third = send("third");
    let third_id = third["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{third:#}"))
        .to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while state_of(&served, &third_id) != "TASK_STATE_COMPLETED" {
        assert!(std::time::Instant::now() < deadline, "never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state_of(&served, &first_id), "TASK_STATE_COMPLETED");
    // Two tasks ran; the refused one and the canceled one never reached the model.
    assert_eq!(capsule.emulator.requests().len(), 2);
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `network.internal_port` (the other runtime's `door.port`) is where `mur run --serve`
/// listens, and `--port` wins over it.
#[test]
fn the_manifests_port_is_served_on_unless_port_is_given() {
    let port = free_port();
    let capsule = capsule(
        "turns: []\n",
        &format!("network: {{ internal_port: {port} }}"),
    );
    {
        let served = capsule.serve();
        assert_eq!(served.url, format!("http://127.0.0.1:{port}"));
        let (status, card) = served.get("/.well-known/agent-card.json", &[]);
        assert_eq!(status, 200);
        assert_eq!(card["url"], format!("http://127.0.0.1:{port}/"));
    }
    let flag = free_port();
    let served = Served::start_with_args(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        capsule.dir.path(),
        &[("EMU_KEY", KEY)],
        &murmur_testkit::shared_home(),
        &["--port", &flag.to_string()],
    );
    assert_eq!(served.url, format!("http://127.0.0.1:{flag}"));
}
