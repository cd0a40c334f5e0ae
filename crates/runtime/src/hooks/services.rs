//! The session's side of a hook's imports: each dispatch is a [`HookScope`] (the hook, and the
//! task, turn and conversation it is called about), which answers them.
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
//!   session, as it was last saved in the workdir.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::bindings::hook::murmur::conversation::types::Message as WitMessage;
use crate::bindings::hook::murmur::runtime::inference::{
    InferenceRequest, InferenceResponse, Usage as WitUsage,
};
use crate::engine::Engine;
use crate::grants::Grants;
use crate::grants::hook::HookCall;
use crate::hooks::StagedHook;
use crate::hooks::events::{from_wit_list, to_wit};
use crate::inference::cache_key::prompt_cache_key;
use crate::inference::call::{DriverFailure, call_driver};
use crate::inference::neutral::{Block, StoredMessage};
use crate::inference::request::DriverRequest;
use crate::inference::response::StopReason;
use crate::inference::tokens;
use crate::session::Staged;
use crate::session::staging::capsule_block;
use murmur_manifest::Coded;
use murmur_trace::Trace;
use murmur_trace::schema::{Decision, EventBody, Origin, Sent};

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

/// One dispatch: who is called, and about what. Set on the hook's store before each call.
pub(crate) struct HookScope {
    pub hook: String,
    pub services: Arc<HookServices>,
    pub scope: Scope,
}

impl HookCall for HookScope {
    fn run_inference(
        &self,
        request: InferenceRequest,
    ) -> Pin<Box<dyn Future<Output = Result<InferenceResponse, String>> + Send + '_>> {
        Box::pin(run_inference(&self.services, self, request))
    }

    fn count_tokens(&self, text: &str) -> u64 {
        tokens::count(text)
    }

    fn task_input(&self) -> Option<String> {
        self.scope.task_input.clone()
    }

    fn task_result(&self) -> Option<String> {
        self.scope.task_result.clone()
    }

    fn history(&self, context_id: Option<&str>) -> Result<Vec<WitMessage>, String> {
        let current = self.scope.context_id.as_deref();
        let wanted = context_id.or(current);
        if wanted.is_some()
            && wanted == current
            && let Some(history) = &self.scope.history
        {
            return Ok(history.iter().map(to_wit).collect());
        }
        let Some(wanted) = wanted else {
            return Err("no conversation is in progress".to_string());
        };
        self.services
            .saved_history(wanted)
            .map(|history| history.iter().map(to_wit).collect())
    }
}

/// What hooks' host calls reach: the session's hooks, its primary driver, its trace, its
/// workdir.
pub(crate) struct HookServices {
    pub engine: Arc<Engine>,
    /// The session's hooks, in manifest order.
    pub hooks: Arc<[StagedHook]>,
    /// What `run-inference` calls; none in a capsule component's session, which has no model.
    pub inference: Option<HookInference>,
    /// The session's spend meter: a hook's call is admitted against it like any other.
    pub spend: Arc<crate::inference::spend::SpendMeter>,
    /// Set once the trace exists (after `on-stage`).
    pub trace: std::sync::OnceLock<Trace>,
    /// The session workdir: the host reads contexts' histories from it for
    /// `conversation/read`, and writes hook logs into it.
    pub workdir: crate::session::workdir::Workdir,
    pub session_id: String,
}

/// The agent's primary choice, as a hook's `run-inference` calls it.
pub(crate) struct HookInference {
    pub staged: Arc<Staged>,
    pub driver_grants: Grants,
}

impl HookServices {
    /// The conversation of the context `context_id` of this session, as it was last saved.
    fn saved_history(&self, context_id: &str) -> Result<Vec<StoredMessage>, String> {
        let unknown = || format!("this session has no context `{context_id}`");
        if !crate::session::workdir::is_safe_id(context_id) {
            return Err(unknown());
        }
        self.workdir.load_history(context_id)?.ok_or_else(unknown)
    }
}

async fn run_inference(
    services: &HookServices,
    hook: &HookScope,
    request: InferenceRequest,
) -> Result<InferenceResponse, String> {
    let Some(HookInference {
        staged,
        driver_grants,
    }) = &services.inference
    else {
        return Err(
            "this session has no model to call: the capsule declares no `inference:`".to_string(),
        );
    };
    let started = Instant::now();
    let Some(driver) = &staged.driver else {
        return Err(if staged.process.is_some() {
            "the capsule's model is an agent CLI (`transport: process`): there is no driver for a hook's inference"
        } else {
            "this session has no model to call: the capsule declares no `inference:`"
        }
        .to_string());
    };
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
    let input = driver_request.to_input().map_err(|e| e.to_string())?;
    let input_estimate = tokens::count(input.data.as_deref().unwrap_or_default());
    services
        .spend
        .admit(input_estimate)
        .map_err(|over| format!("spend_ceiling_reached: {over}"))?;
    let mut grants = driver_grants.clone();
    grants.chunks = None;
    for (name, value) in grants.env.iter_mut() {
        if name == "MURMUR_INFERENCE_MODEL" {
            *value = model.clone();
        }
    }
    let answer = call_driver(
        &services.engine,
        &driver.component,
        &grants,
        &input,
        &mut None,
    )
    .await
    .map_err(|failure| match failure {
        DriverFailure::Answered(failure) => failure.message,
        DriverFailure::Call(error) => format!("error[{}]: {error}", error.code()),
    });
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
            (text, answer.stop_reason, answer.usage, estimate)
        }
        Err(_) => (String::new(), StopReason::Error, None, 0),
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
                    origin: Origin::Hook(hook.hook.clone()),
                    // Only named where there is another to tell it from.
                    choice: staged
                        .choices
                        .has_alternates()
                        .then(|| murmur_trace::schema::PRIMARY_CHOICE.to_string()),
                    driver: driver.name.clone(),
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
                    stop_reason,
                    decision: Decision::Hook,
                    tool_name: None,
                    tool_calls: 0,
                    duration_ms: started.elapsed().as_millis() as u64,
                    error: answer
                        .as_ref()
                        .err()
                        .map(|message| murmur_trace::schema::ErrorRef {
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
