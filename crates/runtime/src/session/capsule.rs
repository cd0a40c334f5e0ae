//! Capsule components: a capsule whose manifest has no `inference:` and names a component of
//! `world capsule` runs that component's `murmur:capsule/run` once, as one session.
//!
//! Which component: the capsule manifest's own `component:`/`build:`, else its one artifact
//! entry of `runtime: capsule` with `path:`. A capsule with neither (and no `inference:`) is
//! `E-RUN-013`, as staging says.
//!
//! What a caller can rely on:
//!
//! - **Staged before anything runs** ([`stage`]): the manifest and its local artifacts load
//!   without errors; the component and the declared tools are built from source when stale,
//!   compiled (or taken from the cache) and pre-linked; registry tools only as `murmur.lock`
//!   pins them, unchanged since they were installed.
//! - **Grants as tools get them.** The component sees the session's workspace (preopened as `.`),
//!   the declared read-only paths, the `MURMUR_*` identity and `capabilities.env.allow`,
//!   outgoing HTTP under `capabilities.network.allow`, and runs under the capsule's limits (one
//!   deadline for the whole run, the tools it calls included). It imports
//!   `murmur:tool-registry/invoke` ([`crate::grants::tool_registry`]: the declared tools and
//!   what it pulled, nothing else), `murmur:artifact-manager/manage`
//!   ([`crate::grants::artifacts`]), `murmur:message/send`, and `murmur:shell/execute` under
//!   `capabilities.shell.allow`.
//! - **The shell as the model's.** Each `execute` goes the one path of every shell call
//!   ([`crate::session::shell`]): the allowlist (an empty one refuses every binary), the
//!   `on-shell` decision point and observation of the capsule's hooks, the run, a `shell`
//!   event. Hooks are staged as an agent's are, but only `on-shell` is dispatched (any other
//!   binding is `W-HOOK-008` at staging); a hook's `run-inference` errs, as there is no model.
//! - **A session like an agent's.** Its record `workdir/<session-id>/` with `trace.jsonl`: `session_start`,
//!   `task_start` (source `capsule`), one `tool_call` per `invoke`, one `shell` per `execute`
//!   (a `call_denied` instead for one a hook denied) and one `artifact_pulled` per pull as they happen, an `a2a_send` per send, `task_end`,
//!   `session_end`. What the component wrote to stdout and stderr is kept in
//!   the record's `logs/capsule.log`. The report is a
//!   [`SessionReport`] with one task: `ok` when `run` returned, `failed` (with the code of the
//!   deadline, memory limit or trap) when it did not.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use murmur_confine::{ShellGrant, ShellOutput, ShellRequest};
use murmur_manifest::Coded;
use murmur_manifest::capsule::{ArtifactEntry, CapsuleManifest};
use murmur_manifest::hooks::Binding;
use murmur_manifest::{CapsuleSource, Diagnostic, Runtime};
use murmur_registry::index::Registry;
use murmur_registry::install;
use murmur_registry::source::LocalArtifact;
use serde_json::Value;

use crate::capsule::{CapsuleRun, LoadedCapsule, call_capsule};
use crate::engine::{Engine, LoadedComponent};
use crate::error::RuntimeError;
use crate::grants::Grants;
use crate::grants::artifacts::{ArtifactManager, ManagerConfig};
use crate::grants::env::{Identity, component_env};
use crate::grants::message::SendingTask;
use crate::grants::shell::ShellCall;
use crate::grants::tool_registry::{AllowedTool, Allowlist, CallTrace, ToolRegistryGrant};
use crate::hooks::{HookServices, HookSet, Scope, StagedHook};
use crate::inference::spend::SpendMeter;
use crate::session::shell;
use crate::session::staging::{Resolved, StageError, stage_hook};
use crate::session::workdir::Workdir;
use crate::session::{
    ExitStatus, Failure, HostEnv, Observer, SessionError, SessionReport, TaskReport, new_id,
};
use crate::tool::{BoundTool, ToolLoader};
use murmur_trace::context::SpanRef;
use murmur_trace::schema::{CapsuleRef, ComponentRef};
use murmur_trace::{EventBody, Trace};

/// How a capsule component's session is run.
pub struct CapsuleConfig {
    /// Sessions get their record at `<workdir_root>/<session-id>/`.
    pub workdir_root: PathBuf,
    /// An existing directory the component works on in place (`--workspace`); a fresh
    /// `<record>/workspace/` when `None`.
    pub workspace: Option<PathBuf>,
    /// Where `murmur:artifact-manager/manage.pull` resolves; `None` makes every pull an error.
    pub registry: Option<Registry>,
    /// The user's store of verified archives (`$MURMUR_HOME/artifacts`).
    pub user_store: PathBuf,
    /// Host environment lookups, for `capabilities.env.allow` and `${NAME}` in manifests.
    pub host_env: HostEnv,
    /// The containment class the operator asks for (`mur run --containment`).
    pub containment: Option<murmur_confine::Class>,
    /// Ends the run early (a signal to `mur run`): the component's call is dropped where it is,
    /// its shell children with it, and the session ends `canceled`, its trace closed.
    pub cancel: Option<crate::session::StopSignal>,
}

/// A declared tool, loaded.
pub struct CapsuleTool {
    pub name: String,
    pub component: Arc<LoadedComponent>,
    pub config: Option<Value>,
    /// Its `input_schema`, compiled, when it declares one.
    pub input_schema: Option<Arc<jsonschema::Validator>>,
}

/// Everything a capsule component's session needs.
pub struct StagedCapsule {
    pub capsule: CapsuleManifest,
    pub capsule_file: PathBuf,
    pub capsule_dir: PathBuf,
    pub component: LoadedCapsule,
    pub tools: Vec<CapsuleTool>,
    /// sha256 (hex) of `murmur.yaml` as staging read it.
    pub manifest_sha256: String,
    /// The capsule's hooks, in manifest order: only `on-shell` is dispatched to them.
    pub hooks: Arc<[StagedHook]>,
    pub components: Vec<ComponentRef>,
    /// The capsule's `peers:`, each with its credential's value: what its tools'
    /// `murmur:message/send` calls present.
    pub peers: Arc<[crate::grants::message::PeerCredential]>,
    /// Warnings found while staging.
    pub warnings: Vec<Diagnostic>,
}

/// Whether `capsule` runs as a capsule component: it has no `inference:`, and it names a
/// component (its own `component:`/`build:`, or an artifact of `runtime: capsule` with `path:`).
pub fn runs_component(capsule: &CapsuleManifest) -> bool {
    capsule.inference.is_none()
        && (capsule.component.is_some()
            || capsule.build.is_some()
            || capsule
                .artifacts
                .iter()
                .any(|entry| entry.runtime == Runtime::Capsule && entry.path.is_some()))
}

fn invalid(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> StageError {
    StageError::Invalid {
        code,
        message: message.into(),
        hint: hint.into(),
    }
}

/// Stages the capsule component of the capsule whose manifest is `capsule_file`.
pub fn stage(
    capsule_file: &Path,
    engine: &Engine,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<StagedCapsule, StageError> {
    stage_source(&CapsuleSource::read(capsule_file, env), engine, env)
}

/// Stages the capsule component of the capsule manifest `source`, read once by the caller.
pub fn stage_source(
    source: &CapsuleSource,
    engine: &Engine,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<StagedCapsule, StageError> {
    let capsule_file = source.file.as_path();
    let super::staging::Checked {
        capsule,
        dir: capsule_dir,
        mut warnings,
        local,
        sha256: manifest_sha256,
    } = super::staging::load_checked(source, env)?;
    if capsule.inference.is_some() {
        return Err(invalid(
            "E-RUN-013",
            format!(
                "capsule `{}` declares `inference:`: it is an agent capsule, not a capsule component",
                capsule.name
            ),
            "run it as an agent capsule, or remove `inference:`",
        ));
    }

    // The component: the capsule's own, else its one `runtime: capsule` entry with `path:`.
    let own = capsule.component.is_some() || capsule.build.is_some();
    let entries: Vec<&ArtifactEntry> = capsule
        .artifacts
        .iter()
        .filter(|entry| entry.runtime == Runtime::Capsule && entry.path.is_some())
        .collect();
    let component_dir = match (own, entries.as_slice()) {
        (true, _) => capsule_file.to_path_buf(),
        (false, [entry]) => {
            murmur_manifest::local_paths(
                entry.path.as_deref().unwrap_or(Path::new(".")),
                &capsule_dir,
            )
            .0
        }
        (false, []) => return Err(super::staging::no_model(&capsule)),
        (false, _) => {
            return Err(invalid(
                "E-RUN-013",
                format!(
                    "capsule `{}` declares {} capsule components; a capsule runs one",
                    capsule.name,
                    entries.len()
                ),
                "keep one artifact of `runtime: capsule`",
            ));
        }
    };
    // Said, never skipped: a server a component was meant to reach is not quietly missing.
    if let Some(server) = capsule
        .artifacts
        .iter()
        .find(|entry| entry.runtime == Runtime::Mcp)
    {
        return Err(invalid(
            "E-RUN-026",
            format!(
                "capsule `{}` declares the MCP server `{}`, but a capsule component cannot call MCP servers",
                capsule.name, server.name
            ),
            "give the capsule an `inference:` block to offer the server's tools to a model, or remove the entry",
        ));
    }
    let component_artifact = LocalArtifact::open(&component_dir, env)?;
    if component_artifact.manifest.runtime != Runtime::Capsule {
        return Err(invalid(
            "E-MAN-017",
            format!(
                "the capsule component at {} is `runtime: {}`",
                component_artifact.manifest_file.display(),
                component_artifact.manifest.runtime
            ),
            "a capsule component's own murmur.yaml says `runtime: capsule` and names its `component:` or `build:`",
        ));
    }

    // The declared tools, resolved as an agent's are; the component's own artifact is built
    // with them.
    let mut resolved = Resolved::open(
        &capsule,
        &capsule_dir,
        &local,
        env,
        |runtime| matches!(runtime, Runtime::Tool | Runtime::Hook),
        &[&component_artifact],
    )?;

    let name = component_artifact.manifest.name.clone();
    let bytes =
        std::fs::read(component_artifact.component_path()).map_err(|error| RuntimeError::Load {
            component: name.clone(),
            reason: format!(
                "reading {}: {error}",
                component_artifact.component_path().display()
            ),
        })?;
    let component = engine.load_capsule(&name, &bytes)?;
    let mut components = vec![ComponentRef {
        name: name.clone(),
        version: component_artifact.manifest.version.clone(),
        runtime: "capsule".to_string(),
        sha256: component.sha256().to_string(),
    }];
    let mut tools = Vec::new();
    let mut hooks = Vec::new();
    for (entry, artifact) in &resolved.opened {
        if entry.runtime == Runtime::Hook {
            let (hook, _) = stage_hook(engine, &mut resolved.pins, entry, artifact)?;
            if hook.binding != Some(Binding::OnShell) {
                warnings.push(
                    Diagnostic::new(
                        "W-HOOK-008",
                        format!(
                            "hook `{}` is bound to {}, but a capsule component's session dispatches only `on-shell`: its other handlers never run",
                            hook.name,
                            hook.binding.map_or_else(
                                || "every handler".to_string(),
                                |binding| format!("`{binding}`")
                            )
                        ),
                    )
                    .hint("bind it with `binding: on-shell`, or run it in an agent capsule"),
                );
            }
            hooks.push(hook);
            continue;
        }
        let loaded = engine.load_component(
            &entry.name,
            &artifact.component_path(),
            crate::RunWorld::Tool,
        )?;
        resolved
            .pins
            .loaded(entry, artifact, "tool", loaded.sha256())?;
        tools.push(CapsuleTool {
            name: entry.name.clone(),
            component: Arc::new(loaded),
            config: entry.config.clone(),
            input_schema: match &artifact.manifest.input_schema {
                Some(schema) => Some(Arc::new(
                    crate::grants::tool_registry::compile_input_schema(&entry.name, schema)
                        .map_err(|refused| StageError::coded(*refused))?,
                )),
                None => None,
            },
        });
    }
    components.extend(resolved.into_components());
    let lookups = super::staging::Lookups {
        env,
        config: &|_| None,
    };
    Ok(StagedCapsule {
        peers: super::staging::peer_credentials(&capsule, capsule_file, &lookups),
        capsule_file: capsule_file.to_path_buf(),
        capsule_dir,
        component,
        tools,
        hooks: hooks.into(),
        manifest_sha256,
        components,
        warnings,
        capsule,
    })
}

/// The grants of the capsule's components: the workspace, read-only paths, identity and
/// `capabilities.env.allow`, the network allowlist, the limits.
fn component_grants(
    capsule: &CapsuleManifest,
    workdir: &Path,
    session_id: &str,
    host_env: &HostEnv,
    config: Option<&Value>,
) -> Grants {
    let mut grants = Grants::of_capsule(capsule, workdir);
    let identity = Identity::of(capsule, Some(session_id));
    let lookup = |name: &str| host_env(name);
    grants.env = component_env(&identity, config, &capsule.capabilities.env.allow, &lookup);
    grants
}

/// Where and as what a capsule component's run happens.
struct RunSite<'a> {
    session_id: &'a str,
    workdir: &'a Path,
    trace: &'a Trace,
    session_event: &'a str,
    task_event: &'a str,
    task_id: &'a str,
}

/// What a capsule component's run holds: its own grants (sending as the run's task), its tool
/// registry (each declared tool bound to its grants, narrowed by its entry, its calls traced
/// under the task) and its artifact manager (pulled tools load under the capsule's grants).
fn component_setup(
    engine: &Arc<Engine>,
    staged: &StagedCapsule,
    config: &CapsuleConfig,
    site: &RunSite<'_>,
) -> (Grants, ToolRegistryGrant, Arc<ArtifactManager>) {
    let capsule = &staged.capsule;
    let host_env = config.host_env.clone();
    let grants_with = |artifact_config: Option<&Value>| {
        let mut grants = component_grants(
            capsule,
            site.workdir,
            site.session_id,
            &host_env,
            artifact_config,
        );
        grants.peers = staged.peers.clone();
        grants
    };
    let allowlist = Arc::new(Allowlist::default());
    for tool in &staged.tools {
        let mut grants = grants_with(tool.config.as_ref());
        // A tool's entry may narrow the capsule's grants for it.
        grants.narrow(
            capsule
                .artifact(&tool.name)
                .map(|entry| capsule.grants_of(entry))
                .as_ref(),
            None,
        );
        grants.sender = Some(SendingTask::new(
            None,
            SendingTask::OPERATOR.to_string(),
            SpanRef::task(site.session_id, site.task_event, None),
        ));
        allowlist.allow(
            &tool.name,
            AllowedTool {
                tool: Arc::new(BoundTool {
                    engine: engine.clone(),
                    component: tool.component.clone(),
                    grants,
                }),
                input_schema: tool.input_schema.clone(),
            },
        );
    }
    let lock = install::read_lock(&staged.capsule_dir).unwrap_or_default();
    let mut tool_grants = grants_with(None);
    tool_grants.sender = Some(SendingTask::new(
        None,
        SendingTask::OPERATOR.to_string(),
        SpanRef::task(site.session_id, site.task_event, None),
    ));
    let manager = Arc::new(ArtifactManager::new(ManagerConfig {
        capsule_dir: staged.capsule_dir.clone(),
        session_id: site.session_id.to_string(),
        registry: config.registry.clone(),
        user_store: config.user_store.clone(),
        host_env: config.host_env.clone(),
        loader: Arc::new(ToolLoader {
            engine: engine.clone(),
            grants: tool_grants,
        }),
        allowlist: allowlist.clone(),
        declared: ArtifactManager::declared(capsule, &staged.capsule_dir, &lock),
        trace: Some((site.trace.clone(), site.session_event.to_string())),
    }));
    let registry = ToolRegistryGrant::new(
        allowlist,
        Some(CallTrace {
            trace: site.trace.clone(),
            parent: site.task_event.to_string(),
            task_id: site.task_id.to_string(),
        }),
    );
    let mut grants = grants_with(None);
    grants.sender = Some(SendingTask::new(
        Some(site.task_id.to_string()),
        SendingTask::OPERATOR.to_string(),
        SpanRef::task(site.session_id, site.task_event, None),
    ));
    (grants, registry, manager)
}

/// The capsule's hooks, started for the run under `site`: each with the capsule's grants
/// narrowed by its entry, its config and its deadline, its faults traced.
fn start_hooks(
    engine: &Arc<Engine>,
    staged: &StagedCapsule,
    config: &CapsuleConfig,
    workdir: &Workdir,
    site: &RunSite<'_>,
) -> Arc<HookSet> {
    let capsule = &staged.capsule;
    let grants = staged
        .hooks
        .iter()
        .map(|hook| {
            let mut grants = component_grants(
                capsule,
                site.workdir,
                site.session_id,
                &config.host_env,
                hook.config.as_ref(),
            );
            grants.narrow(
                capsule
                    .artifact(&hook.name)
                    .map(|entry| capsule.grants_of(entry))
                    .as_ref(),
                None,
            );
            grants.limits.deadline = hook.deadline;
            grants
        })
        .collect();
    let services = Arc::new(HookServices {
        engine: engine.clone(),
        hooks: staged.hooks.clone(),
        inference: None,
        spend: Arc::new(SpendMeter::new(None)),
        trace: std::sync::OnceLock::from(site.trace.clone()),
        workdir: workdir.clone(),
        session_id: site.session_id.to_string(),
    });
    HookSet::start(services, grants)
}

/// A capsule component's `murmur:shell/execute`: each request goes the one path of every shell
/// call ([`crate::session::shell`]) under the run's `task_start` event, then its `on-shell`
/// observation to the hooks.
struct CapsuleShell {
    grant: Option<ShellGrant>,
    hooks: Arc<HookSet>,
    trace: Trace,
    workdir: Workdir,
    session_id: String,
    task_id: String,
    task_event: String,
    observer: Arc<dyn Observer>,
    /// Set when a `shell`, `call_denied` or hook line could not be written: the session then
    /// fails.
    trace_failed: AtomicBool,
}

impl CapsuleShell {
    fn scope(&self) -> Scope {
        Scope {
            task_id: Some(self.task_id.clone()),
            parent_event: self.task_event.clone(),
            ..Scope::default()
        }
    }

    async fn answer(&self, request: ShellRequest) -> std::io::Result<Result<ShellOutput, String>> {
        let started = Instant::now();
        let call_id = format!("call_{}", uuid::Uuid::new_v4().simple());
        let (admitted, described) = shell::admit(self.grant.as_ref(), request, &self.workdir);
        self.observer.note(&format!("shell {}", described.command));
        let site = shell::ShellSite {
            session_id: &self.session_id,
            task_id: &self.task_id,
            turn: 0,
            parent: &self.task_event,
            call_id: &call_id,
            described: &described,
            started,
        };
        let scope = self.scope();
        let answer = shell::call(&self.hooks, Some(&self.trace), &site, admitted, &scope).await?;
        if let Some(observation) = answer.observation {
            self.hooks.dispatch(observation, &scope).await?;
        }
        Ok(answer.output)
    }
}

impl ShellCall for CapsuleShell {
    fn execute(
        &self,
        request: ShellRequest,
    ) -> Pin<Box<dyn Future<Output = Result<ShellOutput, String>> + Send + '_>> {
        Box::pin(async move {
            self.answer(request).await.unwrap_or_else(|error| {
                self.trace_failed.store(true, Ordering::Relaxed);
                Err(format!(
                    "error[E-TRC-001]: the trace could not be written: {error}"
                ))
            })
        })
    }
}

/// Keeps what a run left: its stdout and stderr in `logs/capsule.log`, and an `a2a_send` event
/// for each of its sends.
fn record_run(run: &CapsuleRun, workdir: &Workdir, site: &RunSite<'_>) -> Result<(), SessionError> {
    let trace_error = |error: std::io::Error| SessionError::trace(workdir, error);
    if !run.stdout.is_empty() || !run.stderr.is_empty() {
        let log = format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}\n",
            run.stdout, run.stderr
        );
        workdir
            .record_dir()
            .write_whole("logs/capsule.log", log.as_bytes())
            .map_err(|error| trace_error(error.into()))?;
    }
    for send in &run.sends {
        site.trace
            .write(
                Some(site.task_event),
                send.event(Some(site.task_id.to_string())),
            )
            .map_err(trace_error)?;
    }
    Ok(())
}

/// Runs the capsule component of `staged` once, as one session.
pub async fn run(
    engine: Arc<Engine>,
    staged: Arc<StagedCapsule>,
    config: &CapsuleConfig,
    observer: Arc<dyn Observer>,
) -> Result<SessionReport, SessionError> {
    let started = Instant::now();
    let achieved =
        crate::session::containment::achieve_for_session(&staged.capsule, config.containment)?;
    let (session_id, workdir) =
        crate::session::run::open_workdir(&config.workdir_root, config.workspace.as_deref())?;
    let trace_error = |error: std::io::Error| SessionError::trace(&workdir, error);
    let trace = crate::session::run::open_trace(&workdir, &session_id, &staged.capsule)?;
    let capsule = &staged.capsule;
    let session_event = trace
        .write(
            None,
            EventBody::SessionStart {
                capsule: CapsuleRef {
                    name: capsule.name.clone(),
                    version: capsule.version.clone(),
                },
                murmur_version: env!("CARGO_PKG_VERSION").to_string(),
                workdir: workdir.record.display().to_string(),
                workspace: workdir.workspace.display().to_string(),
                in_place: workdir.in_place,
                record_layout: Some(crate::session::workdir::RECORD_LAYOUT),
                model: String::new(),
                driver: String::new(),
                credential_source: String::new(),
                components: staged.components.clone(),
                grants: Vec::new(),
                tools: staged.tools.iter().map(|tool| tool.name.clone()).collect(),
                containment: serde_json::to_value(&achieved).unwrap_or_default(),
                inference_choices: None,
                max_session_tokens: None,
                system_prompt_sha256: String::new(),
                manifest_sha256: staged.manifest_sha256.clone(),
                resumed: None,
                mcp_servers: Vec::new(),
            },
        )
        .map_err(trace_error)?;
    let refusals = crate::session::containment::RefusalLog::default();
    refusals.attach(trace.clone(), session_event.clone());
    let task_id = new_id("tsk_", 24);
    let task_event = trace
        .write(
            Some(&session_event),
            EventBody::TaskStart {
                task_id: task_id.clone(),
                context_id: None,
                source: "capsule".to_string(),
                input_chars: 0,
                input_sha256: String::new(),
            },
        )
        .map_err(trace_error)?;

    let site = RunSite {
        session_id: &session_id,
        workdir: &workdir.workspace,
        trace: &trace,
        session_event: &session_event,
        task_event: &task_event,
        task_id: &task_id,
    };
    let (grants, registry, manager) = component_setup(&engine, &staged, config, &site);
    let shell = Arc::new(CapsuleShell {
        grant: crate::session::shell::grant(
            capsule,
            &workdir,
            &config.host_env,
            (&achieved, &refusals),
        ),
        hooks: start_hooks(&engine, &staged, config, &workdir, &site),
        trace: trace.clone(),
        workdir: workdir.clone(),
        session_id: session_id.clone(),
        task_id: task_id.clone(),
        task_event: task_event.clone(),
        observer: observer.clone(),
        trace_failed: AtomicBool::new(false),
    });
    observer.note(&format!(
        "running capsule component `{}`",
        staged.component.name()
    ));
    let cancel = config.cancel.clone();
    let stop = async move {
        match cancel {
            Some(cancel) => cancel.requested().await,
            None => std::future::pending().await,
        }
    };
    let run = call_capsule(
        &engine,
        &staged.component,
        &grants,
        registry,
        manager.clone(),
        shell.clone(),
        stop,
    )
    .await;
    if run.stopped {
        observer.note("canceled: the capsule component's run was stopped");
    }

    record_run(&run, &workdir, &site)?;
    workdir.tidy_scratch();
    shell
        .hooks
        .drain(&shell.scope())
        .await
        .map_err(trace_error)?;
    if run.tool_calls_trace_failed
        || manager.trace_failed()
        || shell.trace_failed.load(Ordering::Relaxed)
    {
        return Err(trace_error(std::io::Error::other(
            "a tool_call, artifact_pulled or shell line could not be written",
        )));
    }
    let error = run.outcome.err().map(|error| Failure {
        code: error.code().to_string(),
        message: error.to_string(),
        hint: error.hint(),
    });
    let exit_status = if run.stopped {
        ExitStatus::Canceled
    } else if error.is_some() {
        ExitStatus::Failed
    } else {
        ExitStatus::Ok
    };
    trace
        .write(
            Some(&task_event),
            EventBody::TaskEnd {
                task_id: task_id.clone(),
                context_id: None,
                exit_status,
                turns: 0,
                reopen_count: 0,
                result_path: None,
                error: error.as_ref().map(Failure::to_ref),
                changes: None,
            },
        )
        .map_err(trace_error)?;
    // A peer's task asked for by a call that was stopped is canceled before the session ends.
    crate::grants::message::dropped_asks_canceled().await;
    let totals = trace.totals();
    let duration_ms = started.elapsed().as_millis() as u64;
    trace
        .write(
            Some(&session_event),
            EventBody::SessionEnd {
                exit_status,
                duration_ms,
                totals: totals.clone(),
                changes: None,
                git: None,
            },
        )
        .map_err(trace_error)?;
    Ok(SessionReport {
        session_id,
        trace_path: workdir.trace(),
        workdir: workdir.record.clone(),
        workspace: workdir.workspace.clone(),
        exit_status,
        task_count: 1,
        tasks: vec![TaskReport {
            task_id,
            context_id: None,
            exit_status,
            turns: 0,
            result_path: None,
            result_text: None,
            reopen_count: 0,
            error,
            outputs: Vec::new(),
            changes: None,
        }],
        totals,
        duration_ms,
        resumed: None,
        changes: None,
        git: None,
    })
}
