//! One delegation round trip between two capsules on loopback, each on the project's provider
//! emulator: a lead whose model calls `ask-researcher` once, and a researcher served by the
//! release `mur run --serve` with `door.auth` (the lead's `peers:` entry presents its bearer).
//! The emulators answer at once, so what is measured is the runtimes' own time.
//!
//! Each run is one `mur run` of the lead (fork to exit): its model asks for one `ask-researcher`
//! call, then answers. Measured from the two traces (milliseconds, the traces' resolution):
//!
//! - `call`: the lead's `tool_call` event's `duration_ms` for `ask-researcher` (the hooks'
//!   decision, the send through the host's path, following the peer's task, the answer fenced);
//! - `peer task`: the researcher's task for that call, its `task_start` to its `task_end`
//!   (the task is found by the `peer_task_id` of the lead's `a2a_send`);
//! - `overhead`: `call - peer task`, per run: what delegating costs over the peer's own work
//!   (the HTTP exchange, the door's authentication and admission, the task's staging before
//!   `task_start`, and how soon the lead sees the end).
//!
//! Two set-ups, each printed as one row of medians over the measured runs:
//!
//! - `pinned`: `mur install` pinned the researcher's agent card, so each session reads the card
//!   (held to the pin) and, the card offering streaming, follows the task by its stream;
//! - `described`: no pin; the manifest describes the peer, so no card is read and the task is
//!   followed by `GetTask` polling (100 ms, doubling to 2 s).
//!
//! The compiled-component caches are warm (one run before the measured ones).
//! `MUR_DELEGATION_BENCH_RUNS` sets the number of measured runs (default 20). With `--json` the
//! medians are printed as one JSON array instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script, capsule_manifest};
use murmur_testkit::shared_home;
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-delegation-bench";
const LEAD_TOKEN: &str = "lead-token-delegation-0123456789";

fn mur() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mur"))
}

fn emulator(script: &str) -> Emulator {
    Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap()
}

/// A capsule `name` on the Anthropic driver pointed at `endpoint`, with `extra` manifest text.
fn capsule(dir: &Path, name: &str, endpoint: &str, extra: &str) {
    let text = capsule_manifest(endpoint, name, "A capsule of the benchmark.", "", extra);
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

/// The lead's model, for `sessions` sessions one after another: one `ask-researcher` call,
/// then an answer.
fn lead_script(sessions: usize) -> String {
    let mut script = String::from("turns:\n");
    for session in 0..sessions {
        script.push_str(&format!(
            "  - reply: {{ tool_calls: [ {{ id: q{session}, name: ask-researcher, input: {{ message: \"Capital of Peru?\" }} }} ] }}\n  - reply: {{ text: \"Lima, says the researcher.\" }}\n"
        ));
    }
    script
}

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn find<'a>(events: &'a [Value], kind: &str, task: Option<&str>) -> &'a Value {
    events
        .iter()
        .find(|e| e["event_type"] == kind && task.is_none_or(|t| e["task_id"] == t))
        .unwrap_or_else(|| panic!("no {kind} for {task:?} in the trace"))
}

/// One lead session; its call's duration and the researcher task's id.
fn session(lead: &Path, home: &Path) -> (u64, String) {
    let output = Command::new(mur())
        .env("MURMUR_HOME", home)
        .env("EMU_KEY", KEY)
        .env("LEAD_TOKEN", LEAD_TOKEN)
        .args(["run", "--json", "--task", "Find out about Lima."])
        .arg(lead)
        .arg("--workdir")
        .arg(lead.join("work"))
        .output()
        .expect("running mur");
    assert!(
        output.status.success(),
        "mur run failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("mur run --json");
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    let trace = events(Path::new(report["trace_path"].as_str().unwrap()));
    let call = find(&trace, "tool_call", None);
    assert_eq!(call["tool_name"], "ask-researcher");
    assert_eq!(call["status"], "passed", "{call:#}");
    let send = find(&trace, "a2a_send", None);
    assert!(send.get("error").is_none(), "{send:#}");
    (
        call["duration_ms"].as_u64().unwrap(),
        send["peer_task_id"].as_str().unwrap().to_string(),
    )
}

/// The researcher task's `task_start` to `task_end`, from its served session's trace.
fn peer_task_ms(trace: &[Value], task: &str) -> u64 {
    let start = find(trace, "task_start", Some(task))["timestamp"]
        .as_u64()
        .unwrap();
    let end = find(trace, "task_end", Some(task));
    assert_eq!(end["exit_status"], "ok", "{end:#}");
    end["timestamp"].as_u64().unwrap() - start
}

struct Row {
    setup: &'static str,
    runs: usize,
    call_ms: u64,
    peer_task_ms: u64,
    overhead_ms: u64,
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort();
    values[values.len() / 2]
}

fn measure(setup: &'static str, pinned: bool, runs: usize) -> Row {
    // The home (and compiled-component cache) the researcher's `Served` uses too.
    let home = shared_home();
    let researcher_dir = tempfile::tempdir().unwrap();
    let researcher_model = emulator(
        "turns: []\nby_model:\n  test-model: { text: \"Lima is the capital of Peru.\" }\n",
    );
    capsule(
        researcher_dir.path(),
        "researcher",
        &researcher_model.url(),
        "lifecycle: { task_acceptance: queue }\ndoor:\n  auth:\n    - { principal: lead, bearer: \"${LEAD_TOKEN}\", trust: peer }\n",
    );
    let mut served = Served::start(
        &mur(),
        researcher_dir.path(),
        &[("EMU_KEY", KEY), ("LEAD_TOKEN", LEAD_TOKEN)],
    );

    let lead_dir = tempfile::tempdir().unwrap();
    let lead_model = emulator(&lead_script(runs + 1));
    capsule(
        lead_dir.path(),
        "lead",
        &lead_model.url(),
        &format!(
            "capabilities:\n  network: {{ allow: [ \"{origin}\" ] }}\npeers:\n  - {{ url: \"{origin}/\", name: researcher, description: \"Finds facts about places.\", bearer: \"${{LEAD_TOKEN}}\" }}\n",
            origin = served.url
        ),
    );
    if pinned {
        let installed = Command::new(mur())
            .env("MURMUR_HOME", &home)
            .env("EMU_KEY", KEY)
            .env("LEAD_TOKEN", LEAD_TOKEN)
            .arg("install")
            .arg(lead_dir.path())
            .output()
            .expect("running mur install");
        assert!(
            installed.status.success(),
            "mur install failed: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let lock = std::fs::read_to_string(lead_dir.path().join("murmur.lock")).unwrap();
        assert!(lock.contains("card_sha256"), "{lock}");
    }

    // Warms the caches.
    session(lead_dir.path(), &home);
    let calls: Vec<(u64, String)> = (0..runs).map(|_| session(lead_dir.path(), &home)).collect();
    served.stop();
    let session = murmur_testkit::door::session_dir(researcher_dir.path());
    let trace = events(&session.join("trace.jsonl"));
    let peer: Vec<u64> = calls
        .iter()
        .map(|(_, task)| peer_task_ms(&trace, task))
        .collect();
    Row {
        setup,
        runs,
        call_ms: median(calls.iter().map(|(call, _)| *call).collect()),
        peer_task_ms: median(peer.clone()),
        overhead_ms: median(
            calls
                .iter()
                .zip(&peer)
                .map(|((call, _), peer)| call.saturating_sub(*peer))
                .collect(),
        ),
    }
}

fn main() {
    // `cargo test --benches` runs benchmarks once as tests; this one only under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let json_output = std::env::args().any(|arg| arg == "--json");
    let runs: usize = std::env::var("MUR_DELEGATION_BENCH_RUNS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20)
        .max(1);
    let rows = [
        measure("pinned", true, runs),
        measure("described", false, runs),
    ];
    if json_output {
        let value: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "setup": r.setup,
                    "runs": r.runs,
                    "call_ms": r.call_ms,
                    "peer_task_ms": r.peer_task_ms,
                    "overhead_ms": r.overhead_ms,
                })
            })
            .collect();
        println!("{}", Value::Array(value));
        return;
    }
    println!(
        "{:>10} {:>5} {:>8} {:>13} {:>12}",
        "setup", "runs", "call ms", "peer task ms", "overhead ms"
    );
    for r in &rows {
        println!(
            "{:>10} {:>5} {:>8} {:>13} {:>12}",
            r.setup, r.runs, r.call_ms, r.peer_task_ms, r.overhead_ms
        );
    }
}
