//! Resuming: a new session that goes on with the conversation an earlier session of the same
//! workdir root left (`mur run --resume [SESSION]`).
//!
//! What a caller can rely on:
//!
//! - **Which session** ([`find`]): `SESSION` is the id of a session directory under the
//!   workdir root; none names the session that started last, by the `session_start` timestamp
//!   its trace begins with (the record's own word: no file time counts, so touching an older
//!   session's trace does not make it the one resumed; a trace whose first line is not a
//!   `session_start` is no session's). An id that is not a session id (`ses_…`, see
//!   [`is_safe_id`]), a session that is not there, a trace that cannot be read or a session
//!   that saved no conversation is `E-RUN-024`, and nothing starts. The earlier session's
//!   directory is only read, through the workdir handle: nothing planted in it is followed.
//! - **Which conversation**: the context of the last `history_saved` event of that session's
//!   trace (the runtime writes one as each task saves its conversation). The new session copies
//!   it into its own workdir, and every task it runs goes on with it under the same context id,
//!   whatever `lifecycle.conversation` says.
//! - **The one recorded, or none**: the context's `history.json` must be, byte for byte, what
//!   that event recorded (its sha256). A file that differs, or is gone, is `E-RUN-031` naming
//!   the context and both hashes, and nothing starts: nothing is sent to a model. A session
//!   whose trace records no `history_saved` (written before it was recorded) cannot be
//!   resumed (`E-RUN-024`).
//! - **Bounded reads**: the trace is read to 256 MiB
//!   ([`murmur_trace::analysis::TRACE_MAX_BYTES`]), the history to 32 MiB
//!   ([`crate::session::workdir::HISTORY_MAX_BYTES`]), each trace's first line to 4 MiB when choosing the last session;
//!   a trace or history past its bound is `E-RUN-032`, told from its size before it is read.
//! - **As it was**: the messages as saved, `produced_by` marks included, so thinking still
//!   reaches only the model that wrote it. The new session starts on the primary choice, like
//!   every launch, and holds no continuation from the earlier one: its first call resends the
//!   conversation whole.
//! - **Said**: `session_start.resumed` names the session, the context, how many messages it
//!   held and what of the capsule changed since (its `murmur.yaml`; an artifact added, removed
//!   or of other bytes). A change is also told to the caller (`W-RUN-025`, [`Resume::warning`]).

use std::path::Path;

use murmur_beneath::{BeneathDir, BeneathError};
use murmur_manifest::Diagnostic;
use murmur_trace::analysis::{TRACE_MAX_BYTES, session_start_at};
use murmur_trace::schema::{ComponentRef, EventBody, Resumed};

use crate::inference::neutral::StoredMessage;
use crate::session::workdir::{Workdir, is_safe_id};

/// No session, or none to resume.
const NOT_RESUMABLE: &str = "E-RUN-024";
/// The conversation file is not the one the trace recorded.
const NOT_RECORDED: &str = "E-RUN-031";
/// A record file over the bound it is read to.
const OVER_BOUND: &str = "E-RUN-032";

/// The conversation a new session goes on with.
#[derive(Debug, Clone)]
pub struct Resume {
    pub session_id: String,
    pub context_id: String,
    pub history: Vec<StoredMessage>,
    /// What of the capsule differs from what that session ran, one line each.
    pub changed: Vec<String>,
}

impl Resume {
    /// The record `session_start.resumed` carries.
    pub fn record(&self) -> Resumed {
        Resumed {
            session_id: self.session_id.clone(),
            context_id: self.context_id.clone(),
            messages: self.history.len() as u64,
            changed: self.changed.clone(),
        }
    }

    /// `W-RUN-025` when the capsule changed since the resumed session.
    pub fn warning(&self) -> Option<Diagnostic> {
        if self.changed.is_empty() {
            return None;
        }
        Some(
            Diagnostic::new(
                "W-RUN-025",
                format!(
                    "the capsule changed since session {} ran: {}",
                    self.session_id,
                    self.changed.join("; ")
                ),
            )
            .hint(
                "the conversation goes on under the capsule as it is now; resume from a checkout \
                 of the earlier capsule to go on under that one",
            ),
        )
    }
}

/// Why no session could be resumed: `E-RUN-024` (no such session, or nothing to resume),
/// `E-RUN-031` (a conversation that is not the one recorded), `E-RUN-032` (a record file over
/// its bound).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ResumeError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl murmur_manifest::Coded for ResumeError {
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

fn refused(message: String, hint: &str) -> ResumeError {
    coded(NOT_RESUMABLE, message, hint)
}

fn coded(code: &'static str, message: String, hint: &str) -> ResumeError {
    ResumeError {
        code,
        message,
        hint: hint.to_string(),
    }
}

/// What the capsule is now, for telling what changed: its name, its manifest's sha256 and the
/// components it loads.
pub struct CapsuleNow<'a> {
    pub name: &'a str,
    pub manifest_sha256: &'a str,
    pub components: &'a [ComponentRef],
}

/// The conversation to resume: of `session` under `workdir_root`, else of the session whose
/// trace was written last there, compared with the capsule as it is `now`.
pub fn find(
    workdir_root: &Path,
    session: Option<&str>,
    now: &CapsuleNow<'_>,
) -> Result<Resume, ResumeError> {
    let session_id = match session {
        Some(id) => {
            if !(is_safe_id(id) && id.starts_with("ses_")) {
                return Err(refused(
                    format!("`{}` is not a session id", id.escape_debug()),
                    "name a session by its id (`ses_…`, as `mur run --json` reports it and `mur trace` lists it); put the capsule directory before --resume",
                ));
            }
            id.to_string()
        }
        None => latest(workdir_root)?,
    };
    let workdir = Workdir::open(workdir_root, &session_id).map_err(|error| {
        refused(
            format!(
                "there is no session {session_id} under {}: {error}",
                workdir_root.display()
            ),
            "resume a session of this capsule's workdir root (see --workdir)",
        )
    })?;
    let unreadable = |reason: String| {
        refused(
            format!("the trace of session {session_id} cannot be read: {reason}"),
            "resume another session; `mur trace` shows what this one holds",
        )
    };
    let bytes = workdir
        .record_dir()
        .read("trace.jsonl", TRACE_MAX_BYTES)
        .map_err(|error| match error {
            BeneathError::TooLarge { limit, .. } => coded(
                OVER_BOUND,
                format!(
                    "the trace of session {session_id} is over the {} MiB bound a trace is read to",
                    limit >> 20
                ),
                "the runtime writes no trace that large: resume another session",
            ),
            error => unreadable(error.to_string()),
        })?;
    let loaded = murmur_trace::analysis::parse(&bytes, &workdir.trace())
        .map_err(|error| unreadable(error.to_string()))?;
    let mut then: Option<Then<'_>> = None;
    // The last conversation the runtime saved: its context and the sha256 of its bytes.
    let mut saved: Option<(&str, &str)> = None;
    for event in &loaded.events {
        match &event.body {
            EventBody::SessionStart {
                capsule,
                manifest_sha256,
                components,
                ..
            } if then.is_none() => {
                then = Some(Then {
                    capsule: &capsule.name,
                    manifest_sha256,
                    components,
                })
            }
            EventBody::HistorySaved {
                context_id, sha256, ..
            } => saved = Some((context_id, sha256)),
            _ => {}
        }
    }
    let Some(then) = then else {
        return Err(unreadable("it has no session_start".to_string()));
    };
    let Some((context_id, recorded)) = saved else {
        return Err(refused(
            format!("session {session_id} recorded no saved conversation to resume"),
            "a session saves its conversation as each task ends (its trace's `history_saved`); \
             resume one whose tasks ran (a session written before `history_saved` was recorded \
             cannot be resumed)",
        ));
    };
    let history = workdir.history_file(context_id).map_err(|error| match error {
        BeneathError::TooLarge { limit, .. } => coded(
            OVER_BOUND,
            format!(
                "the conversation of context {context_id} of session {session_id} is over the {} MiB bound a history is read to",
                limit >> 20
            ),
            "the runtime writes no history that large: the file was replaced; resume another session",
        ),
        error => refused(
            format!("the conversation of context {context_id} of session {session_id} cannot be read: {error}"),
            "the runtime writes `contexts/<context-id>/history.json` itself; a session whose file was replaced cannot be resumed",
        ),
    })?;
    let not_recorded = |found: &str| {
        coded(
            NOT_RECORDED,
            format!(
                "the conversation of context {context_id} of session {session_id} is not the one its trace recorded: sha256 {recorded} was saved, {found} is there"
            ),
            "`contexts/<context-id>/history.json` was changed after the runtime saved it; nothing was sent to a model. Resume another session, or start afresh",
        )
    };
    let Some(bytes) = history else {
        return Err(not_recorded("no file"));
    };
    let found = murmur_registry::sha256_hex(&bytes);
    if found != recorded {
        return Err(not_recorded(&format!("sha256 {found}")));
    }
    let history: Vec<StoredMessage> = serde_json::from_slice(&bytes).map_err(|error| {
        refused(
            format!("the conversation of context {context_id} of session {session_id} cannot be read: {error}"),
            "resume another session",
        )
    })?;
    Ok(Resume {
        session_id: session_id.clone(),
        context_id: context_id.to_string(),
        history,
        changed: changes(&then, now),
    })
}

/// The session under `workdir_root` that started last: the greatest `session_start` timestamp
/// its trace begins with (ties: the greater id). No file time is looked at.
fn latest(workdir_root: &Path) -> Result<String, ResumeError> {
    let none = || {
        refused(
            format!(
                "there is no session under {} to resume",
                workdir_root.display()
            ),
            "run the capsule first, or pass --workdir where its sessions are",
        )
    };
    let root = BeneathDir::open(workdir_root).map_err(|_| none())?;
    let entries = std::fs::read_dir(workdir_root).map_err(|_| none())?;
    let mut newest: Option<(u64, String)> = None;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !(is_safe_id(&name) && name.starts_with("ses_")) {
            continue;
        }
        let Some(started) = started_at(&root, &name) else {
            continue;
        };
        if newest
            .as_ref()
            .is_none_or(|(at, id)| (started, &name) > (*at, id))
        {
            newest = Some((started, name));
        }
    }
    newest.map(|(_, name)| name).ok_or_else(none)
}

/// The `session_start` timestamp of session `name`'s trace, read beneath `root` (no link
/// followed, a trace that is not a regular file is none) from its first line only.
fn started_at(root: &BeneathDir, name: &str) -> Option<u64> {
    use rustix::fs::{Mode, OFlags};
    let dir = root.subdir(name, false).ok()?;
    let fd = rustix::fs::openat(
        &dir,
        "trace.jsonl",
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    session_start_at(file)
}

/// What a session's `session_start` says it ran.
struct Then<'a> {
    capsule: &'a str,
    /// Empty: that session did not record its manifest's hash.
    manifest_sha256: &'a str,
    components: &'a [ComponentRef],
}

/// What of the capsule differs `now` from what a session ran.
fn changes(then: &Then<'_>, now: &CapsuleNow<'_>) -> Vec<String> {
    let mut changed = Vec::new();
    if then.capsule != now.name {
        changed.push(format!(
            "the capsule is `{}`; the earlier session ran `{}`",
            now.name, then.capsule
        ));
    }
    if then.manifest_sha256.is_empty() {
        changed.push("murmur.yaml (the earlier session did not record its hash)".to_string());
    } else if then.manifest_sha256 != now.manifest_sha256 {
        changed.push("murmur.yaml".to_string());
    }
    let components_then = then.components;
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    for component in now.components {
        match components_then.iter().find(|c| c.name == component.name) {
            None => changed.push(format!(
                "{} `{}` {} added",
                component.runtime, component.name, component.version
            )),
            Some(then) if then.version != component.version || then.sha256 != component.sha256 => {
                changed.push(format!(
                    "{} `{}` {} (sha256 {}…) is now {} (sha256 {}…)",
                    component.runtime,
                    component.name,
                    then.version,
                    short(&then.sha256),
                    component.version,
                    short(&component.sha256)
                ))
            }
            Some(_) => {}
        }
    }
    for then in components_then {
        if !now.components.iter().any(|c| c.name == then.name) {
            changed.push(format!(
                "{} `{}` {} removed",
                then.runtime, then.name, then.version
            ));
        }
    }
    changed
}
