//! The Rust guest SDK for Murmur: write a tool, an inference driver or a hook in a few lines
//! and build it as a WebAssembly component for `wasm32-wasip2`.
//!
//! This page is about tools; see [`driver`] for drivers and [`hook`] for hooks.
//!
//! # The contract
//!
//! A tool is a component that exports one function, `murmur:tool/run@0.1.0#run`. The runtime
//! calls it once per tool call:
//!
//! - **What a tool gets**: a [`ToolInput`](tool::ToolInput). Its `data` is the JSON the model
//!   produced against the tool's `input_schema` (for a driver: the neutral inference request).
//!   It may be absent. `log_path` names a file, relative to the session workdir, that the tool
//!   may append a log to.
//! - **What a tool must return**: exactly one [`ToolResult`](tool::ToolResult): a `status`
//!   (`passed`, `failed` when the operation did not succeed, `error` when the tool itself broke),
//!   an optional one-line `summary` for people and traces, the result, whether the tool cut its
//!   own output (`truncated`), and a `metadata` list of key/value pairs.
//! - **The result travels one of two ways**. `data` is used verbatim, and when it is present
//!   `data-path` is never opened. For output too large to carry in `data`, write it to a file
//!   under the session workdir and return its name in `data-path`; the runtime reads it for the
//!   tool under strict rules: the name is relative to the workdir (the tool's own `.`), no
//!   absolute path, no `..`, no symlink anywhere on the way, a regular file of at most 10 MiB,
//!   and `%` escapes are decoded before any of that is checked.
//! - **Reserved metadata keys** ([`tool::CONTINUATION_ID`], [`tool::STATE_EFFECT`],
//!   [`tool::RESOURCE_ID`]): for each key the first pair wins. `state_effect` (`read` or
//!   `mutate`) and `resource_id` (an opaque string scoped by scheme, e.g. `file:notes.md`) tell
//!   `mur trace` which resource a call touched and how; `continuation_id` is for drivers.
//! - **What a tool sees**: only the session workdir (preopened as `.`) and any paths the
//!   capsule declared read-only; only the environment variables the runtime hands it (never a
//!   credential); outgoing HTTP only to hosts the capsule allows. It may stream text with
//!   [`chunks`], while an A2A task runs ask a human with [`task::request_input`], and send a
//!   task to a peer capsule the capsule allows with [`message::send`].
//!
//! The contract is the WIT in the repository's `wit/` folder, not this crate: a component
//! written in any language against that WIT runs the same way.
//!
//! # A tool in a few lines
//!
//! ```
//! use murmur_guest::tool::{StateEffect, Tool, ToolInput, ToolResult};
//!
//! #[derive(serde::Deserialize)]
//! struct Args {
//!     name: String,
//! }
//!
//! struct Greet;
//!
//! impl Tool for Greet {
//!     fn run(input: ToolInput) -> ToolResult {
//!         let args: Args = match input.json() {
//!             Ok(args) => args,
//!             Err(failed) => return failed,
//!         };
//!         ToolResult::passed(format!("hello, {}", args.name))
//!             .summary("greeted one person")
//!             .state_effect(StateEffect::Read)
//!             .resource_id(format!("person:{}", args.name))
//!     }
//! }
//!
//! murmur_guest::export_tool!(Greet);
//! ```
//!
//! Build it as a `cdylib` with `cargo build --release --target wasm32-wasip2`; the file in
//! `target/wasm32-wasip2/release/` is already a component.
//!
//! A component built with this SDK imports only the Murmur interfaces it actually calls:
//! unused imports are dropped when the component is assembled.

extern crate self as murmur_guest;

#[doc(hidden)]
pub mod bindings;

pub mod driver;
pub mod hook;
pub mod inference;
pub mod message;
pub mod tool;
pub mod workdir;

/// Stream text to the session while a tool or driver runs (the SSE stream of an A2A task,
/// `mur run --stream`).
///
/// These call the host: they work inside a component only (on any other target they panic).
pub mod chunks {
    use crate::bindings::murmur::text::chunks;

    /// Emit a chunk of response text.
    pub fn emit(text: &str) {
        chunks::emit_chunk(text);
    }

    /// Emit a chunk of thinking text.
    pub fn emit_thinking(text: &str) {
        chunks::emit_thinking_chunk(text);
    }
}

/// Human-in-the-loop for tools.
pub mod task {
    /// Pause at a decision boundary and wait for a reply: the A2A task moves to
    /// `input-required` with `prompt`, and the next message on that task is returned.
    ///
    /// Works only while the capsule runs an A2A task; anywhere else the host fails the call at
    /// once. When the capsule's `lifecycle.input_timeout_secs` passes, the component is aborted
    /// and the task fails. Only tools may call it: the `driver` world does not import it.
    ///
    /// This calls the host: it works inside a component only (on any other target it panics).
    pub fn request_input(prompt: &str) -> String {
        crate::bindings::murmur::task::task::request_input(prompt)
    }
}

/// Export a type implementing [`tool::Tool`] as this component's `murmur:tool/run` entrypoint.
///
/// Use it once per component, at the crate root of a `cdylib`:
/// `murmur_guest::export_tool!(MyTool);`.
#[macro_export]
macro_rules! export_tool {
    ($ty:ident) => {
        $crate::bindings::export_tool!($ty with_types_in $crate::bindings);
    };
}

/// Export a type implementing [`driver::Driver`] as this component's `murmur:tool/run`
/// entrypoint. See [`driver`] for what a driver may import.
#[macro_export]
macro_rules! export_driver {
    ($ty:ident) => {
        $crate::bindings::export_tool!($ty with_types_in $crate::bindings);
    };
}

/// Export a type implementing [`hook::Hook`] as this component's `murmur:hook/lifecycle`
/// handlers. See [`hook`] for the contract.
///
/// Use it once per component, at the crate root of a `cdylib`:
/// `murmur_guest::export_hook!(MyHook);`.
#[macro_export]
macro_rules! export_hook {
    ($ty:ident) => {
        $crate::hook::bindings::export_hook!($ty with_types_in $crate::hook::bindings);
    };
}

#[cfg(test)]
mod tests {
    /// The body of `world <name> { ... }` in `source`, one trimmed non-empty line each,
    /// comments dropped.
    fn world_body(source: &str, name: &str) -> Vec<String> {
        let start = source
            .find(&format!("world {name} {{"))
            .unwrap_or_else(|| panic!("no world {name}"));
        let body = &source[start..];
        let end = body.find('}').expect("world closes");
        body[..end]
            .lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(str::to_string)
            .collect()
    }

    /// `export_driver!` exports through the `tool` world's glue. That is sound only while the
    /// `driver` world is the `tool` world minus `murmur:task` (a component imports only what
    /// it calls, so a driver that never asks for input is a `driver`-world component).
    #[test]
    fn driver_world_is_the_tool_world_without_task() {
        let wit = include_str!("../../../wit/worlds.wit");
        let tool: Vec<String> = world_body(wit, "tool")
            .into_iter()
            .filter(|l| !l.contains("murmur:task/"))
            .collect();
        assert_eq!(world_body(wit, "driver"), tool);
    }
}
