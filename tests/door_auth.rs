//! The door beyond loopback: `door.auth` principals, what a client of another version or
//! another principal gets, media types, and the credentials `mur send` and a capsule's peer
//! tools (`ask-<name>`) present. Each drives the real `mur` over real HTTP on loopback.

use std::path::Path;

use murmur_testkit::a2a_schema::{assert_v1, assert_v03, split_discovery_card};
use murmur_testkit::door::{Served, post, post_answer};
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-door-auth";
const OPS: &str = "ops-token-0123456789";
const CI: &str = "ci-key-9876543210";

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

/// A queue-serving capsule whose door has the principals `ops` (bearer `OPS_TOKEN`) and `ci`
/// (API key `CI_KEY` in `X-Team-Key`), plus `extra` manifest text.
fn capsule(script: &str, extra: &str) -> Capsule {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"name: guarded
version: "0.3.0"
description: A capsule whose door asks who is calling.
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
lifecycle: {{ task_acceptance: queue }}
door:
  auth:
    - {{ principal: ops, bearer: "${{OPS_TOKEN}}" }}
    - {{ principal: ci, api_key: "${{CI_KEY}}", header: X-Team-Key }}
  input_modes: [ text/plain, text/markdown ]
{extra}
"#,
        driver = repo_root().join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        probe = repo_root().join("tests/fixtures/probe").display(),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

impl Capsule {
    fn serve(&self) -> Served {
        Served::start(
            Path::new(env!("CARGO_BIN_EXE_mur")),
            self.dir.path(),
            &[("EMU_KEY", KEY), ("OPS_TOKEN", OPS), ("CI_KEY", CI)],
        )
    }
}

fn send(text: &str, extra: Value) -> Value {
    let mut params =
        json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
        for (key, value) in extra {
            params.insert(key, value);
        }
    }
    json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params})
}

fn call(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": params})
}

const AS_OPS: &[(&str, &str)] = &[("authorization", "Bearer ops-token-0123456789")];
const AS_CI: &[(&str, &str)] = &[("x-team-key", "ci-key-9876543210")];

fn rpc(served: &Served, body: &Value, headers: &[(&str, &str)]) -> Value {
    let (status, answer) = post(
        &format!("{}/", served.url),
        body.to_string().into_bytes(),
        headers,
    );
    assert_eq!(status, 200, "{answer:#}");
    answer
}

/// Panics unless the served capsule says `text` on stderr within 5 s (its output is read by a
/// thread of its own).
fn assert_said(served: &Served, text: &str) {
    let started = std::time::Instant::now();
    while !served.stderr().contains(text) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "never said {text:?}:\n{}",
            served.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn trace(dir: &Path) -> Vec<Value> {
    let session = murmur_testkit::door::session_dir(dir);
    std::fs::read_to_string(session.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_card_declares_the_credentials_and_every_call_without_one_is_401() {
    let capsule = capsule("turns:\n  - reply: { text: \"Hello, ops.\" }\n", "");
    let mut served = capsule.serve();

    // Discovery without a version: one card both versions' clients read.
    let (status, card) = served.get("/.well-known/agent-card.json", &[]);
    assert_eq!(status, 200);
    let (v1_part, v03_part) = split_discovery_card(&card);
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], format!("{}/", served.url));
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["securitySchemes"]["bearer"]["type"], "http");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(
        card["securitySchemes"]["api_key_x-team-key"]["name"],
        "X-Team-Key"
    );
    assert_eq!(
        card["security"],
        json!([{"bearer": []}, {"api_key_x-team-key": []}])
    );
    assert_eq!(
        card["defaultInputModes"],
        json!(["text/plain", "text/markdown"])
    );
    // Each version's own card is valid by its schema and declares the same.
    let (_, v1) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "1.0")]);
    assert_v1("AgentCard", &v1);
    assert!(v1.get("url").is_none(), "{v1:#}");
    assert_eq!(
        v1["securityRequirements"][1]["schemes"]["api_key_x-team-key"],
        json!({"list": []})
    );
    assert_eq!(
        v1["securitySchemes"]["api_key_x-team-key"]["apiKeySecurityScheme"],
        json!({"location": "header", "name": "X-Team-Key"})
    );
    let (_, v03) = served.get("/.well-known/agent.json", &[]);
    assert_v03("AgentCard", &v03);
    assert_eq!(
        v03["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer"})
    );
    assert_eq!(v1_part, v1);
    assert_eq!(v03_part, v03);

    // No credential, a wrong one, one in the wrong header: 401, nothing run.
    let endpoint = format!("{}/", served.url);
    for headers in [
        vec![],
        vec![("authorization", "Bearer not-the-token")],
        vec![("authorization", "Bearer ci-key-9876543210")],
        vec![("x-team-key", "ops-token-0123456789")],
        vec![("authorization", "Basic b3BzOm9wcw==")],
    ] {
        let answer = post_answer(
            &endpoint,
            send("hi", json!({})).to_string().into_bytes(),
            &headers,
        );
        assert_eq!(answer.status, 401, "{headers:?}: {answer:#?}");
        assert_eq!(answer.body["error"]["code"], -32030, "{answer:#?}");
        assert_eq!(answer.body["error"]["data"][0]["reason"], "UNAUTHENTICATED");
        let challenge = answer.www_authenticate.unwrap_or_default();
        assert!(challenge.contains("Bearer"), "{challenge}");
        assert!(challenge.contains("header=\"X-Team-Key\""), "{challenge}");
    }
    // A body the door would refuse anyway is still refused for want of a credential first.
    let garbage = post_answer(&endpoint, b"{not json".to_vec(), &[]);
    assert_eq!(garbage.status, 401);
    assert!(
        capsule.emulator.requests().is_empty(),
        "nothing reached the model"
    );

    // The right credential: the task runs, and the trace names its principal.
    let done = rpc(&served, &send("hi", json!({})), AS_OPS);
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    served.stop();
    let events = trace(capsule.dir.path());
    let received = events
        .iter()
        .find(|e| e["event_type"] == "a2a_task_received")
        .expect("a2a_task_received");
    assert_eq!(received["principal"], "ops");
    assert_eq!(received["origin"], "client");
    assert_eq!(received["trust"], "external");
    let whole = events.iter().map(Value::to_string).collect::<String>();
    assert!(
        !whole.contains(OPS) && !whole.contains(CI),
        "no secret in the trace"
    );
}

#[test]
fn a_task_is_its_principals_alone() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"For ops.\" }\n  - reply: { text: \"For ci.\" }\n",
        "",
    );
    let served = capsule.serve();
    let done = rpc(&served, &send("mine", json!({})), AS_OPS);
    let task = &done["result"]["task"];
    let (task_id, context_id) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    // To ci, ops's task does not exist: get, cancel, subscribe, answer it, list it.
    for method in ["GetTask", "CancelTask", "SubscribeToTask"] {
        let answer = rpc(&served, &call(method, json!({"id": task_id})), AS_CI);
        assert_eq!(answer["error"]["code"], -32001, "{method}: {answer:#}");
    }
    let reply = send("let me in", json!({}));
    let mut reply = reply;
    reply["params"]["message"]["taskId"] = json!(task_id);
    assert_eq!(rpc(&served, &reply, AS_CI)["error"]["code"], -32001);
    let listed = rpc(&served, &call("ListTasks", json!({})), AS_CI);
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed:#}");
    assert_eq!(listed["result"]["totalSize"], 0);
    // Nor may ci add a task to ops's conversation.
    let mut joined = send("what did ops say?", json!({}));
    joined["params"]["message"]["contextId"] = json!(context_id);
    let refused = rpc(&served, &joined, AS_CI);
    assert_eq!(refused["error"]["code"], -32602, "{refused:#}");
    assert!(
        capsule.emulator.requests().len() == 1,
        "ci's refusals reached no model"
    );

    // ops sees its own.
    let got = rpc(&served, &call("GetTask", json!({"id": task_id})), AS_OPS);
    assert_eq!(got["result"]["id"], task_id);
    let listed = rpc(&served, &call("ListTasks", json!({})), AS_OPS);
    assert_eq!(listed["result"]["totalSize"], 1, "{listed:#}");
    // ci's own task is ci's.
    let theirs = rpc(&served, &send("ours", json!({})), AS_CI);
    let theirs_id = theirs["result"]["task"]["id"].as_str().unwrap();
    let got = rpc(&served, &call("GetTask", json!({"id": theirs_id})), AS_OPS);
    assert_eq!(got["error"]["code"], -32001);
}

#[test]
fn versions_and_media_types_the_door_does_not_speak_get_their_errors() {
    let capsule = capsule("turns:\n  - reply: { text: \"Plain text.\" }\n", "");
    let served = capsule.serve();
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        AS_OPS.iter().chain(extra).copied().collect()
    };
    for version in ["99.0", "2.0", "0.2", "1", "one"] {
        let answer = rpc(
            &served,
            &send("hi", json!({})),
            &with(&[("A2A-Version", version)]),
        );
        assert_eq!(answer["error"]["code"], -32009, "{version}: {answer:#}");
        assert_eq!(answer["id"], 7);
        assert_eq!(
            answer["error"]["data"][0]["metadata"]["requestedVersion"],
            version
        );
    }
    let file_part = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
        "messageId": "m-2", "role": "ROLE_USER",
        "parts": [{"url": "https://example.invalid/cat.png", "mediaType": "image/png", "filename": "cat.png"}]}}});
    let data_part = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
        "messageId": "m-3", "role": "ROLE_USER", "parts": [{"text": "see"}, {"data": {"a": 1}}]}}});
    let typed_text = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
        "messageId": "m-4", "role": "ROLE_USER", "parts": [{"text": "<b>hi</b>", "mediaType": "text/html"}]}}});
    let v03_file = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m-5", "role": "user",
        "parts": [{"kind": "file", "file": {"bytes": "aGk=", "mimeType": "application/pdf"}}]}}});
    for (body, media) in [
        (&file_part, "image/png"),
        (&data_part, "application/json"),
        (&typed_text, "text/html"),
        (&v03_file, "application/pdf"),
    ] {
        let answer = rpc(&served, body, AS_OPS);
        assert_eq!(answer["error"]["code"], -32005, "{answer:#}");
        assert_eq!(answer["error"]["data"][0]["metadata"]["mediaType"], media);
    }
    let wants_png = send(
        "draw",
        json!({"configuration": {"acceptedOutputModes": ["image/png"]}}),
    );
    assert_eq!(rpc(&served, &wants_png, AS_OPS)["error"]["code"], -32005);
    assert!(
        capsule.emulator.requests().is_empty(),
        "nothing refused reached the model"
    );
    // What the capsule takes and gives is served as usual, whatever the case and parameters.
    let markdown = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {
        "message": {"messageId": "m-6", "role": "ROLE_USER",
                    "parts": [{"text": "# hi", "mediaType": "Text/Markdown; charset=utf-8"}]},
        "configuration": {"acceptedOutputModes": ["application/json", "text/plain"]}}});
    let answer = rpc(&served, &markdown, &with(&[("A2A-Version", "1.0")]));
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer:#}"
    );
}

#[test]
fn mur_send_presents_a_credential_from_the_credential_sources() {
    let capsule = capsule(
        "turns:\n  - reply: { text: \"First.\" }\n  - reply: { text: \"Second.\" }\n  - reply: { text: \"Third.\" }\n",
        "",
    );
    let served = capsule.serve();
    let url = format!("{}/", served.url);
    let home = tempfile::tempdir().unwrap();
    let mur = || {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home.path())
            .arg("send")
    };

    let without = mur().args([&url, "--text", "hi"]).run();
    assert_eq!(without.code, 3, "{without:#?}");
    assert!(without.stderr.contains("-32030"), "{without:#?}");

    // From the environment, as a bearer token.
    let bearer = mur()
        .env("MY_OPS", OPS)
        .args([&url, "--text", "hi", "--credential", "MY_OPS"])
        .run();
    assert_eq!(bearer.code, 0, "{bearer:#?}");
    assert!(bearer.stdout.contains("First."), "{bearer:#?}");

    // From the credentials file, as an API key, chosen by a capsule's `peers:` entry.
    std::fs::write(
        home.path().join("credentials.yaml"),
        format!("TEAM_KEY: {CI}\n"),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(home.path().join("credentials.yaml"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o600);
    std::fs::set_permissions(home.path().join("credentials.yaml"), permissions).unwrap();
    // The caller's model asks the capsule through its peer tool `ask-guarded`.
    let caller_model = Emulator::builder(
        Script::from_yaml(
            "turns:\n  - reply: { tool_calls: [ { id: g1, name: ask-guarded, input: { message: hi } } ] }\n  - reply: { text: done }\n",
        )
        .unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    let caller = tempfile::tempdir().unwrap();
    std::fs::write(
        caller.path().join("murmur.yaml"),
        caller_model.capsule_manifest(
            "caller",
            "",
            &format!(
                "capabilities:\n  network: {{ allow: [ \"{url}\" ] }}\npeers:\n  - {{ url: \"{url}\", name: guarded, description: \"Answers.\", api_key: \"${{TEAM_KEY}}\", header: X-Team-Key }}\n"
            ),
        ),
    )
    .unwrap();
    let keyed = mur()
        .args([&url, "--text", "hi", "--capsule"])
        .arg(caller.path())
        .run();
    assert_eq!(keyed.code, 0, "{keyed:#?}");
    assert!(keyed.stdout.contains("Second."), "{keyed:#?}");
    assert!(!keyed.stdout.contains(CI) && !keyed.stderr.contains(CI));

    // The capsule's peer tool presents the same credential, from the same file, when its
    // model asks the peer.
    let asked = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home.path())
        .env("EMU_KEY", KEY)
        .args(["run", "--task", "Ask the guarded capsule."])
        .arg(caller.path())
        .arg("--workdir")
        .arg(caller.path().join("work"))
        .run();
    assert_eq!(asked.code, 0, "{asked:#?}");
    let result = caller_model.requests()[1].body.to_string();
    assert!(
        result.contains("The peer `guarded` answered") && result.contains("Third."),
        "{result}"
    );
    assert!(!result.contains(CI) && !asked.stderr.contains(CI));

    // A credential set nowhere is named, and nothing is sent.
    let unset = mur()
        .args([&url, "--text", "hi", "--credential", "NOWHERE_SET"])
        .run();
    assert_eq!(unset.code, 2, "{unset:#?}");
    assert!(unset.stderr.contains("error[E-RUN-012]"), "{unset:#?}");
    assert!(unset.stderr.contains("NOWHERE_SET"), "{unset:#?}");
    assert_eq!(capsule.emulator.requests().len(), 3);
}

#[test]
fn a_peer_capsule_presents_its_credential_and_its_tasks_inherit_its_trust() {
    // The receiving capsule knows the sender as a principal with `trust: peer`.
    let peer = capsule("turns:\n  - reply: { text: \"Lima.\" }\n", "");
    let manifest = peer.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "  input_modes:",
        "    - { principal: capsule-a, bearer: \"${A_TOKEN}\", trust: peer }\n  input_modes:",
    );
    std::fs::write(&manifest, text).unwrap();
    let mut peer_served = Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        peer.dir.path(),
        &[
            ("EMU_KEY", KEY),
            ("OPS_TOKEN", OPS),
            ("CI_KEY", CI),
            ("A_TOKEN", "a-token-555"),
        ],
    );

    // The sender runs an operator's task and asks the peer through its peer tool.
    let emulator = Emulator::builder(
        Script::from_yaml(
            "turns:\n  - reply: { tool_calls: [ { id: d1, name: ask-guarded, input: { message: \"Capital of Peru?\" } } ] }\n  - reply: { text: done }\n  - reply: { tool_calls: [ { id: d2, name: ask-guarded, input: { message: \"Capital of Peru?\" } } ] }\n  - reply: { text: done }\n",
        )
        .unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    let sender = tempfile::tempdir().unwrap();
    std::fs::write(
        sender.path().join("murmur.yaml"),
        format!(
            r#"name: sender
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
capabilities:
  network: {{ allow: [ "{origin}" ] }}
peers:
  - {{ url: "{origin}", name: guarded, description: "Knows capitals.", bearer: "${{A_TOKEN}}" }}
"#,
            driver = repo_root().join("artifacts/driver-anthropic").display(),
            endpoint = emulator.url(),
            origin = peer_served.url,
        ),
    )
    .unwrap();
    let ran = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("A_TOKEN", "a-token-555")
        .args(["run", "--json", "--task", "Ask the peer."])
        .arg(sender.path())
        .arg("--workdir")
        .arg(sender.path().join("work"))
        .run();
    assert_eq!(ran.code, 0, "{ran:#?}");
    let to_model = emulator.requests()[1].body.to_string();
    assert!(
        to_model.contains("The peer `guarded` answered") && to_model.contains("Lima."),
        "{to_model}"
    );
    let peer_saw = peer.emulator.requests()[0].body.to_string();
    assert!(peer_saw.contains("Capital of Peru?"), "{peer_saw}");

    // Without the credential's value the send is refused before any connection, naming it.
    let refused = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "Ask the peer."])
        .arg(sender.path())
        .arg("--workdir")
        .arg(sender.path().join("work-unset"))
        .run();
    assert_eq!(refused.code, 0, "{refused:#?}");
    let to_model = emulator.requests()[3].body.to_string();
    assert!(to_model.contains("E-RUN-012"), "{to_model}");
    assert!(to_model.contains("A_TOKEN"), "{to_model}");
    assert!(to_model.contains("set nowhere"), "{to_model}");

    peer_served.stop();
    let received: Vec<Value> = trace(peer.dir.path())
        .into_iter()
        .filter(|e| e["event_type"] == "a2a_task_received")
        .collect();
    assert_eq!(received.len(), 1, "{received:#?}");
    assert_eq!(received[0]["principal"], "capsule-a");
    assert_eq!(received[0]["origin"], "peer");
    // The sender's task was the operator's; the peer's task inherits that.
    assert_eq!(received[0]["trust"], "operator");
    assert!(
        received[0].get("claimed_trust").is_none(),
        "{:#}",
        received[0]
    );
}

#[test]
fn a_door_with_principals_may_leave_loopback_and_one_without_a_credential_value_does_not_start() {
    let capsule = capsule("turns: []\n", "");
    // 192.0.2.1 is a documentation address no machine has: past the auth check, the bind fails.
    let beyond = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("OPS_TOKEN", OPS)
        .env("CI_KEY", CI)
        .args(["run", "--serve", "--json", "--host", "192.0.2.1"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .run();
    assert_eq!(beyond.json()["error"]["code"], "E-A2A-001", "{beyond:#?}");
    assert!(!beyond.stderr.contains("W-A2A-006"), "{beyond:#?}");

    let unset = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("OPS_TOKEN", OPS)
        .args(["run", "--serve", "--json"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .run();
    assert_eq!(unset.code, 2, "{unset:#?}");
    assert_eq!(unset.json()["error"]["code"], "E-RUN-012", "{unset:#?}");
    assert!(
        unset.stderr.contains("`ci`") && unset.stderr.contains("CI_KEY"),
        "{unset:#?}"
    );
    assert!(!unset.stdout.contains("listening on"));

    let twins = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("OPS_TOKEN", OPS)
        .env("CI_KEY", OPS)
        .args(["run", "--serve", "--json"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .run();
    assert_eq!(twins.json()["error"]["code"], "E-A2A-009", "{twins:#?}");
    assert!(!twins.stderr.contains(OPS), "{twins:#?}");
}

#[test]
fn files_a_task_writes_under_out_come_back_as_file_and_data_parts() {
    let big = "x".repeat(300_000);
    let write = |id: &str, path: &str, content: &str| json!({"id": id, "name": "probe", "input": {"action": "write_file", "path": path, "content": content}});
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            write("w1", "out/report.csv", "a,b\n1,2\n"),
            write("w2", "out/result.json", "{\"answer\": 42}"),
            write("w3", "out/big.bin", &big),
            write("w4", "out/page.html", "<p>hi</p>"),
            {"id": "w5", "name": "probe", "input": {"action": "symlink", "target": "/etc/hostname", "path": "out/leak.txt"}},
        ]}},
        {"reply": {"text": "Files are ready."}},
        {"reply": {"tool_calls": [write("w6", "out/second.csv", "c\n3\n")]}},
        {"reply": {"text": "Another file."}},
        {"reply": {"tool_calls": [write("w7", "out/third.csv", "d\n4\n")]}},
        {"reply": {"text": "A third file."}},
    ]});
    let capsule = capsule(
        &script.to_string(),
        "  output_modes: [ text/plain, text/csv, application/json, application/octet-stream ]",
    );
    let served = capsule.serve();
    let (_, card) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "1.0")]);
    assert_eq!(
        card["defaultOutputModes"],
        json!([
            "text/plain",
            "text/csv",
            "application/json",
            "application/octet-stream"
        ])
    );
    let done = rpc(&served, &send("make files", json!({})), AS_OPS);
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done:#}");
    let task_id = task["id"].as_str().unwrap();
    let artifacts = task["artifacts"].as_array().unwrap();
    let named = |name: &str| {
        artifacts
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no artifact {name}: {artifacts:#?}"))
    };
    assert_eq!(named("result")["parts"], json!([{"data": {"answer": 42}}]));
    let csv = &named("report.csv")["parts"][0];
    assert_eq!(csv["mediaType"], "text/csv");
    assert_eq!(csv["filename"], "report.csv");
    assert_eq!(csv["raw"], "YSxiCjEsMgo=", "inline, base64");
    let by_url = &named("big.bin")["parts"][0];
    assert_eq!(by_url["mediaType"], "application/octet-stream");
    let url = by_url["url"].as_str().unwrap();
    assert_eq!(url, format!("{}/files/{task_id}/0", served.url));
    // What the capsule does not declare, and a link, are not given back.
    for absent in ["page.html", "leak.txt", "result.txt"] {
        assert!(
            artifacts.iter().all(|a| a["name"] != absent),
            "{absent}: {artifacts:#?}"
        );
    }
    assert_said(&served, "out/page.html (text/html) is not given back");

    // `mur send` names what came back beside the answer.
    let sent = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("OPS_TOKEN", OPS)
        .args([
            "send",
            &format!("{}/", served.url),
            "--text",
            "again",
            "--credential",
            "OPS_TOKEN",
        ])
        .run();
    assert_eq!(sent.code, 0, "{sent:#?}");
    assert!(sent.stdout.contains("Another file."), "{sent:#?}");
    assert!(
        sent.stderr
            .contains("[file] second.csv (text/csv, 4 bytes)"),
        "{sent:#?}"
    );

    // The file by URL: to its principal only.
    let client = murmur_testkit::door::client_builder().build().unwrap();
    let fetch = |headers: &[(&str, &str)]| {
        let mut request = client.get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().unwrap()
    };
    let mine = fetch(AS_OPS);
    assert_eq!(mine.status(), 200);
    assert_eq!(
        mine.headers()["content-type"].to_str().unwrap(),
        "application/octet-stream"
    );
    assert_eq!(mine.bytes().unwrap().len(), 300_000);
    assert_eq!(fetch(AS_CI).status(), 404);
    assert_eq!(fetch(&[]).status(), 401);
    let other = client
        .get(format!("{}/files/{task_id}/1", served.url))
        .header("authorization", format!("Bearer {OPS}"))
        .send()
        .unwrap();
    assert_eq!(other.status(), 404);

    // A client that takes only text gets no file; the operator is told why.
    let text_only = send(
        "one more",
        json!({"configuration": {"acceptedOutputModes": ["text/plain"]}}),
    );
    let done = rpc(&served, &text_only, AS_OPS);
    let artifacts = done["result"]["task"]["artifacts"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&Value> = artifacts.iter().map(|a| &a["name"]).collect();
    assert!(names.contains(&&json!("response")), "{done:#}");
    assert!(!names.contains(&&json!("third.csv")), "{done:#}");
    assert_said(
        &served,
        "out/third.csv (text/csv) is not given back: the client does not accept that type",
    );
}

/// Waits until `server` has recorded `count` requests (at most 15 s) and returns them.
fn recorded(
    server: &murmur_testkit::RecordingServer,
    count: usize,
    served: &Served,
) -> Vec<murmur_testkit::RecordedRequest> {
    let started = std::time::Instant::now();
    loop {
        let requests = server.requests();
        if requests.len() >= count {
            return requests;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{} of {count} notifications arrived: {requests:#?}\n{}",
            requests.len(),
            served.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn header<'a>(request: &'a murmur_testkit::RecordedRequest, name: &str) -> &'a str {
    request
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default()
}

#[test]
fn a_tasks_webhook_hears_its_status_changes_with_its_token_and_retries() {
    // The webhook is down for its first request: the door tries again.
    let hook = murmur_testkit::RecordingServer::start_failing("", 1);
    let capsule = capsule(
        "turns:\n  - reply: { text: \"First.\" }\n  - reply: { text: \"Second.\" }\n",
        &format!(
            "capabilities:\n  network: {{ allow: [ \"{}\" ] }}",
            hook.url()
        ),
    );
    let served = capsule.serve();
    let (_, card) = served.get("/.well-known/agent-card.json", &[("A2A-Version", "1.0")]);
    assert_eq!(card["capabilities"]["pushNotifications"], true);

    let with_hook = send(
        "notify me",
        json!({"configuration": {"taskPushNotificationConfig": {
            "url": format!("{}/hook", hook.url()), "token": "tok-1",
            "authentication": {"scheme": "Bearer", "credentials": "hook-cred"}}}}),
    );
    let done = rpc(&served, &with_hook, AS_OPS);
    let task_id = done["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // `working` (refused once, then again), then the ended task.
    let requests = recorded(&hook, 3, &served);
    let bodies: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        bodies[0], bodies[1],
        "the refused notification was tried again"
    );
    assert_eq!(
        bodies[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(bodies[1]["statusUpdate"]["taskId"], task_id.as_str());
    assert_eq!(bodies[2]["task"]["id"], task_id.as_str());
    assert_eq!(bodies[2]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_v1("StreamResponse", &bodies[2]);
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/hook");
        assert_eq!(header(request, "x-a2a-notification-token"), "tok-1");
        assert_eq!(header(request, "authorization"), "Bearer hook-cred");
        assert_eq!(header(request, "content-type"), "application/a2a+json");
    }

    // The config methods, on ops's task: create (id chosen), get, list, delete.
    let create = call(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task_id, "url": format!("{}/other", hook.url())}),
    );
    let created = rpc(&served, &create, AS_OPS);
    assert_eq!(created["result"]["taskId"], task_id.as_str(), "{created:#}");
    let config_id = created["result"]["id"].as_str().unwrap().to_string();
    assert_ne!(config_id, "");
    let listed = rpc(
        &served,
        &call(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task_id}),
        ),
        AS_OPS,
    );
    assert_eq!(
        listed["result"]["configs"].as_array().unwrap().len(),
        2,
        "{listed:#}"
    );
    // One config of the task, as a principal asks for it.
    let on_config = |method: &str, who: &[(&str, &str)]| {
        rpc(
            &served,
            &call(method, json!({"taskId": task_id, "id": config_id})),
            who,
        )
    };
    let got = on_config("GetTaskPushNotificationConfig", AS_OPS);
    assert_eq!(got["result"]["url"], format!("{}/other", hook.url()));
    // To another principal the task and its configs do not exist.
    for method in [
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        let theirs = on_config(method, AS_CI);
        assert_eq!(theirs["error"]["code"], -32001, "{method}: {theirs:#}");
    }
    let deleted = on_config("DeleteTaskPushNotificationConfig", AS_OPS);
    assert_eq!(deleted["result"], json!({}), "{deleted:#}");
    let again = on_config("DeleteTaskPushNotificationConfig", AS_OPS);
    assert_eq!(again["result"], json!({}), "deleting twice is no error");
    let gone = on_config("GetTaskPushNotificationConfig", AS_OPS);
    assert_eq!(gone["error"]["code"], -32001);

    // Where the capsule may not reach, nothing is registered or sent.
    for url in [
        "http://127.0.0.1:1/hook".to_string(),
        format!("http://localhost:{}/hook", hook.addr().port()),
        "http://169.254.169.254/latest/meta-data".to_string(),
        "file:///etc/passwd".to_string(),
    ] {
        let refused = rpc(
            &served,
            &call(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task_id, "url": url}),
            ),
            AS_OPS,
        );
        assert_eq!(refused["error"]["code"], -32602, "{url}: {refused:#}");
        assert_eq!(
            refused["error"]["data"][0]["fieldViolations"][0]["field"], "url",
            "{refused:#}"
        );
    }
    let refused_send = send(
        "notify elsewhere",
        json!({"configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:1/"}}}),
    );
    let refused = rpc(&served, &refused_send, AS_OPS);
    assert_eq!(refused["error"]["code"], -32602, "{refused:#}");

    // In A2A 0.3 the webhook gets the task itself.
    let v03 = json!({"jsonrpc": "2.0", "id": 9, "method": "message/send", "params": {
        "message": {"kind": "message", "messageId": "m-9", "role": "user",
                    "parts": [{"kind": "text", "text": "and in 0.3"}]},
        "configuration": {"pushNotificationConfig": {"url": format!("{}/v03", hook.url()), "token": "tok-3"}}}});
    let done = rpc(&served, &v03, AS_OPS);
    assert_eq!(done["result"]["status"]["state"], "completed", "{done:#}");
    let requests = recorded(&hook, 5, &served);
    let last: Value = serde_json::from_slice(&requests[4].body).unwrap();
    assert_eq!(last["kind"], "task");
    assert_eq!(last["status"]["state"], "completed");
    assert_v03("Task", &last);
    assert_eq!(header(&requests[4], "x-a2a-notification-token"), "tok-3");
    assert_eq!(header(&requests[4], "content-type"), "application/json");
    assert_eq!(requests.len(), 5, "the deleted webhook heard nothing");
}

#[test]
fn a_reply_to_a_task_waiting_for_input_may_register_its_webhook() {
    let hook = murmur_testkit::RecordingServer::start("");
    let capsule = capsule(
        "turns:\n  - reply: { tool_calls: [ { id: ask, name: probe, input: { action: request_input, prompt: \"Which one?\" } } ] }\n  - reply: { text: \"Done with it.\" }\n",
        &format!(
            "capabilities:\n  network: {{ allow: [ \"{}\" ] }}",
            hook.url()
        ),
    );
    let served = capsule.serve();
    let waiting = rpc(&served, &send("start", json!({})), AS_OPS);
    let task = &waiting["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{waiting:#}"
    );
    let task_id = task["id"].as_str().unwrap().to_string();
    let mut reply = send(
        "the second",
        json!({"configuration": {"taskPushNotificationConfig": {"url": format!("{}/late", hook.url())}}}),
    );
    reply["params"]["message"]["taskId"] = json!(task_id);
    let done = rpc(&served, &reply, AS_OPS);
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done:#}"
    );
    // From the reply on: working again, then the ended task.
    let requests = recorded(&hook, 2, &served);
    let bodies: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        bodies[0]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(bodies[1]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(bodies[1]["task"]["id"], task_id.as_str());
}

/// A capsule like [`capsule`]'s whose conversations are threaded: a task sent into a context
/// goes on with the conversation the session saved for it.
fn threaded(script: &str) -> Capsule {
    let capsule = capsule(script, "");
    let path = capsule.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "lifecycle: { task_acceptance: queue }",
        "lifecycle: { task_acceptance: queue, conversation: threaded }",
    );
    std::fs::write(&path, text).unwrap();
    capsule
}

/// Panics unless `answer` refuses a message for naming another principal's context.
fn assert_others_context(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32602, "{answer:#}");
    assert_eq!(
        answer["error"]["data"][0]["fieldViolations"][0]["field"], "message.contextId",
        "{answer:#}"
    );
}

#[test]
fn a_context_stays_its_principals_after_a_thousand_later_tasks_evict_its_tasks() {
    const SECRET: &str = "remember: the vault code is 7412, for ops only";
    // Every fresh context's first turn is answered at once; the second turn is ops's own
    // follow-up.
    let capsule = threaded(
        "conversations:\n  - task: \"\"\n    turns:\n      - { text: noted }\n      - { text: \"it was 7412\" }\n",
    );
    let served = capsule.serve();
    let opened = rpc(&served, &send(SECRET, json!({})), AS_OPS);
    let task = &opened["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{opened:#}"
    );
    let task_id = task["id"].as_str().unwrap().to_string();
    let context_id = task["contextId"].as_str().unwrap().to_string();
    let into_ops_context = |text: &str| {
        let mut message = send(text, json!({}));
        message["params"]["message"]["contextId"] = json!(context_id);
        message
    };
    assert_others_context(&rpc(
        &served,
        &into_ops_context("what is the vault code?"),
        AS_CI,
    ));

    // As many later tasks of ci's as the door keeps ended tasks: ops's task is forgotten.
    let started = std::time::Instant::now();
    let mut last = String::new();
    for n in 0..murmur_door::tasks::FINISHED_KEPT {
        let queued = rpc(
            &served,
            &send(
                &format!("chore {n}"),
                json!({"configuration": {"returnImmediately": true}}),
            ),
            AS_CI,
        );
        last = queued["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{queued:#}"))
            .to_string();
    }
    loop {
        let got = rpc(&served, &call("GetTask", json!({"id": last})), AS_CI);
        if got["result"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(240),
            "the chores did not finish: {got:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eprintln!(
        "{} tasks through the door in {:?}",
        murmur_door::tasks::FINISHED_KEPT,
        started.elapsed()
    );
    let gone = rpc(&served, &call("GetTask", json!({"id": task_id})), AS_OPS);
    assert_eq!(
        gone["error"]["code"], -32001,
        "ops's task is forgotten: {gone:#}"
    );

    // Its conversation is still kept, and still ops's alone.
    assert_others_context(&rpc(
        &served,
        &into_ops_context("what is the vault code?"),
        AS_CI,
    ));
    let carrying = |requests: &[murmur_testkit::emulator::Recorded]| {
        requests
            .iter()
            .filter(|request| request.body.to_string().contains(SECRET))
            .count()
    };
    assert_eq!(
        carrying(&capsule.emulator.requests()),
        1,
        "only ops's own task sent the secret to the model"
    );
    // ops goes on with it: the model reads the conversation in ops's task.
    let again = rpc(&served, &into_ops_context("what was the code?"), AS_OPS);
    assert_eq!(
        again["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{again:#}"
    );
    let requests = capsule.emulator.requests();
    assert_eq!(carrying(&requests), 2);
    assert!(requests.last().unwrap().body.to_string().contains(SECRET));
}

/// What `alice` writes in her first task; no request of `bob`'s may carry it.
const ALICE_SECRET: &str = "alice's secret: 4711";
const AS_ALICE: &[(&str, &str)] = AS_OPS;
const AS_BOB: &[(&str, &str)] = AS_CI;

/// A capsule like [`capsule`]'s whose principals are `alice` (bearer `OPS_TOKEN`) and `bob`
/// (API key `CI_KEY`), with the `read-file` and `write-file` tools and a shell of `bash` and
/// `cat`.
fn two_principals(script: &str) -> Capsule {
    let capsule = capsule(script, "capabilities:\n  shell: { allow: [ bash, cat ] }");
    let path = capsule.dir.path().join("murmur.yaml");
    let tools = format!(
        "  - {{ name: read-file, version: \"0.1.0\", runtime: tool, path: {} }}\n  - {{ name: write-file, version: \"0.1.0\", runtime: tool, path: {} }}\ninference:\n",
        repo_root().join("artifacts/read-file").display(),
        repo_root().join("artifacts/write-file").display(),
    );
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("inference:\n", &tools, 1)
        .replace("principal: ops,", "principal: alice,")
        .replace("principal: ci,", "principal: bob,");
    std::fs::write(&path, text).unwrap();
    capsule
}

/// One tool call of a scripted reply.
fn tool_call(id: &str, name: &str, input: Value) -> Value {
    json!({"id": id, "name": name, "input": input})
}

fn shell(id: &str, script: &str) -> Value {
    tool_call(
        id,
        "shell",
        json!({"binary": "bash", "args": ["-c", script]}),
    )
}

/// What the model was handed back in `request`: call id to (the text inside the fence, whether
/// it was marked an error).
fn handed_back(request: &Value) -> std::collections::BTreeMap<String, (String, bool)> {
    let mut found = std::collections::BTreeMap::new();
    for message in request["messages"].as_array().unwrap() {
        for block in message["content"].as_array().cloned().unwrap_or_default() {
            if block["type"] != "tool_result" {
                continue;
            }
            let text = block["content"]
                .as_array()
                .map(|parts| parts[0]["text"].as_str().unwrap_or_default().to_string())
                .or_else(|| block["content"].as_str().map(str::to_string))
                .unwrap_or_default();
            let inner = text
                .split_once(">\n")
                .and_then(|(_, rest)| rest.rsplit_once("\n</untrusted-content>"))
                .map_or(text.clone(), |(inner, _)| inner.to_string());
            found.insert(
                block["tool_use_id"].as_str().unwrap().to_string(),
                (inner, block["is_error"].as_bool().unwrap_or(false)),
            );
        }
    }
    found
}

/// The paths of `changes.created` of a `task_end` or `session_end`.
fn created(event: &Value) -> Vec<&str> {
    event["changes"]["created"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes: {event:#}"))
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect()
}

#[test]
fn a_file_one_principals_task_writes_is_not_readable_by_anothers() {
    let script = json!({"turns": [
        // alice's task: a file through the write-file tool, one through the shell.
        {"reply": {"tool_calls": [
            tool_call("a_write", "write-file", json!({"path": "secret.md", "content": ALICE_SECRET})),
            shell("a_shell", "echo shell > shell.txt"),
        ]}},
        {"reply": {"text": "Written."}},
        // bob's task: the same names, the shell, and the way up to alice's directory.
        {"reply": {"tool_calls": [
            tool_call("b_read", "read-file", json!({"path": "secret.md"})),
            shell("b_shell", "pwd; cat secret.md ../alice/secret.md shell.txt"),
            tool_call("b_up", "read-file", json!({"path": "../alice/secret.md"})),
        ]}},
        {"reply": {"text": "Nothing there."}},
        // alice again: her file is where she left it.
        {"reply": {"tool_calls": [
            tool_call("a_read", "read-file", json!({"path": "secret.md"})),
        ]}},
        {"reply": {"text": "Still there."}},
    ]});
    let capsule = two_principals(&script.to_string());
    let mut served = capsule.serve();
    for (who, text) in [
        (AS_ALICE, "write it down"),
        (AS_BOB, "what did alice write?"),
        (AS_ALICE, "read it back"),
    ] {
        let done = rpc(&served, &send(text, json!({})), who);
        assert_eq!(
            done["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{text}: {done:#}\n{}",
            served.stderr()
        );
    }
    let requests = capsule.emulator.requests();
    assert_eq!(requests.len(), 6, "{}", served.stderr());

    // alice's calls worked.
    let alice = handed_back(&requests[1].body);
    assert!(!alice["a_write"].1, "{alice:#?}");
    let (shell_answer, is_error) = &alice["a_shell"];
    assert!(!is_error, "{alice:#?}");
    let shell_answer: Value = serde_json::from_str(shell_answer).unwrap();
    assert_eq!(shell_answer["exit_code"], 0, "{shell_answer:#}");

    // bob's: every read failed, and nothing of alice's reached his model.
    let bob = handed_back(&requests[3].body);
    assert_eq!(bob.len(), 3, "{bob:#?}");
    for id in ["b_read", "b_up"] {
        let (text, is_error) = &bob[id];
        assert!(is_error, "{id} read something: {text}");
    }
    let (shell_answer, is_error) = &bob["b_shell"];
    assert!(!is_error, "a non-zero exit is data: {shell_answer}");
    let shell_answer: Value = serde_json::from_str(shell_answer).unwrap();
    assert_eq!(shell_answer["exit_code"], 1, "{shell_answer:#}");
    let stdout = shell_answer["stdout"].as_str().unwrap();
    assert!(stdout.ends_with("/workspace/bob\n"), "bob's cwd: {stdout}");
    let stderr = shell_answer["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("secret.md: No such file or directory"),
        "{stderr}"
    );
    assert!(
        stderr.contains("shell.txt: No such file or directory"),
        "{stderr}"
    );
    assert!(
        stderr.contains("../alice/secret.md: Permission denied"),
        "the kernel refused the way up: {stderr}"
    );
    for request in &requests[2..4] {
        let body = request.body.to_string();
        assert!(
            !body.contains("4711") && !body.contains("write it down"),
            "a request of bob's task carries alice's: {body}"
        );
    }

    // alice reads her own file back: the read bob was refused works for its owner.
    let (text, is_error) = &handed_back(&requests[5].body)["a_read"];
    assert!(!is_error && text.contains(ALICE_SECRET), "{text}");

    // On disk: alice's files in her directory, none in bob's; each has its own MURMUR.md.
    served.stop();
    let record = murmur_testkit::door::session_dir(capsule.dir.path());
    let workspace = record.join("workspace");
    let alice_dir = workspace.join("alice");
    let bob_dir = workspace.join("bob");
    assert_eq!(
        std::fs::read_to_string(alice_dir.join("secret.md")).unwrap(),
        ALICE_SECRET
    );
    assert_eq!(
        std::fs::read_to_string(alice_dir.join("shell.txt")).unwrap(),
        "shell\n"
    );
    for dir in [&alice_dir, &bob_dir] {
        let guide = std::fs::read_to_string(dir.join("MURMUR.md")).unwrap();
        assert!(
            guide.starts_with("# guarded 0.3.0\n"),
            "{}: {guide}",
            dir.display()
        );
    }
    let mut bobs: Vec<String> = std::fs::read_dir(&bob_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    bobs.sort();
    // The shells' temporary files went with the session: no `.murmur-scratch/` is left in either.
    assert_eq!(bobs, ["MURMUR.md", "out"], "bob's directory");
    assert!(!alice_dir.join(".murmur-scratch").exists());
    for name in ["secret.md", "shell.txt"] {
        assert!(
            !workspace.join(name).exists(),
            "{name} in the shared workspace"
        );
    }

    // The record lists alice's files under `alice/`, in her task's changes and the session's.
    let events = trace(capsule.dir.path());
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["event_type"] == "task_end")
        .collect();
    assert_eq!(ends.len(), 3);
    assert_eq!(created(ends[0]), ["alice/secret.md", "alice/shell.txt"]);
    assert_eq!(
        ends[0]["changes"]["created"][0]["sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(ALICE_SECRET))
    );
    assert_eq!(created(ends[1]), Vec::<&str>::new(), "{:#}", ends[1]);
    let end = events.last().unwrap();
    assert_eq!(end["event_type"], "session_end");
    assert_eq!(created(end), ["alice/secret.md", "alice/shell.txt"]);
}

#[test]
fn one_directory_worked_in_place_is_served_to_one_principal_only() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            tool_call("w", "write-file", json!({"path": "notes/plan.md", "content": "in place"})),
            shell("s", "echo shell > shell.txt"),
        ]}},
        {"reply": {"text": "Done here."}},
    ]});
    let capsule = two_principals(&script.to_string());
    let place = tempfile::tempdir().unwrap();
    std::fs::write(place.path().join("existing.md"), "was here\n").unwrap();

    // Two principals, one directory: refused before anything is served or recorded.
    let refused = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("OPS_TOKEN", OPS)
        .env("CI_KEY", CI)
        .args(["run", "--serve", "--json", "--port", "0"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .arg("--workspace")
        .arg(place.path())
        .run();
    assert_eq!(refused.code, 2, "{refused:#?}");
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "E-RUN-033", "{refused:#?}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("2 principals"), "{message}");
    assert!(!refused.stdout.contains("listening on"), "{refused:#?}");
    assert!(
        !capsule.dir.path().join("work").exists(),
        "no session was recorded"
    );
    let untouched: Vec<_> = std::fs::read_dir(place.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(untouched, ["existing.md"]);
    assert!(capsule.emulator.requests().is_empty());

    // One principal: served, and its task works in the directory itself.
    let path = capsule.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let alone: String = text
        .lines()
        .filter(|line| !line.contains("principal: bob,"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(alone, text);
    std::fs::write(&path, alone).unwrap();
    let mut served = Served::start_with_args(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        capsule.dir.path(),
        &[("EMU_KEY", KEY), ("OPS_TOKEN", OPS)],
        &murmur_testkit::shared_home(),
        &["--workspace", place.path().to_str().unwrap()],
    );
    let done = rpc(&served, &send("work here", json!({})), AS_ALICE);
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{done:#}\n{}",
        served.stderr()
    );
    let answers = handed_back(&capsule.emulator.requests()[1].body);
    assert!(answers.values().all(|(_, error)| !error), "{answers:#?}");
    served.stop();
    assert_eq!(
        std::fs::read_to_string(place.path().join("notes/plan.md")).unwrap(),
        "in place"
    );
    assert_eq!(
        std::fs::read_to_string(place.path().join("shell.txt")).unwrap(),
        "shell\n"
    );
    assert!(
        !place.path().join("alice").exists(),
        "no principal's directory"
    );
    assert!(!place.path().join("MURMUR.md").exists());
    let events = trace(capsule.dir.path());
    let end = events
        .iter()
        .find(|e| e["event_type"] == "task_end")
        .unwrap();
    assert_eq!(created(end), ["notes/plan.md", "shell.txt"]);
    let start = &events[0];
    assert_eq!(start["event_type"], "session_start");
    assert_eq!(start["in_place"], true, "{start:#}");
}

/// Stdio MCP servers start once for a served session, in its workspace, where every
/// principal's directory is: serving several principals with one warns (`W-A2A-024`), naming
/// the server; one principal alone is not warned.
#[test]
fn principals_sharing_a_stdio_mcp_server_are_warned_when_the_door_opens() {
    let capsule = two_principals(&json!({"turns": []}).to_string());
    let path = capsule.dir.path().join("murmur.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "inference:\n",
        "  - name: files\n    runtime: mcp\n    server: { command: cat, timeout_seconds: 2 }\ninference:\n",
        1,
    );
    std::fs::write(&path, &text).unwrap();
    let serve = || {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .env("OPS_TOKEN", OPS)
            .env("CI_KEY", CI)
            .args(["run", "--serve", "--port", "0"])
            .arg(capsule.dir.path())
            .arg("--workdir")
            .arg(capsule.dir.path().join("work"))
            .run()
    };
    // `cat` is no MCP server: the session does not start, after the warning was given.
    let shared = serve();
    assert_ne!(shared.code, 0, "{shared:#?}");
    assert!(
        shared.stderr.contains(
            "warning[W-A2A-024]: the door's 2 principals share the stdio MCP server(s) files"
        ),
        "{shared:#?}"
    );
    let alone: String = text
        .lines()
        .filter(|line| !line.contains("principal: bob,"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&path, alone).unwrap();
    let single = serve();
    assert!(!single.stderr.contains("W-A2A-024"), "{single:#?}");
}
