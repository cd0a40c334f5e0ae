//! `edit-file` on a 1 MiB file: one exact `str_replace` of a unique line, through the engine
//! (the component compiled and pre-linked, a fresh instance per call, the file read, edited,
//! written beside and renamed over), the cost a session pays per edit. For comparison,
//! `sed -i` on the host making the same change to a copy of the same file (a process spawn,
//! a scan of the file, a temp file renamed over it).
//!
//! Each iteration flips the marker line between two values, so every call makes a real edit.

mod support;

use std::cell::Cell;
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use murmur_runtime::Grants;
use murmur_runtime::tool::{ToolInput, ToolStatus};

const MARKERS: [&str; 2] = ["marker = ALPHA", "marker = OMEGA"];

/// 1 MiB of source-like lines with the marker line once, in the middle.
fn one_mib() -> String {
    let line = "    let value = compute(input, 42); // a line of a source file\n";
    let head = line.repeat(512 * 1024 / line.len());
    let text = format!("{head}{}\n", MARKERS[0]);
    let tail = line.repeat((1024 * 1024 - text.len()) / line.len());
    format!("{text}{tail}")
}

fn edit_file_on_one_mib(c: &mut Criterion) {
    let (runtime, engine) = support::runtime_and_engine();
    let edit_file = support::load_tool(&engine, "artifacts/edit-file");
    let content = one_mib();
    eprintln!("file: {} bytes", content.len());

    let workdir = tempfile::tempdir().unwrap();
    std::fs::write(workdir.path().join("big.rs"), &content).unwrap();
    let grants = Grants::new(workdir.path());
    let inputs: Vec<ToolInput> = [(0, 1), (1, 0)]
        .iter()
        .map(|&(from, to)| ToolInput {
            data: Some(
                serde_json::json!({"path": "big.rs", "old": MARKERS[from], "new": MARKERS[to]})
                    .to_string(),
            ),
            log_path: None,
        })
        .collect();
    let flip = Cell::new(0usize);
    c.bench_function("edit_file/str_replace_1mib/engine", |b| {
        b.iter(|| {
            let i = flip.get();
            flip.set(1 - i);
            let report = runtime.block_on(engine.call_tool(&edit_file, &grants, &inputs[i]));
            let output = report.outcome.expect("the call ran");
            assert_eq!(output.result.status, ToolStatus::Passed, "{output:?}");
        })
    });

    let host = tempfile::tempdir().unwrap();
    let file = host.path().join("big.rs");
    std::fs::write(&file, &content).unwrap();
    let scripts = [
        format!("s/{}/{}/", MARKERS[0], MARKERS[1]),
        format!("s/{}/{}/", MARKERS[1], MARKERS[0]),
    ];
    let flip = Cell::new(0usize);
    c.bench_function("edit_file/str_replace_1mib/sed_i_host", |b| {
        b.iter(|| {
            let i = flip.get();
            flip.set(1 - i);
            let status = Command::new("sed")
                .arg("-i")
                .arg(&scripts[i])
                .arg(&file)
                .status()
                .expect("running sed");
            assert!(status.success());
        })
    });
}

criterion_group!(benches, edit_file_on_one_mib);
criterion_main!(benches);
