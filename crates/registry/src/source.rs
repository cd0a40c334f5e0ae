//! Building an artifact's component from its sources.
//!
//! An artifact directory holds its own `murmur.yaml` and the component file that manifest names
//! (`component:`, default `component.wasm`). When the manifest declares a `build:`, the
//! component can be made from source:
//!
//! - `build: { cargo: { package: P } }` runs
//!   `cargo build --release --target wasm32-wasip2 -p P` in the artifact directory and copies the
//!   `.wasm` file cargo reports into place. Each artifact is built by a cargo run of its own, so
//!   its bytes never depend on what was built beside it (cargo unifies features within a run).
//! - `build: { command: [program, args…] }` runs the command in the artifact directory; it must
//!   write the component file itself.
//!
//! What callers can rely on:
//!
//! - [`ensure_components`] builds only what is missing or older than a file of its artifact
//!   directory, so an unchanged checkout starts without running any build.
//! - The component file is replaced atomically: a reader never sees half a file, and concurrent
//!   builders each leave a whole one.
//! - The build's own output (cargo's progress and diagnostics, a command's stdout and stderr)
//!   goes to this process's stderr, so long work shows progress and this process's stdout holds
//!   only what it prints itself; a failure names the artifact and the command's exit status.
//! - An artifact without `build:` whose component is missing is an error naming the file.
//! - A capsule component (`world capsule`) is opened from its capsule manifest when that names
//!   a `component:` or a `build:`: it is then an artifact of `runtime: capsule`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use murmur_manifest::Coded;
use murmur_manifest::Loaded;
use murmur_manifest::artifact::{ArtifactManifest, Build};

/// The target every first-party component is built for.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// An artifact directory on disk and its manifest.
#[derive(Debug, Clone)]
pub struct LocalArtifact {
    pub dir: PathBuf,
    pub manifest_file: PathBuf,
    pub manifest: ArtifactManifest,
}

/// Opening or building an artifact failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The artifact's manifest has errors; they are in the diagnostics.
    #[error("the artifact manifest {} has errors", file.display())]
    Manifest {
        file: PathBuf,
        loaded: Box<Loaded<ArtifactManifest>>,
    },
    /// The component is missing and the manifest declares no way to build it.
    #[error("artifact `{artifact}` has no component at {} and declares no `build:`", path.display())]
    NoComponent { artifact: String, path: PathBuf },
    /// The build ran and failed, or could not run.
    #[error("building artifact `{artifact}` failed: {reason}")]
    Failed { artifact: String, reason: String },
}

impl Coded for BuildError {
    /// The stable diagnostic code.
    fn code(&self) -> &'static str {
        match self {
            BuildError::Manifest { .. } => "E-MAN-016",
            BuildError::NoComponent { .. } => "E-RUN-008",
            BuildError::Failed { .. } => "E-RUN-007",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    /// How to fix it.
    fn hint(&self) -> String {
        match self {
            BuildError::Manifest { .. } => "fix the diagnostics above, then run again".to_string(),
            BuildError::NoComponent { .. } => {
                "put the component file there, or add `build: { cargo: { package: <name> } }` \
                 (or `build: { command: [...] }`) to the artifact's murmur.yaml"
                    .to_string()
            }
            BuildError::Failed { .. } => format!(
                "read the build output above; a Rust component needs the target: `rustup target \
                 add {WASM_TARGET}`"
            ),
        }
    }
}

/// What [`ensure_components`] did for one artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOutcome {
    /// The component was there and no source was newer.
    Fresh,
    /// The component was built now.
    Built,
}

impl LocalArtifact {
    /// Opens the artifact at `path`: a directory holding `murmur.yaml`, or the yaml file itself.
    pub fn open(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LocalArtifact, BuildError> {
        let manifest_file = if path.is_dir() {
            path.join("murmur.yaml")
        } else {
            path.to_path_buf()
        };
        let dir = manifest_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let loaded = murmur_manifest::load_artifact(&manifest_file, env);
        let manifest = loaded
            .manifest
            .clone()
            .or_else(|| capsule_component(&manifest_file, env));
        match manifest {
            Some(manifest) => Ok(LocalArtifact {
                dir,
                manifest_file,
                manifest,
            }),
            None => Err(BuildError::Manifest {
                file: manifest_file,
                loaded: Box::new(loaded),
            }),
        }
    }

    /// The artifact whose manifest file `manifest_file` was already loaded as `manifest`.
    pub fn of_manifest(manifest_file: PathBuf, manifest: ArtifactManifest) -> LocalArtifact {
        let dir = manifest_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        LocalArtifact {
            dir,
            manifest_file,
            manifest,
        }
    }

    /// Where the component file is (or will be).
    pub fn component_path(&self) -> PathBuf {
        self.manifest.component_path(&self.dir)
    }

    /// Whether the component exists and no file of the artifact directory is newer (a skill,
    /// which has no component, always is).
    pub fn is_fresh(&self) -> bool {
        // A skill is its markdown: there is nothing to build.
        if self.manifest.runtime == murmur_manifest::Runtime::Skill {
            return true;
        }
        let component = self.component_path();
        let Ok(built) = std::fs::metadata(&component).and_then(|m| m.modified()) else {
            return false;
        };
        newest_source(&self.dir, &component).is_none_or(|newest| newest <= built)
    }
}

/// A capsule component (`world capsule`) is described by a capsule manifest that names its
/// component (`component:`) or how to build it (`build:`): opened, it is an artifact of
/// `runtime: capsule` with that name, version, description, component and build.
fn capsule_component(
    manifest_file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<ArtifactManifest> {
    let capsule = murmur_manifest::load_capsule(manifest_file, env).manifest?;
    if capsule.component.is_none() && capsule.build.is_none() {
        return None;
    }
    Some(ArtifactManifest {
        name: capsule.name,
        version: capsule.version,
        runtime: murmur_manifest::Runtime::Capsule,
        description: capsule.description,
        component: capsule.component,
        build: capsule.build,
        input_schema: None,
        upstream_auth: None,
        binding: None,
        execution_mode: Default::default(),
        commit_policy: Default::default(),
        skill: None,
    })
}

/// Builds every artifact of `artifacts` that is missing its component or is older than its
/// sources; the rest are left alone.
pub fn ensure_components(artifacts: &[&LocalArtifact]) -> Result<Vec<BuildOutcome>, BuildError> {
    let stale: Vec<&LocalArtifact> = artifacts
        .iter()
        .copied()
        .filter(|artifact| !artifact.is_fresh())
        .collect();
    build_components(&stale)?;
    Ok(artifacts
        .iter()
        .map(|artifact| {
            if stale.iter().any(|s| std::ptr::eq(*s, *artifact)) {
                BuildOutcome::Built
            } else {
                BuildOutcome::Fresh
            }
        })
        .collect())
}

/// Builds every artifact of `artifacts` from source, whatever its state (a skill has nothing
/// to build).
pub fn build_components(artifacts: &[&LocalArtifact]) -> Result<(), BuildError> {
    let mut cargo_builds: Vec<(&LocalArtifact, &str)> = Vec::new();
    for artifact in artifacts {
        if artifact.manifest.runtime == murmur_manifest::Runtime::Skill {
            continue;
        }
        match &artifact.manifest.build {
            Some(Build::Cargo { package }) => cargo_builds.push((artifact, package)),
            Some(Build::Command(command)) => run_command(artifact, command)?,
            None => {
                if !artifact.component_path().is_file() {
                    return Err(BuildError::NoComponent {
                        artifact: artifact.manifest.name.clone(),
                        path: artifact.component_path(),
                    });
                }
            }
        }
    }
    // One cargo run per artifact: cargo unifies the features of the packages one run builds, so
    // building artifacts together would make one's bytes depend on the others.
    for build in &cargo_builds {
        cargo_build(std::slice::from_ref(build))?;
    }
    Ok(())
}

/// One cargo run for the cargo-built artifacts given, then each `.wasm` copied into place.
fn cargo_build(builds: &[(&LocalArtifact, &str)]) -> Result<(), BuildError> {
    let names = builds
        .iter()
        .map(|(artifact, _)| artifact.manifest.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let failed = |reason: String| BuildError::Failed {
        artifact: names.clone(),
        reason,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--target", WASM_TARGET])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(&builds[0].0.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (_, package) in builds {
        command.args(["-p", package]);
    }
    let mut child = command
        .spawn()
        .map_err(|error| failed(format!("cargo could not be started: {error}")))?;
    let mut produced: Vec<(String, PathBuf)> = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(found) = wasm_artifact(&line) {
                produced.push(found);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|error| failed(format!("waiting for cargo: {error}")))?;
    if !status.success() {
        return Err(failed(format!("cargo exited with {status}")));
    }
    for (artifact, package) in builds {
        let wanted = crate_name(package);
        let Some((_, wasm)) = produced.iter().find(|(name, _)| *name == wanted) else {
            return Err(BuildError::Failed {
                artifact: artifact.manifest.name.clone(),
                reason: format!("cargo built no .wasm for package `{package}` (is it a `cdylib`?)"),
            });
        };
        replace_file(wasm, &artifact.component_path()).map_err(|error| BuildError::Failed {
            artifact: artifact.manifest.name.clone(),
            reason: format!(
                "copying {} to {}: {error}",
                wasm.display(),
                artifact.component_path().display()
            ),
        })?;
    }
    Ok(())
}

/// The (crate name, path) of a `.wasm` a cargo `compiler-artifact` message reports.
fn wasm_artifact(line: &str) -> Option<(String, PathBuf)> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    let name = message.get("target")?.get("name")?.as_str()?;
    let wasm = message
        .get("filenames")?
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))?;
    Some((crate_name(name), PathBuf::from(wasm)))
}

fn crate_name(package: &str) -> String {
    package.replace('-', "_")
}

fn run_command(artifact: &LocalArtifact, command: &[String]) -> Result<(), BuildError> {
    let failed = |reason: String| BuildError::Failed {
        artifact: artifact.manifest.name.clone(),
        reason,
    };
    let Some((program, args)) = command.split_first() else {
        return Err(failed("`build.command` is empty".to_string()));
    };
    let status = Command::new(program)
        .args(args)
        .current_dir(&artifact.dir)
        // Its progress is ours to show on stderr; stdout is kept for what `mur` prints
        // (`--json` there is parsed by scripts).
        .stdout(std::io::stderr())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|error| failed(format!("`{program}` could not be started: {error}")))?;
    if !status.success() {
        return Err(failed(format!(
            "`{}` exited with {status}",
            command.join(" ")
        )));
    }
    if !artifact.component_path().is_file() {
        return Err(failed(format!(
            "`{}` succeeded but wrote no {}",
            command.join(" "),
            artifact.component_path().display()
        )));
    }
    Ok(())
}

/// Copies `from` over `to` through a temporary file beside `to`, so `to` is always whole, and
/// readable by all as the sources beside it are (a temporary file is its owner's alone: a
/// component built by one user would otherwise not load for another).
fn replace_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = to.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::copy(&mut std::fs::File::open(from)?, temp.as_file_mut())?;
    temp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    temp.persist(to).map_err(|error| error.error)?;
    Ok(())
}

/// The newest modification time of a source file under `dir`: every file but the component
/// itself, skipping `target/` and hidden entries.
fn newest_source(dir: &Path, component: &Path) -> Option<SystemTime> {
    let mut newest: Option<SystemTime> = None;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') || name == "target" || path == component {
                continue;
            }
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                pending.push(path);
            } else if let Ok(modified) = entry.metadata().and_then(|m| m.modified()) {
                newest = Some(newest.map_or(modified, |n| n.max(modified)));
            }
        }
    }
    newest
}

/// The interface an artifact of `runtime` must export: its world's entry point.
fn world_export(runtime: murmur_manifest::Runtime) -> Option<(&'static str, &'static str)> {
    use murmur_manifest::Runtime;
    match runtime {
        Runtime::Tool => Some(("tool", "murmur:tool/run@0.1.0")),
        Runtime::Driver => Some(("driver", "murmur:tool/run@0.1.0")),
        Runtime::Hook => Some(("hook", "murmur:hook/lifecycle@0.1.0")),
        Runtime::Capsule => Some(("capsule", "murmur:capsule/run@0.1.0")),
        _ => None,
    }
}

/// What `mur check` says of an artifact's component file, without compiling it:
///
/// - missing: `E-MAN-023` when the manifest declares no `build:`, else `W-MAN-030` (the next
///   build makes it);
/// - present: `E-MAN-031` unless it is a WebAssembly component (a core module, or bytes that do
///   not parse as one, are named) that exports its world's interface (`murmur:tool/run@0.1.0`
///   for a tool or driver, `murmur:hook/lifecycle@0.1.0` for a hook, `murmur:capsule/run@0.1.0`
///   for a capsule component), its exports listed when it does not.
///
/// Each diagnostic points at `component:` in `manifest_file`. Skills and MCP servers have no
/// component and get none.
pub fn check_component(
    manifest: &ArtifactManifest,
    dir: &Path,
    manifest_file: &Path,
) -> Vec<murmur_manifest::Diagnostic> {
    let Some((world, export)) = world_export(manifest.runtime) else {
        return Vec::new();
    };
    let path = manifest.component_path(dir);
    let mut found = component_problems(manifest, &path, world, export);
    for diagnostic in &mut found {
        diagnostic.path = Some("component".to_string());
    }
    murmur_manifest::place_in_file(&mut found, manifest_file);
    found
}

fn component_problems(
    manifest: &ArtifactManifest,
    path: &Path,
    world: &str,
    export: &str,
) -> Vec<murmur_manifest::Diagnostic> {
    use murmur_manifest::Diagnostic;
    use murmur_manifest::diagnostic::code;
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return vec![if manifest.build.is_some() {
                Diagnostic::new(
                    code::W_MAN_030,
                    format!("the component {} is not built yet", path.display()),
                )
                .hint("`mur build --no-pack DIR` builds it (so does the first run or invoke)")
            } else {
                Diagnostic::new(
                    code::E_MAN_023,
                    format!(
                        "the component {} does not exist, and the manifest declares no `build:`",
                        path.display()
                    ),
                )
                .hint("put the component there, fix `component:`, or declare a `build:` that makes it")
            }];
        }
        Err(error) => {
            return vec![
                Diagnostic::new(
                    code::E_MAN_023,
                    format!("the component {} cannot be read: {error}", path.display()),
                )
                .hint("make it a readable file"),
            ];
        }
    };
    let not_ours = |why: String| {
        vec![Diagnostic::new(code::E_MAN_031, format!("{} {why}", path.display())).hint(format!(
            "build it as a component of the `{world}` world of wit/worlds.wit (for Rust: target wasm32-wasip2; see docs/tools.md)"
        ))]
    };
    if !bytes.starts_with(b"\0asm") {
        return not_ours(
            "is not WebAssembly (it does not begin with the `\\0asm` magic)".to_string(),
        );
    }
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        match payload {
            Ok(wasmparser::Payload::Version { encoding, .. }) => {
                depth += 1;
                if depth == 1 && encoding == wasmparser::Encoding::Module {
                    return not_ours("is a core WebAssembly module, not a component".to_string());
                }
            }
            Ok(wasmparser::Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(wasmparser::Payload::ComponentExportSection(section)) if depth == 1 => {
                for export in section.into_iter().flatten() {
                    exports.push(export.name.name.to_string());
                }
            }
            Ok(_) => {}
            Err(error) => {
                return not_ours(format!(
                    "is not a WebAssembly component: {}",
                    error.message()
                ));
            }
        }
    }
    if exports.iter().any(|name| name == export) {
        return Vec::new();
    }
    let listed = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    not_ours(format!(
        "does not export `{export}`, the entry point of the `{world}` world (it exports {listed})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_messages_name_the_wasm_they_produced() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///x/artifacts/read-file#0.1.0","target":{"kind":["cdylib"],"name":"read_file"},"filenames":["/x/target/wasm32-wasip2/release/read_file.wasm"]}"#;
        assert_eq!(
            wasm_artifact(line),
            Some((
                "read_file".to_string(),
                PathBuf::from("/x/target/wasm32-wasip2/release/read_file.wasm")
            ))
        );
        let rlib = r#"{"reason":"compiler-artifact","target":{"name":"serde"},"filenames":["/x/libserde.rlib"]}"#;
        assert_eq!(wasm_artifact(rlib), None);
        assert_eq!(wasm_artifact("not json"), None);
    }

    #[test]
    fn a_source_newer_than_the_component_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let component = dir.path().join("component.wasm");
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
        std::fs::write(dir.path().join("target/ignored"), "").unwrap();
        std::fs::write(&component, "").unwrap();
        let source_time = std::fs::metadata(dir.path().join("src/lib.rs"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(newest_source(dir.path(), &component), Some(source_time));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any bytes at `component:`, WebAssembly-looking or not, are judged without a panic.
        #[test]
        fn any_component_bytes_are_judged_without_panic(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            magic in proptest::prelude::any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut bytes = if magic { b"\0asm\x0d\0\x01\0".to_vec() } else { Vec::new() };
            bytes.extend(body);
            std::fs::write(dir.path().join("c.wasm"), &bytes).unwrap();
            let manifest_file = dir.path().join("murmur.yaml");
            std::fs::write(&manifest_file, "name: t\nversion: 0.1.0\nruntime: tool\ncomponent: c.wasm\n").unwrap();
            let loaded = murmur_manifest::load_artifact(&manifest_file, &|_: &str| None);
            let manifest = loaded.manifest.unwrap();
            let found = check_component(&manifest, dir.path(), &manifest_file);
            proptest::prop_assert_eq!(found.len(), 1);
            proptest::prop_assert_eq!(found[0].code, murmur_manifest::diagnostic::code::E_MAN_031);
        }
    }
}
