//! Where a session's work sits in a distributed trace (W3C Trace Context).
//!
//! What it promises:
//!
//! - **Ids come from the trace file.** A session's trace id is derived from its session id,
//!   and every span id from the `event_id` of the event that opens the span (the first 16 hex
//!   digits of the sha256 of the id). So the spans the OTLP export sends, the `traceparent` a
//!   task sends to a peer, and `trace.jsonl` name the same things, and anyone can recompute
//!   the ids from the file alone.
//! - **A task continues the trace it arrived with.** A task whose A2A request carried a valid
//!   `traceparent` lives in that trace, its span a child of the caller's span; any other task
//!   lives in its session's trace, under the session span.
//! - **Outgoing requests name the sending task's span** as their parent, so a peer's task span
//!   nests under the task that sent it.
//! - A `traceparent` is valid only as the W3C format says: version `00` with exactly four
//!   fields (a later version may add fields), lowercase hex, neither id all zeros; anything
//!   else is ignored as if absent.

use sha2::{Digest, Sha256};

/// One span's place in a trace: W3C ids in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRef {
    /// 32 hex digits, never all zero.
    pub trace_id: String,
    /// 16 hex digits, never all zero.
    pub span_id: String,
}

impl SpanRef {
    /// The span a valid `traceparent` names, or `None`.
    pub fn from_traceparent(traceparent: &str) -> Option<SpanRef> {
        let parts: Vec<&str> = traceparent.trim().split('-').collect();
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let valid = parts.len() >= 4
            && hex(parts[0], 2)
            && parts[0] != "ff"
            && (parts[0] != "00" || parts.len() == 4)
            && hex(parts[1], 32)
            && parts[1].bytes().any(|b| b != b'0')
            && hex(parts[2], 16)
            && parts[2].bytes().any(|b| b != b'0')
            && hex(parts[3], 2);
        valid.then(|| SpanRef {
            trace_id: parts[1].to_string(),
            span_id: parts[2].to_string(),
        })
    }

    /// The `traceparent` of a request made from this span (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }

    /// A span of a new trace, for work outside any session (`mur tool invoke`).
    pub fn fresh() -> SpanRef {
        let id = uuid::Uuid::new_v4().simple().to_string();
        SpanRef {
            trace_id: id.clone(),
            span_id: id[..16].to_string(),
        }
    }

    /// The span of the session `session_id` whose `session_start` is `event_id`.
    pub fn session(session_id: &str, event_id: &str) -> SpanRef {
        SpanRef {
            trace_id: session_trace_id(session_id),
            span_id: event_span_id(event_id),
        }
    }

    /// The span of a task whose `task_start` is `task_event_id`: in the trace of `incoming`
    /// (the `traceparent` its request carried) when that is valid, else in the session's.
    pub fn task(session_id: &str, task_event_id: &str, incoming: Option<&str>) -> SpanRef {
        let trace_id = incoming
            .and_then(SpanRef::from_traceparent)
            .map_or_else(|| session_trace_id(session_id), |caller| caller.trace_id);
        SpanRef {
            trace_id,
            span_id: event_span_id(task_event_id),
        }
    }
}

/// The trace id of a session: 32 hex digits from the sha256 of its id.
pub fn session_trace_id(session_id: &str) -> String {
    nonzero_hex(session_id, 16)
}

/// The span id of the span an event opens: 16 hex digits from the sha256 of its `event_id`.
pub fn event_span_id(event_id: &str) -> String {
    nonzero_hex(event_id, 8)
}

fn nonzero_hex(id: &str, bytes: usize) -> String {
    let digest = Sha256::digest(id.as_bytes());
    let mut taken = digest[..bytes].to_vec();
    if taken.iter().all(|b| *b == 0) {
        taken[bytes - 1] = 1;
    }
    hex::encode(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_gives_its_ids_and_an_invalid_one_none() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            SpanRef::from_traceparent(good),
            Some(SpanRef {
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                span_id: "00f067aa0ba902b7".into(),
            })
        );
        assert_eq!(
            SpanRef::from_traceparent(good).unwrap().traceparent(),
            good,
            "a parsed traceparent prints back unchanged"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(SpanRef::from_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_task_joins_the_trace_it_arrived_with_else_its_sessions() {
        let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let joined = SpanRef::task("ses_1", "evt_task", Some(incoming));
        assert_eq!(joined.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(joined.span_id, event_span_id("evt_task"));
        let local = SpanRef::task("ses_1", "evt_task", Some("garbage"));
        assert_eq!(local.trace_id, session_trace_id("ses_1"));
        assert_eq!(
            local.trace_id,
            SpanRef::session("ses_1", "evt_start").trace_id
        );
        assert_ne!(session_trace_id("ses_1"), session_trace_id("ses_2"));
        assert_eq!(session_trace_id("ses_1").len(), 32);
        assert_eq!(event_span_id("evt_1").len(), 16);
        assert!(SpanRef::from_traceparent(&local.traceparent()).is_some());
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_parsed_without_panic_and_what_parses_prints_back(text in "\\PC{0,80}") {
            if let Some(span) = SpanRef::from_traceparent(&text) {
                proptest::prop_assert_eq!(SpanRef::from_traceparent(&span.traceparent()), Some(span));
            }
        }

        #[test]
        fn every_valid_pair_of_ids_round_trips(trace in "[0-9a-f]{32}", span in "[0-9a-f]{16}") {
            let parsed = SpanRef::from_traceparent(&format!("00-{trace}-{span}-01"));
            let zero = |s: &str| s.bytes().all(|b| b == b'0');
            proptest::prop_assert_eq!(parsed.is_some(), !zero(&trace) && !zero(&span));
        }
    }
}
