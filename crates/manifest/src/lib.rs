//! Murmur's manifests: the capsule's `murmur.yaml` and each artifact's own `murmur.yaml`.
//!
//! What this crate promises:
//!
//! - **Types** for the capsule manifest ([`CapsuleManifest`]) and artifact manifests
//!   ([`ArtifactManifest`]), every key typed, closed sets as enums, defaults applied.
//! - **Loading** from YAML ([`load()`], [`load_capsule`], [`load_artifact`], [`load_str`]), with
//!   `${NAME}` in string values taken from the environment, then from the `.env` beside the
//!   manifest (never exported into the process). Credential references are the exception (a
//!   gateway's `api_key`, an MCP server's headers, the door's and the peers' credentials):
//!   they are kept as written and resolved at staging.
//! - **Validation** that reports every problem as a [`Diagnostic`]: a stable code from the one
//!   table [`diagnostic::CODES`], a message, a hint, and the file, line and column where known.
//!   `E-` codes are errors and leave [`Loaded::manifest`] `None`; `W-` codes are warnings.
//! - Local artifacts (entries with `path:`) are loaded and checked against their entries by
//!   [`check_local_artifacts`].
//! - `murmur.lock` ([`lock`]): what `mur install` pinned, loaded strictly and written
//!   deterministically and atomically.
//! - The network allowlist's entries ([`network::NetworkRule`]) and the hook contract
//!   ([`hooks`]) are defined here, once, for the runtime to use.
//!
//! No wasmtime, no network, no I/O beyond reading files (the manifest, its `.env`, the lock, and
//! checking that the files it names exist) and writing `murmur.lock` when asked
//! ([`Lock::write`]). Never panics on any input.

mod capped;
#[macro_use]
mod closed_set;

pub mod artifact;
pub mod capsule;
mod capsule_spellings;
pub mod credentials;
pub mod diagnostic;
pub mod door;
mod fields;
pub mod hooks;
pub mod load;
mod local;
pub mod lock;
pub mod network;
mod source;

pub use artifact::{ArtifactManifest, Build, Runtime, UpstreamAuth};
pub use capsule::CapsuleManifest;
pub use diagnostic::{CODES, CodeInfo, Coded, Diagnostic, Severity};
pub use load::{
    CapsuleSource, MANIFEST_MAX_BYTES, load, load_artifact, load_capsule, load_str, merge_overlay,
    parse_yaml, place_in_file, variable,
};
pub use local::{check_local_artifacts, local_paths};
pub use lock::{Lock, LockedArtifact};
pub use network::NetworkRule;

/// A loaded manifest of either kind.
// Made once per file and rarely moved: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    Capsule(CapsuleManifest),
    Artifact(ArtifactManifest),
}

/// The result of a load: the manifest, unless a diagnostic is an error, and every diagnostic.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// `None` exactly when some diagnostic is an error.
    pub manifest: Option<T>,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Loaded<T> {
    /// Keeps `manifest` only if no diagnostic is an error.
    pub(crate) fn new(manifest: Option<T>, diagnostics: Vec<Diagnostic>) -> Loaded<T> {
        let manifest = if diagnostics.iter().any(Diagnostic::is_error) {
            None
        } else {
            manifest
        };
        Loaded {
            manifest,
            diagnostics,
        }
    }

    pub(crate) fn failed(diagnostics: Vec<Diagnostic>) -> Loaded<T> {
        Loaded::new(None, diagnostics)
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The manifest with its warnings, or every diagnostic when one is an error.
    pub fn into_result(self) -> Result<(T, Vec<Diagnostic>), Invalid> {
        match self.manifest {
            Some(manifest) => Ok((manifest, self.diagnostics)),
            None => Err(Invalid {
                diagnostics: self.diagnostics,
            }),
        }
    }
}

/// A manifest that did not load: its diagnostics, at least one an error.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the manifest has {} error(s){}",
    errors(diagnostics),
    first_error(diagnostics)
)]
pub struct Invalid {
    pub diagnostics: Vec<Diagnostic>,
}

fn errors(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|d| d.is_error()).count()
}

fn first_error(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .find(|d| d.is_error())
        .map(|d| format!("; the first: {}", d.message))
        .unwrap_or_default()
}
