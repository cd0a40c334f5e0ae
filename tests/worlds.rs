//! Exact worlds: each kind of component is linked with exactly the `murmur:*` interfaces its
//! world in `wit/worlds.wit` imports. A tool that imports `murmur:message/send` (given to
//! capsule components only) is refused at load, naming the import and the world, in
//! `mur run` and in `mur tool invoke`, before any model call and before any peer is reached.

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::json;

const KEY: &str = "sk-emulator-worlds";

/// What the refusal says, whatever command loads the tool.
const REFUSAL: &str = "error[E-RUN-001]: tool `tool-sender` imports `murmur:message/send@0.1.0`, \
     which the `tool` world does not provide: it is given to capsule components only; to \
     delegate, name the peer in `peers:` and the model asks it through `ask-<name>`";

fn assert_refused(output: &MurOutput) {
    assert_eq!(
        output.code, 3,
        "a component that does not load exits 3: {output:#?}"
    );
    assert!(output.stderr.contains(REFUSAL), "{}", output.stderr);
    assert!(
        output
            .stderr
            .contains("rebuild the component against the `tool` world"),
        "{}",
        output.stderr
    );
}

#[test]
fn a_tool_importing_message_send_is_refused_by_mur_run() {
    let peer = RecordingServer::start("{}");
    let emulator = Emulator::builder(
        Script::from_yaml(&format!(
            "turns:\n  - reply: {{ tool_calls: [ {{ id: s1, name: tool-sender, input: {{ peer: \"{}\", text: hi }} }} ] }}\n  - reply: {{ text: done }}\n",
            peer.url()
        ))
        .unwrap(),
    )
    .api_key(KEY)
    .start()
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest = emulator.capsule_manifest(
        "sending",
        &format!(
            "  - {{ name: tool-sender, version: \"0.1.0\", runtime: tool, path: {} }}",
            repo_root().join("tests/fixtures/tool-sender").display()
        ),
        &format!(
            "capabilities:\n  network: {{ allow: [\"{}\"] }}",
            peer.url().trim_end_matches('/')
        ),
    );
    std::fs::write(dir.path().join("murmur.yaml"), manifest).unwrap();
    let ran = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--task", "Send hi."])
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .run();
    assert_refused(&ran);
    assert!(emulator.requests().is_empty(), "the model was called");
    assert_eq!(peer.connections(), 0, "the peer was contacted");
}

#[test]
fn a_tool_importing_message_send_is_refused_by_mur_tool_invoke() {
    let peer = RecordingServer::start("{}");
    let work = tempfile::tempdir().unwrap();
    let invoked = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke"])
        .arg(repo_root().join("tests/fixtures/tool-sender"))
        .arg("--input")
        .arg(json!({"peer": peer.url(), "text": "hi"}).to_string())
        .arg("--workdir")
        .arg(work.path())
        .run();
    assert_refused(&invoked);
    assert_eq!(peer.connections(), 0, "the peer was contacted");
}
