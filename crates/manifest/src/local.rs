//! Local artifacts: the artifact entries of a capsule that carry `path:`.
//!
//! `path:` is relative to the capsule manifest's directory and names either the artifact's
//! directory (which holds its `murmur.yaml`) or that manifest file itself ([`local_paths`]).
//! [`check_local_artifacts`] loads the own manifest of each such entry of runtime tool, driver,
//! hook or skill, with its own diagnostics (in its own file), and adds what disagrees with the
//! capsule's entry, placed at the entry in the capsule's file (read again for the positions):
//!
//! - `E-MAN-016`: the path does not exist, or its directory has no `murmur.yaml`;
//! - `E-MAN-017`: the artifact's own `runtime`, `name` or `version` differs from the entry's.
//!
//! An entry of `runtime: capsule` is not an artifact manifest; load it with
//! [`crate::load_capsule`].

use std::path::{Path, PathBuf};

use crate::Loaded;
use crate::artifact::{ArtifactManifest, Runtime};
use crate::capsule::{ArtifactEntry, CapsuleManifest};
use crate::diagnostic::{Diagnostic, code};
use crate::fields::resolve_path;
use crate::load::{Env, MANIFEST_FILE, dir_of, load_artifact, place, source_map_of};

/// The artifact directory and manifest file an entry's `path:` names, relative to
/// `capsule_dir`, the capsule manifest's directory.
pub fn local_paths(path: &Path, capsule_dir: &Path) -> (PathBuf, PathBuf) {
    let target = resolve_path(capsule_dir, path);
    if target.is_file() {
        (dir_of(&target), target)
    } else {
        let file = target.join(MANIFEST_FILE);
        (target, file)
    }
}

/// For each artifact entry of `capsule` with `path:` (and a runtime other than `capsule`), in
/// entry order: the entry's name, and the artifact's own manifest loaded with its diagnostics
/// and the entry's disagreements with it (`manifest` is `None` when any is an error).
/// `capsule_file` is the capsule's manifest file; `env` answers `${NAME}` as in
/// [`crate::load()`]. The artifact's directory is [`local_paths`]`(path, capsule dir).0`.
pub fn check_local_artifacts(
    capsule: &CapsuleManifest,
    capsule_file: &Path,
    env: Env<'_>,
) -> Vec<(String, Loaded<ArtifactManifest>)> {
    let capsule_dir = dir_of(capsule_file);
    // Read only when a diagnostic needs placing in the capsule's file.
    let capsule_map = std::cell::OnceCell::new();
    let mut found = Vec::new();
    for (i, entry) in capsule.artifacts.iter().enumerate() {
        let Some(path) = &entry.path else {
            continue;
        };
        if entry.runtime == Runtime::Capsule {
            continue;
        }
        let (dir, manifest_file) = local_paths(path, &capsule_dir);
        let at_entry = |mut diagnostic: Diagnostic| {
            place(
                &mut diagnostic,
                capsule_file,
                capsule_map.get_or_init(|| source_map_of(capsule_file)),
            );
            diagnostic
        };
        let missing = if !dir.exists() {
            Some(format!("which does not exist ({})", dir.display()))
        } else if !manifest_file.is_file() {
            Some(format!("whose directory holds no {MANIFEST_FILE}"))
        } else {
            None
        };
        let loaded = match missing {
            Some(why) => Loaded::new(
                None,
                vec![at_entry(
                    Diagnostic::new(
                        code::E_MAN_016,
                        format!("artifact `{}` has `path: {}`, {why}", entry.name, path.display()),
                    )
                    .hint(format!(
                        "fix `path:` (relative to the capsule manifest's directory), or put the artifact's own {MANIFEST_FILE} (name, version, runtime) at {}",
                        dir.display()
                    ))
                    .at_path(format!("artifacts[{i}].path")),
                )],
            ),
            None => {
                let Loaded {
                    manifest,
                    mut diagnostics,
                } = load_artifact(&manifest_file, env);
                if let Some(own) = &manifest {
                    diagnostics.extend(
                        disagreements(entry, i, own, &manifest_file)
                            .into_iter()
                            .map(at_entry),
                    );
                }
                Loaded::new(manifest, diagnostics)
            }
        };
        found.push((entry.name.clone(), loaded));
    }
    found
}

/// `E-MAN-017` for each of `runtime`, `name`, `version` that the entry and the artifact's own
/// manifest disagree on.
fn disagreements(
    entry: &ArtifactEntry,
    index: usize,
    own: &ArtifactManifest,
    own_file: &Path,
) -> Vec<Diagnostic> {
    let pairs = [
        ("runtime", entry.runtime.as_str(), own.runtime.as_str()),
        ("name", entry.name.as_str(), own.name.as_str()),
        ("version", entry.version.as_str(), own.version.as_str()),
    ];
    pairs
        .into_iter()
        .filter(|(_, declared, actual)| declared != actual)
        .map(|(field, declared, actual)| {
            Diagnostic::new(
                code::E_MAN_017,
                format!(
                    "artifact `{}` is declared with `{field}: {declared}`, but its own manifest {} says `{field}: {actual}`",
                    entry.name,
                    own_file.display()
                ),
            )
            .hint(format!("make the two agree: change this entry's `{field}:` or the artifact's"))
            .at_path(format!("artifacts[{index}].{field}"))
        })
        .collect()
}
