//! Reading a session's trace back: what `mur trace show|report|diff` prints.
//!
//! What it promises:
//!
//! - **Loading never panics.** [`load`] (a file) and [`parse`] (its bytes) read `trace.jsonl`
//!   line by line. A line that is not UTF-8, not JSON, not an object with an `event_type`, of an
//!   unknown event type, or missing a field of its type is an error naming the file and the
//!   1-based line. A trace with no event, or none of them `session_start`, is an error. A trace
//!   without `session_end` loads: the session died or still runs, and every view says so
//!   ([`SessionSummary::note`]). Blank lines are skipped.
//! - **Bounded.** [`load`] reads at most [`TRACE_MAX_BYTES`] (256 MiB): a bigger file (a sparse
//!   16 GiB one included) is [`LoadError::TooLarge`], told from its size before anything is
//!   read, so it costs no time; a file that grows past the bound while read is refused the
//!   same way. [`session_start_at`] reads at most [`FIRST_LINE_MAX_BYTES`] (4 MiB) of a trace's
//!   first line.
//! - **Pure views.** [`show`], [`report`], [`diff`] and [`redundant_calls`] are functions of the
//!   events alone. They return plain serializable values; their field names are what
//!   `mur trace --json` prints and are kept stable. An optional figure is `null` when absent,
//!   never 0: a provider count no call reported stays absent. Sums saturate instead of
//!   overflowing.
//! - **Turns.** An `inference` event with origin `agent` is one turn of its task. The
//!   `tool_call`, `shell`, `skill_call` and `call_denied` events under it (by `parent_id`; else the same task
//!   and turn number) are its calls. An `inference` event with origin `hook:<name>`, or with no
//!   task, is a hook's call: shown apart, in its task or at session level, never as a turn.
//! - **Redundant reads** ([`redundant_calls`]): within one task, a `tool_call` with
//!   `state_effect: "read"` and status `passed` is redundant when an earlier passed read of the
//!   same resource happened in that task and nothing in between may have changed it.
//!   - The resource key is the call's `resource_id` when it has one (compared byte for byte:
//!     `file:a` and `file:./a` are two resources), else its `input_path` (the path-like input
//!     field the runtime recorded). Keys of the two kinds never match each other.
//!   - A read whose status is not `passed` neither counts as the first read nor is redundant.
//!   - A `mutate` call is a barrier for its keys (its `resource_id` and its `input_path`), or
//!     for every resource when it has neither.
//!   - A call with no (or an unrecognized) `state_effect` is unknown: never a redundant read; a
//!     barrier for its keys, or for every resource when it has neither (it could have changed
//!     anything).
//!   - A call that did not run (status `refused`, or a hook's `call_denied`) changes nothing;
//!     nor does a `skill_call` (a skill's markdown handed to the model).
//!   - A `shell` event is a barrier for every resource: a command can change any file.
//!   - A `compaction` event resets the task: the earlier read may be gone from the context.
//!   - Tasks never make each other redundant.
//! - **Cache hit ratio** ([`ChoiceReport::cache_hit_ratio`]): the share of the prompt tokens the
//!   provider read from its cache, over the calls that reported both `input_tokens_actual` and
//!   `cached_tokens_actual`. The runtime records each provider's own counts (docs/driver-protocol.md):
//!   OpenAI's `input_tokens` include the cached tokens, Anthropic's do not (nor the tokens
//!   written to the cache). So, per call, the prompt is `input_tokens_actual` for an OpenAI
//!   driver and `input_tokens_actual + cached_tokens_actual + cache_write_tokens_actual` for an
//!   Anthropic one (a driver whose name contains `anthropic`), and the ratio is
//!   `Σ cached_tokens_actual / Σ prompt`, absent when no call reported both (or every prompt
//!   was 0).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::schema::{
    CallStatus, Decision, ErrorRef, Event, EventBody, ExitStatus, StopReason, Totals,
};

// ---------------------------------------------------------------------------------------------
// Loading

/// Why a trace could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read at all.
    #[error("{path} cannot be read: {message}")]
    Unreadable { path: PathBuf, message: String },
    /// One line is not a trace event.
    #[error("{path}:{line}: {message}")]
    Malformed {
        path: PathBuf,
        /// 1-based.
        line: usize,
        message: String,
    },
    /// The file holds no event.
    #[error("{path} is empty: it holds no trace event")]
    Empty { path: PathBuf },
    /// No line is a `session_start`.
    #[error("{path} has no session_start event: it is not the trace of a session")]
    NoSessionStart { path: PathBuf },
    /// The file is bigger than a trace is read to ([`TRACE_MAX_BYTES`]).
    #[error(
        "{path} is {bytes} bytes, over the {limit} byte bound ({} MiB) a trace is read to",
        limit >> 20
    )]
    TooLarge {
        path: PathBuf,
        /// Its size as found (at least `limit + 1` when it grew while read).
        bytes: u64,
        limit: u64,
    },
}

/// The largest trace [`load`] reads: 256 MiB. The runtime writes a line an event, each far
/// under a MiB; a session of a million events stays under it.
pub const TRACE_MAX_BYTES: u64 = 256 << 20;

/// The longest first line [`session_start_at`] reads: 4 MiB (a `session_start` lists the
/// capsule's components and grants: some KiB).
pub const FIRST_LINE_MAX_BYTES: u64 = 4 << 20;

/// A trace as read: its events, and the cut last line when there was one.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub events: Vec<Event>,
    pub cut: Option<CutLine>,
}

/// The unfinished line a trace ended in (the disk filled or the writer died mid-line): it was
/// left out, and every whole line before it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CutLine {
    /// 1-based.
    pub line: usize,
    pub bytes: usize,
}

/// Reads and parses the trace file at `path`, at most [`TRACE_MAX_BYTES`] of it.
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let bytes = read_bounded(path, TRACE_MAX_BYTES)?;
    parse(&bytes, path)
}

/// The bytes of the file at `path`, or [`LoadError::TooLarge`] when it holds more than `limit`
/// (told from its size when it says so, else after reading `limit + 1` bytes).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, LoadError> {
    let unreadable = |error: std::io::Error| LoadError::Unreadable {
        path: path.to_path_buf(),
        message: error.to_string(),
    };
    let too_large = |bytes: u64| LoadError::TooLarge {
        path: path.to_path_buf(),
        bytes,
        limit,
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let size = file.metadata().map_err(unreadable)?.len();
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The timestamp (Unix ms) of the `session_start` a trace begins with, read from `trace`'s
/// first line (at most [`FIRST_LINE_MAX_BYTES`] of it); `None` when that line is not a whole
/// `session_start` event.
pub fn session_start_at(trace: impl Read) -> Option<u64> {
    let mut line = Vec::new();
    std::io::BufReader::new(trace.take(FIRST_LINE_MAX_BYTES))
        .read_until(b'\n', &mut line)
        .ok()?;
    let event: Event = serde_json::from_slice(&line).ok()?;
    matches!(event.body, EventBody::SessionStart { .. }).then_some(event.timestamp)
}

/// Parses the bytes of a trace file; `path` only names it in errors. Every line must be an
/// event, except a last line with no newline after it that is not one: that is a cut line
/// ([`CutLine`]), left out.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Loaded, LoadError> {
    let malformed = |line: usize, message: String| LoadError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut events = Vec::new();
    let mut cut = None;
    let lines: Vec<&[u8]> = bytes.split(|byte| *byte == b'\n').collect();
    let last = lines.len() - 1;
    for (index, raw) in lines.into_iter().enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if index == last && !parses_as_event(raw) {
            cut = Some(CutLine {
                line,
                bytes: raw.len(),
            });
            break;
        }
        let text = std::str::from_utf8(raw).map_err(|error| {
            malformed(
                line,
                format!(
                    "not UTF-8 text (invalid byte at column {})",
                    error.valid_up_to() + 1
                ),
            )
        })?;
        let value: Value = serde_json::from_str(text)
            .map_err(|error| malformed(line, format!("not JSON: {error}")))?;
        let Some(object) = value.as_object() else {
            return Err(malformed(line, "not a JSON object".to_string()));
        };
        let event_type = match object.get("event_type") {
            Some(Value::String(event_type)) => event_type.clone(),
            Some(_) => return Err(malformed(line, "`event_type` is not a string".to_string())),
            None => return Err(malformed(line, "no `event_type`".to_string())),
        };
        let event: Event = serde_json::from_value(value).map_err(|error| {
            let message = error.to_string();
            if message.starts_with("unknown variant") {
                malformed(line, format!("unknown event type `{event_type}`"))
            } else {
                malformed(
                    line,
                    format!("a `{event_type}` event that does not fit its schema: {message}"),
                )
            }
        })?;
        events.push(event);
    }
    if events.is_empty() {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    if !events
        .iter()
        .any(|event| matches!(event.body, EventBody::SessionStart { .. }))
    {
        return Err(LoadError::NoSessionStart {
            path: path.to_path_buf(),
        });
    }
    Ok(Loaded { events, cut })
}

fn parses_as_event(raw: &[u8]) -> bool {
    serde_json::from_slice::<Event>(raw).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

/// What the note of a session without `session_end` says.
pub const NO_SESSION_END: &str = "no session_end: the session died or is still running";

/// Who a session was and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub session_id: String,
    pub capsule: String,
    pub capsule_version: String,
    pub murmur_version: String,
    /// The primary model and driver; absent for a capsule component.
    pub model: Option<String>,
    pub driver: Option<String>,
    pub system_prompt_sha256: Option<String>,
    /// The earlier session this one resumed (`mur run --resume`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<crate::schema::Resumed>,
    /// The tools the model was offered.
    pub tools: Vec<String>,
    /// Unix ms of `session_start`.
    pub started_at_ms: u64,
    /// Unix ms of the last event.
    pub last_event_at_ms: u64,
    /// Whether the trace holds `session_end`.
    pub ended: bool,
    /// From `session_end`.
    pub exit_status: Option<ExitStatus>,
    pub duration_ms: Option<u64>,
    /// Set when something about the session is worth saying ([`NO_SESSION_END`]).
    pub note: Option<String>,
}

/// Token figures of one or more `inference` events. The `*_actual` sums are absent when no
/// event reported that number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input_tokens_estimated: u64,
    pub output_tokens_estimated: u64,
    pub input_tokens_actual: Option<u64>,
    pub output_tokens_actual: Option<u64>,
    pub cached_tokens_actual: Option<u64>,
    pub cache_write_tokens_actual: Option<u64>,
}

fn add_reported(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *total = Some(total.unwrap_or(0).saturating_add(value));
    }
}

impl Tokens {
    /// The figures of one `inference` event (empty for any other event).
    fn of(body: &EventBody) -> Tokens {
        let mut tokens = Tokens::default();
        tokens.add(body);
        tokens
    }

    /// Adds an `inference` event's figures; any other event adds nothing.
    fn add(&mut self, body: &EventBody) {
        if let EventBody::Inference {
            input_tokens_estimated,
            output_tokens_estimated,
            input_tokens_actual,
            output_tokens_actual,
            cached_tokens_actual,
            cache_write_tokens_actual,
            ..
        } = body
        {
            self.input_tokens_estimated = self
                .input_tokens_estimated
                .saturating_add(*input_tokens_estimated);
            self.output_tokens_estimated = self
                .output_tokens_estimated
                .saturating_add(*output_tokens_estimated);
            add_reported(&mut self.input_tokens_actual, *input_tokens_actual);
            add_reported(&mut self.output_tokens_actual, *output_tokens_actual);
            add_reported(&mut self.cached_tokens_actual, *cached_tokens_actual);
            add_reported(
                &mut self.cache_write_tokens_actual,
                *cache_write_tokens_actual,
            );
        }
    }
}

/// Where a view's totals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TotalsFrom {
    /// The `session_end` line.
    SessionEnd,
    /// Summed from the events, as the writer sums them (no `session_end`).
    Events,
}

fn session_start(events: &[Event]) -> Option<&Event> {
    events
        .iter()
        .find(|event| matches!(event.body, EventBody::SessionStart { .. }))
}

fn session_end(events: &[Event]) -> Option<&Event> {
    events
        .iter()
        .rev()
        .find(|event| matches!(event.body, EventBody::SessionEnd { .. }))
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// Who the session was and how it ended. A trace [`parse`] accepted always has a
/// `session_start`; without one the fields are empty.
pub fn session_summary(events: &[Event]) -> SessionSummary {
    let mut summary = SessionSummary {
        session_id: events
            .first()
            .map(|event| event.session_id.clone())
            .unwrap_or_default(),
        capsule: String::new(),
        capsule_version: String::new(),
        murmur_version: String::new(),
        model: None,
        driver: None,
        system_prompt_sha256: None,
        resumed: None,
        tools: Vec::new(),
        started_at_ms: events.first().map_or(0, |event| event.timestamp),
        last_event_at_ms: events
            .iter()
            .map(|event| event.timestamp)
            .max()
            .unwrap_or(0),
        ended: false,
        exit_status: None,
        duration_ms: None,
        note: Some(NO_SESSION_END.to_string()),
    };
    if let Some(start) = session_start(events)
        && let EventBody::SessionStart {
            capsule,
            murmur_version,
            model,
            driver,
            tools,
            system_prompt_sha256,
            resumed,
            ..
        } = &start.body
    {
        summary.resumed = resumed.clone();
        summary.session_id = start.session_id.clone();
        summary.capsule = capsule.name.clone();
        summary.capsule_version = capsule.version.clone();
        summary.murmur_version = murmur_version.clone();
        summary.model = non_empty(model);
        summary.driver = non_empty(driver);
        summary.system_prompt_sha256 = non_empty(system_prompt_sha256);
        summary.tools = tools.clone();
        summary.started_at_ms = start.timestamp;
    }
    if let Some(end) = session_end(events)
        && let EventBody::SessionEnd {
            exit_status,
            duration_ms,
            ..
        } = &end.body
    {
        summary.ended = true;
        summary.exit_status = Some(*exit_status);
        summary.duration_ms = Some(*duration_ms);
        summary.note = None;
    }
    summary
}

/// The session's totals: `session_end`'s when the trace has one, else summed from the events
/// the way the writer sums them.
pub fn totals(events: &[Event]) -> (Totals, TotalsFrom) {
    if let Some(end) = session_end(events)
        && let EventBody::SessionEnd { totals, .. } = &end.body
    {
        return (totals.clone(), TotalsFrom::SessionEnd);
    }
    let mut totals = Totals::default();
    let mut tokens = Tokens::default();
    for event in events {
        match &event.body {
            EventBody::TaskStart { .. } => totals.tasks = totals.tasks.saturating_add(1),
            EventBody::Inference { .. } => {
                totals.turns = totals.turns.saturating_add(1);
                tokens.add(&event.body);
            }
            EventBody::ToolCall { .. } => totals.tool_calls = totals.tool_calls.saturating_add(1),
            EventBody::Shell { .. } => totals.shell_calls = totals.shell_calls.saturating_add(1),
            EventBody::SkillCall { .. } => {
                totals.skill_calls = totals.skill_calls.saturating_add(1)
            }
            _ => {}
        }
    }
    totals.input_tokens_estimated = tokens.input_tokens_estimated;
    totals.output_tokens_estimated = tokens.output_tokens_estimated;
    totals.input_tokens_actual = tokens.input_tokens_actual;
    totals.output_tokens_actual = tokens.output_tokens_actual;
    totals.cached_tokens_actual = tokens.cached_tokens_actual;
    totals.cache_write_tokens_actual = tokens.cache_write_tokens_actual;
    (totals, TotalsFrom::Events)
}

/// Whether an `inference` event is a turn of the agent loop (not a hook's call, not outside
/// any task).
fn is_agent_turn(body: &EventBody) -> bool {
    matches!(
        body,
        EventBody::Inference { task_id: Some(_), origin, .. } if origin.hook().is_none()
    )
}

/// How a `shell` event ended, in the words of a tool call's status: `passed` (exit 0),
/// `failed` (another exit code, a signal, or the time limit), `error` (it did not run).
fn shell_status(exit_code: Option<i32>, timed_out: bool, error: Option<&ErrorRef>) -> &'static str {
    if error.is_some() {
        "error"
    } else if timed_out {
        "failed"
    } else {
        match exit_code {
            Some(0) => "passed",
            _ => "failed",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Redundant reads

/// Which field a resource key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// The tool's declared `resource_id`.
    ResourceId,
    /// The path-like input field the runtime recorded (`input_path`).
    InputPath,
}

/// The earlier read a redundant one repeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EarlierCall {
    pub turn: u32,
    pub call_id: String,
    pub tool_name: String,
}

/// A read that repeated an earlier one of the same resource in its task, with nothing between
/// that may have changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedundantCall {
    pub task_id: String,
    pub turn: u32,
    pub call_id: String,
    pub tool_name: String,
    /// The resource, byte for byte as recorded.
    pub key: String,
    pub key_kind: KeyKind,
    pub repeats: EarlierCall,
}

type ResourceKey = (KeyKind, String);

/// What a call did to the resources, for the redundancy rules.
enum Effect {
    Read,
    Mutate,
    Unknown,
}

/// The redundant reads of a trace, in file order, each with the index of its event.
fn redundant_with_index(events: &[Event]) -> Vec<(usize, RedundantCall)> {
    // Per task: the first passed read of each resource since the last barrier.
    let mut reads: HashMap<&str, HashMap<ResourceKey, EarlierCall>> = HashMap::new();
    let mut found = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match &event.body {
            EventBody::Compaction { task_id, .. } | EventBody::Shell { task_id, .. } => {
                reads.remove(task_id.as_str());
            }
            EventBody::ToolCall {
                task_id,
                turn,
                call_id,
                tool_name,
                status,
                state_effect,
                resource_id,
                input_path,
                ..
            } => {
                if *status == CallStatus::Refused {
                    continue;
                }
                let task = reads.entry(task_id.as_str()).or_default();
                let effect = match state_effect.as_deref() {
                    Some("read") => Effect::Read,
                    Some("mutate") => Effect::Mutate,
                    _ => Effect::Unknown,
                };
                match effect {
                    Effect::Read => {
                        if *status != CallStatus::Passed {
                            continue;
                        }
                        let key = match (resource_id, input_path) {
                            (Some(id), _) => (KeyKind::ResourceId, id.clone()),
                            (None, Some(path)) => (KeyKind::InputPath, path.clone()),
                            (None, None) => continue,
                        };
                        match task.get(&key) {
                            Some(earlier) => found.push((
                                index,
                                RedundantCall {
                                    task_id: task_id.clone(),
                                    turn: *turn,
                                    call_id: call_id.clone(),
                                    tool_name: tool_name.clone(),
                                    key: key.1.clone(),
                                    key_kind: key.0,
                                    repeats: earlier.clone(),
                                },
                            )),
                            None => {
                                task.insert(
                                    key,
                                    EarlierCall {
                                        turn: *turn,
                                        call_id: call_id.clone(),
                                        tool_name: tool_name.clone(),
                                    },
                                );
                            }
                        }
                    }
                    Effect::Mutate | Effect::Unknown => {
                        if resource_id.is_none() && input_path.is_none() {
                            task.clear();
                            continue;
                        }
                        if let Some(id) = resource_id {
                            task.remove(&(KeyKind::ResourceId, id.clone()));
                        }
                        if let Some(path) = input_path {
                            task.remove(&(KeyKind::InputPath, path.clone()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// The redundant reads of a trace, in file order (see the module's rules).
pub fn redundant_calls(events: &[Event]) -> Vec<RedundantCall> {
    redundant_with_index(events)
        .into_iter()
        .map(|(_, call)| call)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// show

/// What kind of call a [`CallRow`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A `tool_call` event.
    Tool,
    /// A `shell` event (the model's `shell` tool).
    Shell,
    /// A `skill_call` event: a skill's markdown handed to the model.
    Skill,
    /// A `call_denied` event: a hook refused it and it was not made.
    Denied,
}

/// One call under a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRow {
    pub kind: CallKind,
    pub turn: u32,
    pub call_id: String,
    /// The tool's name; `shell` for a shell call; the skill's name; the tool, skill or binary
    /// a hook denied.
    pub tool_name: String,
    /// A tool call's status (`passed`, `failed`, `error`, `refused`); for a shell call
    /// `passed` (exit 0), `failed` or `error` (it did not run); `passed` for a skill call;
    /// `denied` for a denied call.
    pub status: String,
    pub state_effect: Option<String>,
    pub resource_id: Option<String>,
    pub input_path: Option<String>,
    /// A tool's output bytes; a shell call's stdout and stderr bytes; a skill's markdown bytes.
    pub output_bytes: u64,
    pub duration_ms: u64,
    /// Whether this call is one of [`Show::redundant_calls`].
    pub redundant: bool,
    /// A shell call's command; a skill's version; a denial's hook and reason; an error's code
    /// and message.
    pub detail: Option<String>,
}

/// One turn of the agent loop: one `inference` event of origin `agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnRow {
    pub turn: u32,
    pub choice: String,
    pub driver: String,
    pub model: String,
    /// `call_tools`, `finish` or `fail`.
    pub decision: Decision,
    pub stop_reason: StopReason,
    /// The tools the turn called (its `tool_call`, `shell` and `skill_call` events), in order.
    pub tools: Vec<String>,
    #[serde(flatten)]
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub error: Option<ErrorRef>,
    pub calls: Vec<CallRow>,
}

/// A hook's `run-inference` call (origin `hook:<name>`), or an `inference` event outside any
/// task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookCall {
    /// The hook's name (the origin itself when it names no hook).
    pub hook: String,
    /// The agent's turn the call happened at.
    pub turn: u32,
    pub choice: String,
    pub model: String,
    pub stop_reason: StopReason,
    #[serde(flatten)]
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub error: Option<ErrorRef>,
}

/// A `compaction` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactionRow {
    pub turn: u32,
    pub hook: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_before: u32,
    pub messages_after: u32,
    pub duration_ms: u64,
}

/// One task, turn by turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskView {
    pub task_id: String,
    /// `cli`, `task.md`, …; absent when the trace has no `task_start` for it.
    pub source: Option<String>,
    pub context_id: Option<String>,
    pub input_sha256: Option<String>,
    /// From `task_end`; absent when the task did not end.
    pub exit_status: Option<ExitStatus>,
    pub reopen_count: Option<u32>,
    /// From `task_start` to `task_end`.
    pub duration_ms: Option<u64>,
    pub error: Option<ErrorRef>,
    pub turns: Vec<TurnRow>,
    pub hook_calls: Vec<HookCall>,
    pub compactions: Vec<CompactionRow>,
    /// Calls whose turn is not in the trace.
    pub calls_outside_turns: Vec<CallRow>,
}

/// `mur trace show`: the session, per task and turn, with its totals and redundant reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Show {
    pub session: SessionSummary,
    pub tasks: Vec<TaskView>,
    /// Hooks' inference calls outside any task.
    pub session_hook_calls: Vec<HookCall>,
    pub totals: Totals,
    pub totals_from: TotalsFrom,
    pub redundant_calls: Vec<RedundantCall>,
}

impl TaskView {
    fn new(task_id: &str) -> TaskView {
        TaskView {
            task_id: task_id.to_string(),
            source: None,
            context_id: None,
            input_sha256: None,
            exit_status: None,
            reopen_count: None,
            duration_ms: None,
            error: None,
            turns: Vec::new(),
            hook_calls: Vec::new(),
            compactions: Vec::new(),
            calls_outside_turns: Vec::new(),
        }
    }
}

/// Items (tasks, choices, tools, hooks) in order of first appearance, found by name.
struct InOrder<T> {
    items: Vec<T>,
    positions: HashMap<String, usize>,
}

impl<T> InOrder<T> {
    fn new() -> InOrder<T> {
        InOrder {
            items: Vec::new(),
            positions: HashMap::new(),
        }
    }

    fn get_or_add(&mut self, key: &str, make: impl FnOnce(&str) -> T) -> (usize, &mut T) {
        let position = match self.positions.get(key) {
            Some(position) => *position,
            None => {
                self.items.push(make(key));
                let position = self.items.len() - 1;
                self.positions.insert(key.to_string(), position);
                position
            }
        };
        (position, &mut self.items[position])
    }
}

fn hook_call(body: &EventBody) -> Option<HookCall> {
    let EventBody::Inference {
        turn,
        origin,
        choice,
        model,
        stop_reason,
        duration_ms,
        error,
        ..
    } = body
    else {
        return None;
    };
    Some(HookCall {
        hook: origin.name().to_string(),
        turn: *turn,
        choice: crate::schema::choice_or_primary(choice).to_string(),
        model: model.clone(),
        stop_reason: *stop_reason,
        tokens: Tokens::of(body),
        duration_ms: *duration_ms,
        error: error.clone(),
    })
}

fn error_detail(error: &ErrorRef) -> String {
    format!("{}: {}", error.code, error.message)
}

/// The row of a `tool_call`, `shell` or `call_denied` event, with its task and turn.
fn call_row(body: &EventBody, redundant: bool) -> Option<(&str, CallRow)> {
    match body {
        EventBody::ToolCall {
            task_id,
            turn,
            call_id,
            tool_name,
            status,
            state_effect,
            resource_id,
            input_path,
            output_bytes,
            duration_ms,
            summary,
            error,
            ..
        } => Some((
            task_id,
            CallRow {
                kind: CallKind::Tool,
                turn: *turn,
                call_id: call_id.clone(),
                tool_name: tool_name.clone(),
                status: status.to_string(),
                state_effect: state_effect.clone(),
                resource_id: resource_id.clone(),
                input_path: input_path.clone(),
                output_bytes: *output_bytes,
                duration_ms: *duration_ms,
                redundant,
                // Why a call failed: the runtime's error, else the tool's own summary.
                detail: error.as_ref().map(error_detail).or_else(|| {
                    (*status != CallStatus::Passed)
                        .then(|| summary.clone())
                        .flatten()
                }),
            },
        )),
        EventBody::Shell {
            task_id,
            turn,
            call_id,
            command,
            exit_code,
            stdout_bytes,
            stderr_bytes,
            timed_out,
            duration_ms,
            error,
            ..
        } => Some((
            task_id,
            CallRow {
                kind: CallKind::Shell,
                turn: *turn,
                call_id: call_id.clone(),
                tool_name: "shell".to_string(),
                status: shell_status(*exit_code, *timed_out, error.as_ref()).to_string(),
                state_effect: None,
                resource_id: None,
                input_path: None,
                output_bytes: stdout_bytes.saturating_add(*stderr_bytes),
                duration_ms: *duration_ms,
                redundant: false,
                detail: Some(match (error, timed_out, exit_code) {
                    (Some(error), _, _) => format!("{command} ({})", error_detail(error)),
                    (None, true, _) => format!("{command} (timed out)"),
                    (None, false, Some(code)) => format!("{command} (exit {code})"),
                    (None, false, None) => format!("{command} (no exit code)"),
                }),
            },
        )),
        EventBody::SkillCall {
            task_id,
            turn,
            call_id,
            skill,
            version,
            output_bytes,
            ..
        } => Some((
            task_id,
            CallRow {
                kind: CallKind::Skill,
                turn: *turn,
                call_id: call_id.clone(),
                tool_name: skill.clone(),
                status: "passed".to_string(),
                state_effect: None,
                resource_id: None,
                input_path: None,
                output_bytes: *output_bytes,
                duration_ms: 0,
                redundant: false,
                detail: Some(format!("skill {skill} {version}")),
            },
        )),
        EventBody::CallDenied {
            task_id,
            turn,
            call_id,
            target,
            hook,
            reason,
            ..
        } => Some((
            task_id,
            CallRow {
                kind: CallKind::Denied,
                turn: *turn,
                call_id: call_id.clone(),
                tool_name: target.clone(),
                status: "denied".to_string(),
                state_effect: None,
                resource_id: None,
                input_path: None,
                output_bytes: 0,
                duration_ms: 0,
                redundant: false,
                detail: Some(format!("denied by hook `{hook}`: {reason}")),
            },
        )),
        _ => None,
    }
}

/// `mur trace show`: every task with its turns and their calls, hooks' calls, compactions,
/// the totals and the redundant reads.
pub fn show(events: &[Event]) -> Show {
    let redundant = redundant_with_index(events);
    let redundant_events: HashSet<usize> = redundant.iter().map(|(index, _)| *index).collect();
    let mut tasks: InOrder<TaskView> = InOrder::new();
    let mut started_at: HashMap<String, u64> = HashMap::new();
    // An agent turn's event id → (task position, turn position).
    let mut turn_of_event: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut session_hook_calls = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match &event.body {
            EventBody::TaskStart {
                task_id,
                context_id,
                source,
                input_sha256,
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, TaskView::new);
                task.source = Some(source.clone());
                task.context_id = context_id.clone();
                task.input_sha256 = non_empty(input_sha256);
                started_at.insert(task_id.clone(), event.timestamp);
            }
            EventBody::Inference {
                task_id,
                turn,
                choice,
                driver,
                model,
                decision,
                stop_reason,
                duration_ms,
                error,
                ..
            } => {
                let Some(task_id) = task_id else {
                    session_hook_calls.extend(hook_call(&event.body));
                    continue;
                };
                let (position, task) = tasks.get_or_add(task_id, TaskView::new);
                if !is_agent_turn(&event.body) {
                    task.hook_calls.extend(hook_call(&event.body));
                    continue;
                }
                task.turns.push(TurnRow {
                    turn: *turn,
                    choice: crate::schema::choice_or_primary(choice).to_string(),
                    driver: driver.clone(),
                    model: model.clone(),
                    decision: *decision,
                    stop_reason: *stop_reason,
                    tools: Vec::new(),
                    tokens: Tokens::of(&event.body),
                    duration_ms: *duration_ms,
                    error: error.clone(),
                    calls: Vec::new(),
                });
                turn_of_event.insert(&event.event_id, (position, task.turns.len() - 1));
            }
            EventBody::ToolCall { .. }
            | EventBody::Shell { .. }
            | EventBody::SkillCall { .. }
            | EventBody::CallDenied { .. } => {
                let Some((task_id, row)) = call_row(&event.body, redundant_events.contains(&index))
                else {
                    continue;
                };
                let by_parent = event
                    .parent_id
                    .as_deref()
                    .and_then(|parent| turn_of_event.get(parent))
                    .filter(|(position, _)| tasks.items[*position].task_id == task_id)
                    .copied();
                let (_, task) = tasks.get_or_add(task_id, TaskView::new);
                let turn_index = by_parent.map(|(_, turn)| turn).or_else(|| {
                    task.turns
                        .iter()
                        .rposition(|candidate| candidate.turn == row.turn)
                });
                match turn_index.and_then(|turn| task.turns.get_mut(turn)) {
                    Some(turn) => {
                        if row.kind != CallKind::Denied {
                            turn.tools.push(row.tool_name.clone());
                        }
                        turn.calls.push(row);
                    }
                    None => task.calls_outside_turns.push(row),
                }
            }
            EventBody::Compaction {
                task_id,
                turn,
                hook,
                tokens_before,
                tokens_after,
                messages_before,
                messages_after,
                duration_ms,
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, TaskView::new);
                task.compactions.push(CompactionRow {
                    turn: *turn,
                    hook: hook.clone(),
                    tokens_before: *tokens_before,
                    tokens_after: *tokens_after,
                    messages_before: *messages_before,
                    messages_after: *messages_after,
                    duration_ms: *duration_ms,
                });
            }
            EventBody::TaskEnd {
                task_id,
                exit_status,
                reopen_count,
                error,
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, TaskView::new);
                task.exit_status = Some(*exit_status);
                task.reopen_count = Some(*reopen_count);
                task.error = error.clone();
                task.duration_ms = started_at
                    .get(task_id)
                    .map(|start| event.timestamp.saturating_sub(*start));
            }
            _ => {}
        }
    }
    let (totals, totals_from) = totals(events);
    Show {
        session: session_summary(events),
        tasks: tasks.items,
        session_hook_calls,
        totals,
        totals_from,
        redundant_calls: redundant.into_iter().map(|(_, call)| call).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// report

/// The agent loop's calls of one driver choice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChoiceReport {
    pub choice: String,
    pub driver: String,
    pub model: String,
    pub calls: u32,
    #[serde(flatten)]
    pub tokens: Tokens,
    pub duration_ms: u64,
    /// Whether the driver's `input_tokens_actual` include the cached tokens (OpenAI) or not
    /// (Anthropic: a driver whose name contains `anthropic`).
    pub input_includes_cached: bool,
    /// `Σ cached / Σ prompt` over [`ChoiceReport::cache_ratio_calls`] (see the module's
    /// formula); absent when no call reported both counts.
    pub cache_hit_ratio: Option<f64>,
    /// The calls that reported both `input_tokens_actual` and `cached_tokens_actual`.
    pub cache_ratio_calls: u32,
}

/// One tool's calls (the model's shell tool as `shell`; a skill by its name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolReport {
    pub tool_name: String,
    /// Calls made, plus those a hook denied.
    pub calls: u32,
    pub passed: u32,
    /// Status `failed` or `error` (a shell call: another exit code, the time limit, not run).
    pub failed: u32,
    /// Not run: unknown tool or invalid input.
    pub refused: u32,
    /// Not made: a hook denied them.
    pub denied: u32,
    pub duration_ms: u64,
    pub output_bytes: u64,
    pub redundant_reads: u32,
}

/// One hook's share: its inference calls, compactions, dispatch errors, denials, reopens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookReport {
    pub hook: String,
    pub inference_calls: u32,
    #[serde(flatten)]
    pub tokens: Tokens,
    pub inference_duration_ms: u64,
    pub compactions: u32,
    pub compaction_duration_ms: u64,
    pub dispatch_errors: u32,
    pub denials: u32,
    pub reopens: u32,
}

/// `mur trace report`: one session's cost and cache figures per choice, tool and hook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub session: SessionSummary,
    /// The agent loop's calls by choice, in order of first use. With the hooks' calls they add
    /// up to the totals.
    pub choices: Vec<ChoiceReport>,
    pub tools: Vec<ToolReport>,
    pub hooks: Vec<HookReport>,
    pub totals: Totals,
    pub totals_from: TotalsFrom,
    pub redundant_reads: u32,
}

/// Whether `driver` reports `input_tokens` with the cached tokens left out (Anthropic).
pub fn input_excludes_cached(driver: &str) -> bool {
    driver.to_ascii_lowercase().contains("anthropic")
}

/// The prompt tokens of one call (for the cache hit ratio), when it reported both the input
/// and the cached counts.
fn prompt_tokens(driver: &str, tokens: &Tokens) -> Option<(u64, u64)> {
    let input = tokens.input_tokens_actual?;
    let cached = tokens.cached_tokens_actual?;
    let prompt = if input_excludes_cached(driver) {
        input
            .saturating_add(cached)
            .saturating_add(tokens.cache_write_tokens_actual.unwrap_or(0))
    } else {
        input
    };
    Some((cached, prompt))
}

#[derive(Default)]
struct RatioSums {
    cached: u64,
    prompt: u64,
    calls: u32,
}

/// `mur trace report`.
pub fn report(events: &[Event]) -> Report {
    let mut choices: InOrder<(ChoiceReport, RatioSums)> = InOrder::new();
    let mut tools: InOrder<ToolReport> = InOrder::new();
    let mut hooks: InOrder<HookReport> = InOrder::new();
    let new_tool = |name: &str| ToolReport {
        tool_name: name.to_string(),
        calls: 0,
        passed: 0,
        failed: 0,
        refused: 0,
        denied: 0,
        duration_ms: 0,
        output_bytes: 0,
        redundant_reads: 0,
    };
    let new_hook = |name: &str| HookReport {
        hook: name.to_string(),
        inference_calls: 0,
        tokens: Tokens::default(),
        inference_duration_ms: 0,
        compactions: 0,
        compaction_duration_ms: 0,
        dispatch_errors: 0,
        denials: 0,
        reopens: 0,
    };
    let redundant = redundant_calls(events);
    for event in events {
        match &event.body {
            EventBody::Inference {
                task_id,
                origin,
                choice,
                driver,
                model,
                duration_ms,
                ..
            } => {
                if task_id.is_none() || origin.hook().is_some() {
                    let name = origin.name();
                    let (_, hook) = hooks.get_or_add(name, new_hook);
                    hook.inference_calls = hook.inference_calls.saturating_add(1);
                    hook.tokens.add(&event.body);
                    hook.inference_duration_ms =
                        hook.inference_duration_ms.saturating_add(*duration_ms);
                    continue;
                }
                let choice = crate::schema::choice_or_primary(choice);
                let (_, (report, ratio)) = choices.get_or_add(choice, |name| {
                    (
                        ChoiceReport {
                            choice: name.to_string(),
                            driver: driver.clone(),
                            model: model.clone(),
                            calls: 0,
                            tokens: Tokens::default(),
                            duration_ms: 0,
                            input_includes_cached: !input_excludes_cached(driver),
                            cache_hit_ratio: None,
                            cache_ratio_calls: 0,
                        },
                        RatioSums::default(),
                    )
                });
                report.calls = report.calls.saturating_add(1);
                report.tokens.add(&event.body);
                report.duration_ms = report.duration_ms.saturating_add(*duration_ms);
                if let Some((cached, prompt)) = prompt_tokens(driver, &Tokens::of(&event.body)) {
                    ratio.cached = ratio.cached.saturating_add(cached);
                    ratio.prompt = ratio.prompt.saturating_add(prompt);
                    ratio.calls = ratio.calls.saturating_add(1);
                }
            }
            EventBody::ToolCall {
                tool_name,
                status,
                output_bytes,
                duration_ms,
                ..
            } => {
                let (_, tool) = tools.get_or_add(tool_name, new_tool);
                tool.calls = tool.calls.saturating_add(1);
                match status.as_str() {
                    "passed" => tool.passed = tool.passed.saturating_add(1),
                    "refused" => tool.refused = tool.refused.saturating_add(1),
                    _ => tool.failed = tool.failed.saturating_add(1),
                }
                tool.duration_ms = tool.duration_ms.saturating_add(*duration_ms);
                tool.output_bytes = tool.output_bytes.saturating_add(*output_bytes);
            }
            EventBody::Shell {
                exit_code,
                timed_out,
                error,
                stdout_bytes,
                stderr_bytes,
                duration_ms,
                ..
            } => {
                let (_, tool) = tools.get_or_add("shell", new_tool);
                tool.calls = tool.calls.saturating_add(1);
                if shell_status(*exit_code, *timed_out, error.as_ref()) == "passed" {
                    tool.passed = tool.passed.saturating_add(1);
                } else {
                    tool.failed = tool.failed.saturating_add(1);
                }
                tool.duration_ms = tool.duration_ms.saturating_add(*duration_ms);
                tool.output_bytes = tool
                    .output_bytes
                    .saturating_add(stdout_bytes.saturating_add(*stderr_bytes));
            }
            EventBody::SkillCall {
                skill,
                output_bytes,
                ..
            } => {
                let (_, tool) = tools.get_or_add(skill, new_tool);
                tool.calls = tool.calls.saturating_add(1);
                tool.passed = tool.passed.saturating_add(1);
                tool.output_bytes = tool.output_bytes.saturating_add(*output_bytes);
            }
            EventBody::CallDenied { target, hook, .. } => {
                let (_, tool) = tools.get_or_add(target, new_tool);
                tool.calls = tool.calls.saturating_add(1);
                tool.denied = tool.denied.saturating_add(1);
                let (_, hook) = hooks.get_or_add(hook, new_hook);
                hook.denials = hook.denials.saturating_add(1);
            }
            EventBody::Compaction {
                hook, duration_ms, ..
            } => {
                let (_, hook) = hooks.get_or_add(hook, new_hook);
                hook.compactions = hook.compactions.saturating_add(1);
                hook.compaction_duration_ms =
                    hook.compaction_duration_ms.saturating_add(*duration_ms);
            }
            EventBody::HookDispatchError { hook, .. } => {
                let (_, hook) = hooks.get_or_add(hook, new_hook);
                hook.dispatch_errors = hook.dispatch_errors.saturating_add(1);
            }
            EventBody::TaskReopened { hook, .. } => {
                let (_, hook) = hooks.get_or_add(hook, new_hook);
                hook.reopens = hook.reopens.saturating_add(1);
            }
            _ => {}
        }
    }
    for call in &redundant {
        let (_, tool) = tools.get_or_add(&call.tool_name, new_tool);
        tool.redundant_reads = tool.redundant_reads.saturating_add(1);
    }
    let choices = choices
        .items
        .into_iter()
        .map(|(mut report, ratio)| {
            report.cache_ratio_calls = ratio.calls;
            report.cache_hit_ratio = (ratio.calls > 0 && ratio.prompt > 0)
                .then(|| ratio.cached as f64 / ratio.prompt as f64);
            report
        })
        .collect();
    let (totals, totals_from) = totals(events);
    Report {
        session: session_summary(events),
        choices,
        tools: tools.items,
        hooks: hooks.items,
        totals,
        totals_from,
        redundant_reads: u32::try_from(redundant.len()).unwrap_or(u32::MAX),
    }
}

// ---------------------------------------------------------------------------------------------
// diff

/// A value in session A and in session B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change<T> {
    pub a: T,
    pub b: T,
    pub changed: bool,
}

impl<T: PartialEq> Change<T> {
    fn of(a: T, b: T) -> Change<T> {
        let changed = a != b;
        Change { a, b, changed }
    }
}

/// A number in A and in B, and `b - a` when both are there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NumberChange {
    pub a: Option<u64>,
    pub b: Option<u64>,
    pub delta: Option<i64>,
}

impl NumberChange {
    fn of(a: Option<u64>, b: Option<u64>) -> NumberChange {
        let delta = match (a, b) {
            (Some(a), Some(b)) => {
                let delta = i128::from(b) - i128::from(a);
                Some(i64::try_from(delta).unwrap_or(if delta < 0 { i64::MIN } else { i64::MAX }))
            }
            _ => None,
        };
        NumberChange { a, b, delta }
    }

    fn both(a: u64, b: u64) -> NumberChange {
        NumberChange::of(Some(a), Some(b))
    }
}

/// Token figures in A and in B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokensChange {
    pub input_tokens_estimated: NumberChange,
    pub output_tokens_estimated: NumberChange,
    pub input_tokens_actual: NumberChange,
    pub output_tokens_actual: NumberChange,
    pub cached_tokens_actual: NumberChange,
    pub cache_write_tokens_actual: NumberChange,
}

impl TokensChange {
    fn of(a: &Tokens, b: &Tokens) -> TokensChange {
        TokensChange {
            input_tokens_estimated: NumberChange::both(
                a.input_tokens_estimated,
                b.input_tokens_estimated,
            ),
            output_tokens_estimated: NumberChange::both(
                a.output_tokens_estimated,
                b.output_tokens_estimated,
            ),
            input_tokens_actual: NumberChange::of(a.input_tokens_actual, b.input_tokens_actual),
            output_tokens_actual: NumberChange::of(a.output_tokens_actual, b.output_tokens_actual),
            cached_tokens_actual: NumberChange::of(a.cached_tokens_actual, b.cached_tokens_actual),
            cache_write_tokens_actual: NumberChange::of(
                a.cache_write_tokens_actual,
                b.cache_write_tokens_actual,
            ),
        }
    }
}

/// One task of one session, as the diff compares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskSide {
    pub task_id: String,
    pub source: Option<String>,
    pub input_sha256: Option<String>,
    /// The agent loop's turns.
    pub turns: u32,
    /// The tools called (tool calls, shell calls and skill calls), in order.
    pub tool_sequence: Vec<String>,
    /// Every inference call of the task, the agent's and its hooks'.
    pub tokens: Tokens,
    pub exit_status: Option<ExitStatus>,
    pub duration_ms: Option<u64>,
}

/// The tasks at one position in A and in B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskDiff {
    /// 1-based: tasks are matched by their order in each session.
    pub position: usize,
    pub a: Option<TaskSide>,
    pub b: Option<TaskSide>,
    /// Whether the input hashes differ (or one side has no task here, or no hash).
    pub input_changed: bool,
    pub turns: NumberChange,
    pub tool_sequence_changed: bool,
    pub tokens: TokensChange,
    pub exit_status: Change<Option<ExitStatus>>,
    pub duration_ms: NumberChange,
}

/// `mur trace diff A B`: what changed from session A to session B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub a: SessionSummary,
    pub b: SessionSummary,
    /// Things worth knowing before reading the rest (the capsules' names differ).
    pub warnings: Vec<String>,
    pub capsule: Change<String>,
    pub capsule_version: Change<String>,
    pub system_prompt_sha256: Change<Option<String>>,
    pub model: Change<Option<String>>,
    pub driver: Change<Option<String>>,
    /// Tools offered in B and not in A, and in A and not in B (sorted).
    pub tools_added: Vec<String>,
    pub tools_removed: Vec<String>,
    pub tasks: Vec<TaskDiff>,
    /// The agent loop's turns over every task.
    pub turns: NumberChange,
    /// Tool calls, shell calls and skill calls.
    pub tool_calls: NumberChange,
    pub tokens: TokensChange,
    /// The session's `exit_status` (absent: no `session_end`).
    pub exit_status: Change<Option<ExitStatus>>,
    pub duration_ms: NumberChange,
}

fn task_sides(events: &[Event]) -> Vec<TaskSide> {
    let mut tasks: InOrder<TaskSide> = InOrder::new();
    let mut started_at: HashMap<&str, u64> = HashMap::new();
    let new_side = |task_id: &str| TaskSide {
        task_id: task_id.to_string(),
        source: None,
        input_sha256: None,
        turns: 0,
        tool_sequence: Vec::new(),
        tokens: Tokens::default(),
        exit_status: None,
        duration_ms: None,
    };
    for event in events {
        match &event.body {
            EventBody::TaskStart {
                task_id,
                source,
                input_sha256,
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.source = Some(source.clone());
                task.input_sha256 = non_empty(input_sha256);
                started_at.insert(task_id, event.timestamp);
            }
            EventBody::Inference {
                task_id: Some(task_id),
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.tokens.add(&event.body);
                if is_agent_turn(&event.body) {
                    task.turns = task.turns.saturating_add(1);
                }
            }
            EventBody::ToolCall {
                task_id, tool_name, ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.tool_sequence.push(tool_name.clone());
            }
            EventBody::Shell { task_id, .. } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.tool_sequence.push("shell".to_string());
            }
            EventBody::SkillCall { task_id, skill, .. } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.tool_sequence.push(skill.clone());
            }
            EventBody::TaskEnd {
                task_id,
                exit_status,
                ..
            } => {
                let (_, task) = tasks.get_or_add(task_id, new_side);
                task.exit_status = Some(*exit_status);
                task.duration_ms = started_at
                    .get(task_id.as_str())
                    .map(|start| event.timestamp.saturating_sub(*start));
            }
            _ => {}
        }
    }
    tasks.items
}

fn totals_tokens(totals: &Totals) -> Tokens {
    Tokens {
        input_tokens_estimated: totals.input_tokens_estimated,
        output_tokens_estimated: totals.output_tokens_estimated,
        input_tokens_actual: totals.input_tokens_actual,
        output_tokens_actual: totals.output_tokens_actual,
        cached_tokens_actual: totals.cached_tokens_actual,
        cache_write_tokens_actual: totals.cache_write_tokens_actual,
    }
}

/// `mur trace diff A B`: what changed from session A to session B. Sessions of two capsules
/// are compared all the same, with a warning.
pub fn diff(a_events: &[Event], b_events: &[Event]) -> Diff {
    let a = session_summary(a_events);
    let b = session_summary(b_events);
    let mut warnings = Vec::new();
    if a.capsule != b.capsule {
        warnings.push(format!(
            "the sessions ran two capsules (`{}` and `{}`): the comparison may mean little",
            a.capsule, b.capsule
        ));
    }
    for (side, summary) in [("A", &a), ("B", &b)] {
        if !summary.ended {
            warnings.push(format!(
                "session {side} ({}) has {NO_SESSION_END}",
                summary.session_id
            ));
        }
    }
    let a_tools: BTreeSet<&String> = a.tools.iter().collect();
    let b_tools: BTreeSet<&String> = b.tools.iter().collect();
    let a_tasks = task_sides(a_events);
    let b_tasks = task_sides(b_events);
    let tasks = (0..a_tasks.len().max(b_tasks.len()))
        .map(|index| {
            let a_task = a_tasks.get(index);
            let b_task = b_tasks.get(index);
            let empty = Tokens::default();
            TaskDiff {
                position: index + 1,
                input_changed: match (a_task, b_task) {
                    (Some(a_task), Some(b_task)) => {
                        a_task.input_sha256.is_none() || a_task.input_sha256 != b_task.input_sha256
                    }
                    _ => true,
                },
                turns: NumberChange::of(
                    a_task.map(|t| u64::from(t.turns)),
                    b_task.map(|t| u64::from(t.turns)),
                ),
                tool_sequence_changed: a_task.map(|t| &t.tool_sequence)
                    != b_task.map(|t| &t.tool_sequence),
                tokens: TokensChange::of(
                    a_task.map_or(&empty, |t| &t.tokens),
                    b_task.map_or(&empty, |t| &t.tokens),
                ),
                exit_status: Change::of(
                    a_task.and_then(|t| t.exit_status),
                    b_task.and_then(|t| t.exit_status),
                ),
                duration_ms: NumberChange::of(
                    a_task.and_then(|t| t.duration_ms),
                    b_task.and_then(|t| t.duration_ms),
                ),
                a: a_task.cloned(),
                b: b_task.cloned(),
            }
        })
        .collect();
    let (a_totals, _) = totals(a_events);
    let (b_totals, _) = totals(b_events);
    let tool_calls = |totals: &Totals| {
        u64::from(totals.tool_calls)
            .saturating_add(u64::from(totals.shell_calls))
            .saturating_add(u64::from(totals.skill_calls))
    };
    let turns = |tasks: &[TaskSide]| {
        tasks
            .iter()
            .fold(0u64, |sum, task| sum.saturating_add(u64::from(task.turns)))
    };
    Diff {
        warnings,
        capsule: Change::of(a.capsule.clone(), b.capsule.clone()),
        capsule_version: Change::of(a.capsule_version.clone(), b.capsule_version.clone()),
        system_prompt_sha256: Change::of(
            a.system_prompt_sha256.clone(),
            b.system_prompt_sha256.clone(),
        ),
        model: Change::of(a.model.clone(), b.model.clone()),
        driver: Change::of(a.driver.clone(), b.driver.clone()),
        tools_added: b_tools
            .difference(&a_tools)
            .map(|t| t.to_string())
            .collect(),
        tools_removed: a_tools
            .difference(&b_tools)
            .map(|t| t.to_string())
            .collect(),
        tasks,
        turns: NumberChange::both(turns(&a_tasks), turns(&b_tasks)),
        tool_calls: NumberChange::both(tool_calls(&a_totals), tool_calls(&b_totals)),
        tokens: TokensChange::of(&totals_tokens(&a_totals), &totals_tokens(&b_totals)),
        exit_status: Change::of(a.exit_status, b.exit_status),
        duration_ms: NumberChange::of(a.duration_ms, b.duration_ms),
        a,
        b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{CapsuleRef, Sent};

    const SESSION: &str = "ses_0123456789abcdef0123456789abcdef";

    /// Writes a session's trace as `trace.jsonl` text, event by event, the way the writer does
    /// (ids, parents, timestamps), and reads it back through [`parse`].
    struct Recorder {
        lines: Vec<String>,
        next_id: u64,
        clock: u64,
        session_event: String,
    }

    /// A tool call as a test writes it.
    struct Call<'a> {
        call_id: &'a str,
        tool: &'a str,
        status: CallStatus,
        state_effect: Option<&'a str>,
        resource_id: Option<&'a str>,
        input_path: Option<&'a str>,
    }

    fn read<'a>(call_id: &'a str, resource_id: &'a str) -> Call<'a> {
        Call {
            call_id,
            tool: "read-file",
            status: CallStatus::Passed,
            state_effect: Some("read"),
            resource_id: Some(resource_id),
            input_path: None,
        }
    }

    fn write<'a>(call_id: &'a str, resource_id: &'a str) -> Call<'a> {
        Call {
            call_id,
            tool: "write-file",
            status: CallStatus::Passed,
            state_effect: Some("mutate"),
            resource_id: Some(resource_id),
            input_path: None,
        }
    }

    fn inference(task_id: Option<&str>, turn: u32, origin: &str, tools: &[&str]) -> EventBody {
        EventBody::Inference {
            task_id: task_id.map(str::to_string),
            turn,
            origin: origin.parse().unwrap(),
            choice: None,
            driver: "driver-anthropic".to_string(),
            model: "test-model".to_string(),
            prompt_cache_key: "key".to_string(),
            sent: Sent {
                messages: 1,
                full_resend: true,
                continuation_id: None,
            },
            input_tokens_estimated: 100,
            output_tokens_estimated: 10,
            input_tokens_actual: None,
            output_tokens_actual: None,
            cached_tokens_actual: None,
            cache_write_tokens_actual: None,
            stop_reason: if tools.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolCall
            },
            decision: if tools.is_empty() {
                Decision::Finish
            } else {
                Decision::CallTools
            },
            tool_name: tools.first().map(|t| t.to_string()),
            tool_calls: tools.len() as u32,
            duration_ms: 5,
            error: None,
        }
    }

    impl Recorder {
        fn new() -> Recorder {
            Recorder::of_capsule("notes", &["read-file", "write-file"])
        }

        fn of_capsule(name: &str, tools: &[&str]) -> Recorder {
            let mut recorder = Recorder {
                lines: Vec::new(),
                next_id: 0,
                clock: 1_700_000_000_000,
                session_event: String::new(),
            };
            recorder.session_event = recorder.event(
                None,
                EventBody::SessionStart {
                    grants: Vec::new(),
                    capsule: CapsuleRef {
                        name: name.to_string(),
                        version: "0.1.0".to_string(),
                    },
                    murmur_version: "0.1.0".to_string(),
                    workdir: "/tmp/work".to_string(),
                    workspace: String::new(),
                    in_place: false,
                    record_layout: None,
                    model: "test-model".to_string(),
                    driver: "driver-anthropic".to_string(),
                    credential_source: "environment".to_string(),
                    components: Vec::new(),
                    tools: tools.iter().map(|t| t.to_string()).collect(),
                    containment: Value::Null,
                    inference_choices: None,
                    max_session_tokens: None,
                    system_prompt_sha256: "aaaa".to_string(),
                    manifest_sha256: String::new(),
                    resumed: None,
                    mcp_servers: Vec::new(),
                },
            );
            recorder
        }

        fn event(&mut self, parent: Option<&str>, body: EventBody) -> String {
            self.next_id += 1;
            self.clock += 10;
            let event = Event {
                session_id: SESSION.to_string(),
                timestamp: self.clock,
                event_id: format!("evt_{:032x}", self.next_id),
                parent_id: parent.map(str::to_string),
                body,
            };
            self.lines.push(serde_json::to_string(&event).unwrap());
            event.event_id
        }

        fn task(&mut self, task_id: &str, input: &str) -> String {
            let parent = self.session_event.clone();
            self.event(
                Some(&parent),
                EventBody::TaskStart {
                    task_id: task_id.to_string(),
                    context_id: Some(format!("ctx_{task_id}")),
                    source: "cli".to_string(),
                    input_chars: input.len() as u64,
                    input_sha256: murmur_registry::sha256_hex(input.as_bytes()),
                },
            )
        }

        /// An agent turn of `task_id` that calls `calls`; returns the turn's event id.
        fn turn(&mut self, task_event: &str, task_id: &str, turn: u32, calls: &[Call]) -> String {
            let tools: Vec<&str> = calls.iter().map(|c| c.tool).collect();
            let turn_event = self.event(
                Some(task_event),
                inference(Some(task_id), turn, "agent", &tools),
            );
            for call in calls {
                self.call(&turn_event, task_id, turn, call);
            }
            turn_event
        }

        fn call(&mut self, turn_event: &str, task_id: &str, turn: u32, call: &Call) {
            self.event(
                Some(turn_event),
                EventBody::ToolCall {
                    task_id: task_id.to_string(),
                    turn,
                    call_id: call.call_id.to_string(),
                    tool_name: call.tool.to_string(),
                    status: call.status,
                    is_error: call.status != CallStatus::Passed,
                    state_effect: call.state_effect.map(str::to_string),
                    resource_id: call.resource_id.map(str::to_string),
                    input_path: call.input_path.map(str::to_string),
                    output_bytes: 12,
                    duration_ms: 3,
                    summary: None,
                    error: None,
                    refusals: Vec::new(),
                },
            );
        }

        fn shell(&mut self, turn_event: &str, task_id: &str, turn: u32, exit_code: i32) {
            self.event(
                Some(turn_event),
                EventBody::Shell {
                    task_id: task_id.to_string(),
                    turn,
                    call_id: "call_sh".to_string(),
                    binary: "/usr/bin/touch".to_string(),
                    command: "touch notes.md".to_string(),
                    argv: vec!["touch".to_string(), "notes.md".to_string()],
                    script: None,
                    recipe: None,
                    exit_code: Some(exit_code),
                    stdout_bytes: 0,
                    stderr_bytes: 4,
                    truncated: false,
                    full_output_path: None,
                    timed_out: false,
                    duration_ms: 7,
                    error: None,
                    contained: None,
                },
            );
        }

        fn compaction(&mut self, task_event: &str, task_id: &str, turn: u32) {
            self.event(
                Some(task_event),
                EventBody::Compaction {
                    task_id: task_id.to_string(),
                    turn,
                    hook: "compactor".to_string(),
                    tokens_before: 9000,
                    tokens_after: 1000,
                    messages_before: 20,
                    messages_after: 2,
                    context_window: 10000,
                    threshold: 0.8,
                    duration_ms: 40,
                },
            );
        }

        fn end_task(
            &mut self,
            task_event: &str,
            task_id: &str,
            turns: u32,
            exit_status: ExitStatus,
        ) {
            self.event(
                Some(task_event),
                EventBody::TaskEnd {
                    task_id: task_id.to_string(),
                    context_id: Some(format!("ctx_{task_id}")),
                    exit_status,
                    turns,
                    reopen_count: 0,
                    result_path: None,
                    error: None,
                    changes: None,
                },
            );
        }

        /// Ends the session with the totals summed from the events so far.
        fn end_session(&mut self, exit_status: ExitStatus) {
            let (totals, _) = totals(&self.events());
            let parent = self.session_event.clone();
            self.event(
                Some(&parent),
                EventBody::SessionEnd {
                    exit_status,
                    duration_ms: 1234,
                    totals,
                    changes: None,
                    git: None,
                },
            );
        }

        fn text(&self) -> String {
            let mut text = self.lines.join("\n");
            text.push('\n');
            text
        }

        fn events(&self) -> Vec<Event> {
            parse(self.text().as_bytes(), Path::new("trace.jsonl"))
                .expect("a recorded trace")
                .events
        }
    }

    /// One task `tsk_1`, one turn per call, in order; the redundant reads' call ids.
    fn redundant_ids_of_turns(calls: Vec<Call>) -> Vec<String> {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "do it");
        for (turn, call) in calls.iter().enumerate() {
            recorder.turn(&task, "tsk_1", turn as u32 + 1, std::slice::from_ref(call));
        }
        redundant_ids(&recorder.events())
    }

    fn redundant_ids(events: &[Event]) -> Vec<String> {
        redundant_calls(events)
            .into_iter()
            .map(|call| call.call_id)
            .collect()
    }

    // --- loading ------------------------------------------------------------------------

    #[test]
    fn a_recorded_trace_loads_event_by_event() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[]);
        recorder.end_task(&task, "tsk_1", 1, ExitStatus::Ok);
        recorder.end_session(ExitStatus::Ok);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        std::fs::write(&path, recorder.text()).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.cut, None);
        let events = loaded.events;
        assert_eq!(events.len(), 5);
        assert_eq!(events[1].body.event_type(), "task_start");
    }

    #[test]
    fn a_cut_last_line_is_left_out_and_said() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[]);
        let whole = recorder.text();
        let cut_event = &recorder.lines[2][..40];
        for cut in [
            cut_event.to_string(),
            "{".to_string(),
            "\u{fffd}\"x".to_string(),
        ] {
            let text = format!("{whole}{cut}");
            let loaded = parse(text.as_bytes(), Path::new("t")).unwrap();
            assert_eq!(loaded.events.len(), 3);
            assert_eq!(
                loaded.cut,
                Some(CutLine {
                    line: 4,
                    bytes: cut.len()
                })
            );
        }
        // A whole last event without its newline is not cut.
        let loaded = parse(whole.trim_end().as_bytes(), Path::new("t")).unwrap();
        assert_eq!((loaded.events.len(), loaded.cut), (3, None));
        // A bad line that is not the last one is still an error.
        let text = format!("{whole}{{oops\n{}\n", recorder.lines[2]);
        let error = parse(text.as_bytes(), Path::new("t")).unwrap_err();
        assert!(
            matches!(error, LoadError::Malformed { line: 4, .. }),
            "{error:?}"
        );
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_the_file_and_line() {
        let mut text = Recorder::new().text();
        text.push_str("{\"event_type\": \"task_start\", oops\n");
        let error = parse(text.as_bytes(), Path::new("w/trace.jsonl")).unwrap_err();
        assert!(
            matches!(error, LoadError::Malformed { line: 2, .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with("w/trace.jsonl:2: not JSON"),
            "{message}"
        );
    }

    #[test]
    fn an_unknown_event_type_is_an_error_naming_it() {
        let mut recorder = Recorder::new();
        recorder.lines.push(
            r#"{"session_id":"s","timestamp":1,"event_id":"e","parent_id":null,"event_type":"teleport"}"#
                .to_string(),
        );
        let error = parse(recorder.text().as_bytes(), Path::new("t")).unwrap_err();
        assert_eq!(error.to_string(), "t:2: unknown event type `teleport`");
    }

    #[test]
    fn an_event_missing_a_field_is_an_error_naming_its_type() {
        let mut recorder = Recorder::new();
        recorder.lines.push(
            r#"{"session_id":"s","timestamp":1,"event_id":"e","parent_id":null,"event_type":"task_start"}"#
                .to_string(),
        );
        let error = parse(recorder.text().as_bytes(), Path::new("t")).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("t:2: a `task_start` event that does not fit its schema"),
            "{message}"
        );
    }

    #[test]
    fn lines_that_are_not_utf8_or_not_objects_are_errors() {
        let mut bytes = Recorder::new().text().into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n");
        let error = parse(&bytes, Path::new("t")).unwrap_err();
        assert!(
            matches!(error, LoadError::Malformed { line: 2, .. }),
            "{error:?}"
        );
        let text = format!("{}[1, 2]\n", Recorder::new().text());
        let error = parse(text.as_bytes(), Path::new("t")).unwrap_err();
        assert_eq!(error.to_string(), "t:2: not a JSON object");
        let text = format!("{}{{\"event_type\": 3}}\n", Recorder::new().text());
        let error = parse(text.as_bytes(), Path::new("t")).unwrap_err();
        assert_eq!(error.to_string(), "t:2: `event_type` is not a string");
    }

    #[test]
    fn an_empty_trace_and_one_without_session_start_are_errors() {
        assert!(matches!(
            parse(b"", Path::new("t")),
            Err(LoadError::Empty { .. })
        ));
        assert!(matches!(
            parse(b"\n  \n", Path::new("t")),
            Err(LoadError::Empty { .. })
        ));
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.end_task(&task, "tsk_1", 0, ExitStatus::Ok);
        let without_start = recorder.lines[1..].join("\n");
        assert!(matches!(
            parse(without_start.as_bytes(), Path::new("t")),
            Err(LoadError::NoSessionStart { .. })
        ));
    }

    #[test]
    fn a_missing_file_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let error = load(&dir.path().join("nothing.jsonl")).unwrap_err();
        assert!(matches!(error, LoadError::Unreadable { .. }), "{error:?}");
    }

    #[test]
    fn a_trace_without_session_end_loads_and_says_so() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[read("c1", "file:a")]);
        let events = recorder.events();
        let summary = session_summary(&events);
        assert!(!summary.ended);
        assert_eq!(summary.exit_status, None);
        assert_eq!(summary.note.as_deref(), Some(NO_SESSION_END));
        let (totals, from) = totals(&events);
        assert_eq!(from, TotalsFrom::Events);
        assert_eq!((totals.tasks, totals.turns, totals.tool_calls), (1, 1, 1));
        assert_eq!(show(&events).tasks[0].exit_status, None);
    }

    // --- redundancy rules ---------------------------------------------------------------

    #[test]
    fn a_repeated_read_is_redundant_and_names_the_read_it_repeats() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[read("c1", "file:notes.md")]);
        recorder.turn(&task, "tsk_1", 2, &[read("c2", "file:notes.md")]);
        let found = redundant_calls(&recorder.events());
        assert_eq!(
            found,
            vec![RedundantCall {
                task_id: "tsk_1".to_string(),
                turn: 2,
                call_id: "c2".to_string(),
                tool_name: "read-file".to_string(),
                key: "file:notes.md".to_string(),
                key_kind: KeyKind::ResourceId,
                repeats: EarlierCall {
                    turn: 1,
                    call_id: "c1".to_string(),
                    tool_name: "read-file".to_string(),
                },
            }]
        );
    }

    #[test]
    fn two_reads_in_one_turn_are_redundant_too() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(
            &task,
            "tsk_1",
            1,
            &[read("c1", "file:a"), read("c2", "file:a")],
        );
        assert_eq!(redundant_ids(&recorder.events()), ["c2"]);
    }

    #[test]
    fn a_mutate_between_two_reads_makes_the_second_fresh() {
        let ids = redundant_ids_of_turns(vec![
            read("c1", "file:a"),
            write("c2", "file:a"),
            read("c3", "file:a"),
        ]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn a_mutate_of_another_resource_is_no_barrier() {
        let ids = redundant_ids_of_turns(vec![
            read("c1", "file:a"),
            write("c2", "file:b"),
            read("c3", "file:a"),
        ]);
        assert_eq!(ids, ["c3"]);
    }

    #[test]
    fn a_read_with_neither_a_resource_id_nor_a_path_is_never_redundant() {
        let keyless = |id| Call {
            resource_id: None,
            input_path: None,
            ..read(id, "unused")
        };
        let ids = redundant_ids_of_turns(vec![keyless("c1"), keyless("c2"), keyless("c3")]);
        assert!(ids.is_empty(), "{ids:?}");
        // The same read with a path guessed from its input is one.
        let pathed = |id| Call {
            resource_id: None,
            input_path: Some("notes.md"),
            ..read(id, "unused")
        };
        assert_eq!(
            redundant_ids_of_turns(vec![pathed("c1"), pathed("c2")]),
            ["c2"]
        );
    }

    #[test]
    fn a_path_is_guessed_from_the_fields_that_name_one_in_their_order() {
        use crate::schema::input_path;
        for field in ["path", "file", "file_path", "filepath", "filename"] {
            assert_eq!(
                input_path(&serde_json::json!({ field: "a.md", "other": "b.md" })).as_deref(),
                Some("a.md"),
                "{field}"
            );
        }
        // The first that holds a string wins; other fields and other types name none.
        let input = serde_json::json!({"filename": "last.md", "file": "second.md", "path": 7});
        assert_eq!(input_path(&input).as_deref(), Some("second.md"));
        assert_eq!(
            input_path(&serde_json::json!({"name": "x.md", "target": "y"})),
            None
        );
        assert_eq!(input_path(&serde_json::json!("path")), None);
    }

    #[test]
    fn a_keyless_mutate_is_a_barrier_for_every_resource() {
        let mut mutate = write("c2", "x");
        mutate.resource_id = None;
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), mutate, read("c3", "file:a")]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn an_unknown_call_of_the_same_resource_is_a_barrier() {
        let unknown = Call {
            call_id: "c2",
            tool: "sed",
            status: CallStatus::Passed,
            state_effect: None,
            resource_id: Some("file:a"),
            input_path: None,
        };
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), unknown, read("c3", "file:a")]);
        assert!(ids.is_empty(), "{ids:?}");
        // Nor is an unknown call's path: it addresses the read's `input_path` key.
        let unknown_by_path = Call {
            call_id: "c2",
            tool: "sed",
            status: CallStatus::Passed,
            state_effect: None,
            resource_id: None,
            input_path: Some("a"),
        };
        let by_path = |call_id: &'static str| Call {
            call_id,
            tool: "cat",
            status: CallStatus::Passed,
            state_effect: Some("read"),
            resource_id: None,
            input_path: Some("a"),
        };
        let ids = redundant_ids_of_turns(vec![by_path("c1"), unknown_by_path, by_path("c3")]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn an_unknown_call_of_another_resource_is_no_barrier() {
        let unknown = Call {
            call_id: "c2",
            tool: "sed",
            status: CallStatus::Passed,
            state_effect: None,
            resource_id: Some("file:b"),
            input_path: None,
        };
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), unknown, read("c3", "file:a")]);
        assert_eq!(ids, ["c3"]);
    }

    #[test]
    fn a_keyless_unknown_call_is_a_barrier_for_every_resource() {
        let unknown = Call {
            call_id: "c2",
            tool: "fetch",
            status: CallStatus::Passed,
            state_effect: None,
            resource_id: None,
            input_path: None,
        };
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), unknown, read("c3", "file:a")]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn a_shell_call_between_is_a_barrier_for_every_resource() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[read("c1", "file:a")]);
        let turn = recorder.turn(&task, "tsk_1", 2, &[]);
        recorder.shell(&turn, "tsk_1", 2, 0);
        recorder.turn(&task, "tsk_1", 3, &[read("c3", "file:a")]);
        assert!(redundant_ids(&recorder.events()).is_empty());
    }

    #[test]
    fn a_compaction_between_resets_the_task() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[read("c1", "file:a")]);
        recorder.compaction(&task, "tsk_1", 2);
        recorder.turn(&task, "tsk_1", 2, &[read("c2", "file:a")]);
        recorder.turn(&task, "tsk_1", 3, &[read("c3", "file:a")]);
        // The read after the compaction is fresh; the one after it repeats it.
        assert_eq!(redundant_ids(&recorder.events()), ["c3"]);
    }

    #[test]
    fn reads_in_two_tasks_are_never_redundant() {
        let mut recorder = Recorder::new();
        let first = recorder.task("tsk_1", "x");
        recorder.turn(&first, "tsk_1", 1, &[read("c1", "file:a")]);
        recorder.end_task(&first, "tsk_1", 1, ExitStatus::Ok);
        let second = recorder.task("tsk_2", "y");
        recorder.turn(&second, "tsk_2", 1, &[read("c2", "file:a")]);
        assert!(redundant_ids(&recorder.events()).is_empty());
    }

    #[test]
    fn resource_ids_compare_byte_for_byte() {
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), read("c2", "file:./a")]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn without_a_resource_id_the_input_path_is_the_key() {
        let by_path = |call_id: &'static str, path: &'static str| Call {
            call_id,
            tool: "cat-file",
            status: CallStatus::Passed,
            state_effect: Some("read"),
            resource_id: None,
            input_path: Some(path),
        };
        let events = {
            let mut recorder = Recorder::new();
            let task = recorder.task("tsk_1", "x");
            recorder.turn(&task, "tsk_1", 1, &[by_path("c1", "notes.md")]);
            recorder.turn(&task, "tsk_1", 2, &[by_path("c2", "./notes.md")]);
            recorder.turn(&task, "tsk_1", 3, &[by_path("c3", "notes.md")]);
            recorder.events()
        };
        let found = redundant_calls(&events);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].call_id, "c3");
        assert_eq!(found[0].key, "notes.md");
        assert_eq!(found[0].key_kind, KeyKind::InputPath);
        assert_eq!(found[0].repeats.call_id, "c1");
    }

    #[test]
    fn a_resource_id_and_an_input_path_never_match_each_other() {
        let by_path = Call {
            call_id: "c2",
            tool: "cat-file",
            status: CallStatus::Passed,
            state_effect: Some("read"),
            resource_id: None,
            input_path: Some("file:a"),
        };
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), by_path]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn a_call_without_state_effect_is_never_redundant_even_repeated() {
        let unknown = |call_id: &'static str| Call {
            call_id,
            tool: "peek",
            status: CallStatus::Passed,
            state_effect: None,
            resource_id: Some("file:a"),
            input_path: Some("a"),
        };
        let ids = redundant_ids_of_turns(vec![unknown("c1"), unknown("c2"), unknown("c3")]);
        assert!(ids.is_empty(), "{ids:?}");
        // An unrecognized state_effect counts as none.
        let mut odd = read("c5", "file:a");
        odd.state_effect = Some("peek");
        let ids = redundant_ids_of_turns(vec![read("c4", "file:a"), odd]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn a_failed_first_read_does_not_count() {
        let mut failed = read("c1", "file:a");
        failed.status = CallStatus::Failed;
        let ids = redundant_ids_of_turns(vec![failed, read("c2", "file:a"), read("c3", "file:a")]);
        // c2 is the first read that counts; c3 repeats it.
        let found = {
            let mut failed = read("c1", "file:a");
            failed.status = CallStatus::Error;
            let mut recorder = Recorder::new();
            let task = recorder.task("tsk_1", "x");
            recorder.turn(&task, "tsk_1", 1, &[failed]);
            recorder.turn(&task, "tsk_1", 2, &[read("c2", "file:a")]);
            redundant_calls(&recorder.events())
        };
        assert_eq!(ids, ["c3"]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_failed_repeat_is_not_redundant() {
        let mut failed = read("c2", "file:a");
        failed.status = CallStatus::Failed;
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), failed]);
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn a_refused_call_did_not_run_and_is_no_barrier() {
        let refused = Call {
            call_id: "c2",
            tool: "no-such-tool",
            status: CallStatus::Refused,
            state_effect: None,
            resource_id: None,
            input_path: None,
        };
        let ids = redundant_ids_of_turns(vec![read("c1", "file:a"), refused, read("c3", "file:a")]);
        assert_eq!(ids, ["c3"]);
    }

    #[test]
    fn a_skill_call_is_shown_in_its_turn_and_changes_nothing() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        recorder.turn(&task, "tsk_1", 1, &[read("c1", "file:a")]);
        let turn = recorder.turn(&task, "tsk_1", 2, &[]);
        recorder.event(
            Some(&turn),
            EventBody::SkillCall {
                task_id: "tsk_1".to_string(),
                turn: 2,
                call_id: "c2".to_string(),
                skill: "style-guide".to_string(),
                version: "1.0.0".to_string(),
                sha256: "ffff".to_string(),
                output_bytes: 300,
            },
        );
        recorder.turn(&task, "tsk_1", 3, &[read("c3", "file:a")]);
        let events = recorder.events();
        assert_eq!(redundant_ids(&events), ["c3"]);
        let view = show(&events);
        let turn = &view.tasks[0].turns[1];
        assert_eq!(turn.tools, ["style-guide"]);
        assert_eq!(turn.calls[0].kind, CallKind::Skill);
        assert_eq!(turn.calls[0].output_bytes, 300);
        assert_eq!(totals(&events).0.skill_calls, 1);
        let skill = report(&events)
            .tools
            .into_iter()
            .find(|t| t.tool_name == "style-guide")
            .unwrap();
        assert_eq!((skill.calls, skill.passed, skill.output_bytes), (1, 1, 300));
    }

    // --- show ---------------------------------------------------------------------------

    #[test]
    fn show_puts_calls_under_their_turns_and_hook_calls_apart() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        let first = recorder.turn(
            &task,
            "tsk_1",
            1,
            &[write("c1", "file:a"), read("c2", "file:a")],
        );
        recorder.event(
            Some(&first),
            inference(Some("tsk_1"), 1, "hook:critic", &[]),
        );
        let second = recorder.turn(&task, "tsk_1", 2, &[read("c3", "file:a")]);
        recorder.shell(&second, "tsk_1", 2, 1);
        recorder.turn(&task, "tsk_1", 3, &[]);
        recorder.end_task(&task, "tsk_1", 3, ExitStatus::Ok);
        let session = recorder.session_event.clone();
        recorder.event(Some(&session), inference(None, 0, "hook:greeter", &[]));
        recorder.end_session(ExitStatus::Ok);
        let view = show(&recorder.events());

        assert_eq!(view.session.exit_status, Some(ExitStatus::Ok));
        assert_eq!(view.totals_from, TotalsFrom::SessionEnd);
        assert_eq!(view.tasks.len(), 1);
        let task = &view.tasks[0];
        assert_eq!(task.exit_status, Some(ExitStatus::Ok));
        assert_eq!(task.source.as_deref(), Some("cli"));
        let turns: Vec<(u32, &str, Vec<&str>)> = task
            .turns
            .iter()
            .map(|t| {
                (
                    t.turn,
                    t.decision.as_str(),
                    t.tools.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            turns,
            vec![
                (1, "call_tools", vec!["write-file", "read-file"]),
                (2, "call_tools", vec!["read-file", "shell"]),
                (3, "finish", vec![]),
            ]
        );
        let shell = &task.turns[1].calls[1];
        assert_eq!(
            (shell.kind, shell.status.as_str()),
            (CallKind::Shell, "failed")
        );
        assert_eq!(shell.output_bytes, 4);
        assert!(task.turns[1].calls[0].redundant);
        assert!(!task.turns[0].calls[1].redundant);
        assert_eq!(task.hook_calls.len(), 1);
        assert_eq!(task.hook_calls[0].hook, "critic");
        assert_eq!(view.session_hook_calls.len(), 1);
        assert_eq!(view.session_hook_calls[0].hook, "greeter");
        assert_eq!(view.redundant_calls.len(), 1);
        assert_eq!(view.redundant_calls[0].call_id, "c3");
    }

    #[test]
    fn show_keeps_an_unreported_count_absent_not_zero() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        let mut reported = inference(Some("tsk_1"), 1, "agent", &[]);
        if let EventBody::Inference {
            input_tokens_actual,
            cached_tokens_actual,
            ..
        } = &mut reported
        {
            *input_tokens_actual = Some(40);
            *cached_tokens_actual = Some(0);
        }
        recorder.event(Some(&task), reported);
        let view = show(&recorder.events());
        let row = &view.tasks[0].turns[0];
        assert_eq!(row.tokens.input_tokens_actual, Some(40));
        assert_eq!(row.tokens.cached_tokens_actual, Some(0));
        assert_eq!(row.tokens.output_tokens_actual, None);
        let json = serde_json::to_value(row).unwrap();
        assert_eq!(json["input_tokens_actual"], 40);
        assert_eq!(json["output_tokens_actual"], Value::Null);
        assert_eq!(json["cache_write_tokens_actual"], Value::Null);
        assert_eq!(view.totals.output_tokens_actual, None);
    }

    // --- report -------------------------------------------------------------------------

    fn with_usage(
        mut body: EventBody,
        set_choice: &str,
        set_driver: &str,
        usage: (Option<u64>, Option<u64>, Option<u64>),
    ) -> EventBody {
        if let EventBody::Inference {
            choice,
            driver,
            input_tokens_actual,
            cached_tokens_actual,
            cache_write_tokens_actual,
            ..
        } = &mut body
        {
            *choice = Some(set_choice.to_string());
            *driver = set_driver.to_string();
            *input_tokens_actual = usage.0;
            *cached_tokens_actual = usage.1;
            *cache_write_tokens_actual = usage.2;
        }
        body
    }

    #[test]
    fn the_cache_hit_ratio_follows_what_each_provider_counts_as_input() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        let agent = |turn| inference(Some("tsk_1"), turn, "agent", &[]);
        // Anthropic: input_tokens leave out the cache: prompt = 100 + 300 + 100 = 500.
        recorder.event(
            Some(&task),
            with_usage(
                agent(1),
                "primary",
                "driver-anthropic",
                (Some(100), Some(300), Some(100)),
            ),
        );
        // A call that reported no cached count does not enter the ratio.
        recorder.event(
            Some(&task),
            with_usage(
                agent(2),
                "primary",
                "driver-anthropic",
                (Some(100), None, None),
            ),
        );
        // OpenAI: input_tokens include the cached ones: prompt = 1000.
        recorder.event(
            Some(&task),
            with_usage(
                agent(3),
                "gpt",
                "driver-openai-chat",
                (Some(1000), Some(250), None),
            ),
        );
        // A choice that never reported: no ratio.
        recorder.event(
            Some(&task),
            with_usage(agent(4), "quiet", "driver-openai-chat", (None, None, None)),
        );
        let report = report(&recorder.events());
        let by_name = |name: &str| {
            report
                .choices
                .iter()
                .find(|c| c.choice == name)
                .unwrap()
                .clone()
        };
        let primary = by_name("primary");
        assert_eq!(primary.calls, 2);
        assert_eq!(primary.cache_ratio_calls, 1);
        assert_eq!(primary.cache_hit_ratio, Some(0.6));
        assert!(!primary.input_includes_cached);
        assert_eq!(primary.tokens.input_tokens_actual, Some(200));
        assert_eq!(primary.tokens.cached_tokens_actual, Some(300));
        let gpt = by_name("gpt");
        assert_eq!(gpt.cache_hit_ratio, Some(0.25));
        assert!(gpt.input_includes_cached);
        let quiet = by_name("quiet");
        assert_eq!(quiet.cache_hit_ratio, None);
        assert_eq!(quiet.tokens.input_tokens_actual, None);
        let json = serde_json::to_value(&quiet).unwrap();
        assert_eq!(json["cache_hit_ratio"], Value::Null);
    }

    #[test]
    fn report_counts_tools_and_hooks_apart_from_choices() {
        let mut recorder = Recorder::new();
        let task = recorder.task("tsk_1", "x");
        let mut failed = write("c2", "file:b");
        failed.status = CallStatus::Failed;
        let turn = recorder.turn(
            &task,
            "tsk_1",
            1,
            &[read("c1", "file:a"), failed, read("c3", "file:a")],
        );
        recorder.shell(&turn, "tsk_1", 1, 0);
        recorder.event(Some(&turn), inference(Some("tsk_1"), 1, "hook:critic", &[]));
        recorder.compaction(&task, "tsk_1", 2);
        recorder.event(
            Some(&task),
            EventBody::HookDispatchError {
                hook: "critic".to_string(),
                handler: "on-inference".to_string(),
                kind: "error".to_string(),
                message: "boom".to_string(),
                task_id: Some("tsk_1".to_string()),
            },
        );
        let report = report(&recorder.events());
        assert_eq!(report.choices.len(), 1);
        assert_eq!(report.choices[0].calls, 1);
        let tool = |name: &str| report.tools.iter().find(|t| t.tool_name == name).unwrap();
        let read_file = tool("read-file");
        assert_eq!(
            (read_file.calls, read_file.passed, read_file.failed),
            (2, 2, 0)
        );
        assert_eq!(read_file.redundant_reads, 1);
        assert_eq!(read_file.duration_ms, 6);
        assert_eq!(read_file.output_bytes, 24);
        assert_eq!((tool("write-file").failed, tool("shell").passed), (1, 1));
        let hook = |name: &str| report.hooks.iter().find(|h| h.hook == name).unwrap();
        let critic = hook("critic");
        assert_eq!((critic.inference_calls, critic.dispatch_errors), (1, 1));
        assert_eq!(critic.tokens.input_tokens_estimated, 100);
        assert_eq!(hook("compactor").compactions, 1);
        assert_eq!(hook("compactor").compaction_duration_ms, 40);
        // The choices and the hooks add up to the totals.
        assert_eq!(report.totals.turns, 2);
        assert_eq!(report.totals.input_tokens_estimated, 200);
    }

    // --- diff ---------------------------------------------------------------------------

    fn session_of(name: &str, input: &str, tools: &[&str], reads: usize) -> Vec<Event> {
        let mut recorder = Recorder::of_capsule(name, tools);
        let task = recorder.task("tsk_1", input);
        for turn in 0..reads {
            let call_id = format!("c{turn}");
            recorder.turn(&task, "tsk_1", turn as u32 + 1, &[read(&call_id, "file:a")]);
        }
        recorder.turn(&task, "tsk_1", reads as u32 + 1, &[]);
        recorder.end_task(&task, "tsk_1", reads as u32 + 1, ExitStatus::Ok);
        recorder.end_session(ExitStatus::Ok);
        recorder.events()
    }

    #[test]
    fn diff_tells_what_changed_between_two_sessions() {
        let a = session_of("notes", "Note: buy milk", &["read-file", "write-file"], 2);
        let b = session_of("notes", "Note: buy bread", &["read-file", "shell"], 1);
        let diff = diff(&a, &b);
        assert!(diff.warnings.is_empty(), "{:?}", diff.warnings);
        assert!(!diff.system_prompt_sha256.changed);
        assert!(!diff.model.changed);
        assert_eq!(diff.tools_added, ["shell"]);
        assert_eq!(diff.tools_removed, ["write-file"]);
        assert_eq!(diff.tasks.len(), 1);
        let task = &diff.tasks[0];
        assert!(task.input_changed);
        assert_eq!(
            task.turns,
            NumberChange {
                a: Some(3),
                b: Some(2),
                delta: Some(-1)
            }
        );
        assert!(task.tool_sequence_changed);
        assert_eq!(task.tokens.input_tokens_estimated.delta, Some(-100));
        assert_eq!(task.tokens.input_tokens_actual.delta, None);
        assert!(!task.exit_status.changed);
        assert_eq!(diff.turns.delta, Some(-1));
        assert_eq!(diff.tool_calls.delta, Some(-1));
        assert!(!diff.exit_status.changed);
    }

    #[test]
    fn diff_of_the_same_input_says_the_input_is_unchanged() {
        let a = session_of("notes", "same", &["read-file"], 1);
        let b = session_of("notes", "same", &["read-file"], 1);
        let diff = diff(&a, &b);
        assert!(!diff.tasks[0].input_changed);
        assert!(!diff.tasks[0].tool_sequence_changed);
        assert_eq!(diff.tasks[0].turns.delta, Some(0));
    }

    #[test]
    fn diff_of_two_capsules_warns_and_still_compares() {
        let a = session_of("notes", "x", &["read-file"], 1);
        let mut b_recorder = Recorder::of_capsule("other", &["read-file"]);
        let task = b_recorder.task("tsk_9", "x");
        b_recorder.turn(&task, "tsk_9", 1, &[]);
        let second = b_recorder.task("tsk_10", "y");
        b_recorder.turn(&second, "tsk_10", 1, &[]);
        let b = b_recorder.events();
        let diff = diff(&a, &b);
        assert!(diff.capsule.changed);
        assert_eq!(diff.warnings.len(), 2, "{:?}", diff.warnings);
        assert!(diff.warnings[0].contains("`notes` and `other`"));
        assert!(diff.warnings[1].contains("session B"));
        assert_eq!(diff.exit_status.b, None);
        assert_eq!(diff.tasks.len(), 2);
        assert!(diff.tasks[1].a.is_none());
        assert!(diff.tasks[1].input_changed);
        assert_eq!(diff.tasks[1].turns.delta, None);
    }

    #[test]
    fn a_sparse_16_gib_trace_is_refused_from_its_size_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let recorder = Recorder::new();
        std::fs::write(&path, recorder.text()).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(16 << 30)
            .unwrap();
        let started = std::time::Instant::now();
        let error = load(&path).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(
            error,
            LoadError::TooLarge {
                path: path.clone(),
                bytes: 16 << 30,
                limit: TRACE_MAX_BYTES
            }
        );
        assert!(error.to_string().contains("256 MiB"), "{error}");
        // Its first line still tells when the session started, read to one line only.
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(session_start_at(file), Some(1_700_000_000_010));
    }

    #[test]
    fn a_file_bigger_than_its_size_says_is_cut_at_the_bound() {
        // `/dev/zero` says it holds nothing and never ends.
        let error = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(matches!(
            error,
            LoadError::TooLarge { bytes, limit, .. } if bytes == (1 << 20) + 1 && limit == 1 << 20
        ));
    }

    #[test]
    fn a_first_line_is_read_to_its_bound_and_must_be_a_session_start() {
        let recorder = Recorder::new();
        let text = recorder.text();
        assert_eq!(session_start_at(text.as_bytes()), Some(1_700_000_000_010));
        // A first line of 5 MiB with no newline: cut at 4 MiB, so it is no event.
        let endless = std::io::repeat(b' ').take(5 << 20);
        assert_eq!(session_start_at(endless), None);
        let mut other = Recorder::new();
        let session_event = other.session_event.clone();
        other.lines.remove(0);
        other.event(
            Some(&session_event),
            EventBody::TaskReopened {
                task_id: "t".to_string(),
                hook: "h".to_string(),
                reopen_count: 1,
                feedback_chars: 0,
            },
        );
        assert_eq!(session_start_at(other.text().as_bytes()), None);
    }
}
