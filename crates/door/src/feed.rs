//! Serving a capsule: the door's tasks fed to one session, one at a time, and what the session
//! does reported back onto each task.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use murmur_a2a::{AgentCapabilities, AgentCard, AgentSkill, Message, Role, TaskState, Version};
use murmur_manifest::Coded;
use murmur_manifest::capsule::{AfterTask, TaskAcceptance};

use crate::control::{self, ControlToken, TokenFile};
use crate::server::{Door, Queued, router};
use crate::{DoorConfig, OnListening, Store, TaskStore};
use murmur_runtime::engine::Engine;
use murmur_runtime::grants::ChunkKind;
use murmur_runtime::grants::task::InputBroker;
use murmur_runtime::session::control::ControlState;
use murmur_runtime::session::workdir::Workdir;
use murmur_runtime::session::{
    self, ExitStatus, Failure, Observer, SessionConfig, SessionError, SessionReport, Staged,
    StopRequest, StopSignal, TaskFeed, TaskIds, TaskInput, TaskReport, TaskSource, new_id,
};

/// Serves `staged` through the door until its tasks are done (`single`, `none` with
/// `after_task: exit`) or `shutdown` resolves (`queue`, or `after_task: sleep`). When
/// `shutdown` resolves, every task that has not ended is canceled: a running one stops at its
/// next turn or tool call, one waiting for input or in the queue at once.
pub async fn serve(
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: &SessionConfig,
    door_config: DoorConfig,
    on_listening: OnListening,
    observer: Arc<dyn Observer>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<SessionReport, SessionError> {
    if !door_config.host.is_loopback()
        && !door_config.auth.required()
        && !door_config.insecure_no_auth
    {
        return Err(SessionError {
            code: "E-A2A-005",
            message: format!(
                "the capsule declares no `door.auth`: on {} anyone who reaches the door could \
                 run tasks and read every task's answers",
                door_config.host
            ),
            hint: "declare who may call it in murmur.yaml (`door: { auth: [ { principal: ops, \
                   bearer: \"${OPS_TOKEN}\" } ] }`), serve on 127.0.0.1 (the default), or pass \
                   --insecure-no-auth to accept the risk"
                .to_string(),
            workdir: None,
        });
    }
    let listener = tokio::net::TcpListener::bind((door_config.host, door_config.port))
        .await
        .map_err(|error| SessionError {
            code: "E-A2A-001",
            message: format!(
                "the door cannot listen on {}:{}: {error}",
                door_config.host, door_config.port
            ),
            hint: "choose another --port, or free that one".to_string(),
            workdir: None,
        })?;
    let addr = listener.local_addr().map_err(|error| SessionError {
        code: "E-A2A-001",
        message: format!("the door's address cannot be read: {error}"),
        hint: "retry".to_string(),
        workdir: None,
    })?;
    // Checked once the address is known to be ours (a bind that fails says so first); the
    // listener is dropped unused.
    if !door_config.host.is_loopback() && door_config.tls.is_none() && !door_config.insecure_no_tls
    {
        return Err(SessionError {
            code: "E-A2A-022",
            message: format!(
                "the door would serve plain HTTP on {}: credentials, tasks and answers would \
                 cross the network in clear",
                door_config.host
            ),
            hint: "give the door a certificate (`door: { tls: { cert: cert.pem, key: key.pem } }` \
                   or --tls-cert/--tls-key), serve on 127.0.0.1 (the default), or pass \
                   --insecure-no-tls when TLS ends in front of it (a proxy, a mesh)"
                .to_string(),
            workdir: None,
        });
    }
    let mut front = murmur_front::Front::new(
        addr,
        &staged.capsule.door.allowed_hosts,
        &staged.capsule.door.allowed_origins,
    );
    if let Some(tls) = &door_config.tls {
        front = front.with_tls(tls);
    }
    // An unspecified address (0.0.0.0, ::) is where the door listens, never where to reach
    // it: the card names loopback then.
    let url = control::local_url(addr, front.scheme());
    let control_failed = |message: String| SessionError {
        code: "E-CTL-005",
        message,
        hint: "make the murmur home ($MURMUR_HOME, else ~/.murmur) a directory you can write"
            .to_string(),
        workdir: None,
    };
    let control_token = ControlToken::generate().map_err(|error| {
        control_failed(format!("the control plane's token cannot be made: {error}"))
    })?;
    // The token file exists before anyone is told where the door listens.
    let token_file = match &door_config.control_dir {
        Some(dir) => Some(
            control::write_token_file(
                dir,
                addr.port(),
                &TokenFile {
                    url: url.clone(),
                    token: control_token.as_str().to_string(),
                    pid: std::process::id(),
                    cert: door_config.tls.as_ref().map(|tls| tls.chain_pem.clone()),
                },
            )
            .map_err(|error| {
                control_failed(format!(
                    "the control plane's token file cannot be written in {}: {error}",
                    dir.display()
                ))
            })?,
        ),
        None => None,
    };
    let capsule = &staged.capsule;
    let lifecycle = &capsule.lifecycle;
    let store: Store = Arc::new(TaskStore::default());
    if lifecycle.task_acceptance == TaskAcceptance::Queue
        && let Some(depth) = lifecycle.queue_depth
    {
        store.bound_waiting(depth as usize);
    }
    if let Some(bytes) = capsule.door.conversations_max_bytes {
        store.bound_conversations(bytes);
    }
    let (queue, receiver) = tokio::sync::mpsc::unbounded_channel();
    let control = ControlState::new(staged.clone());
    // One policy for both ends: what a client may register, and where the pusher posts.
    let webhooks =
        crate::push::WebhookPolicy::new(staged.capsule.capabilities.network.allow.clone());
    let door = Arc::new(Door {
        control: Arc::new(control::ControlPlane {
            control: control.clone(),
            token: control_token,
            body_limit: door_config.body_limit,
        }),
        store: store.clone(),
        queue,
        acceptance: lifecycle.task_acceptance,
        taken: Default::default(),
        card: card(&staged, &url, &door_config.auth),
        versions: served_versions(&staged.capsule.door),
        body_limit: door_config.body_limit,
        auth: door_config.auth.clone(),
        input_modes: staged.capsule.door.input_modes.clone(),
        webhooks: webhooks.clone(),
    });
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stopped = async {
            let _ = serving_stopped.await;
        };
        murmur_front::serve(listener, router(door), front, stopped).await;
    });
    on_listening(addr);

    let current = Arc::new(Mutex::new(None));
    let observer: Arc<dyn Observer> = Arc::new(DoorObserver {
        store: store.clone(),
        current: current.clone(),
        inner: observer,
        new_turn: Default::default(),
    });
    store.push_with(crate::push::Pusher::start(webhooks, observer.clone()));
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let canceling = (store.clone(), stopping.clone());
    tokio::spawn(async move {
        shutdown.await;
        // Told to stop: nothing that has not ended will be served any more. The flag is up
        // before the first cancel, so the task a cancel ends is not followed by a queued one
        // the cancels have not reached yet.
        canceling.1.store(true, std::sync::atomic::Ordering::SeqCst);
        canceling.0.cancel_unfinished();
        let _ = shutdown_tx.send(true);
    });
    let mut feed = DoorFeed {
        files_url: format!("{url}files/"),
        output_modes: staged.capsule.door.output_modes.clone(),
        notes: observer.clone(),
        store: store.clone(),
        receiver,
        current,
        acceptance: lifecycle.task_acceptance,
        after_task: lifecycle.after_task,
        task_md: config.tasks.first().cloned(),
        served: 0,
        input_timeout: Duration::from_secs(lifecycle.input_timeout_secs.max(1)),
        stopping,
        shutdown: shutdown_rx,
        workdir: None,
    };
    let mut session_config = SessionConfig {
        workdir_root: config.workdir_root.clone(),
        tasks: Vec::new(),
        stream: true,
        host_env: config.host_env.clone(),
        control: Some(control),
        cancel: None,
        // Served tasks bring their own contexts.
        resume: None,
        seed: None,
        containment: config.containment,
        workspace: config.workspace.clone(),
    };
    session_config.stream = true;
    let report = session::run_fed(engine, staged, &session_config, observer, &mut feed).await;
    // A session that stopped early leaves its queue unstarted: each queued task is answered
    // failed with why.
    store.fail_unfinished(&ended_early(&report));
    // Let the last streams see their task's end, then close the door.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop_serving.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    // The door is closed: its token opens nothing any more.
    drop(token_file);
    report
}

/// What a task the session never started is told: the session's end, and the failure that
/// ended it.
fn ended_early(report: &Result<SessionReport, SessionError>) -> String {
    let cause = match report {
        Ok(report) => report
            .tasks
            .iter()
            .rev()
            .find_map(|task| task.error.as_ref())
            .map(|failure| format!("error[{}]: {}", failure.code, failure.message))
            .unwrap_or_else(|| format!("it ended {}", report.exit_status.as_str())),
        Err(error) => format!("error[{}]: {}", error.code(), error.message()),
    };
    format!("the session ended before this task started: {cause}")
}

/// The A2A versions `door` serves (`door.a2a_versions`), newest first.
fn served_versions(door: &murmur_manifest::door::Door) -> Vec<Version> {
    Version::ALL
        .into_iter()
        .filter(|version| door.serves(version.as_str()))
        .collect()
}

/// The card a served capsule shows: an interface for each version it serves.
fn card(staged: &Staged, url: &str, auth: &crate::auth::DoorAuth) -> AgentCard {
    let capsule = &staged.capsule;
    let description = capsule
        .description
        .clone()
        .unwrap_or_else(|| format!("The Murmur capsule {}.", capsule.name));
    let mut card = AgentCard::new(&capsule.name, &description, &capsule.version, url);
    let served = served_versions(&capsule.door);
    card.interfaces.retain(|interface| {
        served
            .iter()
            .any(|v| v.as_str() == interface.protocol_version)
    });
    card.capabilities = AgentCapabilities {
        streaming: true,
        push_notifications: true,
        ..AgentCapabilities::default()
    };
    card.default_input_modes = capsule.door.input_modes.clone();
    card.default_output_modes = capsule.door.output_modes.clone();
    card.security_schemes = auth.card_schemes();
    let mut tags = vec!["murmur".to_string()];
    tags.extend(staged.declared_tool_names());
    card.skills = vec![AgentSkill {
        id: capsule.name.clone(),
        name: capsule.name.clone(),
        description,
        tags,
        examples: Vec::new(),
        input_modes: Vec::new(),
        output_modes: Vec::new(),
    }];
    card
}

/// Hands the door's tasks to the session and records how each ended.
struct DoorFeed {
    /// Where the door serves tasks' files: `http://host:port/files/`.
    files_url: String,
    /// `door.output_modes`.
    output_modes: Vec<String>,
    /// Where warnings for the operator go.
    notes: Arc<dyn Observer>,
    store: Store,
    receiver: tokio::sync::mpsc::UnboundedReceiver<Queued>,
    current: Arc<Mutex<Option<String>>>,
    acceptance: TaskAcceptance,
    after_task: AfterTask,
    task_md: Option<TaskInput>,
    served: u32,
    input_timeout: Duration,
    /// Up from the moment the capsule is told to stop, before its tasks are canceled.
    stopping: Arc<std::sync::atomic::AtomicBool>,
    /// True once every task that had not ended is canceled.
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// The session's workdir, whose `contexts/` the store's budget keeps in bounds.
    workdir: Option<Workdir>,
}

impl DoorFeed {
    fn input_for(&self, queued: Queued, text: String) -> TaskInput {
        TaskInput {
            text,
            source: TaskSource::A2a,
            ids: Some(TaskIds {
                task_id: queued.task_id.clone(),
                context_id: queued.context_id,
            }),
            stop: Some(queued.stop.clone()),
            input: Some(Arc::new(DoorBroker {
                store: self.store.clone(),
                task_id: queued.task_id,
                timeout: self.input_timeout,
                stop: queued.stop,
            })),
            received: Some(queued.received),
        }
    }

    /// Waits until the capsule is told to stop.
    async fn until_shutdown(&mut self) {
        let _ = self.shutdown.wait_for(|stop| *stop).await;
    }

    /// After the last task: `after_task: exit` ends now, `sleep` keeps the door open.
    async fn done(&mut self) -> Option<TaskInput> {
        if self.after_task == AfterTask::Sleep {
            self.until_shutdown().await;
        }
        None
    }
}

impl TaskFeed for DoorFeed {
    fn started(&mut self, workdir: &Workdir) {
        self.workdir = Some(workdir.clone());
    }

    fn next(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<TaskInput>> + Send + '_>> {
        Box::pin(async move {
            *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
            if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                // Stopping: no task starts, and the session ends once every cancel is made.
                self.until_shutdown().await;
                return None;
            }
            let next = match self.acceptance {
                TaskAcceptance::None => match (self.served, self.task_md.take()) {
                    (0, Some(mut input)) => {
                        // task.md runs as a task of the door, so clients can follow it.
                        let task_id = new_id("tsk_", 24);
                        let context_id = new_id("ctx_", 24);
                        let message = Message::text(new_id("msg_", 32), Role::User, &input.text);
                        let origin = crate::Origin {
                            origin: "operator".to_string(),
                            trust: "operator".to_string(),
                            traceparent: None,
                            claimed_origin: None,
                            claimed_trust: None,
                            principal: None,
                            accepts: Vec::new(),
                        };
                        // The store is empty yet: task.md is its first task.
                        let Ok(stop) = self.store.create(&task_id, &context_id, message, origin)
                        else {
                            return None;
                        };
                        self.store.take(&task_id)?;
                        input.ids = Some(TaskIds {
                            task_id,
                            context_id,
                        });
                        input.stop = Some(stop);
                        Some(input)
                    }
                    _ => return self.done().await,
                },
                TaskAcceptance::Single if self.served > 0 => return self.done().await,
                _ => loop {
                    let mut shutdown = self.shutdown.clone();
                    let queued = tokio::select! {
                        queued = self.receiver.recv() => queued,
                        _ = shutdown.wait_for(|stop| *stop) => None,
                    };
                    let queued = queued?;
                    if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                        self.until_shutdown().await;
                        return None;
                    }
                    // Canceled while it waited: skip it.
                    if let Some(text) = self.store.take(&queued.task_id) {
                        break Some(self.input_for(queued, text));
                    }
                },
            };
            if let Some(input) = &next
                && let Some(ids) = &input.ids
            {
                self.served += 1;
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(ids.task_id.clone());
            }
            next
        })
    }

    fn finished(&mut self, input: &TaskInput, report: &TaskReport) {
        let Some(ids) = &input.ids else { return };
        let task_id = &ids.task_id;
        let text = |body: String| Some(Message::text(new_id("msg_", 32), Role::Agent, body));
        match report.exit_status {
            ExitStatus::Ok => {
                let answer = report.result_text.clone().unwrap_or_default();
                // The answer is the `response` artifact's last chunk (all of it when nothing
                // was streamed).
                let streamed = self.store.has_artifact(task_id, "response");
                let chunk = if streamed {
                    String::new()
                } else {
                    answer.clone()
                };
                self.store
                    .artifact_text(task_id, "response", "response", &chunk, true);
                let offered = crate::outputs::offer(
                    &report.outputs,
                    &self.output_modes,
                    &self.store.accepts(task_id),
                    &format!("{}{task_id}/", self.files_url),
                );
                for artifact in offered.artifacts {
                    self.store.add_artifact(task_id, artifact);
                }
                self.store.serve_files(task_id, offered.served);
                for (note, hint) in offered.notes {
                    let warning = murmur_manifest::Diagnostic::new(
                        murmur_manifest::diagnostic::code::W_A2A_010,
                        format!("task {task_id}: {note}"),
                    )
                    .hint(hint);
                    self.notes.warning(&warning);
                }
                // The status message repeats the answer, to a bound: the artifact has more.
                let shown = crate::tasks::status_text(answer);
                self.store
                    .set_state(task_id, TaskState::Completed, text(shown));
            }
            ExitStatus::Canceled => {
                self.store.set_state(task_id, TaskState::Canceled, None);
            }
            _ => {
                let why = report
                    .error
                    .as_ref()
                    .map(|f| format!("error[{}]: {}", f.code, f.message))
                    .unwrap_or_else(|| report.exit_status.as_str().to_string());
                self.store.set_state(task_id, TaskState::Failed, text(why));
            }
        }
        self.keep_histories_in_bounds(task_id, &ids.context_id);
    }
}

impl DoorFeed {
    /// The session is done with `task_id`: the store learns what its context's conversation
    /// takes on disk, and the conversations past the store's budget (`CONTEXTS_KEPT`, and
    /// `door.conversations_max_bytes`, 256 MiB by default), the one whose last task ended
    /// longest ago first, are deleted and then forgotten. One that cannot be deleted stays its
    /// owner's, and the operator is told.
    fn keep_histories_in_bounds(&self, task_id: &str, context_id: &str) {
        let Some(workdir) = &self.workdir else {
            return;
        };
        let over = self.store.ran(task_id, workdir.history_bytes(context_id));
        for context_id in over {
            match workdir.remove_history(&context_id) {
                Ok(()) => self.store.history_dropped(&context_id),
                Err(error) => {
                    let warning = murmur_manifest::Diagnostic::new(
                        murmur_manifest::diagnostic::code::W_A2A_015,
                        format!(
                            "the conversation of context {context_id} could not be deleted to \
                             keep the served capsule's conversations within their bound: {error}"
                        ),
                    )
                    .hint("make the session workdir's `contexts/` writable; the context stays its owner's until it is deleted");
                    self.notes.warning(&warning);
                }
            }
        }
    }
}

/// Sends what the session streams onto the task it is running.
struct DoorObserver {
    store: Store,
    current: Arc<Mutex<Option<String>>>,
    inner: Arc<dyn Observer>,
    /// A new turn began: its first text starts a new paragraph of the `response` artifact.
    new_turn: std::sync::atomic::AtomicBool,
}

impl DoorObserver {
    fn current(&self) -> Option<String> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Observer for DoorObserver {
    fn chunk(&self, kind: ChunkKind, text: &str) {
        if let Some(task_id) = self.current() {
            let (id, name) = match kind {
                ChunkKind::Text => ("response", "response"),
                ChunkKind::Thinking => ("thinking", "thinking"),
            };
            let paragraph = kind == ChunkKind::Text
                && self
                    .new_turn
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                && self.store.has_artifact(&task_id, id);
            let text = if paragraph {
                format!("\n\n{text}")
            } else {
                text.to_string()
            };
            self.store.artifact_text(&task_id, id, name, &text, false);
        }
        self.inner.chunk(kind, text);
    }

    fn turn_started(&self, turn: u32) {
        self.new_turn
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.turn_started(turn);
    }

    fn note(&self, text: &str) {
        self.inner.note(text);
    }

    fn warning(&self, warning: &murmur_manifest::Diagnostic) {
        self.inner.warning(warning);
    }

    fn tool_result(&self, call_id: &str, tool: &str, text: &str, is_error: bool) {
        if let Some(task_id) = self.current() {
            self.store
                .artifact_text(&task_id, &format!("tool-{call_id}"), tool, text, true);
        }
        self.inner.tool_result(call_id, tool, text, is_error);
    }
}

/// Answers a tool's `request-input` for one task: the task waits for its client's next
/// message, at most `timeout`; then it fails.
struct DoorBroker {
    store: Store,
    task_id: String,
    timeout: Duration,
    stop: StopSignal,
}

impl InputBroker for DoorBroker {
    fn request(
        &self,
        prompt: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>> {
        let store = self.store.clone();
        let task_id = self.task_id.clone();
        let timeout = self.timeout;
        let stop = self.stop.clone();
        Box::pin(async move {
            let Some(reply) = store.request_input(&task_id, &prompt) else {
                return Err(format!("task {task_id} has ended; no input can come"));
            };
            match tokio::time::timeout(timeout, reply).await {
                Ok(Ok(message)) => Ok(message.joined_text()),
                Ok(Err(_)) => Err(format!(
                    "task {task_id} was canceled while it waited for input"
                )),
                Err(_) => {
                    let failure = Failure {
                        code: "E-A2A-002".to_string(),
                        message: format!(
                            "no reply to the input request within lifecycle.input_timeout_secs ({} s)",
                            timeout.as_secs()
                        ),
                        hint: "answer sooner, or raise lifecycle.input_timeout_secs".to_string(),
                    };
                    let message = failure.message.clone();
                    stop.stop(StopRequest::Failed(failure));
                    Err(message)
                }
            }
        })
    }
}
