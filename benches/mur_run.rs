//! A whole agent session as a user runs it: the release `mur run` process, fork to exit, against
//! the project's provider emulator on loopback. Each session is `N` turns through the OpenAI
//! Chat driver: `N - 1` answers that each ask for one `read-file` call (a small file in the
//! workdir), then a text answer. The compiled-component cache is warm (one run before the
//! measured ones), as it is for every run after `mur build` or `mur install`.
//!
//! Printed for each session length (21 turns, the issue's session; 1,001 turns, to show cost
//! does not grow with the session), as the median over the measured runs:
//!
//! - `process`: fork to exit, wall clock;
//! - `peak RSS`: the child's maximum resident set (`VmHWM`, watched while it runs);
//! - `start-up`: fork to the first request reaching the emulator;
//! - `per turn`: the runtime's own time per turn above the emulator's, all turns, the first
//!   included: from the fork to the last request, less the emulator's time answering every
//!   request before the last, divided by the turns (so start-up is shared among the turns);
//! - `steady turn`: the same for turns 2 and on only (the gap between one answer and the next
//!   request);
//! - `exit`: from the last request's arrival to the process's exit (the answer, the trace's
//!   last lines, shutdown).
//!
//! `MUR_RUN_BENCH_RUNS` sets the number of measured runs of the 21-turn session (default 20;
//! the 1,001-turn session runs a fifth as often, at least 3 times). With `--json` the medians
//! are printed as one JSON object instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use murmur_registry::source::{LocalArtifact, ensure_components};
use murmur_testkit::emulator::{Emulator, Recorded, Reply, Script};
use serde_json::json;

const KEY: &str = "sk-bench";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The capsule: the OpenAI Chat driver and the read-file tool, built from this repository.
fn capsule(dir: &Path, endpoint: &str, turns: u32) {
    let text = format!(
        r#"name: bench-session
version: "0.1.0"
artifacts:
  - name: driver-openai-chat
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{BENCH_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: {tool} }}
inference:
  model: bench-model
  driver: {{ artifact: driver-openai-chat }}
  system_prompt: Read the notes when asked.
  max_turns: {turns}
"#,
        driver = repo().join("artifacts/driver-openai-chat").display(),
        tool = repo().join("artifacts/read-file").display(),
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
    let workdir = dir.join("workdir");
    std::fs::create_dir_all(&workdir).unwrap();
    std::fs::write(workdir.join("notes.md"), "milk\neggs\nbread\n").unwrap();
}

/// `turns - 1` read-file calls, then an answer.
fn script(turns: u32) -> Script {
    let mut script = Script::new().with_api_key(KEY);
    for turn in 1..turns {
        script = script.with_reply(Reply::default().with_tool_call(
            format!("call_{turn}"),
            "read-file",
            json!({ "path": "notes.md" }),
        ));
    }
    script.with_reply(Reply::text("Milk, eggs and bread."))
}

/// One measured session, or the medians of several.
struct Run {
    process: Duration,
    peak_rss_kib: u64,
    start_up: Duration,
    per_turn: Duration,
    steady_turn: Duration,
    exit: Duration,
}

fn micros_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

#[expect(clippy::zombie_processes, reason = "the child is reaped by waitpid")]
fn session(dir: &Path, home: &Path, turns: u32) -> Run {
    let emulator = Emulator::start(script(turns));
    capsule(dir, &emulator.url(), turns);
    let mut command = Command::new(env!("CARGO_BIN_EXE_mur"));
    command
        .env("MURMUR_HOME", home)
        .env("BENCH_KEY", KEY)
        .args(["run", "--task", "What is on the list?"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let forked_at = SystemTime::now();
    let started = Instant::now();
    let child = command.spawn().expect("running mur");
    let peak = watch_peak_rss(child.id());
    let mut status = 0;
    // SAFETY: `waitpid` on our own child's pid, with a valid pointer to a local.
    let pid = unsafe { libc::waitpid(child.id() as i32, &mut status, 0) };
    let process = started.elapsed();
    let exited_at = micros_since_epoch(SystemTime::now());
    assert_eq!(pid, child.id() as i32);
    let peak_rss_kib = peak.join().unwrap();
    let requests: Vec<Recorded> = emulator.requests();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "mur run failed (status {status}); the emulator saw {} requests",
        requests.len()
    );
    assert_eq!(requests.len(), turns as usize, "one request a turn");
    assert!(
        requests.iter().all(|r| r.status == 200),
        "every request answered"
    );
    let forked = micros_since_epoch(forked_at);
    let last = requests.last().unwrap();
    let emulator_before_last: u64 = requests[..requests.len() - 1]
        .iter()
        .map(|r| r.handled_us)
        .sum();
    let first = &requests[0];
    let runtime_until_last = last.arrived_us - forked - emulator_before_last;
    let steady_gaps = (last.arrived_us - first.arrived_us) - emulator_before_last;
    Run {
        process,
        peak_rss_kib,
        start_up: Duration::from_micros(first.arrived_us - forked),
        per_turn: Duration::from_micros(runtime_until_last / turns as u64),
        steady_turn: Duration::from_micros(steady_gaps / (turns as u64 - 1)),
        exit: Duration::from_micros(exited_at.saturating_sub(last.arrived_us)),
    }
}

/// The child's peak resident set (`VmHWM`), read every half millisecond from the moment it
/// runs `mur` until it exits. (`wait4`'s `ru_maxrss` cannot be used: a child spawned with
/// `vfork` carries the parent's high-water mark, and this process holds every request the
/// emulator received.) A peak in the last half millisecond before exit would be missed; the
/// peak of a session comes before its last request, which the emulator answered.
fn watch_peak_rss(pid: u32) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        let mut peak = 0;
        loop {
            let comm = std::fs::read_to_string(proc_dir.join("comm")).unwrap_or_default();
            let Ok(status) = std::fs::read_to_string(proc_dir.join("status")) else {
                return peak;
            };
            if comm.trim() == "mur" {
                let high_water = status
                    .lines()
                    .find_map(|line| line.strip_prefix("VmHWM:"))
                    .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok());
                match high_water {
                    Some(kib) => peak = peak.max(kib),
                    // A zombie has no memory left to report.
                    None if peak > 0 => return peak,
                    None => {}
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    })
}

fn median<T: Ord + Copy>(mut values: Vec<T>) -> T {
    values.sort();
    values[values.len() / 2]
}

struct Summary {
    turns: u32,
    runs: usize,
    median: Run,
}

fn measure(turns: u32, runs: usize) -> Summary {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // Fills the compiled-component cache.
    session(dir.path(), home.path(), turns);
    let measured: Vec<Run> = (0..runs)
        .map(|_| session(dir.path(), home.path(), turns))
        .collect();
    let median_of = |field: fn(&Run) -> Duration| median(measured.iter().map(field).collect());
    Summary {
        turns,
        runs,
        median: Run {
            process: median_of(|r| r.process),
            peak_rss_kib: median(measured.iter().map(|r| r.peak_rss_kib).collect()),
            start_up: median_of(|r| r.start_up),
            per_turn: median_of(|r| r.per_turn),
            steady_turn: median_of(|r| r.steady_turn),
            exit: median_of(|r| r.exit),
        },
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    // `cargo test --benches` runs benchmarks once as tests; this one only under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let json_output = std::env::args().any(|arg| arg == "--json");
    for name in ["driver-openai-chat", "read-file"] {
        let artifact = LocalArtifact::open(&repo().join("artifacts").join(name), &|_| None)
            .expect("the artifact's manifest");
        ensure_components(&[&artifact]).expect("building the artifact");
    }
    let runs: usize = std::env::var("MUR_RUN_BENCH_RUNS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20);
    let summaries = [measure(21, runs), measure(1001, (runs / 5).max(3))];
    if json_output {
        let value: Vec<_> = summaries
            .iter()
            .map(|s| {
                json!({
                    "turns": s.turns,
                    "runs": s.runs,
                    "process_ms": ms(s.median.process),
                    "peak_rss_mib": s.median.peak_rss_kib as f64 / 1024.0,
                    "start_up_ms": ms(s.median.start_up),
                    "per_turn_ms": ms(s.median.per_turn),
                    "steady_turn_ms": ms(s.median.steady_turn),
                    "exit_ms": ms(s.median.exit),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(value));
        return;
    }
    println!(
        "{:>6} {:>5} {:>11} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "turns", "runs", "process ms", "peak MiB", "start ms", "per turn", "steady turn", "exit ms"
    );
    for s in &summaries {
        println!(
            "{:>6} {:>5} {:>11.1} {:>10.1} {:>10.1} {:>10.3} {:>12.3} {:>9.1}",
            s.turns,
            s.runs,
            ms(s.median.process),
            s.median.peak_rss_kib as f64 / 1024.0,
            ms(s.median.start_up),
            ms(s.median.per_turn),
            ms(s.median.steady_turn),
            ms(s.median.exit),
        );
    }
}
