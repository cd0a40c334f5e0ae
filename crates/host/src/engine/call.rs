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
    if let Some(why) = state.input.unanswered() {
        return RuntimeError::InputUnanswered {
            component: component.to_string(),
            why: why.to_string(),
        };
    }
    let mut message = error_chain(error);
    if let Some(said) = stderr_tail(&state.stderr.text()) {
        message.push_str("; its stderr ends with: ");
        message.push_str(&said);
    }
    RuntimeError::Trap {
        component: component.to_string(),
        message,
    }
}

/// The most lines, and characters, of a trapped component's stderr its report keeps.
const STDERR_TAIL_LINES: usize = 12;
const STDERR_TAIL_CHARS: usize = 2_000;

/// What a trapped component last wrote on stderr, one line after another (`a | b`): its last
/// [`STDERR_TAIL_LINES`] lines that are not blank, at most [`STDERR_TAIL_CHARS`] characters
/// (the end kept). Where a language runtime says why it died (an uncaught exception, a panic).
fn stderr_tail(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty())
        .collect();
    let kept = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    if kept.is_empty() {
        return None;
    }
    let joined = kept.join(" | ");
    let count = joined.chars().count();
    Some(if count > STDERR_TAIL_CHARS {
        let cut: String = joined.chars().skip(count - STDERR_TAIL_CHARS).collect();
        format!("…{cut}")
    } else {
        joined
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trapped_components_stderr_keeps_its_last_lines_that_say_something() {
        assert_eq!(stderr_tail(""), None);
        assert_eq!(stderr_tail("\n  \n\n"), None);
        let dying = "starting\nError: boom\n    at run (tool.js:3)\n\n\n\n\n\n\n";
        assert_eq!(
            stderr_tail(dying).as_deref(),
            Some("starting | Error: boom |     at run (tool.js:3)")
        );
        let long: String = (0..40).map(|n| format!("line {n}\n")).collect();
        let tail = stderr_tail(&long).unwrap();
        assert!(
            tail.starts_with("line 28 | ") && tail.ends_with("line 39"),
            "{tail}"
        );
        let wide = "x".repeat(5_000);
        let tail = stderr_tail(&wide).unwrap();
        assert_eq!(tail.chars().count(), STDERR_TAIL_CHARS + 1);
        assert!(tail.starts_with('…'));
    }
}
