//! `inference.transport: process`: an agent CLI (Claude Code or Codex) is the model.
//!
//! What this module promises:
//!
//! - **The dialect comes from the command's base name.** `codex` speaks Codex's
//!   `exec --json` event stream ([`codex`]); anything else is taken for Claude Code's
//!   `--print --output-format stream-json` ([`claude`]).
//! - **A CLI that is not there stops the launch** ([`ProcessCli::resolve`]): a bare name is
//!   looked up on the host's `PATH`, a path must be an executable file; otherwise `E-RUN-027`,
//!   with a hint naming how to install that CLI. One whose install says it is older than the
//!   lowest version that runs under Murmur is refused there too ([`version`], `E-RUN-036`),
//!   naming the version found and the lowest that works.
//! - **Each run is asked one way** ([`RunPlan`] to [`Launch`]): the prompt on stdin, the
//!   capsule's system prompt, the model when the manifest names one, the capsule's tools as one
//!   MCP server on loopback with its bearer token (in a file of the run's private directory,
//!   never on the command line), and every built-in tool of the CLI switched off. The CLI's
//!   environment is built here from nothing: only what it needs to start and to reach its
//!   provider (see [`Launch::env`]).
//! - **The CLI's home is the session's, never the user's** ([`CliHome`]): its `HOME` and
//!   config directory are a per-session directory seeded with copies of its login files
//!   only, so nothing it writes there (a hook in `settings.json`, a `config.toml`) reaches
//!   the user's own next run of it.
//! - **It executes only what it needs** ([`Launch::also_executes`]): under `scoped` its
//!   command's closure, what its launcher runs (Codex's vendored binary), and the capsule's
//!   `capabilities.shell.allow` binaries.
//! - **Its stream is read strictly** ([`StreamReader`]): every line must be a JSON object the
//!   dialect knows the shape of; a line that is not is a [`Malformed`] error quoting it. Each
//!   assistant message becomes one [`CliEvent::Message`] (one turn), carrying the usage the
//!   CLI reported for it where it reports any; text deltas are passed on as they arrive; the
//!   run's end is one [`CliEvent::Finished`].

pub mod claude;
pub mod codex;
pub mod home;
mod run;
pub mod version;

pub use home::CliHome;

pub use run::{
    CliEvent, Launch, MCP_SERVER_NAME, Malformed, RunPlan, ServedTools, base_env,
    capsule_tool_name, port_of,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::grants::env::HostEnv;
use crate::inference::neutral::Block;
use crate::inference::response::StopReason;

/// How long one task's CLI run may take when `inference.timeout_seconds` names no limit.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The event stream a CLI speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    ClaudeCode,
    Codex,
}

impl Dialect {
    /// The dialect of `command`: `codex` by its base name, Claude Code otherwise.
    pub fn of(command: &str) -> Dialect {
        let base = Path::new(command)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = base.strip_suffix(".js").unwrap_or(&base);
        if stem == "codex" {
            Dialect::Codex
        } else {
            Dialect::ClaudeCode
        }
    }

    /// How its home of the session is laid out and seeded.
    pub fn home_layout(self) -> &'static home::Layout {
        match self {
            Dialect::ClaudeCode => &home::CLAUDE_CODE,
            Dialect::Codex => &home::CODEX,
        }
    }

    /// Its npm package and the lowest of its releases that runs under Murmur.
    pub fn releases(self) -> &'static version::Releases {
        match self {
            Dialect::ClaudeCode => &version::CLAUDE_CODE,
            Dialect::Codex => &version::CODEX,
        }
    }

    /// What the trace names as the session's driver.
    pub fn label(self) -> &'static str {
        match self {
            Dialect::ClaudeCode => "claude-code",
            Dialect::Codex => "codex",
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            Dialect::ClaudeCode => {
                "install Claude Code (`npm install -g @anthropic-ai/claude-code`) so that `claude` is on PATH, or set `inference.command` to its path"
            }
            Dialect::Codex => {
                "install Codex (`npm install -g @openai/codex`) so that `codex` is on PATH, or set `inference.command` to its path"
            }
        }
    }

    /// A reader of this dialect's stream.
    pub fn reader(self) -> StreamReader {
        StreamReader {
            dialect: self,
            claude: claude::Reader::default(),
            codex: codex::Reader::default(),
            made_alone: Vec::new(),
        }
    }
}

/// The agent CLI of a capsule, found at launch.
#[derive(Debug, Clone)]
pub struct ProcessCli {
    /// `inference.command` as written.
    pub command: String,
    /// The executable it resolved to (links followed).
    pub path: PathBuf,
    pub dialect: Dialect,
    /// `inference.timeout_seconds`, or [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
}

/// Why the CLI cannot be run, and how to get one that can: `E-RUN-027` (not there) or
/// `E-RUN-036` (older than the lowest that runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl ProcessCli {
    /// Finds `command` (a bare name on `path_var`, or a path to an executable file) and
    /// checks that its install is not older than the lowest version that runs.
    pub fn resolve(
        command: &str,
        path_var: &str,
        timeout: Option<u64>,
    ) -> Result<ProcessCli, Unusable> {
        let dialect = Dialect::of(command);
        let found = murmur_confine::resolve(command, path_var).and_then(|p| p.canonicalize().ok());
        let Some(path) = found else {
            let message = if command.contains('/') {
                format!("`inference.command` names {command}, which is not an executable file")
            } else {
                format!(
                    "`inference.command` names `{command}`, which is not on PATH; `transport: process` runs it as the model"
                )
            };
            return Err(Unusable {
                code: "E-RUN-027",
                message,
                hint: dialect.install_hint().to_string(),
            });
        };
        if let Some((message, hint)) = version::too_old(&path, command, dialect.releases()) {
            return Err(Unusable {
                code: "E-RUN-036",
                message,
                hint,
            });
        }
        Ok(ProcessCli {
            command: command.to_string(),
            path,
            dialect,
            timeout: timeout.map(Duration::from_secs).unwrap_or(DEFAULT_TIMEOUT),
        })
    }

    /// How to start one run of `plan`.
    pub fn launch(&self, plan: &RunPlan<'_>) -> std::io::Result<Launch> {
        let mut launch = match self.dialect {
            Dialect::ClaudeCode => claude::launch(plan),
            Dialect::Codex => codex::launch(plan),
        }?;
        launch.readable.insert(0, self.install_tree());
        if self.dialect == Dialect::Codex {
            launch
                .also_executes
                .extend(codex::native_binary(&self.path));
        }
        Ok(launch)
    }

    /// Where the CLI's provider is, as a base URL: Claude Code's `ANTHROPIC_BASE_URL`, else
    /// Anthropic's API; Codex's provider its `config.toml` selects among its own entries, else
    /// `OPENAI_BASE_URL`, else OpenAI's API. A cassette's relay sends on to it.
    pub fn provider_url(&self, host_env: &HostEnv) -> String {
        let set = |name: &str| host_env(name).filter(|v| !v.is_empty());
        match self.dialect {
            Dialect::ClaudeCode => {
                set("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".to_string())
            }
            Dialect::Codex => {
                let config = home::user_config_dir(&home::CODEX, host_env)
                    .map(|dir| dir.join("config.toml"));
                config
                    .as_deref()
                    .and_then(codex::selected_provider)
                    .map(|(_, url)| url)
                    .or_else(|| set("OPENAI_BASE_URL"))
                    .unwrap_or_else(|| "https://api.openai.com/v1".to_string())
            }
        }
    }

    /// What the CLI may read beyond the system's directories: the tree it is installed in (an
    /// npm package's whole `node_modules`, where its native binary lives).
    pub fn install_tree(&self) -> PathBuf {
        let mut tree = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        for ancestor in self.path.ancestors() {
            if ancestor.file_name().is_some_and(|n| n == "node_modules") {
                tree = ancestor.to_path_buf();
            }
        }
        tree
    }
}

impl ProcessCli {
    /// What the CLI holds, as `session_start.grants` lists it: the workdir (and the session's
    /// home for it) to write, its install tree and the capsule's read-only paths to read, its
    /// provider and the run's tools server to connect to, and the environment names it is
    /// given that the host sets.
    pub fn grants(
        &self,
        host_env: &HostEnv,
        read_only: &[PathBuf],
    ) -> murmur_trace::schema::ComponentGrants {
        let (passed, base_url, default_url) = match self.dialect {
            Dialect::ClaudeCode => (
                claude::PASSED,
                "ANTHROPIC_BASE_URL",
                "https://api.anthropic.com",
            ),
            Dialect::Codex => (codex::PASSED, "OPENAI_BASE_URL", "https://api.openai.com"),
        };
        let config_dir = self.dialect.home_layout().variable;
        let mut env: Vec<String> = [
            "PATH", "HOME", config_dir, "LANG", "TERM", "NO_COLOR", "TMPDIR",
        ]
        .iter()
        .map(|name| name.to_string())
        .collect();
        env.extend(
            passed
                .iter()
                .filter(|name| host_env(name).is_some_and(|v| !v.is_empty()))
                .map(|name| name.to_string()),
        );
        let provider = host_env(base_url)
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| default_url.to_string());
        murmur_trace::schema::ComponentGrants {
            name: self.command.clone(),
            runtime: "process".to_string(),
            filesystem: "write".to_string(),
            path: None,
            read_only: std::iter::once(self.install_tree())
                .chain(read_only.iter().cloned())
                .map(|p| p.display().to_string())
                .collect(),
            network: vec![provider, "http://127.0.0.1/mcp".to_string()],
            env,
        }
    }
}

/// Reads one run's stream, line by line.
pub struct StreamReader {
    dialect: Dialect,
    claude: claude::Reader,
    codex: codex::Reader,
    /// Calls the CLI made before any line named them, each already recorded as a turn of its
    /// own: `(name, input)`.
    made_alone: Vec<(String, Value)>,
}

impl StreamReader {
    /// The events of one line (a blank line has none).
    pub fn line(&mut self, line: &str) -> Result<Vec<CliEvent>, Malformed> {
        if line.trim().is_empty() {
            return Ok(Vec::new());
        }
        let events = match self.dialect {
            Dialect::ClaudeCode => self.claude.line(line)?,
            Dialect::Codex => self.codex.line(line)?,
        };
        Ok(events
            .into_iter()
            .filter_map(|event| self.without_calls_made_alone(event))
            .collect())
    }

    /// The assistant message still being gathered, as a whole turn: called when one of its
    /// tool calls arrives, so the turn is recorded before its calls.
    pub fn flush(&mut self) -> Option<CliEvent> {
        let message = match self.dialect {
            Dialect::ClaudeCode => self.claude.flush(),
            Dialect::Codex => self.codex.flush(),
        };
        self.without_calls_made_alone(message?)
    }

    /// Whether the message being gathered holds a call of the capsule tool `name`: the line
    /// naming a call the CLI made has been read.
    pub fn gathers_call(&self, name: &str) -> bool {
        let blocks = match self.dialect {
            Dialect::ClaudeCode => self.claude.gathering(),
            Dialect::Codex => self.codex.gathering(),
        };
        blocks
            .iter()
            .any(|block| matches!(block, Block::ToolCall { name: called, .. } if called == name))
    }

    /// A call the CLI made that no line has named yet was recorded as a turn of its own: the
    /// line naming it, when it comes, does not make it a call a second time.
    pub fn made_alone(&mut self, name: String, input: Value) {
        self.made_alone.push((name, input));
    }

    /// A message with the calls already made alone taken out; none if nothing is left of it.
    fn without_calls_made_alone(&mut self, event: CliEvent) -> Option<CliEvent> {
        let CliEvent::Message { model, mut answer } = event else {
            return Some(event);
        };
        if self.made_alone.is_empty() {
            return Some(CliEvent::Message { model, answer });
        }
        answer.content.retain(|block| {
            let Block::ToolCall { name, input, .. } = block else {
                return true;
            };
            let Some(at) = self
                .made_alone
                .iter()
                .position(|(n, i)| n == name && i == input)
            else {
                return true;
            };
            self.made_alone.remove(at);
            false
        });
        if !answer
            .content
            .iter()
            .any(|block| matches!(block, Block::ToolCall { .. }))
        {
            answer.stop_reason = StopReason::EndTurn;
        }
        (!answer.content.is_empty() || answer.usage.is_some())
            .then_some(CliEvent::Message { model, answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_name_picks_the_dialect() {
        assert_eq!(Dialect::of("codex"), Dialect::Codex);
        assert_eq!(Dialect::of("/opt/bin/codex"), Dialect::Codex);
        assert_eq!(Dialect::of("node_modules/.bin/codex.js"), Dialect::Codex);
        assert_eq!(Dialect::of("claude"), Dialect::ClaudeCode);
        assert_eq!(Dialect::of("/usr/local/bin/my-claude"), Dialect::ClaudeCode);
        assert_eq!(Dialect::of("codex-wrapper"), Dialect::ClaudeCode);
    }

    #[test]
    fn a_cli_not_on_path_is_refused_with_how_to_install_it() {
        let refused = ProcessCli::resolve("claude", "/nonexistent-dir", None).unwrap_err();
        assert!(refused.message.contains("not on PATH"), "{refused:?}");
        assert!(
            refused.hint.contains("@anthropic-ai/claude-code"),
            "{refused:?}"
        );
        let refused = ProcessCli::resolve("codex", "", None).unwrap_err();
        assert!(refused.hint.contains("@openai/codex"), "{refused:?}");
        let refused = ProcessCli::resolve("/nonexistent/codex", "/usr/bin", None).unwrap_err();
        assert!(
            refused.message.contains("not an executable file"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_cli_on_path_resolves_with_its_timeout() {
        let found = ProcessCli::resolve("sh", "/usr/bin:/bin", Some(5)).unwrap();
        assert!(found.path.is_absolute());
        assert_eq!(found.timeout, Duration::from_secs(5));
        assert_eq!(found.dialect, Dialect::ClaudeCode);
    }

    #[test]
    fn a_call_made_alone_is_not_gathered_again_when_its_line_comes() {
        let mut reader = Dialect::Codex.reader();
        let call = |id: &str, path: &str| {
            serde_json::json!({"type": "item.started", "item": {"id": id, "type": "mcp_tool_call",
                "server": MCP_SERVER_NAME, "tool": "read-file", "arguments": {"path": path}}})
            .to_string()
        };
        assert!(!reader.gathers_call("read-file"));
        reader.made_alone("read-file".into(), serde_json::json!({"path": "a.md"}));
        reader.line(&call("c1", "a.md")).unwrap();
        reader.line(&call("c2", "b.md")).unwrap();
        assert!(reader.gathers_call("read-file"));
        assert!(!reader.gathers_call("write-file"));
        // The call made alone is gone from the message; its sibling stays.
        let Some(CliEvent::Message { answer, .. }) = reader.flush() else {
            panic!("no message")
        };
        assert_eq!(
            answer.content,
            [Block::ToolCall {
                id: "c2".into(),
                name: "read-file".into(),
                input: serde_json::json!({"path": "b.md"}),
            }]
        );
        assert_eq!(answer.stop_reason, StopReason::ToolCall);
        // A message of nothing but that call is no message at all.
        reader.made_alone("read-file".into(), serde_json::json!({"path": "c.md"}));
        reader.line(&call("c3", "c.md")).unwrap();
        assert_eq!(reader.flush(), None);
    }

    #[test]
    fn the_servers_prefix_comes_off_tool_names() {
        assert_eq!(capsule_tool_name("mcp__murmur__read-file"), "read-file");
        assert_eq!(capsule_tool_name("Bash"), "Bash");
    }
}
