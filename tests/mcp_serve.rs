//! `mur mcp serve`: a capsule's tools served to the official MCP Python SDK's client
//! (`tests/python/mcp/serve_client.py`, in the venv `scripts/python-env mcp` makes), over stdio
//! and over streamable HTTP. Each client is a session of its own with a record (its trace) and a
//! workspace; calls go the way of the model's (the input schema, hooks, the `tool_call` events).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use murmur_testkit::{free_port, mcp_python, repo_root};
use serde_json::{Value, json};

/// A capsule with read-file, write-file, the probe tool (calls past 1 s stopped), a skill and
/// a policy hook keeping `secrets/` read-only. Its driver is never called.
fn capsule(dir: &Path) {
    let root = repo_root();
    let text = format!(
        r#"name: toolbox
version: "0.3.0"
artifacts:
  - {{ name: driver-anthropic, version: "0.1.0", runtime: driver, path: "{driver}", gateway: {{ endpoint: "http://127.0.0.1:9", api_key: "${{EMU_KEY}}" }} }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: "{read_file}" }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: "{write_file}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: "{probe}" }}
  - {{ name: skill-style, version: "0.1.0", runtime: skill, path: "{skill}" }}
  - {{ name: policy, version: "0.1.0", runtime: hook, path: "{policy}", config: {{ rules: [ {{ tool: write-file, input: {{ path: "^secrets/" }}, reason: "secrets/ is read-only" }} ] }} }}
capabilities:
  limits: {{ deadline_seconds: 1 }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        read_file = root.join("artifacts/read-file").display(),
        write_file = root.join("artifacts/write-file").display(),
        probe = root.join("tests/fixtures/probe").display(),
        policy = root.join("artifacts/policy").display(),
        skill = root.join("tests/fixtures/skill-style").display(),
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

/// Every call the tests make, in order.
fn calls() -> Value {
    json!([
        {"name": "write-file", "arguments": {"path": "notes/a.md", "content": "served"}},
        {"name": "read-file", "arguments": {"path": "notes/a.md"}},
        {"name": "read-file", "arguments": {"path": "missing.md"}},
        {"name": "write-file", "arguments": {"path": "secrets/key", "content": "x"}},
        {"name": "probe", "arguments": {"action": "spin"}},
        {"name": "read-file", "arguments": {"nope": 1}},
        {"name": "probe", "arguments": {"action": "request_input", "prompt": "Favourite colour?"}},
        {"name": "skill-style", "arguments": {}},
    ])
}

/// What the client printed; with `reply`, it answers the server's questions so.
fn client(args: &[&str], reply: Option<&str>) -> Value {
    let venv = mcp_python();
    let mut command = Command::new(&venv.python);
    command
        .arg(repo_root().join("tests/python/mcp/serve_client.py"))
        .args(args)
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

/// The traces of every session under `root`, each its events.
fn sessions(root: &Path) -> Vec<Vec<Value>> {
    let mut traces: Vec<Vec<Value>> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path().join("trace.jsonl"))
        .filter(|trace| trace.exists())
        .map(|trace| {
            std::fs::read_to_string(trace)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        })
        .collect();
    traces.sort_by_key(|events: &Vec<Value>| events.len());
    traces
}

/// What every served session answers, whichever transport it came by; `replied` when the
/// client answered the tool's question with `blue`.
fn answered_as_served(out: &Value, workdir_root: &Path, replied: bool) {
    assert_eq!(out["server"]["name"], "murmur:toolbox");
    assert_eq!(out["server"]["version"], "0.3.0");
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["read-file", "write-file", "probe", "skill-style"],
        "{:#}",
        out["tools"]
    );
    assert_eq!(out["tools"][0]["inputSchema"]["required"], json!(["path"]));

    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 8, "{out:#}");
    for call in calls {
        assert!(call.get("error").is_none(), "no call raised: {call:#}");
    }
    assert_eq!(calls[0]["is_error"], false, "{:#}", calls[0]);
    assert_eq!(calls[1]["is_error"], false);
    assert!(calls[1]["text"].as_str().unwrap().contains("served"));
    assert!(
        calls[1]["text"]
            .as_str()
            .unwrap()
            .contains("untrusted-content source=\"tool:read-file\""),
        "the answer is fenced as the model's would be: {:#}",
        calls[1]
    );
    // An error result, a hook's denial, a call past its deadline, input the schema refuses.
    assert_eq!(calls[2]["is_error"], true, "{:#}", calls[2]);
    assert_eq!(calls[3]["is_error"], true);
    assert!(
        calls[3]["text"]
            .as_str()
            .unwrap()
            .contains("secrets/ is read-only")
    );
    assert_eq!(calls[4]["is_error"], true);
    assert!(
        calls[4]["text"].as_str().unwrap().contains("deadline"),
        "{:#}",
        calls[4]
    );
    assert_eq!(calls[5]["is_error"], true);
    assert!(
        calls[5]["text"]
            .as_str()
            .unwrap()
            .contains("does not match the input_schema of `read-file`"),
        "{:#}",
        calls[5]
    );

    // A tool's question goes to the client's user when the client takes questions.
    if replied {
        assert_eq!(out["asked"], json!(["Favourite colour?"]));
        assert_eq!(calls[6]["is_error"], false, "{:#}", calls[6]);
        assert!(
            calls[6]["text"]
                .as_str()
                .unwrap()
                .contains(r#""reply":"blue""#),
            "{:#}",
            calls[6]
        );
    } else {
        assert_eq!(out["asked"], json!([]));
        assert_eq!(calls[6]["is_error"], true, "{:#}", calls[6]);
    }

    // A skill answers with its markdown.
    assert_eq!(calls[7]["is_error"], false, "{:#}", calls[7]);
    assert!(
        calls[7]["text"]
            .as_str()
            .unwrap()
            .contains("untrusted-content source=\"tool:skill-style\""),
        "{:#}",
        calls[7]
    );
    assert!(
        calls[7]["text"]
            .as_str()
            .unwrap()
            .contains("House style for notes")
    );
    assert!(events_have_skill_call(workdir_root));

    // The session left its trace in its record and the tools' files in its workspace.
    let traces = sessions(workdir_root);
    assert_eq!(traces.len(), 1, "one client, one session");
    let events = &traces[0];
    let workspace = PathBuf::from(events[0]["workspace"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/a.md")).unwrap(),
        "served"
    );
    assert!(!workspace.join("secrets/key").exists());
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"session_start"));
    assert_eq!(types.last(), Some(&"session_end"), "{types:?}");
    let task = events
        .iter()
        .find(|e| e["event_type"] == "task_start")
        .unwrap();
    assert_eq!(task["source"], "mcp");
    let tool_calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["event_type"] == "tool_call")
        .collect();
    assert_eq!(tool_calls.len(), 6, "{types:?}");
    assert_eq!(tool_calls[0]["state_effect"], "mutate");
    assert!(
        events
            .iter()
            .any(|e| e["event_type"] == "call_denied" && e["target"] == "write-file")
    );
}

/// Whether the one session under `root` traced a `skill_call`.
fn events_have_skill_call(root: &Path) -> bool {
    sessions(root)[0]
        .iter()
        .any(|e| e["event_type"] == "skill_call" && e["skill"] == "skill-style")
}

#[test]
fn a_stdio_client_lists_and_calls_the_capsules_tools_in_a_session_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path());
    let root = dir.path().join("sessions");
    let out = client(
        &[
            "stdio",
            &calls().to_string(),
            env!("CARGO_BIN_EXE_mur"),
            "mcp",
            "serve",
            dir.path().to_str().unwrap(),
            "--workdir",
            root.to_str().unwrap(),
        ],
        None,
    );
    answered_as_served(&out, &root, false);
}

/// `mur mcp serve --http` until dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve_http(dir: &Path, root: &Path, address: &str, token: Option<&str>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mur"));
    command
        .args(["mcp", "serve"])
        .arg(dir)
        .args(["--http", address, "--workdir"])
        .arg(root)
        .env("EMU_KEY", "sk-unused")
        .env_remove("MURMUR_MCP_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("MURMUR_MCP_TOKEN", token);
    }
    command.spawn().unwrap()
}

#[test]
fn an_http_client_with_the_token_is_served_and_one_without_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path());
    let root = dir.path().join("sessions");
    let port = free_port();
    let served = Served(serve_http(
        dir.path(),
        &root,
        &format!("127.0.0.1:{port}"),
        Some("serve-s3cret"),
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "mur mcp serve did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");

    // Without the token: 401 before any session opens.
    let refused = http_post(port, "/mcp", None);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(
        refused
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{refused}"
    );
    let wrong = http_post(port, "/mcp", Some("serve-s3creT"));
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    // A page elsewhere that rebinds its name to loopback is not served, token or not.
    let rebound = http_post_as(port, "/mcp", Some("serve-s3cret"), "evil.example");
    assert!(
        rebound.starts_with("HTTP/1.1 4") && !rebound.starts_with("HTTP/1.1 401"),
        "{rebound}"
    );
    let venv = mcp_python();
    let without = Command::new(&venv.python)
        .arg(repo_root().join("tests/python/mcp/serve_client.py"))
        .args(["http", "[]", &url])
        .output()
        .unwrap();
    assert!(
        !without.status.success(),
        "a client without the token is refused"
    );

    let out = client(
        &["http", &calls().to_string(), &url, "serve-s3cret"],
        Some("blue"),
    );
    drop(served);
    // The client has gone and the server was stopped: its session is written whole.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions(&root)
        .first()
        .and_then(|events| events.last().cloned())
        .is_none_or(|last| last["event_type"] != "session_end")
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    answered_as_served(&out, &root, true);
}

/// The head of the answer to a bare `POST path` on loopback `port`, with `bearer` when given.
fn http_post(port: u16, path: &str, bearer: Option<&str>) -> String {
    http_post_as(port, path, bearer, &format!("127.0.0.1:{port}"))
}

/// [`http_post`] with `host` as its `Host` header.
fn http_post_as(port: u16, path: &str, bearer: Option<&str>, host: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let authorization = bearer
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn serving_beyond_loopback_without_a_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path());
    let child = serve_http(dir.path(), &dir.path().join("s"), "0.0.0.0:0", None);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("E-MCP-007"), "{stderr}");
    assert!(stderr.contains("MURMUR_MCP_TOKEN"), "{stderr}");
}

#[test]
fn a_class_the_capsule_contradicts_refuses_to_serve_before_any_session() {
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path());
    let text = std::fs::read_to_string(dir.path().join("murmur.yaml")).unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        text.replace(
            "  limits: { deadline_seconds: 1 }",
            "  limits: { deadline_seconds: 1 }\n  filesystem: { workdir_exec: true }",
        ),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["mcp", "serve", "--containment", "scoped"])
        .arg(dir.path())
        .arg("--workdir")
        .arg(dir.path().join("s"))
        .env("EMU_KEY", "unused")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("E-CAP-020"), "{stderr}");
    assert!(stderr.contains("workdir_exec"), "{stderr}");
    assert!(!dir.path().join("s").exists(), "no session was opened");
}

/// A capsule of tools alone (no `inference:`, no driver, no credential anywhere) is served over
/// MCP: its tools listed and called, its session traced; `mur run` of it says it has no model
/// and points at `mur mcp serve`.
#[test]
fn a_capsule_of_tools_alone_is_served_and_mur_run_says_it_has_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!(
            r#"name: tools-only
version: "0.1.0"
artifacts:
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: "{}" }}
  - {{ name: write-file, version: "0.1.0", runtime: tool, path: "{}" }}
"#,
            root.join("artifacts/read-file").display(),
            root.join("artifacts/write-file").display(),
        ),
    )
    .unwrap();
    let sessions_root = dir.path().join("sessions");
    let calls = json!([
        {"name": "write-file", "arguments": {"path": "a.md", "content": "kept"}},
        {"name": "read-file", "arguments": {"path": "a.md"}},
    ]);
    let out = client(
        &[
            "stdio",
            &calls.to_string(),
            env!("CARGO_BIN_EXE_mur"),
            "mcp",
            "serve",
            dir.path().to_str().unwrap(),
            "--workdir",
            sessions_root.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out["server"]["name"], "murmur:tools-only", "{out:#}");
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read-file", "write-file"]);
    assert_eq!(out["calls"][0]["is_error"], false, "{out:#}");
    assert!(out["calls"][1]["text"].as_str().unwrap().contains("kept"));
    let traces = sessions(&sessions_root);
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[0][0]["event_type"], "session_start");

    let run = murmur_testkit::Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--json", "--task", "hi"])
        .arg(dir.path())
        .run();
    assert_eq!(run.code, 2, "{run:#?}");
    let error = &run.json()["error"];
    assert_eq!(error["code"], "E-RUN-013", "{run:#?}");
    assert!(
        error["message"].as_str().unwrap().contains("has no model"),
        "{error}"
    );
    assert!(
        error["hint"].as_str().unwrap().contains("mur mcp serve"),
        "{error}"
    );
}
