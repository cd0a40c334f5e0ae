//! Resuming: a new session that goes on with the conversation an earlier session of the same
//! workdir root left (`mur run --resume [SESSION]`).
//!
//! What a caller can rely on:
//!
//! - **Which session** ([`find`]): `SESSION` is the id of a session directory under the
//!   workdir root; none names the one whose trace was written last. An id that is not a
//!   session id (`ses_…`, see [`is_safe_id`]), a session that is not there, a trace that cannot
//!   be read or a session that saved no conversation is `E-RUN-024`, and nothing starts. The
//!   earlier session's directory is only read, through the workdir handle: nothing planted in
//!   it is followed.
//! - **Which conversation**: the context of that session's last task whose conversation was
//!   saved. The new session copies it into its own workdir, and every task it runs goes on with
//!   it under the same context id, whatever `lifecycle.conversation` says.
//! - **As it was**: the messages as saved, `produced_by` marks included, so thinking still
//!   reaches only the model that wrote it. The new session starts on the primary choice, like
//!   every launch, and holds no continuation from the earlier one: its first call resends the
//!   conversation whole.
//! - **Said**: `session_start.resumed` names the session, the context, how many messages it
//!   held and what of the capsule changed since (its `murmur.yaml`; an artifact added, removed
//!   or of other bytes). A change is also told to the caller (`W-RUN-025`, [`Resume::warning`]).

use std::path::Path;

use murmur_manifest::Diagnostic;
use murmur_trace::schema::{ComponentRef, EventBody, Resumed};

use crate::inference::neutral::StoredMessage;
use crate::session::workdir::{HISTORY_MAX_BYTES, Workdir, is_safe_id};

/// The largest trace a resume reads (the runtime wrote it; anything bigger was not).
const TRACE_MAX_BYTES: u64 = HISTORY_MAX_BYTES;

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

/// Why no session could be resumed (`E-RUN-024`).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ResumeError {
    pub message: String,
    pub hint: String,
}

impl murmur_manifest::Coded for ResumeError {
    fn code(&self) -> &'static str {
        "E-RUN-024"
    }

    fn message(&self) -> String {
        self.message.clone()
    }

    fn hint(&self) -> String {
        self.hint.clone()
    }
}

fn refused(message: String, hint: &str) -> ResumeError {
    ResumeError {
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
        .dir()
        .read("trace.jsonl", TRACE_MAX_BYTES)
        .map_err(|error| unreadable(error.to_string()))?;
    let loaded = murmur_trace::analysis::parse(&bytes, &workdir.trace())
        .map_err(|error| unreadable(error.to_string()))?;
    let mut then: Option<Then<'_>> = None;
    let mut contexts: Vec<&str> = Vec::new();
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
            EventBody::TaskStart {
                context_id: Some(context_id),
                ..
            } => contexts.push(context_id),
            _ => {}
        }
    }
    let Some(then) = then else {
        return Err(unreadable("it has no session_start".to_string()));
    };
    for context_id in contexts.iter().rev() {
        let history = workdir.load_history(context_id).map_err(|reason| {
            refused(
                format!("the conversation of context {context_id} of session {session_id} cannot be read: {reason}"),
                "the runtime writes `contexts/<context-id>/history.json` itself; a session whose file was replaced cannot be resumed",
            )
        })?;
        if let Some(history) = history {
            return Ok(Resume {
                session_id: session_id.clone(),
                context_id: context_id.to_string(),
                history,
                changed: changes(&then, now),
            });
        }
    }
    Err(refused(
        format!("session {session_id} saved no conversation to resume"),
        "a session saves its conversation as each task ends; resume one whose tasks ran",
    ))
}

/// The session under `workdir_root` whose trace was written last.
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
    let entries = std::fs::read_dir(workdir_root).map_err(|_| none())?;
    let mut newest: Option<(std::time::SystemTime, String)> = None;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !(is_safe_id(&name) && name.starts_with("ses_")) {
            continue;
        }
        // A trace that is not a plain file is no session's (`find` reads it beneath the
        // workdir handle in any case).
        let Ok(meta) = std::fs::symlink_metadata(entry.path().join("trace.jsonl")) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let written = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if newest.as_ref().is_none_or(|(at, _)| written > *at) {
            newest = Some((written, name));
        }
    }
    newest.map(|(_, name)| name).ok_or_else(none)
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
