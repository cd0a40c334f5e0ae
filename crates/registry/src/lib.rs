//! Where an artifact's bytes come from.
//!
//! This crate promises that a component the runtime is handed is the one its artifact declares:
//!
//! - [`answer`]: what a registry answers: an artifact as it lists it, or why it could not.
//! - [`source`]: built from the artifact's own sources when it is missing or older than them.
//! - [`archive`]: an artifact packed into one reproducible archive whose sha256 is its identity,
//!   and unpacked with guards against paths out of it, links, special files and oversized
//!   contents.
//! - [`index`]: registries (a directory or an HTTP(S) index of name → version → url + sha256,
//!   or an OCI registry), bytes fetched within a size limit and verified against the index, and
//!   publishing into a directory registry.
//! - [`oci`]: artifacts as OCI artifacts in any OCI registry (`oci://HOST/NAMESPACE`), in the
//!   layout other Wasm tools read, pinned by their manifest's digest.
//! - [`install`]: a capsule's registry artifacts installed into its project store, verified
//!   against the registry and `murmur.lock`, all or nothing; and found again, unchanged, at run
//!   time.
//! - [`template`]: a new artifact's sources, from this repository's templates (`mur new`).
//!
//! `murmur.lock` itself is `murmur_manifest::lock`.

pub mod answer;
pub mod archive;
pub mod index;
pub mod install;
pub mod oci;
pub mod source;
pub mod template;

pub use source::{BuildError, LocalArtifact};

/// The lowercase hex sha256 of `bytes`: how Murmur names an archive, a component, an installed
/// file, and (in the trace) a prompt or an input it does not hold. The one place it is computed.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
