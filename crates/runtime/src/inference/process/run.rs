//! What one run of an agent CLI is given ([`RunPlan`], [`Launch`]) and what it reports
//! ([`CliEvent`], [`Malformed`]): the shapes both dialects share.

use std::path::{Path, PathBuf};

use super::home::CliHome;
use crate::grants::env::HostEnv;
use crate::inference::response::Answer;

/// The name the capsule's tools are served under; the CLI prefixes it to their names.
pub const MCP_SERVER_NAME: &str = "murmur";

/// The capsule's tools as the CLI reaches them.
#[derive(Debug, Clone)]
pub struct ServedTools {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub bearer: String,
    /// The tools' names, as the capsule declares them.
    pub names: Vec<String>,
}

/// One run of the CLI.
pub struct RunPlan<'a> {
    /// The capsule's system prompt.
    pub system_prompt: &'a str,
    /// `inference.model`, when the manifest names one (else the CLI's own default).
    pub model: Option<&'a str>,
    /// The capsule's tools; none: the CLI runs as pure inference.
    pub tools: Option<&'a ServedTools>,
    /// The CLI's own session to go on with (a reopened or threaded task).
    pub resume: Option<&'a str>,
    /// A directory of this run only, outside the workdir, that only this user can read: what
    /// the CLI is handed in files (the MCP configuration with the token) goes here.
    pub private_dir: &'a Path,
    /// The session's home for the CLI (its `HOME` and config directory), never the user's.
    pub home: &'a CliHome,
    /// The host's environment, read for the few names the CLI needs.
    pub host_env: &'a HostEnv,
    /// A relay on loopback standing in for the provider (a cassette's: see
    /// [`ProcessCli::provider_url`](super::ProcessCli::provider_url)): the CLI is pointed at it
    /// instead, and may connect to its port only.
    pub provider_relay: Option<&'a str>,
}

/// How to start one run: arguments, the whole environment, and what Landlock lets it write,
/// read and execute. (What it may connect to is the session's to say: its provider, or the
/// relay standing in for it, and the tools' server.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub args: Vec<String>,
    /// Built from nothing: `PATH`, `LANG`, `TERM`, `TMPDIR` (in the private directory),
    /// `HOME` and the CLI's config directory (the session's [`CliHome`]), the provider
    /// settings the host sets, and the switches that keep it from sending telemetry.
    pub env: Vec<(String, String)>,
    /// Where it may write beyond the workdir: the session's home for it and the private
    /// directory.
    pub writable: Vec<PathBuf>,
    /// Where it may read beyond the system's directories.
    pub readable: Vec<PathBuf>,
    /// What it executes beside the command itself (Codex's launcher runs its vendored native
    /// binary).
    pub also_executes: Vec<PathBuf>,
}

/// The environment every CLI starts from (its `HOME` and config directory the session's
/// [`CliHome`]), plus the names of `pass` the host sets.
pub fn base_env(plan: &RunPlan<'_>, pass: &[&str]) -> Vec<(String, String)> {
    let host = plan.host_env;
    let tmp = plan.private_dir.join("tmp");
    let _ = std::fs::create_dir_all(&tmp);
    let mut env = vec![
        (
            "PATH".to_string(),
            host("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_string()),
        ),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("TERM".to_string(), "dumb".to_string()),
        ("NO_COLOR".to_string(), "1".to_string()),
        ("TMPDIR".to_string(), tmp.display().to_string()),
        ("HOME".to_string(), plan.home.home().display().to_string()),
        plan.home.config_env(),
    ];
    for name in pass {
        if let Some(value) = host(name).filter(|v| !v.is_empty()) {
            env.push((name.to_string(), value));
        }
    }
    env
}

/// The TCP port of `url` (its scheme's default when it names none).
pub fn port_of(url: &str) -> Option<u16> {
    let parsed = url::Url::parse(url).ok()?;
    parsed.port_or_known_default()
}

/// One thing the CLI reported.
#[derive(Debug, Clone, PartialEq)]
pub enum CliEvent {
    /// The CLI's own session id, to go on with later.
    Session(String),
    /// Text of the answer, as it streams.
    TextDelta(String),
    /// One whole assistant message: a turn. Tool names are the capsule's (the CLI's prefix
    /// for the tools' server taken off).
    Message {
        model: Option<String>,
        answer: Answer,
    },
    /// The run is over: the final text, or what the CLI said went wrong.
    Finished(Result<String, String>),
}

/// A line of the stream that is not the dialect's: the line, quoted (cut at 300 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl Malformed {
    pub fn of(line: &str, why: &str) -> Malformed {
        let quoted: String = line.chars().take(300).collect();
        Malformed(format!("{why}: {quoted}"))
    }
}

/// A tool name as the CLI reports it, with the tools' server prefix taken off.
pub fn capsule_tool_name(reported: &str) -> String {
    let prefix = format!("mcp__{MCP_SERVER_NAME}__");
    reported
        .strip_prefix(&prefix)
        .unwrap_or(reported)
        .to_string()
}
