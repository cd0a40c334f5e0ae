//! `mur trace show|report|diff`: read a session's `trace.jsonl` back (docs/trace.md). The views are
//! computed by [`murmur_trace::analysis`]; this module finds the trace and prints.
//!
//! - Which trace (`SESSION|PATH`): a `trace.jsonl` file; a directory holding one (a session's
//!   directory); a session id (or an unambiguous prefix of one) under ROOT (`--workdir`,
//!   default `./workdir`); nothing: the newest session under ROOT, by its `session_start`
//!   timestamp, read from the trace's first line, at most 4 MiB of it (a trace whose first line
//!   is not one counts by the file's mtime; ties go to the greater directory name).
//! - `show`: per task, its turns (choice, model, decision, tools, estimated and reported
//!   tokens, cache read and write, time, stop reason) and its calls (status, state effect,
//!   resource, time, redundant or not), hooks' calls and compactions; the totals; the redundant
//!   reads. And the session's workspace: where the record and the workspace were
//!   (`session_start`), the line of what each task changed (`task_end.changes`), what the
//!   session changed (`session_end.changes`: a page of paths with sizes, `and N more`, each
//!   bound hit said in words) and the git commit it was on (`session_end.git`). A trace of
//!   record layout 1 (no `record_layout`, no `workspace`: written before the two were apart)
//!   is read as any other; its workspace is the record itself.
//! - `report`: tokens and the cache hit ratio per driver choice; calls, outcomes, time and
//!   output per tool; each hook's calls, compactions, dispatch errors, denials and reopens.
//! - `diff A B`: what changed from session A to B.
//! - `export --endpoint URL`: the session's spans sent to an OTLP/HTTP receiver, exactly as
//!   the session's own export makes them (`murmur_trace::otel`): again after a failed
//!   export, or for a session run without one.
//! - `--json`: the view as JSON, with `trace_path` (`a_trace_path`/`b_trace_path` for a diff)
//!   first; field names as [`murmur_trace::analysis`] defines them, and for `show` also
//!   `places`, `changes`, `git` and `tasks[].changes` (the trace's own values, lists whole).
//! - What a trace holds was written by components, models and peers: the human views show its
//!   control characters escaped (a table cell on one line, [`render::line`]; the whole view
//!   through [`render::text`]), and `--json` writes them as JSON escapes ([`render::json`]).
//! - Exit: 0 shown (or exported); 3 the receiver did not take every span (`E-TRC-006`); 2 an
//!   endpoint that is not an http(s) URL (`E-TRC-005`), no trace found (`E-TRC-002`), a trace
//!   that cannot be read (`E-TRC-003`, naming the file and line) or one over the 256 MiB a
//!   trace is read to (`E-TRC-008`, told from its size: nothing of it is read).

use std::path::{Path, PathBuf};

use murmur_manifest::Coded;
use murmur_trace::analysis::{
    self, CallRow, Change, Diff, HookCall, LoadError, NumberChange, Report, SessionSummary, Show,
    TaskView, Tokens, TokensChange, TotalsFrom,
};
use murmur_trace::otel::{OtelExport, ServiceInfo};
use murmur_trace::schema::{WorkspaceChanges, WorkspaceGit};
use murmur_trace::time::utc;
use murmur_trace::{Event, EventBody, Totals};
use serde::Serialize;
use serde_json::Value;

use crate::exit::Exit;
use crate::render;

#[derive(clap::Subcommand)]
pub enum TraceCommand {
    /// Show a session turn by turn: tasks, turns, calls, tokens, redundant reads.
    Show {
        /// A trace.jsonl, a session's directory, or a session id under ROOT. Default: the
        /// newest session under ROOT.
        session: Option<String>,
        #[command(flatten)]
        options: Options,
    },
    /// Report a session's cost: tokens and cache per driver choice, per tool, per hook.
    Report {
        /// A trace.jsonl, a session's directory, or a session id under ROOT. Default: the
        /// newest session under ROOT.
        session: Option<String>,
        #[command(flatten)]
        options: Options,
    },
    /// Send a session's spans to an OTLP/HTTP receiver: again after a failed export, or for the
    /// first time.
    Export {
        /// A trace.jsonl, a session's directory, or a session id under ROOT. Default: the
        /// newest session under ROOT.
        session: Option<String>,
        /// The receiver: a base URL such as `http://127.0.0.1:4318`, or its `/v1/traces` URL.
        #[arg(long, value_name = "URL")]
        endpoint: String,
        #[command(flatten)]
        options: Options,
    },
    /// Show what changed from session A to session B.
    Diff {
        /// A trace.jsonl, a session's directory, or a session id under ROOT.
        a: String,
        /// A trace.jsonl, a session's directory, or a session id under ROOT.
        b: String,
        #[command(flatten)]
        options: Options,
    },
}

/// Where sessions are, and how to print.
#[derive(clap::Args)]
pub struct Options {
    /// Where sessions have their directories (`mur run --workdir`). Default: `./workdir`.
    #[arg(long = "workdir", value_name = "ROOT")]
    root: Option<PathBuf>,
    /// Print the view as JSON.
    #[arg(long)]
    json: bool,
}

impl Options {
    fn root(&self) -> PathBuf {
        self.root
            .clone()
            .unwrap_or_else(|| PathBuf::from("workdir"))
    }
}

/// A failure to find or read a trace: always bad input.
struct Failure {
    code: &'static str,
    message: String,
    hint: String,
}

impl Coded for Failure {
    fn code(&self) -> &'static str {
        self.code
    }

    fn message(&self) -> String {
        self.message.clone()
    }

    fn hint(&self) -> String {
        self.hint.clone()
    }
}

impl Failure {
    fn report(&self, json: bool) -> Exit {
        render::coded(json, self, Exit::BadInput)
    }
}

const NOT_FOUND: &str = "E-TRC-002";
const UNREADABLE: &str = "E-TRC-003";
const CUT: &str = "W-TRC-007";
const BAD_ENDPOINT: &str = "E-TRC-005";
const TOO_LARGE: &str = "E-TRC-008";
const NOT_EXPORTED: &str = "E-TRC-006";

pub fn run(command: TraceCommand) -> Exit {
    match command {
        TraceCommand::Show { session, options } => {
            match resolve_and_load(session.as_deref(), &options.root()) {
                Ok((path, events)) => {
                    let view = analysis::show(&events);
                    let workspace = WorkspaceView::of(&events);
                    if options.json {
                        println!("{}", render::json(&show_json(&path, &view, &workspace)));
                    } else {
                        print!("{}", render::text(&show_text(&path, &view, &workspace)));
                    }
                    Exit::Ok
                }
                Err(failure) => failure.report(options.json),
            }
        }
        TraceCommand::Report { session, options } => {
            match resolve_and_load(session.as_deref(), &options.root()) {
                Ok((path, events)) => {
                    let view = analysis::report(&events);
                    if options.json {
                        print_json(&[("trace_path", &path)], &view);
                    } else {
                        print!("{}", render::text(&report_text(&path, &view)));
                    }
                    Exit::Ok
                }
                Err(failure) => failure.report(options.json),
            }
        }
        TraceCommand::Export {
            session,
            endpoint,
            options,
        } => match resolve_and_load(session.as_deref(), &options.root()) {
            Ok((path, events)) => export(&path, &events, &endpoint, options.json),
            Err(failure) => failure.report(options.json),
        },
        TraceCommand::Diff { a, b, options } => {
            let root = options.root();
            let loaded = resolve_and_load(Some(&a), &root)
                .and_then(|a| resolve_and_load(Some(&b), &root).map(|b| (a, b)));
            match loaded {
                Ok(((a_path, a_events), (b_path, b_events))) => {
                    let view = analysis::diff(&a_events, &b_events);
                    if options.json {
                        print_json(
                            &[("a_trace_path", &a_path), ("b_trace_path", &b_path)],
                            &view,
                        );
                    } else {
                        print!("{}", render::text(&diff_text(&a_path, &b_path, &view)));
                    }
                    Exit::Ok
                }
                Err(failure) => failure.report(options.json),
            }
        }
    }
}

/// Sends the spans of the trace at `path` to `endpoint`, as the session's own export would have
/// (the same ids: a receiver that got some of them before sees the same spans again). A span
/// the trace never closed goes out as an error ending at the trace's last event.
fn export(path: &Path, events: &[Event], endpoint: &str, json: bool) -> Exit {
    let Some((session_id, capsule)) = events.iter().find_map(|event| match &event.body {
        EventBody::SessionStart { capsule, .. } => Some((&event.session_id, capsule)),
        _ => None,
    }) else {
        return load_failure(&LoadError::NoSessionStart {
            path: path.to_path_buf(),
        })
        .report(json);
    };
    let service = ServiceInfo {
        capsule_name: capsule.name.clone(),
        capsule_version: capsule.version.clone(),
    };
    let session_dir = path.parent().unwrap_or(Path::new("."));
    let workdir = match murmur_beneath::BeneathDir::open(session_dir) {
        Ok(dir) => std::sync::Arc::new(dir),
        Err(error) => {
            return render::failure(
                json,
                UNREADABLE,
                &format!(
                    "the session directory {} cannot be opened: {error}",
                    session_dir.display()
                ),
                "name a session directory you can read and write",
                Exit::BadInput,
            );
        }
    };
    let mut export = match OtelExport::start(endpoint, &service, workdir) {
        Ok(export) => export.quiet(),
        Err(reason) => {
            return render::failure(
                json,
                BAD_ENDPOINT,
                &reason,
                "give the receiver's URL, such as `http://127.0.0.1:4318`",
                Exit::BadInput,
            );
        }
    };
    for event in events {
        export.record(event);
    }
    export.finish();
    let url = export.url().to_string();
    if let Some(error) = export.first_failure() {
        return render::failure(
            json,
            NOT_EXPORTED,
            &format!("the spans of session {session_id} did not all reach {url}: {error}"),
            "check that an OTLP/HTTP receiver listens there, then export again: the span ids come from the trace, so the receiver gets the same spans",
            Exit::Stopped,
        );
    }
    let spans = export.spans_sent();
    if json {
        println!(
            "{}",
            render::json(&serde_json::json!({
                "trace_path": path,
                "session_id": session_id,
                "endpoint": url,
                "spans": spans,
            }))
        );
    } else {
        println!(
            "exported {spans} spans of session {} to {}",
            render::line(session_id),
            render::line(&url)
        );
    }
    Exit::Ok
}

/// Prints `view` as one JSON object, `paths` first.
fn print_json(paths: &[(&str, &Path)], view: &impl Serialize) {
    println!("{}", render::json(&json_object(paths, view)));
}

/// `view` as one JSON object, `paths` first.
fn json_object(paths: &[(&str, &Path)], view: &impl Serialize) -> Value {
    let mut object = serde_json::Map::new();
    for (name, path) in paths {
        object.insert(
            name.to_string(),
            Value::String(path.to_string_lossy().into_owned()),
        );
    }
    if let Ok(Value::Object(fields)) = serde_json::to_value(view) {
        object.extend(fields);
    }
    Value::Object(object)
}

/// `show --json`: the view, with where the session worked (`places`), what it changed there
/// (`changes`, `git`: `session_end`'s) and what each task changed (`tasks[].changes`).
fn show_json(path: &Path, view: &Show, workspace: &WorkspaceView) -> Value {
    let mut object = json_object(&[("trace_path", path)], view);
    fn to_value(value: &impl Serialize) -> Value {
        serde_json::to_value(value).unwrap_or(Value::Null)
    }
    if let Value::Object(fields) = &mut object {
        fields.insert("places".to_string(), to_value(&workspace.places));
        fields.insert("changes".to_string(), to_value(&workspace.session));
        fields.insert("git".to_string(), to_value(&workspace.git));
        if let Some(Value::Array(tasks)) = fields.get_mut("tasks") {
            for task in tasks {
                let changes = task["task_id"]
                    .as_str()
                    .and_then(|id| workspace.task(id))
                    .map_or(Value::Null, to_value);
                if let Value::Object(task) = task {
                    task.insert("changes".to_string(), changes);
                }
            }
        }
    }
    object
}

// ---------------------------------------------------------------------------------------------
// Finding and loading the trace

fn resolve_and_load(given: Option<&str>, root: &Path) -> Result<(PathBuf, Vec<Event>), Failure> {
    let path = resolve(given, root)?;
    // Printed and in `--json` as an absolute path, whichever way it was named.
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let loaded = analysis::load(&path).map_err(|error| load_failure(&error))?;
    if let Some(cut) = loaded.cut {
        eprintln!(
            "warning[{CUT}]: {}:{}: the trace ends in a cut line ({} bytes); it was read up to its last whole line\n  hint: the disk filled or the process died while writing it: the session's last event is missing",
            render::line(&path.display().to_string()),
            cut.line,
            cut.bytes
        );
    }
    Ok((path, loaded.events))
}

fn load_failure(error: &LoadError) -> Failure {
    let hint = match error {
        LoadError::Unreadable { .. } => "check that the file exists and that you may read it",
        LoadError::Malformed { .. } => {
            "that line is not a trace event this `mur` reads: the file was cut or edited, or \
             written by another version of murmur"
        }
        LoadError::Empty { .. } | LoadError::NoSessionStart { .. } => {
            "give the trace.jsonl of a session (`<workdir>/ses_…/trace.jsonl`)"
        }
        LoadError::TooLarge { .. } => {
            "the runtime writes no trace that large: the file was grown or replaced after the \
             session; nothing of it was read"
        }
    };
    Failure {
        code: match error {
            LoadError::TooLarge { .. } => TOO_LARGE,
            _ => UNREADABLE,
        },
        message: error.to_string(),
        hint: hint.to_string(),
    }
}

const TRACE_FILE: &str = "trace.jsonl";

/// The trace file `given` names (see the module doc), or the newest session's under `root`.
fn resolve(given: Option<&str>, root: &Path) -> Result<PathBuf, Failure> {
    let Some(given) = given else {
        return newest(root);
    };
    let path = Path::new(given);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if path.is_dir() {
        let trace = path.join(TRACE_FILE);
        if trace.is_file() {
            return Ok(trace);
        }
        return Err(Failure {
            code: NOT_FOUND,
            message: format!("{} holds no {TRACE_FILE}", path.display()),
            hint:
                "give a session's directory (`<workdir>/ses_…`), its trace.jsonl, or a session id"
                    .to_string(),
        });
    }
    let not_found = |message: String| Failure {
        code: NOT_FOUND,
        message,
        hint: format!(
            "give a trace.jsonl, a session's directory, or the id of a session under {} \
             (`--workdir ROOT` names another root)",
            root.display()
        ),
    };
    if given.is_empty() || given.contains(std::path::is_separator) || given == ".." {
        return Err(not_found(format!(
            "there is no file or directory `{given}`"
        )));
    }
    let exact = root.join(given).join(TRACE_FILE);
    if exact.is_file() {
        return Ok(exact);
    }
    let matching: Vec<PathBuf> = sessions(root)
        .into_iter()
        .filter(|dir| {
            dir.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(given))
        })
        .collect();
    match matching.as_slice() {
        [one] => Ok(one.join(TRACE_FILE)),
        [] => Err(not_found(format!(
            "no session `{given}` under {}, and no file or directory of that name",
            root.display()
        ))),
        several => Err(Failure {
            code: NOT_FOUND,
            message: format!(
                "`{given}` is the start of {} session ids under {}: {}",
                several.len(),
                root.display(),
                several
                    .iter()
                    .filter_map(|dir| dir.file_name())
                    .map(|name| name.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            hint: "give more of the session id".to_string(),
        }),
    }
}

/// The session directories under `root` (those holding a trace), sorted by name.
fn sessions(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join(TRACE_FILE).is_file())
        .collect();
    dirs.sort();
    dirs
}

/// When a session started: its `session_start` timestamp, else its trace's mtime (Unix ms).
fn started_at(trace: &Path) -> u64 {
    if let Some(at) = std::fs::File::open(trace)
        .ok()
        .and_then(analysis::session_start_at)
    {
        return at;
    }
    std::fs::metadata(trace)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_millis() as u64)
}

/// The trace of the newest session under `root`.
fn newest(root: &Path) -> Result<PathBuf, Failure> {
    let newest = sessions(root)
        .into_iter()
        .map(|dir| {
            let trace = dir.join(TRACE_FILE);
            (started_at(&trace), trace)
        })
        .max();
    match newest {
        Some((_, trace)) => Ok(trace),
        None => Err(Failure {
            code: NOT_FOUND,
            message: if root.is_dir() {
                format!("no session under {}", root.display())
            } else {
                format!("no session: {} is not a directory", root.display())
            },
            hint: "run it in the capsule's directory (sessions are in `workdir/` beside \
                   murmur.yaml), pass `--workdir ROOT`, or give a trace.jsonl"
                .to_string(),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Where the session worked, and what it changed there

/// Where a session's record and workspace were, from its `session_start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Places {
    /// The record: the directory of the trace, as `session_start.workdir` names it.
    record: String,
    /// The directory the agent worked in. In a trace of record layout 1 (written before the
    /// two were apart: no `workspace`, no `record_layout`), the record itself.
    workspace: String,
    /// Whether the workspace was an existing directory worked on in place (`--workspace`).
    in_place: bool,
    /// 1 when the trace has no `record_layout`.
    record_layout: u32,
}

/// What `show` says about the session's workspace: where it was, what the session and each
/// task changed there (`session_end.changes`, `task_end.changes`) and the git commit it was
/// on (`session_end.git`). Absent parts are absent from the trace.
#[derive(Debug, Default)]
struct WorkspaceView {
    places: Option<Places>,
    session: Option<WorkspaceChanges>,
    git: Option<WorkspaceGit>,
    /// Whether the trace holds `session_end`.
    ended: bool,
    /// `task_end.changes` by task id (the last `task_end` of a task counts).
    tasks: Vec<(String, WorkspaceChanges)>,
}

impl WorkspaceView {
    fn of(events: &[Event]) -> WorkspaceView {
        let mut view = WorkspaceView::default();
        for event in events {
            match &event.body {
                EventBody::SessionStart {
                    workdir,
                    workspace,
                    in_place,
                    record_layout,
                    ..
                } if view.places.is_none() => {
                    view.places = Some(Places {
                        record: workdir.clone(),
                        workspace: if workspace.is_empty() {
                            workdir.clone()
                        } else {
                            workspace.clone()
                        },
                        in_place: *in_place,
                        record_layout: record_layout.unwrap_or(1),
                    });
                }
                EventBody::TaskEnd {
                    task_id, changes, ..
                } => {
                    view.tasks.retain(|(id, _)| id != task_id);
                    if let Some(changes) = changes {
                        view.tasks.push((task_id.clone(), changes.clone()));
                    }
                }
                EventBody::SessionEnd { changes, git, .. } => {
                    view.ended = true;
                    view.session = changes.clone();
                    view.git = git.clone();
                }
                _ => {}
            }
        }
        view
    }

    fn task(&self, task_id: &str) -> Option<&WorkspaceChanges> {
        self.tasks
            .iter()
            .find(|(id, _)| id == task_id)
            .map(|(_, changes)| changes)
    }
}

/// The most paths the human view lists: a page.
const PAGE: usize = 20;

/// `1234 B`, `1.2 KiB`, `3.0 MiB`, `2.5 GiB`.
fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The record and the workspace, one line each, and the git commit the workspace was on.
fn places_text(workspace: &WorkspaceView) -> String {
    let mut text = String::new();
    if let Some(places) = &workspace.places {
        text.push_str(&format!(
            "record {}  (record layout {})\n",
            places.record, places.record_layout
        ));
        let how = if places.record_layout < 2 {
            "  (the record itself: layout 1 kept the agent's files beside the trace)"
        } else if places.in_place {
            "  (in place)"
        } else {
            ""
        };
        text.push_str(&format!("workspace {}{how}\n", places.workspace));
    }
    if let Some(git) = &workspace.git {
        text.push_str(&format!("git commit {}", git.commit));
        if let Some(branch) = &git.branch {
            text.push_str(&format!(" on {branch}"));
        }
        text.push_str(match git.clean {
            Some(true) => ", tracked files clean",
            Some(false) => ", tracked files changed",
            None => ", clean or not unknown",
        });
        text.push_str(" when the first task began\n");
    }
    text
}

/// What each bound in `truncated_by` means, in plain words.
fn bound_text(bound: &str) -> String {
    use murmur_runtime::session::changes::{DEPTH_MAX, ENTRIES_MAX};
    match bound {
        "entries" => format!(
            "the look stopped at its bound of {ENTRIES_MAX} entries: files past it are not \
             counted or listed, and none is reported deleted"
        ),
        "depth" => format!(
            "directories deeper than {DEPTH_MAX} levels were not looked into: nothing is said \
             of the files there"
        ),
        "unreadable" => {
            "a directory could not be opened: nothing is said of the files in it".to_string()
        }
        "listed" => format!(
            "the trace lists at most {} paths of each kind; the counts are exact",
            WorkspaceChanges::LISTED
        ),
        other => format!("bound `{other}`: nothing is said of what lay past it"),
    }
}

/// A task's one line: `  workspace: 2 files changed: 1 created, 1 modified`.
fn task_changes_text(changes: &WorkspaceChanges) -> String {
    format!("  workspace: {}\n", changes.summary())
}

/// The session's changes: the summary, then at most [`PAGE`] paths in path order (kind,
/// path, size), `and N more`, and what each bound hit means.
fn session_changes_text(workspace: &WorkspaceView) -> String {
    let Some(changes) = &workspace.session else {
        return if !workspace.ended {
            "workspace changes: no session_end; each task's line says what it changed\n".to_string()
        } else if workspace.tasks.is_empty() {
            "workspace changes: not recorded (no agent task ran, or the trace was written before \
             they were)\n"
                .to_string()
        } else {
            "workspace changes: not recorded for the session; each task's line says what it \
             changed\n"
                .to_string()
        };
    };
    let mut text = format!("workspace changes: {}\n", changes.summary());
    let mut rows: Vec<(&str, &str, String, bool)> = Vec::new();
    rows.extend(
        changes
            .created
            .iter()
            .map(|c| ("created", c.path.as_str(), size_text(c.size), c.link)),
    );
    rows.extend(changes.modified.iter().map(|m| {
        (
            "modified",
            m.path.as_str(),
            format!(
                "{} -> {}",
                size_text(m.size_before),
                size_text(m.size_after)
            ),
            m.link,
        )
    }));
    rows.extend(
        changes
            .deleted
            .iter()
            .map(|d| ("deleted", d.path.as_str(), size_text(d.size), d.link)),
    );
    rows.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    if !rows.is_empty() {
        let mut table = Table::new(&[("change", false), ("path", false), ("size", true)]);
        for (kind, path, size, link) in rows.iter().take(PAGE) {
            let kind = if *link {
                format!("{kind} (link)")
            } else {
                kind.to_string()
            };
            table.row(vec![kind, path.to_string(), size.clone()]);
        }
        text.push_str(&table.render("  "));
    }
    let counts = &changes.counts;
    let total = counts
        .created
        .saturating_add(counts.modified)
        .saturating_add(counts.deleted);
    let shown = rows.len().min(PAGE) as u64;
    if total > shown {
        text.push_str(&format!(
            "  and {} more (`--json` has up to {} of each kind)\n",
            total - shown,
            WorkspaceChanges::LISTED
        ));
    }
    if changes.truncated {
        for bound in &changes.truncated_by {
            text.push_str(&format!("  truncated: {}\n", bound_text(bound)));
        }
        if changes.truncated_by.is_empty() {
            text.push_str("  truncated: a bound was hit; nothing is said of what lay past it\n");
        }
    }
    text
}

// ---------------------------------------------------------------------------------------------
// Human output

/// Columns aligned by width; numbers (columns marked `right`) right-aligned.
struct Table {
    headers: Vec<&'static str>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// `columns`: header and whether the column is right-aligned.
    fn new(columns: &[(&'static str, bool)]) -> Table {
        Table {
            headers: columns.iter().map(|(header, _)| *header).collect(),
            right: columns.iter().map(|(_, right)| *right).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row. Cells hold text from the trace (tool names, failure summaries a component
    /// wrote): each is shown on one line with its controls escaped ([`render::line`]), before
    /// the widths are measured.
    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|cell| match render::line(&cell) {
                    std::borrow::Cow::Borrowed(_) => cell,
                    std::borrow::Cow::Owned(shown) => shown,
                })
                .collect(),
        );
    }

    fn render(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (column, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(column) {
                    *width = (*width).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::from(indent);
            for (column, cell) in cells.enumerate() {
                let width = widths.get(column).copied().unwrap_or(0);
                if column > 0 {
                    text.push_str("  ");
                }
                if self.right.get(column).copied().unwrap_or(false) {
                    text.push_str(&format!("{cell:>width$}"));
                } else {
                    text.push_str(&format!("{cell:<width$}"));
                }
            }
            text.truncate(text.trim_end().len());
            text.push('\n');
            text
        };
        let mut text = line(&mut self.headers.iter().copied());
        for row in &self.rows {
            text.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        text
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |value| value.to_string())
}

/// The first 12 characters of a hash.
fn short(hash: Option<&str>) -> String {
    hash.map_or_else(|| "-".to_string(), |hash| hash.chars().take(12).collect())
}

fn session_header(session: &SessionSummary, path: &Path) -> String {
    let mut text = format!(
        "session {}  capsule {} {}",
        session.session_id, session.capsule, session.capsule_version
    );
    if let Some(model) = &session.model {
        text.push_str(&format!("  model {model}"));
        if let Some(driver) = &session.driver {
            text.push_str(&format!(" ({driver})"));
        }
    }
    text.push('\n');
    if let Some(resumed) = &session.resumed {
        text.push_str(&format!(
            "resumes session {} (context {}, {} messages)",
            resumed.session_id, resumed.context_id, resumed.messages
        ));
        if !resumed.changed.is_empty() {
            text.push_str(&format!("; changed since: {}", resumed.changed.join("; ")));
        }
        text.push('\n');
    }
    text.push_str(&format!("started {}", utc(session.started_at_ms)));
    match (&session.exit_status, session.duration_ms) {
        (Some(status), Some(duration)) => {
            text.push_str(&format!(", exit {status} after {duration} ms\n"))
        }
        _ => text.push_str(&format!(
            ", last event {}; {}\n",
            utc(session.last_event_at_ms),
            session.note.as_deref().unwrap_or(analysis::NO_SESSION_END)
        )),
    }
    text.push_str(&format!("trace {}\n", path.display()));
    text
}

fn tokens_cells(tokens: &Tokens) -> Vec<String> {
    vec![
        tokens.input_tokens_estimated.to_string(),
        tokens.output_tokens_estimated.to_string(),
        opt(tokens.input_tokens_actual),
        opt(tokens.output_tokens_actual),
        opt(tokens.cached_tokens_actual),
        opt(tokens.cache_write_tokens_actual),
    ]
}

const TOKEN_COLUMNS: [(&str, bool); 6] = [
    ("in est", true),
    ("out est", true),
    ("in act", true),
    ("out act", true),
    ("cache rd", true),
    ("cache wr", true),
];

fn with_tokens(
    before: &[(&'static str, bool)],
    after: &[(&'static str, bool)],
) -> Vec<(&'static str, bool)> {
    let mut columns = before.to_vec();
    columns.extend(TOKEN_COLUMNS);
    columns.extend_from_slice(after);
    columns
}

fn totals_text(totals: &Totals, from: TotalsFrom) -> String {
    let from = match from {
        TotalsFrom::SessionEnd => "from session_end",
        TotalsFrom::Events => "summed from the events: no session_end",
    };
    let mut text = format!(
        "totals ({from}): {}, {}, {}, {}, {}\n",
        render::plural(totals.tasks as usize, "task"),
        render::plural(totals.turns as usize, "inference call"),
        render::plural(totals.tool_calls as usize, "tool call"),
        render::plural(totals.shell_calls as usize, "shell call"),
        render::plural(totals.skill_calls as usize, "skill call"),
    );
    text.push_str(&format!(
        "  tokens: {} in / {} out estimated; {} in / {} out reported; {} cache read, {} cache write\n",
        totals.input_tokens_estimated,
        totals.output_tokens_estimated,
        opt(totals.input_tokens_actual),
        opt(totals.output_tokens_actual),
        opt(totals.cached_tokens_actual),
        opt(totals.cache_write_tokens_actual),
    ));
    text
}

fn calls_table(calls: &[&CallRow], redundant: &[analysis::RedundantCall]) -> Table {
    let mut table = Table::new(&[
        ("turn", true),
        ("call", false),
        ("tool", false),
        ("status", false),
        ("effect", false),
        ("resource", false),
        ("ms", true),
        ("bytes", true),
        ("note", false),
    ]);
    for call in calls {
        let note = if call.redundant {
            redundant
                .iter()
                .find(|r| r.call_id == call.call_id && r.turn == call.turn)
                .map_or_else(
                    || "redundant".to_string(),
                    |r| {
                        format!(
                            "redundant: repeats turn {} {}",
                            r.repeats.turn, r.repeats.call_id
                        )
                    },
                )
        } else {
            call.detail.clone().unwrap_or_default()
        };
        table.row(vec![
            call.turn.to_string(),
            call.call_id.clone(),
            call.tool_name.clone(),
            call.status.clone(),
            opt(call.state_effect.clone()),
            opt(call.resource_id.clone().or_else(|| call.input_path.clone())),
            call.duration_ms.to_string(),
            call.output_bytes.to_string(),
            note,
        ]);
    }
    table
}

fn hook_calls_table(calls: &[HookCall]) -> Table {
    let mut table = Table::new(&with_tokens(
        &[("hook", false), ("turn", true), ("model", false)],
        &[("ms", true), ("stop", false)],
    ));
    for call in calls {
        let mut cells = vec![call.hook.clone(), call.turn.to_string(), call.model.clone()];
        cells.extend(tokens_cells(&call.tokens));
        cells.push(call.duration_ms.to_string());
        cells.push(call.stop_reason.to_string());
        table.row(cells);
    }
    table
}

fn task_text(
    task: &TaskView,
    redundant: &[analysis::RedundantCall],
    changes: Option<&WorkspaceChanges>,
) -> String {
    let mut text = format!(
        "task {} ({}): {}, {}",
        task.task_id,
        task.source.as_deref().unwrap_or("no task_start"),
        task.exit_status
            .map_or_else(|| "no task_end".to_string(), |s| format!("exit {s}")),
        render::plural(task.turns.len(), "turn"),
    );
    if let Some(duration) = task.duration_ms {
        text.push_str(&format!(", {duration} ms"));
    }
    text.push('\n');
    if let Some(error) = &task.error {
        text.push_str(&format!("  error[{}]: {}\n", error.code, error.message));
    }
    let mut turns = Table::new(&with_tokens(
        &[
            ("turn", true),
            ("choice", false),
            ("model", false),
            ("decision", false),
            ("tools", false),
        ],
        &[("ms", true), ("stop", false)],
    ));
    for turn in &task.turns {
        let mut cells = vec![
            turn.turn.to_string(),
            turn.choice.clone(),
            turn.model.clone(),
            turn.decision.to_string(),
            if turn.tools.is_empty() {
                "-".to_string()
            } else {
                turn.tools.join(",")
            },
        ];
        cells.extend(tokens_cells(&turn.tokens));
        cells.push(turn.duration_ms.to_string());
        cells.push(turn.stop_reason.to_string());
        turns.row(cells);
    }
    if !task.turns.is_empty() {
        text.push_str(&turns.render("  "));
    }
    let calls: Vec<&CallRow> = task
        .turns
        .iter()
        .flat_map(|turn| &turn.calls)
        .chain(&task.calls_outside_turns)
        .collect();
    if !calls.is_empty() {
        text.push_str("  calls\n");
        text.push_str(&calls_table(&calls, redundant).render("  "));
    }
    if !task.hook_calls.is_empty() {
        text.push_str("  hook calls\n");
        text.push_str(&hook_calls_table(&task.hook_calls).render("  "));
    }
    if !task.compactions.is_empty() {
        text.push_str("  compactions\n");
        let mut table = Table::new(&[
            ("turn", true),
            ("hook", false),
            ("tokens", false),
            ("messages", false),
            ("ms", true),
        ]);
        for compaction in &task.compactions {
            table.row(vec![
                compaction.turn.to_string(),
                compaction.hook.clone(),
                format!(
                    "{} -> {}",
                    compaction.tokens_before, compaction.tokens_after
                ),
                format!(
                    "{} -> {}",
                    compaction.messages_before, compaction.messages_after
                ),
                compaction.duration_ms.to_string(),
            ]);
        }
        text.push_str(&table.render("  "));
    }
    if let Some(changes) = changes {
        text.push_str(&task_changes_text(changes));
    }
    text
}

fn show_text(path: &Path, view: &Show, workspace: &WorkspaceView) -> String {
    let mut text = session_header(&view.session, path);
    text.push_str(&places_text(workspace));
    for task in &view.tasks {
        text.push('\n');
        text.push_str(&task_text(
            task,
            &view.redundant_calls,
            workspace.task(&task.task_id),
        ));
    }
    if !view.session_hook_calls.is_empty() {
        text.push_str("\nhook calls outside any task\n");
        text.push_str(&hook_calls_table(&view.session_hook_calls).render("  "));
    }
    text.push('\n');
    text.push_str(&session_changes_text(workspace));
    text.push('\n');
    text.push_str(&totals_text(&view.totals, view.totals_from));
    text.push('\n');
    if view.redundant_calls.is_empty() {
        text.push_str("redundant calls: none\n");
    } else {
        text.push_str(&format!(
            "redundant calls: {}\n",
            view.redundant_calls.len()
        ));
        let mut table = Table::new(&[
            ("task", false),
            ("turn", true),
            ("call", false),
            ("tool", false),
            ("key", false),
            ("key kind", false),
            ("repeats", false),
        ]);
        for call in &view.redundant_calls {
            table.row(vec![
                call.task_id.clone(),
                call.turn.to_string(),
                call.call_id.clone(),
                call.tool_name.clone(),
                call.key.clone(),
                match call.key_kind {
                    analysis::KeyKind::ResourceId => "resource_id",
                    analysis::KeyKind::InputPath => "input_path",
                }
                .to_string(),
                format!("turn {} {}", call.repeats.turn, call.repeats.call_id),
            ]);
        }
        text.push_str(&table.render("  "));
    }
    text
}

fn report_text(path: &Path, view: &Report) -> String {
    let mut text = session_header(&view.session, path);
    text.push_str("\nchoices (the agent loop's calls)\n");
    if view.choices.is_empty() {
        text.push_str("  none\n");
    } else {
        let mut table = Table::new(&with_tokens(
            &[
                ("choice", false),
                ("driver", false),
                ("model", false),
                ("calls", true),
            ],
            &[("cache hit", true), ("ms", true)],
        ));
        for choice in &view.choices {
            let mut cells = vec![
                choice.choice.clone(),
                choice.driver.clone(),
                choice.model.clone(),
                choice.calls.to_string(),
            ];
            cells.extend(tokens_cells(&choice.tokens));
            cells.push(opt(choice
                .cache_hit_ratio
                .map(|ratio| format!("{:.1}%", ratio * 100.0))));
            cells.push(choice.duration_ms.to_string());
            table.row(cells);
        }
        text.push_str(&table.render("  "));
    }
    text.push_str("\ntools\n");
    if view.tools.is_empty() {
        text.push_str("  none\n");
    } else {
        let mut table = Table::new(&[
            ("tool", false),
            ("calls", true),
            ("passed", true),
            ("failed", true),
            ("refused", true),
            ("denied", true),
            ("ms", true),
            ("out bytes", true),
            ("redundant", true),
        ]);
        for tool in &view.tools {
            table.row(vec![
                tool.tool_name.clone(),
                tool.calls.to_string(),
                tool.passed.to_string(),
                tool.failed.to_string(),
                tool.refused.to_string(),
                tool.denied.to_string(),
                tool.duration_ms.to_string(),
                tool.output_bytes.to_string(),
                tool.redundant_reads.to_string(),
            ]);
        }
        text.push_str(&table.render("  "));
    }
    text.push_str("\nhooks\n");
    if view.hooks.is_empty() {
        text.push_str("  none\n");
    } else {
        let mut table = Table::new(&with_tokens(
            &[("hook", false), ("calls", true)],
            &[
                ("ms", true),
                ("compactions", true),
                ("dispatch errors", true),
                ("denials", true),
                ("reopens", true),
            ],
        ));
        for hook in &view.hooks {
            let mut cells = vec![hook.hook.clone(), hook.inference_calls.to_string()];
            cells.extend(tokens_cells(&hook.tokens));
            cells.extend([
                hook.inference_duration_ms
                    .saturating_add(hook.compaction_duration_ms)
                    .to_string(),
                hook.compactions.to_string(),
                hook.dispatch_errors.to_string(),
                hook.denials.to_string(),
                hook.reopens.to_string(),
            ]);
            table.row(cells);
        }
        text.push_str(&table.render("  "));
    }
    text.push('\n');
    text.push_str(&totals_text(&view.totals, view.totals_from));
    text.push_str(&format!("redundant reads: {}\n", view.redundant_reads));
    text
}

fn change_text<T: PartialEq>(change: &Change<T>) -> String {
    if change.changed { "changed" } else { "=" }.to_string()
}

fn delta_text(change: &NumberChange) -> String {
    match change.delta {
        Some(0) => "=".to_string(),
        Some(delta) if delta > 0 => format!("+{delta}"),
        Some(delta) => delta.to_string(),
        None if change.a == change.b => "=".to_string(),
        None => "changed".to_string(),
    }
}

fn number_row(table: &mut Table, name: &str, change: &NumberChange) {
    table.row(vec![
        name.to_string(),
        opt(change.a),
        opt(change.b),
        delta_text(change),
    ]);
}

fn tokens_rows(table: &mut Table, tokens: &TokensChange) {
    for (name, change) in [
        ("tokens in est", &tokens.input_tokens_estimated),
        ("tokens out est", &tokens.output_tokens_estimated),
        ("tokens in act", &tokens.input_tokens_actual),
        ("tokens out act", &tokens.output_tokens_actual),
        ("cache read", &tokens.cached_tokens_actual),
        ("cache write", &tokens.cache_write_tokens_actual),
    ] {
        number_row(table, name, change);
    }
}

fn text_row<T: ToString + Clone + PartialEq>(
    table: &mut Table,
    name: &str,
    change: &Change<Option<T>>,
) {
    table.row(vec![
        name.to_string(),
        opt(change.a.clone()),
        opt(change.b.clone()),
        change_text(change),
    ]);
}

fn diff_table() -> Table {
    Table::new(&[("", false), ("A", false), ("B", false), ("change", false)])
}

fn diff_text(a_path: &Path, b_path: &Path, view: &Diff) -> String {
    let mut text = String::new();
    for (side, summary, path) in [("A", &view.a, a_path), ("B", &view.b, b_path)] {
        text.push_str(&format!(
            "{side}  {}  capsule {} {}  {}  trace {}\n",
            summary.session_id,
            summary.capsule,
            summary.capsule_version,
            utc(summary.started_at_ms),
            path.display()
        ));
    }
    for warning in &view.warnings {
        text.push_str(&format!("warning: {warning}\n"));
    }
    text.push_str("\nsession\n");
    let mut table = diff_table();
    table.row(vec![
        "capsule".to_string(),
        view.capsule.a.clone(),
        view.capsule.b.clone(),
        change_text(&view.capsule),
    ]);
    table.row(vec![
        "capsule version".to_string(),
        view.capsule_version.a.clone(),
        view.capsule_version.b.clone(),
        change_text(&view.capsule_version),
    ]);
    table.row(vec![
        "system prompt".to_string(),
        short(view.system_prompt_sha256.a.as_deref()),
        short(view.system_prompt_sha256.b.as_deref()),
        change_text(&view.system_prompt_sha256),
    ]);
    text_row(&mut table, "model", &view.model);
    text_row(&mut table, "driver", &view.driver);
    let mut tools_change: Vec<String> = view.tools_added.iter().map(|t| format!("+{t}")).collect();
    tools_change.extend(view.tools_removed.iter().map(|t| format!("-{t}")));
    table.row(vec![
        "tools".to_string(),
        view.a.tools.join(","),
        view.b.tools.join(","),
        if tools_change.is_empty() {
            "=".to_string()
        } else {
            tools_change.join(" ")
        },
    ]);
    text_row(&mut table, "exit status", &view.exit_status);
    number_row(&mut table, "duration ms", &view.duration_ms);
    number_row(&mut table, "turns", &view.turns);
    number_row(&mut table, "tool calls", &view.tool_calls);
    tokens_rows(&mut table, &view.tokens);
    text.push_str(&table.render("  "));
    for task in &view.tasks {
        let id = |side: Option<&analysis::TaskSide>| {
            side.map_or_else(|| "none".to_string(), |t| t.task_id.clone())
        };
        text.push_str(&format!(
            "\ntask {}  ({} vs {})\n",
            task.position,
            id(task.a.as_ref()),
            id(task.b.as_ref())
        ));
        let mut table = diff_table();
        let hash =
            |side: Option<&analysis::TaskSide>| short(side.and_then(|t| t.input_sha256.as_deref()));
        table.row(vec![
            "input".to_string(),
            hash(task.a.as_ref()),
            hash(task.b.as_ref()),
            if task.input_changed { "changed" } else { "=" }.to_string(),
        ]);
        number_row(&mut table, "turns", &task.turns);
        let sequence = |side: Option<&analysis::TaskSide>| {
            side.map_or_else(
                || "-".to_string(),
                |t| {
                    if t.tool_sequence.is_empty() {
                        "none".to_string()
                    } else {
                        t.tool_sequence.join(",")
                    }
                },
            )
        };
        table.row(vec![
            "tool calls".to_string(),
            sequence(task.a.as_ref()),
            sequence(task.b.as_ref()),
            if task.tool_sequence_changed {
                "changed"
            } else {
                "="
            }
            .to_string(),
        ]);
        tokens_rows(&mut table, &task.tokens);
        text_row(&mut table, "exit status", &task.exit_status);
        number_row(&mut table, "duration ms", &task.duration_ms);
        text.push_str(&table.render("  "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tables_align_columns() {
        let mut table = Table::new(&[("name", false), ("n", true)]);
        table.row(vec!["a".to_string(), "10".to_string()]);
        table.row(vec!["long".to_string(), "2".to_string()]);
        assert_eq!(table.render(""), "name   n\na     10\nlong   2\n");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size_text(0), "0 B");
        assert_eq!(size_text(1023), "1023 B");
        assert_eq!(size_text(1536), "1.5 KiB");
        assert_eq!(size_text(3 << 20), "3.0 MiB");
        assert_eq!(size_text(u64::MAX), "17179869184.0 GiB");
    }

    #[test]
    fn a_long_list_shows_a_page_and_says_how_many_more_and_why_it_is_cut() {
        use murmur_trace::schema::{ChangeCounts, FileCreated};
        let created: Vec<FileCreated> = (0..WorkspaceChanges::LISTED)
            .map(|n| FileCreated {
                path: format!("f{n:04}"),
                size: 2048,
                sha256: None,
                link: false,
            })
            .collect();
        let view = WorkspaceView {
            session: Some(WorkspaceChanges {
                created,
                counts: ChangeCounts {
                    created: 1_500,
                    modified: 0,
                    deleted: 0,
                },
                entries: 200_000,
                truncated: true,
                truncated_by: vec!["entries".to_string(), "listed".to_string()],
                ..WorkspaceChanges::default()
            }),
            ended: true,
            ..WorkspaceView::default()
        };
        let text = session_changes_text(&view);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "workspace changes: 1500 files changed: 1500 created (truncated: entries, listed)"
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["change", "path", "size"]
        );
        assert!(
            lines[2].contains("created") && lines[2].contains("f0000"),
            "{text}"
        );
        assert!(lines[2].ends_with("2.0 KiB"), "{text}");
        assert!(
            lines[PAGE + 1].contains(&format!("f{:04}", PAGE - 1)),
            "{text}"
        );
        assert_eq!(
            lines[PAGE + 2],
            "  and 1480 more (`--json` has up to 1000 of each kind)"
        );
        assert_eq!(
            lines[PAGE + 3],
            "  truncated: the look stopped at its bound of 100000 entries: files past it are not counted or listed, and none is reported deleted"
        );
        assert_eq!(
            lines[PAGE + 4],
            "  truncated: the trace lists at most 1000 paths of each kind; the counts are exact"
        );
        assert_eq!(lines.len(), PAGE + 5, "{text}");
    }

    #[test]
    fn the_git_line_names_the_commit_the_branch_and_whether_it_was_clean() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let line = |branch: Option<&str>, clean: Option<bool>| {
            places_text(&WorkspaceView {
                git: Some(WorkspaceGit {
                    commit: commit.to_string(),
                    branch: branch.map(str::to_string),
                    clean,
                }),
                ..WorkspaceView::default()
            })
        };
        assert_eq!(
            line(Some("main"), Some(true)),
            format!("git commit {commit} on main, tracked files clean when the first task began\n")
        );
        assert_eq!(
            line(None, Some(false)),
            format!("git commit {commit}, tracked files changed when the first task began\n")
        );
        assert_eq!(
            line(None, None),
            format!("git commit {commit}, clean or not unknown when the first task began\n")
        );
    }

    /// The event types the generated lines have, and last one no trace has.
    const EVENT_TYPES: [&str; 13] = [
        "session_start",
        "task_start",
        "inference",
        "tool_call",
        "skill_call",
        "shell",
        "compaction",
        "call_denied",
        "hook_dispatch_error",
        "task_reopened",
        "task_end",
        "session_end",
        "teleport",
    ];

    /// A field of every name the event types need, with a value of the right type.
    const EVERY_FIELD: &str = r#"{
        "session_id": "ses_x", "timestamp": 0, "event_id": "e", "parent_id": null,
        "task_id": "tsk_1", "context_id": null, "turn": 1, "call_id": "c", "tool_name": "t",
        "status": "passed", "origin": "agent", "choice": "primary", "driver": "d",
        "model": "m", "input_tokens_estimated": 1, "output_tokens_estimated": 1,
        "duration_ms": 1, "output_bytes": 1, "timed_out": false, "hook": "h",
        "exit_status": "ok", "input_sha256": "", "skill": "s", "version": "1", "sha256": "f",
        "capsule": {"name": "c", "version": "1"}, "murmur_version": "0", "workdir": "/w",
        "components": [], "tools": ["t"], "containment": null,
        "sent": {"messages": 1, "full_resend": true}, "prompt_cache_key": "k",
        "stop_reason": "end_turn", "decision": "finish", "tool_calls": 0, "is_error": false,
        "binary": "b", "command": "c", "argv": [], "stdout_bytes": 1, "stderr_bytes": 2,
        "truncated": false, "tokens_before": 1, "tokens_after": 1, "messages_before": 1,
        "messages_after": 1, "context_window": 1, "threshold": 0.5, "turns": 1,
        "reopen_count": 0, "source": "cli", "input_chars": 1, "kind": "tool", "target": "t",
        "reason": "r", "handler": "h", "message": "m", "feedback_chars": 1,
        "totals": {"tasks": 1, "turns": 1, "tool_calls": 1, "input_tokens_estimated": 1,
                   "output_tokens_estimated": 1}
    }"#;

    /// JSON values shaped like trace lines: every event type, with fields of the right names
    /// and of arbitrary values, so that some lines load and some do not.
    fn trace_line() -> impl Strategy<Value = String> {
        (
            prop::sample::select(EVENT_TYPES[..EVENT_TYPES.len() - 1].to_vec()),
            prop::collection::vec(field_value(), 0..6),
        )
            .prop_map(|(event_type, fields)| line_of(event_type, fields))
    }

    /// A line of `event_type` with `fields` set over [`EVERY_FIELD`].
    fn line_of(event_type: &str, fields: Vec<(&str, Value)>) -> String {
        let mut object: Value = serde_json::from_str(EVERY_FIELD).unwrap_or_default();
        if let Value::Object(map) = &mut object {
            map.insert("event_type".to_string(), Value::from(event_type));
            for (name, value) in fields {
                map.insert(name.to_string(), value);
            }
        }
        object.to_string()
    }

    /// A field and a value: mostly of the field's own type (extremes included), sometimes
    /// `null` (fine for an optional field, an error for a required one).
    fn field_value() -> impl Strategy<Value = (&'static str, Value)> {
        let text = prop::sample::select(vec![
            "tsk_1", "tsk_2", "read", "mutate", "passed", "failed", "refused", "hook:h", "agent",
            "file:a", "file:./a", "a", "",
        ])
        .prop_map(Value::from);
        prop_oneof![
            4 => (
                prop::sample::select(vec![
                    "task_id", "call_id", "tool_name", "status", "origin", "choice", "driver",
                    "model", "hook", "exit_status", "resource_id", "input_path", "state_effect",
                    "parent_id", "event_id", "input_sha256", "system_prompt_sha256",
                ]),
                text,
            ),
            2 => (
                prop::sample::select(vec!["turn", "tool_calls", "reopen_count"]),
                any::<u32>().prop_map(Value::from),
            ),
            4 => (
                prop::sample::select(vec![
                    "timestamp", "input_tokens_estimated", "output_tokens_estimated",
                    "input_tokens_actual", "output_tokens_actual", "cached_tokens_actual",
                    "cache_write_tokens_actual", "duration_ms", "output_bytes", "stdout_bytes",
                    "stderr_bytes",
                ]),
                any::<u64>().prop_map(Value::from),
            ),
            1 => (Just("exit_code"), any::<i32>().prop_map(Value::from)),
            1 => (
                prop::sample::select(vec!["timed_out", "is_error"]),
                any::<bool>().prop_map(Value::from),
            ),
            1 => (
                prop::sample::select(vec!["task_id", "turn", "state_effect", "resource_id"]),
                Just(Value::Null),
            ),
            1 => (Just("changes"), changes_value()),
            1 => (
                Just("git"),
                (text_value(), prop::option::of(text_value()), prop::option::of(any::<bool>()))
                    .prop_map(|(commit, branch, clean)| {
                        serde_json::json!({"commit": commit, "branch": branch, "clean": clean})
                    }),
            ),
        ]
    }

    /// A path or name, sometimes with controls in it.
    fn text_value() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a.txt",
            "d/b.md",
            "",
            "x\x1b]0;t\x07\r",
            "\u{202e}gnp.exe",
        ])
        .prop_map(str::to_string)
    }

    /// A `changes` value: lists of any length a page holds and past it, counts of any size
    /// (not matching the lists), any bounds named.
    fn changes_value() -> impl Strategy<Value = Value> {
        let entry = || (text_value(), any::<u64>(), any::<u64>(), any::<bool>());
        (
            prop::collection::vec(entry(), 0..30),
            prop::collection::vec(entry(), 0..3),
            prop::collection::vec(entry(), 0..3),
            [any::<u64>(), any::<u64>(), any::<u64>()],
            any::<bool>(),
            prop::collection::vec(
                prop::sample::select(vec!["entries", "depth", "unreadable", "listed", "other"]),
                0..3,
            ),
        )
            .prop_map(|(created, modified, deleted, counts, truncated, by)| {
                let created: Vec<Value> = created
                    .into_iter()
                    .map(|(path, size, _, link)| serde_json::json!({"path": path, "size": size, "link": link}))
                    .collect();
                let modified: Vec<Value> = modified
                    .into_iter()
                    .map(|(path, before, after, link)| {
                        serde_json::json!({"path": path, "size_before": before, "size_after": after, "link": link})
                    })
                    .collect();
                let deleted: Vec<Value> = deleted
                    .into_iter()
                    .map(|(path, size, _, link)| serde_json::json!({"path": path, "size": size, "link": link}))
                    .collect();
                serde_json::json!({
                    "created": created, "modified": modified, "deleted": deleted,
                    "counts": {"created": counts[0], "modified": counts[1], "deleted": counts[2]},
                    "entries": counts[0], "truncated": truncated, "truncated_by": by,
                })
            })
    }

    #[test]
    fn the_generated_lines_can_be_every_known_event_type() {
        for event_type in EVENT_TYPES.iter().filter(|t| **t != "teleport") {
            let mut object: Value = serde_json::from_str(EVERY_FIELD).unwrap();
            object["event_type"] = Value::from(*event_type);
            let event: Result<Event, _> = serde_json::from_value(object);
            assert!(event.is_ok(), "{event_type}: {event:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn loading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
            let _ = analysis::parse(&bytes, Path::new("trace.jsonl"));
        }

        #[test]
        fn arbitrary_lines_load_or_fail_and_every_view_runs(
            lines in prop::collection::vec(trace_line(), 1..40),
            with_start in prop::bool::weighted(0.9),
            garbage in prop::option::weighted(0.1, "[^\n]{0,40}"),
        ) {
            let mut text = if with_start {
                line_of("session_start", Vec::new()) + "\n"
            } else {
                String::new()
            };
            text.push_str(&lines.join("\n"));
            if let Some(garbage) = garbage {
                text.push('\n');
                text.push_str(&garbage);
            }
            let parsed = analysis::parse(text.as_bytes(), Path::new("trace.jsonl"));
            if let Ok(analysis::Loaded { events, .. }) = parsed {
                let shown = analysis::show(&events);
                let reported = analysis::report(&events);
                let diffed = analysis::diff(&events, &events);
                let workspace = WorkspaceView::of(&events);
                let _ = show_text(Path::new("t"), &shown, &workspace);
                prop_assert!(show_json(Path::new("t"), &shown, &workspace).is_object());
                let _ = report_text(Path::new("t"), &reported);
                let _ = diff_text(Path::new("a"), Path::new("b"), &diffed);
                prop_assert!(serde_json::to_string(&shown).is_ok());
                prop_assert!(serde_json::to_string(&reported).is_ok());
                prop_assert!(serde_json::to_string(&diffed).is_ok());
            }
        }
    }
}
