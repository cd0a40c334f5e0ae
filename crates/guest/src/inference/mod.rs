//! Shared code for inference drivers (`docs/driver-protocol.md`): the neutral format, a
//! server-sent events parser, the retry rules, and (with the `http` feature) the HTTP transport
//! and a ready-made `run` that makes one driver call end to end.
//!
//! A driver implements [`Provider`] and [`StreamDecoder`] as pure functions (testable on the
//! host with [`decode_stream`]) and hands them to `run`:
//!
//! ```ignore
//! use murmur_guest::driver::{Driver, ToolInput, ToolResult};
//! use murmur_guest::inference;
//!
//! struct MyDriver;
//!
//! impl Driver for MyDriver {
//!     fn run(input: ToolInput) -> ToolResult {
//!         // MyProvider::from_env: fn(&DriverEnv) -> Result<MyProvider, InferenceError>
//!         inference::run_from_env(&input, MyProvider::from_env)
//!     }
//! }
//! murmur_guest::export_driver!(MyDriver);
//! ```
//!
//! The driver sends no credential: the host attaches it as the driver's `upstream_auth` says.

pub mod held;
pub mod provider;
pub mod retry;
pub mod sse;
pub mod types;

#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
mod run;

pub use provider::{
    DriverEnv, Provider, StreamDecoder, arguments_to_input, decode_stream, error_fields,
    input_to_arguments, parse_json, provider_error,
};
#[cfg(feature = "http")]
pub use run::{call, run, run_from_env};
pub use sse::{SseEvent, SseParser};
pub use types::{
    Block, Delta, InferenceError, Message, Outcome, Request, Response, StopReason, ToolSpec, Usage,
    joined_text, parse_request,
};
