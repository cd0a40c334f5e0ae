//! A dataset: JSON lines, one case per line, each a task for the capsule and what its session
//! is expected to do.
//!
//! ```json
//! {"id": "note", "task": "Write a note…", "workdir": "fixtures/notes",
//!  "expect": {"turns": {"max": 4}, "tools": ["write-file"], "files": [{"path": "notes/a.md", "regex": "hello"}]}}
//! ```
//!
//! What loading promises: every line is read or the whole dataset is refused, with the line
//! number and the field (`E-EVAL-001`); blank lines and lines starting with `//` are passed
//! over; an id is a plain name (it names cassette files) and appears once; every regex and
//! JSON schema compiles; a case's `workdir` is a directory, relative paths taken from the
//! dataset's own directory; a file's `path` stays inside the session workdir; a command's
//! `allow` entries are names or absolute paths and its `network` entries parse as
//! `capabilities.network.allow` entries do; every `changes` pattern is a relative path
//! pattern of the workspace ([`crate::changes::PathPattern`]) and `changes` checks something. Unknown keys are refused, so a misspelled
//! expectation never passes silently.

use std::path::{Path, PathBuf};

use murmur_manifest::network::NetworkRule;
use serde::Deserialize;
use serde_json::Value;

/// The largest dataset file read (16 MiB).
pub const DATASET_MAX_BYTES: u64 = 16 << 20;
/// The most cases a dataset may hold.
pub const DATASET_MAX_CASES: usize = 10_000;

/// A loaded dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub path: PathBuf,
    /// sha256 (hex) of the file as read.
    pub sha256: String,
    pub cases: Vec<Case>,
}

/// One case.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub task: String,
    /// The directory the session's workdir starts as a copy of.
    pub workdir: Option<PathBuf>,
    pub expect: Expect,
    /// Its line in the dataset (from 1).
    pub line: usize,
}

/// What a case's session is expected to do. Every expectation given is one scorer; the exit
/// status is always scored (`ok` unless `exit` says otherwise).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The session's exit status: `ok` (the default), `failed`, `max_turns_reached`, …
    #[serde(default)]
    pub exit: Option<String>,
    /// Model turns, the session's whole count.
    #[serde(default)]
    pub turns: Option<Bounds>,
    /// Tokens in and out: the provider's counts, or the runtime's estimate where the provider
    /// reported none.
    #[serde(default)]
    pub tokens: Option<Bounds>,
    /// Tools that must be called in this order, others allowed between them.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The task's final text.
    #[serde(default)]
    pub result: Option<Match>,
    /// Files of the session workdir.
    #[serde(default)]
    pub files: Vec<FileExpect>,
    /// Commands run in the session workdir after the session, and their exit status.
    #[serde(default)]
    pub commands: Vec<CommandExpect>,
    /// What the session changed in its workspace, as its trace's `session_end` records it.
    #[serde(default)]
    pub changes: Option<ChangesExpect>,
    /// A model's verdict on the result, through one of the capsule's driver choices.
    #[serde(default)]
    pub rubric: Option<Rubric>,
}

/// Inclusive bounds; either may be left out.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    #[serde(default)]
    pub min: Option<u64>,
    #[serde(default)]
    pub max: Option<u64>,
}

impl Bounds {
    pub fn holds(&self, value: u64) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }

    pub fn describe(&self) -> String {
        match (self.min, self.max) {
            (Some(min), Some(max)) => format!("{min}..={max}"),
            (Some(min), None) => format!(">= {min}"),
            (None, Some(max)) => format!("<= {max}"),
            (None, None) => "any".to_string(),
        }
    }
}

/// Text that must match a regex, or parse as JSON valid under a schema (both when both given).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    #[serde(default)]
    pub regex: Option<String>,
    #[serde(default)]
    pub schema: Option<Value>,
}

/// A file of the session workdir.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileExpect {
    /// Relative to the session workdir.
    pub path: String,
    /// `false`: the file must not exist. Default: it must.
    #[serde(default = "yes")]
    pub exists: bool,
    #[serde(default)]
    pub regex: Option<String>,
    #[serde(default)]
    pub schema: Option<Value>,
}

fn yes() -> bool {
    true
}

/// A command run with `sh -c` in the session workdir, held by the class the case's session
/// ran under (see [`crate::score`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandExpect {
    pub run: String,
    /// The exit status expected (default 0).
    #[serde(default)]
    pub exit: i32,
    /// Killed past this many seconds (default 30), which fails it.
    #[serde(default = "thirty")]
    pub timeout_seconds: u64,
    /// The binaries it may execute beside `sh` (names resolved against `PATH`, or absolute
    /// paths), as `capabilities.shell.allow` names them. Default: none.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Where it may connect, in `capabilities.network.allow`'s syntax. Default: nowhere.
    #[serde(default)]
    pub network: Vec<NetworkEntry>,
}

/// One `network` entry of a command: a `capabilities.network.allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkEntry(pub NetworkRule);

impl<'de> Deserialize<'de> for NetworkEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        NetworkRule::parse(&text)
            .map(NetworkEntry)
            .map_err(|reason| {
                serde::de::Error::custom(format!(
                    "`{}` is not a network.allow entry: {reason}",
                    text.escape_debug()
                ))
            })
    }
}

/// `expect.changes`: what the session changed in its workspace, scored by
/// [`crate::changes::score`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangesExpect {
    /// Paths that must have been created (each pattern at least one); `[]`: none.
    #[serde(default)]
    pub created: Option<Vec<PathPattern>>,
    /// Paths that must have been modified; `[]`: none.
    #[serde(default)]
    pub modified: Option<Vec<PathPattern>>,
    /// Paths that must have been deleted; `[]`: none.
    #[serde(default)]
    pub deleted: Option<Vec<PathPattern>>,
    /// Paths no change may touch.
    #[serde(default)]
    pub untouched: Vec<PathPattern>,
    /// No path changed beyond what `created`, `modified` and `deleted` name.
    #[serde(default)]
    pub only: bool,
}

impl ChangesExpect {
    /// Whether it checks anything at all.
    pub fn is_empty(&self) -> bool {
        self.created.is_none()
            && self.modified.is_none()
            && self.deleted.is_none()
            && self.untouched.is_empty()
            && !self.only
    }
}

/// A path pattern of the workspace, checked and compiled as it is read (its syntax: see
/// [`crate::changes`]).
#[derive(Debug, Clone)]
pub struct PathPattern {
    pub text: String,
    matcher: globset::GlobMatcher,
}

impl PathPattern {
    /// `text` as a pattern, or why it is not one.
    pub fn parse(text: &str) -> Result<PathPattern, String> {
        let why_not = |why: &str| {
            format!(
                "`{}` is not a path pattern of the workspace: {why}",
                text.escape_debug()
            )
        };
        let refused = |why: &str| Err(why_not(why));
        if text.is_empty() {
            return refused("it is empty");
        }
        if text.chars().any(char::is_control) {
            return refused("it holds a control character");
        }
        if text.starts_with('/') {
            return refused("it is absolute; paths are relative to the workspace");
        }
        if text.ends_with('/') {
            return refused("it ends in `/`; files are listed, not directories (write `dir/**`)");
        }
        for part in text.split('/') {
            match part {
                "" => return refused("it has an empty part (`//`)"),
                "." | ".." => {
                    return refused(
                        "it has a `.` or `..` part; write the path as the trace lists it",
                    );
                }
                _ => {}
            }
        }
        let glob = globset::GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .empty_alternates(false)
            .build()
            .map_err(|error| why_not(&error.kind().to_string()))?;
        Ok(PathPattern {
            text: text.to_string(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn matches(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }
}

impl<'de> Deserialize<'de> for PathPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        PathPattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn thirty() -> u64 {
    30
}

/// A model-graded rubric.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    /// The capsule's driver choice that grades (`primary` or an alternate's name).
    pub choice: String,
    /// What a passing answer does, in words.
    pub criteria: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseLine {
    id: String,
    task: String,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    expect: Expect,
}

/// Why a dataset (or an arms file) was refused: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetError {
    pub path: PathBuf,
    /// The line, when one is to blame.
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for DatasetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Whether `name` is a plain name an id or an arm may take: 1–64 of `A–Z a–z 0–9 . _ -`, not
/// starting with a dot.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Dataset {
    /// Reads and checks the dataset at `path`.
    pub fn load(path: &Path) -> Result<Dataset, DatasetError> {
        let whole = |message: String| DatasetError {
            path: path.to_path_buf(),
            line: None,
            message,
        };
        let bytes = read_bounded(path, DATASET_MAX_BYTES).map_err(whole)?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| whole("the dataset is not UTF-8 text".to_string()))?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut cases: Vec<Case> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with("//") {
                continue;
            }
            let at = |message: String| DatasetError {
                path: path.to_path_buf(),
                line: Some(number),
                message,
            };
            if cases.len() == DATASET_MAX_CASES {
                return Err(at(format!(
                    "more than {DATASET_MAX_CASES} cases; split the dataset"
                )));
            }
            let mut deserializer = serde_json::Deserializer::from_str(trimmed);
            let parsed: CaseLine =
                serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
                    let field = error.path().to_string();
                    if field == "." {
                        at(format!("not a case: {}", error.inner()))
                    } else {
                        at(format!("`{field}`: {}", error.inner()))
                    }
                })?;
            let case = check_case(parsed, base, number).map_err(at)?;
            if let Some(first) = cases.iter().find(|c| c.id == case.id) {
                return Err(at(format!(
                    "the id `{}` is taken by the case on line {}",
                    case.id, first.line
                )));
            }
            cases.push(case);
        }
        if cases.is_empty() {
            return Err(whole("the dataset holds no case".to_string()));
        }
        Ok(Dataset {
            path: path.to_path_buf(),
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            cases,
        })
    }
}

/// Reads `path` whole when it is at most `limit` bytes.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|error| format!("cannot be read: {error}"))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot be read: {error}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("is larger than {} MiB", limit >> 20));
    }
    Ok(bytes)
}

fn check_case(line: CaseLine, base: &Path, number: usize) -> Result<Case, String> {
    if !is_plain_name(&line.id) {
        return Err(format!(
            "the id `{}` is not a plain name (1-64 of A-Z a-z 0-9 . _ -, not starting with a dot)",
            line.id.escape_debug()
        ));
    }
    if line.task.trim().is_empty() {
        return Err("`task` is empty".to_string());
    }
    let workdir = match line.workdir {
        None => None,
        Some(dir) => {
            let dir = base.join(dir);
            match std::fs::symlink_metadata(&dir) {
                Ok(meta) if meta.is_dir() => Some(dir),
                Ok(_) => {
                    return Err(format!(
                        "`workdir` {} is not a directory (a link is not followed)",
                        dir.display()
                    ));
                }
                Err(error) => return Err(format!("`workdir` {}: {error}", dir.display())),
            }
        }
    };
    let expect = line.expect;
    for (field, bounds) in [("turns", &expect.turns), ("tokens", &expect.tokens)] {
        if let Some(Bounds {
            min: Some(min),
            max: Some(max),
        }) = bounds
            && min > max
        {
            return Err(format!("`expect.{field}`: min {min} is above max {max}"));
        }
    }
    if let Some(exit) = &expect.exit
        && !EXIT_STATUSES.contains(&exit.as_str())
    {
        return Err(format!(
            "`expect.exit`: `{exit}` is not an exit status (one of {})",
            EXIT_STATUSES.join(", ")
        ));
    }
    if let Some(result) = &expect.result {
        check_match(
            "expect.result",
            result.regex.as_deref(),
            result.schema.as_ref(),
        )?;
        if result.regex.is_none() && result.schema.is_none() {
            return Err("`expect.result` needs `regex` or `schema`".to_string());
        }
    }
    for (index, file) in expect.files.iter().enumerate() {
        let field = format!("expect.files[{index}]");
        check_match(&field, file.regex.as_deref(), file.schema.as_ref())?;
        if !is_inside(&file.path) {
            return Err(format!(
                "`{field}.path` `{}` is not a relative path inside the workdir",
                file.path.escape_debug()
            ));
        }
        if !file.exists && (file.regex.is_some() || file.schema.is_some()) {
            return Err(format!(
                "`{field}`: a file that must not exist has no content to match"
            ));
        }
    }
    for (index, command) in expect.commands.iter().enumerate() {
        if command.run.trim().is_empty() {
            return Err(format!("`expect.commands[{index}].run` is empty"));
        }
        if command.timeout_seconds == 0 || command.timeout_seconds > 3600 {
            return Err(format!(
                "`expect.commands[{index}].timeout_seconds` must be 1..=3600"
            ));
        }
        for (entry, name) in command.allow.iter().enumerate() {
            if let Some(why) = bad_binary(name) {
                return Err(format!(
                    "`expect.commands[{index}].allow[{entry}]` `{}` {why}",
                    name.escape_debug()
                ));
            }
        }
    }
    if expect.changes.as_ref().is_some_and(ChangesExpect::is_empty) {
        return Err(
            "`expect.changes` checks nothing: give `created`, `modified`, `deleted`, `untouched` or `only: true`"
                .to_string(),
        );
    }
    if let Some(rubric) = &expect.rubric
        && rubric.criteria.trim().is_empty()
    {
        return Err("`expect.rubric.criteria` is empty".to_string());
    }
    Ok(Case {
        id: line.id,
        task: line.task,
        workdir,
        expect,
        line: number,
    })
}

/// The exit statuses a session can end with.
pub const EXIT_STATUSES: &[&str] = &[
    "ok",
    "failed",
    "max_turns_reached",
    "reopen_budget_exhausted",
    "spend_ceiling_reached",
    "canceled",
];

fn check_match(field: &str, regex: Option<&str>, schema: Option<&Value>) -> Result<(), String> {
    if let Some(pattern) = regex {
        regex::Regex::new(pattern).map_err(|error| format!("`{field}.regex`: {error}"))?;
    }
    if let Some(schema) = schema {
        jsonschema::validator_for(schema)
            .map_err(|error| format!("`{field}.schema` is not a JSON schema: {error}"))?;
    }
    Ok(())
}

/// Why `name` cannot name a binary a command may execute, if it cannot: a name resolved
/// against `PATH`, or an absolute path.
fn bad_binary(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("holds whitespace or a control character")
    } else if name.contains('/') && !name.starts_with('/') {
        Some("is a relative path: name a binary found on PATH, or give its absolute path")
    } else if name.ends_with('/') || name == "." || name == ".." {
        Some("names no file")
    } else {
        None
    }
}

/// Whether `path` is relative and never climbs out (`..`) nor names the root.
fn is_inside(path: &str) -> bool {
    use std::path::Component;
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Dataset, DatasetError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("fixture")).unwrap();
        let path = dir.path().join("cases.jsonl");
        std::fs::write(&path, text).unwrap();
        Dataset::load(&path)
    }

    #[test]
    fn a_dataset_loads_with_its_expectations_and_fixture() {
        let dataset = load(concat!(
            "// a comment\n",
            "{\"id\": \"a\", \"task\": \"do a\", \"workdir\": \"fixture\", \"expect\": {\"turns\": {\"max\": 3}, \"tools\": [\"x\"], \"files\": [{\"path\": \"n/a.md\", \"regex\": \"hi\"}]}}\n",
            "\n",
            "{\"id\": \"b\", \"task\": \"do b\"}\n",
        ))
        .unwrap();
        assert_eq!(dataset.cases.len(), 2);
        assert_eq!(dataset.cases[0].line, 2);
        assert!(
            dataset.cases[0]
                .workdir
                .as_ref()
                .unwrap()
                .ends_with("fixture")
        );
        assert_eq!(dataset.cases[0].expect.turns.unwrap().max, Some(3));
        assert_eq!(dataset.cases[1].line, 4);
        assert_eq!(dataset.sha256.len(), 64);
    }

    #[test]
    fn a_command_declares_what_it_may_execute_and_reach() {
        let dataset = load(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"grep -q x f\", \"allow\": [\"grep\", \"/usr/bin/python3\"], \"network\": [\"127.0.0.1:8080\"]}, {\"run\": \"true\"}]}}",
        )
        .unwrap();
        let commands = &dataset.cases[0].expect.commands;
        assert_eq!(commands[0].allow, ["grep", "/usr/bin/python3"]);
        assert_eq!(commands[0].network[0].0.as_str(), "127.0.0.1:8080");
        assert_eq!(commands[0].network[0].0.ports(), [8080]);
        assert!(commands[1].allow.is_empty() && commands[1].network.is_empty());
    }

    #[test]
    fn a_changes_expectation_loads_its_patterns() {
        let dataset = load(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"created\": [\"notes/*.md\"], \"deleted\": [], \"untouched\": [\"tests/**\"], \"only\": true}}}",
        )
        .unwrap();
        let changes = dataset.cases[0].expect.changes.as_ref().unwrap();
        let created = changes.created.as_ref().unwrap();
        assert_eq!(created[0].text, "notes/*.md");
        assert!(created[0].matches("notes/a.md") && !created[0].matches("notes/x/a.md"));
        assert!(changes.modified.is_none());
        assert!(changes.deleted.as_ref().unwrap().is_empty());
        assert!(changes.untouched[0].matches("tests/unit/a.rs"));
        assert!(changes.only);
    }

    #[test]
    fn every_mistake_is_refused_with_its_line_and_field() {
        let refused = |text: &str, line: usize, needle: &str| {
            let error = load(text).unwrap_err();
            assert_eq!(error.line, Some(line), "{error}");
            assert!(error.message.contains(needle), "{error} lacks {needle}");
        };
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"tool\": []}}",
            1,
            "unknown field `tool`",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\"}\n{\"id\": \"a\", \"task\": \"u\"}",
            2,
            "line 1",
        );
        refused("{\"id\": \"../x\", \"task\": \"t\"}", 1, "plain name");
        refused("{\"id\": \"a\", \"task\": \" \"}", 1, "empty");
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"workdir\": \"missing\"}",
            1,
            "workdir",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"result\": {\"regex\": \"(\"}}}",
            1,
            "expect.result.regex",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"files\": [{\"path\": \"../up\"}]}}",
            1,
            "inside",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"files\": [{\"path\": \"/etc/passwd\"}]}}",
            1,
            "inside",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"turns\": {\"min\": 4, \"max\": 2}}}",
            1,
            "above max",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"exit\": \"fine\"}}",
            1,
            "exit status",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"result\": {\"schema\": {\"type\": 5}}}}",
            1,
            "schema",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"true\", \"allow\": [\"grep\", \"g rep\"]}]}}",
            1,
            "`expect.commands[0].allow[1]` `g rep` holds whitespace",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"true\", \"allow\": [\"bin/grep\"]}]}}",
            1,
            "relative path",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"true\", \"network\": [\"127.0.0.1:8080\", \"ftp://files.example.com\"]}]}}",
            1,
            "`expect.commands[0].network[1]`: `ftp://files.example.com` is not a network.allow entry",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"true\", \"network\": \"*\"}]}}",
            1,
            "`expect.commands[0].network`",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\"}\n{\"id\": \"b\", \"task\": \"t\", \"expect\": {\"changes\": {\"created\": [\"notes/*.md\", \"../up.md\"]}}}",
            2,
            "`expect.changes.created[1]`: `../up.md` is not a path pattern of the workspace",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"untouched\": [\"/etc/**\"]}}}",
            1,
            "`expect.changes.untouched[0]`: `/etc/**` is not a path pattern of the workspace: it is absolute",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"modified\": [\"src/[a-\"]}}}",
            1,
            "`expect.changes.modified[0]`",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"create\": [\"a\"]}}}",
            1,
            "`expect.changes.create`: unknown field `create`, expected one of `created`",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"only\": false}}}",
            1,
            "`expect.changes` checks nothing",
        );
        refused(
            "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"changes\": {\"only\": \"yes\"}}}",
            1,
            "`expect.changes.only`",
        );
        refused("not json", 1, "not a case");
        let empty = load("\n// nothing\n").unwrap_err();
        assert_eq!(empty.line, None);
    }

    proptest::proptest! {
        #[test]
        fn no_line_makes_loading_panic(text in "\\PC{0,300}") {
            let _ = load(&text);
        }

        #[test]
        fn no_json_case_makes_loading_panic(
            id in "[a-z./]{0,8}",
            key in "(turns|tokens|tools|result|files|commands|rubric|exit|changes|other)",
            value in proptest::prop_oneof![
                proptest::strategy::Just(serde_json::json!(null)),
                proptest::strategy::Just(serde_json::json!({"max": 1})),
                proptest::strategy::Just(serde_json::json!([{"path": "a", "regex": "["}])),
                proptest::strategy::Just(serde_json::json!({"regex": "a", "schema": {"type": "object"}})),
                proptest::strategy::Just(serde_json::json!("ok")),
                proptest::strategy::Just(serde_json::json!({"created": ["a/**", "[x"], "only": true})),
                proptest::strategy::Just(serde_json::json!({"untouched": ["../a"], "modified": []})),
                proptest::strategy::Just(serde_json::json!({})),
                proptest::strategy::Just(serde_json::json!([{"run": "x", "allow": ["", "a b", "/x/", "grep"], "network": ["*", "h:0", "h:1"]}])),
                (0i64..5).prop_map(|n| serde_json::json!(n)),
            ],
        ) {
            let line = serde_json::json!({"id": id, "task": "t", "expect": {key: value}});
            let _ = load(&line.to_string());
        }
    }
    use proptest::strategy::Strategy as _;
}
