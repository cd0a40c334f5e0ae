//! Record and replay through the real `mur`: `mur run --record` against the provider emulator
//! keeps every driver exchange with no credential in the file; `mur run --replay` answers the
//! same session with the emulator gone and no key set; a changed request is refused naming
//! the first difference (`E-RUN-029`), `--replay-mode lenient` serves turn for turn, a
//! cassette run past its end or not a cassette at all is refused with its code.

use std::path::Path;

use crate::artifacts::{KEY, SCRIPT, capsule};
use murmur_testkit::emulator::{Emulator, Script, capsule_manifest};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

/// A capsule of the first-party driver and tools from the project's artifacts, its driver's
/// gateway at `endpoint`.
fn local_capsule(dir: &Path, endpoint: &str) {
    capsule(dir, endpoint);
    let file = dir.join("murmur.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    for name in ["driver-anthropic", "read-file", "write-file"] {
        let path = repo_root().join("artifacts").join(name);
        text = text.replace(
            &format!("name: {name}\n    version: \"0.1.0\"\n"),
            &format!(
                "name: {name}\n    version: \"0.1.0\"\n    path: {}\n",
                path.display()
            ),
        );
        text = text.replace(
            &format!("{{ name: {name}, version: \"0.1.0\", runtime: tool }}"),
            &format!(
                "{{ name: {name}, version: \"0.1.0\", runtime: tool, path: {} }}",
                path.display()
            ),
        );
    }
    std::fs::write(file, text).unwrap();
}

fn run(dir: &Path, key: Option<&str>, extra: &[&str]) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"));
    if let Some(key) = key {
        mur = mur.env("EMU_KEY", key);
    }
    mur.args(["run", "--json", "--task", "write and read a note"])
        .args(extra)
        .arg(dir)
        .run()
}

#[test]
fn a_session_recorded_against_the_provider_replays_with_no_key_and_no_network() {
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    local_capsule(&dir, &emulator.url());
    let cassette = work.path().join("notes.cassette.json");

    let recorded = run(&dir, Some(KEY), &["--record", cassette.to_str().unwrap()]);
    assert_eq!(recorded.code, 0, "{recorded:#?}");
    assert_eq!(
        recorded.json()["tasks"][0]["result_text"],
        "It says installed."
    );
    assert!(
        recorded.stderr.contains("recorded 3 driver exchanges"),
        "{}",
        recorded.stderr
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(KEY), "a cassette never holds the credential");
    let file: serde_json::Value = serde_json::from_str(&text).unwrap();
    let exchanges = file["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 3);
    for exchange in exchanges {
        let headers = exchange["request"]["headers"].as_array().unwrap();
        assert!(
            headers
                .iter()
                .all(|h| h[0] != "x-api-key" && h[0] != "authorization"),
            "{headers:?}"
        );
        assert!(
            exchange["request"]["body"]
                .as_str()
                .unwrap()
                .contains("\"messages\"")
        );
        assert_eq!(exchange["response"]["status"], 200);
    }

    // The provider gone, no key anywhere: the same session from the cassette.
    drop(emulator);
    let replayed = run(&dir, None, &["--replay", cassette.to_str().unwrap()]);
    assert_eq!(replayed.code, 0, "{replayed:#?}");
    assert_eq!(
        replayed.json()["tasks"][0]["result_text"],
        "It says installed."
    );
    assert_eq!(replayed.json()["totals"]["turns"], 3);
    assert_eq!(replayed.json()["totals"]["tool_calls"], 2);
    // Tools ran for real: the note is in the new session's workspace.
    let workspace = replayed.json()["workspace"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(Path::new(&workspace).join("note.md")).unwrap(),
        "installed"
    );
}

#[test]
fn a_replay_refuses_a_changed_request_naming_the_first_difference_unless_lenient() {
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    local_capsule(&dir, &emulator.url());
    let cassette = work.path().join("c.json");
    assert_eq!(
        run(&dir, Some(KEY), &["--record", cassette.to_str().unwrap()]).code,
        0
    );
    drop(emulator);

    let changed = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--json", "--task", "write a different note"])
        .args(["--replay", cassette.to_str().unwrap()])
        .arg(&dir)
        .run();
    assert_eq!(changed.code, 1, "{changed:#?}");
    let error = &changed.json()["error"];
    assert_eq!(error["code"], "E-RUN-029", "{changed:#?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("request 1")
            && message.contains("messages[0]")
            && message.contains("write a different note"),
        "{message}"
    );

    // Lenient: the recorded answers, turn for turn.
    let lenient = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--json", "--task", "write a different note"])
        .args([
            "--replay",
            cassette.to_str().unwrap(),
            "--replay-mode",
            "lenient",
        ])
        .arg(&dir)
        .run();
    assert_eq!(lenient.code, 0, "{lenient:#?}");
    assert_eq!(
        lenient.json()["tasks"][0]["result_text"],
        "It says installed."
    );

    // A cassette that ends early: the request past its end is refused.
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cassette).unwrap()).unwrap();
    file["exchanges"].as_array_mut().unwrap().truncate(1);
    let short = work.path().join("short.json");
    std::fs::write(&short, file.to_string()).unwrap();
    let past = run(&dir, None, &["--replay", short.to_str().unwrap()]);
    assert_eq!(past.json()["error"]["code"], "E-RUN-029", "{past:#?}");
    assert!(
        past.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request 2")
    );

    // Not a cassette.
    let bogus = work.path().join("bogus.json");
    std::fs::write(&bogus, "{\"format\": 9, \"exchanges\": []}").unwrap();
    let refused = run(&dir, None, &["--replay", bogus.to_str().unwrap()]);
    assert_eq!(refused.code, 2, "{refused:#?}");
    assert_eq!(refused.json()["error"]["code"], "E-RUN-030");
}

#[test]
fn a_streamed_session_of_each_first_party_driver_records_and_replays() {
    // Each first-party driver, streaming (server-sent events), with the volatile ids it sends
    // (a prompt cache key, a previous response's id): recorded whole, replayed from the
    // cassette.
    for driver in [
        "driver-anthropic",
        "driver-openai-chat",
        "driver-openai-responses",
    ] {
        let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
            .api_key(KEY)
            .start()
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("capsule");
        std::fs::create_dir_all(&dir).unwrap();
        let artifacts = repo_root().join("artifacts");
        std::fs::write(
            dir.join("murmur.yaml"),
            format!(
                r#"name: streamed
version: "0.1.0"
artifacts:
  - name: {driver}
    version: "0.1.0"
    runtime: driver
    path: {path}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {read} }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: {write} }}
inference:
  model: test-model
  driver: {{ artifact: {driver} }}
"#,
                path = artifacts.join(driver).display(),
                read = artifacts.join("read-file").display(),
                write = artifacts.join("write-file").display(),
                endpoint = emulator.url(),
            ),
        )
        .unwrap();
        let cassette = work.path().join("streamed.json");
        let recorded = run(
            &dir,
            Some(KEY),
            &["--stream", "--record", cassette.to_str().unwrap()],
        );
        assert_eq!(recorded.code, 0, "{driver}: {recorded:#?}");
        let text = std::fs::read_to_string(&cassette).unwrap();
        assert!(!text.contains(KEY), "{driver}");
        assert!(
            text.contains("data: "),
            "{driver}: the streamed body is kept as it came"
        );
        drop(emulator);
        let replayed = run(
            &dir,
            None,
            &["--stream", "--replay", cassette.to_str().unwrap()],
        );
        assert_eq!(replayed.code, 0, "{driver}: {replayed:#?}");
        // Streamed: the answer as it arrived, then the report.
        assert!(
            replayed.stdout.starts_with("It says installed."),
            "{driver}: {replayed:#?}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&replayed.stdout[replayed.stdout.find('{').unwrap()..]).unwrap();
        assert_eq!(report["totals"]["turns"], 3, "{driver}");
        assert_eq!(report["totals"]["tool_calls"], 2, "{driver}");
    }
}

#[test]
fn a_served_capsule_records_its_tasks_and_serves_them_again_from_the_cassette() {
    use murmur_testkit::door::Served;
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    local_capsule(&dir, &emulator.url());
    let cassette = work.path().join("served.json");
    let bin = Path::new(env!("CARGO_BIN_EXE_mur"));
    let home = murmur_testkit::shared_home();
    let send = |url: &str| {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .args(["send", url, "--json", "--text", "write and read a note"])
            .run()
    };
    let mut served = Served::start_with_args(
        bin,
        &dir,
        &[("EMU_KEY", KEY)],
        &home,
        &["--record", cassette.to_str().unwrap()],
    );
    let answer = send(&served.url);
    assert_eq!(answer.code, 0, "{answer:#?}");
    // One task (`task_acceptance: single`): the capsule exits, and saves what it recorded.
    assert_eq!(
        served.wait(std::time::Duration::from_secs(30)),
        Some(0),
        "{}",
        served.stderr()
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(KEY), "a cassette never holds the credential");
    assert!(
        served.stderr().contains("recorded 3 driver exchanges"),
        "{}",
        served.stderr()
    );

    drop(emulator);
    let mut replayed = Served::start_with_args(
        bin,
        &dir,
        &[],
        &home,
        &["--replay", cassette.to_str().unwrap()],
    );
    let answer = send(&replayed.url);
    assert_eq!(answer.code, 0, "{answer:#?}");
    assert!(
        answer.stdout.contains("It says installed."),
        "{}",
        answer.stdout
    );
    assert_eq!(
        replayed.wait(std::time::Duration::from_secs(30)),
        Some(0),
        "{}",
        replayed.stderr()
    );
}

/// A capsule whose probe tool is given `SOME_TOKEN` (a credential's name) and `PLAIN_SETTING`
/// through `capabilities.env.allow`, with a peer whose bearer credential is `PEER_TOKEN`.
fn secrets_capsule(dir: &Path, emulator: &Emulator) {
    std::fs::create_dir_all(dir).unwrap();
    let probe = format!(
        "  - {{ name: probe, version: \"0.1.0\", runtime: tool, path: {} }}",
        repo_root().join("tests/fixtures/probe").display()
    );
    let rest = r#"capabilities:
  env: { allow: [ SOME_TOKEN, PLAIN_SETTING ] }
  network: { allow: [ "http://127.0.0.1:9" ] }
peers:
  - { url: "http://127.0.0.1:9", bearer: "${PEER_TOKEN}" }"#;
    std::fs::write(
        dir.join("murmur.yaml"),
        emulator.capsule_manifest("secrets", &probe, rest),
    )
    .unwrap();
}

/// Every form a value takes in a cassette file: as it is, and escaped one to four times
/// inside JSON strings (the tool's JSON result, inside the request body, inside the file).
fn escaped_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    for _ in 0..4 {
        let quoted = serde_json::Value::String(forms.last().unwrap().clone()).to_string();
        forms.push(quoted[1..quoted.len() - 1].to_string());
    }
    forms
}

#[test]
fn credentials_a_tool_is_given_never_reach_the_cassette_and_it_replays_strictly() {
    // The tool returns its environment; the model's next request carries it to the provider.
    const SCRIPT: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: toolu_1, name: probe, input: { action: env } } ]
  - reply: { text: "Seen." }
"#;
    let token = r#"tok-"quoted"\back/slash-ünï-recorded"#;
    let peer = "peer-bearer-credential-recorded";
    let plain = "plain-setting-kept-visible";
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    secrets_capsule(&dir, &emulator);
    let cassette = work.path().join("secrets.cassette.json");
    let run = |token: &str, peer: &str, key: Option<&str>, extra: &[&str]| {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("SOME_TOKEN", token)
            .env("PEER_TOKEN", peer)
            .env("PLAIN_SETTING", plain);
        if let Some(key) = key {
            mur = mur.env("EMU_KEY", key);
        }
        // The peer's credential reaches the conversation in the task itself.
        let task = format!("probe the environment; my peer token is {peer}");
        mur.args(["run", "--json", "--task", &task])
            .args(extra)
            .arg(&dir)
            .run()
    };

    let recorded = run(
        token,
        peer,
        Some(KEY),
        &["--record", cassette.to_str().unwrap()],
    );
    assert_eq!(recorded.code, 0, "{recorded:#?}");
    assert_eq!(recorded.json()["tasks"][0]["result_text"], "Seen.");
    // The provider did receive the value: the tool's result went back in the next request.
    let sent = emulator.requests();
    assert!(
        sent.iter()
            .any(|r| r.body.to_string().contains(&escaped_forms(token)[2])),
        "the tool's result reached the provider"
    );
    let bytes = std::fs::read(&cassette).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    for (name, value) in [
        ("SOME_TOKEN", token),
        ("PEER_TOKEN", peer),
        ("EMU_KEY", KEY),
    ] {
        for form in escaped_forms(value) {
            assert!(
                !text.contains(&form),
                "{name} stands in the cassette as `{form}`"
            );
        }
    }
    assert!(text.contains("<scrubbed:SOME_TOKEN>"), "{text}");
    assert!(text.contains("<scrubbed:PEER_TOKEN>"), "{text}");
    assert!(text.contains(plain), "a value of another name is kept");
    drop(emulator);

    // Replayed strictly, no key, no provider, other credential values: the live requests are
    // scrubbed as the recorded ones were, and match them.
    let other_token = r#"tok-"other"\value/ünï-at-replay"#;
    let other_peer = "peer-bearer-credential-at-replay";
    let replayed = run(
        other_token,
        other_peer,
        None,
        &["--replay", cassette.to_str().unwrap()],
    );
    assert_eq!(replayed.code, 0, "{replayed:#?}");
    assert_eq!(replayed.json()["tasks"][0]["result_text"], "Seen.");
    assert_eq!(replayed.json()["totals"]["turns"], 2);
    assert_eq!(replayed.json()["totals"]["tool_calls"], 1);

    // A non-credential value that changed is a changed request: refused, and the refusal
    // names no credential.
    let changed = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("SOME_TOKEN", other_token)
        .env("PEER_TOKEN", other_peer)
        .env("PLAIN_SETTING", "plain-setting-changed")
        .args([
            "run",
            "--json",
            "--task",
            &format!("probe the environment; my peer token is {other_peer}"),
        ])
        .args(["--replay", cassette.to_str().unwrap()])
        .arg(&dir)
        .run();
    assert_eq!(changed.json()["error"]["code"], "E-RUN-029", "{changed:#?}");
    let message = changed.json()["error"]["message"].to_string();
    assert!(message.contains("request 2"), "{message}");
    for form in escaped_forms(other_token) {
        assert!(!message.contains(&form), "{message}");
    }
}

/// A capsule `name` of the first-party driver and the probe tool, its gateway at `endpoint`,
/// with `extra` appended.
fn peer_capsule(dir: &Path, name: &str, endpoint: &str, extra: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let probe = format!(
        "  - {{ name: probe, version: \"0.1.0\", runtime: tool, path: {} }}",
        repo_root().join("tests/fixtures/probe").display()
    );
    let text = capsule_manifest(
        endpoint,
        name,
        "A peer in a recorded session.",
        &probe,
        extra,
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

#[test]
fn a_lead_that_asked_a_served_researcher_replays_its_answer_with_the_researcher_stopped() {
    const PEER_TOKEN: &str = "lead-token-replayed-0123456789";
    let researcher_emulator = Emulator::builder(
        Script::from_yaml("turns:\n  - reply: { text: \"Lima is the capital of Peru.\" }\n")
            .unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let researcher = work.path().join("researcher");
    peer_capsule(
        &researcher,
        "researcher",
        &researcher_emulator.url(),
        "lifecycle: { task_acceptance: queue }\ndoor:\n  auth:\n    - { principal: lead, bearer: \"${LEAD_TOKEN}\", trust: peer }\n",
    );
    let mut served = murmur_testkit::door::Served::start(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        &researcher,
        &[("EMU_KEY", KEY), ("LEAD_TOKEN", PEER_TOKEN)],
    );
    let lead_emulator = Emulator::builder(
        Script::from_yaml(
            "turns:\n  - reply: { tool_calls: [ { id: q1, name: ask-researcher, input: { message: \"Capital of Peru?\" } } ] }\n  - reply: { text: \"Lima, says the researcher.\" }\n",
        )
        .unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    // No description: the researcher's agent card is read at session start (recorded too).
    let lead = work.path().join("lead");
    peer_capsule(
        &lead,
        "lead",
        &lead_emulator.url(),
        &format!(
            "capabilities:\n  network: {{ allow: [ \"{0}\" ] }}\npeers:\n  - {{ url: \"{0}/\", name: researcher, bearer: \"${{LEAD_TOKEN}}\" }}\n",
            served.url
        ),
    );
    let cassette = work.path().join("lead.cassette.json");
    let run_lead = |env: &[(&str, &str)], extra: &[&str]| {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"));
        for (name, value) in env {
            mur = mur.env(name, value);
        }
        mur.args(["run", "--json", "--task", "Find out about Lima."])
            .args(extra)
            .arg(&lead)
            .run()
    };

    let recorded = run_lead(
        &[("EMU_KEY", KEY), ("LEAD_TOKEN", PEER_TOKEN)],
        &["--record", cassette.to_str().unwrap()],
    );
    assert_eq!(recorded.code, 0, "{recorded:#?}");
    // The card read and the call: two peer exchanges beside the lead's two driver exchanges.
    assert!(
        recorded
            .stderr
            .contains("recorded 2 driver exchanges and 2 peer exchanges to"),
        "{recorded:#?}"
    );
    let answer_of = |report: &Value| report["tasks"][0]["result_text"].clone();
    assert_eq!(
        answer_of(&recorded.json()),
        "Lima, says the researcher.",
        "{recorded:#?}"
    );
    // The researcher answered the recording run once.
    assert_eq!(researcher_emulator.requests().len(), 1);
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(
        !text.contains(PEER_TOKEN),
        "a cassette never holds the peer's credential"
    );
    assert!(!text.contains(KEY));
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["format"], 2, "{file:#}");
    let peers = file["peers"].as_array().unwrap();
    let peer_url = format!("{}/", served.url);
    let kinds: Vec<&str> = peers.iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["card", "ask"], "{file:#}");
    let ask = &peers[1];
    assert_eq!(ask["peer"], peer_url.as_str());
    assert_eq!(
        ask["request"]["params"]["message"]["parts"][0]["text"],
        "Capital of Peru?"
    );
    assert_eq!(ask["request"]["headers"]["x-murmur-task-origin"], "peer");
    assert!(
        ask["answer"]["task"]
            .to_string()
            .contains("Lima is the capital of Peru."),
        "{ask:#}"
    );
    let recorded_events = events_of(&recorded.json());
    let recorded_send = recorded_events
        .iter()
        .find(|e| e["event_type"] == "a2a_send")
        .unwrap()
        .clone();

    // The researcher stopped, its port held by a listener that counts connections; the lead's
    // provider gone, no key or peer credential set: the same session from the cassette.
    served.stop();
    drop(researcher_emulator);
    drop(lead_emulator);
    let port: u16 = served.url.rsplit(':').next().unwrap().parse().unwrap();
    let watch = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    watch.set_nonblocking(true).unwrap();
    let replayed = run_lead(&[], &["--replay", cassette.to_str().unwrap()]);
    assert_eq!(replayed.code, 0, "{replayed:#?}");
    assert_eq!(answer_of(&replayed.json()), "Lima, says the researcher.");
    assert_eq!(
        watch.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "the researcher's address was contacted while replaying"
    );
    let replayed_events = events_of(&replayed.json());
    let call = replayed_events
        .iter()
        .find(|e| e["event_type"] == "tool_call")
        .unwrap();
    assert_eq!(call["tool_name"], "ask-researcher");
    assert_eq!(call["status"], "passed");
    assert_eq!(
        call["summary"],
        "replayed from the cassette: the peer was not contacted"
    );
    let send = replayed_events
        .iter()
        .find(|e| e["event_type"] == "a2a_send")
        .unwrap();
    assert_eq!(send["peer"], peer_url.as_str());
    assert_eq!(send["peer_task_id"], recorded_send["peer_task_id"]);
    assert_eq!(send["state"], recorded_send["state"]);
    assert!(send.get("error").is_none(), "{send}");

    // Asked something else, strictly: refused naming the call; no connection either.
    let mut changed: Value = serde_json::from_str(&text).unwrap();
    changed["peers"][1]["request"]["params"]["message"]["parts"][0]["text"] =
        "Capital of Chile?".into();
    let other = work.path().join("changed.cassette.json");
    std::fs::write(&other, changed.to_string()).unwrap();
    let refused = run_lead(&[], &["--replay", other.to_str().unwrap()]);
    assert_eq!(refused.json()["error"]["code"], "E-RUN-029", "{refused:#?}");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("peer call 1") && message.contains("Capital of Chile?"),
        "{message}"
    );
    assert!(watch.accept().is_err());
}

fn events_of(report: &Value) -> Vec<Value> {
    std::fs::read_to_string(report["trace_path"].as_str().unwrap())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}
