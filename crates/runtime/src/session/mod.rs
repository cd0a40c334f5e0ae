//! Sessions: staging a capsule, then running its tasks through the agent loop.
//!
//! A session is one launch of a capsule: id `ses_` + 32 hex, one workdir, one `trace.jsonl`.
//! For each task (`tsk_` + 24 hex, in its own context `ctx_` + 24 hex): the task's text is the
//! first user message; each turn sends the conversation to the driver of the choice in force
//! ([`control`]; `primary` until a switch, see [`crate::inference::choices`]), appends its
//! answer, runs the tool calls it asks for, and appends their fenced results; an `end_turn` or
//! `max_tokens` answer ends the task and its text goes to `out/result.txt`; running out of
//! `inference.max_turns` ends it `max_turns_reached`; a driver failure ends it `failed`; a call
//! `inference.max_session_tokens` refuses ends it `spend_ceiling_reached`.
//!
//! What a caller can rely on:
//!
//! - `trace.jsonl` exists and ends with `session_end` after every end a session can have once
//!   its workdir exists, failures included; the totals there are the sums of its lines.
//! - Each context's history (with envelope keys) is in `contexts/<ctx>/history.json` when its
//!   task ends, however it ends.
//! - The model's tool input is validated against the tool's `input_schema` before any call; an
//!   unknown tool, invalid input, a tool failure or a stopped component is an error result the
//!   model sees, and the session goes on. Every result reaches the model inside an
//!   untrusted-content fence naming the tool.
//! - Nothing is printed: text deltas and notes go to the caller's [`Observer`].
//!
//! A capsule without `inference:` that names a capsule component runs that component instead
//! of the agent loop: see [`capsule`].

pub mod capsule;
pub mod changes;
pub mod containment;
pub mod control;
mod mcp;
pub mod peer_cards;
pub mod peers;
pub mod resume;
mod run;
mod shell;
pub mod staging;
mod task;
mod tools;
pub mod workdir;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::grants::ChunkKind;
pub use crate::grants::env::HostEnv;
pub use mcp::{pin_differences, pin_servers as pin_mcp_servers};
use murmur_manifest::Coded;
pub use murmur_trace::schema::ExitStatus;
use murmur_trace::schema::{ErrorRef, Totals};
pub use run::{TaskFeed, run, run_fed};
pub use staging::{StageError, Staged, stage};
pub use task::served::{ServedAnswer, ServedEnd, ServedSession, open_served};
use workdir::Workdir;

/// Where a task came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSource {
    /// `--task` on the command line.
    Cli,
    /// `task.md` beside the manifest.
    TaskMd,
    /// An A2A message through the door.
    A2a,
    /// Tool calls from an MCP client (`mur mcp serve`).
    Mcp,
    /// A case of a dataset (`mur eval run`).
    Eval,
}

impl TaskSource {
    fn as_str(self) -> &'static str {
        match self {
            TaskSource::Cli => "cli",
            TaskSource::TaskMd => "task.md",
            TaskSource::A2a => "a2a",
            TaskSource::Mcp => "mcp",
            TaskSource::Eval => "eval",
        }
    }
}

/// One task to run.
#[derive(Clone)]
pub struct TaskInput {
    pub text: String,
    pub source: TaskSource,
    /// The task's id and context id when they were given (an A2A task); minted otherwise.
    pub ids: Option<TaskIds>,
    /// Asked between turns and tool calls: a stop request ends the task there.
    pub stop: Option<StopSignal>,
    /// Who answers a tool's `request-input` (an A2A task's client).
    pub input: Option<crate::grants::task::SharedBroker>,
    /// For an A2A task: how it arrived, written as `a2a_task_received` before it starts.
    pub received: Option<Received>,
}

/// How an A2A task arrived at the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The JSON-RPC method, as the client named it.
    pub method: String,
    /// `peer` or `client`.
    pub origin: String,
    /// The trust class the task runs with.
    pub trust: String,
    pub traceparent: Option<String>,
    /// The origin the request's headers claimed, when it was not granted.
    pub claimed_origin: Option<String>,
    /// The trust class the request's headers claimed, when it was not granted.
    pub claimed_trust: Option<String>,
    /// The `door.auth` principal whose credential the request presented; `None` when the door
    /// asks for none.
    pub principal: Option<String>,
}

impl TaskInput {
    /// A task with only its text and source.
    pub fn new(text: impl Into<String>, source: TaskSource) -> TaskInput {
        TaskInput {
            text: text.into(),
            source,
            ids: None,
            stop: None,
            input: None,
            received: None,
        }
    }
}

/// A task's ids, given by whoever created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskIds {
    pub task_id: String,
    pub context_id: String,
}

/// Why a task was asked to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopRequest {
    /// Its client canceled it.
    Canceled,
    /// Something outside the loop failed it (a `request-input` that timed out, say).
    Failed(Failure),
}

/// A request to stop a running task. Its loop checks it before each turn, and a model or tool
/// call in flight is abandoned the moment it is requested. The first request wins.
#[derive(Debug, Clone)]
pub struct StopSignal(Arc<tokio::sync::watch::Sender<Option<StopRequest>>>);

impl Default for StopSignal {
    fn default() -> Self {
        StopSignal(Arc::new(tokio::sync::watch::channel(None).0))
    }
}

impl StopSignal {
    /// Asks the task to stop (a second request changes nothing).
    pub fn stop(&self, reason: StopRequest) {
        self.0.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Why the task was asked to stop, if it was.
    pub fn reason(&self) -> Option<StopRequest> {
        self.0.borrow().clone()
    }

    /// Resolves once a stop is requested (at once if it was).
    pub async fn requested(&self) {
        let mut receiver = self.0.subscribe();
        let _ = receiver.wait_for(Option::is_some).await;
    }
}

/// A coded failure, ready to print as a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub hint: String,
}

impl Failure {
    fn to_ref(&self) -> ErrorRef {
        ErrorRef {
            code: self.code.clone(),
            message: self.message.clone(),
        }
    }
}

/// How one task went.
#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub task_id: String,
    pub context_id: Option<String>,
    pub exit_status: ExitStatus,
    pub turns: u32,
    pub result_path: Option<PathBuf>,
    /// The agent's final text, when it finished.
    pub result_text: Option<String>,
    /// How often an `on-task-end` hook reopened it.
    pub reopen_count: u32,
    pub error: Option<Failure>,
    /// The files under `out/` (other than `result.txt`) the task made or changed, when it
    /// finished: at most [`workdir::OUTPUTS_LISTED`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<workdir::OutputFile>,
    /// What the task changed in the directory the agent works in (see [`changes`]); absent
    /// for a task that ran no agent loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<murmur_trace::schema::WorkspaceChanges>,
}

/// How the session went.
#[derive(Debug, Clone, Serialize)]
pub struct SessionReport {
    pub session_id: String,
    /// The session's record: trace, result, conversations, the runtime's logs.
    pub workdir: PathBuf,
    /// The directory the agent worked in.
    pub workspace: PathBuf,
    pub trace_path: PathBuf,
    pub exit_status: ExitStatus,
    /// How many tasks ran.
    pub task_count: u32,
    /// The last [`REPORTS_KEPT`] of them (all of them for any `mur run` without `--serve`).
    pub tasks: Vec<TaskReport>,
    pub totals: Totals,
    pub duration_ms: u64,
    /// The session whose conversation this one went on with (`mur run --resume`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<String>,
    /// What the whole session changed in the directory the agent works in; absent when no
    /// agent task ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<murmur_trace::schema::WorkspaceChanges>,
    /// The git commit that directory was on at the first task, when it is a checkout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<murmur_trace::schema::WorkspaceGit>,
}

/// The most task reports a session keeps for its report: a served capsule may run any number
/// of tasks, and its memory must not grow with them.
pub const REPORTS_KEPT: usize = 1_000;

/// What the caller hears while a session runs.
pub trait Observer: Send + Sync {
    /// A text or thinking delta a driver or tool streamed.
    fn chunk(&self, _kind: ChunkKind, _text: &str) {}
    /// A step worth showing a person: a task starting, a tool being called.
    fn note(&self, _text: &str) {}
    /// Something the operator should act on, shown whatever else is quiet.
    fn warning(&self, _warning: &murmur_manifest::Diagnostic) {}
    /// A turn of the agent loop is about to call the driver.
    fn turn_started(&self, _turn: u32) {}
    /// A tool call's result, as the model sees it (inside its untrusted-content fence).
    fn tool_result(&self, _call_id: &str, _tool: &str, _text: &str, _is_error: bool) {}
}

/// An observer that hears nothing.
pub struct Silent;
impl Observer for Silent {}

/// How a session is run.
pub struct SessionConfig {
    /// Sessions get their record at `<workdir_root>/<session-id>/`.
    pub workdir_root: PathBuf,
    /// An existing directory the agent works on in place (`--workspace`), held for the
    /// session ([`workdir::WorkspaceLock`]); a fresh `<record>/workspace/` when `None`.
    pub workspace: Option<PathBuf>,
    pub tasks: Vec<TaskInput>,
    /// Ask drivers to stream and forward their deltas to the observer.
    pub stream: bool,
    /// Host environment lookups, for `capabilities.env.allow`.
    pub host_env: HostEnv,
    /// The launch's control state, shared with the door's `/control`; a fresh one (on
    /// `primary`) when `None`.
    pub control: Option<Arc<control::ControlState>>,
    /// Cancels the whole session (a signal to `mur run`, say): once it is stopped, the running
    /// task ends `canceled` at once (its model or tool call abandoned, its end hooks
    /// dispatched) and no other task starts. A task with a stop signal of its own (a door's)
    /// keeps it.
    pub cancel: Option<StopSignal>,
    /// The conversation an earlier session left, to go on with: every task runs on its
    /// context (see [`resume`]).
    pub resume: Option<resume::Resume>,
    /// A directory whose files the session's workdir starts with ([`Workdir::seed_from`]);
    /// one that cannot be copied ends the session before it begins (`E-RUN-001`).
    pub seed: Option<PathBuf>,
    /// The containment class the operator asks for (`mur run --containment`): the session
    /// runs under the stronger of it and the capsule's ([`containment::achieve`]).
    pub containment: Option<murmur_confine::Class>,
}

/// A session that could not start (its workdir or trace could not be made) or whose trace
/// could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SessionError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
    /// The workdir, when it was made.
    pub workdir: Option<PathBuf>,
}

impl Coded for SessionError {
    fn code(&self) -> &'static str {
        self.code
    }

    fn message(&self) -> String {
        self.message.clone()
    }

    fn hint(&self) -> String {
        self.hint.clone()
    }
}

impl SessionError {
    /// The session failed on `error`: its workdir (E-RUN-022) when the error came from an
    /// access to it, else its trace (E-TRC-001).
    fn trace(workdir: &Workdir, error: std::io::Error) -> SessionError {
        if let Some(reason) = murmur_beneath::BeneathError::inside(&error) {
            return SessionError {
                code: "E-RUN-022",
                message: format!(
                    "the session's files (record {}, workspace {}) could not be written: {reason}",
                    workdir.record.display(),
                    workdir.workspace.display()
                ),
                hint: "the runtime never follows a link a component planted in the workspace; \
                       free disk space, or keep components from replacing its own files"
                    .to_string(),
                workdir: Some(workdir.record.clone()),
            };
        }
        SessionError {
            code: "E-TRC-001",
            message: format!(
                "the trace {} could not be written: {error}",
                workdir.trace().display()
            ),
            hint: "check the free space and permissions of the workdir".to_string(),
            workdir: Some(workdir.record.clone()),
        }
    }
}

/// A fresh id: `prefix` then `hex_len` lowercase hex characters.
pub fn new_id(prefix: &str, hex_len: usize) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    let more = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &format!("{hex}{more}")[..hex_len])
}
