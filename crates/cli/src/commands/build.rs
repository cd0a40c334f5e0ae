//! `mur build [DIR…] [--out DIR] [--no-pack] [--no-compile] [--json]`: build artifacts'
//! components from source, now, whatever their state, compile each for this machine into the
//! compile cache (so the first run does not; progress on stderr), then pack each into
//! `<out>/<name>-<version>.tar.gz` ([`murmur_registry::archive`]: the same inputs give the same
//! bytes; the sha256 printed is the artifact's identity). Each cargo-built artifact gets a cargo
//! run of its own; progress shows on stderr. A component the runtime cannot compile fails the
//! build, named.

use std::path::PathBuf;

use murmur_manifest::Coded;
use murmur_registry::source::{self, BuildError, LocalArtifact};
use serde_json::json;

use crate::environment::{cached_engine, compile_into_cache, host_env};
use crate::exit::Exit;
use crate::render;

pub fn run(paths: Vec<PathBuf>, out: Option<PathBuf>, compile: bool, json: bool) -> Exit {
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
    let compiled = if compile {
        match compile_all(&artifacts, json) {
            Ok(compiled) => compiled,
            Err(exit) => return exit,
        }
    } else {
        Vec::new()
    };
    let mut built: Vec<serde_json::Value> = Vec::new();
    for artifact in &artifacts {
        let component = artifact.component_path();
        let bytes = std::fs::metadata(&component).map(|m| m.len()).unwrap_or(0);
        let mut entry = json!({"name": artifact.manifest.name, "version": artifact.manifest.version,
               "component": component, "bytes": bytes});
        if let Some((_, status)) = compiled
            .iter()
            .find(|(name, _)| *name == artifact.manifest.name)
        {
            entry["cache"] = json!(status);
        }
        if let Some(out) = &out {
            match pack_into(artifact, out) {
                Ok((path, sha256)) => {
                    entry["archive"] = json!(path);
                    entry["sha256"] = json!(sha256);
                }
                Err((code, message, hint)) => {
                    return render::failure(json, code, &message, &hint, Exit::Failed);
                }
            }
        }
        built.push(entry);
    }
    if json {
        println!("{}", render::json(&json!({ "built": built })));
    } else {
        for entry in &built {
            println!(
                "built {} {} → {} ({} bytes)",
                entry["name"].as_str().unwrap_or_default(),
                entry["version"].as_str().unwrap_or_default(),
                entry["component"].as_str().unwrap_or_default(),
                entry["bytes"]
            );
            if let Some(archive) = entry["archive"].as_str() {
                println!(
                    "  packed → {archive} (sha256 {})",
                    entry["sha256"].as_str().unwrap_or_default()
                );
            }
        }
    }
    Exit::Ok
}

/// Compiles each built component into the compile cache (skills have none): each artifact's
/// name and the cache's answer (`hit` when this build changed nothing it had compiled). A
/// component that cannot be read or compiled is reported, naming it.
fn compile_all(
    artifacts: &[LocalArtifact],
    json: bool,
) -> Result<Vec<(String, murmur_runtime::engine::CacheStatus)>, Exit> {
    let engine = cached_engine().map_err(|error| render::coded(json, &error, Exit::Failed))?;
    let mut compiled = Vec::new();
    for artifact in artifacts {
        if artifact.manifest.runtime == murmur_manifest::Runtime::Skill {
            continue;
        }
        let name = &artifact.manifest.name;
        let status = compile_into_cache(&engine, name, &artifact.component_path())
            .map_err(|error| render::coded(json, &error, Exit::Failed))?;
        compiled.push((name.clone(), status));
    }
    Ok(compiled)
}

/// Packs `artifact` into `out`, written whole or not at all: the archive's path and sha256.
fn pack_into(
    artifact: &LocalArtifact,
    out: &std::path::Path,
) -> Result<(PathBuf, String), (&'static str, String, String)> {
    let packed = murmur_registry::archive::pack(artifact)
        .map_err(|error| (error.code(), error.message(), error.hint()))?;
    let io = |error: std::io::Error| {
        (
            "E-RUN-007",
            format!(
                "the archive cannot be written to {}: {error}",
                out.display()
            ),
            "check that the output directory is writable".to_string(),
        )
    };
    std::fs::create_dir_all(out).map_err(io)?;
    let path = out.join(format!(
        "{}-{}.tar.gz",
        artifact.manifest.name, artifact.manifest.version
    ));
    let mut temp = tempfile::NamedTempFile::new_in(out).map_err(io)?;
    std::io::Write::write_all(&mut temp, &packed.bytes).map_err(io)?;
    temp.persist(&path).map_err(|error| io(error.error))?;
    Ok((path, packed.sha256))
}

/// Prints a build error (with a manifest's own diagnostics when it has them).
pub fn report_error(error: &BuildError, json: bool, exit: Exit) -> Exit {
    let diagnostics = match error {
        BuildError::Manifest { loaded, .. } => loaded.diagnostics.clone(),
        _ => Vec::new(),
    };
    if json {
        println!(
            "{}",
            render::json(&json!({
                "error": render::coded_json(&error),
                "diagnostics": diagnostics,
            }))
        );
    } else {
        render::diagnostics_human(&diagnostics);
        render::coded_human(&error);
    }
    exit
}
