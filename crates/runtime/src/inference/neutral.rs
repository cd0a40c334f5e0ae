//! The neutral message format: what the conversation is made of, whatever the
//! provider.
//!
//! A [`StoredMessage`] is a [`Message`] plus the runtime's envelope: `id` (`msg_` + uuid, an
//! identity), `source_id` (opaque, whatever produced the content) and `produced_by` (which
//! driver and model wrote an assistant message, when alternates exist). The envelope is kept in
//! `history.json` and stripped from every driver payload: a uuid at the head of a cached
//! prefix would break prompt caching.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    Image {
        media_type: String,
        data: String,
    },
}

/// One message as a driver sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: Vec<Block>,
    },
    Assistant {
        content: Vec<Block>,
    },
    Tool {
        tool_call_id: String,
        is_error: bool,
        content: Vec<Block>,
    },
}

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

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Message {
        Message::User {
            content: vec![Block::Text { text: text.into() }],
        }
    }

    /// The message's blocks.
    pub fn content(&self) -> &[Block] {
        match self {
            Message::User { content }
            | Message::Assistant { content }
            | Message::Tool { content, .. } => content,
        }
    }

    /// The text blocks, joined with newlines.
    pub fn text(&self) -> String {
        self.content()
            .iter()
            .filter_map(|block| match block {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The tool calls this message makes, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content().iter().filter_map(|block| match block {
            Block::ToolCall { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
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
