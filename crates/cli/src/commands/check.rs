//! `mur check [PATH] [--json]`: load a manifest and print every diagnostic. A capsule's local
//! artifacts (`path:` entries) are checked too, each reported against its own file, and so is
//! each driver credential a run would need (`${NAME}` looked for in the environment, the
//! `.env` beside the manifest and `$MURMUR_HOME/credentials.yaml`). Each artifact's component
//! file is read (not compiled): missing, not a component, or not exporting its world's entry
//! point is said ([`source::check_component`]). Exit 1 when any error was found.
//!
//! For a capsule, `--json` also lists under `grants` what each artifact will hold once its
//! entry narrowed the capsule's capabilities: `{name, runtime, filesystem: {scope, path,
//! read_only}, network: {gateway?, allow}, env}` (names only, never a value).

use std::path::PathBuf;

use murmur_manifest::{Manifest, credentials};
use murmur_registry::source;
use serde_json::json;

use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

pub fn run(path: Option<PathBuf>, json: bool) -> Exit {
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let file = if path.is_dir() {
        path.join("murmur.yaml")
    } else {
        path
    };
    let loaded = murmur_manifest::load(&file, &host_env);
    let mut diagnostics = loaded.diagnostics.clone();
    let mut grants = Vec::new();
    let kind = match &loaded.manifest {
        Some(Manifest::Capsule(capsule)) => {
            let capsule_dir = file.parent().unwrap_or(std::path::Path::new("."));
            let local = murmur_manifest::check_local_artifacts(capsule, &file, &host_env);
            for (name, artifact) in local {
                diagnostics.extend(artifact.diagnostics);
                let entry = capsule.artifacts.iter().find(|entry| entry.name == name);
                if let (Some(own), Some(path)) =
                    (&artifact.manifest, entry.and_then(|e| e.path.as_ref()))
                {
                    let (dir, own_file) = murmur_manifest::local_paths(path, capsule_dir);
                    diagnostics.extend(source::check_component(own, &dir, &own_file));
                }
            }
            // Every credential a run would look for, where a run looks.
            let credentials = match crate::environment::user_credentials() {
                Ok((credentials, warnings)) => {
                    diagnostics.extend(warnings);
                    credentials
                }
                Err(unusable) => {
                    diagnostics.push(*unusable);
                    Default::default()
                }
            };
            diagnostics.extend(credentials::unresolved(
                capsule,
                &file,
                &host_env,
                &|name: &str| credentials.get(name),
                &crate::environment::credentials_file(),
            ));
            for entry in &capsule.artifacts {
                if entry.runtime != murmur_manifest::Runtime::Skill {
                    let mut listing = json!({"name": entry.name, "runtime": entry.runtime});
                    if let (Some(map), Ok(serde_json::Value::Object(held))) = (
                        listing.as_object_mut(),
                        serde_json::to_value(capsule.grants_of(entry)),
                    ) {
                        map.extend(held);
                    }
                    grants.push(listing);
                }
            }
            Some("capsule")
        }
        Some(Manifest::Artifact(artifact)) => {
            let dir = file.parent().unwrap_or(std::path::Path::new("."));
            diagnostics.extend(source::check_component(artifact, dir, &file));
            Some("artifact")
        }
        None => None,
    };
    let (errors, warnings) = render::counts(&diagnostics);
    if json {
        let mut report = json!({
            "file": file,
            "kind": kind,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": diagnostics,
        });
        if kind == Some("capsule") {
            report["grants"] = json!(grants);
        }
        println!("{}", render::json(&report));
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
