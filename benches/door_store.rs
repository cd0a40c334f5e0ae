//! The door's task store (`crates/door/src/tasks.rs`) given 1,000 tasks of 4 MiB input, each
//! created, taken, completed and reported done as a served session does it:
//!
//! - the wall time of the 1,000, and per task;
//! - what the store keeps after them: the bytes it accounts for (ended tasks' text, tasks not
//!   ended), how many tasks, and the process's resident memory (`/proc/self/statm`) before and
//!   after, per task sent and in all;
//! - `door_store/task_4mib` (criterion): one more such task on the full store, where each new
//!   task makes the store forget its oldest.
//!
//! The store's own accounting is checked: the ended tasks it keeps hold at most
//! `FINISHED_BYTES` however many were sent (the bench exits 1 otherwise). Without `--bench`
//! (`cargo test --benches`) it runs 100 tasks, and criterion briefly.

use std::time::{Duration, Instant};

use criterion::Criterion;
use murmur_a2a::model::{Message, Role, TaskState};
use murmur_door::tasks::{FINISHED_BYTES, Origin, TaskStore};

/// The input of each task: 4 MiB of text.
const INPUT_BYTES: usize = 4 << 20;

fn origin() -> Origin {
    Origin {
        origin: "client".into(),
        trust: "external".into(),
        traceparent: None,
        claimed_origin: None,
        claimed_trust: None,
        principal: Some("ops".into()),
        accepts: Vec::new(),
    }
}

/// The resident memory of this process, in bytes (`/proc/self/statm`); `None` off Linux.
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// One task as a served session goes through it: a client's 4 MiB message, taken by the
/// session, completed with a short answer, reported done (its conversation not on disk here).
fn one_task(store: &TaskStore, n: usize) {
    let id = format!("tsk_{n}");
    // What a request body becomes: the message's text, made fresh for each task.
    let input = "x".repeat(INPUT_BYTES);
    store
        .create(
            &id,
            &format!("ctx_{n}"),
            Message::text(format!("msg_{n}"), Role::User, input),
            origin(),
        )
        .expect("a task is taken");
    let text = store.take(&id).expect("the session takes it");
    assert_eq!(text.len(), INPUT_BYTES);
    drop(text);
    let answer = Message::text(format!("ans_{n}"), Role::Agent, "done");
    store.set_state(&id, TaskState::Completed, Some(answer));
    store.ran(&id, None);
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let tasks = if measuring { 1_000 } else { 100 };
    let store = TaskStore::default();
    let before = rss();
    let started = Instant::now();
    for n in 0..tasks {
        one_task(&store, n);
    }
    let took = started.elapsed();
    let after = rss();
    let usage = store.usage();
    println!(
        "door_store: {tasks} tasks of {} MiB input in {took:.2?} ({:.2?} per task)",
        INPUT_BYTES >> 20,
        took / tasks as u32
    );
    println!(
        "door_store: the store keeps {} tasks, {:.1} MiB of ended tasks' text (bound {} MiB), \
         {} bytes of tasks not ended, {} contexts",
        usage.tasks,
        mib(usage.finished_bytes as u64),
        FINISHED_BYTES >> 20,
        usage.unfinished_bytes,
        usage.contexts
    );
    if let (Some(before), Some(after)) = (before, after) {
        let grown = after.saturating_sub(before);
        println!(
            "door_store: resident memory {:.1} MiB before, {:.1} MiB after: {:.1} MiB kept in all, \
             {:.2} MiB per task sent, {:.2} MiB per task kept",
            mib(before),
            mib(after),
            mib(grown),
            mib(grown) / tasks as f64,
            mib(grown) / usage.tasks.max(1) as f64
        );
    }
    if usage.finished_bytes > FINISHED_BYTES || usage.unfinished_bytes != 0 {
        eprintln!("error: the store keeps more than its bound: {usage:?}");
        std::process::exit(1);
    }

    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .measurement_time(Duration::from_secs(if measuring { 10 } else { 1 }));
    let mut next = tasks;
    criterion.bench_function("door_store/task_4mib", |b| {
        b.iter(|| {
            one_task(&store, next);
            next += 1;
        })
    });
    criterion.final_summary();
    let usage = store.usage();
    if usage.finished_bytes > FINISHED_BYTES {
        eprintln!("error: the store keeps more than its bound: {usage:?}");
        std::process::exit(1);
    }
}
