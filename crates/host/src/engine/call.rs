//! The one way a component is called: every tool call, capsule-component run and hook handler
//! goes through here.
//!
//! What it promises:
//!
//! - **A store per component, limited.** [`Engine::store`] gives the component its own store of
//!   `state`, with the memory and table ceiling of its grants and the epoch deadline armed.
//! - **Calls that end.** [`Engine::bounded`] runs a call (an instantiation, an export) under a
//!   wall-clock deadline twice over: the epoch stops a component running its own code, a timer
//!   a tick later stops one parked in a host call.
//! - **A failure named for what it was**: the memory ceiling ([`RuntimeError::MemoryLimit`]), the
//!   deadline ([`RuntimeError::Deadline`]), or an ordinary trap ([`RuntimeError::Trap`]) with
//!   the last lines of the component's stderr.

use std::time::Duration;

use wasmtime::Store;

use crate::engine::{Engine, TICK, error_chain};
use crate::error::RuntimeError;
use crate::grants::HostState;

impl Engine {
    /// A store for one component: `state`, its memory limiter, and the epoch deadline trap.
    pub fn store(&self, state: HostState) -> Store<HostState> {
        let mut store = Store::new(self.wasm(), state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        store
    }

    /// Runs `call` on `store` within `deadline`, and names its failure. `component` is the name
    /// errors give.
    pub async fn bounded<T>(
        &self,
        component: &str,
        deadline: Duration,
        store: &mut Store<HostState>,
        call: impl AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<T>,
    ) -> Result<T, RuntimeError> {
        store.set_epoch_deadline(deadline_ticks(deadline));
        // The timer runs a tick later so the epoch, which names the cause more precisely,
        // normally fires first.
        match tokio::time::timeout(deadline + 2 * TICK, call(&mut *store)).await {
            Err(_elapsed) => Err(RuntimeError::Deadline {
                component: component.to_string(),
                deadline,
            }),
            Ok(Err(error)) => Err(classify_failure(component, deadline, store.data(), &error)),
            Ok(Ok(value)) => Ok(value),
        }
    }
}

fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos().div_ceil(TICK.as_nanos()) as u64).max(1)
}

/// Names why a call failed: the memory ceiling, the deadline, or an ordinary trap.
fn classify_failure(
    component: &str,
    deadline: Duration,
    state: &HostState,
    error: &wasmtime::Error,
) -> RuntimeError {
    if let Some(requested) = state.limiter.refused_at() {
        return RuntimeError::MemoryLimit {
            component: component.to_string(),
            limit_bytes: state.limiter.limit_bytes(),
            requested_bytes: requested,
        };
    }
    if error.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
        return RuntimeError::Deadline {
            component: component.to_string(),
            deadline,
        };
    }
    let mut message = error_chain(error);
    let stderr = state.stderr.text();
    let last_lines: Vec<&str> = stderr.lines().rev().take(5).collect();
    if !last_lines.is_empty() {
        message.push_str("; its stderr ends with: ");
        message.push_str(&last_lines.into_iter().rev().collect::<Vec<_>>().join(" | "));
    }
    RuntimeError::Trap {
        component: component.to_string(),
        message,
    }
}
