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
//!
//! For a capsule, `mur check` also says, without running anything, how its native children
//! would be held on this host (`containment`): the class (the stronger of
//! `capabilities.containment` and `--containment`), each mechanism and whether it holds, and
//! per child (the shell, each MCP stdio server, the agent CLI) what it may execute, read and
//! reach, and its limits. A class this host cannot give is the error `E-CAP-020`, as a run
//! would be refused.

use std::path::PathBuf;

use murmur_manifest::capsule::{CapsuleManifest, Containment};
use murmur_manifest::network::NetworkRule;
use murmur_manifest::{Coded, Diagnostic, Manifest, credentials};
use murmur_registry::source;
use serde_json::json;

use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

pub fn run(path: Option<PathBuf>, json: bool, containment: Option<Containment>) -> Exit {
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let file = if path.is_dir() {
        path.join("murmur.yaml")
    } else {
        path
    };
    let loaded = murmur_manifest::load(&file, &host_env);
    let mut diagnostics = loaded.diagnostics.clone();
    let mut grants = Vec::new();
    let mut held = None;
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
            match explain_containment(capsule, containment) {
                Ok(explained) => held = Some(explained),
                Err(refused) => diagnostics.push(*refused),
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
            report["containment"] = held.clone().unwrap_or_default();
        }
        println!("{}", render::json(&report));
    } else {
        render::diagnostics_human(&diagnostics);
        if let Some(held) = &held {
            print_containment(held);
        }
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

/// How `capsule`'s native children would be held on this host, or why they cannot be.
fn explain_containment(
    capsule: &CapsuleManifest,
    operator: Option<Containment>,
) -> Result<serde_json::Value, Box<Diagnostic>> {
    use murmur_runtime::session::containment;
    let achieved = containment::achieve(capsule, operator).map_err(|missing| {
        Box::new(Diagnostic::new(missing.code(), missing.message()).hint(missing.hint()))
    })?;
    let path_var = host_env("PATH").unwrap_or_default();
    let capabilities = &capsule.capabilities;
    let limits = containment::limits(capsule);
    let child = |name: String, programs: &[String], network: &[NetworkRule]| {
        let resolved: Vec<PathBuf> = programs
            .iter()
            .filter_map(|p| murmur_confine::resolve(p, &path_var))
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        let (executables, runtimes) = murmur_confine::executables(&resolved, &path_var);
        json!({
            "child": name,
            "executes": executables,
            "reads": runtimes
                .into_iter()
                .chain(capabilities.filesystem.read_only_resolved())
                .chain(capabilities.shell.interpreter_runtime_resolved())
                .collect::<Vec<_>>(),
            "network": network.iter().map(NetworkRule::as_str).collect::<Vec<_>>(),
        })
    };
    let mut children = Vec::new();
    if !capabilities.shell.allow.is_empty() {
        children.push(child(
            "shell".to_string(),
            &capabilities.shell.allow,
            &capabilities.network.allow,
        ));
    }
    for entry in &capsule.artifacts {
        if let Some(command) = entry.server.as_ref().and_then(|s| s.command.as_ref()) {
            let grants = capsule.grants_of(entry);
            children.push(child(
                format!("mcp:{}", entry.name),
                std::slice::from_ref(command),
                &grants.network.allow,
            ));
        }
    }
    if let Some(command) = capsule.inference.as_ref().and_then(|i| i.command.as_ref()) {
        children.push(child(
            format!("cli:{command}"),
            std::slice::from_ref(command),
            &[],
        ));
    }
    Ok(json!({
        "asked": achieved.asked,
        "achieved": achieved.achieved,
        "mechanisms": achieved.mechanisms,
        "limits": limits,
        "children": children,
    }))
}

/// The human form of [`explain_containment`]'s answer.
fn print_containment(held: &serde_json::Value) {
    let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_string();
    println!(
        "containment: {} (asked: {})",
        text(&held["achieved"]),
        text(&held["asked"])
    );
    for mechanism in held["mechanisms"].as_array().into_iter().flatten() {
        println!(
            "  {:<13} {:<9} {}",
            text(&mechanism["name"]),
            text(&mechanism["state"]),
            render::line(&text(&mechanism["detail"]))
        );
    }
    let limits = &held["limits"];
    println!(
        "  limits: {} processes, {} bytes of memory, {} open files, files up to {} bytes{}",
        limits["max_processes"],
        limits["memory_bytes"],
        limits["open_files"],
        limits["file_size_bytes"],
        match limits["cpu_percent"].as_u64() {
            Some(percent) => format!(", {percent}% of a CPU"),
            None => String::new(),
        }
    );
    for child in held["children"].as_array().into_iter().flatten() {
        let count = |key: &str| child[key].as_array().map_or(0, Vec::len);
        let network: Vec<String> = child["network"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        println!(
            "  {}: executes {} files, reads {} directories, reaches {}",
            render::line(&text(&child["child"])),
            count("executes"),
            count("reads"),
            if network.is_empty() {
                "nothing".to_string()
            } else {
                render::line(&network.join(", ")).into_owned()
            }
        );
    }
}
