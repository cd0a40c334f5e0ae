//! The door's HTTP side: the agent card, JSON-RPC at `/`, SSE streams, and the control routes
//! of [`crate::control`].

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use murmur_a2a::rpc::{self, Call};
use murmur_a2a::{
    AgentCard, Message, PartContent, RpcError, SendMessageParams, SendMessageResult, StreamEvent,
    TaskState, Version, Wire,
};
use murmur_manifest::capsule::TaskAcceptance;
use serde_json::Value;

use crate::Store;
use crate::tasks::{Origin, Refused, decimal, page_offset};
use murmur_runtime::session::workdir::{SAFE_ID_RULE, is_safe_id};
use murmur_runtime::session::{Received, StopSignal, new_id};

/// A task accepted by the door, waiting for the session.
pub(crate) struct Queued {
    pub task_id: String,
    pub context_id: String,
    pub text: String,
    pub received: Received,
    pub stop: StopSignal,
}

/// What the door's handlers share.
pub(crate) struct Door {
    pub store: Store,
    /// The launch's settings and secrets, served at `/control` with the token they want.
    pub control: Arc<crate::control::ControlPlane>,
    pub queue: tokio::sync::mpsc::UnboundedSender<Queued>,
    pub acceptance: TaskAcceptance,
    /// Under `single`: whether the one task was taken.
    pub taken: AtomicBool,
    pub card: AgentCard,
    pub body_limit: usize,
}

pub(crate) fn router(door: Arc<Door>) -> Router {
    Router::new()
        .route("/.well-known/agent-card.json", get(card))
        .route("/.well-known/agent.json", get(card_v03))
        .route("/", post(rpc_endpoint))
        .merge(crate::control::routes(door.control.clone()))
        .with_state(door)
}

fn json(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

async fn card(State(door): State<Arc<Door>>, headers: HeaderMap) -> Response {
    let wants_03 = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().starts_with("0.3"));
    let version = if wants_03 {
        Version::V0_3
    } else {
        Version::V1_0
    };
    json(StatusCode::OK, &door.card.to_wire(version))
}

async fn card_v03(State(door): State<Arc<Door>>) -> Response {
    json(StatusCode::OK, &door.card.to_wire(Version::V0_3))
}

async fn rpc_endpoint(State(door): State<Arc<Door>>, headers: HeaderMap, body: Body) -> Response {
    let bytes = match axum::body::to_bytes(body, door.body_limit).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let error = RpcError::invalid_request(format!(
                "the request body is over the door's limit of {} bytes",
                door.body_limit
            ));
            return json(
                StatusCode::PAYLOAD_TOO_LARGE,
                &rpc::error(&Value::Null, &error),
            );
        }
    };
    let request = match rpc::parse_request(&bytes) {
        Ok(request) => request,
        Err(rejected) => return json(StatusCode::OK, &rejected.to_response()),
    };
    let id = request.id.clone();
    let version = request.version;
    let method_name = request.method.name(version).unwrap_or_default().to_string();
    let call = match request
        .call()
        .and_then(|call| check_client_ids(&call).map(|()| call))
    {
        Ok(call) => call,
        Err(error) => return json(StatusCode::OK, &rpc::error(&id, &error)),
    };
    if request.is_notification {
        return StatusCode::NO_CONTENT.into_response();
    }
    let answer = |result: Result<Value, RpcError>| {
        json(
            StatusCode::OK,
            &match result {
                Ok(value) => value,
                Err(error) => rpc::error(&id, &error),
            },
        )
    };
    match call {
        Call::SendMessage(params) => {
            let history_length = params.history_length();
            let blocking = params.blocking();
            let task_id = match door.accept(params, &headers, &method_name) {
                Ok(task_id) => task_id,
                Err(error) => return answer(Err(error)),
            };
            if blocking {
                wait_settled(&door.store, &task_id).await;
            }
            answer(
                door.store
                    .get(&task_id, history_length)
                    .map(|task| rpc::success(&id, version, &SendMessageResult::Task(task)))
                    .ok_or_else(|| RpcError::task_not_found(&task_id)),
            )
        }
        Call::SendStreamingMessage(params) => match door.accept(params, &headers, &method_name) {
            Ok(task_id) => sse(stream(door.store.clone(), task_id, id, version, None)),
            Err(error) => answer(Err(error)),
        },
        Call::GetTask(params) => answer(
            door.store
                .get(&params.id, params.history_length)
                .map(|task| rpc::success(&id, version, &task))
                .ok_or_else(|| RpcError::task_not_found(&params.id)),
        ),
        Call::CancelTask(params) => answer(match door.store.cancel(&params.id) {
            Ok(task) => Ok(rpc::success(&id, version, &task)),
            Err(Refused::NotFound) => Err(RpcError::task_not_found(&params.id)),
            Err(Refused::NotCancelable(state) | Refused::NotAccepting(state)) => {
                Err(RpcError::task_not_cancelable(&params.id, state))
            }
        }),
        Call::SubscribeToTask(params) => {
            let Some(task) = door.store.get(&params.id, Some(0)) else {
                return answer(Err(RpcError::task_not_found(&params.id)));
            };
            let after = match last_event_id(&headers, door.store.last_event(&params.id)) {
                Ok(after) => after,
                Err(error) => return answer(Err(error)),
            };
            if task.status.state.is_terminal() {
                return answer(Err(RpcError::unsupported_operation(format!(
                    "task {} has ended ({:?}); there is nothing to subscribe to",
                    params.id, task.status.state
                ))));
            }
            sse(stream(door.store.clone(), params.id, id, version, after))
        }
        Call::ListTasks(params) => {
            answer(Ok(rpc::success(&id, version, &door.store.list(&params))))
        }
        Call::GetExtendedAgentCard => answer(Err(RpcError::extended_agent_card_not_configured())),
        Call::PushNotificationConfig(_) => answer(Err(RpcError::push_notification_not_supported())),
    }
}

/// Checks every id the client chose in `call` before anything uses it: a message's
/// `messageId`, `contextId`, `taskId` and `referenceTaskIds`, a task `id`, the `contextId`
/// filter and `pageToken` of `ListTasks`. An id is [`is_safe_id`]; a page token is the decimal
/// offset an earlier page gave. Anything else is -32602 naming the field, and nothing is done.
fn check_client_ids(call: &Call) -> Result<(), RpcError> {
    let id = |field: &str, value: &str| {
        if is_safe_id(value) {
            Ok(())
        } else {
            Err(RpcError::invalid_params(field, SAFE_ID_RULE))
        }
    };
    match call {
        Call::SendMessage(params) | Call::SendStreamingMessage(params) => {
            let message = &params.message;
            id("message.messageId", &message.message_id)?;
            if let Some(context_id) = &message.context_id {
                id("message.contextId", context_id)?;
            }
            if let Some(task_id) = &message.task_id {
                id("message.taskId", task_id)?;
            }
            for (n, task_id) in message.reference_task_ids.iter().enumerate() {
                id(&format!("message.referenceTaskIds[{n}]"), task_id)?;
            }
        }
        Call::GetTask(params) => id("id", &params.id)?,
        Call::CancelTask(params) => id("id", &params.id)?,
        Call::SubscribeToTask(params) => id("id", &params.id)?,
        Call::ListTasks(params) => {
            if let Some(context_id) = &params.context_id {
                id("contextId", context_id)?;
            }
            if let Some(token) = params.page_token.as_deref().filter(|t| !t.is_empty())
                && page_offset(token).is_none()
            {
                return Err(RpcError::invalid_params(
                    "pageToken",
                    "a page token is the `nextPageToken` of an earlier page",
                ));
            }
        }
        Call::GetExtendedAgentCard | Call::PushNotificationConfig(_) => {}
    }
    Ok(())
}

/// The event a resubscribing client saw last (`Last-Event-ID`), if it sent one: the decimal
/// number of an event the task has had (`latest` is the task's newest). Anything else is
/// -32602, so a client cannot park a stream on an event that will never come.
fn last_event_id(headers: &HeaderMap, latest: Option<u64>) -> Result<Option<u64>, RpcError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let bad = || {
        RpcError::invalid_params(
            "Last-Event-ID",
            "the header holds the number of an event this task's stream sent",
        )
    };
    let text = value.to_str().map_err(|_| bad())?.trim();
    let number = decimal(text).ok_or_else(bad)?;
    if number > latest.unwrap_or(0) {
        return Err(bad());
    }
    Ok(Some(number))
}

impl Door {
    /// Takes a message: the answer to a task waiting for input, or a new task (as
    /// `task_acceptance` allows). Returns the task's id.
    fn accept(
        &self,
        params: SendMessageParams,
        headers: &HeaderMap,
        method: &str,
    ) -> Result<String, RpcError> {
        let message = params.message;
        if let Some(task_id) = message.task_id.clone() {
            return match self.store.deliver_input(&task_id, message) {
                Ok(()) => Ok(task_id),
                Err(Refused::NotFound) => Err(RpcError::task_not_found(&task_id)),
                Err(Refused::NotAccepting(state) | Refused::NotCancelable(state)) => {
                    Err(RpcError::unsupported_operation(format!(
                        "task {task_id} is {}; it takes a message only while it waits for input",
                        state.as_str()
                    )))
                }
            };
        }
        match self.acceptance {
            TaskAcceptance::None => {
                return Err(RpcError::unsupported_operation(
                    "this capsule accepts no tasks (lifecycle.task_acceptance: none)",
                ));
            }
            TaskAcceptance::Single if self.taken.swap(true, Ordering::SeqCst) => {
                return Err(RpcError::unsupported_operation(
                    "this capsule accepts one task and has taken it (lifecycle.task_acceptance: single)",
                ));
            }
            _ => {}
        }
        let text = text_of(&message)?;
        let context_id = message
            .context_id
            .clone()
            .unwrap_or_else(|| new_id("ctx_", 24));
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        // The door authenticates no one yet, so no client is a peer: trust headers are only a
        // claim, recorded beside what the task was granted.
        let claim = |name: &str| header(name).map(|v| bounded_claim(&v));
        let origin = Origin {
            origin: "client".to_string(),
            trust: "external".to_string(),
            traceparent: header("traceparent"),
            claimed_origin: claim("x-murmur-task-origin"),
            claimed_trust: claim("x-murmur-task-trust"),
        };
        let task_id = new_id("tsk_", 24);
        let (_, stop) = self
            .store
            .create(&task_id, &context_id, message, origin.clone())
            .map_err(|_| full())?;
        let queued = Queued {
            task_id: task_id.clone(),
            context_id,
            text,
            received: Received {
                method: method.to_string(),
                origin: origin.origin,
                trust: origin.trust,
                traceparent: origin.traceparent,
                claimed_origin: origin.claimed_origin,
                claimed_trust: origin.claimed_trust,
            },
            stop,
        };
        if self.queue.send(queued).is_err() {
            self.store.set_state(&task_id, TaskState::Rejected, None);
            return Err(RpcError::unsupported_operation(
                "this capsule is shutting down and takes no more tasks",
            ));
        }
        Ok(task_id)
    }
}

/// The answer to a new task while the store holds its most unfinished tasks.
fn full() -> RpcError {
    RpcError::unsupported_operation(format!(
        "this capsule has {} tasks that have not ended; send again when some have",
        crate::tasks::UNFINISHED_LIMIT
    ))
}

/// A header value a client claimed, as the trace keeps it: at most 128 characters.
fn bounded_claim(value: &str) -> String {
    value.chars().take(128).collect()
}

/// The text a message carries: what the agent is asked. Only text is understood.
fn text_of(message: &Message) -> Result<String, RpcError> {
    let text = message.joined_text();
    if !text.trim().is_empty() {
        return Ok(text);
    }
    let media = message
        .parts
        .iter()
        .find_map(|part| match &part.content {
            PartContent::Text(_) => None,
            PartContent::File(_) => Some(part.media_type.clone().unwrap_or("file".to_string())),
            PartContent::Data(_) => Some("application/json".to_string()),
        })
        .unwrap_or_else(|| "empty text".to_string());
    Err(RpcError::content_type_not_supported(&media))
}

/// Waits until the task ends or waits for input (after whatever state it is in now).
async fn wait_settled(store: &Store, task_id: &str) {
    let Some((_, mut changed)) = store.events(task_id, None) else {
        return;
    };
    loop {
        let state = store.state(task_id);
        match state {
            None => return,
            Some(state) if state.is_terminal() || state.is_interrupted() => return,
            Some(_) => {}
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

fn sse(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// A task's stream: the task as it stands (unless resuming after `after`), then each event,
/// until one ends the stream.
fn stream(store: Store, task_id: String, id: Value, version: Version, after: Option<u64>) -> Body {
    struct Cursor {
        store: Store,
        task_id: String,
        id: Value,
        version: Version,
        /// The last event number sent.
        sent: u64,
        snapshot_due: bool,
        done: bool,
        pending: std::collections::VecDeque<(u64, StreamEvent)>,
    }
    let start = after.unwrap_or_else(|| store.last_event(&task_id).unwrap_or(0));
    let cursor = Cursor {
        store,
        task_id,
        id,
        version,
        sent: start,
        snapshot_due: after.is_none(),
        done: false,
        pending: Default::default(),
    };
    let frames = futures_util::stream::unfold(cursor, |mut cursor| async move {
        if cursor.done {
            return None;
        }
        if cursor.snapshot_due {
            cursor.snapshot_due = false;
            let task = cursor.store.get(&cursor.task_id, None)?;
            let event = StreamEvent::Task(task);
            cursor.done = event.ends_stream();
            let frame = rpc::sse_event(
                &cursor.id,
                cursor.version,
                &event,
                Some(&cursor.sent.to_string()),
            );
            return Some((Ok::<Bytes, Infallible>(Bytes::from(frame)), cursor));
        }
        loop {
            if let Some((number, event)) = cursor.pending.pop_front() {
                cursor.sent = number;
                cursor.done = event.ends_stream();
                let frame = rpc::sse_event(
                    &cursor.id,
                    cursor.version,
                    &event,
                    Some(&number.to_string()),
                );
                return Some((Ok(Bytes::from(frame)), cursor));
            }
            // The log is read and the receiver subscribed under one lock: no event slips between.
            let (events, mut changed) = cursor.store.events(&cursor.task_id, Some(cursor.sent))?;
            if !events.is_empty() {
                cursor.pending.extend(events);
                continue;
            }
            if changed.changed().await.is_err() {
                return None;
            }
        }
    });
    Body::from_stream(frames)
}
