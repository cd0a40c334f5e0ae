//! A driver's side of the neutral inference format (`docs/driver-protocol.md`). The wire types
//! themselves ([`Request`], [`Message`], [`Block`], [`Response`], ...) are `murmur_protocol`'s,
//! the same the runtime writes and reads; this module adds what only a driver does: turning a
//! response or a failure into its tool result.

use serde::{Deserialize, Serialize};
use serde_json::json;

pub use murmur_protocol::inference::{
    Block, Message, Request, Response, StopReason, ToolSpec, Usage, joined_text,
};

use crate::tool::{Status, ToolResult};

/// Parses the neutral request from `tool-input.data`; a missing or unreadable request is an
/// `invalid_request` error.
pub fn parse_request(data: Option<&str>) -> Result<Request, InferenceError> {
    Request::parse(data).map_err(InferenceError::invalid_request)
}

/// What one successful call produced: the response, and the continuation id when the driver
/// holds the conversation provider-side.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The neutral response.
    pub response: Response,
    /// Returned in the result's `continuation_id` metadata when `Some` and non-empty.
    pub continuation_id: Option<String>,
}

impl Outcome {
    /// An outcome without continuation.
    pub fn new(response: Response) -> Outcome {
        Outcome {
            response,
            continuation_id: None,
        }
    }

    /// The `passed` tool result: the response as JSON, a summary line, and the continuation
    /// id when there is one.
    pub fn into_result(self) -> ToolResult {
        let summary = summary_of(&self.response);
        let mut result = ToolResult::passed_json(&self.response);
        if result.status == Status::Passed {
            result = result.summary(summary);
        }
        match self.continuation_id {
            Some(id) if !id.is_empty() => result.continuation_id(id),
            _ => result,
        }
    }
}

fn summary_of(response: &Response) -> String {
    let (mut text, mut calls, mut thinking, mut images) = (0, 0, 0, 0);
    for block in &response.content {
        match block {
            Block::Text { .. } => text += 1,
            Block::ToolCall { .. } => calls += 1,
            Block::Thinking { .. } => thinking += 1,
            Block::Image { .. } => images += 1,
        }
    }
    let mut parts = Vec::new();
    for (n, one, many) in [
        (text, "text block", "text blocks"),
        (thinking, "thinking block", "thinking blocks"),
        (calls, "tool call", "tool calls"),
        (images, "image", "images"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    let mut summary = response.stop_reason.to_string();
    if !parts.is_empty() {
        summary.push_str(": ");
        summary.push_str(&parts.join(", "));
    }
    if let Some(usage) = &response.usage
        && let (Some(i), Some(o)) = (usage.input_tokens, usage.output_tokens)
    {
        summary.push_str(&format!(" ({i} in, {o} out)"));
    }
    summary
}

/// A failed call, in the protocol's error shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceError {
    /// The provider's HTTP status; absent when none was involved (a cut stream, malformed
    /// JSON, a connection that never got a response, a bad request from the runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's error type (`rate_limit_error`), or the driver's own for errors without
    /// a provider (`stream_error`, `invalid_response`, `connection_error`, `invalid_request`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// What went wrong, as the provider said it.
    pub message: String,
}

impl InferenceError {
    /// An error the provider reported with an HTTP status.
    pub fn provider(status: u16, kind: Option<String>, message: impl Into<String>) -> Self {
        InferenceError {
            status: Some(status),
            kind,
            message: message.into(),
        }
    }

    /// An error without an HTTP status, of the driver's `kind`.
    pub fn other(kind: &str, message: impl Into<String>) -> Self {
        InferenceError {
            status: None,
            kind: Some(kind.to_string()),
            message: message.into(),
        }
    }

    /// The stream ended early or reported a failure mid-way.
    pub fn stream(message: impl Into<String>) -> Self {
        Self::other("stream_error", message)
    }

    /// The provider's body is not the JSON expected.
    pub fn invalid_response(message: impl Into<String>) -> Self {
        Self::other("invalid_response", message)
    }

    /// No response arrived (connection refused, DNS, timeout, request denied).
    pub fn connection(message: impl Into<String>) -> Self {
        Self::other("connection_error", message)
    }

    /// The neutral request (or the driver's environment or config) is not usable.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::other("invalid_request", message)
    }

    /// One line naming the status, type and message: `429 rate_limit_error: …`.
    pub fn summary(&self) -> String {
        let message = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let head = match (self.status, self.kind.as_deref()) {
            (Some(status), Some(kind)) => format!("{status} {kind}"),
            (Some(status), None) => status.to_string(),
            (None, Some(kind)) => kind.to_string(),
            (None, None) => "error".to_string(),
        };
        format!("{head}: {message}")
    }

    /// The `error` tool result: the summary line and
    /// `{"stop_reason": "error", "error": {status, type, message}}`.
    pub fn into_result(self) -> ToolResult {
        let data = json!({"stop_reason": "error", "error": &self});
        let mut result = ToolResult::new(Status::Error).summary(self.summary());
        result.data = Some(data.to_string());
        result
    }
}

impl std::fmt::Display for InferenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary())
    }
}

impl std::error::Error for InferenceError {}

/// A delta to stream while the response is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    /// Response text (`emit-chunk`).
    Text(&'a str),
    /// Thinking text (`emit-thinking-chunk`).
    Thinking(&'a str),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_bad_request_is_an_invalid_request_error() {
        for data in [
            None,
            Some(" "),
            Some("{"),
            Some(r#"{"messages": [{"role": "robot"}]}"#),
        ] {
            let e = parse_request(data).unwrap_err();
            assert_eq!(e.kind.as_deref(), Some("invalid_request"), "{data:?}");
            assert_eq!(e.status, None);
        }
    }

    #[test]
    fn outcome_result_carries_response_and_continuation() {
        let response = Response {
            stop_reason: StopReason::ToolCall,
            content: vec![
                Block::text("hi"),
                Block::ToolCall {
                    id: "c1".into(),
                    name: "t".into(),
                    input: json!({}),
                },
            ],
            usage: Some(Usage {
                input_tokens: Some(5),
                output_tokens: Some(2),
                ..Usage::default()
            }),
        };
        let r = Outcome::new(response.clone()).into_result();
        assert_eq!(r.status, Status::Passed);
        assert_eq!(
            r.summary.as_deref(),
            Some("tool_call: 1 text block, 1 tool call (5 in, 2 out)")
        );
        let data: Value = serde_json::from_str(r.data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"stop_reason": "tool_call",
                   "content": [{"type": "text", "text": "hi"},
                               {"type": "tool_call", "id": "c1", "name": "t", "input": {}}],
                   "usage": {"input_tokens": 5, "output_tokens": 2}})
        );
        assert!(r.metadata.is_empty());

        let r = Outcome {
            response: response.clone(),
            continuation_id: Some("resp_9".into()),
        }
        .into_result();
        assert_eq!(r.metadata_value("continuation_id"), Some("resp_9"));
        let r = Outcome {
            response,
            continuation_id: Some(String::new()),
        }
        .into_result();
        assert!(r.metadata.is_empty());
    }

    #[test]
    fn error_result_shape() {
        let e = InferenceError::provider(
            429,
            Some("rate_limit_error".into()),
            "Number of request tokens has exceeded\nyour limit",
        );
        let r = e.into_result();
        assert_eq!(r.status, Status::Error);
        assert_eq!(
            r.summary.as_deref(),
            Some("429 rate_limit_error: Number of request tokens has exceeded your limit")
        );
        let data: Value = serde_json::from_str(r.data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"stop_reason": "error", "error": {"status": 429, "type": "rate_limit_error",
                   "message": "Number of request tokens has exceeded\nyour limit"}})
        );

        let r = InferenceError::stream("the stream ended mid-event").into_result();
        let data: Value = serde_json::from_str(r.data.as_deref().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({"stop_reason": "error", "error": {"type": "stream_error",
                   "message": "the stream ended mid-event"}})
        );
        assert_eq!(
            r.summary.as_deref(),
            Some("stream_error: the stream ended mid-event")
        );
    }
}
