//! Helpers for tools that work on files of the session workdir.

use std::io::ErrorKind;

/// The directory of the workspace where Murmur's own files go (a cut shell output, a tool's
/// result too large to hand back inline): the runtime keeps the same name.
pub const SCRATCH: &str = ".murmur-scratch";

/// The `resource_id` of a file: `file:` and the path with `.` segments and repeated slashes
/// dropped, so `./notes.md` and `notes.md` name the same resource.
pub fn file_resource_id(path: &str) -> String {
    format!("file:{}", normalize(path))
}

/// `path` with `.` segments and repeated slashes dropped; `.` for the workdir itself.
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// A message for a failed file operation a model can act on: `cannot <verb> <path>: <why>`,
/// with a reminder that paths stay inside the workdir when the path tried to climb out.
pub fn io_failure(verb: &str, path: &str, error: &std::io::Error) -> String {
    let what = match error.kind() {
        ErrorKind::NotFound => "no such file or directory".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => error.to_string(),
    };
    let hint = if path.split('/').any(|part| part == "..") {
        " (paths are relative to the session workdir and cannot leave it)"
    } else {
        ""
    };
    format!("cannot {verb} {path}: {what}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_strips_dot_segments_and_slashes() {
        assert_eq!(normalize("./notes.md"), "notes.md");
        assert_eq!(normalize("a//b/./c"), "a/b/c");
        assert_eq!(normalize("././a/"), "a");
        assert_eq!(normalize("/etc//passwd"), "/etc/passwd");
        assert_eq!(normalize("./"), ".");
        assert_eq!(normalize("../x"), "../x");
        assert_eq!(file_resource_id("./out//a.txt"), "file:out/a.txt");
    }

    #[test]
    fn failures_name_the_path_and_warn_about_climbing_out() {
        let missing = std::io::Error::from(ErrorKind::NotFound);
        assert_eq!(
            io_failure("read", "notes.md", &missing),
            "cannot read notes.md: no such file or directory"
        );
        assert!(io_failure("write", "../x", &missing).contains("cannot leave it"));
    }
}
