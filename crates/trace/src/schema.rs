//! Every trace event type and its fields: the one place a field is named.
//!
//! Token fields: `*_estimated` are the runtime's own cl100k counts; `*_actual` are what the
//! provider reported, absent when it reported nothing (never written as 0).

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use murmur_protocol::inference::StopReason;

/// One line of `trace.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub session_id: String,
    /// Unix milliseconds.
    pub timestamp: u64,
    pub event_id: String,
    pub parent_id: Option<String>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The capsule a session runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapsuleRef {
    pub name: String,
    pub version: String,
}

/// A component a session loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentRef {
    pub name: String,
    pub version: String,
    pub runtime: String,
    pub sha256: String,
}

/// An MCP server a session started (`session_start.mcp_servers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerRef {
    /// Its entry's name.
    pub name: String,
    /// How it was reached and how it introduced itself, as `murmur.lock` pins it.
    pub identity: String,
    /// The fingerprint of the tools it listed.
    pub tools_sha256: String,
    /// Whether `murmur.lock` pinned it (and so what it listed was checked against the pin).
    pub pinned: bool,
}

/// The conversation a resumed session goes on with (`session_start.resumed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    /// The session it was left by.
    pub session_id: String,
    /// Its context: the resumed session's tasks go on under the same id.
    pub context_id: String,
    /// How many messages it held.
    pub messages: u64,
    /// What of the capsule differs from what that session ran: `murmur.yaml`, or an artifact
    /// added, removed or of other bytes, one line each; empty when nothing did.
    #[serde(default)]
    pub changed: Vec<String>,
}

/// What one component of a session holds (`session_start.grants`): never a value of the
/// environment or a credential, only names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentGrants {
    pub name: String,
    /// `tool`, `hook`, `driver`, or `process` (the agent CLI of `transport: process`).
    pub runtime: String,
    /// `none`, `read` or `write`: how the component holds its `.`.
    pub filesystem: String,
    /// Its `.` beneath the workdir, relative to it; absent for the workdir itself.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// The read-only paths it holds (absolute).
    #[serde(default)]
    pub read_only: Vec<String>,
    /// The network allow entries its requests are checked against (a driver's gateway first).
    pub network: Vec<String>,
    /// The names of the environment variables it sees.
    pub env: Vec<String>,
}

/// How a call ended in error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRef {
    pub code: String,
    pub message: String,
}

/// What a request sent of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Messages in the request.
    pub messages: u32,
    /// Whether the whole history was sent (no continuation id).
    pub full_resend: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub continuation_id: Option<String>,
}

/// Sums over a session's `task_start`, `inference`, `tool_call`, `shell` and `skill_call`
/// lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub tasks: u32,
    pub turns: u32,
    pub tool_calls: u32,
    /// Calls of the model's `shell` tool.
    #[serde(default)]
    pub shell_calls: u32,
    /// Calls of skills (`skill_call` lines).
    #[serde(default)]
    pub skill_calls: u32,
    pub input_tokens_estimated: u64,
    pub output_tokens_estimated: u64,
    /// Sums of the reported numbers; absent when no call reported one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub input_tokens_actual: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub output_tokens_actual: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cached_tokens_actual: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_write_tokens_actual: Option<u64>,
}

/// The name of the primary driver choice: what an `inference` event without `choice` was made
/// by (a capsule that declares no alternates writes none).
pub const PRIMARY_CHOICE: &str = "primary";

/// The driver choice an `inference` event names, [`PRIMARY_CHOICE`] when it names none.
pub fn choice_or_primary(choice: &Option<String>) -> &str {
    choice.as_deref().unwrap_or(PRIMARY_CHOICE)
}

/// The event types and their own fields.
// `session_start` is the largest by far, and there is one of it a session: boxing its fields
// would cost every reader an indirection to save little.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event_type", rename_all = "snake_case")]
pub enum EventBody {
    /// The session began: what it runs and how it is contained. The root of the tree.
    SessionStart {
        capsule: CapsuleRef,
        murmur_version: String,
        /// The session's record: the directory this trace is in.
        workdir: String,
        /// The directory the agent worked in; absent in traces of layout 1, whose agent worked
        /// in `workdir` itself.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        workspace: String,
        /// Whether `workspace` was an existing directory worked on in place (`--workspace`).
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        in_place: bool,
        /// How the session's files are laid out: 2 keeps the workspace apart from the record;
        /// absent (1) in traces written before.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        record_layout: Option<u32>,
        /// The primary model, driver and credential source of an agent capsule; absent for a
        /// capsule component, which runs no agent loop.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        model: String,
        #[serde(skip_serializing_if = "String::is_empty", default)]
        driver: String,
        /// Where the primary driver's credential came from: `config`, `environment`,
        /// `manifest`, `injected`, `keyless`.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        credential_source: String,
        components: Vec<ComponentRef>,
        /// What each tool, hook and driver holds; absent in traces written before it was
        /// recorded, and for a capsule component.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        grants: Vec<ComponentGrants>,
        tools: Vec<String>,
        /// How shell children are contained (Landlock enforced, or unavailable and why); null
        /// in traces written before it was recorded.
        #[serde(default)]
        containment: Value,
        /// Every driver choice with its credential source and limits; only when alternates
        /// exist.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        inference_choices: Option<Value>,
        /// `inference.max_session_tokens`, when set.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        max_session_tokens: Option<u64>,
        /// sha256 (hex) of the system prompt the agent loop sends; absent for a capsule
        /// component. Two sessions with the same hash sent the same system prompt.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        system_prompt_sha256: String,
        /// sha256 (hex) of the capsule's `murmur.yaml` as the session read it; absent in traces
        /// written before it was recorded.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        manifest_sha256: String,
        /// The earlier session whose conversation this one goes on with (`mur run --resume`).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        resumed: Option<Resumed>,
        /// The capsule's MCP servers, as started; absent when it has none.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        mcp_servers: Vec<McpServerRef>,
    },
    /// A task began (its parent: `session_start`).
    TaskStart {
        task_id: String,
        context_id: Option<String>,
        /// `cli` (`--task`) or `task.md`.
        source: String,
        input_chars: u64,
        /// sha256 (hex) of the task's input text, so two sessions' tasks compare by hash.
        #[serde(skip_serializing_if = "String::is_empty", default)]
        input_sha256: String,
    },
    /// One call of a driver: a turn of the agent loop (parent: `task_start`), or a hook's
    /// `run-inference` call. Written when the call ended.
    Inference {
        /// Absent for a hook's call outside any task.
        task_id: Option<String>,
        turn: u32,
        origin: Origin,
        /// The driver choice that made the call: written only when the capsule declares
        /// alternates (without them every call is the primary's, and nothing a switch
        /// introduces is written).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        choice: Option<String>,
        driver: String,
        model: String,
        prompt_cache_key: String,
        sent: Sent,
        input_tokens_estimated: u64,
        output_tokens_estimated: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        input_tokens_actual: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        output_tokens_actual: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        cached_tokens_actual: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        cache_write_tokens_actual: Option<u64>,
        /// `end_turn`, `tool_call`, `max_tokens`, or `error`.
        stop_reason: StopReason,
        decision: Decision,
        /// The first tool the turn calls, when it calls any.
        tool_name: Option<String>,
        tool_calls: u32,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
    },
    /// One call of a tool component (parent: the `inference` that asked for it, or the capsule
    /// component's `task_start`). Written when the call ended or was refused.
    ToolCall {
        task_id: String,
        turn: u32,
        call_id: String,
        tool_name: String,
        status: CallStatus,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        state_effect: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        resource_id: Option<String>,
        /// The call's path-like input field (see [`input_path`]), the redundancy detector's
        /// fallback when the tool declared no `resource_id`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        input_path: Option<String>,
        output_bytes: u64,
        duration_ms: u64,
        /// The tool's own summary line, as it returned it (cut to 500 characters): for a call
        /// that ended `failed` or `error`, its own account of why.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        summary: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
        /// Requests a grant refused during the call.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        refusals: Vec<String>,
    },
    /// A call of a skill (parent: the `inference` that asked for it): its markdown was handed
    /// to the model verbatim. Written when the result was handed over; a call a hook denied
    /// is a `call_denied` instead.
    SkillCall {
        task_id: String,
        turn: u32,
        call_id: String,
        /// The skill artifact's name.
        skill: String,
        /// The skill artifact's version.
        version: String,
        /// sha256 (hex) of the markdown handed over.
        sha256: String,
        /// Bytes of the markdown handed over (before the fence).
        output_bytes: u64,
    },
    /// A call of the model's `shell` tool: what ran (or was refused) and how it ended.
    Shell {
        task_id: String,
        turn: u32,
        call_id: String,
        /// The canonical path when the name resolved, else the name given.
        binary: String,
        /// Display only, cut to 200 characters.
        command: String,
        argv: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        script: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        recipe: Option<String>,
        /// Absent when the process did not run or was ended by a signal.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        exit_code: Option<i32>,
        stdout_bytes: u64,
        stderr_bytes: u64,
        truncated: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        full_output_path: Option<String>,
        timed_out: bool,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
        /// What the kernel refused the call and the limits it hit, when anything was:
        /// `syscalls_refused` (`[name, count]` pairs), `connections_refused` (host, port,
        /// reason), `oom_kills`, `process_limit_hits`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        contained: Option<Value>,
    },
    /// A native child's egress proxy refused a connection (parent: `session_start`): the
    /// child (`shell`, `mcp:<server>`, `cli:<command>`), the host and port it asked for, why.
    EgressRefused {
        child: String,
        host: String,
        port: u16,
        reason: String,
    },
    /// A task arrived through the A2A door.
    A2aTaskReceived {
        task_id: String,
        context_id: String,
        /// The JSON-RPC method, as the client named it.
        method: String,
        /// `client`, or `peer` for a principal of `door.auth` with `trust: peer`.
        origin: String,
        /// The trust class the task runs with: `external` for a client; what a peer principal
        /// claimed (`operator` or `external`).
        trust: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        traceparent: Option<String>,
        /// What the request's `x-murmur-task-origin` claimed, when it sent one; never granted.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        claimed_origin: Option<String>,
        /// What the request's `x-murmur-task-trust` claimed, when it sent one; never granted.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        claimed_trust: Option<String>,
        /// The `door.auth` principal whose credential the request presented (absent when the
        /// door asks for none).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        principal: Option<String>,
    },
    /// A component sent a task to a peer capsule (`murmur:message/send`).
    A2aSend {
        peer: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        peer_task_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        state: Option<String>,
        trust: String,
        traceparent: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
    },
    /// A setting or a secret changed through the control plane (`principal: controller`) or
    /// the agent's `switch-driver` tool (`principal: agent`). A secret's value is never written.
    ControlChange {
        /// `controller` or `agent`.
        principal: String,
        /// `inference.driver`, `inference.max_tokens`, or `secrets/<NAME>`.
        target: String,
        /// `set`, `inject`, or `forget`.
        action: String,
        /// The value before and after (null for a secret).
        from: Value,
        to: Value,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task_id: Option<String>,
    },
    /// A control-plane change was refused; nothing changed.
    ControlRefused {
        principal: String,
        target: String,
        action: String,
        /// The HTTP status the refusal carries (also for the agent's tool).
        status: u16,
        /// `credential_unresolvable`, `in_use`, `not_granted`, `unknown_setting`, …
        reason: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task_id: Option<String>,
    },
    /// A hook's `deny` refused a call at the decision point; the call was not made.
    CallDenied {
        task_id: String,
        turn: u32,
        /// `tool`, `skill` or `shell`.
        kind: String,
        call_id: String,
        /// The tool's or skill's name, or the binary.
        target: String,
        hook: String,
        reason: String,
    },
    /// A hook misbehaved without stopping the session: an arm its handler does not commit, an
    /// error, a trap or timeout, an event dropped from a full queue, an undrained queue.
    HookDispatchError {
        hook: String,
        handler: String,
        /// `unhonored_arm`, `error`, `stopped`, `dropped`, or `drain_timeout`.
        kind: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        task_id: Option<String>,
    },
    /// An `on-task-end` hook's `reopen-task` ran the task's agent loop again.
    TaskReopened {
        task_id: String,
        hook: String,
        reopen_count: u32,
        feedback_chars: u64,
    },
    /// What became of a `seed-context` an `on-task-start` hook returned.
    ContextSeed {
        task_id: String,
        hook: String,
        /// `committed`, `dropped_oldest`, `summarized`, or `refused`.
        outcome: String,
        offered_messages: u32,
        committed_messages: u32,
        offered_tokens: u64,
        committed_tokens: u64,
        budget_tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<String>,
    },
    /// The conversation was replaced by a compaction hook.
    Compaction {
        task_id: String,
        turn: u32,
        hook: String,
        tokens_before: u64,
        tokens_after: u64,
        messages_before: u32,
        messages_after: u32,
        context_window: u64,
        threshold: f64,
        /// How long the compaction hook took.
        #[serde(default)]
        duration_ms: u64,
    },
    /// A capsule component pulled an artifact mid-session (`murmur:artifact-manager/manage`):
    /// installed and pinned in `murmur.lock`.
    ArtifactPulled {
        name: String,
        version: String,
        runtime: String,
        sha256: String,
        /// The registry it came from, as `murmur.lock` records it.
        source: String,
    },
    /// An MCP server said mid-session that its tool list changed
    /// (`notifications/tools/list_changed`; parent: `session_start`): the list it then gave,
    /// and what differs from the list it is held to (its pin, or the list it started with).
    /// When anything differs the server is refused for the rest of the session.
    McpToolsChanged {
        server: String,
        tools_sha256: String,
        /// One line a tool: added, removed, or which part changed. Empty when nothing did.
        changes: Vec<String>,
        /// Set when the new list could not be read (the server is then refused too).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
        refused: bool,
    },
    /// The runtime saved a context's conversation (`contexts/<context_id>/history.json`) as a
    /// task ended (parent: its `task_start`): what `mur run --resume` holds the file to.
    HistorySaved {
        task_id: String,
        context_id: String,
        /// sha256 (hex) of the bytes written.
        sha256: String,
        bytes: u64,
        messages: u64,
    },
    /// A task ended (parent: its `task_start`).
    TaskEnd {
        task_id: String,
        context_id: Option<String>,
        exit_status: ExitStatus,
        turns: u32,
        /// How often an `on-task-end` hook reopened the task.
        reopen_count: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        result_path: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<ErrorRef>,
        /// What the task changed in the directory the agent works in; absent for a task that
        /// ran no agent loop, and in traces written before it was recorded.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        changes: Option<WorkspaceChanges>,
    },
    /// The session ended, with the sums of its lines. Always the last line.
    SessionEnd {
        exit_status: ExitStatus,
        duration_ms: u64,
        totals: Totals,
        /// What the whole session changed in the directory the agent works in (its state
        /// before the first task against its state after the last); absent when no task ran.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        changes: Option<WorkspaceChanges>,
        /// When that directory is a git checkout: the commit it was on when the first task
        /// began.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        git: Option<WorkspaceGit>,
    },
}

/// Who asked for an inference call: the agent loop (`agent`) or a hook's `run-inference`
/// (`hook:<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Agent,
    Hook(String),
}

impl Origin {
    /// The hook's name, for a hook's call.
    pub fn hook(&self) -> Option<&str> {
        match self {
            Origin::Agent => None,
            Origin::Hook(name) => Some(name),
        }
    }

    /// The hook's name, or `agent`.
    pub fn name(&self) -> &str {
        self.hook().unwrap_or("agent")
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Agent => f.write_str("agent"),
            Origin::Hook(name) => write!(f, "hook:{name}"),
        }
    }
}

impl std::str::FromStr for Origin {
    type Err = String;

    fn from_str(text: &str) -> Result<Origin, String> {
        match text.strip_prefix("hook:") {
            Some(name) if !name.is_empty() => Ok(Origin::Hook(name.to_string())),
            _ if text == "agent" => Ok(Origin::Agent),
            _ => Err(format!("`{text}` is neither `agent` nor `hook:<name>`")),
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Origin {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Origin, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What followed an inference call: the agent loop ran the tools it asked for
/// (`call_tools`), ended the task (`finish`) or failed it (`fail`); `hook` for a hook's
/// `run-inference`, which the loop does not act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    CallTools,
    Finish,
    Fail,
    Hook,
}

impl Decision {
    /// The value as the trace spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::CallTools => "call_tools",
            Decision::Finish => "finish",
            Decision::Fail => "fail",
            Decision::Hook => "hook",
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a tool call ended: `passed`, `failed` or `error` as the tool said (or the runtime, when
/// the call broke), `refused` when it was not run (an unknown tool, invalid input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Passed,
    Failed,
    Error,
    Refused,
}

impl CallStatus {
    /// The value as the trace spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Passed => "passed",
            CallStatus::Failed => "failed",
            CallStatus::Error => "error",
            CallStatus::Refused => "refused",
        }
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a task or a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    Ok,
    Failed,
    MaxTurnsReached,
    ReopenBudgetExhausted,
    SpendCeilingReached,
    Canceled,
}

impl ExitStatus {
    /// The value as the trace spells it: `max_turns_reached`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExitStatus::Ok => "ok",
            ExitStatus::Failed => "failed",
            ExitStatus::MaxTurnsReached => "max_turns_reached",
            ExitStatus::ReopenBudgetExhausted => "reopen_budget_exhausted",
            ExitStatus::SpendCeilingReached => "spend_ceiling_reached",
            ExitStatus::Canceled => "canceled",
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The input fields that name a path, in the order they are looked for.
pub const PATH_FIELDS: [&str; 5] = ["path", "file", "file_path", "filepath", "filename"];

/// The first [`PATH_FIELDS`] member of a tool call's input that holds a string.
pub fn input_path(input: &Value) -> Option<String> {
    PATH_FIELDS
        .iter()
        .find_map(|field| input.get(field)?.as_str().map(str::to_string))
}

impl EventBody {
    /// The `event_type` this body is written with.
    pub fn event_type(&self) -> &'static str {
        match self {
            EventBody::SessionStart { .. } => "session_start",
            EventBody::TaskStart { .. } => "task_start",
            EventBody::Inference { .. } => "inference",
            EventBody::ToolCall { .. } => "tool_call",
            EventBody::SkillCall { .. } => "skill_call",
            EventBody::Shell { .. } => "shell",
            EventBody::A2aTaskReceived { .. } => "a2a_task_received",
            EventBody::A2aSend { .. } => "a2a_send",
            EventBody::ControlChange { .. } => "control_change",
            EventBody::ControlRefused { .. } => "control_refused",
            EventBody::CallDenied { .. } => "call_denied",
            EventBody::HookDispatchError { .. } => "hook_dispatch_error",
            EventBody::TaskReopened { .. } => "task_reopened",
            EventBody::ContextSeed { .. } => "context_seed",
            EventBody::Compaction { .. } => "compaction",
            EventBody::ArtifactPulled { .. } => "artifact_pulled",
            EventBody::McpToolsChanged { .. } => "mcp_tools_changed",
            EventBody::EgressRefused { .. } => "egress_refused",
            EventBody::HistorySaved { .. } => "history_saved",
            EventBody::TaskEnd { .. } => "task_end",
            EventBody::SessionEnd { .. } => "session_end",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_fields_read_and_write_the_words_the_trace_has_always_had() {
        for (origin, text) in [
            (Origin::Agent, "agent"),
            (Origin::Hook("critic".into()), "hook:critic"),
        ] {
            let json = serde_json::to_value(&origin).unwrap();
            assert_eq!(json, text);
            assert_eq!(serde_json::from_value::<Origin>(json).unwrap(), origin);
        }
        for bad in ["hook:", "robot", ""] {
            assert!(
                serde_json::from_value::<Origin>(bad.into()).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            serde_json::to_value(ExitStatus::ReopenBudgetExhausted).unwrap(),
            "reopen_budget_exhausted"
        );
        assert_eq!(
            serde_json::from_value::<CallStatus>("refused".into()).unwrap(),
            CallStatus::Refused
        );
        assert_eq!(
            serde_json::to_value(Decision::CallTools).unwrap(),
            "call_tools"
        );
        for status in [
            ExitStatus::Ok,
            ExitStatus::Failed,
            ExitStatus::MaxTurnsReached,
            ExitStatus::ReopenBudgetExhausted,
            ExitStatus::SpendCeilingReached,
            ExitStatus::Canceled,
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }
}

/// What changed in a directory between two looks at it: files (and symbolic links, never
/// followed) created, modified and deleted, by path relative to the directory, in path order.
/// `counts` are exact for what was walked; each list holds at most
/// [`WorkspaceChanges::LISTED`] entries. `truncated` says the walk stopped at a bound (or a
/// list was cut), and `truncated_by` which ones: past a bound nothing is claimed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceChanges {
    pub created: Vec<FileCreated>,
    pub modified: Vec<FileModified>,
    pub deleted: Vec<FileDeleted>,
    pub counts: ChangeCounts,
    /// Entries (files, links, directories) the later walk saw.
    pub entries: u64,
    #[serde(skip_serializing_if = "is_false", default)]
    pub truncated: bool,
    /// Which bounds were hit: `entries`, `depth`, `unreadable`, `listed`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub truncated_by: Vec<String>,
}

impl WorkspaceChanges {
    /// The most entries each of `created`, `modified`, `deleted` lists.
    pub const LISTED: usize = 1_000;

    /// `3 files changed: 1 created, 2 modified` (only the kinds that occurred), or
    /// `no files changed`; ` (truncated: entries)` when a bound was hit.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        let total = c
            .created
            .saturating_add(c.modified)
            .saturating_add(c.deleted);
        let mut line = if total == 0 {
            "no files changed".to_string()
        } else {
            let parts: Vec<String> = [
                (c.created, "created"),
                (c.modified, "modified"),
                (c.deleted, "deleted"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            let noun = if total == 1 { "file" } else { "files" };
            format!("{total} {noun} changed: {}", parts.join(", "))
        };
        if self.truncated {
            line.push_str(&format!(" (truncated: {})", self.truncated_by.join(", ")));
        }
        line
    }
}

/// How many paths were created, modified, deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeCounts {
    pub created: u64,
    pub modified: u64,
    pub deleted: u64,
}

/// A path that is new. `sha256` (hex) is absent past the hashing bounds; for a link it is the
/// hash of the link's target text, and `size` that text's length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCreated {
    pub path: String,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "is_false", default)]
    pub link: bool,
}

/// A path whose content (or, for a link, target) changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileModified {
    pub path: String,
    pub size_before: u64,
    pub size_after: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_after: Option<String>,
    #[serde(skip_serializing_if = "is_false", default)]
    pub link: bool,
}

/// A path that is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDeleted {
    pub path: String,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256_before: Option<String>,
    #[serde(skip_serializing_if = "is_false", default)]
    pub link: bool,
}

/// The git checkout a session's directory was: the commit `HEAD` named when the first task
/// began, the branch when `HEAD` named one, and whether no tracked file then differed from
/// that commit, staged or not (untracked files do not count); `clean` is absent when it could
/// not be told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceGit {
    pub commit: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub clean: Option<bool>,
}

fn is_false(value: &bool) -> bool {
    !*value
}
