//! The runtime's own token count: cl100k over the serialized payload, for every provider. It
//! drives budgets and compaction; providers' counts are only recorded beside it.
//!
//! The encoder is loaded once per process, in the background from [`warm`] on, so the first
//! turn does not wait for it unless it needs a count before its call. A conversation's
//! estimate is the sum of its parts' counts (each message counted once and remembered by id),
//! so a turn's cost does not grow with the length of the conversation.

use std::collections::HashMap;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();

fn encoder() -> Option<&'static CoreBPE> {
    CL100K
        .get_or_init(|| tiktoken_rs::cl100k_base().ok())
        .as_ref()
}

/// Starts loading the encoder on another thread, if it is not loaded yet.
pub fn warm() {
    if CL100K.get().is_none() {
        std::thread::spawn(|| {
            encoder();
        });
    }
}

/// Tokens in `text`, cl100k. Falls back to a quarter of the bytes if the encoder could not be
/// built (it ships inside the binary, so this does not happen in practice).
pub fn count(text: &str) -> u64 {
    match encoder() {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        None => (text.len() as u64).div_ceil(4),
    }
}

/// Remembers the count of each message by its id.
#[derive(Debug, Default)]
pub struct MessageCounts {
    by_id: HashMap<String, u64>,
}

impl MessageCounts {
    /// The count of the message with `id`, serialized as `json`, counting it on first sight.
    pub fn count(&mut self, id: &str, json: impl FnOnce() -> String) -> u64 {
        if let Some(count) = self.by_id.get(id) {
            return *count;
        }
        let count = count(&json());
        self.by_id.insert(id.to_string(), count);
        count
    }

    /// Forgets every count (after the history is replaced).
    pub fn clear(&mut self) {
        self.by_id.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_cl100k() {
        // "hello world" is two cl100k tokens.
        assert_eq!(count("hello world"), 2);
        assert_eq!(count(""), 0);
    }

    #[test]
    fn a_message_is_counted_once() {
        let mut counts = MessageCounts::default();
        assert_eq!(counts.count("msg_1", || "hello world".to_string()), 2);
        assert_eq!(counts.count("msg_1", || panic!("counted again")), 2);
    }
}
