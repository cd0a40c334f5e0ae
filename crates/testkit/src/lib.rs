//! Test helpers for black-box tests of `mur`.
//!
//! - [`RecordingServer`]: a real HTTP server on 127.0.0.1 that records every connection and
//!   request reaching it, so a test can prove that nothing arrived.
//! - [`Mur`]: runs the `mur` binary with a test's arguments and environment and captures what it
//!   printed and how it exited.
//! - [`door`]: a `mur run --serve` process and a small A2A client (JSON-RPC posts, SSE streams).
//! - [`registry`]: hand-made archives put into a directory registry, as a hostile one serves.
//!
//! Everything here listens on loopback only and stops when dropped.

pub mod a2a_schema;
pub mod door;
pub mod emulator;
mod mcp_python;
mod mur;
pub mod oci_registry;
pub mod otlp;
mod recording;
pub mod registry;

pub use emulator::{Emulator, Script};
pub use mcp_python::{McpPython, free_port, mcp_python};
pub use mur::{Mur, MurOutput, fixture_hook, replace_in, repo_root, shared_home};
pub use recording::{RecordedRequest, RecordingServer};
