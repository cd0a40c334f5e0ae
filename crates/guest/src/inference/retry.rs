//! When to try a provider call again, and how long to wait first (the protocol's "Retries").
//!
//! 429 and 5xx answers, and a connection that fails before any response byte, are retried
//! with exponential backoff (1 s, 2 s, 4 s …, at most 30 s a wait), honouring `retry-after`
//! (seconds, capped at 30 s), at most `max_retries` times. Anything else is final.
//!
//! A streamed answer that began (`200`) and then reports overload in-stream (Anthropic's
//! `event: error` with `overloaded_error` or `api_error`, OpenAI's in-stream `server_error`)
//! is retried the same way, with the same backoff and within the same budget, as long as
//! nothing of it reached the caller (no text or thinking chunk was emitted). Once a chunk
//! was emitted the call fails, and its error says that it was not retried and why
//! ([`after_stream_error`]).

use std::time::Duration;

use serde_json::Value;

use super::types::InferenceError;

/// The longest wait between two attempts.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// Retries when the config says nothing.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// How many times to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so at most `max_retries + 1` attempts).
    pub max_retries: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }
}

impl RetryPolicy {
    /// The policy of a driver config (`MURMUR_ARTIFACT_CONFIG`): its `max_retries`, a
    /// non-negative integer, default 3. A config that is not an object, or a `max_retries`
    /// of another kind, is an error.
    pub fn from_config(config: &Value) -> Result<RetryPolicy, InferenceError> {
        let max = match config {
            Value::Null => None,
            Value::Object(map) => map.get("max_retries").filter(|v| !v.is_null()),
            _ => {
                return Err(InferenceError::invalid_request(
                    "the driver config is not an object",
                ));
            }
        };
        match max {
            None => Ok(RetryPolicy::default()),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(|max_retries| RetryPolicy { max_retries })
                .ok_or_else(|| {
                    InferenceError::invalid_request(format!(
                        "config `max_retries` must be a non-negative integer, not {v}"
                    ))
                }),
        }
    }
}

/// What one attempt gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt<'a> {
    /// The provider answered with `status`, and this `retry-after` header if it sent one.
    Answered {
        /// The HTTP status.
        status: u16,
        /// The `retry-after` header's value.
        retry_after: Option<&'a str>,
    },
    /// The connection failed before any response byte.
    ConnectFailed,
    /// A streamed answer reported overload in-stream before anything reached the caller.
    StreamOverloaded,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep this attempt's outcome (a success, a final error, or retries exhausted).
    Done,
    /// Wait this long, then try again.
    Retry(Duration),
}

/// Whether an HTTP status is worth another attempt: 429 and 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The wait before retry number `retries_done + 1` when the provider gave no `retry-after`:
/// 1 s, 2 s, 4 s …, at most [`MAX_WAIT`].
pub fn backoff(retries_done: u32) -> Duration {
    let secs = 1u64.checked_shl(retries_done).unwrap_or(u64::MAX);
    Duration::from_secs(secs).min(MAX_WAIT)
}

/// A `retry-after` header as a wait: a non-negative number of seconds (fractions allowed),
/// capped at [`MAX_WAIT`]. An HTTP date, or anything else, gives `None`.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_WAIT));
    }
    let secs: f64 = value.parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(secs.min(MAX_WAIT.as_secs_f64())))
}

/// What to do after `attempt`, when `retries_done` retries were already made.
pub fn decide(policy: &RetryPolicy, retries_done: u32, attempt: Attempt<'_>) -> Decision {
    let retry_after = match attempt {
        Attempt::Answered {
            status,
            retry_after,
        } => {
            if !is_retryable_status(status) {
                return Decision::Done;
            }
            retry_after.and_then(parse_retry_after)
        }
        Attempt::ConnectFailed | Attempt::StreamOverloaded => None,
    };
    if retries_done >= policy.max_retries {
        return Decision::Done;
    }
    Decision::Retry(retry_after.unwrap_or_else(|| backoff(retries_done)))
}

/// Whether an in-stream error's `type` (or `code`) says the provider is overloaded or failed
/// on its side, as a 529 or 5xx would: Anthropic `overloaded_error` and `api_error`, OpenAI
/// `server_error`.
pub fn is_overload_kind(kind: &str) -> bool {
    matches!(kind, "overloaded_error" | "api_error" | "server_error")
}

/// What to do when a stream ended in `error` after `retries_done` retries, when
/// `emitted_to_caller` tells whether a text or thinking chunk of it was emitted already.
///
/// An overload before any chunk is retried as [`Attempt::StreamOverloaded`]; after a chunk it
/// is final, and `error`'s message says so (the caller saw part of an answer that will not be
/// finished). Any other error is final as it is.
pub fn after_stream_error(
    policy: &RetryPolicy,
    retries_done: u32,
    error: InferenceError,
    emitted_to_caller: bool,
) -> Result<std::time::Duration, InferenceError> {
    if error.status.is_some() || !error.kind.as_deref().is_some_and(is_overload_kind) {
        return Err(error);
    }
    if emitted_to_caller {
        let mut error = error;
        error.message = format!(
            "{} (in-stream, after part of the answer reached the caller: not retried)",
            error.message
        );
        return Err(error);
    }
    match decide(policy, retries_done, Attempt::StreamOverloaded) {
        Decision::Retry(wait) => Ok(wait),
        Decision::Done => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answered(status: u16) -> Attempt<'static> {
        Attempt::Answered {
            status,
            retry_after: None,
        }
    }

    #[test]
    fn success_and_plain_4xx_are_final() {
        let p = RetryPolicy::default();
        for status in [200, 201, 204, 301, 400, 401, 403, 404, 413, 422] {
            assert_eq!(decide(&p, 0, answered(status)), Decision::Done, "{status}");
        }
    }

    #[test]
    fn rate_limits_server_errors_and_connect_failures_back_off() {
        let p = RetryPolicy::default();
        for attempt in [
            answered(429),
            answered(500),
            answered(529),
            Attempt::ConnectFailed,
        ] {
            assert_eq!(
                decide(&p, 0, attempt),
                Decision::Retry(Duration::from_secs(1))
            );
            assert_eq!(
                decide(&p, 1, attempt),
                Decision::Retry(Duration::from_secs(2))
            );
            assert_eq!(
                decide(&p, 2, attempt),
                Decision::Retry(Duration::from_secs(4))
            );
            assert_eq!(decide(&p, 3, attempt), Decision::Done);
        }
    }

    #[test]
    fn backoff_is_capped() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(16));
        assert_eq!(backoff(5), MAX_WAIT);
        assert_eq!(backoff(63), MAX_WAIT);
        assert_eq!(backoff(64), MAX_WAIT);
        assert_eq!(backoff(u32::MAX), MAX_WAIT);
        let p = RetryPolicy { max_retries: 10 };
        assert_eq!(decide(&p, 7, answered(503)), Decision::Retry(MAX_WAIT));
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        let with = |v| Attempt::Answered {
            status: 429,
            retry_after: Some(v),
        };
        assert_eq!(
            decide(&p, 0, with("7")),
            Decision::Retry(Duration::from_secs(7))
        );
        assert_eq!(decide(&p, 2, with(" 0 ")), Decision::Retry(Duration::ZERO));
        assert_eq!(
            decide(&p, 0, with("1.5")),
            Decision::Retry(Duration::from_millis(1500))
        );
        assert_eq!(decide(&p, 0, with("120")), Decision::Retry(MAX_WAIT));
        assert_eq!(decide(&p, 0, with("1e9")), Decision::Retry(MAX_WAIT));
        // Not seconds: the backoff applies.
        for v in ["Wed, 21 Oct 2015 07:28:00 GMT", "-1", "soon", "NaN", "inf"] {
            assert_eq!(
                decide(&p, 1, with(v)),
                Decision::Retry(Duration::from_secs(2)),
                "{v}"
            );
        }
        // Exhausted: no wait, whatever the header says.
        assert_eq!(decide(&p, 3, with("1")), Decision::Done);
        // Ignored on a final status.
        let final_status = Attempt::Answered {
            status: 400,
            retry_after: Some("1"),
        };
        assert_eq!(decide(&p, 0, final_status), Decision::Done);
    }

    fn overloaded() -> InferenceError {
        InferenceError::other("overloaded_error", "Overloaded")
    }

    #[test]
    fn an_in_stream_overload_before_any_chunk_backs_off_like_a_529() {
        let p = RetryPolicy::default();
        for kind in ["overloaded_error", "api_error", "server_error"] {
            let e = InferenceError::other(kind, "busy");
            assert_eq!(
                after_stream_error(&p, 0, e.clone(), false),
                Ok(Duration::from_secs(1)),
                "{kind}"
            );
            assert_eq!(
                after_stream_error(&p, 2, e.clone(), false),
                Ok(Duration::from_secs(4))
            );
            // The same budget as HTTP retries: exhausted, the error is the stream's own.
            assert_eq!(after_stream_error(&p, 3, e.clone(), false), Err(e));
        }
        let none = RetryPolicy { max_retries: 0 };
        assert_eq!(
            after_stream_error(&none, 0, overloaded(), false),
            Err(overloaded())
        );
    }

    #[test]
    fn an_in_stream_overload_after_a_chunk_fails_and_says_why() {
        let e = after_stream_error(&RetryPolicy::default(), 0, overloaded(), true).unwrap_err();
        assert_eq!(e.kind.as_deref(), Some("overloaded_error"));
        assert!(e.message.starts_with("Overloaded"), "{}", e.message);
        assert!(e.message.contains("not retried"), "{}", e.message);
        assert!(e.message.contains("reached the caller"), "{}", e.message);
    }

    #[test]
    fn other_stream_failures_are_final() {
        let p = RetryPolicy::default();
        for e in [
            InferenceError::stream("the stream ended before `message_stop`"),
            InferenceError::other("invalid_request_error", "bad"),
            InferenceError::invalid_response("not JSON"),
            InferenceError::provider(400, Some("overloaded_error".into()), "odd"),
        ] {
            assert_eq!(after_stream_error(&p, 0, e.clone(), false), Err(e));
        }
    }

    #[test]
    fn zero_retries() {
        let p = RetryPolicy { max_retries: 0 };
        assert_eq!(decide(&p, 0, answered(500)), Decision::Done);
        assert_eq!(decide(&p, 0, Attempt::ConnectFailed), Decision::Done);
    }

    #[test]
    fn policy_from_config() {
        assert_eq!(
            RetryPolicy::from_config(&Value::Null).unwrap(),
            RetryPolicy::default()
        );
        assert_eq!(
            RetryPolicy::from_config(&json!({"other": 1})).unwrap(),
            RetryPolicy { max_retries: 3 }
        );
        assert_eq!(
            RetryPolicy::from_config(&json!({"max_retries": 0})).unwrap(),
            RetryPolicy { max_retries: 0 }
        );
        assert_eq!(
            RetryPolicy::from_config(&json!({"max_retries": 5})).unwrap(),
            RetryPolicy { max_retries: 5 }
        );
        for bad in [
            json!({"max_retries": -1}),
            json!({"max_retries": "3"}),
            json!({"max_retries": 1.5}),
            json!([1]),
        ] {
            let e = RetryPolicy::from_config(&bad).unwrap_err();
            assert_eq!(e.kind.as_deref(), Some("invalid_request"), "{bad}");
        }
    }
}
