//! The Murmur capsule runtime: sessions of a capsule, on top of the Wasmtime embedding of
//! `murmur_host`.
//!
//! What this crate promises:
//!
//! - **Staged once, then run.** [`session::staging`] resolves a capsule's artifacts once (local
//!   ones built when stale, registry ones only as `murmur.lock` pins them), compiles and links
//!   each, and builds every component's grants from the manifest once, before the first turn.
//! - **The agent loop.** [`session`] runs tasks turn by turn: one driver call per turn
//!   ([`inference`]), the model's tool calls dispatched to WASM tools, skills, the shell and
//!   `switch-driver`, compaction when the conversation outgrows the model, and a full trace.
//! - **Hooks** ([`hooks`]): each lifecycle event dispatched to the hooks that hear it, their
//!   decisions honored as the hook contract says, their imports answered by the session.
//! - **Capsule components** ([`session::capsule`]): a capsule that names a component of world
//!   `capsule` runs it once, as one session.
//!
//! The engine, the grants and the tool contract are `murmur_host`'s, re-exported here
//! ([`engine`], [`grants`], [`tool`], [`capsule`]). The runtime does not print: progress and
//! results go back to the caller as values.

pub mod hooks;
pub mod inference;
pub mod session;

use murmur_host::bindings;
pub use murmur_host::{
    Engine, EngineConfig, Grants, LoadedComponent, RunWorld, RuntimeError, capsule, engine, error,
    grants, tool,
};
