//! `murmur:artifact-manager/manage`: a capsule component inspects and installs artifacts during
//! its session.
//!
//! What a capsule component can rely on:
//!
//! - **What is installed for the session** (`list`): the capsule's declared artifacts, in
//!   manifest order, then what the component pulled in this session, in pull order (a pull of a
//!   declared name replaces its entry). A registry artifact carries the sha256 and source
//!   `murmur.lock` pins; a local one (`path:`) no sha256 and its directory as source.
//! - `describe` gives one of them with its description, a tool's `input_schema` (JSON) and its
//!   own `murmur.yaml` verbatim; a name not in `list` is an error. `diagnostics` is the session
//!   id and `list`.
//! - **`pull`** resolves the artifact in the session's registry (the version asked for, else the
//!   one `murmur.lock` pins, else the newest), verifies its bytes against the registry's sha256
//!   and the lock's pin, installs it under the project store `.murmur/artifacts/<name>/<version>/`
//!   and pins it in `murmur.lock`: the same path as `mur install`
//!   ([`murmur_registry::install::pull`]). A hash mismatch (E-REG-004), a version or hash that
//!   conflicts with the lock's pin (E-REG-005), or an unsafe archive errs before anything is
//!   written. A pulled artifact is in `list` and `describe` at once, and a pulled WASM tool is
//!   callable through `murmur:tool-registry/invoke` ([`super::tool_registry`]) under the grants
//!   of the capsule's other tools. Each pull is an `artifact_pulled` trace event.
//! - `search` and `remove` are not implemented: they always return an error.
//!
//! A failed `pull` or `describe` comes back as text `error[<code>]: <message>`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use murmur_manifest::Coded;
use murmur_manifest::capsule::CapsuleManifest;
use murmur_manifest::{Lock, Runtime};
use murmur_registry::LocalArtifact;
use murmur_registry::index::Registry;
use murmur_registry::install::{self, InstallOptions};

use crate::bindings::host::murmur::artifact_manager::manage::{
    ArtifactDescription, ArtifactInfo, Host, SessionDiagnostics,
};
use crate::grants::env::HostEnv;
use crate::grants::tool_registry::{AllowedTool, Allowlist, LoadTool, compile_input_schema};
use murmur_trace::{EventBody, Trace};

/// One artifact installed for the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub name: String,
    pub version: String,
    /// `tool`, `driver`, `hook`, `skill` or `capsule`.
    pub runtime: String,
    pub sha256: Option<String>,
    pub source: Option<String>,
    /// Its directory (holding its `murmur.yaml`), when it is there.
    pub dir: Option<PathBuf>,
}

impl Known {
    fn info(&self) -> ArtifactInfo {
        ArtifactInfo {
            name: self.name.clone(),
            version: self.version.clone(),
            runtime: self.runtime.clone(),
            sha256: self.sha256.clone(),
            source: self.source.clone(),
        }
    }
}

/// What a session gives its capsule component's artifact manager.
pub struct ManagerConfig {
    pub capsule_dir: PathBuf,
    pub session_id: String,
    /// Where `pull` resolves; `None` makes every pull an error.
    pub registry: Option<Registry>,
    /// The user's store of verified archives (`$MURMUR_HOME/artifacts`).
    pub user_store: PathBuf,
    pub host_env: HostEnv,
    /// Loads a pulled tool, bound to the grants pulled tools run under.
    pub loader: Arc<dyn LoadTool>,
    /// The tools the component may call: a pull adds to it.
    pub allowlist: Arc<Allowlist>,
    /// What the capsule declares ([`ArtifactManager::declared`]).
    pub declared: Vec<Known>,
    /// Where `artifact_pulled` goes: the trace and the `session_start` event.
    pub trace: Option<(Trace, String)>,
}

/// The artifact manager of one capsule component's session: shared by its store's host state.
pub struct ArtifactManager {
    config: ManagerConfig,
    pulled: Mutex<Vec<Known>>,
    /// Set when an `artifact_pulled` line could not be written: the session then fails.
    trace_failed: AtomicBool,
}

impl ArtifactManager {
    pub fn new(config: ManagerConfig) -> ArtifactManager {
        ArtifactManager {
            config,
            pulled: Mutex::default(),
            trace_failed: AtomicBool::new(false),
        }
    }

    /// What the capsule declares, as installed: local artifacts by their directory, registry
    /// ones as `murmur.lock` pins them.
    pub fn declared(
        capsule: &CapsuleManifest,
        capsule_dir: &std::path::Path,
        lock: &Lock,
    ) -> Vec<Known> {
        capsule
            .artifacts
            .iter()
            .map(|entry| match &entry.path {
                Some(path) => Known {
                    name: entry.name.clone(),
                    version: entry.version.clone(),
                    runtime: entry.runtime.to_string(),
                    sha256: None,
                    source: Some(path.display().to_string()),
                    dir: Some(murmur_manifest::local_paths(path, capsule_dir).0),
                },
                None => {
                    let pin = lock.get(&entry.name);
                    Known {
                        name: entry.name.clone(),
                        version: pin.map_or(entry.version.clone(), |pin| pin.version.clone()),
                        runtime: entry.runtime.to_string(),
                        sha256: pin.map(|pin| pin.sha256.clone()),
                        source: pin.map(|pin| pin.source.clone()),
                        dir: install::installed(capsule_dir, lock, &entry.name, &entry.version)
                            .ok(),
                    }
                }
            })
            .collect()
    }

    /// Every artifact installed for the session: declared, then pulled.
    pub fn list(&self) -> Vec<Known> {
        let pulled = self
            .pulled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut all: Vec<Known> = self
            .config
            .declared
            .iter()
            .map(|known| {
                pulled
                    .iter()
                    .find(|p| p.name == known.name)
                    .unwrap_or(known)
                    .clone()
            })
            .collect();
        for known in pulled {
            if !all.iter().any(|k| k.name == known.name) {
                all.push(known);
            }
        }
        all
    }

    /// Whether an `artifact_pulled` line could not be written.
    pub fn trace_failed(&self) -> bool {
        self.trace_failed.load(Ordering::Relaxed)
    }

    fn describe(&self, name: &str) -> Result<ArtifactDescription, String> {
        let Some(known) = self.list().into_iter().find(|k| k.name == name) else {
            return Err(format!(
                "error[E-REG-010]: `{name}` is not installed for this session"
            ));
        };
        let Some(dir) = &known.dir else {
            return Err(format!(
                "error[E-REG-010]: `{name}` is declared but not installed (run `mur install`)"
            ));
        };
        let manifest = read_manifest_text(&dir.join("murmur.yaml")).map_err(|error| {
            format!("error[E-REG-010]: the murmur.yaml of `{name}` cannot be read: {error}")
        })?;
        let env = self.config.host_env.clone();
        let opened = LocalArtifact::open(dir, &move |n: &str| env(n)).ok();
        let own = opened.as_ref().map(|artifact| &artifact.manifest);
        Ok(ArtifactDescription {
            info: known.info(),
            description: own.and_then(|m| m.description.clone()),
            input_schema: own
                .and_then(|m| m.input_schema.as_ref())
                .map(|schema| schema.to_string()),
            manifest,
        })
    }

    async fn pull(self: Arc<Self>, name: String, version: Option<String>) -> Result<Known, String> {
        let Some(registry) = self.config.registry.clone() else {
            return Err("error[E-REG-001]: this session has no registry to pull from".to_string());
        };
        let this = self.clone();
        let pulled =
            tokio::task::spawn_blocking(move || this.pull_blocking(registry, &name, version))
                .await
                .map_err(|error| format!("error[E-REG-001]: the pull stopped: {error}"))??;
        if let Some((trace, parent)) = &self.config.trace {
            let event = EventBody::ArtifactPulled {
                name: pulled.name.clone(),
                version: pulled.version.clone(),
                runtime: pulled.runtime.clone(),
                sha256: pulled.sha256.clone().unwrap_or_default(),
                source: pulled.source.clone().unwrap_or_default(),
            };
            if let Err(error) = trace.write(Some(parent), event) {
                self.trace_failed.store(true, Ordering::Relaxed);
                return Err(format!(
                    "error[E-TRC-001]: the trace could not be written: {error}"
                ));
            }
        }
        let mut all = self.pulled.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|known| known.name != pulled.name);
        all.push(pulled.clone());
        Ok(pulled)
    }

    /// Installs, then (for a tool) loads the component and allowlists it. Blocking: registry
    /// I/O and compilation.
    fn pull_blocking(
        &self,
        registry: Registry,
        name: &str,
        version: Option<String>,
    ) -> Result<Known, String> {
        let coded = |code: &str, message: String| format!("error[{code}]: {message}");
        let options = InstallOptions {
            registry,
            locked: false,
            user_store: self.config.user_store.clone(),
            limits: Default::default(),
        };
        let installed = install::pull(
            &self.config.capsule_dir,
            name,
            version.as_deref(),
            &options,
            &mut |_| {},
        )
        .map_err(|error| coded(error.code(), error.to_string()))?;
        if installed.runtime == Runtime::Tool.as_str() {
            let env = self.config.host_env.clone();
            let artifact = LocalArtifact::open(&installed.dir, &move |n: &str| env(n))
                .map_err(|error| coded(error.code(), error.to_string()))?;
            let input_schema = match &artifact.manifest.input_schema {
                Some(schema) => Some(Arc::new(
                    compile_input_schema(&installed.name, schema)
                        .map_err(|refused| coded(refused.code, refused.message))?,
                )),
                None => None,
            };
            let tool = self
                .config
                .loader
                .load(&installed.name, &artifact.component_path())
                .map_err(|error| {
                    coded(
                        error.code(),
                        format!("`{}` was installed, but {error}", installed.name),
                    )
                })?;
            self.config
                .allowlist
                .allow(&installed.name, AllowedTool { tool, input_schema });
        }
        Ok(Known {
            name: installed.name,
            version: installed.version,
            runtime: installed.runtime,
            sha256: Some(installed.sha256),
            source: Some(installed.source),
            dir: Some(installed.dir),
        })
    }
}

/// A capsule component's store holds its session's manager; any other store holds none.
pub(crate) type ManagerSlot = Option<Arc<ArtifactManager>>;

fn artifact_manager(slot: &ManagerSlot) -> Result<Arc<ArtifactManager>, String> {
    slot.clone().ok_or_else(|| {
        "murmur:artifact-manager/manage is available to capsule components only".to_string()
    })
}

impl Host for ManagerSlot {
    async fn list(&mut self) -> wasmtime::Result<Vec<ArtifactInfo>> {
        Ok(self
            .as_ref()
            .map(|manager| manager.list().iter().map(Known::info).collect())
            .unwrap_or_default())
    }

    async fn describe(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Result<ArtifactDescription, String>> {
        Ok(artifact_manager(self).and_then(|manager| manager.describe(&name)))
    }

    async fn diagnostics(&mut self) -> wasmtime::Result<SessionDiagnostics> {
        Ok(match self {
            Some(manager) => SessionDiagnostics {
                session_id: manager.config.session_id.clone(),
                installed: manager.list().iter().map(Known::info).collect(),
            },
            None => SessionDiagnostics {
                session_id: String::new(),
                installed: Vec::new(),
            },
        })
    }

    async fn pull(
        &mut self,
        name: String,
        version: Option<String>,
    ) -> wasmtime::Result<Result<ArtifactInfo, String>> {
        let manager = match artifact_manager(self) {
            Ok(manager) => manager,
            Err(text) => return Ok(Err(text)),
        };
        Ok(manager.pull(name, version).await.map(|known| known.info()))
    }

    async fn search(
        &mut self,
        _query: String,
    ) -> wasmtime::Result<Result<Vec<ArtifactInfo>, String>> {
        Ok(Err(
            "murmur:artifact-manager/manage.search is not implemented".to_string(),
        ))
    }

    async fn remove(&mut self, _name: String) -> wasmtime::Result<Result<(), String>> {
        Ok(Err(
            "murmur:artifact-manager/manage.remove is not implemented".to_string(),
        ))
    }
}

/// A manifest's text, read up to the loader's own cap ([`murmur_manifest::MANIFEST_MAX_BYTES`]).
fn read_manifest_text(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(murmur_manifest::MANIFEST_MAX_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > murmur_manifest::MANIFEST_MAX_BYTES {
        return Err(std::io::Error::other(format!(
            "it is over {} bytes",
            murmur_manifest::MANIFEST_MAX_BYTES
        )));
    }
    Ok(text)
}
