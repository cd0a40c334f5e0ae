//! Hooks.
//!
//! What the runtime promises a hook, and the capsule about its hooks:
//!
//! - **Staging.** A hook's `binding` / `execution_mode` / `commit_policy` are checked against
//!   the hook contract's table (`murmur_manifest::hooks`) when its manifest loads, before any
//!   component is compiled. A component missing one of the six required handlers fails to
//!   load naming it; `on-task-start` and `on-task-end` are optional; a missing `on-stage` is a
//!   warning.
//! - **Who hears what.** A hook with a `binding` receives that handler's events only; without
//!   one, every event. `on-tool-call` and `on-shell` are dispatched twice: the decision point
//!   (`outcome: none`) only to hooks declaring `commit_policy: deny` on that binding, then the
//!   observation (`outcome: some`) to every hook that hears the handler.
//! - **What is committed.** One arm per handler ([`Handler::honored`]): `write-manifests` at
//!   `on-stage`, `artifact` at `on-inference`, `replace-context` at `on-compaction`,
//!   `reopen-task` at `on-task-end`, `seed-context` at `on-task-start`, `deny` at the decision
//!   point of `on-tool-call`/`on-shell`. `none` is always silent. Any other arm is a loud,
//!   non-fatal fault: a line in `logs/hook-<name>.log` and a `hook_dispatch_error` event.
//! - **Errors.** A handler's error is logged and traced and the session goes on, except at
//!   `on-compaction`, where it ends the session. At the decision point a policy hook that errs,
//!   traps or times out denies the call (fail-closed).
//! - **Instances.** Each hook has one instance per session, created on first use and replaced
//!   after a trap or timeout; each call runs under the hook deadline (30 s) and the capsule's
//!   memory limit. An `async` hook's events wait in a bounded queue for its instance, in order;
//!   a full queue blocks or drops per `queue.on_overflow`; the queue drains before
//!   `session_end` within `queue.drain_seconds`.
//! - **Host imports.** `runtime/inference`, `runtime/tokens`, `task-io/read` and
//!   `conversation/read` answer only when the capsule's entry for the hook lists them in
//!   `grants:`; a hook may import one it was not granted (toolchains that import their whole
//!   world do), and calling it fails the call, naming the grant.

pub mod events;
mod runner;
mod services;

use std::path::Path;

use murmur_manifest::capsule::{HookGrant, HookQueue};
use murmur_manifest::hooks::{Binding, CommitPolicy, ExecutionMode};
use serde_json::Value;
use wasmtime::component::{ComponentExportIndex, InstancePre};

use crate::engine::{Engine, error_chain, read_component};
use crate::error::RuntimeError;
use crate::grants::HostState;
use events::PerHandler;
pub use events::{Handler, HookEvent, HookOutput};
pub use runner::{Denial, Dispatched, HookSet};
pub use services::Scope;
pub(crate) use services::{HookInference, HookServices};

/// The name the `hook` world exports its handlers under.
pub const LIFECYCLE: &str = "murmur:hook/lifecycle@0.1.0";

/// A hook component compiled and linked, with the handlers it exports.
pub struct LoadedHook {
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) handlers: PerHandler<Option<ComponentExportIndex>>,
    sha256: String,
}

impl LoadedHook {
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether the component exports `handler`.
    pub fn exports(&self, handler: Handler) -> bool {
        self.handlers.get(handler).is_some()
    }
}

/// A hook as a session runs it.
pub struct StagedHook {
    pub name: String,
    pub version: String,
    pub binding: Option<Binding>,
    pub mode: ExecutionMode,
    pub policy: CommitPolicy,
    pub grants: Vec<HookGrant>,
    pub queue: HookQueue,
    /// The deadline of each call.
    pub deadline: std::time::Duration,
    pub config: Option<Value>,
    pub component: LoadedHook,
}

impl StagedHook {
    /// Whether this hook hears `handler`'s events.
    pub fn hears(&self, handler: Handler) -> bool {
        self.binding
            .is_none_or(|binding| binding == handler.binding())
    }

    /// Whether this hook is asked at the decision point of `handler`.
    pub fn decides(&self, handler: Handler) -> bool {
        self.policy == CommitPolicy::Deny
            && self.binding == Some(handler.binding())
            && matches!(handler, Handler::ToolCall | Handler::Shell)
            && self.mode == ExecutionMode::Blocking
    }
}

/// Compiles the hook at `path` and links it with `grants`. A missing required handler is a
/// load error naming it; a missing `on-stage` is returned as a warning.
pub fn load_hook(
    engine: &Engine,
    name: &str,
    path: &Path,
    grants: &[HookGrant],
) -> Result<(LoadedHook, Option<String>), RuntimeError> {
    let bytes = read_component(name, path)?;
    let load_error = |reason: String| RuntimeError::Load {
        component: name.to_string(),
        reason,
    };
    let (component, sha256, _) = engine.compile(name, &bytes)?;
    engine.check_world(name, &component, crate::engine::World::Hook)?;
    let Some(lifecycle) = component.get_export_index(None, LIFECYCLE) else {
        let exports = engine.export_names(&component);
        let other_contract = exports
            .iter()
            .find(|export| export.starts_with("murmur:hook/lifecycle"))
            .map(|export| {
                format!(
                    "; it exports `{export}`, a hook contract this runtime does not serve: \
                     rebuild it against the `hook` world of `wit/`"
                )
            });
        let listed = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(load_error(format!(
            "it does not export `{LIFECYCLE}`, as the hook world requires{}",
            other_contract.unwrap_or_else(|| format!(" (it exports {listed})"))
        )));
    };
    let handlers = PerHandler(
        Handler::ALL.map(|handler| component.get_export_index(Some(&lifecycle), handler.name())),
    );
    for handler in Handler::ALL {
        if handler.required() && handlers.get(handler).is_none() {
            return Err(load_error(format!(
                "it does not export the required handler `{}`",
                handler.name()
            )));
        }
    }
    let warning = handlers
        .get(Handler::Stage)
        .is_none()
        .then(|| format!("hook `{name}` does not export `on-stage`; staging goes on without it"));
    let linker = engine
        .hook_linker(grants)
        .map_err(|error| load_error(error_chain(&error)))?;
    let pre = linker.instantiate_pre(&component).map_err(|error| {
        let reason = error_chain(&error);
        if reason.contains("murmur:") {
            load_error(format!(
                "{reason} (of the `murmur:` interfaces, a hook may import `runtime/inference`, \
                 `runtime/tokens`, `task-io/read` and `conversation/read`, each answering as its \
                 entry's `grants:` allows)"
            ))
        } else {
            load_error(reason)
        }
    })?;
    Ok((
        LoadedHook {
            pre,
            handlers,
            sha256,
        },
        warning,
    ))
}
