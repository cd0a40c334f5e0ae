//! Escape cases: ending `mur`. A session is in the middle of a confined shell call whose
//! command leaves a grandchild running in the background, and `mur` gets SIGTERM or SIGHUP
//! (the session ends `canceled`, its end hooks are dispatched, its trace is closed), two
//! SIGINTs (the second ends `mur` at once), or SIGKILL (nothing of `mur` runs again). However
//! `mur` ends, nothing of the shell call outlives it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use murmur_testkit::fixture_hook;
use serde_json::{Value, json};

use super::workdir::{Setup, shell_call, text, whole_trace};

/// The command: a grandchild sleeping in the background, then the child itself; both write
/// their pids (as their PID namespace numbers them) into the workspace (their `.`), and
/// neither would end for a minute.
const SLEEPER: &str = "sleep 61 & echo $! > grandchild.pid; echo $$ > child.pid; exec sleep 60";

/// A capsule whose model runs the sleeper, with a `hook-probe` hearing every handler and
/// logging to `hooks.jsonl` in the workspace (`respond` its config's answers).
fn setup(respond: Value) -> (Setup, tempfile::TempDir) {
    let hooks = tempfile::tempdir().unwrap();
    let hook = fixture_hook(
        hooks.path(),
        "watcher",
        "hook-probe",
        "execution_mode: blocking\ncommit_policy: none\n",
    );
    let config = json!({"log": "hooks.jsonl", "respond": respond});
    let entry = format!(
        "  - {{ name: watcher, version: \"0.1.0\", runtime: hook, path: {}, config: {config}, grants: [runtime/inference, runtime/tokens, task-io/read, conversation/read], deadline_seconds: 120, capabilities: {{ filesystem: {{ scope: write }} }} }}\n",
        hook.display()
    );
    let setup = Setup::new(
        |_| vec![shell_call("s1", "bash", &["-c", SLEEPER]), text("done")],
        &["bash", "sleep"],
        &entry,
    );
    (setup, hooks)
}

/// The session's two places: its record (`trace.jsonl`) and its workspace (what the shell
/// call and the hook write).
struct Places {
    record: PathBuf,
    workspace: PathBuf,
}

/// Waits for the session's workspace (`<record>/workspace/`) to hold both pids; returns the
/// session's places and the pids.
fn wait_for_sleepers(sessions: &Path, mur: &mut Child) -> (Places, [i32; 2]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if mur.try_wait().unwrap().is_some() {
            let mut said = String::new();
            for stream in [
                mur.stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read>),
                mur.stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn std::io::Read>),
            ]
            .into_iter()
            .flatten()
            {
                let mut stream = stream;
                let _ = stream.read_to_string(&mut said);
            }
            panic!("mur ended before the shell call started: {said}");
        }
        let record = std::fs::read_dir(sessions).ok().and_then(|entries| {
            entries
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with("ses_"))
                .map(|e| e.path())
        });
        if let Some(record) = record {
            let workspace = record.join("workspace");
            let pid = |name: &str| {
                std::fs::read_to_string(workspace.join(name))
                    .ok()
                    .and_then(|text| text.trim().parse::<i32>().ok())
            };
            if let (Some(child), Some(grandchild)) = (pid("child.pid"), pid("grandchild.pid"))
                && let (Some(child), Some(grandchild)) = (
                    host_pid(child, &workspace),
                    host_pid(grandchild, &workspace),
                )
            {
                return (Places { record, workspace }, [child, grandchild]);
            }
        }
        assert!(Instant::now() < deadline, "the shell call never started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid, as this test sees it, of the process numbered `inner` in its own PID namespace
/// whose working directory is `workspace`.
fn host_pid(inner: i32, workspace: &Path) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let innermost: i32 = status
                .lines()
                .find_map(|line| line.strip_prefix("NSpid:"))?
                .split_whitespace()
                .last()?
                .parse()
                .ok()?;
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            (innermost == inner && cwd == workspace).then_some(pid)
        })
}

/// Whether `pid` is a process that has not ended (a zombie has ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Waits (at most `limit`) until none of `pids` is alive.
fn assert_all_die(pids: &[i32], limit: Duration) {
    let deadline = Instant::now() + limit;
    while pids.iter().any(|pid| alive(*pid)) {
        assert!(
            Instant::now() < deadline,
            "still running past {limit:?}: {:?}",
            pids.iter().filter(|pid| alive(**pid)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(mur: &Child, signal: libc::c_int) {
    // SAFETY: signalling a child process of this test by its pid.
    assert_eq!(unsafe { libc::kill(mur.id() as libc::pid_t, signal) }, 0);
}

/// Waits (at most `limit`) for `mur` to end; its exit code, stdout and stderr.
fn wait_end(mut mur: Child, limit: Duration) -> (Option<i32>, String, String) {
    let deadline = Instant::now() + limit;
    while mur.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = mur.kill();
            panic!("mur did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = mur.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// What the hook logged, in the workspace its filesystem grant writes.
fn hook_log(workspace: &Path) -> Vec<Value> {
    std::fs::read_to_string(workspace.join("hooks.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn sigterm_or_sighup_mid_call_cancels_the_session_with_its_end_hooks_and_kills_the_call() {
    for (sig, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let (setup, _hooks) = setup(json!({}));
        let mut mur = setup.mur().spawn();
        let (places, pids) = wait_for_sleepers(&setup.sessions(), &mut mur);
        signal(&mur, sig);
        let (exit, stdout, stderr) = wait_end(mur, Duration::from_secs(20));
        assert_eq!(exit, Some(code), "{name}: {stderr}");
        assert!(stderr.contains(name), "{stderr}");
        let report: Value = serde_json::from_str(&stdout).expect("the session report");
        assert_eq!(report["exit_status"], "canceled", "{report:#}");
        assert_all_die(&pids, Duration::from_secs(5));

        let trace = whole_trace(&places.record.join("trace.jsonl"));
        let of = |kind: &'static str| trace.iter().filter(move |e| e["event_type"] == kind);
        let task_end: Vec<&Value> = of("task_end").collect();
        assert_eq!(task_end.len(), 1);
        assert_eq!(task_end[0]["exit_status"], "canceled", "{:#}", task_end[0]);
        assert_eq!(of("session_end").next().unwrap()["exit_status"], "canceled");
        // The model was asked once: the second turn never came.
        assert_eq!(of("inference").count(), 1);

        let handlers: Vec<String> = hook_log(&places.workspace)
            .iter()
            .map(|line| line["handler"].as_str().unwrap().to_string())
            .collect();
        assert!(
            handlers.iter().any(|h| h == "on-task-end"),
            "{name}: {handlers:?}"
        );
        assert!(
            handlers.iter().any(|h| h == "on-session-end"),
            "{name}: {handlers:?}"
        );
        let task_end = hook_log(&places.workspace)
            .into_iter()
            .find(|line| line["handler"] == "on-task-end")
            .unwrap();
        assert_eq!(task_end["event"]["exit_status"], "canceled", "{task_end:#}");
    }
}

#[test]
fn a_second_sigint_ends_mur_at_once_and_the_call_dies_with_it() {
    // The end hook spins (until its 120 s deadline), so a canceled session would take that
    // long to close: the second SIGINT does not wait for it.
    let (setup, _hooks) = setup(json!({"on-task-end": {"arm": "spin"}}));
    let mut mur = setup.mur().spawn();
    let (places, pids) = wait_for_sleepers(&setup.sessions(), &mut mur);
    signal(&mur, libc::SIGINT);
    // The end hook is dispatched, and spins.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !hook_log(&places.workspace)
        .iter()
        .any(|line| line["handler"] == "on-task-end")
    {
        assert!(Instant::now() < deadline, "on-task-end never dispatched");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = Instant::now();
    signal(&mur, libc::SIGINT);
    let (exit, _, stderr) = wait_end(mur, Duration::from_secs(10));
    assert_eq!(exit, Some(130), "{stderr}");
    assert!(second.elapsed() < Duration::from_secs(10));
    assert!(stderr.contains("SIGINT again"), "{stderr}");
    assert_all_die(&pids, Duration::from_secs(5));
}

#[test]
fn sigkill_of_mur_mid_call_kills_the_calls_whole_process_group() {
    let (setup, _hooks) = setup(json!({}));
    let mut mur = setup.mur().spawn();
    let (_, pids) = wait_for_sleepers(&setup.sessions(), &mut mur);
    assert!(pids.iter().all(|pid| alive(*pid)));
    signal(&mur, libc::SIGKILL);
    let (exit, _, _) = wait_end(mur, Duration::from_secs(10));
    assert_eq!(exit, None, "killed by a signal");
    // The command was to sleep a minute; it dies with mur instead.
    assert_all_die(&pids, Duration::from_secs(5));
}
