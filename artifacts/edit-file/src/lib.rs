//! `edit-file`: replace an exact string in a UTF-8 text file of the workspace.
//!
//! Promises (the model reads the short form in `murmur.yaml`; users in docs/tools.md):
//! - Input `{path, old, new, replace_all?, expected_sha256?}`. `path` is relative to the
//!   workspace (the component's `.`); an absolute path is refused here, and `..` out of the
//!   workspace or a link planted to point outside it is refused by the host's WASI.
//! - Either the file is replaced whole by the edited text, or it is left exactly as it was and
//!   the result is `failed`, saying why: `old` empty, absent (with the lines holding its first
//!   line, as a hint) or not unique without `replace_all` (how many matches, on which lines);
//!   a stale `expected_sha256` (both digests named); a file that is not UTF-8, not a regular
//!   file, a symbolic link, or over [`MAX_FILE`]; `old`/`new` over [`MAX_TEXT`]; an edited
//!   text that would pass [`MAX_FILE`].
//! - The new text is written to a hidden temp file in the same directory, flushed, then renamed
//!   over the file, so a reader (or a call cut short) sees the old file or the new one, never
//!   a part. WASI gives a component no way to read or set a file's mode, so the renamed file has
//!   the mode the host gives a new file (0666 less `mur`'s umask, so 0644 under the usual 022).
//! - Line endings as [`replace`] says: an LF edit in a CRLF file is made with CRLF.
//! - A passed result reads `edited PATH: N replacement(s), lines A-B` and the numbered edited
//!   lines with a few after; metadata `sha256` is the new content's hex SHA-256. Every result
//!   that names a path carries `state_effect: mutate` and `resource_id: file:<path>`.
//!
//! The pure edit lives in [`replace`]; [`edit`] does the file work against a root directory, so
//! both run on the host in tests.

pub mod replace;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use murmur_guest::tool::{StateEffect, ToolResult};
use murmur_guest::workdir::{file_resource_id, io_failure};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The largest file edit-file reads, and the largest it writes.
pub const MAX_FILE: usize = 16 * 1024 * 1024;
/// The largest `old` or `new`.
pub const MAX_TEXT: usize = 1024 * 1024;
/// How many edited lines the result shows, and how many lines after them.
const SHOWN_EDITED: usize = 12;
const SHOWN_AFTER: usize = 3;

/// The tool's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pub path: String,
    pub old: String,
    pub new: String,
    #[serde(default)]
    pub replace_all: bool,
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

#[cfg(target_arch = "wasm32")]
mod export {
    use murmur_guest::tool::{Tool, ToolInput, ToolResult};

    struct EditFile;

    impl Tool for EditFile {
        fn run(input: ToolInput) -> ToolResult {
            let args: super::Args = match input.json() {
                Ok(args) => args,
                Err(failed) => return failed,
            };
            super::edit(std::path::Path::new("."), &args)
        }
    }

    murmur_guest::export_tool!(EditFile);
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Make the edit `args` asks for on the file at `args.path` under `root` (the workspace).
pub fn edit(root: &Path, args: &Args) -> ToolResult {
    let path = args.path.as_str();
    if path.trim().is_empty() {
        return ToolResult::failed("invalid input: `path` is empty");
    }
    if Path::new(path).is_absolute() {
        return ToolResult::failed(format!(
            "cannot edit {path}: an absolute path is not permitted; paths are relative to the \
             workspace"
        ));
    }
    let with_meta = |r: ToolResult| {
        r.state_effect(StateEffect::Mutate)
            .resource_id(file_resource_id(path))
    };
    match edit_checked(root, path, args) {
        Ok(result) => with_meta(result),
        Err(message) => with_meta(ToolResult::failed(message)),
    }
}

fn edit_checked(root: &Path, path: &str, args: &Args) -> Result<ToolResult, String> {
    let refuse = |why: String| format!("cannot edit {path}: {why}");
    if args.old.is_empty() {
        return Err(refuse(
            "`old` is empty: give the exact text to replace".into(),
        ));
    }
    for (field, text) in [("old", &args.old), ("new", &args.new)] {
        if text.len() > MAX_TEXT {
            return Err(refuse(format!(
                "`{field}` is {} bytes, over the {MAX_TEXT}-byte limit: make smaller edits",
                text.len()
            )));
        }
    }
    let expected = match &args.expected_sha256 {
        Some(hex) => {
            let hex = hex.trim().to_ascii_lowercase();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "invalid input: `expected_sha256` must be 64 hex digits, got {:?}",
                    args.expected_sha256.as_deref().unwrap_or_default()
                ));
            }
            Some(hex)
        }
        None => None,
    };

    let full = root.join(path);
    let meta = fs::metadata(&full).map_err(|e| {
        // A link the host refused to follow: say it is one, and where it leads.
        let is_link = fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && e.kind() == ErrorKind::PermissionDenied {
            refuse(
                "it is a symbolic link that leads outside the workspace (permission denied)".into(),
            )
        } else {
            io_failure("edit", path, &e)
        }
    })?;
    if meta.is_dir() {
        return Err(refuse("it is a directory, not a file".into()));
    }
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    if fs::symlink_metadata(&full)
        .map_err(|e| io_failure("edit", path, &e))?
        .file_type()
        .is_symlink()
    {
        let target = fs::read_link(&full)
            .map(|t| format!(" (to {})", t.display()))
            .unwrap_or_default();
        return Err(refuse(format!(
            "it is a symbolic link{target}; edit-file edits regular files: give the path of \
             the file it points to"
        )));
    }
    if meta.len() > MAX_FILE as u64 {
        return Err(refuse(format!(
            "it is {} bytes, over the {MAX_FILE}-byte limit of edit-file",
            meta.len()
        )));
    }
    let bytes = read_bounded(&full).map_err(|e| io_failure("edit", path, &e))?;
    if bytes.len() > MAX_FILE {
        return Err(refuse(format!(
            "it grew past the {MAX_FILE}-byte limit of edit-file while being read"
        )));
    }
    let digest = sha256_hex(&bytes);
    if let Some(expected) = expected
        && expected != digest
    {
        return Err(refuse(format!(
            "it changed since you read it: `expected_sha256` is {expected} but the file's \
             sha256 is {digest}; read it again and redo the edit"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "it is not UTF-8 text (invalid byte at offset {}); edit-file edits text files only",
            e.utf8_error().valid_up_to()
        ))
    })?;

    let edited = replace::apply(&text, &args.old, &args.new, args.replace_all, MAX_FILE)
        .map_err(|refusal| refuse(refusal.to_string()))?;
    drop(text);

    write_whole(&full, edited.content.as_bytes()).map_err(|e| io_failure("edit", path, &e))?;

    let n = edited.replacements;
    let lines = if edited.first_line == edited.last_line {
        format!("line {}", edited.first_line)
    } else {
        format!("lines {}-{}", edited.first_line, edited.last_line)
    };
    let summary = format!(
        "edited {path}: {n} replacement{}, {lines}",
        if n == 1 { "" } else { "s" }
    );
    let crlf_note = if edited.crlf {
        " (CRLF line endings kept)"
    } else {
        ""
    };
    let shown = replace::context(
        &edited.content,
        edited.first_line,
        edited.last_line,
        SHOWN_EDITED,
        SHOWN_AFTER,
    );
    let new_digest = sha256_hex(edited.content.as_bytes());
    Ok(ToolResult::passed(format!("{summary}{crlf_note}\n{shown}"))
        .summary(summary)
        .metadata("sha256", new_digest))
}

/// The file's bytes, reading at most one byte past [`MAX_FILE`].
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(MAX_FILE as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Replace the file at `path` with `content`: a hidden temp file in the same directory,
/// written and flushed, then renamed over it. On failure the temp file is removed and the
/// file is as it was.
pub fn write_whole(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let (temp, mut file) = create_temp(path)?;
    let written = file
        .write_all(content)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            fs::rename(&temp, path)
        });
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// A new hidden file beside `path`: `.NAME.edit-file-NNNN.tmp`.
fn create_temp(path: &Path) -> std::io::Result<(PathBuf, File)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    for attempt in 0..100u32 {
        let temp = dir.join(format!(
            ".{name}.edit-file-{:08x}.tmp",
            seed.wrapping_add(attempt)
        ));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        ErrorKind::AlreadyExists,
        "could not create a temp file beside it",
    ))
}

#[cfg(test)]
mod tests;
