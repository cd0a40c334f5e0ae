//! The request a driver receives in `tool-input.data` (docs/driver-protocol.md).

use std::borrow::Cow;

use serde::Serialize;

use crate::inference::neutral::Message;
use crate::tool::ToolInput;

pub use murmur_protocol::inference::ToolSpec;

/// The neutral inference request as the runtime writes it: `murmur_protocol`'s `Request`, field
/// for field, borrowed from the session instead of copied (a turn does not clone the
/// conversation). The tests pin that it reads back as that `Request` unchanged.
#[derive(Debug, Clone, Serialize)]
pub struct DriverRequest<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<&'a str>,
    /// The wire view: no envelope keys.
    pub messages: Vec<Cow<'a, Message>>,
    pub tools: &'a [ToolSpec],
    pub prompt_cache_key: &'a str,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation_id: Option<&'a str>,
}

impl DriverRequest<'_> {
    /// The request as the driver's `tool-input`.
    pub fn to_input(&self) -> serde_json::Result<ToolInput> {
        Ok(ToolInput {
            data: Some(serde_json::to_string(self)?),
            log_path: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::neutral::Block;
    use serde_json::json;

    /// What the runtime writes is what a driver reads: the borrowed request, read back as the
    /// protocol's `Request` and written again, is the same JSON.
    #[test]
    fn the_written_request_reads_back_as_the_protocols_request_unchanged() {
        let messages = [
            Message::user_text("Write a note."),
            Message::Assistant {
                content: vec![
                    Block::Thinking {
                        thinking: "hm".into(),
                        signature: Some("sig".into()),
                    },
                    Block::ToolCall {
                        id: "toolu_1".into(),
                        name: "write-file".into(),
                        input: json!({"path": "a.md"}),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "toolu_1".into(),
                is_error: false,
                content: vec![Block::Image {
                    media_type: "image/png".into(),
                    data: "iVBO".into(),
                }],
            },
        ];
        let tools = [ToolSpec {
            name: "write-file".into(),
            description: Some(String::new()),
            input_schema: json!({"type": "object", "required": ["path"]}),
        }];
        for (system, continuation_id) in [(Some("sys"), Some("resp_1")), (None, None)] {
            let written = DriverRequest {
                model: "claude-sonnet-4-5",
                max_tokens: 8192,
                system,
                messages: messages.iter().map(Cow::Borrowed).collect(),
                tools: &tools,
                prompt_cache_key: "hello:ctx:tsk",
                stream: true,
                continuation_id,
            };
            let written = serde_json::to_value(&written).unwrap();
            let read: murmur_protocol::inference::Request =
                serde_json::from_value(written.clone()).unwrap();
            assert_eq!(read.messages, messages);
            assert_eq!(read.tools, tools);
            assert_eq!(serde_json::to_value(&read).unwrap(), written);
        }
    }
}
