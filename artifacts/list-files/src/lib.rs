//! `list-files`: list the entries of the workspace that match a glob, sorted, bounded, each with
//! its kind and size.
//!
//! What it promises:
//! - **Input** `{pattern?, path?, max?, hidden?, no_ignore?}` (see [`Args`]). `path` is a
//!   directory relative to the workspace (the component's `.`; default `.`); an absolute path is
//!   refused here, and a path that leaves the workspace (`..` above it, or through a link that
//!   points out of it) is refused by the host's WASI, the failure naming the path.
//! - **Matching.** `pattern` (default `**`) is a glob matched against each entry's path
//!   relative to `path`: `*`, `?` and `[...]` never cross a `/`, `**` does, `{a,b}` picks
//!   either. A pattern that is not a valid glob is a failed result naming it and why.
//! - **What is walked.** The tree under `path`, skipping what the `.gitignore`, `.ignore` and
//!   `.git/info/exclude` files on the way from the workspace root ignore (with or without a
//!   `.git` directory) unless `no_ignore`, and hidden entries (names starting with `.`) unless
//!   `hidden`; `.git` itself never. Links are listed as links and never followed, not even when
//!   `path` names one.
//! - **Output.** One line per entry, `kind size path`: kind `file`, `dir`, `link` or `other`,
//!   size in bytes for a file and `-` otherwise, path relative to the workspace (so it can be
//!   handed to `read-file`; a name with control characters is shown quoted and escaped).
//!   Entries come sorted by path, component by component (a directory's entries right after
//!   it). Then a last line saying how many entries matched and, when bounded, how many more
//!   were not listed.
//! - **Bounds.** At most `max` entries (default 500, at most 5000) and 256 KiB of text; the
//!   walk looks at no more than [`VISIT_MAX`] entries and says so when it stopped early.
//!   Memory stays bounded by what is listed, whatever the size of the tree.
//! - **Metadata.** `state_effect: read`, `resource_id: list:<normalized path>:<pattern>`.

use std::borrow::Cow;
use std::fs;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
#[cfg(target_family = "wasm")]
use murmur_guest::tool::Tool;
use murmur_guest::tool::{StateEffect, ToolInput, ToolResult};
use murmur_guest::workdir::{io_failure, normalize};
use serde::Deserialize;

/// Entries listed when the input gives no `max`.
pub const DEFAULT_MAX: u64 = 500;
/// The largest `max` accepted.
pub const MAX_MAX: u64 = 5000;
/// The most text handed back inline; entries past it are counted, not listed.
pub const TEXT_MAX: usize = 256 * 1024;
/// The most entries the walk looks at before it stops and says so.
pub const VISIT_MAX: u64 = 200_000;

/// The tool's input.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Glob over paths relative to `path`; default `**`.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Directory to list, relative to the workspace; default `.`.
    #[serde(default)]
    pub path: Option<String>,
    /// Most entries to list; default [`DEFAULT_MAX`], at most [`MAX_MAX`].
    #[serde(default)]
    pub max: Option<u64>,
    /// Also list hidden entries.
    #[serde(default)]
    pub hidden: bool,
    /// Also list what ignore files ignore.
    #[serde(default)]
    pub no_ignore: bool,
}

/// What an entry is, as listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    /// A fifo, socket or device.
    Other,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Link => "link",
            Kind::Other => "other",
        }
    }
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Bytes, for a file.
    pub size: Option<u64>,
    /// Relative to the workspace.
    pub path: PathBuf,
}

/// The result of a listing.
#[derive(Debug, Default)]
pub struct Listing {
    /// The entries listed, sorted.
    pub entries: Vec<Entry>,
    /// Entries that matched but were not listed (past `max` or the text bound).
    pub more: u64,
    /// Whether the walk stopped at [`VISIT_MAX`] before the end of the tree.
    pub stopped_early: bool,
    /// Entries the walk could not read.
    pub unreadable: u64,
    /// Whether the walk reached `path` itself (not when an ignore file or the hidden rule
    /// skips it).
    pub reached: bool,
}

/// A failed listing: the message the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// The glob `pattern` compiles to, or a refusal naming it and why.
pub fn compile(pattern: &str) -> Result<GlobMatcher, Refusal> {
    if pattern.is_empty() {
        return Err(Refusal(
            "invalid input: `pattern` is empty; leave it out to list everything".into(),
        ));
    }
    if pattern.starts_with('/') {
        return Err(Refusal(format!(
            "invalid input: `pattern` {pattern:?} starts with `/`; it is matched against paths \
             relative to `path`, so drop the leading `/`"
        )));
    }
    let trimmed = pattern.trim_start_matches("./");
    GlobBuilder::new(if trimmed.is_empty() { "**" } else { trimmed })
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| {
            Refusal(format!(
                "invalid input: `pattern` {pattern:?} is not a valid glob: {}",
                e.kind()
            ))
        })
}

/// `path` resolved lexically: `.` segments dropped, `a/..` pairs folded. `None` when a `..`
/// climbs above the workspace (that path is left to the host to refuse).
fn fold(path: &str) -> Option<PathBuf> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.iter().collect())
}

/// Lists what `args` asks for, `base` being the workspace (`.` inside the component).
pub fn list(base: &Path, args: &Args) -> Result<Listing, Refusal> {
    let path = args.path.as_deref().unwrap_or(".");
    if path.trim().is_empty() {
        return Err(Refusal(
            "invalid input: `path` is empty; leave it out to list the workspace".into(),
        ));
    }
    if Path::new(path).is_absolute() {
        return Err(Refusal(format!(
            "cannot list {path}: an absolute path is not permitted; paths are relative to the \
             workspace"
        )));
    }
    let max = args.max.unwrap_or(DEFAULT_MAX);
    if max == 0 || max > MAX_MAX {
        return Err(Refusal(format!(
            "invalid input: `max` is {max}; it must be between 1 and {MAX_MAX}"
        )));
    }
    let glob = compile(args.pattern.as_deref().unwrap_or("**"))?;

    // The directory itself, as the host's filesystem sees it: here `..` above the workspace
    // and links out of it are refused.
    let meta = fs::symlink_metadata(base.join(path)).map_err(|e| {
        let mut message = io_failure("list", path, &e);
        if e.kind() == std::io::ErrorKind::PermissionDenied && !message.ends_with(')') {
            message.push_str(" (a path cannot leave the workspace, not even through a link)");
        }
        Refusal(message)
    })?;
    if meta.file_type().is_symlink() {
        return Err(Refusal(format!(
            "cannot list {path}: it is a link, and list-files does not follow links"
        )));
    }
    if !meta.is_dir() {
        return Err(Refusal(format!(
            "cannot list {path}: it is a file, not a directory (list its directory with a \
             pattern, or read it with read-file)"
        )));
    }
    let Some(target) = fold(path) else {
        return Err(Refusal(format!(
            "cannot list {path}: paths are relative to the workspace and cannot leave it"
        )));
    };
    // A link on the way would have been followed by the metadata call above; refuse it too.
    let mut on_the_way = base.to_path_buf();
    for part in target.components() {
        on_the_way.push(part);
        if fs::symlink_metadata(&on_the_way).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Refusal(format!(
                "cannot list {path}: {} is a link, and list-files does not follow links",
                on_the_way
                    .strip_prefix(base)
                    .unwrap_or(&on_the_way)
                    .display()
            )));
        }
    }
    Ok(walk(base, &target, &glob, max, args))
}

/// Walks from the workspace root down to `target` (so the ignore files on the way apply) and
/// through the tree under it.
fn walk(base: &Path, target: &Path, glob: &GlobMatcher, max: u64, args: &Args) -> Listing {
    let route = target.to_path_buf();
    let root = base.to_path_buf();
    let mut builder = ignore::WalkBuilder::new(base);
    builder
        .follow_links(false)
        .hidden(!args.hidden)
        .parents(false)
        .ignore(!args.no_ignore)
        .git_ignore(!args.no_ignore)
        .git_exclude(!args.no_ignore)
        .git_global(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            if entry.depth() > 0 && entry.file_name() == ".git" {
                return false;
            }
            let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            rel.starts_with(&route) || route.starts_with(rel)
        });

    let mut listing = Listing::default();
    let mut visited: u64 = 0;
    let mut text_bytes: usize = 0;
    for item in builder.build() {
        let entry = match item {
            Ok(entry) => entry,
            Err(_) => {
                listing.unreadable += 1;
                continue;
            }
        };
        visited += 1;
        if visited > VISIT_MAX {
            listing.stopped_early = true;
            break;
        }
        let rel = relative(entry.path(), base);
        let Ok(under) = rel.strip_prefix(target) else {
            continue; // a directory on the way to `target`
        };
        if under.as_os_str().is_empty() {
            listing.reached = true;
            continue;
        }
        if !glob.is_match(under) {
            continue;
        }
        let kind = match entry.file_type() {
            Some(t) if t.is_symlink() => Kind::Link,
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        if listing.entries.len() as u64 >= max {
            listing.more += 1;
            continue;
        }
        let size = match kind {
            Kind::File => entry.metadata().ok().map(|m| m.len()),
            _ => None,
        };
        let item = Entry {
            kind,
            size,
            path: rel,
        };
        let line = line(&item).len() + 1;
        if text_bytes + line > TEXT_MAX {
            listing.more += 1;
            continue;
        }
        text_bytes += line;
        listing.entries.push(item);
    }
    listing.entries.sort_by(|a, b| a.path.cmp(&b.path));
    listing
}

/// `path` relative to `base`, without `.` components.
fn relative(path: &Path, base: &Path) -> PathBuf {
    path.strip_prefix(base)
        .unwrap_or(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A path as shown: as is, or quoted and escaped when it holds control characters.
fn shown(path: &Path) -> Cow<'_, str> {
    let text = path.to_string_lossy();
    if text.chars().any(char::is_control) {
        Cow::Owned(format!("{text:?}"))
    } else {
        text
    }
}

/// An entry's line: `kind size path`.
pub fn line(entry: &Entry) -> String {
    let size = entry
        .size
        .map_or_else(|| "-".to_string(), |size| size.to_string());
    format!("{} {size} {}", entry.kind.as_str(), shown(&entry.path))
}

/// The last line: how many matched, and how many more there were.
pub fn note(listing: &Listing, path: &str, pattern: &str) -> String {
    let shown = listing.entries.len() as u64;
    let plural = |n: u64| if n == 1 { "entry" } else { "entries" };
    let mut note = if !listing.reached {
        format!(
            "{path} is skipped: it is hidden or an ignore file (.gitignore, .ignore) ignores it; \
             set `hidden` or `no_ignore` to list it"
        )
    } else if shown == 0 && listing.more == 0 {
        format!("no entries under {path} match {pattern}")
    } else if listing.more == 0 {
        format!("{shown} {}", plural(shown))
    } else {
        format!(
            "{shown} of {} entries listed; {} more not listed (raise `max` or narrow `pattern` \
             or `path`)",
            shown + listing.more,
            listing.more
        )
    };
    if listing.stopped_early {
        note.push_str(&format!(
            "; stopped after looking at {VISIT_MAX} entries, so more may match (narrow `path`)"
        ));
    }
    if listing.unreadable > 0 {
        note.push_str(&format!("; {} could not be read", listing.unreadable));
    }
    note
}

/// The tool's whole answer to `input`, `base` being the workspace.
pub fn run(base: &Path, input: &ToolInput) -> ToolResult {
    let args: Args = match input.json() {
        Ok(args) => args,
        Err(failed) => return failed,
    };
    let path = args.path.as_deref().unwrap_or(".");
    let pattern = args.pattern.as_deref().unwrap_or("**");
    let resource = format!("list:{}:{pattern}", normalize(path));
    let result = match list(base, &args) {
        Ok(listing) => {
            let note = note(&listing, path, pattern);
            let mut text = String::new();
            for entry in &listing.entries {
                text.push_str(&line(entry));
                text.push('\n');
            }
            text.push_str(&note);
            text.push('\n');
            ToolResult::passed(text)
                .summary(note)
                .truncated(listing.more > 0 || listing.stopped_early)
        }
        Err(Refusal(message)) => ToolResult::failed(message),
    };
    result.state_effect(StateEffect::Read).resource_id(resource)
}

/// The component's entrypoint (only in the Wasm build: a host build links the pure core for
/// tests).
#[cfg(target_family = "wasm")]
mod component {
    use super::*;

    struct ListFiles;

    impl Tool for ListFiles {
        fn run(input: ToolInput) -> ToolResult {
            run(Path::new("."), &input)
        }
    }

    murmur_guest::export_tool!(ListFiles);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src/bin")).unwrap();
        fs::create_dir_all(root.join("target/debug")).unwrap();
        fs::create_dir_all(root.join(".hidden")).unwrap();
        fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
        fs::write(root.join("src/bin/main.rs"), "fn main() {}").unwrap();
        fs::write(root.join("src-notes.md"), "x").unwrap();
        fs::write(root.join("README.md"), "hello").unwrap();
        fs::write(root.join("target/debug/out"), "bin").unwrap();
        fs::write(root.join(".hidden/secret"), "s").unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::create_dir_all(root.join(".git/objects")).unwrap();
        dir
    }

    fn lines(base: &Path, args: Args) -> Vec<String> {
        list(base, &args)
            .unwrap()
            .entries
            .iter()
            .map(line)
            .collect()
    }

    #[test]
    fn sorted_component_wise_with_kinds_and_sizes_ignoring_target_and_hidden() {
        let dir = tree();
        assert_eq!(
            lines(dir.path(), Args::default()),
            [
                "file 5 README.md",
                "dir - src",
                "dir - src/bin",
                "file 12 src/bin/main.rs",
                "file 14 src/lib.rs",
                "file 1 src-notes.md",
            ]
        );
    }

    #[test]
    fn hidden_and_no_ignore_widen_the_walk() {
        let dir = tree();
        let all = lines(
            dir.path(),
            Args {
                hidden: true,
                no_ignore: true,
                ..Args::default()
            },
        );
        assert!(
            all.contains(&"file 1 .hidden/secret".to_string()),
            "{all:?}"
        );
        assert!(all.contains(&"file 8 .gitignore".to_string()), "{all:?}");
        assert!(
            all.contains(&"file 3 target/debug/out".to_string()),
            "{all:?}"
        );
        assert!(
            !all.iter()
                .any(|l| l.contains(".git/") || l.ends_with(" .git")),
            "{all:?}"
        );
    }

    #[test]
    fn globs_stay_in_one_directory_unless_double_star_and_apply_under_path() {
        let dir = tree();
        let rs = |pattern: &str, path: Option<&str>| {
            lines(
                dir.path(),
                Args {
                    pattern: Some(pattern.into()),
                    path: path.map(str::to_string),
                    ..Args::default()
                },
            )
        };
        assert_eq!(rs("*.rs", None), Vec::<String>::new());
        assert_eq!(
            rs("**/*.rs", None),
            ["file 12 src/bin/main.rs", "file 14 src/lib.rs"]
        );
        assert_eq!(rs("*.rs", Some("src")), ["file 14 src/lib.rs"]);
        assert_eq!(rs("./*.rs", Some("./src/")), ["file 14 src/lib.rs"]);
        assert_eq!(rs("*.rs", Some("src/bin/../")), ["file 14 src/lib.rs"]);
    }

    #[test]
    fn the_root_gitignore_applies_below_and_an_ignored_path_lists_nothing() {
        let dir = tree();
        fs::write(dir.path().join("src/bin/skip.tmp"), "").unwrap();
        fs::write(dir.path().join(".gitignore"), "target/\n*.tmp\n").unwrap();
        assert_eq!(
            lines(
                dir.path(),
                Args {
                    path: Some("src/bin".into()),
                    ..Args::default()
                }
            ),
            ["file 12 src/bin/main.rs"]
        );
        let ignored = list(
            dir.path(),
            &Args {
                path: Some("target".into()),
                ..Args::default()
            },
        )
        .unwrap();
        assert!(ignored.entries.is_empty());
        assert!(!ignored.reached);
        assert_eq!(
            note(&ignored, "target", "**"),
            "target is skipped: it is hidden or an ignore file (.gitignore, .ignore) ignores it; \
             set `hidden` or `no_ignore` to list it"
        );
    }

    #[test]
    fn bounded_by_max_with_a_count_of_the_rest() {
        let dir = tree();
        let listing = list(
            dir.path(),
            &Args {
                max: Some(2),
                ..Args::default()
            },
        )
        .unwrap();
        assert_eq!(listing.entries.len(), 2);
        assert_eq!(listing.more, 4);
        assert_eq!(
            note(&listing, ".", "**"),
            "2 of 6 entries listed; 4 more not listed (raise `max` or narrow `pattern` or `path`)"
        );
    }

    #[test]
    fn links_are_listed_not_followed_and_never_a_root() {
        let dir = tree();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("outside-secret"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("src/escape")).unwrap();
        let all = lines(dir.path(), Args::default());
        assert!(all.contains(&"link - src/escape".to_string()), "{all:?}");
        assert!(!all.iter().any(|l| l.contains("outside-secret")));
        for path in ["src/escape", "src/escape/"] {
            let refused = list(
                dir.path(),
                &Args {
                    path: Some(path.into()),
                    ..Args::default()
                },
            )
            .unwrap_err();
            assert!(refused.0.contains("is a link"), "{refused:?}");
        }
    }

    #[test]
    fn bad_inputs_are_named() {
        let dir = tree();
        let refused = |args: Args| list(dir.path(), &args).unwrap_err().0;
        assert!(
            refused(Args {
                path: Some("/etc".into()),
                ..Args::default()
            })
            .contains("absolute path")
        );
        assert!(
            refused(Args {
                path: Some("README.md".into()),
                ..Args::default()
            })
            .contains("is a file")
        );
        assert!(
            refused(Args {
                path: Some("nope".into()),
                ..Args::default()
            })
            .contains("cannot list nope: no such file")
        );
        assert!(
            refused(Args {
                max: Some(0),
                ..Args::default()
            })
            .contains("`max` is 0")
        );
        assert!(
            refused(Args {
                pattern: Some("/src".into()),
                ..Args::default()
            })
            .contains("drop the leading")
        );
        let bad = refused(Args {
            pattern: Some("src/[a".into()),
            ..Args::default()
        });
        assert!(bad.contains("\"src/[a\" is not a valid glob"), "{bad}");
    }

    #[test]
    fn the_result_reads_its_resource() {
        let dir = tree();
        let result = run(
            dir.path(),
            &ToolInput::new(r#"{"path":"./src/","pattern":"**/*.rs"}"#),
        );
        assert_eq!(result.metadata_value("state_effect"), Some("read"));
        assert_eq!(
            result.metadata_value("resource_id"),
            Some("list:src:**/*.rs")
        );
        assert_eq!(
            result.data.as_deref(),
            Some("file 12 src/bin/main.rs\nfile 14 src/lib.rs\n2 entries\n")
        );
        let failed = run(dir.path(), &ToolInput::new(r#"{"path":"nope"}"#));
        assert_eq!(failed.metadata_value("resource_id"), Some("list:nope:**"));
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        let entry = Entry {
            kind: Kind::File,
            size: Some(1),
            path: PathBuf::from("a\nfile 9 b"),
        };
        assert_eq!(line(&entry), "file 1 \"a\\nfile 9 b\"");
    }

    proptest! {
        #[test]
        fn any_pattern_compiles_or_is_refused_naming_it(pattern in "\\PC{0,40}|[\\[\\]{}*?!,/\\\\a-c.]{0,16}") {
            match compile(&pattern) {
                Ok(_) => {}
                Err(Refusal(message)) => {
                    prop_assert!(message.starts_with("invalid input: `pattern`"), "{}", message);
                    if !pattern.is_empty() {
                        prop_assert!(message.contains(&format!("{pattern:?}")), "{}", message);
                    }
                }
            }
        }

        #[test]
        fn any_pattern_lists_without_panicking(pattern in "[\\[\\]{}*?!,/\\\\a-z.]{1,12}") {
            let dir = tree();
            let _ = list(dir.path(), &Args { pattern: Some(pattern), ..Args::default() });
        }
    }
}
