//! Which version of an agent CLI is installed, and whether it can run under Murmur.
//!
//! What this module promises:
//!
//! - **The version is read, never asked for** ([`installed`]): nothing is executed to learn
//!   it (running the command before its containment is set up would run it unconfined). It is
//!   the `version` of the npm package the resolved command belongs to (the nearest
//!   `package.json` above it that names the dialect's package: `@anthropic-ai/claude-code`,
//!   `@openai/codex`), or, for Claude Code's own installer, the command's file name under a
//!   `versions/` directory (`~/.local/share/claude/versions/2.1.314`). Each `package.json` is
//!   read no further than [`MAX_PACKAGE_JSON`].
//! - **A version older than the lowest that runs is refused before anything starts**
//!   ([`too_old`], `E-RUN-036`), naming the version found, the lowest that works and why
//!   older ones fail. A CLI whose version cannot be read (another installer, a wrapper
//!   script) is run as it is: if it then fails, the run's error quotes what it printed.
//! - The lowest versions ([`LOWEST_CLAUDE_CODE`], [`LOWEST_CODEX`]) are the lowest proven to
//!   run under `scoped` against the provider emulator (see docs/process.md).

use std::fmt;
use std::io::Read;
use std::path::Path;

/// The lowest Claude Code that starts under `advisory` and `scoped`: older ones are built on
/// a runtime that aborts (`SIGABRT`, or `SIGILL` from its crash handler) when it cannot read
/// `/proc/self/maps`, which neither class lets a child read.
pub const LOWEST_CLAUDE_CODE: Version = Version(2, 1, 314);
/// The lowest Codex that accepts the switches Murmur turns its own tools off with: older ones
/// exit at once with `Unknown feature flag` (`unified_exec_tty`, …).
pub const LOWEST_CODEX: Version = Version(0, 154, 0);

/// The most of a `package.json` read.
pub const MAX_PACKAGE_JSON: u64 = 1 << 20;

/// A `major.minor.patch` version (a pre-release or build suffix is not compared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl Version {
    /// The version `text` starts with (`2.1.197`, `2.1.197-beta.1`, `0.171.0+build`); none
    /// unless it begins with three dot-separated numbers.
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().splitn(3, '.');
        let number = |part: &str| -> Option<u64> {
            (!part.is_empty() && part.len() <= 19 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        };
        let major = number(parts.next()?)?;
        let minor = number(parts.next()?)?;
        let rest = parts.next()?;
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if end < rest.len() && !rest[end..].starts_with(['-', '+']) {
            return None;
        }
        let patch = number(&rest[..end])?;
        Some(Version(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// One CLI's releases: its npm package, the lowest that runs under Murmur and why older ones
/// do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Releases {
    pub package: &'static str,
    pub lowest: Version,
    pub why: &'static str,
    /// Whether its own installer keeps each release as `versions/<version>`.
    pub versions_dir: bool,
}

/// Claude Code's.
pub const CLAUDE_CODE: Releases = Releases {
    package: "@anthropic-ai/claude-code",
    lowest: LOWEST_CLAUDE_CODE,
    why: "older releases are built on a runtime that aborts at start (SIGABRT) when it may not read /proc/self/maps, which `advisory` and `scoped` let no child read",
    versions_dir: true,
};

/// Codex's.
pub const CODEX: Releases = Releases {
    package: "@openai/codex",
    lowest: LOWEST_CODEX,
    why: "older releases do not know every feature switch Murmur turns Codex's own tools off with, and exit at once (`Unknown feature flag`)",
    versions_dir: false,
};

/// The version of the CLI at `path` (the resolved command), as its install says it; see the
/// module docs.
pub fn installed(path: &Path, releases: &Releases) -> Option<Version> {
    for dir in path.ancestors().skip(1) {
        let manifest = dir.join("package.json");
        let Some(text) = read_capped(&manifest) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if value.get("name").and_then(|n| n.as_str()) == Some(releases.package) {
            return value
                .get("version")
                .and_then(|v| v.as_str())
                .and_then(Version::parse);
        }
        if dir.file_name().is_some_and(|n| n == "node_modules") {
            break;
        }
    }
    // Claude Code's own installer keeps each release as `versions/<version>`.
    if releases.versions_dir
        && path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "versions")
    {
        return path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(Version::parse);
    }
    None
}

/// `E-RUN-036`: the CLI at `path` is older than the lowest that runs; the message and hint.
pub fn too_old(path: &Path, command: &str, releases: &Releases) -> Option<(String, String)> {
    let found = installed(path, releases)?;
    let Releases {
        package,
        lowest,
        why,
        ..
    } = releases;
    (found < *lowest).then(|| {
        (
            format!(
                "`{command}` ({}) is {package} {found}; `transport: process` needs {lowest} or newer: {why}",
                path.display(),
            ),
            format!(
                "update it (`npm install -g {package}@latest`, or `@{lowest}` at the least), or set `inference.command` to a newer install"
            ),
        )
    })
}

/// The text of `file` when it is a regular file of at most [`MAX_PACKAGE_JSON`] bytes.
fn read_capped(file: &Path) -> Option<String> {
    let opened = std::fs::File::open(file).ok()?;
    if !opened.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    opened
        .take(MAX_PACKAGE_JSON + 1)
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_PACKAGE_JSON).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order_as_numbers() {
        assert_eq!(Version::parse("2.1.197"), Some(Version(2, 1, 197)));
        assert_eq!(Version::parse(" 0.171.0\n"), Some(Version(0, 171, 0)));
        assert_eq!(Version::parse("2.1.314-beta.1"), Some(Version(2, 1, 314)));
        assert_eq!(Version::parse("1.2.3+build"), Some(Version(1, 2, 3)));
        for bad in [
            "",
            "2.1",
            "2.1.x",
            "v2.1.3",
            "2..3",
            "2.1.3.4",
            "2.1.3 (Claude Code)",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
        assert!(Version(2, 1, 197) < Version(2, 1, 314));
        assert!(Version(0, 99, 0) < Version(0, 154, 0));
        assert_eq!(Version(2, 1, 314).to_string(), "2.1.314");
    }

    /// An npm install's layout: `node_modules/<package>/bin/<command>` beside its
    /// `package.json`.
    fn npm_install(root: &Path, package: &str, version: &str, command: &str) -> std::path::PathBuf {
        let dir = root.join("node_modules").join(package);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(
            dir.join("package.json"),
            format!(r#"{{"name": "{package}", "version": "{version}"}}"#),
        )
        .unwrap();
        let bin = dir.join("bin").join(command);
        std::fs::write(&bin, "").unwrap();
        bin
    }

    #[test]
    fn the_version_is_read_from_the_install_and_an_old_one_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let old = npm_install(
            root.path(),
            "@anthropic-ai/claude-code",
            "2.1.197",
            "claude.exe",
        );
        assert_eq!(installed(&old, &CLAUDE_CODE), Some(Version(2, 1, 197)));
        let (message, hint) = too_old(&old, "claude", &CLAUDE_CODE).unwrap();
        assert!(
            message.contains("2.1.197") && message.contains("2.1.314"),
            "{message}"
        );
        assert!(message.contains("/proc/self/maps"), "{message}");
        assert!(hint.contains("@anthropic-ai/claude-code@latest"), "{hint}");

        let new = npm_install(root.path(), "@openai/codex", "0.171.0", "codex.js");
        assert_eq!(installed(&new, &CODEX), Some(Version(0, 171, 0)));
        assert_eq!(too_old(&new, "codex", &CODEX), None);
        // Another package's manifest is not the CLI's.
        assert_eq!(installed(&new, &CLAUDE_CODE), None);
    }

    #[test]
    fn claude_codes_own_installer_names_the_version_and_anything_else_is_unknown() {
        let root = tempfile::tempdir().unwrap();
        let versions = root.path().join("claude/versions");
        std::fs::create_dir_all(&versions).unwrap();
        let binary = versions.join("2.1.200");
        std::fs::write(&binary, "").unwrap();
        assert_eq!(installed(&binary, &CLAUDE_CODE), Some(Version(2, 1, 200)));
        assert!(too_old(&binary, "claude", &CLAUDE_CODE).is_some());
        let script = root.path().join("my-claude");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(installed(&script, &CLAUDE_CODE), None);
        assert_eq!(too_old(&script, "claude", &CLAUDE_CODE), None);
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_text_never_panics(text in ".{0,40}") {
            let _ = Version::parse(&text);
        }

        #[test]
        fn a_written_version_parses_back(a in 0u64..1_000_000, b in 0u64..1_000_000, c in 0u64..1_000_000) {
            let version = Version(a, b, c);
            proptest::prop_assert_eq!(Version::parse(&version.to_string()), Some(version));
        }
    }
}
