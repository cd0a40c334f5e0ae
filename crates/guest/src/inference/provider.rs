//! What a driver says about its provider: the pure half of a driver, testable on the host.
//!
//! A driver implements [`Provider`] (how a neutral request becomes the provider's body, how
//! the provider's answer becomes a neutral response) and [`StreamDecoder`] (the same for a
//! stream of server-sent events); `inference::run` (feature `http`) does the rest (environment,
//! HTTP, retries, streaming the deltas to the host).

use serde_json::Value;

use super::sse::{SseEvent, SseParser};
use super::types::{Delta, InferenceError, Message, Outcome, Request};

/// The driver's environment (`docs/driver-protocol.md`, "Where to send").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverEnv {
    /// `MURMUR_INFERENCE_ENDPOINT`, without a trailing slash.
    pub endpoint: Option<String>,
    /// `MURMUR_INFERENCE_MODEL`.
    pub model: Option<String>,
    /// `MURMUR_INFERENCE_DRIVER`.
    pub driver: Option<String>,
    /// `MURMUR_ARTIFACT_CONFIG` parsed, `Null` when unset.
    pub config: Value,
}

impl DriverEnv {
    /// Read the process environment.
    pub fn from_env() -> Result<DriverEnv, InferenceError> {
        DriverEnv::from_vars(|name| std::env::var(name).ok())
    }

    /// Read the environment through `var` (a name to its value).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<DriverEnv, InferenceError> {
        let non_empty = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let config = match non_empty("MURMUR_ARTIFACT_CONFIG") {
            None => Value::Null,
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                InferenceError::invalid_request(format!("MURMUR_ARTIFACT_CONFIG is not JSON: {e}"))
            })?,
        };
        Ok(DriverEnv {
            endpoint: non_empty("MURMUR_INFERENCE_ENDPOINT")
                .map(|e| e.trim().trim_end_matches('/').to_string()),
            model: non_empty("MURMUR_INFERENCE_MODEL"),
            driver: non_empty("MURMUR_INFERENCE_DRIVER"),
            config,
        })
    }

    /// The driver config as `T` (unknown keys are the driver's business: `T` decides).
    /// An unset config reads as `{}`.
    pub fn config<T: serde::de::DeserializeOwned>(&self) -> Result<T, InferenceError> {
        let value = match &self.config {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        serde_json::from_value(value)
            .map_err(|e| InferenceError::invalid_request(format!("invalid driver config: {e}")))
    }

    /// The full URL of `path` at the endpoint.
    pub fn url(&self, path: &str) -> Result<String, InferenceError> {
        let endpoint = self.endpoint.as_deref().ok_or_else(|| {
            InferenceError::invalid_request("MURMUR_INFERENCE_ENDPOINT is not set")
        })?;
        Ok(format!("{endpoint}{path}"))
    }
}

/// A provider's wire format.
pub trait Provider {
    /// The decoder of one streamed response.
    type Stream: StreamDecoder;

    /// The path appended to the endpoint, e.g. `/v1/messages`.
    fn path(&self) -> &str;

    /// Headers the provider requires besides `content-type: application/json` (never a
    /// credential: the host attaches it).
    fn headers(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The provider's request body for `request` (whose `model` is filled in).
    fn request_body(&self, request: &Request) -> Result<Value, InferenceError>;

    /// For a provider whose body lists the conversation as an array of messages, each
    /// rendered on its own ([`Provider::render_messages`]): that array's key in
    /// [`Provider::request_body`]'s object. The driver then holds the conversation in its
    /// instance between calls and is sent only what is new (`docs/driver-protocol.md`,
    /// "A conversation held in the driver"). `None`, the default: every call sends and builds
    /// the whole conversation.
    fn messages_key(&self) -> Option<&str> {
        None
    }

    /// `messages` in the provider's shape, appended after whatever [`Provider::request_body`]
    /// puts at [`Provider::messages_key`] for a request without messages (a system message,
    /// say). Rendering a conversation in two parts, the first ending with an assistant
    /// message, must give what rendering it whole gives.
    fn render_messages(&self, messages: &[Message]) -> Vec<Value> {
        let _ = messages;
        Vec::new()
    }

    /// The outcome of a successful (2xx) non-streaming answer.
    fn parse_response(&self, body: &[u8]) -> Result<Outcome, InferenceError>;

    /// A decoder for a successful (2xx) streaming answer.
    fn stream_decoder(&self) -> Self::Stream;

    /// The error of an unsuccessful answer (any status outside 2xx, after retries).
    fn parse_error(&self, status: u16, body: &[u8]) -> InferenceError {
        provider_error(status, body)
    }
}

/// Decodes one streamed response, event by event.
pub trait StreamDecoder {
    /// Take the next event; report text and thinking deltas to `sink` as they come.
    fn on_event(
        &mut self,
        event: &SseEvent,
        sink: &mut dyn FnMut(Delta<'_>),
    ) -> Result<(), InferenceError>;

    /// The stream ended (between events): the outcome, or an error when the provider's own
    /// end-of-response event never came.
    fn finish(self) -> Result<Outcome, InferenceError>;
}

/// Decode a whole recorded stream, given as the chunks it arrived in (what
/// `inference::run` (feature `http`) does as the chunks arrive).
pub fn decode_stream<D: StreamDecoder>(
    mut decoder: D,
    chunks: &[&[u8]],
    sink: &mut dyn FnMut(Delta<'_>),
) -> Result<Outcome, InferenceError> {
    let mut parser = SseParser::new();
    for chunk in chunks {
        for event in parser.push(chunk) {
            decoder.on_event(&event, sink)?;
        }
    }
    parser
        .finish()
        .map_err(|e| InferenceError::stream(e.to_string()))?;
    decoder.finish()
}

/// Parse a provider body as JSON, as `invalid_response` when it is not.
pub fn parse_json(body: &[u8]) -> Result<Value, InferenceError> {
    serde_json::from_slice(body).map_err(|e| {
        InferenceError::invalid_response(format!("the provider's answer is not JSON: {e}"))
    })
}

/// The error of a non-2xx answer, read the way both Anthropic and OpenAI shape it:
/// `{"error": {"type": …, "message": …}}` (OpenAI's `code` stands in for a missing `type`).
/// A body of another shape gives its first 500 characters as the message; an empty one the
/// status's reason phrase.
pub fn provider_error(status: u16, body: &[u8]) -> InferenceError {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some((kind, message)) = error_fields(&value)
    {
        let message = message.unwrap_or_else(|| fallback_message(status, body));
        return InferenceError::provider(status, kind, message);
    }
    InferenceError::provider(status, None, fallback_message(status, body))
}

/// `type` (or `code`) and `message` of an error object found at `error`, or at the top level.
pub fn error_fields(value: &Value) -> Option<(Option<String>, Option<String>)> {
    let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    match value.get("error") {
        Some(Value::Object(error)) => {
            let kind = string(error.get("type")).or_else(|| string(error.get("code")));
            Some((kind, string(error.get("message"))))
        }
        Some(Value::String(message)) => Some((None, Some(message.clone()))),
        _ => {
            let message = string(value.get("message"))?;
            let kind = string(value.get("type"))
                .filter(|t| t != "error")
                .or_else(|| string(value.get("code")));
            Some((kind, Some(message)))
        }
    }
}

fn fallback_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return reason_phrase(status).to_string();
    }
    let mut cut: String = text.chars().take(500).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// The reason phrase of common statuses.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "HTTP error",
    }
}

/// A tool call's arguments text as the neutral `input`: the JSON it holds, `{}` when empty,
/// and the raw text as a JSON string when it is not valid JSON (so the runtime's schema check
/// tells the model, rather than the turn failing).
pub fn arguments_to_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

/// A neutral tool-call `input` as an arguments string: the inverse of [`arguments_to_input`]
/// (a string input is sent back as it came).
pub fn input_to_arguments(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_string(),
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_reads_the_protocol_variables() {
        let vars = |name: &str| match name {
            "MURMUR_INFERENCE_ENDPOINT" => Some("http://127.0.0.1:4000/".to_string()),
            "MURMUR_INFERENCE_MODEL" => Some("m".to_string()),
            "MURMUR_ARTIFACT_CONFIG" => Some(r#"{"max_retries": 1}"#.to_string()),
            _ => None,
        };
        let env = DriverEnv::from_vars(vars).unwrap();
        assert_eq!(env.endpoint.as_deref(), Some("http://127.0.0.1:4000"));
        assert_eq!(
            env.url("/v1/messages").unwrap(),
            "http://127.0.0.1:4000/v1/messages"
        );
        assert_eq!(env.model.as_deref(), Some("m"));
        assert_eq!(env.driver, None);
        assert_eq!(env.config, json!({"max_retries": 1}));

        let env = DriverEnv::from_vars(|_| None).unwrap();
        assert_eq!(env.config, Value::Null);
        assert!(env.url("/x").is_err());

        let e =
            DriverEnv::from_vars(|n| (n == "MURMUR_ARTIFACT_CONFIG").then(|| "{nope".to_string()))
                .unwrap_err();
        assert_eq!(e.kind.as_deref(), Some("invalid_request"));
    }

    #[test]
    fn env_config_typed() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Config {
            #[serde(default)]
            store: Option<bool>,
        }
        let env = DriverEnv::default();
        assert_eq!(env.config::<Config>().unwrap(), Config { store: None });
        let env = DriverEnv {
            config: json!({"store": false, "other": 1}),
            ..DriverEnv::default()
        };
        assert_eq!(
            env.config::<Config>().unwrap(),
            Config { store: Some(false) }
        );
        let env = DriverEnv {
            config: json!({"store": "no"}),
            ..DriverEnv::default()
        };
        assert!(env.config::<Config>().is_err());
    }

    #[test]
    fn provider_errors_of_both_shapes() {
        let anthropic = br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
        let e = provider_error(429, anthropic);
        assert_eq!(
            e.summary(),
            "429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"
        );
        let openai = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        let e = provider_error(401, openai);
        assert_eq!(e.status, Some(401));
        assert_eq!(e.kind.as_deref(), Some("invalid_request_error"));
        assert_eq!(e.message, "Incorrect API key provided");
        let code_only =
            br#"{"error":{"message":"slow down","type":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(
            provider_error(429, code_only).kind.as_deref(),
            Some("rate_limit_exceeded")
        );
        assert_eq!(
            provider_error(400, br#"{"error":"bad thing"}"#).summary(),
            "400: bad thing"
        );
        assert_eq!(
            provider_error(502, b"<html>bad gateway</html>").summary(),
            "502: <html>bad gateway</html>"
        );
        assert_eq!(
            provider_error(503, b"").summary(),
            "503: Service Unavailable"
        );
        assert_eq!(provider_error(500, b"{}").message, "{}");
        let long = "x".repeat(900);
        assert_eq!(
            provider_error(500, long.as_bytes()).message.chars().count(),
            501
        );
    }

    #[test]
    fn arguments_round_trip() {
        assert_eq!(arguments_to_input(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(arguments_to_input(""), json!({}));
        assert_eq!(arguments_to_input("{\"a\":"), json!("{\"a\":"));
        for args in [r#"{"a":1}"#, "{\"a\":"] {
            assert_eq!(input_to_arguments(&arguments_to_input(args)), args);
        }
        assert_eq!(input_to_arguments(&Value::Null), "{}");
    }
}
