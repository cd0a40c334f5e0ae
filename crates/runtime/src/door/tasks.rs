//! The door's tasks: each task's current state, its history and artifacts, and every event it
//! produced, numbered, so a stream can start at any point and a client that reconnects with
//! `Last-Event-ID` misses nothing that happened after it.
//!
//! What the store promises:
//!
//! - State changes are atomic and ordered: each produces one event with the next number, and a
//!   terminal state never changes again.
//! - A task waiting for input holds exactly one waiter; the next message on the task resolves
//!   it and the task is `working` again.
//! - A cancel of a task that has not ended marks it `canceled` at once and asks its loop to
//!   stop; a second cancel, or a cancel of an ended task, is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use murmur_a2a::model::{
    Artifact, ListTasksParams, ListTasksResult, Message, Part, Role, StreamEvent, Task,
    TaskArtifactUpdate, TaskState, TaskStatus, TaskStatusUpdate,
};
use tokio::sync::{oneshot, watch};

use crate::session::{StopRequest, StopSignal};

/// An event and its number in its task's stream.
pub type Numbered = (u64, StreamEvent);

/// The most events kept per task for replay.
const EVENT_LOG_LIMIT: usize = 10_000;

/// Where a task came from, as `a2a_task_received` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `peer` (another capsule said so) or `client`.
    pub origin: String,
    /// The trust class the task runs with: the sending task's, for a peer; `external` else.
    pub trust: String,
    pub traceparent: Option<String>,
}

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    NotFound,
    /// The task has ended (or, for a message, does not wait for input).
    NotAccepting(TaskState),
    NotCancelable(TaskState),
}

struct Entry {
    task: Task,
    log: Vec<(u64, StreamEvent)>,
    next_event: u64,
    changed: watch::Sender<u64>,
    waiter: Option<oneshot::Sender<Message>>,
    stop: StopSignal,
    origin: Origin,
    /// Text streamed so far per artifact id (to know whether the next chunk appends).
    streamed: HashMap<String, bool>,
}

/// Every task the door has seen this session.
#[derive(Default)]
pub struct TaskStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    /// Task ids, most recently created last.
    order: Vec<String>,
}

fn now() -> String {
    murmur_a2a::time::format_timestamp_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

impl TaskStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A new task in `submitted`, its history holding `message`.
    pub fn create(
        &self,
        task_id: &str,
        context_id: &str,
        mut message: Message,
        origin: Origin,
    ) -> (Task, StopSignal) {
        message.task_id = Some(task_id.to_string());
        message.context_id = Some(context_id.to_string());
        let mut status = TaskStatus::new(TaskState::Submitted);
        status.timestamp = Some(now());
        let mut task = Task::new(task_id, context_id, status);
        task.history.push(message);
        let stop = StopSignal::default();
        let (changed, _) = watch::channel(0);
        let mut inner = self.lock();
        inner.tasks.insert(
            task_id.to_string(),
            Entry {
                task: task.clone(),
                log: Vec::new(),
                next_event: 1,
                changed,
                waiter: None,
                stop: stop.clone(),
                origin,
                streamed: HashMap::new(),
            },
        );
        inner.order.push(task_id.to_string());
        (task, stop)
    }

    /// The task as it stands, with at most `history_length` recent messages.
    pub fn get(&self, id: &str, history_length: Option<u32>) -> Option<Task> {
        let inner = self.lock();
        let mut task = inner.tasks.get(id)?.task.clone();
        trim_history(&mut task, history_length);
        Some(task)
    }

    pub fn origin(&self, id: &str) -> Option<Origin> {
        self.lock().tasks.get(id).map(|entry| entry.origin.clone())
    }

    /// The tasks matching `params`, most recently created first, one page of them.
    pub fn list(&self, params: &ListTasksParams) -> ListTasksResult {
        let inner = self.lock();
        let matching: Vec<&Task> = inner
            .order
            .iter()
            .rev()
            .filter_map(|id| inner.tasks.get(id).map(|entry| &entry.task))
            .filter(|task| {
                params
                    .context_id
                    .as_ref()
                    .is_none_or(|c| *c == task.context_id)
            })
            .filter(|task| params.status.is_none_or(|s| s == task.status.state))
            .collect();
        let page_size = params
            .effective_page_size()
            .clamp(1, ListTasksParams::MAX_PAGE_SIZE);
        let start: usize = params
            .page_token
            .as_deref()
            .and_then(|token| token.parse().ok())
            .unwrap_or(0);
        let tasks: Vec<Task> = matching
            .iter()
            .skip(start)
            .take(page_size as usize)
            .map(|task| {
                let mut task = (*task).clone();
                trim_history(&mut task, params.history_length);
                if !params.include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        let end = start + tasks.len();
        ListTasksResult {
            next_page_token: if end < matching.len() {
                end.to_string()
            } else {
                String::new()
            },
            page_size,
            total_size: matching.len() as u32,
            tasks,
        }
    }

    /// Moves the task to `state` (with an optional agent message), unless it has ended.
    /// Returns whether it changed.
    pub fn set_state(&self, id: &str, state: TaskState, message: Option<Message>) -> bool {
        let mut inner = self.lock();
        let Some(entry) = inner.tasks.get_mut(id) else {
            return false;
        };
        if entry.task.status.state.is_terminal() {
            return false;
        }
        let mut status = TaskStatus::new(state);
        status.timestamp = Some(now());
        if let Some(mut message) = message {
            message.task_id = Some(entry.task.id.clone());
            message.context_id = Some(entry.task.context_id.clone());
            status.message = Some(message.clone());
            entry.task.history.push(message);
        }
        entry.task.status = status.clone();
        let update =
            TaskStatusUpdate::new(entry.task.id.clone(), entry.task.context_id.clone(), status);
        push(entry, StreamEvent::StatusUpdate(update));
        true
    }

    /// Adds `text` to the artifact `artifact_id` (appending to what was streamed before).
    /// `last`: this is its last chunk.
    pub fn artifact_text(&self, id: &str, artifact_id: &str, name: &str, text: &str, last: bool) {
        let mut inner = self.lock();
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        if entry.task.status.state.is_terminal() {
            return;
        }
        let append = entry
            .streamed
            .insert(artifact_id.to_string(), true)
            .is_some();
        let chunk = Artifact {
            name: Some(name.to_string()),
            ..Artifact::new(artifact_id, vec![Part::text(text)])
        };
        match entry
            .task
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == artifact_id)
        {
            Some(existing) if append => match existing.parts.first_mut() {
                Some(Part {
                    content: murmur_a2a::model::PartContent::Text(whole),
                    ..
                }) => whole.push_str(text),
                _ => existing.parts.push(Part::text(text)),
            },
            Some(existing) => *existing = chunk.clone(),
            None => entry.task.artifacts.push(chunk.clone()),
        }
        let update = TaskArtifactUpdate {
            task_id: entry.task.id.clone(),
            context_id: entry.task.context_id.clone(),
            artifact: chunk,
            append,
            last_chunk: last,
            metadata: None,
        };
        push(entry, StreamEvent::ArtifactUpdate(update));
    }

    /// Moves the task to `input-required` with `prompt` and returns where the reply arrives.
    pub fn request_input(&self, id: &str, prompt: &str) -> Option<oneshot::Receiver<Message>> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut inner = self.lock();
            let entry = inner.tasks.get_mut(id)?;
            if entry.task.status.state.is_terminal() {
                return None;
            }
            entry.waiter = Some(sender);
        }
        let question = Message::text(crate::session::new_id("msg_", 32), Role::Agent, prompt);
        self.set_state(id, TaskState::InputRequired, Some(question));
        Some(receiver)
    }

    /// Hands `message` to the task waiting for input, which is `working` again.
    pub fn deliver_input(&self, id: &str, mut message: Message) -> Result<(), Refused> {
        let waiter = {
            let mut inner = self.lock();
            let entry = inner.tasks.get_mut(id).ok_or(Refused::NotFound)?;
            let state = entry.task.status.state;
            if state != TaskState::InputRequired {
                return Err(Refused::NotAccepting(state));
            }
            let Some(waiter) = entry.waiter.take() else {
                return Err(Refused::NotAccepting(state));
            };
            message.task_id = Some(entry.task.id.clone());
            message.context_id = Some(entry.task.context_id.clone());
            entry.task.history.push(message.clone());
            waiter
        };
        self.set_state(id, TaskState::Working, None);
        waiter
            .send(message)
            .map_err(|_| Refused::NotAccepting(TaskState::Unknown))
    }

    /// Cancels a task that has not ended: `canceled` at once, and its loop asked to stop.
    pub fn cancel(&self, id: &str) -> Result<Task, Refused> {
        let stop = {
            let inner = self.lock();
            let entry = inner.tasks.get(id).ok_or(Refused::NotFound)?;
            let state = entry.task.status.state;
            if state.is_terminal() {
                return Err(Refused::NotCancelable(state));
            }
            entry.stop.clone()
        };
        stop.stop(StopRequest::Canceled);
        self.set_state(id, TaskState::Canceled, None);
        let mut inner = self.lock();
        let entry = inner.tasks.get_mut(id).ok_or(Refused::NotFound)?;
        // A waiter for input will never be answered now.
        entry.waiter = None;
        Ok(entry.task.clone())
    }

    /// Cancels every task that has not ended (the capsule is stopping): a running one stops at
    /// its next turn or tool call, one waiting for input or in the queue at once. How many.
    pub fn cancel_unfinished(&self) -> usize {
        let unfinished: Vec<String> = {
            let inner = self.lock();
            inner
                .order
                .iter()
                .filter(|id| {
                    inner
                        .tasks
                        .get(*id)
                        .is_some_and(|entry| !entry.task.status.state.is_terminal())
                })
                .cloned()
                .collect()
        };
        unfinished
            .iter()
            .filter(|id| self.cancel(id).is_ok())
            .count()
    }

    /// Whether the task was asked to stop.
    pub fn stop_signal(&self, id: &str) -> Option<StopSignal> {
        self.lock().tasks.get(id).map(|entry| entry.stop.clone())
    }

    /// The events after `after` (all of them for `None`), and a receiver that changes when
    /// more arrive.
    pub fn events(
        &self,
        id: &str,
        after: Option<u64>,
    ) -> Option<(Vec<Numbered>, watch::Receiver<u64>)> {
        let inner = self.lock();
        let entry = inner.tasks.get(id)?;
        let after = after.unwrap_or(0);
        let events = entry
            .log
            .iter()
            .filter(|(n, _)| *n > after)
            .cloned()
            .collect();
        Some((events, entry.changed.subscribe()))
    }

    /// The number of the task's latest event (0 before any).
    pub fn last_event(&self, id: &str) -> Option<u64> {
        self.lock().tasks.get(id).map(|entry| entry.next_event - 1)
    }
}

fn push(entry: &mut Entry, event: StreamEvent) {
    let number = entry.next_event;
    entry.next_event += 1;
    entry.log.push((number, event));
    if entry.log.len() > EVENT_LOG_LIMIT {
        entry.log.remove(0);
    }
    entry.changed.send_replace(number);
}

fn trim_history(task: &mut Task, history_length: Option<u32>) {
    if let Some(length) = history_length {
        let keep = task.history.len().saturating_sub(length as usize);
        task.history.drain(..keep);
    }
}

/// A shared store.
pub type SharedStore = Arc<TaskStore>;
