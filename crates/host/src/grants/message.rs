//! `murmur:message/send`: a tool sends a task to a peer capsule.
//!
//! What a tool can rely on, and what it cannot change:
//!
//! - **Tools only.** The interface answers a component that runs for a task or for
//!   `mur tool invoke` ([`SendingTask`] set); a driver's call fails at once.
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

use std::sync::OnceLock;

use murmur_a2a::{Message, Role, SendMessageParams, SendMessageResult, TaskState, Version};
use murmur_manifest::Coded;

use crate::bindings::host::murmur::message::send::{
    Host, Message as WitMessage, TaskResult, TaskState as WitState,
};
use crate::grants::NetworkPolicy;
use murmur_a2a::client::{PeerClient, PeerError};
use murmur_trace::EventBody;
use murmur_trace::context::SpanRef;
use murmur_trace::schema::ErrorRef;

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
    pub fn traceparent(&self) -> String {
        self.span.traceparent()
    }
}

/// One send, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PeerSend {
    /// The peer URL the component named.
    pub peer: String,
    pub peer_task_id: Option<String>,
    /// The peer's state right after the send.
    pub state: Option<String>,
    pub trust: String,
    pub traceparent: String,
    /// Why nothing was sent, or why no answer came: a code and a message.
    pub error: Option<(String, String)>,
}

impl PeerSend {
    /// The `a2a_send` event of this send, made during the task `task_id`.
    pub fn event(&self, task_id: Option<String>) -> EventBody {
        EventBody::A2aSend {
            peer: self.peer.clone(),
            task_id,
            peer_task_id: self.peer_task_id.clone(),
            state: self.state.clone(),
            trust: self.trust.clone(),
            traceparent: self.traceparent.clone(),
            error: self.error.as_ref().map(|(code, message)| ErrorRef {
                code: code.clone(),
                message: message.clone(),
            }),
        }
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
                "murmur:message/send is available to tools only".to_string()
            ));
        };
        let traceparent = sender.traceparent();
        let mut record = PeerSend {
            peer: peer_url.clone(),
            peer_task_id: None,
            state: None,
            trust: sender.trust.clone(),
            traceparent: traceparent.clone(),
            error: None,
        };
        let permitted = peer_url
            .parse::<http::Uri>()
            .is_ok_and(|uri| grant.policy.permits(&uri));
        if !permitted {
            let text = format!("network policy: '{peer_url}' not in capabilities.network.allow");
            record.error = Some(("E-CAP-008".to_string(), text.clone()));
            grant.sends.push(record);
            return Ok(Err(text));
        }
        let credential = match credential_header(&grant.peers, &peer_url) {
            Ok(credential) => credential,
            Err(text) => {
                record.error = Some(("E-RUN-012".to_string(), text.clone()));
                grant.sends.push(record);
                return Ok(Err(text));
            }
        };
        let outcome = send(&peer_url, message, &sender, &traceparent, credential).await;
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

async fn send(
    peer_url: &str,
    message: WitMessage,
    sender: &SendingTask,
    traceparent: &str,
    credential: Option<(String, String)>,
) -> Result<Sent, (&'static str, String)> {
    let client = client().map_err(|error| ("E-A2A-003", error))?;
    let mut outgoing = Message::text(message.message_id, Role::User, message.text);
    outgoing.context_id = message.context_id.filter(|id| !id.is_empty());
    let params = SendMessageParams {
        message: outgoing,
        configuration: None,
        metadata: None,
    };
    let mut headers = vec![
        ("x-murmur-task-origin".to_string(), "peer".to_string()),
        ("x-murmur-task-trust".to_string(), sender.trust.clone()),
        ("traceparent".to_string(), traceparent.to_string()),
    ];
    headers.extend(credential);
    let described = |error: PeerError| (error.code(), format!("peer {peer_url}: {error}"));
    match client
        .send_message(peer_url, &params, &headers)
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

#[cfg(test)]
mod tests {
    use super::*;

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
