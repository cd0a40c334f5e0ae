use serde::Deserialize;
use serde_json::{Value, json};

use super::*;

fn tool_call_event(outcome: Option<ToolCallOutcome>) -> ToolCallEvent {
    ToolCallEvent {
        session_id: "ses_0123456789abcdef0123456789abcdef".into(),
        task_id: "t1".into(),
        turn: 2,
        call_id: "call_1".into(),
        tool_name: "write-file".into(),
        input: r#"{"path":"secrets/key"}"#.into(),
        outcome,
    }
}

fn shell_event(outcome: Option<ShellOutcome>) -> ShellEvent {
    ShellEvent {
        session_id: "ses_1".into(),
        task_id: "t1".into(),
        binary: "/usr/bin/git".into(),
        command: "status".into(),
        argv: vec!["status".into()],
        script: None,
        recipe: None,
        outcome,
    }
}

#[test]
fn message_builders_leave_id_empty_and_hold_one_text_block() {
    let m = Message::user("hello");
    assert_eq!(m.id, "");
    assert_eq!(m.role, Role::User);
    assert_eq!(m.tool_call_id, None);
    assert!(!m.is_error);
    assert_eq!(m.source_id, None);
    assert_eq!(
        serde_json::from_str::<Value>(&m.content).unwrap(),
        json!([{"type": "text", "text": "hello"}])
    );
    assert_eq!(m.text(), "hello");

    let m = Message::assistant("hi").with_source_id("memory:7");
    assert_eq!(m.role, Role::Assistant);
    assert_eq!(m.source_id.as_deref(), Some("memory:7"));

    let m = Message::tool_result("call_9", "boom", true);
    assert_eq!(m.role, Role::Tool);
    assert_eq!(m.tool_call_id.as_deref(), Some("call_9"));
    assert!(m.is_error);
    assert_eq!(m.text(), "boom");
}

#[test]
fn message_reads_blocks_text_and_tool_calls() {
    let m = Message::from_blocks(
        Role::Assistant,
        vec![
            json!({"type": "thinking", "thinking": "hmm", "signature": "s"}),
            json!({"type": "text", "text": "one"}),
            json!({"type": "tool_call", "id": "c1", "name": "read-file", "input": {"path": "a"}}),
            json!({"type": "text", "text": "two"}),
        ],
    );
    assert_eq!(m.blocks().unwrap().len(), 4);
    assert_eq!(m.text(), "one\ntwo");
    let calls = m.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "read-file");

    let odd = Message {
        content: "not json".into(),
        ..Message::user("")
    };
    assert!(odd.blocks().unwrap_err().contains("not JSON"));
    assert_eq!(odd.text(), "not json");
    assert!(odd.tool_calls().is_empty());
    assert!(
        parse_blocks(r#"{"type":"text"}"#)
            .unwrap_err()
            .contains("not a JSON array")
    );
    assert_eq!(
        text_blocks(&[
            json!({"type": "text", "text": "x"}),
            json!({"type": "image"})
        ]),
        "x"
    );
}

#[test]
fn transcript_renders_each_message_readably() {
    let messages = vec![
        Message::user("Fix the build."),
        Message::from_blocks(
            Role::Assistant,
            vec![
                json!({"type": "thinking", "thinking": "private", "signature": "s"}),
                json!({"type": "text", "text": "Let me look."}),
                json!({"type": "tool_call", "id": "call_1", "name": "read-file", "input": {"path": "Makefile"}}),
            ],
        ),
        Message::tool_result("call_1", "all: build", false),
        Message::tool_result("call_2", "no such file", true),
        Message::from_blocks(
            Role::User,
            vec![json!({"type": "image", "media_type": "image/png", "data": "AAAA"})],
        ),
    ];
    assert_eq!(
        transcript(&messages),
        "[user]\nFix the build.\n\n\
         [assistant]\nLet me look.\n[tool call call_1: read-file {\"path\":\"Makefile\"}]\n\n\
         [tool result for call_1]\nall: build\n\n\
         [tool result for call_2 (error)]\nno such file\n\n\
         [user]\n[image image/png]"
    );
    assert_eq!(transcript(&[]), "");
}

#[test]
fn events_serialize_with_handler_tag_and_snake_case_fields() {
    let event = Event::ToolCall(tool_call_event(Some(ToolCallOutcome {
        status: Some(ToolStatus::Passed),
        output: "ok".into(),
        error: None,
        duration_ms: 5,
    })));
    assert_eq!(event.handler(), "on-tool-call");
    assert!(!event.is_decision());
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(value["handler"], "on-tool-call");
    assert_eq!(value["event"]["tool_name"], "write-file");
    assert_eq!(value["event"]["outcome"]["status"], "passed");
    assert_eq!(value["event"]["outcome"]["error"], Value::Null);
    assert_eq!(value["event"]["outcome"]["duration_ms"], 5);
    assert_eq!(event.event_json(), value["event"]);

    let compaction = Event::Compaction(CompactionEvent {
        session_id: "s".into(),
        task_id: "t".into(),
        messages: vec![Message::tool_result("c1", "x", false)],
        estimated_tokens: 10,
        context_window: 100,
        model: None,
        system_prompt: Some("be brief".into()),
    });
    let value = serde_json::to_value(&compaction).unwrap();
    assert_eq!(value["handler"], "on-compaction");
    let message = &value["event"]["messages"][0];
    assert_eq!(message["role"], "tool");
    assert_eq!(message["tool_call_id"], "c1");
    assert_eq!(message["is_error"], false);
    assert_eq!(message["source_id"], Value::Null);
    assert!(message["content"].is_string());
    assert_eq!(value["event"]["model"], Value::Null);
    assert_eq!(value["event"]["system_prompt"], "be brief");
}

#[test]
fn every_handler_has_its_wit_name() {
    let events = [
        Event::Stage(StageEvent {
            capsule_name: "c".into(),
            capsule_version: "1".into(),
            shell_allow: vec![],
            tools: vec![],
        }),
        Event::SessionStart(SessionStartEvent {
            session_id: "s".into(),
            capsule_name: "c".into(),
            capsule_version: "1".into(),
            model: "m".into(),
        }),
        Event::TaskStart(TaskStartEvent {
            session_id: "s".into(),
            task_id: "t".into(),
            context_id: "x".into(),
            input: "i".into(),
            context_window: 0,
            budget_tokens: 0,
            prior_tokens: 0,
        }),
        Event::Inference(InferenceEvent {
            session_id: "s".into(),
            task_id: "t".into(),
            turn: 1,
            choice: "primary".into(),
            model: "m".into(),
            stop_reason: "end_turn".into(),
            content: "[]".into(),
            estimated_input_tokens: 1,
            usage: None,
        }),
        Event::ToolCall(tool_call_event(None)),
        Event::Shell(shell_event(None)),
        Event::Compaction(CompactionEvent {
            session_id: "s".into(),
            task_id: "t".into(),
            messages: vec![],
            estimated_tokens: 0,
            context_window: 0,
            model: None,
            system_prompt: None,
        }),
        Event::TaskEnd(TaskEndEvent {
            session_id: "s".into(),
            task_id: "t".into(),
            context_id: "x".into(),
            exit_status: "ok".into(),
            result_text: None,
            turns: 1,
            reopen_count: 0,
        }),
        Event::SessionEnd(SessionEndEvent {
            session_id: "s".into(),
            exit_status: "ok".into(),
            tasks: 1,
        }),
    ];
    let names: Vec<&str> = events.iter().map(Event::handler).collect();
    assert_eq!(names, HANDLERS);
    for event in &events {
        let value = serde_json::to_value(event).unwrap();
        assert_eq!(value["handler"], event.handler());
        assert!(value["event"].is_object());
    }
    let wit = include_str!("../../../../wit/deps/hook/lifecycle.wit");
    for name in HANDLERS {
        assert!(wit.contains(&format!("    {name}: func(")), "{name}");
    }
}

#[test]
fn decision_point_is_the_dispatch_without_outcome() {
    assert!(tool_call_event(None).is_decision());
    assert!(Event::ToolCall(tool_call_event(None)).is_decision());
    assert!(shell_event(None).is_decision());
    let ran = shell_event(Some(ShellOutcome {
        exit_code: Some(0),
        stdout_bytes: 1,
        stderr_bytes: 0,
        truncated: false,
        duration_ms: 1,
        error: None,
    }));
    assert!(!ran.is_decision());
    assert_eq!(
        tool_call_event(None).input_json().unwrap(),
        json!({"path": "secrets/key"})
    );
    let mut bad = tool_call_event(None);
    bad.input = "{".into();
    assert!(bad.input_json().unwrap_err().contains("not JSON"));
}

#[test]
fn hook_output_serializes_as_arm_and_value() {
    assert_eq!(
        serde_json::to_value(HookOutput::None).unwrap(),
        json!({"arm": "none"})
    );
    assert_eq!(
        serde_json::to_value(HookOutput::deny("no")).unwrap(),
        json!({"arm": "deny", "value": "no"})
    );
    let replace = HookOutput::ReplaceContext(vec![Message::user("x")]);
    assert_eq!(replace.arm(), "replace-context");
    let value = serde_json::to_value(&replace).unwrap();
    assert_eq!(value["arm"], "replace-context");
    assert_eq!(value["value"][0]["role"], "user");
    assert_eq!(HookOutput::reopen_task("again").arm(), "reopen-task");
    assert_eq!(
        serde_json::to_value(HookOutput::WriteManifests(vec![ManifestFile {
            binary: "git".into(),
            manifest: "name: git".into(),
        }]))
        .unwrap(),
        json!({"arm": "write-manifests", "value": [{"binary": "git", "manifest": "name: git"}]})
    );
}

#[test]
fn role_names_round_trip() {
    for role in [Role::User, Role::Assistant, Role::Tool] {
        assert_eq!(Role::parse(role.as_str()), Some(role));
        assert_eq!(role.to_string(), role.as_str());
    }
    assert_eq!(Role::parse("system"), None);
}

#[test]
fn inference_request_builder() {
    let r = InferenceRequest::new(vec![Message::user("hi")]);
    assert_eq!(r.model, None);
    assert_eq!(r.system_prompt, None);
    assert_eq!(r.max_tokens, None);
    let r = r.model("m").system_prompt("p").max_tokens(5);
    assert_eq!(r.model.as_deref(), Some("m"));
    assert_eq!(r.system_prompt.as_deref(), Some("p"));
    assert_eq!(r.max_tokens, Some(5));
    assert_eq!(r.messages.len(), 1);
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct Config {
    keep_last: Option<usize>,
}

#[test]
fn config_unset_blank_or_null_reads_as_empty_object() {
    for raw in [None, Some(""), Some("  "), Some("null")] {
        assert_eq!(
            config_from::<Config>(raw).unwrap(),
            Config::default(),
            "{raw:?}"
        );
    }
    assert_eq!(
        config_from::<Config>(Some(r#"{"keep_last": 3}"#)).unwrap(),
        Config { keep_last: Some(3) }
    );
    assert!(
        config_from::<Config>(Some("{nope"))
            .unwrap_err()
            .starts_with("MURMUR_ARTIFACT_CONFIG is not JSON")
    );
    assert!(
        config_from::<Config>(Some(r#"{"other": 1}"#))
            .unwrap_err()
            .contains("invalid hook config")
    );
    assert_eq!(config_from::<Value>(None).unwrap(), json!({}));
}

/// A hook that implements one handler gets `none` from the rest, and one that implements
/// `on_event` sees every event it leaves out.
#[test]
fn trait_defaults_fall_through_to_on_event() {
    struct Quiet;
    impl Hook for Quiet {
        fn on_tool_call(event: ToolCallEvent) -> HookResult {
            Ok(HookOutput::deny(event.tool_name))
        }
    }
    struct Loud;
    impl Hook for Loud {
        fn on_event(event: Event) -> HookResult {
            Ok(HookOutput::reopen_task(event.handler()))
        }
        fn on_shell(_: ShellEvent) -> HookResult {
            Err("shell".into())
        }
    }
    use bindings::exports::murmur::hook::lifecycle::Guest;

    assert_eq!(
        <Quiet as Guest>::on_tool_call(tool_call_event(None))
            .unwrap()
            .arm(),
        "deny"
    );
    assert_eq!(
        <Quiet as Guest>::on_shell(shell_event(None)).unwrap().arm(),
        "none"
    );
    match <Loud as Guest>::on_tool_call(tool_call_event(None)).unwrap() {
        HookOutput::ReopenTask(handler) => assert_eq!(handler, "on-tool-call"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        <Loud as Guest>::on_shell(shell_event(None)).unwrap_err(),
        "shell"
    );
}
