//! Grants: one module per host capability a component may hold.
//!
//! A [`Grants`] value is everything one component call may touch, resolved from the capsule's
//! manifest before the call. Each module below turns its slice of it into per-call state and is
//! the only place that capability is decided:
//!
//! - [`fs`]: the part of the session workdir the component's entry grants (by default a tool's
//!   is the whole workdir read-write, a hook's or driver's nothing) preopened as `.`, declared
//!   read-only paths read-only, nothing else.
//! - [`env`](mod@env): the environment a component sees: `MURMUR_*` identity, the artifact's config, the
//!   names `capabilities.env.allow` lets through. Never a credential.
//! - [`http`]: outgoing `wasi:http` requests, checked against `capabilities.network.allow`; no
//!   allow means deny. Raw sockets are never granted.
//! - [`chunks`]: `murmur:text/chunks`, text streamed to whoever listens.
//! - [`task`]: `murmur:task/task`, human input, only inside an A2A task.
//! - [`message`]: `murmur:message/send`, a tool's task for a peer capsule, under the network
//!   allowlist.
//! - [`shell`]: `murmur:shell/execute`, a capsule component's runs of allowlisted binaries.
//!   The shell itself is its own crate, `murmur_confine`; what a call goes through is the
//!   session's ([`shell::ShellCall`]), the same as for the model's `shell` tool.
//! - [`tool_registry`]: `murmur:tool-registry/invoke`, a capsule component's calls of its
//!   allowlisted tools.
//! - [`artifacts`]: `murmur:artifact-manager/manage`, a capsule component's view of its
//!   installed artifacts and its mid-session pulls from the session's registry.
//!
//! The deny path is the default path: a [`Grants`] built with [`Grants::new`] holds the workdir
//! and nothing more; [`fs::WorkdirAccess::NONE`] takes the workdir away too.
//!
//! Each interface answers through its own slice of the store ([`HostState`] holds one per
//! capability, and the engine's linkers project onto it): no capability reads another's state.
//! What a capability needs from above (calling a tool, loading a pulled one, a hook's
//! completion) is a trait the runtime implements ([`tool_registry::CallTool`],
//! [`tool_registry::LoadTool`], [`shell::ShellCall`], and the hooks' own), so nothing here imports the engine or the
//! session.

pub mod artifacts;
pub mod cassette;
pub mod chunks;
pub mod env;
pub mod fs;
pub mod hook;
pub mod http;
pub mod message;
pub mod shell;
pub(crate) mod stdio;
pub mod task;
pub mod tool_registry;

use std::path::PathBuf;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::error::RuntimeError;
use crate::limits::{CallLimits, MemoryLimiter};
pub use chunks::{ChunkKind, ChunkSink};
pub use http::{GatewayCredential, NetworkPolicy, Refusal, SecretStore};
use murmur_trace::schema::ComponentGrants;

/// Everything one component call may touch.
#[derive(Clone)]
pub struct Grants {
    /// The session workdir. What of it the component sees is [`Grants::filesystem`].
    pub workdir: PathBuf,
    /// The part of the workdir preopened as the component's `.`, and how.
    pub filesystem: fs::WorkdirAccess,
    /// Paths the component may read, preopened read-only under their own absolute path.
    pub read_only: Vec<PathBuf>,
    /// The complete environment the component sees (see [`env::component_env`]).
    pub env: Vec<(String, String)>,
    /// Which hosts outgoing `wasi:http` requests may reach.
    pub network: NetworkPolicy,
    /// Deadline and memory ceiling of each call.
    pub limits: CallLimits,
    /// Where streamed text goes; `None` drops it.
    pub chunks: Option<ChunkSink>,
    /// For a driver: the credential attached to requests bound for its gateway.
    pub credential: Option<GatewayCredential>,
    /// For a driver: where its exchanges are recorded, or served from.
    pub cassette: Option<cassette::Cassette>,
    /// For a tool inside an A2A task: who answers `request-input`.
    pub input: Option<task::SharedBroker>,
    /// For a tool: the task its `murmur:message/send` calls are stamped with. `None` denies
    /// the interface.
    pub sender: Option<message::SendingTask>,
    /// The capsule's `peers:`, with their credentials: what a send to each origin presents.
    pub peers: std::sync::Arc<[message::PeerCredential]>,
}

impl Grants {
    /// The workdir alone, read-write: no read-only paths, an empty environment, no network,
    /// default limits.
    pub fn new(workdir: impl Into<PathBuf>) -> Grants {
        Grants {
            workdir: workdir.into(),
            filesystem: fs::WorkdirAccess::default(),
            read_only: Vec::new(),
            env: Vec::new(),
            network: NetworkPolicy::deny_all(),
            limits: CallLimits::default(),
            chunks: None,
            credential: None,
            cassette: None,
            input: None,
            sender: None,
            peers: std::sync::Arc::new([]),
        }
    }

    /// What a capsule grants every component before any narrowing, in `workdir`: its limits
    /// (`capabilities.limits`), its read-only paths (those that exist, canonical) and its
    /// network allowlist. The one reading of `capabilities` into grants; the environment is
    /// [`env::component_env`]'s, per component.
    pub fn of_capsule(
        capsule: &murmur_manifest::capsule::CapsuleManifest,
        workdir: impl Into<PathBuf>,
    ) -> Grants {
        let capabilities = &capsule.capabilities;
        let mut grants = Grants::new(workdir);
        if let Some(bytes) = capabilities.limits.memory_bytes {
            grants.limits.memory_bytes = bytes;
        }
        if let Some(seconds) = capabilities.limits.deadline_seconds {
            grants.limits.deadline = std::time::Duration::from_secs(seconds);
        }
        grants.read_only = capabilities
            .filesystem
            .read_only_resolved()
            .into_iter()
            .filter_map(|path| path.canonicalize().ok())
            .collect();
        grants.network = NetworkPolicy::allow(capabilities.network.allow.clone());
        grants
    }

    /// Narrows these grants to what one artifact's entry gives it (`planned`, from
    /// `CapsuleManifest::grants_of`): its directory and scope, the read-only paths it holds
    /// (those that exist), and `always` (a driver's gateway) followed by its network allow
    /// entries. `None`, an artifact without an entry, holds no directory and no network.
    pub fn narrow(
        &mut self,
        planned: Option<&murmur_manifest::capsule::ArtifactGrants>,
        always: Option<murmur_manifest::NetworkRule>,
    ) {
        let mut allow: Vec<_> = always.into_iter().collect();
        match planned {
            None => {
                self.filesystem = fs::WorkdirAccess::NONE;
                self.read_only = Vec::new();
            }
            Some(planned) => {
                self.filesystem = fs::WorkdirAccess {
                    scope: planned.filesystem.scope,
                    path: planned.filesystem.path.clone(),
                };
                self.read_only = planned
                    .filesystem
                    .read_only
                    .iter()
                    .filter_map(|path| path.canonicalize().ok())
                    .collect();
                allow.extend(planned.network.allow.iter().cloned());
            }
        }
        self.network = NetworkPolicy::allow(allow);
    }

    /// The state of one call's store, built from these grants.
    pub fn host_state(&self) -> Result<HostState, RuntimeError> {
        let mut builder = WasiCtx::builder();
        fs::preopen(
            &mut builder,
            &self.workdir,
            &self.filesystem,
            &self.read_only,
        )?;
        builder.envs(&self.env);
        let stdout = stdio::CapturedOutput::default();
        let stderr = stdio::CapturedOutput::default();
        builder.stdout(stdout.clone());
        builder.stderr(stderr.clone());
        Ok(HostState {
            wasi: builder.build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            http_grant: http::HttpGrant::new(
                self.network.clone(),
                self.credential.clone(),
                self.cassette.clone(),
            ),
            limiter: MemoryLimiter::new(self.limits.memory_bytes),
            chunks: self.chunks.clone(),
            stdout,
            stderr,
            hook: None,
            input: task::TaskInput::new(self.input.clone()),
            message: message::MessageGrant {
                sender: self.sender.clone(),
                policy: self.network.clone(),
                peers: self.peers.clone(),
                sends: Vec::new(),
            },
            tool_registry: None,
            artifacts: None,
            shell: None,
        })
    }
}

/// The data of one call's store: the per-call state of every grant, one field each.
pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    pub(crate) http_grant: http::HttpGrant,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) chunks: Option<ChunkSink>,
    pub(crate) stdout: stdio::CapturedOutput,
    pub(crate) stderr: stdio::CapturedOutput,
    /// For a hook's store: who is calling and about what.
    pub(crate) hook: hook::HookSlot,
    /// Who answers `murmur:task/task.request-input`, inside an A2A task.
    pub(crate) input: task::TaskInput,
    /// `murmur:message/send`: who sends, where to, and what was sent.
    pub(crate) message: message::MessageGrant,
    /// For a capsule component: the tools it may call, and what it called.
    pub(crate) tool_registry: Option<tool_registry::ToolRegistryGrant>,
    /// For a capsule component: its session's artifact manager.
    pub(crate) artifacts: Option<std::sync::Arc<artifacts::ArtifactManager>>,
    /// For a capsule component: who answers `murmur:shell/execute`.
    pub(crate) shell: shell::ShellSlot,
}

impl HostState {
    /// Makes `call` answer this store's hook imports until the next one is set.
    pub fn set_hook_call(&mut self, call: std::sync::Arc<dyn hook::HookCall>) {
        self.hook = Some(call);
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_grant,
        }
    }
}

impl Grants {
    /// What the trace lists of these grants, held by the component `name` of `runtime`.
    pub fn listing(&self, name: &str, runtime: &str) -> ComponentGrants {
        ComponentGrants {
            name: name.to_string(),
            runtime: runtime.to_string(),
            filesystem: self.filesystem.scope.as_str().to_string(),
            path: self
                .filesystem
                .path
                .as_ref()
                .map(|path| path.display().to_string()),
            read_only: self
                .read_only
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
            network: self
                .network
                .rules()
                .iter()
                .map(|rule| rule.as_str().to_string())
                .collect(),
            env: self.env.iter().map(|(name, _)| name.clone()).collect(),
        }
    }
}
