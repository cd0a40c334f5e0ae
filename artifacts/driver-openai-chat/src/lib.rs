//! `driver-openai-chat`: the OpenAI Chat Completions driver (`POST {endpoint}/v1/chat/completions`),
//! for OpenAI and the many servers that speak its wire format.
//!
//! One neutral inference request in, one provider call, one neutral response out, as
//! `docs/driver-protocol.md` says. The translation both ways is in [`wire`] (pure, tested on
//! the host); HTTP, retries and streaming come from `murmur_guest::inference`.
//!
//! Config (`inference.driver.config`, handed over as `MURMUR_ARTIFACT_CONFIG`):
//!
//! | key | meaning |
//! |---|---|
//! | `max_retries` | retries of a 429/5xx or a failed connection (default 3) |
//! | `reasoning_effort` | forwarded as `reasoning_effort` (`minimal`, `low`, `medium`, `high`) when set |

pub mod wire;

use murmur_guest::driver::{Driver, ToolInput, ToolResult};
use murmur_guest::inference;

struct OpenAiChatDriver;

impl Driver for OpenAiChatDriver {
    fn run(input: ToolInput) -> ToolResult {
        inference::run_from_env(&input, wire::OpenAiChat::from_env)
    }
}

murmur_guest::export_driver!(OpenAiChatDriver);
