//! What the three providers share: a reply with its ids settled, refusals and error bodies,
//! SSE framing, and how text and arguments are cut into deltas.

use serde_json::{Value, json};

use super::Provider;
use super::script::{HttpFault, Stop, Usage};

/// A reply about to be rendered: every id settled, the stop reason decided.
pub(crate) struct Resolved {
    /// Anthropic message id, Chat completion id, Responses response id.
    pub id: String,
    /// The request's `model`, echoed.
    pub model: String,
    /// Unix seconds.
    pub created: u64,
    pub thinking: Option<ResolvedThinking>,
    pub text: Option<String>,
    /// The Responses `message` item id.
    pub message_item_id: String,
    pub calls: Vec<ResolvedCall>,
    pub stop: Stop,
    pub usage: UsageOut,
}

pub(crate) struct ResolvedThinking {
    pub text: String,
    pub signature: String,
    /// The Responses `reasoning` item id.
    pub item_id: String,
}

pub(crate) struct ResolvedCall {
    /// Anthropic `tool_use.id`, Chat `tool_calls[].id`, Responses `call_id`.
    pub id: String,
    /// The Responses `function_call` item id.
    pub item_id: String,
    pub name: String,
    /// Responses `function_call.namespace`.
    pub namespace: Option<String>,
    pub input: Value,
    /// `input` as compact JSON text.
    pub arguments: String,
}

pub(crate) enum UsageOut {
    Shaped(Usage),
    Raw(Value),
}

/// One server-sent event.
pub(crate) struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// `event: NAME` + `data: JSON`.
    pub fn named(name: &str, data: &Value) -> SseEvent {
        SseEvent {
            event: Some(name.to_string()),
            data: data.to_string(),
        }
    }

    /// `data: JSON` alone.
    pub fn data(data: &Value) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_string(),
        }
    }

    /// `data: TEXT` alone, verbatim.
    pub fn raw(text: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: text.to_string(),
        }
    }

    /// The event as it goes on the wire, blank line included.
    pub fn to_wire(&self) -> String {
        match &self.event {
            Some(name) => format!("event: {name}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// A request refused the way the provider refuses it.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub status: u16,
    pub error_type: Option<String>,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

impl Refusal {
    /// `400` with this message.
    pub fn bad(message: impl Into<String>) -> Refusal {
        Refusal {
            status: 400,
            error_type: None,
            message: message.into(),
            param: None,
            code: None,
        }
    }

    pub fn with_status(mut self, status: u16) -> Refusal {
        self.status = status;
        self
    }

    pub fn param(mut self, param: impl Into<String>) -> Refusal {
        self.param = Some(param.into());
        self
    }

    pub fn code(mut self, code: impl Into<String>) -> Refusal {
        self.code = Some(code.into());
        self
    }

    pub fn error_type(mut self, error_type: impl Into<String>) -> Refusal {
        self.error_type = Some(error_type.into());
        self
    }
}

/// Anthropic's error `type` for an HTTP status.
pub(crate) fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

fn anthropic_message(status: u16) -> &'static str {
    match status {
        401 => "invalid x-api-key",
        403 => "Your API key does not have permission to use the specified resource.",
        404 => "Not found",
        413 => "Request exceeds the maximum allowed number of bytes.",
        429 => "Number of request tokens has exceeded your per-minute rate limit",
        529 => "Overloaded",
        500..=599 => "Internal server error",
        _ => "Invalid request",
    }
}

fn openai_error_type(status: u16) -> &'static str {
    match status {
        429 => "requests",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

fn openai_message(status: u16) -> &'static str {
    match status {
        401 => "Incorrect API key provided.",
        403 => "You are not allowed to sample from this model",
        404 => "The model does not exist or you do not have access to it.",
        429 => "Rate limit reached for requests. Please try again in 1s.",
        503 => "The engine is currently overloaded, please try again later.",
        500..=599 => "The server had an error while processing your request. Sorry about that!",
        _ => "Invalid request",
    }
}

fn openai_code(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("invalid_api_key"),
        404 => Some("model_not_found"),
        429 => Some("rate_limit_exceeded"),
        _ => None,
    }
}

/// The provider's error body for a refusal. An unset `type` takes the provider's type for the
/// status; `message`, `param` and `code` are rendered as they are.
pub(crate) fn error_body(provider: Provider, refusal: &Refusal, request_id: &str) -> Value {
    match provider {
        Provider::Anthropic => json!({
            "type": "error",
            "error": {
                "type": refusal.error_type.as_deref().unwrap_or(anthropic_error_type(refusal.status)),
                "message": refusal.message,
            },
            "request_id": request_id,
        }),
        _ => json!({
            "error": {
                "message": refusal.message,
                "type": refusal.error_type.as_deref().unwrap_or(openai_error_type(refusal.status)),
                "param": refusal.param,
                "code": refusal.code,
            }
        }),
    }
}

/// A scripted HTTP error as the provider would send it: unset members take the provider's
/// usual values for the status.
pub(crate) fn fault_refusal(provider: Provider, fault: &HttpFault) -> Refusal {
    let status = fault.status;
    let anthropic = provider == Provider::Anthropic;
    let default_message = if anthropic {
        anthropic_message(status)
    } else {
        openai_message(status)
    };
    Refusal {
        status,
        error_type: fault.error_type.clone(),
        message: fault
            .message
            .clone()
            .unwrap_or_else(|| default_message.to_string()),
        param: None,
        code: if anthropic {
            None
        } else {
            fault
                .code
                .clone()
                .or(openai_code(status).map(str::to_string))
        },
    }
}

/// Text cut into deltas of about two words each; the pieces join back to the text.
pub(crate) fn split_text(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut count = 0;
    for word in words {
        current.push_str(word);
        if !word.trim().is_empty() {
            count += 1;
        }
        if count == 2 {
            pieces.push(std::mem::take(&mut current));
            count = 0;
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    if pieces.is_empty() {
        pieces.push(String::new());
    }
    pieces
}

/// JSON text cut into (at most) four pieces at character boundaries, so that no piece is
/// valid JSON on its own when the whole is longer than a few characters.
pub(crate) fn split_json(json: &str) -> Vec<String> {
    let chars: Vec<char> = json.chars().collect();
    if chars.len() < 4 {
        return vec![json.to_string()];
    }
    let size = chars.len().div_ceil(4);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Unix seconds now.
pub(crate) fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A JSON value's type as OpenAI's errors name it.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where an Anthropic Messages or Chat Completions request stands, for the script's
/// conversations: the text of its first `user` message ([`content_text`]), and how many
/// `assistant` messages it holds.
pub(crate) fn conversation_position(body: &Value) -> (Option<String>, usize) {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let has_role = |m: &Value, r: &str| m.get("role").and_then(Value::as_str) == Some(r);
    let first_user = messages
        .iter()
        .find(|m| has_role(m, "user"))
        .map(|m| content_text(m.get("content")));
    let assistants = messages.iter().filter(|m| has_role(m, "assistant")).count();
    (first_user, assistants)
}

/// A message's text: its content string, or the `text` of its blocks (parts) joined with
/// newlines; blocks without text (a tool result, an image) add nothing.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_pieces_join_back() {
        for text in ["", "one", "Writing the note now.", "a  b\nc d e "] {
            assert_eq!(split_text(text).concat(), text);
        }
        assert_eq!(split_text("a b c d e").len(), 3);
    }

    #[test]
    fn json_pieces_join_back_and_are_several() {
        let json = r#"{"path":"a.md","content":"hi"}"#;
        let pieces = split_json(json);
        assert_eq!(pieces.concat(), json);
        assert!(pieces.len() >= 3);
        assert!(
            pieces
                .iter()
                .all(|p| serde_json::from_str::<Value>(p).is_err())
        );
    }
}
