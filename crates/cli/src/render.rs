//! How diagnostics and errors look: one place for the human form and the `--json` form.

use murmur_manifest::Coded;
use murmur_manifest::diagnostic::Diagnostic;
use serde_json::json;

/// Prints diagnostics for people, on stderr, followed by a one-line count.
pub fn diagnostics_human(diagnostics: &[Diagnostic]) {
    for diagnostic in diagnostics {
        eprintln!("{diagnostic}\n");
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

/// A runtime or build failure, printed for people on stderr.
pub fn failure_human(code: &str, message: &str, hint: &str) {
    eprintln!("error[{code}]: {message}\n  hint: {hint}");
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
            "{:#}",
            json!({ "error": failure_json(code, message, hint) })
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
