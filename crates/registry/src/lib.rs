//! Where an artifact's bytes come from.
//!
//! This crate promises that a component the runtime is handed is the one its artifact declares:
//! today, built from the artifact's own sources ([`source`]) when it is missing or older than
//! them; archives, registries and `murmur.lock` join here as they land.

pub mod source;

pub use source::{BuildError, LocalArtifact};
