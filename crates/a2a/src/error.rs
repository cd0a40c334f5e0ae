//! JSON-RPC and A2A errors.
//!
//! One [`RpcError`] value serves both protocol versions: `data`, when set, is the A2A 1.0 error
//! detail list (`[{"@type": "type.googleapis.com/google.rpc.…", …}]`), which A2A 0.3 (whose
//! `data` may be anything) accepts as it is.
//!
//! | code | constructor | v1.0 `ErrorInfo.reason` |
//! |---|---|---|
//! | -32700 | [`RpcError::parse_error`] | |
//! | -32600 | [`RpcError::invalid_request`] | |
//! | -32601 | [`RpcError::method_not_found`] | |
//! | -32602 | [`RpcError::invalid_params`] (`google.rpc.BadRequest` field violations) | |
//! | -32603 | [`RpcError::internal`] | |
//! | -32001 | [`RpcError::task_not_found`] | `TASK_NOT_FOUND` |
//! | -32002 | [`RpcError::task_not_cancelable`] | `TASK_NOT_CANCELABLE` |
//! | -32003 | [`RpcError::push_notification_not_supported`] | `PUSH_NOTIFICATION_NOT_SUPPORTED` |
//! | -32004 | [`RpcError::unsupported_operation`] | `UNSUPPORTED_OPERATION` |
//! | -32005 | [`RpcError::content_type_not_supported`] | `CONTENT_TYPE_NOT_SUPPORTED` |
//! | -32006 | [`RpcError::invalid_agent_response`] | `INVALID_AGENT_RESPONSE` |
//! | -32007 | [`RpcError::extended_agent_card_not_configured`] | `EXTENDED_AGENT_CARD_NOT_CONFIGURED` |
//! | -32008 | [`RpcError::extension_support_required`] | `EXTENSION_SUPPORT_REQUIRED` |
//! | -32009 | [`RpcError::version_not_supported`] | `VERSION_NOT_SUPPORTED` |
//! | -32030 | [`RpcError::unauthenticated`] (HTTP 401; Murmur's, in JSON-RPC's server range) | `UNAUTHENTICATED` |

use serde_json::{Map, Value, json};

/// The numeric codes, by name.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
    /// No credential, or one the server does not know (HTTP 401). The protocols leave
    /// authentication errors to the implementation; this code is in JSON-RPC's server range.
    pub const UNAUTHENTICATED: i64 = -32030;

    /// Every code this crate produces.
    pub const ALL: [i64; 15] = [
        PARSE_ERROR,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        INVALID_PARAMS,
        INTERNAL_ERROR,
        TASK_NOT_FOUND,
        TASK_NOT_CANCELABLE,
        PUSH_NOTIFICATION_NOT_SUPPORTED,
        UNSUPPORTED_OPERATION,
        CONTENT_TYPE_NOT_SUPPORTED,
        INVALID_AGENT_RESPONSE,
        EXTENDED_AGENT_CARD_NOT_CONFIGURED,
        EXTENSION_SUPPORT_REQUIRED,
        VERSION_NOT_SUPPORTED,
        UNAUTHENTICATED,
    ];
}

/// The `domain` of every A2A `google.rpc.ErrorInfo`.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";

/// A JSON-RPC error object: `{"code", "message", "data"?}`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    /// Human-readable: the standard phrase for the code, then what exactly went wrong.
    pub message: String,
    /// A2A 1.0 error details: an array of objects, each with an `@type`.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with no details.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32700: the body is not JSON (truncated, malformed, not UTF-8). The response id is null.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        RpcError::new(
            codes::PARSE_ERROR,
            format!("Invalid JSON payload: {detail}"),
        )
    }

    /// -32600: JSON, but not a JSON-RPC 2.0 request.
    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        RpcError::new(
            codes::INVALID_REQUEST,
            format!("Invalid JSON-RPC request: {detail}"),
        )
    }

    /// -32601: no such method (`hint`, when given, is appended: e.g. the right spelling).
    pub fn method_not_found(method: &str, hint: Option<&str>) -> Self {
        let mut message = format!("Method not found: {method:?}");
        if let Some(hint) = hint {
            message.push_str("; ");
            message.push_str(hint);
        }
        RpcError::new(codes::METHOD_NOT_FOUND, message)
    }

    /// -32602 for one field: `field` is its path inside `params` (`message.parts[0].text`).
    /// `data` holds a `google.rpc.BadRequest` with that field violation.
    pub fn invalid_params(field: impl Into<String>, description: impl Into<String>) -> Self {
        let field = field.into();
        let description = description.into();
        let shown = if field.is_empty() { "params" } else { &field };
        RpcError {
            code: codes::INVALID_PARAMS,
            message: format!("Invalid parameters: {shown}: {description}"),
            data: Some(json!([{
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": shown, "description": description}],
            }])),
        }
    }

    /// -32603: something broke on the server.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        RpcError::new(codes::INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// -32001: no task with that id (or not visible to this client).
    pub fn task_not_found(task_id: &str) -> Self {
        RpcError::a2a(
            codes::TASK_NOT_FOUND,
            format!("Task not found: {task_id:?}"),
            "TASK_NOT_FOUND",
            &[("taskId", task_id)],
        )
    }

    /// -32003: the agent does not do push notifications.
    pub fn push_notification_not_supported() -> Self {
        RpcError::a2a(
            codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "Push Notification is not supported".to_string(),
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            &[],
        )
    }

    /// -32004: the operation, or this use of it, is not supported (streaming off, a message to a
    /// terminal task, subscribing to a terminal task…).
    pub fn unsupported_operation(detail: impl std::fmt::Display) -> Self {
        RpcError::a2a(
            codes::UNSUPPORTED_OPERATION,
            format!("This operation is not supported: {detail}"),
            "UNSUPPORTED_OPERATION",
            &[],
        )
    }

    /// -32005: a part's media type is not accepted.
    pub fn content_type_not_supported(media_type: &str) -> Self {
        RpcError::a2a(
            codes::CONTENT_TYPE_NOT_SUPPORTED,
            format!("Incompatible content types: {media_type:?} is not supported"),
            "CONTENT_TYPE_NOT_SUPPORTED",
            &[("mediaType", media_type)],
        )
    }

    /// -32006: an agent (a peer, seen from the client) answered something that does not conform.
    pub fn invalid_agent_response(detail: impl std::fmt::Display) -> Self {
        RpcError::a2a(
            codes::INVALID_AGENT_RESPONSE,
            format!("Invalid agent response: {detail}"),
            "INVALID_AGENT_RESPONSE",
            &[],
        )
    }

    /// -32007: extended card support is declared but none is configured.
    pub fn extended_agent_card_not_configured() -> Self {
        RpcError::a2a(
            codes::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            "Extended agent card is not configured".to_string(),
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            &[],
        )
    }

    /// -32008: a required extension was not declared by the client.
    pub fn extension_support_required(uri: &str) -> Self {
        RpcError::a2a(
            codes::EXTENSION_SUPPORT_REQUIRED,
            format!("Extension support required: {uri}"),
            "EXTENSION_SUPPORT_REQUIRED",
            &[("extension", uri)],
        )
    }

    /// -32009: the requested `A2A-Version` is not one this crate speaks.
    pub fn version_not_supported(requested: &str) -> Self {
        RpcError::version_not_supported_by(requested, &["1.0", "0.3"])
    }

    /// -32009: the requested version is not one of `supported` (`Major.Minor`: what a server
    /// serves, which may be fewer than this crate speaks), naming them.
    pub fn version_not_supported_by(requested: &str, supported: &[&str]) -> Self {
        let said = match supported {
            [one] => format!("the supported version is {one}"),
            _ => format!("supported versions are {}", supported.join(" and ")),
        };
        RpcError::a2a(
            codes::VERSION_NOT_SUPPORTED,
            format!("Protocol version not supported: {requested:?}; {said}"),
            "VERSION_NOT_SUPPORTED",
            &[
                ("requestedVersion", requested),
                ("supportedVersions", &supported.join(",")),
            ],
        )
    }

    /// -32030: the request carries no credential the server accepts (sent with HTTP 401 and a
    /// `WWW-Authenticate` challenge). `schemes` names what the server takes (`Bearer`,
    /// `ApiKey header=X-API-Key`), never what was presented.
    pub fn unauthenticated(schemes: &str) -> Self {
        RpcError::a2a(
            codes::UNAUTHENTICATED,
            format!("Unauthenticated: present one of the agent card's credentials ({schemes})"),
            "UNAUTHENTICATED",
            &[("schemes", schemes)],
        )
    }

    /// An A2A-specific error with its `google.rpc.ErrorInfo`.
    pub(crate) fn a2a(code: i64, message: String, reason: &str, metadata: &[(&str, &str)]) -> Self {
        let mut info = Map::new();
        info.insert("@type".into(), ERROR_INFO_TYPE.into());
        info.insert("reason".into(), reason.into());
        info.insert("domain".into(), ERROR_DOMAIN.into());
        if !metadata.is_empty() {
            let metadata: Map<String, Value> = metadata
                .iter()
                .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
                .collect();
            info.insert("metadata".into(), Value::Object(metadata));
        }
        RpcError {
            code,
            message,
            data: Some(Value::Array(vec![Value::Object(info)])),
        }
    }

    /// The `google.rpc.ErrorInfo.reason` in `data`, if any (`"TASK_NOT_FOUND"`, …).
    pub fn reason(&self) -> Option<&str> {
        self.details()
            .find(|detail| detail.get("@type").and_then(Value::as_str) == Some(ERROR_INFO_TYPE))
            .and_then(|detail| detail.get("reason"))
            .and_then(Value::as_str)
    }

    /// The `(field, description)` pairs of a `google.rpc.BadRequest` in `data`.
    pub fn field_violations(&self) -> Vec<(String, String)> {
        self.details()
            .filter(|detail| detail.get("@type").and_then(Value::as_str) == Some(BAD_REQUEST_TYPE))
            .filter_map(|detail| detail.get("fieldViolations").and_then(Value::as_array))
            .flatten()
            .map(|violation| {
                let text = |key: &str| {
                    violation
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (text("field"), text("description"))
            })
            .collect()
    }

    fn details(&self) -> impl Iterator<Item = &Map<String, Value>> {
        self.data
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
    }

    /// The JSON-RPC error object.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("code".into(), self.code.into());
        object.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            object.insert("data".into(), data.clone());
        }
        Value::Object(object)
    }

    /// Reads a JSON-RPC error object (as a client receives it). Lenient: a missing message is
    /// empty; a code that is not an integer is an error.
    pub fn from_json(value: &Value) -> Result<RpcError, FieldError> {
        let object = value
            .as_object()
            .ok_or_else(|| FieldError::new("error", "must be an object"))?;
        let code = object
            .get("code")
            .and_then(Value::as_i64)
            .ok_or_else(|| FieldError::new("error.code", "must be an integer"))?;
        let message = match object.get("message") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(message)) => message.clone(),
            Some(_) => return Err(FieldError::new("error.message", "must be a string")),
        };
        Ok(RpcError {
            code,
            message,
            data: object.get("data").filter(|data| !data.is_null()).cloned(),
        })
    }
}

impl From<FieldError> for RpcError {
    /// A field error in request params is an invalid-params error naming that field.
    fn from(error: FieldError) -> Self {
        RpcError::invalid_params(error.field, error.description)
    }
}

/// A field that is missing or wrong, by its path from the top of what was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `message.parts[0].text`; empty for the object that was read itself.
    pub field: String,
    pub description: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.description)
        } else {
            write!(f, "{}: {}", self.field, self.description)
        }
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            description: description.into(),
        }
    }
}
