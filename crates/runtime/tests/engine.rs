//! One engine survives every way a component call can fail, and reports each distinctly: a
//! deadline, a memory limit and a trap on the same engine and the same loaded component, each
//! followed by a normal call that works.

use std::path::Path;
use std::time::Duration;

use murmur_registry::source::{LocalArtifact, ensure_components};
use murmur_runtime::tool::{ToolInput, ToolStatus};
use murmur_runtime::{Engine, EngineConfig, Grants, LoadedComponent, RuntimeError};

fn probe(engine: &Engine) -> LoadedComponent {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/probe");
    let artifact = LocalArtifact::open(&dir, &|_| None).expect("the probe's manifest");
    ensure_components(&[&artifact]).expect("building the probe");
    engine
        .load_component("probe", &artifact.component_path())
        .expect("loading the probe")
}

fn input(json: &str) -> ToolInput {
    ToolInput {
        data: Some(json.to_string()),
        log_path: None,
    }
}

/// A normal call that must work.
async fn healthy(engine: &Engine, probe: &LoadedComponent, grants: &Grants) {
    let write = input(r#"{"action":"write_file","path":"ok.txt","content":"ok"}"#);
    let report = engine.call_tool(probe, grants, &write).await;
    let output = report.outcome.expect("a normal call after a failure");
    assert_eq!(output.result.status, ToolStatus::Passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_survives_deadline_memory_limit_and_trap() {
    let engine = Engine::new(EngineConfig {
        cache_dir: None,
        pooling: true,
    })
    .unwrap();
    let probe = probe(&engine);
    let workdir = tempfile::tempdir().unwrap();
    let mut grants = Grants::new(workdir.path());
    grants.limits.deadline = Duration::from_millis(300);
    grants.limits.memory_bytes = 32 * 1024 * 1024;

    let spin = engine
        .call_tool(&probe, &grants, &input(r#"{"action":"spin"}"#))
        .await;
    assert!(
        matches!(spin.outcome, Err(RuntimeError::Deadline { .. })),
        "{:?}",
        spin.outcome
    );
    assert!(
        spin.duration < Duration::from_secs(5),
        "{:?}",
        spin.duration
    );
    healthy(&engine, &probe, &grants).await;

    let balloon = engine
        .call_tool(&probe, &grants, &input(r#"{"action":"balloon"}"#))
        .await;
    assert!(
        matches!(balloon.outcome, Err(RuntimeError::MemoryLimit { limit_bytes, .. }) if limit_bytes == 32 * 1024 * 1024),
        "{:?}",
        balloon.outcome
    );
    healthy(&engine, &probe, &grants).await;

    let trap = engine
        .call_tool(&probe, &grants, &input(r#"{"action":"trap"}"#))
        .await;
    match &trap.outcome {
        Err(RuntimeError::Trap { message, .. }) => {
            assert!(message.contains("panicked"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    healthy(&engine, &probe, &grants).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_input_outside_an_a2a_task_fails_the_call_at_once() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let probe = probe(&engine);
    let workdir = tempfile::tempdir().unwrap();
    let grants = Grants::new(workdir.path());
    let report = engine
        .call_tool(
            &probe,
            &grants,
            &input(r#"{"action":"request_input","prompt":"approve?"}"#),
        )
        .await;
    match &report.outcome {
        Err(RuntimeError::Trap { message, .. }) => assert!(
            message.contains(murmur_runtime::grants::task::NO_TASK),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
}
