//! `write-file`: write (or append) UTF-8 text to a file in the session workdir, creating
//! parent directories as needed.
//!
//! The path is relative to the session workdir (the component's `.`).

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

use murmur_guest::tool::{StateEffect, Tool, ToolInput, ToolResult};
use murmur_guest::workdir::{file_resource_id, io_failure};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
    /// Append to the file instead of replacing it.
    #[serde(default)]
    append: bool,
}

struct WriteFile;

impl Tool for WriteFile {
    fn run(input: ToolInput) -> ToolResult {
        let args: Args = match input.json() {
            Ok(args) => args,
            Err(failed) => return failed,
        };
        write(&args)
    }
}

murmur_guest::export_tool!(WriteFile);

fn write(args: &Args) -> ToolResult {
    let path = args.path.as_str();
    if path.trim().is_empty() {
        return ToolResult::failed("invalid input: `path` is empty");
    }
    if Path::new(path).is_absolute() {
        return ToolResult::failed(format!(
            "cannot write {path}: an absolute path is not permitted; paths are relative to the \
             session workdir"
        ));
    }
    if path.ends_with('/') {
        return ToolResult::failed(format!("cannot write {path}: it names a directory"));
    }
    let resource = file_resource_id(path);
    let result = match write_bytes(path, args.content.as_bytes(), args.append) {
        Ok(()) => {
            let n = args.content.len();
            let verb = if args.append { "appended" } else { "wrote" };
            let unit = if n == 1 { "byte" } else { "bytes" };
            let message = format!("{verb} {n} {unit} to {path}");
            ToolResult::passed(message.clone()).summary(message)
        }
        Err(e) => ToolResult::failed(io_failure("write", path, &e)),
    };
    result
        .state_effect(StateEffect::Mutate)
        .resource_id(resource)
}

fn write_bytes(path: &str, content: &[u8], append: bool) -> std::io::Result<()> {
    if let Some(parent) = Path::new(path).parent()
        && !parent.as_os_str().is_empty()
    {
        fs::create_dir_all(parent)?;
    }
    if Path::new(path).is_dir() {
        return Err(std::io::Error::new(
            ErrorKind::IsADirectory,
            "it is a directory, not a file",
        ));
    }
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    file.write_all(content)?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_appends_and_creates_parents() {
        let dir = std::env::temp_dir().join(format!("write-file-test-{}", std::process::id()));
        let file = dir.join("a/b/c.txt");
        let path = file.to_str().unwrap();
        write_bytes(path, b"one", false).unwrap();
        write_bytes(path, b"two", true).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "onetwo");
        write_bytes(path, b"3", false).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "3");
        let err = write_bytes(dir.join("a").to_str().unwrap(), b"x", false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::IsADirectory);
        fs::remove_dir_all(&dir).unwrap();
    }
}
