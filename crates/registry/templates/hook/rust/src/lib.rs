//! The hook __NAME__: denies tool calls whose input names a path under `.git/`.
//!
//! Every handler of `murmur:hook/lifecycle` is exported; each returns a hook output (`None`
//! commits nothing). `Err(text)` reports the hook's own failure (at the decision point a
//! failing policy hook denies).

wit_bindgen::generate!({
    path: "wit",
    world: "__NAME__",
    generate_all,
});

use exports::murmur::hook::lifecycle::{
    CompactionEvent, Guest, HookOutput, InferenceEvent, SessionEndEvent, SessionStartEvent,
    ShellEvent, StageEvent, TaskEndEvent, TaskStartEvent, ToolCallEvent,
};
use serde_json::Value;

struct Hook;

fn names_git(value: &Value) -> bool {
    match value {
        Value::String(s) => s == ".git" || s.starts_with(".git/") || s.contains("/.git/"),
        Value::Array(items) => items.iter().any(names_git),
        Value::Object(map) => map.values().any(names_git),
        _ => false,
    }
}

type Output = Result<HookOutput, String>;

impl Guest for Hook {
    fn on_tool_call(event: ToolCallEvent) -> Output {
        let input: Value = serde_json::from_str(&event.input).unwrap_or(Value::Null);
        if event.outcome.is_none() && names_git(&input) {
            return Ok(HookOutput::Deny(format!(
                "{}: paths under .git/ are off limits",
                event.tool_name
            )));
        }
        Ok(HookOutput::None)
    }
    fn on_stage(_: StageEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_session_start(_: SessionStartEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_task_start(_: TaskStartEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_inference(_: InferenceEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_shell(_: ShellEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_compaction(_: CompactionEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_task_end(_: TaskEndEvent) -> Output {
        Ok(HookOutput::None)
    }
    fn on_session_end(_: SessionEndEvent) -> Output {
        Ok(HookOutput::None)
    }
}

export!(Hook);
