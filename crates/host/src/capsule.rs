//! The `capsule` world: a component exporting `murmur:capsule/run`, loaded through the capsule
//! linker and called once.
//!
//! What it links: WASI, `murmur:tool-registry/invoke` ([`crate::grants::tool_registry`]: the
//! tools it was given, nothing else), `murmur:artifact-manager/manage`
//! ([`crate::grants::artifacts`]), `murmur:shell/execute` ([`crate::grants::shell`]: answered
//! by the session) and `murmur:message/send` ([`crate::grants::message`]). A run goes
//! the one call path ([`Engine::bounded`]): one deadline for the whole run, the tools it calls
//! included.

use std::sync::Arc;

use crate::bindings::capsule::CapsulePre;
use crate::engine::{Engine, error_chain};
use crate::error::RuntimeError;
use crate::grants::artifacts::ArtifactManager;
use crate::grants::shell::ShellCall;
use crate::grants::tool_registry::ToolRegistryGrant;
use crate::grants::{Grants, HostState};
use crate::reported::PeerSend;

/// A capsule component compiled and pre-linked.
pub struct LoadedCapsule {
    name: String,
    sha256: String,
    pre: CapsulePre<HostState>,
}

impl LoadedCapsule {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sha256 of the component's bytes, lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

impl Engine {
    /// Compiles (or loads from the cache) and pre-links a capsule component: it must export
    /// `murmur:capsule/run` and import nothing the capsule linker lacks.
    pub fn load_capsule(&self, name: &str, bytes: &[u8]) -> Result<LoadedCapsule, RuntimeError> {
        let load_error = |reason: String| RuntimeError::Load {
            component: name.to_string(),
            reason,
        };
        let (component, sha256, _) = self.compile(name, bytes)?;
        self.check_world(name, &component, crate::engine::World::Capsule)?;
        let instance_pre = self
            .capsule_linker()?
            .instantiate_pre(&component)
            .map_err(|error| load_error(error_chain(&error)))?;
        let pre = CapsulePre::new(instance_pre).map_err(|error| {
            load_error(format!(
                "it does not export `murmur:capsule/run@0.1.0` as the capsule world requires: {}",
                error_chain(&error)
            ))
        })?;
        Ok(LoadedCapsule {
            name: name.to_string(),
            sha256,
            pre,
        })
    }
}

/// What one run of a capsule component produced.
pub struct CapsuleRun {
    pub outcome: Result<(), RuntimeError>,
    /// Whether `stop` ended the run before the component returned (`outcome` is then `Ok`).
    pub stopped: bool,
    /// What it sent to peers through `murmur:message/send`.
    pub sends: Vec<PeerSend>,
    /// Whether writing a `tool_call` event of its calls failed.
    pub tool_calls_trace_failed: bool,
    /// What it wrote to stdout and stderr.
    pub stdout: String,
    pub stderr: String,
}

/// Calls `run` of `component` once, under `grants`, with its tool registry, artifact manager
/// and shell. When `stop` resolves first, the call is dropped where it is (a shell call in
/// progress with it, its children killed) and the run reports `stopped`, with what the
/// component wrote and sent until then.
pub async fn call_capsule(
    engine: &Engine,
    component: &LoadedCapsule,
    grants: &Grants,
    registry: ToolRegistryGrant,
    manager: Arc<ArtifactManager>,
    shell: Arc<dyn ShellCall>,
    stop: impl std::future::Future<Output = ()>,
) -> CapsuleRun {
    let mut state = match grants.host_state() {
        Ok(state) => state,
        Err(error) => {
            return CapsuleRun {
                outcome: Err(error),
                stopped: false,
                sends: Vec::new(),
                tool_calls_trace_failed: false,
                stdout: String::new(),
                stderr: String::new(),
            };
        }
    };
    state.tool_registry = Some(registry);
    state.artifacts = Some(manager);
    state.shell = Some(shell);
    let mut store = engine.store(state);
    let call = engine.bounded(
        component.name(),
        grants.limits.deadline,
        &mut store,
        async |store| {
            let capsule = component.pre.instantiate_async(&mut *store).await?;
            capsule.murmur_capsule_run().call_run(&mut *store).await
        },
    );
    let (outcome, stopped) = tokio::select! {
        outcome = call => (outcome, false),
        () = stop => (Ok(()), true),
    };
    let state = store.data();
    CapsuleRun {
        outcome,
        stopped,
        sends: state.message.sends.clone(),
        tool_calls_trace_failed: state
            .tool_registry
            .as_ref()
            .is_some_and(|grant| grant.trace_failed),
        stdout: state.stdout.text(),
        stderr: state.stderr.text(),
    }
}
