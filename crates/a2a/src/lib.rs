//! The A2A (Agent2Agent) protocol, as Murmur's door and client speak it.
//!
//! What this crate promises:
//!
//! - **One model, two wire versions.** [`model`] holds tasks, messages, parts, artifacts,
//!   stream events, agent cards and request params once, whatever version carried them. The
//!   [`Wire`] trait writes each of them as A2A **1.0** JSON (ProtoJSON: camelCase,
//!   `TASK_STATE_INPUT_REQUIRED`, `ROLE_USER`, oneof wrappers such as `{"task": …}`) or A2A
//!   **0.3** JSON (`kind` discriminators, `input-required`, `user`, `final` on status updates),
//!   and reads them back. What we write validates against the version's published JSON schema
//!   (the copies in `schemas/`, checked by the tests).
//! - **Strict about requests, lenient about answers.** Request params must carry what the
//!   specifications require (a message with a `messageId`, a valid role, at least one part…);
//!   each problem is a JSON-RPC -32602 naming the field by its path (`message.parts[0].kind`),
//!   which A2A 1.0 clients also get as a `google.rpc.BadRequest` field violation. Results read
//!   from peers are taken as far as they make sense, since the specifications' own examples
//!   leave required ids out. Unknown fields are ignored, as both versions ask.
//! - **JSON-RPC 2.0 framing** ([`rpc`]): [`rpc::parse_request`] reads a request body and tells
//!   the version from the method name (`SendMessage` is 1.0, `message/send` is 0.3; that version
//!   is then used for the whole answer); [`rpc::Request::call`] reads the params for the method;
//!   [`rpc::success`], [`rpc::error`] and [`rpc::sse_event`] build what goes back. Batches are
//!   refused with -32600. [`sse::Decoder`] reads the SSE events of a streamed answer.
//! - **Every error code** of JSON-RPC and A2A ([`RpcError`], [`error::codes`]), A2A-specific
//!   ones with their `google.rpc.ErrorInfo` (`reason: "TASK_NOT_FOUND"`,
//!   `domain: "a2a-protocol.org"`).
//! - **No I/O, no HTTP, no clock.** Bytes and JSON values in, JSON values and strings out.
//!   [`time`] turns Unix milliseconds into the RFC 3339 timestamps both versions carry, and
//!   back. The one exception is opt-in: with the `client` feature, [`client`] calls a peer over
//!   HTTP (`murmur:message/send`, `mur send`).
//! - **Never panics**, on any input bytes or JSON value: every failure is a value, an
//!   [`RpcError`] with its JSON-RPC code or a [`FieldError`] naming the field (property-tested).
//!
//! What the versions cannot both say is documented where it happens: v0.3 has no media type
//! or filename on text and data parts and only object data; v1.0 has no `final` on status
//! updates and no `stateTransitionHistory` capability; `ListTasks` exists only in v1.0.

mod base64;
#[cfg(feature = "client")]
pub mod client;
pub mod error;
pub mod model;
pub mod rpc;
pub mod sse;
pub mod time;
mod version;
pub mod wire;

pub use error::{FieldError, RpcError};
pub use model::*;
pub use version::Version;
pub use wire::Wire;
