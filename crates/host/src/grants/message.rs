//! `murmur:message/send`: a capsule component sends a task to a peer capsule; and the one path
//! to a peer that the runtime's own peer tools (`ask-<name>`) take too ([`ask`]).
//!
//! What a sender can rely on, and what it cannot change:
//!
//! - **Capsule components only.** The interface is linked into the capsule world alone (a
//!   tool that imports it does not load); it answers a component that runs for a task
//!   ([`SendingTask`] set) and fails at once otherwise.
//! - **The allowlist decides.** The peer URL must be an `http` or `https` URL whose origin
//!   `capabilities.network.allow` permits. Otherwise the call returns
//!   `network policy: '<url>' not in capabilities.network.allow` and no connection is made.
//! - **The runtime speaks the protocol.** One A2A 1.0 `SendMessage` (the message's text as one
//!   text part) that waits until the peer's task ends or asks for input, bounded by the tool's
//!   own deadline. The answer is the peer's task id, context id and state; a peer that answers
//!   with a message and no task gives the message's ids (empty when it has none) and
//!   `completed`.
//! - **Origin and trust are stamped, not chosen.** Every request carries
//!   `x-murmur-task-origin: peer`, the sending task's trust class as `x-murmur-task-trust`, and
//!   a W3C `traceparent` naming the sending task's span (in the trace the task arrived with,
//!   else its session's: [`murmur_trace::context`]), so the peer's task nests under it. The
//!   `message` record has no field for any of them.
//! - **A peer's credential is the host's.** When the capsule's `peers:` has an entry for the
//!   peer's origin, the send carries that entry's credential (resolved at staging); one set
//!   nowhere refuses the send (`E-RUN-012`) before any connection. The component never sees a
//!   value and cannot choose another.
//! - **Every send is recorded**, sent or refused, as a [`PeerSend`]; the session writes each as
//!   an `a2a_send` trace event.
//!
//! The runtime's own peer tools (`ask-<name>`) take the same path through [`ask`]: the same
//! allowlist check, credential and stamped headers ([`admit`]), then the peer's task followed
//! to its end:
//!
//! - **One send.** `SendStreamingMessage` when the caller says the peer streams, else
//!   `SendMessage` asking not to wait (`returnImmediately`); a message given `context` and
//!   `task` ids carries them (the answer to a task that asked for input).
//! - **Followed to a settled state**: the stream's events, else `GetTask` polled with a wait of
//!   10 ms doubling to 2 s (a peer's short task is read at once, a long one costs few
//!   requests), until the task is terminal or waits for input or authentication
//!   (a stream that closes early goes on by polling). A direct reply (a message, no task) is
//!   a completed task holding it as its status message.
//! - **Within the deadline.** Past it, `CancelTask` is sent to the peer's task (at most 5 s
//!   more) and the ask fails `E-RUN-002`.
//! - **Recorded and replayed** through the link's cassette, after the allowlist and the
//!   credential admitted the ask (a refused ask is refused the same way, replaying or not):
//!   `--record` keeps the A2A request (method, the stamped origin and trust headers, the
//!   params) and what came of it (the peer's settled task with its files inline, or the
//!   failure, and the send as the trace records it); `--replay` answers from there, nothing
//!   sent ([`Asked::replayed`]), and an ask the cassette does not hold fails `E-RUN-029`
//!   naming it and the first difference.
//! - **A dropped ask cancels.** When the future of [`ask`] is dropped (the caller's task was
//!   canceled) after the peer named its task and before the task settled, `CancelTask` is sent
//!   to it on the runtime's executor, without waiting for the answer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The A2A model a peer's task is given back in ([`ask`]).
pub use murmur_a2a::{Artifact, FileContent, Part, PartContent, Task, TaskState, TaskStatus};
use murmur_a2a::{
    GetTaskParams, Message, Role, SendMessageConfiguration, SendMessageParams, SendMessageResult,
    StreamEvent, Version,
};
use murmur_manifest::Coded;

use crate::bindings::host::murmur::message::send::{
    Host, Message as WitMessage, TaskResult, TaskState as WitState,
};
use crate::grants::NetworkPolicy;
use crate::grants::cassette::{Cassette, PeerKind};
pub use crate::reported::PeerSend;
use murmur_a2a::client::{PeerClient, PeerError};
use murmur_trace::context::SpanRef;

/// The task a tool runs for: what its sends are stamped with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendingTask {
    /// `None` outside a session (`mur tool invoke`).
    pub task_id: Option<String>,
    /// The task's trust class: the one it arrived with, `operator` for a task given locally.
    pub trust: String,
    /// The task's span: a send's `traceparent` names it as the parent (see
    /// [`murmur_trace::context`]).
    pub span: SpanRef,
}

impl SendingTask {
    /// A task given by the operator (`--task`, `task.md`, `mur tool invoke`).
    pub const OPERATOR: &str = "operator";

    pub fn new(task_id: Option<String>, trust: String, span: SpanRef) -> SendingTask {
        SendingTask {
            task_id,
            trust,
            span,
        }
    }

    /// The `traceparent` of a send: the task's trace, the task's span as the parent.
    /// The same task, its sends made within the span of the event `event_id` (a call the
    /// trace records once it is over), so the peer's work nests under that call.
    pub fn within(&self, event_id: &str) -> SendingTask {
        SendingTask {
            span: SpanRef {
                trace_id: self.span.trace_id.clone(),
                span_id: murmur_trace::context::event_span_id(event_id),
            },
            ..self.clone()
        }
    }

    pub fn traceparent(&self) -> String {
        self.span.traceparent()
    }
}

/// A `peers:` entry with its credential's value, looked up at staging (`None`: set nowhere).
#[derive(Clone)]
pub struct PeerCredential {
    pub peer: murmur_manifest::door::Peer,
    pub value: Option<String>,
}

impl std::fmt::Debug for PeerCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCredential")
            .field("url", &self.peer.url)
            .field("resolved", &self.value.is_some())
            .finish()
    }
}

/// The header a send to `peer_url` carries for its origin's `peers:` entry: `Ok(None)` with
/// no entry, `Err` when the entry's credential is set nowhere.
fn credential_header(
    peers: &[PeerCredential],
    peer_url: &str,
) -> Result<Option<(String, String)>, String> {
    let Some(entry) = peers.iter().find(|entry| entry.peer.matches(peer_url)) else {
        return Ok(None);
    };
    let Some(presented) = entry.peer.presented() else {
        return Ok(None);
    };
    match &entry.value {
        Some(value) => Ok(Some(presented.header(value))),
        None => Err(format!(
            "the credential {} of peer {} is set nowhere",
            presented.credential(),
            entry.peer.url
        )),
    }
}

/// The per-call state of the message grant.
pub(crate) struct MessageGrant {
    pub(crate) sender: Option<SendingTask>,
    pub(crate) policy: NetworkPolicy,
    pub(crate) peers: std::sync::Arc<[PeerCredential]>,
    pub(crate) sends: Vec<PeerSend>,
}

/// The client every send uses, made once: it trusts the system's roots and the certificates
/// of `$MURMUR_CA_FILE`, when the operator names one.
fn client() -> Result<&'static PeerClient, String> {
    static CLIENT: OnceLock<Result<PeerClient, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let ca_file = std::env::var_os("MURMUR_CA_FILE").map(std::path::PathBuf::from);
            PeerClient::trusting(Version::V1_0, ca_file.as_deref())
                .map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn wit_state(state: TaskState) -> WitState {
    match state {
        TaskState::Submitted | TaskState::Unknown => WitState::Submitted,
        TaskState::Working => WitState::Working,
        TaskState::InputRequired | TaskState::AuthRequired => WitState::InputRequired,
        TaskState::Completed => WitState::Completed,
        TaskState::Failed => WitState::Failed,
        TaskState::Rejected => WitState::Rejected,
        TaskState::Canceled => WitState::Canceled,
    }
}

impl Host for MessageGrant {
    async fn send(
        &mut self,
        peer_url: String,
        message: WitMessage,
    ) -> wasmtime::Result<Result<TaskResult, String>> {
        let grant = self;
        let Some(sender) = grant.sender.clone() else {
            return Ok(Err(
                "murmur:message/send answers a component sending for a task only".to_string(),
            ));
        };
        let mut record = PeerSend::of(&peer_url, &sender);
        let headers = match admit(&grant.policy, &grant.peers, &sender, &peer_url) {
            Ok(headers) => headers,
            Err((code, text)) => {
                record.error = Some((code.to_string(), text.clone()));
                grant.sends.push(record);
                return Ok(Err(text));
            }
        };
        let outcome = send(&peer_url, message, &headers).await;
        let answer = match outcome {
            Ok(result) => {
                record.peer_task_id = Some(result.task_id.clone()).filter(|id| !id.is_empty());
                record.state = Some(result.state.to_string());
                Ok(TaskResult {
                    task_id: result.task_id,
                    context_id: result.context_id,
                    state: wit_state(result.state),
                })
            }
            Err((code, text)) => {
                record.error = Some((code.to_string(), text.clone()));
                Err(text)
            }
        };
        grant.sends.push(record);
        Ok(answer)
    }
}

/// What a peer answered to a send.
struct Sent {
    task_id: String,
    context_id: String,
    state: TaskState,
}

/// The headers of every request to `peer_url` for `sender`, once the allowlist and the
/// capsule's `peers:` admit it: `x-murmur-task-origin: peer`, the sender's trust, its
/// `traceparent`, and the credential of the peer's entry. Refused (no connection made):
/// `E-CAP-008` for a URL the allowlist does not permit, `E-RUN-012` for a credential set
/// nowhere.
pub fn admit(
    policy: &NetworkPolicy,
    peers: &[PeerCredential],
    sender: &SendingTask,
    peer_url: &str,
) -> Result<Vec<(String, String)>, (&'static str, String)> {
    let permitted = peer_url
        .parse::<http::Uri>()
        .is_ok_and(|uri| policy.permits(&uri));
    if !permitted {
        return Err((
            "E-CAP-008",
            format!("network policy: '{peer_url}' not in capabilities.network.allow"),
        ));
    }
    let credential = credential_header(peers, peer_url).map_err(|text| ("E-RUN-012", text))?;
    let mut headers = vec![
        ("x-murmur-task-origin".to_string(), "peer".to_string()),
        ("x-murmur-task-trust".to_string(), sender.trust.clone()),
        ("traceparent".to_string(), sender.traceparent()),
    ];
    headers.extend(credential);
    Ok(headers)
}

impl PeerSend {
    /// A send to `peer_url` by `sender`, not yet answered.
    fn of(peer_url: &str, sender: &SendingTask) -> PeerSend {
        PeerSend {
            peer: peer_url.to_string(),
            peer_task_id: None,
            state: None,
            trust: sender.trust.clone(),
            traceparent: sender.traceparent(),
            error: None,
        }
    }
}

/// A tool component's send: one `SendMessage` that waits for the peer's task to settle.
async fn send(
    peer_url: &str,
    message: WitMessage,
    headers: &[(String, String)],
) -> Result<Sent, (&'static str, String)> {
    let client = client().map_err(|error| ("E-A2A-003", error))?;
    let mut outgoing = Message::text(message.message_id, Role::User, message.text);
    outgoing.context_id = message.context_id.filter(|id| !id.is_empty());
    let params = SendMessageParams {
        message: outgoing,
        configuration: None,
        metadata: None,
    };
    let described = |error: PeerError| (error.code(), format!("peer {peer_url}: {error}"));
    match client
        .send_message(peer_url, &params, headers)
        .await
        .map_err(described)?
    {
        SendMessageResult::Task(task) => Ok(Sent {
            task_id: task.id,
            context_id: task.context_id,
            state: task.status.state,
        }),
        SendMessageResult::Message(reply) => Ok(Sent {
            task_id: reply.task_id.unwrap_or_default(),
            context_id: reply.context_id.unwrap_or_default(),
            state: TaskState::Completed,
        }),
    }
}

/// Where the runtime's peer sends may go and what they carry: the capsule's allowlist and its
/// `peers:` with their credentials.
#[derive(Clone, Debug)]
pub struct PeerLink {
    pub policy: NetworkPolicy,
    pub peers: Arc<[PeerCredential]>,
    /// Where the asks are recorded (`--record`) or answered from without contacting the peer
    /// (`--replay`); `None`: sent as they are.
    pub cassette: Option<Cassette>,
}

/// One question to a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAsk {
    /// The peer's A2A endpoint.
    pub peer_url: String,
    /// The message's text (one text part).
    pub text: String,
    /// The peer's context to go on in.
    pub context_id: Option<String>,
    /// The peer's task this message answers (one waiting for input).
    pub task_id: Option<String>,
    /// `SendStreamingMessage` (the peer's card offers streaming), else `SendMessage`.
    pub streaming: bool,
    /// How long the send and following the task may take in all.
    pub deadline: Duration,
}

/// Why an ask gave no task: a diagnostic code and a sentence naming the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskFailure {
    pub code: String,
    pub message: String,
}

/// What an ask came to: the peer's task where it settled (terminal, or waiting for input or
/// authentication), and every request it sent or was refused, for the trace.
#[derive(Debug)]
pub struct Asked {
    pub outcome: Result<Task, AskFailure>,
    pub sends: Vec<PeerSend>,
    /// Answered from the cassette (`--replay`): the peer was not contacted.
    pub replayed: bool,
}

/// The first wait between two `GetTask` polls, and the longest.
const FIRST_POLL: Duration = Duration::from_millis(10);
/// The most bytes of artifacts a peer's stream may add up to (the files a call saves are
/// bounded below it): past it the ask fails `E-A2A-016`.
pub const MAX_STREAMED_ARTIFACTS: usize = 80 << 20;
const LAST_POLL: Duration = Duration::from_secs(2);
/// How long the `CancelTask` of a peer's task past its deadline may take.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Asks `ask.peer_url` for `sender` and follows the peer's task until it settles, within
/// `ask.deadline` (see the module's docs).
pub async fn ask(link: &PeerLink, sender: &SendingTask, ask: PeerAsk) -> Asked {
    let mut sends = Vec::new();
    let mut record = PeerSend::of(&ask.peer_url, sender);
    let refused = |record: &mut PeerSend, code: &str, text: String| {
        record.error = Some((code.to_string(), text.clone()));
        AskFailure {
            code: code.to_string(),
            message: text,
        }
    };
    let headers = match admit(&link.policy, &link.peers, sender, &ask.peer_url) {
        Ok(headers) => headers,
        Err((code, text)) => {
            let failure = refused(&mut record, code, text);
            sends.push(record);
            return Asked {
                outcome: Err(failure),
                sends,
                replayed: false,
            };
        }
    };
    let (method, params) = outgoing(&ask);
    let request = serde_json::json!({
        "method": method,
        // The stamped headers that say who asks (the traceparent names this session's span;
        // the credential is never kept).
        "headers": headers
            .iter()
            .filter(|(name, _)| name == "x-murmur-task-origin" || name == "x-murmur-task-trust")
            .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
            .collect::<serde_json::Map<_, _>>(),
        "params": murmur_a2a::Wire::to_wire(&params, Version::V1_0),
    });
    if let Some(cassette) = link.cassette.as_ref().filter(|c| c.is_replaying()) {
        let served = cassette.serve_peer(PeerKind::Ask, &ask.peer_url, &request);
        let outcome = replayed(served, &mut record);
        sends.push(record);
        return Asked {
            outcome,
            sends,
            replayed: true,
        };
    }
    let client = match client() {
        Ok(client) => client,
        Err(text) => {
            let failure = refused(&mut record, "E-A2A-003", text);
            sends.push(record);
            return Asked {
                outcome: Err(failure),
                sends,
                replayed: false,
            };
        }
    };
    let mut following = Following {
        guard: CancelOnDrop {
            client,
            url: ask.peer_url.clone(),
            headers: headers.clone(),
            task_id: None,
        },
        record,
    };
    let outcome = match tokio::time::timeout(
        ask.deadline,
        follow(client, &ask, params, &headers, &mut following),
    )
    .await
    {
        Ok(Ok(task)) => {
            following.guard.task_id = None;
            Ok(task)
        }
        Ok(Err(error)) => {
            let failure = AskFailure {
                code: error.code().to_string(),
                message: format!("peer {}: {error}", ask.peer_url),
            };
            if following.record.state.is_none() {
                following.record.error = Some((failure.code.clone(), failure.message.clone()));
            }
            Err(failure)
        }
        Err(_) => {
            let mut message = format!(
                "peer {} did not finish within {} s",
                ask.peer_url,
                ask.deadline.as_secs_f64()
            );
            if let Some(task_id) = following.guard.task_id.take() {
                let canceled = tokio::time::timeout(
                    CANCEL_WAIT,
                    client.cancel_task(&ask.peer_url, &task_id, &headers),
                )
                .await;
                message.push_str(&match canceled {
                    Ok(Ok(task)) => {
                        format!("; its task {task_id} was canceled ({})", task.status.state)
                    }
                    Ok(Err(error)) => format!("; canceling its task {task_id} failed: {error}"),
                    Err(_) => format!("; its task {task_id} did not answer the cancel"),
                });
            }
            if following.record.state.is_none() {
                following.record.error = Some(("E-RUN-002".to_string(), message.clone()));
            }
            Err(AskFailure {
                code: "E-RUN-002".to_string(),
                message,
            })
        }
    };
    if let Some(cassette) = &link.cassette {
        cassette.record_peer(
            PeerKind::Ask,
            &ask.peer_url,
            request,
            recorded(&outcome, &following.record),
        );
    }
    sends.push(following.record.clone());
    Asked {
        outcome,
        sends,
        replayed: false,
    }
}

/// The A2A method and params of `ask`'s one send: `SendStreamingMessage` when the peer
/// streams, else `SendMessage` asking not to wait.
fn outgoing(ask: &PeerAsk) -> (&'static str, SendMessageParams) {
    let mut message = Message::text(uuid::Uuid::new_v4().to_string(), Role::User, &ask.text);
    message.context_id = ask.context_id.clone().filter(|id| !id.is_empty());
    message.task_id = ask.task_id.clone().filter(|id| !id.is_empty());
    if ask.streaming {
        let params = SendMessageParams {
            message,
            configuration: None,
            metadata: None,
        };
        return ("SendStreamingMessage", params);
    }
    let params = SendMessageParams {
        message,
        configuration: Some(SendMessageConfiguration {
            blocking: false,
            ..SendMessageConfiguration::default()
        }),
        metadata: None,
    };
    ("SendMessage", params)
}

/// What a cassette keeps of an ask's end: the peer's settled task (A2A 1.0 JSON, its files
/// inline) or the failure, and the send as the trace records it.
fn recorded(outcome: &Result<Task, AskFailure>, send: &PeerSend) -> serde_json::Value {
    let error = |code: &str, message: &str| serde_json::json!({"code": code, "message": message});
    let mut answer = match outcome {
        Ok(task) => serde_json::json!({"task": murmur_a2a::Wire::to_wire(task, Version::V1_0)}),
        Err(failure) => serde_json::json!({"error": error(&failure.code, &failure.message)}),
    };
    answer["send"] = serde_json::json!({
        "peer_task_id": send.peer_task_id,
        "state": send.state,
        "error": send.error.as_ref().map(|(code, message)| error(code, message)),
    });
    answer
}

/// An ask answered from the cassette (`served`, or why it was refused): its outcome, and the
/// send's `record` as it was recorded. A refusal is `E-RUN-029`; an entry that cannot be read
/// `E-RUN-030`.
fn replayed(
    served: Result<serde_json::Value, String>,
    record: &mut PeerSend,
) -> Result<Task, AskFailure> {
    let failure = |record: &mut PeerSend, code: &str, message: String| {
        record.error = Some((code.to_string(), message.clone()));
        AskFailure {
            code: code.to_string(),
            message,
        }
    };
    let answer = match served {
        Ok(answer) => answer,
        Err(why) => {
            return Err(failure(
                record,
                "E-RUN-029",
                format!("the replay stopped: {why}"),
            ));
        }
    };
    let text = |value: &serde_json::Value| value.as_str().map(str::to_string);
    let send = &answer["send"];
    record.peer_task_id = text(&send["peer_task_id"]);
    record.state = text(&send["state"]);
    record.error = send["error"]["code"].as_str().map(|code| {
        (
            code.to_string(),
            text(&send["error"]["message"]).unwrap_or_default(),
        )
    });
    if let Some(task) = answer.get("task") {
        return <Task as murmur_a2a::Wire>::from_wire(Version::V1_0, task).map_err(|error| {
            failure(
                record,
                "E-RUN-030",
                format!("the cassette's recorded peer task cannot be read: {error}"),
            )
        });
    }
    match (
        answer["error"]["code"].as_str(),
        text(&answer["error"]["message"]),
    ) {
        (Some(code), Some(message)) => Err(AskFailure {
            code: code.to_string(),
            message,
        }),
        _ => Err(failure(
            record,
            "E-RUN-030",
            "the cassette's recorded peer call holds neither a task nor an error".to_string(),
        )),
    }
}

/// The state of one ask while it follows the peer's task.
struct Following {
    /// Cancels the peer's task if the ask is dropped before it settles.
    guard: CancelOnDrop,
    /// The send, as the trace records it.
    record: PeerSend,
}

impl Following {
    /// The peer named its task, in `state`: the send's record says so, and the task is
    /// canceled if the ask is dropped before it settles.
    fn named(&mut self, task_id: &str, state: TaskState) {
        if self.record.state.is_none() {
            self.record.peer_task_id = Some(task_id.to_string()).filter(|id| !id.is_empty());
            self.record.state = Some(state.to_string());
        }
        if !task_id.is_empty() && !settled(state) {
            self.guard.task_id = Some(task_id.to_string());
        }
    }
}

/// A peer's task that is canceled when this is dropped with `task_id` set.
struct CancelOnDrop {
    client: &'static PeerClient,
    url: String,
    headers: Vec<(String, String)>,
    task_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, url, headers) = (self.client, self.url.clone(), self.headers.clone());
        let sending = runtime.spawn(async move {
            let _ = tokio::time::timeout(CANCEL_WAIT, client.cancel_task(&url, &task_id, &headers))
                .await;
        });
        let mut pending = CANCELS_ON_THEIR_WAY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.retain(|cancel| !cancel.is_finished());
        pending.push(sending);
    }
}

/// The `CancelTask`s of dropped asks not yet answered, process-wide.
static CANCELS_ON_THEIR_WAY: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Waits until every peer task canceled because its ask was dropped (the call stopped, the
/// session canceled by a signal) has been told, or its cancel gave up: at most
/// [`CANCEL_WAIT`]. A session ends through this, so a process that stops right after still
/// cancels what it asked of its peers.
pub async fn dropped_asks_canceled() {
    let pending = std::mem::take(
        &mut *CANCELS_ON_THEIR_WAY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    for cancel in pending {
        let _ = cancel.await;
    }
}

/// Terminal, or waiting for the client.
fn settled(state: TaskState) -> bool {
    state.is_terminal() || state.is_interrupted()
}

/// A direct reply as the completed task it stands for.
fn replied(reply: Message) -> Task {
    let mut status = TaskStatus::new(TaskState::Completed);
    let (task_id, context_id) = (
        reply.task_id.clone().unwrap_or_default(),
        reply.context_id.clone().unwrap_or_default(),
    );
    status.message = Some(reply);
    Task::new(task_id, context_id, status)
}

/// About how many bytes `artifact` holds: its text, its inline files and its data.
fn artifact_bytes(artifact: &Artifact) -> usize {
    use murmur_a2a::{FileContent, PartContent};
    artifact
        .parts
        .iter()
        .map(|part| match &part.content {
            PartContent::Text(text) => text.len(),
            PartContent::File(FileContent::Bytes(bytes)) => bytes.len(),
            PartContent::File(FileContent::Uri(uri)) => uri.len(),
            PartContent::Data(value) => value.to_string().len(),
        })
        .fold(0, usize::saturating_add)
}

/// `artifact` added to `task`: appended to the one of the same id when `append`, else in its
/// place (or after the others).
fn merge_artifact(task: &mut Task, artifact: Artifact, append: bool) {
    match task
        .artifacts
        .iter_mut()
        .find(|held| held.artifact_id == artifact.artifact_id)
    {
        Some(held) if append => held.parts.extend(artifact.parts),
        Some(held) => *held = artifact,
        None => task.artifacts.push(artifact),
    }
}

/// The send, then the task followed until it settles (no deadline here: [`ask`] bounds it).
async fn follow(
    client: &PeerClient,
    ask: &PeerAsk,
    params: SendMessageParams,
    headers: &[(String, String)],
    following: &mut Following,
) -> Result<Task, PeerError> {
    let url = ask.peer_url.as_str();
    let mut task = if ask.streaming {
        let mut stream = client.stream_message(url, &params, headers).await?;
        let mut task: Option<Task> = None;
        let mut streamed = 0usize;
        while let Some(event) = stream.next().await {
            let event = event?.event;
            let ends = event.ends_stream();
            match event {
                StreamEvent::Message(reply) => {
                    let task = replied(reply);
                    following.named(&task.id, TaskState::Completed);
                    return Ok(task);
                }
                StreamEvent::Task(whole) => {
                    following.named(&whole.id, whole.status.state);
                    task = Some(whole);
                }
                StreamEvent::StatusUpdate(update) => {
                    following.named(&update.task_id, update.status.state);
                    let held = task.get_or_insert_with(|| {
                        Task::new(&update.task_id, &update.context_id, update.status.clone())
                    });
                    held.status = update.status;
                }
                StreamEvent::ArtifactUpdate(update) => {
                    // Appended chunks add up: a peer streaming without end is cut off.
                    streamed = streamed.saturating_add(artifact_bytes(&update.artifact));
                    if streamed > MAX_STREAMED_ARTIFACTS {
                        return Err(PeerError::TooLarge {
                            url: url.to_string(),
                            what: "artifacts over its stream",
                            limit: MAX_STREAMED_ARTIFACTS,
                        });
                    }
                    let held = task.get_or_insert_with(|| {
                        Task::new(
                            &update.task_id,
                            &update.context_id,
                            TaskStatus::new(TaskState::Working),
                        )
                    });
                    merge_artifact(held, update.artifact, update.append);
                }
            }
            if ends {
                break;
            }
        }
        task.ok_or_else(|| PeerError::Invalid("the stream closed before naming a task".into()))?
    } else {
        match client.send_message(url, &params, headers).await? {
            SendMessageResult::Message(reply) => {
                let task = replied(reply);
                following.named(&task.id, TaskState::Completed);
                return Ok(task);
            }
            SendMessageResult::Task(task) => {
                following.named(&task.id, task.status.state);
                task
            }
        }
    };
    let mut wait = FIRST_POLL;
    while !settled(task.status.state) {
        if task.id.is_empty() {
            return Err(PeerError::Invalid(
                "an unsettled task with no id cannot be followed".into(),
            ));
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LAST_POLL);
        let params = GetTaskParams {
            id: task.id.clone(),
            history_length: Some(0),
        };
        task = client.get_task(url, &params, headers).await?;
    }
    following.guard.task_id = None;
    Ok(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use murmur_a2a::rpc::{self, Method};
    use murmur_a2a::{Part, TaskArtifactUpdate, TaskStatusUpdate};
    use murmur_manifest::NetworkRule;

    /// One request a fake peer got: its method, headers and params.
    #[derive(Debug, Clone)]
    struct Got {
        method: Method,
        headers: http::HeaderMap,
        params: serde_json::Value,
    }

    /// What the fake peer answers: one JSON-RPC result, or SSE events.
    enum Reply {
        Json(serde_json::Value),
        Events(Vec<StreamEvent>),
    }

    type Script = dyn Fn(&rpc::Request, usize) -> Reply + Send + Sync;

    /// An A2A 1.0 peer on loopback answering each request as `script` says (given how many
    /// `GetTask`s came before), recording every request.
    struct FakePeer {
        url: String,
        got: Arc<Mutex<Vec<Got>>>,
    }

    impl FakePeer {
        async fn start(script: Arc<Script>) -> FakePeer {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .unwrap();
            let port = listener.local_addr().unwrap().port();
            let got = Arc::new(Mutex::new(Vec::<Got>::new()));
            let seen = got.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (script, seen) = (script.clone(), seen.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |request: http::Request<hyper::body::Incoming>| {
                                let (script, seen) = (script.clone(), seen.clone());
                                async move {
                                    let headers = request.headers().clone();
                                    let body = request.into_body().collect().await.unwrap();
                                    let parsed = rpc::parse_request(&body.to_bytes()).unwrap();
                                    let polls = {
                                        let mut seen = seen.lock().unwrap();
                                        let polls = seen
                                            .iter()
                                            .filter(|got| got.method == Method::GetTask)
                                            .count();
                                        seen.push(Got {
                                            method: parsed.method,
                                            headers,
                                            params: parsed.params.clone(),
                                        });
                                        polls
                                    };
                                    let (content_type, body) = match script(&parsed, polls) {
                                        Reply::Json(result) => (
                                            "application/json",
                                            serde_json::json!({"jsonrpc": "2.0", "id": parsed.id, "result": result}).to_string(),
                                        ),
                                        Reply::Events(events) => (
                                            "text/event-stream",
                                            events
                                                .iter()
                                                .map(|event| {
                                                    rpc::sse_event(
                                                        &parsed.id,
                                                        Version::V1_0,
                                                        event,
                                                        None,
                                                    )
                                                })
                                                .collect::<String>(),
                                        ),
                                    };
                                    let mut response =
                                        http::Response::new(Full::new(Bytes::from(body)));
                                    response.headers_mut().insert(
                                        "content-type",
                                        http::HeaderValue::from_static(content_type),
                                    );
                                    Ok::<_, std::convert::Infallible>(response)
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            FakePeer {
                url: format!("http://127.0.0.1:{port}/"),
                got,
            }
        }

        fn got(&self) -> Vec<Got> {
            self.got.lock().unwrap().clone()
        }

        fn methods(&self) -> Vec<Method> {
            self.got().into_iter().map(|got| got.method).collect()
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    fn wire<T: murmur_a2a::Wire>(value: &T) -> serde_json::Value {
        value.to_wire(Version::V1_0)
    }

    fn task(id: &str, state: TaskState, answer: Option<&str>) -> Task {
        let mut task = Task::new(id, "ctx-peer", TaskStatus::new(state));
        if let Some(answer) = answer {
            task.artifacts
                .push(Artifact::new("answer", vec![Part::text(answer)]));
        }
        task
    }

    fn sender() -> SendingTask {
        let span = SpanRef::task("ses_1", "evt_task", None);
        SendingTask::new(Some("tsk_1".into()), "operator".into(), span)
    }

    /// The allowlist holding the peer's origin, and a `peers:` entry presenting `TOKEN` (with
    /// `value`, `None`: set nowhere).
    fn link(peer_url: &str, value: Option<&str>) -> PeerLink {
        let origin = peer_url.trim_end_matches('/');
        let peer = murmur_manifest::door::Peer {
            url: origin.to_string(),
            name: Some("researcher".into()),
            description: None,
            bearer: Some("${TOKEN}".into()),
            api_key: None,
            header: None,
        };
        PeerLink {
            policy: NetworkPolicy::allow(vec![NetworkRule::parse(origin).unwrap()]),
            peers: vec![PeerCredential {
                peer,
                value: value.map(str::to_string),
            }]
            .into(),
            cassette: None,
        }
    }

    fn question(url: &str, deadline: Duration) -> PeerAsk {
        PeerAsk {
            peer_url: url.to_string(),
            text: "Capital of Peru?".into(),
            context_id: None,
            task_id: None,
            streaming: false,
            deadline,
        }
    }

    #[test]
    fn an_ask_polls_the_peers_task_to_its_end_with_the_stamped_headers() {
        let runtime = runtime();
        runtime.block_on(async {
            let peer = FakePeer::start(Arc::new(|request: &rpc::Request, polls: usize| {
                Reply::Json(match request.method {
                    Method::SendMessage => wire(&SendMessageResult::Task(task(
                        "t-1",
                        TaskState::Working,
                        None,
                    ))),
                    _ if polls < 2 => wire(&task("t-1", TaskState::Working, None)),
                    _ => wire(&task("t-1", TaskState::Completed, Some("Lima."))),
                })
            }))
            .await;
            let started = std::time::Instant::now();
            let mut asked = question(&peer.url, Duration::from_secs(10));
            asked.context_id = Some("ctx-peer".into());
            asked.task_id = Some("t-0".into());
            let asked = ask(&link(&peer.url, Some("s3cret")), &sender(), asked).await;
            let task = asked.outcome.unwrap();
            assert_eq!(task.status.state, TaskState::Completed);
            assert_eq!(task.artifacts[0].parts[0], Part::text("Lima."));
            // 10 ms, 20 ms, 40 ms between the polls.
            assert!(started.elapsed() >= Duration::from_millis(70));
            assert_eq!(
                peer.methods(),
                [
                    Method::SendMessage,
                    Method::GetTask,
                    Method::GetTask,
                    Method::GetTask
                ]
            );
            let sent = &peer.got()[0];
            for got in peer.got() {
                assert_eq!(got.headers["authorization"], "Bearer s3cret");
                assert_eq!(got.headers["x-murmur-task-origin"], "peer");
                assert_eq!(got.headers["x-murmur-task-trust"], "operator");
                assert_eq!(got.headers["traceparent"], sender().traceparent().as_str());
            }
            assert_eq!(sent.params["message"]["contextId"], "ctx-peer");
            assert_eq!(sent.params["message"]["taskId"], "t-0");
            assert_eq!(sent.params["configuration"]["returnImmediately"], true);
            assert_eq!(asked.sends.len(), 1);
            assert_eq!(asked.sends[0].peer_task_id.as_deref(), Some("t-1"));
            assert_eq!(asked.sends[0].state.as_deref(), Some("working"));
            assert_eq!(asked.sends[0].error, None);
        });
    }

    #[test]
    fn a_peer_outside_the_allowlist_or_without_its_credential_is_never_contacted() {
        let runtime = runtime();
        runtime.block_on(async {
            let peer = FakePeer::start(Arc::new(|_: &rpc::Request, _| {
                Reply::Json(wire(&task("t-1", TaskState::Completed, Some("Lima."))))
            }))
            .await;
            let elsewhere = link("http://127.0.0.1:1/", Some("s3cret"));
            let asked = ask(
                &elsewhere,
                &sender(),
                question(&peer.url, Duration::from_secs(5)),
            )
            .await;
            let failure = asked.outcome.unwrap_err();
            assert_eq!(failure.code, "E-CAP-008");
            assert!(
                failure
                    .message
                    .contains("not in capabilities.network.allow")
            );
            assert_eq!(asked.sends[0].error.as_ref().unwrap().0, "E-CAP-008");

            let unset = link(&peer.url, None);
            let asked = ask(
                &unset,
                &sender(),
                question(&peer.url, Duration::from_secs(5)),
            )
            .await;
            let failure = asked.outcome.unwrap_err();
            assert_eq!(failure.code, "E-RUN-012");
            assert!(failure.message.contains("TOKEN"), "{failure:?}");
            assert!(peer.got().is_empty(), "{:?}", peer.methods());
        });
    }

    #[test]
    fn a_streaming_ask_reads_the_events_to_the_tasks_end() {
        let runtime = runtime();
        runtime.block_on(async {
            let peer = FakePeer::start(Arc::new(|_: &rpc::Request, _| {
                let mut done = TaskStatus::new(TaskState::Completed);
                done.message = Some(Message::text("m-2", Role::Agent, "Done."));
                Reply::Events(vec![
                    StreamEvent::Task(task("t-9", TaskState::Working, None)),
                    StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
                        task_id: "t-9".into(),
                        context_id: "ctx-peer".into(),
                        artifact: Artifact::new("a", vec![Part::text("Li")]),
                        append: false,
                        last_chunk: false,
                        metadata: None,
                    }),
                    StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
                        task_id: "t-9".into(),
                        context_id: "ctx-peer".into(),
                        artifact: Artifact::new("a", vec![Part::text("ma.")]),
                        append: true,
                        last_chunk: true,
                        metadata: None,
                    }),
                    StreamEvent::StatusUpdate(TaskStatusUpdate::new("t-9", "ctx-peer", done)),
                ])
            }))
            .await;
            let mut asked = question(&peer.url, Duration::from_secs(5));
            asked.streaming = true;
            let asked = ask(&link(&peer.url, Some("s3cret")), &sender(), asked).await;
            let task = asked.outcome.unwrap();
            assert_eq!(task.status.state, TaskState::Completed);
            assert_eq!(
                task.artifacts[0].parts,
                vec![Part::text("Li"), Part::text("ma.")]
            );
            assert_eq!(peer.methods(), [Method::SendStreamingMessage]);
            assert_eq!(asked.sends[0].peer_task_id.as_deref(), Some("t-9"));
        });
    }

    #[test]
    fn a_stream_of_artifacts_past_its_bound_is_cut_off() {
        let runtime = runtime();
        runtime.block_on(async {
            let chunk = "x".repeat(8 << 20);
            let peer = FakePeer::start(Arc::new(move |_: &rpc::Request, _| {
                let mut events = vec![StreamEvent::Task(task("t-8", TaskState::Working, None))];
                for n in 0..=(MAX_STREAMED_ARTIFACTS / chunk.len()) {
                    events.push(StreamEvent::ArtifactUpdate(TaskArtifactUpdate {
                        task_id: "t-8".into(),
                        context_id: "ctx-peer".into(),
                        artifact: Artifact::new("a", vec![Part::text(chunk.clone())]),
                        append: n > 0,
                        last_chunk: false,
                        metadata: None,
                    }));
                }
                Reply::Events(events)
            }))
            .await;
            let mut asked = question(&peer.url, Duration::from_secs(30));
            asked.streaming = true;
            let asked = ask(&link(&peer.url, Some("s3cret")), &sender(), asked).await;
            let failure = asked.outcome.unwrap_err();
            assert_eq!(failure.code, "E-A2A-016", "{}", failure.message);
            assert!(
                failure.message.contains("artifacts over its stream"),
                "{}",
                failure.message
            );
        });
    }

    /// A peer whose task never ends: `CancelTask` answers it canceled.
    fn endless() -> Arc<Script> {
        Arc::new(|request: &rpc::Request, _| {
            Reply::Json(match request.method {
                Method::SendMessage => wire(&SendMessageResult::Task(task(
                    "t-5",
                    TaskState::Working,
                    None,
                ))),
                Method::CancelTask => wire(&task("t-5", TaskState::Canceled, None)),
                _ => wire(&task("t-5", TaskState::Working, None)),
            })
        })
    }

    #[test]
    fn a_peer_past_the_deadline_is_canceled_and_the_ask_fails_naming_it() {
        let runtime = runtime();
        runtime.block_on(async {
            let peer = FakePeer::start(endless()).await;
            let started = std::time::Instant::now();
            let asked = ask(
                &link(&peer.url, Some("s3cret")),
                &sender(),
                question(&peer.url, Duration::from_millis(600)),
            )
            .await;
            assert!(started.elapsed() < Duration::from_secs(3));
            let failure = asked.outcome.unwrap_err();
            assert_eq!(failure.code, "E-RUN-002");
            assert!(
                failure.message.contains("did not finish within 0.6 s"),
                "{failure:?}"
            );
            assert!(failure.message.contains("t-5 was canceled"), "{failure:?}");
            let got = peer.got();
            let cancel = got.last().unwrap();
            assert_eq!(cancel.method, Method::CancelTask);
            assert_eq!(cancel.params["id"], "t-5");
            assert_eq!(cancel.headers["authorization"], "Bearer s3cret");
        });
    }

    #[test]
    fn a_dropped_ask_cancels_the_peers_task() {
        let runtime = runtime();
        runtime.block_on(async {
            let peer = FakePeer::start(endless()).await;
            let (link, sender) = (link(&peer.url, Some("s3cret")), sender());
            let asking = ask(&link, &sender, question(&peer.url, Duration::from_secs(30)));
            // The caller stops waiting once the peer's task runs.
            let dropped = tokio::time::timeout(Duration::from_millis(400), asking).await;
            assert!(dropped.is_err());
            let started = std::time::Instant::now();
            while !peer.methods().contains(&Method::CancelTask) {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{:?}",
                    peer.methods()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let cancel = peer
                .got()
                .into_iter()
                .find(|got| got.method == Method::CancelTask)
                .unwrap();
            assert_eq!(cancel.params["id"], "t-5");
        });
    }

    #[test]
    fn a_send_names_the_sending_tasks_span_as_its_parent() {
        let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let span = SpanRef::task("ses_1", "evt_task", Some(incoming));
        let task = SendingTask::new(Some("tsk_1".into()), "peer".into(), span.clone());
        let sent = SpanRef::from_traceparent(&task.traceparent()).unwrap();
        assert_eq!(sent.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(sent, span);
        assert_ne!(
            sent.span_id, "00f067aa0ba902b7",
            "the caller's span is not ours"
        );
    }
}
