//! MCP benchmarks (issue 17):
//!
//! - `mcp_client/raw_round_trip`: one `tools/call` of the notes server's `peek` (a 5-byte
//!   file), written and read by hand over the server's stdio: the server's own time, and the
//!   pipe's. The official Python SDK's server, so most of it is Python.
//! - `mcp_client/connection_call`: the same call through Murmur's client (`McpConnection`, the
//!   server confined as a session confines it). Its overhead over the server's own time is the
//!   difference of the two.
//! - `mcp_serve/read_file_call`: `mur mcp serve` of a capsule with the read-file WASM tool,
//!   called over stdio by the official Rust SDK's client, one call at a time: each call a
//!   session turn (schema check, decision point, the component call, trace lines). Read as
//!   calls per second.
//!
//! `mur` is the binary cargo built for this bench (`CARGO_BIN_EXE_mur`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use murmur_beneath::BeneathDir;
use murmur_confine::{Class, Confinement, ShellGrant, TimeLimits};
use murmur_mcp::{McpConnection, Transport};
use murmur_testkit::{mcp_python, repo_root};
use rmcp::ServiceExt;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(20);

/// The notes server over hand-written stdio JSON-RPC, initialized.
struct RawServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl RawServer {
    fn start(workdir: &Path) -> RawServer {
        let venv = mcp_python();
        let mut child = Command::new(&venv.python)
            .arg(&venv.notes_server)
            .arg("stdio")
            .current_dir(workdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = RawServer {
            child,
            stdin,
            stdout,
            next: 0,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The notes server through Murmur's client, confined in `workdir` as a session confines it.
async fn connection(workdir: &Path) -> McpConnection {
    std::fs::create_dir_all(workdir.join("logs")).unwrap();
    let venv = mcp_python();
    let python = venv.python.display().to_string();
    let grant = ShellGrant::new(
        std::slice::from_ref(&python),
        "",
        Arc::new(BeneathDir::open(workdir).unwrap()),
        vec![("PYTHONPATH".to_string(), venv.site_packages.clone())],
        Confinement {
            read_only: venv.reads.clone(),
            ..Confinement::on_this_host(Class::Scoped).expect("this host gives `scoped`")
        },
        TimeLimits {
            default: LIMIT,
            max: LIMIT,
        },
    );
    let service = grant
        .spawn_service(
            &python,
            &[venv.notes_server.display().to_string(), "stdio".to_string()],
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(workdir.join("logs/mcp-notes.log"))
                .unwrap(),
        )
        .unwrap();
    McpConnection::connect("notes", Transport::Stdio(Box::new(service)), LIMIT)
        .await
        .unwrap()
}

/// A capsule serving the read-file tool; its driver is never called.
fn capsule(dir: &Path) {
    let root = repo_root();
    std::fs::write(
        dir.join("murmur.yaml"),
        format!(
            r#"name: served
version: "0.1.0"
artifacts:
  - {{ name: driver-anthropic, version: "0.1.0", runtime: driver, path: "{}", gateway: {{ endpoint: "http://127.0.0.1:9", api_key: "sk-unused" }} }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: "{}" }}
inference:
  model: bench-model
  driver: {{ artifact: driver-anthropic }}
"#,
            root.join("artifacts/driver-anthropic").display(),
            root.join("artifacts/read-file").display(),
        ),
    )
    .unwrap();
}

fn mur_binary() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_mur"));
    assert!(
        bin.is_file(),
        "the mur binary is missing at {}",
        bin.display()
    );
    bin
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();

    let scratch = tempfile::tempdir().unwrap();
    let workdir = scratch.path().canonicalize().unwrap();
    std::fs::write(workdir.join("a.md"), "hello").unwrap();
    let peek = json!({"name": "peek", "arguments": {"path": "a.md"}});

    let mut group = criterion.benchmark_group("mcp_client");
    group.throughput(Throughput::Elements(1));
    let mut raw = RawServer::start(&workdir);
    group.bench_function("raw_round_trip", |b| {
        b.iter(|| {
            let answer = raw.request("tools/call", peek.clone());
            assert_eq!(answer["result"]["content"][0]["text"], "hello");
        })
    });
    drop(raw);
    let connection = runtime.block_on(connection(&workdir));
    let arguments = peek["arguments"].as_object().unwrap().clone();
    group.bench_function("connection_call", |b| {
        b.iter(|| {
            let called = runtime
                .block_on(connection.call("peek", arguments.clone(), LIMIT))
                .unwrap();
            assert_eq!(called.text, "hello");
        })
    });
    drop(connection);
    group.finish();

    // `mur mcp serve`, one session, warm: the first call compiles or loads the component.
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path());
    let sessions = dir.path().join("sessions");
    let client = runtime.block_on(async {
        let mut command = tokio::process::Command::new(mur_binary());
        command
            .args(["mcp", "serve"])
            .arg(dir.path())
            .arg("--workdir")
            .arg(&sessions);
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        ().serve(transport).await.unwrap()
    });
    let call = || {
        let mut params = rmcp::model::CallToolRequestParams::new("read-file");
        params.arguments = Some(json!({"path": "MURMUR.md"}).as_object().unwrap().clone());
        params
    };
    let started = Instant::now();
    let first = runtime.block_on(client.peer().call_tool(call())).unwrap();
    eprintln!(
        "mcp_serve: first call (session opened, component loaded) {:?}, isError {:?}",
        started.elapsed(),
        first.is_error
    );
    let mut group = criterion.benchmark_group("mcp_serve");
    group.throughput(Throughput::Elements(1));
    group.bench_function("read_file_call", |b| {
        b.iter(|| {
            let answer = runtime.block_on(client.peer().call_tool(call())).unwrap();
            assert_ne!(answer.is_error, Some(true));
        })
    });
    group.finish();
    runtime.block_on(async {
        let _ = client.cancel().await;
    });
    criterion.final_summary();
}
