//! The runtime's own token count: cl100k over the serialized payload, for every provider. It
//! drives budgets and compaction; providers' counts are only recorded beside it.
//!
//! The count is exactly what cl100k's ordinary encoding gives, for any text: the same split
//! into pieces as cl100k's pattern, the same merges, lowest rank first and leftmost among equals.
//! Nothing is built when a process starts: the token table is laid out at build time
//! (`build.rs`) and read in place from the binary, so the first count costs what any count
//! costs. Counting is linear in the text for ordinary text; a piece (a run of letters, say)
//! longer than [`SHORT_PIECE`] bytes is merged through a heap, in time `n log n`.
//!
//! A conversation's estimate is the sum of its parts' counts, each message counted once and
//! remembered by position and id with the running sum ([`MessageCounts`]), so a turn counts
//! only what is new.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::inference::neutral::StoredMessage;
use unicode_general_category::{GeneralCategory, get_general_category};

include!("cl100k_slot.rs");
include!(concat!(env!("OUT_DIR"), "/cl100k_longest.rs"));

static TOKEN_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_bytes.bin"));
static TOKEN_ENDS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_ends.bin"));
static TOKEN_SLOTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_slots.bin"));

/// Tokens in `text`, cl100k's ordinary encoding.
pub fn count(text: &str) -> u64 {
    let mut total = 0;
    let mut at = 0;
    while at < text.len() {
        let end = piece_end(text, at);
        total += piece_tokens(&text.as_bytes()[at..end]);
        at = end;
    }
    total as u64
}

fn u32_at(table: &[u8], index: usize) -> u32 {
    let at = index * 4;
    u32::from_le_bytes([table[at], table[at + 1], table[at + 2], table[at + 3]])
}

fn token_bytes(rank: u32) -> &'static [u8] {
    let rank = rank as usize;
    let end = u32_at(TOKEN_ENDS, rank) as usize;
    let start = match rank {
        0 => 0,
        _ => u32_at(TOKEN_ENDS, rank - 1) as usize,
    };
    &TOKEN_BYTES[start..end]
}

/// The rank of the token that is exactly `bytes`.
fn rank(bytes: &[u8]) -> Option<u32> {
    if bytes.len() > LONGEST_TOKEN {
        return None;
    }
    let mut slot = first_slot(bytes);
    loop {
        match u32_at(TOKEN_SLOTS, slot) {
            0 => return None,
            entry if token_bytes(entry - 1) == bytes => return Some(entry - 1),
            _ => slot = (slot + 1) & (SLOTS - 1),
        }
    }
}

// ---- pieces: cl100k's pattern, alternative by alternative, first match wins -----------------

fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::UppercaseLetter
            | GeneralCategory::LowercaseLetter
            | GeneralCategory::TitlecaseLetter
            | GeneralCategory::ModifierLetter
            | GeneralCategory::OtherLetter
    )
}

fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::DecimalNumber
            | GeneralCategory::LetterNumber
            | GeneralCategory::OtherNumber
    )
}

/// Neither whitespace, a letter nor a number: punctuation, symbols, marks, controls.
fn is_other(c: char) -> bool {
    !c.is_whitespace() && !is_letter(c) && !is_number(c)
}

fn is_newline(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// The end of the run of chars from `at` that `keep` accepts, at most `most` of them.
fn run_end(text: &str, at: usize, most: usize, keep: impl Fn(char) -> bool) -> usize {
    let mut end = at;
    for (taken, c) in text[at..].chars().enumerate() {
        if taken == most || !keep(c) {
            break;
        }
        end += c.len_utf8();
    }
    end
}

/// The length of the contraction `'s`, `'t`, `'re`, `'ve`, `'m`, `'ll` or `'d` (any case;
/// `ſ` is an `s` under case folding) that `after` (the text after an apostrophe) starts with.
fn contraction(after: &str) -> Option<usize> {
    let mut chars = after.chars();
    let first = chars.next()?;
    let second = chars.next();
    let is = |c: Option<char>, letter: char| c.is_some_and(|c| c.to_ascii_lowercase() == letter);
    match first.to_ascii_lowercase() {
        's' | 't' | 'm' | 'd' => Some(1),
        '\u{17f}' => Some(first.len_utf8()),
        'r' | 'v' if is(second, 'e') => Some(2),
        'l' if is(second, 'l') => Some(2),
        _ => None,
    }
}

/// Where the piece starting at `at` ends: cl100k's pattern
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// matched at `at`, its alternatives tried in order.
fn piece_end(text: &str, at: usize) -> usize {
    let mut chars = text[at..].chars();
    let Some(first) = chars.next() else {
        return at;
    };
    let second = chars.next();
    let after_first = at + first.len_utf8();
    // 's 't 're 've 'm 'll 'd
    if first == '\''
        && let Some(length) = contraction(&text[after_first..])
    {
        return after_first + length;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if is_letter(first) {
        return run_end(text, at, usize::MAX, is_letter);
    }
    if !is_newline(first) && !is_number(first) && second.is_some_and(is_letter) {
        return run_end(text, after_first, usize::MAX, is_letter);
    }
    // \p{N}{1,3}
    if is_number(first) {
        return run_end(text, at, 3, is_number);
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    let others_from = if first == ' ' && second.is_some_and(is_other) {
        Some(after_first)
    } else if is_other(first) {
        Some(at)
    } else {
        None
    };
    if let Some(from) = others_from {
        let others_end = run_end(text, from, usize::MAX, is_other);
        return run_end(text, others_end, usize::MAX, is_newline);
    }
    // `first` is whitespace. \s*[\r\n]+ : through the run's last newline.
    let spaces_end = run_end(text, at, usize::MAX, char::is_whitespace);
    let spaces = &text[at..spaces_end];
    if let Some(newline) = spaces.rfind(['\r', '\n']) {
        return at + newline + 1;
    }
    // \s+(?!\S) : the run, less its last char when something follows it.
    if spaces_end == text.len() {
        return spaces_end;
    }
    let last = spaces.chars().next_back().map_or(0, char::len_utf8);
    if spaces.len() > last {
        return spaces_end - last;
    }
    // \s+
    spaces_end
}

// ---- merges ----------------------------------------------------------------------------------

/// Pieces up to this many bytes are merged by scanning for the lowest rank; longer ones
/// through a heap.
const SHORT_PIECE: usize = 64;

/// Tokens in one piece.
fn piece_tokens(piece: &[u8]) -> usize {
    match piece.len() {
        0 => 0,
        1 => 1,
        _ if rank(piece).is_some() => 1,
        length if length <= SHORT_PIECE => merge_by_scan(piece),
        _ => merge_by_heap(piece),
    }
}

/// Merges `piece` by rescanning for the lowest-ranked adjacent pair after every merge.
fn merge_by_scan(piece: &[u8]) -> usize {
    // Each part's start, and the rank of the part joined with the next one.
    let mut parts: Vec<(usize, u32)> = (0..=piece.len()).map(|at| (at, u32::MAX)).collect();
    let pair_rank = |parts: &[(usize, u32)], i: usize| match parts.get(i + 2) {
        Some(&(end, _)) => rank(&piece[parts[i].0..end]).unwrap_or(u32::MAX),
        None => u32::MAX,
    };
    for i in 0..parts.len() - 2 {
        parts[i].1 = pair_rank(&parts, i);
    }
    loop {
        let mut lowest = (u32::MAX, 0);
        for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
            if rank < lowest.0 {
                lowest = (rank, i);
            }
        }
        if lowest.0 == u32::MAX {
            break;
        }
        let i = lowest.1;
        parts.remove(i + 1);
        parts[i].1 = pair_rank(&parts, i);
        if i > 0 {
            parts[i - 1].1 = pair_rank(&parts, i - 1);
        }
    }
    parts.len() - 1
}

/// Merges `piece` as [`merge_by_scan`] does, in the same order, keeping the candidate pairs in
/// a heap ordered by rank and then by position. Parts are named by the byte they start at; a
/// part's version changes whenever it grows, which retires every pair recorded with the old one.
fn merge_by_heap(piece: &[u8]) -> usize {
    let end = piece.len();
    let mut next: Vec<usize> = (1..=end).collect();
    let mut previous: Vec<Option<usize>> = (0..end).map(|at| at.checked_sub(1)).collect();
    let mut version = vec![0u32; end];
    let mut alive = vec![true; end];
    let mut parts = end;
    let pair = |next: &[usize], version: &[u32], left: usize| {
        let right = next[left];
        if right == end {
            return None;
        }
        let pair_end = next[right];
        rank(&piece[left..pair_end])
            .map(|rank| Reverse((rank, left, version[left], version[right])))
    };
    let mut heap: BinaryHeap<_> = (0..end)
        .filter_map(|left| pair(&next, &version, left))
        .collect();
    while let Some(Reverse((_, left, left_version, right_version))) = heap.pop() {
        if !alive[left] || version[left] != left_version {
            continue;
        }
        let right = next[left];
        if right == end || version[right] != right_version {
            continue;
        }
        alive[right] = false;
        next[left] = next[right];
        if next[left] < end {
            previous[next[left]] = Some(left);
        }
        version[left] += 1;
        parts -= 1;
        heap.extend(pair(&next, &version, left));
        if let Some(before) = previous[left] {
            heap.extend(pair(&next, &version, before));
        }
    }
    parts
}

/// The counts of a history's messages and their running sum, kept by position and id: a
/// history that only grew costs the new messages' counts and a walk over the ids, never a
/// recount (a message is counted as its JSON).
#[derive(Debug, Default)]
pub struct MessageCounts {
    counted: Vec<Counted>,
}

#[derive(Debug)]
struct Counted {
    id: String,
    /// The sum of the counts of the messages up to this one, itself included.
    through: u64,
}

impl MessageCounts {
    /// The sum of the counts of `history`'s messages. Those whose position and id match the
    /// last history's are not counted again; from the first that does not, every one is.
    pub fn total(&mut self, history: &[StoredMessage]) -> u64 {
        let same = self
            .counted
            .iter()
            .zip(history)
            .take_while(|(counted, message)| counted.id == message.id)
            .count();
        self.counted.truncate(same);
        for message in &history[same..] {
            let json = serde_json::to_string(&message.message).unwrap_or_default();
            let through = self.counted.last().map_or(0, |c| c.through) + count(&json);
            self.counted.push(Counted {
                id: message.id.clone(),
                through,
            });
        }
        self.counted.last().map_or(0, |c| c.through)
    }

    /// Forgets every count (after the history is replaced).
    pub fn clear(&mut self) {
        self.counted.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use proptest::prelude::*;

    use super::*;

    /// The reference: `tiktoken-rs`'s cl100k, which this module replaces.
    fn reference(text: &str) -> u64 {
        static CL100K: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
        let encoder = CL100K.get_or_init(|| tiktoken_rs::cl100k_base().unwrap());
        encoder.encode_ordinary(text).len() as u64
    }

    /// The reference's split: cl100k's pattern, run by a backtracking regex engine.
    fn reference_pieces(text: &str) -> Vec<&str> {
        static PATTERN: OnceLock<fancy_regex::Regex> = OnceLock::new();
        let pattern = PATTERN.get_or_init(|| {
            fancy_regex::Regex::new(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
            )
            .unwrap()
        });
        pattern
            .find_iter(text)
            .map(|found| found.unwrap().as_str())
            .collect()
    }

    fn pieces(text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let end = piece_end(text, at);
            pieces.push(&text[at..end]);
            at = end;
        }
        pieces
    }

    #[test]
    fn counts_are_cl100k() {
        // "hello world" is two cl100k tokens.
        assert_eq!(count("hello world"), 2);
        assert_eq!(count(""), 0);
    }

    /// Every text file of this repository (sources, docs, manifests, WIT, JSON), whole and
    /// as JSON strings (as payloads are counted): the same count as the reference.
    #[test]
    fn the_repositorys_own_files_count_as_the_reference_counts_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || name == "target" || name == "node_modules" {
                    continue;
                }
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    files.push((path, text));
                }
            }
        }
        assert!(files.len() > 200, "{} files", files.len());
        let mut bytes = 0;
        for (path, text) in &files {
            bytes += text.len();
            assert_eq!(pieces(text), reference_pieces(text), "{}", path.display());
            assert_eq!(count(text), reference(text), "{}", path.display());
            let json = serde_json::to_string(text).unwrap();
            assert_eq!(count(&json), reference(&json), "{} as JSON", path.display());
        }
        assert!(bytes > 1_000_000, "{bytes} bytes");
    }

    /// Texts that reach every alternative of the pattern and both ways of merging.
    #[test]
    fn edge_cases_count_as_the_reference_counts_them() {
        let cases = [
            "don't I'LL we'Re you'VE she'D it'S x'ſa x'Sa x'x x''s x'llama x'rex 'ſ",
            "  leading and trailing  ",
            "a\n\n\nb\r\n\r\n  c \n\t d\u{a0}\u{3000}e",
            "12345678 1 22 333 4444 ٣٤٥ Ⅻ ½",
            "!!! ?? . , ;; ... --- ***\n\n",
            "$var _under 'quote \"dq\" «guillemets»",
            "e\u{301}tude, café, naïve, 日本語のテキスト, 한국어, Ελληνικά, עברית, العربية",
            "emoji 🙂🙂🙂 👩‍👩‍👧 flags 🇫🇷🇩🇪",
            "\u{0}\u{1}\u{7f} control \u{85} next line \u{2028} line sep",
        ];
        for text in cases {
            assert_eq!(pieces(text), reference_pieces(text), "{text:?}");
            assert_eq!(count(text), reference(text), "{text:?}");
        }
        // Long pieces: the heap merges as the scan does.
        for text in [
            "x".repeat(10_000),
            "ab".repeat(3_000),
            "é".repeat(2_000),
            "!".repeat(5_000),
            "supercalifragilisticexpialidocious".repeat(100),
            "0123456789".repeat(500),
        ] {
            assert_eq!(count(&text), reference(&text), "{} bytes", text.len());
        }
    }

    #[test]
    fn a_heap_merge_is_a_scan_merge() {
        let words = [
            "antidisestablishmentarianism",
            "aaaaaaaaaaaaaaaaaa",
            "ﬁﬂ",
            "naïveté",
        ];
        for word in words {
            let bytes = word.as_bytes();
            assert_eq!(merge_by_heap(bytes), merge_by_scan(bytes), "{word}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Random text over an alphabet of every kind of char the pattern tells apart.
        #[test]
        fn random_text_counts_as_the_reference_counts_it(
            text in proptest::collection::vec(
                prop_oneof![
                    Just('a'), Just('Z'), Just('s'), Just('S'), Just('t'), Just('l'), Just('e'),
                    Just('\''), Just(' '), Just('\n'), Just('\r'), Just('\t'), Just('7'),
                    Just('.'), Just('_'), Just('ſ'), Just('é'), Just('\u{301}'), Just('日'),
                    Just('٣'), Just('\u{a0}'), Just('🙂'), Just('"'), Just('{'),
                    any::<char>(),
                ],
                0..200,
            ).prop_map(|chars| chars.into_iter().collect::<String>())
        ) {
            prop_assert_eq!(pieces(&text), reference_pieces(&text), "{:?}", text);
            prop_assert_eq!(count(&text), reference(&text), "{:?}", text);
        }

        #[test]
        fn long_pieces_merge_as_short_ones_do(
            text in "[a-z]{65,400}|[é日a]{30,200}|[!?.]{65,300}"
        ) {
            let bytes = text.as_bytes();
            prop_assert_eq!(merge_by_heap(bytes), merge_by_scan(bytes));
            prop_assert_eq!(count(&text), reference(&text));
        }
    }

    #[test]
    fn a_historys_total_follows_appends_and_replacements() {
        use crate::inference::neutral::Message;
        let message = |text: &str| StoredMessage::new(Message::user_text(text.to_string()));
        let each = |history: &[StoredMessage]| -> u64 {
            history
                .iter()
                .map(|m| count(&serde_json::to_string(&m.message).unwrap()))
                .sum()
        };
        let mut counts = MessageCounts::default();
        let mut history = vec![message("hello world"), message("how are you")];
        assert_eq!(counts.total(&history), each(&history));
        history.push(message("fine, thanks, and you?"));
        assert_eq!(counts.total(&history), each(&history));
        // A message taken out, another put in its place: the total is the new history's.
        history.remove(1);
        history.insert(1, message("a much longer message than the one it replaced"));
        assert_eq!(counts.total(&history), each(&history));
        history.truncate(1);
        assert_eq!(counts.total(&history), each(&history));
        assert_eq!(counts.total(&[]), 0);
    }
}
