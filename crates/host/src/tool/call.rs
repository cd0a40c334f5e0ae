//! One call of `murmur:tool/run`: a fresh store under the call's grants, called the engine's
//! one way (limits, deadline, a failure named for what it was), its result read under the
//! rules of [`crate::tool`].

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::RunWorld;
use crate::bindings;
use crate::engine::{Engine, LoadedComponent};
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
        let mut store = self.store(state);
        let wit_input = bindings::ToolInput {
            data: input.data.clone(),
            log_path: input.log_path.clone(),
        };
        let called = self
            .bounded(
                component.name(),
                grants.limits.deadline,
                &mut store,
                async |store| {
                    let tool = component.pre.instantiate_async(&mut *store).await?;
                    tool.murmur_tool_run()
                        .call_run(&mut *store, &wit_input)
                        .await
                },
            )
            .await;
        let state = store.data();
        let outcome =
            called.and_then(
                |result| match result.data.as_ref().map(|data| data.len() as u64) {
                    Some(bytes) if bytes > DATA_MAX_BYTES => Err(RuntimeError::DataTooLarge {
                        component: component.name().to_string(),
                        bytes,
                        limit: DATA_MAX_BYTES,
                    }),
                    _ => read_result(component.name(), &grants.workdir, result.into()),
                },
            );
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
