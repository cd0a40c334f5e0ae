//! Hook events as the WIT defines them, and the conversation's messages both ways.
//!
//! A message handed to a hook carries its `id` and `source-id`. A message built from a hook's
//! list gets a fresh `msg_` id (an `id` the hook set is replaced) and keeps the `source-id` the
//! hook set, verbatim (absent when it set none).

use murmur_manifest::hooks::{Binding, CommitPolicy};

use crate::bindings::hook::exports::murmur::hook::lifecycle as wit;
use crate::bindings::hook::murmur::conversation::types::{Message as WitMessage, Role};
use crate::inference::neutral::{Block, Message, StoredMessage};

pub use wit::{
    Artifact, CompactionEvent, HookOutput, InferenceEvent, ManifestFile, SessionEndEvent,
    SessionStartEvent, ShellEvent, ShellOutcome, StageEvent, TaskEndEvent, TaskStartEvent,
    ToolCallEvent, ToolCallOutcome, ToolStatus, Usage,
};

/// The nine lifecycle handlers, in the WIT's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handler {
    Stage,
    SessionStart,
    TaskStart,
    Inference,
    ToolCall,
    Shell,
    Compaction,
    TaskEnd,
    SessionEnd,
}

impl Handler {
    pub const ALL: [Handler; 9] = [
        Handler::Stage,
        Handler::SessionStart,
        Handler::TaskStart,
        Handler::Inference,
        Handler::ToolCall,
        Handler::Shell,
        Handler::Compaction,
        Handler::TaskEnd,
        Handler::SessionEnd,
    ];

    /// The exported function's name.
    pub fn name(self) -> &'static str {
        self.binding().as_str()
    }

    /// The `binding:` that selects this handler alone.
    pub fn binding(self) -> Binding {
        match self {
            Handler::Stage => Binding::OnStage,
            Handler::SessionStart => Binding::OnSessionStart,
            Handler::TaskStart => Binding::OnTaskStart,
            Handler::Inference => Binding::OnInference,
            Handler::ToolCall => Binding::OnToolCall,
            Handler::Shell => Binding::OnShell,
            Handler::Compaction => Binding::OnCompaction,
            Handler::TaskEnd => Binding::OnTaskEnd,
            Handler::SessionEnd => Binding::OnSessionEnd,
        }
    }

    /// Whether a hook component must export it. `on-task-start` and `on-task-end` are
    /// optional; a missing `on-stage` is logged, not fatal.
    pub fn required(self) -> bool {
        !matches!(self, Handler::Stage | Handler::TaskStart | Handler::TaskEnd)
    }

    /// The one arm the runtime commits for this handler (the table of
    /// `murmur_manifest::hooks::honored_arm`).
    pub fn honored(self) -> Option<CommitPolicy> {
        murmur_manifest::hooks::honored_arm(self.binding())
    }

    fn index(self) -> usize {
        Handler::ALL.iter().position(|h| *h == self).unwrap_or(0)
    }
}

/// Per-handler storage.
#[derive(Debug, Clone, Default)]
pub(crate) struct PerHandler<T>(pub(crate) [T; 9]);

impl<T> PerHandler<T> {
    pub(crate) fn get(&self, handler: Handler) -> &T {
        &self.0[handler.index()]
    }
}

/// One event, for the handler it goes to.
#[derive(Debug, Clone)]
pub enum HookEvent {
    Stage(StageEvent),
    SessionStart(SessionStartEvent),
    TaskStart(TaskStartEvent),
    Inference(InferenceEvent),
    ToolCall(ToolCallEvent),
    Shell(ShellEvent),
    Compaction(CompactionEvent),
    TaskEnd(TaskEndEvent),
    SessionEnd(SessionEndEvent),
}

impl HookEvent {
    pub fn handler(&self) -> Handler {
        match self {
            HookEvent::Stage(_) => Handler::Stage,
            HookEvent::SessionStart(_) => Handler::SessionStart,
            HookEvent::TaskStart(_) => Handler::TaskStart,
            HookEvent::Inference(_) => Handler::Inference,
            HookEvent::ToolCall(_) => Handler::ToolCall,
            HookEvent::Shell(_) => Handler::Shell,
            HookEvent::Compaction(_) => Handler::Compaction,
            HookEvent::TaskEnd(_) => Handler::TaskEnd,
            HookEvent::SessionEnd(_) => Handler::SessionEnd,
        }
    }

    /// Whether this is the decision-point dispatch of a gated event (`outcome: none`).
    pub fn is_decision_point(&self) -> bool {
        match self {
            HookEvent::ToolCall(event) => event.outcome.is_none(),
            HookEvent::Shell(event) => event.outcome.is_none(),
            _ => false,
        }
    }
}

/// The arm's name, as `commit_policy` spells it.
pub fn arm_name(output: &HookOutput) -> &'static str {
    match output {
        HookOutput::None => "none",
        HookOutput::Deny(_) => "deny",
        HookOutput::SeedContext(_) => "seed-context",
        HookOutput::ReopenTask(_) => "reopen-task",
        HookOutput::ReplaceContext(_) => "replace-context",
        HookOutput::WriteManifests(_) => "write-manifests",
        HookOutput::Artifact(_) => "artifact",
    }
}

/// A stored message as a hook sees it.
pub fn to_wit(message: &StoredMessage) -> WitMessage {
    let (role, tool_call_id, is_error) = match &message.message {
        Message::User { .. } => (Role::User, None, false),
        Message::Assistant { .. } => (Role::Assistant, None, false),
        Message::Tool {
            tool_call_id,
            is_error,
            ..
        } => (Role::Tool, Some(tool_call_id.clone()), *is_error),
    };
    WitMessage {
        id: message.id.clone(),
        role,
        content: serde_json::to_string(message.message.content()).unwrap_or_else(|_| "[]".into()),
        tool_call_id,
        is_error,
        source_id: message.source_id.clone(),
    }
}

/// A message a hook returned, as the conversation keeps it: a fresh id, the hook's
/// `source-id` verbatim. `content` must be a JSON array of neutral blocks.
pub fn from_wit(message: &WitMessage) -> Result<StoredMessage, String> {
    let content: Vec<Block> = serde_json::from_str(&message.content).map_err(|error| {
        format!("a message's content is not a JSON array of neutral blocks: {error}")
    })?;
    let body = match message.role {
        Role::User => Message::User { content },
        Role::Assistant => Message::Assistant { content },
        Role::Tool => Message::Tool {
            tool_call_id: message
                .tool_call_id
                .clone()
                .ok_or("a `tool` message needs a `tool-call-id`")?,
            is_error: message.is_error,
            content,
        },
    };
    let mut stored = StoredMessage::new(body);
    stored.source_id = message.source_id.clone();
    Ok(stored)
}

/// Every message of a hook's list, or the first problem.
pub fn from_wit_list(messages: &[WitMessage]) -> Result<Vec<StoredMessage>, String> {
    messages.iter().map(from_wit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_message_gets_a_fresh_id_and_keeps_its_source_id() {
        let returned = WitMessage {
            id: "msg_set_by_the_hook".to_string(),
            role: Role::User,
            content: r#"[{"type":"text","text":"earlier, in short"}]"#.to_string(),
            tool_call_id: None,
            is_error: false,
            source_id: Some("summary:v1".to_string()),
        };
        let stored = from_wit(&returned).unwrap();
        assert_ne!(stored.id, "msg_set_by_the_hook");
        assert!(stored.id.starts_with("msg_"));
        assert_eq!(stored.source_id.as_deref(), Some("summary:v1"));
        let none = from_wit(&WitMessage {
            source_id: None,
            ..returned
        })
        .unwrap();
        assert_eq!(none.source_id, None);
    }

    #[test]
    fn malformed_content_is_refused() {
        let bad = WitMessage {
            id: String::new(),
            role: Role::Tool,
            content: "not json".to_string(),
            tool_call_id: None,
            is_error: false,
            source_id: None,
        };
        assert!(from_wit(&bad).is_err());
    }

    #[test]
    fn round_trip_keeps_role_content_and_ids() {
        let mut stored = StoredMessage::new(Message::Tool {
            tool_call_id: "c1".to_string(),
            is_error: true,
            content: vec![Block::Text {
                text: "boom".to_string(),
            }],
        });
        stored.source_id = Some("tool:x".to_string());
        let wit = to_wit(&stored);
        assert_eq!(wit.id, stored.id);
        assert_eq!(wit.tool_call_id.as_deref(), Some("c1"));
        let back = from_wit(&wit).unwrap();
        assert_eq!(back.message, stored.message);
    }

    #[test]
    fn optional_and_required_handlers() {
        let required: Vec<&str> = Handler::ALL
            .iter()
            .filter(|h| h.required())
            .map(|h| h.name())
            .collect();
        assert_eq!(
            required,
            [
                "on-session-start",
                "on-inference",
                "on-tool-call",
                "on-shell",
                "on-compaction",
                "on-session-end"
            ]
        );
    }
}
