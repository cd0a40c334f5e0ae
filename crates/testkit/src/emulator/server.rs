//! The HTTP server: accepting connections, choosing each request's answer, recording it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::responses::Stored;
use super::script::{Answer, Conversation, Fault, Reply, Script, Turn, Usage};
use super::wire::{
    Refusal, Resolved, ResolvedCall, ResolvedThinking, SseEvent, UsageOut, error_body,
    fault_refusal, unix_seconds,
};
use super::{Provider, Recorded, anthropic, chat, responses};

/// A running emulator on 127.0.0.1. Stops (closing every connection) when dropped.
pub struct Emulator {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Options for starting an [`Emulator`].
pub struct EmulatorBuilder {
    script: Script,
    api_key: Option<String>,
    port: u16,
    record: Option<PathBuf>,
}

impl Emulator {
    /// Starts an emulator answering `script` on an OS-assigned port.
    ///
    /// # Panics
    /// When no loopback port can be bound (use [`Emulator::builder`] to handle that).
    pub fn start(script: Script) -> Emulator {
        Emulator::builder(script)
            .start()
            .expect("starting the provider emulator")
    }

    /// Options: credential, port, record file.
    pub fn builder(script: Script) -> EmulatorBuilder {
        EmulatorBuilder {
            script,
            api_key: None,
            port: 0,
            record: None,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`: the endpoint (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A capsule manifest named `name` whose model is this emulator: [`capsule_manifest`] at
    /// this emulator's URL, described as a capsule of the emulator.
    pub fn capsule_manifest(&self, name: &str, artifacts: &str, rest: &str) -> String {
        capsule_manifest(
            &self.url(),
            name,
            "A capsule whose model is the provider emulator.",
            artifacts,
            rest,
        )
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.recorded).clone()
    }

    /// How many turns have been completed (answered with their final answer).
    pub fn turns_completed(&self) -> usize {
        lock(&self.shared.state).turn
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl EmulatorBuilder {
    /// The credential requests must carry; overrides the script's `api_key`.
    pub fn api_key(mut self, key: impl Into<String>) -> EmulatorBuilder {
        self.api_key = Some(key.into());
        self
    }

    /// Listen on this port (0: OS-assigned, the default).
    pub fn port(mut self, port: u16) -> EmulatorBuilder {
        self.port = port;
        self
    }

    /// Append each [`Recorded`] request to this file as one JSON line.
    pub fn record_to(mut self, path: impl Into<PathBuf>) -> EmulatorBuilder {
        self.record = Some(path.into());
        self
    }

    /// Binds 127.0.0.1 and starts serving on a thread of its own.
    pub fn start(self) -> std::io::Result<Emulator> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", self.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let record_file = match &self.record {
            Some(path) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
            None => None,
        };
        let shared = Arc::new(Shared::new(self.script, self.api_key, record_file));
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("murmur-emulator".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    tokio::select! {
                        () = accept_loop(listener, state) => {}
                        _ = shutdown_rx => {}
                    }
                });
                // Dropping the runtime here cancels every connection still open.
            })?;
        ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("the emulator thread ended before starting"))??;
        Ok(Emulator {
            addr,
            shared,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }
}

struct Shared {
    turns: Vec<Turn>,
    by_model: std::collections::BTreeMap<String, Reply>,
    conversations: Vec<Conversation>,
    api_key: Option<String>,
    state: Mutex<State>,
    recorded: Mutex<Vec<Recorded>>,
    record_file: Option<Mutex<File>>,
    ids: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The current turn.
    turn: usize,
    /// Requests already answered within the current turn.
    attempt: usize,
    /// Responses API responses produced and stored, by id.
    stored: HashMap<String, Stored>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { handle(shared, request).await }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Returned by the service to make hyper close the connection without answering.
#[derive(Debug)]
struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by the script")
    }
}

impl std::error::Error for DropConnection {}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let arrived = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let unix_ms = arrived.as_millis() as u64;
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = request
        .into_body()
        .collect()
        .await
        .map_err(|_| DropConnection)?
        .to_bytes();
    let provider = Provider::from_path(&path);
    let parsed: Result<Value, serde_json::Error> = serde_json::from_slice(&bytes);
    let plan = shared.plan(provider, &method, &path, &headers, &parsed);
    let body = match parsed {
        Ok(value) => value,
        Err(_) if bytes.is_empty() => Value::Null,
        Err(_) => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
    };
    shared.record(Recorded {
        provider,
        method,
        path,
        headers,
        body,
        turn: plan.turn,
        attempt: plan.attempt,
        status: plan.status,
        outcome: plan.outcome.clone(),
        unix_ms,
        arrived_us: arrived.as_micros() as u64,
        handled_us: started.elapsed().as_micros() as u64,
    });
    if let Some(delay) = plan.first_byte_delay {
        tokio::time::sleep(delay).await;
    }
    if plan.drop {
        return Err(DropConnection);
    }
    Ok(plan.into_response())
}

/// How a request is answered.
struct Plan {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: PlanBody,
    first_byte_delay: Option<Duration>,
    event_delay: Option<Duration>,
    drop: bool,
    outcome: String,
    turn: Option<usize>,
    attempt: Option<usize>,
}

enum PlanBody {
    /// A whole body with its length.
    Whole(Vec<u8>),
    /// Chunks sent one by one (`event_delay` apart); `cut`: then the connection is closed
    /// mid-body.
    Chunks { chunks: Vec<Bytes>, cut: bool },
}

impl Plan {
    fn new(status: u16, body: PlanBody, outcome: impl Into<String>) -> Plan {
        Plan {
            status,
            headers: Vec::new(),
            body,
            first_byte_delay: None,
            event_delay: None,
            drop: false,
            outcome: outcome.into(),
            turn: None,
            attempt: None,
        }
    }

    fn into_response(self) -> Response<Body> {
        let mut builder = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            builder = builder.header(*name, value);
        }
        let body = match self.body {
            PlanBody::Whole(bytes) => Body::from(bytes),
            PlanBody::Chunks { chunks, cut } => {
                let delay = self.event_delay;
                let steps = futures_util::stream::unfold(
                    (chunks.into_iter(), cut, true),
                    move |(mut chunks, cut, first)| async move {
                        match chunks.next() {
                            Some(chunk) => {
                                if let (Some(delay), false) = (delay, first) {
                                    tokio::time::sleep(delay).await;
                                }
                                Some((Ok(chunk), (chunks, cut, false)))
                            }
                            None if cut => {
                                // Let what was sent reach the wire before the connection goes.
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                Some((
                                    Err(std::io::Error::other("stream cut by the script")),
                                    (chunks, false, false),
                                ))
                            }
                            None => None,
                        }
                    },
                );
                Body::from_stream(steps)
            }
        };
        builder
            .body(body)
            .unwrap_or_else(|_| Response::new(Body::empty()))
    }
}

/// What answers a request that passed the checks.
enum Step<'a> {
    Reply(&'a Reply),
    Fault(&'a Fault, Option<&'a Reply>),
}

impl Shared {
    /// `api_key` overrides the script's.
    fn new(script: Script, api_key: Option<String>, record_file: Option<Mutex<File>>) -> Shared {
        Shared {
            api_key: api_key.or(script.api_key),
            turns: script.turns,
            by_model: script.by_model,
            conversations: script.conversations,
            state: Mutex::new(State::default()),
            recorded: Mutex::new(Vec::new()),
            record_file,
            ids: AtomicU64::new(0),
        }
    }

    fn next_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::SeqCst) + 1;
        format!("{prefix}emu{n:08}")
    }

    fn record(&self, recorded: Recorded) {
        if let Some(file) = &self.record_file
            && let Ok(mut line) = serde_json::to_string(&recorded)
        {
            line.push('\n');
            let mut file = lock(file);
            let _ = file.write_all(line.as_bytes());
            let _ = file.flush();
        }
        lock(&self.recorded).push(recorded);
    }

    /// Checks the request and takes the script's next step for it.
    fn plan(
        &self,
        provider: Provider,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &Result<Value, serde_json::Error>,
    ) -> Plan {
        let request_id = self.next_id("req_");
        let refuse = |refusal: Refusal| self.refusal_plan(provider, &refusal, &request_id);
        if provider == Provider::Unknown {
            return refuse(
                Refusal::bad(format!(
                    "Unknown request URL: {method} {path}. Please check the URL for typos."
                ))
                .with_status(404)
                .code("unknown_url"),
            );
        }
        if method != "POST" {
            return refuse(
                Refusal::bad(format!(
                    "Method {method} is not allowed for {path}; use POST."
                ))
                .with_status(405),
            );
        }
        if let Err(refusal) = self.check_credential(provider, headers) {
            return refuse(refusal);
        }
        if provider == Provider::Anthropic
            && let Err(refusal) = anthropic::check_headers(header(headers, "anthropic-version"))
        {
            return refuse(refusal);
        }
        let content_type = header(headers, "content-type").unwrap_or("");
        if !content_type.trim_start().starts_with("application/json") {
            return refuse(Refusal::bad(format!(
                "Invalid Content-Type header ({content_type}), expected application/json."
            )));
        }
        let body = match body {
            Ok(body) => body,
            Err(error) => {
                let message = if provider == Provider::Anthropic {
                    format!("There was an issue with your request body JSON: {error}")
                } else {
                    "We could not parse the JSON body of your request. (HINT: This likely means \
                     you aren't using your HTTP library correctly. The OpenAI API expects a JSON \
                     payload, but what was sent was not valid JSON.)"
                        .to_string()
                };
                return refuse(Refusal::bad(message));
            }
        };
        let mut state = lock(&self.state);
        let checked = match provider {
            Provider::Anthropic => anthropic::validate(body).map(|()| None),
            Provider::OpenAiChat => chat::validate(body).map(|()| None),
            Provider::OpenAiResponses => responses::validate(body, &state.stored).map(Some),
            Provider::Unknown => Ok(None),
        };
        let checked = match checked {
            Ok(checked) => checked,
            Err(refusal) => return refuse(refusal),
        };
        let streaming = body.get("stream").and_then(Value::as_bool) == Some(true);
        if let Some(reply) = body
            .get("model")
            .and_then(Value::as_str)
            .and_then(|model| self.by_model.get(model))
        {
            let resolved = self.resolve(reply, provider, body);
            if let Some(checked) = checked
                && let Some(stored) = responses::remember(checked, &resolved)
            {
                state.stored.insert(resolved.id.clone(), stored);
            }
            drop(state);
            let mut plan = self.reply_plan(provider, &resolved, body, streaming, &request_id);
            plan.outcome = "reply (by model)".into();
            return plan;
        }
        // A conversation, when the request's first user message names one.
        let (first_user, model_turns) = match (provider, &checked) {
            (Provider::Anthropic | Provider::OpenAiChat, _) => {
                super::wire::conversation_position(body)
            }
            (_, Some(checked)) => (checked.first_user.clone(), checked.model_turns),
            (_, None) => (None, 0),
        };
        if let Some((index, conversation)) = first_user.as_deref().and_then(|text| {
            let model = body.get("model").and_then(Value::as_str);
            Conversation::find(&self.conversations, text, model)
        }) {
            let Some(reply) = conversation.turns.get(model_turns) else {
                drop(state);
                let mut plan = refuse(
                    Refusal::bad(format!(
                        "murmur-emulator: the conversation `{}` is exhausted: all {} turn(s) \
                         were scripted and this request already holds {model_turns} model \
                         turn(s), so none is left for it",
                        conversation.task,
                        conversation.turns.len()
                    ))
                    .with_status(500),
                );
                plan.outcome = format!("exhausted (conversation {index})");
                return plan;
            };
            let resolved = self.resolve(reply, provider, body);
            if let Some(checked) = checked
                && let Some(stored) = responses::remember(checked, &resolved)
            {
                state.stored.insert(resolved.id.clone(), stored);
            }
            drop(state);
            let mut plan = self.reply_plan(provider, &resolved, body, streaming, &request_id);
            plan.outcome = format!("reply (conversation {index} turn {model_turns})");
            return plan;
        }
        // Take the next step of the script.
        let Some(turn) = self.turns.get(state.turn) else {
            let mut plan = refuse(
                Refusal::bad(format!(
                    "murmur-emulator: the script is exhausted: all {} turn(s) were answered and \
                     none is left for this request",
                    self.turns.len()
                ))
                .with_status(500),
            );
            plan.outcome = "exhausted".into();
            return plan;
        };
        let (turn_index, attempt) = (state.turn, state.attempt);
        let turn_reply = match &turn.answer {
            Answer::Reply(reply) => Some(reply),
            Answer::Fault(_) => None,
        };
        let is_answer = attempt >= turn.faults.len();
        let step = if is_answer {
            state.turn += 1;
            state.attempt = 0;
            match &turn.answer {
                Answer::Reply(reply) => Step::Reply(reply),
                Answer::Fault(fault) => Step::Fault(fault, None),
            }
        } else {
            state.attempt += 1;
            Step::Fault(&turn.faults[attempt], turn_reply)
        };
        let mut plan = match step {
            Step::Reply(reply) => {
                let resolved = self.resolve(reply, provider, body);
                if let Some(checked) = checked
                    && let Some(stored) = responses::remember(checked, &resolved)
                {
                    state.stored.insert(resolved.id.clone(), stored);
                }
                drop(state);
                self.reply_plan(provider, &resolved, body, streaming, &request_id)
            }
            Step::Fault(fault, reply) => {
                drop(state);
                self.fault_plan(provider, fault, reply, body, streaming, &request_id)
            }
        };
        plan.turn = Some(turn_index);
        plan.attempt = Some(attempt);
        if is_answer {
            plan.first_byte_delay = turn.first_byte_delay_ms.map(Duration::from_millis);
            plan.event_delay = turn.event_delay_ms.map(Duration::from_millis);
        }
        plan
    }

    fn check_credential(
        &self,
        provider: Provider,
        headers: &[(String, String)],
    ) -> Result<(), Refusal> {
        let expected = self.api_key.as_deref();
        if provider == Provider::Anthropic {
            return match header(headers, "x-api-key") {
                None | Some("") => Err(Refusal::bad("x-api-key header is required")
                    .with_status(401)
                    .error_type("authentication_error")),
                Some(key) if expected.is_some_and(|e| e != key) => {
                    Err(Refusal::bad("invalid x-api-key")
                        .with_status(401)
                        .error_type("authentication_error"))
                }
                Some(_) => Ok(()),
            };
        }
        let bearer = header(headers, "authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty());
        match bearer {
            None => Err(Refusal::bad(
                "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), \
                 or as the password field (with blank username) if you're accessing the API \
                 from your browser and are prompted for a username. You can obtain an API key \
                 from https://platform.openai.com/account/api-keys.",
            )
            .with_status(401)),
            Some(key) if expected.is_some_and(|e| e != key) => Err(Refusal::bad(format!(
                "Incorrect API key provided: {}. You can find your API key at \
                 https://platform.openai.com/account/api-keys.",
                mask(key)
            ))
            .with_status(401)
            .code("invalid_api_key")),
            Some(_) => Ok(()),
        }
    }

    /// Settles a reply's ids for `provider`.
    fn resolve(&self, reply: &Reply, provider: Provider, request: &Value) -> Resolved {
        let id_prefix = match provider {
            Provider::Anthropic => "msg_",
            Provider::OpenAiChat => "chatcmpl-",
            _ => "resp_",
        };
        let call_prefix = if provider == Provider::Anthropic {
            "toolu_"
        } else {
            "call_"
        };
        Resolved {
            id: reply.id.clone().unwrap_or_else(|| self.next_id(id_prefix)),
            model: request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("emulated-model")
                .to_string(),
            created: unix_seconds(),
            thinking: reply.thinking.as_ref().map(|t| ResolvedThinking {
                text: t.text.clone(),
                signature: t.signature.clone().unwrap_or_else(|| self.next_id("sig_")),
                item_id: self.next_id("rs_"),
            }),
            text: reply
                .text
                .as_deref()
                .map(|text| quote_tool_results(text, request)),
            message_item_id: self.next_id("msg_"),
            calls: reply
                .tool_calls
                .iter()
                .map(|call| ResolvedCall {
                    id: call.id.clone().unwrap_or_else(|| self.next_id(call_prefix)),
                    item_id: self.next_id("fc_"),
                    name: call.name.clone(),
                    namespace: call.namespace.clone(),
                    input: call.input.clone(),
                    arguments: call.input.to_string(),
                })
                .collect(),
            stop: reply.stop_reason(),
            usage: match (&reply.raw_usage, reply.usage) {
                (Some(raw), _) => UsageOut::Raw(raw.clone()),
                (None, Some(usage)) => UsageOut::Shaped(usage),
                (None, None) => UsageOut::Shaped(Usage {
                    input: Some(10),
                    output: Some(10),
                    ..Usage::default()
                }),
            },
        }
    }

    fn events(provider: Provider, resolved: &Resolved, request: &Value) -> Vec<SseEvent> {
        match provider {
            Provider::Anthropic => anthropic::reply_events(resolved),
            Provider::OpenAiChat => chat::reply_events(resolved, request),
            _ => responses::reply_events(resolved, request),
        }
    }

    fn json_body(provider: Provider, resolved: &Resolved, request: &Value) -> Value {
        match provider {
            Provider::Anthropic => anthropic::reply_body(resolved),
            Provider::OpenAiChat => chat::reply_body(resolved),
            _ => responses::reply_body(resolved, request),
        }
    }

    fn reply_plan(
        &self,
        provider: Provider,
        resolved: &Resolved,
        request: &Value,
        streaming: bool,
        request_id: &str,
    ) -> Plan {
        let mut plan = if streaming {
            let events = Self::events(provider, resolved, request);
            stream_plan(
                events.iter().map(SseEvent::to_wire).collect(),
                false,
                "reply",
            )
        } else {
            let body = Self::json_body(provider, resolved, request);
            json_plan(200, body.to_string().into_bytes(), "reply")
        };
        add_provider_headers(&mut plan, provider, request_id);
        plan
    }

    fn refusal_plan(&self, provider: Provider, refusal: &Refusal, request_id: &str) -> Plan {
        let body = error_body(provider, refusal, request_id);
        let mut plan = json_plan(
            refusal.status,
            body.to_string().into_bytes(),
            format!("refused: {}", refusal.message),
        );
        add_provider_headers(&mut plan, provider, request_id);
        plan
    }

    fn fault_plan(
        &self,
        provider: Provider,
        fault: &Fault,
        reply: Option<&Reply>,
        request: &Value,
        streaming: bool,
        request_id: &str,
    ) -> Plan {
        let outcome = format!("fault: {}", fault.name());
        let placeholder = Reply::text("This answer is cut short by the emulator.");
        let content = || self.resolve(reply.unwrap_or(&placeholder), provider, request);
        let mut plan = match fault {
            Fault::Http(http) => {
                let refusal = fault_refusal(provider, http);
                let body = error_body(provider, &refusal, request_id);
                let mut plan = json_plan(
                    http.status,
                    body.to_string().into_bytes(),
                    format!("fault: {}", http.status),
                );
                if let Some(seconds) = http.retry_after {
                    plan.headers.push(("retry-after", seconds.to_string()));
                }
                plan
            }
            Fault::DropConnection => {
                let mut plan = Plan::new(0, PlanBody::Whole(Vec::new()), outcome);
                plan.drop = true;
                plan
            }
            Fault::MalformedJson => {
                let resolved = content();
                if streaming {
                    let mut events = Self::events(provider, &resolved, request);
                    let mut at = events.len() / 2;
                    while at > 0 && serde_json::from_str::<Value>(&events[at].data).is_err() {
                        at -= 1;
                    }
                    events[at].data = half(&events[at].data).to_string();
                    stream_plan(
                        events.iter().map(SseEvent::to_wire).collect(),
                        false,
                        outcome,
                    )
                } else {
                    let body = Self::json_body(provider, &resolved, request).to_string();
                    json_plan(200, half(&body).as_bytes().to_vec(), outcome)
                }
            }
            Fault::CutStream => {
                let resolved = content();
                if streaming {
                    let events = Self::events(provider, &resolved, request);
                    let whole = (events.len() / 2).max(1);
                    let mut chunks: Vec<String> =
                        events[..whole].iter().map(SseEvent::to_wire).collect();
                    if let Some(next) = events.get(whole) {
                        chunks.push(half(&next.to_wire()).to_string());
                    }
                    stream_plan(chunks, true, outcome)
                } else {
                    let body = Self::json_body(provider, &resolved, request).to_string();
                    let mut plan = stream_plan(vec![half(&body).to_string()], true, outcome);
                    set_header(&mut plan, "content-type", "application/json");
                    plan
                }
            }
            Fault::StreamError => {
                if streaming {
                    let resolved = content();
                    let events = Self::events(provider, &resolved, request);
                    let whole = (events.len() / 2).max(1);
                    let mut chunks: Vec<String> =
                        events[..whole].iter().map(SseEvent::to_wire).collect();
                    let error = match provider {
                        Provider::Anthropic => anthropic::stream_error_event(),
                        Provider::OpenAiChat => chat::stream_error_event(),
                        _ => responses::stream_error_event(whole),
                    };
                    chunks.push(error.to_wire());
                    stream_plan(chunks, false, outcome)
                } else {
                    let status = if provider == Provider::Anthropic {
                        529
                    } else {
                        503
                    };
                    let refusal = fault_refusal(provider, &super::HttpFault::status(status));
                    let body = error_body(provider, &refusal, request_id);
                    json_plan(status, body.to_string().into_bytes(), outcome)
                }
            }
        };
        add_provider_headers(&mut plan, provider, request_id);
        plan
    }
}

fn json_plan(status: u16, body: Vec<u8>, outcome: impl Into<String>) -> Plan {
    let mut plan = Plan::new(status, PlanBody::Whole(body), outcome);
    plan.headers
        .push(("content-type", "application/json".to_string()));
    plan
}

fn stream_plan(chunks: Vec<String>, cut: bool, outcome: impl Into<String>) -> Plan {
    let chunks = chunks.into_iter().map(Bytes::from).collect();
    let mut plan = Plan::new(200, PlanBody::Chunks { chunks, cut }, outcome);
    plan.headers.push((
        "content-type",
        "text/event-stream; charset=utf-8".to_string(),
    ));
    plan.headers.push(("cache-control", "no-cache".to_string()));
    plan
}

fn set_header(plan: &mut Plan, name: &'static str, value: &str) {
    plan.headers.retain(|(n, _)| *n != name);
    plan.headers.push((name, value.to_string()));
}

fn add_provider_headers(plan: &mut Plan, provider: Provider, request_id: &str) {
    match provider {
        Provider::Anthropic => plan.headers.push(("request-id", request_id.to_string())),
        _ => {
            plan.headers.push(("x-request-id", request_id.to_string()));
            plan.headers
                .push(("openai-version", "2020-10-01".to_string()));
            plan.headers.push(("openai-processing-ms", "1".to_string()));
        }
    }
}

/// The first half of `text`, cut at a character boundary.
fn half(text: &str) -> &str {
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// An API key as OpenAI shows it back: its start and end only.
fn mask(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let start: String = chars[..3].iter().collect();
    let end: String = chars[chars.len() - 4..].iter().collect();
    format!("{start}{}{end}", "*".repeat(chars.len() - 7))
}

/// `text` with each `{{tool_result:ID}}` replaced by the text of the result of tool call `ID`
/// in `request` (Anthropic `tool_result` blocks, Chat `tool` messages, Responses
/// `function_call_output` items); empty when the request holds none for `ID`.
fn quote_tool_results(text: &str, request: &Value) -> String {
    const OPEN: &str = "{{tool_result:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let id = &rest[start + OPEN.len()..start + end];
        out.push_str(&tool_result_text(request, id));
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The text of the result of tool call `id` in `request`, whichever API shaped it.
fn tool_result_text(request: &Value, id: &str) -> String {
    fn text_of(content: &Value) -> String {
        match content {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
    let messages = request.get("messages").and_then(Value::as_array);
    for message in messages.into_iter().flatten() {
        if message.get("tool_call_id").and_then(Value::as_str) == Some(id) {
            return text_of(&message["content"]);
        }
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                return text_of(&block["content"]);
            }
        }
    }
    for item in request
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if item["type"] == "function_call_output" && item["call_id"] == id {
            return text_of(&item["output"]);
        }
    }
    String::new()
}

/// A capsule manifest named `name`, described as `description`, whose model is reached at
/// `endpoint` (an emulator, or a recording proxy before one) through the first-party Anthropic
/// driver with the key `${EMU_KEY}` (`model: test-model`). `artifacts` are more entries of its
/// `artifacts:` list (lines starting `  - `), `rest` more top-level sections; `rest` follows
/// the `inference:` block, so lines of it indented by two spaces add to that block.
pub fn capsule_manifest(
    endpoint: &str,
    name: &str,
    description: &str,
    artifacts: &str,
    rest: &str,
) -> String {
    format!(
        r#"name: {name}
version: "0.1.0"
description: {description}
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
{artifacts}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
{rest}
"#,
        driver = crate::repo_root()
            .join("artifacts/driver-anthropic")
            .display(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reply_quotes_the_tool_result_it_names_in_every_api_shape() {
        let anthropic = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "q1", "content": [{"type": "text", "text": "Lima."}]}
        ]}]});
        let chat =
            json!({"messages": [{"role": "tool", "tool_call_id": "q1", "content": "Lima."}]});
        let responses = json!({"input": [{"type": "function_call_output", "call_id": "q1", "output": "Lima."}]});
        for request in [anthropic, chat, responses] {
            assert_eq!(
                quote_tool_results("It is {{tool_result:q1}} ({{tool_result:none}})", &request),
                "It is Lima. ()"
            );
        }
        assert_eq!(
            quote_tool_results("no {{tool_result:q1", &json!({})),
            "no {{tool_result:q1"
        );
    }

    use serde_json::json;

    use super::*;

    fn ask(shared: &Shared, provider: Provider, body: Value) -> Plan {
        let (path, headers): (&str, &[(&str, &str)]) = match provider {
            Provider::Anthropic => (
                "/v1/messages",
                &[
                    ("x-api-key", "k"),
                    ("anthropic-version", "2023-06-01"),
                    ("content-type", "application/json"),
                ],
            ),
            Provider::OpenAiChat => (
                "/v1/chat/completions",
                &[
                    ("authorization", "Bearer k"),
                    ("content-type", "application/json"),
                ],
            ),
            _ => (
                "/v1/responses",
                &[
                    ("authorization", "Bearer k"),
                    ("content-type", "application/json"),
                ],
            ),
        };
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        shared.plan(provider, "POST", path, &headers, &Ok(body))
    }

    fn body_of(plan: &Plan) -> Value {
        match &plan.body {
            PlanBody::Whole(bytes) => serde_json::from_slice(bytes).expect("a JSON body"),
            PlanBody::Chunks { .. } => panic!("a streamed answer"),
        }
    }

    /// An Anthropic request: the first user message `task`, then `assistants` exchanges.
    fn anthropic(task: &str, assistants: usize) -> Value {
        let mut messages = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "<context>"},
            {"type": "text", "text": task},
        ]})];
        for i in 0..assistants {
            messages.push(json!({"role": "assistant", "content": format!("answer {i}")}));
            messages.push(json!({"role": "user", "content": "go on"}));
        }
        json!({"model": "m", "max_tokens": 100, "messages": messages})
    }

    fn anthropic_text(plan: &Plan) -> String {
        assert_eq!(plan.status, 200, "{}", plan.outcome);
        body_of(plan)["content"][0]["text"]
            .as_str()
            .expect("a text block")
            .to_string()
    }

    fn texts(prefix: &str, n: usize) -> Vec<Reply> {
        (0..n)
            .map(|i| Reply::text(format!("{prefix}{i}")))
            .collect()
    }

    #[test]
    fn interleaved_conversations_each_get_their_own_turns() {
        let shared = Shared::new(
            Script::new()
                .with_conversation("write a note", texts("note ", 2))
                .with_conversation("write a poem", texts("poem ", 2))
                .with_reply(Reply::text("global")),
            None,
            None,
        );
        let steps = [
            ("write a note", 0, "note 0", "reply (conversation 0 turn 0)"),
            ("write a poem", 0, "poem 0", "reply (conversation 1 turn 0)"),
            ("write a poem", 1, "poem 1", "reply (conversation 1 turn 1)"),
            ("write a note", 1, "note 1", "reply (conversation 0 turn 1)"),
            // Stateless: asking again from the same place gets the same reply.
            ("write a note", 0, "note 0", "reply (conversation 0 turn 0)"),
        ];
        for (task, assistants, text, outcome) in steps {
            let plan = ask(&shared, Provider::Anthropic, anthropic(task, assistants));
            assert_eq!(anthropic_text(&plan), text);
            assert_eq!(plan.outcome, outcome);
            assert_eq!((plan.turn, plan.attempt), (None, None));
        }
        assert_eq!(lock(&shared.state).turn, 0, "no global turn was taken");
    }

    #[test]
    fn the_turn_is_the_number_of_assistant_messages() {
        let shared = Shared::new(
            Script::new().with_conversation("fix the bug", texts("step ", 3)),
            None,
            None,
        );
        let plan = ask(&shared, Provider::Anthropic, anthropic("fix the bug", 2));
        assert_eq!(anthropic_text(&plan), "step 2");

        let chat = json!({"model": "m", "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "please fix the bug now"}]},
            {"role": "assistant", "content": "looking"},
            {"role": "user", "content": "and?"},
        ]});
        let plan = ask(&shared, Provider::OpenAiChat, chat);
        assert_eq!(plan.status, 200, "{}", plan.outcome);
        assert_eq!(body_of(&plan)["choices"][0]["message"]["content"], "step 1");
        assert_eq!(plan.outcome, "reply (conversation 0 turn 1)");
    }

    #[test]
    fn an_exhausted_conversation_is_a_500() {
        let shared = Shared::new(
            Script::new()
                .with_conversation("write a note", texts("note ", 1))
                .with_reply(Reply::text("global")),
            None,
            None,
        );
        let plan = ask(&shared, Provider::Anthropic, anthropic("write a note", 1));
        assert_eq!(plan.status, 500);
        assert_eq!(plan.outcome, "exhausted (conversation 0)");
        let message = body_of(&plan)["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains("conversation `write a note` is exhausted"),
            "{message}"
        );
        assert_eq!(
            lock(&shared.state).turn,
            0,
            "it does not fall back to turns"
        );
    }

    #[test]
    fn a_request_matching_no_conversation_takes_the_next_turn() {
        let shared = Shared::new(
            Script::new()
                .with_conversation("write a note", texts("note ", 1))
                .with_reply(Reply::text("global")),
            None,
            None,
        );
        let plan = ask(&shared, Provider::Anthropic, anthropic("something else", 0));
        assert_eq!(anthropic_text(&plan), "global");
        assert_eq!((plan.turn, plan.attempt), (Some(0), Some(0)));
        assert_eq!(plan.outcome, "reply");
        let plan = ask(&shared, Provider::Anthropic, anthropic("something else", 0));
        assert_eq!((plan.status, plan.outcome.as_str()), (500, "exhausted"));
    }

    #[test]
    fn a_conversation_naming_a_model_answers_only_that_model() {
        let mut script = Script::new();
        for (model, prefix) in [("careful", "careful "), ("hasty", "hasty ")] {
            let mut conversation = Conversation::new("write a note", texts(prefix, 1));
            conversation.model = Some(model.to_string());
            script.conversations.push(conversation);
        }
        let shared = Shared::new(script.with_reply(Reply::text("global")), None, None);
        for (model, text) in [
            ("hasty", "hasty 0"),
            ("careful", "careful 0"),
            ("other", "global"),
        ] {
            let mut body = anthropic("write a note", 0);
            body["model"] = json!(model);
            assert_eq!(
                anthropic_text(&ask(&shared, Provider::Anthropic, body)),
                text
            );
        }
    }

    #[test]
    fn by_model_comes_before_conversations() {
        let mut script = Script::new().with_conversation("write a note", texts("note ", 1));
        script.by_model.insert("m".into(), Reply::text("standing"));
        let shared = Shared::new(script, None, None);
        let plan = ask(&shared, Provider::Anthropic, anthropic("write a note", 0));
        assert_eq!(anthropic_text(&plan), "standing");
        assert_eq!(plan.outcome, "reply (by model)");
    }

    #[test]
    fn responses_count_model_turns_in_input_and_in_the_stored_chain() {
        let shared = Shared::new(
            Script::new()
                .with_conversation(
                    "write a note",
                    [
                        Reply::text("writing").with_tool_call("call_a", "write", json!({})),
                        Reply::text("written"),
                        Reply::text("third"),
                    ],
                )
                .with_reply(Reply::text("global")),
            None,
            None,
        );
        let text_of = |plan: &Plan| {
            assert_eq!(plan.status, 200, "{}", plan.outcome);
            let body = body_of(plan);
            let message = body["output"]
                .as_array()
                .unwrap()
                .iter()
                .find(|item| item["type"] == "message")
                .cloned()
                .expect("a message item");
            (
                body["id"].as_str().unwrap().to_string(),
                message["content"][0]["text"].as_str().unwrap().to_string(),
            )
        };
        // A string input is the user message.
        let first = ask(
            &shared,
            Provider::OpenAiResponses,
            json!({"model": "m", "input": "please write a note"}),
        );
        let (id, text) = text_of(&first);
        assert_eq!(text, "writing");
        // Continuing the stored response: it counts as one model turn.
        let second = ask(
            &shared,
            Provider::OpenAiResponses,
            json!({"model": "m", "previous_response_id": id, "input": [
                {"type": "function_call_output", "call_id": "call_a", "output": "ok"},
            ]}),
        );
        assert_eq!(text_of(&second).1, "written");
        assert_eq!(second.outcome, "reply (conversation 0 turn 1)");
        // Stateless: a model turn is a run of output items (reasoning, text, calls).
        let stateless = json!({"model": "m", "store": false, "input": [
            {"role": "developer", "content": "rules"},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "write a note"},
            ]},
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "writing"},
            ]},
            {"type": "function_call", "call_id": "c1", "name": "write", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "message", "role": "assistant", "content": "written"},
            {"role": "user", "content": "more"},
        ]});
        let third = ask(&shared, Provider::OpenAiResponses, stateless);
        assert_eq!(text_of(&third).1, "third");
        assert_eq!(third.outcome, "reply (conversation 0 turn 2)");
        // Matching nothing: the global turns.
        let other = ask(
            &shared,
            Provider::OpenAiResponses,
            json!({"model": "m", "input": "something else"}),
        );
        assert_eq!(text_of(&other).1, "global");
        assert_eq!(other.turn, Some(0));
    }
}
