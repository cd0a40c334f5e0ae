//! The on-disk cache of compiled components.
//!
//! A component is compiled once per content and engine: the cache key is the sha256 of the
//! component's bytes joined with a hash of the engine's compilation settings and version, so a
//! changed component, a changed setting or a new wasmtime never loads a stale artifact. Entries
//! are written to a temporary file and renamed into place, so a reader never sees half an entry
//! and two processes filling the same entry do not corrupt it. An entry that fails to load is
//! recompiled and replaced.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::component::Component;

/// Whether a load was answered from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// Loaded from a compiled entry on disk.
    Hit,
    /// Compiled now, and stored for the next load.
    Compiled,
    /// Compiled now; no cache directory is configured.
    Uncached,
}

#[derive(Debug, Clone)]
pub(crate) struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
}

impl ComponentCache {
    pub(crate) fn new(dir: PathBuf, engine: &wasmtime::Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        ComponentCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    fn entry_path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// Loads the compiled form of `bytes` (whose sha256 is `sha256`), compiling and storing it
    /// when no usable entry exists.
    pub(crate) fn load(
        &self,
        engine: &wasmtime::Engine,
        sha256: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheStatus)> {
        let entry = self.entry_path(sha256);
        if entry.is_file() {
            // SAFETY: entries are only ever written by `store` below, from `Component::serialize`
            // of this same engine configuration (the key includes its compatibility hash), into
            // a directory under the user's own murmur home.
            if let Ok(component) = unsafe { Component::deserialize_file(engine, &entry) } {
                return Ok((component, CacheStatus::Hit));
            }
        }
        let component = Component::new(engine, bytes)?;
        match self.store(&entry, &component) {
            Ok(()) => Ok((component, CacheStatus::Compiled)),
            // A cache that cannot be written costs the next start a compile, nothing more.
            Err(_) => Ok((component, CacheStatus::Uncached)),
        }
    }

    fn store(&self, entry: &Path, component: &Component) -> wasmtime::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let serialized = component.serialize()?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir)?;
        temp.write_all(&serialized)?;
        temp.as_file().sync_all()?;
        temp.persist(entry).map_err(|error| error.error)?;
        Ok(())
    }
}
