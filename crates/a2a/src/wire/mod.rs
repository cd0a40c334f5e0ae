//! The model on the wire: each type written as, and read from, each version's JSON.
//!
//! | | v0.3 | v1.0 |
//! |---|---|---|
//! | field names | camelCase | camelCase (proto snake_case names also read) |
//! | discriminators | `"kind": "task" / "message" / "status-update" / "artifact-update"`, parts `"kind": "text" / "file" / "data"` | oneof wrappers `{"task": …}`, `{"message": …}`, `{"statusUpdate": …}`, `{"artifactUpdate": …}`; a part is `{"text"}`, `{"raw"}`, `{"url"}` or `{"data"}` |
//! | states | `"input-required"` | `"TASK_STATE_INPUT_REQUIRED"` (the enum's number is also read) |
//! | roles | `"user"`, `"agent"` | `"ROLE_USER"`, `"ROLE_AGENT"` |
//! | `SendMessage` result | the Task or Message itself | `{"task": …}` or `{"message": …}` |
//! | stream event | the object itself, status updates carry `final` | `StreamResponse` wrapper, no `final` |
//! | agent card | `url`, `preferredTransport`, `protocolVersion: "0.3.0"` | `supportedInterfaces` |
//!
//! Reading is strict for request params and lenient for results (see each [`Wire`] impl):
//! requests must carry what the specifications require, while answers from peers are taken as
//! far as they make sense, because the specifications' own examples leave required fields out.

mod read;

use serde_json::{Map, Value, json};

use crate::Version;
use crate::base64;
use crate::error::FieldError;
use crate::model::*;
use read::{Mode, Obj, kind};

/// A type with a JSON form in each protocol version.
pub trait Wire: Sized {
    /// This value as `version`'s JSON. Never fails: every model value has a form in each
    /// version (what a version cannot say is dropped, as the model's docs tell).
    fn to_wire(&self, version: Version) -> Value;

    /// Reads `version`'s JSON. The error names the offending field by its path
    /// (`message.parts[0].kind`).
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError>;
}

// ---------------------------------------------------------------------------------------------
// Writing helpers

struct Out(Map<String, Value>);

impl Out {
    fn new() -> Self {
        Out(Map::new())
    }

    fn put(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.0.insert(key.to_string(), value.into());
        self
    }

    fn opt(&mut self, key: &str, value: Option<&String>) -> &mut Self {
        if let Some(value) = value {
            self.put(key, value.clone());
        }
        self
    }

    /// Non-empty string, or nothing.
    fn nonempty(&mut self, key: &str, value: &str) -> &mut Self {
        if !value.is_empty() {
            self.put(key, value);
        }
        self
    }

    /// A list, left out when empty.
    fn list(&mut self, key: &str, values: &[String]) -> &mut Self {
        if !values.is_empty() {
            self.put(key, values.to_vec());
        }
        self
    }

    fn meta(&mut self, key: &str, metadata: Option<&Metadata>) -> &mut Self {
        if let Some(metadata) = metadata {
            self.put(key, Value::Object(metadata.clone()));
        }
        self
    }

    fn done(&mut self) -> Value {
        Value::Object(std::mem::take(&mut self.0))
    }
}

// ---------------------------------------------------------------------------------------------
// Enums

/// The v1.0 name of a state (`TASK_STATE_INPUT_REQUIRED`) and its proto number.
fn state_v1(state: TaskState) -> (&'static str, i64) {
    match state {
        TaskState::Unknown => ("TASK_STATE_UNSPECIFIED", 0),
        TaskState::Submitted => ("TASK_STATE_SUBMITTED", 1),
        TaskState::Working => ("TASK_STATE_WORKING", 2),
        TaskState::Completed => ("TASK_STATE_COMPLETED", 3),
        TaskState::Failed => ("TASK_STATE_FAILED", 4),
        TaskState::Canceled => ("TASK_STATE_CANCELED", 5),
        TaskState::InputRequired => ("TASK_STATE_INPUT_REQUIRED", 6),
        TaskState::Rejected => ("TASK_STATE_REJECTED", 7),
        TaskState::AuthRequired => ("TASK_STATE_AUTH_REQUIRED", 8),
    }
}

fn state_name(state: TaskState, version: Version) -> &'static str {
    match version {
        Version::V0_3 => state.as_str(),
        Version::V1_0 => state_v1(state).0,
    }
}

/// Reads a state. `Ok(None)` for a name this version does not know (the caller decides whether
/// that is `unknown` or an error).
fn read_state(value: &Value, version: Version) -> Option<TaskState> {
    TaskState::ALL
        .into_iter()
        .find(|&state| match (version, value) {
            (Version::V0_3, Value::String(name)) => name == state.as_str(),
            (Version::V1_0, Value::String(name)) => name == state_v1(state).0,
            (Version::V1_0, Value::Number(number)) => number.as_i64() == Some(state_v1(state).1),
            _ => false,
        })
}

fn state_choices(version: Version) -> String {
    TaskState::ALL
        .into_iter()
        .filter(|state| *state != TaskState::Unknown)
        .map(|state| state_name(state, version))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Says which version a misplaced enum spelling belongs to.
fn other_version_hint(value: &Value, version: Version, is_role: bool) -> String {
    let other = match version {
        Version::V0_3 => Version::V1_0,
        Version::V1_0 => Version::V0_3,
    };
    let known_there = if is_role {
        read_role(value, other).is_some()
    } else {
        read_state(value, other).is_some()
    };
    if known_there {
        let methods = match version {
            Version::V0_3 => "slash method names such as message/send",
            Version::V1_0 => "PascalCase method names such as SendMessage",
        };
        format!(
            " ({value} is the A2A {other} spelling; A2A {version}, used with {methods}, does not take it)"
        )
    } else {
        String::new()
    }
}

fn state_at(obj: &Obj, name: &str, mode: Mode) -> Result<Option<TaskState>, FieldError> {
    let Some(value) = obj.get(name) else {
        return Ok(None);
    };
    match read_state(value, obj.version()) {
        Some(state) => Ok(Some(state)),
        None if mode == Mode::Lenient && (value.is_string() || value.is_number()) => {
            Ok(Some(TaskState::Unknown))
        }
        None => Err(FieldError::new(
            obj.at(name),
            format!(
                "invalid state {value}; must be one of: {}{}",
                state_choices(obj.version()),
                other_version_hint(value, obj.version(), false)
            ),
        )),
    }
}

fn role_name(role: Role, version: Version) -> &'static str {
    match (role, version) {
        (Role::User, Version::V0_3) => "user",
        (Role::Agent, Version::V0_3) => "agent",
        (Role::User, Version::V1_0) => "ROLE_USER",
        (Role::Agent, Version::V1_0) => "ROLE_AGENT",
    }
}

fn read_role(value: &Value, version: Version) -> Option<Role> {
    [Role::User, Role::Agent]
        .into_iter()
        .find(|&role| match (version, value) {
            (_, Value::String(name)) => name == role_name(role, version),
            (Version::V1_0, Value::Number(number)) => {
                number.as_i64() == Some(if role == Role::User { 1 } else { 2 })
            }
            _ => false,
        })
}

fn role_at(obj: &Obj, mode: Mode) -> Result<Role, FieldError> {
    let version = obj.version();
    let unset = |value: &Value| match value {
        Value::String(name) => name == "ROLE_UNSPECIFIED" && version == Version::V1_0,
        Value::Number(number) => number.as_i64() == Some(0) && version == Version::V1_0,
        _ => false,
    };
    match obj.get("role") {
        Some(value) if !unset(value) => read_role(value, version).ok_or_else(|| {
            FieldError::new(
                obj.at("role"),
                format!(
                    "invalid role {value}; must be {} or {}{}",
                    role_name(Role::User, version),
                    role_name(Role::Agent, version),
                    other_version_hint(value, version, true)
                ),
            )
        }),
        _ if mode == Mode::Lenient => Ok(Role::Agent),
        _ => Err(FieldError::new(
            obj.at("role"),
            format!(
                "required; must be {} or {}",
                role_name(Role::User, version),
                role_name(Role::Agent, version)
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Parts

fn part_to(part: &Part, version: Version) -> Value {
    let mut out = Out::new();
    match version {
        Version::V1_0 => {
            match &part.content {
                PartContent::Text(text) => out.put("text", text.clone()),
                PartContent::File(FileContent::Bytes(bytes)) => {
                    out.put("raw", base64::encode(bytes))
                }
                PartContent::File(FileContent::Uri(uri)) => out.put("url", uri.clone()),
                PartContent::Data(data) => out.put("data", data.clone()),
            };
            out.meta("metadata", part.metadata.as_ref())
                .opt("filename", part.filename.as_ref())
                .opt("mediaType", part.media_type.as_ref());
        }
        Version::V0_3 => {
            match &part.content {
                PartContent::Text(text) => out.put("kind", "text").put("text", text.clone()),
                PartContent::File(file) => {
                    let mut inner = Out::new();
                    match file {
                        FileContent::Bytes(bytes) => inner.put("bytes", base64::encode(bytes)),
                        FileContent::Uri(uri) => inner.put("uri", uri.clone()),
                    };
                    inner
                        .opt("name", part.filename.as_ref())
                        .opt("mimeType", part.media_type.as_ref());
                    out.put("kind", "file").put("file", inner.done())
                }
                PartContent::Data(Value::Object(data)) => out
                    .put("kind", "data")
                    .put("data", Value::Object(data.clone())),
                PartContent::Data(other) => {
                    let mut wrapped = Map::new();
                    wrapped.insert("value".into(), other.clone());
                    out.put("kind", "data").put("data", Value::Object(wrapped))
                }
            };
            out.meta("metadata", part.metadata.as_ref());
        }
    }
    out.done()
}

fn bytes_at(obj: &Obj, name: &str) -> Result<Vec<u8>, FieldError> {
    let text = obj.text(name)?;
    base64::decode(&text)
        .ok_or_else(|| FieldError::new(obj.at(name), "must be base64-encoded bytes"))
}

fn part_from(value: &Value, path: &str, version: Version, mode: Mode) -> Result<Part, FieldError> {
    let obj = Obj::of(value, path, version)?;
    let metadata = obj.metadata("metadata")?;
    match version {
        Version::V1_0 => {
            let present: Vec<&str> = ["text", "raw", "url", "data"]
                .into_iter()
                .filter(|name| match *name {
                    "data" => obj.raw(name).is_some(),
                    _ => obj.get(name).is_some(),
                })
                .collect();
            let content = match present.as_slice() {
                ["text"] => PartContent::Text(obj.text("text")?),
                ["raw"] => PartContent::File(FileContent::Bytes(bytes_at(&obj, "raw")?)),
                ["url"] => PartContent::File(FileContent::Uri(obj.text("url")?)),
                ["data"] => PartContent::Data(obj.raw("data").cloned().unwrap_or(Value::Null)),
                [] => {
                    return Err(FieldError::new(
                        path,
                        "a part needs content: one of text, raw, url or data",
                    ));
                }
                many => {
                    return Err(FieldError::new(
                        path,
                        format!(
                            "a part holds exactly one of text, raw, url or data, not {}",
                            many.join(" and ")
                        ),
                    ));
                }
            };
            Ok(Part {
                content,
                media_type: obj.opt_string("mediaType")?,
                filename: obj.opt_string("filename")?,
                metadata,
            })
        }
        Version::V0_3 => {
            let part_kind = match obj.get("kind") {
                Some(Value::String(name)) => name.clone(),
                Some(other) => {
                    return Err(FieldError::new(
                        obj.at("kind"),
                        format!("must be a string, not {}", kind(other)),
                    ));
                }
                // `kind` is required, but what the part holds says it unambiguously.
                None => match ["text", "file", "data"]
                    .into_iter()
                    .find(|name| obj.get(name).is_some())
                {
                    Some(name) => name.to_string(),
                    None => {
                        return Err(FieldError::new(
                            obj.at("kind"),
                            "required; must be \"text\", \"file\" or \"data\"",
                        ));
                    }
                },
            };
            let mut part = match part_kind.as_str() {
                "text" => Part::text(obj.text("text")?),
                "file" => {
                    let file = obj.required_object("file")?;
                    let content = match (file.get("bytes").is_some(), file.get("uri").is_some()) {
                        (true, false) => FileContent::Bytes(bytes_at(&file, "bytes")?),
                        (false, true) => FileContent::Uri(file.text("uri")?),
                        (true, true) => {
                            return Err(FieldError::new(
                                file.path(),
                                "a file holds either bytes or uri, not both",
                            ));
                        }
                        (false, false) => {
                            return Err(FieldError::new(
                                file.path(),
                                "a file needs bytes (base64) or a uri",
                            ));
                        }
                    };
                    Part {
                        media_type: file.opt_string("mimeType")?,
                        filename: file.opt_string("name")?,
                        ..Part::new(PartContent::File(content))
                    }
                }
                "data" => match obj.get("data") {
                    Some(data @ Value::Object(_)) => Part::data(data.clone()),
                    Some(data) if mode == Mode::Lenient => Part::data(data.clone()),
                    Some(other) => {
                        return Err(FieldError::new(
                            obj.at("data"),
                            format!("must be an object, not {}", kind(other)),
                        ));
                    }
                    None => return Err(FieldError::new(obj.at("data"), "required")),
                },
                other => {
                    return Err(FieldError::new(
                        obj.at("kind"),
                        format!(
                            "unknown part kind {other:?}; must be \"text\", \"file\" or \"data\""
                        ),
                    ));
                }
            };
            part.metadata = metadata;
            Ok(part)
        }
    }
}

fn parts_from(obj: &Obj, version: Version, mode: Mode) -> Result<Vec<Part>, FieldError> {
    let parts = obj.each("parts", |value, path| part_from(value, path, version, mode))?;
    if parts.is_empty() && mode == Mode::Strict {
        return Err(FieldError::new(
            obj.at("parts"),
            "at least one part is required",
        ));
    }
    Ok(parts)
}

impl Wire for Part {
    fn to_wire(&self, version: Version) -> Value {
        part_to(self, version)
    }

    /// Lenient (v0.3 data may be any JSON value); the content itself is always required.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        part_from(value, "", version, Mode::Lenient)
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

fn message_to(message: &Message, version: Version) -> Value {
    let mut out = Out::new();
    if version == Version::V0_3 {
        out.put("kind", "message");
    }
    out.put("messageId", message.message_id.clone())
        .opt("contextId", message.context_id.as_ref())
        .opt("taskId", message.task_id.as_ref())
        .put("role", role_name(message.role, version))
        .put(
            "parts",
            message
                .parts
                .iter()
                .map(|part| part_to(part, version))
                .collect::<Vec<_>>(),
        )
        .meta("metadata", message.metadata.as_ref())
        .list("extensions", &message.extensions)
        .list("referenceTaskIds", &message.reference_task_ids);
    out.done()
}

fn expect_kind(obj: &Obj, expected: &str) -> Result<(), FieldError> {
    if obj.version() == Version::V1_0 {
        return Ok(());
    }
    match obj.get("kind") {
        None => Ok(()),
        Some(Value::String(name)) if name == expected => Ok(()),
        Some(other) => Err(FieldError::new(
            obj.at("kind"),
            format!("must be {expected:?}, not {other}"),
        )),
    }
}

fn message_from(
    value: &Value,
    path: &str,
    version: Version,
    mode: Mode,
) -> Result<Message, FieldError> {
    let obj = Obj::of(value, path, version)?;
    expect_kind(&obj, "message")?;
    Ok(Message {
        message_id: obj.string("messageId", mode)?,
        context_id: obj.opt_string("contextId")?,
        task_id: obj.opt_string("taskId")?,
        role: role_at(&obj, mode)?,
        parts: parts_from(&obj, version, mode)?,
        metadata: obj.metadata("metadata")?,
        reference_task_ids: obj.strings("referenceTaskIds")?,
        extensions: obj.strings("extensions")?,
    })
}

impl Wire for Message {
    fn to_wire(&self, version: Version) -> Value {
        message_to(self, version)
    }

    /// Lenient, as for a message an agent sent: a missing `messageId` is empty, a missing role
    /// is `agent`, missing parts are an empty list. (Request params are read strictly; see
    /// [`SendMessageParams`].)
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        message_from(value, "", version, Mode::Lenient)
    }
}

// ---------------------------------------------------------------------------------------------
// Tasks

fn status_to(status: &TaskStatus, version: Version) -> Value {
    let mut out = Out::new();
    out.put("state", state_name(status.state, version));
    if let Some(message) = &status.message {
        out.put("message", message_to(message, version));
    }
    out.opt("timestamp", status.timestamp.as_ref());
    out.done()
}

fn status_from(obj: &Obj, mode: Mode) -> Result<TaskStatus, FieldError> {
    let version = obj.version();
    let state = match state_at(obj, "state", mode)? {
        Some(state) => state,
        None if mode == Mode::Lenient => TaskState::Unknown,
        None => return Err(FieldError::new(obj.at("state"), "required")),
    };
    Ok(TaskStatus {
        state,
        message: match obj.get("message") {
            Some(value) => Some(message_from(value, &obj.at("message"), version, mode)?),
            None => None,
        },
        timestamp: obj.opt_string("timestamp")?,
    })
}

fn task_to(task: &Task, version: Version) -> Value {
    let mut out = Out::new();
    if version == Version::V0_3 {
        out.put("kind", "task");
    }
    out.put("id", task.id.clone());
    match version {
        Version::V0_3 => out.put("contextId", task.context_id.clone()),
        Version::V1_0 => out.nonempty("contextId", &task.context_id),
    };
    out.put("status", status_to(&task.status, version));
    if !task.artifacts.is_empty() {
        out.put(
            "artifacts",
            task.artifacts
                .iter()
                .map(|artifact| artifact_to(artifact, version))
                .collect::<Vec<_>>(),
        );
    }
    if !task.history.is_empty() {
        out.put(
            "history",
            task.history
                .iter()
                .map(|message| message_to(message, version))
                .collect::<Vec<_>>(),
        );
    }
    out.meta("metadata", task.metadata.as_ref());
    out.done()
}

fn task_from(value: &Value, path: &str, version: Version, mode: Mode) -> Result<Task, FieldError> {
    let obj = Obj::of(value, path, version)?;
    expect_kind(&obj, "task")?;
    let status = match obj.object("status")? {
        Some(status) => status_from(&status, mode)?,
        None if mode == Mode::Lenient => TaskStatus::new(TaskState::Unknown),
        None => return Err(FieldError::new(obj.at("status"), "required")),
    };
    Ok(Task {
        id: obj.string("id", mode)?,
        context_id: obj.string("contextId", Mode::Lenient)?,
        status,
        history: obj.each("history", |value, path| {
            message_from(value, path, version, mode)
        })?,
        artifacts: obj.each("artifacts", |value, path| {
            artifact_from(value, path, version, mode)
        })?,
        metadata: obj.metadata("metadata")?,
    })
}

impl Wire for Task {
    fn to_wire(&self, version: Version) -> Value {
        task_to(self, version)
    }

    /// Lenient, as for a task an agent returned: missing ids are empty, a missing or unknown
    /// state is `unknown`, and the messages inside are read as [`Message::from_wire`] does.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        task_from(value, "", version, Mode::Lenient)
    }
}

impl Wire for TaskStatus {
    fn to_wire(&self, version: Version) -> Value {
        status_to(self, version)
    }

    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        status_from(&Obj::of(value, "", version)?, Mode::Lenient)
    }
}

// ---------------------------------------------------------------------------------------------
// Artifacts

fn artifact_to(artifact: &Artifact, version: Version) -> Value {
    let mut out = Out::new();
    out.put("artifactId", artifact.artifact_id.clone())
        .opt("name", artifact.name.as_ref())
        .opt("description", artifact.description.as_ref())
        .put(
            "parts",
            artifact
                .parts
                .iter()
                .map(|part| part_to(part, version))
                .collect::<Vec<_>>(),
        )
        .meta("metadata", artifact.metadata.as_ref())
        .list("extensions", &artifact.extensions);
    out.done()
}

fn artifact_from(
    value: &Value,
    path: &str,
    version: Version,
    mode: Mode,
) -> Result<Artifact, FieldError> {
    let obj = Obj::of(value, path, version)?;
    Ok(Artifact {
        artifact_id: obj.string("artifactId", mode)?,
        name: obj.opt_string("name")?,
        description: obj.opt_string("description")?,
        parts: parts_from(&obj, version, mode)?,
        metadata: obj.metadata("metadata")?,
        extensions: obj.strings("extensions")?,
    })
}

impl Wire for Artifact {
    fn to_wire(&self, version: Version) -> Value {
        artifact_to(self, version)
    }

    /// Lenient: a missing `artifactId` is empty, missing parts an empty list.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        artifact_from(value, "", version, Mode::Lenient)
    }
}

// ---------------------------------------------------------------------------------------------
// Stream events and results

fn status_update_to(update: &TaskStatusUpdate, version: Version) -> Value {
    let mut out = Out::new();
    if version == Version::V0_3 {
        out.put("kind", "status-update");
    }
    out.put("taskId", update.task_id.clone())
        .put("contextId", update.context_id.clone())
        .put("status", status_to(&update.status, version));
    if version == Version::V0_3 {
        out.put("final", update.is_final);
    }
    out.meta("metadata", update.metadata.as_ref());
    out.done()
}

fn status_update_from(obj: &Obj, mode: Mode) -> Result<TaskStatusUpdate, FieldError> {
    expect_kind(obj, "status-update")?;
    let status = status_from(&obj.required_object("status")?, mode)?;
    let is_final = match obj.version() {
        Version::V0_3 => obj.bool("final")?,
        Version::V1_0 => status.state.is_terminal() || status.state.is_interrupted(),
    };
    Ok(TaskStatusUpdate {
        task_id: obj.string("taskId", mode)?,
        context_id: obj.string("contextId", mode)?,
        status,
        is_final,
        metadata: obj.metadata("metadata")?,
    })
}

fn artifact_update_to(update: &TaskArtifactUpdate, version: Version) -> Value {
    let mut out = Out::new();
    if version == Version::V0_3 {
        out.put("kind", "artifact-update");
    }
    out.put("taskId", update.task_id.clone())
        .put("contextId", update.context_id.clone())
        .put("artifact", artifact_to(&update.artifact, version))
        .put("append", update.append)
        .put("lastChunk", update.last_chunk)
        .meta("metadata", update.metadata.as_ref());
    out.done()
}

fn artifact_update_from(obj: &Obj, mode: Mode) -> Result<TaskArtifactUpdate, FieldError> {
    expect_kind(obj, "artifact-update")?;
    let artifact = obj
        .get("artifact")
        .ok_or_else(|| FieldError::new(obj.at("artifact"), "required"))?;
    Ok(TaskArtifactUpdate {
        task_id: obj.string("taskId", mode)?,
        context_id: obj.string("contextId", mode)?,
        artifact: artifact_from(artifact, &obj.at("artifact"), obj.version(), mode)?,
        append: obj.bool("append")?,
        last_chunk: obj.bool("lastChunk")?,
        metadata: obj.metadata("metadata")?,
    })
}

/// Which v1.0 oneof member an object holds, of `names`; an error for none or several.
fn oneof<'a>(
    obj: &Obj<'a>,
    names: &[&'static str],
) -> Result<(&'static str, &'a Value), FieldError> {
    let present: Vec<(&'static str, &Value)> = names
        .iter()
        .filter_map(|name| obj.get(name).map(|value| (*name, value)))
        .collect();
    match present.as_slice() {
        [one] => Ok(*one),
        [] => Err(FieldError::new(
            obj.path(),
            format!("must hold one of {}", names.join(", ")),
        )),
        many => Err(FieldError::new(
            obj.path(),
            format!(
                "must hold exactly one of {}, not {}",
                names.join(", "),
                many.iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        )),
    }
}

/// The v0.3 `kind` of a result object, or what its fields imply when it has none.
fn v03_kind(obj: &Obj) -> Result<String, FieldError> {
    match obj.get("kind") {
        Some(Value::String(name)) => Ok(name.clone()),
        Some(other) => Err(FieldError::new(
            obj.at("kind"),
            format!("must be a string, not {}", kind(other)),
        )),
        None if obj.get("artifact").is_some() => Ok("artifact-update".into()),
        None if obj.get("status").is_some()
            && obj.get("taskId").is_some()
            && obj.get("id").is_none() =>
        {
            Ok("status-update".into())
        }
        None if obj.get("status").is_some() => Ok("task".into()),
        None => Ok("message".into()),
    }
}

impl Wire for StreamEvent {
    /// v1.0: a `StreamResponse` (`{"task": …}`, `{"message": …}`, `{"statusUpdate": …}`,
    /// `{"artifactUpdate": …}`); v0.3: the object itself, with its `kind`.
    fn to_wire(&self, version: Version) -> Value {
        let (member, inner) = match self {
            StreamEvent::Task(task) => ("task", task_to(task, version)),
            StreamEvent::Message(message) => ("message", message_to(message, version)),
            StreamEvent::StatusUpdate(update) => {
                ("statusUpdate", status_update_to(update, version))
            }
            StreamEvent::ArtifactUpdate(update) => {
                ("artifactUpdate", artifact_update_to(update, version))
            }
        };
        match version {
            Version::V0_3 => inner,
            Version::V1_0 => {
                let mut wrapper = Map::new();
                wrapper.insert(member.into(), inner);
                Value::Object(wrapper)
            }
        }
    }

    /// Lenient. A v0.3 object without `kind` is recognised by its fields.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = Obj::of(value, "", version)?;
        let mode = Mode::Lenient;
        match version {
            Version::V1_0 => {
                let (member, inner) =
                    oneof(&obj, &["task", "message", "statusUpdate", "artifactUpdate"])?;
                Ok(match member {
                    "task" => StreamEvent::Task(task_from(inner, member, version, mode)?),
                    "message" => StreamEvent::Message(message_from(inner, member, version, mode)?),
                    "statusUpdate" => StreamEvent::StatusUpdate(status_update_from(
                        &Obj::of(inner, member, version)?,
                        mode,
                    )?),
                    _ => StreamEvent::ArtifactUpdate(artifact_update_from(
                        &Obj::of(inner, member, version)?,
                        mode,
                    )?),
                })
            }
            Version::V0_3 => Ok(match v03_kind(&obj)?.as_str() {
                "task" => StreamEvent::Task(task_from(value, "", version, mode)?),
                "message" => StreamEvent::Message(message_from(value, "", version, mode)?),
                "status-update" => StreamEvent::StatusUpdate(status_update_from(&obj, mode)?),
                "artifact-update" => StreamEvent::ArtifactUpdate(artifact_update_from(&obj, mode)?),
                other => {
                    return Err(FieldError::new(
                        "kind",
                        format!(
                            "unknown event kind {other:?}; must be \"task\", \"message\", \"status-update\" or \"artifact-update\""
                        ),
                    ));
                }
            }),
        }
    }
}

impl Wire for SendMessageResult {
    /// v1.0: a `SendMessageResponse` (`{"task": …}` or `{"message": …}`); v0.3: the object itself.
    fn to_wire(&self, version: Version) -> Value {
        match self {
            SendMessageResult::Task(task) => StreamEvent::Task(task.clone()).to_wire(version),
            SendMessageResult::Message(message) => {
                StreamEvent::Message(message.clone()).to_wire(version)
            }
        }
    }

    /// Lenient, like [`Task::from_wire`] and [`Message::from_wire`].
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = Obj::of(value, "", version)?;
        let mode = Mode::Lenient;
        let member = match version {
            Version::V1_0 => oneof(&obj, &["task", "message"])?.0.to_string(),
            Version::V0_3 => v03_kind(&obj)?,
        };
        let inner = match version {
            Version::V1_0 => obj.get(&member).unwrap_or(value),
            Version::V0_3 => value,
        };
        let path = if version == Version::V1_0 {
            member.as_str()
        } else {
            ""
        };
        match member.as_str() {
            "task" => Ok(SendMessageResult::Task(task_from(
                inner, path, version, mode,
            )?)),
            "message" => Ok(SendMessageResult::Message(message_from(
                inner, path, version, mode,
            )?)),
            other => Err(FieldError::new(
                "kind",
                format!("must be \"task\" or \"message\", not {other:?}"),
            )),
        }
    }
}

impl Wire for ListTasksResult {
    /// `{"tasks", "nextPageToken", "pageSize", "totalSize"}`, all always written. (v0.3 has no
    /// JSON-RPC `tasks/list`; its form here is the same object with v0.3 tasks.)
    fn to_wire(&self, version: Version) -> Value {
        let mut out = Out::new();
        out.put(
            "tasks",
            self.tasks
                .iter()
                .map(|task| task_to(task, version))
                .collect::<Vec<_>>(),
        )
        .put("nextPageToken", self.next_page_token.clone())
        .put("pageSize", self.page_size)
        .put("totalSize", self.total_size);
        out.done()
    }

    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = Obj::of(value, "", version)?;
        let count =
            |name: &str| -> Result<u32, FieldError> { Ok(obj.opt_count(name)?.unwrap_or(0)) };
        Ok(ListTasksResult {
            tasks: obj.each("tasks", |value, path| {
                task_from(value, path, version, Mode::Lenient)
            })?,
            next_page_token: obj.string("nextPageToken", Mode::Lenient)?,
            page_size: count("pageSize")?,
            total_size: count("totalSize")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Request params (read strictly)

fn message_param(obj: &Obj) -> Result<Message, FieldError> {
    let value = obj
        .get("message")
        .ok_or_else(|| FieldError::new(obj.at("message"), "required"))?;
    message_from(value, &obj.at("message"), obj.version(), Mode::Strict)
}

impl Wire for SendMessageParams {
    /// v1.0 `SendMessageRequest` / v0.3 `MessageSendParams`. `blocking` is written as v1.0
    /// `returnImmediately` (its negation) or v0.3 `blocking`.
    fn to_wire(&self, version: Version) -> Value {
        let mut out = Out::new();
        out.put("message", message_to(&self.message, version));
        if let Some(config) = &self.configuration {
            let mut inner = Out::new();
            inner.list("acceptedOutputModes", &config.accepted_output_modes);
            if let Some(length) = config.history_length {
                inner.put("historyLength", length);
            }
            match version {
                Version::V1_0 => inner.put("returnImmediately", !config.blocking),
                Version::V0_3 => inner.put("blocking", config.blocking),
            };
            if let Some(push) = &config.push_notification {
                match version {
                    Version::V1_0 => inner.put(
                        "taskPushNotificationConfig",
                        push_config_to(push, "", version),
                    ),
                    Version::V0_3 => {
                        inner.put("pushNotificationConfig", push_config_to(push, "", version))
                    }
                };
            }
            out.put("configuration", inner.done());
        }
        out.meta("metadata", self.metadata.as_ref());
        out.done()
    }

    /// Strict: `message` with a `messageId`, a valid `role` and at least one part is required;
    /// every field present must have its type. `tenant` (v1.0) is ignored.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        let message = message_param(&obj)?;
        let configuration = match obj.object("configuration")? {
            None => None,
            Some(config) => {
                let blocking = match version {
                    Version::V1_0 => !config.bool("returnImmediately")?,
                    Version::V0_3 => config.opt_bool("blocking")?.unwrap_or(true),
                };
                let push = match version {
                    Version::V1_0 => "taskPushNotificationConfig",
                    Version::V0_3 => "pushNotificationConfig",
                };
                let push_notification = match config.object(push)? {
                    Some(push) => Some(push_config_from(&push)?),
                    None => None,
                };
                Some(SendMessageConfiguration {
                    accepted_output_modes: config.strings("acceptedOutputModes")?,
                    history_length: config.opt_count("historyLength")?,
                    blocking,
                    push_notification,
                })
            }
        };
        Ok(SendMessageParams {
            message,
            configuration,
            metadata: obj.metadata("metadata")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Push notification configs

/// A config as `version` writes it: v1.0 the flat `TaskPushNotificationConfig` (with `taskId`
/// unless `task_id` is empty), v0.3 `PushNotificationConfig`.
fn push_config_to(config: &PushNotificationConfig, task_id: &str, version: Version) -> Value {
    let mut out = Out::new();
    out.opt("id", config.id.as_ref());
    if version == Version::V1_0 && !task_id.is_empty() {
        out.put("taskId", task_id);
    }
    out.put("url", config.url.clone())
        .opt("token", config.token.as_ref());
    if let Some(auth) = &config.authentication {
        let mut inner = Out::new();
        match version {
            Version::V1_0 => inner.put("scheme", auth.scheme.clone()),
            Version::V0_3 => inner.put("schemes", vec![auth.scheme.clone()]),
        };
        inner.opt("credentials", auth.credentials.as_ref());
        out.put("authentication", inner.done());
    }
    out.done()
}

/// Strict: a non-empty `url`; v1.0 `authentication.scheme` or v0.3 `authentication.schemes`
/// (at least one; the first is used).
fn push_config_from(obj: &Obj) -> Result<PushNotificationConfig, FieldError> {
    let authentication = match obj.object("authentication")? {
        None => None,
        Some(auth) => {
            let scheme = match obj.version() {
                Version::V1_0 => auth.string("scheme", Mode::Strict)?,
                Version::V0_3 => auth.strings("schemes")?.into_iter().next().ok_or_else(|| {
                    FieldError::new(auth.at("schemes"), "at least one scheme is required")
                })?,
            };
            Some(PushAuthentication {
                scheme,
                credentials: auth.opt_string("credentials")?,
            })
        }
    };
    Ok(PushNotificationConfig {
        id: obj.opt_string("id")?.filter(|id| !id.is_empty()),
        url: obj.string("url", Mode::Strict)?,
        token: obj.opt_string("token")?.filter(|token| !token.is_empty()),
        authentication,
    })
}

impl Wire for TaskPushNotificationConfig {
    /// v1.0: the flat `TaskPushNotificationConfig`; v0.3: `{taskId, pushNotificationConfig}`.
    fn to_wire(&self, version: Version) -> Value {
        match version {
            Version::V1_0 => push_config_to(&self.config, &self.task_id, version),
            Version::V0_3 => Out::new()
                .put("taskId", self.task_id.clone())
                .put(
                    "pushNotificationConfig",
                    push_config_to(&self.config, "", version),
                )
                .done(),
        }
    }

    /// Strict: a task id and a config with its `url`.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        Ok(match version {
            Version::V1_0 => TaskPushNotificationConfig {
                task_id: obj.string("taskId", Mode::Strict)?,
                config: push_config_from(&obj)?,
            },
            Version::V0_3 => TaskPushNotificationConfig {
                task_id: obj.string("taskId", Mode::Strict)?,
                config: push_config_from(&obj.required_object("pushNotificationConfig")?)?,
            },
        })
    }
}

impl Wire for PushConfigRef {
    fn to_wire(&self, version: Version) -> Value {
        let mut out = Out::new();
        match version {
            Version::V1_0 => out
                .put("taskId", self.task_id.clone())
                .opt("id", self.config_id.as_ref()),
            Version::V0_3 => out
                .put("id", self.task_id.clone())
                .opt("pushNotificationConfigId", self.config_id.as_ref()),
        };
        out.done()
    }

    /// Strict: the task's id (v1.0 `taskId`, v0.3 `id`); the config's id when given (v1.0
    /// `id`, v0.3 `pushNotificationConfigId`).
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        let (task, config) = match version {
            Version::V1_0 => ("taskId", "id"),
            Version::V0_3 => ("id", "pushNotificationConfigId"),
        };
        Ok(PushConfigRef {
            task_id: obj.string(task, Mode::Strict)?,
            config_id: obj.opt_string(config)?.filter(|id| !id.is_empty()),
        })
    }
}

impl Wire for PushConfigList {
    /// v1.0 `{configs, nextPageToken}` (one page: the token is empty); v0.3 the bare array.
    fn to_wire(&self, version: Version) -> Value {
        let configs: Vec<Value> = self.configs.iter().map(|c| c.to_wire(version)).collect();
        match version {
            Version::V1_0 => Out::new()
                .put("configs", configs)
                .put("nextPageToken", "")
                .done(),
            Version::V0_3 => Value::Array(configs),
        }
    }

    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let items = match (version, value) {
            (Version::V0_3, Value::Array(items)) => items.clone(),
            _ => Obj::of(value, "", version)?
                .array("configs")?
                .cloned()
                .unwrap_or_default(),
        };
        let configs = items
            .iter()
            .map(|item| TaskPushNotificationConfig::from_wire(version, item))
            .collect::<Result<_, _>>()?;
        Ok(PushConfigList { configs })
    }
}

/// Params as an object; absent params (`null`) read as an empty object, so that the first
/// missing required field is what the error names.
fn params_obj(value: &Value, version: Version) -> Result<Obj<'_>, FieldError> {
    static EMPTY: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| Value::Object(Map::new()));
    if value.is_null() {
        return Obj::of(&EMPTY, "", version);
    }
    if value.is_array() {
        return Err(FieldError::new(
            "",
            "must be an object: A2A methods take named parameters, not a positional array",
        ));
    }
    Obj::of(value, "", version)
}

impl Wire for GetTaskParams {
    fn to_wire(&self, _version: Version) -> Value {
        let mut out = Out::new();
        out.put("id", self.id.clone());
        if let Some(length) = self.history_length {
            out.put("historyLength", length);
        }
        out.done()
    }

    /// Strict: a non-empty `id`; `historyLength`, if given, a non-negative integer.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        Ok(GetTaskParams {
            id: obj.string("id", Mode::Strict)?,
            history_length: obj.opt_count("historyLength")?,
        })
    }
}

impl Wire for CancelTaskParams {
    fn to_wire(&self, _version: Version) -> Value {
        let mut out = Out::new();
        out.put("id", self.id.clone())
            .meta("metadata", self.metadata.as_ref());
        out.done()
    }

    /// Strict: a non-empty `id`.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        Ok(CancelTaskParams {
            id: obj.string("id", Mode::Strict)?,
            metadata: obj.metadata("metadata")?,
        })
    }
}

impl Wire for SubscribeParams {
    fn to_wire(&self, _version: Version) -> Value {
        let mut out = Out::new();
        out.put("id", self.id.clone());
        out.done()
    }

    /// Strict: a non-empty `id`.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        Ok(SubscribeParams {
            id: obj.string("id", Mode::Strict)?,
        })
    }
}

impl Wire for ListTasksParams {
    fn to_wire(&self, version: Version) -> Value {
        let mut out = Out::new();
        out.opt("contextId", self.context_id.as_ref());
        if let Some(state) = self.status {
            out.put("status", state_name(state, version));
        }
        if let Some(size) = self.page_size {
            out.put("pageSize", size);
        }
        out.opt("pageToken", self.page_token.as_ref());
        if let Some(length) = self.history_length {
            out.put("historyLength", length);
        }
        out.opt("statusTimestampAfter", self.status_timestamp_after.as_ref());
        if self.include_artifacts {
            out.put("includeArtifacts", true);
        }
        out.done()
    }

    /// Strict: `status` a known state (`TASK_STATE_UNSPECIFIED`: no filter), `pageSize` 1 to
    /// 100, `historyLength` non-negative, `statusTimestampAfter` an RFC 3339 timestamp.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = params_obj(value, version)?;
        let page_size = match obj.opt_int("pageSize")? {
            None => None,
            Some(size) if (1..=i64::from(ListTasksParams::MAX_PAGE_SIZE)).contains(&size) => {
                Some(size as u32)
            }
            Some(size) => {
                return Err(FieldError::new(
                    "pageSize",
                    format!("must be between 1 and 100 inclusive, got {size}"),
                ));
            }
        };
        let after = obj.opt_string("statusTimestampAfter")?;
        if let Some(after) = &after
            && !crate::time::is_timestamp(after)
        {
            return Err(FieldError::new(
                "statusTimestampAfter",
                format!(
                    "must be an RFC 3339 timestamp such as 2025-10-28T10:30:00Z, got {after:?}"
                ),
            ));
        }
        Ok(ListTasksParams {
            context_id: obj.opt_string("contextId")?,
            status: state_at(&obj, "status", Mode::Strict)?
                .filter(|state| *state != TaskState::Unknown),
            page_size,
            page_token: obj.opt_string("pageToken")?,
            history_length: obj.opt_count("historyLength")?,
            status_timestamp_after: after,
            include_artifacts: obj.bool("includeArtifacts")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Agent card

fn skill_to(skill: &AgentSkill) -> Value {
    let mut out = Out::new();
    out.put("id", skill.id.clone())
        .put("name", skill.name.clone())
        .put("description", skill.description.clone())
        .put("tags", skill.tags.clone())
        .list("examples", &skill.examples)
        .list("inputModes", &skill.input_modes)
        .list("outputModes", &skill.output_modes);
    out.done()
}

fn skill_from(value: &Value, path: &str, version: Version) -> Result<AgentSkill, FieldError> {
    let obj = Obj::of(value, path, version)?;
    Ok(AgentSkill {
        id: obj.string("id", Mode::Lenient)?,
        name: obj.string("name", Mode::Lenient)?,
        description: obj.string("description", Mode::Lenient)?,
        tags: obj.strings("tags")?,
        examples: obj.strings("examples")?,
        input_modes: obj.strings("inputModes")?,
        output_modes: obj.strings("outputModes")?,
    })
}

/// The version of an A2A 0.3 card's `protocolVersion` (`0.3.0`) as `Major.Minor`.
fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

impl Wire for AgentCard {
    /// v1.0: the `AgentCard` message. v0.3: `protocolVersion: "0.3.0"`, the first interface as
    /// `url` + `preferredTransport`, all of them as `additionalInterfaces` when there is more than
    /// one distinct URL/binding pair, `supportsAuthenticatedExtendedCard` for the extended card.
    fn to_wire(&self, version: Version) -> Value {
        let mut out = Out::new();
        let mut capabilities = Out::new();
        capabilities
            .put("streaming", self.capabilities.streaming)
            .put("pushNotifications", self.capabilities.push_notifications);
        match version {
            Version::V1_0 => {
                capabilities.put("extendedAgentCard", self.capabilities.extended_agent_card);
                let interfaces: Vec<Value> = self
                    .interfaces
                    .iter()
                    .map(|interface| {
                        Out::new()
                            .put("url", interface.url.clone())
                            .put("protocolBinding", interface.protocol_binding.clone())
                            .put("protocolVersion", interface.protocol_version.clone())
                            .done()
                    })
                    .collect();
                out.put("name", self.name.clone())
                    .put("description", self.description.clone())
                    .put("supportedInterfaces", interfaces);
            }
            Version::V0_3 => {
                capabilities.put(
                    "stateTransitionHistory",
                    self.capabilities.state_transition_history,
                );
                let main = self.interfaces.first();
                out.put("protocolVersion", "0.3.0")
                    .put("name", self.name.clone())
                    .put("description", self.description.clone())
                    .put("url", main.map(|i| i.url.clone()).unwrap_or_default())
                    .put(
                        "preferredTransport",
                        main.map(|i| i.protocol_binding.clone())
                            .unwrap_or_else(|| "JSONRPC".to_string()),
                    );
                let mut distinct: Vec<(&str, &str)> = Vec::new();
                for interface in &self.interfaces {
                    let pair = (interface.url.as_str(), interface.protocol_binding.as_str());
                    if !distinct.contains(&pair) {
                        distinct.push(pair);
                    }
                }
                if distinct.len() > 1 {
                    let additional: Vec<Value> = distinct
                        .into_iter()
                        .map(|(url, transport)| {
                            Out::new()
                                .put("url", url)
                                .put("transport", transport)
                                .done()
                        })
                        .collect();
                    out.put("additionalInterfaces", additional);
                }
            }
        }
        if let Some(provider) = &self.provider {
            out.put(
                "provider",
                Out::new()
                    .put("organization", provider.organization.clone())
                    .put("url", provider.url.clone())
                    .done(),
            );
        }
        out.put("version", self.version.clone())
            .opt("documentationUrl", self.documentation_url.as_ref())
            .opt("iconUrl", self.icon_url.as_ref())
            .put("capabilities", capabilities.done())
            .put("defaultInputModes", self.default_input_modes.clone())
            .put("defaultOutputModes", self.default_output_modes.clone())
            .put(
                "skills",
                self.skills.iter().map(skill_to).collect::<Vec<_>>(),
            );
        if version == Version::V0_3 && self.capabilities.extended_agent_card {
            out.put("supportsAuthenticatedExtendedCard", true);
        }
        if !self.security_schemes.is_empty() {
            let schemes: Map<String, Value> = self
                .security_schemes
                .iter()
                .map(|(name, scheme)| (name.clone(), scheme_to(scheme, version)))
                .collect();
            out.put("securitySchemes", Value::Object(schemes));
            let requirements: Vec<Value> = self
                .security_schemes
                .iter()
                .map(|(name, _)| match version {
                    Version::V1_0 => json!({"schemes": {name.clone(): {"list": []}}}),
                    Version::V0_3 => json!({name.clone(): []}),
                })
                .collect();
            let key = match version {
                Version::V1_0 => "securityRequirements",
                Version::V0_3 => "security",
            };
            out.put(key, requirements);
        }
        out.done()
    }

    /// Lenient: missing strings are empty, missing lists empty, missing capabilities off.
    fn from_wire(version: Version, value: &Value) -> Result<Self, FieldError> {
        let obj = Obj::of(value, "", version)?;
        let capabilities = obj.object("capabilities")?;
        let flag = |name: &str| -> Result<bool, FieldError> {
            match &capabilities {
                Some(capabilities) => capabilities.bool(name),
                None => Ok(false),
            }
        };
        let interfaces = match version {
            Version::V1_0 => obj.each("supportedInterfaces", |value, path| {
                let interface = Obj::of(value, path, version)?;
                Ok(AgentInterface {
                    url: interface.string("url", Mode::Lenient)?,
                    protocol_binding: interface.string("protocolBinding", Mode::Lenient)?,
                    protocol_version: interface.string("protocolVersion", Mode::Lenient)?,
                })
            })?,
            Version::V0_3 => {
                let protocol_version = major_minor(
                    &obj.opt_string("protocolVersion")?
                        .unwrap_or_else(|| "0.3".to_string()),
                );
                let mut interfaces = Vec::new();
                if let Some(url) = obj.opt_string("url")? {
                    interfaces.push(AgentInterface {
                        url,
                        protocol_binding: obj
                            .opt_string("preferredTransport")?
                            .unwrap_or_else(|| "JSONRPC".to_string()),
                        protocol_version: protocol_version.clone(),
                    });
                }
                for interface in obj.each("additionalInterfaces", |value, path| {
                    let interface = Obj::of(value, path, version)?;
                    Ok(AgentInterface {
                        url: interface.string("url", Mode::Lenient)?,
                        protocol_binding: interface.string("transport", Mode::Lenient)?,
                        protocol_version: protocol_version.clone(),
                    })
                })? {
                    if !interfaces.contains(&interface) {
                        interfaces.push(interface);
                    }
                }
                interfaces
            }
        };
        let provider = match obj.object("provider")? {
            None => None,
            Some(provider) => Some(AgentProvider {
                organization: provider.string("organization", Mode::Lenient)?,
                url: provider.string("url", Mode::Lenient)?,
            }),
        };
        Ok(AgentCard {
            name: obj.string("name", Mode::Lenient)?,
            description: obj.string("description", Mode::Lenient)?,
            version: obj.string("version", Mode::Lenient)?,
            interfaces,
            provider,
            documentation_url: obj.opt_string("documentationUrl")?,
            icon_url: obj.opt_string("iconUrl")?,
            capabilities: AgentCapabilities {
                streaming: flag("streaming")?,
                push_notifications: flag("pushNotifications")?,
                state_transition_history: flag("stateTransitionHistory")?,
                extended_agent_card: match version {
                    Version::V1_0 => flag("extendedAgentCard")?,
                    Version::V0_3 => obj.bool("supportsAuthenticatedExtendedCard")?,
                },
            },
            default_input_modes: obj.strings("defaultInputModes")?,
            default_output_modes: obj.strings("defaultOutputModes")?,
            skills: obj.each("skills", |value, path| skill_from(value, path, version))?,
            security_schemes: schemes_from(value, version),
        })
    }
}

/// One security scheme as `version` writes it: v1.0 the `SecurityScheme` message's one field,
/// v0.3 the OpenAPI object with its `type`.
fn scheme_to(scheme: &SecurityScheme, version: Version) -> Value {
    match (scheme, version) {
        (SecurityScheme::Bearer, Version::V1_0) => {
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}})
        }
        (SecurityScheme::Bearer, Version::V0_3) => json!({"type": "http", "scheme": "bearer"}),
        (SecurityScheme::ApiKeyHeader { header }, Version::V1_0) => {
            json!({"apiKeySecurityScheme": {"location": "header", "name": header}})
        }
        (SecurityScheme::ApiKeyHeader { header }, Version::V0_3) => {
            json!({"type": "apiKey", "in": "header", "name": header})
        }
    }
}

/// The bearer and header API-key schemes a card declares (others are passed over: a client of
/// this crate cannot present them).
fn schemes_from(card: &Value, version: Version) -> Vec<(String, SecurityScheme)> {
    let Some(schemes) = card.get("securitySchemes").and_then(Value::as_object) else {
        return Vec::new();
    };
    let text =
        |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    schemes
        .iter()
        .filter_map(|(name, value)| {
            let scheme = match version {
                Version::V1_0 => {
                    if let Some(http) = value.get("httpAuthSecurityScheme") {
                        text(http, "scheme")
                            .filter(|s| s.eq_ignore_ascii_case("bearer"))
                            .map(|_| SecurityScheme::Bearer)
                    } else {
                        let key = value.get("apiKeySecurityScheme")?;
                        (text(key, "location")?.eq_ignore_ascii_case("header"))
                            .then(|| text(key, "name"))
                            .flatten()
                            .map(|header| SecurityScheme::ApiKeyHeader { header })
                    }
                }
                Version::V0_3 => match text(value, "type")?.as_str() {
                    "http" => text(value, "scheme")
                        .filter(|s| s.eq_ignore_ascii_case("bearer"))
                        .map(|_| SecurityScheme::Bearer),
                    "apiKey" => (text(value, "in")?.eq_ignore_ascii_case("header"))
                        .then(|| text(value, "name"))
                        .flatten()
                        .map(|header| SecurityScheme::ApiKeyHeader { header }),
                    _ => None,
                },
            };
            Some((name.clone(), scheme?))
        })
        .collect()
}

impl AgentCard {
    /// The card as `/.well-known/agent-card.json` serves it to a client that names no version:
    /// the A2A 1.0 card with the A2A 0.3 card's fields beside it (`protocolVersion`, `url`,
    /// `preferredTransport`, `additionalInterfaces`, `security`, the 0.3 capability flags, and
    /// each security scheme's `type` form merged into its 1.0 form), so that a client of either version finds the
    /// transport it speaks and the credentials it needs. Each version's reader passes over
    /// the other's fields.
    pub fn discovery_json(&self) -> Value {
        let mut merged = self.to_wire(Version::V1_0);
        let legacy = self.to_wire(Version::V0_3);
        let (Value::Object(merged_fields), Value::Object(legacy_fields)) = (&mut merged, legacy)
        else {
            return merged;
        };
        for (key, value) in legacy_fields {
            match (key.as_str(), merged_fields.get_mut(&key)) {
                ("capabilities", Some(Value::Object(capabilities))) => {
                    if let Value::Object(legacy_capabilities) = value {
                        for (name, flag) in legacy_capabilities {
                            capabilities.entry(name).or_insert(flag);
                        }
                    }
                }
                ("securitySchemes", Some(Value::Object(schemes))) => {
                    let Value::Object(legacy_schemes) = value else {
                        continue;
                    };
                    for (name, legacy_scheme) in legacy_schemes {
                        if let (Some(Value::Object(scheme)), Value::Object(legacy_scheme)) =
                            (schemes.get_mut(&name), legacy_scheme)
                        {
                            scheme.extend(legacy_scheme);
                        }
                    }
                }
                (_, Some(_)) => {}
                (_, None) => {
                    merged_fields.insert(key, value);
                }
            }
        }
        merged
    }
}
