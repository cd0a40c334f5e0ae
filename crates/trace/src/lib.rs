//! The session trace: `trace.jsonl`, one JSON object a line, the source of truth of what a
//! session did.
//!
//! What it promises:
//!
//! - Every event carries `event_type`, `session_id`, `timestamp` (Unix ms), `event_id` and
//!   `parent_id`; parents form the tree session → task → turn (inference) → tool call. The
//!   event types and their fields are defined once, in [`schema`].
//! - Each line is written and flushed as the event happens, so a session that dies leaves every
//!   line it wrote whole.
//! - The totals of `session_end` are summed by the writer from the lines it wrote, so they
//!   equal the sums of the per-event lines by construction.
//! - A write that fails is an error to the caller: the session ends rather than going on
//!   unobserved.
//! - Reading a trace back ([`analysis`]: `mur trace`'s summary, tree, diff and checks) needs
//!   this crate alone, not the runtime or Wasmtime.
//! - With the `otel` feature, [`otel`] hands every written event to an OTLP/HTTP exporter as a
//!   span; without it the crate has no network code.

pub mod analysis;
pub mod context;
#[cfg(feature = "otel")]
pub mod otel;
pub mod schema;
pub mod time;
mod writer;

pub use schema::{Event, EventBody, Totals};
pub use writer::{Trace, TraceWriter, new_event_id};
