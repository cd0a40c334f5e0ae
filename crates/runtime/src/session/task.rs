//! One session's agent loop: tasks, their turns, and every point where hooks are heard.
//!
//! A task asked to stop (its client canceled it, or the whole session was canceled) stops
//! before its next turn, or at once when a model or tool call is in flight: the call is
//! abandoned and the turn's answer taken back out of the history, so no tool call is ever kept
//! without its result. A canceled task's `on-task-end` is still dispatched; it cannot be
//! reopened.

mod calls;
mod compaction;
mod grants;
mod process;
pub(crate) mod served;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use murmur_manifest::Coded;
use serde_json::Value;

use crate::engine::Engine;
use crate::grants::message::SendingTask;
use crate::grants::tool_registry::schema_refusal;
use crate::grants::{ChunkSink, Grants};
use crate::hooks::events::{
    self, HookEvent, HookOutput, SessionEndEvent, SessionStartEvent, StageEvent, TaskEndEvent,
    TaskStartEvent, ToolCallEvent, ToolCallOutcome, ToolStatus, from_wit_list, to_wit,
};
use crate::hooks::{Denial, HookInference, HookServices, HookSet, Scope};
use crate::inference::cache_key::prompt_cache_key;
use crate::inference::call::{DriverFailure, call_driver};
use crate::inference::choices::{DriverChoice, wire_view};
use crate::inference::continuation::{Continuation, Plan};
use crate::inference::neutral::{Block, Message, StoredMessage};
use crate::inference::request::{DriverRequest, ToolSpec};
use crate::inference::response::{Answer, StopReason};
use crate::inference::spend::SpendMeter;
use crate::inference::tokens::{self, MessageCounts};
use crate::session::control::{ControlState, Principal};
use crate::session::shell;
use crate::session::staging::{SHELL_TOOL, SWITCH_DRIVER_TOOL, StagedDriver, StagedSkill};
use crate::session::tools::{SessionTool, ToolCallSite, fence, skill_answer};
use crate::session::workdir::{SavedHistory, Workdir};
use crate::session::{
    ExitStatus, Failure, Observer, SessionConfig, Staged, StopRequest, StopSignal, TaskInput,
    TaskReport, new_id,
};
use crate::tool::KeptInstance;
use grants::SessionGrants;
use murmur_confine::{ShellGrant, ShellRequest, describe::describe};
use murmur_trace::Trace;
use murmur_trace::context::SpanRef;
use murmur_trace::schema::{ComponentGrants, Decision, ErrorRef, EventBody, Origin, Sent};

/// What every task of one session shares.
pub(crate) struct SessionContext<'a> {
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: &'a SessionConfig,
    workdir: &'a Workdir,
    session_id: String,
    observer: Arc<dyn Observer>,
    /// Each driver choice's grants, by choice index: its driver's gateway, credential and
    /// `MURMUR_INFERENCE_*` naming the choice's own endpoint, model and driver.
    choice_grants: Vec<Grants>,
    /// The settings in force (the selected choice, the output cap).
    control: Arc<ControlState>,
    /// The session's spend, over every gateway.
    spend: Arc<SpendMeter>,
    /// Whether the agent has the `switch-driver` tool.
    switch_tool: Option<ToolSpec>,
    tools: Vec<SessionTool>,
    /// The tool inventory as every request carries it.
    specs: Vec<ToolSpec>,
    /// The model's `shell` tool, when `capabilities.shell.allow` names any binary.
    shell: Option<ShellTool>,
    /// The tools of the capsule's MCP servers, started for this session.
    mcp: Vec<crate::session::mcp::McpTool>,
    /// The named `peers:`, each offered as its tool `ask-<name>`.
    peers: crate::session::peers::PeerTools,
    /// The MCP servers started, as `session_start` records them.
    mcp_servers: Vec<murmur_trace::schema::McpServerRef>,
    /// Tokens of the system prompt and the tool inventory: the part every request repeats.
    fixed_tokens: std::sync::OnceLock<u64>,
    hooks: Arc<HookSet>,
    /// What each tool, hook and driver holds, for `session_start`.
    grant_listing: Vec<ComponentGrants>,
    /// Whether some hook may read the conversation (then each dispatch carries a snapshot).
    hooks_read_history: bool,
    /// The continuation the last task ended holding: it lasts for the rest of the session
    /// loop, for the next task that goes on the same threaded conversation.
    continuation: std::sync::Mutex<Continuation>,
    /// Under `transport: process`: the CLI's own session id, by context, for the next task
    /// (or reopening) of the same context.
    cli_sessions: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Under `transport: process`: the CLI's home for this session (made by its first run,
    /// removed when the session ends).
    cli_home: std::sync::Mutex<Option<Arc<crate::inference::process::CliHome>>>,
    trace: Option<Trace>,
    session_event: String,
    /// The class every native child of the session runs under, and how.
    containment: murmur_confine::Achieved,
    /// Where the native children's refused connections are written.
    refusals: crate::session::containment::RefusalLog,
    /// The looks at the directory the agent works in, before and after each task: what each
    /// task (and the session) changed there.
    watch: crate::session::changes::Watch,
}

/// How a task's turns ended.
enum Ending {
    /// The model finished; its final text.
    Finished(String),
    Failed(Failure),
    MaxTurns(Failure),
    /// A failure that ends the session, not only the task.
    Stop(Failure),
    /// The next call would have passed `inference.max_session_tokens`.
    SpendCeiling(Failure),
    /// The ceiling refused the compaction hook's summary: the conversation no longer fits and
    /// cannot be made to, so the session ends `spend_ceiling_reached`.
    SessionSpent(Failure),
    /// The task's client, or a signal to the session, canceled it.
    Canceled,
}

impl<'a> SessionContext<'a> {
    pub(crate) fn new(
        engine: Arc<Engine>,
        staged: Arc<Staged>,
        config: &'a SessionConfig,
        session_id: &str,
        workdir: &'a Workdir,
        observer: Arc<dyn Observer>,
        containment: &murmur_confine::Achieved,
    ) -> SessionContext<'a> {
        let sink: ChunkSink = {
            let observer = observer.clone();
            Arc::new(move |kind, text: &str| observer.chunk(kind, text))
        };
        let refusals = crate::session::containment::RefusalLog::default();
        let grants = SessionGrants::of(
            &staged,
            &config.host_env,
            session_id,
            workdir,
            sink,
            (containment, &refusals),
        );
        let control = config
            .control
            .clone()
            .unwrap_or_else(|| ControlState::new(staged.clone()));
        let spend = Arc::new(SpendMeter::new(staged.max_session_tokens));
        let tools: Vec<SessionTool> = grants
            .tools
            .into_iter()
            .enumerate()
            .map(|(index, grants)| SessionTool { index, grants })
            .collect();
        let services = Arc::new(HookServices {
            engine: engine.clone(),
            hooks: staged.hooks.clone(),
            inference: Some(HookInference {
                staged: staged.clone(),
                driver_grants: {
                    let mut grants = grants.choices[0].clone();
                    grants.chunks = None;
                    grants
                },
            }),
            spend: spend.clone(),
            trace: std::sync::OnceLock::new(),
            workdir: workdir.clone(),
            session_id: session_id.to_string(),
        });
        let hooks = HookSet::start(services, grants.hooks);
        let shell = grants.shell.map(ShellTool::new);
        let (choice_grants, grant_listing) = (grants.choices, grants.listing);
        let capsule = &staged.capsule;
        let hooks_read_history = staged.hooks.iter().any(|hook| {
            hook.grants
                .contains(&murmur_manifest::capsule::HookGrant::Conversation)
        });
        let mut specs: Vec<ToolSpec> = staged
            .tools
            .iter()
            .map(|t| t.spec.clone())
            .chain(staged.skills.iter().map(|skill| skill.spec.clone()))
            .collect();
        if let Some(shell) = &shell {
            specs.push(shell.spec.clone());
        }
        let switch_tool = capsule
            .control
            .agent_settings
            .contains(&murmur_manifest::capsule::Setting::InferenceDriver)
            .then(|| switch_driver_spec(&staged));
        if let Some(spec) = &switch_tool {
            specs.push(spec.clone());
        }
        let peers = crate::session::peers::PeerTools::offered(&staged, &[]);
        specs.extend(peers.specs().cloned());
        SessionContext {
            peers,
            watch: crate::session::changes::Watch::new(
                &workdir.workspace,
                workdir.runtime_entries(),
            ),
            containment: containment.clone(),
            refusals,
            specs,
            shell,
            mcp: Vec::new(),
            mcp_servers: Vec::new(),
            engine,
            config,
            workdir,
            session_id: session_id.to_string(),
            observer,
            choice_grants,
            control,
            spend,
            switch_tool,
            tools,
            fixed_tokens: std::sync::OnceLock::new(),
            hooks,
            grant_listing,
            hooks_read_history,
            continuation: Default::default(),
            cli_sessions: Default::default(),
            cli_home: Default::default(),
            trace: None,
            session_event: String::new(),
            staged,
        }
    }

    /// Starts the capsule's MCP servers for this session and offers their tools after the
    /// others; a server that fails is the session's error.
    pub(crate) async fn start_mcp(mut self) -> Result<Self, crate::session::SessionError> {
        // The peer tools as the session start finds them (each offered where it was).
        let (peers, warnings) = crate::session::peers::start(&self.staged).await?;
        for warning in &warnings {
            self.observer.warning(warning);
        }
        for spec in peers.specs() {
            if let Some(offered) = self.specs.iter_mut().find(|s| s.name == spec.name) {
                *offered = spec.clone();
            }
        }
        self.peers = peers;
        let taken: Vec<String> = self.specs.iter().map(|spec| spec.name.clone()).collect();
        let (tools, servers) = crate::session::mcp::start(
            &self.staged.mcp_servers,
            &self.staged.capsule,
            self.workdir,
            &self.config.host_env,
            &taken,
            (&self.containment, &self.refusals),
        )
        .await?;
        self.specs
            .extend(tools.iter().map(|tool| tool.spec.clone()));
        self.mcp = tools;
        self.mcp_servers = servers;
        Ok(self)
    }

    /// The MCP servers started, as `session_start.mcp_servers` records them.
    pub(crate) fn mcp_servers(&self) -> &[murmur_trace::schema::McpServerRef] {
        &self.mcp_servers
    }

    /// The same context, writing to `trace` under the `session_start` event.
    pub(crate) fn with_trace(mut self, trace: Trace, session_event: String) -> Self {
        self.hooks.attach_trace(trace.clone());
        self.refusals.attach(trace.clone(), session_event.clone());
        crate::session::mcp::watch(&self.mcp, &trace, &session_event);
        self.trace = Some(trace);
        self.session_event = session_event;
        self
    }

    /// The declared tools offered to the model: the capsule's tools and skills, then its MCP
    /// servers' tools.
    pub(crate) fn declared_tool_names(&self) -> Vec<String> {
        let mut names = self.staged.declared_tool_names();
        names.extend(self.mcp.iter().map(|tool| tool.spec.name.clone()));
        names
    }

    /// What each tool, hook and driver of the session holds.
    pub(crate) fn grant_listing(&self) -> &[ComponentGrants] {
        &self.grant_listing
    }

    /// The launch's control state.
    pub(crate) fn control(&self) -> &ControlState {
        &self.control
    }

    fn trace(&self, parent: &str, body: EventBody) -> std::io::Result<String> {
        match &self.trace {
            Some(trace) => trace.write(Some(parent), body),
            None => Ok(String::new()),
        }
    }

    /// [`Self::trace`], the event given the id `event_id` taken before it happened.
    fn trace_as(&self, parent: &str, event_id: String, body: EventBody) -> std::io::Result<String> {
        match &self.trace {
            Some(trace) => trace.write_as(Some(parent), event_id, body),
            None => Ok(String::new()),
        }
    }

    fn session_scope(&self) -> Scope {
        Scope {
            parent_event: self.session_event.clone(),
            ..Scope::default()
        }
    }

    /// `on-stage`, before the trace exists: `write-manifests` writes
    /// `tools/<binary>/murmur.yaml` in the workdir.
    pub(crate) async fn stage_hooks(&self) -> std::io::Result<()> {
        for hook in self.staged.hooks.iter() {
            if !hook.component.exports(crate::hooks::Handler::Stage) {
                self.hooks.log(
                    &hook.name,
                    "on-stage: not exported by the component; staging went on without it",
                )?;
            }
        }
        let capsule = &self.staged.capsule;
        let event = HookEvent::Stage(StageEvent {
            capsule_name: capsule.name.clone(),
            capsule_version: capsule.version.clone(),
            shell_allow: capsule.capabilities.shell.allow.clone(),
            tools: self.specs.iter().map(|s| s.name.clone()).collect(),
        });
        let dispatched = self.hooks.dispatch(event, &self.session_scope()).await?;
        for (hook, output) in dispatched.committed {
            let HookOutput::WriteManifests(files) = output else {
                continue;
            };
            for file in files {
                let binary = file.binary.trim();
                let safe = !binary.is_empty()
                    && binary != "."
                    && binary != ".."
                    && !binary.contains(['/', '\\', '\0']);
                if !safe {
                    self.hooks.log(
                        &hook,
                        &format!("on-stage: write-manifests: `{binary}` is not a binary name; nothing written"),
                    )?;
                    continue;
                }
                let path = std::path::Path::new("tools")
                    .join(binary)
                    .join("murmur.yaml");
                self.workdir
                    .workspace_dir()
                    .write_whole(&path, file.manifest.as_bytes())?;
            }
        }
        Ok(())
    }

    pub(crate) async fn session_start(&self) -> std::io::Result<()> {
        let capsule = &self.staged.capsule;
        let event = HookEvent::SessionStart(SessionStartEvent {
            session_id: self.session_id.clone(),
            capsule_name: capsule.name.clone(),
            capsule_version: capsule.version.clone(),
            model: self.staged.model.clone(),
        });
        self.hooks.dispatch(event, &self.session_scope()).await?;
        Ok(())
    }

    pub(crate) async fn session_end(&self, exit: ExitStatus, tasks: u32) -> std::io::Result<()> {
        let event = HookEvent::SessionEnd(SessionEndEvent {
            session_id: self.session_id.clone(),
            exit_status: exit.as_str().to_string(),
            tasks,
        });
        let scope = self.session_scope();
        self.hooks.dispatch(event, &scope).await?;
        self.hooks.drain(&scope).await
    }

    /// What the session changed in the directory its agent works in (absent when no task
    /// ran), and the git commit that directory was on.
    pub(crate) fn workspace_changes(
        &self,
    ) -> (
        Option<murmur_trace::schema::WorkspaceChanges>,
        Option<murmur_trace::schema::WorkspaceGit>,
    ) {
        self.watch.session()
    }

    /// The session's workdir.
    pub(crate) fn workdir(&self) -> &Workdir {
        self.workdir
    }

    fn fixed_tokens(&self) -> u64 {
        *self.fixed_tokens.get_or_init(|| {
            let tools = serde_json::to_string(&self.specs).unwrap_or_default();
            tokens::count(&self.staged.system_prompt) + tokens::count(&tools)
        })
    }

    fn scope(&self, run: &TaskRun, turn: u32, parent: &str) -> Scope {
        Scope {
            task_id: Some(run.task_id.clone()),
            context_id: run.context_id.clone(),
            turn,
            parent_event: parent.to_string(),
            task_input: Some(run.input.clone()),
            task_result: run.result.clone(),
            history: self
                .hooks_read_history
                .then(|| Arc::new(run.history.clone())),
        }
    }

    /// Runs one task to its end. Returns its report and whether the session must stop; only a
    /// failed trace (or workdir) write is an error.
    pub(crate) async fn run_task(&self, input: &TaskInput) -> std::io::Result<(TaskReport, bool)> {
        let (task_id, context_id) = match (&input.ids, &self.config.resume) {
            (Some(ids), _) => (ids.task_id.clone(), ids.context_id.clone()),
            (None, Some(resume)) => (new_id("tsk_", 24), resume.context_id.clone()),
            (None, None) => (new_id("tsk_", 24), new_id("ctx_", 24)),
        };
        let (mut run, task_event) = self.open_task(input, &task_id, &context_id)?;
        let out_before = run.workdir.out_snapshot();
        let workspace_before = self.watch.before_task();
        let (prior, mut unreadable) = match self.prior_history(&context_id) {
            Ok(prior) => (prior, None),
            Err(failure) => (Vec::new(), Some(failure)),
        };
        let prior_tokens: u64 = prior
            .iter()
            .map(|m| tokens::count(&serde_json::to_string(&m.message).unwrap_or_default()))
            .sum();
        let seeded = self.task_start(&mut run, &task_event, prior_tokens).await?;
        // The provider holds the conversation as it was saved: a task that goes on with it
        // unchanged (loaded, nothing seeded ahead of it) goes on with the held continuation.
        if seeded.is_empty() && !prior.is_empty() {
            run.continuation = self
                .continuation
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .clone();
        }
        run.history = seeded;
        run.history.extend(prior);
        let mut task_message = StoredMessage::new(Message::user_text(input.text.clone()));
        task_message.source_id = Some(format!("task:{}", input.source.as_str()));
        run.history.push(task_message);

        let mut turns_used = 0;
        let mut reopen_count = 0;
        let (exit_status, error, final_text, stop) = loop {
            let ending = match unreadable.take() {
                Some(failure) => Ending::Failed(failure),
                None => match &self.staged.process {
                    Some(cli) => {
                        self.process_turns(cli, &mut run, &task_event, &mut turns_used)
                            .await?
                    }
                    None => self.turns(&mut run, &task_event, &mut turns_used).await?,
                },
            };
            // Every ending is dispatched to `on-task-end`; those with a reason here cannot be
            // reopened.
            let (status, error, text, stop, final_because) = match ending {
                Ending::Finished(text) => (ExitStatus::Ok, None, Some(text), false, None),
                Ending::Failed(failure) => (ExitStatus::Failed, Some(failure), None, false, None),
                Ending::MaxTurns(failure) => (
                    ExitStatus::MaxTurnsReached,
                    Some(failure),
                    None,
                    false,
                    None,
                ),
                Ending::Stop(failure) => (
                    ExitStatus::Failed,
                    Some(failure),
                    None,
                    true,
                    Some("the session is ending"),
                ),
                Ending::SpendCeiling(failure) => (
                    ExitStatus::SpendCeilingReached,
                    Some(failure),
                    None,
                    false,
                    Some("the spend ceiling was reached"),
                ),
                Ending::SessionSpent(failure) => (
                    ExitStatus::SpendCeilingReached,
                    Some(failure),
                    None,
                    true,
                    Some("the spend ceiling was reached"),
                ),
                Ending::Canceled => (
                    ExitStatus::Canceled,
                    None,
                    None,
                    false,
                    Some("the task was canceled"),
                ),
            };
            run.result = text.clone();
            let Some((hook, feedback)) = self
                .task_end(&run, &task_event, status, turns_used, reopen_count)
                .await?
            else {
                break (status, error, text, stop);
            };
            match self.reopen_verdict(&hook, final_because, reopen_count)? {
                Reopen::Granted => {}
                Reopen::Ignored => break (status, error, text, stop),
                Reopen::Exhausted(failure) => {
                    break (ExitStatus::ReopenBudgetExhausted, Some(failure), text, stop);
                }
            }
            reopen_count += 1;
            self.trace(
                &task_event,
                EventBody::TaskReopened {
                    task_id: task_id.clone(),
                    hook: hook.clone(),
                    reopen_count,
                    feedback_chars: feedback.chars().count() as u64,
                },
            )?;
            let mut message = StoredMessage::new(Message::user_text(feedback));
            message.source_id = Some(format!("hook:{hook}"));
            run.history.push(message);
            run.result = None;
        };
        *self
            .continuation
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = run.continuation.for_next_task();
        let (result_path, unsaved, saved) =
            self.save_task(&context_id, &run, exit_status, final_text.as_deref());
        if let Some(saved) = saved {
            self.trace(
                &task_event,
                EventBody::HistorySaved {
                    task_id: task_id.clone(),
                    context_id: context_id.clone(),
                    sha256: saved.sha256,
                    bytes: saved.bytes,
                    messages: saved.messages,
                },
            )?;
        }
        let (exit_status, error) = match unsaved {
            Some(failure) => (ExitStatus::Failed, error.or(Some(failure))),
            None => (exit_status, error),
        };
        let changes = self.watch.after_task(&workspace_before);
        self.trace(
            &task_event,
            EventBody::TaskEnd {
                task_id: task_id.clone(),
                context_id: Some(context_id.clone()),
                exit_status,
                turns: turns_used,
                reopen_count,
                result_path: result_path.as_ref().map(|p| p.display().to_string()),
                error: error.as_ref().map(Failure::to_ref),
                changes: Some(changes.clone()),
            },
        )?;
        Ok((
            TaskReport {
                task_id,
                context_id: Some(context_id),
                exit_status,
                turns: turns_used,
                result_path,
                result_text: final_text.filter(|_| exit_status == ExitStatus::Ok),
                reopen_count,
                error,
                outputs: if exit_status == ExitStatus::Ok {
                    run.workdir.outputs_since(&out_before)
                } else {
                    Vec::new()
                },
                changes: Some(changes),
            },
            stop,
        ))
    }

    /// A task begins: its `a2a_task_received` (when a client sent it) and `task_start` events,
    /// and its run, empty yet; with the `task_start` event's id.
    fn open_task(
        &self,
        input: &TaskInput,
        task_id: &str,
        context_id: &str,
    ) -> std::io::Result<(TaskRun, String)> {
        if let Some(received) = &input.received {
            self.trace(
                &self.session_event,
                EventBody::A2aTaskReceived {
                    task_id: task_id.to_string(),
                    context_id: context_id.to_string(),
                    method: received.method.clone(),
                    origin: received.origin.clone(),
                    trust: received.trust.clone(),
                    traceparent: received.traceparent.clone(),
                    claimed_origin: received.claimed_origin.clone(),
                    claimed_trust: received.claimed_trust.clone(),
                    principal: received.principal.clone(),
                },
            )?;
        }
        let task_event = self.trace(
            &self.session_event,
            EventBody::TaskStart {
                task_id: task_id.to_string(),
                context_id: Some(context_id.to_string()),
                source: input.source.as_str().to_string(),
                input_chars: input.text.chars().count() as u64,
                input_sha256: murmur_registry::sha256_hex(input.text.as_bytes()),
            },
        )?;
        self.observer.note(&format!("task {task_id}"));
        let principal = input.received.as_ref().and_then(|r| r.principal.as_deref());
        let workdir = self
            .workdir
            .for_principal(principal, &self.staged)
            .map_err(murmur_beneath::BeneathError::into_io)?;
        let run = TaskRun {
            workdir,
            task_id: task_id.to_string(),
            context_id: Some(context_id.to_string()),
            cache_key: prompt_cache_key(&self.staged.capsule.name, Some(context_id), task_id),
            input: input.text.clone(),
            result: None,
            history: Vec::new(),
            continuation: Continuation::default(),
            driver_instance: None,
            counts: MessageCounts::default(),
            stop: input.stop.clone(),
            broker: input.input.clone(),
            sender: SendingTask::new(
                Some(task_id.to_string()),
                input
                    .received
                    .as_ref()
                    .map_or_else(|| SendingTask::OPERATOR.to_string(), |r| r.trust.clone()),
                SpanRef::task(
                    &self.session_id,
                    &task_event,
                    input
                        .received
                        .as_ref()
                        .and_then(|r| r.traceparent.as_deref()),
                ),
            ),
        };
        Ok((run, task_event))
    }

    /// Saves what a task that ended `exit_status` leaves: its answer (when it finished) in
    /// `out/result.txt`, and its conversation in `contexts/<context_id>/history.json`. Gives the result's
    /// path, what could not be saved (the first failure), and the conversation as saved.
    fn save_task(
        &self,
        context_id: &str,
        run: &TaskRun,
        exit_status: ExitStatus,
        final_text: Option<&str>,
    ) -> (Option<PathBuf>, Option<Failure>, Option<SavedHistory>) {
        let mut unsaved: Option<Failure> = None;
        let result_path = match final_text {
            Some(text) if exit_status == ExitStatus::Ok => match self.workdir.save_result(text) {
                Ok(path) => Some(path),
                Err(reason) => {
                    unsaved = Some(workdir_failure("the task's result", &reason));
                    None
                }
            },
            _ => None,
        };
        let saved = match self.workdir.save_history(context_id, &run.history) {
            Ok(saved) => Some(saved),
            Err(reason) => {
                unsaved.get_or_insert(workdir_failure("the task's conversation", &reason));
                None
            }
        };
        (result_path, unsaved, saved)
    }

    /// Whether `hook`'s `reopen-task` is granted: an ending that is final (`final_because`
    /// says why: canceled, the spend ceiling, the session ending), or
    /// `lifecycle.max_task_reopens: 0`, ignores it (with a line in the hook's log); one past the
    /// budget is `E-HOOK-007`.
    fn reopen_verdict(
        &self,
        hook: &str,
        final_because: Option<&str>,
        reopen_count: u32,
    ) -> std::io::Result<Reopen> {
        if let Some(reason) = final_because {
            self.hooks
                .log(hook, &format!("on-task-end: reopen-task ignored: {reason}"))?;
            return Ok(Reopen::Ignored);
        }
        let max = self.staged.capsule.lifecycle.max_task_reopens;
        if max == 0 {
            self.hooks.log(
                hook,
                "on-task-end: reopen-task ignored: lifecycle.max_task_reopens is 0",
            )?;
            return Ok(Reopen::Ignored);
        }
        if reopen_count >= max {
            return Ok(Reopen::Exhausted(Failure {
                code: "E-HOOK-007".to_string(),
                message: format!(
                    "hook `{hook}` asked to reopen the task again, past lifecycle.max_task_reopens ({max})"
                ),
                hint: "raise `lifecycle.max_task_reopens`, or make the hook accept the result"
                    .to_string(),
            }));
        }
        Ok(Reopen::Granted)
    }

    /// `on-task-start`, and the `seed-context` the first hook returns: measured against the
    /// seed budget, then committed whole, with its overflowing front summarized by the
    /// compaction hook (when there is one and the result fits), with its oldest messages
    /// dropped (whole exchanges: what is kept opens with a user message), or refused. Returns
    /// the messages to place at the head of the task's context.
    async fn task_start(
        &self,
        run: &mut TaskRun,
        task_event: &str,
        prior_tokens: u64,
    ) -> std::io::Result<Vec<StoredMessage>> {
        let context = self.staged.capsule.context.as_ref();
        let window = context.and_then(|c| c.max_tokens).unwrap_or(0);
        let budget = context
            .map(|c| (window as f64 * c.seed_budget).floor() as u64)
            .unwrap_or(0);
        let event = HookEvent::TaskStart(TaskStartEvent {
            session_id: self.session_id.clone(),
            task_id: run.task_id.clone(),
            context_id: run.context_id.clone().unwrap_or_default(),
            input: run.input.clone(),
            context_window: window,
            budget_tokens: budget,
            prior_tokens,
        });
        let scope = self.scope(run, 0, task_event);
        let dispatched = self.hooks.dispatch(event, &scope).await?;
        let mut seeds =
            dispatched
                .committed
                .into_iter()
                .filter_map(|(hook, output)| match output {
                    HookOutput::SeedContext(messages) => Some((hook, messages)),
                    _ => None,
                });
        let Some((hook, offered)) = seeds.next() else {
            return Ok(Vec::new());
        };
        for (later, _) in seeds {
            self.hooks.log(
                &later,
                "on-task-start: seed-context not committed: an earlier hook's seed-context won",
            )?;
        }
        let (outcome, committed, reason) = match from_wit_list(&offered) {
            Err(reason) => ("refused", Vec::new(), Some(reason)),
            Ok(messages) => self.fit_seed(run, task_event, messages, budget).await?,
        };
        let count = |messages: &[StoredMessage]| -> u64 {
            messages
                .iter()
                .map(|m| tokens::count(&serde_json::to_string(&m.message).unwrap_or_default()))
                .sum()
        };
        let offered_tokens = from_wit_list(&offered).map(|m| count(&m)).unwrap_or(0);
        self.trace(
            task_event,
            EventBody::ContextSeed {
                task_id: run.task_id.clone(),
                hook,
                outcome: outcome.to_string(),
                offered_messages: offered.len() as u32,
                committed_messages: committed.len() as u32,
                offered_tokens,
                committed_tokens: count(&committed),
                budget_tokens: budget,
                reason,
            },
        )?;
        Ok(committed)
    }

    /// The history a task of `context_id` starts from: the context's saved conversation under
    /// `lifecycle.conversation: threaded` or when it is the resumed one, nothing otherwise.
    fn prior_history(&self, context_id: &str) -> Result<Vec<StoredMessage>, Failure> {
        let resumed = self
            .config
            .resume
            .as_ref()
            .is_some_and(|resume| resume.context_id == context_id);
        if !resumed
            && self.staged.capsule.lifecycle.conversation
                != murmur_manifest::capsule::Conversation::Threaded
        {
            return Ok(Vec::new());
        }
        match self.workdir.load_history(context_id) {
            Ok(history) => Ok(history.unwrap_or_default()),
            Err(reason) => Err(Failure {
                code: "E-RUN-022".to_string(),
                message: format!("the context's saved conversation could not be read: {reason}"),
                hint: "the runtime writes `contexts/<context-id>/history.json` itself; a task \
                       must not replace it"
                    .to_string(),
            }),
        }
    }

    /// `on-task-end`: the first committed `reopen-task`, with the hook that returned it.
    async fn task_end(
        &self,
        run: &TaskRun,
        task_event: &str,
        status: ExitStatus,
        turns: u32,
        reopen_count: u32,
    ) -> std::io::Result<Option<(String, String)>> {
        let event = HookEvent::TaskEnd(TaskEndEvent {
            session_id: self.session_id.clone(),
            task_id: run.task_id.clone(),
            context_id: run.context_id.clone().unwrap_or_default(),
            exit_status: status.as_str().to_string(),
            result_text: run.result.clone(),
            turns,
            reopen_count,
        });
        let dispatched = self
            .hooks
            .dispatch(event, &self.scope(run, turns, task_event))
            .await?;
        Ok(dispatched
            .committed
            .into_iter()
            .find_map(|(hook, output)| match output {
                HookOutput::ReopenTask(feedback) => Some((hook, feedback)),
                _ => None,
            }))
    }

    /// Turns until the task ends or the turn budget (shared across reopenings) runs out.
    async fn turns(
        &self,
        run: &mut TaskRun,
        task_event: &str,
        turns_used: &mut u32,
    ) -> std::io::Result<Ending> {
        let staged = &*self.staged;
        while *turns_used < staged.max_turns {
            if let Some(ending) = run.stopped() {
                return Ok(ending);
            }
            *turns_used += 1;
            let turn = *turns_used;
            self.observer.turn_started(turn);
            let started = Instant::now();
            let (index, choice, driver) = match self.choice_in_force() {
                Ok(in_force) => in_force,
                Err(failure) => return Ok(Ending::Failed(failure)),
            };
            let plan =
                run.continuation
                    .plan(run.context_id.as_deref(), &choice.name, run.history.len());
            let (from, continuation_id) = match &plan {
                Plan::Full => {
                    // A whole conversation goes to a fresh instance.
                    run.driver_instance = None;
                    (0, None)
                }
                Plan::Since { id, from } => (*from, Some(id.as_str())),
            };
            let admitted_estimate = match self.admit_before_call(run) {
                Ok(estimate) => estimate,
                Err(failure) => return Ok(Ending::SpendCeiling(failure)),
            };
            // Thinking goes only to its producer, by the marks the history holds, also when
            // alternates are declared no more (a resumed conversation); only with alternates is
            // this call's answer marked.
            let receiver = choice.producer();
            let request = DriverRequest {
                model: &choice.model,
                max_tokens: self.control.max_tokens_for(choice),
                system: Some(&staged.system_prompt),
                messages: wire_view(&run.history[from..], &receiver),
                tools: &self.specs,
                prompt_cache_key: &run.cache_key,
                stream: self.config.stream,
                continuation_id,
            };
            let sent = Sent {
                messages: request.messages.len() as u32,
                full_resend: continuation_id.is_none(),
                continuation_id: continuation_id.map(str::to_string),
            };
            let driver_input = request.to_input().map_err(std::io::Error::other)?;
            let call = call_driver(
                &self.engine,
                &driver.component,
                &self.choice_grants[index],
                &driver_input,
                &mut run.driver_instance,
            );
            // A stop requested while the model is asked abandons the call.
            let Some(answer) = until_stopped(run.stop.as_ref(), call).await else {
                return Ok(run.stopped().unwrap_or(Ending::Canceled));
            };
            let input_estimate = match admitted_estimate {
                Some(estimate) => estimate,
                None => {
                    let estimate = self.fixed_tokens() + run.estimate();
                    // No ceiling: admission always succeeds; it only counts.
                    let _ = self.spend.admit(estimate);
                    estimate
                }
            };
            let answer = match answer.map_err(|failure| driver_failure(&driver.name, failure)) {
                Ok(answer) => answer,
                Err(failure) => {
                    self.trace(
                        task_event,
                        self.inference_event(
                            run,
                            choice,
                            turn,
                            sent,
                            input_estimate,
                            0,
                            None,
                            StopReason::Error,
                            Decision::Fail,
                            &[],
                            started,
                            Some(&failure),
                        ),
                    )?;
                    return Ok(Ending::Failed(failure));
                }
            };

            let mut assistant = StoredMessage::new(Message::Assistant {
                content: answer.content.clone(),
            });
            assistant.source_id = Some(format!("driver:{}", driver.name));
            assistant.produced_by = staged.choices.has_alternates().then_some(receiver);
            let output_estimate =
                tokens::count(&serde_json::to_string(&assistant.message).unwrap_or_default());
            self.spend.record_output(output_estimate);
            // Where this turn's answer starts: a stop during its tool calls takes the answer and
            // its results back out, so the history never holds a call without its result.
            let before_answer = run.history.len();
            run.history.push(assistant);
            run.continuation.record(
                answer.continuation_id.as_deref(),
                run.context_id.as_deref(),
                &choice.name,
                run.history.len(),
            );
            if !run.continuation.is_held() {
                run.driver_instance = None;
            }
            let calls: Vec<(String, String, Value)> = run
                .history
                .last()
                .map(|m| {
                    m.message
                        .tool_calls()
                        .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let wants_tools = answer.stop_reason == StopReason::ToolCall && !calls.is_empty();
            let inference_event = self.trace(
                task_event,
                self.inference_event(
                    run,
                    choice,
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
                    started,
                    None,
                ),
            )?;
            self.on_inference(run, choice, turn, &inference_event, &answer, input_estimate)
                .await?;
            if !wants_tools {
                let text = run
                    .history
                    .last()
                    .map(|m| m.message.text())
                    .unwrap_or_default();
                return Ok(Ending::Finished(text));
            }
            for (call_id, name, input) in &calls {
                let stop = run.stop.clone();
                let call = self.tool_call(run, turn, &inference_event, call_id, name, input);
                match until_stopped(stop.as_ref(), call).await {
                    Some(done) => done?,
                    None => {
                        run.history.truncate(before_answer);
                        return Ok(run.stopped().unwrap_or(Ending::Canceled));
                    }
                }
            }
            if let Some(ending) = self.maybe_compact(run, turn, task_event).await? {
                return Ok(ending);
            }
        }
        Ok(Ending::MaxTurns(Failure {
            code: "E-RUN-015".to_string(),
            message: format!(
                "the task used all {} turns of `inference.max_turns` without finishing",
                staged.max_turns
            ),
            hint: "raise `inference.max_turns`, or give the agent a narrower task".to_string(),
        }))
    }

    /// The choice in force for the next call (a switch applies from the next call on), its
    /// index and its driver; a driver whose credential has no value is `E-RUN-012`.
    fn choice_in_force(&self) -> Result<(usize, &DriverChoice, &StagedDriver), Failure> {
        let staged = &*self.staged;
        let (index, choice) = self.selected_choice();
        let Some(driver) = staged
            .driver_named(&choice.driver)
            .or(staged.driver.as_ref())
        else {
            return Err(Failure {
                code: "E-RUN-013".to_string(),
                message: format!("choice `{}` names no driver artifact", choice.name),
                hint: "under `transport: process` the agent CLI is the model".to_string(),
            });
        };
        if driver.credential_available() {
            return Ok((index, choice, driver));
        }
        let credential = choice
            .injected_secret
            .as_deref()
            .or(choice.unresolved_credential.as_deref())
            .unwrap_or("its credential");
        Err(Failure {
            code: "E-RUN-012".to_string(),
            message: format!(
                "choice `{}` cannot call driver `{}`: the credential `{credential}` has no value",
                choice.name, driver.name
            ),
            hint: format!(
                "inject it: `mur control secret {credential}` (or PUT /control/secrets/{credential})"
            ),
        })
    }

    /// The selected choice and its index (the primary when the selection names none).
    fn selected_choice(&self) -> (usize, &DriverChoice) {
        let choices = &self.staged.choices;
        let selected = self.control.selected();
        match choices.get(selected) {
            Some(choice) => (selected, choice),
            None => (0, choices.primary()),
        }
    }

    /// With a spend ceiling, the next call is admitted before it is made (its estimate, or
    /// `E-RUN-018`); without one its estimate is taken while the driver works (`None`: the
    /// tokenizer's first load stays off the path to the first request).
    fn admit_before_call(&self, run: &mut TaskRun) -> Result<Option<u64>, Failure> {
        if self.spend.ceiling().is_none() {
            return Ok(None);
        }
        let estimate = self.fixed_tokens() + run.estimate();
        match self.spend.admit(estimate) {
            Ok(_) => Ok(Some(estimate)),
            Err(over) => Err(Failure {
                code: "E-RUN-018".to_string(),
                message: format!("the call was not made: {over}"),
                hint: "raise `inference.max_session_tokens`, or give the agent a smaller task"
                    .to_string(),
            }),
        }
    }

    /// `on-inference`; a committed `artifact` is written to `out/artifacts/<name>`.
    async fn on_inference(
        &self,
        run: &TaskRun,
        choice: &DriverChoice,
        turn: u32,
        inference_event: &str,
        answer: &Answer,
        input_estimate: u64,
    ) -> std::io::Result<()> {
        if !self.hooks.any_hears(crate::hooks::Handler::Inference) {
            return Ok(());
        }
        let event = HookEvent::Inference(events::InferenceEvent {
            session_id: self.session_id.clone(),
            task_id: run.task_id.clone(),
            turn,
            choice: choice.name.clone(),
            model: choice.model.clone(),
            stop_reason: answer.stop_reason.as_str().to_string(),
            content: serde_json::to_string(&answer.content).unwrap_or_else(|_| "[]".into()),
            estimated_input_tokens: input_estimate,
            usage: answer.usage.map(|u| events::Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_tokens: u.cached_tokens,
                cache_write_tokens: u.cache_write_tokens,
            }),
        });
        let dispatched = self
            .hooks
            .dispatch(event, &self.scope(run, turn, inference_event))
            .await?;
        for (hook, output) in dispatched.committed {
            let HookOutput::Artifact(artifact) = output else {
                continue;
            };
            let name = artifact.name.trim();
            if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']) {
                self.hooks.log(
                    &hook,
                    &format!("on-inference: artifact `{name}` is not a file name; nothing written"),
                )?;
                continue;
            }
            let path = std::path::Path::new("out").join("artifacts").join(name);
            run.workdir
                .workspace_dir()
                .write_whole(&path, artifact.content.as_bytes())?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn inference_event(
        &self,
        run: &TaskRun,
        choice: &DriverChoice,
        turn: u32,
        sent: Sent,
        input_estimate: u64,
        output_estimate: u64,
        answer: Option<&Answer>,
        stop_reason: StopReason,
        decision: Decision,
        calls: &[(String, String, Value)],
        started: Instant,
        failure: Option<&Failure>,
    ) -> EventBody {
        let usage = answer.and_then(|a| a.usage).unwrap_or_default();
        EventBody::Inference {
            task_id: Some(run.task_id.clone()),
            turn,
            origin: Origin::Agent,
            // Only named where the capsule declares alternates to tell it from.
            choice: self
                .staged
                .choices
                .has_alternates()
                .then(|| choice.name.clone()),
            driver: choice.driver.clone(),
            model: choice.model.clone(),
            prompt_cache_key: run.cache_key.clone(),
            sent,
            input_tokens_estimated: input_estimate,
            output_tokens_estimated: output_estimate,
            input_tokens_actual: usage.input_tokens,
            output_tokens_actual: usage.output_tokens,
            cached_tokens_actual: usage.cached_tokens,
            cache_write_tokens_actual: usage.cache_write_tokens,
            stop_reason,
            decision,
            tool_name: calls.first().map(|(_, name, _)| name.clone()),
            tool_calls: calls.len() as u32,
            duration_ms: started.elapsed().as_millis() as u64,
            error: failure.map(Failure::to_ref),
        }
    }
}

/// E-RUN-022: the runtime's own file `what` could not be written into the workdir.
/// What becomes of a hook's `reopen-task`.
enum Reopen {
    Granted,
    /// Not honored, and the task ends as it ended.
    Ignored,
    /// Past `lifecycle.max_task_reopens`: the task ends `reopen_budget_exhausted`.
    Exhausted(Failure),
}

/// A failed driver call as the task's failure: a provider's answer is `E-RUN-011`, naming the
/// driver and the HTTP status; a failed component call keeps its own code.
fn driver_failure(driver: &str, failure: DriverFailure) -> Failure {
    match failure {
        DriverFailure::Answered(failure) => Failure {
            code: "E-RUN-011".to_string(),
            message: match failure.status {
                Some(status) => format!(
                    "driver `{driver}` failed (HTTP {status}): {}",
                    failure.message
                ),
                None => format!("driver `{driver}` failed: {}", failure.message),
            },
            hint: "read the provider's message; check the model name, the key and the gateway \
                   endpoint"
                .to_string(),
        },
        DriverFailure::Call(error) => Failure {
            code: error.code().to_string(),
            message: error.to_string(),
            hint: error.hint(),
        },
    }
}

fn workdir_failure(what: &str, reason: &murmur_beneath::BeneathError) -> Failure {
    Failure {
        code: "E-RUN-022".to_string(),
        message: format!("{what} could not be saved in the session workdir: {reason}"),
        hint: "the runtime writes `out/result.txt` and `contexts/` itself and never follows a \
               link a component planted there; free disk space, or keep tools from replacing \
               those paths"
            .to_string(),
    }
}

fn message_is_error(message: &Message) -> bool {
    matches!(message, Message::Tool { is_error: true, .. })
}

/// The `switch-driver` tool as the model is offered it: one of the choice names.
fn switch_driver_spec(staged: &Staged) -> ToolSpec {
    let names: Vec<&str> = staged.choices.iter().map(|c| c.name.as_str()).collect();
    let listed: Vec<String> = staged
        .choices
        .iter()
        .map(|c| format!("{} ({})", c.name, c.model))
        .collect();
    ToolSpec {
        name: SWITCH_DRIVER_TOOL.to_string(),
        description: Some(format!(
            "Switch the model that answers your next turns. Choices: {}. The conversation \
             carries over unchanged.",
            listed.join(", ")
        )),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"choice": {"type": "string", "enum": names}},
            "required": ["choice"],
            "additionalProperties": false
        }),
    }
}

/// The model's `shell` tool: the grant, its spec and the validator of its input.
pub(crate) struct ShellTool {
    pub grant: ShellGrant,
    pub spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl ShellTool {
    fn new(grant: ShellGrant) -> ShellTool {
        let names: Vec<&str> = grant.allowed().iter().map(|a| a.name.as_str()).collect();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "binary": {"type": "string", "description": format!("The program to run: one of {}.", names.join(", "))},
                "args": {"type": "array", "items": {"type": "string"}, "description": "Its arguments, passed as they are (no shell expansion)."},
                "stdin": {"type": ["string", "null"], "description": "Text for its standard input."},
                "timeout_secs": {"type": ["integer", "null"], "minimum": 1, "description": "Seconds it may run (default 60)."}
            },
            "required": ["binary"],
            "additionalProperties": false
        });
        let validator =
            jsonschema::validator_for(&schema).expect("the shell tool's schema is valid");
        ShellTool {
            spec: ToolSpec {
                name: SHELL_TOOL.to_string(),
                description: Some(format!(
                    "Run an allowed program directly in the working directory (no implicit shell; \
                     an interpreter such as bash runs a script only with -c when it is allowed). \
                     Allowed: {}. Returns exit_code, stdout and stderr (each cut at 16 KiB; the \
                     whole output is kept under .murmur-scratch/). A non-zero exit is a result, not an error.",
                    names.join(", ")
                )),
                input_schema: schema,
            },
            grant,
            validator,
        }
    }
}

/// The state of one task's conversation.
struct TaskRun {
    task_id: String,
    /// The session's record, and the workspace this task works in (a door principal's own).
    workdir: Workdir,
    context_id: Option<String>,
    cache_key: String,
    input: String,
    /// The agent's answer, once its loop has returned.
    result: Option<String>,
    history: Vec<StoredMessage>,
    continuation: Continuation,
    /// The driver's instance, kept while it holds the continuation: the next request on it
    /// sends only what is new.
    driver_instance: Option<KeptInstance>,
    counts: MessageCounts,
    stop: Option<StopSignal>,
    broker: Option<crate::grants::task::SharedBroker>,
    /// What this task's sends to peers are stamped with.
    sender: SendingTask,
}

/// Runs `work` to its end, or until `stop` is requested: `None` then, and `work` is dropped
/// where it stands (a shell child's process group dies with it).
async fn until_stopped<T>(
    stop: Option<&StopSignal>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    match stop {
        None => Some(work.await),
        Some(stop) => tokio::select! {
            biased;
            done = work => Some(done),
            () = stop.requested() => None,
        },
    }
}

impl TaskRun {
    /// How the task ends when it was asked to stop.
    fn stopped(&self) -> Option<Ending> {
        match self.stop.as_ref()?.reason()? {
            StopRequest::Canceled => Some(Ending::Canceled),
            StopRequest::Failed(failure) => Some(Ending::Failed(failure)),
        }
    }

    /// The estimate of the whole conversation (never only the part a continuation sends).
    fn estimate(&mut self) -> u64 {
        self.counts.total(&self.history)
    }
}
