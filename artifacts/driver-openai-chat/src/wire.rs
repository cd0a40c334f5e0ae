//! The neutral format ⇄ the OpenAI Chat Completions API, as pure functions.

use std::collections::BTreeMap;

use murmur_guest::inference::{
    Block, Delta, DriverEnv, InferenceError, Message, Outcome, Provider, Request, Response,
    SseEvent, StopReason, StreamDecoder, ToolSpec, Usage, arguments_to_input, error_fields,
    input_to_arguments, joined_text, parse_json,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The driver config (`MURMUR_ARTIFACT_CONFIG`); `max_retries` is read by the transport.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Config {
    /// Forwarded as `reasoning_effort`.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
}

/// The Chat Completions wire format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenAiChat {
    /// The driver config.
    pub config: Config,
}

impl OpenAiChat {
    /// The provider of the config in `env`.
    pub fn from_env(env: &DriverEnv) -> Result<OpenAiChat, InferenceError> {
        Ok(OpenAiChat {
            config: env.config()?,
        })
    }
}

impl Provider for OpenAiChat {
    type Stream = ChunkStream;

    fn path(&self) -> &str {
        "/v1/chat/completions"
    }

    fn request_body(&self, request: &Request) -> Result<Value, InferenceError> {
        Ok(request_body(request, &self.config))
    }

    fn messages_key(&self) -> Option<&str> {
        Some("messages")
    }

    fn render_messages(&self, neutral: &[Message]) -> Vec<Value> {
        messages(neutral)
    }

    fn parse_response(&self, body: &[u8]) -> Result<Outcome, InferenceError> {
        parse_response(&parse_json(body)?).map(Outcome::new)
    }

    fn stream_decoder(&self) -> ChunkStream {
        ChunkStream::default()
    }
}

/// The Chat Completions body for `request`.
pub fn request_body(request: &Request, config: &Config) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let mut all = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        all.push(json!({"role": "system", "content": system}));
    }
    all.extend(messages(&request.messages));
    body.insert("messages".into(), Value::Array(all));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_completion_tokens".into(), json!(max));
    }
    if let Some(key) = &request.prompt_cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(effort) = &config.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(spec.name));
    if let Some(description) = &spec.description {
        function.insert("description".into(), json!(description));
    }
    function.insert("parameters".into(), spec.input_schema.clone());
    json!({"type": "function", "function": function})
}

fn image_part(media_type: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}})
}

/// The Chat Completions `messages` (without the system message): thinking blocks are dropped
/// (Chat has no field for them), and so is a message left empty. Chat tool messages carry
/// text only, so images a run of tool results returned follow that run in a `user` message.
pub fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    // Images of the current run of tool messages, sent once the run ends.
    let mut tool_images: Vec<Value> = Vec::new();
    for message in messages {
        if !matches!(message, Message::Tool { .. }) && !tool_images.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut tool_images)}));
        }
        match message {
            Message::User { content } => {
                if let Some(content) = user_content(content) {
                    out.push(json!({"role": "user", "content": content}));
                }
            }
            Message::Assistant { content } => {
                if let Some(message) = assistant_message(content) {
                    out.push(message);
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_call_id,
                    "content": joined_text(content, "\n"),
                }));
                let images: Vec<Value> = content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Image { media_type, data } => Some(image_part(media_type, data)),
                        _ => None,
                    })
                    .collect();
                if !images.is_empty() {
                    tool_images.push(json!({
                        "type": "text",
                        "text": format!("Images returned by tool call {tool_call_id}:"),
                    }));
                    tool_images.extend(images);
                }
            }
        }
    }
    if !tool_images.is_empty() {
        out.push(json!({"role": "user", "content": tool_images}));
    }
    out
}

/// A user message's `content`: a string for a single text block, else content parts.
fn user_content(blocks: &[Block]) -> Option<Value> {
    let parts: Vec<&Block> = blocks
        .iter()
        .filter(|b| match b {
            Block::Text { text } => !text.is_empty(),
            Block::Image { .. } => true,
            Block::ToolCall { .. } | Block::Thinking { .. } => false,
        })
        .collect();
    match parts.as_slice() {
        [] => None,
        [Block::Text { text }] => Some(json!(text)),
        parts => Some(Value::Array(
            parts
                .iter()
                .map(|b| match b {
                    Block::Image { media_type, data } => image_part(media_type, data),
                    Block::Text { text } => json!({"type": "text", "text": text}),
                    _ => unreachable!("filtered above"),
                })
                .collect(),
        )),
    }
}

fn assistant_message(blocks: &[Block]) -> Option<Value> {
    let text = blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let calls: Vec<Value> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall { id, name, input } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input_to_arguments(input)},
            })),
            _ => None,
        })
        .collect();
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    if !text.is_empty() {
        message.insert("content".into(), json!(text));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

/// The neutral stop reason: `length` is `max_tokens`; tool calls present (or
/// `tool_calls`) is `tool_call`; anything else (`stop`, `content_filter`) is `end_turn`.
pub fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish_reason {
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls" | "function_call") => StopReason::ToolCall,
        _ if has_tool_calls => StopReason::ToolCall,
        _ => StopReason::EndTurn,
    }
}

/// The neutral usage of a Chat Completions `usage` object (members it lacks stay absent).
pub fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: usage["prompt_tokens"].as_u64(),
        output_tokens: usage["completion_tokens"].as_u64(),
        cached_tokens: usage["prompt_tokens_details"]["cached_tokens"].as_u64(),
        cache_write_tokens: None,
    }
}

fn invalid(what: &str) -> InferenceError {
    InferenceError::invalid_response(format!("unexpected Chat Completions answer: {what}"))
}

/// An `error` member of a 200 answer or a stream chunk, as an error without status.
fn embedded_error(value: &Value) -> Option<InferenceError> {
    value.get("error").filter(|e| !e.is_null())?;
    let (kind, message) = error_fields(value)?;
    Some(InferenceError {
        status: None,
        kind: kind.or_else(|| Some("error".to_string())),
        message: message.unwrap_or_else(|| value["error"].to_string()),
    })
}

/// The neutral response of a (non-streaming) Chat Completions answer (its first choice).
pub fn parse_response(answer: &Value) -> Result<Response, InferenceError> {
    if let Some(error) = embedded_error(answer) {
        return Err(error);
    }
    let choice = answer["choices"]
        .get(0)
        .ok_or_else(|| invalid("no `choices`"))?;
    let message = &choice["message"];
    if !message.is_object() {
        return Err(invalid("the choice has no `message`"));
    }
    let mut content = Vec::new();
    if let Some(reasoning) = message["reasoning_content"]
        .as_str()
        .filter(|r| !r.is_empty())
    {
        content.push(Block::Thinking {
            thinking: reasoning.to_string(),
            signature: None,
        });
    }
    for key in ["content", "refusal"] {
        if let Some(text) = message[key].as_str().filter(|t| !t.is_empty()) {
            content.push(Block::text(text));
        }
    }
    let mut calls = 0;
    if let Some(tool_calls) = message["tool_calls"].as_array() {
        for call in tool_calls {
            let id = call["id"]
                .as_str()
                .ok_or_else(|| invalid("a tool call without `id`"))?;
            let name = call["function"]["name"]
                .as_str()
                .ok_or_else(|| invalid("a tool call without `function.name`"))?;
            let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
            content.push(Block::ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                input: arguments_to_input(arguments),
            });
            calls += 1;
        }
    }
    Ok(Response {
        stop_reason: stop_reason(choice["finish_reason"].as_str(), calls > 0),
        content,
        usage: usage(&answer["usage"]).reported(),
    })
}

/// A tool call being streamed.
#[derive(Debug, Clone, Default, PartialEq)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes a streamed Chat Completions answer: `chat.completion.chunk` events, then
/// `[DONE]`.
#[derive(Debug, Default)]
pub struct ChunkStream {
    reasoning: String,
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl StreamDecoder for ChunkStream {
    fn on_event(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<(), InferenceError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&event.data).map_err(|e| {
            InferenceError::invalid_response(format!("a stream chunk is not JSON: {e}"))
        })?;
        if let Some(error) = embedded_error(&chunk) {
            return Err(error);
        }
        if chunk["usage"].is_object() {
            self.usage = self.usage.merge(usage(&chunk["usage"]));
        }
        let Some(choices) = chunk["choices"].as_array() else {
            return Ok(());
        };
        for choice in choices {
            if choice["index"].as_u64().unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            if let Some(piece) = delta["reasoning_content"].as_str() {
                sink(Delta::Thinking(piece));
                self.reasoning.push_str(piece);
            }
            for key in ["content", "refusal"] {
                if let Some(piece) = delta[key].as_str() {
                    sink(Delta::Text(piece));
                    self.text.push_str(piece);
                }
            }
            if let Some(calls) = delta["tool_calls"].as_array() {
                for (position, call) in calls.iter().enumerate() {
                    let index = call["index"].as_u64().unwrap_or(position as u64);
                    let partial = self.calls.entry(index).or_default();
                    if let Some(id) = call["id"].as_str() {
                        partial.id = id.to_string();
                    }
                    if let Some(name) = call["function"]["name"].as_str() {
                        partial.name.push_str(name);
                    }
                    if let Some(arguments) = call["function"]["arguments"].as_str() {
                        partial.arguments.push_str(arguments);
                    }
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_string());
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Outcome, InferenceError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(InferenceError::stream(
                "the stream ended before a `finish_reason` or `[DONE]`",
            ));
        }
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(Block::Thinking {
                thinking: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let calls = self.calls.len();
        for call in self.calls.into_values() {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(invalid("a streamed tool call without id or name"));
            }
            content.push(Block::ToolCall {
                id: call.id,
                name: call.name,
                input: arguments_to_input(&call.arguments),
            });
        }
        Ok(Outcome::new(Response {
            stop_reason: stop_reason(self.finish_reason.as_deref(), calls > 0),
            content,
            usage: self.usage.reported(),
        }))
    }
}

#[cfg(test)]
mod tests;
