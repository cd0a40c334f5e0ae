//! Murmur's Wasmtime embedding: how a component is compiled, linked and called, and what it
//! may touch while it runs.
//!
//! What this crate promises:
//!
//! - **One engine.** [`Engine`] holds the one `wasmtime::Engine` of a process, a linker per
//!   world, the epoch ticker that enforces call deadlines, and the on-disk cache of compiled
//!   components keyed by content hash.
//! - **Only what was granted.** A component sees the session workdir (preopened as `.`), the
//!   declared read-only paths (read-only), the environment [`grants::env`] composes, and outgoing
//!   `wasi:http` requests the network allowlist permits. Nothing else is linked or answered. Each
//!   grant is one module under [`grants`], with its own slice of the store.
//! - **Calls that end.** Every component call runs under a wall-clock deadline and a memory
//!   limit. Hitting either is reported as such ([`RuntimeError::Deadline`],
//!   [`RuntimeError::MemoryLimit`]), distinct from an ordinary trap, and never takes the
//!   process down.
//! - **The tool contract.** [`tool`] calls `murmur:tool/run` and applies its rules to what comes
//!   back: `data` verbatim, `data-path` resolved under the workdir by strict rules, reserved
//!   metadata keys read first-tuple-wins.
//!
//! Nothing here knows of sessions, the agent loop or hooks' dispatch: what a capability needs
//! from above is a trait the runtime implements ([`grants::tool_registry::CallTool`],
//! [`grants::tool_registry::LoadTool`], [`grants::hook::HookCall`]).

pub mod bindings;
pub mod capsule;
pub mod engine;
pub mod error;
pub mod grants;
pub mod limits;
pub mod reported;
pub mod tool;

pub use engine::{Engine, EngineConfig, LoadedComponent, RunWorld};
pub use error::RuntimeError;
pub use grants::Grants;
