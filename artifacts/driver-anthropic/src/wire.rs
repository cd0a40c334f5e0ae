//! The neutral format ⇄ the Anthropic Messages API, as pure functions.

use std::collections::BTreeMap;

use murmur_guest::inference::{
    Block, Delta, DriverEnv, InferenceError, Message, Outcome, Provider, Request, Response,
    SseEvent, StopReason, StreamDecoder, ToolSpec, Usage, arguments_to_input, error_fields,
    parse_json,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The `anthropic-version` header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The output cap when neither the request nor the config gives one.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;
/// How a `redacted_thinking` block travels in a neutral thinking block's signature (an
/// Anthropic signature is base64, so it never holds a `:`).
const REDACTED: &str = "redacted_thinking:";

/// The driver config (`MURMUR_ARTIFACT_CONFIG`); `max_retries` is read by the transport.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Config {
    /// Extended thinking: `{budget_tokens: N}`.
    #[serde(default)]
    pub thinking: Option<Thinking>,
    /// Mark prompt cache breakpoints.
    #[serde(default)]
    pub prompt_caching: bool,
    /// The output cap when the request carries none.
    #[serde(default)]
    pub default_max_tokens: Option<u64>,
}

/// The `thinking` config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Thinking {
    /// Tokens the model may spend thinking.
    pub budget_tokens: u64,
}

/// The Anthropic Messages wire format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Anthropic {
    /// The driver config.
    pub config: Config,
}

impl Anthropic {
    /// The provider of the config in `env`.
    pub fn from_env(env: &DriverEnv) -> Result<Anthropic, InferenceError> {
        Ok(Anthropic {
            config: env.config()?,
        })
    }
}

impl Provider for Anthropic {
    type Stream = MessageStream;

    fn path(&self) -> &str {
        "/v1/messages"
    }

    fn headers(&self) -> Vec<(String, String)> {
        vec![(
            "anthropic-version".to_string(),
            ANTHROPIC_VERSION.to_string(),
        )]
    }

    fn request_body(&self, request: &Request) -> Result<Value, InferenceError> {
        Ok(request_body(request, &self.config))
    }

    fn parse_response(&self, body: &[u8]) -> Result<Outcome, InferenceError> {
        parse_response(&parse_json(body)?).map(Outcome::new)
    }

    fn stream_decoder(&self) -> MessageStream {
        MessageStream::default()
    }
}

/// The Messages API body for `request`: only fields the API defines (never
/// `prompt_cache_key`).
pub fn request_body(request: &Request, config: &Config) -> Value {
    let caching = config.prompt_caching;
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let max_tokens = request
        .max_tokens
        .or(config.default_max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        let system = if caching {
            json!([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}])
        } else {
            json!(system)
        };
        body.insert("system".into(), system);
    }
    let mut messages = messages(&request.messages);
    if caching {
        mark_last_block(&mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
        if caching && let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(thinking) = &config.thinking {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": thinking.budget_tokens}),
        );
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    let mut tool = Map::new();
    tool.insert("name".into(), json!(spec.name));
    if let Some(description) = &spec.description {
        tool.insert("description".into(), json!(description));
    }
    tool.insert("input_schema".into(), spec.input_schema.clone());
    Value::Object(tool)
}

/// The Messages API `messages`: `tool` messages become `tool_result` blocks of a `user`
/// message; consecutive messages of one role merge into one message (tool results first);
/// blocks the API cannot take (empty text, thinking without signature) are dropped, and so is
/// a message left with no block.
pub fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks): (&'static str, Vec<Value>) = match message {
            Message::User { content } => ("user", content.iter().filter_map(user_block).collect()),
            Message::Assistant { content } => (
                "assistant",
                content.iter().filter_map(assistant_block).collect(),
            ),
            Message::Tool {
                tool_call_id,
                is_error,
                content,
            } => ("user", vec![tool_result(tool_call_id, *is_error, content)]),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last)) if *last_role == role => last.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Tool results must open the user message that answers the calls.
                blocks.sort_by_key(|b| b["type"] != "tool_result");
            }
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn image_block(media_type: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
}

fn user_block(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } => text_block(text),
        Block::Image { media_type, data } => Some(image_block(media_type, data)),
        Block::ToolCall { .. } | Block::Thinking { .. } => None,
    }
}

fn assistant_block(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } => text_block(text),
        Block::ToolCall { id, name, input } => {
            let input = match input {
                Value::Object(_) => input.clone(),
                _ => json!({}),
            };
            Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            let signature = signature.as_deref().filter(|s| !s.is_empty())?;
            match signature.strip_prefix(REDACTED) {
                Some(data) => Some(json!({"type": "redacted_thinking", "data": data})),
                None => {
                    Some(json!({"type": "thinking", "thinking": thinking, "signature": signature}))
                }
            }
        }
        Block::Image { .. } => None,
    }
}

fn tool_result(tool_call_id: &str, is_error: bool, content: &[Block]) -> Value {
    let mut result = Map::new();
    result.insert("type".into(), json!("tool_result"));
    result.insert("tool_use_id".into(), json!(tool_call_id));
    let content: Vec<Value> = content.iter().filter_map(user_block).collect();
    if !content.is_empty() {
        result.insert("content".into(), Value::Array(content));
    }
    if is_error {
        result.insert("is_error".into(), json!(true));
    }
    Value::Object(result)
}

/// Put a cache breakpoint on the last block of the last message that can carry one.
fn mark_last_block(messages: &mut [Value]) {
    let Some(Value::Array(blocks)) = messages.last_mut().map(|m| &mut m["content"]) else {
        return;
    };
    let cacheable =
        |b: &Value| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"));
    if let Some(Value::Object(block)) = blocks.iter_mut().rev().find(|b| cacheable(b)) {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The neutral stop reason of an Anthropic one.
pub fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("tool_use") => StopReason::ToolCall,
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
        _ => StopReason::EndTurn,
    }
}

/// The neutral usage of an Anthropic `usage` object (members it lacks stay absent).
pub fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: usage["input_tokens"].as_u64(),
        output_tokens: usage["output_tokens"].as_u64(),
        cached_tokens: usage["cache_read_input_tokens"].as_u64(),
        cache_write_tokens: usage["cache_creation_input_tokens"].as_u64(),
    }
}

fn invalid(what: &str) -> InferenceError {
    InferenceError::invalid_response(format!("unexpected Messages API answer: {what}"))
}

/// The neutral response of a (non-streaming) Messages API answer.
pub fn parse_response(message: &Value) -> Result<Response, InferenceError> {
    if message["type"] == "error" {
        let (kind, text) = error_fields(message).unwrap_or_default();
        return Err(InferenceError::other(
            kind.as_deref().unwrap_or("error"),
            text.unwrap_or_default(),
        ));
    }
    let blocks = message["content"]
        .as_array()
        .ok_or_else(|| invalid("no `content` array"))?;
    let mut content = Vec::new();
    for block in blocks {
        if let Some(block) = response_block(block)? {
            content.push(block);
        }
    }
    Ok(Response {
        stop_reason: stop_reason(message["stop_reason"].as_str()),
        content,
        usage: usage(&message["usage"]).reported(),
    })
}

fn string(value: &Value, what: &str) -> Result<String, InferenceError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| invalid(&format!("{what} is not a string")))
}

fn response_block(block: &Value) -> Result<Option<Block>, InferenceError> {
    Ok(Some(match block["type"].as_str() {
        Some("text") => Block::Text {
            text: string(&block["text"], "a text block's `text`")?,
        },
        Some("tool_use") => Block::ToolCall {
            id: string(&block["id"], "a tool_use block's `id`")?,
            name: string(&block["name"], "a tool_use block's `name`")?,
            input: match &block["input"] {
                Value::Null => json!({}),
                input => input.clone(),
            },
        },
        Some("thinking") => Block::Thinking {
            thinking: block["thinking"].as_str().unwrap_or_default().to_string(),
            signature: block["signature"].as_str().map(str::to_string),
        },
        Some("redacted_thinking") => Block::Thinking {
            thinking: String::new(),
            signature: Some(format!(
                "{REDACTED}{}",
                block["data"].as_str().unwrap_or_default()
            )),
        },
        // Server tools and other blocks the neutral format has no place for.
        _ => return Ok(None),
    }))
}

/// A content block being streamed.
#[derive(Debug, Clone, PartialEq)]
enum Partial {
    Text(String),
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    Other,
}

/// Decodes a streamed Messages API answer (`message_start`, `content_block_*`,
/// `message_delta`, `message_stop`, `ping`, `error`).
#[derive(Debug, Default)]
pub struct MessageStream {
    blocks: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    usage: Usage,
    stopped: bool,
}

impl StreamDecoder for MessageStream {
    fn on_event(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<(), InferenceError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            InferenceError::invalid_response(format!(
                "a `{}` event's data is not JSON: {e}",
                event.event
            ))
        })?;
        let kind = data["type"].as_str().unwrap_or(&event.event);
        match kind {
            "message_start" => {
                self.usage = self.usage.merge(usage(&data["message"]["usage"]));
            }
            "content_block_start" => {
                let index = data["index"]
                    .as_u64()
                    .ok_or_else(|| invalid("a block without index"))?;
                let block = &data["content_block"];
                let partial = match block["type"].as_str() {
                    Some("text") => {
                        let text = block["text"].as_str().unwrap_or_default();
                        sink(Delta::Text(text));
                        Partial::Text(text.to_string())
                    }
                    Some("thinking") => {
                        let thinking = block["thinking"].as_str().unwrap_or_default();
                        sink(Delta::Thinking(thinking));
                        Partial::Thinking {
                            thinking: thinking.to_string(),
                            signature: block["signature"]
                                .as_str()
                                .filter(|s| !s.is_empty())
                                .map(str::to_string),
                        }
                    }
                    Some("redacted_thinking") => {
                        Partial::Redacted(block["data"].as_str().unwrap_or_default().to_string())
                    }
                    Some("tool_use") => Partial::ToolUse {
                        id: string(&block["id"], "a tool_use block's `id`")?,
                        name: string(&block["name"], "a tool_use block's `name`")?,
                        start_input: block["input"].clone(),
                        json: String::new(),
                    },
                    _ => Partial::Other,
                };
                self.blocks.insert(index, partial);
            }
            "content_block_delta" => {
                let index = data["index"]
                    .as_u64()
                    .ok_or_else(|| invalid("a delta without index"))?;
                let delta = &data["delta"];
                let Some(partial) = self.blocks.get_mut(&index) else {
                    return Err(invalid(&format!(
                        "a delta for block {index}, never started"
                    )));
                };
                match (delta["type"].as_str(), partial) {
                    (Some("text_delta"), Partial::Text(text)) => {
                        let piece = delta["text"].as_str().unwrap_or_default();
                        sink(Delta::Text(piece));
                        text.push_str(piece);
                    }
                    (Some("thinking_delta"), Partial::Thinking { thinking, .. }) => {
                        let piece = delta["thinking"].as_str().unwrap_or_default();
                        sink(Delta::Thinking(piece));
                        thinking.push_str(piece);
                    }
                    (Some("signature_delta"), Partial::Thinking { signature, .. }) => {
                        let piece = delta["signature"].as_str().unwrap_or_default();
                        signature.get_or_insert_with(String::new).push_str(piece);
                    }
                    (Some("input_json_delta"), Partial::ToolUse { json, .. }) => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    // Citations and deltas of blocks the neutral format drops.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_string());
                }
                self.usage = self.usage.merge(usage(&data["usage"]));
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let (kind, message) = error_fields(&data).unwrap_or_default();
                return Err(InferenceError {
                    status: None,
                    kind: kind.or_else(|| Some("error".to_string())),
                    message: message.unwrap_or_else(|| "the stream reported an error".into()),
                });
            }
            // `content_block_stop`, `ping`, and events added later.
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<Outcome, InferenceError> {
        if !self.stopped {
            return Err(InferenceError::stream(
                "the stream ended before `message_stop`",
            ));
        }
        let content = self
            .blocks
            .into_values()
            .filter_map(|partial| match partial {
                Partial::Text(text) => Some(Block::Text { text }),
                Partial::Thinking {
                    thinking,
                    signature,
                } => Some(Block::Thinking {
                    thinking,
                    signature,
                }),
                Partial::Redacted(data) => Some(Block::Thinking {
                    thinking: String::new(),
                    signature: Some(format!("{REDACTED}{data}")),
                }),
                Partial::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => Some(Block::ToolCall {
                    id,
                    name,
                    input: if json.trim().is_empty() {
                        match start_input {
                            Value::Null => json!({}),
                            input => input,
                        }
                    } else {
                        arguments_to_input(&json)
                    },
                }),
                Partial::Other => None,
            })
            .collect();
        Ok(Outcome::new(Response {
            stop_reason: stop_reason(self.stop_reason.as_deref()),
            content,
            usage: self.usage.reported(),
        }))
    }
}

#[cfg(test)]
mod tests;
