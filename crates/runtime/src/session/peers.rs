//! The runtime's peer tools: each named `peers:` entry is offered to the model as its tool
//! `ask-<name>`, the way `shell` and `switch-driver` are the runtime's own.
//!
//! What a capsule and its model can rely on:
//!
//! - **The input** is `{ "message": string (1 to 100,000 characters), "context": optional
//!   string, "task": optional string }`, nothing else; any other input is refused (`E-RUN-009`)
//!   before anything is sent. `context` goes on in the peer's context of an earlier call,
//!   `task` answers the peer's task that asked for input.
//! - **The description** the model reads is the manifest's `description`, else what the
//!   peer's agent card says ([`CardSeen`]), else "Ask the peer agent <name> at <url>.".
//! - **One path to the peer.** A call sends through the host's send path
//!   ([`crate::grants::message::ask`]): the capsule's `capabilities.network.allow` decides (a
//!   peer it does not permit is never contacted), the peer's credential is the host's, every
//!   request carries `x-murmur-task-origin: peer`, the calling task's trust and a
//!   `traceparent` naming its span. It streams when the card says the peer does, else polls
//!   `GetTask`, until the peer's task ends or asks for input, within
//!   `capabilities.limits.deadline_seconds` (300 s when unset).
//! - **The result.** Completed: the peer's answer (the text and data parts of its artifacts,
//!   else of its status message), at most [`ANSWER_LIMIT`] bytes (the rest cut, and the result
//!   says so), with the peer's task and context ids. Its file artifacts (inline bytes) are
//!   saved in the calling task's workspace under `peers/<name>/<task id>/<file name>` and
//!   listed: names are checked ([`file_name_refusal`]), links are never followed (the
//!   workspace is written beneath its directory), at most [`MAX_FILES`] files of
//!   [`MAX_FILE_BYTES`] each and [`MAX_FILES_BYTES`] in all; each file left out is named with
//!   why. A file the peer gives by URL is listed, not fetched.
//! - **A question** (the peer's task is `input-required` or `auth-required`) is a passed result
//!   that says so, with the peer's question and the `context` and `task` to call again with.
//!   A later call in that context that names no `task` answers the question (the session
//!   remembers, per peer and context, the task waiting for input).
//! - **A failure** (the peer's task failed, was rejected or canceled; the send was refused,
//!   went unanswered or passed the deadline) is a failed result naming why.
//! - A call whose task is canceled while it waits for the peer cancels the peer's task.
//! - **Record and replay.** Under `mur run --record` each call (its A2A request and the
//!   peer's settled task, files inline, or its failure) is kept in the cassette, scrubbed as
//!   the drivers' exchanges are; under `--replay` it is answered from there and the peer is
//!   not contacted, the call's `tool_call` event saying so ([`REPLAYED`]).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::grants::message::{
    AskFailure, FileContent, PartContent, PeerAsk, PeerLink, SendingTask, Task, TaskState, ask,
};
use crate::grants::{NetworkPolicy, tool_registry::schema_refusal};
use crate::inference::neutral::{Block, Message};
use crate::inference::request::ToolSpec;
use crate::session::Staged;
use crate::session::peer_cards::CardSeen;
use crate::session::staging::StagedPeer;
use crate::session::tools::{Dispatched, fence};
use murmur_beneath::BeneathDir;
use murmur_trace::schema::{CallStatus, ErrorRef, EventBody};

/// The most bytes of a peer's answer the model is given.
pub const ANSWER_LIMIT: usize = 64 * 1024;
/// The most files of one answer saved.
pub const MAX_FILES: usize = 32;
/// The largest file of an answer saved.
pub const MAX_FILE_BYTES: usize = 16 << 20;
/// The most bytes of files of one answer saved.
pub const MAX_FILES_BYTES: usize = 64 << 20;
/// How long a call may take when `capabilities.limits.deadline_seconds` is unset.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// The `summary` of a call's `tool_call` event when `mur run --replay` answered it from the
/// cassette, the peer not contacted.
pub const REPLAYED: &str = "replayed from the cassette: the peer was not contacted";
/// Where a peer's files land in the calling task's workspace.
pub const PEERS_DIR: &str = "peers";

/// A named peer as the model is offered it.
pub(crate) struct PeerTool {
    pub peer: StagedPeer,
    pub spec: ToolSpec,
    pub validator: jsonschema::Validator,
    /// Whether a call sends `SendStreamingMessage`.
    pub streaming: bool,
}

/// The session's peer tools and what their calls share.
pub(crate) struct PeerTools {
    pub tools: Vec<PeerTool>,
    link: PeerLink,
    deadline: Duration,
    /// By peer and context: the peer's task that waits for input there.
    waiting: std::sync::Mutex<std::collections::HashMap<(String, String), String>>,
}

impl PeerTools {
    /// The peer tools of `staged`, described and set to stream as `seen` says (a peer it does
    /// not name: the manifest's description or a plain sentence, no streaming).
    pub(crate) fn offered(staged: &Staged, seen: &[CardSeen]) -> PeerTools {
        let capabilities = &staged.capsule.capabilities;
        PeerTools {
            tools: staged
                .peer_tools
                .iter()
                .map(|peer| PeerTool::new(peer.clone(), seen.iter().find(|s| s.name == peer.name)))
                .collect(),
            link: PeerLink {
                policy: NetworkPolicy::allow(capabilities.network.allow.clone()),
                peers: staged.peers.clone(),
                cassette: staged.session_cassette(),
            },
            deadline: capabilities
                .limits
                .deadline_seconds
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_DEADLINE),
            waiting: Default::default(),
        }
    }

    /// The tool named `name`.
    pub(crate) fn named(&self, name: &str) -> Option<&PeerTool> {
        self.tools.iter().find(|tool| tool.spec.name == name)
    }

    /// The specs, in manifest order.
    pub(crate) fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|tool| &tool.spec)
    }
}

/// At session start: the session's peer tools, each peer's card held to its pin
/// ([`crate::session::peer_cards::check`]: a changed card, or one that cannot be read for a
/// peer the manifest does not describe, refuses the session), with the warnings to tell.
pub(crate) async fn start(
    staged: &Staged,
) -> Result<(PeerTools, Vec<murmur_manifest::Diagnostic>), crate::session::SessionError> {
    let (seen, warnings) = crate::session::peer_cards::check(staged).await?;
    Ok((PeerTools::offered(staged, &seen), warnings))
}

impl PeerTool {
    fn new(peer: StagedPeer, seen: Option<&CardSeen>) -> PeerTool {
        // The card check's account (the manifest's description, else the card's), else the
        // manifest's as staged.
        let about = seen
            .map(|seen| seen.description.clone())
            .or_else(|| peer.description.clone())
            .unwrap_or_else(|| format!("Ask the peer agent {} at {}.", peer.name, peer.url));
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "What to ask or tell the peer."},
                "context": {"type": "string", "description": "The peer's context id of an earlier call, to go on in the same conversation."},
                "task": {"type": "string", "description": "The peer's task id that asked for input: your message answers it (give its context too)."}
            },
            "required": ["message"],
            "additionalProperties": false
        });
        let validator =
            jsonschema::validator_for(&schema).expect("the peer tool's schema is valid");
        PeerTool {
            spec: ToolSpec {
                name: peer.tool_name.clone(),
                description: Some(format!(
                    "{about} The peer is another agent: it answers with text (and files, saved \
                     under {PEERS_DIR}/{}/ in your workspace), or asks you a question to answer \
                     by calling this tool again with the `context` and `task` it names.",
                    peer.name
                )),
                input_schema: schema,
            },
            streaming: seen.is_some_and(|seen| seen.streaming),
            validator,
            peer,
        }
    }

    /// The input's refusal by the tool's schema, if any.
    pub(crate) fn refusal(&self, input: &Value) -> Option<String> {
        schema_refusal(&self.spec.name, &self.validator, input)
    }

    /// Calls the peer with the model's `input` (already checked), as call `call_id` of turn
    /// `turn` of task `task_id`, saving its files beneath `workspace`.
    pub(crate) async fn call(
        &self,
        tools: &PeerTools,
        sender: &SendingTask,
        (task_id, turn, call_id): (&str, u32, &str),
        input: &Value,
        workspace: &BeneathDir,
    ) -> Dispatched {
        let started = Instant::now();
        let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_string);
        let context = text("context");
        let waiting = || tools.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let key = |context: &str| (self.peer.name.clone(), context.to_string());
        let task = text("task").or_else(|| {
            let context = context.as_deref()?;
            waiting().get(&key(context)).cloned()
        });
        let asked = ask(
            &tools.link,
            sender,
            PeerAsk {
                peer_url: self.peer.url.clone(),
                text: text("message").unwrap_or_default(),
                context_id: context,
                task_id: task,
                streaming: self.streaming,
                deadline: tools.deadline,
            },
        )
        .await;
        let replayed = asked.replayed;
        let sends = asked
            .sends
            .iter()
            .map(|send| send.event(Some(task_id.to_string())))
            .collect();
        let (text, status, error) = match asked.outcome {
            Ok(task) => {
                let mut waiting = waiting();
                if task.status.state.is_interrupted() {
                    waiting.insert(key(&task.context_id), task.id.clone());
                } else {
                    waiting.remove(&key(&task.context_id));
                }
                drop(waiting);
                self.answer(&task, workspace)
            }
            Err(AskFailure { code, message }) => (
                format!(
                    "error[{code}]: the peer `{}` was not asked: {message}",
                    self.peer.name
                ),
                CallStatus::Failed,
                Some(ErrorRef { code, message }),
            ),
        };
        let is_error = status != CallStatus::Passed;
        Dispatched {
            message: Message::Tool {
                tool_call_id: call_id.to_string(),
                is_error,
                content: vec![Block::Text {
                    text: fence(&self.spec.name, call_id, &text),
                }],
            },
            event: EventBody::ToolCall {
                task_id: task_id.to_string(),
                turn,
                call_id: call_id.to_string(),
                tool_name: self.spec.name.clone(),
                status,
                is_error,
                state_effect: Some("mutate".to_string()),
                resource_id: Some(self.peer.url.clone()),
                input_path: None,
                output_bytes: text.len() as u64,
                duration_ms: started.elapsed().as_millis() as u64,
                // A call answered from the cassette says so (the peer was not contacted).
                summary: replayed.then(|| REPLAYED.to_string()),
                error,
                refusals: Vec::new(),
            },
            sends,
        }
    }

    /// The result of the peer's settled `task`: the text the model gets, the call's status,
    /// and its error.
    fn answer(
        &self,
        task: &Task,
        workspace: &BeneathDir,
    ) -> (String, CallStatus, Option<ErrorRef>) {
        let name = &self.peer.name;
        let state = task.status.state;
        let said = task
            .status
            .message
            .as_ref()
            .map(|message| parts_text(message.parts.iter().map(|part| &part.content)))
            .unwrap_or_default();
        let ids = format!("task `{}`, context `{}`", task.id, task.context_id);
        match state {
            TaskState::InputRequired | TaskState::AuthRequired => {
                let asks = if state == TaskState::AuthRequired {
                    "asks you to authenticate"
                } else {
                    "asks for input"
                };
                let question = if said.is_empty() {
                    "(it gave no question)".to_string()
                } else {
                    cut(&said)
                };
                let again = serde_json::json!({
                    "message": "<your answer>",
                    "context": task.context_id,
                    "task": task.id,
                });
                (
                    format!(
                        "The peer `{name}` {asks} ({ids}):\n{question}\n\nTo answer it, call \
                         {} again with {again}.",
                        self.spec.name
                    ),
                    CallStatus::Passed,
                    None,
                )
            }
            TaskState::Completed => {
                let from_artifacts = parts_text(
                    task.artifacts
                        .iter()
                        .flat_map(|artifact| artifact.parts.iter().map(|part| &part.content)),
                );
                let answer = if from_artifacts.is_empty() {
                    said
                } else {
                    from_artifacts
                };
                let mut text = format!("The peer `{name}` answered ({ids}):\n{}", cut(&answer));
                let files = self.save_files(task, workspace);
                if !files.is_empty() {
                    text.push_str("\n\nFiles:\n");
                    text.push_str(&files.join("\n"));
                }
                (text, CallStatus::Passed, None)
            }
            _ => {
                let why = if said.is_empty() {
                    "it gave no reason".to_string()
                } else {
                    cut(&said)
                };
                let message = format!("the peer `{name}`'s task ended `{state}` ({ids}): {why}");
                (message.clone(), CallStatus::Failed, None)
            }
        }
    }

    /// Saves the file parts of `task`'s artifacts under `peers/<name>/<task id>/` beneath
    /// `workspace`; one line per file, saved or left out (with why).
    fn save_files(&self, task: &Task, workspace: &BeneathDir) -> Vec<String> {
        let mut lines = Vec::new();
        let files = task
            .artifacts
            .iter()
            .flat_map(|artifact| artifact.parts.iter().map(move |part| (artifact, part)))
            .filter_map(|(artifact, part)| match &part.content {
                PartContent::File(file) => Some((artifact, part, file)),
                _ => None,
            });
        let task_dir = match file_name_refusal(&task.id) {
            None => task.id.clone(),
            Some(why) => {
                if files.clone().next().is_some() {
                    lines.push(format!("- none saved: the peer's task id {why}"));
                }
                return lines;
            }
        };
        let (mut saved, mut total) = (0usize, 0usize);
        for (index, (artifact, part, file)) in files.enumerate() {
            let name = part
                .filename
                .clone()
                .or_else(|| artifact.name.clone())
                .unwrap_or_else(|| format!("file-{}", index + 1));
            let shown = name.escape_debug().to_string();
            let bytes = match file {
                FileContent::Uri(uri) => {
                    lines.push(format!("- `{shown}`: given by URL, not fetched: {uri}"));
                    continue;
                }
                FileContent::Bytes(bytes) => bytes,
            };
            let refused = file_name_refusal(&name)
                .or_else(|| {
                    (saved >= MAX_FILES)
                        .then(|| format!("is past the {MAX_FILES} files saved of one answer"))
                })
                .or_else(|| {
                    (bytes.len() > MAX_FILE_BYTES)
                        .then(|| format!("is larger than {} MiB", MAX_FILE_BYTES >> 20))
                })
                .or_else(|| {
                    (total + bytes.len() > MAX_FILES_BYTES).then(|| {
                        format!(
                            "would pass the {} MiB saved of one answer",
                            MAX_FILES_BYTES >> 20
                        )
                    })
                });
            if let Some(why) = refused {
                lines.push(format!("- `{shown}`: not saved: it {why}"));
                continue;
            }
            let path = format!("{PEERS_DIR}/{}/{task_dir}/{name}", self.peer.name);
            match workspace.write_whole(&path, bytes) {
                Ok(()) => {
                    saved += 1;
                    total += bytes.len();
                    lines.push(format!("- {path} ({} bytes)", bytes.len()));
                }
                Err(error) => lines.push(format!("- `{shown}`: not saved: {error}")),
            }
        }
        lines
    }
}

/// Why `name` cannot name a file a peer gives (`None`: it can): a relative path of 1 to 8
/// parts, each 1 to 255 bytes, none `.` or `..` or starting with a dot, with no `\`, NUL or
/// control character; 1,024 bytes at most in all.
pub fn file_name_refusal(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 1024 {
        return Some("is empty or longer than 1024 bytes".to_string());
    }
    if name.chars().any(|c| c == '\\' || c.is_control()) {
        return Some("holds a backslash or a control character".to_string());
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 8 {
        return Some("is deeper than 8 directories".to_string());
    }
    if parts
        .iter()
        .any(|part| part.is_empty() || part.starts_with('.') || part.len() > 255)
    {
        return Some(
            "is absolute, has an empty part, a part starting with a dot or one longer than 255 bytes"
                .to_string(),
        );
    }
    None
}

/// The text parts of `parts` (and their data parts as JSON), one per line.
fn parts_text<'a>(parts: impl Iterator<Item = &'a PartContent>) -> String {
    parts
        .filter_map(|content| match content {
            PartContent::Text(text) => Some(text.clone()),
            PartContent::Data(data) => Some(data.to_string()),
            PartContent::File(_) => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text`, at most [`ANSWER_LIMIT`] bytes (cut at a character's boundary, the cut said).
fn cut(text: &str) -> String {
    if text.len() <= ANSWER_LIMIT {
        return text.to_string();
    }
    let mut end = ANSWER_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[the peer's answer was {} bytes; the first {end} are shown, the rest is cut]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn file_names_that_could_leave_the_directory_or_hide_are_refused() {
        for good in ["report.md", "out/data.csv", "a b.txt", "é.txt"] {
            assert_eq!(file_name_refusal(good), None, "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            ".hidden",
            "a/.git/config",
            "a//b",
            "a\\b",
            "a\0b",
            "a\nb",
            "a/",
        ] {
            assert!(file_name_refusal(bad).is_some(), "{bad:?}");
        }
        assert!(file_name_refusal(&"a/".repeat(9)).is_some());
        assert!(file_name_refusal(&"x".repeat(256)).is_some());
    }

    #[test]
    fn a_long_answer_is_cut_at_a_character_and_says_so() {
        let long = "é".repeat(ANSWER_LIMIT);
        let shown = cut(&long);
        assert!(shown.len() < ANSWER_LIMIT + 200);
        assert!(shown.contains(&format!("was {} bytes", long.len())));
        assert_eq!(cut("short"), "short");
    }

    proptest! {
        #[test]
        fn an_accepted_name_stays_beneath_its_directory(name in "\\PC{0,40}") {
            if file_name_refusal(&name).is_none() {
                let path = std::path::Path::new(&name);
                prop_assert!(path.is_relative());
                prop_assert!(path.components().all(|c| matches!(c, std::path::Component::Normal(_))));
            }
        }
    }
}
