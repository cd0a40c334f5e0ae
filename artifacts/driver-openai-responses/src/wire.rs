//! The neutral format ⇄ the OpenAI Responses API, as pure functions.

use std::collections::BTreeMap;

use murmur_guest::inference::{
    Block, Delta, DriverEnv, InferenceError, Message, Outcome, Provider, Request, Response,
    SseEvent, StopReason, StreamDecoder, ToolSpec, Usage, arguments_to_input, error_fields,
    input_to_arguments, joined_text, parse_json,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The driver config (`MURMUR_ARTIFACT_CONFIG`); `max_retries` is read by the transport.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Config {
    /// Let the provider store responses (and return their ids as continuation ids).
    #[serde(default = "yes")]
    pub store: bool,
    /// Forwarded as `reasoning`.
    #[serde(default)]
    pub reasoning: Option<Value>,
    /// Forwarded as `include`.
    #[serde(default)]
    pub include: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            store: true,
            reasoning: None,
            include: None,
        }
    }
}

/// The Responses wire format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenAiResponses {
    /// The driver config.
    pub config: Config,
}

impl OpenAiResponses {
    /// The provider of the config in `env`.
    pub fn from_env(env: &DriverEnv) -> Result<OpenAiResponses, InferenceError> {
        Ok(OpenAiResponses {
            config: env.config()?,
        })
    }
}

impl Provider for OpenAiResponses {
    type Stream = EventStream;

    fn path(&self) -> &str {
        "/v1/responses"
    }

    fn request_body(&self, request: &Request) -> Result<Value, InferenceError> {
        Ok(request_body(request, &self.config))
    }

    fn parse_response(&self, body: &[u8]) -> Result<Outcome, InferenceError> {
        outcome(&parse_json(body)?, self.config.store)
    }

    fn stream_decoder(&self) -> EventStream {
        EventStream::new(self.config.store)
    }
}

/// The Responses body for `request`.
pub fn request_body(request: &Request, config: &Config) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input(&request.messages)));
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(key) = &request.prompt_cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    body.insert("store".into(), json!(config.store));
    if let Some(previous) = request
        .continuation_id
        .as_deref()
        .filter(|id| !id.is_empty())
    {
        body.insert("previous_response_id".into(), json!(previous));
    }
    if let Some(reasoning) = &config.reasoning {
        body.insert("reasoning".into(), reasoning.clone());
    }
    if let Some(include) = &config.include {
        body.insert("include".into(), json!(include));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    let mut tool = Map::new();
    tool.insert("type".into(), json!("function"));
    tool.insert("name".into(), json!(spec.name));
    if let Some(description) = &spec.description {
        tool.insert("description".into(), json!(description));
    }
    tool.insert("parameters".into(), spec.input_schema.clone());
    Value::Object(tool)
}

fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// The Responses `input` items of `messages`, in order.
pub fn input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message {
            Message::User { content } => {
                let parts: Vec<Value> = content.iter().filter_map(input_part).collect();
                if !parts.is_empty() {
                    items.push(json!({"type": "message", "role": "user", "content": parts}));
                }
            }
            Message::Assistant { content } => assistant_items(content, &mut items),
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => {
                let has_images = content.iter().any(|b| matches!(b, Block::Image { .. }));
                let output = if has_images {
                    Value::Array(content.iter().filter_map(input_part).collect())
                } else {
                    json!(joined_text(content, "\n"))
                };
                items.push(json!({
                    "type": "function_call_output",
                    "call_id": tool_call_id,
                    "output": output,
                }));
            }
        }
    }
    items
}

fn input_part(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } if !text.is_empty() => {
            Some(json!({"type": "input_text", "text": text}))
        }
        Block::Image { media_type, data } => Some(json!({
            "type": "input_image",
            "image_url": data_url(media_type, data),
        })),
        _ => None,
    }
}

/// An assistant message as items: its text as `output_text` messages, its tool calls as
/// `function_call` items and its thinking (when it carries `encrypted_content`) as
/// `reasoning` items, in the order they came.
fn assistant_items(blocks: &[Block], items: &mut Vec<Value>) {
    let mut text: Vec<Value> = Vec::new();
    let flush = |text: &mut Vec<Value>, items: &mut Vec<Value>| {
        if !text.is_empty() {
            items.push(json!({
                "type": "message",
                "role": "assistant",
                "content": std::mem::take(text),
            }));
        }
    };
    for block in blocks {
        match block {
            Block::Text { text: t } if !t.is_empty() => {
                text.push(json!({"type": "output_text", "text": t}));
            }
            Block::ToolCall { id, name, input } => {
                flush(&mut text, items);
                items.push(json!({
                    "type": "function_call",
                    "call_id": id,
                    "name": name,
                    "arguments": input_to_arguments(input),
                }));
            }
            Block::Thinking {
                thinking,
                signature: Some(encrypted),
            } if !encrypted.is_empty() => {
                flush(&mut text, items);
                let summary: Vec<Value> = if thinking.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "summary_text", "text": thinking})]
                };
                items.push(json!({
                    "type": "reasoning",
                    "summary": summary,
                    "encrypted_content": encrypted,
                }));
            }
            _ => {}
        }
    }
    flush(&mut text, items);
}

/// The neutral usage of a Responses `usage` object (members it lacks stay absent).
pub fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: usage["input_tokens"].as_u64(),
        output_tokens: usage["output_tokens"].as_u64(),
        cached_tokens: usage["input_tokens_details"]["cached_tokens"].as_u64(),
        cache_write_tokens: None,
    }
}

fn invalid(what: &str) -> InferenceError {
    InferenceError::invalid_response(format!("unexpected Responses API answer: {what}"))
}

/// The neutral blocks of one output item (none for items the neutral format has no place for).
pub fn output_blocks(item: &Value) -> Result<Vec<Block>, InferenceError> {
    let string = |v: &Value, what: &str| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| invalid(&format!("{what} is not a string")))
    };
    Ok(match item["type"].as_str() {
        Some("message") => item["content"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|part| match part["type"].as_str() {
                        Some("output_text") => part["text"].as_str(),
                        Some("refusal") => part["refusal"].as_str(),
                        _ => None,
                    })
                    .filter(|t| !t.is_empty())
                    .map(Block::text)
                    .collect()
            })
            .unwrap_or_default(),
        Some("function_call") => vec![Block::ToolCall {
            id: string(&item["call_id"], "a function call's `call_id`")?,
            name: string(&item["name"], "a function call's `name`")?,
            input: arguments_to_input(item["arguments"].as_str().unwrap_or_default()),
        }],
        Some("reasoning") => {
            let summary = item["summary"]
                .as_array()
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n")
                })
                .unwrap_or_default();
            let signature = item["encrypted_content"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            if summary.is_empty() && signature.is_none() {
                Vec::new()
            } else {
                vec![Block::Thinking {
                    thinking: summary,
                    signature,
                }]
            }
        }
        _ => Vec::new(),
    })
}

/// The neutral stop reason of a response: cut at `max_output_tokens` is `max_tokens`; function
/// calls present is `tool_call`; anything else is `end_turn`.
pub fn stop_reason(response: &Value, content: &[Block]) -> StopReason {
    let cut = response["status"] == "incomplete"
        && response["incomplete_details"]["reason"] == "max_output_tokens";
    if cut {
        StopReason::MaxTokens
    } else if content.iter().any(|b| matches!(b, Block::ToolCall { .. })) {
        StopReason::ToolCall
    } else {
        StopReason::EndTurn
    }
}

/// The error of a failed response object (`status: failed`, `error: {code, message}`).
fn failed(response: &Value) -> InferenceError {
    let error = &response["error"];
    InferenceError {
        status: None,
        kind: error["code"]
            .as_str()
            .or(error["type"].as_str())
            .map(str::to_string)
            .or_else(|| Some("response_failed".to_string())),
        message: error["message"]
            .as_str()
            .unwrap_or("the response failed")
            .to_string(),
    }
}

/// The outcome of a Responses `response` object: the neutral response, and its `id` as the
/// continuation id when `store` is on.
pub fn outcome(response: &Value, store: bool) -> Result<Outcome, InferenceError> {
    if response["status"] == "failed" {
        return Err(failed(response));
    }
    if response.get("error").is_some_and(|e| !e.is_null()) && response.get("output").is_none() {
        let (kind, message) = error_fields(response).unwrap_or_default();
        return Err(InferenceError {
            status: None,
            kind: kind.or_else(|| Some("error".to_string())),
            message: message.unwrap_or_else(|| response["error"].to_string()),
        });
    }
    let output = response["output"]
        .as_array()
        .ok_or_else(|| invalid("no `output` array"))?;
    let mut content = Vec::new();
    for item in output {
        content.extend(output_blocks(item)?);
    }
    let continuation_id = if store {
        response["id"].as_str().map(str::to_string)
    } else {
        None
    };
    Ok(Outcome {
        response: Response {
            stop_reason: stop_reason(response, &content),
            content,
            usage: usage(&response["usage"]).reported(),
        },
        continuation_id,
    })
}

/// Decodes a streamed Responses answer: text, reasoning summary and argument deltas as they
/// come, and the final response of `response.completed` (or `response.incomplete`).
#[derive(Debug)]
pub struct EventStream {
    store: bool,
    /// Output items so far, by output index (as added, their arguments grown by the deltas,
    /// then as done): the output when the final response event carries none.
    items: BTreeMap<u64, Value>,
    /// The final response object.
    last: Option<Value>,
}

impl EventStream {
    /// A decoder; `store` says whether the response id is a continuation id.
    pub fn new(store: bool) -> EventStream {
        EventStream {
            store,
            items: BTreeMap::new(),
            last: None,
        }
    }
}

impl StreamDecoder for EventStream {
    fn on_event(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<(), InferenceError> {
        if event.data.trim() == "[DONE]" {
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            InferenceError::invalid_response(format!(
                "a `{}` event's data is not JSON: {e}",
                event.event
            ))
        })?;
        let kind = data["type"].as_str().unwrap_or(&event.event);
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                sink(Delta::Text(data["delta"].as_str().unwrap_or_default()));
            }
            "response.reasoning_summary_text.delta" => {
                sink(Delta::Thinking(data["delta"].as_str().unwrap_or_default()));
            }
            "response.output_item.added" | "response.output_item.done" => {
                if let Some(index) = data["output_index"].as_u64() {
                    self.items.insert(index, data["item"].clone());
                }
            }
            "response.function_call_arguments.delta" => {
                let item = data["output_index"]
                    .as_u64()
                    .and_then(|index| self.items.get_mut(&index));
                if let Some(Value::Object(item)) = item {
                    let piece = data["delta"].as_str().unwrap_or_default();
                    let mut arguments = item
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    arguments.push_str(piece);
                    item.insert("arguments".into(), json!(arguments));
                }
            }
            "response.completed" | "response.incomplete" => {
                self.last = Some(data["response"].clone());
            }
            "response.failed" => return Err(failed(&data["response"])),
            "error" => {
                let (kind, message) = error_fields(&data).unwrap_or_default();
                return Err(InferenceError {
                    status: None,
                    kind: kind.or_else(|| Some("error".to_string())),
                    message: message.unwrap_or_else(|| "the stream reported an error".into()),
                });
            }
            // `response.created`, `response.in_progress`, `…content_part.*`, the `…done`
            // events of text and arguments (the done item carries them whole), and events
            // added later.
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<Outcome, InferenceError> {
        let Some(mut response) = self.last else {
            return Err(InferenceError::stream(
                "the stream ended before `response.completed`",
            ));
        };
        let empty = response["output"].as_array().is_none_or(Vec::is_empty);
        if empty && !self.items.is_empty() {
            response["output"] = Value::Array(self.items.into_values().collect());
        } else if empty {
            response["output"] = json!([]);
        }
        outcome(&response, self.store)
    }
}

#[cfg(test)]
mod tests;
