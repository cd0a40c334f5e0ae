//! `debug-hook`: write every hook event to a JSON Lines file in the session workdir, to see
//! what the runtime dispatches and when.
//!
//! - Bound to no handler, so it receives every event; `execution_mode: async`, so the agent
//!   loop never waits for it; it always returns `none`.
//! - Each event appends one line to the file named by config `path` (relative to the workdir,
//!   default `.murmur-scratch/debug-hook.jsonl`, Murmur's scratch directory; missing parent directories are created):
//!   `{"handler": "on-tool-call", "event": {…}}`, the event as
//!   [`murmur_guest::hook::Event`] serializes it (snake_case fields, `null` for an absent
//!   optional field, a message's `content` as its JSON string).
//! - It needs the workdir, which a hook holds only when its capsule entry grants it:
//!   `capabilities: { filesystem: { scope: write } }`.
//! - A bad config or a failed write is returned as an error (the runtime logs it), except at
//!   `on-compaction`, where an error would end the session: there the failure is printed to
//!   stderr and the handler returns `none`.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use murmur_guest::hook::{self, Event, Hook, HookOutput, HookResult};
use serde::Deserialize;

/// Where the log goes when the config names no `path`: Murmur's scratch directory of the
/// workspace, so a directory worked on in place gains no `logs/` of ours among its own files.
fn default_path() -> String {
    format!("{}/debug-hook.jsonl", murmur_guest::workdir::SCRATCH)
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct Config {
    path: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: default_path(),
        }
    }
}

/// Append `event` as one JSON line to `path`, creating parent directories.
fn append(path: &Path, event: &Event) -> Result<(), String> {
    let mut line = serde_json::to_string(event)
        .map_err(|e| format!("debug-hook: cannot serialize the event: {e}"))?;
    line.push('\n');
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)
            .map_err(|e| format!("debug-hook: cannot create {}: {e}", parent.display()))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("debug-hook: cannot open {}: {e}", path.display()))?;
    file.write_all(line.as_bytes())
        .map_err(|e| format!("debug-hook: cannot write {}: {e}", path.display()))
}

fn log(event: &Event) -> Result<(), String> {
    let config: Config = hook::config().map_err(|e| format!("debug-hook: {e}"))?;
    append(Path::new(&config.path), event)
}

struct DebugHook;

impl Hook for DebugHook {
    fn on_event(event: Event) -> HookResult {
        match log(&event) {
            Ok(()) => Ok(HookOutput::None),
            Err(e) if matches!(event, Event::Compaction(_)) => {
                eprintln!("{e}");
                Ok(HookOutput::None)
            }
            Err(e) => Err(e),
        }
    }
}

murmur_guest::export_hook!(DebugHook);

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_guest::hook::{SessionEndEvent, SessionStartEvent};
    use serde_json::{Value, json};

    #[test]
    fn config_defaults_to_the_scratch_directory() {
        assert_eq!(
            hook::config_from::<Config>(None).unwrap().path,
            ".murmur-scratch/debug-hook.jsonl"
        );
        assert_eq!(
            hook::config_from::<Config>(Some(r#"{"path":"x.jsonl"}"#))
                .unwrap()
                .path,
            "x.jsonl"
        );
        assert!(hook::config_from::<Config>(Some(r#"{"file":"x"}"#)).is_err());
    }

    #[test]
    fn appends_one_line_per_event_creating_parents() {
        let dir = std::env::temp_dir().join(format!("debug-hook-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("logs/deep/debug.jsonl");
        let start = Event::SessionStart(SessionStartEvent {
            session_id: "ses_1".into(),
            capsule_name: "c".into(),
            capsule_version: "1.0.0".into(),
            model: "m".into(),
        });
        let end = Event::SessionEnd(SessionEndEvent {
            session_id: "ses_1".into(),
            exit_status: "ok".into(),
            tasks: 1,
        });
        append(&path, &start).unwrap();
        append(&path, &end).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            vec![
                json!({"handler": "on-session-start", "event": {"session_id": "ses_1", "capsule_name": "c", "capsule_version": "1.0.0", "model": "m"}}),
                json!({"handler": "on-session-end", "event": {"session_id": "ses_1", "exit_status": "ok", "tasks": 1}}),
            ]
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
