//! The integration tests of `murmur-registry`, one test binary: one module a file.

mod archive_never_panics;
mod index;
mod index_never_panics;
mod pull;
