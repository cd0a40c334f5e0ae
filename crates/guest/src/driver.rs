//! Inference drivers: the `murmur:worlds/driver@0.1.0` world.
//!
//! A driver exports the same `murmur:tool/run` entrypoint as a tool: one neutral inference
//! request arrives in [`ToolInput::data`], the driver makes one provider call, and one neutral
//! response goes back in [`ToolResult::data`] (with a `continuation_id` in the metadata when it
//! holds conversation state provider-side, see [`ToolResult::continuation_id`]). It may stream
//! text and thinking deltas with [`crate::chunks`].
//!
//! The driver world imports only `murmur:text/chunks`: a driver must not call
//! [`crate::task::request_input`]. The runtime learns what a component imports from the
//! component itself, and a component built with this SDK imports only what it calls, so a
//! driver that sticks to [`crate::chunks`] is exactly a `driver`-world component.
//!
//! ```
//! use murmur_guest::driver::{Driver, ToolInput, ToolResult};
//!
//! struct Echo;
//!
//! impl Driver for Echo {
//!     fn run(input: ToolInput) -> ToolResult {
//!         let request = input.data.unwrap_or_default();
//!         murmur_guest::chunks::emit("thinking done");
//!         ToolResult::passed(request).summary("echoed the request")
//!     }
//! }
//!
//! murmur_guest::export_driver!(Echo);
//! ```
//!
//! (Why not bindings of their own: both worlds export the same interface, and `wit-bindgen`
//! names the exported interface's glue after the interface, so one crate can carry it once.
//! The glue and types are shared, which also gives drivers every [`ToolResult`] helper.)

pub use crate::tool::{Status, Tool as Driver, ToolInput, ToolResult};
