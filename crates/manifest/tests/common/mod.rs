//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use murmur_manifest::{CapsuleManifest, Diagnostic, Loaded, Manifest, load, load_str};

/// An environment with nothing set.
pub fn no_env(_: &str) -> Option<String> {
    None
}

/// A manifest written to `murmur.yaml` in a fresh directory.
pub struct Written {
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
}

pub fn write(text: &str) -> Written {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("murmur.yaml");
    std::fs::write(&file, text).expect("writing the manifest");
    Written { dir, file }
}

impl Written {
    pub fn load(&self) -> Loaded<Manifest> {
        load(&self.file, &no_env)
    }

    /// Writes `text` to `relative` inside the manifest's directory.
    pub fn add(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("creating directories");
        }
        std::fs::write(&path, text).expect("writing a file");
        path
    }
}

/// Loads `text` as if it were `murmur.yaml` in an empty directory.
pub fn load_text(text: &str) -> Loaded<Manifest> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    load_str(text, &dir.path().join("murmur.yaml"), &no_env)
}

/// `text` loaded as [`load_text`] does, failing unless it is a capsule with no diagnostic.
pub fn clean_capsule(text: &str) -> CapsuleManifest {
    let loaded = load_text(text);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let Some(Manifest::Capsule(capsule)) = loaded.manifest else {
        panic!("not a capsule")
    };
    capsule
}

/// The one diagnostic with `code`, failing if there is none or more than one.
pub fn only<T>(loaded: &Loaded<T>, code: &str) -> Diagnostic {
    let matching: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == code)
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "expected exactly one {code}, got: {:#?}",
        loaded.diagnostics
    );
    matching[0].clone()
}

/// The codes of every diagnostic, in order.
pub fn codes<T>(loaded: &Loaded<T>) -> Vec<&'static str> {
    loaded.diagnostics.iter().map(|d| d.code).collect()
}

/// The 1-based line and column where `needle` first occurs in `text`.
pub fn position(text: &str, needle: &str) -> (usize, usize) {
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in the text"));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Asserts `d` points at where `needle` starts in `text`.
pub fn assert_at(d: &Diagnostic, text: &str, needle: &str) {
    let (line, column) = position(text, needle);
    assert_eq!(
        (d.line, d.column),
        (Some(line), Some(column)),
        "{d} should point at `{needle}`"
    );
}

/// Asserts the hint mentions `gist`.
pub fn assert_hint(d: &Diagnostic, gist: &str) {
    let hint = d
        .hint
        .as_deref()
        .unwrap_or_else(|| panic!("{d} has no hint"));
    assert!(hint.contains(gist), "hint `{hint}` should mention `{gist}`");
}

pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}
