//! OTLP/HTTP export: `mur run` with `observability.otel_endpoint` sends
//! its spans to a real receiver on loopback, which decodes them with the `opentelemetry-proto`
//! types. The span tree, the ids (recomputable from `trace.jsonl`), the GenAI attributes, the
//! trace context continued across A2A, and an export that fails without failing the session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use murmur_testkit::door::{Served, post};
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::otlp::{ReceivedSpan, spans};
use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const KEY: &str = "sk-emulator-otel-5e2a";

fn emulator(script: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .expect("emulator")
}

/// A capsule with the Anthropic driver, read-file, write-file and the probe (and the entries
/// of `more_artifacts`), exporting to `otel`; `extra` is appended at the top level.
fn capsule(
    dir: &Path,
    name: &str,
    (endpoint, otel): (&str, &str),
    more_artifacts: &str,
    extra: &str,
) -> PathBuf {
    let root = repo_root();
    let text = format!(
        r#"name: {name}
version: "0.3.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read_file} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write_file} }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
{more_artifacts}
observability: {{ otel_endpoint: "{otel}" }}
{extra}
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        read_file = root.join("artifacts/read-file").display(),
        write_file = root.join("artifacts/write-file").display(),
        probe = root.join("tests/fixtures/probe").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn run(capsule: &Path, task: &str) -> (MurOutput, Value) {
    let dir = capsule.parent().unwrap();
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--json", "--task", task])
        .run();
    let report = output.json();
    (output, report)
}

fn trace_at(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The trace of the one session under `<dir>/work`.
fn served_trace(dir: &Path) -> Vec<Value> {
    let sessions: Vec<PathBuf> = std::fs::read_dir(dir.join("work"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    trace_at(&sessions[0].join("trace.jsonl"))
}

/// The id derivation the docs promise: sha256 of the id, first `bytes` bytes, hex.
fn derived(id: &str, bytes: usize) -> String {
    hex::encode(&Sha256::digest(id.as_bytes())[..bytes])
}

fn event<'a>(events: &'a [Value], event_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event_type"] == event_type)
        .collect()
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn by_id(spans: &[ReceivedSpan]) -> BTreeMap<String, &ReceivedSpan> {
    spans.iter().map(|s| (s.span_id.clone(), s)).collect()
}

#[test]
fn a_session_exports_its_span_tree_with_gen_ai_attributes() {
    // Turn 1 writes and reads a file and runs a shell command; twelve turns write notes until the
    // small window needs a compaction; the last turn answers.
    let mut script = String::from(
        "turns:\n  - reply: { text: \"Looking.\", tool_calls: [ { id: call_w, name: write-file, input: { path: seed.md, content: seed } }, { id: call_r, name: read-file, input: { path: seed.md } }, { id: call_s, name: shell, input: { binary: bash, args: [\"-c\", \"echo hi\"] } } ], usage: { input: 900, output: 40, cache_read: 700, cache_write: 100 } }\n",
    );
    for n in 1..=12 {
        script.push_str(&format!(
            "  - reply: {{ text: \"Writing note {n}.\", tool_calls: [ {{ id: call_{n}, name: write-file, input: {{ path: notes/n{n}.md, content: \"note number {n} with some words to take up room in the context\" }} }} ] }}\n"
        ));
    }
    script.push_str("  - reply: { text: \"All done.\" }\n");
    script.push_str("by_model:\n  summary-model: { text: \"Notes were written.\" }\n");
    let emulator = emulator(&script);
    let receiver = RecordingServer::start("");
    let dir = tempfile::tempdir().unwrap();
    let compactor = format!(
        "  - {{ name: compactor, version: \"0.1.0\", runtime: hook, path: {}, config: {{ keep_last: 4 }}, grants: [ runtime/inference ] }}",
        repo_root().join("artifacts/compactor").display()
    );
    let file = capsule(
        dir.path(),
        "exporter",
        (&emulator.url(), &receiver.url()),
        &compactor,
        "capabilities:\n  shell: { allow: [ bash ] }\ninference:\n  model: test-model\n  driver: { artifact: driver-anthropic }\n  max_turns: 20\n  compaction: { threshold: 0.6, model: summary-model }\ncontext: { max_tokens: 3000 }",
    );
    let (output, report) = run(&file, "Write twelve notes.");
    assert_eq!(output.code, 0, "{output:#?}");
    assert!(
        !output.stderr.contains("W-TRC-004"),
        "the export worked: {}",
        output.stderr
    );
    let events = trace_at(Path::new(report["trace_path"].as_str().unwrap()));
    let received = spans(&receiver.requests());

    // Every span is in the session's trace, whose id comes from the session id.
    let session_id = report["session_id"].as_str().unwrap();
    let trace_id = derived(session_id, 16);
    assert!(received.iter().all(|s| s.trace_id == trace_id));
    let ids = by_id(&received);
    assert_eq!(ids.len(), received.len(), "span ids are unique");

    // session → task → calls; ids from the event ids.
    let session_start = event(&events, "session_start")[0];
    let session = named(&received, "capsule.session");
    assert_eq!(session.len(), 1);
    let session = session[0];
    assert_eq!(
        session.span_id,
        derived(session_start["event_id"].as_str().unwrap(), 8)
    );
    assert_eq!(session.parent_span_id, "", "the session span is the root");
    assert_eq!(
        session.attribute("gen_ai.agent.name"),
        Some(&json!("exporter"))
    );
    assert_eq!(
        session.attribute("murmur.session.id"),
        Some(&json!(session_id))
    );
    assert_eq!(
        session.resource.get("service.name"),
        Some(&json!("exporter"))
    );
    assert_eq!(
        session.resource.get("service.version"),
        Some(&json!("0.3.0"))
    );

    let task_start = event(&events, "task_start")[0];
    let task = named(&received, "capsule.task");
    assert_eq!(task.len(), 1);
    let task = task[0];
    assert_eq!(
        task.span_id,
        derived(task_start["event_id"].as_str().unwrap(), 8)
    );
    assert_eq!(task.parent_span_id, session.span_id);
    assert_eq!(
        task.attribute("gen_ai.operation.name"),
        Some(&json!("invoke_agent"))
    );
    assert_eq!(
        task.attribute("gen_ai.conversation.id"),
        Some(&task_start["context_id"])
    );
    assert_eq!(
        task.attribute("murmur.task.exit_status"),
        Some(&json!("ok"))
    );
    assert!(session.start_unix_nano <= task.start_unix_nano);
    assert!(task.end_unix_nano <= session.end_unix_nano);

    // One inference span per inference event, each a child of the task.
    let inferences = event(&events, "inference");
    let inference_spans = named(&received, "capsule.inference");
    assert_eq!(inference_spans.len(), inferences.len());
    for inference in &inferences {
        let span = ids[&derived(inference["event_id"].as_str().unwrap(), 8)];
        assert_eq!(span.name, "capsule.inference");
        assert_eq!(span.parent_span_id, task.span_id);
        assert_eq!(span.kind, 3, "a client span");
        assert_eq!(
            span.attribute("gen_ai.operation.name"),
            Some(&json!("chat"))
        );
        assert_eq!(
            span.attribute("gen_ai.provider.name"),
            Some(&json!("anthropic"))
        );
        assert_eq!(span.attribute("murmur.origin"), Some(&inference["origin"]));
        assert_eq!(
            span.attribute("gen_ai.request.model"),
            Some(&inference["model"])
        );
        assert_eq!(
            span.attribute("murmur.usage.input_tokens_estimated"),
            Some(&inference["input_tokens_estimated"])
        );
        assert_eq!(
            span.attribute("gen_ai.response.finish_reasons"),
            Some(&json!([inference["stop_reason"]]))
        );
        let duration_ms = inference["duration_ms"].as_u64().unwrap();
        assert_eq!(
            (span.end_unix_nano - span.start_unix_nano) / 1_000_000,
            duration_ms
        );
        assert_eq!(
            span.end_unix_nano / 1_000_000,
            inference["timestamp"].as_u64().unwrap()
        );
        // Reported numbers are there exactly when the provider reported them.
        for (attribute, field) in [
            ("gen_ai.usage.input_tokens", "input_tokens_actual"),
            ("gen_ai.usage.output_tokens", "output_tokens_actual"),
            (
                "gen_ai.usage.cache_read.input_tokens",
                "cached_tokens_actual",
            ),
            (
                "gen_ai.usage.cache_creation.input_tokens",
                "cache_write_tokens_actual",
            ),
        ] {
            assert_eq!(
                span.attribute(attribute),
                inference.get(field),
                "{attribute} vs {field}"
            );
        }
    }
    let first = ids[&derived(inferences[0]["event_id"].as_str().unwrap(), 8)];
    assert_eq!(
        first.attribute("gen_ai.usage.input_tokens"),
        Some(&json!(900))
    );
    assert_eq!(
        first.attribute("gen_ai.usage.cache_read.input_tokens"),
        Some(&json!(700))
    );
    assert_eq!(
        first.attribute("gen_ai.usage.cache_creation.input_tokens"),
        Some(&json!(100))
    );
    let summaries = inference_spans
        .iter()
        .filter(|s| s.attribute("murmur.origin") == Some(&json!("hook:compactor")))
        .count();
    assert!(
        summaries >= 1,
        "the compactor's summary call is a span too: {:?}",
        events
            .iter()
            .map(|e| (e["event_type"].clone(), e["origin"].clone()))
            .collect::<Vec<_>>()
    );

    // Tool calls and the shell call: execute_tool spans under the task.
    let tool_calls = event(&events, "tool_call");
    assert_eq!(
        named(&received, "capsule.tool_call").len(),
        tool_calls.len()
    );
    let read = tool_calls
        .iter()
        .find(|e| e["tool_name"] == "read-file")
        .unwrap();
    let read_span = ids[&derived(read["event_id"].as_str().unwrap(), 8)];
    assert_eq!(read_span.parent_span_id, task.span_id);
    assert_eq!(
        read_span.attribute("gen_ai.operation.name"),
        Some(&json!("execute_tool"))
    );
    assert_eq!(
        read_span.attribute("gen_ai.tool.name"),
        Some(&json!("read-file"))
    );
    assert_eq!(
        read_span.attribute("gen_ai.tool.call.id"),
        Some(&json!("call_r"))
    );
    assert_eq!(
        read_span.attribute("murmur.tool.state_effect"),
        Some(&json!("read"))
    );
    assert_eq!(
        read_span.attribute("murmur.tool.resource_id"),
        read.get("resource_id")
    );
    assert_eq!(read_span.attribute("murmur.turn"), Some(&json!(1)));

    let shell = event(&events, "shell");
    assert_eq!(shell.len(), 1);
    let shell_span = ids[&derived(shell[0]["event_id"].as_str().unwrap(), 8)];
    assert_eq!(shell_span.name, "capsule.shell");
    assert_eq!(shell_span.parent_span_id, task.span_id);
    assert_eq!(
        shell_span.attribute("gen_ai.tool.name"),
        Some(&json!("shell"))
    );
    assert_eq!(shell_span.attribute("process.exit.code"), Some(&json!(0)));

    let compactions = event(&events, "compaction");
    assert!(!compactions.is_empty(), "a compaction happened");
    assert_eq!(
        named(&received, "capsule.compaction").len(),
        compactions.len()
    );
    let compaction = ids[&derived(compactions[0]["event_id"].as_str().unwrap(), 8)];
    assert_eq!(compaction.parent_span_id, task.span_id);
    assert_eq!(
        compaction.attribute("murmur.hook"),
        Some(&json!("compactor"))
    );
    assert_eq!(
        compaction.attribute("murmur.compaction.tokens_after"),
        Some(&compactions[0]["tokens_after"])
    );

    // Nothing but these spans was sent.
    assert_eq!(
        received.len(),
        2 + inferences.len() + tool_calls.len() + shell.len() + compactions.len()
    );

    // `mur trace export` sends the very same spans from the file.
    let again = RecordingServer::start("");
    let exported = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .arg("trace")
        .arg("export")
        .arg(report["trace_path"].as_str().unwrap())
        .args(["--endpoint", &again.url(), "--json"])
        .run();
    assert_eq!(exported.code, 0, "{exported:#?}");
    assert_eq!(exported.json()["spans"], json!(received.len()));
    assert_eq!(comparable(&spans(&again.requests())), comparable(&received));
}

/// Spans as a set a second export must equal: everything but the order of arrival.
fn comparable(spans: &[ReceivedSpan]) -> Vec<String> {
    let mut all: Vec<String> = spans
        .iter()
        .map(|s| {
            format!(
                "{} {} {} {} {}..{} {:?} {:?} {:?} {:?} {:?}",
                s.trace_id,
                s.span_id,
                s.parent_span_id,
                s.name,
                s.start_unix_nano,
                s.end_unix_nano,
                s.attributes,
                s.events,
                s.links,
                s.status,
                s.resource
            )
        })
        .collect();
    all.sort();
    all
}

const QUEUE: &str = "lifecycle: { task_acceptance: queue }\ninference:\n  model: test-model\n  driver: { artifact: driver-anthropic }";

fn v1_send(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}})
}

fn serve(dir: &Path) -> Served {
    Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        dir,
        &[("EMU_KEY", KEY)],
    )
}

#[test]
fn a_task_continues_the_callers_trace_and_a_peers_task_nests_under_the_sender() {
    let receiver = RecordingServer::start("");
    let peer_emulator = emulator("turns:\n  - reply: { text: \"Lima.\" }\n");
    let peer_dir = tempfile::tempdir().unwrap();
    capsule(
        peer_dir.path(),
        "geographer",
        (&peer_emulator.url(), &receiver.url()),
        "",
        QUEUE,
    );
    let mut peer = serve(peer_dir.path());
    let peer_url = format!("{}/", peer.url);
    let sender_emulator = emulator(
        "turns:\n  - reply: { tool_calls: [ { id: d1, name: ask-geographer, input: { message: \"Capital of Peru?\" } } ] }\n  - reply: { text: done }\n",
    );
    let sender_dir = tempfile::tempdir().unwrap();
    capsule(
        sender_dir.path(),
        "asker",
        (&sender_emulator.url(), &receiver.url()),
        "",
        &format!(
            "{QUEUE}\ncapabilities:\n  network: {{ allow: [\"{}\"] }}\npeers:\n  - {{ url: \"{peer_url}\", name: geographer, description: \"Knows capitals.\", bearer: \"${{GEO_TOKEN}}\" }}",
            peer.url
        ),
    );
    let mut sender = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        sender_dir.path(),
        &[("EMU_KEY", KEY), ("GEO_TOKEN", "geo-token-0123")],
    );

    let client_trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let (_, answer) = post(
        &format!("{}/", sender.url),
        v1_send("Ask the geographer.").to_string().into_bytes(),
        &[(
            "traceparent",
            &format!("00-{client_trace}-{client_span}-01"),
        )],
    );
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer:#}"
    );
    sender.stop();
    peer.stop();

    let received = spans(&receiver.requests());
    let sender_events = served_trace(sender_dir.path());
    let peer_events = served_trace(peer_dir.path());
    let ids = by_id(&received);

    // The sender's task lives in the client's trace, under the client's span, as a server
    // span, linked to its session span (which stays in the session's own trace).
    let task_start = event(&sender_events, "task_start")[0];
    let task = ids[&derived(task_start["event_id"].as_str().unwrap(), 8)];
    assert_eq!(task.trace_id, client_trace);
    assert_eq!(task.parent_span_id, client_span);
    assert_eq!(task.kind, 2, "a server span");
    assert_eq!(task.attribute("murmur.a2a.origin"), Some(&json!("client")));
    let session_start = event(&sender_events, "session_start")[0];
    let session = ids[&derived(session_start["event_id"].as_str().unwrap(), 8)];
    assert_eq!(
        session.trace_id,
        derived(session_start["session_id"].as_str().unwrap(), 16)
    );
    assert_eq!(
        task.links,
        vec![(session.trace_id.clone(), session.span_id.clone())]
    );
    // The task's peer call follows it into the client's trace, under the task's span.
    let tool_calls = event(&sender_events, "tool_call");
    assert_eq!(tool_calls.len(), 1, "{tool_calls:#?}");
    let tool_call = tool_calls[0];
    assert_eq!(tool_call["tool_name"], "ask-geographer");
    assert_eq!(tool_call["status"], "passed");
    let tool_span = ids[&derived(tool_call["event_id"].as_str().unwrap(), 8)];
    assert_eq!(tool_span.trace_id, client_trace);
    assert_eq!(tool_span.parent_span_id, task.span_id);
    // The peer send is an event of the task's span, naming the peer's task.
    let send = event(&sender_events, "a2a_send")[0];
    assert!(send.get("error").is_none(), "{send}");
    assert!(
        task.events
            .iter()
            .any(|(name, attributes)| name == "a2a_send"
                // The peer's state as it took the task (the ask then followed it to its end).
                && attributes
                    .get("murmur.state")
                    .and_then(|state| state.as_str())
                    .is_some_and(|state| ["submitted", "working", "completed"].contains(&state))),
        "{:?}",
        task.events
    );

    // The peer's task nests under the sender's call that asked it (the `ask-geographer`
    // span, under the sender's task), in the same trace.
    let peer_task_start = event(&peer_events, "task_start")[0];
    assert_eq!(peer_task_start["task_id"], send["peer_task_id"]);
    let peer_task = ids[&derived(peer_task_start["event_id"].as_str().unwrap(), 8)];
    assert_eq!(peer_task.trace_id, client_trace);
    assert_eq!(peer_task.parent_span_id, tool_span.span_id);
    assert_eq!(
        peer_task.attribute("murmur.a2a.origin"),
        Some(&json!("client"))
    );
    assert_eq!(
        peer_task.resource.get("service.name"),
        Some(&json!("geographer"))
    );
    let peer_inference = event(&peer_events, "inference")[0];
    let peer_inference = ids[&derived(peer_inference["event_id"].as_str().unwrap(), 8)];
    assert_eq!(peer_inference.trace_id, client_trace);
    assert_eq!(peer_inference.parent_span_id, peer_task.span_id);
}

#[test]
fn an_export_that_fails_is_logged_and_the_session_still_succeeds() {
    // A port that was just listening and is now closed: every export is refused.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let emulator = emulator("turns:\n  - reply: { text: \"Fine.\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "unheard",
        (&emulator.url(), &format!("http://{closed}")),
        "",
        "inference:\n  model: test-model\n  driver: { artifact: driver-anthropic }",
    );
    let (output, report) = run(&file, "Hello.");
    assert_eq!(output.code, 0, "{output:#?}");
    assert_eq!(report["exit_status"], "ok");
    assert!(
        output.stderr.contains("warning[W-TRC-004]"),
        "{}",
        output.stderr
    );
    assert!(
        output
            .stderr
            .contains(&format!("http://{closed}/v1/traces"))
    );
    let workdir = PathBuf::from(report["workdir"].as_str().unwrap());
    let log = std::fs::read_to_string(workdir.join("logs/otel.log")).expect("logs/otel.log");
    assert!(
        log.contains(&format!("OTLP export to http://{closed}/v1/traces failed")),
        "{log}"
    );
    // The trace is whole all the same.
    let events = trace_at(Path::new(report["trace_path"].as_str().unwrap()));
    assert_eq!(events.last().unwrap()["event_type"], "session_end");

    // Nothing is lost: once a receiver listens, `mur trace export` sends the session's spans.
    let export = |endpoint: &str| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .arg("trace")
            .arg("export")
            .arg(&workdir)
            .args(["--endpoint", endpoint])
            .run()
    };
    let receiver = RecordingServer::start("");
    let sent = export(&receiver.url());
    assert_eq!(sent.code, 0, "{sent:#?}");
    let received = spans(&receiver.requests());
    let session_id = report["session_id"].as_str().unwrap();
    assert!(
        sent.stdout
            .contains(&format!("exported 3 spans of session {session_id}")),
        "{}",
        sent.stdout
    );
    assert_eq!(received.len(), 3, "session, task, one inference");
    assert!(
        received
            .iter()
            .all(|s| s.trace_id == derived(session_id, 16))
    );

    // Still nothing listening: exit 3, E-TRC-006, the trace untouched.
    let refused = export(&format!("http://{closed}"));
    assert_eq!(refused.code, 3, "{refused:#?}");
    assert!(
        refused.stderr.contains("error[E-TRC-006]"),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("W-TRC-004"),
        "told once, as the error"
    );
    // Not a URL: exit 2, E-TRC-005.
    let bad = export("collector:4318");
    assert_eq!(bad.code, 2, "{bad:#?}");
    assert!(bad.stderr.contains("error[E-TRC-005]"), "{}", bad.stderr);
    assert_eq!(
        trace_at(Path::new(report["trace_path"].as_str().unwrap())),
        events
    );
}

#[test]
fn an_unfinished_trace_is_exported_with_its_open_spans_ended_as_errors() {
    let emulator = emulator("turns:\n  - reply: { text: \"Cut short.\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(
        dir.path(),
        "cut",
        (&emulator.url(), "http://127.0.0.1:1"),
        "",
        "inference:\n  model: test-model\n  driver: { artifact: driver-anthropic }",
    );
    let (output, report) = run(&file, "Hello.");
    assert_eq!(output.code, 0, "{output:#?}");
    // The session as it would be left by a crash before its task ended.
    let path = PathBuf::from(report["trace_path"].as_str().unwrap());
    let lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|line| !line.contains("\"task_end\"") && !line.contains("\"session_end\""))
        .map(str::to_string)
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let receiver = RecordingServer::start("");
    let sent = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .arg("trace")
        .arg("export")
        .arg(&path)
        .args(["--endpoint", &receiver.url()])
        .run();
    assert_eq!(sent.code, 0, "{sent:#?}");
    let received = spans(&receiver.requests());
    let events = trace_at(&path);
    let last = events.last().unwrap()["timestamp"].as_u64().unwrap();
    for name in ["capsule.session", "capsule.task"] {
        let span = named(&received, name)[0];
        assert_eq!(span.status.0, 2, "{name} is an error: {:?}", span.status);
        assert!(
            span.status.1.contains("the trace ends before"),
            "{:?}",
            span.status
        );
        assert_eq!(
            span.end_unix_nano / 1_000_000,
            last,
            "{name} ends at the last event"
        );
    }
    assert_eq!(named(&received, "capsule.inference")[0].status.0, 0);
}

#[test]
fn without_an_endpoint_nothing_is_exported() {
    let emulator = emulator("turns:\n  - reply: { text: \"Quiet.\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let receiver = RecordingServer::start("");
    let file = capsule(
        dir.path(),
        "quiet",
        (&emulator.url(), &receiver.url()),
        "",
        "inference:\n  model: test-model\n  driver: { artifact: driver-anthropic }",
    );
    // The same capsule with the observability line taken out.
    let text = std::fs::read_to_string(&file).unwrap();
    let text: String = text
        .lines()
        .filter(|line| !line.starts_with("observability:"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let (output, _) = run(&file, "Hello.");
    assert_eq!(output.code, 0, "{output:#?}");
    assert_eq!(receiver.connections(), 0);
    assert!(!output.stderr.contains("W-TRC-004"));
}

#[test]
fn the_receivers_headers_come_from_the_standard_environment_variable() {
    let emulator = emulator("turns:\n  - reply: { text: \"Signed.\" }\n");
    let receiver = RecordingServer::start("");
    let dir = tempfile::tempdir().unwrap();
    capsule(
        dir.path(),
        "signed",
        (&emulator.url(), &receiver.url()),
        "",
        "inference:\n  model: test-model\n  driver: { artifact: driver-anthropic }",
    );
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k-123")
        .arg("run")
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .args(["--task", "Hello."])
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let requests = receiver.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(
            request
                .headers
                .iter()
                .any(|(name, value)| name == "x-collector-key" && value == "k-123"),
            "{:?}",
            request.headers
        );
    }
    assert_eq!(named(&spans(&requests), "capsule.session").len(), 1);
}
