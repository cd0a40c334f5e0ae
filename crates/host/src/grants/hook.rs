//! The host interfaces a capsule may grant a hook: `runtime/inference`, `runtime/tokens`,
//! `task-io/read`, `conversation/read`.
//!
//! Each is linked only when granted (see [`crate::Engine::hook_linker`]). Each answers through
//! the dispatch in progress: before it calls a handler, the runtime sets on the hook's store a
//! [`HookCall`] for that dispatch (the hook, its task, its turn, its conversation), and every
//! import is a question to it. A store with none set (any other store, or a hook called outside
//! a dispatch) fails the import with a trap.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bindings::hook::murmur;
use crate::bindings::hook::murmur::conversation::types::Message;
use crate::bindings::hook::murmur::runtime::inference::{InferenceRequest, InferenceResponse};

/// What one hook dispatch answers a hook's imports with. The runtime implements it.
pub trait HookCall: Send + Sync {
    /// `run-inference`: one completion for this hook.
    fn run_inference(
        &self,
        request: InferenceRequest,
    ) -> Pin<Box<dyn Future<Output = Result<InferenceResponse, String>> + Send + '_>>;

    /// `count-tokens`.
    fn count_tokens(&self, text: &str) -> u64;

    /// `task-input`: the current task's text.
    fn task_input(&self) -> Option<String>;

    /// `task-result`: the current task's answer, once the agent loop has returned.
    fn task_result(&self) -> Option<String>;

    /// `history`: the conversation of `context_id`, or of the current task for `None`.
    fn history(&self, context_id: Option<&str>) -> Result<Vec<Message>, String>;
}

/// A hook's slice of the store: the dispatch in progress, if any.
pub type HookSlot = Option<Arc<dyn HookCall>>;

fn current(slot: &HookSlot) -> wasmtime::Result<&Arc<dyn HookCall>> {
    slot.as_ref()
        .ok_or_else(|| wasmtime::Error::msg("a hook import was called outside a hook dispatch"))
}

impl murmur::runtime::inference::Host for HookSlot {
    async fn run_inference(
        &mut self,
        request: InferenceRequest,
    ) -> wasmtime::Result<Result<InferenceResponse, String>> {
        let call = current(self)?.clone();
        Ok(call.run_inference(request).await)
    }
}

impl murmur::runtime::tokens::Host for HookSlot {
    async fn count_tokens(&mut self, text: String) -> wasmtime::Result<u64> {
        Ok(current(self)?.count_tokens(&text))
    }
}

impl murmur::task_io::read::Host for HookSlot {
    async fn task_input(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(current(self)?.task_input())
    }

    async fn task_result(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(current(self)?.task_result())
    }
}

impl murmur::conversation::read::Host for HookSlot {
    async fn history(
        &mut self,
        context_id: Option<String>,
    ) -> wasmtime::Result<Result<Vec<Message>, String>> {
        Ok(current(self)?.history(context_id.as_deref()))
    }
}

impl murmur::conversation::types::Host for HookSlot {}
