//! A fake LLM provider on 127.0.0.1 that speaks the real wire formats, driven by a script.
//!
//! # The contract
//!
//! - **It listens on loopback only**, on an OS-assigned port unless one is given, and serves
//!   three real APIs at their real paths: Anthropic Messages (`POST /v1/messages`), OpenAI Chat
//!   Completions (`POST /v1/chat/completions`) and OpenAI Responses (`POST /v1/responses`).
//!   Any other path gets a `404`.
//! - **It answers from a script, one turn at a time.** A turn is zero or more faults followed
//!   by one answer (a reply, or a fault). Each request takes the next step of the current turn:
//!   the faults first, one per request, then the answer; after the answer the script moves to
//!   the next turn. A request that comes when every turn has been answered gets a `500` in the
//!   provider's error shape saying the script is exhausted, so a test fails clearly.
//! - **Several sessions at once: conversations.** A conversation answers the requests whose
//!   first user message contains its `task`, picking its reply by how many model turns the
//!   request already holds (assistant messages; for Responses, runs of output items plus the
//!   stored `previous_response_id` chain). It keeps no state, so independent sessions can run
//!   against one emulator concurrently, each getting its own scripted replies. Precedence:
//!   `by_model`, then conversations, then `turns`; a request matching no conversation takes
//!   the next turn as before. Past a conversation's last reply: a `500` saying it is
//!   exhausted. Details: [`Conversation`].
//! - **A reply is provider-neutral** (thinking, text, tool calls, stop reason, usage) and is
//!   rendered in the shape of whichever API was called: its JSON body, or, when the request
//!   says `"stream": true`, its real server-sent-event sequence. Usage members the script
//!   leaves out are left out of the wire too.
//! - **It is as strict as the real APIs.** Before a request takes a step of the script, its
//!   credential and body are checked as the provider checks them; a request the provider would
//!   refuse is refused the same way (`401`, or `400` with the provider's error JSON and
//!   wording), and does not use up a step. So a driver bug fails the test instead of passing
//!   silently. The checks: credential header (Anthropic `x-api-key`, OpenAI
//!   `authorization: Bearer`), `anthropic-version`, `content-type: application/json`, required
//!   and unknown fields, message roles and content block shapes, and that tool calls and tool
//!   results pair up (for Responses, across `previous_response_id`, which must name a response
//!   this emulator produced and stored).
//! - **Everything is recorded**: every request that reached it (refused ones too), with its
//!   provider, method, path, headers, JSON body, the turn and attempt it used, the status
//!   answered and what was answered ([`Recorded`]). Tests assert on these rather than on
//!   expectations written into the script.
//! - **It stops when dropped** ([`Emulator`]); the `murmur-emulator` binary runs it until
//!   killed and can append each record as a JSON line to a file.
//!
//! # Script format (YAML)
//!
//! ```yaml
//! api_key: sk-test              # optional: the credential requests must carry
//! turns:
//!   - reply:
//!       thinking: { text: "Let me write it.", signature: "sig-1" }   # optional
//!       text: "Writing the note."                                      # optional
//!       tool_calls: [ { id: call_1, name: write-file, input: { path: a.md, content: hi } } ]
//!       # a tool call may name a Responses `namespace:` (sent as `function_call.namespace`)
//!       stop: tool_call       # end_turn | tool_call | max_tokens (default: tool_call when
//!                             # there are tool calls, else end_turn)
//!       usage: { input: 120, output: 30, cache_read: 100, cache_write: 20 }
//!       # raw_usage: <any value>  instead of `usage`: sent verbatim as the provider's `usage`
//!       id: resp_1            # optional response id
//!     faults:                 # answered first, one per request
//!       - { status: 429, retry_after: 1 }     # also: type, message, code
//!       - { status: 500 }
//!       - drop_connection
//!     first_byte_delay_ms: 1500               # delay before the answer's first byte
//!     event_delay_ms: 50                      # delay between streamed events
//!   - fault: malformed_json   # | cut_stream | drop_connection | stream_error | {status: …}
//! by_model:                   # standing replies: a request for this model is answered with
//!   summary-model:            # this reply every time, without taking a turn
//!     text: "Summary: …"
//! conversations:              # stateless per-session replies (after by_model, before turns)
//!   - task: "write a note"    # a substring of the request's first user message
//!     turns:                  # replies (as `reply:` above), one per model turn already held
//!       - { text: "Writing.", tool_calls: [ { name: write-file, input: { path: a.md } } ],
//!           usage: { input: 100, output: 20 } }
//!       - { text: "done" }
//! ```
//!
//! The same script in Rust: [`Script::new`], [`Turn::reply`], [`Reply::text`] and the `with_*`
//! methods.
//!
//! # Faults
//!
//! - `{status, retry_after, type, message, code}`: that HTTP status with the provider's error
//!   JSON (Anthropic `{"type":"error","error":{"type","message"}}`, OpenAI
//!   `{"error":{"message","type","param","code"}}`) and a `retry-after` header when given.
//! - `malformed_json`: `200` whose body is not valid JSON; streaming, one `data:` line in the
//!   middle of the stream is not valid JSON (the other events are whole).
//! - `cut_stream`: the body stops in the middle (streaming: after about half the events, in the
//!   middle of the next one) and the connection is closed.
//! - `drop_connection`: the connection is closed before any byte of a response.
//! - `stream_error`: streaming, about half the events then the provider's in-stream error
//!   event; not streaming, Anthropic `529 overloaded_error`, OpenAI `503`.
//!
//! A fault that needs content (malformed, cut, stream error) renders the turn's reply when it
//! has one, else a short placeholder text.
//!
//! # Faithfulness notes
//!
//! - Anthropic streams a `ping` after `message_start`; `message_start.usage` carries the input
//!   side (and `output_tokens` of at most 1), `message_delta.usage` the final `output_tokens`.
//!   A tool call without arguments streams only an empty `partial_json`, as the API does.
//! - Chat Completions has no thinking: a reply's thinking is not sent. Its stream ends with a
//!   chunk carrying `finish_reason`, a usage chunk (`choices: []`) only when
//!   `stream_options.include_usage` is true, then `data: [DONE]`.
//! - Responses sends a reasoning item's `encrypted_content` only when the request's `include`
//!   asks for `reasoning.encrypted_content`, as the API does. A reply cut at `max_tokens`
//!   ends with `response.incomplete` (`incomplete_details.reason: max_output_tokens`) rather
//!   than `response.completed`.

mod anthropic;
mod chat;
mod responses;
mod script;
mod server;
mod wire;

pub use script::{
    Answer, Conversation, Fault, HttpFault, Reply, Script, ScriptError, Stop, Thinking, ToolCall,
    Turn, Usage,
};
pub use server::{Emulator, EmulatorBuilder, capsule_manifest};

use serde::Serialize;
use serde_json::Value;

/// Which API a request was addressed to (by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Provider {
    /// `/v1/messages`
    #[serde(rename = "anthropic")]
    Anthropic,
    /// `/v1/chat/completions`
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// `/v1/responses`
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Any other path.
    #[serde(rename = "unknown")]
    Unknown,
}

impl Provider {
    /// The API served at `path`.
    pub fn from_path(path: &str) -> Provider {
        match path {
            "/v1/messages" => Provider::Anthropic,
            "/v1/chat/completions" => Provider::OpenAiChat,
            "/v1/responses" => Provider::OpenAiResponses,
            _ => Provider::Unknown,
        }
    }
}

/// One request as the emulator saw and answered it. With `--record`, one JSON line each.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    pub provider: Provider,
    pub method: String,
    pub path: String,
    /// Every header, in order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `null` when empty, a JSON string of the text when not valid JSON.
    pub body: Value,
    /// The index of the turn the request used; `None` when refused before the script (bad
    /// credential, invalid body, unknown path), when the script was exhausted, or when
    /// `by_model` or a conversation answered (see `outcome`).
    pub turn: Option<usize>,
    /// The attempt within that turn (0 = first; faults come first).
    pub attempt: Option<usize>,
    /// The HTTP status answered (`0` for a dropped connection).
    pub status: u16,
    /// What was answered: `reply`, `reply (by model)`, `reply (conversation N turn K)`,
    /// `fault: <name>`, `refused: <message>`, `exhausted`, `exhausted (conversation N)`.
    pub outcome: String,
    /// When it arrived, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// When its head arrived, in microseconds since the Unix epoch: with `handled_us`, what a
    /// benchmark subtracts to find the client's own time between requests.
    pub arrived_us: u64,
    /// Microseconds the emulator spent on it before answering: reading the body, checking it,
    /// building the answer (a scripted delay not included).
    pub handled_us: u64,
}

impl Recorded {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
