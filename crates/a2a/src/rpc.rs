//! JSON-RPC 2.0 framing for A2A: reading requests, building responses and SSE events.
//!
//! A server's round trip:
//!
//! ```
//! use murmur_a2a::rpc::{self, Call};
//! use murmur_a2a::{Role, Task, TaskState, TaskStatus, Message, SendMessageResult};
//!
//! let body = br#"{"jsonrpc":"2.0","id":1,"method":"message/send",
//!   "params":{"message":{"kind":"message","messageId":"m1","role":"user",
//!   "parts":[{"kind":"text","text":"Book me a flight"}]}}}"#;
//! let request = match rpc::parse_request(body) {
//!     Ok(request) => request,
//!     Err(rejected) => panic!("answer {}", rejected.to_response()),
//! };
//! let Ok(Call::SendMessage(params)) = request.call() else { panic!() };
//! assert_eq!(params.message.joined_text(), "Book me a flight");
//!
//! let mut status = TaskStatus::new(TaskState::InputRequired);
//! status.message = Some(Message::text("m2", Role::Agent, "From where?"));
//! let task = Task::new("t1", "c1", status);
//! let response = rpc::success(&request.id, request.version, &SendMessageResult::Task(task));
//! assert_eq!(response["result"]["status"]["state"], "input-required");
//! ```
//!
//! Batches (a JSON array body) are refused with -32600: A2A methods answer one request per HTTP
//! exchange, the streaming ones with an SSE body that cannot be shared with other requests.
//! JSON-RPC 2.0 lets a server answer a batch it will not process with a single error.
//!
//! A request without an `id` member is a JSON-RPC notification: it parses, with `id` null and
//! [`Request::is_notification`] set; JSON-RPC says the server must not answer it.

use serde_json::{Map, Value};

use crate::model::*;
use crate::{RpcError, Version, Wire};

/// An A2A operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `SendMessage` / `message/send`.
    SendMessage,
    /// `SendStreamingMessage` / `message/stream`: answered with SSE.
    SendStreamingMessage,
    /// `GetTask` / `tasks/get`.
    GetTask,
    /// `CancelTask` / `tasks/cancel`.
    CancelTask,
    /// `SubscribeToTask` / `tasks/resubscribe`: answered with SSE.
    SubscribeToTask,
    /// `ListTasks`; A2A 1.0 only (0.3 has no JSON-RPC `tasks/list`).
    ListTasks,
    /// `GetExtendedAgentCard` / `agent/getAuthenticatedExtendedCard`; takes no params.
    GetExtendedAgentCard,
    /// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`.
    CreatePushNotificationConfig,
    /// `GetTaskPushNotificationConfig` / `tasks/pushNotificationConfig/get`.
    GetPushNotificationConfig,
    /// `ListTaskPushNotificationConfigs` / `tasks/pushNotificationConfig/list`.
    ListPushNotificationConfigs,
    /// `DeleteTaskPushNotificationConfig` / `tasks/pushNotificationConfig/delete`.
    DeletePushNotificationConfig,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 11] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::ListTasks,
        Method::GetExtendedAgentCard,
        Method::CreatePushNotificationConfig,
        Method::GetPushNotificationConfig,
        Method::ListPushNotificationConfigs,
        Method::DeletePushNotificationConfig,
    ];

    /// The JSON-RPC method name in `version`, if the method exists there.
    pub fn name(self, version: Version) -> Option<&'static str> {
        let (v1, v03) = match self {
            Method::SendMessage => ("SendMessage", Some("message/send")),
            Method::SendStreamingMessage => ("SendStreamingMessage", Some("message/stream")),
            Method::GetTask => ("GetTask", Some("tasks/get")),
            Method::CancelTask => ("CancelTask", Some("tasks/cancel")),
            Method::SubscribeToTask => ("SubscribeToTask", Some("tasks/resubscribe")),
            Method::ListTasks => ("ListTasks", None),
            Method::GetExtendedAgentCard => (
                "GetExtendedAgentCard",
                Some("agent/getAuthenticatedExtendedCard"),
            ),
            Method::CreatePushNotificationConfig => (
                "CreateTaskPushNotificationConfig",
                Some("tasks/pushNotificationConfig/set"),
            ),
            Method::GetPushNotificationConfig => (
                "GetTaskPushNotificationConfig",
                Some("tasks/pushNotificationConfig/get"),
            ),
            Method::ListPushNotificationConfigs => (
                "ListTaskPushNotificationConfigs",
                Some("tasks/pushNotificationConfig/list"),
            ),
            Method::DeletePushNotificationConfig => (
                "DeleteTaskPushNotificationConfig",
                Some("tasks/pushNotificationConfig/delete"),
            ),
        };
        match version {
            Version::V1_0 => Some(v1),
            Version::V0_3 => v03,
        }
    }

    /// The method a JSON-RPC name denotes, and the version that name belongs to. Exact,
    /// case-sensitive match.
    pub fn from_name(name: &str) -> Option<(Method, Version)> {
        Method::ALL.into_iter().find_map(|method| {
            Version::ALL
                .into_iter()
                .find(|&version| method.name(version) == Some(name))
                .map(|version| (method, version))
        })
    }

    /// Answered with an SSE stream rather than one JSON body.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }

    /// One of the four push notification config methods.
    pub fn is_push_notification_config(self) -> bool {
        matches!(
            self,
            Method::CreatePushNotificationConfig
                | Method::GetPushNotificationConfig
                | Method::ListPushNotificationConfigs
                | Method::DeletePushNotificationConfig
        )
    }
}

/// A JSON-RPC 2.0 request naming an A2A method.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// A string, an integer or null: echo it in the response.
    pub id: Value,
    pub method: Method,
    /// The version the method's name belongs to; answer in it.
    pub version: Version,
    /// The `params` member: an object, an array, or null when absent. Read it with
    /// [`Request::call`] or the typed readers ([`send_params`] …).
    pub params: Value,
    /// The request had no `id` member: a JSON-RPC notification, which gets no response.
    pub is_notification: bool,
}

/// A request refused before its method ran: answer `error`, with `id` (null when the request's
/// id could not be read).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct RequestError {
    pub id: Value,
    pub error: RpcError,
}

impl RequestError {
    /// The JSON-RPC error response to send.
    pub fn to_response(&self) -> Value {
        error(&self.id, &self.error)
    }
}

impl From<RequestError> for RpcError {
    fn from(rejected: RequestError) -> Self {
        rejected.error
    }
}

fn invalid(id: &Value, detail: impl std::fmt::Display) -> RequestError {
    RequestError {
        id: id.clone(),
        error: RpcError::invalid_request(detail),
    }
}

/// Reads a JSON-RPC request body.
///
/// - not JSON (truncated, malformed, not UTF-8): -32700, id null;
/// - a JSON array (a batch): -32600, id null (batches are not supported);
/// - not an object, `jsonrpc` not exactly `"2.0"`, `method` missing or not a string, `id` not a
///   string, an integer or null, `params` neither object, array nor null: -32600 (with the
///   request's id when it could be read). JSON-RPC allows fractional ids but says they should
///   not be used; A2A's schemas allow only integers, so that every answer stays valid;
/// - a method name neither version has: -32601, naming it (and its right spelling when only
///   the case is wrong).
///
/// A UTF-8 byte-order mark before the JSON is skipped. The params are not looked at here.
// Called once per HTTP request: the size of the error costs nothing worth a `Box` in the API.
#[allow(clippy::result_large_err)]
pub fn parse_request(body: &[u8]) -> Result<Request, RequestError> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let value: Value = serde_json::from_slice(body).map_err(|error| RequestError {
        id: Value::Null,
        error: RpcError::parse_error(error),
    })?;
    let object = match value {
        Value::Object(object) => object,
        Value::Array(items) => {
            let what = if items.is_empty() {
                "an empty batch".to_string()
            } else {
                format!("a batch of {}", items.len())
            };
            return Err(invalid(
                &Value::Null,
                format!(
                    "batch requests (JSON arrays) are not supported, got {what}; send each request in its own HTTP request"
                ),
            ));
        }
        other => {
            return Err(invalid(
                &Value::Null,
                format!("the body must be a JSON object, not {}", json_kind(&other)),
            ));
        }
    };
    let (id, is_notification) = match object.get("id") {
        None => (Value::Null, true),
        Some(id @ (Value::String(_) | Value::Null)) => (id.clone(), false),
        Some(Value::Number(number)) if number.is_i64() || number.is_u64() => {
            (Value::Number(number.clone()), false)
        }
        Some(Value::Number(number)) => {
            return Err(invalid(
                &Value::Null,
                format!("\"id\" must be an integer when it is a number, got {number}"),
            ));
        }
        Some(other) => {
            return Err(invalid(
                &Value::Null,
                format!(
                    "\"id\" must be a string, an integer or null, not {}",
                    json_kind(other)
                ),
            ));
        }
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => {
            return Err(invalid(
                &id,
                format!("\"jsonrpc\" must be \"2.0\", got {other}"),
            ));
        }
        None => return Err(invalid(&id, "\"jsonrpc\": \"2.0\" is required")),
    }
    let name = match object.get("method") {
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(invalid(
                &id,
                format!("\"method\" must be a string, not {}", json_kind(other)),
            ));
        }
        None => return Err(invalid(&id, "\"method\" is required")),
    };
    let params = match object.get("params") {
        None | Some(Value::Null) => Value::Null,
        Some(params @ (Value::Object(_) | Value::Array(_))) => params.clone(),
        Some(other) => {
            return Err(invalid(
                &id,
                format!("\"params\" must be an object, not {}", json_kind(other)),
            ));
        }
    };
    let Some((method, version)) = Method::from_name(name) else {
        return Err(RequestError {
            id,
            error: RpcError::method_not_found(name, method_hint(name).as_deref()),
        });
    };
    Ok(Request {
        id,
        method,
        version,
        params,
        is_notification,
    })
}

fn method_hint(name: &str) -> Option<String> {
    if name == "tasks/list" {
        return Some("A2A 0.3 has no JSON-RPC tasks/list; A2A 1.0 has ListTasks".to_string());
    }
    let near = Method::ALL.into_iter().find_map(|method| {
        Version::ALL
            .into_iter()
            .filter_map(|version| method.name(version))
            .find(|known| known.eq_ignore_ascii_case(name))
    });
    Some(match near {
        Some(known) => format!("did you mean {known:?}? Method names are case-sensitive"),
        None => "A2A 1.0 methods: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, ListTasks; A2A 0.3 methods: message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe".to_string(),
    })
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A request's params, read for its method.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    SendMessage(SendMessageParams),
    SendStreamingMessage(SendMessageParams),
    GetTask(GetTaskParams),
    CancelTask(CancelTaskParams),
    SubscribeToTask(SubscribeParams),
    ListTasks(ListTasksParams),
    GetExtendedAgentCard,
    /// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`.
    CreatePushConfig(TaskPushNotificationConfig),
    /// `GetTaskPushNotificationConfig` / `tasks/pushNotificationConfig/get`.
    GetPushConfig(PushConfigRef),
    /// `ListTaskPushNotificationConfigs` / `tasks/pushNotificationConfig/list`.
    ListPushConfigs(PushConfigRef),
    /// `DeleteTaskPushNotificationConfig` / `tasks/pushNotificationConfig/delete`.
    DeletePushConfig(PushConfigRef),
}

impl Request {
    /// Reads the params for the request's method: -32602 naming the field on any problem.
    pub fn call(&self) -> Result<Call, RpcError> {
        Ok(match self.method {
            Method::SendMessage => Call::SendMessage(send_params(self)?),
            Method::SendStreamingMessage => Call::SendStreamingMessage(send_params(self)?),
            Method::GetTask => Call::GetTask(get_task_params(self)?),
            Method::CancelTask => Call::CancelTask(cancel_task_params(self)?),
            Method::SubscribeToTask => Call::SubscribeToTask(subscribe_params(self)?),
            Method::ListTasks => Call::ListTasks(list_tasks_params(self)?),
            Method::GetExtendedAgentCard => Call::GetExtendedAgentCard,
            Method::CreatePushNotificationConfig => Call::CreatePushConfig(read(self)?),
            Method::GetPushNotificationConfig => Call::GetPushConfig(read(self)?),
            Method::ListPushNotificationConfigs => Call::ListPushConfigs(read(self)?),
            Method::DeletePushNotificationConfig => Call::DeletePushConfig(read(self)?),
        })
    }
}

fn read<T: Wire>(request: &Request) -> Result<T, RpcError> {
    T::from_wire(request.version, &request.params).map_err(RpcError::from)
}

/// `SendMessage` / `SendStreamingMessage` / `message/send` / `message/stream` params, read
/// strictly in the request's version (see [`SendMessageParams`]'s [`Wire`] impl).
pub fn send_params(request: &Request) -> Result<SendMessageParams, RpcError> {
    read(request)
}

/// `GetTask` / `tasks/get` params.
pub fn get_task_params(request: &Request) -> Result<GetTaskParams, RpcError> {
    read(request)
}

/// `CancelTask` / `tasks/cancel` params.
pub fn cancel_task_params(request: &Request) -> Result<CancelTaskParams, RpcError> {
    read(request)
}

/// `SubscribeToTask` / `tasks/resubscribe` params.
pub fn subscribe_params(request: &Request) -> Result<SubscribeParams, RpcError> {
    read(request)
}

/// `ListTasks` params.
pub fn list_tasks_params(request: &Request) -> Result<ListTasksParams, RpcError> {
    read(request)
}

fn envelope(id: &Value, member: &str, value: Value) -> Value {
    let mut object = Map::new();
    object.insert("jsonrpc".into(), "2.0".into());
    object.insert("id".into(), id.clone());
    object.insert(member.into(), value);
    Value::Object(object)
}

/// A success response: `{"jsonrpc": "2.0", "id": id, "result": <result in version>}`.
///
/// The result is what the method returns: a [`SendMessageResult`] for `SendMessage`, a [`Task`]
/// for `GetTask` and `CancelTask`, a [`ListTasksResult`] for `ListTasks`, an [`AgentCard`] for
/// the extended card.
pub fn success(id: &Value, version: Version, result: &impl Wire) -> Value {
    envelope(id, "result", result.to_wire(version))
}

/// An error response: `{"jsonrpc": "2.0", "id": id, "error": {"code", "message", "data"?}}`.
/// The same in both versions.
pub fn error(id: &Value, error: &RpcError) -> Value {
    envelope(id, "error", error.to_json())
}

/// One SSE event: `data: <json>` and the blank line that ends it. With `event_id`, an `id:`
/// line first (what a client sends back as `Last-Event-ID`); line breaks in it are removed.
pub fn sse_frame(event_id: Option<&str>, payload: &Value) -> String {
    let mut frame = String::new();
    if let Some(event_id) = event_id {
        frame.push_str("id: ");
        frame.extend(
            event_id
                .chars()
                .filter(|c| !matches!(c, '\r' | '\n' | '\0')),
        );
        frame.push('\n');
    }
    // Compact JSON has no raw line breaks (they are escaped inside strings).
    frame.push_str("data: ");
    frame.push_str(&payload.to_string());
    frame.push_str("\n\n");
    frame
}

/// A stream event as an SSE event: the whole JSON-RPC success response in one `data:` line,
/// as both versions' JSON-RPC bindings require.
pub fn sse_event(
    id: &Value,
    version: Version,
    event: &StreamEvent,
    event_id: Option<&str>,
) -> String {
    sse_frame(event_id, &success(id, version, event))
}

/// An error as an SSE event (a stream that fails after it started).
pub fn sse_error(id: &Value, rpc_error: &RpcError, event_id: Option<&str>) -> String {
    sse_frame(event_id, &error(id, rpc_error))
}

// ---------------------------------------------------------------------------------------------
// The client's side

/// A request body calling `method` in `version`, or `None` if the method does not exist there
/// (`ListTasks` in 0.3). `params` is written as `version`'s JSON; `None` leaves `params` out.
pub fn request(
    id: &Value,
    method: Method,
    version: Version,
    params: Option<&dyn WireDyn>,
) -> Option<Value> {
    let name = method.name(version)?;
    let mut object = Map::new();
    object.insert("jsonrpc".into(), "2.0".into());
    object.insert("id".into(), id.clone());
    object.insert("method".into(), name.into());
    if let Some(params) = params {
        object.insert("params".into(), params.to_wire_dyn(version));
    }
    Some(Value::Object(object))
}

/// [`Wire::to_wire`] behind a reference, for [`request`].
pub trait WireDyn {
    fn to_wire_dyn(&self, version: Version) -> Value;
}

impl<T: Wire> WireDyn for T {
    fn to_wire_dyn(&self, version: Version) -> Value {
        self.to_wire(version)
    }
}

/// A JSON-RPC response as a client receives it (one body, or one SSE event's data).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: Value,
    /// `result`, or the `error` the agent answered. Read a result with the [`Wire`] impl of
    /// what the method returns ([`SendMessageResult`], [`StreamEvent`], [`Task`] …).
    pub outcome: Result<Value, RpcError>,
}

/// Reads a response body. Anything that is not a JSON-RPC 2.0 response object is -32006
/// (invalid agent response), saying what is wrong.
pub fn parse_response(body: &[u8]) -> Result<Response, RpcError> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| RpcError::invalid_agent_response(format!("not JSON: {error}")))?;
    let Value::Object(object) = value else {
        return Err(RpcError::invalid_agent_response(format!(
            "a response must be a JSON object, not {}",
            json_kind(&value)
        )));
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::invalid_agent_response(
            "\"jsonrpc\": \"2.0\" is missing",
        ));
    }
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    let outcome = match (object.get("result"), object.get("error")) {
        (Some(result), None) => Ok(result.clone()),
        (None, Some(error)) => Err(RpcError::from_json(error).map_err(|problem| {
            RpcError::invalid_agent_response(format!("malformed error object: {problem}"))
        })?),
        (Some(_), Some(_)) => {
            return Err(RpcError::invalid_agent_response(
                "a response holds result or error, not both",
            ));
        }
        (None, None) => {
            return Err(RpcError::invalid_agent_response(
                "a response needs a result or an error",
            ));
        }
    };
    Ok(Response { id, outcome })
}

/// Reads a result of type `T` (what the method returns) from a response's `result`:
/// -32006 naming the field if it does not fit.
pub fn read_result<T: Wire>(version: Version, result: &Value) -> Result<T, RpcError> {
    T::from_wire(version, result).map_err(|problem| {
        let field = if problem.field.is_empty() {
            "result".to_string()
        } else {
            format!("result.{}", problem.field)
        };
        RpcError::invalid_agent_response(format!("{field}: {}", problem.description))
    })
}
