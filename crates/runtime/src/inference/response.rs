//! Reading a driver's answer (`docs/driver-protocol.md`, "Reported token usage").
//!
//! - A `passed` result's `data` must be a JSON object with a known `stop_reason` and a
//!   `content` array of neutral blocks; anything else is a malformed answer.
//! - A `failed`/`error` result is the provider's (or the driver's) failure, with the message
//!   the driver gave. So is a `passed` one whose `stop_reason` is `error` (how drivers written
//!   for another Murmur runtime report a failure). The message is the summary, else `error`
//!   when it is a string, else `error.message`.
//! - `usage` is read member by member: a `usage` that is absent or not an object is no report;
//!   a member that is not a non-negative integer, or one the runtime does not define, is
//!   skipped while its well-formed siblings are kept. An omitted number stays absent, never 0.

use serde_json::Value;

use crate::inference::neutral::Block;
use crate::tool::{ToolOutput, ToolStatus};

pub use murmur_protocol::inference::{StopReason, Usage};

/// A well-formed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub stop_reason: StopReason,
    pub content: Vec<Block>,
    pub usage: Option<Usage>,
    pub continuation_id: Option<String>,
}

/// Why a call produced no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The provider's HTTP status, when one was involved.
    pub status: Option<u16>,
    pub message: String,
}

/// Reads a driver's tool-result.
pub fn read_answer(output: &ToolOutput) -> Result<Answer, Failure> {
    let data: Option<Value> = output
        .output
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok());
    let says_error = data
        .as_ref()
        .and_then(|d| d.get("stop_reason"))
        .and_then(Value::as_str)
        == Some("error");
    if output.result.status != ToolStatus::Passed || says_error {
        let error = data.as_ref().and_then(|d| d.get("error"));
        let status = error
            .and_then(|e| e.get("status"))
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok());
        let message = output
            .result
            .summary
            .clone()
            .or_else(|| {
                error
                    .and_then(|e| e.as_str().or_else(|| e.get("message")?.as_str()))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "the driver reported an error without a message".to_string());
        return Err(Failure { status, message });
    }
    let malformed = |why: &str| Failure {
        status: None,
        message: format!("the driver's answer is malformed: {why}"),
    };
    let Some(data) = data else {
        return Err(malformed("`data` is not JSON"));
    };
    let stop_reason = match data.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_call") => StopReason::ToolCall,
        Some("max_tokens") => StopReason::MaxTokens,
        Some(other) => return Err(malformed(&format!("unknown stop_reason `{other}`"))),
        None => return Err(malformed("no `stop_reason`")),
    };
    let content: Vec<Block> = match data.get("content") {
        Some(content) => serde_json::from_value(content.clone())
            .map_err(|error| malformed(&format!("`content`: {error}")))?,
        None => return Err(malformed("no `content`")),
    };
    if stop_reason == StopReason::ToolCall
        && !content.iter().any(|b| matches!(b, Block::ToolCall { .. }))
    {
        return Err(malformed(
            "stop_reason `tool_call` without a tool_call block",
        ));
    }
    Ok(Answer {
        stop_reason,
        content,
        usage: read_usage(data.get("usage")),
        continuation_id: output.continuation_id.clone(),
    })
}

/// Reads a `usage` member under the degradation rules of `docs/driver-protocol.md`.
pub fn read_usage(usage: Option<&Value>) -> Option<Usage> {
    let usage = usage?.as_object()?;
    let member = |name: &str| usage.get(name).and_then(Value::as_u64);
    Some(Usage {
        input_tokens: member("input_tokens"),
        output_tokens: member("output_tokens"),
        cached_tokens: member("cached_tokens"),
        cache_write_tokens: member("cache_write_tokens"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn passed(data: Value) -> ToolOutput {
        ToolOutput {
            result: crate::tool::ToolResult {
                status: ToolStatus::Passed,
                summary: None,
                data: Some(data.to_string()),
                data_path: None,
                truncated: false,
                metadata: Vec::new(),
            },
            output: Some(data.to_string()),
            state_effect: None,
            resource_id: None,
            continuation_id: None,
        }
    }

    /// A driver written for another Murmur runtime reports a failure as a passed result with
    /// `stop_reason: "error"` and `error` as a string: read as the failure it is.
    #[test]
    fn an_error_stop_reason_is_a_failure_with_its_message() {
        let failure = read_answer(&passed(
            json!({"stop_reason": "error", "error": "upstream 503"}),
        ))
        .unwrap_err();
        assert_eq!(failure.message, "upstream 503");
        let failure = read_answer(&passed(json!({"stop_reason": "error",
            "error": {"status": 429, "message": "slow down"}})))
        .unwrap_err();
        assert_eq!(
            (failure.status, failure.message.as_str()),
            (Some(429), "slow down")
        );
        let failure = read_answer(&passed(json!({"stop_reason": "error"}))).unwrap_err();
        assert!(failure.message.contains("without a message"));
        assert!(read_answer(&passed(json!({"stop_reason": "end_turn", "content": []}))).is_ok());
    }

    #[test]
    fn usage_rows() {
        // No usage: nothing.
        assert_eq!(read_usage(None), None);
        // Not an object: nothing.
        assert_eq!(read_usage(Some(&json!([1, 2]))), None);
        assert_eq!(read_usage(Some(&json!("12"))), None);
        // A member that is not a non-negative integer: nothing for it, siblings kept.
        assert_eq!(
            read_usage(Some(&json!({"input_tokens": -3, "output_tokens": 7,
                                     "cached_tokens": 1.5, "cache_write_tokens": "2"}))),
            Some(Usage {
                output_tokens: Some(7),
                ..Usage::default()
            })
        );
        // A member the runtime does not define: nothing for it.
        assert_eq!(
            read_usage(Some(&json!({"input_tokens": 10, "reasoning_tokens": 4}))),
            Some(Usage {
                input_tokens: Some(10),
                ..Usage::default()
            })
        );
    }

    #[test]
    fn an_absent_member_serializes_as_absent_not_zero() {
        let usage = Usage {
            input_tokens: Some(0),
            ..Usage::default()
        };
        assert_eq!(
            serde_json::to_value(usage).unwrap(),
            json!({"input_tokens": 0})
        );
    }
}
