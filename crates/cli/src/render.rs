//! How `mur` output looks: diagnostics and errors in their human and `--json` forms, and the
//! one sanitiser every text from outside `mur` passes on its way to a terminal.
//!
//! Promise: text a component, a child process, a peer, a registry or a model produced is
//! printed through [`line`] (one line: a table cell, a name, a one-line message) or [`text`]
//! (several lines: an answer, a tool's output). Neither lets a character through that a
//! terminal acts on instead of showing: every C0 control (U+0000–U+001F, but `\n` and `\t` in
//! [`text`]), DEL (U+007F), every C1 control (U+0080–U+009F) and the bidirectional overrides and
//! isolates (U+202A–U+202E, U+2066–U+2069) are shown as `\u{HEX}`, the code point in
//! lowercase hexadecimal: `\u{1b}` for ESC, `\u{7}` for BEL, `\u{202e}` for RIGHT-TO-LEFT
//! OVERRIDE. `\r` is always escaped (it would let a line overwrite itself). Everything else
//! (backslashes included) is printed as it is, so plain text is unchanged, and escaping twice
//! changes nothing more.
//! Each character is judged alone: streamed text escapes the same however it is cut.
//!
//! `--json` output is exact JSON as `serde_json` writes it, with the same characters written as
//! `\uXXXX` escapes instead of raw ([`json`]): the parsed value is the same, and no raw control
//! reaches the terminal (`serde_json` escapes U+0000–U+001F itself, not DEL, C1 or bidi).

use std::borrow::Cow;
use std::fmt::Write as _;

use murmur_manifest::Coded;
use murmur_manifest::diagnostic::Diagnostic;
use serde_json::json;

/// Whether a terminal would act on `c` rather than show it: the C0 and C1 controls, DEL, and
/// the bidirectional overrides and isolates.
fn acted_on(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character `hidden` says to escape written as `\u{…}`.
fn escaped(text: &str, hidden: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(shown, "\\u{{{:x}}}", c as u32);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// Outside text for one line of a terminal: every control (`\n` and `\t` too), DEL, C1 control
/// and bidi override or isolate shown escaped (`\u{1b}`). See the module doc.
pub fn line(text: &str) -> Cow<'_, str> {
    escaped(text, acted_on)
}

/// Outside text of several lines for a terminal: as [`line`], but `\n` and `\t` kept.
pub fn text(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c != '\n' && c != '\t' && acted_on(c))
}

/// `value` as pretty JSON for stdout: exactly what `serde_json` writes, but DEL, the C1
/// controls and the bidi overrides and isolates (which it leaves raw, and which can only be
/// inside strings) written as `\uXXXX` escapes. The parsed value is the same.
pub fn json(value: &serde_json::Value) -> String {
    json_escaped(format!("{value:#}"))
}

/// `value` as compact JSON on one line, escaped as [`json`] escapes.
pub fn json_line(value: &serde_json::Value) -> String {
    json_escaped(value.to_string())
}

fn json_escaped(written: String) -> String {
    if !written.chars().any(|c| c != '\n' && acted_on(c)) {
        return written;
    }
    let mut shown = String::with_capacity(written.len() + 16);
    for c in written.chars() {
        // All of them are in the Basic Multilingual Plane: one `\uXXXX` each.
        if c != '\n' && acted_on(c) {
            let _ = write!(shown, "\\u{:04x}", c as u32);
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Prints diagnostics for people, on stderr, followed by a one-line count. Their messages may
/// quote a manifest or a component: they pass [`text`].
pub fn diagnostics_human(diagnostics: &[Diagnostic]) {
    for diagnostic in diagnostics {
        eprintln!("{}\n", text(&diagnostic.to_string()));
    }
}

/// `(errors, warnings)`.
pub fn counts(diagnostics: &[Diagnostic]) -> (usize, usize) {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    (errors, diagnostics.len() - errors)
}

/// A runtime or build failure, as a diagnostic-shaped JSON object.
pub fn failure_json(code: &str, message: &str, hint: &str) -> serde_json::Value {
    json!({"code": code, "severity": "error", "message": message, "hint": hint})
}

/// A runtime or build failure, printed for people on stderr. The message and hint may quote
/// outside text: they pass [`text`].
pub fn failure_human(code: &str, message: &str, hint: &str) {
    eprintln!(
        "error[{}]: {}\n  hint: {}",
        line(code),
        text(message),
        text(hint)
    );
}

/// A failure told both ways: on stderr for people, and (with `--json`) as
/// `{"error": {code, severity, message, hint}}` on stdout. Returns `exit`.
pub fn failure(
    json: bool,
    code: &str,
    message: &str,
    hint: &str,
    exit: crate::exit::Exit,
) -> crate::exit::Exit {
    failure_human(code, message, hint);
    if json {
        println!(
            "{}",
            self::json(&json!({ "error": failure_json(code, message, hint) }))
        );
    }
    exit
}

/// A coded error told both ways, as [`failure`] tells it.
pub fn coded(json: bool, error: &dyn Coded, exit: crate::exit::Exit) -> crate::exit::Exit {
    failure(json, error.code(), &error.message(), &error.hint(), exit)
}

/// A coded error as a diagnostic-shaped JSON object.
pub fn coded_json(error: &dyn Coded) -> serde_json::Value {
    failure_json(error.code(), &error.message(), &error.hint())
}

/// A coded error, printed for people on stderr.
pub fn coded_human(error: &dyn Coded) {
    failure_human(error.code(), &error.message(), &error.hint());
}

/// `n thing` / `n things`.
pub fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("{count} {word}")
    } else if let Some(stem) = word.strip_suffix('y') {
        format!("{count} {stem}ies")
    } else {
        format!("{count} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a terminal would act on: any control (but those `kept`), DEL, C1, bidi.
    fn acted_on_in(shown: &str, kept: &[char]) -> Option<char> {
        shown.chars().find(|c| !kept.contains(c) && acted_on(*c))
    }

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        let hostile = "ok\x1b]52;c;cm0gLXJm\x07 \x1b]0;owned\x07\x1b[2J\x1b[H done";
        assert_eq!(
            line(hostile),
            "ok\\u{1b}]52;c;cm0gLXJm\\u{7} \\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{1b}[H done"
        );
        assert_eq!(text(hostile), line(hostile));
    }

    #[test]
    fn each_kind_of_control_is_escaped() {
        for (raw, shown) in [
            ("\0", "\\u{0}"),
            ("\r", "\\u{d}"),
            ("\x7f", "\\u{7f}"),
            ("\u{9b}", "\\u{9b}"),
            ("\u{85}", "\\u{85}"),
            ("\u{202e}", "\\u{202e}"),
            ("\u{2066}", "\\u{2066}"),
            ("\u{2069}", "\\u{2069}"),
        ] {
            assert_eq!(line(raw), shown);
            assert_eq!(text(raw), shown);
        }
    }

    #[test]
    fn lines_and_tabs_are_kept_only_in_text() {
        assert_eq!(text("a\n\tb\r\n"), "a\n\tb\\u{d}\n");
        assert_eq!(line("a\n\tb"), "a\\u{a}\\u{9}b");
    }

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        let plain = "naïve 日本語 \\u{1b} C:\\dir — ok";
        assert!(matches!(line(plain), Cow::Borrowed(s) if s == plain));
        assert!(matches!(text(plain), Cow::Borrowed(s) if s == plain));
    }

    #[test]
    fn json_stays_the_same_value_with_no_raw_control() {
        let value = json!({"summary": "\x1b]0;t\x07\x7f\u{9b}\u{202e}x\n", "n": 1});
        for written in [json(&value), json_line(&value)] {
            assert_eq!(acted_on_in(&written, &['\n']), None, "{written}");
            let back: serde_json::Value = serde_json::from_str(&written).unwrap();
            assert_eq!(back, value);
        }
        assert!(json_line(&value).contains(r#""\u001b]0;t\u0007\u007f\u009b\u202ex\n""#));
        let plain = json!({"a": "b"});
        assert_eq!(json(&plain), format!("{plain:#}"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn no_input_gets_a_control_through(input in "(\\PC|\\p{Cc}|[\u{202a}-\u{202e}\u{2066}-\u{2069}])*") {
            let one = line(&input);
            prop_assert_eq!(acted_on_in(&one, &[]), None);
            let many = text(&input);
            prop_assert_eq!(acted_on_in(&many, &['\n', '\t']), None);
            // Escaping twice changes nothing more; lines are kept as they came.
            prop_assert_eq!(line(&one), one.clone());
            prop_assert_eq!(text(&many), many.clone());
            prop_assert_eq!(many.matches('\n').count(), input.matches('\n').count());
        }

        #[test]
        fn text_without_controls_is_unchanged(input in "[^\\p{Cc}\u{202a}-\u{202e}\u{2066}-\u{2069}]*") {
            prop_assert_eq!(line(&input), input.as_str());
            prop_assert_eq!(text(&input), input.as_str());
        }

        #[test]
        fn any_bytes_read_lossily_come_out_clean(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let input = String::from_utf8_lossy(&bytes);
            prop_assert_eq!(acted_on_in(&text(&input), &['\n', '\t']), None);
            let value = json!({ "text": input });
            let written = json(&value);
            prop_assert_eq!(acted_on_in(&written, &['\n']), None);
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&written).unwrap(), value);
        }
    }
}
