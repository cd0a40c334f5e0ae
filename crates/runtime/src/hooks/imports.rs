//! The host side of the interfaces a capsule may grant a hook: `runtime/inference`,
//! `runtime/tokens`, `task-io/read`, `conversation/read`.
//!
//! - `run-inference` makes one completion through the primary driver and its gateway, traced
//!   as an `inference` event with `origin: hook:<name>` and the model used. A `some(model)`
//!   that fails is an error: it never falls back to the capsule's model. Its
//!   `prompt_cache_key` is `<capsule>:<task-id>`, the form without a context id: a hook's call
//!   is not a turn of the task's conversation.
//! - `count-tokens` is the runtime's own count (cl100k).
//! - `task-input` / `task-result` are the current task's text and, once the agent loop has
//!   returned, its answer.
//! - `history(none)` is the current task's conversation; `history(some(ctx))` a context of this
//!   session, as it was last saved.

use std::sync::Arc;
use std::time::Instant;

use crate::bindings::hook::murmur;
use crate::bindings::hook::murmur::conversation::types::Message as WitMessage;
use crate::bindings::hook::murmur::runtime::inference::{
    InferenceRequest, InferenceResponse, Usage as WitUsage,
};
use crate::engine::Engine;
use crate::grants::{Grants, HostState};
use crate::hooks::events::{from_wit_list, to_wit};
use crate::inference::cache_key::prompt_cache_key;
use crate::inference::neutral::{Block, StoredMessage};
use crate::inference::request::DriverRequest;
use crate::inference::response::read_answer;
use crate::inference::tokens;
use crate::session::Staged;
use crate::session::staging::capsule_block;
use crate::tool::ToolInput;
use crate::trace::Trace;
use crate::trace::schema::{EventBody, Sent};

/// What hooks' host calls reach: the session's primary driver, its trace, its workdir.
pub(crate) struct HookServices {
    pub engine: Arc<Engine>,
    pub staged: Arc<Staged>,
    pub driver_grants: Grants,
    /// The session's spend meter: a hook's call is admitted against it like any other.
    pub spend: Arc<crate::inference::spend::SpendMeter>,
    /// Set once the trace exists (after `on-stage`).
    pub trace: std::sync::OnceLock<Trace>,
    /// The session workdir: the host reads contexts' histories from it for
    /// `conversation/read`, and writes hook logs into it.
    pub workdir: Arc<crate::beneath::BeneathDir>,
    pub session_id: String,
}

/// What a dispatch is about: the task, turn and conversation it happens in.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    pub turn: u32,
    /// The trace event the hook's own events (a `run-inference`) hang under.
    pub parent_event: String,
    pub task_input: Option<String>,
    pub task_result: Option<String>,
    /// The task's conversation, for hooks granted `conversation/read`.
    pub history: Option<Arc<Vec<StoredMessage>>>,
}

/// Who is calling, and about what: set on a hook's store before each dispatch.
#[derive(Clone)]
pub(crate) struct HookScope {
    pub hook: String,
    pub services: Arc<HookServices>,
    pub scope: Scope,
}

fn scope(state: &HostState) -> wasmtime::Result<&HookScope> {
    state
        .hook
        .as_ref()
        .ok_or_else(|| wasmtime::Error::msg("a hook import was called outside a hook dispatch"))
}

impl murmur::runtime::inference::Host for HostState {
    async fn run_inference(
        &mut self,
        request: InferenceRequest,
    ) -> wasmtime::Result<Result<InferenceResponse, String>> {
        let scope = scope(self)?.clone();
        Ok(run_inference(&scope, request).await)
    }
}

async fn run_inference(
    hook: &HookScope,
    request: InferenceRequest,
) -> Result<InferenceResponse, String> {
    let services = &hook.services;
    let staged = &services.staged;
    let started = Instant::now();
    let history = from_wit_list(&request.messages)?;
    let messages: Vec<_> = history
        .iter()
        .map(|m| std::borrow::Cow::Borrowed(&m.message))
        .collect();
    let model = request
        .model
        .clone()
        .unwrap_or_else(|| staged.model.clone());
    let mut system = capsule_block(&staged.capsule.name, &staged.capsule.version);
    if let Some(prompt) = &request.system_prompt {
        system.push_str("\n\n");
        system.push_str(prompt);
    }
    let cache_key = prompt_cache_key(
        &staged.capsule.name,
        None,
        hook.scope
            .task_id
            .as_deref()
            .unwrap_or(&services.session_id),
    );
    let driver_request = DriverRequest {
        model: &model,
        max_tokens: request.max_tokens.unwrap_or(staged.max_tokens),
        system: Some(&system),
        messages,
        tools: &[],
        prompt_cache_key: &cache_key,
        stream: false,
        continuation_id: None,
    };
    let data = serde_json::to_string(&driver_request).map_err(|e| e.to_string())?;
    let input_estimate = tokens::count(&data);
    services
        .spend
        .admit(input_estimate)
        .map_err(|over| format!("spend_ceiling_reached: {over}"))?;
    let mut grants = services.driver_grants.clone();
    grants.chunks = None;
    for (name, value) in grants.env.iter_mut() {
        if name == "MURMUR_INFERENCE_MODEL" {
            *value = model.clone();
        }
    }
    let report = services
        .engine
        .call_tool(
            &staged.driver.component,
            &grants,
            &ToolInput {
                data: Some(data),
                log_path: None,
            },
        )
        .await;
    let answer = match report.outcome {
        Ok(output) => read_answer(&output).map_err(|failure| failure.message),
        Err(error) => Err(format!("error[{}]: {error}", error.code())),
    };
    let (text, stop_reason, usage, output_estimate) = match &answer {
        Ok(answer) => {
            let text = answer
                .content
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            let estimate =
                tokens::count(&serde_json::to_string(&answer.content).unwrap_or_default());
            (text, answer.stop_reason.as_str(), answer.usage, estimate)
        }
        Err(_) => (String::new(), "error", None, 0),
    };
    services.spend.record_output(output_estimate);
    let usage_or_default = usage.unwrap_or_default();
    let parent = hook.scope.parent_event.clone();
    if let Some(trace) = services.trace.get() {
        trace
            .write(
                Some(&parent),
                EventBody::Inference {
                    task_id: hook.scope.task_id.clone(),
                    turn: hook.scope.turn,
                    origin: format!("hook:{}", hook.hook),
                    choice: "primary".to_string(),
                    driver: staged.driver.name.clone(),
                    model: model.clone(),
                    prompt_cache_key: cache_key.clone(),
                    sent: Sent {
                        messages: history.len() as u32,
                        full_resend: true,
                        continuation_id: None,
                    },
                    input_tokens_estimated: input_estimate,
                    output_tokens_estimated: output_estimate,
                    input_tokens_actual: usage_or_default.input_tokens,
                    output_tokens_actual: usage_or_default.output_tokens,
                    cached_tokens_actual: usage_or_default.cached_tokens,
                    cache_write_tokens_actual: usage_or_default.cache_write_tokens,
                    stop_reason: stop_reason.to_string(),
                    decision: "hook".to_string(),
                    tool_name: None,
                    tool_calls: 0,
                    duration_ms: started.elapsed().as_millis() as u64,
                    error: answer
                        .as_ref()
                        .err()
                        .map(|message| crate::trace::schema::ErrorRef {
                            code: "E-RUN-011".to_string(),
                            message: message.clone(),
                        }),
                },
            )
            .map_err(|error| format!("the trace could not be written: {error}"))?;
    }
    let answer = answer?;
    Ok(InferenceResponse {
        text,
        stop_reason: answer.stop_reason.as_str().to_string(),
        usage: answer.usage.map(|u| WitUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_tokens: u.cached_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }),
    })
}

impl murmur::runtime::tokens::Host for HostState {
    async fn count_tokens(&mut self, text: String) -> wasmtime::Result<u64> {
        Ok(tokens::count(&text))
    }
}

impl murmur::task_io::read::Host for HostState {
    async fn task_input(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(scope(self)?.scope.task_input.clone())
    }

    async fn task_result(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(scope(self)?.scope.task_result.clone())
    }
}

impl murmur::conversation::read::Host for HostState {
    async fn history(
        &mut self,
        context_id: Option<String>,
    ) -> wasmtime::Result<Result<Vec<WitMessage>, String>> {
        let hook = scope(self)?;
        let current = hook.scope.context_id.as_deref();
        let wanted = context_id.as_deref().or(current);
        if wanted.is_some()
            && wanted == current
            && let Some(history) = &hook.scope.history
        {
            return Ok(Ok(history.iter().map(to_wit).collect()));
        }
        let Some(wanted) = wanted else {
            return Ok(Err("no conversation is in progress".to_string()));
        };
        let safe = wanted.starts_with("ctx_") && wanted[4..].chars().all(|c| c.is_ascii_hexdigit());
        let path = std::path::Path::new("contexts")
            .join(wanted)
            .join("history.json");
        if !safe || !hook.services.workdir.is_file(&path) {
            return Ok(Err(format!("this session has no context `{wanted}`")));
        }
        let read = hook
            .services
            .workdir
            .read(&path, crate::session::workdir::HISTORY_MAX_BYTES)
            .map_err(|error| error.to_string())
            .and_then(|bytes| {
                serde_json::from_slice::<Vec<StoredMessage>>(&bytes).map_err(|e| e.to_string())
            });
        Ok(read.map(|history| history.iter().map(to_wit).collect()))
    }
}

impl murmur::conversation::types::Host for HostState {}
