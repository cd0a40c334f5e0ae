//! `murmur:message/send`: a tool sends a task to a peer capsule (seed, `murmur:message/send`).
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
//!   a W3C `traceparent` whose trace id is the sending task's (the one its own `traceparent`
//!   carried, else one minted for the task) with a fresh span id. The `message` record has no
//!   field for any of them.
//! - **Every send is recorded**, sent or refused, as a [`PeerSend`]; the session writes each as
//!   an `a2a_send` trace event.

use std::sync::OnceLock;

use murmur_a2a::{Message, Role, SendMessageParams, SendMessageResult, TaskState, Version};

use crate::bindings::host::murmur::message::send::{
    Host, Message as WitMessage, TaskResult, TaskState as WitState,
};
use crate::door::client::{PeerClient, PeerError};
use crate::grants::{HostState, NetworkPolicy};

/// The task a tool runs for: what its sends are stamped with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendingTask {
    /// `None` outside a session (`mur tool invoke`).
    pub task_id: Option<String>,
    /// The task's trust class: the one it arrived with, `operator` for a task given locally.
    pub trust: String,
    /// 32 lowercase hex digits, never all zero.
    pub trace_id: String,
}

impl SendingTask {
    /// A task given by the operator (`--task`, `task.md`, `mur tool invoke`).
    pub const OPERATOR: &str = "operator";

    /// The sending identity of a task: its trust class, and the trace id of `traceparent` when
    /// it arrived with a valid one (so a peer's spans nest under the whole chain), else a new
    /// one.
    pub fn new(task_id: Option<String>, trust: String, traceparent: Option<&str>) -> SendingTask {
        let trace_id = traceparent
            .and_then(trace_id_of)
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        SendingTask {
            task_id,
            trust,
            trace_id,
        }
    }

    /// A `traceparent` for one request: this task's trace, a fresh span, sampled.
    pub fn traceparent(&self) -> String {
        let span = uuid::Uuid::new_v4().simple().to_string();
        format!("00-{}-{}-01", self.trace_id, &span[..16])
    }
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), when it is valid.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = parts.len() >= 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && (parts[0] != "00" || parts.len() == 4)
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2);
    valid.then(|| parts[1].to_string())
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

/// The per-call state of the message grant.
pub(crate) struct MessageGrant {
    pub(crate) sender: Option<SendingTask>,
    pub(crate) policy: NetworkPolicy,
    pub(crate) sends: Vec<PeerSend>,
}

/// The client every send uses, made once.
fn client() -> Result<&'static PeerClient, String> {
    static CLIENT: OnceLock<Result<PeerClient, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| PeerClient::new(Version::V1_0).map_err(|error| error.to_string()))
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

impl Host for HostState {
    async fn send(
        &mut self,
        peer_url: String,
        message: WitMessage,
    ) -> wasmtime::Result<Result<TaskResult, String>> {
        let grant = &mut self.message;
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
        let outcome = send(&peer_url, message, &sender, &traceparent).await;
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
        self.message.sends.push(record);
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
) -> Result<Sent, (&'static str, String)> {
    let client = client().map_err(|error| ("E-A2A-003", error))?;
    let mut outgoing = Message::text(message.message_id, Role::User, message.text);
    outgoing.context_id = message.context_id.filter(|id| !id.is_empty());
    let params = SendMessageParams {
        message: outgoing,
        configuration: None,
        metadata: None,
    };
    let headers = [
        ("x-murmur-task-origin".to_string(), "peer".to_string()),
        ("x-murmur-task-trust".to_string(), sender.trust.clone()),
        ("traceparent".to_string(), traceparent.to_string()),
    ];
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
    fn a_valid_traceparent_gives_its_trace_id_and_an_invalid_one_none() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            trace_id_of(good).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(trace_id_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_task_keeps_the_trace_it_arrived_with_and_each_send_gets_its_own_span() {
        let task = SendingTask::new(
            Some("tsk_1".into()),
            "peer".into(),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        let first = task.traceparent();
        let second = task.traceparent();
        assert_eq!(
            trace_id_of(&first).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_ne!(first, second);
        let fresh = SendingTask::new(None, SendingTask::OPERATOR.into(), Some("garbage"));
        assert_eq!(
            trace_id_of(&fresh.traceparent()),
            Some(fresh.trace_id.clone())
        );
        assert_ne!(fresh.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    }
}
