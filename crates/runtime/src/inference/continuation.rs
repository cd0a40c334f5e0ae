//! Stateful driver continuation.
//!
//! | situation | what the runtime does |
//! |---|---|
//! | the driver returns a non-empty `continuation_id` | holds it, with how much of the history the provider has seen |
//! | next turn, same context id | sends only the messages appended since, plus the held id |
//! | the next task on the same threaded context (its history loaded, nothing seeded ahead of it) | sends only its new messages plus the held id: the id lasts for the rest of the session loop |
//! | next turn, a different context id | full resend: a continuation never crosses tasks of different contexts |
//! | the driver omits the key or returns an empty one | drops the held id; the next turn is a full resend |
//! | a hook commits `replace-context` | drops the held id ([`Continuation::drop_held`]) |
//!
//! An id beginning with [`INSTANCE_CONTINUATION_PREFIX`] (`instance:`) names a conversation the
//! driver holds in its own memory rather than provider-side: it is good only in the instance
//! that returned it, which the task keeps for it ([`crate::tool::KeptInstance`]); it never
//! outlives its task ([`Continuation::for_next_task`]).
//!
//! Token accounting always counts the full conversation, never the smaller payload sent, so
//! continuation never changes when compaction fires.

use murmur_protocol::inference::INSTANCE_CONTINUATION_PREFIX;

/// What the next request sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Every message, no continuation id.
    Full,
    /// The messages from index `from` on, with `id`.
    Since { id: String, from: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    id: String,
    context_id: Option<String>,
    choice: String,
    /// History messages the provider holds: everything before this index.
    acknowledged: usize,
}

/// The continuation held for one session's agent loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Continuation {
    held: Option<Held>,
}

impl Continuation {
    /// What a request on `context_id` through `choice` sends, given `history_len` messages.
    pub fn plan(&self, context_id: Option<&str>, choice: &str, history_len: usize) -> Plan {
        match &self.held {
            Some(held)
                if held.context_id.as_deref() == context_id
                    && held.choice == choice
                    && held.acknowledged <= history_len =>
            {
                Plan::Since {
                    id: held.id.clone(),
                    from: held.acknowledged,
                }
            }
            _ => Plan::Full,
        }
    }

    /// Records what a call returned. `acknowledged` is the history length once the call's
    /// answer is appended: everything the provider now holds.
    pub fn record(
        &mut self,
        returned: Option<&str>,
        context_id: Option<&str>,
        choice: &str,
        acknowledged: usize,
    ) {
        self.held = returned.filter(|id| !id.is_empty()).map(|id| Held {
            id: id.to_string(),
            context_id: context_id.map(str::to_string),
            choice: choice.to_string(),
            acknowledged,
        });
    }

    /// Forgets the held id: the next request is a full resend.
    pub fn drop_held(&mut self) {
        self.held = None;
    }

    /// What the next task on the same context goes on with: the held id, unless it names a
    /// conversation held in an instance of this task's.
    pub fn for_next_task(&self) -> Continuation {
        match &self.held {
            Some(held) if held.id.starts_with(INSTANCE_CONTINUATION_PREFIX) => {
                Continuation::default()
            }
            _ => self.clone(),
        }
    }

    /// Whether an id is held.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_id_is_held_and_the_next_turn_sends_only_what_is_new() {
        let mut continuation = Continuation::default();
        assert_eq!(continuation.plan(Some("ctx_a"), "primary", 1), Plan::Full);
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 2);
        assert_eq!(
            continuation.plan(Some("ctx_a"), "primary", 3),
            Plan::Since {
                id: "resp_1".to_string(),
                from: 2
            }
        );
    }

    #[test]
    fn another_context_is_a_full_resend() {
        let mut continuation = Continuation::default();
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 2);
        assert_eq!(continuation.plan(Some("ctx_b"), "primary", 1), Plan::Full);
    }

    #[test]
    fn an_omitted_or_empty_id_drops_the_held_one() {
        let mut continuation = Continuation::default();
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 2);
        continuation.record(Some(""), Some("ctx_a"), "primary", 4);
        assert_eq!(continuation.plan(Some("ctx_a"), "primary", 5), Plan::Full);
        continuation.record(Some("resp_2"), Some("ctx_a"), "primary", 6);
        continuation.record(None, Some("ctx_a"), "primary", 8);
        assert!(!continuation.is_held());
    }

    #[test]
    fn a_replaced_context_drops_the_held_id() {
        let mut continuation = Continuation::default();
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 2);
        continuation.drop_held();
        assert_eq!(continuation.plan(Some("ctx_a"), "primary", 3), Plan::Full);
    }

    #[test]
    fn an_id_held_in_an_instance_ends_with_its_task() {
        let mut continuation = Continuation::default();
        continuation.record(Some("instance:7"), Some("ctx_a"), "primary", 2);
        assert!(matches!(
            continuation.plan(Some("ctx_a"), "primary", 3),
            Plan::Since { .. }
        ));
        assert!(!continuation.for_next_task().is_held());
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 4);
        assert_eq!(continuation.for_next_task(), continuation);
    }

    #[test]
    fn an_id_from_another_choice_is_not_used() {
        let mut continuation = Continuation::default();
        continuation.record(Some("resp_1"), Some("ctx_a"), "primary", 2);
        assert_eq!(continuation.plan(Some("ctx_a"), "fast", 3), Plan::Full);
    }
}
