//! The full example manifest (`tests/fixtures/spec-example`) loads, typed field by field, with no
//! diagnostic, while `ANTHROPIC_API_KEY` is unset (its `api_key` is not interpolated at load).

use crate::common;

use common::*;
use murmur_manifest::capsule::{AfterTask, Conversation, Setting, TaskAcceptance, Transport};
use murmur_manifest::{
    Build, Manifest, Runtime, check_local_artifacts, load, load_capsule, local_paths,
};
use std::path::Path;

#[test]
fn the_spec_example_loads_without_a_diagnostic() {
    let file = fixture("spec-example/murmur.yaml");
    let loaded = load(&file, &no_env);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!("not a capsule")
    };

    assert_eq!(
        (capsule.name.as_str(), capsule.version.as_str()),
        ("reviewer", "1.0.0")
    );
    let names: Vec<_> = capsule.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["driver-anthropic", "read-file", "my-tool", "compactor"]
    );
    let driver = &capsule.artifacts[0];
    assert_eq!(driver.runtime, Runtime::Driver);
    let gateway = driver.gateway.as_ref().unwrap();
    assert_eq!(gateway.endpoint, "https://api.anthropic.com");
    assert_eq!(gateway.env_reference(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(
        capsule.artifacts[3].config.as_ref().unwrap()["keep_last"],
        6
    );

    let caps = &capsule.capabilities;
    assert!(caps.network.allow[0].permits("https", "api.anthropic.com", 443));
    assert!(!caps.network.allow[0].permits("https", "example.com", 443));
    assert_eq!(caps.filesystem.read_only[0].raw, Path::new("./docs"));
    assert_eq!(
        caps.filesystem.read_only_resolved(),
        [file.parent().unwrap().join("docs")]
    );
    assert_eq!(caps.shell.allow, ["git", "make"]);
    assert_eq!(caps.env.allow, ["LANG"]);
    assert_eq!(caps.limits.memory_bytes, Some(268_435_456));
    assert_eq!(caps.limits.deadline_seconds, Some(600));

    let inference = capsule.inference.as_ref().unwrap();
    assert_eq!(inference.transport, Transport::Http);
    assert_eq!(inference.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        inference.driver.as_ref().unwrap().artifact,
        "driver-anthropic"
    );
    assert_eq!(inference.alternates[0].name, "fast");
    assert_eq!(inference.alternates[0].model, "claude-haiku-4-5");
    assert_eq!(
        inference.system_prompt.as_deref(),
        Some("You review pull requests.")
    );
    assert_eq!(inference.max_turns, 10);
    assert_eq!(inference.max_tokens, Some(8192));
    assert_eq!(inference.max_session_tokens, Some(2_000_000));
    assert_eq!(inference.compaction.threshold, 0.9);
    assert_eq!(inference.compaction.model, None);

    let context = capsule.context.as_ref().unwrap();
    assert_eq!(
        (context.max_tokens, context.seed_budget),
        (Some(200_000), 0.25)
    );
    let lifecycle = &capsule.lifecycle;
    assert_eq!(lifecycle.task_acceptance, TaskAcceptance::Single);
    assert_eq!(lifecycle.after_task, AfterTask::Exit);
    assert_eq!(lifecycle.conversation, Conversation::Stateless);
    assert_eq!(
        (lifecycle.input_timeout_secs, lifecycle.max_task_reopens),
        (600, 1)
    );
    assert_eq!(
        capsule.control.settings,
        [Setting::InferenceDriver, Setting::InferenceMaxTokens]
    );
    assert_eq!(capsule.control.secrets, ["ANTHROPIC_API_KEY"]);
    assert_eq!(capsule.control.agent_settings, [Setting::InferenceDriver]);
    assert!(!capsule.trace.include_tool_output);
    assert_eq!(capsule.observability.otel_endpoint, None);
}

#[test]
fn the_spec_example_local_tool_loads_and_agrees_with_its_entry() {
    let file = fixture("spec-example/murmur.yaml");
    let capsule = load_capsule(&file, &no_env)
        .manifest
        .expect("the capsule loads");
    let locals = check_local_artifacts(&capsule, &file, &no_env);
    assert_eq!(locals.len(), 1);
    let (name, loaded) = &locals[0];
    assert_eq!(name, "my-tool");
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let tool = loaded.manifest.as_ref().expect("an artifact manifest");
    assert_eq!(tool.runtime, Runtime::Tool);
    assert_eq!(
        tool.build,
        Some(Build::Cargo {
            package: "my-tool".into()
        })
    );
    assert_eq!(tool.input_schema.as_ref().unwrap()["required"][0], "path");
    let (dir, _) = local_paths(Path::new("./tools/my-tool"), file.parent().unwrap());
    assert_eq!(dir, file.parent().unwrap().join("tools/my-tool"));
    assert_eq!(tool.component_path(&dir), dir.join("component.wasm"));
}

#[test]
fn a_path_may_name_the_manifest_file_itself() {
    let file = fixture("spec-example/murmur.yaml");
    let mut capsule = load_capsule(&file, &no_env)
        .manifest
        .expect("the capsule loads");
    capsule.artifacts[2].path = Some("tools/my-tool/murmur.yaml".into());
    let locals = check_local_artifacts(&capsule, &file, &no_env);
    assert!(locals[0].1.diagnostics.is_empty());
    assert!(locals[0].1.manifest.is_some());
    let (dir, manifest) = local_paths(
        Path::new("tools/my-tool/murmur.yaml"),
        file.parent().unwrap(),
    );
    assert_eq!(dir, file.parent().unwrap().join("tools/my-tool"));
    assert_eq!(manifest, dir.join("murmur.yaml"));
}

#[test]
fn diagnostics_serialize_for_json_output() {
    let loaded = load_text("name: x\nversion: \"1\"\ncomponent: c.wasm\n");
    let json = serde_json::to_value(&loaded.diagnostics).unwrap();
    assert_eq!(json[0]["code"], "E-MAN-006");
    assert_eq!(json[0]["severity"], "error");
    assert_eq!(json[0]["line"], 2);
    assert_eq!(json[0]["column"], 10);
    assert!(json[0]["file"].as_str().unwrap().ends_with("murmur.yaml"));
}
