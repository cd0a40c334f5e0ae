//! `mur cache list|prune`: the compiled-component cache under `$MURMUR_HOME/cache/components`
//! ([`murmur_runtime::engine::ComponentCache`]). `list` shows each entry (the component's
//! sha256, size, when last used, and whether this `mur` can load it) and the total against the
//! bound; `prune` removes the entries other `mur` versions compiled and the least recently used
//! beyond the bound (`--max-mb N` for another, `--all` for everything). Nothing else in the
//! directory is touched.

use clap::Subcommand;
use murmur_runtime::engine::CacheEntry;
use serde_json::json;

use crate::environment::cached_engine;
use crate::exit::Exit;
use crate::render;

#[derive(Subcommand)]
pub enum CacheCommand {
    /// List the compiled components in the cache, most recently used first.
    List {
        /// Print the listing as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove stale entries (compiled by another `mur`) and the least recently used beyond the
    /// bound.
    Prune {
        /// Keep at most this many MiB instead of the cache's bound.
        #[arg(long, value_name = "N", conflicts_with = "all")]
        max_mb: Option<u64>,
        /// Remove every entry.
        #[arg(long)]
        all: bool,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn listed(entry: &CacheEntry) -> serde_json::Value {
    json!({
        "component_sha256": entry.component_sha256,
        "bytes": entry.bytes,
        "last_used_ms": entry.last_used_ms,
        "current": entry.current,
    })
}

pub fn run(command: CacheCommand) -> Exit {
    let json = match &command {
        CacheCommand::List { json } | CacheCommand::Prune { json, .. } => *json,
    };
    let engine = match cached_engine() {
        Ok(engine) => engine,
        Err(error) => return render::coded(json, &error, Exit::BadInput),
    };
    let Some(cache) = engine.cache() else {
        return render::failure(
            json,
            "E-RUN-001",
            "no compile cache is configured",
            "this is a problem of the host",
            Exit::Failed,
        );
    };
    let io_failure = |error: std::io::Error| {
        render::failure(
            json,
            "E-RUN-001",
            &format!(
                "reading the compile cache {}: {error}",
                cache.dir().display()
            ),
            "check that the directory is readable (it is safe to delete it)",
            Exit::Failed,
        )
    };
    match command {
        CacheCommand::List { json } => {
            let entries = match cache.entries() {
                Ok(entries) => entries,
                Err(error) => return io_failure(error),
            };
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            if json {
                println!(
                    "{}",
                    render::json(&json!({
                        "dir": cache.dir(),
                        "limit_bytes": cache.limit(),
                        "total_bytes": total,
                        "entries": entries.iter().map(listed).collect::<Vec<_>>(),
                    }))
                );
                return Exit::Ok;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            for entry in &entries {
                let ago = now.saturating_sub(entry.last_used_ms) / 1000;
                let ago = match ago {
                    0..60 => format!("{ago} s ago"),
                    60..3600 => format!("{} min ago", ago / 60),
                    3600..86400 => format!("{} h ago", ago / 3600),
                    _ => format!("{} days ago", ago / 86400),
                };
                println!(
                    "{}  {:>10}  used {ago}{}",
                    &entry.component_sha256[..12.min(entry.component_sha256.len())],
                    mib(entry.bytes),
                    if entry.current {
                        ""
                    } else {
                        "  (stale: another mur compiled it)"
                    }
                );
            }
            println!(
                "{}: {} of {} ({})",
                cache.dir().display(),
                mib(total),
                mib(cache.limit()),
                render::plural(entries.len(), "entry")
            );
            Exit::Ok
        }
        CacheCommand::Prune { max_mb, all, json } => {
            let limit = if all {
                0
            } else {
                max_mb.map_or(cache.limit(), |mb| mb.saturating_mul(1 << 20))
            };
            let removed = match cache.prune(limit, None, true) {
                Ok(removed) => removed,
                Err(error) => return io_failure(error),
            };
            let left: u64 = cache
                .entries()
                .map(|entries| entries.iter().map(|e| e.bytes).sum())
                .unwrap_or(0);
            let freed: u64 = removed.iter().map(|e| e.bytes).sum();
            if json {
                println!(
                    "{}",
                    render::json(&json!({
                        "removed": removed.iter().map(listed).collect::<Vec<_>>(),
                        "freed_bytes": freed,
                        "total_bytes": left,
                    }))
                );
            } else {
                println!(
                    "removed {}, freed {}; the cache holds {}",
                    render::plural(removed.len(), "entry"),
                    mib(freed),
                    mib(left)
                );
            }
            Exit::Ok
        }
    }
}
