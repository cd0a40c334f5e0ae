//! A session whose tool calls come from outside the agent loop: an MCP client calling the
//! capsule's tools (`mur mcp serve`).
//!
//! What a caller can rely on:
//!
//! - **A session as `mur run` makes one** ([`open_served`]): its own workdir and trace, the
//!   capsule's MCP servers started, its hooks staged and dispatched (`on-stage`,
//!   `on-session-start`, `on-task-start`, then `on-task-end` and `on-session-end`), every
//!   tool under its grants. Nothing calls the model.
//! - **Its calls are one task** (`task_start` with source `mcp`), each call a turn of it,
//!   answered through the path the model's calls take: the manifest's check and the input
//!   schema, the `on-tool-call` decision point and observation, the `tool_call` (or `shell`,
//!   `skill_call`, `call_denied`) event under the task. The answer is what the model would
//!   get: the result inside the untrusted-content fence naming the tool, and whether it is
//!   an error. The runtime's `switch-driver` tool is not served. A tool's `request-input` is
//!   answered by the call's own broker (the client's user), or fails as outside an A2A task.
//! - **Calls are answered one at a time, in the order they came**; the session ends when the
//!   last [`ServedSession`] handle is dropped: `task_end` (`ok`), `on-session-end`,
//!   `session_end`. [`ServedSession::ended`] waits for that and gives the session's report.

use super::*;
use crate::session::run::{Ran, in_session};
use crate::session::{SessionError, SessionReport, TaskSource};
use tokio::sync::{mpsc, oneshot};

/// One call, and where its answer goes.
struct ServedCall {
    name: String,
    input: Value,
    asks: Option<crate::grants::task::SharedBroker>,
    answer: oneshot::Sender<ServedAnswer>,
}

/// What a served call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedAnswer {
    /// The result as the model would get it: fenced, naming the tool.
    pub text: String,
    pub is_error: bool,
}

/// An open served session; see the module docs.
pub struct ServedSession {
    calls: mpsc::Sender<ServedCall>,
    tools: Vec<ToolSpec>,
}

/// The end of a served session: its report once it has ended.
pub type ServedEnd = tokio::task::JoinHandle<Result<SessionReport, SessionError>>;

/// Opens a served session of `staged`: the session and the handle its end is awaited with.
/// A session that cannot start (its workdir, an MCP server, `on-stage`) is its error.
pub async fn open_served(
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: SessionConfig,
    observer: Arc<dyn Observer>,
) -> Result<(ServedSession, ServedEnd), SessionError> {
    let (ready, opened) = oneshot::channel();
    let (calls, queue) = mpsc::channel(16);
    let end = tokio::spawn(async move {
        in_session(engine, staged, &config, observer, async |context| {
            context.serve_calls(ready, queue).await
        })
        .await
    });
    match opened.await {
        Ok(tools) => Ok((ServedSession { calls, tools }, end)),
        // The session ended before its calls began: its error says why.
        Err(_) => Err(match end.await {
            Ok(Err(error)) => error,
            Ok(Ok(_)) | Err(_) => SessionError {
                code: "E-RUN-001",
                message: "the served session ended before it could take calls".to_string(),
                hint: "see the session's trace".to_string(),
                workdir: None,
            },
        }),
    }
}

impl ServedSession {
    /// The tools served: the capsule's tools, skills, shell and MCP servers' tools, as the
    /// model is offered them.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Calls tool `name` with `input`; `asks` answers the tool's `request-input` (none: the
    /// tool cannot ask).
    pub async fn call(
        &self,
        name: String,
        input: Value,
        asks: Option<crate::grants::task::SharedBroker>,
    ) -> ServedAnswer {
        let (answer, answered) = oneshot::channel();
        let ended = || ServedAnswer {
            text: "error[E-RUN-001]: the session has ended".to_string(),
            is_error: true,
        };
        if self
            .calls
            .send(ServedCall {
                name,
                input,
                asks,
                answer,
            })
            .await
            .is_err()
        {
            return ended();
        }
        answered.await.unwrap_or_else(|_| ended())
    }
}

impl SessionContext<'_> {
    /// The served task: opened, its tools handed to `ready`, each call of `queue` answered as
    /// one turn, ended when `queue` closes.
    async fn serve_calls(
        &self,
        ready: oneshot::Sender<Vec<ToolSpec>>,
        mut queue: mpsc::Receiver<ServedCall>,
    ) -> std::io::Result<Ran> {
        let input = TaskInput::new("tool calls from an MCP client", TaskSource::Mcp);
        let (task_id, context_id) = (new_id("tsk_", 24), new_id("ctx_", 24));
        let (mut run, task_event) = self.open_task(&input, &task_id, &context_id)?;
        let workspace_before = self.watch.before_task();
        self.task_start(&mut run, &task_event, 0).await?;
        let served: Vec<ToolSpec> = self
            .specs
            .iter()
            .filter(|spec| spec.name != SWITCH_DRIVER_TOOL)
            .cloned()
            .collect();
        let _ = ready.send(served);
        let mut turns = 0;
        while let Some(call) = queue.recv().await {
            turns += 1;
            let call_id = new_id("call_", 24);
            run.broker = call.asks.clone();
            let answer = if call.name == SWITCH_DRIVER_TOOL {
                ServedAnswer {
                    text: format!(
                        "error[E-RUN-008]: `{SWITCH_DRIVER_TOOL}` is the capsule's own model's tool, not served"
                    ),
                    is_error: true,
                }
            } else {
                self.tool_call(
                    &mut run,
                    turns,
                    &task_event,
                    &call_id,
                    &call.name,
                    &call.input,
                )
                .await?;
                // Nothing is kept of a call once it is answered.
                let message = run.history.pop().map(|stored| stored.message);
                ServedAnswer {
                    is_error: message.as_ref().is_some_and(message_is_error),
                    text: message.map(|m| m.text()).unwrap_or_default(),
                }
            };
            let _ = call.answer.send(answer);
        }
        self.task_end(&run, &task_event, ExitStatus::Ok, turns, 0)
            .await?;
        let changes = self.watch.after_task(&workspace_before);
        self.trace(
            &task_event,
            EventBody::TaskEnd {
                task_id: task_id.clone(),
                context_id: Some(context_id.clone()),
                exit_status: ExitStatus::Ok,
                turns,
                reopen_count: 0,
                result_path: None,
                error: None,
                changes: Some(changes.clone()),
            },
        )?;
        let mut ran = Ran::default();
        ran.add(TaskReport {
            task_id,
            context_id: Some(context_id),
            exit_status: ExitStatus::Ok,
            turns,
            result_path: None,
            result_text: None,
            reopen_count: 0,
            error: None,
            outputs: Vec::new(),
            changes: Some(changes),
        });
        Ok(ran)
    }
}
