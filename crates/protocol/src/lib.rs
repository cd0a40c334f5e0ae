//! The types Murmur's host and its guest components exchange as JSON, defined once for both.
//!
//! What this crate promises:
//!
//! - **One definition, both sides.** The runtime and the guest SDK use these same types, so
//!   what the runtime writes is what a driver reads, field for field ([`inference`]).
//! - **Serde only.** No I/O and no host dependency: it builds for `wasm32-wasip2` as well as
//!   for the host.

pub mod inference;
