//! `mur build [DIR…] [--json]`: build artifacts' components from source, now, whatever their
//! state. Cargo-built artifacts share one cargo run; its progress shows on stderr.

use std::path::PathBuf;

use murmur_registry::source::{self, BuildError, LocalArtifact};
use serde_json::json;

use crate::{Exit, host_env, render};

pub fn run(paths: Vec<PathBuf>, json: bool) -> Exit {
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths
    };
    let mut artifacts = Vec::new();
    for path in &paths {
        match LocalArtifact::open(path, &host_env) {
            Ok(artifact) => artifacts.push(artifact),
            Err(error) => return report_error(&error, json, Exit::BadInput),
        }
    }
    let refs: Vec<&LocalArtifact> = artifacts.iter().collect();
    if !json {
        let names: Vec<&str> = artifacts.iter().map(|a| a.manifest.name.as_str()).collect();
        eprintln!("building {} from source…", names.join(", "));
    }
    if let Err(error) = source::build_components(&refs) {
        return report_error(&error, json, Exit::Failed);
    }
    let built: Vec<serde_json::Value> = artifacts
        .iter()
        .map(|artifact| {
            let component = artifact.component_path();
            let bytes = std::fs::metadata(&component).map(|m| m.len()).unwrap_or(0);
            json!({"name": artifact.manifest.name, "version": artifact.manifest.version,
                   "component": component, "bytes": bytes})
        })
        .collect();
    if json {
        println!("{:#}", json!({ "built": built }));
    } else {
        for entry in &built {
            println!(
                "built {} {} → {} ({} bytes)",
                entry["name"].as_str().unwrap_or_default(),
                entry["version"].as_str().unwrap_or_default(),
                entry["component"].as_str().unwrap_or_default(),
                entry["bytes"]
            );
        }
    }
    Exit::Ok
}

/// Prints a build error (with a manifest's own diagnostics when it has them).
pub fn report_error(error: &BuildError, json: bool, exit: Exit) -> Exit {
    let diagnostics = match error {
        BuildError::Manifest { loaded, .. } => loaded.diagnostics.clone(),
        _ => Vec::new(),
    };
    if json {
        println!(
            "{:#}",
            json!({
                "error": render::failure_json(error.code(), &error.to_string(), &error.hint()),
                "diagnostics": diagnostics,
            })
        );
    } else {
        render::diagnostics_human(&diagnostics);
        render::failure_human(error.code(), &error.to_string(), &error.hint());
    }
    exit
}
