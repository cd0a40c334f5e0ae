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

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bindings::hook::murmur;
use crate::bindings::hook::murmur::conversation::types::Message as WitMessage;
use crate::bindings::hook::murmur::runtime::inference::{InferenceRequest, InferenceResponse};
use crate::hooks::events::to_wit;
use crate::inference::neutral::StoredMessage;
use crate::inference::tokens;

/// What the hook imports need of the session: its primary driver and trace for
/// `run-inference`, its workdir for saved conversations. The session's services implement it,
/// so that these imports need nothing of the engine or the session.
pub(crate) trait HookHost: Send + Sync {
    /// One completion for `hook` (see the module docs), traced under its scope.
    fn run_inference<'a>(
        &'a self,
        hook: &'a HookScope,
        request: InferenceRequest,
    ) -> Pin<Box<dyn Future<Output = Result<InferenceResponse, String>> + Send + 'a>>;

    /// The conversation of the context `context_id` of this session, as it was last saved.
    fn saved_history(&self, context_id: &str) -> Result<Vec<StoredMessage>, String>;
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
    pub services: Arc<dyn HookHost>,
    pub scope: Scope,
}

/// A hook's store holds the scope of the dispatch in progress; any other store holds none.
fn scope(slot: &Option<HookScope>) -> wasmtime::Result<&HookScope> {
    slot.as_ref()
        .ok_or_else(|| wasmtime::Error::msg("a hook import was called outside a hook dispatch"))
}

impl murmur::runtime::inference::Host for Option<HookScope> {
    async fn run_inference(
        &mut self,
        request: InferenceRequest,
    ) -> wasmtime::Result<Result<InferenceResponse, String>> {
        let scope = scope(self)?.clone();
        Ok(scope.services.run_inference(&scope, request).await)
    }
}

impl murmur::runtime::tokens::Host for Option<HookScope> {
    async fn count_tokens(&mut self, text: String) -> wasmtime::Result<u64> {
        Ok(tokens::count(&text))
    }
}

impl murmur::task_io::read::Host for Option<HookScope> {
    async fn task_input(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(scope(self)?.scope.task_input.clone())
    }

    async fn task_result(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(scope(self)?.scope.task_result.clone())
    }
}

impl murmur::conversation::read::Host for Option<HookScope> {
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
        Ok(hook
            .services
            .saved_history(wanted)
            .map(|history| history.iter().map(to_wit).collect()))
    }
}

impl murmur::conversation::types::Host for Option<HookScope> {}
