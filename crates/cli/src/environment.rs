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

/// The engine with the user's compile cache, as every `mur` command that loads components uses.
pub fn cached_engine() -> Result<Engine, murmur_runtime::RuntimeError> {
    Engine::new(EngineConfig {
        cache_dir: Some(murmur_home().join("cache").join("components")),
        pooling: false,
    })
}
