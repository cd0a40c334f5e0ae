//! Send a task to a peer capsule (`murmur:message/send`), from a capsule component: the
//! interface is linked into the capsule world only (a tool that imports it does not load; an
//! agent delegates through its named `peers:`, which the model asks as `ask-<name>`).
//!
//! The runtime writes the A2A JSON-RPC, so a component names the peer and the text and
//! nothing else:
//!
//! - The peer URL (its A2A endpoint, for a served capsule `http://host:port/`) must be allowed
//!   by the capsule's `capabilities.network.allow`; otherwise [`send`] returns
//!   `Err("network policy: '<url>' not in capabilities.network.allow")` and nothing is sent.
//! - The call waits until the peer's task ends or asks for input, within the component's own
//!   deadline, and returns the peer's task id, context id and [`PeerState`]. The answer text
//!   itself is the peer's: read it with the peer's `GetTask` (plain `wasi:http`, also under the
//!   allowlist).
//! - The runtime stamps the origin (`peer`), the sending task's trust class and a W3C
//!   `traceparent` on the request; a component cannot set or change them.
//! - Only a capsule component sending for a task may send: any other call fails.
//!
//! This calls the host: it works inside a component only (on any other target it panics).

mod bindings {
    wit_bindgen::generate!({
        inline: "
            package murmur:guest-message;
            world message {
                import murmur:message/send@0.1.0;
            }
        ",
        path: "../../wit",
        world: "murmur:guest-message/message",
        generate_all,
    });
}

use bindings::murmur::message::send as wit;

/// The peer's state for its task right after the send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Rejected,
    Canceled,
}

impl PeerState {
    /// The state's A2A name: `input-required`.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Submitted => "submitted",
            PeerState::Working => "working",
            PeerState::InputRequired => "input-required",
            PeerState::Completed => "completed",
            PeerState::Failed => "failed",
            PeerState::Rejected => "rejected",
            PeerState::Canceled => "canceled",
        }
    }
}

/// The peer's task for a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTask {
    pub task_id: String,
    pub context_id: String,
    pub state: PeerState,
}

/// Sends `text` to the capsule at `peer_url` as a new task, in the peer's context `context_id`
/// when given (to continue a conversation the peer keeps). `Err` says why nothing was sent or
/// no answer came.
pub fn send(peer_url: &str, text: &str, context_id: Option<&str>) -> Result<PeerTask, String> {
    let message = wit::Message {
        message_id: message_id(),
        context_id: context_id.map(str::to_string),
        text: text.to_string(),
    };
    let result = wit::send(peer_url, &message)?;
    Ok(PeerTask {
        task_id: result.task_id,
        context_id: result.context_id,
        state: match result.state {
            wit::TaskState::Submitted => PeerState::Submitted,
            wit::TaskState::Working => PeerState::Working,
            wit::TaskState::InputRequired => PeerState::InputRequired,
            wit::TaskState::Completed => PeerState::Completed,
            wit::TaskState::Failed => PeerState::Failed,
            wit::TaskState::Rejected => PeerState::Rejected,
            wit::TaskState::Canceled => PeerState::Canceled,
        },
    })
}

/// A fresh message id: `msg-` and 128 random bits (the standard library's hasher keys come from
/// the host's random source).
fn message_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    format!("msg-{:016x}{:016x}", random(), random())
}
