//! `murmur:task/task`: human input for tools. `request-input` is answered only while the capsule
//! runs an A2A task; anywhere else it fails at once. The interface returns a plain string, so the
//! failure is a trap of the calling component, reported with the message below.

use crate::bindings::murmur::task::task::Host;
use crate::grants::HostState;

/// The message a component's call fails with when it asks for input outside an A2A task.
pub const NO_TASK: &str =
    "murmur:task/task.request-input is only available while the capsule runs an A2A task";

impl Host for HostState {
    async fn request_input(&mut self, _prompt: String) -> wasmtime::Result<String> {
        Err(wasmtime::Error::msg(NO_TASK))
    }
}
