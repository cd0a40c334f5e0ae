//! The pure edit: a file's text, `old`, `new` and `replace_all` in; the new text (and where it
//! changed) or a refusal out. No file system here, so every rule is tested on the host.
//!
//! Promises:
//! - `old` must be non-empty and differ from `new`.
//! - Occurrences of `old` are counted at every position, overlaps included. Without
//!   `replace_all`, exactly one occurrence is replaced; none or several is a refusal that says
//!   how many and on which lines (the first [`LINES_SHOWN`]).
//! - With `replace_all`, every occurrence is replaced left to right without overlap, exactly as
//!   `str::replace` does.
//! - Line endings: when every line break of the text is CRLF, each LF of `old` and `new` not
//!   already preceded by CR is taken as CRLF before matching, so an edit written with LF keeps
//!   the file CRLF. Any other text (LF only, mixed, no line break) is matched byte for byte.
//! - The new text never exceeds the `max_len` it is given: a larger result is a refusal,
//!   decided before the new text is built.

use std::borrow::Cow;
use std::fmt;

/// How many match lines a refusal names.
pub const LINES_SHOWN: usize = 20;

/// A successful edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new text.
    pub content: String,
    /// How many occurrences were replaced.
    pub replacements: usize,
    /// First and last line (1-based, in the new text) the replacements cover.
    pub first_line: usize,
    pub last_line: usize,
    /// Whether `old`/`new` were taken with CRLF line breaks to match the file.
    pub crlf: bool,
}

/// Why nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `old` is the empty string.
    EmptyOld,
    /// `old` and `new` are the same text.
    NoChange,
    /// `old` does not occur; `hint` names lines that hold its first line, trimmed.
    NotFound { hint: Vec<usize> },
    /// `old` occurs `count` times (overlaps included) and `replace_all` is off; `lines` are the
    /// lines of the first [`LINES_SHOWN`] occurrences.
    Ambiguous { count: usize, lines: Vec<usize> },
    /// The new text would be `len` bytes, over `max`.
    TooLarge { len: u128, max: usize },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::EmptyOld => f.write_str("`old` is empty: give the exact text to replace"),
            Refusal::NoChange => f.write_str("`old` and `new` are the same: nothing to change"),
            Refusal::NotFound { hint } => {
                f.write_str("`old` was not found (it must match exactly, whitespace included)")?;
                if !hint.is_empty() {
                    write!(
                        f,
                        "; its first line, trimmed, appears on line{} {}: read those lines again \
                         and copy them exactly",
                        if hint.len() == 1 { "" } else { "s" },
                        join(hint)
                    )?;
                }
                Ok(())
            }
            Refusal::Ambiguous { count, lines } => {
                write!(f, "`old` matches {count} times, on lines {}", join(lines))?;
                if *count > lines.len() {
                    write!(f, " (first {} shown)", lines.len())?;
                }
                f.write_str(
                    ": add surrounding lines to `old` to make it unique, or set `replace_all`",
                )
            }
            Refusal::TooLarge { len, max } => write!(
                f,
                "the edited file would be {len} bytes, over the {max}-byte limit of edit-file"
            ),
        }
    }
}

fn join(lines: &[usize]) -> String {
    lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether every line break of `text` is CRLF (and there is at least one).
pub fn is_crlf(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut any = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            if i == 0 || bytes[i - 1] != b'\r' {
                return false;
            }
            any = true;
        }
    }
    any
}

/// `text` with each LF not preceded by CR turned into CRLF.
pub fn to_crlf(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let bare = bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || bytes[i - 1] != b'\r'));
    if !bare {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut prev = '\0';
    for c in text.chars() {
        if c == '\n' && prev != '\r' {
            out.push('\r');
        }
        out.push(c);
        prev = c;
    }
    Cow::Owned(out)
}

/// Byte offsets of every occurrence of `needle` in `text`, overlaps included; stops counting
/// positions (but not occurrences) past `keep`.
fn occurrences(text: &str, needle: &str, keep: usize) -> (usize, Vec<usize>) {
    let mut count = 0;
    let mut kept = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(needle) {
        let at = from + found;
        count += 1;
        if kept.len() < keep {
            kept.push(at);
        }
        // Next search from the next char boundary after the start of this one.
        let step = text[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
        if from > text.len() {
            break;
        }
    }
    (count, kept)
}

/// 1-based line numbers of ascending byte offsets.
fn lines_of(text: &str, offsets: &[usize]) -> Vec<usize> {
    let mut line = 1;
    let mut pos = 0;
    offsets
        .iter()
        .map(|&at| {
            line += text.as_bytes()[pos..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            pos = at;
            line
        })
        .collect()
}

/// Lines of `text` (at most 5) whose trimmed content contains the first non-blank line of
/// `old`, trimmed: where a near miss likely is.
fn near_misses(text: &str, old: &str) -> Vec<usize> {
    let Some(first) = old.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.trim().contains(first))
        .map(|(i, _)| i + 1)
        .take(5)
        .collect()
}

/// Replace `old` with `new` in `content` (see the module's promises). `max_len` bounds the new
/// text's size in bytes.
pub fn apply(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    max_len: usize,
) -> Result<Edited, Refusal> {
    if old.is_empty() {
        return Err(Refusal::EmptyOld);
    }
    if old == new {
        return Err(Refusal::NoChange);
    }
    let crlf = is_crlf(content);
    let (old, new) = if crlf {
        (to_crlf(old), to_crlf(new))
    } else {
        (Cow::Borrowed(old), Cow::Borrowed(new))
    };
    let (old, new) = (old.as_ref(), new.as_ref());

    let starts: Vec<usize> = if replace_all {
        content.match_indices(old).map(|(at, _)| at).collect()
    } else {
        let (count, kept) = occurrences(content, old, LINES_SHOWN);
        match count {
            0 => {}
            1 => {}
            _ => {
                return Err(Refusal::Ambiguous {
                    count,
                    lines: lines_of(content, &kept),
                });
            }
        }
        kept
    };
    if starts.is_empty() {
        return Err(Refusal::NotFound {
            hint: near_misses(content, old),
        });
    }

    let len = content.len() as u128 + starts.len() as u128 * new.len() as u128
        - starts.len() as u128 * old.len() as u128;
    if len > max_len as u128 {
        return Err(Refusal::TooLarge { len, max: max_len });
    }

    let mut out = String::with_capacity(len as usize);
    let mut pos = 0;
    let mut first_start = 0;
    let mut last_end = 0;
    for (i, &at) in starts.iter().enumerate() {
        out.push_str(&content[pos..at]);
        if i == 0 {
            first_start = out.len();
        }
        out.push_str(new);
        last_end = out.len();
        pos = at + old.len();
    }
    out.push_str(&content[pos..]);

    let first_line = 1 + out.as_bytes()[..first_start]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    // The last line the replacement text reaches (its own trailing line break excluded).
    let span_end = if last_end > first_start && !new.is_empty() {
        last_end - 1
    } else {
        first_start
    };
    let last_line = first_line
        + out.as_bytes()[first_start..span_end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
    Ok(Edited {
        content: out,
        replacements: starts.len(),
        first_line,
        last_line,
        crlf,
    })
}

/// Numbered lines `from..=to` of `text` (1-based), at most `max_lines`, each cut at 200 chars,
/// then up to `after` lines past `to`: what the result shows of the edit.
pub fn context(text: &str, from: usize, to: usize, max_lines: usize, after: usize) -> String {
    let mut out = String::new();
    let shown_to = to.min(from + max_lines.saturating_sub(1));
    let width = (to + after).to_string().len();
    let mut line_no = 0;
    for line in text.split_inclusive('\n') {
        line_no += 1;
        if line_no < from {
            continue;
        }
        if line_no > shown_to && line_no <= to {
            if line_no == shown_to + 1 {
                out.push_str(&format!(
                    "{:>width$} | ... ({} more edited lines)\n",
                    "",
                    to - shown_to
                ));
            }
            continue;
        }
        if line_no > to + after {
            break;
        }
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let cut: String = line.chars().take(200).collect();
        let more = if cut.len() < line.len() { " ..." } else { "" };
        out.push_str(&format!("{line_no:>width$} | {cut}{more}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn replaces_a_unique_occurrence_and_reports_its_lines() {
        let edited = apply("a\nb\nc\n", "b", "B1\nB2", false, MAX).unwrap();
        assert_eq!(edited.content, "a\nB1\nB2\nc\n");
        assert_eq!(edited.replacements, 1);
        assert_eq!((edited.first_line, edited.last_line), (2, 3));
        assert!(!edited.crlf);
    }

    #[test]
    fn deleting_reports_the_line_where_the_text_was() {
        let edited = apply("a\nb\nc\n", "b\n", "", false, MAX).unwrap();
        assert_eq!(edited.content, "a\nc\n");
        assert_eq!((edited.first_line, edited.last_line), (2, 2));
    }

    #[test]
    fn refuses_empty_same_absent_and_ambiguous() {
        assert_eq!(apply("x", "", "y", false, MAX), Err(Refusal::EmptyOld));
        assert_eq!(apply("x", "x", "x", false, MAX), Err(Refusal::NoChange));
        assert_eq!(
            apply(
                "fn main() {\n    let x = 1;\n}\n",
                "let x =  1;",
                "",
                false,
                MAX
            ),
            Err(Refusal::NotFound { hint: vec![] })
        );
        assert_eq!(
            apply("a\n  foo();\nfoo( );\n", "foo();\n  bar();", "", false, MAX),
            Err(Refusal::NotFound { hint: vec![2] })
        );
        let refusal = apply("x\nab\nab ab\n", "ab", "c", false, MAX).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::Ambiguous {
                count: 3,
                lines: vec![2, 3, 3]
            }
        );
        assert_eq!(
            refusal.to_string(),
            "`old` matches 3 times, on lines 2, 3, 3: add surrounding lines to `old` to make \
             it unique, or set `replace_all`"
        );
    }

    #[test]
    fn overlapping_occurrences_are_ambiguous_and_replace_all_is_str_replace() {
        assert_eq!(
            apply("aaa", "aa", "b", false, MAX),
            Err(Refusal::Ambiguous {
                count: 2,
                lines: vec![1, 1]
            })
        );
        assert_eq!(apply("aaa", "aa", "b", true, MAX).unwrap().content, "ba");
    }

    #[test]
    fn ambiguity_names_the_first_twenty_lines_and_the_full_count() {
        let text = "hit\n".repeat(25);
        let refusal = apply(&text, "hit", "x", false, MAX).unwrap_err();
        let Refusal::Ambiguous { count, lines } = &refusal else {
            panic!("{refusal:?}")
        };
        assert_eq!(*count, 25);
        assert_eq!(lines, &(1..=20).collect::<Vec<_>>());
        assert!(refusal.to_string().contains("(first 20 shown)"));
        let all = apply(&text, "hit", "x", true, MAX).unwrap();
        assert_eq!(all.replacements, 25);
        assert_eq!((all.first_line, all.last_line), (1, 25));
    }

    #[test]
    fn a_crlf_file_takes_lf_edits_as_crlf() {
        let edited = apply(
            "one\r\ntwo\r\nthree\r\n",
            "one\ntwo\n",
            "1\n2\n",
            false,
            MAX,
        )
        .unwrap();
        assert_eq!(edited.content, "1\r\n2\r\nthree\r\n");
        assert!(edited.crlf);
        // A mixed file is matched byte for byte: the LF `old` is not in it.
        assert!(matches!(
            apply("one\r\ntwo\nthree\r\n", "one\ntwo", "x", false, MAX),
            Err(Refusal::NotFound { .. })
        ));
        assert_eq!(to_crlf("a\r\nb\nc"), "a\r\nb\r\nc");
        assert!(!is_crlf("no breaks"));
    }

    #[test]
    fn a_result_over_the_limit_is_refused_before_it_is_built() {
        let refusal = apply("ab", "b", &"x".repeat(100), false, 50).unwrap_err();
        assert_eq!(refusal, Refusal::TooLarge { len: 101, max: 50 });
    }

    #[test]
    fn context_shows_the_edit_and_lines_after() {
        let text = "a\nb\nc\nd\ne\nf\n";
        assert_eq!(context(text, 2, 3, 10, 2), "2 | b\n3 | c\n4 | d\n5 | e\n");
        assert_eq!(
            context(text, 1, 4, 2, 1),
            "1 | a\n2 | b\n  | ... (2 more edited lines)\n5 | e\n"
        );
        assert_eq!(context("x\r\ny\r\n", 1, 1, 5, 1), "1 | x\n2 | y\n");
    }

    /// The reference: computed with `str` methods only.
    fn reference(content: &str, old: &str, new: &str, replace_all: bool) -> Option<String> {
        if old.is_empty() || old == new {
            return None;
        }
        let crlf = content.contains("\r\n")
            && content.matches('\n').count() == content.matches("\r\n").count();
        let conv = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        let (o, n) = if crlf {
            (conv(old), conv(new))
        } else {
            (old.to_string(), new.to_string())
        };
        let overlapping = (0..content.len())
            .filter(|&i| content.is_char_boundary(i) && content[i..].starts_with(&o))
            .count();
        if overlapping == 0 || (overlapping > 1 && !replace_all) {
            return None;
        }
        Some(if replace_all {
            content.replace(&o, &n)
        } else {
            content.replacen(&o, &n, 1)
        })
    }

    /// Text drawn from a small alphabet (so matches are frequent), with CR, LF and a
    /// multi-byte char.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec!['a', 'b', '\n', '\r', 'é', ' ']),
            0..40,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    /// Sometimes a CRLF-only file, built from lines.
    fn content() -> impl Strategy<Value = String> {
        prop_oneof![
            text(),
            proptest::collection::vec("[ab é]{0,6}", 1..8).prop_map(|lines| lines.join("\r\n")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn apply_is_the_reference_replacement_or_a_refusal(
            content in content(),
            old in prop_oneof![text(), "[ab]{1,3}", "[ab]{1,2}\n[ab]{0,2}"],
            new in text(),
            replace_all in any::<bool>(),
        ) {
            let got = apply(&content, &old, &new, replace_all, MAX);
            let want = reference(&content, &old, &new, replace_all);
            match (&got, &want) {
                (Ok(edited), Some(want)) => {
                    prop_assert_eq!(&edited.content, want);
                    prop_assert!(edited.first_line <= edited.last_line);
                    prop_assert!(edited.last_line <= edited.content.split('\n').count());
                }
                (Err(_), None) => {}
                _ => prop_assert!(false, "apply {:?} but the reference {:?}", got, want),
            }
        }
    }
}
