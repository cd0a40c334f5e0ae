//! One driver call, the same for the agent loop's turns and a hook's `run-inference`: the
//! request written as the driver's input, the driver called as every component is
//! ([`Engine::call_tool`]), its answer read under the protocol's rules ([`read_answer`]).
//!
//! The callers keep what differs: when the call is admitted under the spend ceiling, what stops
//! it early, and how a failure is told (a task's failure, a hook's error string).

use crate::engine::{Engine, LoadedComponent};
use crate::error::RuntimeError;
use crate::grants::Grants;
use crate::inference::response::{Answer, Failure, read_answer};
use crate::tool::{KeptInstance, ToolInput};

/// Why a driver call gave no answer.
#[derive(Debug)]
pub enum DriverFailure {
    /// The driver ran and answered a failure, or an answer that is not the protocol's.
    Answered(Failure),
    /// The call itself failed: the component trapped, ran out of time or memory.
    Call(RuntimeError),
}

/// Calls `driver` once with `input` (a `DriverRequest::to_input`) under `grants`, in the
/// instance `kept` holds when it holds one, else a fresh one ([`Engine::call_tool_keeping`]).
pub async fn call_driver(
    engine: &Engine,
    driver: &LoadedComponent,
    grants: &Grants,
    input: &ToolInput,
    kept: &mut Option<KeptInstance>,
) -> Result<Answer, DriverFailure> {
    let report = engine.call_tool_keeping(driver, grants, input, kept).await;
    match report.outcome {
        Ok(output) => read_answer(&output).map_err(DriverFailure::Answered),
        Err(error) => Err(DriverFailure::Call(error)),
    }
}
