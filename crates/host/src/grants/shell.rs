//! `murmur:shell/execute` of `runtime-host`, for capsule components.
//!
//! The shell itself (allowlisted binaries run directly, confined, cut at 16 KiB) is the crate
//! `murmur_confine`, and what one call goes through (the allowlist, the hooks' decision point,
//! the run, the trace) is the session's: this module is only the WIT glue. Before a capsule
//! component runs, the runtime sets on its store a [`ShellCall`] that answers each request; a
//! store with none set refuses every request (`E-CAP-006`), so nothing runs that a session did
//! not admit.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bindings::host::murmur::shell::execute::{self, ShellOutput, ShellRequest};

/// What answers a capsule component's shell requests. The runtime implements it.
pub trait ShellCall: Send + Sync {
    /// One request: the output of a process that ran (whatever its exit code), or why none
    /// ran, as `error[CODE]: message`.
    fn execute(
        &self,
        request: murmur_confine::ShellRequest,
    ) -> Pin<Box<dyn Future<Output = Result<murmur_confine::ShellOutput, String>> + Send + '_>>;
}

/// A capsule component's slice of the store: who answers its shell requests, if anyone.
pub type ShellSlot = Option<Arc<dyn ShellCall>>;

impl execute::Host for ShellSlot {
    async fn execute(
        &mut self,
        request: ShellRequest,
    ) -> wasmtime::Result<Result<ShellOutput, String>> {
        let Some(call) = self.clone() else {
            return Ok(Err(format!(
                "error[E-CAP-006]: `{}` was not run: this component is granted no shell",
                request.binary
            )));
        };
        let request = murmur_confine::ShellRequest {
            binary: request.binary,
            args: request.args,
            stdin: request.stdin,
            timeout_secs: request.timeout_secs,
        };
        Ok(call.execute(request).await.map(|output| ShellOutput {
            exit_code: output.exit_code,
            stdout: output.stdout,
            stderr: output.stderr,
            truncated: output.truncated,
            full_output_path: output.full_output_path,
        }))
    }
}
