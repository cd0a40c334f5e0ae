//! The script: what the emulator answers, turn by turn.
//!
//! A script is read from YAML ([`Script::from_yaml`], [`Script::from_file`]) or built in Rust
//! ([`Script::new`] and the `with_*` methods). The YAML keys are the serde names of the types
//! here; unknown keys are refused, so a typo fails loudly instead of being ignored.
//!
//! A script answers a request in one of three ways, tried in this order:
//!
//! 1. **`by_model`**: a request whose `model` is a key there gets that standing reply, every
//!    time. Nothing is used up.
//! 2. **`conversations`**: a request whose first user message contains a conversation's `task`
//!    (the first such conversation in the list) gets the reply of that conversation at the
//!    position the request is at: `turns[0]` when the request holds no model turn yet,
//!    `turns[1]` when it holds one, and so on. The emulator keeps no count for this; the
//!    position is read from the request itself, so several sessions can run against one
//!    emulator at once, in any interleaving, and a retried request gets the same reply again.
//!    A request past a conversation's last turn gets a `500` saying the conversation is
//!    exhausted. See [`Conversation`] for how the first user message and the model turns are
//!    read in each API.
//! 3. **`turns`**: every other request takes the next step of the global turns, in arrival
//!    order (faults first, then the answer); when none is left, a `500` saying the script is
//!    exhausted.

use std::path::Path;

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value};

/// A whole script: the expected credential, the standing replies by model, the conversations,
/// and the turns answered in order.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The credential every request must carry (Anthropic `x-api-key: KEY`, OpenAI
    /// `authorization: Bearer KEY`). Absent: any non-empty credential is accepted, but one must
    /// still be sent.
    #[serde(default)]
    pub api_key: Option<String>,
    /// The turns, in the order requests consume them (those answered neither by `by_model` nor
    /// by a conversation). Absent in YAML: none.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Standing replies by model: a request whose `model` is a key here is answered with that
    /// reply, every time, without taking a turn. For a helper model (a compaction hook's
    /// summarizer, say) whose calls come at moments a test cannot script in order.
    #[serde(default)]
    pub by_model: std::collections::BTreeMap<String, Reply>,
    /// Scripted conversations, each answering the requests of its own session whatever the
    /// order of arrival. Tried after `by_model`, before `turns`.
    #[serde(default)]
    pub conversations: Vec<Conversation>,
}

/// A conversation: the replies for one session, chosen by what each request already holds
/// rather than by arrival order.
///
/// - **Which conversation**: the first one whose `task` is a substring of the text of the
///   request's first user message, and whose `model`, when it names one, is the request's.
///   Anthropic: the first message with role `user`; its `content` string, or its `text`
///   blocks joined with newlines. Chat Completions: the same with the `text` of its content
///   parts. Responses: a string `input`, or the first `input`
///   item that is a message with role `user` (its content string or its parts' `text`); when
///   the request continues a stored response (`previous_response_id`), the first user message
///   of that stored chain comes first. A request that matches no conversation goes on to
///   `turns`. An empty `task` matches every request that has a user message.
/// - **Which turn**: the number of model turns the request already holds. Anthropic and Chat
///   Completions: the number of messages with role `assistant`. Responses: the number of runs
///   of consecutive output items (assistant `message`, `function_call`, `reasoning`, and the
///   other `*_call` items the model produces) in `input`, so a model turn that answered with
///   text, thinking and tool calls counts once; plus, with `previous_response_id`, the
///   responses in the stored chain it names (each response the emulator produced counts as
///   one model turn, whatever answered it).
/// - **Past the last turn**: a `500` in the provider's error shape saying the conversation is
///   exhausted.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    /// A substring of the first user message of the requests this conversation answers.
    pub task: String,
    /// When set, only requests for this `model` (so one emulator can play two models, each
    /// with its own conversation for the same task).
    #[serde(default)]
    pub model: Option<String>,
    /// The replies, one per model turn, in order.
    #[serde(deserialize_with = "replies")]
    pub turns: Vec<Reply>,
}

/// One turn: zero or more faults (one per attempt), then the answer that ends the turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "TurnSpec")]
pub struct Turn {
    /// Answered first, one per request, before [`Turn::answer`].
    pub faults: Vec<Fault>,
    /// The answer that completes the turn; the next request moves on to the next turn.
    pub answer: Answer,
    /// Wait this long before sending the answer's status line and headers.
    pub first_byte_delay_ms: Option<u64>,
    /// Wait this long between two streamed events of the answer.
    pub event_delay_ms: Option<u64>,
}

/// What completes a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A model reply, rendered in the requesting provider's shape.
    Reply(Reply),
    /// A fault given as the turn's only answer (it completes the turn).
    Fault(Fault),
}

/// A model reply, provider-neutral. Each provider renders it in its own wire shape.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Thinking before the answer (Anthropic `thinking` block; Responses `reasoning` item;
    /// dropped for Chat Completions, which has none).
    #[serde(default)]
    pub thinking: Option<Thinking>,
    /// The answer's text; absent: no text block / `content: null`. Each `{{tool_result:ID}}`
    /// in it is replaced by the text of the result of tool call `ID` the request carries (empty
    /// when it carries none), so a scripted model can answer with what a tool gave it.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, in order, after the text.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped; default `tool_call` when there are tool calls, else `end_turn`.
    #[serde(default)]
    pub stop: Option<Stop>,
    /// Token usage, rendered in each provider's shape; members left out are left out of the
    /// wire too. Absent (and no `raw_usage`): `{input: 10, output: 10}`.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Instead of `usage`: this value is sent verbatim as the provider's `usage` (for tests of
    /// malformed usage). `raw_usage: null` sends `"usage": null`.
    #[serde(default, deserialize_with = "present")]
    pub raw_usage: Option<Value>,
    /// The response id (Anthropic message `id`, Chat `id`, Responses `id`); generated when
    /// absent.
    #[serde(default)]
    pub id: Option<String>,
}

/// Thinking text and its signature.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thinking {
    pub text: String,
    /// Anthropic `signature`, Responses `encrypted_content`; generated when absent.
    #[serde(default)]
    pub signature: Option<String>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Anthropic `tool_use.id`, Chat `tool_calls[].id`, Responses `call_id`; generated when
    /// absent.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// Responses only: the tool namespace the function is in (`function_call.namespace`, as
    /// for a tool of a `namespace` entry of `tools`); ignored by the other APIs.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The arguments as a JSON value (Chat and Responses send it as a JSON string).
    #[serde(default = "empty_object")]
    pub input: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Anthropic `end_turn`, Chat `stop`, Responses `completed`.
    EndTurn,
    /// Anthropic `tool_use`, Chat `tool_calls`, Responses `completed` (with `function_call`s).
    ToolCall,
    /// Anthropic `max_tokens`, Chat `length`, Responses `incomplete` (`max_output_tokens`).
    MaxTokens,
}

/// Token counts; each member is rendered only when given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input: Option<u64>,
    #[serde(default)]
    pub output: Option<u64>,
    /// Anthropic `cache_read_input_tokens`, Chat `prompt_tokens_details.cached_tokens`,
    /// Responses `input_tokens_details.cached_tokens`.
    #[serde(default)]
    pub cache_read: Option<u64>,
    /// Anthropic `cache_creation_input_tokens`; the OpenAI APIs report no such number.
    #[serde(default)]
    pub cache_write: Option<u64>,
}

/// A failure answered instead of a reply.
///
/// YAML: a mapping with `status` for an HTTP error, or one of the names
/// `malformed_json`, `cut_stream`, `drop_connection`, `stream_error`.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// An HTTP error status with the provider's error body.
    Http(HttpFault),
    /// `200` whose body (streaming: one SSE `data:` line) is not valid JSON.
    MalformedJson,
    /// The response starts, then the connection closes in the middle of the body (streaming:
    /// after some whole events, in the middle of the next one).
    CutStream,
    /// The connection is closed before any byte of a response.
    DropConnection,
    /// Streaming: `200`, some events, then the provider's in-stream error event (Anthropic
    /// `event: error` `overloaded_error`; Chat a `data: {"error": …}` line; Responses
    /// `event: error`), and the stream ends. Not streaming: answered as a `529`/`503`.
    StreamError,
}

/// An HTTP error answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpFault {
    /// 400–599.
    pub status: u16,
    /// Seconds, sent as the `retry-after` header.
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// The provider's error `type`; default: the provider's type for the status.
    #[serde(default, rename = "type")]
    pub error_type: Option<String>,
    /// The error message; default: the provider's usual message for the status.
    #[serde(default)]
    pub message: Option<String>,
    /// OpenAI's error `code`; default: the usual one for the status (Anthropic has none).
    #[serde(default)]
    pub code: Option<String>,
}

/// A script that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError(pub String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

impl Script {
    /// An empty script (no turns: every request is answered "script exhausted").
    pub fn new() -> Script {
        Script::default()
    }

    /// Adds a turn.
    pub fn with_turn(mut self, turn: Turn) -> Script {
        self.turns.push(turn);
        self
    }

    /// Adds a turn that answers `reply` on its first attempt.
    pub fn with_reply(self, reply: Reply) -> Script {
        self.with_turn(Turn::reply(reply))
    }

    /// Adds a conversation answering the requests whose first user message contains `task`
    /// with `turns`, one per model turn (see [`Conversation`]).
    pub fn with_conversation(
        mut self,
        task: impl Into<String>,
        turns: impl IntoIterator<Item = Reply>,
    ) -> Script {
        self.conversations.push(Conversation::new(task, turns));
        self
    }

    /// Sets the credential requests must carry.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Script {
        self.api_key = Some(key.into());
        self
    }

    /// Reads a script from YAML text.
    pub fn from_yaml(text: &str) -> Result<Script, ScriptError> {
        let mut documents = Yaml::load_from_str(text)
            .map_err(|e| ScriptError(format!("YAML syntax error: {e}")))?;
        if documents.len() > 1 {
            return Err(ScriptError(
                "the script holds more than one YAML document".into(),
            ));
        }
        let root = documents
            .pop()
            .ok_or_else(|| ScriptError("the script is empty".into()))?;
        let value = yaml_to_json(&root, 0).map_err(ScriptError)?;
        Script::from_json(value)
    }

    /// Reads a script from a JSON value of the same shape as the YAML.
    pub fn from_json(value: Value) -> Result<Script, ScriptError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            if path == "." || path.is_empty() {
                ScriptError(e.inner().to_string())
            } else {
                ScriptError(format!("{path}: {}", e.inner()))
            }
        })
    }

    /// Reads a YAML script file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Script, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError(format!("{}: {e}", path.display())))?;
        Script::from_yaml(&text).map_err(|e| ScriptError(format!("{}: {e}", path.display())))
    }
}

impl Conversation {
    /// A conversation answering the requests whose first user message contains `task`.
    pub fn new(task: impl Into<String>, turns: impl IntoIterator<Item = Reply>) -> Conversation {
        Conversation {
            task: task.into(),
            model: None,
            turns: turns.into_iter().collect(),
        }
    }

    /// The conversation `text` (a request's first user message) belongs to: the index of the
    /// first one whose `task` it contains.
    pub(crate) fn find<'a>(
        conversations: &'a [Conversation],
        text: &str,
        model: Option<&str>,
    ) -> Option<(usize, &'a Conversation)> {
        conversations.iter().enumerate().find(|(_, c)| {
            text.contains(c.task.as_str())
                && c.model
                    .as_deref()
                    .is_none_or(|wanted| Some(wanted) == model)
        })
    }
}

impl Turn {
    /// A turn answered by `reply` on its first attempt.
    pub fn reply(reply: Reply) -> Turn {
        Turn {
            faults: Vec::new(),
            answer: Answer::Reply(reply),
            first_byte_delay_ms: None,
            event_delay_ms: None,
        }
    }

    /// A turn whose only answer is `fault`.
    pub fn fault(fault: impl Into<Fault>) -> Turn {
        Turn {
            faults: Vec::new(),
            answer: Answer::Fault(fault.into()),
            first_byte_delay_ms: None,
            event_delay_ms: None,
        }
    }

    /// Adds a fault answered (on its own attempt) before the answer.
    pub fn after_fault(mut self, fault: impl Into<Fault>) -> Turn {
        self.faults.push(fault.into());
        self
    }

    /// Delays the answer's first byte.
    pub fn with_first_byte_delay_ms(mut self, ms: u64) -> Turn {
        self.first_byte_delay_ms = Some(ms);
        self
    }

    /// Delays each streamed event after the first.
    pub fn with_event_delay_ms(mut self, ms: u64) -> Turn {
        self.event_delay_ms = Some(ms);
        self
    }
}

impl Reply {
    /// A reply with this text and nothing else.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: Some(text.into()),
            ..Reply::default()
        }
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Reply {
        self.text = Some(text.into());
        self
    }

    pub fn with_thinking(mut self, text: impl Into<String>, signature: impl Into<String>) -> Reply {
        self.thinking = Some(Thinking {
            text: text.into(),
            signature: Some(signature.into()),
        });
        self
    }

    /// Adds a tool call; `id` empty: generated.
    pub fn with_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Reply {
        let id = id.into();
        self.tool_calls.push(ToolCall {
            id: (!id.is_empty()).then_some(id),
            name: name.into(),
            namespace: None,
            input,
        });
        self
    }

    pub fn with_stop(mut self, stop: Stop) -> Reply {
        self.stop = Some(stop);
        self
    }

    pub fn with_usage(mut self, usage: Usage) -> Reply {
        self.usage = Some(usage);
        self
    }

    pub fn with_raw_usage(mut self, usage: Value) -> Reply {
        self.raw_usage = Some(usage);
        self
    }

    pub fn with_id(mut self, id: impl Into<String>) -> Reply {
        self.id = Some(id.into());
        self
    }

    /// The stop reason in force: the given one, else `tool_call` when there are tool calls,
    /// else `end_turn`.
    pub fn stop_reason(&self) -> Stop {
        self.stop.unwrap_or(if self.tool_calls.is_empty() {
            Stop::EndTurn
        } else {
            Stop::ToolCall
        })
    }
}

impl Usage {
    /// All four numbers.
    pub fn new(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input: Some(input),
            output: Some(output),
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
        }
    }
}

impl HttpFault {
    /// An error with this status and the provider's usual type and message.
    pub fn status(status: u16) -> HttpFault {
        HttpFault {
            status,
            ..HttpFault::default()
        }
    }

    pub fn with_retry_after(mut self, seconds: u64) -> HttpFault {
        self.retry_after = Some(seconds);
        self
    }

    pub fn with_type(mut self, error_type: impl Into<String>) -> HttpFault {
        self.error_type = Some(error_type.into());
        self
    }

    pub fn with_message(mut self, message: impl Into<String>) -> HttpFault {
        self.message = Some(message.into());
        self
    }

    pub fn with_code(mut self, code: impl Into<String>) -> HttpFault {
        self.code = Some(code.into());
        self
    }
}

impl Fault {
    /// An HTTP error with this status.
    pub fn status(status: u16) -> Fault {
        Fault::Http(HttpFault::status(status))
    }

    /// `429` with `retry-after: seconds`.
    pub fn rate_limited(retry_after: u64) -> Fault {
        Fault::Http(HttpFault::status(429).with_retry_after(retry_after))
    }

    /// The YAML name of the fault (`http` for an HTTP error).
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Http(_) => "http",
            Fault::MalformedJson => "malformed_json",
            Fault::CutStream => "cut_stream",
            Fault::DropConnection => "drop_connection",
            Fault::StreamError => "stream_error",
        }
    }
}

impl From<HttpFault> for Fault {
    fn from(fault: HttpFault) -> Fault {
        Fault::Http(fault)
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fault, D::Error> {
        const NAMES: &str = "`malformed_json`, `cut_stream`, `drop_connection`, `stream_error`, \
                             or a mapping with `status`";
        match Value::deserialize(deserializer)? {
            Value::String(name) => match name.as_str() {
                "malformed_json" => Ok(Fault::MalformedJson),
                "cut_stream" => Ok(Fault::CutStream),
                "drop_connection" => Ok(Fault::DropConnection),
                "stream_error" => Ok(Fault::StreamError),
                other => Err(D::Error::custom(format!(
                    "unknown fault `{other}`; expected {NAMES}"
                ))),
            },
            value @ Value::Object(_) => {
                let fault = HttpFault::deserialize(value).map_err(D::Error::custom)?;
                if !(400..=599).contains(&fault.status) {
                    return Err(D::Error::custom(format!(
                        "fault status {} is not an HTTP error status (400-599)",
                        fault.status
                    )));
                }
                Ok(Fault::Http(fault))
            }
            _ => Err(D::Error::custom(format!("a fault is {NAMES}"))),
        }
    }
}

/// The YAML form of a turn, before the one-answer rule is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnSpec {
    #[serde(default)]
    faults: Vec<Fault>,
    #[serde(default)]
    reply: Option<Reply>,
    #[serde(default)]
    fault: Option<Fault>,
    #[serde(default)]
    first_byte_delay_ms: Option<u64>,
    #[serde(default)]
    event_delay_ms: Option<u64>,
}

impl TryFrom<TurnSpec> for Turn {
    type Error = String;

    fn try_from(spec: TurnSpec) -> Result<Turn, String> {
        let answer = match (spec.reply, spec.fault) {
            (Some(reply), None) => {
                check_reply(&reply)?;
                Answer::Reply(reply)
            }
            (None, Some(fault)) => Answer::Fault(fault),
            (Some(_), Some(_)) => {
                return Err(
                    "a turn has `reply` or `fault`, not both (faults tried before the reply go \
                     in `faults`)"
                        .into(),
                );
            }
            (None, None) => return Err("a turn needs `reply` or `fault`".into()),
        };
        Ok(Turn {
            faults: spec.faults,
            answer,
            first_byte_delay_ms: spec.first_byte_delay_ms,
            event_delay_ms: spec.event_delay_ms,
        })
    }
}

fn check_reply(reply: &Reply) -> Result<(), String> {
    if reply.usage.is_some() && reply.raw_usage.is_some() {
        return Err("a reply gives `usage` or `raw_usage`, not both".into());
    }
    Ok(())
}

/// A conversation's replies, each checked as a turn's reply is.
fn replies<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Reply>, D::Error> {
    let replies = Vec::<Reply>::deserialize(deserializer)?;
    for (i, reply) in replies.iter().enumerate() {
        check_reply(reply).map_err(|e| D::Error::custom(format!("turn {i}: {e}")))?;
    }
    Ok(replies)
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

const MAX_DEPTH: usize = 64;

/// YAML to JSON: scalars keep their YAML types; mapping keys become strings.
fn yaml_to_json(node: &Yaml<'_>, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("the script nests deeper than {MAX_DEPTH} levels"));
    }
    Ok(match node {
        Yaml::Value(scalar) => scalar_to_json(scalar)?,
        Yaml::Representation(text, _, _) => Value::String(text.to_string()),
        Yaml::Sequence(items) => Value::Array(
            items
                .iter()
                .map(|item| yaml_to_json(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                let key = match key {
                    Yaml::Value(Scalar::String(s)) => s.to_string(),
                    Yaml::Value(scalar) => match scalar_to_json(scalar)? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    },
                    Yaml::Representation(text, _, _) => text.to_string(),
                    _ => return Err("a mapping key is not a scalar".into()),
                };
                if object.contains_key(&key) {
                    return Err(format!("key `{key}` appears twice in one mapping"));
                }
                object.insert(key, yaml_to_json(value, depth + 1)?);
            }
            Value::Object(object)
        }
        Yaml::Tagged(_, inner) => yaml_to_json(inner, depth)?,
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err("a value cannot be read (bad tag or unresolved alias)".into());
        }
    })
}

fn scalar_to_json(scalar: &Scalar<'_>) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => Number::from_f64(f.into_inner())
            .map(Value::Number)
            .ok_or_else(|| format!("`{}` is not a finite number", f.into_inner()))?,
        Scalar::String(s) => Value::String(s.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversations_read_from_yaml() {
        let script = Script::from_yaml(
            r#"
conversations:
  - task: "write a note"
    turns:
      - { text: "Writing.", tool_calls: [ { name: write-file, input: { path: a.md } } ],
          usage: { input: 100, output: 20 } }
      - { text: "done" }
  - task: other
    turns: []
"#,
        )
        .unwrap();
        assert!(script.turns.is_empty(), "`turns` may be left out");
        let expected = Script::new()
            .with_conversation(
                "write a note",
                [
                    Reply::text("Writing.")
                        .with_tool_call("", "write-file", serde_json::json!({"path": "a.md"}))
                        .with_usage(Usage {
                            input: Some(100),
                            output: Some(20),
                            ..Usage::default()
                        }),
                    Reply::text("done"),
                ],
            )
            .with_conversation("other", []);
        assert_eq!(script, expected);
    }

    #[test]
    fn a_conversation_with_an_unknown_key_is_refused() {
        let error =
            Script::from_yaml("conversations:\n  - task: x\n    turns: []\n    replies: []\n")
                .unwrap_err();
        assert!(error.0.contains("conversations[0]"), "{error}");
        assert!(error.0.contains("unknown field `replies`"), "{error}");
        let error = Script::from_yaml("conversations:\n  - task: x\n    turns: [ { txt: hi } ]\n")
            .unwrap_err();
        assert!(error.0.contains("unknown field `txt`"), "{error}");
        let error = Script::from_yaml("conversations:\n  - turns: []\n").unwrap_err();
        assert!(error.0.contains("missing field `task`"), "{error}");
        let error = Script::from_yaml(
            "conversations:\n  - task: x\n    turns: [ { usage: {input: 1}, raw_usage: 3 } ]\n",
        )
        .unwrap_err();
        assert!(error.0.contains("not both"), "{error}");
    }

    #[test]
    fn the_first_conversation_whose_task_is_contained_matches() {
        let script = Script::new()
            .with_conversation("note", [])
            .with_conversation("write", []);
        let find = |text| Conversation::find(&script.conversations, text, None).map(|(i, _)| i);
        assert_eq!(find("please write a note"), Some(0));
        assert_eq!(find("please write it"), Some(1));
        assert_eq!(find("nothing here"), None);
    }
}
