//! One driver call, end to end: parse the request, POST the provider's body with retries,
//! decode the answer (streaming the deltas to the host), and build the tool result.

use crate::chunks;
use crate::tool::{ToolInput, ToolResult};

use super::held;
use super::http::{Reply, block_on, post_json_counting};
use super::provider::{DriverEnv, Provider, StreamDecoder};
use super::retry::{RetryPolicy, after_stream_error};
use super::sse::SseParser;
use super::types::{Delta, InferenceError, Outcome, parse_request};

/// Run one call of a driver whose wire format is `provider`, in the environment `env`
/// ([`DriverEnv::from_env`]): the whole `murmur:tool/run` of a first-party driver.
///
/// The request's `model` defaults to `MURMUR_INFERENCE_MODEL`; the URL is
/// `MURMUR_INFERENCE_ENDPOINT` + [`Provider::path`]; retries follow the config's
/// `max_retries`. With `stream: true` every text and thinking delta is emitted through
/// [`crate::chunks`] as it arrives; a stream that reports overload in-stream before any chunk
/// was emitted is asked for again within the same retry budget, and fails once a chunk was
/// emitted ([`super::retry::after_stream_error`]). Any failure is an `error` result in the
/// protocol's shape.
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
    let mut request = parse_request(input.data.as_deref())?;
    if request.model.is_empty() {
        request.model = env.model.clone().ok_or_else(|| {
            InferenceError::invalid_request(
                "the request names no model and MURMUR_INFERENCE_MODEL is not set",
            )
        })?;
    }
    let url = env.url(provider.path())?;
    let policy = RetryPolicy::from_config(&env.config)?;
    let (body, conversation) = match provider.messages_key() {
        Some(key) => {
            let (body, conversation) = held::body(provider, key, &mut request)?;
            (body, Some(conversation))
        }
        None => {
            let body = serde_json::to_vec(&provider.request_body(&request)?).map_err(|e| {
                InferenceError::invalid_request(format!("cannot serialize the request: {e}"))
            })?;
            (body, None)
        }
    };
    let mut outcome = answer(provider, &url, body, request.stream, &policy)?;
    if let Some(conversation) = conversation
        && outcome.continuation_id.is_none()
    {
        outcome.continuation_id = Some(held::keep(provider, conversation, &outcome.response)?);
    }
    Ok(outcome)
}

/// POSTs `body` to `url` under the retry `policy` and decodes the answer.
fn answer<P: Provider>(
    provider: &P,
    url: &str,
    body: Vec<u8>,
    stream_answer: bool,
    policy: &RetryPolicy,
) -> Result<Outcome, InferenceError> {
    let headers = provider.headers();
    block_on(async {
        let mut retries_done = 0;
        loop {
            let mut reply =
                post_json_counting(url, &headers, body.clone(), policy, &mut retries_done).await?;
            if !reply.is_success() {
                let status = reply.status;
                let bytes = reply.bytes().await.unwrap_or_default();
                return Err(provider.parse_error(status, &bytes));
            }
            if !stream_answer {
                return provider.parse_response(&reply.bytes().await?);
            }
            let mut emitted = false;
            let error = match stream(provider, &mut reply, &mut emitted).await {
                Ok(outcome) => return Ok(outcome),
                Err(error) => error,
            };
            let wait = after_stream_error(policy, retries_done, error.clone(), emitted)?;
            retries_done += 1;
            eprintln!(
                "murmur driver: in-stream {}; retry {retries_done} of {} in {:.1} s",
                error.summary(),
                policy.max_retries,
                wait.as_secs_f64()
            );
            drop(reply);
            wstd::task::sleep(wait.into()).await;
        }
    })
}

/// Decode one streamed answer, emitting every non-empty text and thinking delta through
/// [`crate::chunks`]; `emitted` turns true with the first one.
async fn stream<P: Provider>(
    provider: &P,
    reply: &mut Reply,
    emitted: &mut bool,
) -> Result<Outcome, InferenceError> {
    let mut decoder = provider.stream_decoder();
    let mut parser = SseParser::new();
    let mut sink = |delta: Delta<'_>| match delta {
        Delta::Text(text) if !text.is_empty() => {
            *emitted = true;
            chunks::emit(text)
        }
        Delta::Thinking(text) if !text.is_empty() => {
            *emitted = true;
            chunks::emit_thinking(text)
        }
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
}
