//! `murmur:task/task`: human input for tools. `request-input` is answered only while the capsule
//! runs an A2A task: the call's [`InputBroker`] moves the task to `input-required` with the
//! prompt and returns the next message on that task. Anywhere else (no broker) it fails at
//! once. The interface returns a plain string, so a failure (no task, the input timeout, a
//! cancel) ends the calling component's call; the call's [`TaskInput`] keeps why, so the call
//! is reported as unanswered input (`E-RUN-035`, with where a person can answer), not as the
//! component's own failure.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bindings::murmur::task::task::Host;

/// The message a component's call fails with when it asks for input outside an A2A task.
pub const NO_TASK: &str = "murmur:task/task.request-input is only available while the capsule runs \
     an A2A task (to test a tool that asks, give `mur tool invoke` its answers with --reply TEXT)";

/// Answers `request-input` for the task in progress.
pub trait InputBroker: Send + Sync {
    /// Asks the task's client `prompt` and waits for the reply; `Err` names why none came.
    fn request(
        &self,
        prompt: String,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;
}

/// A shared broker.
pub type SharedBroker = Arc<dyn InputBroker>;

/// A call's `request-input`: a call inside an A2A task holds the task's broker; any other
/// holds none. Why the last request got no answer is kept for the call's report.
#[derive(Default)]
pub struct TaskInput {
    broker: Option<SharedBroker>,
    unanswered: Option<String>,
}

impl TaskInput {
    pub fn new(broker: Option<SharedBroker>) -> Self {
        TaskInput {
            broker,
            unanswered: None,
        }
    }

    /// Why a request of this call got no answer, if one did not.
    pub fn unanswered(&self) -> Option<&str> {
        self.unanswered.as_deref()
    }
}

impl Host for TaskInput {
    async fn request_input(&mut self, prompt: String) -> wasmtime::Result<String> {
        let answered = match &self.broker {
            Some(broker) => broker.request(prompt).await,
            None => Err(NO_TASK.to_string()),
        };
        answered.map_err(|why| {
            self.unanswered = Some(why.clone());
            wasmtime::Error::msg(why)
        })
    }
}
