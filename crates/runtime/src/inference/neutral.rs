//! The neutral message format: what the conversation is made of, whatever the
//! provider.
//!
//! [`Message`] and [`Block`] are the wire types of `murmur_protocol`, the same a driver reads.
//! A [`StoredMessage`] is a [`Message`] plus the runtime's envelope: `id` (`msg_` + uuid, an
//! identity), `source_id` (opaque, whatever produced the content) and `produced_by` (which
//! driver and model wrote an assistant message, when alternates exist). The envelope is kept in
//! `history.json` and stripped from every driver payload: a uuid at the head of a cached
//! prefix would break prompt caching.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use murmur_protocol::inference::{Block, Message};

/// One message as the runtime keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub id: String,
    #[serde(flatten)]
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produced_by: Option<Value>,
}

impl StoredMessage {
    /// A message with a fresh `msg_` id and no other envelope.
    pub fn new(message: Message) -> StoredMessage {
        StoredMessage {
            id: format!("msg_{}", uuid::Uuid::new_v4()),
            message,
            source_id: None,
            produced_by: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_is_kept_in_storage_and_the_wire_form_is_flat() {
        let mut stored = StoredMessage::new(Message::Tool {
            tool_call_id: "toolu_1".to_string(),
            is_error: false,
            content: vec![Block::Text {
                text: "ok".to_string(),
            }],
        });
        stored.source_id = Some("tool:read-file".to_string());
        let value = serde_json::to_value(&stored).unwrap();
        assert!(value["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(value["role"], "tool");
        assert_eq!(value["tool_call_id"], "toolu_1");
        assert_eq!(value["source_id"], "tool:read-file");
        assert_eq!(value.get("produced_by"), None);
        let back: StoredMessage = serde_json::from_value(value).unwrap();
        assert_eq!(back, stored);
        assert_eq!(
            serde_json::to_value(&stored.message).unwrap(),
            json!({"role": "tool", "tool_call_id": "toolu_1", "is_error": false,
                   "content": [{"type": "text", "text": "ok"}]})
        );
    }

    #[test]
    fn two_identical_messages_have_different_ids() {
        let a = StoredMessage::new(Message::user_text("same"));
        let b = StoredMessage::new(Message::user_text("same"));
        assert_ne!(a.id, b.id);
    }
}
