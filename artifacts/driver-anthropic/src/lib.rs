//! `driver-anthropic`: the Anthropic Messages API driver (`POST {endpoint}/v1/messages`).
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
//! | `thinking` | `{budget_tokens: N}`: extended thinking with that budget (off when absent) |
//! | `prompt_caching` | `true`: mark cache breakpoints (`cache_control`) on the tools, the system prompt and the last message (default `false`) |
//! | `default_max_tokens` | the output cap when the request carries none (default 4096; the API requires one) |

pub mod wire;

use murmur_guest::driver::{Driver, ToolInput, ToolResult};
use murmur_guest::inference;

struct AnthropicDriver;

impl Driver for AnthropicDriver {
    fn run(input: ToolInput) -> ToolResult {
        inference::run_from_env(&input, wire::Anthropic::from_env)
    }
}

murmur_guest::export_driver!(AnthropicDriver);
