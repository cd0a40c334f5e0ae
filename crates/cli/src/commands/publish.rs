//! `mur publish [DIR…] [--registry DIR|oci://HOST/NAMESPACE] [--json]`: builds each artifact
//! when its component is stale, then packs it ([`murmur_registry::archive`]) into a directory
//! registry ([`murmur_registry::index::publish`]), or pushes its files as an OCI artifact
//! ([`murmur_registry::oci`]). Publishing the same bytes again changes nothing; other bytes for
//! a version already there are refused (E-REG-011) and nothing is written.

use std::path::PathBuf;

use murmur_manifest::Coded;
use murmur_registry::index::Registry;
use murmur_registry::source::{self, LocalArtifact};
use murmur_registry::{archive, index};
use serde_json::json;

use crate::commands::build::report_error;
use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct PublishArgs {
    /// Artifact directories (or their `murmur.yaml`). Default: the current directory.
    paths: Vec<PathBuf>,
    /// The registry to publish to: a directory, or `oci://HOST[:PORT]/NAMESPACE`. Default:
    /// `$MURMUR_REGISTRY`, else `$MURMUR_HOME/registry`.
    #[arg(long)]
    registry: Option<String>,
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
    let registry = match crate::environment::registry(args.registry.as_deref()) {
        Ok(Registry::Http(url)) => {
            return render::failure(
                args.json,
                "E-REG-007",
                &format!("`{url}` is an HTTP index, which mur cannot publish to"),
                "pass --registry DIR or --registry oci://HOST/NAMESPACE",
                Exit::BadInput,
            );
        }
        Ok(registry) => registry,
        Err(error) => return render::coded(args.json, &error, Exit::BadInput),
    };
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
        if let Registry::Oci(oci) = &registry {
            let pushed = archive::packed_files(artifact)
                .map_err(|error| render::coded(args.json, &error, Exit::BadInput))
                .and_then(|files| {
                    oci.push(&artifact.manifest, &files)
                        .map_err(|error| render::coded(args.json, &error, refused_exit(&error)))
                });
            match pushed {
                Ok(pushed) => published.push(json!({
                    "name": artifact.manifest.name, "version": artifact.manifest.version,
                    "runtime": artifact.manifest.runtime.to_string(),
                    "sha256": pushed.sha256, "bytes": pushed.bytes,
                    "reference": pushed.reference, "how": pushed.how,
                })),
                Err(exit) => return exit,
            }
            continue;
        }
        // An HTTP index was refused above: what is left is a directory.
        let Registry::Dir(registry) = &registry else {
            continue;
        };
        let packed = match archive::pack(artifact) {
            Ok(packed) => packed,
            Err(error) => {
                return render::coded(args.json, &error, Exit::BadInput);
            }
        };
        let manifest = &artifact.manifest;
        match index::publish(
            registry,
            &manifest.name,
            &manifest.version,
            &manifest.runtime.to_string(),
            &packed.bytes,
        ) {
            Ok(entry) => published.push(json!({
                "name": entry.name, "version": entry.version, "runtime": entry.runtime,
                "sha256": entry.sha256, "bytes": packed.bytes.len(), "url": entry.url,
            })),
            Err(error) => return render::coded(args.json, &error, refused_exit(&error)),
        }
    }
    let registry = registry.describe();
    if args.json {
        println!(
            "{}",
            render::json(&json!({ "registry": registry, "published": published }))
        );
    } else {
        for entry in &published {
            let text = |key: &str| entry[key].as_str().unwrap_or_default().to_string();
            let (verb, place) = match entry["how"].as_str() {
                Some("unchanged") => ("already published", text("reference")),
                Some(_) => ("published", text("reference")),
                None => ("published", registry.clone()),
            };
            println!(
                "{verb} {} {} ({} bytes, sha256 {}) to {place}",
                text("name"),
                text("version"),
                entry["bytes"],
                text("sha256"),
            );
        }
    }
    Exit::Ok
}

/// The exit for a refused publish: `1` for a version already there with other bytes or a
/// registry refusing the credentials, `3` for a registry that cannot be reached, `2` otherwise.
fn refused_exit(error: &murmur_registry::index::RegistryError) -> Exit {
    match error.code() {
        "E-REG-011" | "E-REG-015" => Exit::Failed,
        "E-REG-007"
            if matches!(
                error,
                murmur_registry::index::RegistryError::Unreachable { .. }
            ) =>
        {
            Exit::Stopped
        }
        _ => Exit::BadInput,
    }
}
