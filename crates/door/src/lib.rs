//! The A2A door: `mur run --serve` serves a capsule over A2A, JSON-RPC 2.0 over HTTP
//! with SSE streams, in the protocol's 1.0 names and its 0.3 names alike.
//!
//! What the door promises:
//!
//! - **Discovery.** The agent card at `/.well-known/agent-card.json`: in the version the
//!   request's `A2A-Version` names, else one card carrying both versions' fields, so a client of
//!   either finds its transport there; and at `/.well-known/agent.json` (0.3). A door serving
//!   one version (`door.a2a_versions`) shows that version's card alone, valid under its schema,
//!   whatever is asked, and `/.well-known/agent.json` only if that version is 0.3 (else 404).
//! - **One endpoint.** JSON-RPC at `/`. A method is answered in the version its name belongs to
//!   (`SendMessage` 1.0, `message/send` 0.3). Malformed JSON, an unknown method, bad params,
//!   an unknown task, a task that cannot be canceled: each gets its JSON-RPC or A2A error
//!   code, and the door keeps serving. A body over the limit is refused (413, with a
//!   JSON-RPC error) without being kept: the door reads on and drops it, up to 16 MiB, so a
//!   client still sending gets the answer rather than a cut connection.
//! - **Tasks.** A message without a task id starts a task (`submitted`, then `working` when the
//!   session takes it) as `lifecycle.task_acceptance` allows: `none` refuses every message,
//!   `single` takes one task, `queue` takes them all and runs them one after another, at most
//!   `lifecycle.queue_depth` waiting while one runs (past it a new task is JSON-RPC -32603, the
//!   A2A mapping of a server unavailable for now). A message
//!   on a task in `input-required` is the answer the task waits for. `GetTask`, `ListTasks`,
//!   `CancelTask` answer from the store; a cancel is immediate (`canceled`), and the task's loop
//!   stops at its next turn or tool call.
//! - **Streams.** `SendStreamingMessage` and `SubscribeToTask` answer with SSE: the task, then
//!   every status update, text and thinking chunk (as appended artifacts `response` and
//!   `thinking`) and tool result (artifact `tool-<call id>`), until the task ends or waits for
//!   input. Every event carries an id; a subscriber that sends `Last-Event-ID` gets what
//!   followed it.
//! - **Human in the loop.** A tool's `murmur:task/task.request-input` moves its task to
//!   `input-required` with the prompt; the next message on the task resumes the tool with its
//!   text. With no answer within `lifecycle.input_timeout_secs` the task fails.
//! - **Who may call.** With `door.auth` principals ([`auth`]), every JSON-RPC request must
//!   present one of their credentials, else 401 with `WWW-Authenticate` and the A2A error
//!   shape (-32030), before its body is read; the card (public, for discovery) declares them in
//!   `securitySchemes`. A task belongs to the principal that created it: to another it does not
//!   exist (-32001), and a context is one principal's. Without principals a `host` that is not
//!   loopback is refused (`E-A2A-005`) unless [`DoorConfig::insecure_no_auth`] says otherwise,
//!   and the card never names an unspecified address (`0.0.0.0`, `::`).
//! - **Origin.** A task is a client's, with trust `external`, unless its principal is declared
//!   `trust: peer`: then it is a peer's and inherits the trust class the request claims
//!   (`operator` or `external`). What others claim in `x-murmur-task-origin` and
//!   `x-murmur-task-trust` is recorded beside what was granted, never honoured; a W3C
//!   `traceparent` is recorded. All of it, with the principal, reaches the trace as
//!   `a2a_task_received`.
//! - **Versions and content.** A request whose `A2A-Version` names a version the door does not
//!   speak, or does not serve (`door.a2a_versions`), is -32009, and so is a method of a version
//!   it does not serve (`message/send` on a 1.0-only door), naming the versions it serves. A message with a part the capsule does not take (`door.input_modes`, text
//!   only) or whose `acceptedOutputModes` leave out `text/plain` is -32005.
//! - **Ids.** Every id a client chooses (message, context, task, referenced task, the
//!   `ListTasks` filter and page token, `Last-Event-ID`) is checked before use: an id is 1 to
//!   128 ASCII letters, digits, `-`, `_` or `.`, not starting with `.`; anything else is
//!   -32602 naming the field. No id a client sends becomes a path unchecked.
//! - **Bounds.** What the door keeps does not grow with what it is sent or serves: tasks that
//!   have not ended, ended tasks, each task's text and replay log, and a `ListTasks` page are
//!   capped ([`tasks`]); a served session keeps its last 1,000 task reports. In numbers: at
//!   most 1,000 tasks not ended holding 256 MiB of messages, and 1,000 ended tasks holding
//!   256 MiB of text (a task's input is held once, in the store; 1,000 tasks of 4 MiB input
//!   leave about 260 MiB resident, `cargo bench -p murmur-cli --bench door_store`); on disk, the
//!   workdir's `contexts/` (the conversations, holding the tasks' inputs) at most 10,000
//!   conversations and 256 MiB, the one whose last task ended longest ago deleted first.
//! - **Contexts.** A context is the principal's that opened it for as long as its conversation
//!   is kept, whether or not its tasks are: another principal's message into it is -32602
//!   naming `message.contextId`. Once its conversation is deleted, its id starts an empty
//!   context.
//! - **Control.** `/control` on the same listener ([`control`]): the settings in force and the
//!   driver choices, changed with `PUT /control/settings/<name>`; `control.secrets` injected and
//!   forgotten with `PUT|DELETE /control/secrets/<name>`, from loopback only. Every route wants
//!   the session's bearer token, which the door writes to `<control_dir>/<port>.json` (0600)
//!   when it starts and removes when it stops.

pub mod auth;
mod body;
pub mod control;
pub mod control_client;
mod feed;
pub mod outputs;
pub mod push;
mod server;
pub mod tasks;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

pub use feed::serve;
pub use tasks::{Origin, TaskStore};

/// How the door listens.
#[derive(Debug, Clone)]
pub struct DoorConfig {
    pub host: IpAddr,
    /// 0 lets the system choose.
    pub port: u16,
    /// The largest request body read, in bytes.
    pub body_limit: usize,
    /// Where the control plane's token file is written (`<port>.json`); `None` writes none,
    /// and the token is known to no one.
    pub control_dir: Option<PathBuf>,
    /// Serve on an address that is not loopback although the door authenticates no one
    /// (without it, such a `host` is refused with `E-A2A-005` unless `auth` has principals).
    pub insecure_no_auth: bool,
    /// The principals of `door.auth`, resolved ([`auth::DoorAuth::resolve`]); none: the door
    /// asks for no credential.
    pub auth: Arc<auth::DoorAuth>,
    /// HTTPS with this configuration (`door.tls`, `--tls-cert`/`--tls-key`); plain HTTP
    /// without.
    pub tls: Option<murmur_front::tls::Tls>,
    /// Serve plain HTTP on an address that is not loopback (without it, such a `host` without
    /// `tls` is refused with `E-A2A-022`).
    pub insecure_no_tls: bool,
}

impl Default for DoorConfig {
    fn default() -> Self {
        DoorConfig {
            host: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            body_limit: 4 * 1024 * 1024,
            control_dir: None,
            insecure_no_auth: false,
            auth: Arc::default(),
            tls: None,
            insecure_no_tls: false,
        }
    }
}

/// Told where the door listens, once it does.
pub type OnListening = Box<dyn FnOnce(SocketAddr) + Send>;

/// A shared store.
pub(crate) type Store = Arc<TaskStore>;
