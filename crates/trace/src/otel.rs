//! OTLP/HTTP export of a session's trace as OpenTelemetry spans.
//!
//! What it promises:
//!
//! - **The spans are the trace file, read as it is written.** Each event the writer writes is
//!   handed here; nothing else feeds the export, so a span never says what `trace.jsonl` does
//!   not. Ids follow [`crate::context`]: anyone can match a span to its event.
//! - **The span tree**: `capsule.session` (from `session_start` to `session_end`) →
//!   `capsule.task` (`task_start` to `task_end`) → `capsule.inference`, `capsule.tool_call`,
//!   `capsule.shell` and `capsule.compaction`, each ending at its event's timestamp and
//!   starting `duration_ms` earlier. Calls are siblings under their task, as the GenAI
//!   conventions lay out an agent invocation; the turn is an attribute (`murmur.turn`). A
//!   hook's inference outside any task hangs under the session. A task that arrived with a
//!   valid `traceparent` continues that trace: its span's parent is the caller's span, and it
//!   links to the session span.
//! - **Attributes follow the OpenTelemetry GenAI semantic conventions** (`gen_ai.*`: operation
//!   name, provider, request model, finish reasons, the provider-reported usage including the
//!   cache read and cache creation tokens, tool name and call id, agent name, conversation id),
//!   with Murmur's own figures under `murmur.*` (the runtime's token estimates, choice, turn,
//!   decision, tool status, `state_effect`, `resource_id`). A number the provider did not
//!   report is absent, never 0. Other events (a denied call, a control change, a peer send, a
//!   hook error, …) become span events on their task's span, or the session's.
//! - **Export never fails the session.** Spans are queued and sent in batches by a background
//!   thread; a failed or refused export is written to `<workdir>/logs/otel.log` and, the first
//!   time, to stderr as `W-TRC-004`. At `session_end` the queue is flushed, waiting at most
//!   [`EXPORT_TIMEOUT`] for each request.
//! - **The same file, the same spans.** Fed a finished `trace.jsonl` again (`mur trace
//!   export`), an export sends exactly the spans the session's own did. What a trace leaves
//!   open (no `task_end`, no `session_end`) is ended at its last event as an error by
//!   [`OtelExport::finish`], which also runs when an export is dropped.

use std::borrow::Cow;
use std::collections::HashMap;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event as SpanEvent, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId,
    TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value as AttributeValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanEvents, SpanExporter, SpanLinks,
    SpanProcessor,
};
use serde_json::Value;

use crate::context::{SpanRef, event_span_id};
use crate::schema::{CallStatus, Event, EventBody, ExitStatus};
use murmur_beneath::BeneathDir;

/// The longest one export request may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The path OTLP/HTTP receivers take traces at.
const TRACES_PATH: &str = "/v1/traces";

/// Where export failures are logged, in the session workdir.
pub const FAILURE_LOG: &str = "logs/otel.log";

/// The URL spans are posted to for `observability.otel_endpoint`: the endpoint as given when
/// it already ends in `/v1/traces`, else with `/v1/traces` appended (the OTLP convention for a
/// base endpoint such as `http://collector:4318`).
pub fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with(TRACES_PATH) {
        trimmed.to_string()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    }
}

/// Who the spans come from: the OTLP resource.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    pub capsule_name: String,
    pub capsule_version: String,
}

/// Where export failures are told: `logs/otel.log` in the session workdir.
#[derive(Debug)]
struct FailureLog {
    url: String,
    workdir: Arc<BeneathDir>,
    /// Whether stderr was told already (set from the start for a quiet export).
    told: AtomicBool,
    failures: AtomicU64,
    first: std::sync::Mutex<Option<String>>,
}

impl FailureLog {
    fn record(&self, what: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.first
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get_or_insert_with(|| what.to_string());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let line = format!("{now} OTLP export to {} failed: {what}\n", self.url);
        let written = self.workdir.append(FAILURE_LOG, line.as_bytes());
        let path = self.workdir.path().join(FAILURE_LOG);
        if !self.told.swap(true, Ordering::Relaxed) {
            let where_logged = match written {
                Ok(()) => format!("this and later failures are logged in {}", path.display()),
                Err(error) => format!("{} could not be written: {error}", path.display()),
            };
            eprintln!(
                "warning[W-TRC-004]: OTLP export to {} failed: {what}; the session goes on\n  hint: check that an OTLP/HTTP receiver listens there ({where_logged}); `mur trace export` sends a session's spans again",
                self.url
            );
        }
    }
}

/// The OTLP exporter, with every failure told.
#[derive(Debug)]
struct LoggedExporter {
    inner: opentelemetry_otlp::SpanExporter,
    log: Arc<FailureLog>,
}

impl SpanExporter for LoggedExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.log.record(&error.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A span opened by a start event, sent when its end event comes.
#[derive(Debug)]
struct OpenSpan {
    span: SpanRef,
    name: &'static str,
    kind: SpanKind,
    parent: Option<(SpanRef, bool)>,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<SpanEvent>,
    links: Vec<Link>,
}

/// One session's export: turns events into spans and queues them.
pub struct OtelExport {
    processor: Box<dyn SpanProcessor>,
    log: Arc<FailureLog>,
    scope: InstrumentationScope,
    capsule_name: String,
    session: Option<OpenSpan>,
    /// Open task spans by their `task_start` event id.
    tasks: HashMap<String, OpenSpan>,
    /// The task (its `task_start` event id) each event of an open task belongs to.
    owners: HashMap<String, String>,
    /// What a task's A2A request said (`a2a_task_received`), by task id, until it starts.
    received: HashMap<String, (Option<String>, Vec<KeyValue>)>,
    /// The context id of each open task, by its `task_start` event id.
    contexts: HashMap<String, String>,
    /// The timestamp of the latest event: where [`OtelExport::finish`] ends open spans.
    last_at: SystemTime,
    spans_sent: u64,
    shut_down: bool,
}

impl std::fmt::Debug for OtelExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelExport")
            .field("url", &self.log.url)
            .finish_non_exhaustive()
    }
}

fn system_time(unix_ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(unix_ms)
}

fn span_context(span: &SpanRef, remote: bool) -> SpanContext {
    SpanContext::new(
        TraceId::from_hex(&span.trace_id).unwrap_or(TraceId::INVALID),
        SpanId::from_hex(&span.span_id).unwrap_or(SpanId::INVALID),
        TraceFlags::SAMPLED,
        remote,
        TraceState::default(),
    )
}

fn int(key: &'static str, value: u64) -> KeyValue {
    KeyValue::new(key, i64::try_from(value).unwrap_or(i64::MAX))
}

fn text(key: &'static str, value: &str) -> KeyValue {
    KeyValue::new(key, value.to_string())
}

/// The `gen_ai.provider.name` of a driver: the well-known provider its name says, else the
/// driver's own name.
fn provider_name(driver: &str) -> String {
    let lower = driver.to_ascii_lowercase();
    if lower.contains("anthropic") {
        "anthropic".to_string()
    } else if lower.contains("openai") {
        "openai".to_string()
    } else {
        driver.to_string()
    }
}

/// The top-level scalar fields of an event as `murmur.<field>` attributes.
fn scalar_attributes(body: &EventBody) -> Vec<KeyValue> {
    let Ok(Value::Object(fields)) = serde_json::to_value(body) else {
        return Vec::new();
    };
    fields
        .into_iter()
        .filter(|(name, _)| name != "event_type")
        .filter_map(|(name, value)| {
            let value = match value {
                Value::String(s) => AttributeValue::from(s),
                Value::Bool(b) => AttributeValue::from(b),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => AttributeValue::from(i),
                    None => AttributeValue::from(n.as_f64()?),
                },
                _ => return None,
            };
            Some(KeyValue::new(format!("murmur.{name}"), value))
        })
        .collect()
}

impl OtelExport {
    /// Starts the export of one session to `endpoint`; failures are logged to
    /// `logs/otel.log` in `workdir`. Errs when the endpoint is not a usable URL or no HTTP
    /// client can be made.
    pub fn start(
        endpoint: &str,
        service: &ServiceInfo,
        workdir: Arc<BeneathDir>,
    ) -> Result<OtelExport, String> {
        let usable = url::Url::parse(endpoint).is_ok_and(|parsed| {
            matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some()
        });
        if !usable {
            return Err(format!(
                "`{endpoint}` is not an http or https URL of an OTLP/HTTP receiver"
            ));
        }
        let url = traces_url(endpoint);
        // The blocking client runs its own runtime; it must be made outside any async one.
        let client = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _ = rustls::crypto::ring::default_provider().install_default();
                    reqwest::blocking::Client::builder()
                        .timeout(EXPORT_TIMEOUT)
                        .build()
                })
                .join()
        })
        .map_err(|_| "the HTTP client could not be made".to_string())?
        .map_err(|error| format!("the HTTP client could not be made: {error}"))?;
        let inner = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| format!("the OTLP exporter for {url} could not be made: {error}"))?;
        let log = Arc::new(FailureLog {
            url,
            workdir,
            told: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            first: std::sync::Mutex::new(None),
        });
        let exporter = LoggedExporter {
            inner,
            log: log.clone(),
        };
        let mut processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(Duration::from_secs(1))
                    .build(),
            )
            .build();
        processor.set_resource(
            &Resource::builder_empty()
                .with_service_name(service.capsule_name.clone())
                .with_attributes([
                    KeyValue::new("service.version", service.capsule_version.clone()),
                    KeyValue::new("murmur.version", env!("CARGO_PKG_VERSION")),
                ])
                .build(),
        );
        Ok(OtelExport::with_processor(
            Box::new(processor),
            log,
            service,
        ))
    }

    /// An export handing its spans to `processor`.
    fn with_processor(
        processor: Box<dyn SpanProcessor>,
        log: Arc<FailureLog>,
        service: &ServiceInfo,
    ) -> OtelExport {
        OtelExport {
            processor,
            log,
            scope: InstrumentationScope::builder("murmur")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            capsule_name: service.capsule_name.clone(),
            session: None,
            tasks: HashMap::new(),
            owners: HashMap::new(),
            received: HashMap::new(),
            contexts: HashMap::new(),
            last_at: UNIX_EPOCH,
            spans_sent: 0,
            shut_down: false,
        }
    }

    /// Tells nothing on stderr: the caller reports [`OtelExport::first_failure`] itself.
    pub fn quiet(self) -> OtelExport {
        self.log.told.store(true, Ordering::Relaxed);
        self
    }

    /// How many spans were handed to the exporter.
    pub fn spans_sent(&self) -> u64 {
        self.spans_sent
    }

    /// Why the first failed request failed, if one did.
    pub fn first_failure(&self) -> Option<String> {
        self.log
            .first
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The traces URL spans go to.
    pub fn url(&self) -> &str {
        &self.log.url
    }

    /// How many export requests failed so far.
    pub fn failures(&self) -> u64 {
        self.log.failures.load(Ordering::Relaxed)
    }

    /// Takes in one written event: opens, closes or sends the spans it makes.
    pub fn record(&mut self, event: &Event) {
        if self.shut_down {
            return;
        }
        let at = system_time(event.timestamp);
        self.last_at = self.last_at.max(at);
        let owner = event
            .parent_id
            .as_ref()
            .and_then(|parent| self.owners.get(parent))
            .cloned();
        match &event.body {
            EventBody::SessionStart {
                capsule,
                model,
                driver,
                ..
            } => {
                let mut attributes = vec![
                    text("gen_ai.agent.name", &capsule.name),
                    text("murmur.session.id", &event.session_id),
                    text("murmur.capsule.name", &capsule.name),
                    text("murmur.capsule.version", &capsule.version),
                ];
                if !model.is_empty() {
                    attributes.push(text("gen_ai.request.model", model));
                }
                if !driver.is_empty() {
                    attributes.push(text("gen_ai.provider.name", &provider_name(driver)));
                    attributes.push(text("murmur.driver", driver));
                }
                self.session = Some(OpenSpan {
                    span: SpanRef::session(&event.session_id, &event.event_id),
                    name: "capsule.session",
                    kind: SpanKind::Internal,
                    parent: None,
                    start: at,
                    attributes,
                    events: Vec::new(),
                    links: Vec::new(),
                });
            }
            EventBody::A2aTaskReceived {
                task_id,
                method,
                origin,
                trust,
                traceparent,
                claimed_trust,
                principal,
                ..
            } => {
                let mut attributes = vec![
                    text("murmur.a2a.method", method),
                    text("murmur.a2a.origin", origin),
                    text("murmur.a2a.trust", trust),
                ];
                if let Some(claimed) = claimed_trust {
                    attributes.push(text("murmur.a2a.claimed_trust", claimed));
                }
                if let Some(principal) = principal {
                    attributes.push(text("murmur.a2a.principal", principal));
                }
                self.received
                    .insert(task_id.clone(), (traceparent.clone(), attributes));
            }
            EventBody::TaskStart {
                task_id,
                context_id,
                source,
                input_chars,
                ..
            } => self.open_task(
                event,
                at,
                task_id,
                context_id.as_deref(),
                source,
                *input_chars,
            ),
            EventBody::TaskEnd {
                exit_status,
                turns,
                reopen_count,
                error,
                ..
            } => {
                let Some(task_event) = owner else { return };
                let Some(mut task) = self.tasks.remove(&task_event) else {
                    return;
                };
                self.owners.retain(|_, task| *task != task_event);
                self.contexts.remove(&task_event);
                task.attributes.extend([
                    text("murmur.task.exit_status", exit_status.as_str()),
                    int("murmur.task.turns", u64::from(*turns)),
                    int("murmur.task.reopen_count", u64::from(*reopen_count)),
                ]);
                let status = match error {
                    Some(error) => {
                        task.attributes.push(text("error.type", &error.code));
                        Status::error(error.message.clone())
                    }
                    None if *exit_status != ExitStatus::Ok => Status::error(exit_status.as_str()),
                    None => Status::Unset,
                };
                self.send(task, at, status);
            }
            EventBody::SessionEnd {
                exit_status,
                totals,
                ..
            } => {
                let open: Vec<String> = self.tasks.keys().cloned().collect();
                for task_event in open {
                    if let Some(task) = self.tasks.remove(&task_event) {
                        self.send(task, at, Status::error("the session ended first"));
                    }
                }
                if let Some(mut session) = self.session.take() {
                    session.attributes.extend([
                        text("murmur.session.exit_status", exit_status.as_str()),
                        int("murmur.session.tasks", u64::from(totals.tasks)),
                        int("murmur.session.turns", u64::from(totals.turns)),
                        int("murmur.session.tool_calls", u64::from(totals.tool_calls)),
                        int(
                            "murmur.usage.input_tokens_estimated",
                            totals.input_tokens_estimated,
                        ),
                        int(
                            "murmur.usage.output_tokens_estimated",
                            totals.output_tokens_estimated,
                        ),
                    ]);
                    for (key, value) in [
                        ("gen_ai.usage.input_tokens", totals.input_tokens_actual),
                        ("gen_ai.usage.output_tokens", totals.output_tokens_actual),
                        (
                            "gen_ai.usage.cache_read.input_tokens",
                            totals.cached_tokens_actual,
                        ),
                        (
                            "gen_ai.usage.cache_creation.input_tokens",
                            totals.cache_write_tokens_actual,
                        ),
                    ] {
                        if let Some(value) = value {
                            session.attributes.push(int(key, value));
                        }
                    }
                    let status = if *exit_status == ExitStatus::Ok {
                        Status::Unset
                    } else {
                        Status::error(exit_status.as_str())
                    };
                    self.send(session, at, status);
                }
                self.shutdown();
            }
            EventBody::Inference { .. }
            | EventBody::ToolCall { .. }
            | EventBody::Shell { .. }
            | EventBody::Compaction { .. } => {
                if let Some(task) = &owner {
                    self.owners.insert(event.event_id.clone(), task.clone());
                }
                self.send_call(event, at, owner.as_deref());
            }
            body => {
                let span_event = SpanEvent::new(body.event_type(), at, scalar_attributes(body), 0);
                let open = match &owner {
                    Some(task) => self.tasks.get_mut(task),
                    None => self.session.as_mut(),
                };
                if let Some(open) = open {
                    open.events.push(span_event);
                }
            }
        }
    }

    fn open_task(
        &mut self,
        event: &Event,
        at: SystemTime,
        task_id: &str,
        context_id: Option<&str>,
        source: &str,
        input_chars: u64,
    ) {
        let (incoming, mut attributes) = self.received.remove(task_id).unwrap_or_default();
        let span = SpanRef::task(&event.session_id, &event.event_id, incoming.as_deref());
        let session = self.session.as_ref().map(|session| session.span.clone());
        let caller = incoming.as_deref().and_then(SpanRef::from_traceparent);
        let (parent, links) = match caller {
            Some(caller) => (
                Some((caller, true)),
                session
                    .iter()
                    .map(|session| Link::with_context(span_context(session, false)))
                    .collect(),
            ),
            None => (session.map(|session| (session, false)), Vec::new()),
        };
        attributes.extend([
            text("gen_ai.operation.name", "invoke_agent"),
            text("gen_ai.agent.name", &self.capsule_name),
            text("murmur.session.id", &event.session_id),
            text("murmur.task.id", task_id),
            text("murmur.task.source", source),
            int("murmur.task.input_chars", input_chars),
        ]);
        if let Some(context_id) = context_id {
            attributes.push(text("gen_ai.conversation.id", context_id));
            self.contexts
                .insert(event.event_id.clone(), context_id.to_string());
        }
        let kind = if parent.as_ref().is_some_and(|(_, remote)| *remote) {
            SpanKind::Server
        } else {
            SpanKind::Internal
        };
        self.owners
            .insert(event.event_id.clone(), event.event_id.clone());
        self.tasks.insert(
            event.event_id.clone(),
            OpenSpan {
                span,
                name: "capsule.task",
                kind,
                parent,
                start: at,
                attributes,
                events: Vec::new(),
                links,
            },
        );
    }

    /// A call span: inference, tool call, shell or compaction, sent at once.
    fn send_call(&mut self, event: &Event, end: SystemTime, task: Option<&str>) {
        let parent = task
            .and_then(|task| self.tasks.get(task))
            .or(self.session.as_ref())
            .map(|open| open.span.clone());
        let Some(parent) = parent else { return };
        let conversation = task.and_then(|task| self.contexts.get(task)).cloned();
        let mut attributes = Vec::new();
        let mut status = Status::Unset;
        let (name, kind, duration_ms) = match &event.body {
            EventBody::Inference {
                turn,
                origin,
                choice,
                driver,
                model,
                prompt_cache_key,
                sent,
                input_tokens_estimated,
                output_tokens_estimated,
                input_tokens_actual,
                output_tokens_actual,
                cached_tokens_actual,
                cache_write_tokens_actual,
                stop_reason,
                decision,
                tool_calls,
                duration_ms,
                error,
                ..
            } => {
                attributes.extend([
                    text("gen_ai.operation.name", "chat"),
                    text("gen_ai.provider.name", &provider_name(driver)),
                    text("gen_ai.request.model", model),
                    KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        AttributeValue::Array(opentelemetry::Array::String(vec![
                            opentelemetry::StringValue::from(stop_reason.as_str()),
                        ])),
                    ),
                    text("murmur.driver", driver),
                    text("murmur.origin", &origin.to_string()),
                    int("murmur.turn", u64::from(*turn)),
                    text("murmur.decision", decision.as_str()),
                    int("murmur.tool_calls", u64::from(*tool_calls)),
                    text("murmur.prompt_cache_key", prompt_cache_key),
                    int("murmur.sent.messages", u64::from(sent.messages)),
                    KeyValue::new("murmur.sent.full_resend", sent.full_resend),
                    int(
                        "murmur.usage.input_tokens_estimated",
                        *input_tokens_estimated,
                    ),
                    int(
                        "murmur.usage.output_tokens_estimated",
                        *output_tokens_estimated,
                    ),
                ]);
                for (key, value) in [
                    ("gen_ai.usage.input_tokens", input_tokens_actual),
                    ("gen_ai.usage.output_tokens", output_tokens_actual),
                    ("gen_ai.usage.cache_read.input_tokens", cached_tokens_actual),
                    (
                        "gen_ai.usage.cache_creation.input_tokens",
                        cache_write_tokens_actual,
                    ),
                ] {
                    if let Some(value) = value {
                        attributes.push(int(key, *value));
                    }
                }
                if let Some(choice) = choice {
                    attributes.push(text("murmur.choice", choice));
                }
                if let Some(error) = error {
                    attributes.push(text("error.type", &error.code));
                    status = Status::error(error.message.clone());
                }
                ("capsule.inference", SpanKind::Client, *duration_ms)
            }
            EventBody::ToolCall {
                turn,
                call_id,
                tool_name,
                status: call_status,
                state_effect,
                resource_id,
                output_bytes,
                duration_ms,
                error,
                ..
            } => {
                attributes.extend([
                    text("gen_ai.operation.name", "execute_tool"),
                    text("gen_ai.tool.name", tool_name),
                    text("gen_ai.tool.call.id", call_id),
                    text("gen_ai.tool.type", "function"),
                    int("murmur.turn", u64::from(*turn)),
                    text("murmur.tool.status", call_status.as_str()),
                    int("murmur.tool.output_bytes", *output_bytes),
                ]);
                if let Some(effect) = state_effect {
                    attributes.push(text("murmur.tool.state_effect", effect));
                }
                if let Some(resource) = resource_id {
                    attributes.push(text("murmur.tool.resource_id", resource));
                }
                if let Some(error) = error {
                    attributes.push(text("error.type", &error.code));
                    status = Status::error(error.message.clone());
                } else if *call_status != CallStatus::Passed {
                    status = Status::error(call_status.as_str());
                }
                ("capsule.tool_call", SpanKind::Internal, *duration_ms)
            }
            EventBody::Shell {
                turn,
                call_id,
                binary,
                argv,
                exit_code,
                stdout_bytes,
                stderr_bytes,
                truncated,
                timed_out,
                duration_ms,
                error,
                ..
            } => {
                attributes.extend([
                    text("gen_ai.operation.name", "execute_tool"),
                    text("gen_ai.tool.name", "shell"),
                    text("gen_ai.tool.call.id", call_id),
                    text("gen_ai.tool.type", "function"),
                    int("murmur.turn", u64::from(*turn)),
                    text("process.executable.path", binary),
                    int("murmur.shell.args", argv.len() as u64),
                    int("murmur.shell.stdout_bytes", *stdout_bytes),
                    int("murmur.shell.stderr_bytes", *stderr_bytes),
                    KeyValue::new("murmur.shell.truncated", *truncated),
                    KeyValue::new("murmur.shell.timed_out", *timed_out),
                ]);
                if let Some(code) = exit_code {
                    attributes.push(KeyValue::new("process.exit.code", i64::from(*code)));
                }
                if let Some(error) = error {
                    attributes.push(text("error.type", &error.code));
                    status = Status::error(error.message.clone());
                } else if *timed_out {
                    status = Status::error("timed out");
                }
                ("capsule.shell", SpanKind::Internal, *duration_ms)
            }
            EventBody::Compaction {
                turn,
                hook,
                tokens_before,
                tokens_after,
                messages_before,
                messages_after,
                context_window,
                duration_ms,
                ..
            } => {
                attributes.extend([
                    int("murmur.turn", u64::from(*turn)),
                    text("murmur.hook", hook),
                    int("murmur.compaction.tokens_before", *tokens_before),
                    int("murmur.compaction.tokens_after", *tokens_after),
                    int(
                        "murmur.compaction.messages_before",
                        u64::from(*messages_before),
                    ),
                    int(
                        "murmur.compaction.messages_after",
                        u64::from(*messages_after),
                    ),
                    int("murmur.compaction.context_window", *context_window),
                ]);
                ("capsule.compaction", SpanKind::Internal, *duration_ms)
            }
            _ => return,
        };
        if let Some(conversation) = conversation {
            attributes.push(text("gen_ai.conversation.id", &conversation));
        }
        let span = SpanRef {
            trace_id: parent.trace_id.clone(),
            span_id: event_span_id(&event.event_id),
        };
        let start = end
            .checked_sub(Duration::from_millis(duration_ms))
            .unwrap_or(end);
        self.send(
            OpenSpan {
                span,
                name,
                kind,
                parent: Some((parent, false)),
                start,
                attributes,
                events: Vec::new(),
                links: Vec::new(),
            },
            end,
            status,
        );
    }

    fn send(&mut self, open: OpenSpan, end: SystemTime, status: Status) {
        self.spans_sent += 1;
        let (parent_span_id, parent_span_is_remote) = match &open.parent {
            Some((parent, remote)) => (
                SpanId::from_hex(&parent.span_id).unwrap_or(SpanId::INVALID),
                *remote,
            ),
            None => (SpanId::INVALID, false),
        };
        let mut events = SpanEvents::default();
        events.events = open.events;
        let mut links = SpanLinks::default();
        links.links = open.links;
        self.processor.on_end(SpanData {
            span_context: span_context(&open.span, false),
            parent_span_id,
            parent_span_is_remote,
            span_kind: open.kind,
            name: Cow::Borrowed(open.name),
            start_time: open.start,
            end_time: end.max(open.start),
            attributes: open.attributes,
            dropped_attributes_count: 0,
            events,
            links,
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// Ends what is still open at the latest event (tasks, then the session; each an error:
    /// the trace stops before their end), then [`OtelExport::shutdown`]. For a trace without
    /// `session_end`: a session that died, or one read while it runs.
    pub fn finish(&mut self) {
        if self.shut_down {
            return;
        }
        let at = self.last_at;
        let open: Vec<String> = self.tasks.keys().cloned().collect();
        for task_event in open {
            if let Some(task) = self.tasks.remove(&task_event) {
                self.send(
                    task,
                    at,
                    Status::error("the trace ends before the task did"),
                );
            }
        }
        if let Some(session) = self.session.take() {
            self.send(
                session,
                at,
                Status::error("the trace ends before the session did"),
            );
        }
        self.shutdown();
    }

    /// Sends what is queued and stops the export; later events are not exported.
    pub fn shutdown(&mut self) {
        if self.shut_down {
            return;
        }
        self.shut_down = true;
        if let Err(error) = self.processor.shutdown_with_timeout(EXPORT_TIMEOUT * 2) {
            // A failed request was logged by the exporter; this is the flush itself failing.
            if self.failures() == 0 {
                self.log.record(&error.to_string());
            }
        }
    }
}

impl Drop for OtelExport {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::session_trace_id;
    use crate::schema::{CapsuleRef, Decision, ErrorRef, Sent, Totals};
    use std::sync::Mutex;

    /// A processor that keeps what it is handed.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanProcessor for Kept {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// An export into a [`Kept`], and a way to write events into it as the writer would.
    struct Session {
        export: OtelExport,
        kept: Kept,
        clock: u64,
        _log: tempfile::TempDir,
    }

    const SESSION: &str = "ses_test";

    impl Session {
        fn new() -> Session {
            let kept = Kept::default();
            let log = tempfile::tempdir().unwrap();
            let failures = Arc::new(FailureLog {
                url: "http://127.0.0.1:1/v1/traces".into(),
                workdir: Arc::new(BeneathDir::open(log.path()).unwrap()),
                told: AtomicBool::new(false),
                failures: AtomicU64::new(0),
                first: Mutex::new(None),
            });
            let service = ServiceInfo {
                capsule_name: "unit".into(),
                capsule_version: "1.0.0".into(),
            };
            Session {
                export: OtelExport::with_processor(Box::new(kept.clone()), failures, &service),
                kept,
                clock: 1_000_000,
                _log: log,
            }
        }

        /// Writes `body` under `parent` and returns its event id.
        fn write(&mut self, parent: Option<&str>, body: EventBody) -> String {
            self.clock += 10;
            let event_id = format!("evt_{}", self.clock);
            self.export.record(&Event {
                session_id: SESSION.into(),
                timestamp: self.clock,
                event_id: event_id.clone(),
                parent_id: parent.map(str::to_string),
                body,
            });
            event_id
        }

        fn spans(&self) -> Vec<SpanData> {
            self.kept.0.lock().unwrap().clone()
        }

        fn span(&self, event_id: &str) -> SpanData {
            let id = SpanId::from_hex(&event_span_id(event_id)).unwrap();
            self.spans()
                .into_iter()
                .find(|span| span.span_context.span_id() == id)
                .unwrap_or_else(|| panic!("no span for {event_id}"))
        }
    }

    fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a AttributeValue> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    fn session_start() -> EventBody {
        EventBody::SessionStart {
            grants: Vec::new(),
            capsule: CapsuleRef {
                name: "unit".into(),
                version: "1.0.0".into(),
            },
            murmur_version: "0".into(),
            workdir: "/w".into(),
            workspace: String::new(),
            in_place: false,
            record_layout: None,
            model: "m".into(),
            driver: "driver-openai-chat".into(),
            credential_source: "environment".into(),
            components: Vec::new(),
            tools: Vec::new(),
            containment: Value::Null,
            inference_choices: None,
            max_session_tokens: None,
            system_prompt_sha256: String::new(),
            manifest_sha256: String::new(),
            resumed: None,
            mcp_servers: Vec::new(),
        }
    }

    fn task_start(task_id: &str) -> EventBody {
        EventBody::TaskStart {
            task_id: task_id.into(),
            context_id: Some("ctx_1".into()),
            source: "cli".into(),
            input_chars: 5,
            input_sha256: String::new(),
        }
    }

    fn inference(task_id: Option<&str>, origin: &str, reported: Option<u64>) -> EventBody {
        EventBody::Inference {
            task_id: task_id.map(str::to_string),
            turn: 1,
            origin: origin.parse().unwrap(),
            choice: None,
            driver: "driver-openai-chat".into(),
            model: "m".into(),
            prompt_cache_key: "k".into(),
            sent: Sent {
                messages: 1,
                full_resend: true,
                continuation_id: None,
            },
            input_tokens_estimated: 40,
            output_tokens_estimated: 4,
            input_tokens_actual: reported,
            output_tokens_actual: None,
            cached_tokens_actual: reported.map(|_| 0),
            cache_write_tokens_actual: None,
            stop_reason: crate::schema::StopReason::EndTurn,
            decision: Decision::Finish,
            tool_name: None,
            tool_calls: 0,
            duration_ms: 7,
            error: None,
        }
    }

    fn task_end(task_id: &str, exit_status: ExitStatus) -> EventBody {
        EventBody::TaskEnd {
            task_id: task_id.into(),
            context_id: Some("ctx_1".into()),
            exit_status,
            turns: 1,
            reopen_count: 0,
            result_path: None,
            error: (exit_status != ExitStatus::Ok).then(|| ErrorRef {
                code: "E-RUN-015".into(),
                message: "out of turns".into(),
            }),
            changes: None,
        }
    }

    fn session_end() -> EventBody {
        EventBody::SessionEnd {
            exit_status: ExitStatus::Ok,
            duration_ms: 100,
            totals: Totals::default(),
            changes: None,
            git: None,
        }
    }

    #[test]
    fn calls_hang_under_their_task_and_other_events_ride_on_its_span() {
        let mut session = Session::new();
        let start = session.write(None, session_start());
        let task = session.write(Some(&start), task_start("tsk_1"));
        let turn = session.write(Some(&task), inference(Some("tsk_1"), "agent", Some(30)));
        let denied = EventBody::CallDenied {
            task_id: "tsk_1".into(),
            turn: 1,
            kind: "tool".into(),
            call_id: "c1".into(),
            target: "write-file".into(),
            hook: "policy".into(),
            reason: "no".into(),
        };
        session.write(Some(&turn), denied);
        assert!(
            session.spans().len() == 1,
            "a task's span waits for its end; the call went at once"
        );
        session.write(Some(&task), task_end("tsk_1", ExitStatus::Ok));
        session.write(Some(&start), session_end());

        let trace_id = TraceId::from_hex(&session_trace_id(SESSION)).unwrap();
        assert!(
            session
                .spans()
                .iter()
                .all(|span| span.span_context.trace_id() == trace_id)
        );
        let session_span = session.span(&start);
        let task_span = session.span(&task);
        let turn_span = session.span(&turn);
        assert_eq!(session_span.parent_span_id, SpanId::INVALID);
        assert_eq!(
            task_span.parent_span_id,
            session_span.span_context.span_id()
        );
        assert_eq!(turn_span.parent_span_id, task_span.span_context.span_id());
        assert_eq!(turn_span.end_time, system_time(1_000_030));
        assert_eq!(turn_span.start_time, system_time(1_000_023));
        assert_eq!(
            attribute(&turn_span, "gen_ai.usage.input_tokens"),
            Some(&AttributeValue::I64(30))
        );
        assert_eq!(
            attribute(&turn_span, "gen_ai.usage.cache_read.input_tokens"),
            Some(&AttributeValue::I64(0)),
            "a reported 0 is a reading"
        );
        assert_eq!(
            attribute(&turn_span, "gen_ai.usage.cache_creation.input_tokens"),
            None
        );
        assert_eq!(
            attribute(&turn_span, "gen_ai.conversation.id"),
            Some(&AttributeValue::from("ctx_1"))
        );
        let events: Vec<&str> = task_span.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(events, ["call_denied"]);
        assert_eq!(task_span.status, Status::Unset);
    }

    #[test]
    fn unreported_usage_is_absent_and_a_failed_task_is_an_error() {
        let mut session = Session::new();
        let start = session.write(None, session_start());
        let task = session.write(Some(&start), task_start("tsk_1"));
        let turn = session.write(Some(&task), inference(Some("tsk_1"), "agent", None));
        session.write(Some(&task), task_end("tsk_1", ExitStatus::MaxTurnsReached));
        let turn_span = session.span(&turn);
        for key in [
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.cache_read.input_tokens",
        ] {
            assert_eq!(attribute(&turn_span, key), None, "{key}");
        }
        assert_eq!(
            attribute(&turn_span, "murmur.usage.input_tokens_estimated"),
            Some(&AttributeValue::I64(40))
        );
        let task_span = session.span(&task);
        assert_eq!(task_span.status, Status::error("out of turns"));
        assert_eq!(
            attribute(&task_span, "error.type"),
            Some(&AttributeValue::from("E-RUN-015"))
        );
    }

    #[test]
    fn a_task_with_a_traceparent_continues_the_callers_trace() {
        let mut session = Session::new();
        let start = session.write(None, session_start());
        session.write(
            Some(&start),
            EventBody::A2aTaskReceived {
                task_id: "tsk_1".into(),
                context_id: "ctx_1".into(),
                method: "SendMessage".into(),
                origin: "client".into(),
                trust: "external".into(),
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
                claimed_origin: Some("peer".into()),
                claimed_trust: Some("operator".into()),
                principal: None,
            },
        );
        let task = session.write(Some(&start), task_start("tsk_1"));
        let turn = session.write(Some(&task), inference(Some("tsk_1"), "agent", None));
        session.write(Some(&task), task_end("tsk_1", ExitStatus::Ok));
        session.write(Some(&start), session_end());
        let caller = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let task_span = session.span(&task);
        assert_eq!(task_span.span_context.trace_id(), caller);
        assert_eq!(
            task_span.parent_span_id,
            SpanId::from_hex("b7ad6b7169203331").unwrap()
        );
        assert!(task_span.parent_span_is_remote);
        assert_eq!(task_span.span_kind, SpanKind::Server);
        let session_span = session.span(&start);
        assert_eq!(task_span.links.len(), 1);
        assert_eq!(
            task_span.links[0].span_context.span_id(),
            session_span.span_context.span_id()
        );
        assert_eq!(
            attribute(&task_span, "murmur.a2a.origin"),
            Some(&AttributeValue::from("client"))
        );
        assert_eq!(
            attribute(&task_span, "murmur.a2a.claimed_trust"),
            Some(&AttributeValue::from("operator"))
        );
        assert_eq!(session.span(&turn).span_context.trace_id(), caller);
        assert_ne!(session_span.span_context.trace_id(), caller);
    }

    #[test]
    fn a_hook_call_outside_a_task_and_a_task_the_session_outlived() {
        let mut session = Session::new();
        let start = session.write(None, session_start());
        let hook_call = session.write(Some(&start), inference(None, "hook:summarizer", None));
        let task = session.write(Some(&start), task_start("tsk_1"));
        session.write(Some(&start), session_end());
        let session_span = session.span(&start);
        assert_eq!(
            session.span(&hook_call).parent_span_id,
            session_span.span_context.span_id()
        );
        assert_eq!(
            session.span(&task).status,
            Status::error("the session ended first")
        );
        // After session_end the export is over: later events make no span.
        let late = session.write(Some(&start), inference(None, "hook:late", None));
        assert!(
            session
                .spans()
                .iter()
                .all(|span| span.span_context.span_id()
                    != SpanId::from_hex(&event_span_id(&late)).unwrap())
        );
    }

    #[test]
    fn a_base_endpoint_gets_the_traces_path_and_a_full_one_is_kept() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector/otlp/v1/traces"),
            "http://collector/otlp/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector/otlp"),
            "http://collector/otlp/v1/traces"
        );
    }

    #[test]
    fn providers_are_named_as_the_conventions_name_them() {
        assert_eq!(provider_name("driver-anthropic"), "anthropic");
        assert_eq!(provider_name("driver-openai-responses"), "openai");
        assert_eq!(provider_name("my-llama"), "my-llama");
    }
}
