//! The on-disk cache of compiled components.
//!
//! What it promises:
//!
//! - A component is compiled once per content and engine: the cache key is the sha256 of the
//!   component's bytes joined with a hash of the engine's compilation settings and version, so
//!   a changed component, a changed setting or a new wasmtime never loads a stale entry.
//! - Entries are written to a temporary file and renamed into place, so a reader never sees
//!   half an entry and two processes filling the same entry do not corrupt it. An entry that
//!   fails to load is recompiled and replaced.
//! - The cache is bounded: after each entry stored, the least recently used entries (a load
//!   marks an entry used) are removed until the whole directory holds at most the limit
//!   ([`DEFAULT_LIMIT_BYTES`] unless configured), never the entry just stored. Entries of other
//!   engines (another `mur` version) count and go first when older.
//! - [`ComponentCache::entries`] and [`ComponentCache::prune`] are what `mur cache list` and
//!   `mur cache prune` show and do.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::component::Component;

/// The cache's default bound: 1 GiB (a Python or JavaScript component compiles to about 35 MB,
/// a Rust one to a few).
pub const DEFAULT_LIMIT_BYTES: u64 = 1 << 30;

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

/// One compiled entry on disk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheEntry {
    /// The sha256 of the component it was compiled from.
    pub component_sha256: String,
    /// Whether this engine can load it (else it was compiled by another `mur` version or
    /// setting).
    pub current: bool,
    pub bytes: u64,
    /// When it was last loaded or stored, in milliseconds since the Unix epoch.
    pub last_used_ms: u64,
    #[serde(skip)]
    pub path: PathBuf,
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
    limit: u64,
}

impl ComponentCache {
    pub(crate) fn new(dir: PathBuf, engine: &wasmtime::Engine, limit: u64) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        ComponentCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
            limit,
        }
    }

    /// The directory entries live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bound the cache keeps itself under.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    fn entry_path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// Whether a compiled entry for the component whose sha256 is `sha256` is on disk.
    pub fn has(&self, sha256: &str) -> bool {
        self.entry_path(sha256).is_file()
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
                mark_used(&entry);
                return Ok((component, CacheStatus::Hit));
            }
        }
        let component = Component::new(engine, bytes)?;
        match self.store(&entry, &component) {
            Ok(()) => {
                // Over the bound: the least recently used go. A failure here costs disk, not
                // the load.
                let _ = self.prune(self.limit, Some(&entry), false);
                Ok((component, CacheStatus::Compiled))
            }
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

    /// Every entry, most recently used first. A missing directory holds none.
    pub fn entries(&self) -> std::io::Result<Vec<CacheEntry>> {
        let read = match std::fs::read_dir(&self.dir) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut entries = Vec::new();
        for item in read {
            let item = item?;
            let name = item.file_name().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(".cwasm") else {
                continue;
            };
            let Some((sha256, engine)) = stem.rsplit_once('-') else {
                continue;
            };
            // Only regular files of our naming: anything else in the directory is not ours.
            let Ok(meta) = item.path().symlink_metadata() else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let last_used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            entries.push(CacheEntry {
                component_sha256: sha256.to_string(),
                current: engine == self.engine_key,
                bytes: meta.len(),
                last_used_ms: last_used
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0),
                path: item.path(),
            });
        }
        entries.sort_by(|a, b| {
            b.last_used_ms
                .cmp(&a.last_used_ms)
                .then(a.path.cmp(&b.path))
        });
        Ok(entries)
    }

    /// Removes entries until the cache holds at most `limit` bytes, least recently used first
    /// (never `keep`); with `stale`, every entry this engine cannot load goes first whatever
    /// its age. Returns what was removed.
    pub fn prune(
        &self,
        limit: u64,
        keep: Option<&Path>,
        stale: bool,
    ) -> std::io::Result<Vec<CacheEntry>> {
        let entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut removed: Vec<CacheEntry> = Vec::new();
        // Stale ones first when asked, then the least recently used.
        let stale_first = entries.iter().filter(|e| stale && !e.current);
        let oldest_first = entries.iter().rev().filter(|e| !stale || e.current);
        for (entry, forced) in stale_first
            .map(|e| (e, true))
            .chain(oldest_first.map(|e| (e, false)))
        {
            if !forced && total <= limit {
                break;
            }
            if Some(entry.path.as_path()) == keep {
                continue;
            }
            if std::fs::remove_file(&entry.path).is_ok() {
                total = total.saturating_sub(entry.bytes);
                removed.push(entry.clone());
            }
        }
        Ok(removed)
    }
}

/// Marks an entry used now (its modification time), for the least-recently-used bound.
fn mark_used(entry: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(entry) {
        let _ = file.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, limit: u64) -> ComponentCache {
        ComponentCache {
            dir: dir.to_path_buf(),
            engine_key: "0123456789abcdef".to_string(),
            limit,
        }
    }

    fn entry(dir: &Path, name: &str, bytes: usize, age_secs: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; bytes]).unwrap();
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - std::time::Duration::from_secs(age_secs))
            .unwrap();
        path
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_kept_entry_never() {
        let dir = tempfile::tempdir().unwrap();
        let old = entry(dir.path(), "aa-0123456789abcdef.cwasm", 100, 300);
        let mid = entry(dir.path(), "bb-0123456789abcdef.cwasm", 100, 200);
        let new = entry(dir.path(), "cc-0123456789abcdef.cwasm", 100, 100);
        let other = entry(dir.path(), "notes.txt", 1000, 400);
        let cache = cache(dir.path(), 150);
        let listed = cache.entries().unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|e| e.component_sha256.as_str())
                .collect::<Vec<_>>(),
            ["cc", "bb", "aa"]
        );
        let removed = cache.prune(150, Some(&old), false).unwrap();
        let names: Vec<&str> = removed
            .iter()
            .map(|e| e.component_sha256.as_str())
            .collect();
        assert_eq!(names, ["bb", "cc"], "the kept one stays even though oldest");
        assert!(old.exists() && !mid.exists() && !new.exists());
        assert!(
            other.exists(),
            "a file not of the cache's naming is never touched"
        );
    }

    #[test]
    fn stale_entries_of_another_engine_go_first_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let current = entry(dir.path(), "aa-0123456789abcdef.cwasm", 10, 500);
        let stale = entry(dir.path(), "aa-ffffffffffffffff.cwasm", 10, 1);
        let cache = cache(dir.path(), 1000);
        assert!(cache.prune(1000, None, false).unwrap().is_empty());
        let removed = cache.prune(1000, None, true).unwrap();
        assert_eq!(removed.len(), 1);
        assert!(!removed[0].current);
        assert!(current.exists() && !stale.exists());
        assert!(cache.entries().unwrap()[0].current);
    }

    #[test]
    fn a_load_marks_its_entry_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = entry(dir.path(), "aa-0123456789abcdef.cwasm", 10, 3600);
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        mark_used(&path);
        let after = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(after > before);
    }
}
