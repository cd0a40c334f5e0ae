//! `search`: a regular-expression search over the files of the session workdir, with
//! ripgrep's own crates (`grep-regex`, `grep-searcher`, and the `ignore` walker).
//!
//! What it promises:
//! - Output is ripgrep-like: `path:line:text` for a matching line, `path-line-text` for a
//!   context line, `--` between groups that are not adjacent; paths are relative to the
//!   workdir, files come in path order (each directory's entries sorted by name, depth
//!   first, like `rg --sort path`), so the same query over the same tree gives the same text.
//! - A final note says `N matches in M files (searched F files)`, how many binary files
//!   were skipped (a file holding a NUL byte; its matches are not counted), which files
//!   could not be read, and, when the output was bounded, how many more matches there were.
//! - Bounds: at most `max_matches` matching lines are shown (default 200, at most 2000);
//!   the text of the lines shown stops before 64 KiB; a line longer than 500 characters is
//!   cut with a note of how much more it had; a line longer than 8 MiB makes its file
//!   unreadable (reported) rather than held in memory. The search still counts every match
//!   past a bound, so the note's "more" is exact.
//! - Walk: `.gitignore`, `.ignore` and `.git/info/exclude` are respected (also outside a git
//!   repository) unless `no_ignore`; hidden files and directories (name starting with `.`)
//!   are skipped unless `hidden`; `.git` itself is never searched; symbolic links are
//!   never followed (neither a linked directory nor a linked file is searched).
//! - `path` is relative to the workdir: an absolute path is refused, and one that climbs out
//!   of the workdir is refused (by the host's WASI first, and lexically here as well).
//!   A file named by `path` is searched even when ignored; a directory named by `path` that
//!   is hidden or ignored is reported in the note, not searched.
//! - A bad regular expression or glob, or a bad input, is a `failed` result naming the
//!   problem. Every result carries `state_effect: read` and
//!   `resource_id: search:<first 16 hex digits of the SHA-256 of the canonical query>`
//!   (the query with every default filled in, as JSON), so the same search twice is the
//!   same resource.
//!
//! The core, [`search`], takes the workdir's root as a path, so it runs (and is tested and
//! benchmarked) on the host as well as in the component, where the root is `.`.

use std::fmt::Write as _;
use std::io;
use std::path::{Component, Path};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Default number of matching lines shown.
pub const DEFAULT_MAX_MATCHES: u64 = 200;
/// The most matching lines a query may ask for.
pub const MAX_MAX_MATCHES: u64 = 2000;
/// The most context lines a query may ask for.
pub const MAX_CONTEXT: u64 = 10;
/// The text of the lines shown stays below this many bytes.
pub const OUTPUT_MAX: usize = 64 * 1024;
/// A line longer than this many characters is cut.
pub const LINE_MAX_CHARS: usize = 500;
/// The longest line (with its context) the searcher holds in memory.
pub const HEAP_LIMIT: usize = 8 * 1024 * 1024;
/// The longest pattern accepted, in bytes.
pub const PATTERN_MAX: usize = 16 * 1024;
/// How many unreadable files the note names.
const UNREADABLE_NAMED: usize = 5;

/// The tool's input, as the model sends it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub fixed_strings: bool,
    #[serde(default)]
    pub case_insensitive: bool,
    #[serde(default)]
    pub context: Option<u64>,
    #[serde(default)]
    pub max_matches: Option<u64>,
    #[serde(default)]
    pub hidden: bool,
    #[serde(default)]
    pub no_ignore: bool,
}

/// The query with every default filled in: what the `resource_id` hashes.
#[derive(Debug, Serialize)]
struct Canonical<'a> {
    pattern: &'a str,
    path: String,
    include: &'a [String],
    exclude: &'a [String],
    fixed_strings: bool,
    case_insensitive: bool,
    context: u64,
    max_matches: u64,
    hidden: bool,
    no_ignore: bool,
}

impl Query {
    /// `search:` and the first 16 hex digits of the SHA-256 of the canonical query.
    pub fn resource_id(&self) -> String {
        let canonical = Canonical {
            pattern: &self.pattern,
            path: murmur_guest::workdir::normalize(self.path.as_deref().unwrap_or(".")),
            include: &self.include,
            exclude: &self.exclude,
            fixed_strings: self.fixed_strings,
            case_insensitive: self.case_insensitive,
            context: self.context.unwrap_or(0),
            max_matches: self.max_matches.unwrap_or(DEFAULT_MAX_MATCHES),
            hidden: self.hidden,
            no_ignore: self.no_ignore,
        };
        let json = serde_json::to_string(&canonical).unwrap_or_default();
        let digest = hex::encode(Sha256::digest(json.as_bytes()));
        format!("search:{}", &digest[..16])
    }
}

/// What a search found: the text for the model and the note's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The lines shown, then a blank line and the note.
    pub text: String,
    /// The note's first line (`N matches in M files ...`).
    pub summary: String,
    /// Whether a bound cut the output.
    pub truncated: bool,
    /// Matching lines shown and found in all.
    pub shown: u64,
    pub total: u64,
    /// Files with a match, files searched, binary files skipped.
    pub files_with_matches: u64,
    pub files_searched: u64,
    pub binary_skipped: u64,
}

/// Search the tree under `root` (the workdir) for `query`. `Err` is a message for a
/// `failed` result: bad input, a bad regex or glob, a path outside the workdir or missing.
pub fn search(root: &Path, query: &Query) -> Result<Report, String> {
    let context = query.context.unwrap_or(0);
    if context > MAX_CONTEXT {
        return Err(format!(
            "invalid input: `context` must be 0 to {MAX_CONTEXT} lines, got {context}"
        ));
    }
    let max_matches = query.max_matches.unwrap_or(DEFAULT_MAX_MATCHES);
    if !(1..=MAX_MAX_MATCHES).contains(&max_matches) {
        return Err(format!(
            "invalid input: `max_matches` must be 1 to {MAX_MAX_MATCHES}, got {max_matches}"
        ));
    }
    if query.pattern.len() > PATTERN_MAX {
        return Err(format!(
            "invalid input: `pattern` is {} bytes, more than the {PATTERN_MAX} accepted",
            query.pattern.len()
        ));
    }
    let matcher = build_matcher(query)?;
    let include = Globs::new("include", &query.include)?;
    let exclude = Globs::new("exclude", &query.exclude)?;
    let target = target_path(root, query.path.as_deref().unwrap_or("."))?;

    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(context as usize)
        .after_context(context as usize)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .heap_limit(Some(HEAP_LIMIT))
        .build();
    let mut state = State::new(max_matches, context as usize);

    match target.kind {
        TargetKind::File => {
            state.search_file(
                &mut searcher,
                &matcher,
                &root.join(&target.rel),
                &target.rel,
            );
        }
        TargetKind::Dir => {
            let seen = walk(root, &target.rel, query, &include, exclude, |path, rel| {
                state.search_file(&mut searcher, &matcher, path, rel);
            });
            if !seen {
                state.target_skipped = Some(target.rel.clone());
            }
        }
    }
    Ok(state.report())
}

/// The regex (or literal) matcher for `query`, line by line.
fn build_matcher(query: &Query) -> Result<RegexMatcher, String> {
    RegexMatcherBuilder::new()
        .case_insensitive(query.case_insensitive)
        .fixed_strings(query.fixed_strings)
        .line_terminator(Some(b'\n'))
        .build(&query.pattern)
        .map_err(|e| {
            format!(
                "invalid regular expression {:?}: {e}\n(use `fixed_strings: true` to search \
                 for the text as is)",
                query.pattern
            )
        })
}

/// Globs for `include` or `exclude`: one without `/` matches a file name at any depth, one
/// with `/` the whole workdir-relative path (`*` stays within a directory, `**` crosses).
struct Globs {
    by_name: GlobSet,
    by_path: GlobSet,
    empty: bool,
}

impl Globs {
    fn new(field: &str, globs: &[String]) -> Result<Globs, String> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for glob in globs {
            let pattern = glob.strip_prefix("./").unwrap_or(glob);
            let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
            let pattern = pattern.strip_suffix('/').unwrap_or(pattern);
            if pattern.is_empty() {
                return Err(format!("invalid input: an `{field}` glob is empty"));
            }
            let built = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid `{field}` glob {glob:?}: {e}"))?;
            if pattern.contains('/') {
                by_path.add(built);
            } else {
                by_name.add(built);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|e| format!("invalid `{field}` globs: {e}"))
        };
        Ok(Globs {
            by_name: build(by_name)?,
            by_path: build(by_path)?,
            empty: globs.is_empty(),
        })
    }

    fn matches(&self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        self.by_name.is_match(name) || self.by_path.is_match(rel)
    }
}

enum TargetKind {
    File,
    Dir,
}

struct Target {
    /// Workdir-relative, normalized (`.` for the workdir).
    rel: String,
    kind: TargetKind,
}

/// Check `path` (relative to the workdir) and say what it names.
fn target_path(root: &Path, path: &str) -> Result<Target, String> {
    if path.trim().is_empty() {
        return Err(
            "invalid input: `path` is empty (leave it out to search the whole workdir)".to_string(),
        );
    }
    if Path::new(path).is_absolute() || path.starts_with('/') {
        return Err(format!(
            "cannot search {path}: an absolute path is not permitted; paths are relative to \
             the session workdir"
        ));
    }
    let full = root.join(path);
    // In the component this goes through the host's WASI, which refuses a path (or a link)
    // leading out of the workdir.
    let meta = std::fs::metadata(&full).map_err(|e| {
        let link = std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink());
        if link && e.kind() == io::ErrorKind::PermissionDenied {
            format!(
                "cannot search {path}: it is a symbolic link leading out of the session \
                 workdir (paths are relative to the session workdir and cannot leave it)"
            )
        } else {
            murmur_guest::workdir::io_failure("search", path, &e)
        }
    })?;
    let rel = lexical(path).ok_or_else(|| {
        format!(
            "cannot search {path}: it leads out of the session workdir (paths are relative \
             to the session workdir and cannot leave it)"
        )
    })?;
    let is_link = std::fs::symlink_metadata(&full)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false);
    if meta.is_dir() {
        if is_link {
            return Err(format!(
                "cannot search {path}: it is a symbolic link to a directory, and search does \
                 not follow links (search the directory it points to instead)"
            ));
        }
        Ok(Target {
            rel,
            kind: TargetKind::Dir,
        })
    } else if meta.is_file() {
        Ok(Target {
            rel,
            kind: TargetKind::File,
        })
    } else {
        Err(format!(
            "cannot search {path}: it is neither a file nor a directory"
        ))
    }
}

/// `path` with `.` and `..` resolved lexically, `/`-joined; `.` for the workdir; `None` when
/// it climbs above the workdir.
fn lexical(path: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// `path` relative to `root`, `/`-joined (empty for the root itself).
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut out = String::new();
    for component in rel.components() {
        if let Component::Normal(part) = component {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&part.to_string_lossy());
        }
    }
    out
}

/// Walk the workdir from its root (so its `.gitignore` applies to any `target`), down the
/// directories leading to `target` and everything beneath it, calling `each(path, rel)` for
/// every regular file kept, in path order. Returns whether `target` itself was reached (a
/// hidden or ignored target is not).
fn walk(
    root: &Path,
    target: &str,
    query: &Query,
    include: &Globs,
    exclude: Globs,
    mut each: impl FnMut(&Path, &str),
) -> bool {
    let mut builder = ignore::WalkBuilder::new(root);
    let filter_root = root.to_path_buf();
    let filter_target = target.to_string();
    builder
        .hidden(!query.hidden)
        .ignore(!query.no_ignore)
        .git_ignore(!query.no_ignore)
        .git_exclude(!query.no_ignore)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| keep_entry(&filter_root, &filter_target, &exclude, entry));
    let mut seen = target == ".";
    for entry in builder.build() {
        // Errors in the walk (an unreadable directory, a bad ignore file) do not stop it.
        let Ok(entry) = entry else { continue };
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        let rel = relative(root, entry.path());
        if rel == target {
            seen = true;
        }
        if !file_type.is_file() {
            continue;
        }
        if !(target == "." || rel == target || is_beneath(&rel, target)) {
            continue;
        }
        if !include.empty && !include.matches(&rel) {
            continue;
        }
        each(entry.path(), &rel);
    }
    seen
}

fn is_beneath(rel: &str, dir: &str) -> bool {
    rel.len() > dir.len() && rel.starts_with(dir) && rel.as_bytes()[dir.len()] == b'/'
}

/// Whether the walk goes into (or yields) `entry`: never a link or `.git`, nothing excluded,
/// only the way to `target` and what is beneath it.
fn keep_entry(root: &Path, target: &str, exclude: &Globs, entry: &ignore::DirEntry) -> bool {
    if entry.depth() == 0 {
        return true;
    }
    if entry.path_is_symlink() {
        return false;
    }
    let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
    if is_dir && entry.file_name() == ".git" {
        return false;
    }
    let rel = relative(root, entry.path());
    if !exclude.empty && exclude.matches(&rel) {
        return false;
    }
    target == "."
        || rel == target
        || is_beneath(&rel, target)
        || (is_dir && is_beneath(target, &rel))
}

/// Why the output stopped growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    MaxMatches,
    Bytes,
}

/// The running totals of one search.
struct State {
    out: String,
    max_matches: u64,
    context: usize,
    shown: u64,
    total: u64,
    files_with_matches: u64,
    files_searched: u64,
    binary_skipped: u64,
    stop: Option<Stop>,
    /// After-context lines still shown once `max_matches` was reached.
    trailing: usize,
    unreadable: Vec<(String, String)>,
    unreadable_count: u64,
    /// A directory named by `path` that the walk did not enter (hidden or ignored).
    target_skipped: Option<String>,
}

/// The parts of [`State`] one file changes, to undo when the file turns out binary.
#[derive(Clone, Copy)]
struct Snapshot {
    out_len: usize,
    shown: u64,
    total: u64,
    stop: Option<Stop>,
    trailing: usize,
}

impl State {
    fn new(max_matches: u64, context: usize) -> State {
        State {
            out: String::new(),
            max_matches,
            context,
            shown: 0,
            total: 0,
            files_with_matches: 0,
            files_searched: 0,
            binary_skipped: 0,
            stop: None,
            trailing: 0,
            unreadable: Vec::new(),
            unreadable_count: 0,
            target_skipped: None,
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            out_len: self.out.len(),
            shown: self.shown,
            total: self.total,
            stop: self.stop,
            trailing: self.trailing,
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.out.truncate(s.out_len);
        self.shown = s.shown;
        self.total = s.total;
        self.stop = s.stop;
        self.trailing = s.trailing;
    }

    fn search_file(
        &mut self,
        searcher: &mut Searcher,
        matcher: &RegexMatcher,
        path: &Path,
        rel: &str,
    ) {
        let snapshot = self.snapshot();
        let mut sink = FileSink {
            state: self,
            rel,
            matches: 0,
            printed: false,
            pending_break: false,
            binary: false,
        };
        let result = searcher.search_path(matcher, path, &mut sink);
        let (matches, binary) = (sink.matches, sink.binary);
        match result {
            Err(e) => {
                self.restore(snapshot);
                self.unreadable_count += 1;
                if self.unreadable.len() < UNREADABLE_NAMED {
                    let why = if e.to_string().contains("allocation limit") {
                        format!("a line longer than {} MiB", HEAP_LIMIT / (1024 * 1024))
                    } else {
                        murmur_guest::workdir::io_failure("read", rel, &e)
                            .rsplit(": ")
                            .next()
                            .unwrap_or_default()
                            .to_string()
                    };
                    self.unreadable.push((rel.to_string(), why));
                }
            }
            Ok(()) if binary => {
                self.restore(snapshot);
                self.binary_skipped += 1;
            }
            Ok(()) => {
                self.files_searched += 1;
                if matches > 0 {
                    self.files_with_matches += 1;
                }
            }
        }
    }

    /// Append one line (`sep` is `:` for a match, `-` for context), unless it would take the
    /// output past [`OUTPUT_MAX`]. Returns whether it was appended.
    fn push_line(&mut self, rel: &str, number: u64, sep: char, bytes: &[u8]) -> bool {
        let line = display_line(bytes);
        let needed = rel.len() + 24 + line.len();
        if self.out.len() + needed > OUTPUT_MAX {
            self.stop = Some(Stop::Bytes);
            return false;
        }
        let _ = writeln!(self.out, "{rel}{sep}{number}{sep}{line}");
        true
    }

    fn report(&self) -> Report {
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut summary = format!(
            "{} in {} (searched {}",
            plural(self.total, "match", "matches"),
            plural(self.files_with_matches, "file", "files"),
            plural(self.files_searched, "file", "files"),
        );
        if self.binary_skipped > 0 {
            let _ = write!(
                summary,
                "; skipped {}",
                plural(self.binary_skipped, "binary file", "binary files")
            );
        }
        summary.push(')');
        let more = self.total - self.shown;
        let mut note = summary.clone();
        match self.stop {
            Some(Stop::MaxMatches) if more > 0 => {
                let _ = write!(
                    note,
                    "\n... and {} not shown (max_matches {} reached)",
                    plural(more, "more match", "more matches"),
                    self.max_matches
                );
            }
            Some(Stop::Bytes) => {
                let _ = write!(
                    note,
                    "\n... and {} not shown (stopped after {} bytes of output)",
                    plural(more, "more match", "more matches"),
                    self.out.len()
                );
            }
            _ => {}
        }
        if self.unreadable_count > 0 {
            let named: Vec<String> = self
                .unreadable
                .iter()
                .map(|(p, why)| format!("{p} ({why})"))
                .collect();
            let _ = write!(
                note,
                "\ncould not search {}: {}",
                plural(self.unreadable_count, "file", "files"),
                named.join(", ")
            );
            if self.unreadable_count > self.unreadable.len() as u64 {
                note.push_str(", ...");
            }
        }
        if let Some(dir) = &self.target_skipped {
            let _ = write!(
                note,
                "\n{dir} was not searched: it is hidden or ignored (set `hidden` or \
                 `no_ignore` to search it)"
            );
        }
        let truncated = matches!(self.stop, Some(Stop::Bytes))
            || (self.stop == Some(Stop::MaxMatches) && more > 0);
        let text = if self.out.is_empty() {
            note
        } else {
            format!("{}\n{note}", self.out)
        };
        Report {
            text,
            summary,
            truncated,
            shown: self.shown,
            total: self.total,
            files_with_matches: self.files_with_matches,
            files_searched: self.files_searched,
            binary_skipped: self.binary_skipped,
        }
    }
}

/// A line's text for the output: without its line ending, invalid UTF-8 replaced, cut after
/// [`LINE_MAX_CHARS`] characters with a note of how many bytes were left out.
fn display_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(LINE_MAX_CHARS) {
        None => text.into_owned(),
        Some((cut, _)) => {
            let left = text[cut..].chars().count();
            format!("{} [... line cut: {left} more characters]", &text[..cut])
        }
    }
}

/// Receives one file's matches and context lines from the searcher.
struct FileSink<'s> {
    state: &'s mut State,
    rel: &'s str,
    matches: u64,
    /// Whether a line of this file was shown.
    printed: bool,
    /// The searcher reported a gap since the last line shown.
    pending_break: bool,
    binary: bool,
}

impl FileSink<'_> {
    fn emit(&mut self, number: u64, sep: char, bytes: &[u8]) -> bool {
        let separate = self.state.context > 0
            && !self.state.out.is_empty()
            && (!self.printed || self.pending_break);
        if separate {
            if self.state.out.len() + 3 > OUTPUT_MAX {
                self.state.stop = Some(Stop::Bytes);
                return false;
            }
            self.state.out.push_str("--\n");
        }
        let pushed = self.state.push_line(self.rel, number, sep, bytes);
        if pushed {
            self.printed = true;
            self.pending_break = false;
        }
        pushed
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(0);
        for (i, line) in mat.lines().enumerate() {
            self.matches += 1;
            self.state.total += 1;
            if self.state.stop.is_some() {
                continue;
            }
            if self.emit(first + i as u64, ':', line) {
                self.state.shown += 1;
                if self.state.shown >= self.state.max_matches {
                    self.state.stop = Some(Stop::MaxMatches);
                    self.state.trailing = self.state.context;
                }
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        let show = match (self.state.stop, ctx.kind()) {
            (None, SinkContextKind::Before | SinkContextKind::After) => true,
            (Some(Stop::MaxMatches), SinkContextKind::After) if self.state.trailing > 0 => {
                self.state.trailing -= 1;
                true
            }
            _ => false,
        };
        if show {
            self.emit(ctx.line_number().unwrap_or(0), '-', ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.pending_break = true;
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(target_arch = "wasm32")]
mod component {
    use murmur_guest::tool::{StateEffect, Tool, ToolInput, ToolResult};

    use super::{Query, search};

    struct Search;

    impl Tool for Search {
        fn run(input: ToolInput) -> ToolResult {
            let query: Query = match input.json() {
                Ok(query) => query,
                Err(failed) => return failed,
            };
            let result = match search(std::path::Path::new("."), &query) {
                Ok(report) => ToolResult::passed(report.text)
                    .summary(report.summary)
                    .truncated(report.truncated),
                Err(message) => ToolResult::failed(message),
            };
            result
                .state_effect(StateEffect::Read)
                .resource_id(query.resource_id())
        }
    }

    murmur_guest::export_tool!(Search);
}

#[cfg(test)]
mod tests;
