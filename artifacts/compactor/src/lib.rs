//! `compactor`: the `on-compaction` hook. When the session reaches its token threshold it
//! keeps the last messages verbatim and replaces everything before them with one summary.
//!
//! - **The tail**: the last `keep_last` messages (config, default 6), extended back so it never
//!   starts with a `tool` message: a tool result stays with the assistant message that made the
//!   call.
//! - **The summary**: everything before the tail, rendered as a plain-text transcript in one
//!   user message, goes to ONE `run-inference` call: on `event.model` when the manifest sets
//!   `inference.compaction.model` (else the capsule's model), with `event.system_prompt` when
//!   the manifest sets one (else [`SUMMARY_PROMPT`]).
//! - **The result**: `replace-context([summary, ...tail])`, where the summary is a user message
//!   starting with [`SUMMARY_HEADING`] and carrying the source id [`SUMMARY_SOURCE_ID`]. With
//!   nothing before the tail, the messages come back unchanged.
//! - **Failure**: when `run-inference` errs (spend ceiling, driver failure) or answers with an
//!   error or no text, the handler errs, and the runtime ends the session: it has no other way
//!   back under its token budget.
//!
//! Every other handler returns `none`.

use murmur_guest::hook::{
    self, CompactionEvent, Hook, HookOutput, HookResult, InferenceRequest, InferenceResponse,
    Message, Role,
};
use serde::Deserialize;

/// How the summary message starts.
pub const SUMMARY_HEADING: &str = "Summary of the earlier conversation:";
/// The `source-id` of the summary message.
pub const SUMMARY_SOURCE_ID: &str = "compactor:summary";
/// The system prompt of the summarization call when the manifest sets none.
pub const SUMMARY_PROMPT: &str = "You compact the history of a conversation between a user \
and an AI agent that uses tools. Write a summary that lets the agent carry on the work without \
the original messages. Keep: the user's goal and every requirement or constraint they stated; \
decisions made and why; what has been done, including files, commands and identifiers with \
their exact names; results and errors that still matter; and open questions and next steps. \
Drop pleasantries, repetition and tool output that no longer matters. Write plain prose or \
short lists, in the third person, and no preamble.";

/// `MURMUR_ARTIFACT_CONFIG`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct Config {
    /// How many of the last messages to keep verbatim.
    keep_last: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { keep_last: 6 }
    }
}

struct Compactor;

impl Hook for Compactor {
    fn on_compaction(event: CompactionEvent) -> HookResult {
        let config: Config = hook::config()?;
        compact(event, config.keep_last, hook::run_inference)
    }
}

murmur_guest::export_hook!(Compactor);

/// Where the verbatim tail starts: `keep_last` from the end, moved back over `tool` messages
/// to the message that made those calls.
fn tail_start(messages: &[Message], keep_last: usize) -> usize {
    let mut start = messages.len().saturating_sub(keep_last);
    while start > 0 && start < messages.len() && messages[start].role == Role::Tool {
        start -= 1;
    }
    start
}

/// The summarization request for `older` (the messages before the tail).
fn summary_request(event: &CompactionEvent, older: &[Message]) -> InferenceRequest {
    let text = format!(
        "The earlier part of the conversation, oldest first:\n\n{}",
        hook::transcript(older)
    );
    let mut request = InferenceRequest::new(vec![Message::user(text)]).system_prompt(
        event
            .system_prompt
            .clone()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| SUMMARY_PROMPT.to_string()),
    );
    request.model = event.model.clone().filter(|m| !m.trim().is_empty());
    request
}

fn compact(
    event: CompactionEvent,
    keep_last: usize,
    run_inference: impl FnOnce(&InferenceRequest) -> Result<InferenceResponse, String>,
) -> HookResult {
    let start = tail_start(&event.messages, keep_last);
    if start == 0 {
        return Ok(HookOutput::ReplaceContext(event.messages));
    }
    let request = summary_request(&event, &event.messages[..start]);
    let response = run_inference(&request)
        .map_err(|e| format!("compactor: the summarization call failed: {e}"))?;
    let summary = response.text.trim();
    if response.stop_reason == "error" || summary.is_empty() {
        return Err(format!(
            "compactor: the summarization call returned no summary (stop reason `{}`)",
            response.stop_reason
        ));
    }
    let mut messages = event.messages;
    let tail = messages.split_off(start);
    let mut replaced = Vec::with_capacity(tail.len() + 1);
    replaced.push(
        Message::user(format!("{SUMMARY_HEADING}\n\n{summary}")).with_source_id(SUMMARY_SOURCE_ID),
    );
    replaced.extend(tail);
    Ok(HookOutput::ReplaceContext(replaced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::RefCell;

    fn assistant_calling(call: &str) -> Message {
        Message::from_blocks(
            Role::Assistant,
            vec![
                json!({"type": "text", "text": format!("calling {call}")}),
                json!({"type": "tool_call", "id": call, "name": "read-file", "input": {"path": "a"}}),
            ],
        )
    }

    fn event(messages: Vec<Message>) -> CompactionEvent {
        CompactionEvent {
            session_id: "ses_1".into(),
            task_id: "t1".into(),
            messages,
            estimated_tokens: 1000,
            context_window: 1000,
            model: None,
            system_prompt: None,
        }
    }

    fn answer(text: &str) -> Result<InferenceResponse, String> {
        Ok(InferenceResponse {
            text: text.into(),
            stop_reason: "end_turn".into(),
            usage: None,
        })
    }

    fn texts(output: &HookOutput) -> Vec<String> {
        match output {
            HookOutput::ReplaceContext(messages) => messages.iter().map(Message::text).collect(),
            other => panic!("expected replace-context, got {other:?}"),
        }
    }

    /// u1 a1 u2 a2(calls c1, c2) t(c1) t(c2) a3 u3
    fn conversation() -> Vec<Message> {
        vec![
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
            assistant_calling("c1"),
            Message::tool_result("c1", "r1", false),
            Message::tool_result("c2", "r2", false),
            Message::assistant("a3"),
            Message::user("u3"),
        ]
    }

    #[test]
    fn config_defaults_to_six_and_rejects_unknown_keys() {
        assert_eq!(
            hook::config_from::<Config>(None).unwrap(),
            Config { keep_last: 6 }
        );
        assert_eq!(
            hook::config_from::<Config>(Some(r#"{"keep_last": 2}"#)).unwrap(),
            Config { keep_last: 2 }
        );
        assert!(hook::config_from::<Config>(Some(r#"{"keep": 2}"#)).is_err());
    }

    #[test]
    fn tail_never_starts_with_a_tool_result() {
        let m = conversation();
        assert_eq!(tail_start(&m, 2), 6); // a3 u3
        assert_eq!(tail_start(&m, 3), 3); // t(c2) pulls back to a2
        assert_eq!(tail_start(&m, 4), 3); // t(c1) pulls back to a2
        assert_eq!(tail_start(&m, 5), 3);
        assert_eq!(tail_start(&m, 6), 2);
        assert_eq!(tail_start(&m, 100), 0);
        assert_eq!(tail_start(&m, 0), 8);
        assert_eq!(tail_start(&[], 6), 0);
        // A conversation that opens with tool results keeps them all.
        let odd = vec![Message::tool_result("c", "r", false), Message::user("u")];
        assert_eq!(tail_start(&odd, 1), 1);
        assert_eq!(tail_start(&[Message::tool_result("c", "r", false)], 1), 0);
    }

    #[test]
    fn summarizes_the_front_once_and_keeps_the_tail_verbatim() {
        let calls = RefCell::new(Vec::new());
        let output = compact(event(conversation()), 3, |request| {
            calls.borrow_mut().push(request.clone());
            answer("  They discussed u1 and u2.  ")
        })
        .unwrap();
        let calls = calls.into_inner();
        assert_eq!(calls.len(), 1);
        let request = &calls[0];
        assert_eq!(request.model, None);
        assert_eq!(request.system_prompt.as_deref(), Some(SUMMARY_PROMPT));
        assert_eq!(request.max_tokens, None);
        assert_eq!(request.messages.len(), 1);
        assert_eq!(request.messages[0].role, Role::User);
        let prompt = request.messages[0].text();
        assert!(
            prompt.contains("[user]\nu1\n\n[assistant]\na1\n\n[user]\nu2"),
            "{prompt}"
        );
        assert!(!prompt.contains("calling c1"), "{prompt}");

        assert_eq!(
            texts(&output),
            vec![
                format!("{SUMMARY_HEADING}\n\nThey discussed u1 and u2."),
                "calling c1".to_string(),
                "r1".to_string(),
                "r2".to_string(),
                "a3".to_string(),
                "u3".to_string(),
            ]
        );
        let HookOutput::ReplaceContext(messages) = output else {
            unreachable!()
        };
        assert_eq!(messages[0].role, Role::User);
        assert_eq!(messages[0].source_id.as_deref(), Some(SUMMARY_SOURCE_ID));
        assert_eq!(messages[0].id, "");
        // The tail is the very same messages, tool call ids and all.
        assert_eq!(&messages[1..], &conversation()[3..]);
    }

    #[test]
    fn uses_the_manifest_model_and_prompt_when_set() {
        let mut e = event(conversation());
        e.model = Some("claude-haiku-4-5".into());
        e.system_prompt = Some("Summarize tersely.".into());
        let mut seen = None;
        compact(e, 2, |request| {
            seen = Some(request.clone());
            answer("s")
        })
        .unwrap();
        let seen = seen.unwrap();
        assert_eq!(seen.model.as_deref(), Some("claude-haiku-4-5"));
        assert_eq!(seen.system_prompt.as_deref(), Some("Summarize tersely."));
    }

    #[test]
    fn nothing_before_the_tail_comes_back_unchanged_without_a_call() {
        let short = conversation()[..4].to_vec();
        let output = compact(event(short.clone()), 6, |_| panic!("no call expected")).unwrap();
        assert_eq!(output, HookOutput::ReplaceContext(short));
        let output = compact(event(vec![]), 6, |_| panic!("no call expected")).unwrap();
        assert_eq!(output, HookOutput::ReplaceContext(vec![]));
    }

    #[test]
    fn a_failed_summary_is_an_error() {
        let err = compact(event(conversation()), 2, |_| {
            Err("spend ceiling reached".to_string())
        })
        .unwrap_err();
        assert!(err.contains("spend ceiling reached"), "{err}");

        let err = compact(event(conversation()), 2, |_| answer("   ")).unwrap_err();
        assert!(err.contains("no summary"), "{err}");

        let err = compact(event(conversation()), 2, |_| {
            Ok(InferenceResponse {
                text: "partial".into(),
                stop_reason: "error".into(),
                usage: None,
            })
        })
        .unwrap_err();
        assert!(err.contains("`error`"), "{err}");
    }
}
