//! The neutral inference format: what the runtime hands a driver in `tool-input.data`
//! ([`Request`]) and what a driver answers in `tool-result.data` ([`Response`]), with the
//! conversation's [`Message`]s and [`Block`]s, the offered [`ToolSpec`]s, the [`StopReason`]
//! and the provider's [`Usage`].
//!
//! What it promises:
//!
//! - **One definition of the wire.** The runtime writes these types and drivers read them
//!   (and the reverse for a response), so the two sides cannot drift: every type here
//!   (de)serializes to exactly the JSON `docs/driver-protocol.md` describes.
//! - **Lenient reading, exact writing.** Keys the protocol does not define are ignored; `null`
//!   reads as the member's default, a bare string where blocks are expected reads as one text
//!   block, an absent `input_schema` as `{"type": "object"}`. What is written never depends on
//!   how it was read: absent optional members are omitted, never written as `null`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

/// How a `continuation_id` begins when it names a conversation the driver holds in its own
/// instance, not provider-side (`docs/driver-protocol.md`, "A conversation held in the
/// driver"): good only in the instance that returned it, and never past its task.
pub const INSTANCE_CONTINUATION_PREFIX: &str = "instance:";

/// One inference request (`tool-input.data`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The model to call. Empty when the request names none; `inference::run` (feature `http`) then
    /// fills in `MURMUR_INFERENCE_MODEL`.
    #[serde(default, deserialize_with = "null_default")]
    pub model: String,
    /// The output token cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation, oldest first (only what is new since the call that returned
    /// `continuation_id` when one is held).
    #[serde(default, deserialize_with = "null_default")]
    pub messages: Vec<Message>,
    /// The tools offered to the model.
    #[serde(default, deserialize_with = "null_default")]
    pub tools: Vec<ToolSpec>,
    /// A routing hint for the provider's prompt cache; forward it only where the provider
    /// defines a field for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// Use the provider's streaming API and emit text and thinking deltas as they arrive.
    #[serde(default, deserialize_with = "null_default")]
    pub stream: bool,
    /// The id this driver returned on an earlier call, when the runtime holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<String>,
}

impl Request {
    /// Parses a request from `tool-input.data`; the error says what is wrong, in a sentence.
    pub fn parse(data: Option<&str>) -> Result<Request, String> {
        let data = match data {
            Some(data) if !data.trim().is_empty() => data,
            _ => {
                return Err(
                    "missing input: a driver expects the neutral inference request as JSON"
                        .to_string(),
                );
            }
        };
        serde_json::from_str(data).map_err(|e| format!("invalid request: {e}"))
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user (or the runtime on their behalf) said.
    User {
        /// The blocks, in order.
        #[serde(default, deserialize_with = "blocks")]
        content: Vec<Block>,
    },
    /// What the model said.
    Assistant {
        /// The blocks, in order.
        #[serde(default, deserialize_with = "blocks")]
        content: Vec<Block>,
    },
    /// The result of one tool call.
    Tool {
        /// The `id` of the `tool_call` block this answers.
        tool_call_id: String,
        /// Whether the tool call failed.
        #[serde(default, deserialize_with = "null_default")]
        is_error: bool,
        /// The result, in blocks.
        #[serde(default, deserialize_with = "blocks")]
        content: Vec<Block>,
    },
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Message {
        Message::User {
            content: vec![Block::text(text)],
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
        joined_text(self.content(), "\n")
    }

    /// The tool calls this message makes, in order: id, name, input.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content().iter().filter_map(|block| match block {
            Block::ToolCall { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
}

/// One content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool.
    ToolCall {
        /// The provider's id for the call, answered by a `tool` message's `tool_call_id`.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, a JSON value (an object when the model produced valid JSON; the raw
        /// text as a string when it did not).
        #[serde(default)]
        input: Value,
    },
    /// The model's reasoning.
    Thinking {
        /// The reasoning text (or its summary).
        #[serde(default, deserialize_with = "null_default")]
        thinking: String,
        /// An opaque provider token that lets the reasoning be sent back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// An image, base64-encoded.
    Image {
        /// Its media type, e.g. `image/png`.
        media_type: String,
        /// Its bytes, base64.
        data: String,
    },
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }
}

/// The text of every text block of `blocks`, joined by `separator`.
pub fn joined_text(blocks: &[Block], separator: &str) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(separator)
}

/// A tool offered to the model. On the wire its schema is written twice, as `input_schema`
/// and as `parameters` (the name drivers written for other Murmur runtimes read); reading takes
/// `input_schema`, else `parameters`, else `{"type": "object"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ToolSpecWire", into = "ToolSpecWire")]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// The JSON Schema of its input.
    pub input_schema: Value,
}

/// [`ToolSpec`] as written and read.
#[derive(Serialize, Deserialize)]
struct ToolSpecWire {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

impl From<ToolSpecWire> for ToolSpec {
    fn from(wire: ToolSpecWire) -> ToolSpec {
        let schema = [wire.input_schema, wire.parameters]
            .into_iter()
            .flatten()
            .find(|schema| !schema.is_null())
            .unwrap_or_else(object_schema);
        ToolSpec {
            name: wire.name,
            description: wire.description,
            input_schema: schema,
        }
    }
}

impl From<ToolSpec> for ToolSpecWire {
    fn from(spec: ToolSpec) -> ToolSpecWire {
        ToolSpecWire {
            name: spec.name,
            description: spec.description,
            parameters: Some(spec.input_schema.clone()),
            input_schema: Some(spec.input_schema),
        }
    }
}

fn object_schema() -> Value {
    json!({"type": "object"})
}

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A block list, also accepting `null` (none) and a bare string (one text block).
fn blocks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Block>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Content {
        Text(String),
        Blocks(Vec<Block>),
    }
    Ok(match Option::<Content>::deserialize(d)? {
        None => Vec::new(),
        Some(Content::Text(text)) => vec![Block::Text { text }],
        Some(Content::Blocks(blocks)) => blocks,
    })
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished (also: a stop sequence, a refusal).
    EndTurn,
    /// It asks for tools.
    ToolCall,
    /// It was cut at the output cap.
    MaxTokens,
    /// The call failed.
    Error,
}

impl StopReason {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolCall => "tool_call",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Error => "error",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The provider's own token counts; a member it did not report stays `None` and is omitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens billed for the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Tokens billed for the completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Request tokens served from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Request tokens written into the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

impl Usage {
    /// Whether no member was reported.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// `self` with every member `other` reported replaced by `other`'s (a later report of the
    /// same call wins).
    pub fn merge(self, other: Usage) -> Usage {
        Usage {
            input_tokens: other.input_tokens.or(self.input_tokens),
            output_tokens: other.output_tokens.or(self.output_tokens),
            cached_tokens: other.cached_tokens.or(self.cached_tokens),
            cache_write_tokens: other.cache_write_tokens.or(self.cache_write_tokens),
        }
    }

    /// `Some(self)` unless nothing was reported.
    pub fn reported(self) -> Option<Usage> {
        (!self.is_empty()).then_some(self)
    }
}

/// The neutral response (`tool-result.data` of a passed call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// What it said, in order.
    pub content: Vec<Block>,
    /// What the provider reported; absent when it reported nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_parses_the_protocol_example_and_ignores_unknown_keys() {
        let data = r#"{
          "model": "claude-sonnet-4-5", "max_tokens": 8192, "system": "sys",
          "messages": [
            {"role": "user", "id": "msg_1", "source_id": "x", "content": [{"type": "text", "text": "Write a note."}]},
            {"role": "assistant", "content": [
              {"type": "thinking", "thinking": "hm", "signature": "sig"},
              {"type": "text", "text": "Writing it."},
              {"type": "tool_call", "id": "toolu_01", "name": "write-file", "input": {"path": "a.md"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_01", "is_error": false,
             "content": [{"type": "text", "text": "wrote 1 byte"}]},
            {"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": "iVBO"}]}
          ],
          "tools": [{"name": "write-file", "description": "d", "input_schema": {"type": "object"}}],
          "prompt_cache_key": "hello:ctx:tsk", "stream": true, "continuation_id": "resp_1",
          "something_new": {"a": 1}
        }"#;
        let r = Request::parse(Some(data)).unwrap();
        assert_eq!(r.model, "claude-sonnet-4-5");
        assert_eq!(r.max_tokens, Some(8192));
        assert_eq!(r.system.as_deref(), Some("sys"));
        assert_eq!(r.messages.len(), 4);
        assert_eq!(
            r.messages[1].content()[0],
            Block::Thinking {
                thinking: "hm".into(),
                signature: Some("sig".into())
            }
        );
        assert_eq!(
            r.messages[1].content()[2],
            Block::ToolCall {
                id: "toolu_01".into(),
                name: "write-file".into(),
                input: json!({"path": "a.md"})
            }
        );
        assert!(matches!(
            &r.messages[2],
            Message::Tool { tool_call_id, is_error: false, .. } if tool_call_id == "toolu_01"
        ));
        assert_eq!(r.tools[0].description.as_deref(), Some("d"));
        assert_eq!(r.prompt_cache_key.as_deref(), Some("hello:ctx:tsk"));
        assert!(r.stream);
        assert_eq!(r.continuation_id.as_deref(), Some("resp_1"));
    }

    #[test]
    fn request_defaults_and_nulls() {
        let r = Request::parse(Some(
            r#"{"messages": [{"role": "user", "content": "hi"}], "tools": null, "system": null,
                "stream": null}"#,
        ))
        .unwrap();
        assert_eq!(r.model, "");
        assert_eq!(r.system, None);
        assert!(r.tools.is_empty());
        assert!(!r.stream);
        assert_eq!(r.messages[0].content(), &[Block::text("hi")]);

        let r = Request::parse(Some(
            r#"{"messages": [], "tools": [{"name": "t", "input_schema": null}]}"#,
        ))
        .unwrap();
        assert_eq!(r.tools[0].input_schema, json!({"type": "object"}));
    }

    /// A tool's schema is written as both `input_schema` and `parameters`, and read from
    /// either: drivers made for another runtime find it under the name they know.
    #[test]
    fn a_tool_schema_travels_under_both_names() {
        let spec = ToolSpec {
            name: "t".into(),
            description: None,
            input_schema: json!({"type": "object", "required": ["path"]}),
        };
        let written = serde_json::to_value(&spec).unwrap();
        assert_eq!(written["input_schema"], written["parameters"]);
        assert_eq!(written["parameters"]["required"][0], "path");
        assert!(written.get("description").is_none());
        let read: ToolSpec =
            serde_json::from_value(json!({"name": "t", "parameters": {"type": "string"}})).unwrap();
        assert_eq!(read.input_schema, json!({"type": "string"}));
        let both: ToolSpec = serde_json::from_value(
            json!({"name": "t", "input_schema": {"type": "object"}, "parameters": {"type": "string"}}),
        )
        .unwrap();
        assert_eq!(both.input_schema, json!({"type": "object"}));
        assert_eq!(serde_json::from_value::<ToolSpec>(written).unwrap(), spec);
    }

    #[test]
    fn a_bad_request_is_an_error_saying_what_is_wrong() {
        for data in [
            None,
            Some(" "),
            Some("{"),
            Some(r#"{"messages": [{"role": "robot"}]}"#),
        ] {
            let e = Request::parse(data).unwrap_err();
            assert!(
                e.starts_with("missing input") || e.starts_with("invalid request"),
                "{data:?}: {e}"
            );
        }
    }

    #[test]
    fn usage_omits_absent_members() {
        let usage = Usage {
            input_tokens: Some(10),
            output_tokens: Some(0),
            ..Usage::default()
        };
        assert_eq!(
            serde_json::to_value(usage).unwrap(),
            json!({"input_tokens": 10, "output_tokens": 0})
        );
        assert_eq!(Usage::default().reported(), None);
        let merged = usage.merge(Usage {
            output_tokens: Some(7),
            cached_tokens: Some(3),
            ..Usage::default()
        });
        assert_eq!(
            merged,
            Usage {
                input_tokens: Some(10),
                output_tokens: Some(7),
                cached_tokens: Some(3),
                cache_write_tokens: None
            }
        );
    }

    /// The stop reasons are written and read as the protocol's words, and `as_str` agrees.
    #[test]
    fn stop_reasons_are_the_protocols_words() {
        for (reason, word) in [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::ToolCall, "tool_call"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::Error, "error"),
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), json!(word));
            assert_eq!(
                serde_json::from_value::<StopReason>(json!(word)).unwrap(),
                reason
            );
            assert_eq!(reason.as_str(), word);
        }
        assert!(serde_json::from_value::<StopReason>(json!("stop")).is_err());
    }
}
