//! One engine survives every way a component call can fail, and reports each distinctly: a
//! deadline, a memory limit and a trap on the same engine and the same loaded component, each
//! followed by a normal call that works.

use std::path::Path;
use std::time::Duration;

use murmur_registry::source::{LocalArtifact, ensure_components};
use murmur_runtime::tool::{ToolInput, ToolStatus};
use murmur_runtime::{Engine, EngineConfig, Grants, LoadedComponent, RunWorld, RuntimeError};

fn probe(engine: &Engine) -> LoadedComponent {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/probe");
    let artifact = LocalArtifact::open(&dir, &|_| None).expect("the probe's manifest");
    ensure_components(&[&artifact]).expect("building the probe");
    engine
        .load_component("probe", &artifact.component_path(), RunWorld::Tool)
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
        ..EngineConfig::default()
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
        Err(RuntimeError::InputUnanswered { why, .. }) => {
            assert_eq!(why, murmur_runtime::grants::task::NO_TASK)
        }
        other => panic!("{other:?}"),
    }
}

/// A component that imports one interface, with its exact type, and exports nothing.
fn importing(interface: &str, instance_type: &str) -> Vec<u8> {
    wat::parse_str(format!(
        "(component (import \"{interface}\" (instance {instance_type})))"
    ))
    .unwrap()
}

#[test]
fn a_driver_cannot_import_task_which_a_tool_may_and_neither_may_import_message_send() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let task = importing(
        "murmur:task/task@0.1.0",
        r#"(export "request-input" (func (param "prompt" string) (result string)))"#,
    );
    let message = importing(
        "murmur:message/send@0.1.0",
        r#"
        (type $message' (record (field "message-id" string) (field "context-id" (option string))
                                (field "text" string)))
        (export "message" (type $message (eq $message')))
        (type $state' (enum "submitted" "working" "input-required" "completed" "failed"
                            "rejected" "canceled"))
        (export "task-state" (type $state (eq $state')))
        (type $result' (record (field "task-id" string) (field "context-id" string)
                               (field "state" $state)))
        (export "task-result" (type $result (eq $result')))
        (export "send" (func (param "peer-url" string) (param "message" $message)
                             (result (result $result (error string)))))
        "#,
    );
    let reason = |outcome: Result<LoadedComponent, RuntimeError>| match outcome {
        Err(error) => error.to_string(),
        Ok(_) => panic!("loaded"),
    };
    let as_driver = reason(engine.load_component_bytes("d", &task, RunWorld::Driver));
    assert_eq!(
        as_driver,
        "driver `d` imports `murmur:task/task@0.1.0`, which the `driver` world does not \
         provide: it is given to tools only"
    );
    // The same import links in the tool world: loading then stops only at the missing
    // export, which proves the import above is the interface's exact type.
    let as_tool = reason(engine.load_component_bytes("t", &task, RunWorld::Tool));
    assert!(
        as_tool.contains("does not export `murmur:tool/run@0.1.0`")
            && !as_tool.contains("murmur:task/task"),
        "{as_tool}"
    );
    // `murmur:message/send`, of its exact type, is given to capsule components only.
    for world in [RunWorld::Tool, RunWorld::Driver] {
        let refused = reason(engine.load_component_bytes("m", &message, world));
        assert!(
            refused.contains("imports `murmur:message/send@0.1.0`, which the")
                && refused.contains("given to capsule components only; to delegate"),
            "{refused}"
        );
    }
}

#[test]
fn the_probe_tool_loads_as_a_tool_and_not_as_a_driver() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/probe");
    let artifact = LocalArtifact::open(&dir, &|_| None).expect("the probe's manifest");
    ensure_components(&[&artifact]).expect("building the probe");
    let path = artifact.component_path();
    assert!(
        engine
            .load_component("probe", &path, RunWorld::Tool)
            .is_ok()
    );
    match engine.load_component("probe", &path, RunWorld::Driver) {
        Err(RuntimeError::WorldImport { import, world, .. }) => {
            assert_eq!(
                (import.as_str(), world),
                ("murmur:task/task@0.1.0", "driver")
            )
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a component importing tool-only interfaces loaded as a driver"),
    }
}

/// What the issue's authors met as "wrong type": the reason names the world, the import, the
/// export in it and the mismatch.
#[test]
fn an_import_of_the_wrong_shape_is_named_with_its_world() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    // `request-input` takes a string and returns one; this one takes a number.
    let wrong = importing(
        "murmur:task/task@0.1.0",
        r#"(export "request-input" (func (param "prompt" u32) (result string)))"#,
    );
    let reason = match engine.load_component_bytes("t", &wrong, RunWorld::Tool) {
        Err(RuntimeError::Load { reason, .. }) => reason,
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("loaded"),
    };
    assert!(
        reason.contains("`tool`-world")
            && reason.contains("murmur:task/task@0.1.0")
            && reason.contains("request-input")
            && reason.contains("expected `string` found `u32`"),
        "{reason}"
    );
    // An interface the tool world does not grant at all is named too.
    let shell = importing(
        "murmur:shell/execute@0.1.0",
        r#"(export "run" (func (param "command" string)))"#,
    );
    let reason = match engine.load_component_bytes("t", &shell, RunWorld::Tool) {
        Err(error @ RuntimeError::WorldImport { .. }) => error.to_string(),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("loaded"),
    };
    assert!(
        reason.contains("the `tool` world does not provide")
            && reason.contains("murmur:shell/execute@0.1.0"),
        "{reason}"
    );
}

/// A hook built for another runtime's hook contract names that contract when it fails to load,
/// rather than listing what is missing from this one.
#[test]
fn a_hook_of_another_contract_is_refused_naming_the_contract_it_exports() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("component.wasm");
    let component = |export: &str| {
        wat::parse_str(format!(
            r#"(component
                (core module $m (func (export "f")))
                (core instance $i (instantiate $m))
                (func $f (canon lift (core func $i "f")))
                (instance $lifecycle (export "on-session-start" (func $f)))
                (export "{export}" (instance $lifecycle)))"#
        ))
        .unwrap()
    };
    let reason = |export: &str| {
        std::fs::write(&path, component(export)).unwrap();
        match murmur_runtime::hooks::load_hook(&engine, "old", &path, &[]) {
            Err(RuntimeError::Load { reason, .. }) => reason,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("loaded"),
        }
    };
    let other = reason("murmur:hook/lifecycle@0.6.0");
    assert!(
        other.contains("it exports `murmur:hook/lifecycle@0.6.0`, a hook contract")
            && other.contains("murmur:hook/lifecycle@0.1.0"),
        "{other}"
    );
    let unrelated = reason("example:thing/api");
    assert!(
        unrelated.contains("(it exports example:thing/api)"),
        "{unrelated}"
    );
}
