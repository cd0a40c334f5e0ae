//! The spend meter: one per session, over every gateway the session reaches (each driver
//! choice's, the primary's for compaction and hooks' `run-inference`).
//!
//! What the meter promises:
//!
//! - It counts the runtime's own estimate (cl100k over the serialized payload sent, and over
//!   the content that came back), never the provider's counts: admission must be decided
//!   before a call, when no provider has answered.
//! - With `inference.max_session_tokens` set, a call is admitted only when what has been spent
//!   plus the call's input estimate stays within the ceiling; the call that would exceed it is
//!   refused before any byte is sent, and the task ends `spend_ceiling_reached`.
//! - Without a ceiling every call is admitted; the meter still counts.

use std::sync::atomic::{AtomicU64, Ordering};

/// A call the ceiling refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverCeiling {
    pub spent: u64,
    pub asked: u64,
    pub ceiling: u64,
}

impl std::fmt::Display for OverCeiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the call would spend about {} tokens on top of {} already spent, past `inference.max_session_tokens` ({})",
            self.asked, self.spent, self.ceiling
        )
    }
}

/// One session's spend, shared by everything that calls a gateway.
#[derive(Debug, Default)]
pub struct SpendMeter {
    ceiling: Option<u64>,
    spent: AtomicU64,
    refusals: AtomicU64,
}

impl SpendMeter {
    pub fn new(ceiling: Option<u64>) -> SpendMeter {
        SpendMeter {
            ceiling,
            spent: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    /// Admits a call whose input is estimated at `input_tokens`, or says why not. Admission
    /// reserves the input; [`SpendMeter::record_output`] adds what came back.
    pub fn admit(&self, input_tokens: u64) -> Result<(), OverCeiling> {
        let mut spent = self.spent.load(Ordering::Acquire);
        loop {
            if let Some(ceiling) = self.ceiling
                && spent.saturating_add(input_tokens) > ceiling
            {
                self.refusals.fetch_add(1, Ordering::AcqRel);
                return Err(OverCeiling {
                    spent,
                    asked: input_tokens,
                    ceiling,
                });
            }
            match self.spent.compare_exchange_weak(
                spent,
                spent.saturating_add(input_tokens),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => spent = now,
            }
        }
    }

    /// Adds the estimate of what a call returned.
    pub fn record_output(&self, output_tokens: u64) {
        let _ = self
            .spent
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |spent| {
                Some(spent.saturating_add(output_tokens))
            });
    }

    /// Everything counted so far.
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Acquire)
    }

    /// How many calls the ceiling has refused.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Acquire)
    }

    pub fn ceiling(&self) -> Option<u64> {
        self.ceiling
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_that_would_pass_the_ceiling_is_refused_and_counts_nothing() {
        let meter = SpendMeter::new(Some(1000));
        meter.admit(600).unwrap();
        meter.record_output(100);
        assert_eq!(meter.spent(), 700);
        let refused = meter.admit(301).unwrap_err();
        assert_eq!(
            refused,
            OverCeiling {
                spent: 700,
                asked: 301,
                ceiling: 1000
            }
        );
        assert_eq!(meter.spent(), 700);
        assert_eq!(meter.refusals(), 1);
        meter.admit(300).unwrap();
        assert_eq!(meter.spent(), 1000);
        assert!(refused.to_string().contains("max_session_tokens"));
    }

    #[test]
    fn without_a_ceiling_everything_is_admitted_and_counted() {
        let meter = SpendMeter::new(None);
        meter.admit(u64::MAX / 2).unwrap();
        meter.admit(u64::MAX / 2).unwrap();
        meter.record_output(10);
        assert!(meter.spent() >= u64::MAX - 1);
    }
}
