//! `mur check [PATH] [--json]`: load a manifest and print every diagnostic. A capsule's local
//! artifacts (`path:` entries) are checked too, each reported against its own file. Exit 1 when
//! any error was found.

use std::path::PathBuf;

use murmur_manifest::Manifest;
use serde_json::json;

use crate::{Exit, host_env, render};

pub fn run(path: Option<PathBuf>, json: bool) -> Exit {
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let file = if path.is_dir() {
        path.join("murmur.yaml")
    } else {
        path
    };
    let loaded = murmur_manifest::load(&file, &host_env);
    let mut diagnostics = loaded.diagnostics.clone();
    let kind = match &loaded.manifest {
        Some(Manifest::Capsule(capsule)) => {
            for (_, artifact) in murmur_manifest::check_local_artifacts(capsule, &file, &host_env) {
                diagnostics.extend(artifact.diagnostics);
            }
            Some("capsule")
        }
        Some(Manifest::Artifact(_)) => Some("artifact"),
        None => None,
    };
    let (errors, warnings) = render::counts(&diagnostics);
    if json {
        let report = json!({
            "file": file,
            "kind": kind,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": diagnostics,
        });
        println!("{report:#}");
    } else {
        render::diagnostics_human(&diagnostics);
        let verdict = if errors == 0 && warnings == 0 {
            "ok".to_string()
        } else {
            format!(
                "{}, {}",
                render::plural(errors, "error"),
                render::plural(warnings, "warning")
            )
        };
        println!("{}: {verdict}", file.display());
    }
    if errors > 0 { Exit::Failed } else { Exit::Ok }
}
