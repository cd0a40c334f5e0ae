//! What a task changed in the directory the agent works in (issue 41): the looks
//! `session/changes.rs` takes, on a workspace of 10,000 files (100 directories of 100 files of
//! 1 KiB).
//!
//! - `first_look`: the session's first look, hashing every file (all under 1 MiB).
//! - `per_task`: what each task costs (goal ≤ 50 ms): the look before it (reusing the last
//!   look's hashes), three files written by "the agent", the look after it and the comparison.

use std::path::Path;
use std::time::Duration;

use criterion::Criterion;
use murmur_runtime::session::changes::Snapshot;

const SKIP: &[&str] = &[
    "trace.jsonl",
    "contexts",
    "logs",
    "out/result.txt",
    "MURMUR.md",
];

fn workspace(root: &Path) {
    let block = vec![b'x'; 1024];
    for d in 0..100 {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("file{f:03}.txt")), &block).unwrap();
        }
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let root = dir.path();
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    let mut group = criterion.benchmark_group("workspace_changes");
    group.bench_function("first_look", |b| b.iter(|| Snapshot::take(root, SKIP)));
    let mut last = Snapshot::take(root, SKIP);
    let mut n = 0u64;
    group.bench_function("per_task", |b| {
        b.iter(|| {
            let before = last.retake(root, SKIP);
            n += 1;
            for d in [3, 40, 77] {
                std::fs::write(
                    root.join(format!("dir{d:03}/file050.txt")),
                    format!("edit {n}"),
                )
                .unwrap();
            }
            let after = before.retake(root, SKIP);
            let changes = before.changes_to(&after);
            assert_eq!(changes.counts.modified, 3);
            last = after;
        })
    });
    group.finish();
    criterion.final_summary();
}
