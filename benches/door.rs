//! Door benchmarks: the real `mur run --serve` binary on loopback, with a `queue` capsule whose
//! model is the provider emulator (it answers at once).
//!
//! - `door/get_task_64_clients` (criterion, `iter_custom`): 64 workers, each with one kept-alive
//!   HTTP/1.1 connection, share `iters` `GetTask` requests; the wall time of the lot. Criterion
//!   reports it per request, i.e. the inverse of throughput.
//! - A fixed-duration run with the same 64 workers (1 s warm-up, 5 s measured), every latency
//!   recorded: requests/s, p50, p90, p99, p99.9, max.
//! - Memory of a fresh `queue` capsule (VmRSS, VmHWM, RssAnon from `/proc/PID/status`): idle 1 s
//!   after it listens, and idle 1 s after each step of completed tasks (`MUR_DOOR_MEMORY_STEPS`,
//!   cumulative counts, default `100,1000`; `1000,10000,100000` shows it stays flat). Also of
//!   the load-tested one.
//! - SendMessage with a 1 KB and a 3 MB text: how long until the door answers with
//!   `returnImmediately` (accepted), and until the task completed (blocking); the median of 5.
//!
//! Every answer is checked: HTTP 200, a JSON-RPC 2.0 success with the request's id, for the
//! task asked about, in state `TASK_STATE_COMPLETED`. Any failure is counted, shown, and makes
//! the bench exit with status 1.
//!
//! The capsule's door has a `door.auth` principal and every request presents its bearer token
//! (the door compares it in constant time before reading the body): the numbers are with
//! authentication on. `MUR_DOOR_AUTH=off` serves and loads it without, for comparison.
//!
//! `mur` is the binary cargo built for this bench (`CARGO_BIN_EXE_mur`: under `cargo bench`,
//! the release one). Without `--bench` (`cargo test --benches`), everything runs briefly.
//! `MUR_DOOR_CLIENTS` and `MUR_DOOR_SECS` change the fixed-duration run's workers and length,
//! `MUR_DOOR_TASKS` the number of tasks created.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{repo_root, shared_home};
use serde_json::{Value, json};
use tokio::net::TcpStream;

const KEY: &str = "sk-emulator-door-bench";
/// The bearer token of the door's one principal.
const DOOR_TOKEN: &str = "door-bench-token-0123456789abcdef";

/// Whether the door asks for a credential (`MUR_DOOR_AUTH=off`: not).
fn with_auth() -> bool {
    std::env::var("MUR_DOOR_AUTH").map_or(true, |v| v != "off")
}
const CLIENTS: usize = 64;
/// Tasks created before the load, and before the second memory reading.
const TASKS: usize = 100;

fn mur_binary() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_mur"));
    if !bin.is_file() {
        eprintln!(
            "error: the mur binary is missing at {}; run `cargo build --release -p murmur-cli`",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

/// A capsule like the door tests' (the Anthropic driver, read-file, probe), queue acceptance,
/// whose model the emulator answers with the same text every time.
fn capsule(dir: &Path, emulator: &Emulator) {
    let root = repo_root();
    let text = format!(
        r#"name: doorbench
version: "0.1.0"
description: A capsule behind the A2A door, under load.
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
lifecycle: {{ task_acceptance: queue }}
{auth}"#,
        driver = root.join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        read_file = root.join("artifacts/read-file").display(),
        probe = root.join("tests/fixtures/probe").display(),
        auth = if with_auth() {
            "door:\n  auth:\n    - { principal: bench, bearer: \"${DOOR_TOKEN}\" }\n"
        } else {
            ""
        },
    );
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
}

fn emulator() -> Emulator {
    let script = Script::from_yaml("turns: []\nby_model:\n  test-model: { text: \"done\" }\n")
        .expect("script");
    Emulator::builder(script).api_key(KEY).start().unwrap()
}

/// `mur run DIR --serve --port 0 --json`, as a child whose pid we keep.
struct Server {
    child: Child,
    url: String,
    stderr: Arc<std::sync::Mutex<String>>,
}

impl Server {
    fn start(bin: &Path, dir: &Path) -> Server {
        let mut command = Command::new(bin);
        command.env_clear();
        for name in ["PATH", "HOME"] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        let mut child = command
            .env("MURMUR_HOME", shared_home())
            .env("EMU_KEY", KEY)
            .env("DOOR_TOKEN", DOOR_TOKEN)
            .args(["run", "--serve", "--port", "0", "--json"])
            .arg(dir)
            .arg("--workdir")
            .arg(dir.join("work"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting mur run --serve");
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).expect("reading mur's output");
        let Some(url) = first.trim().strip_prefix("listening on ") else {
            let _ = child.wait();
            panic!(
                "mur did not start serving: {first}{}",
                stderr.lock().unwrap()
            );
        };
        let url = url.to_string();
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        Server { child, url, stderr }
    }

    /// `127.0.0.1:PORT`
    fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    fn memory(&self) -> Memory {
        Memory::of(self.child.id())
    }

    /// SIGTERM, then waits for it to end.
    fn stop(mut self) {
        // SAFETY: a signal to our own child, which has not been reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        eprintln!(
            "warning: mur did not stop on SIGTERM within 20 s; killed. stderr:\n{}",
            self.stderr.lock().unwrap()
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// From `/proc/PID/status`, in KiB.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss: u64,
    hwm: u64,
    anon: u64,
    threads: u64,
}

impl Memory {
    fn of(pid: u32) -> Memory {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .expect("reading /proc/PID/status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss: field("VmRSS:"),
            hwm: field("VmHWM:"),
            anon: field("RssAnon:"),
            threads: field("Threads:"),
        }
    }

    fn row(&self, what: &str) -> String {
        let mib = |kib: u64| kib as f64 / 1024.0;
        format!(
            "  {what:<50} {:>8.1} {:>8.1} {:>8.1} {:>7}",
            mib(self.rss),
            mib(self.hwm),
            mib(self.anon),
            self.threads
        )
    }
}

/// One kept-alive HTTP/1.1 connection to the door.
struct Conn {
    addr: String,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(addr: &str) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(connection);
        Ok(Conn {
            addr: addr.to_string(),
            sender,
        })
    }

    /// POSTs a JSON body to `/`: the status and the body. After a transport error the
    /// connection is opened again for the next request.
    async fn post(&mut self, body: String) -> Result<(u16, Bytes), String> {
        let result = tokio::time::timeout(Duration::from_secs(30), self.exchange(body)).await;
        let result = result.unwrap_or_else(|_| Err("no answer within 30 s".to_string()));
        if result.is_err()
            && let Ok(fresh) = Conn::open(&self.addr).await
        {
            *self = fresh;
        }
        result
    }

    async fn exchange(&mut self, body: String) -> Result<(u16, Bytes), String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let mut request = hyper::Request::post("/")
            .header("host", &self.addr)
            .header("content-type", "application/json");
        if with_auth() {
            request = request.header("authorization", format!("Bearer {DOOR_TOKEN}"));
        }
        let request = request.body(Full::new(Bytes::from(body))).unwrap();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("transport: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?
            .to_bytes();
        Ok((status, body))
    }
}

/// Sends `count` messages one after another (each waits for its task to end); their task ids.
async fn create_tasks(addr: &str, count: usize) -> Vec<String> {
    let mut conn = Conn::open(addr).await.expect("connecting to the door");
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
            "message": {"messageId": format!("m-{n}"), "role": "ROLE_USER",
                        "parts": [{"text": format!("task number {n}")}]}}});
        let (status, bytes) = conn
            .post(body.to_string())
            .await
            .expect("the door answers SendMessage");
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let task = &answer["result"]["task"];
        assert!(
            status == 200 && task["status"]["state"] == "TASK_STATE_COMPLETED",
            "SendMessage did not complete its task: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        ids.push(task["id"].as_str().expect("a task id").to_string());
    }
    ids
}

/// SendMessage timings for a 1 KB and a 3 MB text of sentences.
struct SendTimings {
    runs: usize,
    /// (label, accepted, completed): medians.
    rows: Vec<(&'static str, Duration, Duration)>,
}

/// Sends each text `runs` times, first with `returnImmediately` (timed until the answer), then
/// blocking (timed until the completed task).
async fn send_timings(addr: &str, runs: usize) -> SendTimings {
    let mut conn = Conn::open(addr).await.expect("connecting to the door");
    let sentence = "The quick brown fox jumps over the lazy dog. ";
    let mut rows = Vec::new();
    for (label, bytes) in [("1 KB", 1_000), ("3 MB", 3_000_000)] {
        let text = sentence.repeat(bytes / sentence.len() + 1);
        let mut timings = [Vec::new(), Vec::new()];
        for n in 0..runs {
            // Blocking first; then accepted-only, and its task is let finish untimed, so
            // each timing has the queue to itself.
            for (at, immediately) in [(1, false), (0, true)] {
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
                    "message": {"messageId": format!("s-{n}"), "role": "ROLE_USER",
                                "parts": [{"text": &text[..bytes]}]},
                    "configuration": {"returnImmediately": immediately}}});
                let started = Instant::now();
                let (status, answer) = conn
                    .post(body.to_string())
                    .await
                    .expect("the door answers SendMessage");
                timings[at].push(started.elapsed());
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
                let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
                let task = answer["result"]["task"]["id"].as_str().unwrap_or_default();
                if immediately {
                    loop {
                        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "GetTask",
                                          "params": {"id": task, "historyLength": 0}});
                        let (_, got) = conn.post(body.to_string()).await.expect("GetTask");
                        let got: Value = serde_json::from_slice(&got).unwrap_or(Value::Null);
                        if got["result"]["status"]["state"] == "TASK_STATE_COMPLETED" {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }
        let median = |mut list: Vec<Duration>| {
            list.sort();
            list[list.len() / 2]
        };
        let [accepted, completed] = timings;
        rows.push((label, median(accepted), median(completed)));
    }
    SendTimings { runs, rows }
}

/// One `GetTask`, checked. `Err` says what was wrong.
async fn get_task(conn: &mut Conn, rpc_id: u64, task: &str) -> Result<(), String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{rpc_id},"method":"GetTask","params":{{"id":"{task}"}}}}"#
    );
    let (status, bytes) = conn.post(body).await?;
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))?;
    let ok = answer["jsonrpc"] == "2.0"
        && answer["id"] == rpc_id
        && answer.get("error").is_none()
        && answer["result"]["id"] == task
        && answer["result"]["status"]["state"] == "TASK_STATE_COMPLETED";
    if ok {
        Ok(())
    } else {
        Err(format!("wrong answer for {task} (id {rpc_id}): {answer}"))
    }
}

/// Failures seen, with the first few described.
#[derive(Default)]
struct Failures {
    count: AtomicU64,
    samples: std::sync::Mutex<Vec<String>>,
}

impl Failures {
    fn record(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock().unwrap();
        if samples.len() < 5 {
            samples.push(what);
        }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Shared by the load's workers: each has its own connection.
struct Target {
    tasks: Vec<String>,
    conns: Vec<tokio::sync::Mutex<Conn>>,
    failures: Failures,
}

impl Target {
    /// Opens each worker's connection and sends one `GetTask` on it.
    async fn connect(addr: &str, tasks: Vec<String>, clients: usize) -> Target {
        let failures = Failures::default();
        let mut conns = Vec::with_capacity(clients);
        for w in 0..clients {
            let mut conn = Conn::open(addr).await.expect("connecting to the door");
            if let Err(e) = get_task(&mut conn, w as u64, &tasks[0]).await {
                failures.record(e);
            }
            conns.push(tokio::sync::Mutex::new(conn));
        }
        Target {
            tasks,
            conns,
            failures,
        }
    }
}

/// `iters` `GetTask`s shared by the workers: the wall time of the lot.
async fn batch(target: &Arc<Target>, iters: u64) -> Duration {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..target.conns.len() {
        let (target, next) = (target.clone(), next.clone());
        workers.spawn(async move {
            let mut conn = target.conns[w].lock().await;
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= iters {
                    break;
                }
                let task = &target.tasks[n as usize % target.tasks.len()];
                if let Err(e) = get_task(&mut conn, n, task).await {
                    target.failures.record(e);
                }
            }
        });
    }
    workers.join_all().await;
    started.elapsed()
}

/// What the fixed-duration run measured.
struct Load {
    clients: usize,
    window: Duration,
    /// Nanoseconds, sorted.
    latencies: Vec<u64>,
    failures: u64,
    /// CPU used over the window, by the server, by this process, and by the whole machine.
    cpu: CpuUse,
}

/// CPU time in clock ticks, from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTicks {
    server: u64,
    bench: u64,
    /// Every CPU's busy and total time (`/proc/stat`).
    busy: u64,
    total: u64,
}

impl CpuTicks {
    fn now(server: u32) -> CpuTicks {
        let process = |path: String| {
            let stat = std::fs::read_to_string(path).unwrap_or_default();
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<u64> = after
                .split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect();
            // utime and stime: fields 14 and 15, counted from the pid.
            fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
        };
        let machine = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let all: Vec<u64> = machine
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let total: u64 = all.iter().take(8).sum();
        // idle and iowait are the 4th and 5th.
        let idle = all.get(3).copied().unwrap_or(0) + all.get(4).copied().unwrap_or(0);
        CpuTicks {
            server: process(format!("/proc/{server}/stat")),
            bench: process("/proc/self/stat".to_string()),
            busy: total - idle,
            total,
        }
    }
}

/// CPU used between two readings, in seconds of one CPU.
#[derive(Debug, Clone, Copy, Default)]
struct CpuUse {
    server: f64,
    bench: f64,
    /// Everything else on the machine (other processes, steal, interrupts).
    others: f64,
    /// CPU-seconds available (CPUs times the wall time).
    capacity: f64,
}

impl CpuUse {
    fn between(a: CpuTicks, b: CpuTicks) -> CpuUse {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let server = b.server.saturating_sub(a.server) as f64 / hz;
        let bench = b.bench.saturating_sub(a.bench) as f64 / hz;
        let busy = b.busy.saturating_sub(a.busy) as f64 / hz;
        CpuUse {
            server,
            bench,
            others: (busy - server - bench).max(0.0),
            capacity: b.total.saturating_sub(a.total) as f64 / hz,
        }
    }
}

impl Load {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        Duration::from_nanos(self.latencies[rank.clamp(1, self.latencies.len()) - 1])
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.window.as_secs_f64()
    }
}

/// Workers send `GetTask` back to back for `warm_up + window`; the latencies of requests sent
/// within the window are kept.
async fn fixed_duration(
    target: &Arc<Target>,
    server: u32,
    warm_up: Duration,
    window: Duration,
) -> Load {
    let before = target.failures.count();
    let start = Instant::now();
    let measure_from = start + warm_up;
    let until = measure_from + window;
    let meter = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        let first = CpuTicks::now(server);
        tokio::time::sleep_until(until.into()).await;
        CpuUse::between(first, CpuTicks::now(server))
    });
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..target.conns.len() {
        let target = target.clone();
        workers.spawn(async move {
            let mut conn = target.conns[w].lock().await;
            let mut latencies = Vec::with_capacity(200_000);
            let mut k: u64 = 0;
            loop {
                let sent = Instant::now();
                if sent >= until {
                    break;
                }
                let rpc_id = (w as u64) << 32 | k;
                let task = &target.tasks[(w + k as usize) % target.tasks.len()];
                k += 1;
                let result = get_task(&mut conn, rpc_id, task).await;
                let took = sent.elapsed();
                if let Err(e) = result {
                    target.failures.record(e);
                }
                if sent >= measure_from {
                    latencies.push(took.as_nanos() as u64);
                }
            }
            latencies
        });
    }
    let mut latencies: Vec<u64> = workers.join_all().await.into_iter().flatten().collect();
    latencies.sort_unstable();
    let cpu = meter.await.unwrap();
    Load {
        cpu,
        clients: target.conns.len(),
        window,
        latencies,
        failures: target.failures.count() - before,
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let bin = mur_binary();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tasks = match env_number("MUR_DOOR_TASKS") {
        Some(n) => n.max(1) as usize,
        None if measuring => TASKS,
        None => 5,
    };
    let clients = env_number("MUR_DOOR_CLIENTS").map_or(CLIENTS, |n| n as usize);
    let (warm_up, window) = if measuring {
        let secs = env_number("MUR_DOOR_SECS").unwrap_or(5);
        (Duration::from_secs(1), Duration::from_secs(secs))
    } else {
        (Duration::from_millis(100), Duration::from_millis(300))
    };

    // The load: one server with `tasks` completed tasks. (Its start also warms the compile
    // cache for the memory reading below.)
    let emulator = emulator();
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &emulator);
    let server = Server::start(&bin, dir.path());
    let ids = runtime.block_on(create_tasks(server.addr(), tasks));
    let target = Arc::new(runtime.block_on(Target::connect(server.addr(), ids, clients)));

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut group = criterion.benchmark_group("door");
    group.throughput(Throughput::Elements(1));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(20);
    group.bench_function(format!("get_task_{clients}_clients"), |b| {
        b.iter_custom(|iters| runtime.block_on(batch(&target, iters)))
    });
    group.finish();
    let criterion_failures = target.failures.count();

    let load = runtime.block_on(fixed_duration(&target, server.child.id(), warm_up, window));
    let loaded = server.memory();
    server.stop();

    // Memory: a fresh server, idle; then after `tasks` completed tasks, idle again.
    let dir = tempfile::tempdir().unwrap();
    capsule(dir.path(), &emulator);
    let server = Server::start(&bin, dir.path());
    let idle_wait = if measuring {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(100)
    };
    std::thread::sleep(idle_wait);
    let idle = server.memory();
    let steps: Vec<usize> = match std::env::var("MUR_DOOR_MEMORY_STEPS") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) if measuring => vec![100, 1000],
        Err(_) => vec![5],
    };
    let mut after_steps = Vec::new();
    let mut done = 0;
    for step in steps {
        let started = Instant::now();
        runtime.block_on(create_tasks(server.addr(), step.saturating_sub(done)));
        let took = started.elapsed();
        done = done.max(step);
        std::thread::sleep(idle_wait);
        after_steps.push((done, took, server.memory()));
    }
    let sends = runtime.block_on(send_timings(server.addr(), if measuring { 5 } else { 1 }));
    server.stop();
    criterion.final_summary();

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let failures = criterion_failures + load.failures;
    println!();
    println!(
        "door: `mur run --serve` ({}), loopback, {} CPUs, authentication {}",
        bin.display(),
        cpus(),
        if with_auth() {
            "on (one bearer principal)"
        } else {
            "off"
        }
    );
    println!(
        "GetTask, {} workers each with one kept-alive HTTP/1.1 connection, {} tasks, {:.1} s after {:.1} s warm-up:",
        load.clients,
        tasks,
        load.window.as_secs_f64(),
        warm_up.as_secs_f64()
    );
    println!(
        "  {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors"
    );
    println!(
        "  {:>10} {:>10.0} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
        load.latencies.len(),
        load.per_second(),
        ms(load.percentile(50.0)),
        ms(load.percentile(90.0)),
        ms(load.percentile(99.0)),
        ms(load.percentile(99.9)),
        ms(load
            .latencies
            .last()
            .map_or(Duration::ZERO, |&n| Duration::from_nanos(n))),
        load.failures
    );
    let per_request = |seconds: f64| seconds * 1e6 / load.latencies.len().max(1) as f64;
    println!(
        "  CPU over the window: mur {:.2} s ({:.1} us/request), this bench {:.2} s ({:.1} us/request), \
         everything else on the machine {:.2} s, of {:.2} CPU-s available",
        load.cpu.server,
        per_request(load.cpu.server),
        load.cpu.bench,
        per_request(load.cpu.bench),
        load.cpu.others,
        load.cpu.capacity
    );
    println!("memory of the served capsule (MiB; /proc/PID/status):");
    println!(
        "  {:<50} {:>8} {:>8} {:>8} {:>7}",
        "", "VmRSS", "VmHWM", "RssAnon", "threads"
    );
    println!(
        "{}",
        idle.row(&format!(
            "fresh, idle {:.1} s after listening",
            idle_wait.as_secs_f64()
        ))
    );
    for (count, took, memory) in &after_steps {
        println!(
            "{}",
            memory.row(&format!(
                "after {count} completed tasks, idle {:.1} s",
                idle_wait.as_secs_f64()
            ))
        );
        println!(
            "  ({count} tasks in all; this step took {:.1} s)",
            took.as_secs_f64()
        );
    }
    println!(
        "{}",
        loaded.row(&format!(
            "the load-tested one, after its {tasks} tasks + load"
        ))
    );
    println!(
        "SendMessage, one client, the median of {} (ms):",
        sends.runs
    );
    println!("  {:<10} {:>12} {:>12}", "text", "accepted", "completed");
    for (label, accepted, completed) in &sends.rows {
        println!(
            "  {:<10} {:>12.2} {:>12.2}",
            label,
            ms(*accepted),
            ms(*completed)
        );
    }
    if failures > 0 {
        println!();
        println!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        println!(
            "!!! {failures} FAILED GetTask ANSWERS ({criterion_failures} during criterion, {} in the timed run): THESE NUMBERS ARE NOT VALID",
            load.failures
        );
        for sample in target.failures.samples.lock().unwrap().iter() {
            println!("!!!   {sample}");
        }
        println!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        std::process::exit(1);
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}
