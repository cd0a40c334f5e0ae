//! A capsule's MCP servers (`runtime: mcp` entries) as the session's tools.
//!
//! What a caller can rely on:
//!
//! - **Staged with the capsule** (staging's [`StagedMcpServer`]): each entry's header
//!   credentials resolved as a driver's are (environment, `.env`, the user's credentials file;
//!   a reference set nowhere is `E-RUN-012`).
//! - **Started with the session** ([`start`]), since its working directory is the session's
//!   workspace: a stdio server runs confined as a shell child is (its command resolved against
//!   the host's `PATH` and canonicalized, the minimal environment plus the host variables its
//!   `server.env` names, Landlock to the workspace and the capsule's read-only paths, TCP only
//!   to the ports its entry's network allow names, stderr in the record's
//!   `logs/mcp-<name>.log`, out of its reach, its whole
//!   process group killed when the session ends); an HTTP server is reached at its allowed URL
//!   with its headers attached by the host. Each is initialized and its tools listed within
//!   the entry's `timeout_seconds`; a server that fails is a coded error naming it
//!   (`E-MCP-*`), and the session does not start.
//! - **Held to its pin**: a server `murmur.lock` pins ([`pin_servers`] is how `mur install`
//!   pins) must introduce itself as pinned (how it is reached, its `serverInfo` name and
//!   version) and list exactly the pinned tools (names, descriptions, input schemas,
//!   annotations), or the session does not start: `E-MCP-005` with what changed
//!   ([`pin_differences`]). `session_start.mcp_servers` records each server and whether it was
//!   pinned.
//! - **Watched while it runs** ([`watch`]): after a `notifications/tools/list_changed` the
//!   list is read again (before the server's next call at the latest) and held to the pin, or
//!   to the list it started with when unpinned; a difference, or a list that cannot be read,
//!   refuses the server's calls for the rest of the session (`E-MCP-005`). Each notice is an
//!   `mcp_tools_changed` trace event.
//! - **Offered under names that cannot collide** ([`offered_name`]): `<server>__<tool>`, letters,
//!   digits, `_` and `-` only, at most 64 characters; a name that cannot be made so, or that
//!   another tool has, or an input schema that does not compile, is `E-MCP-003` naming the
//!   server and the tool.
//! - **Called like any tool** ([`McpTool::call`]): the caller has run the manifest's check and
//!   the hooks' decision point; the call runs under the entry's time limit (past it, cancelled:
//!   `E-MCP-002`); an `isError` result is `failed`; `state_effect` comes from the tool's
//!   annotations (absent when they say neither read-only nor destructive) and `resource_id`
//!   from a `path` or `uri` argument; text past 16 KiB is cut for
//!   the model with the whole kept at `logs/mcp-<name>-<n>.log`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use murmur_confine::{ShellGrant, TimeLimits};
use murmur_manifest::Coded;
use murmur_manifest::capsule::{CapsuleManifest, McpServerSpec};
use murmur_manifest::diagnostic::code;
use murmur_manifest::lock::LockedServer;
use murmur_mcp::{McpConnection, McpError, ToolList, Transport};
use murmur_trace::Trace;
use murmur_trace::schema::{CallStatus, ErrorRef, EventBody, McpServerRef};
use serde_json::Value;

use crate::grants::env::HostEnv;
use crate::inference::neutral::{Block, Message};
use crate::inference::request::ToolSpec;
use crate::session::SessionError;
use crate::session::staging::{Lookups, StagedMcpServer, stage_mcp_servers};
use crate::session::tools::{Dispatched, fence};
use crate::session::workdir::Workdir;

/// The most text of one result the model gets; the rest is kept in the workspace.
const RESULT_LIMIT: usize = murmur_confine::OUTPUT_LIMIT;

/// A server's tool as the model is offered it.
pub(crate) struct McpTool {
    /// The name the model calls it by (`<server>__<tool>`).
    pub spec: ToolSpec,
    /// Its name on the server.
    pub tool: String,
    /// `read`, `mutate` or `unknown`.
    pub effect: &'static str,
    pub validator: jsonschema::Validator,
    pub server: Arc<LiveServer>,
}

/// A started server.
pub(crate) struct LiveServer {
    pub name: String,
    connection: McpConnection,
    timeout: Duration,
    workdir: Workdir,
    cuts: AtomicU64,
    /// The list its tools are held to: its pin, or (unpinned) the list it started with.
    held_to: ToolList,
    /// Why it is refused, once a changed tool list has made it so.
    refused: Mutex<Option<String>>,
    /// How many list-changed notices have been handled.
    handled: tokio::sync::Mutex<u64>,
    /// Where `mcp_tools_changed` goes: the trace and its `session_start`.
    trace: std::sync::OnceLock<(Trace, String)>,
}

/// `<server>__<tool>`, when it is a name every provider takes (letters, digits, `_`, `-`; at
/// most 64 characters).
pub(crate) fn offered_name(server: &str, tool: &str) -> Option<String> {
    let name = format!("{server}__{tool}");
    let fits = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    fits.then_some(name)
}

/// The session's error for `error`, a server's.
fn coded(workdir: &Workdir, error: &dyn Coded) -> SessionError {
    SessionError {
        code: error.code(),
        message: error.message(),
        hint: error.hint(),
        workdir: Some(workdir.record.clone()),
    }
}

/// Starts every staged server of `capsule` for a session in `workdir`, lists its tools and
/// holds them to the server's pin (`E-MCP-005` when its identity or tools differ).
/// `taken` are the names already offered (the capsule's own tools, skills, runtime tools).
/// Also returns what `session_start.mcp_servers` records of each.
pub(crate) async fn start(
    servers: &[StagedMcpServer],
    capsule: &CapsuleManifest,
    workdir: &Workdir,
    host_env: &HostEnv,
    taken: &[String],
    (containment, refusals): (
        &murmur_confine::Achieved,
        &crate::session::containment::RefusalLog,
    ),
) -> Result<(Vec<McpTool>, Vec<McpServerRef>), SessionError> {
    let mut offered: Vec<McpTool> = Vec::new();
    let mut started = Vec::new();
    for staged in servers {
        let name = &staged.entry.name;
        let (connection, tools, seen) =
            open(staged, capsule, workdir, host_env, (containment, refusals))
                .await
                .map_err(|error| coded(workdir, &error))?;
        if let Some(pin) = &staged.pin {
            let differences = pin_differences(pin, &seen);
            if !differences.is_empty() {
                return Err(SessionError {
                    code: code::E_MCP_005,
                    message: format!(
                        "MCP server `{name}` is not what murmur.lock pinned: {}",
                        differences.join("; ")
                    ),
                    hint: "review the change (a server that changes its tools after being trusted \
                           can steer the model); if you trust it, run `mur install` to pin it again"
                        .to_string(),
                    workdir: Some(workdir.record.clone()),
                });
            }
        }
        started.push(McpServerRef {
            name: name.clone(),
            identity: seen.identity.clone(),
            tools_sha256: seen.tools_sha256.clone(),
            pinned: staged.pin.is_some(),
        });
        let live = Arc::new(LiveServer {
            name: name.clone(),
            connection,
            timeout: staged.timeout,
            workdir: workdir.clone(),
            cuts: AtomicU64::new(0),
            held_to: ToolList::from_pins(staged.pin.as_ref().map_or(&seen.tools, |pin| &pin.tools)),
            refused: Mutex::new(None),
            handled: tokio::sync::Mutex::new(0),
            trace: std::sync::OnceLock::new(),
        });
        for tool in tools {
            let refuse = |why: String| SessionError {
                code: "E-MCP-003",
                message: format!("MCP server `{name}` offers tool `{}`: {why}", tool.name()),
                hint: "fix the server's tool, or leave the server out of the capsule".to_string(),
                workdir: Some(workdir.record.clone()),
            };
            let Some(offered_as) = offered_name(name, tool.name()) else {
                return Err(refuse(format!(
                    "`{name}__{}` is not a tool name the model can be offered (letters, digits, `_` and `-`, at most 64)",
                    tool.name()
                )));
            };
            if taken.contains(&offered_as) || offered.iter().any(|t| t.spec.name == offered_as) {
                return Err(refuse(format!(
                    "`{offered_as}` is the name of another tool"
                )));
            }
            let validator = jsonschema::validator_for(tool.input_schema())
                .map_err(|e| refuse(format!("its input schema is not a valid JSON Schema: {e}")))?;
            offered.push(McpTool {
                spec: ToolSpec {
                    name: offered_as,
                    description: tool.description().map(str::to_string),
                    input_schema: tool.input_schema().clone(),
                },
                tool: tool.name().to_string(),
                effect: tool.effect(),
                validator,
                server: live.clone(),
            });
        }
    }
    Ok((offered, started))
}

/// What differs in `now` from `pinned` (a server's pin and what the same server showed
/// since), one line each: its identity, then tool by tool. Empty when nothing does.
pub fn pin_differences(pinned: &LockedServer, now: &LockedServer) -> Vec<String> {
    let mut differences = Vec::new();
    if pinned.identity != now.identity {
        differences.push(format!(
            "it is now `{}` (pinned: `{}`)",
            now.identity, pinned.identity
        ));
    }
    differences
        .extend(ToolList::from_pins(&now.tools).changes(&ToolList::from_pins(&pinned.tools)));
    differences
}

/// Pins every MCP server of `capsule` (loaded from `capsule_file`) as `mur install` does: each
/// staged and started as a session would start it (in a scratch workdir, removed after), its
/// identity and tools read, then stopped. A server that cannot be staged or started is the
/// error, coded as a session's would be.
pub async fn pin_servers(
    capsule_file: &std::path::Path,
    capsule: &CapsuleManifest,
    lookups: &Lookups<'_>,
    host_env: &HostEnv,
) -> Result<Vec<LockedServer>, SessionError> {
    let as_error = |error: &dyn Coded| SessionError {
        code: error.code(),
        message: error.message(),
        hint: error.hint(),
        workdir: None,
    };
    let servers = stage_mcp_servers(capsule, capsule_file, lookups, &mut Vec::new())
        .map_err(|error| as_error(&error))?;
    let scratch = tempfile::Builder::new()
        .prefix("murmur-pin-")
        .tempdir()
        .map_err(|error| SessionError {
            code: code::E_MCP_001,
            message: format!("no scratch directory to start the MCP servers in: {error}"),
            hint: "check that the temporary directory is writable".to_string(),
            workdir: None,
        })?;
    // The servers run as they will in a session: held under the capsule's class.
    let containment = crate::session::containment::achieve_for_session(capsule, None)?;
    let mut pins = Vec::new();
    for staged in &servers {
        let workdir = Workdir::create(scratch.path(), &format!("pin-{}", staged.entry.name), None)
            .map_err(|error| SessionError {
                code: code::E_MCP_001,
                message: format!(
                    "MCP server `{}`: no scratch workdir: {error}",
                    staged.entry.name
                ),
                hint: "check that the temporary directory is writable".to_string(),
                workdir: None,
            })?;
        let (_connection, _tools, pin) = open(
            staged,
            capsule,
            &workdir,
            host_env,
            (&containment, &Default::default()),
        )
        .await
        .map_err(|error| as_error(&error))?;
        pins.push(pin);
    }
    Ok(pins)
}

/// Connects to one staged server and lists its tools: the connection, the tools, and the pin
/// of what it showed.
async fn open(
    staged: &StagedMcpServer,
    capsule: &CapsuleManifest,
    workdir: &Workdir,
    host_env: &HostEnv,
    containment: (
        &murmur_confine::Achieved,
        &crate::session::containment::RefusalLog,
    ),
) -> Result<(McpConnection, Vec<murmur_mcp::McpTool>, LockedServer), McpError> {
    let connection = connect(staged, capsule, workdir, host_env, containment).await?;
    let tools = connection.tools(staged.timeout).await?;
    let listed = ToolList::of(&tools);
    let pin = LockedServer {
        name: staged.entry.name.clone(),
        identity: identity(&staged.server, connection.server_info()),
        tools_sha256: listed.sha256(),
        tools: listed.pins(),
    };
    Ok((connection, tools, pin))
}

/// A server's identity as the lock pins it: how it is reached (the command and arguments as
/// the manifest gives them, or the URL) and the name and version it introduced itself with.
fn identity(server: &McpServerSpec, info: &Value) -> String {
    let reached = match (&server.command, &server.url) {
        (Some(command), _) => std::iter::once(command.as_str())
            .chain(server.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        (None, url) => url.clone().unwrap_or_default(),
    };
    let said = |key: &str| info[key].as_str().unwrap_or("?").to_string();
    format!("{reached} ({} {})", said("name"), said("version"))
}

/// Watches each server of `tools` for `notifications/tools/list_changed` while it lives,
/// tracing under `parent` in `trace` what [`LiveServer::catch_up`] finds.
pub(crate) fn watch(tools: &[McpTool], trace: &Trace, parent: &str) {
    let mut servers: Vec<&Arc<LiveServer>> = Vec::new();
    for tool in tools {
        if !servers.iter().any(|s| Arc::ptr_eq(s, &tool.server)) {
            servers.push(&tool.server);
        }
    }
    for server in servers {
        let _ = server.trace.set((trace.clone(), parent.to_string()));
        let changes = server.connection.list_changes();
        let server = Arc::downgrade(server);
        tokio::spawn(async move {
            loop {
                changes.next().await;
                // The connection also wakes this once as it closes: then no one is left.
                let Some(server) = server.upgrade() else {
                    return;
                };
                server.catch_up().await;
            }
        });
    }
}

impl LiveServer {
    /// After list-changed notices not yet handled: reads the list again, holds it to
    /// `held_to`, refuses the server from then on when it differs (or cannot be read), and
    /// traces `mcp_tools_changed`. Nothing when every notice was handled.
    async fn catch_up(&self) {
        let mut handled = self.handled.lock().await;
        let seen = self.connection.list_changes().seen();
        if seen == *handled {
            return;
        }
        *handled = seen;
        let (tools_sha256, changes, error) = match self.connection.tools(self.timeout).await {
            Ok(tools) => {
                let now = ToolList::of(&tools);
                (now.sha256(), now.changes(&self.held_to), None)
            }
            Err(error) => (
                String::new(),
                Vec::new(),
                Some(ErrorRef {
                    code: error.code().to_string(),
                    message: error.to_string(),
                }),
            ),
        };
        let refused = !changes.is_empty() || error.is_some();
        if refused {
            let why = match &error {
                Some(error) => format!("its new tool list could not be read: {}", error.message),
                None => format!("its tools changed mid-session: {}", changes.join("; ")),
            };
            *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
        if let Some((trace, parent)) = self.trace.get() {
            let _ = trace.write(
                Some(parent),
                EventBody::McpToolsChanged {
                    server: self.name.clone(),
                    tools_sha256,
                    changes,
                    error,
                    refused,
                },
            );
        }
    }
}

/// Connects to one staged server.
async fn connect(
    staged: &StagedMcpServer,
    capsule: &CapsuleManifest,
    workdir: &Workdir,
    host_env: &HostEnv,
    (containment, refusals): (
        &murmur_confine::Achieved,
        &crate::session::containment::RefusalLog,
    ),
) -> Result<McpConnection, McpError> {
    let name = &staged.entry.name;
    let server = &staged.server;
    let not_started = |reason: String| McpError::Start {
        server: name.clone(),
        reason,
    };
    // Loading made sure of exactly one of `command` and `url`.
    let transport = match (&server.command, &server.url) {
        (Some(command), _) => {
            let grants = capsule.grants_of(&staged.entry);
            let env = server
                .env
                .iter()
                .filter_map(|var| host_env(var).map(|value| (var.clone(), value)))
                .collect();
            let mut confinement = crate::session::containment::confinement(
                capsule,
                containment,
                grants.network.allow.clone(),
                &workdir.workspace,
            );
            confinement.read_only = grants.filesystem.read_only;
            confinement.on_refused = Some(refusals.sink(&format!("mcp:{name}")));
            let grant = ShellGrant::new(
                std::slice::from_ref(command),
                &host_env("PATH").unwrap_or_default(),
                workdir.workspace_dir().clone(),
                env,
                confinement,
                TimeLimits {
                    default: staged.timeout,
                    max: staged.timeout,
                },
            );
            if grant
                .allowed()
                .iter()
                .all(|allowed| allowed.canonical.is_none())
            {
                return Err(not_started(format!(
                    "`{command}` is not an executable file (looked up in PATH when it has no `/`)"
                )));
            }
            // Its stderr goes to the record, where the server cannot reach it.
            let log = format!("logs/mcp-{name}.log");
            let log_file = workdir
                .record_dir()
                .open_append(&log)
                .map_err(|error| not_started(format!("its log {log} cannot be opened: {error}")))?;
            let service = grant
                .spawn_service(command, &server.args, log_file)
                .map_err(|error| not_started(error.to_string()))?;
            Transport::Stdio(Box::new(service))
        }
        (None, url) => Transport::Http {
            url: url.clone().unwrap_or_default(),
            headers: staged.headers.clone(),
        },
    };
    McpConnection::connect(name, transport, staged.timeout).await
}

impl McpTool {
    /// Calls the tool with the model's `input` (already checked), as call `call_id` of turn
    /// `turn` of task `task_id`.
    pub(crate) async fn call(
        &self,
        (task_id, turn, call_id): (&str, u32, &str),
        input: &Value,
    ) -> Dispatched {
        let started = Instant::now();
        let server = &self.server;
        let arguments = input.as_object().cloned().unwrap_or_default();
        // A list change the watcher has not handled yet is handled before the call.
        server.catch_up().await;
        let refused = server
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let called = match refused {
            Some(why) => Err(ErrorRef {
                code: code::E_MCP_005.to_string(),
                message: format!("MCP server `{}` is refused: {why}", server.name),
            }),
            None => server
                .connection
                .call(&self.tool, arguments, server.timeout)
                .await
                .map_err(|error| ErrorRef {
                    code: error.code().to_string(),
                    message: error.to_string(),
                }),
        };
        let (text, status, error) = match called {
            Ok(called) => {
                let status = if called.is_error {
                    CallStatus::Failed
                } else {
                    CallStatus::Passed
                };
                (self.cut(called.text), status, None)
            }
            Err(error) => (
                format!("error[{}]: {}", error.code, error.message),
                CallStatus::Error,
                Some(error),
            ),
        };
        let is_error = status != CallStatus::Passed;
        let resource_id = ["path", "uri"]
            .into_iter()
            .find_map(|key| input.get(key).and_then(Value::as_str))
            .map(str::to_string);
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
                // As the trace has it: `read` or `mutate`, absent when unknown.
                state_effect: (self.effect != "unknown").then(|| self.effect.to_string()),
                resource_id,
                input_path: murmur_trace::schema::input_path(input),
                output_bytes: text.len() as u64,
                duration_ms: started.elapsed().as_millis() as u64,
                summary: None,
                error,
                refusals: Vec::new(),
            },
            sends: Vec::new(),
        }
    }

    /// `text`, cut at [`RESULT_LIMIT`] with the whole kept in the workspace (beneath
    /// [`SCRATCH`](crate::session::workdir::SCRATCH), for the model to read) when longer.
    fn cut(&self, text: String) -> String {
        if text.len() <= RESULT_LIMIT {
            return text;
        }
        let server = &self.server;
        let n = server.cuts.fetch_add(1, Ordering::Relaxed) + 1;
        let path = format!(
            "{}/mcp-{}-{n:04}.log",
            crate::session::workdir::SCRATCH,
            server.name
        );
        let kept = server
            .workdir
            .workspace_dir()
            .write_whole(&path, text.as_bytes());
        let mut end = RESULT_LIMIT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let whole = match kept {
            Ok(()) => format!("the whole of it ({} bytes) is in {path}", text.len()),
            Err(error) => format!(
                "the whole of it ({} bytes) could not be kept: {error}",
                text.len()
            ),
        };
        format!("{}\n[cut at {RESULT_LIMIT} bytes; {whole}]", &text[..end])
    }
}
