//! The version-neutral A2A model: what a task, a message, a stream event and an agent card *are*,
//! whichever protocol version carried them.
//!
//! Every type here converts to and from both wire versions through [`crate::Wire`]. Where the two
//! versions disagree, the model holds the richer form and the narrower version drops or folds what
//! it cannot say; each such case is documented on the field.
//!
//! Conventions:
//! - An absent optional string is `None`, never `Some("")`: readers turn empty strings into `None`.
//! - `metadata` is always a JSON object ([`Metadata`]); both versions require that.
//! - Timestamps are RFC 3339 strings in UTC (`2025-10-28T10:30:00.000Z`);
//!   [`crate::time::format_timestamp_millis`] makes one.

use serde_json::{Map, Value};

use crate::RpcError;

/// A free-form key/value map (`google.protobuf.Struct` in v1.0, `{ [k: string]: any }` in v0.3).
pub type Metadata = Map<String, Value>;

/// A unit of work the agent tracks: its status, the messages exchanged and what it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Server-generated task id. Required on the wire.
    pub id: String,
    /// The conversation this task belongs to. Required in v0.3; v1.0 omits it when empty.
    pub context_id: String,
    pub status: TaskStatus,
    /// Messages exchanged while the task ran, oldest first. Omitted from the wire when empty.
    pub history: Vec<Message>,
    /// What the task produced. Omitted from the wire when empty (as `ListTasks` requires when
    /// artifacts were not asked for).
    pub artifacts: Vec<Artifact>,
    pub metadata: Option<Metadata>,
}

impl Task {
    /// A task with no history, artifacts or metadata.
    pub fn new(id: impl Into<String>, context_id: impl Into<String>, status: TaskStatus) -> Self {
        Task {
            id: id.into(),
            context_id: context_id.into(),
            status,
            history: Vec::new(),
            artifacts: Vec::new(),
            metadata: None,
        }
    }
}

/// Where a task stands, with an optional message from the agent (for `input-required`, the
/// question) and when that was recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStatus {
    pub state: TaskState,
    pub message: Option<Message>,
    /// RFC 3339, UTC. Carried as given; see [`crate::time`] to make or read one.
    pub timestamp: Option<String>,
}

impl TaskStatus {
    /// A status with just a state.
    pub fn new(state: TaskState) -> Self {
        TaskStatus {
            state,
            message: None,
            timestamp: None,
        }
    }
}

/// The lifecycle state of a task.
///
/// | neutral | v0.3 | v1.0 |
/// |---|---|---|
/// | `Submitted` | `submitted` | `TASK_STATE_SUBMITTED` |
/// | `Working` | `working` | `TASK_STATE_WORKING` |
/// | `InputRequired` | `input-required` | `TASK_STATE_INPUT_REQUIRED` |
/// | `AuthRequired` | `auth-required` | `TASK_STATE_AUTH_REQUIRED` |
/// | `Completed` | `completed` | `TASK_STATE_COMPLETED` |
/// | `Failed` | `failed` | `TASK_STATE_FAILED` |
/// | `Canceled` | `canceled` | `TASK_STATE_CANCELED` |
/// | `Rejected` | `rejected` | `TASK_STATE_REJECTED` |
/// | `Unknown` | `unknown` | `TASK_STATE_UNSPECIFIED` |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
    Unknown,
}

impl TaskState {
    /// Every state, in the order of the table above.
    pub const ALL: [TaskState; 9] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
        TaskState::Unknown,
    ];

    /// The state's name as people read it, the v0.3 spelling: `input-required`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::AuthRequired => "auth-required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
            TaskState::Unknown => "unknown",
        }
    }

    /// Completed, failed, canceled or rejected: the task will never change again, accepts no
    /// further messages and cannot be canceled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input-required or auth-required: the task waits for the client. A blocking `SendMessage`
    /// returns at such a state, as it does at a terminal one.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// The error that names a state lives beside the states, so that `error` needs nothing of the
/// model.
impl RpcError {
    /// -32002: the task is in a state that cannot be canceled (typically terminal).
    pub fn task_not_cancelable(task_id: &str, state: TaskState) -> Self {
        let state = state.as_str();
        RpcError::a2a(
            crate::error::codes::TASK_NOT_CANCELABLE,
            format!("Task cannot be canceled: {task_id:?} is {state}"),
            "TASK_NOT_CANCELABLE",
            &[("taskId", task_id), ("state", state)],
        )
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The client: `"user"` in v0.3, `"ROLE_USER"` in v1.0.
    User,
    /// The agent: `"agent"` in v0.3, `"ROLE_AGENT"` in v1.0.
    Agent,
}

/// One unit of communication between client and agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Chosen by the message's author. Required in requests.
    pub message_id: String,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub role: Role,
    /// At least one part is required in requests.
    pub parts: Vec<Part>,
    pub metadata: Option<Metadata>,
    /// Other tasks this message refers to for context.
    pub reference_task_ids: Vec<String>,
    /// URIs of extensions present in this message.
    pub extensions: Vec<String>,
}

impl Message {
    /// A message with the given parts and nothing else set.
    pub fn new(message_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        Message {
            message_id: message_id.into(),
            context_id: None,
            task_id: None,
            role,
            parts,
            metadata: None,
            reference_task_ids: Vec::new(),
            extensions: Vec::new(),
        }
    }

    /// A message with one text part.
    pub fn text(message_id: impl Into<String>, role: Role, text: impl Into<String>) -> Self {
        Message::new(message_id, role, vec![Part::text(text)])
    }

    /// The text parts joined with no separator: what a person reading the message sees.
    pub fn joined_text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match &part.content {
                PartContent::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A piece of message or artifact content.
///
/// v1.0 lets every part carry a `filename` and a `mediaType`; v0.3 only has them on file parts
/// (`file.name`, `file.mimeType`). Written as v0.3, they are dropped from text and data parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub content: PartContent,
    /// MIME type of the content (v1.0 `mediaType`, v0.3 `file.mimeType`).
    pub media_type: Option<String>,
    /// v1.0 `filename`, v0.3 `file.name`.
    pub filename: Option<String>,
    pub metadata: Option<Metadata>,
}

/// What a part holds.
#[derive(Debug, Clone, PartialEq)]
pub enum PartContent {
    /// Plain text.
    Text(String),
    /// A file, inline or by reference.
    File(FileContent),
    /// Structured JSON. v1.0 allows any JSON value; v0.3 only an object, so a non-object value
    /// is written to v0.3 as `{"value": <value>}`.
    Data(Value),
}

/// A file's content: its bytes inline, or a URL to fetch them from.
#[derive(Debug, Clone, PartialEq)]
pub enum FileContent {
    /// The file's bytes (base64 on the wire: v1.0 `raw`, v0.3 `file.bytes`).
    Bytes(Vec<u8>),
    /// Where to fetch the file (v1.0 `url`, v0.3 `file.uri`).
    Uri(String),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::new(PartContent::Text(text.into()))
    }

    /// A structured data part.
    pub fn data(data: Value) -> Self {
        Part::new(PartContent::Data(data))
    }

    /// An inline file part.
    pub fn file_bytes(
        bytes: Vec<u8>,
        filename: Option<String>,
        media_type: Option<String>,
    ) -> Self {
        Part {
            filename,
            media_type,
            ..Part::new(PartContent::File(FileContent::Bytes(bytes)))
        }
    }

    /// A file part by reference.
    pub fn file_uri(
        uri: impl Into<String>,
        filename: Option<String>,
        media_type: Option<String>,
    ) -> Self {
        Part {
            filename,
            media_type,
            ..Part::new(PartContent::File(FileContent::Uri(uri.into())))
        }
    }

    /// A part with the given content and nothing else set.
    pub fn new(content: PartContent) -> Self {
        Part {
            content,
            media_type: None,
            filename: None,
            metadata: None,
        }
    }
}

/// Something a task produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    /// Unique within its task. Required.
    pub artifact_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub parts: Vec<Part>,
    pub metadata: Option<Metadata>,
    /// URIs of extensions present in this artifact.
    pub extensions: Vec<String>,
}

impl Artifact {
    /// An artifact with the given parts and nothing else set.
    pub fn new(artifact_id: impl Into<String>, parts: Vec<Part>) -> Self {
        Artifact {
            artifact_id: artifact_id.into(),
            name: None,
            description: None,
            parts,
            metadata: None,
            extensions: Vec::new(),
        }
    }
}

/// One event of a stream (`SendStreamingMessage` / `message/stream`, `SubscribeToTask` /
/// `tasks/resubscribe`).
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The task as it stands; the first event of a task stream.
    Task(Task),
    /// A direct reply; the only event of a message stream.
    Message(Message),
    StatusUpdate(TaskStatusUpdate),
    ArtifactUpdate(TaskArtifactUpdate),
}

impl StreamEvent {
    /// Whether the stream ends after this event: a message (a message stream holds exactly one),
    /// a task or status update in a terminal or interrupted state, or a status update marked
    /// final.
    pub fn ends_stream(&self) -> bool {
        match self {
            StreamEvent::Message(_) => true,
            StreamEvent::Task(task) => {
                task.status.state.is_terminal() || task.status.state.is_interrupted()
            }
            StreamEvent::StatusUpdate(update) => update.is_final,
            StreamEvent::ArtifactUpdate(_) => false,
        }
    }

    /// The task this event is about (`None` for a message without a task).
    pub fn task_id(&self) -> Option<&str> {
        match self {
            StreamEvent::Task(task) => Some(&task.id),
            StreamEvent::Message(message) => message.task_id.as_deref(),
            StreamEvent::StatusUpdate(update) => Some(&update.task_id),
            StreamEvent::ArtifactUpdate(update) => Some(&update.task_id),
        }
    }
}

/// A task's status changed.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// The last event of the stream. v0.3 carries it as `final`. v1.0 dropped the field (the
    /// stream simply closes): it is not written there, and reading v1.0 sets it when the state
    /// is terminal or interrupted. [`TaskStatusUpdate::new`] sets it the same way.
    pub is_final: bool,
    pub metadata: Option<Metadata>,
}

impl TaskStatusUpdate {
    /// An update whose `is_final` follows the state (terminal or interrupted ends the stream).
    pub fn new(
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        status: TaskStatus,
    ) -> Self {
        let is_final = status.state.is_terminal() || status.state.is_interrupted();
        TaskStatusUpdate {
            task_id: task_id.into(),
            context_id: context_id.into(),
            status,
            is_final,
            metadata: None,
        }
    }
}

/// An artifact was produced, or a chunk of one.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    /// Append these parts to the artifact with the same id sent earlier.
    pub append: bool,
    /// This is the artifact's last chunk.
    pub last_chunk: bool,
    pub metadata: Option<Metadata>,
}

/// What `SendMessage` / `message/send` returns: the task the message started or continued, or a
/// direct reply.
#[derive(Debug, Clone, PartialEq)]
pub enum SendMessageResult {
    Task(Task),
    Message(Message),
}

/// Parameters of `SendMessage` / `message/send` and the streaming variants.
#[derive(Debug, Clone, PartialEq)]
pub struct SendMessageParams {
    pub message: Message,
    pub configuration: Option<SendMessageConfiguration>,
    pub metadata: Option<Metadata>,
}

/// How the client wants the send handled.
#[derive(Debug, Clone, PartialEq)]
pub struct SendMessageConfiguration {
    /// Media types the client accepts in response parts.
    pub accepted_output_modes: Vec<String>,
    /// At most this many recent history messages in the returned task; `Some(0)`: none.
    pub history_length: Option<u32>,
    /// Wait for a terminal or interrupted state before answering. v0.3 `blocking`, v1.0
    /// `!returnImmediately`; both default to waiting, so this defaults to `true`.
    pub blocking: bool,
    /// Where to post the task's updates (v1.0 `taskPushNotificationConfig`, v0.3
    /// `pushNotificationConfig`).
    pub push_notification: Option<PushNotificationConfig>,
}

impl Default for SendMessageConfiguration {
    fn default() -> Self {
        SendMessageConfiguration {
            accepted_output_modes: Vec::new(),
            history_length: None,
            blocking: true,
            push_notification: None,
        }
    }
}

impl SendMessageParams {
    /// Whether the client wants to wait for a terminal or interrupted state (the default).
    pub fn blocking(&self) -> bool {
        self.configuration
            .as_ref()
            .is_none_or(|config| config.blocking)
    }

    /// The history limit the client asked for, if any.
    pub fn history_length(&self) -> Option<u32> {
        self.configuration
            .as_ref()
            .and_then(|config| config.history_length)
    }
}

/// Where and how an agent posts a task's updates: a webhook.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushNotificationConfig {
    /// Unique within its task; the agent chooses one when the client gives none.
    pub id: Option<String>,
    pub url: String,
    /// Sent with every notification (`X-A2A-Notification-Token`), for the receiver to check.
    pub token: Option<String>,
    /// How the agent authenticates to the webhook (`Authorization: <scheme> <credentials>`).
    pub authentication: Option<PushAuthentication>,
}

/// v1.0 `AuthenticationInfo` (`scheme`), v0.3 `PushNotificationAuthenticationInfo` (the first
/// of `schemes`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushAuthentication {
    pub scheme: String,
    pub credentials: Option<String>,
}

/// A push notification config bound to its task: the params of `CreateTaskPushNotificationConfig`
/// / `tasks/pushNotificationConfig/set`, and what every push config method answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskPushNotificationConfig {
    pub task_id: String,
    pub config: PushNotificationConfig,
}

/// Params of the push config methods that name one task's config (get, delete): v1.0
/// `taskId` and `id`, v0.3 `id` (the task's) and `pushNotificationConfigId`.
#[derive(Debug, Clone, PartialEq)]
pub struct PushConfigRef {
    pub task_id: String,
    /// Required to delete; to get, absent (v0.3) means the task's only or first config.
    pub config_id: Option<String>,
}

/// The configs of one task: what `ListTaskPushNotificationConfigs` /
/// `tasks/pushNotificationConfig/list` answers (v0.3 a bare array).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushConfigList {
    pub configs: Vec<TaskPushNotificationConfig>,
}

/// Parameters of `GetTask` / `tasks/get`.
#[derive(Debug, Clone, PartialEq)]
pub struct GetTaskParams {
    pub id: String,
    /// At most this many recent history messages; `Some(0)`: none; `None`: the server's default.
    pub history_length: Option<u32>,
}

/// Parameters of `CancelTask` / `tasks/cancel`.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelTaskParams {
    pub id: String,
    pub metadata: Option<Metadata>,
}

/// Parameters of `SubscribeToTask` / `tasks/resubscribe`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribeParams {
    pub id: String,
}

/// Parameters of `ListTasks` (A2A v1.0 only: v0.3 has no JSON-RPC `tasks/list`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListTasksParams {
    /// Only tasks of this context.
    pub context_id: Option<String>,
    /// Only tasks in this state. `TASK_STATE_UNSPECIFIED` on the wire means no filter (`None`).
    pub status: Option<TaskState>,
    /// 1 to 100; `None` means the default of 50 ([`ListTasksParams::DEFAULT_PAGE_SIZE`]).
    pub page_size: Option<u32>,
    /// The `next_page_token` of the previous page.
    pub page_token: Option<String>,
    /// At most this many history messages per task; `Some(0)`: none.
    pub history_length: Option<u32>,
    /// Only tasks whose status timestamp is at or after this instant (RFC 3339, validated;
    /// [`crate::time::parse_timestamp_millis`] reads it).
    pub status_timestamp_after: Option<String>,
    /// Include each task's artifacts (default: leave them out).
    pub include_artifacts: bool,
}

impl ListTasksParams {
    /// The page size when none is given.
    pub const DEFAULT_PAGE_SIZE: u32 = 50;
    /// The largest page size a client may ask for.
    pub const MAX_PAGE_SIZE: u32 = 100;

    /// The page size to use: the one asked for, or the default.
    pub fn effective_page_size(&self) -> u32 {
        self.page_size.unwrap_or(Self::DEFAULT_PAGE_SIZE)
    }
}

/// What `ListTasks` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ListTasksResult {
    /// Most recently updated first.
    pub tasks: Vec<Task>,
    /// Empty on the last page. Always written.
    pub next_page_token: String,
    /// The page size used for this response.
    pub page_size: u32,
    /// How many tasks match, across all pages.
    pub total_size: u32,
}

/// A self-description of an agent (a capsule), served at `/.well-known/agent-card.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    /// The agent's own version (not the protocol's).
    pub version: String,
    /// Where and how to reach the agent, preferred first. v1.0 writes them as
    /// `supportedInterfaces`; v0.3 writes the first as `url` + `preferredTransport` and, when
    /// there is more than one distinct URL/binding pair, all of them as `additionalInterfaces`.
    pub interfaces: Vec<AgentInterface>,
    pub provider: Option<AgentProvider>,
    pub documentation_url: Option<String>,
    pub icon_url: Option<String>,
    pub capabilities: AgentCapabilities,
    /// Media types the agent accepts, for every skill unless the skill says otherwise.
    pub default_input_modes: Vec<String>,
    /// Media types the agent produces.
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    /// The credentials the agent accepts, by scheme name; any one of them will do. Empty: the
    /// agent asks for none.
    pub security_schemes: Vec<(String, SecurityScheme)>,
}

/// A credential an agent accepts, as its card declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityScheme {
    /// `Authorization: Bearer <token>`.
    Bearer,
    /// An API key in the request header named `header`.
    ApiKeyHeader { header: String },
}

impl AgentCard {
    /// A card for an agent serving JSON-RPC at `url` in both A2A 1.0 and 0.3 (1.0 preferred),
    /// accepting and producing `text/plain`, with no skills and all capabilities off.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        version: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        let url = url.into();
        AgentCard {
            name: name.into(),
            description: description.into(),
            version: version.into(),
            interfaces: vec![
                AgentInterface::jsonrpc(url.clone(), crate::Version::V1_0),
                AgentInterface::jsonrpc(url, crate::Version::V0_3),
            ],
            provider: None,
            documentation_url: None,
            icon_url: None,
            capabilities: AgentCapabilities::default(),
            default_input_modes: vec!["text/plain".to_string()],
            default_output_modes: vec!["text/plain".to_string()],
            skills: Vec::new(),
            security_schemes: Vec::new(),
        }
    }

    /// The preferred endpoint: the first interface's URL (`None` with no interfaces).
    pub fn url(&self) -> Option<&str> {
        self.interfaces
            .first()
            .map(|interface| interface.url.as_str())
    }

    /// What the specifications require of a card and this one lacks, as `(field, problem)`
    /// pairs (v1.0 names). Empty when the card is complete. Writing a card never fails; a server
    /// can call this once at start-up and refuse or warn.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut need = |ok: bool, field: &str, problem: &str| {
            if !ok {
                problems.push((field.to_string(), problem.to_string()));
            }
        };
        need(!self.name.is_empty(), "name", "required");
        need(!self.description.is_empty(), "description", "required");
        need(!self.version.is_empty(), "version", "required");
        need(
            !self.interfaces.is_empty(),
            "supportedInterfaces",
            "at least one interface is required",
        );
        for (index, interface) in self.interfaces.iter().enumerate() {
            need(
                !interface.url.is_empty(),
                &format!("supportedInterfaces[{index}].url"),
                "required",
            );
            need(
                !interface.protocol_binding.is_empty(),
                &format!("supportedInterfaces[{index}].protocolBinding"),
                "required",
            );
            need(
                !interface.protocol_version.is_empty(),
                &format!("supportedInterfaces[{index}].protocolVersion"),
                "required",
            );
        }
        need(
            !self.default_input_modes.is_empty(),
            "defaultInputModes",
            "at least one media type is required",
        );
        need(
            !self.default_output_modes.is_empty(),
            "defaultOutputModes",
            "at least one media type is required",
        );
        need(
            !self.skills.is_empty(),
            "skills",
            "at least one skill is required",
        );
        for (index, skill) in self.skills.iter().enumerate() {
            for (ok, field) in [
                (!skill.id.is_empty(), "id"),
                (!skill.name.is_empty(), "name"),
                (!skill.description.is_empty(), "description"),
            ] {
                need(ok, &format!("skills[{index}].{field}"), "required");
            }
            need(
                !skill.tags.is_empty(),
                &format!("skills[{index}].tags"),
                "at least one tag is required",
            );
        }
        if let Some(provider) = &self.provider {
            need(
                !provider.organization.is_empty(),
                "provider.organization",
                "required",
            );
            need(!provider.url.is_empty(), "provider.url", "required");
        }
        problems
    }
}

/// One way to reach the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInterface {
    pub url: String,
    /// `JSONRPC`, `GRPC`, `HTTP+JSON` or a custom binding's URI.
    pub protocol_binding: String,
    /// `Major.Minor`, e.g. `1.0` or `0.3`. Not written to v0.3 (whose interfaces have none).
    pub protocol_version: String,
}

impl AgentInterface {
    /// The JSON-RPC binding of the given protocol version at `url`.
    pub fn jsonrpc(url: impl Into<String>, version: crate::Version) -> Self {
        AgentInterface {
            url: url.into(),
            protocol_binding: "JSONRPC".to_string(),
            protocol_version: version.as_str().to_string(),
        }
    }
}

/// Who runs the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

/// Optional features the agent supports. All default to off.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentCapabilities {
    /// `SendStreamingMessage` and `SubscribeToTask` work.
    pub streaming: bool,
    pub push_notifications: bool,
    /// v0.3 only (`stateTransitionHistory`); v1.0 dropped it.
    pub state_transition_history: bool,
    /// v1.0 `capabilities.extendedAgentCard`, v0.3 `supportsAuthenticatedExtendedCard`.
    pub extended_agent_card: bool,
}

/// Something the agent can do.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Keywords; v1.0 requires at least one.
    pub tags: Vec<String>,
    /// Example prompts.
    pub examples: Vec<String>,
    /// Overrides the card's default input modes when not empty.
    pub input_modes: Vec<String>,
    /// Overrides the card's default output modes when not empty.
    pub output_modes: Vec<String>,
}

impl AgentSkill {
    /// A skill with no examples and the card's default modes.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
        tags: Vec<String>,
    ) -> Self {
        AgentSkill {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            tags,
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
        }
    }
}
