//! A task's turns under `transport: process`: the agent CLI is the model, the capsule's tools
//! are Murmur's.
//!
//! What a task can rely on:
//!
//! - **The tools reach the CLI through one MCP server of this run only**: streamable HTTP on
//!   `127.0.0.1` (an OS-assigned port), guarded by a bearer token made for the run, stopped
//!   when the run ends. Every call it takes is run here, as the agent loop runs a model's call
//!   ([`SessionContext::tool_call`]): the input checked against the schema, `on-tool-call`
//!   heard (a `deny` refuses it), the tool under its grants, a `tool_call` event in the trace
//!   under its turn. The CLI's own tools are switched off; with no tools declared no server is
//!   started and the CLI runs as pure inference.
//! - **Each assistant message is one turn**: its `inference` event (the model the CLI named,
//!   the usage it reported, the time since the turn before), `on-inference`, and then its tool
//!   calls. The CLI's stdout and its calls race: a call that reaches the server before the
//!   line naming it waits for that line (up to 5 s), so it is answered under the message
//!   that made it; one no line names in that time makes a turn of its own, and the line
//!   naming it later does not make it a call again.
//! - **The run is bounded**: past `inference.max_turns` turns, past `inference.timeout_seconds`,
//!   or when the task is canceled, the CLI's whole process group is killed and the task ends
//!   `max_turns_reached`, `failed` (`E-RUN-028`) or `canceled`.
//! - **Failure is said, never waited on**: a line that is not the CLI's event stream, a run the
//!   CLI ends in error (a permission it was refused included), or an exit without a result ends
//!   the task `failed` with `E-RUN-028`, quoting what the CLI said: a CLI that exits or dies
//!   (a signal included) is quoted by its stderr's last 8 lines (of its last 4 KiB), or said
//!   to have printed nothing there.
//! - **The result is the CLI's**: the final text it reported is the task's answer
//!   (`out/result.txt`). Text streams to the observer as it comes when the session streams.
//! - **A reopened task goes on with the CLI's own session** (its id kept per context for the
//!   rest of the session loop), handed only the new message. Its sessions live in the
//!   session's [`CliHome`] (made by the first run, seeded with copies of the user's login
//!   files, removed as the `mur` session ends): the user's own config is neither written nor
//!   read by the CLI.
//! - **It runs under the session's containment class**, reaching only its provider (or the
//!   relay standing in for it) and the tools server, executing only its own closure, what its
//!   launcher runs, and the capsule's `capabilities.shell.allow` binaries; each connection it
//!   is refused is an `egress_refused` event (`child: cli:<command>`).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::{Ending, SessionContext, TaskRun};
use crate::grants::ChunkKind;
use crate::inference::neutral::{Block, Message, StoredMessage};
use crate::inference::process::{
    CliEvent, CliHome, MCP_SERVER_NAME, Malformed, ProcessCli, RunPlan, ServedTools, StreamReader,
    port_of,
};
use crate::inference::response::{Answer, StopReason};
use crate::session::staging::SWITCH_DRIVER_TOOL;
use crate::session::{Failure, new_id};
use murmur_mcp::serve::{Boxed, Elicitor};
use murmur_trace::schema::{Decision, Sent};

/// The longest line of the CLI's stream read; a longer one is malformed.
const MAX_LINE: u64 = 64 << 20;
/// How much of the CLI's stderr is kept to quote when it fails.
const STDERR_TAIL: usize = 4096;
/// How many of its last lines are quoted.
const SAID_LINES: usize = 8;
/// How long a call of the CLI's waits for the line of its stream that names it (the CLI
/// writes the line before calling, but the pipe and the socket race); past it the call makes
/// a turn of its own.
const LINE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a CLI that has reported its result may take to exit before it is killed.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A call of a capsule tool the CLI made, waiting for its answer.
struct ForwardedCall {
    name: String,
    input: Value,
    answer: oneshot::Sender<murmur_mcp::Called>,
}

/// The capsule's tools as the run's server lists them; every call forwarded to the task loop.
struct Forwarded {
    listing: Vec<Value>,
    calls: mpsc::Sender<ForwardedCall>,
}

impl murmur_mcp::serve::ServedTools for Forwarded {
    fn listing(&self) -> Vec<Value> {
        self.listing.clone()
    }

    fn call(
        &self,
        name: String,
        arguments: Value,
        _elicitor: Option<Elicitor>,
    ) -> Boxed<'_, murmur_mcp::Called> {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            let ended = || murmur_mcp::Called {
                text: "error[E-RUN-028]: the task this call belongs to has ended".to_string(),
                is_error: true,
            };
            let call = ForwardedCall {
                name,
                input: arguments,
                answer,
            };
            if self.calls.send(call).await.is_err() {
                return ended();
            }
            answered.await.unwrap_or_else(|_| ended())
        })
    }
}

/// Every MCP session of the run's server is the same one: the run's.
struct OneSession(Arc<Forwarded>);

impl murmur_mcp::serve::Sessions for OneSession {
    fn open(&self) -> Boxed<'_, Result<Arc<dyn murmur_mcp::serve::ServedTools>, String>> {
        let tools = self.0.clone() as Arc<dyn murmur_mcp::serve::ServedTools>;
        Box::pin(async move { Ok(tools) })
    }
}

/// The run's tools server, stopped when dropped.
struct ToolServer {
    served: ServedTools,
    calls: mpsc::Receiver<ForwardedCall>,
    _stop: oneshot::Sender<()>,
}

/// The turn whose tool calls are being answered.
struct OpenTurn {
    turn: u32,
    event: String,
    /// Its tool calls not yet answered: `(id, name, input)`.
    unanswered: Vec<(String, String, Value)>,
}

impl OpenTurn {
    /// Whether a call of `name` is among its unanswered ones.
    fn awaits(&self, name: &str) -> bool {
        self.unanswered.iter().any(|(_, called, _)| called == name)
    }
}

fn failure(message: impl Into<String>) -> Failure {
    Failure {
        code: "E-RUN-028".to_string(),
        message: message.into(),
        hint: "read what the CLI said; run it by hand with the same model and provider to see more"
            .to_string(),
    }
}

impl SessionContext<'_> {
    /// The task's turns, run by the agent CLI; see the module docs.
    pub(super) async fn process_turns(
        &self,
        cli: &ProcessCli,
        run: &mut TaskRun,
        task_event: &str,
        turns_used: &mut u32,
    ) -> std::io::Result<Ending> {
        if let Some(ending) = run.stopped() {
            return Ok(ending);
        }
        let mut server = match self.tool_server().await {
            Ok(server) => server,
            Err(why) => return Ok(Ending::Failed(failure(why))),
        };
        let private = match tempfile::Builder::new()
            .prefix("murmur-cli-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
        {
            Ok(dir) => dir,
            Err(error) => {
                return Ok(Ending::Failed(failure(format!(
                    "the CLI's private directory cannot be made: {error}"
                ))));
            }
        };
        let home = match self.cli_home(cli) {
            Ok(home) => home,
            Err(why) => return Ok(Ending::Failed(failure(why))),
        };
        let context = run.context_id.clone().unwrap_or_default();
        let resume = self
            .cli_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&context)
            .cloned();
        let model = (!self.staged.model.is_empty()).then_some(self.staged.model.as_str());
        // Recording or replaying: the CLI talks to a relay standing in for its provider.
        let relay = match &self.staged.session_cassette() {
            None => None,
            Some(cassette) => match cassette
                .relay(&cli.provider_url(&self.config.host_env))
                .await
            {
                Ok(relay) => Some(relay),
                Err(error) => {
                    return Ok(Ending::Failed(failure(format!(
                        "the cassette's provider relay cannot start: {error}"
                    ))));
                }
            },
        };
        let plan = RunPlan {
            system_prompt: &self.staged.system_prompt,
            model,
            tools: server.as_ref().map(|s| &s.served),
            resume: resume.as_deref(),
            private_dir: private.path(),
            home: &home,
            host_env: &self.config.host_env,
            provider_relay: relay.as_ref().map(|relay| relay.base_url.as_str()),
        };
        let launch = match cli.launch(&plan) {
            Ok(launch) => launch,
            Err(error) => {
                return Ok(Ending::Failed(failure(format!(
                    "the CLI's configuration cannot be written: {error}"
                ))));
            }
        };
        // The CLI reaches its provider (or the relay standing in for it) and the tool server,
        // nothing else: loopback ports are forwarded as they are, any other host goes through
        // the egress proxy.
        let provider = relay
            .as_ref()
            .map(|relay| relay.base_url.clone())
            .unwrap_or_else(|| cli.provider_url(&self.config.host_env));
        let tools = server
            .as_ref()
            .and_then(|server| port_of(&server.served.url))
            .map(|port| format!("127.0.0.1:{port}"));
        // A rule names an origin: the provider's URL without its path (`…/v1`).
        let provider = url::Url::parse(&provider)
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or(provider);
        let network: Vec<murmur_manifest::network::NetworkRule> = std::iter::once(provider)
            .chain(tools)
            .filter_map(|rule| murmur_manifest::network::NetworkRule::parse(&rule).ok())
            .collect();
        let mut confinement = crate::session::containment::confinement(
            &self.staged.capsule,
            &self.containment,
            network,
            &run.workdir.workspace,
        );
        confinement
            .interpreter_runtime
            .extend(launch.readable.iter().cloned());
        confinement.on_refused = Some(self.refusals.sink(&format!("cli:{}", cli.command)));
        // What it may execute beside its own closure: what its launcher runs, and the binaries
        // the capsule trusts to run (`capabilities.shell.allow`, found on the CLI's PATH).
        let path_var = launch
            .env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        let mut also_executes = launch.also_executes.clone();
        also_executes.extend(
            self.staged
                .capsule
                .capabilities
                .shell
                .allow
                .iter()
                .filter_map(|name| murmur_confine::resolve(name, &path_var)),
        );
        let program = murmur_confine::ConfinedProgram {
            program: cli.path.clone(),
            arg0: std::path::Path::new(&cli.command)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| cli.command.clone()),
            args: launch.args,
            cwd: run.workdir.workspace.clone(),
            env: launch.env,
            writable: launch.writable,
            readable: launch.readable,
            also_executes,
            confinement,
        };
        let (child, stderr) = match program.spawn() {
            Ok(spawned) => spawned,
            Err(why) => {
                return Ok(Ending::Failed(failure(format!(
                    "{} could not be started: {why}",
                    cli.command
                ))));
            }
        };
        let stderr_tail = tokio::spawn(tail_of(stderr));
        let prompt = pending_prompt(run);
        {
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin;
            // A CLI that dies before reading its prompt is reported by its exit.
            let _ = stdin.write_all(prompt.as_bytes()).await;
            let _ = stdin.shutdown().await;
        }
        let mut lines = BufReader::new(child.stdout);
        let mut reader = cli.dialect.reader();
        let deadline = tokio::time::sleep(cli.timeout);
        tokio::pin!(deadline);
        let stop = run.stop.clone();
        let mut open: Option<OpenTurn> = None;
        let mut since = Instant::now();
        let mut guard = child.guard;
        let mut calls_open = server.is_some();
        // A call of the CLI's that no line has named yet, and when it stops waiting.
        let mut waiting: Option<ForwardedCall> = None;
        let wait_over = tokio::time::sleep(LINE_WAIT);
        tokio::pin!(wait_over);
        let ending: Ending = 'run: loop {
            let next = tokio::select! {
                biased;
                () = async {
                    match &stop {
                        Some(stop) => stop.requested().await,
                        None => std::future::pending().await,
                    }
                } => break 'run run.stopped().unwrap_or(Ending::Canceled),
                () = &mut deadline => break 'run Ending::Failed(failure(format!(
                    "{} ran past `inference.timeout_seconds` ({} s) and was stopped",
                    cli.command,
                    cli.timeout.as_secs()
                ))),
                line = read_line(&mut lines) => Next::Line(line),
                () = &mut wait_over, if waiting.is_some() => Next::WaitOver,
                call = async {
                    match server.as_mut() {
                        Some(server) if calls_open && waiting.is_none() => {
                            server.calls.recv().await
                        }
                        _ => std::future::pending().await,
                    }
                } => Next::Call(call),
            };
            let call = match next {
                Next::Line(Err(error)) => break 'run Ending::Failed(failure(error.to_string())),
                Next::Line(Ok(None)) => {
                    let status = tokio::time::timeout(EXIT_GRACE, guard.wait()).await;
                    let said = said(stderr_tail).await;
                    let message = match status {
                        Ok(Ok(status)) if status.success() => {
                            format!("{} exited without reporting a result{said}", cli.command)
                        }
                        Ok(Ok(status)) if said.is_empty() => format!(
                            "{} exited with {status}; it printed nothing on stderr",
                            cli.command
                        ),
                        Ok(Ok(status)) => format!("{} exited with {status}{said}", cli.command),
                        _ => format!("{} closed its output but did not exit{said}", cli.command),
                    };
                    break 'run Ending::Failed(failure(message));
                }
                Next::Line(Ok(Some(line))) => {
                    let events = match reader.line(&line) {
                        Ok(events) => events,
                        Err(Malformed(why)) => break 'run Ending::Failed(failure(why)),
                    };
                    for event in events {
                        match event {
                            CliEvent::Session(id) => {
                                self.cli_sessions
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .insert(context.clone(), id);
                            }
                            CliEvent::TextDelta(text) => {
                                if self.config.stream {
                                    self.observer.chunk(ChunkKind::Text, &text);
                                }
                            }
                            CliEvent::Message { model, answer } => {
                                if let Some(ending) = self
                                    .process_turn(
                                        run, task_event, turns_used, &mut open, &mut since, model,
                                        answer,
                                    )
                                    .await?
                                {
                                    break 'run ending;
                                }
                            }
                            CliEvent::Finished(Ok(text)) => {
                                self.close_turn(run, &mut open);
                                break 'run Ending::Finished(text);
                            }
                            CliEvent::Finished(Err(why)) => {
                                self.close_turn(run, &mut open);
                                let said = said(stderr_tail).await;
                                break 'run Ending::Failed(failure(format!("{why}{said}")));
                            }
                        }
                    }
                    waiting.take_if(|call| named(&reader, &open, call))
                }
                Next::WaitOver => waiting.take(),
                Next::Call(None) => {
                    calls_open = false;
                    None
                }
                Next::Call(Some(call)) if named(&reader, &open, &call) => Some(call),
                Next::Call(Some(call)) => {
                    // The call came before the line naming it: it waits for that line, so
                    // the call is answered under the message that made it.
                    wait_over
                        .as_mut()
                        .reset(tokio::time::Instant::now() + LINE_WAIT);
                    waiting = Some(call);
                    None
                }
            };
            if let Some(call) = call {
                if let Some(CliEvent::Message { model, answer }) = reader.flush()
                    && let Some(ending) = self
                        .process_turn(
                            run, task_event, turns_used, &mut open, &mut since, model, answer,
                        )
                        .await?
                {
                    break 'run ending;
                }
                if !open.as_ref().is_some_and(|turn| turn.awaits(&call.name)) {
                    // No line named the call in time: it makes a turn of its own.
                    reader.made_alone(call.name.clone(), call.input.clone());
                    let answer = Answer {
                        stop_reason: StopReason::ToolCall,
                        content: vec![Block::ToolCall {
                            id: new_id("call_", 24),
                            name: call.name.clone(),
                            input: call.input.clone(),
                        }],
                        usage: None,
                        continuation_id: None,
                    };
                    if let Some(ending) = self
                        .process_turn(
                            run, task_event, turns_used, &mut open, &mut since, None, answer,
                        )
                        .await?
                    {
                        break 'run ending;
                    }
                }
                let Some(turn) = open.as_mut() else { continue };
                let at = turn
                    .unanswered
                    .iter()
                    .position(|(_, name, input)| *name == call.name && *input == call.input)
                    .or_else(|| {
                        turn.unanswered
                            .iter()
                            .position(|(_, name, _)| *name == call.name)
                    });
                let call_id = match at {
                    Some(at) => turn.unanswered.remove(at).0,
                    None => new_id("call_", 24),
                };
                let (number, event) = (turn.turn, turn.event.clone());
                let done = self.tool_call(run, number, &event, &call_id, &call.name, &call.input);
                let done = match &stop {
                    Some(stop) => tokio::select! {
                        biased;
                        done = done => Some(done),
                        () = stop.requested() => None,
                    },
                    None => Some(done.await),
                };
                match done {
                    Some(done) => done?,
                    None => break 'run run.stopped().unwrap_or(Ending::Canceled),
                }
                let answered = run.history.last().map(|stored| &stored.message);
                let _ = call.answer.send(murmur_mcp::Called {
                    is_error: answered.is_some_and(super::message_is_error),
                    text: answered.map(Message::text).unwrap_or_default(),
                });
            }
        };
        // Whatever the ending, the CLI's whole group goes now, and the server with it.
        if matches!(ending, Ending::Finished(_)) {
            let _ = tokio::time::timeout(EXIT_GRACE, guard.wait()).await;
        }
        drop(guard);
        drop(server);
        self.close_turn(run, &mut open);
        Ok(ending)
    }

    /// The session's home for `cli`: made (and seeded) by the session's first run, the same
    /// for every run after it.
    fn cli_home(&self, cli: &ProcessCli) -> Result<Arc<CliHome>, String> {
        let mut held = self.cli_home.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(home) = held.as_ref() {
            return Ok(home.clone());
        }
        let home = Arc::new(CliHome::create(
            cli.dialect.home_layout(),
            &self.config.host_env,
        )?);
        *held = Some(home.clone());
        Ok(home)
    }

    /// Records one assistant message as a turn; past `inference.max_turns` the run ends.
    #[allow(clippy::too_many_arguments)]
    async fn process_turn(
        &self,
        run: &mut TaskRun,
        task_event: &str,
        turns_used: &mut u32,
        open: &mut Option<OpenTurn>,
        since: &mut Instant,
        model: Option<String>,
        answer: Answer,
    ) -> std::io::Result<Option<Ending>> {
        self.close_turn(run, open);
        let max_turns = self.staged.max_turns;
        if *turns_used >= max_turns {
            return Ok(Some(Ending::MaxTurns(Failure {
                code: "E-RUN-015".to_string(),
                message: format!(
                    "the task used all {max_turns} turns of `inference.max_turns` without finishing; the CLI was stopped"
                ),
                hint: "raise `inference.max_turns`, or give the agent a narrower task".to_string(),
            })));
        }
        *turns_used += 1;
        let turn = *turns_used;
        self.observer.turn_started(turn);
        let mut choice = self.staged.choices.primary().clone();
        if let Some(model) = model.filter(|m| !m.is_empty()) {
            choice.model = model;
        }
        let calls: Vec<(String, String, Value)> = answer
            .content
            .iter()
            .filter_map(|block| match block {
                Block::ToolCall { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        let mut assistant = StoredMessage::new(Message::Assistant {
            content: answer.content.clone(),
        });
        assistant.source_id = Some(format!("process:{}", choice.driver));
        let output_estimate = crate::inference::tokens::count(
            &serde_json::to_string(&assistant.message).unwrap_or_default(),
        );
        let input_estimate = self.fixed_tokens() + run.estimate();
        run.history.push(assistant);
        let sent = Sent {
            messages: u32::from(turn == 1),
            full_resend: false,
            continuation_id: None,
        };
        let wants_tools = !calls.is_empty();
        let body = self.inference_event(
            run,
            &choice,
            turn,
            sent,
            input_estimate,
            output_estimate,
            Some(&answer),
            answer.stop_reason,
            if wants_tools {
                Decision::CallTools
            } else {
                Decision::Finish
            },
            &calls,
            *since,
            None,
        );
        let event = self.trace(task_event, body)?;
        *since = Instant::now();
        self.on_inference(run, &choice, turn, &event, &answer, input_estimate)
            .await?;
        *open = Some(OpenTurn {
            turn,
            event,
            unanswered: calls,
        });
        Ok(None)
    }

    /// The open turn is over: each of its calls the CLI never passed to the capsule (one of
    /// its own built-ins it was refused, say) gets a result saying nothing was run, so the
    /// history holds no call without its result.
    fn close_turn(&self, run: &mut TaskRun, open: &mut Option<OpenTurn>) {
        let Some(turn) = open.take() else { return };
        for (id, name, _) in turn.unanswered {
            let mut result = StoredMessage::new(Message::Tool {
                tool_call_id: id,
                is_error: true,
                content: vec![Block::text(format!(
                    "`{name}` is not one of the capsule's tools: the CLI did not pass it on, and nothing was run"
                ))],
            });
            result.source_id = Some("runtime".to_string());
            run.history.push(result);
        }
    }

    /// The run's tools server, with the capsule's tools; none when it declares none.
    async fn tool_server(&self) -> Result<Option<ToolServer>, String> {
        let specs: Vec<_> = self
            .specs
            .iter()
            .filter(|spec| spec.name != SWITCH_DRIVER_TOOL)
            .collect();
        if specs.is_empty() {
            return Ok(None);
        }
        let listing = specs
            .iter()
            .map(|spec| {
                json!({
                    "name": spec.name,
                    "description": spec.description,
                    "inputSchema": spec.input_schema,
                })
            })
            .collect();
        let names = specs.iter().map(|spec| spec.name.clone()).collect();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|error| format!("the tools' server cannot listen on 127.0.0.1: {error}"))?;
        let address = listener
            .local_addr()
            .map_err(|error| format!("the tools' server has no address: {error}"))?;
        let bearer = new_id("", 48);
        let (calls, received) = mpsc::channel(16);
        let (stop, stopped) = oneshot::channel::<()>();
        let identity = murmur_mcp::serve::Identity {
            name: format!("{MCP_SERVER_NAME}:{}", self.staged.capsule.name),
            version: self.staged.capsule.version.clone(),
        };
        let sessions = Arc::new(OneSession(Arc::new(Forwarded { listing, calls })));
        let token = bearer.clone();
        tokio::spawn(async move {
            let _ =
                murmur_mcp::serve::serve_http(listener, sessions, identity, Some(token), async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Some(ToolServer {
            served: ServedTools {
                url: format!("http://{address}/mcp"),
                bearer,
                names,
            },
            calls: received,
            _stop: stop,
        }))
    }
}

/// What woke the run's loop.
enum Next {
    Line(std::io::Result<Option<String>>),
    /// A waiting call's line did not come in time.
    WaitOver,
    Call(Option<ForwardedCall>),
}

/// Whether a line of the CLI's has named `call`: in the message being gathered, or among the
/// open turn's unanswered calls.
fn named(reader: &StreamReader, open: &Option<OpenTurn>, call: &ForwardedCall) -> bool {
    reader.gathers_call(&call.name) || open.as_ref().is_some_and(|turn| turn.awaits(&call.name))
}

/// The text the CLI is handed: the user messages after the last assistant message (the task,
/// or a hook's feedback on reopening), joined by blank lines.
fn pending_prompt(run: &TaskRun) -> String {
    let start = run
        .history
        .iter()
        .rposition(|stored| matches!(stored.message, Message::Assistant { .. }))
        .map_or(0, |at| at + 1);
    run.history[start..]
        .iter()
        .filter(|stored| matches!(stored.message, Message::User { .. }))
        .map(|stored| stored.message.text())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The next line of the stream (`None` at its end); one longer than [`MAX_LINE`] is an error.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let read = reader
        .take(MAX_LINE + 1)
        .read_until(b'\n', &mut bytes)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    if bytes.len() as u64 > MAX_LINE {
        return Err(std::io::Error::other(format!(
            "the CLI printed a line longer than {} MiB",
            MAX_LINE >> 20
        )));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).trim_end().to_string()))
}

/// The last [`STDERR_TAIL`] bytes of the CLI's stderr.
async fn tail_of(mut stderr: tokio::process::ChildStderr) -> String {
    let mut tail: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > 2 * STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
    let start = tail.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&tail[start..]).into_owned()
}

/// What the CLI said on stderr, for a failure's message: its last [`SAID_LINES`] non-blank
/// lines (of the last [`STDERR_TAIL`] bytes), joined by ` | `.
async fn said(tail: tokio::task::JoinHandle<String>) -> String {
    let tail = tokio::time::timeout(std::time::Duration::from_secs(2), tail)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let last = &lines[lines.len().saturating_sub(SAID_LINES)..];
    format!("; it said: {}", last.join(" | "))
}
