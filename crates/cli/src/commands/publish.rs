//! `mur publish [DIR…] [--registry DIR] [--json]`: builds each artifact when its component is
//! stale, packs it ([`murmur_registry::archive`]) and adds it to a directory registry
//! ([`murmur_registry::index::publish`]). Publishing the same bytes again changes nothing; other
//! bytes for a version already there are refused (E-REG-011).

use std::path::PathBuf;

use murmur_manifest::Coded;
use murmur_registry::source::{self, LocalArtifact};
use murmur_registry::{archive, index};
use serde_json::json;

use crate::commands::build::report_error;
use crate::commands::install::default_registry;
use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct PublishArgs {
    /// Artifact directories (or their `murmur.yaml`). Default: the current directory.
    paths: Vec<PathBuf>,
    /// The directory registry to write to. Default: `$MURMUR_REGISTRY`, else
    /// `$MURMUR_HOME/registry`.
    #[arg(long)]
    registry: Option<PathBuf>,
    /// Print what was published as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: PublishArgs) -> Exit {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let registry = args
        .registry
        .clone()
        .unwrap_or_else(|| PathBuf::from(default_registry()));
    if registry.to_string_lossy().contains("://") {
        return render::failure(
            args.json,
            "E-REG-007",
            &format!(
                "`{}` is not a directory: only a directory registry can be published to",
                registry.display()
            ),
            "pass --registry DIR",
            Exit::BadInput,
        );
    }
    let mut artifacts = Vec::new();
    for path in &paths {
        match LocalArtifact::open(path, &host_env) {
            Ok(artifact) => artifacts.push(artifact),
            Err(error) => return report_error(&error, args.json, Exit::BadInput),
        }
    }
    let refs: Vec<&LocalArtifact> = artifacts.iter().collect();
    if let Err(error) = source::ensure_components(&refs) {
        return report_error(&error, args.json, Exit::Failed);
    }
    let mut published = Vec::new();
    for artifact in &artifacts {
        let packed = match archive::pack(artifact) {
            Ok(packed) => packed,
            Err(error) => {
                return render::coded(args.json, &error, Exit::BadInput);
            }
        };
        let manifest = &artifact.manifest;
        match index::publish(
            &registry,
            &manifest.name,
            &manifest.version,
            &manifest.runtime.to_string(),
            &packed.bytes,
        ) {
            Ok(entry) => published.push(json!({
                "name": entry.name, "version": entry.version, "runtime": entry.runtime,
                "sha256": entry.sha256, "bytes": packed.bytes.len(), "url": entry.url,
            })),
            Err(error) => {
                let exit = if error.code() == "E-REG-011" {
                    Exit::Failed
                } else {
                    Exit::BadInput
                };
                return render::coded(args.json, &error, exit);
            }
        }
    }
    if args.json {
        println!(
            "{:#}",
            json!({ "registry": registry, "published": published })
        );
    } else {
        for entry in &published {
            println!(
                "published {} {} ({} bytes, sha256 {}) to {}",
                entry["name"].as_str().unwrap_or_default(),
                entry["version"].as_str().unwrap_or_default(),
                entry["bytes"],
                entry["sha256"].as_str().unwrap_or_default(),
                registry.display()
            );
        }
    }
    Exit::Ok
}
