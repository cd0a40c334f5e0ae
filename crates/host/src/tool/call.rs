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
use crate::grants::tool_registry::{CallTool, LoadTool};
use crate::grants::{Grants, HostState};
use crate::tool::{DATA_MAX_BYTES, ToolCallReport, ToolInput, read_result};

impl Engine {
    /// Calls `run` of `component` once with `input`, under `grants`, in a fresh instance.
    pub async fn call_tool(
        &self,
        component: &LoadedComponent,
        grants: &Grants,
        input: &ToolInput,
    ) -> ToolCallReport {
        self.call_tool_keeping(component, grants, input, &mut None)
            .await
    }

    /// Calls `run` of `component` once with `input`, in the instance `kept` holds when it holds
    /// one (made earlier by this method for the same component and grants), else in a fresh
    /// one under `grants`. A call that ends `Ok` leaves its instance in `kept` for the next;
    /// any other end empties it, since an instance that trapped or was stopped mid-call is
    /// never entered again. Everything the report tells (refusals, sends, output) is this
    /// call's only.
    pub async fn call_tool_keeping(
        &self,
        component: &LoadedComponent,
        grants: &Grants,
        input: &ToolInput,
        kept: &mut Option<KeptInstance>,
    ) -> ToolCallReport {
        let started = Instant::now();
        let held = kept.take();
        let (mut store, instance) = match held {
            Some(KeptInstance(held)) => {
                let (store, instance) = held.into_inner().unwrap_or_else(|p| p.into_inner());
                (store, Some(instance))
            }
            None => match grants.host_state() {
                Ok(state) => (self.store(state), None),
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
            },
        };
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
                    let instance = match instance {
                        Some(instance) => instance,
                        None => component.pre.instantiate_async(&mut *store).await?,
                    };
                    let result = instance
                        .murmur_tool_run()
                        .call_run(&mut *store, &wit_input)
                        .await?;
                    Ok((instance, result))
                },
            )
            .await;
        let state = store.data_mut();
        let mut report = |outcome| ToolCallReport {
            outcome,
            refusals: std::mem::take(&mut state.http_grant.refusals),
            sends: std::mem::take(&mut state.message.sends),
            stdout: state.stdout.take_text(),
            stderr: state.stderr.take_text(),
            duration: started.elapsed(),
        };
        let (instance, result) = match called {
            Ok(called) => called,
            Err(error) => return report(Err(error)),
        };
        let outcome = match result.data.as_ref().map(|data| data.len() as u64) {
            Some(bytes) if bytes > DATA_MAX_BYTES => Err(RuntimeError::DataTooLarge {
                component: component.name().to_string(),
                bytes,
                limit: DATA_MAX_BYTES,
            }),
            _ => read_result(component.name(), &grants.workdir, result.into()),
        };
        let report = report(outcome);
        if report.outcome.is_ok() {
            *kept = Some(KeptInstance(std::sync::Mutex::new((store, instance))));
        }
        report
    }
}

/// An instance of a component kept between calls, with its store (its memory, its grants).
/// Made only by [`Engine::call_tool_keeping`]; dropping it ends the instance. (The mutex is
/// never locked: it only lets a task that holds one be shared between threads while idle.)
pub struct KeptInstance(std::sync::Mutex<(wasmtime::Store<HostState>, bindings::Tool)>);

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
