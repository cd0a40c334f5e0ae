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

/// The most bytes encoded at once: a longer text is counted piece by piece, cut just before
/// whitespace, so the cost stays linear in its length.
const PIECE_BYTES: usize = 16 * 1024;
/// The longest run without whitespace encoded whole. Byte-pair merging is quadratic in the
/// length of one pre-token, and a run of letters is one pre-token: a longer run is cut every
/// this many bytes. Words of real text are far shorter, so their counts are exact.
const RUN_BYTES: usize = 256;

/// Tokens in `text`, cl100k, in time linear in its length (see `PIECE_BYTES` and
/// `RUN_BYTES`: the count of a text cut into pieces may differ from the count of the whole by
/// a token per cut). Falls back to a quarter of the bytes if the encoder could not be built (it
/// ships inside the binary, so this does not happen in practice).
pub fn count(text: &str) -> u64 {
    let Some(bpe) = encoder() else {
        return (text.len() as u64).div_ceil(4);
    };
    let encode = |piece: &str| bpe.encode_ordinary(piece).len() as u64;
    if text.len() <= RUN_BYTES {
        return encode(text);
    }
    let (mut total, mut start, mut run_start) = (0, 0, 0);
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            if at - start >= PIECE_BYTES {
                total += encode(&text[start..at]);
                start = at;
            }
            run_start = at + c.len_utf8();
        } else if at - run_start >= RUN_BYTES {
            total += encode(&text[start..at]);
            start = at;
            run_start = at;
        }
    }
    total + encode(&text[start..])
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
    fn a_long_text_counts_as_its_words_do() {
        // Real text, cut into pieces before whitespace, counts exactly as the whole.
        let sentence = "The quick brown fox jumps over the lazy dog. ";
        let text = sentence.repeat(2_000);
        let whole = encoder().unwrap().encode_ordinary(&text).len() as u64;
        let counted = count(&text);
        assert!(
            counted.abs_diff(whole) <= text.len() as u64 / PIECE_BYTES as u64 + 1,
            "{counted} vs {whole}"
        );
        // A run without whitespace is counted in pieces, about as the whole would be.
        let run = "x".repeat(100_000);
        let pieces = count(&run);
        assert!((1_000..=100_000).contains(&pieces), "{pieces}");
        // Multi-byte characters are never cut inside.
        assert!(count(&"é".repeat(10_000)) > 0);
    }

    #[test]
    fn a_message_is_counted_once() {
        let mut counts = MessageCounts::default();
        assert_eq!(counts.count("msg_1", || "hello world".to_string()), 2);
        assert_eq!(counts.count("msg_1", || panic!("counted again")), 2);
    }
}
