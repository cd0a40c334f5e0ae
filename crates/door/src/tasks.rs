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
//! - A task belongs to the principal whose request created it ([`Origin::principal`]; `None`
//!   on a door that asks for no credential): [`TaskStore::visible`] and a `ListTasks` page
//!   show it to that principal only.
//! - A context belongs to the principal whose task opened it, for as long as its conversation
//!   exists, whatever became of its tasks: a task of another principal in it is refused
//!   ([`NotCreated::OthersContext`], checked in the same step that creates the task). The
//!   store knows which contexts have a conversation saved (the session reports it as each task
//!   it ran ends, [`TaskStore::ran`]); a context with none and no task left is forgotten, and
//!   so is one whose conversation was dropped ([`TaskStore::history_dropped`]): its id then
//!   starts a fresh context, with no history, for whoever sends it.
//! - A task's input is held once, in its history: the queue carries its id, and the session
//!   reads the text when it takes the task ([`TaskStore::take`]).
//!
//! What the store keeps is bounded, whatever clients send or the agent streams:
//!
//! - At most [`UNFINISHED_LIMIT`] tasks that have not ended, holding at most
//!   [`UNFINISHED_BYTES`] of messages in all; a new task past either is refused
//!   ([`NotCreated::Full`]; a task is always taken when none is waiting). Under a bound on the
//!   queue ([`TaskStore::bound_waiting`]), at most that many tasks wait for the session, the
//!   one it runs not counted; a new task past it is refused ([`NotCreated::QueueFull`]).
//! - At most [`FINISHED_KEPT`] ended tasks, holding at most [`FINISHED_BYTES`] of text in all
//!   (inputs, replies, answers, artifacts and replay logs): past either, the one that ended
//!   longest ago is forgotten (GetTask then answers task-not-found); the one that ended last
//!   is always kept.
//! - Contexts with a saved conversation: at most [`CONTEXTS_KEPT`] of them, taking at most
//!   [`CONVERSATIONS_MAX_BYTES`] on disk in all under the session workdir's `contexts/` (the
//!   conversations hold the tasks' inputs), or the bound the capsule sets
//!   (`door.conversations_max_bytes`, [`TaskStore::bound_conversations`]). Past
//!   either, [`TaskStore::ran`] names the contexts no task uses, the one whose last task ended
//!   longest ago first, for the served session to delete (it always keeps the one that ended
//!   last); their owners are forgotten once they are gone.
//! - Per task, at most [`TASK_TEXT_LIMIT`] bytes of artifact text: past it an artifact ends
//!   with a note saying how much more was streamed (live subscribers still get every chunk),
//!   and the session's own files keep the whole answer.
//! - Per task, an event log for replay of at most [`EVENT_LOG_LIMIT`] events and
//!   [`EVENT_LOG_BYTES`] bytes of chunk text; the oldest go first.
//! - A completed task's status message repeats at most [`STATUS_TEXT_LIMIT`] bytes of its
//!   answer ([`status_text`]).
//! - A `ListTasks` page holds at most [`LIST_PAGE_BYTES`] bytes of text (and at least one task).
//!
//! Every operation costs time in proportion to what it touches, never to a task's whole
//! history: checks of a task's state or artifacts clone nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use murmur_a2a::model::{
    Artifact, ListTasksParams, ListTasksResult, Message, Part, Role, StreamEvent, Task,
    TaskArtifactUpdate, TaskState, TaskStatus, TaskStatusUpdate,
};
use murmur_manifest::door::CONVERSATIONS_MAX_BYTES;
use tokio::sync::{oneshot, watch};

use murmur_runtime::session::{StopRequest, StopSignal, new_id};

/// An event and its number in its task's stream.
pub type Numbered = (u64, StreamEvent);

/// The most events kept per task for replay.
pub const EVENT_LOG_LIMIT: usize = 10_000;
/// The most bytes of chunk text a task's replay log keeps.
pub const EVENT_LOG_BYTES: usize = 4 * 1024 * 1024;
/// The most bytes of artifact text a task keeps.
pub const TASK_TEXT_LIMIT: usize = 4 * 1024 * 1024;
/// The most ended tasks kept.
pub const FINISHED_KEPT: usize = 1_000;
/// The most tasks that have not ended (queued, running, waiting for input).
pub const UNFINISHED_LIMIT: usize = 1_000;
/// The most bytes of text one `ListTasks` page carries (a page holds at least one task).
pub const LIST_PAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most bytes of an answer a completed task's status message repeats.
pub const STATUS_TEXT_LIMIT: usize = 1024 * 1024;
/// The most bytes of text the ended tasks kept hold in all (256 MiB): their histories (inputs,
/// replies, status messages), artifacts, status and replay logs.
pub const FINISHED_BYTES: usize = 256 * 1024 * 1024;
/// The most bytes of messages the tasks that have not ended hold in all (256 MiB): their
/// inputs and the replies they were sent.
pub const UNFINISHED_BYTES: usize = 256 * 1024 * 1024;
/// The most contexts whose conversation a served capsule keeps (and remembers the owner of).
pub const CONTEXTS_KEPT: usize = 10_000;

/// `answer` as a completed task's status message shows it: whole up to [`STATUS_TEXT_LIMIT`],
/// else cut there with a note saying where the rest is.
pub fn status_text(answer: String) -> String {
    if answer.len() <= STATUS_TEXT_LIMIT {
        return answer;
    }
    let cut = answer.floor_char_boundary(STATUS_TEXT_LIMIT);
    format!(
        "{}\n[{} more bytes are in the `response` artifact and the session's out/result.txt]",
        &answer[..cut],
        answer.len() - cut
    )
}

/// Where a task came from, as `a2a_task_received` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `client`, or `peer` for a `door.auth` principal with `trust: peer` (`operator` for the
    /// task of `task.md`).
    pub origin: String,
    /// The trust class the task runs with: `external` for a client, what a peer claimed.
    pub trust: String,
    pub traceparent: Option<String>,
    /// What `x-murmur-task-origin` claimed, when a client sent it (not granted).
    pub claimed_origin: Option<String>,
    /// What `x-murmur-task-trust` claimed, when a client sent it (not granted).
    pub claimed_trust: Option<String>,
    /// The `door.auth` principal that created the task; `None` when the door asks for no
    /// credential, and for the task of `task.md`.
    pub principal: Option<String>,
    /// The media types the client said it accepts (`acceptedOutputModes`); empty: any.
    pub accepts: Vec<String>,
}

/// Why a store operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    NotFound,
    /// The task has ended (or, for a message, does not wait for input).
    NotAccepting(TaskState),
    NotCancelable(TaskState),
}

/// Why a new task was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCreated {
    /// [`UNFINISHED_LIMIT`] tasks, or [`UNFINISHED_BYTES`] of messages, have not ended yet.
    Full,
    /// The context it names is another principal's.
    OthersContext,
    /// As many tasks as the bound ([`TaskStore::bound_waiting`], `lifecycle.queue_depth`)
    /// wait for the session already.
    QueueFull(usize),
}

struct Entry {
    task: Task,
    /// Where the task is in [`Inner::order`].
    seq: u64,
    log: VecDeque<(u64, StreamEvent)>,
    /// Bytes of chunk text in `log`.
    log_bytes: usize,
    /// Bytes of artifact text in `task.artifacts`.
    kept_bytes: usize,
    /// Bytes streamed but not kept, per artifact id.
    dropped: HashMap<String, usize>,
    next_event: u64,
    changed: watch::Sender<u64>,
    waiter: Option<oneshot::Sender<Message>>,
    stop: StopSignal,
    origin: Origin,
    /// Text streamed so far per artifact id (to know whether the next chunk appends).
    streamed: HashMap<String, bool>,
    /// The files the door serves for this task by URL (`/files/<task id>/<n>`).
    files: Vec<murmur_runtime::session::workdir::OutputFile>,
    /// Where its status changes are posted ([`crate::push`]), each with its id.
    webhooks: Vec<crate::push::Webhook>,
    /// Whether the session took it to run ([`TaskStore::take`]): then its context is held until
    /// the session says it is done with it ([`TaskStore::ran`]), not when it ends.
    taken: bool,
    /// The bytes it counts toward the store's totals: of its messages while it has not ended
    /// ([`UNFINISHED_BYTES`]), of all its text once it has ([`FINISHED_BYTES`]).
    counted: usize,
}

/// A context: whose it is, and what it has saved.
struct Context {
    owner: Option<String>,
    /// Its tasks not yet let go: not ended and not taken, or taken and not reported back by
    /// the session.
    holding: usize,
    /// The bytes its conversation takes on disk, as last measured; `None`: none is saved.
    history: Option<u64>,
    /// Its key in [`Inner::idle`], while no task holds it.
    idle: Option<u64>,
}

/// Every task the door has seen this session.
#[derive(Default)]
pub struct TaskStore {
    inner: Mutex<Inner>,
    /// Posts status changes to tasks' webhooks; none: nothing is posted.
    pusher: std::sync::OnceLock<crate::push::Pusher>,
}

/// A webhook refused by the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookRefused {
    NotFound,
    /// The task has [`crate::push::CONFIGS_PER_TASK`] webhooks.
    Full,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    /// Task ids by creation, most recent last.
    order: BTreeMap<u64, String>,
    next_seq: u64,
    /// Ended tasks' ids, in the order they ended.
    finished: VecDeque<String>,
    /// Bytes the ended tasks kept count ([`FINISHED_BYTES`]).
    finished_bytes: usize,
    /// Bytes the tasks that have not ended count ([`UNFINISHED_BYTES`]).
    unfinished_bytes: usize,
    /// The contexts with a task or a saved conversation, by id.
    contexts: HashMap<String, Context>,
    /// The contexts with a conversation and no task, by when their last task was let go.
    idle: BTreeMap<u64, String>,
    next_idle: u64,
    /// How many contexts have a conversation saved, and its bytes in all.
    histories: usize,
    history_bytes: u64,
    /// The most bytes the conversations may take ([`TaskStore::bound_conversations`]); `None`:
    /// [`CONVERSATIONS_MAX_BYTES`].
    history_limit: Option<u64>,
    /// The tasks the session took and has not reported back, with their context.
    running: HashMap<String, String>,
    /// Tasks that have neither ended nor been taken by the session: the queue.
    waiting: usize,
    /// The most tasks that may wait ([`TaskStore::bound_waiting`]); `None`: no bound but
    /// [`UNFINISHED_LIMIT`].
    waiting_limit: Option<usize>,
}

impl Inner {
    /// Records that `id` ended, and forgets the tasks that ended longest ago past
    /// [`FINISHED_KEPT`] or [`FINISHED_BYTES`] (never the one that ended last).
    fn ended(&mut self, id: &str) {
        if let Some(entry) = self.tasks.get_mut(id) {
            self.unfinished_bytes -= entry.counted;
            entry.counted = entry_bytes(entry);
            self.finished_bytes += entry.counted;
            if !entry.taken {
                // The session never ran it: it saved nothing, and lets go of its context now.
                self.waiting = self.waiting.saturating_sub(1);
                let context = entry.task.context_id.clone();
                self.let_go(&context);
            }
        }
        self.finished.push_back(id.to_string());
        while self.finished.len() > FINISHED_KEPT
            || (self.finished_bytes > FINISHED_BYTES && self.finished.len() > 1)
        {
            let Some(oldest) = self.finished.pop_front() else {
                break;
            };
            if let Some(entry) = self.tasks.remove(&oldest) {
                self.order.remove(&entry.seq);
                self.finished_bytes -= entry.counted;
            }
        }
    }

    /// A task of `principal` joins `context_id`, a new context or one of that principal's.
    fn join(&mut self, context_id: &str, principal: Option<&str>) -> Result<(), NotCreated> {
        match self.contexts.get_mut(context_id) {
            Some(context) if context.owner.as_deref() != principal => {
                Err(NotCreated::OthersContext)
            }
            Some(context) => {
                context.holding += 1;
                if let Some(key) = context.idle.take() {
                    self.idle.remove(&key);
                }
                Ok(())
            }
            None => {
                self.contexts.insert(
                    context_id.to_string(),
                    Context {
                        owner: principal.map(str::to_string),
                        holding: 1,
                        history: None,
                        idle: None,
                    },
                );
                Ok(())
            }
        }
    }

    /// A task lets go of `context_id`: with no task left, a context with no conversation is
    /// forgotten, and one with a conversation is idle from now.
    fn let_go(&mut self, context_id: &str) {
        let Some(context) = self.contexts.get_mut(context_id) else {
            return;
        };
        context.holding = context.holding.saturating_sub(1);
        if context.holding > 0 {
            return;
        }
        if context.history.is_none() {
            self.contexts.remove(context_id);
            return;
        }
        let key = self.next_idle;
        self.next_idle += 1;
        context.idle = Some(key);
        self.idle.insert(key, context_id.to_string());
    }

    /// Records that `context_id`'s conversation takes `history` bytes on disk (`None`: it has
    /// none).
    fn saved(&mut self, context_id: &str, history: Option<u64>) {
        let Some(context) = self.contexts.get_mut(context_id) else {
            return;
        };
        if let Some(old) = context.history.take() {
            self.histories -= 1;
            self.history_bytes -= old;
        }
        if let Some(new) = history {
            self.histories += 1;
            self.history_bytes += new;
        }
        context.history = history;
    }

    /// The idle contexts whose conversations to drop, the one idle longest first, until at
    /// most [`CONTEXTS_KEPT`] conversations and their bound of bytes remain (the one idle the
    /// shortest time is kept).
    fn over_budget(&self) -> Vec<String> {
        let (mut count, mut bytes) = (self.histories, self.history_bytes);
        let mut dropped = Vec::new();
        let keep_last = self.idle.len().saturating_sub(1);
        for context_id in self.idle.values().take(keep_last) {
            if count <= CONTEXTS_KEPT
                && bytes <= self.history_limit.unwrap_or(CONVERSATIONS_MAX_BYTES)
            {
                break;
            }
            let size = self
                .contexts
                .get(context_id)
                .and_then(|context| context.history)
                .unwrap_or(0);
            count -= 1;
            bytes -= size;
            dropped.push(context_id.clone());
        }
        dropped
    }

    fn unfinished(&self) -> usize {
        self.tasks.len() - self.finished.len().min(self.tasks.len())
    }
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
    /// Posts every later status change of a task with webhooks through `pusher`.
    pub fn push_with(&self, pusher: crate::push::Pusher) {
        let _ = self.pusher.set(pusher);
    }

    /// Adds (or, with the id of one it has, replaces) a webhook of task `id`; the config as
    /// kept, its id chosen (`push-<n>`) when it had none.
    pub fn add_webhook(
        &self,
        id: &str,
        mut webhook: crate::push::Webhook,
    ) -> Result<murmur_a2a::PushNotificationConfig, WebhookRefused> {
        let mut inner = self.lock();
        let entry = inner.tasks.get_mut(id).ok_or(WebhookRefused::NotFound)?;
        let hooks = &mut entry.webhooks;
        if let Some(config_id) = &webhook.config.id
            && let Some(at) = hooks
                .iter()
                .position(|w| w.config.id.as_ref() == Some(config_id))
        {
            hooks[at] = webhook.clone();
            return Ok(webhook.config);
        }
        if hooks.len() >= crate::push::CONFIGS_PER_TASK {
            return Err(WebhookRefused::Full);
        }
        if webhook.config.id.is_none() {
            let mut n = hooks.len();
            while hooks
                .iter()
                .any(|w| w.config.id.as_deref() == Some(format!("push-{n}").as_str()))
            {
                n += 1;
            }
            webhook.config.id = Some(format!("push-{n}"));
        }
        hooks.push(webhook.clone());
        Ok(webhook.config)
    }

    /// Task `id`'s webhooks, in the order they were added (`None`: no such task).
    pub fn webhooks(&self, id: &str) -> Option<Vec<crate::push::Webhook>> {
        self.lock()
            .tasks
            .get(id)
            .map(|entry| entry.webhooks.clone())
    }

    /// Removes webhook `config_id` of task `id`; whether it had one.
    pub fn remove_webhook(&self, id: &str, config_id: &str) -> bool {
        let mut inner = self.lock();
        let Some(entry) = inner.tasks.get_mut(id) else {
            return false;
        };
        let before = entry.webhooks.len();
        entry
            .webhooks
            .retain(|w| w.config.id.as_deref() != Some(config_id));
        entry.webhooks.len() != before
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Bounds the tasks that may wait for the session (neither ended nor taken) to `depth`:
    /// past it a new task is refused ([`NotCreated::QueueFull`]). The one the session runs is
    /// not waiting.
    pub fn bound_waiting(&self, depth: usize) {
        self.lock().waiting_limit = Some(depth);
    }

    /// Bounds the bytes the kept conversations take on disk in all to `bytes` (instead of
    /// [`CONVERSATIONS_MAX_BYTES`]).
    pub fn bound_conversations(&self, bytes: u64) {
        self.lock().history_limit = Some(bytes);
    }

    /// A new task in `submitted`, its history holding `message`; the signal that stops it.
    /// Refused when
    /// [`UNFINISHED_LIMIT`] tasks or [`UNFINISHED_BYTES`] of messages have not ended
    /// ([`NotCreated::Full`]), when the tasks waiting for the session are at their bound
    /// ([`NotCreated::QueueFull`]), or when `context_id` is another principal's
    /// ([`NotCreated::OthersContext`]).
    pub fn create(
        &self,
        task_id: &str,
        context_id: &str,
        mut message: Message,
        origin: Origin,
    ) -> Result<StopSignal, NotCreated> {
        message.task_id = Some(task_id.to_string());
        message.context_id = Some(context_id.to_string());
        let bytes = parts_bytes(&message.parts);
        let mut status = TaskStatus::new(TaskState::Submitted);
        status.timestamp = Some(now());
        let mut task = Task::new(task_id, context_id, status);
        task.history.push(message);
        let stop = StopSignal::default();
        let (changed, _) = watch::channel(0);
        let mut inner = self.lock();
        if inner.unfinished() >= UNFINISHED_LIMIT
            || (inner.unfinished_bytes > 0 && inner.unfinished_bytes + bytes > UNFINISHED_BYTES)
        {
            return Err(NotCreated::Full);
        }
        if let Some(limit) = inner.waiting_limit
            && inner.waiting >= limit
        {
            return Err(NotCreated::QueueFull(limit));
        }
        inner.join(context_id, origin.principal.as_deref())?;
        inner.waiting += 1;
        inner.unfinished_bytes += bytes;
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.tasks.insert(
            task_id.to_string(),
            Entry {
                task,
                seq,
                log: VecDeque::new(),
                log_bytes: 0,
                kept_bytes: 0,
                dropped: HashMap::new(),
                next_event: 1,
                changed,
                waiter: None,
                stop: stop.clone(),
                origin,
                streamed: HashMap::new(),
                files: Vec::new(),
                webhooks: Vec::new(),
                taken: false,
                counted: bytes,
            },
        );
        inner.order.insert(seq, task_id.to_string());
        Ok(stop)
    }

    /// The session takes task `id` to run: the text it was asked, and the task is `working`.
    /// `None` when it has ended (canceled while it waited) or is gone. From now on its context
    /// is held until the session reports it done ([`TaskStore::ran`]), even if it is canceled:
    /// the session may still save its conversation.
    pub fn take(&self, id: &str) -> Option<String> {
        let text = {
            let mut inner = self.lock();
            let inner = &mut *inner;
            let entry = inner.tasks.get_mut(id)?;
            if entry.task.status.state.is_terminal() {
                return None;
            }
            entry.taken = true;
            inner.waiting = inner.waiting.saturating_sub(1);
            inner
                .running
                .insert(id.to_string(), entry.task.context_id.clone());
            entry
                .task
                .history
                .first()
                .map(Message::joined_text)
                .unwrap_or_default()
        };
        self.set_state(id, TaskState::Working, None);
        Some(text)
    }

    /// The session is done with task `id`, whose context's conversation now takes `history`
    /// bytes on disk (`None`: it has none saved). Returns the contexts whose conversations must
    /// go to keep within [`CONTEXTS_KEPT`] and the bound of bytes (the capsule's, else
    /// [`CONVERSATIONS_MAX_BYTES`]), the one whose last task ended longest ago first: delete
    /// each, then tell the store ([`TaskStore::history_dropped`]).
    pub fn ran(&self, id: &str, history: Option<u64>) -> Vec<String> {
        let mut inner = self.lock();
        if let Some(context_id) = inner.running.remove(id) {
            inner.saved(&context_id, history);
            inner.let_go(&context_id);
        }
        inner.over_budget()
    }

    /// The conversation of `context_id` is deleted: a context no task uses is forgotten (its
    /// id starts a fresh context, anyone's); one a task waits in stays its owner's.
    pub fn history_dropped(&self, context_id: &str) {
        let mut inner = self.lock();
        inner.saved(context_id, None);
        let Some(context) = inner.contexts.get_mut(context_id) else {
            return;
        };
        if context.holding == 0 {
            if let Some(key) = context.idle.take() {
                inner.idle.remove(&key);
            }
            inner.contexts.remove(context_id);
        }
    }

    /// What the store holds now: bytes of the ended tasks kept and of the tasks that have not
    /// ended, the contexts' conversations on disk (as last measured), and how many tasks and
    /// contexts it keeps.
    pub fn usage(&self) -> Usage {
        let inner = self.lock();
        Usage {
            finished_bytes: inner.finished_bytes,
            unfinished_bytes: inner.unfinished_bytes,
            history_bytes: inner.history_bytes,
            tasks: inner.tasks.len(),
            contexts: inner.contexts.len(),
        }
    }

    /// The task's state, cloning nothing else.
    pub fn state(&self, id: &str) -> Option<TaskState> {
        self.lock()
            .tasks
            .get(id)
            .map(|entry| entry.task.status.state)
    }

    /// Whether the task has an artifact `artifact_id` yet, cloning nothing.
    pub fn has_artifact(&self, id: &str, artifact_id: &str) -> bool {
        self.lock()
            .tasks
            .get(id)
            .is_some_and(|entry| entry.streamed.contains_key(artifact_id))
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

    /// Whether task `id` exists and belongs to `principal`. A task of another principal is, to
    /// this one, a task that does not exist.
    pub fn visible(&self, id: &str, principal: Option<&str>) -> bool {
        self.lock()
            .tasks
            .get(id)
            .is_some_and(|entry| entry.origin.principal.as_deref() == principal)
    }

    /// Whether `principal` may start a task in `context_id`: the store knows no such context
    /// (no task uses it and no conversation of it is kept), or it is this principal's.
    pub fn context_free_for(&self, context_id: &str, principal: Option<&str>) -> bool {
        self.lock()
            .contexts
            .get(context_id)
            .is_none_or(|context| context.owner.as_deref() == principal)
    }

    /// `principal`'s tasks matching `params`, most recently created first, one page of them: at most
    /// the page size, and at most [`LIST_PAGE_BYTES`] of text (at least one task).
    pub fn list(&self, params: &ListTasksParams, principal: Option<&str>) -> ListTasksResult {
        let inner = self.lock();
        let matching: Vec<&Task> = inner
            .order
            .values()
            .rev()
            .filter_map(|id| inner.tasks.get(id))
            .filter(|entry| entry.origin.principal.as_deref() == principal)
            .map(|entry| &entry.task)
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
        // The door refused any token that is not an offset an earlier page gave.
        let start = params
            .page_token
            .as_deref()
            .and_then(page_offset)
            .unwrap_or(0);
        let mut bytes = 0;
        let mut tasks: Vec<Task> = Vec::new();
        for task in matching.iter().skip(start).take(page_size as usize) {
            let mut task = (*task).clone();
            trim_history(&mut task, params.history_length);
            if !params.include_artifacts {
                task.artifacts.clear();
            }
            let size = text_bytes(&task);
            if !tasks.is_empty() && bytes + size > LIST_PAGE_BYTES {
                break;
            }
            bytes += size;
            tasks.push(task);
        }
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
        if let Some(pusher) = self.pusher.get() {
            for webhook in &entry.webhooks {
                pusher.send(crate::push::Delivery {
                    webhook: webhook.clone(),
                    task_id: entry.task.id.clone(),
                    payload: notification(&entry.task, &update, webhook.version),
                });
            }
        }
        push(entry, StreamEvent::StatusUpdate(update));
        if state.is_terminal() {
            inner.ended(id);
        }
        true
    }

    /// Adds `text` to the artifact `artifact_id` (appending to what was streamed before).
    /// `last`: this is its last chunk. Past [`TASK_TEXT_LIMIT`] the chunk is still streamed but
    /// not kept, and the artifact ends with a note of how much was left out.
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
        let room = TASK_TEXT_LIMIT.saturating_sub(entry.kept_bytes);
        let kept = &text[..text.floor_char_boundary(room)];
        let left_out = text.len() - kept.len();
        entry.kept_bytes += kept.len();
        let existing = entry
            .task
            .artifacts
            .iter()
            .position(|a| a.artifact_id == artifact_id);
        let whole = match existing {
            Some(at) if append => &mut entry.task.artifacts[at],
            Some(at) => {
                entry.task.artifacts[at] = Artifact {
                    name: Some(name.to_string()),
                    ..Artifact::new(artifact_id, vec![Part::text("")])
                };
                &mut entry.task.artifacts[at]
            }
            None => {
                entry.task.artifacts.push(Artifact {
                    name: Some(name.to_string()),
                    ..Artifact::new(artifact_id, vec![Part::text("")])
                });
                entry.task.artifacts.last_mut().expect("just pushed")
            }
        };
        match whole.parts.first_mut() {
            Some(Part {
                content: murmur_a2a::model::PartContent::Text(whole),
                ..
            }) => whole.push_str(kept),
            _ => whole.parts.push(Part::text(kept)),
        }
        if left_out > 0 || (last && entry.dropped.contains_key(artifact_id)) {
            let dropped = entry.dropped.entry(artifact_id.to_string()).or_default();
            *dropped += left_out;
            if last
                && let Some(Part {
                    content: murmur_a2a::model::PartContent::Text(whole),
                    ..
                }) = whole.parts.first_mut()
            {
                whole.push_str(&format!(
                    "\n[{dropped} more bytes were streamed; a served task keeps at most {TASK_TEXT_LIMIT} bytes of text, and the session's workdir has it all]"
                ));
            }
        }
        let chunk = Artifact {
            name: Some(name.to_string()),
            ..Artifact::new(artifact_id, vec![Part::text(text)])
        };
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

    /// Adds a whole artifact (one event, its last chunk) and the files the task's URLs serve,
    /// unless the task has ended.
    pub fn add_artifact(&self, id: &str, artifact: Artifact) {
        let mut inner = self.lock();
        let Some(entry) = inner.tasks.get_mut(id) else {
            return;
        };
        if entry.task.status.state.is_terminal() {
            return;
        }
        entry.kept_bytes += parts_bytes(&artifact.parts);
        entry.task.artifacts.push(artifact.clone());
        let update = TaskArtifactUpdate {
            task_id: entry.task.id.clone(),
            context_id: entry.task.context_id.clone(),
            artifact,
            append: false,
            last_chunk: true,
            metadata: None,
        };
        push(entry, StreamEvent::ArtifactUpdate(update));
    }

    /// Keeps `files` as what `/files/<id>/<n>` serves.
    pub fn serve_files(&self, id: &str, files: Vec<murmur_runtime::session::workdir::OutputFile>) {
        if let Some(entry) = self.lock().tasks.get_mut(id) {
            entry.files = files;
        }
    }

    /// File `index` of task `id`, when the task is `principal`'s.
    pub fn served_file(
        &self,
        id: &str,
        principal: Option<&str>,
        index: usize,
    ) -> Option<murmur_runtime::session::workdir::OutputFile> {
        let inner = self.lock();
        let entry = inner.tasks.get(id)?;
        if entry.origin.principal.as_deref() != principal {
            return None;
        }
        entry.files.get(index).cloned()
    }

    /// What the client of task `id` accepts (`acceptedOutputModes`; empty: any).
    pub fn accepts(&self, id: &str) -> Vec<String> {
        self.lock()
            .tasks
            .get(id)
            .map(|entry| entry.origin.accepts.clone())
            .unwrap_or_default()
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
        let question = Message::text(new_id("msg_", 32), Role::Agent, prompt);
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
            let bytes = parts_bytes(&message.parts);
            entry.counted += bytes;
            entry.task.history.push(message.clone());
            inner.unfinished_bytes += bytes;
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
        self.unfinished()
            .iter()
            .filter(|id| self.cancel(id).is_ok())
            .count()
    }

    /// Fails every task that has not ended, its status message saying `why`: the session
    /// ended before it could run them. Returns how many it failed.
    pub fn fail_unfinished(&self, why: &str) -> usize {
        self.unfinished()
            .iter()
            .filter(|id| {
                let message = Message::text(new_id("msg_", 32), Role::Agent, why.to_string());
                self.set_state(id, TaskState::Failed, Some(message))
            })
            .count()
    }

    /// The tasks that have not ended, oldest first.
    fn unfinished(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .order
            .values()
            .filter(|id| {
                inner
                    .tasks
                    .get(*id)
                    .is_some_and(|entry| !entry.task.status.state.is_terminal())
            })
            .cloned()
            .collect()
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
    entry.log_bytes += event_bytes(&event);
    entry.log.push_back((number, event));
    while entry.log.len() > EVENT_LOG_LIMIT
        || (entry.log_bytes > EVENT_LOG_BYTES && entry.log.len() > 1)
    {
        if let Some((_, oldest)) = entry.log.pop_front() {
            entry.log_bytes -= event_bytes(&oldest);
        }
    }
    entry.changed.send_replace(number);
}

/// What a webhook is posted for a status change: A2A 1.0 a `StreamResponse` (the status
/// update; the whole task, without its history, once it has ended), 0.3 the task without its
/// history.
fn notification(
    task: &Task,
    update: &TaskStatusUpdate,
    version: murmur_a2a::Version,
) -> serde_json::Value {
    use murmur_a2a::Wire;
    let without_history = || Task {
        history: Vec::new(),
        ..task.clone()
    };
    match version {
        murmur_a2a::Version::V1_0 if !update.status.state.is_terminal() => {
            StreamEvent::StatusUpdate(update.clone()).to_wire(version)
        }
        murmur_a2a::Version::V1_0 => StreamEvent::Task(without_history()).to_wire(version),
        murmur_a2a::Version::V0_3 => without_history().to_wire(version),
    }
}

/// The text an event carries: an artifact's chunk, a status update's message.
fn event_bytes(event: &StreamEvent) -> usize {
    match event {
        StreamEvent::ArtifactUpdate(update) => parts_bytes(&update.artifact.parts),
        StreamEvent::StatusUpdate(update) => update
            .status
            .message
            .as_ref()
            .map_or(0, |message| parts_bytes(&message.parts)),
        _ => 0,
    }
}

fn parts_bytes(parts: &[Part]) -> usize {
    use murmur_a2a::model::{FileContent, PartContent};
    parts
        .iter()
        .map(|part| match &part.content {
            PartContent::Text(text) => text.len(),
            PartContent::File(FileContent::Bytes(bytes)) => bytes.len(),
            PartContent::File(FileContent::Uri(uri)) => uri.len(),
            // Only what a client can make large: the door's own data parts are bounded.
            PartContent::Data(_) => 0,
        })
        .sum()
}

/// The text an ended task holds, in bytes: its history and artifacts, its status message, its
/// replay log.
fn entry_bytes(entry: &Entry) -> usize {
    text_bytes(&entry.task)
        + entry
            .task
            .status
            .message
            .as_ref()
            .map_or(0, |message| parts_bytes(&message.parts))
        + entry.log_bytes
}

/// The text a task carries in its history and artifacts, in bytes.
fn text_bytes(task: &Task) -> usize {
    task.history
        .iter()
        .map(|m| parts_bytes(&m.parts))
        .chain(task.artifacts.iter().map(|a| parts_bytes(&a.parts)))
        .sum()
}

fn trim_history(task: &mut Task, history_length: Option<u32>) {
    if let Some(length) = history_length {
        let keep = task.history.len().saturating_sub(length as usize);
        task.history.drain(..keep);
    }
}

/// A shared store.
pub type SharedStore = Arc<TaskStore>;

/// What a store holds ([`TaskStore::usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of text the ended tasks kept hold (at most [`FINISHED_BYTES`], or the one task
    /// that ended last).
    pub finished_bytes: usize,
    /// Bytes of messages the tasks that have not ended hold (at most [`UNFINISHED_BYTES`], or
    /// one task's).
    pub unfinished_bytes: usize,
    /// Bytes the kept contexts' conversations take on disk, as last measured.
    pub history_bytes: u64,
    /// Tasks kept, ended or not.
    pub tasks: usize,
    /// Contexts known: with a task, or with a conversation kept.
    pub contexts: usize,
}

/// `text` as a number a client sends back (a page offset, an event number): decimal digits
/// only, no sign, no spaces, no more than a `u64` holds.
pub(crate) fn decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The task offset a `ListTasks` page token stands for.
pub(crate) fn page_offset(token: &str) -> Option<usize> {
    decimal(token).and_then(|offset| usize::try_from(offset).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            origin: "client".into(),
            trust: "external".into(),
            traceparent: None,
            claimed_origin: None,
            claimed_trust: None,
            principal: None,
            accepts: Vec::new(),
        }
    }

    fn add(store: &TaskStore, id: &str) -> Result<StopSignal, NotCreated> {
        store.create(id, "ctx", Message::text("m", Role::User, "hi"), origin())
    }

    #[test]
    fn ended_tasks_past_the_limit_are_forgotten_oldest_first() {
        let store = TaskStore::default();
        for n in 0..FINISHED_KEPT + 5 {
            let id = format!("t{n}");
            add(&store, &id).unwrap();
            store.set_state(&id, TaskState::Completed, None);
        }
        for n in 0..5 {
            assert!(store.get(&format!("t{n}"), None).is_none(), "t{n} kept");
        }
        assert!(store.get("t5", None).is_some());
        let listed = store.list(&ListTasksParams::default(), None);
        assert_eq!(listed.total_size as usize, FINISHED_KEPT);
        assert_eq!(listed.tasks[0].id, format!("t{}", FINISHED_KEPT + 4));
    }

    #[test]
    fn unfinished_tasks_past_the_limit_are_refused_until_one_ends() {
        let store = TaskStore::default();
        for n in 0..UNFINISHED_LIMIT {
            add(&store, &format!("t{n}")).unwrap();
        }
        assert_eq!(add(&store, "over").unwrap_err(), NotCreated::Full);
        store.cancel("t0").unwrap();
        add(&store, "over").unwrap();
    }

    #[test]
    fn a_task_keeps_a_bounded_text_and_says_how_much_it_left_out() {
        let store = TaskStore::default();
        add(&store, "t").unwrap();
        let (_, mut changed) = store.events("t", None).unwrap();
        let chunk = "é".repeat(512 * 1024); // 1 MiB of two-byte characters
        for _ in 0..6 {
            store.artifact_text("t", "response", "response", &chunk, false);
        }
        store.artifact_text("t", "response", "response", "", true);
        let task = store.get("t", None).unwrap();
        let Some(murmur_a2a::model::PartContent::Text(text)) =
            task.artifacts[0].parts.first().map(|p| &p.content)
        else {
            panic!("no text");
        };
        assert!(text.len() < TASK_TEXT_LIMIT + 200, "{}", text.len());
        assert!(
            text.ends_with(&format!(
                "[{} more bytes were streamed; a served task keeps at most {TASK_TEXT_LIMIT} bytes of text, and the session's workdir has it all]",
                6 * chunk.len() - TASK_TEXT_LIMIT
            )),
            "{}",
            &text[text.len() - 200..]
        );
        // Every chunk was still an event; the replay log holds at most its byte limit.
        assert_eq!(*changed.borrow_and_update(), 7);
        let (kept, _) = store.events("t", None).unwrap();
        let bytes: usize = kept.iter().map(|(_, e)| event_bytes(e)).sum();
        assert!(bytes <= EVENT_LOG_BYTES, "{bytes}");
        assert!(kept.len() < 7);
    }

    #[test]
    fn a_list_page_stops_at_its_byte_limit_and_goes_on_from_there() {
        let store = TaskStore::default();
        let big = "x".repeat(3 * 1024 * 1024);
        for n in 0..5 {
            let id = format!("t{n}");
            store
                .create(&id, "ctx", Message::text("m", Role::User, &big), origin())
                .unwrap();
        }
        let first = store.list(&ListTasksParams::default(), None);
        assert_eq!(first.tasks.len(), 2);
        assert_eq!(first.next_page_token, "2");
        let next = store.list(
            &ListTasksParams {
                page_token: Some(first.next_page_token.clone()),
                ..ListTasksParams::default()
            },
            None,
        );
        assert_eq!(next.tasks.len(), 2);
        assert_eq!(next.tasks[0].id, "t2");
    }

    #[test]
    fn a_task_and_its_context_are_their_principals_alone() {
        let store = TaskStore::default();
        let of = |principal: &str| Origin {
            principal: Some(principal.to_string()),
            ..origin()
        };
        let message = || Message::text("m", Role::User, "hi");
        store
            .create("t-ops", "ctx-ops", message(), of("ops"))
            .unwrap();
        store.create("t-ci", "ctx-ci", message(), of("ci")).unwrap();
        assert!(store.visible("t-ops", Some("ops")));
        assert!(!store.visible("t-ops", Some("ci")));
        assert!(
            !store.visible("t-ops", None),
            "an open door's caller is no principal"
        );
        assert!(!store.visible("t-none", Some("ops")));
        let listed = store.list(&ListTasksParams::default(), Some("ci"));
        assert_eq!(listed.total_size, 1);
        assert_eq!(listed.tasks[0].id, "t-ci");
        assert!(store.context_free_for("ctx-ops", Some("ops")));
        assert!(!store.context_free_for("ctx-ops", Some("ci")));
        assert!(store.context_free_for("ctx-new", Some("ci")));
    }

    fn of(principal: &str) -> Origin {
        Origin {
            principal: Some(principal.to_string()),
            ..origin()
        }
    }

    /// `principal`'s task `id` in `context`, run by the session, which saved `history` bytes of
    /// its conversation; the contexts the store then wants dropped.
    fn run(
        store: &TaskStore,
        id: &str,
        context: &str,
        principal: &str,
        history: Option<u64>,
    ) -> Vec<String> {
        store
            .create(
                id,
                context,
                Message::text("m", Role::User, "hi"),
                of(principal),
            )
            .unwrap();
        assert_eq!(store.take(id).as_deref(), Some("hi"));
        store.set_state(id, TaskState::Completed, None);
        store.ran(id, history)
    }

    #[test]
    fn a_context_stays_its_owners_after_its_tasks_are_forgotten() {
        let store = TaskStore::default();
        assert!(run(&store, "t0", "shared", "ops", Some(1_000)).is_empty());
        for n in 1..=FINISHED_KEPT {
            assert!(run(&store, &format!("t{n}"), &format!("c{n}"), "ci", Some(10)).is_empty());
        }
        assert!(store.get("t0", None).is_none(), "the task is forgotten");
        assert!(!store.context_free_for("shared", Some("ci")));
        assert_eq!(
            store
                .create(
                    "joined",
                    "shared",
                    Message::text("m", Role::User, "hi"),
                    of("ci")
                )
                .unwrap_err(),
            NotCreated::OthersContext
        );
        assert!(store.context_free_for("shared", Some("ops")));
        // Its conversation deleted, the id is a fresh context, anyone's.
        store.history_dropped("shared");
        assert!(store.context_free_for("shared", Some("ci")));
        store
            .create(
                "fresh",
                "shared",
                Message::text("m", Role::User, "hi"),
                of("ci"),
            )
            .unwrap();
        assert!(!store.context_free_for("shared", Some("ops")));
    }

    #[test]
    fn a_context_nothing_was_saved_in_is_forgotten_with_its_last_task() {
        let store = TaskStore::default();
        store
            .create(
                "t",
                "quiet",
                Message::text("m", Role::User, "hi"),
                of("ops"),
            )
            .unwrap();
        assert!(!store.context_free_for("quiet", Some("ci")));
        // Canceled before the session took it: it saved nothing.
        store.cancel("t").unwrap();
        assert!(store.take("t").is_none());
        assert!(store.context_free_for("quiet", Some("ci")));
        assert_eq!(store.usage().contexts, 0);
    }

    #[test]
    fn a_task_canceled_while_it_runs_holds_its_context_until_the_session_is_done() {
        let store = TaskStore::default();
        store
            .create("t", "busy", Message::text("m", Role::User, "hi"), of("ops"))
            .unwrap();
        store.take("t").unwrap();
        store.cancel("t").unwrap();
        // The session may still save its conversation: the context is not free.
        assert!(!store.context_free_for("busy", Some("ci")));
        store.ran("t", Some(50));
        assert!(!store.context_free_for("busy", Some("ci")));
        assert_eq!(store.usage().history_bytes, 50);
    }

    #[test]
    fn two_principals_racing_for_a_new_context_leave_it_to_the_first() {
        let store = TaskStore::default();
        store
            .create("a", "new", Message::text("m", Role::User, "hi"), of("ops"))
            .unwrap();
        assert_eq!(
            store
                .create("b", "new", Message::text("m", Role::User, "hi"), of("ci"))
                .unwrap_err(),
            NotCreated::OthersContext
        );
        assert!(store.get("b", None).is_none());
    }

    #[test]
    fn a_capsules_own_disk_budget_replaces_the_default() {
        let store = TaskStore::default();
        store.bound_conversations(1000);
        assert!(run(&store, "t0", "c0", "ops", Some(400)).is_empty());
        assert!(run(&store, "t1", "c1", "ops", Some(400)).is_empty());
        // 1,200 bytes: past the capsule's 1,000 (far within the default), the oldest goes.
        assert_eq!(
            run(&store, "t2", "c2", "ops", Some(400)),
            vec!["c0".to_string()]
        );
    }

    #[test]
    fn conversations_past_the_disk_budget_go_oldest_first_and_the_last_stays() {
        let store = TaskStore::default();
        let quarter = CONVERSATIONS_MAX_BYTES / 4;
        for n in 0..4 {
            assert!(
                run(
                    &store,
                    &format!("t{n}"),
                    &format!("c{n}"),
                    "ops",
                    Some(quarter)
                )
                .is_empty()
            );
        }
        assert_eq!(store.usage().history_bytes, CONVERSATIONS_MAX_BYTES);
        // One byte over: the context idle longest goes.
        assert_eq!(
            run(&store, "t4", "c4", "ops", Some(1)),
            vec!["c0".to_string()]
        );
        store.history_dropped("c0");
        assert!(store.context_free_for("c0", Some("ci")));
        assert_eq!(store.usage().history_bytes, 3 * quarter + 1);
        // A conversation bigger than the budget alone: every other goes, it stays.
        let dropped = run(&store, "t5", "c5", "ops", Some(CONVERSATIONS_MAX_BYTES + 1));
        assert_eq!(dropped, ["c1", "c2", "c3", "c4"].map(String::from).to_vec());
        for context in &dropped {
            store.history_dropped(context);
        }
        assert_eq!(store.usage().history_bytes, CONVERSATIONS_MAX_BYTES + 1);
        assert!(run(&store, "t6", "c5", "ops", Some(CONVERSATIONS_MAX_BYTES + 2)).is_empty());
        assert!(!store.context_free_for("c5", Some("ci")));
    }

    #[test]
    fn a_context_a_task_waits_in_keeps_its_owner_when_its_conversation_goes() {
        let store = TaskStore::default();
        run(&store, "t0", "c0", "ops", Some(10));
        store
            .create(
                "t1",
                "c0",
                Message::text("m", Role::User, "again"),
                of("ops"),
            )
            .unwrap();
        store.history_dropped("c0");
        assert!(!store.context_free_for("c0", Some("ci")));
    }

    #[test]
    fn the_ended_tasks_kept_hold_at_most_their_byte_budget_oldest_forgotten_first() {
        let store = TaskStore::default();
        let input = "x".repeat(4 * 1024 * 1024);
        let tasks = 2 * FINISHED_BYTES / input.len();
        for n in 0..tasks {
            let id = format!("t{n}");
            store
                .create(
                    &id,
                    &format!("c{n}"),
                    Message::text("m", Role::User, &input),
                    origin(),
                )
                .unwrap();
            assert_eq!(store.usage().unfinished_bytes, input.len());
            assert_eq!(store.take(&id).map(|text| text.len()), Some(input.len()));
            let answer = Message::text("a", Role::Agent, "done");
            store.set_state(&id, TaskState::Completed, Some(answer));
            store.ran(&id, None);
            let usage = store.usage();
            assert!(usage.finished_bytes <= FINISHED_BYTES, "{usage:?}");
            assert_eq!(usage.unfinished_bytes, 0);
        }
        let usage = store.usage();
        // Each holds its input once, and its answer in its history, status and replay log.
        let per_task = input.len() + 3 * "done".len();
        assert_eq!(usage.finished_bytes, usage.tasks * per_task, "{usage:?}");
        assert_eq!(usage.tasks, FINISHED_BYTES / per_task);
        assert!(store.get("t0", None).is_none());
        assert!(store.get(&format!("t{}", tasks - 1), None).is_some());
        assert_eq!(usage.contexts, 0, "nothing saved, nothing remembered");
    }

    #[test]
    fn messages_of_tasks_not_ended_past_their_budget_are_refused_until_one_ends() {
        let store = TaskStore::default();
        let input = "y".repeat(UNFINISHED_BYTES / 4);
        let make =
            |id: &str| store.create(id, id, Message::text("m", Role::User, &input), origin());
        for n in 0..4 {
            make(&format!("t{n}")).unwrap();
        }
        assert_eq!(make("over").unwrap_err(), NotCreated::Full);
        store.cancel("t0").unwrap();
        make("over").unwrap();
        // One message bigger than the budget is still taken when nothing waits.
        let store = TaskStore::default();
        let huge = "z".repeat(UNFINISHED_BYTES + 1);
        store
            .create(
                "big",
                "big",
                Message::text("m", Role::User, &huge),
                origin(),
            )
            .unwrap();
    }
}
