//! Claude Code as the model: `claude --print --output-format stream-json`.
//!
//! - **Asked:** the prompt on stdin; `--system-prompt` the capsule's; `--tools ""` (no
//!   built-in tool at all) with `--disallowedTools` naming them again; `--strict-mcp-config`
//!   with one server, the capsule's tools (`--mcp-config` a file in the run's private
//!   directory holding its URL and bearer token), allowed by `--allowedTools mcp__murmur`;
//!   `--permission-mode dontAsk`, so anything not allowed is refused rather than asked about;
//!   no user, project or local settings (`--setting-sources ""`), so no hook or plugin of the
//!   user's runs. Its `HOME` and `CLAUDE_CONFIG_DIR` are the session's
//!   [`CliHome`](super::home::CliHome), never the user's.
//! - **Read:** a line is a JSON object with a `type`. `system`/`init` gives the CLI's session
//!   id; `stream_event` lines carry text deltas and each message's final output usage;
//!   `assistant` lines carry the message's content blocks (one line per block, sharing the
//!   message id) and its usage; `result` ends the run (its `is_error`, `permission_denials`).
//!   Other types are the CLI's own bookkeeping and are passed over.

use serde_json::{Value, json};

use super::run::{
    CliEvent, Launch, MCP_SERVER_NAME, Malformed, RunPlan, base_env, capsule_tool_name,
};
use crate::inference::neutral::Block;
use crate::inference::response::{Answer, StopReason, Usage};

/// The CLI's built-in tools, refused by name as well as left out of `--tools`.
pub const BUILT_IN_TOOLS: &[&str] = &[
    "Bash",
    "BashOutput",
    "KillShell",
    "Edit",
    "MultiEdit",
    "Write",
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookEdit",
    "NotebookRead",
    "WebFetch",
    "WebSearch",
    "Task",
    "Agent",
    "TodoWrite",
    "ExitPlanMode",
    "SlashCommand",
    "Skill",
];

/// The host's environment names Claude Code reads for its provider and account.
pub(crate) const PASSED: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "HTTPS_PROXY",
    "NO_PROXY",
];

pub(super) fn launch(plan: &RunPlan<'_>) -> std::io::Result<Launch> {
    let mut env = base_env(plan, PASSED);
    for (name, value) in [
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "1"),
    ] {
        env.push((name.to_string(), value.to_string()));
    }
    let mut args: Vec<String> = [
        "--print",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--permission-mode",
        "dontAsk",
        "--tools",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--disallowedTools".to_string());
    args.push(BUILT_IN_TOOLS.join(","));
    args.push("--system-prompt".to_string());
    args.push(plan.system_prompt.to_string());
    if let Some(model) = plan.model {
        args.push("--model".to_string());
        args.push(model.to_string());
    }
    if let Some(relay) = plan.provider_relay {
        env.retain(|(name, _)| name != "ANTHROPIC_BASE_URL");
        env.push(("ANTHROPIC_BASE_URL".to_string(), relay.to_string()));
    }
    let mcp_file = plan.private_dir.join("mcp.json");
    let servers = match plan.tools {
        Some(tools) => {
            json!({MCP_SERVER_NAME: {
                "type": "http",
                "url": tools.url,
                "headers": {"Authorization": format!("Bearer {}", tools.bearer)},
            }})
        }
        None => json!({}),
    };
    write_private(&mcp_file, &json!({"mcpServers": servers}).to_string())?;
    args.push("--mcp-config".to_string());
    args.push(mcp_file.display().to_string());
    if plan.tools.is_some() {
        args.push("--allowedTools".to_string());
        args.push(format!("mcp__{MCP_SERVER_NAME}"));
    }
    if let Some(session) = plan.resume {
        args.push("--resume".to_string());
        args.push(session.to_string());
    }
    Ok(Launch {
        args,
        env,
        writable: vec![
            plan.private_dir.to_path_buf(),
            plan.home.home().to_path_buf(),
        ],
        readable: Vec::new(),
        also_executes: Vec::new(),
    })
}

/// Writes `text` to `path`, readable by this user only.
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// The stream of one run.
#[derive(Debug, Default)]
pub struct Reader {
    /// The assistant message being gathered: its id, model, blocks and usage.
    pending: Option<Pending>,
    /// The output tokens each message's stream ended with, by message id.
    final_output: Option<(String, u64)>,
}

#[derive(Debug)]
struct Pending {
    id: String,
    model: Option<String>,
    blocks: Vec<Block>,
    stop: Option<String>,
    usage: Option<Usage>,
}

impl Reader {
    /// The blocks of the assistant message being gathered.
    pub fn gathering(&self) -> &[Block] {
        self.pending.as_ref().map_or(&[], |p| p.blocks.as_slice())
    }

    pub fn line(&mut self, line: &str) -> Result<Vec<CliEvent>, Malformed> {
        let value: Value = serde_json::from_str(line)
            .map_err(|_| Malformed::of(line, "Claude Code printed a line that is not JSON"))?;
        let Some(kind) = value.get("type").and_then(Value::as_str) else {
            return Err(Malformed::of(
                line,
                "Claude Code printed a line that is not one of its events (no `type`)",
            ));
        };
        let mut events = Vec::new();
        match kind {
            "system" => {
                if value.get("subtype").and_then(Value::as_str) == Some("init")
                    && let Some(id) = value.get("session_id").and_then(Value::as_str)
                {
                    events.push(CliEvent::Session(id.to_string()));
                }
            }
            "stream_event" => self.stream_event(value.get("event"), &mut events),
            "assistant" => {
                if value
                    .get("parent_tool_use_id")
                    .is_some_and(|p| !p.is_null())
                {
                    return Ok(events);
                }
                let Some(message) = value.get("message").filter(|m| m.is_object()) else {
                    return Err(Malformed::of(line, "an `assistant` event has no `message`"));
                };
                self.assistant(message, line, &mut events)?;
            }
            "user" => events.extend(self.flush()),
            "result" => {
                events.extend(self.flush());
                events.push(CliEvent::Finished(finished(&value)));
            }
            _ => {}
        }
        Ok(events)
    }

    fn stream_event(&mut self, event: Option<&Value>, events: &mut Vec<CliEvent>) {
        let Some(event) = event else { return };
        match event.get("type").and_then(Value::as_str) {
            Some("content_block_delta") => {
                let delta = event.get("delta");
                if delta.and_then(|d| d.get("type")).and_then(Value::as_str) == Some("text_delta")
                    && let Some(text) = delta.and_then(|d| d.get("text")).and_then(Value::as_str)
                {
                    events.push(CliEvent::TextDelta(text.to_string()));
                }
            }
            Some("message_start") => {
                let id = event
                    .pointer("/message/id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.final_output = Some((id.to_string(), 0));
            }
            Some("message_delta") => {
                if let (Some((_, output)), Some(n)) = (
                    self.final_output.as_mut(),
                    event
                        .pointer("/usage/output_tokens")
                        .and_then(Value::as_u64),
                ) {
                    *output = n;
                }
            }
            _ => {}
        }
    }

    fn assistant(
        &mut self,
        message: &Value,
        line: &str,
        events: &mut Vec<CliEvent>,
    ) -> Result<(), Malformed> {
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if self.pending.as_ref().is_some_and(|p| p.id != id) {
            events.extend(self.flush());
        }
        let pending = self.pending.get_or_insert_with(|| Pending {
            id: id.clone(),
            model: None,
            blocks: Vec::new(),
            stop: None,
            usage: None,
        });
        if let Some(model) = message.get("model").and_then(Value::as_str) {
            pending.model = Some(model.to_string());
        }
        if let Some(stop) = message.get("stop_reason").and_then(Value::as_str) {
            pending.stop = Some(stop.to_string());
        }
        if let Some(usage) = message.get("usage").and_then(read_usage) {
            pending.usage = Some(usage);
        }
        let Some(content) = message.get("content").and_then(Value::as_array) else {
            return Err(Malformed::of(
                line,
                "an assistant message has no `content` list",
            ));
        };
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    pending.blocks.push(Block::Text {
                        text: text.to_string(),
                    });
                }
                Some("tool_use") => {
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    pending.blocks.push(Block::ToolCall {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        name: capsule_tool_name(name),
                        input: block.get("input").cloned().unwrap_or(Value::Null),
                    });
                }
                Some("thinking") => {
                    let thinking = block
                        .get("thinking")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    pending.blocks.push(Block::Thinking {
                        thinking: thinking.to_string(),
                        signature: None,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The message being gathered, whole.
    pub fn flush(&mut self) -> Option<CliEvent> {
        let pending = self.pending.take()?;
        let mut usage = pending.usage;
        if let Some((id, output)) = &self.final_output
            && *id == pending.id
            && *output > 0
            && let Some(usage) = usage.as_mut()
        {
            usage.output_tokens = Some((*output).max(usage.output_tokens.unwrap_or(0)));
        }
        let calls_tools = pending
            .blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { .. }));
        let stop_reason = match pending.stop.as_deref() {
            Some("max_tokens") => StopReason::MaxTokens,
            _ if calls_tools => StopReason::ToolCall,
            _ => StopReason::EndTurn,
        };
        Some(CliEvent::Message {
            model: pending.model,
            answer: Answer {
                stop_reason,
                content: pending.blocks,
                usage,
                continuation_id: None,
            },
        })
    }
}

/// Anthropic usage as the CLI reports it: input, output, cache read and cache write.
fn read_usage(usage: &Value) -> Option<Usage> {
    let get = |name: &str| usage.get(name).and_then(Value::as_u64);
    let read = Usage {
        input_tokens: get("input_tokens"),
        output_tokens: get("output_tokens"),
        cached_tokens: get("cache_read_input_tokens"),
        cache_write_tokens: get("cache_creation_input_tokens"),
    };
    (read != Usage::default()).then_some(read)
}

/// How a `result` event ended the run.
fn finished(result: &Value) -> Result<String, String> {
    let text = result
        .get("result")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let denials: Vec<String> = result
        .get("permission_denials")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|d| d.get("tool_name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let is_error = result.get("is_error").and_then(Value::as_bool) == Some(true);
    let subtype = result
        .get("subtype")
        .and_then(Value::as_str)
        .unwrap_or("success");
    if is_error || subtype != "success" {
        let said = if text.is_empty() {
            result
                .get("errors")
                .map(Value::to_string)
                .unwrap_or_else(|| subtype.to_string())
        } else {
            text
        };
        return Err(format!(
            "Claude Code ended the run with `{subtype}`: {said}"
        ));
    }
    if !denials.is_empty() {
        return Err(format!(
            "Claude Code was refused a permission for {} (a CLI built-in or a tool the capsule does not declare), and answered: {text}",
            denials.join(", ")
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lines: &[Value]) -> Vec<CliEvent> {
        let mut reader = Reader::default();
        lines
            .iter()
            .flat_map(|line| reader.line(&line.to_string()).unwrap())
            .collect()
    }

    #[test]
    fn blocks_of_one_message_make_one_turn_with_the_streams_final_usage() {
        let message = |content: Value| {
            json!({"type": "assistant", "message": {"id": "msg_1", "model": "m",
                "content": [content],
                "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 5}}})
        };
        let events = read(&[
            json!({"type": "system", "subtype": "init", "session_id": "s-1"}),
            json!({"type": "stream_event", "event": {"type": "message_start", "message": {"id": "msg_1"}}}),
            json!({"type": "stream_event", "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Reading"}}}),
            json!({"type": "stream_event", "event": {"type": "message_delta", "usage": {"output_tokens": 30}}}),
            message(json!({"type": "text", "text": "Reading"})),
            message(
                json!({"type": "tool_use", "id": "tu_1", "name": "mcp__murmur__read-file", "input": {"path": "a"}}),
            ),
            json!({"type": "user", "message": {"content": []}}),
        ]);
        assert_eq!(events[0], CliEvent::Session("s-1".into()));
        assert_eq!(events[1], CliEvent::TextDelta("Reading".into()));
        let CliEvent::Message { answer, .. } = &events[2] else {
            panic!("{events:?}")
        };
        assert_eq!(answer.stop_reason, StopReason::ToolCall);
        assert_eq!(answer.content.len(), 2);
        assert!(matches!(&answer.content[1], Block::ToolCall { name, .. } if name == "read-file"));
        let usage = answer.usage.unwrap();
        assert_eq!(usage.input_tokens, Some(12));
        assert_eq!(usage.output_tokens, Some(30));
        assert_eq!(usage.cached_tokens, Some(5));
        assert_eq!(events.len(), 3);
    }

    #[test]
    fn a_result_ends_the_run_and_denials_fail_it() {
        let ok = read(&[
            json!({"type": "result", "subtype": "success", "is_error": false, "result": "done"}),
        ]);
        assert_eq!(ok, vec![CliEvent::Finished(Ok("done".into()))]);
        let denied = read(&[
            json!({"type": "result", "subtype": "success", "is_error": false,
            "result": "I could not", "permission_denials": [{"tool_name": "Bash"}]}),
        ]);
        let [CliEvent::Finished(Err(why))] = denied.as_slice() else {
            panic!("{denied:?}")
        };
        assert!(why.contains("Bash"), "{why}");
        let failed = read(&[
            json!({"type": "result", "subtype": "error_during_execution", "is_error": true, "result": ""}),
        ]);
        assert!(matches!(failed.as_slice(), [CliEvent::Finished(Err(_))]));
    }

    #[test]
    fn a_line_that_is_not_an_event_is_malformed_and_quoted() {
        let mut reader = Reader::default();
        let error = reader.line("Error: something broke").unwrap_err();
        assert!(error.0.contains("something broke"), "{error:?}");
        assert!(reader.line("{\"no\": \"type\"}").is_err());
        assert!(
            reader
                .line("{\"type\": \"rate_limit_event\"}")
                .unwrap()
                .is_empty()
        );
    }

    proptest::proptest! {
        #[test]
        fn no_line_panics_the_reader(line in ".{0,200}") {
            let mut reader = Reader::default();
            let _ = reader.line(&line);
            let _ = reader.flush();
        }
    }
}
