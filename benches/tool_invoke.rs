//! One warm tool invocation: instantiate + `run` + teardown of a component already compiled and
//! pre-linked, the cost every tool call of a session pays. Goal: at most 100 µs median.
//!
//! `read_file` reads a small file through the first-party read-file tool under the default
//! grants; `result_only` calls the probe fixture's cheapest action, to separate the runtime's
//! per-call cost from the tool's own work.

mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use murmur_runtime::Grants;
use murmur_runtime::tool::ToolInput;

fn warm_invocation(c: &mut Criterion) {
    let (runtime, engine) = support::runtime_and_engine();
    let read_file = support::load_tool(&engine, "artifacts/read-file");
    let probe = support::load_tool(&engine, "tests/fixtures/probe");
    let workdir = tempfile::tempdir().unwrap();
    std::fs::write(workdir.path().join("notes.md"), "one\ntwo\nthree\n").unwrap();
    let grants = Grants::new(workdir.path());

    let read_input = ToolInput {
        data: Some(r#"{"path": "notes.md"}"#.to_string()),
        log_path: None,
    };
    c.bench_function("warm_tool_invocation/read_file", |b| {
        b.iter(|| {
            let report = runtime.block_on(engine.call_tool(&read_file, &grants, &read_input));
            assert!(report.outcome.is_ok());
        })
    });

    let result_input = ToolInput {
        data: Some(r#"{"action": "result", "status": "passed", "data": "x"}"#.to_string()),
        log_path: None,
    };
    c.bench_function("warm_tool_invocation/result_only", |b| {
        b.iter(|| {
            let report = runtime.block_on(engine.call_tool(&probe, &grants, &result_input));
            assert!(report.outcome.is_ok());
        })
    });
}

criterion_group!(benches, warm_invocation);
criterion_main!(benches);
