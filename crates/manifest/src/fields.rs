//! Rules shared by every manifest and artifact entry: names, versions, URLs, file paths, and
//! an empty value read as an absent key.

use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, code};
use crate::source::join_key;

/// Whether `name` can be a variable: letters, digits, `_`, not starting with a digit.
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `E-MAN-004` when `name` (at `holder.name`) is empty. `what` names the thing, as
/// "the manifest" or "artifact entry 2".
pub(crate) fn check_name(name: &str, holder: &str, what: &str) -> Option<Diagnostic> {
    name.trim().is_empty().then(|| {
        Diagnostic::new(code::E_MAN_004, format!("{what} has no `name`"))
            .hint("add `name:` with a short identifier, such as `name: reviewer`")
            .at_path(join_key(holder, "name"))
    })
}

/// `E-MAN-005` when `version` is empty, `E-MAN-006` when it is not a semantic version.
pub(crate) fn check_version(version: &str, holder: &str, what: &str) -> Option<Diagnostic> {
    let path = join_key(holder, "version");
    if version.trim().is_empty() {
        return Some(
            Diagnostic::new(code::E_MAN_005, format!("{what} has no `version`"))
                .hint("add `version: \"1.0.0\"` (quoted, a semantic version)")
                .at_path(path),
        );
    }
    semver::Version::parse(version).err().map(|e| {
        Diagnostic::new(
            code::E_MAN_006,
            format!("{what} has version `{version}`, which is not a semantic version ({e})"),
        )
        .hint("write MAJOR.MINOR.PATCH, quoted, such as `version: \"1.0.0\"`")
        .at_path(path)
    })
}

/// `E-MAN-024` when `text` (at `path`) is not an http or https URL with a host.
pub(crate) fn check_http_url(text: &str, path: &str) -> Option<Diagnostic> {
    let problem = match url::Url::parse(text) {
        Err(e) => format!("it cannot be parsed ({e})"),
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            format!("its scheme is `{}`", url.scheme())
        }
        Ok(url) if url.host().is_none() => "it has no host".to_string(),
        Ok(_) => return None,
    };
    Some(
        Diagnostic::new(
            code::E_MAN_024,
            format!("`{path}` is `{text}`, which is not an http or https URL: {problem}"),
        )
        .hint("write a full URL such as `https://api.example.com`")
        .at_path(path),
    )
}

/// `E-MAN-015` when `file` (the value of `field`, naming a file of the manifest's directory) is
/// not a relative path of plain names: absolute, empty, or climbing with `..`. What an artifact
/// loads must stay inside its directory, where an archive's pins cover it.
pub(crate) fn check_inside_dir(file: &std::path::Path, field: &str) -> Option<Diagnostic> {
    use std::path::Component;
    let plain = file
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && file.components().any(|c| matches!(c, Component::Normal(_)));
    (!plain).then(|| {
        Diagnostic::new(
            code::E_MAN_015,
            format!(
                "`{field}` is `{}`, which is not a file inside the manifest's directory",
                file.display().to_string().escape_debug()
            ),
        )
        .hint(format!(
            "write `{field}:` relative to the directory of this murmur.yaml, without `..`, \
             such as `{field}: component.wasm`, and keep the file there"
        ))
        .at_path(field)
    })
}

/// `relative` resolved against `dir`, without `.` components.
pub(crate) fn resolve_path(dir: &Path, relative: &Path) -> PathBuf {
    dir.join(relative).components().collect()
}

/// An empty value means the same as an absent key.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(<Option<T> as serde::Deserialize>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_must_be_semver() {
        assert!(check_version("1.0.0", "", "x").is_none());
        assert!(check_version("0.1.0-beta.1+build", "", "x").is_none());
        assert_eq!(
            check_version("1.0", "", "x").map(|d| d.code),
            Some("E-MAN-006")
        );
        assert_eq!(
            check_version(" ", "", "x").map(|d| d.code),
            Some("E-MAN-005")
        );
    }

    #[test]
    fn urls_must_be_http() {
        assert!(check_http_url("https://api.example.com", "e").is_none());
        assert!(check_http_url("http://127.0.0.1:4318/v1", "e").is_none());
        assert_eq!(
            check_http_url("ftp://x", "e").map(|d| d.code),
            Some("E-MAN-024")
        );
        assert_eq!(
            check_http_url("api.example.com", "e").map(|d| d.code),
            Some("E-MAN-024")
        );
    }
}
