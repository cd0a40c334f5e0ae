//! One driver call, end to end: parse the request, POST the provider's body with retries,
//! decode the answer (streaming the deltas to the host), and build the tool result.

use crate::chunks;
use crate::tool::{ToolInput, ToolResult};

use super::http::{block_on, post_json};
use super::provider::{DriverEnv, Provider, StreamDecoder};
use super::retry::RetryPolicy;
use super::sse::SseParser;
use super::types::{Delta, InferenceError, Outcome, Request};

/// Run one call of a driver whose wire format is `provider`, in the environment `env`
/// ([`DriverEnv::from_env`]): the whole `murmur:tool/run` of a first-party driver.
///
/// The request's `model` defaults to `MURMUR_INFERENCE_MODEL`; the URL is
/// `MURMUR_INFERENCE_ENDPOINT` + [`Provider::path`]; retries follow the config's
/// `max_retries`. With `stream: true` every text and thinking delta is emitted through
/// [`crate::chunks`] as it arrives. Any failure is an `error` result in the protocol's shape.
pub fn run<P: Provider>(provider: &P, env: &DriverEnv, input: &ToolInput) -> ToolResult {
    match call(provider, env, input) {
        Ok(outcome) => outcome.into_result(),
        Err(error) => error.into_result(),
    }
}

/// [`run`] in the process environment, with the provider `make` builds from it (typically
/// from its config): `inference::run_from_env(&input, MyProvider::from_env)`.
pub fn run_from_env<P: Provider>(
    input: &ToolInput,
    make: impl FnOnce(&DriverEnv) -> Result<P, InferenceError>,
) -> ToolResult {
    let env = match DriverEnv::from_env() {
        Ok(env) => env,
        Err(error) => return error.into_result(),
    };
    match make(&env) {
        Ok(provider) => run(&provider, &env, input),
        Err(error) => error.into_result(),
    }
}

/// [`run`] without the conversion to a tool result.
pub fn call<P: Provider>(
    provider: &P,
    env: &DriverEnv,
    input: &ToolInput,
) -> Result<Outcome, InferenceError> {
    let mut request = Request::parse(input.data.as_deref())?;
    if request.model.is_empty() {
        request.model = env.model.clone().ok_or_else(|| {
            InferenceError::invalid_request(
                "the request names no model and MURMUR_INFERENCE_MODEL is not set",
            )
        })?;
    }
    let url = env.url(provider.path())?;
    let policy = RetryPolicy::from_config(&env.config)?;
    let body = serde_json::to_vec(&provider.request_body(&request)?).map_err(|e| {
        InferenceError::invalid_request(format!("cannot serialize the request: {e}"))
    })?;
    let headers = provider.headers();
    block_on(async {
        let mut reply = post_json(&url, &headers, body, &policy).await?;
        if !reply.is_success() {
            let status = reply.status;
            let bytes = reply.bytes().await.unwrap_or_default();
            return Err(provider.parse_error(status, &bytes));
        }
        if !request.stream {
            return provider.parse_response(&reply.bytes().await?);
        }
        let mut decoder = provider.stream_decoder();
        let mut parser = SseParser::new();
        let mut sink = |delta: Delta<'_>| match delta {
            Delta::Text(text) if !text.is_empty() => chunks::emit(text),
            Delta::Thinking(text) if !text.is_empty() => chunks::emit_thinking(text),
            _ => {}
        };
        while let Some(chunk) = reply.chunk().await? {
            for event in parser.push(&chunk) {
                decoder.on_event(&event, &mut sink)?;
            }
        }
        parser
            .finish()
            .map_err(|e| InferenceError::stream(e.to_string()))?;
        decoder.finish()
    })
}
