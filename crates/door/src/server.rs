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
use crate::tasks::{NotCreated, Origin, Refused, decimal, page_offset};
use murmur_runtime::session::workdir::{SAFE_ID_RULE, is_safe_id};
use murmur_runtime::session::{Received, StopSignal, new_id};

/// A task accepted by the door, waiting for the session. Its text stays in the store, read
/// when the session takes the task ([`crate::TaskStore::take`]): the door holds it once.
pub(crate) struct Queued {
    pub task_id: String,
    pub context_id: String,
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
    /// The A2A versions served (`door.a2a_versions`), newest first: a call or a card asked
    /// for in another is refused.
    pub versions: Vec<Version>,
    pub body_limit: usize,
    /// Who may call `/`; open when it has no principals.
    pub auth: Arc<crate::auth::DoorAuth>,
    /// `door.input_modes`: the media types a message's parts may carry.
    pub input_modes: Vec<String>,
    /// Where a webhook may point.
    pub webhooks: crate::push::WebhookPolicy,
}

/// Who is calling: the principal whose credential the request presented, with what its tasks
/// are granted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// `None` on a door that asks for no credential.
    pub principal: Option<String>,
    /// Whether the principal is another capsule (`trust: peer`), whose claimed trust its tasks
    /// inherit.
    pub peer: bool,
}

impl Caller {
    fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
}

pub(crate) fn router(door: Arc<Door>) -> Router {
    Router::new()
        .route("/.well-known/agent-card.json", get(card))
        .route("/.well-known/agent.json", get(card_v03))
        .route("/", post(rpc_endpoint))
        .route("/files/{task}/{index}", get(task_file))
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

/// The version a request's `A2A-Version` header names: `Ok(None)` without one (or empty),
/// `Err` with the value when it names a version the door does not speak. `1.0`, `0.3` and
/// their patch forms (`1.0.1`, `0.3.0`) are spoken.
fn requested_version(headers: &HeaderMap) -> Result<Option<Version>, String> {
    let Some(value) = headers.get("a2a-version") else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
    if text.is_empty() {
        return Ok(None);
    }
    let mut numbers = text.split('.');
    let major_minor = (numbers.next(), numbers.next());
    let patch_ok = numbers.all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    match major_minor {
        (Some("1"), Some("0")) if patch_ok => Ok(Some(Version::V1_0)),
        (Some("0"), Some("3")) if patch_ok => Ok(Some(Version::V0_3)),
        _ => Err(text.chars().take(64).collect()),
    }
}

/// The card. A door serving one version shows that version's card, whatever is asked (it
/// has no other). A door serving both shows the one the request's `A2A-Version` names, else
/// (none, or one the door does not speak) the discovery card carrying both versions' fields.
async fn card(State(door): State<Arc<Door>>, headers: HeaderMap) -> Response {
    if let [only] = door.versions.as_slice() {
        return json(StatusCode::OK, &door.card.to_wire(*only));
    }
    match requested_version(&headers) {
        Ok(Some(version)) => json(StatusCode::OK, &door.card.to_wire(version)),
        Ok(None) | Err(_) => json(StatusCode::OK, &door.card.discovery_json()),
    }
}

/// The A2A 0.3 card's own address: 404 on a door that does not serve 0.3.
async fn card_v03(State(door): State<Arc<Door>>) -> Response {
    if !door.versions.contains(&Version::V0_3) {
        return json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": "this capsule does not serve A2A 0.3 (door.a2a_versions); its card is at /.well-known/agent-card.json"}),
        );
    }
    json(StatusCode::OK, &door.card.to_wire(Version::V0_3))
}

/// A 401: the request presented none of the door's credentials. Nothing of the request was
/// read but its headers.
fn unauthenticated(door: &Door) -> Response {
    let error = RpcError::unauthenticated(&door.auth.challenge());
    let mut response = json(StatusCode::UNAUTHORIZED, &rpc::error(&Value::Null, &error));
    if let Ok(challenge) = HeaderValue::from_str(&door.auth.challenge()) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}

impl Door {
    /// The webhook a send's configuration registers, checked ([`crate::push`]): -32602 naming
    /// its `url` when the door will not post there.
    async fn send_webhook(
        &self,
        params: &SendMessageParams,
        version: Version,
    ) -> Result<Option<crate::push::Webhook>, RpcError> {
        let Some(config) = params
            .configuration
            .as_ref()
            .and_then(|config| config.push_notification.clone())
        else {
            return Ok(None);
        };
        let field = match version {
            Version::V1_0 => "configuration.taskPushNotificationConfig.url",
            Version::V0_3 => "configuration.pushNotificationConfig.url",
        };
        if let Some(config_id) = &config.id
            && !is_safe_id(config_id)
        {
            return Err(RpcError::invalid_params(
                field.replace("url", "id"),
                SAFE_ID_RULE,
            ));
        }
        self.webhooks
            .check(&config.url)
            .await
            .map_err(|why| RpcError::invalid_params(field, why))?;
        Ok(Some(crate::push::Webhook { config, version }))
    }

    /// Who `headers` say is calling; `None` when the door asks for a credential and they
    /// present none of its principals'.
    fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        if !self.auth.required() {
            return Some(Caller::default());
        }
        let principal = self.auth.authenticate(headers)?;
        Some(Caller {
            principal: Some(principal.name.clone()),
            peer: principal.trust == murmur_manifest::door::PrincipalTrust::Peer,
        })
    }
}

/// `GET /files/<task>/<n>`: file `n` a completed task gives back by URL (see
/// [`crate::outputs`]), to the principal the task belongs to; anyone else, and any task or
/// index there is not, gets 404.
async fn task_file(
    State(door): State<Arc<Door>>,
    axum::extract::Path((task, index)): axum::extract::Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let Some(caller) = door.caller(&headers) else {
        return unauthenticated(&door);
    };
    let not_found = || {
        json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": "no such file of a task of yours"}),
        )
    };
    let Some(index) = decimal(&index).and_then(|n| usize::try_from(n).ok()) else {
        return not_found();
    };
    if !is_safe_id(&task) {
        return not_found();
    }
    let Some(file) = door.store.served_file(&task, caller.principal(), index) else {
        return not_found();
    };
    let name = file.name();
    let read = tokio::task::spawn_blocking(move || file.read(crate::outputs::SERVED_LIMIT)).await;
    let Ok(Ok(bytes)) = read else {
        return json(
            StatusCode::GONE,
            &serde_json::json!({"error": "the file can no longer be read from the session's workdir"}),
        );
    };
    let media_type = crate::outputs::media_type_of(&name);
    // The name as a quoted string of safe characters only.
    let shown: String = name
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{shown}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

async fn rpc_endpoint(State(door): State<Arc<Door>>, headers: HeaderMap, body: Body) -> Response {
    let Some(caller) = door.caller(&headers) else {
        return unauthenticated(&door);
    };
    let bytes = match crate::body::read_body(body, door.body_limit).await {
        Some(bytes) => bytes,
        None => {
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
    if let Err(requested) = requested_version(&headers) {
        return json(
            StatusCode::OK,
            &rpc::error(&id, &RpcError::version_not_supported(&requested)),
        );
    }
    let version = request.version;
    // A version the manifest does not list is not served: neither a method of it nor a call
    // whose `A2A-Version` names it.
    let asked = match requested_version(&headers) {
        Ok(Some(header)) if !door.versions.contains(&header) => Some(header),
        _ => (!door.versions.contains(&version)).then_some(version),
    };
    if let Some(asked) = asked {
        return json(
            StatusCode::OK,
            &rpc::error(
                &id,
                &RpcError::version_not_supported_by(
                    asked.as_str(),
                    &door.versions.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
                ),
            ),
        );
    }
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
            let webhook = match door.send_webhook(&params, version).await {
                Ok(webhook) => webhook,
                Err(error) => return answer(Err(error)),
            };
            let task_id = match door.accept(params, &headers, &method_name, &caller, webhook) {
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
        Call::SendStreamingMessage(params) => {
            let webhook = match door.send_webhook(&params, version).await {
                Ok(webhook) => webhook,
                Err(error) => return answer(Err(error)),
            };
            match door.accept(params, &headers, &method_name, &caller, webhook) {
                Ok(task_id) => sse(stream(door.store.clone(), task_id, id, version, None)),
                Err(error) => answer(Err(error)),
            }
        }
        Call::GetTask(params) if !door.store.visible(&params.id, caller.principal()) => {
            answer(Err(RpcError::task_not_found(&params.id)))
        }
        Call::CancelTask(params) if !door.store.visible(&params.id, caller.principal()) => {
            answer(Err(RpcError::task_not_found(&params.id)))
        }
        Call::SubscribeToTask(params) if !door.store.visible(&params.id, caller.principal()) => {
            answer(Err(RpcError::task_not_found(&params.id)))
        }
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
        Call::ListTasks(params) => answer(Ok(rpc::success(
            &id,
            version,
            &door.store.list(&params, caller.principal()),
        ))),
        Call::GetExtendedAgentCard => answer(Err(RpcError::extended_agent_card_not_configured())),
        Call::CreatePushConfig(params) => {
            if !door.store.visible(&params.task_id, caller.principal()) {
                return answer(Err(RpcError::task_not_found(&params.task_id)));
            }
            let url_field = match version {
                Version::V1_0 => "url",
                Version::V0_3 => "pushNotificationConfig.url",
            };
            if let Err(why) = door.webhooks.check(&params.config.url).await {
                return answer(Err(RpcError::invalid_params(url_field, why)));
            }
            let webhook = crate::push::Webhook {
                config: params.config,
                version,
            };
            answer(match door.store.add_webhook(&params.task_id, webhook) {
                Ok(config) => Ok(rpc::success(
                    &id,
                    version,
                    &murmur_a2a::TaskPushNotificationConfig {
                        task_id: params.task_id,
                        config,
                    },
                )),
                Err(crate::tasks::WebhookRefused::NotFound) => {
                    Err(RpcError::task_not_found(&params.task_id))
                }
                Err(crate::tasks::WebhookRefused::Full) => {
                    Err(RpcError::unsupported_operation(format!(
                        "task {} has {} webhooks, the most a task may have; delete one first",
                        params.task_id,
                        crate::push::CONFIGS_PER_TASK
                    )))
                }
            })
        }
        Call::GetPushConfig(params)
        | Call::ListPushConfigs(params)
        | Call::DeletePushConfig(params)
            if !door.store.visible(&params.task_id, caller.principal()) =>
        {
            answer(Err(RpcError::task_not_found(&params.task_id)))
        }
        Call::GetPushConfig(params) => {
            let hooks = door.store.webhooks(&params.task_id).unwrap_or_default();
            let found = hooks.into_iter().find(|hook| {
                params
                    .config_id
                    .as_ref()
                    .is_none_or(|wanted| hook.config.id.as_ref() == Some(wanted))
            });
            answer(
                found
                    .map(|hook| {
                        rpc::success(
                            &id,
                            version,
                            &murmur_a2a::TaskPushNotificationConfig {
                                task_id: params.task_id.clone(),
                                config: hook.config,
                            },
                        )
                    })
                    .ok_or_else(|| {
                        RpcError::task_not_found(&format!(
                            "{} (push notification config {})",
                            params.task_id,
                            params.config_id.as_deref().unwrap_or("any")
                        ))
                    }),
            )
        }
        Call::ListPushConfigs(params) => {
            let configs = door
                .store
                .webhooks(&params.task_id)
                .unwrap_or_default()
                .into_iter()
                .map(|hook| murmur_a2a::TaskPushNotificationConfig {
                    task_id: params.task_id.clone(),
                    config: hook.config,
                })
                .collect();
            answer(Ok(rpc::success(
                &id,
                version,
                &murmur_a2a::PushConfigList { configs },
            )))
        }
        Call::DeletePushConfig(params) => {
            let Some(config_id) = &params.config_id else {
                let field = match version {
                    Version::V1_0 => "id",
                    Version::V0_3 => "pushNotificationConfigId",
                };
                return answer(Err(RpcError::invalid_params(
                    field,
                    "the id of the config to delete is required",
                )));
            };
            // Deleting what is not there is no error: deletion is idempotent.
            door.store.remove_webhook(&params.task_id, config_id);
            let empty = match version {
                Version::V1_0 => serde_json::json!({}),
                Version::V0_3 => Value::Null,
            };
            answer(Ok(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": empty}),
            ))
        }
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
        Call::CreatePushConfig(params) => {
            id("taskId", &params.task_id)?;
            if let Some(config_id) = &params.config.id {
                id("id", config_id)?;
            }
        }
        Call::GetPushConfig(params)
        | Call::ListPushConfigs(params)
        | Call::DeletePushConfig(params) => {
            id("taskId", &params.task_id)?;
            if let Some(config_id) = &params.config_id {
                id("id", config_id)?;
            }
        }
        Call::GetExtendedAgentCard => {}
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
        caller: &Caller,
        webhook: Option<crate::push::Webhook>,
    ) -> Result<String, RpcError> {
        check_content_types(&params, &self.input_modes)?;
        let message = params.message;
        if let Some(task_id) = message.task_id.clone() {
            if !self.store.visible(&task_id, caller.principal()) {
                return Err(RpcError::task_not_found(&task_id));
            }
            // A reply may register a webhook for the rest of its task.
            if let Some(webhook) = webhook {
                let _ = self.store.add_webhook(&task_id, webhook);
            }
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
        check_has_text(&message)?;
        if let Some(context_id) = &message.context_id
            && !self.store.context_free_for(context_id, caller.principal())
        {
            return Err(others_context());
        }
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
        // Only a principal of `trust: peer` is another capsule, whose tasks inherit the trust
        // class it claims for them (`operator` or `external`); from anyone else the trust
        // headers are a claim, recorded beside what the task was granted.
        let claim = |name: &str| header(name).map(|v| bounded_claim(&v));
        let claimed_trust = claim("x-murmur-task-trust");
        let inherited = claimed_trust
            .as_deref()
            .filter(|trust| caller.peer && ["operator", "external"].contains(trust));
        let origin = Origin {
            origin: if caller.peer { "peer" } else { "client" }.to_string(),
            trust: inherited.unwrap_or("external").to_string(),
            traceparent: header("traceparent"),
            claimed_origin: claim("x-murmur-task-origin").filter(|_| !caller.peer),
            claimed_trust: claimed_trust.clone().filter(|_| inherited.is_none()),
            principal: caller.principal.clone(),
            accepts: params
                .configuration
                .as_ref()
                .map(|config| config.accepted_output_modes.clone())
                .unwrap_or_default(),
        };
        let task_id = new_id("tsk_", 24);
        // The context is checked again as the task is made: of two principals racing to open
        // one, the second is refused.
        let stop = self
            .store
            .create(&task_id, &context_id, message, origin.clone())
            .map_err(|refused| match refused {
                NotCreated::Full => full(),
                NotCreated::QueueFull(depth) => queue_full(depth),
                NotCreated::OthersContext => others_context(),
            })?;
        // Before the session can take the task: no status change goes unposted.
        if let Some(webhook) = webhook {
            let _ = self.store.add_webhook(&task_id, webhook);
        }
        let queued = Queued {
            task_id: task_id.clone(),
            context_id,
            received: Received {
                method: method.to_string(),
                origin: origin.origin,
                trust: origin.trust,
                traceparent: origin.traceparent,
                claimed_origin: origin.claimed_origin,
                claimed_trust: origin.claimed_trust,
                principal: origin.principal,
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

/// The answer to a new task while the store holds its most unfinished tasks: the capsule
/// unavailable for now, as a full queue is ([`queue_full`]), so the same -32603 a client may
/// send again on.
fn full() -> RpcError {
    RpcError::internal(format!(
        "this capsule holds its most: {} tasks that have not ended, or {} MiB of their messages; \
         send again when some have",
        crate::tasks::UNFINISHED_LIMIT,
        crate::tasks::UNFINISHED_BYTES >> 20
    ))
}

/// The answer to a new task while `depth` tasks wait already (`lifecycle.queue_depth`). A
/// full queue is the capsule unavailable for now, not an operation it does not support: A2A
/// names no error of its own for it, and its error handling (§3.3.2, system errors:
/// temporary unavailability, a rate limit exceeded) maps such a refusal to JSON-RPC's
/// -32603 Internal error. The message says it is the queue, and when to send again.
fn queue_full(depth: usize) -> RpcError {
    RpcError::new(
        murmur_a2a::error::codes::INTERNAL_ERROR,
        format!(
            "Internal error: the capsule's queue is full: {depth} tasks wait for it already \
             (lifecycle.queue_depth: {depth}); send again once one has started"
        ),
    )
}

/// The answer to a message in a context of another principal's (whether or not its tasks are
/// still kept: a context is its owner's for as long as its conversation is).
fn others_context() -> RpcError {
    RpcError::invalid_params(
        "message.contextId",
        "this context is another client's: continue a context of your own, or send none",
    )
}

/// A header value a client claimed, as the trace keeps it: at most 128 characters.
fn bounded_claim(value: &str) -> String {
    value.chars().take(128).collect()
}

/// The media type `media_type` names, without parameters, in lower case.
fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Refuses (-32005) a message with a part the capsule does not take (a text part's media type
/// not in `input_modes`, where no media type is `text/plain`; any file or data part: the door
/// hands the agent text), or whose `acceptedOutputModes` leave out `text/plain`, the type every
/// answer is (`*/*` and `text/*` take it).
fn check_content_types(params: &SendMessageParams, input_modes: &[String]) -> Result<(), RpcError> {
    for part in &params.message.parts {
        let media_type = match &part.content {
            PartContent::Text(_) => part
                .media_type
                .as_deref()
                .map(essence)
                .unwrap_or_else(|| "text/plain".to_string()),
            PartContent::File(_) => {
                return Err(RpcError::content_type_not_supported(
                    part.media_type.as_deref().unwrap_or("a file"),
                ));
            }
            PartContent::Data(_) => {
                return Err(RpcError::content_type_not_supported(
                    part.media_type.as_deref().unwrap_or("application/json"),
                ));
            }
        };
        if !input_modes.iter().any(|mode| essence(mode) == media_type) {
            return Err(RpcError::content_type_not_supported(&media_type));
        }
    }
    let accepted = params
        .configuration
        .as_ref()
        .map(|config| config.accepted_output_modes.as_slice())
        .unwrap_or_default();
    if !accepted.is_empty()
        && !accepted
            .iter()
            .any(|mode| matches!(essence(mode).as_str(), "text/plain" | "text/*" | "*/*"))
    {
        return Err(RpcError::content_type_not_supported(&accepted.join(", ")));
    }
    Ok(())
}

/// Refuses a message that carries no text, what the agent is asked (only text is understood).
/// The text itself stays in the message: the session joins it when it takes the task.
fn check_has_text(message: &Message) -> Result<(), RpcError> {
    let has_text = message
        .parts
        .iter()
        .any(|part| matches!(&part.content, PartContent::Text(text) if !text.trim().is_empty()));
    if has_text {
        return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with_version(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("a2a-version", HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn the_versions_spoken_are_1_0_and_0_3_with_any_patch() {
        assert_eq!(requested_version(&HeaderMap::new()), Ok(None));
        assert_eq!(requested_version(&with_version("  ")), Ok(None));
        for (value, version) in [
            ("1.0", Version::V1_0),
            (" 1.0.1 ", Version::V1_0),
            ("0.3", Version::V0_3),
            ("0.3.0", Version::V0_3),
        ] {
            assert_eq!(requested_version(&with_version(value)), Ok(Some(version)));
        }
        for value in ["99.0", "1", "1.1", "0.2", "1.0.x", "1.0.", "one", "01.0"] {
            assert_eq!(
                requested_version(&with_version(value)),
                Err(value.to_string()),
                "{value}"
            );
        }
    }

    #[test]
    fn content_types_are_checked_part_by_part_and_against_accepted_outputs() {
        let modes = vec!["text/plain".to_string(), "text/markdown".to_string()];
        let params = |parts: Vec<murmur_a2a::Part>, accepted: &[&str]| SendMessageParams {
            message: Message::new("m", murmur_a2a::Role::User, parts),
            configuration: Some(murmur_a2a::SendMessageConfiguration {
                accepted_output_modes: accepted.iter().map(|m| m.to_string()).collect(),
                ..Default::default()
            }),
            metadata: None,
        };
        let text = |media: Option<&str>| murmur_a2a::Part {
            media_type: media.map(str::to_string),
            ..murmur_a2a::Part::text("hi")
        };
        let code = |params: &SendMessageParams| {
            check_content_types(params, &modes).map_err(|error| error.code)
        };
        assert_eq!(code(&params(vec![text(None)], &[])), Ok(()));
        assert_eq!(
            code(&params(
                vec![text(Some("TEXT/Markdown; charset=utf-8"))],
                &["*/*"]
            )),
            Ok(())
        );
        assert_eq!(code(&params(vec![text(None)], &["text/*"])), Ok(()));
        assert_eq!(
            code(&params(vec![text(Some("text/html"))], &[])),
            Err(-32005)
        );
        assert_eq!(code(&params(vec![text(None)], &["image/png"])), Err(-32005));
    }
}
