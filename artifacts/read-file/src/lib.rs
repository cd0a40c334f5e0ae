//! `read-file`: read a UTF-8 text file from the session workdir, optionally a window of its
//! lines.
//!
//! The path is relative to the session workdir (the component's `.`). Content up to 256 KiB
//! comes back inline in `data`; a larger window is written to `.murmur-scratch/results/` in the
//! workdir and returned by `data-path` (cut at 10 MiB, the most the runtime reads, and then
//! marked `truncated`).

use std::fs;
use std::path::Path;

use murmur_guest::tool::{StateEffect, Status, Tool, ToolInput, ToolResult};
use murmur_guest::workdir::{SCRATCH, file_resource_id, io_failure, normalize};
use serde::Deserialize;

/// Content larger than this goes back by file rather than inline.
const INLINE_MAX: usize = 256 * 1024;
/// The most the runtime reads from a `data-path` file.
const DATA_PATH_MAX: usize = 10 * 1024 * 1024;
/// Where large results are written, relative to the workdir: `results/` of Murmur's scratch
/// directory.
fn results_dir() -> String {
    format!("{SCRATCH}/results")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    /// First line to return, 1-based.
    #[serde(default)]
    offset: Option<u64>,
    /// Most lines to return.
    #[serde(default)]
    limit: Option<u64>,
}

struct ReadFile;

impl Tool for ReadFile {
    fn run(input: ToolInput) -> ToolResult {
        let args: Args = match input.json() {
            Ok(args) => args,
            Err(failed) => return failed,
        };
        read(&args)
    }
}

murmur_guest::export_tool!(ReadFile);

fn read(args: &Args) -> ToolResult {
    let path = args.path.as_str();
    if path.trim().is_empty() {
        return ToolResult::failed("invalid input: `path` is empty");
    }
    if Path::new(path).is_absolute() {
        return ToolResult::failed(format!(
            "cannot read {path}: an absolute path is not permitted; paths are relative to the \
             session workdir"
        ));
    }
    let offset = args.offset.unwrap_or(1);
    if offset == 0 {
        return ToolResult::failed("invalid input: `offset` is a 1-based line number, not 0");
    }
    let resource = file_resource_id(path);
    let with_meta = |r: ToolResult| {
        r.state_effect(StateEffect::Read)
            .resource_id(resource.clone())
    };

    let bytes = match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return with_meta(ToolResult::failed(format!(
                "cannot read {path}: it is a directory, not a file"
            )));
        }
        Ok(_) => match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => return with_meta(ToolResult::failed(io_failure("read", path, &e))),
        },
        Err(e) => return with_meta(ToolResult::failed(io_failure("read", path, &e))),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return with_meta(ToolResult::failed(format!(
                "cannot read {path}: it is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )));
        }
    };

    let window = Window::of(&text, offset, args.limit);
    let summary = window.summary(path);
    let content = &text[window.start..window.end];
    if content.len() <= INLINE_MAX {
        return with_meta(ToolResult::passed(content).summary(summary));
    }

    // Too large to carry inline: hand it over by file.
    let (content, truncated) = cut(content, DATA_PATH_MAX);
    match write_result(path, content) {
        Ok(data_path) => {
            let summary = if truncated {
                format!("{summary} (cut to {} bytes)", content.len())
            } else {
                summary
            };
            with_meta(
                ToolResult::new(Status::Passed)
                    .summary(summary)
                    .data_path(data_path)
                    .truncated(truncated),
            )
        }
        Err(e) => with_meta(ToolResult::error(format!(
            "read {path} but could not write its {} bytes to {}: {e}",
            content.len(),
            results_dir()
        ))),
    }
}

/// A window of whole lines, as byte offsets into the text.
struct Window {
    start: usize,
    end: usize,
    /// First line returned (1-based) and how many.
    first: u64,
    count: u64,
    total: u64,
}

impl Window {
    fn of(text: &str, offset: u64, limit: Option<u64>) -> Window {
        let mut start = text.len();
        let mut end = text.len();
        let mut count = 0;
        let mut total = 0;
        let mut pos = 0;
        for line in text.split_inclusive('\n') {
            total += 1;
            if total == offset {
                start = pos;
            }
            pos += line.len();
            if total >= offset && limit.is_none_or(|l| count < l) {
                count += 1;
                end = pos;
            }
        }
        if count == 0 {
            start = text.len();
            end = text.len();
        }
        Window {
            start,
            end,
            first: offset,
            count,
            total,
        }
    }

    fn summary(&self, path: &str) -> String {
        let lines = |n: u64| if n == 1 { "line" } else { "lines" };
        if self.count == self.total {
            format!("read {} {} of {path}", self.count, lines(self.count))
        } else if self.count == 0 {
            format!(
                "read 0 lines of {path}: it has {} {}, none from line {}",
                self.total,
                lines(self.total),
                self.first
            )
        } else {
            format!(
                "read {} {} of {path} (lines {}-{} of {})",
                self.count,
                lines(self.count),
                self.first,
                self.first + self.count - 1,
                self.total
            )
        }
    }
}

/// At most `max` bytes of `s`, cut at a line end when there is one (else at a char boundary),
/// and whether anything was cut.
fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(nl) = s[..end].rfind('\n') {
        end = nl + 1;
    }
    (&s[..end], true)
}

/// Write `content` under `.murmur-scratch/results/` and return its workdir-relative name.
fn write_result(path: &str, content: &str) -> std::io::Result<String> {
    fs::create_dir_all(results_dir())?;
    let stem: String = normalize(path)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // ASCII only by now, so any byte index is a char boundary.
    let stem = stem.trim_start_matches('.');
    let stem = &stem[stem.len().saturating_sub(64)..];
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = format!("{}/read-file-{nanos}-{stem}", results_dir());
    fs::write(&name, content)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_whole_file_and_slices() {
        let text = "a\nb\nc\n";
        let w = Window::of(text, 1, None);
        assert_eq!(&text[w.start..w.end], text);
        assert_eq!(w.summary("f"), "read 3 lines of f");

        let w = Window::of(text, 2, Some(1));
        assert_eq!(&text[w.start..w.end], "b\n");
        assert_eq!(w.summary("f"), "read 1 line of f (lines 2-2 of 3)");

        let w = Window::of(text, 2, None);
        assert_eq!(&text[w.start..w.end], "b\nc\n");

        let w = Window::of(text, 9, None);
        assert_eq!(&text[w.start..w.end], "");
        assert_eq!(
            w.summary("f"),
            "read 0 lines of f: it has 3 lines, none from line 9"
        );

        let w = Window::of("x\ny", 2, Some(5));
        assert_eq!(w.count, 1);
        assert_eq!(&"x\ny"[w.start..w.end], "y");

        let w = Window::of("", 1, None);
        assert_eq!(w.summary("e"), "read 0 lines of e");
    }

    #[test]
    fn cut_prefers_line_ends_and_char_boundaries() {
        assert_eq!(cut("abc", 10), ("abc", false));
        assert_eq!(cut("ab\ncd\nef", 7), ("ab\ncd\n", true));
        assert_eq!(cut("ééé", 3), ("é", true));
    }
}
