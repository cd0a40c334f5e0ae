//! One call of `murmur:tool/run`: a fresh store under the call's grants, its limits and
//! deadline, and a failure named for what it was (see the rules in [`crate::tool`]).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;

use crate::RunWorld;
use crate::bindings;
use crate::engine::{Engine, LoadedComponent, TICK, error_chain};
use crate::error::RuntimeError;
use crate::grants::Grants;
use crate::grants::tool_registry::{CallTool, LoadTool};
use crate::tool::{DATA_MAX_BYTES, ToolCallReport, ToolInput, read_result};

impl Engine {
    /// Calls `run` of `component` once with `input`, under `grants`.
    pub async fn call_tool(
        &self,
        component: &LoadedComponent,
        grants: &Grants,
        input: &ToolInput,
    ) -> ToolCallReport {
        let started = Instant::now();
        let state = match grants.host_state() {
            Ok(state) => state,
            Err(error) => {
                return ToolCallReport {
                    outcome: Err(error),
                    refusals: Vec::new(),
                    sends: Vec::new(),
                    stdout: String::new(),
                    stderr: String::new(),
                    duration: started.elapsed(),
                };
            }
        };
        let mut store = Store::new(self.wasm(), state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(deadline_ticks(grants.limits.deadline));
        store.epoch_deadline_trap();

        let wit_input = bindings::ToolInput {
            data: input.data.clone(),
            log_path: input.log_path.clone(),
        };
        // The epoch stops a component running its own code; the timer also stops one parked
        // in a host call. The timer runs a tick later so the epoch, which names the cause
        // more precisely, normally fires first.
        let timed = tokio::time::timeout(grants.limits.deadline + 2 * TICK, async {
            let tool = component.pre.instantiate_async(&mut store).await?;
            tool.murmur_tool_run()
                .call_run(&mut store, &wit_input)
                .await
        })
        .await;

        let state = store.data();
        let outcome = match timed {
            Err(_elapsed) => Err(RuntimeError::Deadline {
                component: component.name().to_string(),
                deadline: grants.limits.deadline,
            }),
            Ok(Err(error)) => Err(classify_failure(
                component.name(),
                grants.limits.deadline,
                state,
                &error,
            )),
            Ok(Ok(result)) => match result.data.as_ref().map(|data| data.len() as u64) {
                Some(bytes) if bytes > DATA_MAX_BYTES => Err(RuntimeError::DataTooLarge {
                    component: component.name().to_string(),
                    bytes,
                    limit: DATA_MAX_BYTES,
                }),
                _ => read_result(component.name(), &grants.workdir, result.into()),
            },
        };
        ToolCallReport {
            outcome,
            refusals: state.http_grant.refusals.clone(),
            sends: state.message.sends.clone(),
            stdout: state.stdout.text(),
            stderr: state.stderr.text(),
            duration: started.elapsed(),
        }
    }
}

pub(crate) fn deadline_ticks(deadline: Duration) -> u64 {
    (deadline.as_nanos().div_ceil(TICK.as_nanos()) as u64).max(1)
}

/// Names why a call failed: the memory ceiling, the deadline, or an ordinary trap.
pub(crate) fn classify_failure(
    component: &str,
    deadline: Duration,
    state: &crate::grants::HostState,
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

/// A loaded tool and the grants its calls run under: what a capsule component's registry calls.
pub struct BoundTool {
    pub engine: Arc<Engine>,
    pub component: Arc<LoadedComponent>,
    pub grants: Grants,
}

impl CallTool for BoundTool {
    fn call(&self, input: ToolInput) -> Pin<Box<dyn Future<Output = ToolCallReport> + Send + '_>> {
        Box::pin(async move {
            self.engine
                .call_tool(&self.component, &self.grants, &input)
                .await
        })
    }
}

/// Loads pulled tools for a capsule component's registry, each bound to `grants`.
pub struct ToolLoader {
    pub engine: Arc<Engine>,
    pub grants: Grants,
}

impl LoadTool for ToolLoader {
    fn load(&self, name: &str, component: &Path) -> Result<Arc<dyn CallTool>, RuntimeError> {
        let component = self
            .engine
            .load_component(name, component, RunWorld::Tool)?;
        Ok(Arc::new(BoundTool {
            engine: self.engine.clone(),
            component: Arc::new(component),
            grants: self.grants.clone(),
        }))
    }
}
