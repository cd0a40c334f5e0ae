//! Building and reading [`Message`]s.
//!
//! A message's `content` is a JSON array of blocks: `{"type":"text","text":…}`,
//! `{"type":"tool_call","id":…,"name":…,"input":…}`,
//! `{"type":"thinking","thinking":…,"signature":…}`, `{"type":"image","media_type":…,"data":…}`.

use serde_json::{Value, json};

use super::{Message, Role};

impl Message {
    /// A message of `role` holding one text block. `id` is empty (the runtime mints one for
    /// every message a hook returns), no source id, not a tool result.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Message::from_blocks(role, vec![json!({"type": "text", "text": text.into()})])
    }

    /// A `user` message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, text)
    }

    /// An `assistant` message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, text)
    }

    /// A `tool` message answering the call `call_id` with one text block.
    pub fn tool_result(
        call_id: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            is_error,
            ..Message::new(Role::Tool, text)
        }
    }

    /// A message of `role` holding `blocks` as its content.
    pub fn from_blocks(role: Role, blocks: Vec<Value>) -> Self {
        Message {
            id: String::new(),
            role,
            content: Value::Array(blocks).to_string(),
            tool_call_id: None,
            is_error: false,
            source_id: None,
        }
    }

    /// Set `source-id`, the opaque tag the runtime keeps verbatim.
    pub fn with_source_id(mut self, source_id: impl Into<String>) -> Self {
        self.source_id = Some(source_id.into());
        self
    }

    /// The content blocks, parsed. Errs when `content` is not a JSON array.
    pub fn blocks(&self) -> Result<Vec<Value>, String> {
        parse_blocks(&self.content)
    }

    /// The text of the text blocks, joined with newlines. Content that is not a JSON array of
    /// blocks is returned as it is.
    pub fn text(&self) -> String {
        match self.blocks() {
            Ok(blocks) => text_blocks(&blocks),
            Err(_) => self.content.clone(),
        }
    }

    /// The `tool_call` blocks of the content (an assistant message asking for tools); empty when
    /// there are none or the content does not parse.
    pub fn tool_calls(&self) -> Vec<Value> {
        self.blocks()
            .unwrap_or_default()
            .into_iter()
            .filter(|block| block_type(block) == Some("tool_call"))
            .collect()
    }
}

/// Parse a JSON array of content blocks (a message's `content`, an inference event's
/// `content`).
pub fn parse_blocks(content: &str) -> Result<Vec<Value>, String> {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Array(blocks)) => Ok(blocks),
        Ok(_) => Err("content is not a JSON array of blocks".to_string()),
        Err(e) => Err(format!("content is not JSON: {e}")),
    }
}

/// The text of the `text` blocks among `blocks`, joined with newlines.
pub fn text_blocks(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|block| block_type(block) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

/// `messages` as a plain-text transcript for a model or a person to read, one section per
/// message, separated by blank lines:
///
/// ```text
/// [user]
/// Fix the build.
///
/// [assistant]
/// Let me look.
/// [tool call call_1: read-file {"path":"Makefile"}]
///
/// [tool result for call_1]
/// all: build
/// ```
///
/// Text blocks are written as they are, a tool call as its id, name and input, an image as its
/// media type; thinking blocks are left out. An error result is marked `(error)`. Content that
/// does not parse as blocks is written verbatim.
pub fn transcript(messages: &[Message]) -> String {
    messages.iter().map(render).collect::<Vec<_>>().join("\n\n")
}

fn render(message: &Message) -> String {
    let mut header = match (message.role, message.tool_call_id.as_deref()) {
        (Role::Tool, Some(call)) => format!("[tool result for {call}"),
        (role, _) => format!("[{role}"),
    };
    if message.is_error {
        header.push_str(" (error)");
    }
    header.push(']');

    let body = match message.blocks() {
        Err(_) => vec![message.content.clone()],
        Ok(blocks) => blocks.iter().filter_map(render_block).collect(),
    };
    if body.is_empty() {
        header
    } else {
        format!("{header}\n{}", body.join("\n"))
    }
}

fn render_block(block: &Value) -> Option<String> {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    match block_type(block) {
        Some("text") => Some(field("text").to_string()),
        Some("tool_call") => {
            let input = match block.get("input") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "{}".to_string(),
            };
            Some(format!(
                "[tool call {}: {} {input}]",
                field("id"),
                field("name")
            ))
        }
        Some("thinking") => None,
        Some("image") => Some(format!("[image {}]", field("media_type"))),
        _ => Some(block.to_string()),
    }
}
