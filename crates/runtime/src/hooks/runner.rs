//! Running a session's hooks: one instance each, calls under a deadline, the arms each
//! handler commits, faults logged and traced, `async` hooks behind their queues.

use std::sync::Arc;
use std::time::Duration;

use murmur_manifest::Coded;
use murmur_manifest::capsule::Overflow;
use murmur_manifest::hooks::ExecutionMode;
use tokio::sync::{Mutex, mpsc};
use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance};

use crate::error::RuntimeError;
use crate::grants::{Grants, HostState};
use crate::hooks::events::{self, Handler, HookEvent, HookOutput, arm_name};
use crate::hooks::services::{HookScope, HookServices, Scope};
use murmur_trace::Trace;
use murmur_trace::schema::EventBody;

/// A call refused at the decision point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub hook: String,
    pub reason: String,
}

impl Denial {
    /// What the caller is answered with.
    pub fn text(&self) -> String {
        format!("denied by hook `{}`: {}", self.hook, self.reason)
    }

    /// The `call_denied` trace event of the call `call_id` (`kind` `tool`, `skill` or
    /// `shell`) of `target`.
    pub fn event(
        &self,
        task_id: &str,
        turn: u32,
        (kind, call_id, target): (&str, &str, &str),
    ) -> EventBody {
        EventBody::CallDenied {
            task_id: task_id.to_string(),
            turn,
            kind: kind.to_string(),
            call_id: call_id.to_string(),
            target: target.to_string(),
            hook: self.hook.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// What an observation dispatch produced.
#[derive(Debug, Default)]
pub struct Dispatched {
    /// The arms committed, by hook, in manifest order.
    pub committed: Vec<(String, HookOutput)>,
    /// Hooks whose handler returned an error or was stopped, with the message.
    pub errors: Vec<(String, String)>,
}

/// How one call ended.
enum Call {
    Output(HookOutput),
    Error(String),
    Stopped(RuntimeError),
    /// The hook does not export this (optional) handler.
    Absent,
}

/// A hook's live instance.
struct Live {
    store: Store<HostState>,
    instance: Instance,
}

struct AsyncQueue {
    sender: std::sync::Mutex<Option<mpsc::Sender<(HookEvent, Scope)>>>,
    worker: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// A session's hooks.
pub struct HookSet {
    services: Arc<HookServices>,
    grants: Vec<Grants>,
    live: Vec<Mutex<Option<Live>>>,
    queues: Vec<Option<AsyncQueue>>,
}

impl HookSet {
    /// The hooks of `services`, each under `grants` (the workdir, network and memory of
    /// the capsule's components; its config; its deadline). `async` hooks' workers start now.
    pub(crate) fn start(services: Arc<HookServices>, grants: Vec<Grants>) -> Arc<HookSet> {
        let hooks = &services.hooks;
        let set = Arc::new(HookSet {
            live: hooks.iter().map(|_| Mutex::new(None)).collect(),
            queues: hooks
                .iter()
                .map(|hook| {
                    (hook.mode == ExecutionMode::Async).then(|| AsyncQueue {
                        sender: std::sync::Mutex::new(None),
                        worker: std::sync::Mutex::new(None),
                    })
                })
                .collect(),
            grants,
            services,
        });
        for (index, queue) in set.queues.iter().enumerate() {
            let Some(queue) = queue else { continue };
            let capacity = set.services.hooks[index].queue.capacity.max(1) as usize;
            let (sender, mut receiver) = mpsc::channel::<(HookEvent, Scope)>(capacity);
            let worker_set = set.clone();
            let worker = tokio::spawn(async move {
                let mut live = None;
                while let Some((event, scope)) = receiver.recv().await {
                    let call = worker_set.call(index, &mut live, &event, &scope).await;
                    let handler = event.handler();
                    let _ = match call {
                        Call::Output(HookOutput::None) | Call::Absent => Ok(()),
                        Call::Output(other) => worker_set.fault(
                            index,
                            handler,
                            "unhonored_arm",
                            &format!(
                                "returned `{}`, which an async hook's handler never commits",
                                arm_name(&other)
                            ),
                            &scope,
                        ),
                        Call::Error(message) => {
                            worker_set.fault(index, handler, "error", &message, &scope)
                        }
                        Call::Stopped(error) => worker_set.fault(
                            index,
                            handler,
                            "stopped",
                            &format!("error[{}]: {error}", error.code()),
                            &scope,
                        ),
                    };
                }
            });
            *queue.sender.lock().unwrap_or_else(|p| p.into_inner()) = Some(sender);
            *queue.worker.lock().unwrap_or_else(|p| p.into_inner()) = Some(worker);
        }
        set
    }

    /// From now on, faults are traced too (before, during `on-stage`, only logged).
    pub fn attach_trace(&self, trace: Trace) {
        let _ = self.services.trace.set(trace);
    }

    /// Whether any hook hears `handler`.
    pub fn any_hears(&self, handler: Handler) -> bool {
        self.services.hooks.iter().any(|hook| hook.hears(handler))
    }

    /// The observation dispatch of `event` (or the only one, for ungated handlers).
    pub async fn dispatch(&self, event: HookEvent, scope: &Scope) -> std::io::Result<Dispatched> {
        let handler = event.handler();
        let mut dispatched = Dispatched::default();
        for (index, hook) in self.services.hooks.iter().enumerate() {
            if !hook.hears(handler) {
                continue;
            }
            if let Some(queue) = &self.queues[index] {
                self.enqueue(index, queue, &event, scope).await?;
                continue;
            }
            let mut slot = self.live[index].lock().await;
            match self.call(index, &mut slot, &event, scope).await {
                Call::Absent | Call::Output(HookOutput::None) => {}
                Call::Output(output) => {
                    let committed = !matches!(output, HookOutput::Deny(_))
                        && handler.honored().map(|p| p.as_str()) == Some(arm_name(&output));
                    if committed {
                        dispatched.committed.push((hook.name.clone(), output));
                    } else {
                        let at = if matches!(output, HookOutput::Deny(_)) {
                            " at the observation dispatch".to_string()
                        } else {
                            String::new()
                        };
                        self.fault(
                            index,
                            handler,
                            "unhonored_arm",
                            &format!(
                                "returned `{}`{at}; `{}` commits only `{}`",
                                arm_name(&output),
                                handler.name(),
                                honored_text(handler)
                            ),
                            scope,
                        )?;
                    }
                }
                Call::Error(message) => {
                    self.fault(index, handler, "error", &message, scope)?;
                    dispatched.errors.push((hook.name.clone(), message));
                }
                Call::Stopped(error) => {
                    let message = format!("error[{}]: {error}", error.code());
                    self.fault(index, handler, "stopped", &message, scope)?;
                    dispatched.errors.push((hook.name.clone(), message));
                }
            }
        }
        Ok(dispatched)
    }

    /// The decision point of a gated event (`outcome: none`): the first `deny` of a hook
    /// declaring `commit_policy: deny` on this binding refuses the call. Such a hook that
    /// errs, traps or runs out of time denies too (fail-closed).
    pub async fn decide(&self, event: HookEvent, scope: &Scope) -> std::io::Result<Option<Denial>> {
        let handler = event.handler();
        for (index, hook) in self.services.hooks.iter().enumerate() {
            if !hook.decides(handler) {
                continue;
            }
            let mut slot = self.live[index].lock().await;
            let failed = match self.call(index, &mut slot, &event, scope).await {
                Call::Absent | Call::Output(HookOutput::None) => continue,
                Call::Output(HookOutput::Deny(reason)) => {
                    return Ok(Some(Denial {
                        hook: hook.name.clone(),
                        reason,
                    }));
                }
                Call::Output(other) => {
                    self.fault(
                        index,
                        handler,
                        "unhonored_arm",
                        &format!(
                            "returned `{}` at the decision point, which commits only `deny`",
                            arm_name(&other)
                        ),
                        scope,
                    )?;
                    continue;
                }
                Call::Error(message) => {
                    self.fault(index, handler, "error", &message, scope)?;
                    message
                }
                Call::Stopped(error) => {
                    let message = format!("error[{}]: {error}", error.code());
                    self.fault(index, handler, "stopped", &message, scope)?;
                    message
                }
            };
            return Ok(Some(Denial {
                hook: hook.name.clone(),
                reason: format!("the policy hook failed, so the call is denied: {failed}"),
            }));
        }
        Ok(None)
    }

    /// Waits for every async hook's queue to drain, each within its `drain_seconds`; what is
    /// left is traced as a fault and abandoned.
    pub async fn drain(&self, scope: &Scope) -> std::io::Result<()> {
        for (index, queue) in self.queues.iter().enumerate() {
            let Some(queue) = queue else { continue };
            drop(
                queue
                    .sender
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take(),
            );
            let worker = queue
                .worker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let Some(mut worker) = worker else { continue };
            let budget = Duration::from_secs(self.services.hooks[index].queue.drain_seconds);
            if tokio::time::timeout(budget, &mut worker).await.is_err() {
                worker.abort();
                self.fault(
                    index,
                    Handler::SessionEnd,
                    "drain_timeout",
                    &format!(
                        "its queue did not drain within {} s; the events still waiting were abandoned",
                        budget.as_secs()
                    ),
                    scope,
                )?;
            }
        }
        Ok(())
    }

    async fn enqueue(
        &self,
        index: usize,
        queue: &AsyncQueue,
        event: &HookEvent,
        scope: &Scope,
    ) -> std::io::Result<()> {
        let sender = queue
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(sender) = sender else { return Ok(()) };
        let item = (event.clone(), scope.clone());
        match self.services.hooks[index].queue.on_overflow {
            Overflow::Block => {
                let _ = sender.send(item).await;
                Ok(())
            }
            Overflow::Drop => match sender.try_send(item) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => self.fault(
                    index,
                    event.handler(),
                    "dropped",
                    "its queue is full; the event was dropped (queue.on_overflow: drop)",
                    scope,
                ),
                Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
            },
        }
    }

    /// Calls hook `index`'s handler for `event` on its instance, creating the instance first
    /// when there is none; an instance that traps or runs out of time is dropped.
    async fn call(
        &self,
        index: usize,
        slot: &mut Option<Live>,
        event: &HookEvent,
        scope: &Scope,
    ) -> Call {
        let hook = &self.services.hooks[index];
        let Some(export) = hook.component.handlers.get(event.handler()) else {
            return Call::Absent;
        };
        let grants = &self.grants[index];
        let deadline = grants.limits.deadline;
        if slot.is_none() {
            match self.instantiate(index).await {
                Ok(live) => *slot = Some(live),
                Err(error) => return Call::Stopped(error),
            }
        }
        let Some(live) = slot.as_mut() else {
            return Call::Absent;
        };
        let history = if hook
            .grants
            .contains(&murmur_manifest::capsule::HookGrant::Conversation)
        {
            scope.history.clone()
        } else {
            None
        };
        live.store.data_mut().set_hook_call(Arc::new(HookScope {
            hook: hook.name.clone(),
            services: self.services.clone(),
            scope: Scope {
                history,
                ..scope.clone()
            },
        }));
        let called = self
            .services
            .engine
            .bounded(&hook.name, deadline, &mut live.store, async |store| {
                call_handler(store, &live.instance, export, event).await
            })
            .await;
        let outcome = match called {
            Err(error) => Call::Stopped(error),
            Ok(Ok(output)) => Call::Output(output),
            Ok(Err(message)) => Call::Error(message),
        };
        if matches!(outcome, Call::Stopped(_)) {
            *slot = None;
        }
        outcome
    }

    async fn instantiate(&self, index: usize) -> Result<Live, RuntimeError> {
        let hook = &self.services.hooks[index];
        let grants = &self.grants[index];
        let engine = &self.services.engine;
        let mut store = engine.store(grants.host_state()?);
        let instance = engine
            .bounded(
                &hook.name,
                grants.limits.deadline,
                &mut store,
                async |store| hook.component.pre.instantiate_async(store).await,
            )
            .await?;
        Ok(Live { store, instance })
    }

    /// A loud, non-fatal fault: a line in `logs/hook-<name>.log` and, once the trace exists,
    /// a `hook_dispatch_error` event.
    fn fault(
        &self,
        index: usize,
        handler: Handler,
        kind: &str,
        message: &str,
        scope: &Scope,
    ) -> std::io::Result<()> {
        let name = &self.services.hooks[index].name;
        let line = format!(
            "{} hook `{name}` {}: {kind}: {message}\n",
            unix_ms(),
            handler.name()
        );
        self.append_log(name, &line)?;
        if let Some(trace) = self.services.trace.get() {
            trace.write(
                Some(&scope.parent_event),
                EventBody::HookDispatchError {
                    hook: name.clone(),
                    handler: handler.name().to_string(),
                    kind: kind.to_string(),
                    message: message.to_string(),
                    task_id: scope.task_id.clone(),
                },
            )?;
        }
        Ok(())
    }

    /// Appends a plain line to `logs/hook-<name>.log` (not a fault).
    pub fn log(&self, hook: &str, line: &str) -> std::io::Result<()> {
        self.append_log(hook, &format!("{} {line}\n", unix_ms()))
    }

    /// Appends to the record's `logs/hook-<hook>.log` (out of every grant's reach) through its
    /// handle: a link or FIFO at that name is replaced, never written through.
    fn append_log(&self, hook: &str, text: &str) -> std::io::Result<()> {
        let path = std::path::Path::new("logs").join(format!("hook-{hook}.log"));
        Ok(self
            .services
            .workdir
            .record_dir()
            .append(&path, text.as_bytes())?)
    }
}

fn honored_text(handler: Handler) -> String {
    match handler.honored() {
        Some(policy) if matches!(handler, Handler::ToolCall | Handler::Shell) => {
            format!(
                "{}` at the decision point, and otherwise `none",
                policy.as_str()
            )
        }
        Some(policy) => policy.as_str().to_string(),
        None => "none".to_string(),
    }
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// Calls the handler `export` of `instance` with `event`.
async fn call_handler(
    store: &mut Store<HostState>,
    instance: &Instance,
    export: &ComponentExportIndex,
    event: &HookEvent,
) -> wasmtime::Result<Result<HookOutput, String>> {
    macro_rules! call {
        ($event:expr, $ty:ty) => {{
            let func = instance
                .get_typed_func::<($ty,), (Result<HookOutput, String>,)>(&mut *store, export)?;
            let (output,) = func.call_async(&mut *store, ($event.clone(),)).await?;
            Ok(output)
        }};
    }
    match event {
        HookEvent::Stage(e) => call!(e, events::StageEvent),
        HookEvent::SessionStart(e) => call!(e, events::SessionStartEvent),
        HookEvent::TaskStart(e) => call!(e, events::TaskStartEvent),
        HookEvent::Inference(e) => call!(e, events::InferenceEvent),
        HookEvent::ToolCall(e) => call!(e, events::ToolCallEvent),
        HookEvent::Shell(e) => call!(e, events::ShellEvent),
        HookEvent::Compaction(e) => call!(e, events::CompactionEvent),
        HookEvent::TaskEnd(e) => call!(e, events::TaskEndEvent),
        HookEvent::SessionEnd(e) => call!(e, events::SessionEndEvent),
    }
}
