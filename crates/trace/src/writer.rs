use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(feature = "otel")]
use crate::otel::OtelExport;
use crate::schema::{Event, EventBody, Totals};

/// A session's trace, shared by everything that writes to it (the agent loop, hooks' calls,
/// async hook workers). Lines never interleave.
#[derive(Debug, Clone)]
pub struct Trace {
    writer: std::sync::Arc<std::sync::Mutex<TraceWriter>>,
}

impl Trace {
    pub fn new(writer: TraceWriter) -> Trace {
        Trace {
            writer: std::sync::Arc::new(std::sync::Mutex::new(writer)),
        }
    }

    /// Writes one event under `parent_id` and returns its id.
    pub fn write(&self, parent_id: Option<&str>, body: EventBody) -> std::io::Result<String> {
        self.write_as(parent_id, new_event_id(), body)
    }

    /// Writes one event under `parent_id` with the id `event_id` (one [`new_event_id`] gave
    /// before the event happened: work done meanwhile, a peer's task say, names its span as
    /// its parent).
    pub fn write_as(
        &self,
        parent_id: Option<&str>,
        event_id: String,
        body: EventBody,
    ) -> std::io::Result<String> {
        self.writer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .write_as(parent_id, event_id, body)
    }

    /// The sums of what was written so far.
    pub fn totals(&self) -> Totals {
        self.writer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .totals()
            .clone()
    }
}

/// A fresh event id: `evt_` and 32 hex digits.
pub fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::new_v4().simple())
}

/// Appends events to one session's `trace.jsonl` and keeps its totals.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    file: std::fs::File,
    /// The file's length after the last whole line written (unknown when it could not be
    /// read at the start).
    whole_len: Option<u64>,
    session_id: String,
    totals: Totals,
    /// The OTLP export each written event is handed to, when the capsule asks for one.
    #[cfg(feature = "otel")]
    export: Option<OtelExport>,
}

fn add(total: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *total = Some(total.unwrap_or(0) + value);
    }
}

impl TraceWriter {
    /// Creates (or appends to) the trace file at `path`.
    pub fn create(path: &Path, session_id: &str) -> std::io::Result<TraceWriter> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(TraceWriter::to_file(path, file, session_id))
    }

    /// Writes to `file`, already open for appending at `path`.
    pub fn to_file(path: &Path, file: std::fs::File, session_id: &str) -> TraceWriter {
        TraceWriter {
            path: path.to_path_buf(),
            whole_len: file.metadata().ok().map(|m| m.len()),
            file,
            session_id: session_id.to_string(),
            totals: Totals::default(),
            #[cfg(feature = "otel")]
            export: None,
        }
    }

    /// Hands every event written from now on to `export` as well.
    #[cfg(feature = "otel")]
    pub fn with_export(mut self, export: OtelExport) -> TraceWriter {
        self.export = Some(export);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sums of what was written so far.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Writes one event under `parent_id` and returns its id.
    pub fn write(&mut self, parent_id: Option<&str>, body: EventBody) -> std::io::Result<String> {
        self.write_as(parent_id, new_event_id(), body)
    }

    /// Writes one event under `parent_id` with the id `event_id` (see [`Trace::write_as`]).
    pub fn write_as(
        &mut self,
        parent_id: Option<&str>,
        event_id: String,
        body: EventBody,
    ) -> std::io::Result<String> {
        match &body {
            EventBody::TaskStart { .. } => self.totals.tasks += 1,
            EventBody::Inference {
                input_tokens_estimated,
                output_tokens_estimated,
                input_tokens_actual,
                output_tokens_actual,
                cached_tokens_actual,
                cache_write_tokens_actual,
                ..
            } => {
                let totals = &mut self.totals;
                totals.turns += 1;
                totals.input_tokens_estimated += input_tokens_estimated;
                totals.output_tokens_estimated += output_tokens_estimated;
                add(&mut totals.input_tokens_actual, *input_tokens_actual);
                add(&mut totals.output_tokens_actual, *output_tokens_actual);
                add(&mut totals.cached_tokens_actual, *cached_tokens_actual);
                add(
                    &mut totals.cache_write_tokens_actual,
                    *cache_write_tokens_actual,
                );
            }
            EventBody::ToolCall { .. } => self.totals.tool_calls += 1,
            EventBody::Shell { .. } => self.totals.shell_calls += 1,
            EventBody::SkillCall { .. } => self.totals.skill_calls += 1,
            _ => {}
        }
        let event = Event {
            session_id: self.session_id.clone(),
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default(),
            event_id,
            parent_id: parent_id.map(str::to_string),
            body,
        };
        let mut line = serde_json::to_vec(&event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if let Err(error) = self.file.write_all(&line).and_then(|()| self.file.flush()) {
            // A line the disk could not take whole is taken back, so the trace still ends
            // at its last whole line (readers say when one was cut all the same).
            if let Some(whole) = self.whole_len {
                let _ = self.file.set_len(whole);
            }
            return Err(error);
        }
        self.whole_len = self.whole_len.map(|len| len + line.len() as u64);
        #[cfg(feature = "otel")]
        if let Some(export) = &mut self.export {
            export.record(&event);
        }
        Ok(event.event_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Sent;

    fn inference(input: u64, actual: Option<u64>) -> EventBody {
        EventBody::Inference {
            task_id: Some("tsk_1".into()),
            turn: 1,
            origin: crate::schema::Origin::Agent,
            choice: None,
            driver: "driver".into(),
            model: "m".into(),
            prompt_cache_key: "k".into(),
            sent: Sent {
                messages: 1,
                full_resend: true,
                continuation_id: None,
            },
            input_tokens_estimated: input,
            output_tokens_estimated: 1,
            input_tokens_actual: actual,
            output_tokens_actual: None,
            cached_tokens_actual: None,
            cache_write_tokens_actual: None,
            stop_reason: crate::schema::StopReason::EndTurn,
            decision: crate::schema::Decision::Finish,
            tool_name: None,
            tool_calls: 0,
            duration_ms: 1,
            error: None,
        }
    }

    #[test]
    fn lines_are_whole_events_and_totals_are_their_sums() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut writer = TraceWriter::create(&path, "ses_x").unwrap();
        let first = writer.write(None, inference(10, Some(12))).unwrap();
        writer.write(Some(&first), inference(5, None)).unwrap();
        assert_eq!(writer.totals().input_tokens_estimated, 15);
        assert_eq!(writer.totals().input_tokens_actual, Some(12));
        assert_eq!(writer.totals().output_tokens_actual, None);
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<Event> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].parent_id.as_deref(), Some(first.as_str()));
        let raw: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(raw["event_type"], "inference");
        assert!(raw.get("input_tokens_actual").is_none());
    }

    #[test]
    fn skill_calls_are_counted_in_the_totals_and_written_as_skill_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut writer = TraceWriter::create(&path, "ses_x").unwrap();
        let turn = writer.write(None, inference(10, None)).unwrap();
        writer
            .write(
                Some(&turn),
                EventBody::SkillCall {
                    task_id: "tsk_1".into(),
                    turn: 1,
                    call_id: "call_s".into(),
                    skill: "style".into(),
                    version: "0.1.0".into(),
                    sha256: "ab".repeat(32),
                    output_bytes: 12,
                },
            )
            .unwrap();
        assert_eq!(writer.totals().skill_calls, 1);
        assert_eq!(writer.totals().tool_calls, 0);
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(raw["event_type"], "skill_call");
        assert_eq!(raw["skill"], "style");
        assert_eq!(raw["output_bytes"], 12);
        assert_eq!(raw["parent_id"], turn.as_str());
        // A trace written before skills existed still reads, with no skill calls.
        let old: Totals = serde_json::from_value(serde_json::json!({
            "tasks": 1, "turns": 1, "tool_calls": 0,
            "input_tokens_estimated": 1, "output_tokens_estimated": 1
        }))
        .unwrap();
        assert_eq!(old.skill_calls, 0);
    }
}
