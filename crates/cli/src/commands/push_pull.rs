//! `mur push REF [DIR] [--json]` and `mur pull REF [DIR] [--json]`: a whole capsule to and from
//! an OCI registry ([`murmur_registry::oci::capsule`]). Push builds the capsule's local
//! artifacts when stale, then pushes its manifest, lock, prompt files, component and local
//! artifacts as one image, tagged REF's tag (else the capsule's version); pull writes that tree
//! into DIR (new or empty), all or nothing. Registry artifacts travel as the lock's pins:
//! `mur install --locked` fetches them where the capsule is pulled.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use murmur_registry::index::RegistryError;
use murmur_registry::oci::capsule::{self, CapsuleReference};
use murmur_registry::source::{self, LocalArtifact};
use serde_json::json;

use crate::environment::{capsule_paths, host_env, registry_sources};
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct PushArgs {
    /// Where to: `oci://HOST[:PORT]/REPOSITORY[:TAG]` (the tag defaults to the capsule's version).
    reference: String,
    /// The capsule (a directory holding `murmur.yaml`, or the file). Default: the current
    /// directory.
    dir: Option<PathBuf>,
    /// Print what was pushed as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct PullArgs {
    /// What: `oci://HOST[:PORT]/REPOSITORY[:TAG]` (default tag `latest`) or `…@sha256:DIGEST`.
    reference: String,
    /// Where to write it: a new or empty directory. Default: the repository's last name, in the
    /// current directory.
    dir: Option<PathBuf>,
    /// Print what was pulled as JSON.
    #[arg(long)]
    json: bool,
}

/// The reference `given`, presenting the credentials bound to its registry's host.
fn reference(given: &str) -> Result<CapsuleReference, RegistryError> {
    CapsuleReference::parse(given)?.with_sources(&registry_sources(None))
}

/// The exit for a refusal: `3` when the registry cannot be reached, `2` for a reference that is
/// not one, `1` otherwise.
fn exit_for(error: &RegistryError) -> Exit {
    match error {
        RegistryError::Unreachable { .. } => Exit::Stopped,
        RegistryError::NotARegistry { .. } => Exit::BadInput,
        _ => Exit::Failed,
    }
}

pub fn push(args: PushArgs) -> Exit {
    let reference = match reference(&args.reference) {
        Ok(reference) => reference,
        Err(error) => return render::coded(args.json, &error, exit_for(&error)),
    };
    let (file, capsule_dir) = capsule_paths(args.dir.as_deref());
    let source = murmur_manifest::CapsuleSource::read(&file, &host_env);
    let has_errors = source.loaded.diagnostics.iter().any(|d| d.is_error());
    let (Some(text), Some(manifest), false) = (
        source.text.as_deref(),
        source.loaded.manifest.as_ref(),
        has_errors,
    ) else {
        if args.json {
            println!(
                "{}",
                render::json(&json!({ "diagnostics": source.loaded.diagnostics }))
            );
        } else {
            render::diagnostics_human(&source.loaded.diagnostics);
        }
        return Exit::BadInput;
    };
    // Local artifacts built when stale, as `mur run` would build them.
    let mut locals = Vec::new();
    for entry in &manifest.artifacts {
        if let Some(path) = &entry.path {
            match LocalArtifact::open(&capsule_dir.join(path), &host_env) {
                Ok(artifact) => locals.push(artifact),
                Err(error) => {
                    return crate::commands::build::report_error(&error, args.json, Exit::BadInput);
                }
            }
        }
    }
    let refs: Vec<&LocalArtifact> = locals.iter().collect();
    if let Err(error) = source::ensure_components(&refs) {
        return crate::commands::build::report_error(&error, args.json, Exit::Failed);
    }
    let pushed = capsule::capsule_files(&capsule_dir, text, manifest).and_then(|files| {
        capsule::push(&reference, &manifest.name, &manifest.version, &files)
            .map(|pushed| (pushed, files))
    });
    let (pushed, files) = match pushed {
        Ok(pushed) => pushed,
        Err(error) => return render::coded(args.json, &error, exit_for(&error)),
    };
    let titles: Vec<&str> = files.iter().map(|f| f.title.as_str()).collect();
    if args.json {
        println!(
            "{}",
            render::json(&json!({
                "reference": pushed.reference, "sha256": pushed.sha256, "bytes": pushed.bytes,
                "how": pushed.how, "files": titles,
            }))
        );
    } else {
        let verb = if pushed.how == "unchanged" {
            "already pushed"
        } else {
            "pushed"
        };
        println!(
            "{verb} capsule {} {} ({} files, {} bytes) to {}\n  sha256:{}",
            manifest.name,
            manifest.version,
            titles.len(),
            pushed.bytes,
            pushed.reference,
            pushed.sha256
        );
    }
    Exit::Ok
}

pub fn pull(args: PullArgs) -> Exit {
    let reference = match reference(&args.reference) {
        Ok(reference) => reference,
        Err(error) => return render::coded(args.json, &error, exit_for(&error)),
    };
    let dest = args.dir.clone().unwrap_or_else(|| {
        let path = args
            .reference
            .rsplit('/')
            .next()
            .unwrap_or("capsule")
            .split([':', '@'])
            .next()
            .unwrap_or("capsule");
        PathBuf::from(path)
    });
    let show = !args.json && std::io::stderr().is_terminal();
    let mut progress = |done: u64, total: Option<u64>| {
        if show && let Some(total) = total.filter(|t| *t > 0) {
            eprint!("\r  pulling: {}%   ", done * 100 / total);
            let _ = std::io::stderr().flush();
        }
    };
    let pulled = capsule::pull(&reference, &dest, &Default::default(), &mut progress);
    if show {
        eprint!("\r\x1b[K");
    }
    let pulled = match pulled {
        Ok(pulled) => pulled,
        Err(error) => return render::coded(args.json, &error, exit_for(&error)),
    };
    if args.json {
        println!(
            "{}",
            render::json(&json!({
                "reference": pulled.reference, "sha256": pulled.sha256,
                "dir": dest, "files": pulled.files,
            }))
        );
    } else {
        println!(
            "pulled {} into {} ({} files)",
            pulled.reference,
            dest.display(),
            pulled.files.len()
        );
        if pulled.files.iter().any(|f| f == "murmur.lock") {
            println!(
                "  next: `mur install --locked {}` fetches its registry artifacts as pinned",
                dest.display()
            );
        }
    }
    Exit::Ok
}
