//! `driver-openai-responses`: the OpenAI Responses API driver (`POST {endpoint}/v1/responses`).
//!
//! One neutral inference request in, one provider call, one neutral response out, as
//! `docs/driver-protocol.md` says. The translation both ways is in [`wire`] (pure, tested on
//! the host); HTTP, retries and streaming come from `murmur_guest::inference`.
//!
//! With `store` on (the default) the provider keeps each response, so the driver returns its
//! `id` as the `continuation_id`; the runtime then sends only the new messages, which go out
//! with `previous_response_id`.
//!
//! Config (`inference.driver.config`, handed over as `MURMUR_ARTIFACT_CONFIG`):
//!
//! | key | meaning |
//! |---|---|
//! | `max_retries` | retries of a 429/5xx or a failed connection (default 3) |
//! | `store` | let the provider store responses and continue from them (default `true`) |
//! | `reasoning` | forwarded as `reasoning`, e.g. `{effort: low, summary: auto}` |
//! | `include` | forwarded as `include`, e.g. `[reasoning.encrypted_content]` (lets reasoning travel back with `store: false`) |

pub mod wire;

use murmur_guest::driver::{Driver, ToolInput, ToolResult};
use murmur_guest::inference;

struct OpenAiResponsesDriver;

impl Driver for OpenAiResponsesDriver {
    fn run(input: ToolInput) -> ToolResult {
        inference::run_from_env(&input, wire::OpenAiResponses::from_env)
    }
}

murmur_guest::export_driver!(OpenAiResponsesDriver);
