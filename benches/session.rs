//! Session benchmarks (issue 3):
//!
//! - `turn_overhead`: the runtime's own cost of a turn, with a driver that answers at once (the
//!   probe driver, no network): one driver component call, one tool component call, their
//!   trace lines and the history bookkeeping. Measured over 50-turn sessions; divide by 50.
//! - `start_to_first_request`: `mur run` as a new process, warm compile cache, until the
//!   driver's first request reaches a loopback gateway.
//! - `hooks`: the same 50-turn session with a blocking no-op hook hearing every event (105
//!   dispatches: 2 a turn, 5 a session), against none; and a 40-turn session with and without
//!   the async debug hook.
//! - `choices`: a 50-turn session of a capsule with two alternates, each answer a thinking block
//!   and a `switch-driver` call (the runtime's in-process tool, a `control_change` line), so
//!   every turn marks `produced_by`, filters thinking for the receiving choice and switches;
//!   against the plain 50-turn session of `turn_overhead`.
//! - `otel_export`: the 50-turn session of `turn_overhead` with `observability.otel_endpoint`
//!   set to a loopback OTLP/HTTP receiver: 103 spans built and sent, the flush at
//!   `session_end` included; against `turn_overhead`.
//! - peak RSS of a 50-turn `mur run` session, printed before the benchmarks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use murmur_runtime::session::{self, SessionConfig, Silent, TaskInput, TaskSource};
use murmur_runtime::{Engine, EngineConfig};
use murmur_testkit::RecordingServer;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A capsule whose probe driver always asks for one probe tool call, so a session runs
/// `max_turns` turns, each a driver call and a tool call. `answer: false` makes the driver
/// reach its gateway instead.
fn capsule(dir: &Path, endpoint: &str, max_turns: u32, answer: bool) -> PathBuf {
    capsule_with_hooks(dir, endpoint, max_turns, answer, "")
}

fn capsule_with_hooks(
    dir: &Path,
    endpoint: &str,
    max_turns: u32,
    answer: bool,
    hooks: &str,
) -> PathBuf {
    let answer = if answer {
        r#", answer: { stop_reason: tool_call, content: [ { type: tool_call, id: c1, name: probe, input: { action: result, status: passed, data: "ok" } } ] }"#
    } else {
        ""
    };
    let text = format!(
        r#"name: bench
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
{hooks}
inference:
  model: bench-model
  driver: {{ artifact: probe-driver, config: {{ mode: bench{answer} }} }}
  max_turns: {max_turns}
"#,
        driver = repo().join("tests/fixtures/probe-driver").display(),
        probe = repo().join("tests/fixtures/probe").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn turn_overhead(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "http://127.0.0.1:9", 50, true);
    fifty_turns(c, "turn_overhead", "50_turn_session", &file);
}

/// Benchmarks 50-turn sessions of the capsule `file` (whose driver answers at once) as
/// `group/name`, each session asserted to have run its 50 turns.
fn fifty_turns(c: &mut Criterion, group: &str, name: &str, file: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::new(EngineConfig {
        cache_dir: None,
        pooling: true,
        ..EngineConfig::default()
    })
    .unwrap();
    let staged = Arc::new(session::stage(file, &engine, &|_| None).expect("staging"));
    let engine = Arc::new(engine);
    let config = SessionConfig {
        workdir_root: file.parent().unwrap().join("work"),
        tasks: vec![TaskInput::new("go", TaskSource::Cli)],
        stream: false,
        host_env: Arc::new(|_| None),
        control: None,
        cancel: None,
        resume: None,
        seed: None,
        containment: None,
        workspace: None,
    };
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(50));
    group.sample_size(20);
    group.bench_function(name, |b| {
        b.iter(|| {
            let report = runtime
                .block_on(session::run(
                    engine.clone(),
                    staged.clone(),
                    &config,
                    Arc::new(Silent),
                ))
                .unwrap();
            assert_eq!(report.totals.turns, 50);
        })
    });
    group.finish();
}

/// A staged capsule with `hooks` (artifact entries) and a session config for it.
fn staged_session(
    engine: &Engine,
    dir: &Path,
    max_turns: u32,
    hooks: &str,
) -> (Arc<session::Staged>, SessionConfig) {
    let file = capsule_with_hooks(dir, "http://127.0.0.1:9", max_turns, true, hooks);
    let staged = Arc::new(session::stage(&file, engine, &|_| None).expect("staging"));
    let config = SessionConfig {
        workdir_root: dir.join("work"),
        tasks: vec![TaskInput::new("go", TaskSource::Cli)],
        stream: false,
        host_env: Arc::new(|_| None),
        control: None,
        cancel: None,
        resume: None,
        seed: None,
        containment: None,
        workspace: None,
    };
    (staged, config)
}

fn hooks(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Arc::new(
        Engine::new(EngineConfig {
            cache_dir: None,
            pooling: true,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let entry = |name: &str| {
        format!(
            "  - {{ name: {name}, version: \"0.1.0\", runtime: hook, path: {} }}",
            repo()
                .join(if name == "hook-noop" {
                    "tests/fixtures"
                } else {
                    "artifacts"
                })
                .join(name)
                .display()
        )
    };
    let cases = [
        ("50_turns_no_hook", 50, String::new()),
        ("50_turns_noop_hook", 50, entry("hook-noop")),
        ("40_turns_no_hook", 40, String::new()),
        ("40_turns_debug_hook", 40, entry("debug-hook")),
    ];
    let mut group = c.benchmark_group("hooks");
    group.sample_size(20);
    for (name, turns, hooks) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (staged, config) = staged_session(&engine, dir.path(), turns, &hooks);
        group.bench_function(name, |b| {
            b.iter(|| {
                let report = runtime
                    .block_on(session::run(
                        engine.clone(),
                        staged.clone(),
                        &config,
                        Arc::new(Silent),
                    ))
                    .unwrap();
                assert_eq!(report.totals.turns, turns);
            })
        });
    }
    group.finish();
}

fn mur(home: &Path, capsule_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mur"));
    command
        .env("MURMUR_HOME", home)
        .args(["run", "--json", "--task", "go"])
        .arg(capsule_dir)
        .arg("--workdir")
        .arg(capsule_dir.join("work"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

fn start_to_first_request(c: &mut Criterion) {
    let gateway = RecordingServer::start("ok");
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &gateway.url(), 1, false);
    let home = tempfile::tempdir().unwrap();
    // Fills the compile cache (and builds components if needed).
    assert!(mur(home.path(), dir.path()).status().unwrap().success());

    let mut group = c.benchmark_group("start_to_first_request");
    group.sample_size(20);
    group.bench_function("warm_cache", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let before = gateway.requests().len();
                let started = Instant::now();
                let mut child = mur(home.path(), dir.path()).spawn().unwrap();
                while gateway.requests().len() == before {
                    std::thread::sleep(Duration::from_micros(100));
                }
                total += started.elapsed();
                child.wait().unwrap();
            }
            total
        })
    });
    group.finish();
}

/// Peak resident memory of a 50-turn `mur run`, from the kernel's accounting of the child.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reads its resource usage"
)]
fn peak_rss() {
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), "http://127.0.0.1:9", 50, true);
    let home = tempfile::tempdir().unwrap();
    // Warm the cache so the measured run is a session, not a compile.
    mur(home.path(), dir.path()).status().unwrap();
    let child = mur(home.path(), dir.path()).spawn().unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `wait4` on our own child's pid, with valid pointers to locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    println!(
        "peak RSS of a 50-turn `mur run` session: {:.1} MiB",
        usage.ru_maxrss as f64 / 1024.0
    );
}

/// The switching capsule of `choices`: the probe driver as primary and as the alternates `alt`
/// and `other`, answering a thinking block and a `switch-driver` call to `alt`.
fn switching_capsule(dir: &Path) -> PathBuf {
    let answer = r#"answer: { stop_reason: tool_call, content: [ { type: thinking, thinking: "weighing it", signature: sig }, { type: tool_call, id: c1, name: switch-driver, input: { choice: alt } } ] }"#;
    let text = format!(
        r#"name: bench
version: "0.1.0"
artifacts:
  - name: probe-driver
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "http://127.0.0.1:9" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
inference:
  model: bench-model
  driver: {{ artifact: probe-driver, config: {{ mode: bench, {answer} }} }}
  alternates:
    - {{ name: alt, model: bench-model-alt, driver: probe-driver }}
    - {{ name: other, model: bench-model-other, driver: probe-driver }}
  max_turns: 50
control:
  agent_settings: [inference.driver]
"#,
        driver = repo().join("tests/fixtures/probe-driver").display(),
        probe = repo().join("tests/fixtures/probe").display(),
    );
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn otel_export(c: &mut Criterion) {
    let receiver = RecordingServer::start("");
    let dir = tempfile::tempdir().unwrap();
    let file = capsule(dir.path(), "http://127.0.0.1:9", 50, true);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        "observability: {{ otel_endpoint: \"{}\" }}\n",
        receiver.url()
    ));
    std::fs::write(&file, text).unwrap();
    fifty_turns(c, "otel_export", "50_turn_session_exported", &file);
    // The receiver heard nothing only when a filter left this benchmark out.
    let sessions = receiver
        .requests()
        .iter()
        .filter(|request| request.path == "/v1/traces")
        .count();
    if sessions > 0 {
        println!("otel_export: {sessions} OTLP requests received");
    }
}

fn choices(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let file = switching_capsule(dir.path());
    fifty_turns(c, "choices", "50_turn_session_switching_every_turn", &file);
}

fn main() {
    // First, while this process is small: the child's rusage also counts the pages it shares
    // with its parent until it execs, so measured after the benchmarks it reads 2-3x high.
    peak_rss();
    let mut criterion = Criterion::default().configure_from_args();
    turn_overhead(&mut criterion);
    otel_export(&mut criterion);
    choices(&mut criterion);
    hooks(&mut criterion);
    start_to_first_request(&mut criterion);
    criterion.final_summary();
}
