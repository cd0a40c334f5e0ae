//! What a call reports beyond its result: the requests a grant refused it, and the messages it
//! sent to peers. Kept per call, each becomes a trace event of the call, so the trace says which
//! grant said no to what, and what went where.

use murmur_trace::schema::{ErrorRef, EventBody};

/// A request a grant refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// Which grant refused: `network`.
    pub grant: &'static str,
    /// What was asked for: the request's URL without its query.
    pub target: String,
    pub reason: String,
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
