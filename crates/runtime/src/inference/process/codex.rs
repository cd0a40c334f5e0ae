//! Codex as the model: `codex exec --json`.
//!
//! - **Asked:** the prompt on stdin (`-`); the capsule's system prompt as
//!   `developer_instructions`; every built-in tool's feature switched off (its shell and
//!   exec tools, patching, images, web search, agents, apps, plugins, hooks) and its bundled
//!   skills left out (`skills.bundled.enabled = false`); the MCP server
//!   table replaced by one server, the capsule's tools, whose bearer token Codex reads from
//!   an environment variable; approvals never asked (`approval_policy = "never"`), so nothing
//!   waits on a person. The user's `config.toml` (copied from `CODEX_HOME` or `~/.codex` into
//!   the session's [`CliHome`](super::home::CliHome), which is this run's `HOME` and
//!   `CODEX_HOME`) still gives the provider and model (a provider entry with `base_url` and
//!   the Responses wire API, say).
//! - **Run:** the npm launcher (`codex.js`, run by `node`) executes the vendored native binary
//!   ([`native_binary`]), which is given `Execute` beside it.
//! - **Read:** a line is a JSON object with a `type`. `thread.started` gives the CLI's
//!   session; items are gathered into the turn being built: agent messages (text, passed on
//!   as it completes), reasoning and the capsule's tool calls (`mcp_tool_call`);
//!   `turn.completed` ends the run with the usage Codex reports, which covers the whole run
//!   and is recorded on its last turn; `turn.failed` and `error` end it failed. An `error`
//!   item is a warning Codex printed and fails nothing.

use serde_json::{Value, json};

use super::run::{CliEvent, Launch, MCP_SERVER_NAME, Malformed, RunPlan, base_env};
use crate::inference::neutral::Block;
use crate::inference::response::{Answer, StopReason, Usage};

/// The environment variable the tools' bearer token is handed to Codex in.
pub const TOKEN_VARIABLE: &str = "MURMUR_MCP_TOKEN";

/// Codex features that give the model a tool of Codex's own (or run the user's code), all
/// switched off.
pub const BUILT_IN_FEATURES: &[&str] = &[
    "shell_tool",
    "unified_exec",
    "unified_exec_tty",
    "shell_snapshot",
    "view_image",
    "image_generation",
    "goals",
    "multi_agent",
    "multi_agent_v2",
    "apps",
    "browser_use",
    "browser_use_external",
    "in_app_browser",
    "computer_use",
    "plugins",
    "remote_plugin",
    "hooks",
    "tool_suggest",
    "sleep_tool",
    "skill_search",
    "skill_mcp_dependency_install",
    "code_mode_host",
    "request_permissions_tool",
    "memories",
];

/// The host's environment names Codex reads for its provider and account.
pub(crate) const PASSED: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "HTTPS_PROXY",
    "NO_PROXY",
];

pub(super) fn launch(plan: &RunPlan<'_>) -> std::io::Result<Launch> {
    let mut env = base_env(plan, PASSED);
    let mut args: Vec<String> = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--color",
        "never",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut config = |key: &str, value: String| {
        args.push("-c".to_string());
        args.push(format!("{key}={value}"));
    };
    config("approval_policy", "\"never\"".to_string());
    config("web_search", "\"disabled\"".to_string());
    config("tools.view_image", "false".to_string());
    // Its bundled skills are instructions for tools it does not have here, installed into
    // its home and listed by path in every request: none.
    config("skills.bundled.enabled", "false".to_string());
    config("developer_instructions", toml_string(plan.system_prompt));
    // The session's copy of the user's `config.toml`: what this run of Codex reads.
    let codex_config = Some(plan.home.config_dir().join("config.toml"));
    if let Some(relay) = plan.provider_relay {
        env.retain(|(name, _)| name != "OPENAI_BASE_URL");
        env.push(("OPENAI_BASE_URL".to_string(), relay.to_string()));
        if let Some((id, _)) = codex_config.as_deref().and_then(selected_provider) {
            config(
                &format!("model_providers.{id}.base_url"),
                toml_string(relay),
            );
        }
    }
    match plan.tools {
        Some(tools) => {
            env.push((TOKEN_VARIABLE.to_string(), tools.bearer.clone()));
            config(
                "mcp_servers",
                format!(
                    "{{ {MCP_SERVER_NAME} = {{ url = {}, bearer_token_env_var = \"{TOKEN_VARIABLE}\", enabled = true, default_tools_approval_mode = \"approve\" }} }}",
                    toml_string(&tools.url)
                ),
            );
        }
        None => config("mcp_servers", "{}".to_string()),
    }
    for feature in BUILT_IN_FEATURES {
        args.push("--disable".to_string());
        args.push(feature.to_string());
    }
    if let Some(model) = plan.model {
        args.push("--model".to_string());
        args.push(model.to_string());
    }
    match plan.resume {
        Some(session) => {
            args.push("resume".to_string());
            args.push(session.to_string());
            args.push("-".to_string());
        }
        None => args.push("-".to_string()),
    }
    // Its provider may come from the config file: the variable its key is in.
    if let Some(config) = &codex_config {
        for key in provider_keys(config) {
            let safe = !key.is_empty()
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !env.iter().any(|(name, _)| *name == key);
            if safe && let Some(value) = (plan.host_env)(&key) {
                env.push((key, value));
            }
        }
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

/// The native binary the npm launcher `script` (`@openai/codex`'s `bin/codex.js`) executes,
/// found as it finds it: the platform package `@openai/codex-<os>-<arch>` resolved the way
/// Node resolves a package from the script's directory (each ancestor's `node_modules`), its
/// `vendor/<target>/bin/codex`; else the package's own `vendor/`. None when `script` is not
/// such a launcher (a native `codex`, say) or this platform has no build.
pub fn native_binary(script: &std::path::Path) -> Option<std::path::PathBuf> {
    let (target, package) = match std::env::consts::ARCH {
        "x86_64" => ("x86_64-unknown-linux-musl", "codex-linux-x64"),
        "aarch64" => ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
        _ => return None,
    };
    let script = script.canonicalize().ok()?;
    let bin_dir = script.parent()?;
    let found = |vendor: std::path::PathBuf| {
        let binary = vendor.join(target).join("bin").join("codex");
        binary.is_file().then_some(binary)
    };
    let resolved = bin_dir
        .ancestors()
        .filter(|dir| dir.file_name().is_none_or(|name| name != "node_modules"))
        .map(|dir| dir.join("node_modules/@openai").join(package))
        .find(|candidate| candidate.join("package.json").is_file());
    match resolved {
        Some(package) => found(package.join("vendor")),
        None => found(bin_dir.join("../vendor")),
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    // A JSON string is a valid TOML basic string for every character JSON escapes.
    json!(text).to_string()
}

/// The environment variables the provider entries of a Codex `config.toml` read their keys
/// from (`env_key`).
fn provider_keys(config: &std::path::Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(config) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(key, _)| key.trim() == "env_key")
        .map(|(_, value)| value.trim().trim_matches('"').to_string())
        .collect()
}

/// The provider a Codex `config.toml` selects (`model_provider`) among its own entries
/// (`[model_providers.ID]`): its id and `base_url`.
pub(super) fn selected_provider(config: &std::path::Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(config).ok()?;
    let unquote = |value: &str| value.trim().trim_matches('"').to_string();
    let mut selected = None;
    let mut section = String::new();
    let mut base_urls = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match (section.as_str(), key.trim()) {
            ("", "model_provider") => selected = Some(unquote(value)),
            (table, "base_url") => {
                if let Some(id) = table.strip_prefix("model_providers.") {
                    base_urls.push((unquote(id), unquote(value)));
                }
            }
            _ => {}
        }
    }
    let selected = selected?;
    let safe = selected
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    base_urls
        .into_iter()
        .find(|(id, _)| safe && *id == selected)
}

/// The stream of one run.
#[derive(Debug, Default)]
pub struct Reader {
    /// The blocks of the turn being gathered.
    pending: Vec<Block>,
    /// Tool call items already in `pending` or flushed, so an update does not add one twice.
    seen_calls: Vec<String>,
}

impl Reader {
    /// The blocks of the turn being gathered.
    pub fn gathering(&self) -> &[Block] {
        &self.pending
    }

    pub fn line(&mut self, line: &str) -> Result<Vec<CliEvent>, Malformed> {
        let value: Value = serde_json::from_str(line)
            .map_err(|_| Malformed::of(line, "Codex printed a line that is not JSON"))?;
        let Some(kind) = value.get("type").and_then(Value::as_str) else {
            return Err(Malformed::of(
                line,
                "Codex printed a line that is not one of its events (no `type`)",
            ));
        };
        let mut events = Vec::new();
        match kind {
            "thread.started" => {
                if let Some(id) = value.get("thread_id").and_then(Value::as_str) {
                    events.push(CliEvent::Session(id.to_string()));
                }
            }
            "item.started" | "item.updated" | "item.completed" => {
                let Some(item) = value.get("item").filter(|i| i.is_object()) else {
                    return Err(Malformed::of(line, "an item event has no `item`"));
                };
                self.item(item, kind == "item.completed", &mut events);
            }
            "turn.completed" => {
                let usage = value.get("usage").and_then(read_usage);
                let final_text = self.last_text();
                let mut message = self.flush();
                if let Some(CliEvent::Message { answer, .. }) = message.as_mut() {
                    answer.usage = usage;
                }
                events.extend(message);
                events.push(CliEvent::Finished(Ok(final_text)));
            }
            "turn.failed" => {
                let said = value
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                events.extend(self.flush());
                events.push(CliEvent::Finished(Err(format!(
                    "Codex ended the run failed: {said}"
                ))));
            }
            "error" => {
                let said = value
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                events.push(CliEvent::Finished(Err(format!("Codex failed: {said}"))));
            }
            _ => {}
        }
        Ok(events)
    }

    fn item(&mut self, item: &Value, completed: bool, events: &mut Vec<CliEvent>) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
        match item.get("type").and_then(Value::as_str) {
            Some("agent_message") if completed => {
                let text = item.get("text").and_then(Value::as_str).unwrap_or_default();
                events.push(CliEvent::TextDelta(text.to_string()));
                self.pending.push(Block::Text {
                    text: text.to_string(),
                });
            }
            Some("reasoning") if completed => {
                let text = item.get("text").and_then(Value::as_str).unwrap_or_default();
                self.pending.push(Block::Thinking {
                    thinking: text.to_string(),
                    signature: None,
                });
            }
            Some("mcp_tool_call") if !self.seen_calls.iter().any(|seen| seen == id) => {
                self.seen_calls.push(id.to_string());
                let tool = item.get("tool").and_then(Value::as_str).unwrap_or_default();
                let server = item.get("server").and_then(Value::as_str);
                let name = match server {
                    Some(server) if server != MCP_SERVER_NAME => format!("{server}.{tool}"),
                    _ => tool.to_string(),
                };
                self.pending.push(Block::ToolCall {
                    id: id.to_string(),
                    name,
                    input: item.get("arguments").cloned().unwrap_or(json!({})),
                });
            }
            // A built-in the model asked for anyway: recorded, never run by Murmur.
            Some(kind @ ("command_execution" | "file_change" | "web_search"))
                if !self.seen_calls.iter().any(|seen| seen == id) =>
            {
                self.seen_calls.push(id.to_string());
                self.pending.push(Block::ToolCall {
                    id: id.to_string(),
                    name: kind.to_string(),
                    input: item.clone(),
                });
            }
            _ => {}
        }
    }

    fn last_text(&self) -> String {
        self.pending
            .iter()
            .rev()
            .find_map(|block| match block {
                Block::Text { text } => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The turn being gathered, whole.
    pub fn flush(&mut self) -> Option<CliEvent> {
        if self.pending.is_empty() {
            return None;
        }
        let content = std::mem::take(&mut self.pending);
        let calls_tools = content.iter().any(|b| matches!(b, Block::ToolCall { .. }));
        Some(CliEvent::Message {
            model: None,
            answer: Answer {
                stop_reason: if calls_tools {
                    StopReason::ToolCall
                } else {
                    StopReason::EndTurn
                },
                content,
                usage: None,
                continuation_id: None,
            },
        })
    }
}

/// Codex's usage: input, cached input, cache writes and output (reasoning included).
fn read_usage(usage: &Value) -> Option<Usage> {
    let get = |name: &str| usage.get(name).and_then(Value::as_u64);
    let read = Usage {
        input_tokens: get("input_tokens"),
        output_tokens: get("output_tokens"),
        cached_tokens: get("cached_input_tokens"),
        cache_write_tokens: get("cache_write_input_tokens").filter(|n| *n > 0),
    };
    (read != Usage::default()).then_some(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(reader: &mut Reader, lines: &[Value]) -> Vec<CliEvent> {
        lines
            .iter()
            .flat_map(|line| reader.line(&line.to_string()).unwrap())
            .collect()
    }

    #[test]
    fn a_tool_call_then_an_answer_is_two_turns_with_the_runs_usage_on_the_last() {
        let mut reader = Reader::default();
        let call = json!({"id": "item_2", "type": "mcp_tool_call", "server": "murmur",
            "tool": "read-file", "arguments": {"path": "a.md"}, "status": "in_progress"});
        let events = read(
            &mut reader,
            &[
                json!({"type": "thread.started", "thread_id": "t-1"}),
                json!({"type": "turn.started"}),
                json!({"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "metadata"}}),
                json!({"type": "item.started", "item": call}),
            ],
        );
        assert_eq!(events, vec![CliEvent::Session("t-1".into())]);
        let Some(CliEvent::Message { answer, .. }) = reader.flush() else {
            panic!("no turn")
        };
        assert_eq!(answer.stop_reason, StopReason::ToolCall);
        assert!(
            matches!(&answer.content[0], Block::ToolCall { id, name, .. } if id == "item_2" && name == "read-file")
        );
        let events = read(
            &mut reader,
            &[
                json!({"type": "item.completed", "item": call}),
                json!({"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "It says hi."}}),
                json!({"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 10, "output_tokens": 7}}),
            ],
        );
        assert_eq!(events[0], CliEvent::TextDelta("It says hi.".into()));
        let CliEvent::Message { answer, .. } = &events[1] else {
            panic!("{events:?}")
        };
        assert_eq!(
            answer.content.len(),
            1,
            "the completed call is not a second call"
        );
        assert_eq!(answer.usage.unwrap().cached_tokens, Some(10));
        assert_eq!(events[2], CliEvent::Finished(Ok("It says hi.".into())));
    }

    #[test]
    fn a_failed_turn_fails_the_run_with_what_codex_said() {
        let mut reader = Reader::default();
        let events = read(
            &mut reader,
            &[json!({"type": "turn.failed", "error": {"message": "unauthorized"}})],
        );
        assert!(
            matches!(events.as_slice(), [CliEvent::Finished(Err(why))] if why.contains("unauthorized"))
        );
        assert!(reader.line("panic: oops").is_err());
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
