//! Hooks: implement [`Hook`], export it with [`crate::export_hook!`].
//!
//! # The contract
//!
//! A hook is a component of the world `murmur:worlds/hook@0.1.0`. It exports
//! `murmur:hook/lifecycle@0.1.0`, nine handlers the runtime calls at fixed points of a session,
//! one at a time and synchronously:
//!
//! | handler            | fires                                                             |
//! |--------------------|-------------------------------------------------------------------|
//! | `on-stage`         | once at capsule staging, before any session starts               |
//! | `on-session-start` | once per capsule launch, before the first task's work begins     |
//! | `on-task-start`    | once per task, before its first inference turn                   |
//! | `on-inference`     | after each inference driver response is parsed                   |
//! | `on-tool-call`     | twice per tool call: before it is dispatched, after it returns   |
//! | `on-shell`         | twice per allowed shell command: before, and after it returns    |
//! | `on-compaction`    | when the session token threshold is reached, before any history is replaced |
//! | `on-task-end`      | once per task, right after its agent loop returns                |
//! | `on-session-end`   | once per capsule launch, after the task loop exits               |
//!
//! - **What a handler returns**: a [`HookOutput`], or `Err(message)`. The runtime commits one
//!   arm per handler and nothing else:
//!
//!   | handler                  | committed arm                    |
//!   |--------------------------|----------------------------------|
//!   | `on-stage`               | `write-manifests`                |
//!   | `on-inference`           | `artifact`                       |
//!   | `on-compaction`          | `replace-context`                |
//!   | `on-task-end`            | `reopen-task`                    |
//!   | `on-task-start`          | `seed-context`                   |
//!   | `on-shell`, `on-tool-call` | `deny`, at the decision point only |
//!   | every other handler      | none                             |
//!
//!   [`HookOutput::None`] is always silent. Any other arm the handler does not commit is a
//!   loud but harmless fault: logged to `logs/hook-<name>.log` and traced as
//!   `hook_dispatch_error`, then dropped.
//! - **An error** is logged and the session goes on, except at `on-compaction`, where it ends
//!   the session (the runtime has no other way back under its token budget).
//! - **The two dispatches of `on-tool-call` and `on-shell`**: the event's `outcome` is `None`
//!   at the decision point (the call has not run; `deny` refuses it) and `Some` at the
//!   observation (the call has run; nothing returned changes that). The decision point is
//!   dispatched only to a hook whose own `murmur.yaml` declares `commit_policy: deny` on
//!   `binding: on-tool-call` or `binding: on-shell`; every other hook sees the observation
//!   alone. [`ToolCallEvent::is_decision`] and [`ShellEvent::is_decision`] tell them apart.
//! - **Which handlers a component must export**: the WIT interface has all nine, and so does a
//!   component built with this SDK (a handler you do not write returns `none`). The runtime
//!   treats `on-task-start` and `on-task-end` as optional and the other seven as required.
//! - **What a hook may call**: [`run_inference`] (one completion through the capsule's primary
//!   driver, metered and traced), [`count_tokens`] (the runtime's own count), [`task_input`] /
//!   [`task_result`] and [`history`]; each only when the capsule's entry for the hook grants
//!   it. A component imports only what it calls, so a hook that calls none of them imports
//!   none of them (it still imports `murmur:conversation/types`, which holds no functions: the
//!   lifecycle's records use its `message`).
//! - **What a hook sees**: its `config:` as `MURMUR_ARTIFACT_CONFIG` (read it with
//!   [`config`]), and only what the capsule's entry for it grants under `capabilities`: the
//!   workdir or a directory beneath it as `.` (`filesystem: { scope: read | write, path }`),
//!   hosts of the capsule's allowlist (`network: { allow: [...] }`). By default nothing: no
//!   `.` and no network.
//!
//! The contract is the WIT in the repository's `wit/` folder, not this crate.
//!
//! # A hook in a few lines
//!
//! Implement only the handlers you need; every other one returns `none`.
//!
//! ```
//! use murmur_guest::hook::{Hook, HookOutput, HookResult, ToolCallEvent};
//!
//! struct NoSecrets;
//!
//! impl Hook for NoSecrets {
//!     fn on_tool_call(event: ToolCallEvent) -> HookResult {
//!         if event.is_decision() && event.input.contains("secrets/") {
//!             return Ok(HookOutput::deny("secrets/ is off limits"));
//!         }
//!         Ok(HookOutput::None)
//!     }
//! }
//!
//! murmur_guest::export_hook!(NoSecrets);
//! ```
//!
//! A hook that treats every event alike implements [`Hook::on_event`] instead: each handler
//! you leave out hands its event to it, wrapped in an [`Event`].
//!
//! # Events as JSON
//!
//! The event records, [`Message`] and [`HookOutput`] implement `serde::Serialize`, and so does
//! [`Event`], as `{"handler": "on-…", "event": {…}}`. Fields keep their Rust names
//! (`session_id`, `tool_name`), enum cases are written as in the WIT (`"user"`, `"passed"`),
//! optional fields absent from an event are `null`, and a message's `content` stays the JSON
//! string it is on the wire. A [`HookOutput`] is `{"arm": "deny", "value": "…"}`
//! (`{"arm": "none"}` for `none`).

#[doc(hidden)]
pub mod bindings;

mod message;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use bindings::exports::murmur::hook::lifecycle::{
    Artifact, CompactionEvent, HookOutput, InferenceEvent, ManifestFile, SessionEndEvent,
    SessionStartEvent, ShellEvent, ShellOutcome, StageEvent, TaskEndEvent, TaskStartEvent,
    ToolCallEvent, ToolCallOutcome, ToolStatus, Usage,
};
pub use bindings::murmur::conversation::types::{Message, Role};
pub use bindings::murmur::runtime::inference::{
    InferenceRequest, InferenceResponse, Usage as InferenceUsage,
};
pub use message::{parse_blocks, text_blocks, transcript};

/// What every handler returns: the arm to commit, or an error (logged; fatal at
/// `on-compaction` only).
pub type HookResult = Result<HookOutput, String>;

/// A hook: one method per handler of `murmur:hook/lifecycle`.
///
/// Every method has a default that hands the event to [`on_event`](Hook::on_event), whose
/// own default returns [`HookOutput::None`]. Implement the handlers you need, or `on_event`
/// alone to see every event the same way; then export the type with
/// [`crate::export_hook!`].
pub trait Hook {
    /// Every event whose handler this type leaves out. Default: `Ok(HookOutput::None)`.
    fn on_event(event: Event) -> HookResult {
        let _ = event;
        Ok(HookOutput::None)
    }

    /// Once at staging, before any session starts. Commits `write-manifests`.
    fn on_stage(event: StageEvent) -> HookResult {
        Self::on_event(Event::Stage(event))
    }

    /// Once per capsule launch, before the first task's work begins. Commits nothing.
    fn on_session_start(event: SessionStartEvent) -> HookResult {
        Self::on_event(Event::SessionStart(event))
    }

    /// Once per task, before its first inference turn. Commits `seed-context`. Optional in
    /// the WIT contract.
    fn on_task_start(event: TaskStartEvent) -> HookResult {
        Self::on_event(Event::TaskStart(event))
    }

    /// After each inference driver response is parsed. Commits `artifact`.
    fn on_inference(event: InferenceEvent) -> HookResult {
        Self::on_event(Event::Inference(event))
    }

    /// Before a tool call is dispatched (`outcome: None`, only for a `commit_policy: deny`
    /// hook) and after it returns (`outcome: Some`). Commits `deny`, at the decision point
    /// only.
    fn on_tool_call(event: ToolCallEvent) -> HookResult {
        Self::on_event(Event::ToolCall(event))
    }

    /// Before an allowed shell command runs (`outcome: None`, only for a `commit_policy: deny`
    /// hook) and after it returns (`outcome: Some`). Commits `deny`, at the decision point
    /// only.
    fn on_shell(event: ShellEvent) -> HookResult {
        Self::on_event(Event::Shell(event))
    }

    /// When the session token threshold is reached. Commits `replace-context`. An error here
    /// ends the session.
    fn on_compaction(event: CompactionEvent) -> HookResult {
        Self::on_event(Event::Compaction(event))
    }

    /// Once per task, right after its agent loop returns. Commits `reopen-task`. Optional in
    /// the WIT contract.
    fn on_task_end(event: TaskEndEvent) -> HookResult {
        Self::on_event(Event::TaskEnd(event))
    }

    /// Once per capsule launch, after the task loop exits. Commits nothing.
    fn on_session_end(event: SessionEndEvent) -> HookResult {
        Self::on_event(Event::SessionEnd(event))
    }
}

impl<T: Hook> bindings::exports::murmur::hook::lifecycle::Guest for T {
    fn on_stage(event: StageEvent) -> HookResult {
        <T as Hook>::on_stage(event)
    }
    fn on_session_start(event: SessionStartEvent) -> HookResult {
        <T as Hook>::on_session_start(event)
    }
    fn on_task_start(event: TaskStartEvent) -> HookResult {
        <T as Hook>::on_task_start(event)
    }
    fn on_inference(event: InferenceEvent) -> HookResult {
        <T as Hook>::on_inference(event)
    }
    fn on_tool_call(event: ToolCallEvent) -> HookResult {
        <T as Hook>::on_tool_call(event)
    }
    fn on_shell(event: ShellEvent) -> HookResult {
        <T as Hook>::on_shell(event)
    }
    fn on_compaction(event: CompactionEvent) -> HookResult {
        <T as Hook>::on_compaction(event)
    }
    fn on_task_end(event: TaskEndEvent) -> HookResult {
        <T as Hook>::on_task_end(event)
    }
    fn on_session_end(event: SessionEndEvent) -> HookResult {
        <T as Hook>::on_session_end(event)
    }
}

/// Any one event, tagged with its handler. Serializes as `{"handler": "on-…", "event": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "handler", content = "event")]
pub enum Event {
    #[serde(rename = "on-stage")]
    Stage(StageEvent),
    #[serde(rename = "on-session-start")]
    SessionStart(SessionStartEvent),
    #[serde(rename = "on-task-start")]
    TaskStart(TaskStartEvent),
    #[serde(rename = "on-inference")]
    Inference(InferenceEvent),
    #[serde(rename = "on-tool-call")]
    ToolCall(ToolCallEvent),
    #[serde(rename = "on-shell")]
    Shell(ShellEvent),
    #[serde(rename = "on-compaction")]
    Compaction(CompactionEvent),
    #[serde(rename = "on-task-end")]
    TaskEnd(TaskEndEvent),
    #[serde(rename = "on-session-end")]
    SessionEnd(SessionEndEvent),
}

/// The nine handler names, in the order the WIT declares them.
pub const HANDLERS: [&str; 9] = [
    "on-stage",
    "on-session-start",
    "on-task-start",
    "on-inference",
    "on-tool-call",
    "on-shell",
    "on-compaction",
    "on-task-end",
    "on-session-end",
];

impl Event {
    /// The handler this event was dispatched to, as the WIT names it (`"on-tool-call"`).
    pub fn handler(&self) -> &'static str {
        match self {
            Event::Stage(_) => "on-stage",
            Event::SessionStart(_) => "on-session-start",
            Event::TaskStart(_) => "on-task-start",
            Event::Inference(_) => "on-inference",
            Event::ToolCall(_) => "on-tool-call",
            Event::Shell(_) => "on-shell",
            Event::Compaction(_) => "on-compaction",
            Event::TaskEnd(_) => "on-task-end",
            Event::SessionEnd(_) => "on-session-end",
        }
    }

    /// The event record alone, as JSON (without the handler tag).
    pub fn event_json(&self) -> serde_json::Value {
        let value = match self {
            Event::Stage(e) => serde_json::to_value(e),
            Event::SessionStart(e) => serde_json::to_value(e),
            Event::TaskStart(e) => serde_json::to_value(e),
            Event::Inference(e) => serde_json::to_value(e),
            Event::ToolCall(e) => serde_json::to_value(e),
            Event::Shell(e) => serde_json::to_value(e),
            Event::Compaction(e) => serde_json::to_value(e),
            Event::TaskEnd(e) => serde_json::to_value(e),
            Event::SessionEnd(e) => serde_json::to_value(e),
        };
        // Plain records of strings, numbers and lists: serialization cannot fail.
        value.unwrap_or(serde_json::Value::Null)
    }

    /// For `on-tool-call` and `on-shell`: whether this is the decision-point dispatch
    /// (`outcome: None`). `false` for every other handler.
    pub fn is_decision(&self) -> bool {
        match self {
            Event::ToolCall(e) => e.is_decision(),
            Event::Shell(e) => e.is_decision(),
            _ => false,
        }
    }
}

impl ToolCallEvent {
    /// The decision point: the call has not run, and a `deny` refuses it.
    pub fn is_decision(&self) -> bool {
        self.outcome.is_none()
    }

    /// The model's input parsed as JSON.
    pub fn input_json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_str(&self.input).map_err(|e| format!("tool call input is not JSON: {e}"))
    }
}

impl ShellEvent {
    /// The decision point: the command has not run, and a `deny` refuses it.
    pub fn is_decision(&self) -> bool {
        self.outcome.is_none()
    }
}

impl InferenceEvent {
    /// The response's content blocks, parsed from `content` (a JSON array).
    pub fn content_blocks(&self) -> Result<Vec<serde_json::Value>, String> {
        parse_blocks(&self.content)
    }
}

impl HookOutput {
    /// `deny(reason)`: refuse the call (honored at the decision point of `on-tool-call` and
    /// `on-shell`).
    pub fn deny(reason: impl Into<String>) -> Self {
        HookOutput::Deny(reason.into())
    }

    /// `reopen-task(feedback)`: run the task's agent loop again (honored at `on-task-end`).
    pub fn reopen_task(feedback: impl Into<String>) -> Self {
        HookOutput::ReopenTask(feedback.into())
    }

    /// The arm's WIT name: `"none"`, `"deny"`, `"seed-context"`, `"reopen-task"`,
    /// `"replace-context"`, `"write-manifests"` or `"artifact"`.
    pub fn arm(&self) -> &'static str {
        match self {
            HookOutput::None => "none",
            HookOutput::Deny(_) => "deny",
            HookOutput::SeedContext(_) => "seed-context",
            HookOutput::ReopenTask(_) => "reopen-task",
            HookOutput::ReplaceContext(_) => "replace-context",
            HookOutput::WriteManifests(_) => "write-manifests",
            HookOutput::Artifact(_) => "artifact",
        }
    }
}

impl Role {
    /// The WIT name: `"user"`, `"assistant"` or `"tool"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// The role named `name` (`"user"`, `"assistant"`, `"tool"`).
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl InferenceRequest {
    /// A request for `messages` on the capsule's own model, with no extra system prompt and the
    /// model's output cap.
    pub fn new(messages: Vec<Message>) -> Self {
        InferenceRequest {
            model: None,
            system_prompt: None,
            messages,
            max_tokens: None,
        }
    }

    /// Ask for `model` (a model that fails never falls back to the capsule's).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Send `prompt` as the system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Cap the completion at `max_tokens` output tokens.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
}

/// The hook's `config:` from `MURMUR_ARTIFACT_CONFIG`, as `T`. An unset or blank config reads
/// as `{}`, so a `T` whose fields all have defaults (`#[serde(default)]`) works without one.
/// The error says what was wrong, ready to return from a handler.
pub fn config<T: DeserializeOwned>() -> Result<T, String> {
    config_from(std::env::var("MURMUR_ARTIFACT_CONFIG").ok().as_deref())
}

/// [`config`] from a given `MURMUR_ARTIFACT_CONFIG` value (`None` when unset).
pub fn config_from<T: DeserializeOwned>(raw: Option<&str>) -> Result<T, String> {
    let text = match raw {
        Some(text) if !text.trim().is_empty() => text,
        _ => "{}",
    };
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("MURMUR_ARTIFACT_CONFIG is not JSON: {e}"))?;
    let value = match value {
        serde_json::Value::Null => serde_json::Value::Object(Default::default()),
        other => other,
    };
    serde_json::from_value(value).map_err(|e| format!("invalid hook config: {e}"))
}

/// Run one completion through the capsule's primary driver and its gateway, metered against
/// the session's spend ceiling and traced as an `inference` event with `origin: hook:<name>`.
/// Errs when the hook holds no grant for it, the spend ceiling refuses the call, or the driver
/// fails.
///
/// This calls the host: it works inside a component only (on any other target it panics).
pub fn run_inference(request: &InferenceRequest) -> Result<InferenceResponse, String> {
    bindings::murmur::runtime::inference::run_inference(request)
}

/// The runtime's own token count of `text` (cl100k), the one compaction and budgets run on.
///
/// This calls the host: it works inside a component only (on any other target it panics).
pub fn count_tokens(text: &str) -> u64 {
    bindings::murmur::runtime::tokens::count_tokens(text)
}

/// The task as it arrived (the `--task` text, `task.md`, or the A2A message text); `None` when
/// there is none.
///
/// This calls the host: it works inside a component only (on any other target it panics).
pub fn task_input() -> Option<String> {
    bindings::murmur::task_io::read::task_input()
}

/// The agent's result text, once the task's agent loop has returned; `None` before that.
///
/// This calls the host: it works inside a component only (on any other target it panics).
pub fn task_result() -> Option<String> {
    bindings::murmur::task_io::read::task_result()
}

/// The durable conversation record of a context, oldest first; `None` reads the current
/// task's context.
///
/// This calls the host: it works inside a component only (on any other target it panics).
pub fn history(context_id: Option<&str>) -> Result<Vec<Message>, String> {
    bindings::murmur::conversation::read::history(context_id)
}

#[cfg(test)]
mod tests;
