//! What `mur` reads of the user's machine: the process environment, the murmur home, and the
//! compile cache under it.

use std::path::{Path, PathBuf};

use murmur_runtime::{Engine, EngineConfig};

/// Process-environment lookups for `${NAME}` interpolation and `env.allow`.
pub fn host_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A capsule argument (a directory holding `murmur.yaml`, or the file; default the current
/// directory) as the manifest's path and its directory.
pub fn capsule_paths(dir: Option<&Path>) -> (PathBuf, PathBuf) {
    let dir = dir.unwrap_or(Path::new("."));
    let file = if dir.is_dir() {
        dir.join("murmur.yaml")
    } else {
        dir.to_path_buf()
    };
    let capsule_dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    (file, capsule_dir)
}

/// The user's murmur home: `$MURMUR_HOME`, else `~/.murmur`.
pub fn murmur_home() -> PathBuf {
    if let Some(home) = std::env::var_os("MURMUR_HOME") {
        return PathBuf::from(home);
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".murmur")
}

/// `--workspace PATH` refused before anything runs (`E-RUN-033`, exit 2) when PATH holds
/// Murmur's home or lies beneath it: the agent would read the user's credentials file and the
/// control plane's tokens there.
pub fn refuse_workspace(workspace: Option<&Path>, json: bool) -> Option<crate::exit::Exit> {
    let workspace = workspace?.canonicalize().ok()?;
    let home = murmur_home().canonicalize().ok()?;
    if !(home.starts_with(&workspace) || workspace.starts_with(&home)) {
        return None;
    }
    Some(crate::render::failure(
        json,
        "E-RUN-033",
        &format!(
            "{} cannot be the session's workspace: it overlaps Murmur's home {} (the credentials file, the control plane's tokens, the compile cache), which the agent would read",
            workspace.display(),
            home.display()
        ),
        "work on a directory that does not hold Murmur's home (set MURMUR_HOME elsewhere if it must)",
        crate::exit::Exit::BadInput,
    ))
}

/// The registry `given` names (else `$MURMUR_REGISTRY`, else `$MURMUR_HOME/registry`), as
/// `mur install`, `mur publish` and `mur run` take it: a relative directory is relative to the
/// current one; an OCI registry presents the credentials the credential sources (the
/// environment, then the user's credentials file) or the Docker credential file give.
pub fn registry(
    given: Option<&str>,
) -> Result<murmur_registry::index::Registry, murmur_registry::index::RegistryError> {
    let given = given.map(str::to_string).unwrap_or_else(default_registry);
    let registry = murmur_registry::index::Registry::parse(
        &given,
        &std::env::current_dir().unwrap_or_default(),
    )?;
    registry.with_credentials(&registry_sources(Some(&given)))
}

/// The registry credential sources (the environment, then the user's credentials file), their
/// unqualified credentials bound to the registry `$MURMUR_REGISTRY` names (when it is unset, to
/// `given`, the registry named on the command line) and to `MURMUR_REGISTRY_HOSTS`; see
/// [`murmur_registry::oci::credentials`].
pub fn registry_sources(given: Option<&str>) -> murmur_registry::oci::CredentialSources {
    let home = std::env::var("MURMUR_REGISTRY")
        .ok()
        .filter(|value| !value.is_empty())
        .or_else(|| given.map(str::to_string));
    murmur_registry::oci::CredentialSources::new(home.as_deref(), credential_lookup())
}

/// Looks a credential up in the environment, then the user's credentials file.
fn credential_lookup() -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
    let file = user_credentials().ok().map(|(credentials, _)| credentials);
    move |name| {
        host_env(name).or_else(|| file.as_ref().and_then(|credentials| credentials.get(name)))
    }
}

/// The registry used when none is given: `$MURMUR_REGISTRY`, else `$MURMUR_HOME/registry`.
pub fn default_registry() -> String {
    std::env::var("MURMUR_REGISTRY")
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| murmur_home().join("registry").display().to_string())
}

/// The user's credentials file (the `config` source of credentials).
pub fn credentials_file() -> PathBuf {
    murmur_home().join("credentials.yaml")
}

/// The credentials in [`credentials_file`], with what is wrong in it; no file is no
/// credentials.
pub fn user_credentials() -> Result<
    (
        murmur_manifest::credentials::Credentials,
        Vec<murmur_manifest::Diagnostic>,
    ),
    Box<murmur_manifest::Diagnostic>,
> {
    murmur_manifest::credentials::load(&credentials_file())
}

/// The credentials in [`credentials_file`], its warnings printed on stderr; what makes it
/// unusable, for the caller to report.
pub fn user_credentials_warned()
-> Result<murmur_manifest::credentials::Credentials, Box<murmur_manifest::Diagnostic>> {
    let (credentials, warnings) = user_credentials()?;
    crate::render::diagnostics_human(&warnings);
    Ok(credentials)
}

/// The engine with the user's compile cache, as every `mur` command that loads components uses:
/// under `$MURMUR_HOME/cache/components`, bounded by `MURMUR_CACHE_MAX_MB` (MiB; default 1024),
/// each compile the cache cannot answer told on stderr as it starts and ends.
pub fn cached_engine() -> Result<Engine, murmur_runtime::RuntimeError> {
    use murmur_runtime::engine::{CompileEvent, CompileProgress};
    let limit = match std::env::var("MURMUR_CACHE_MAX_MB") {
        Err(_) => None,
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(mib) => Some(mib.saturating_mul(1 << 20)),
            Err(_) => {
                return Err(murmur_runtime::RuntimeError::Io {
                    context: "reading MURMUR_CACHE_MAX_MB".to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "`{text}` is not a whole number of MiB (the compile cache's bound, e.g. 1024)"
                        ),
                    ),
                });
            }
        },
    };
    let told = |event: CompileEvent<'_>| match event {
        CompileEvent::Started { name, bytes } => eprintln!(
            "compiling `{name}` ({:.1} MB) for this machine; it is kept in the cache for later runs…",
            bytes as f64 / 1e6
        ),
        CompileEvent::Finished { name, elapsed } => {
            eprintln!("compiled `{name}` in {:.1} s", elapsed.as_secs_f64())
        }
    };
    Engine::new(EngineConfig {
        cache_dir: Some(cache_dir()),
        cache_limit: limit,
        on_compile: CompileProgress(Some(std::sync::Arc::new(told))),
        pooling: false,
    })
}

/// Compiles the component file of the artifact `name` into `engine`'s cache (progress on
/// stderr when the cache cannot answer), as `mur build` and `mur install` do ahead of the first
/// run: the cache's answer, or why the file could not be read or compiled.
pub fn compile_into_cache(
    engine: &Engine,
    name: &str,
    component: &std::path::Path,
) -> Result<murmur_runtime::engine::CacheStatus, murmur_runtime::RuntimeError> {
    let bytes = std::fs::read(component).map_err(|source| murmur_runtime::RuntimeError::Io {
        context: format!("reading the component of `{name}`"),
        source,
    })?;
    let (_, _, status) = engine.compile(name, &bytes)?;
    Ok(status)
}

/// Where compiled components are kept.
pub fn cache_dir() -> PathBuf {
    murmur_home().join("cache").join("components")
}
