//! The request a driver receives in `tool-input.data` (docs/driver-protocol.md).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::inference::neutral::Message;

/// One tool as the model is offered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// The neutral inference request.
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
