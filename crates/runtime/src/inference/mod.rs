//! Inference: the neutral message format, what the runtime sends a driver and how it reads the
//! answer (docs/driver-protocol.md), the prompt cache key, continuation, reported usage and the
//! runtime's own token estimate.
//!
//! What callers can rely on:
//!
//! - The stored history keeps the runtime's envelope keys (`id`, `source_id`, `produced_by`);
//!   the wire view a driver receives never carries them ([`neutral`]).
//! - A driver's answer is read strictly where it matters (`stop_reason`, `content`) and
//!   leniently where `docs/driver-protocol.md` says so: a malformed `usage` degrades to no
//!   report, member by member, and an absent number is never recorded as `0` ([`response`]).
//! - A driver is called one way, by the agent loop and by hooks alike ([`call`]).
//! - The `prompt_cache_key` is fixed for every turn of a task ([`cache_key`]); a held
//!   `continuation_id` is used only on the task's context it came from ([`continuation`]).
//! - Token counts are the runtime's own cl100k estimate ([`tokens`]); provider counts are
//!   recorded beside them and acted on by nothing.

pub mod cache_key;
pub mod call;
pub mod choices;
pub mod continuation;
pub mod model_limits;
pub mod neutral;
pub mod process;
pub mod request;
pub mod response;
pub mod spend;
pub mod tokens;
