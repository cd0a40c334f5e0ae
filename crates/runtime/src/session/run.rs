//! The session loop: the workdir, the trace and its export, then each task the feed hands out,
//! the session hooks around them, and `session_end` however the session ends.
//!
//! The session's exit status is the status of the task whose ending ended the session (an
//! `on-compaction` error: `failed`, or `spend_ceiling_reached` when the hook's summary was
//! refused by the spend ceiling), whatever an earlier task ended with; otherwise the first task
//! that did not end `ok` decides it.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::engine::Engine;
use crate::session::workdir::Workdir;
use crate::session::{
    ExitStatus, Observer, REPORTS_KEPT, SessionConfig, SessionError, SessionReport, Staged,
    TaskInput, TaskReport, new_id,
};
use murmur_trace::schema::{CapsuleRef, EventBody};
use murmur_trace::{Trace, TraceWriter};

/// A new session's id and its two places under `root`, the workspace `in_place` when named
/// (`E-RUN-001` when they cannot be made, `E-RUN-033` for a directory that cannot be a
/// workspace, `E-RUN-034` when another session holds it): how every session begins, an agent's
/// or a capsule component's.
pub(crate) fn open_workdir(
    root: &Path,
    in_place: Option<&Path>,
) -> Result<(String, Workdir), SessionError> {
    use crate::session::workdir::WorkdirError;
    let session_id = new_id("ses_", 32);
    let workdir = Workdir::create(root, &session_id, in_place).map_err(|error| match error {
        WorkdirError::Io(error) => SessionError {
            code: "E-RUN-001",
            message: format!(
                "the session's record under {} could not be created: {error}",
                root.display()
            ),
            hint: "check that the workdir root is writable".to_string(),
            workdir: None,
        },
        WorkdirError::Workspace { path, reason } => SessionError {
            code: "E-RUN-033",
            message: format!(
                "{} cannot be the session's workspace: {reason}",
                path.display()
            ),
            hint: "name an existing directory with --workspace, apart from the workdir root \
                   (--workdir) where the sessions' records go"
                .to_string(),
            workdir: None,
        },
        WorkdirError::Held { path, holder } => SessionError {
            code: "E-RUN-034",
            message: format!(
                "the workspace {} is in use by another session: {holder}",
                path.display()
            ),
            hint: "two sessions never write one workspace at once: wait for that session to end, \
                   or work on another directory"
                .to_string(),
            workdir: None,
        },
    })?;
    Ok((session_id, workdir))
}

/// The session's `trace.jsonl`, with the export the capsule asks for.
pub(crate) fn open_trace(
    workdir: &Workdir,
    session_id: &str,
    capsule: &murmur_manifest::capsule::CapsuleManifest,
) -> Result<Trace, SessionError> {
    let writer = workdir
        .create_trace(session_id)
        .map_err(|error| SessionError::trace(workdir, error))?;
    Ok(Trace::new(exported(writer, capsule, workdir)))
}

/// `writer`, with the OTLP export `observability.otel_endpoint` asks for. An export that
/// cannot start is told (`W-TRC-004`) and left out: observability never stops a session.
fn exported(
    writer: TraceWriter,
    capsule: &murmur_manifest::capsule::CapsuleManifest,
    workdir: &Workdir,
) -> TraceWriter {
    let Some(endpoint) = &capsule.observability.otel_endpoint else {
        return writer;
    };
    let service = murmur_trace::otel::ServiceInfo {
        capsule_name: capsule.name.clone(),
        capsule_version: capsule.version.clone(),
    };
    match murmur_trace::otel::OtelExport::start(endpoint, &service, workdir.record_dir().clone()) {
        Ok(export) => writer.with_export(export),
        Err(reason) => {
            eprintln!(
                "warning[W-TRC-004]: spans will not be exported: {reason}\n  hint: fix `observability.otel_endpoint`; the session runs without export"
            );
            writer
        }
    }
}

/// Runs every task of `config` as one session of `staged`.
///
/// Order: the workdir, `on-stage` (before the trace exists), `trace.jsonl` and
/// `session_start`, `on-session-start`, each task, `on-session-end`, the async hooks' queues
/// drained, the peers' tasks of stopped calls canceled, `session_end`.
pub async fn run(
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: &SessionConfig,
    observer: Arc<dyn Observer>,
) -> Result<SessionReport, SessionError> {
    let mut feed = ListFeed(config.tasks.clone().into_iter());
    run_fed(engine, staged, config, observer, &mut feed).await
}

/// Where a session's tasks come from, one at a time, and who hears how each ended.
pub trait TaskFeed: Send {
    /// The next task; `None` ends the session.
    fn next(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<TaskInput>> + Send + '_>>;
    /// The session's workdir is made: called once, before the first [`TaskFeed::next`] (a
    /// feed that keeps the workdir's size in bounds deletes what it drops through it).
    fn started(&mut self, _workdir: &Workdir) {}
    /// The task `input` ended as `report` says.
    fn finished(&mut self, _input: &TaskInput, _report: &TaskReport) {}
}

/// The tasks of a list, in order.
struct ListFeed(std::vec::IntoIter<TaskInput>);

impl TaskFeed for ListFeed {
    fn next(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<TaskInput>> + Send + '_>> {
        let next = self.0.next();
        Box::pin(async move { next })
    }
}

/// Runs the tasks `feed` hands out as one session of `staged` (`config.tasks` is not read).
pub async fn run_fed(
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: &SessionConfig,
    observer: Arc<dyn Observer>,
    feed: &mut dyn TaskFeed,
) -> Result<SessionReport, SessionError> {
    in_session(engine, staged, config, observer, async |context| {
        let mut ran = Ran::default();
        feed.started(context.workdir());
        while let Some(mut input) = feed.next().await {
            if config.cancel.as_ref().is_some_and(|c| c.reason().is_some()) {
                break;
            }
            if input.stop.is_none() {
                input.stop = config.cancel.clone();
            }
            let (report, stop) = context.run_task(&input).await?;
            feed.finished(&input, &report);
            if stop {
                ran.end_with(report);
                break;
            }
            ran.add(report);
        }
        Ok(ran)
    })
    .await
}

/// The tasks a session ran: how many, the first that did not end `ok`, the one that ended the
/// session (when one did), the last reports.
#[derive(Default)]
pub(crate) struct Ran {
    count: u32,
    first_not_ok: Option<ExitStatus>,
    /// The status of the task whose failure ended the session (an `on-compaction` error:
    /// `failed`, or `spend_ceiling_reached` after a refused summary).
    ended_by: Option<ExitStatus>,
    reports: std::collections::VecDeque<TaskReport>,
}

impl Ran {
    pub(crate) fn add(&mut self, report: TaskReport) {
        self.count = self.count.saturating_add(1);
        if report.exit_status != ExitStatus::Ok {
            self.first_not_ok.get_or_insert(report.exit_status);
        }
        self.reports.push_back(report);
        if self.reports.len() > REPORTS_KEPT {
            self.reports.pop_front();
        }
    }

    /// The last task, the one whose ending ends the session: its status is the session's,
    /// whatever an earlier task ended with.
    pub(crate) fn end_with(&mut self, report: TaskReport) {
        self.ended_by = Some(report.exit_status);
        self.add(report);
    }

    /// The session's exit status: the status of the task that ended it, else the first that
    /// did not end `ok`, else `failed` when the session itself `failed` and `ok` when not.
    pub(crate) fn exit_status(&self, failed: bool) -> ExitStatus {
        self.ended_by.or(self.first_not_ok).unwrap_or(if failed {
            ExitStatus::Failed
        } else {
            ExitStatus::Ok
        })
    }
}

/// One session of `staged` around `body`, which runs its tasks: the workdir, the MCP servers,
/// `on-stage`, `trace.jsonl` and `session_start`, `on-session-start`, then `body`, then
/// `on-session-end` and `session_end` however `body` ended.
pub(crate) async fn in_session(
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    config: &SessionConfig,
    observer: Arc<dyn Observer>,
    body: impl AsyncFnOnce(&crate::session::task::SessionContext<'_>) -> std::io::Result<Ran>,
) -> Result<SessionReport, SessionError> {
    let started = Instant::now();
    // Before anything runs: a host that cannot hold the children as asked refuses here.
    let achieved =
        crate::session::containment::achieve_for_session(&staged.capsule, config.containment)?;
    let (session_id, workdir) = open_workdir(&config.workdir_root, config.workspace.as_deref())?;
    if let Some(seed) = &config.seed {
        workdir.seed_from(seed).map_err(|error| SessionError {
            code: "E-RUN-001",
            message: format!(
                "the session's workspace {} could not be seeded from {}: {error}",
                workdir.workspace.display(),
                seed.display()
            ),
            hint: "a seed is a directory of regular files and directories".to_string(),
            workdir: Some(workdir.record.clone()),
        })?;
    }
    let context = crate::session::task::SessionContext::new(
        engine,
        staged.clone(),
        config,
        &session_id,
        &workdir,
        observer,
        &achieved,
    );
    let context = context.start_mcp().await?;
    context
        .stage_hooks()
        .await
        .map_err(|error| SessionError::trace(&workdir, error))?;

    let trace = open_trace(&workdir, &session_id, &staged.capsule)?;
    workdir
        .write_murmur_md(&staged)
        .map_err(|error| SessionError::trace(&workdir, error.into()))?;
    if let Some(resume) = &config.resume {
        workdir
            .save_history(&resume.context_id, &resume.history)
            .map_err(|error| SessionError::trace(&workdir, error.into()))?;
    }
    let session_event = trace
        .write(
            None,
            EventBody::SessionStart {
                capsule: CapsuleRef {
                    name: staged.capsule.name.clone(),
                    version: staged.capsule.version.clone(),
                },
                murmur_version: env!("CARGO_PKG_VERSION").to_string(),
                workdir: workdir.record.display().to_string(),
                workspace: workdir.workspace.display().to_string(),
                in_place: workdir.in_place,
                record_layout: Some(crate::session::workdir::RECORD_LAYOUT),
                model: staged.model.clone(),
                driver: staged.choices.primary().driver.clone(),
                credential_source: staged
                    .choices
                    .primary()
                    .credential_source
                    .as_str()
                    .to_string(),
                components: staged.components.clone(),
                grants: context.grant_listing().to_vec(),
                tools: context.declared_tool_names(),
                containment: serde_json::to_value(&achieved).unwrap_or_default(),
                inference_choices: staged
                    .choices
                    .has_alternates()
                    .then(|| serde_json::Value::from(staged.choices.session_listing())),
                max_session_tokens: staged.max_session_tokens,
                system_prompt_sha256: murmur_registry::sha256_hex(staged.system_prompt.as_bytes()),
                manifest_sha256: staged.manifest_sha256.clone(),
                resumed: config.resume.as_ref().map(|resume| resume.record()),
                mcp_servers: context.mcp_servers().to_vec(),
            },
        )
        .map_err(|error| SessionError::trace(&workdir, error))?;
    let context = context.with_trace(trace.clone(), session_event.clone());
    context
        .control()
        .attach_trace(trace.clone(), session_event.clone())
        .map_err(|error| SessionError::trace(&workdir, error))?;

    let mut ran = Ran::default();
    let outcome: std::io::Result<()> = async {
        context.session_start().await?;
        ran = body(&context).await?;
        Ok(())
    }
    .await;
    let exit_status = ran.exit_status(outcome.is_err());
    let ending: std::io::Result<()> = async {
        outcome?;
        context.session_end(exit_status, ran.count).await
    }
    .await;
    // A peer's task asked for by a call that was stopped is canceled before the session ends.
    crate::grants::message::dropped_asks_canceled().await;
    workdir.tidy_scratch();
    let totals = trace.totals();
    let duration_ms = started.elapsed().as_millis() as u64;
    let (changes, git) = context.workspace_changes();
    let end = trace.write(
        Some(&session_event),
        EventBody::SessionEnd {
            exit_status,
            duration_ms,
            totals: totals.clone(),
            changes: changes.clone(),
            git: git.clone(),
        },
    );
    ending.map_err(|error| SessionError::trace(&workdir, error))?;
    end.map_err(|error| SessionError::trace(&workdir, error))?;
    Ok(SessionReport {
        session_id,
        trace_path: workdir.trace(),
        workdir: workdir.record.clone(),
        workspace: workdir.workspace.clone(),
        exit_status,
        task_count: ran.count,
        tasks: ran.reports.into(),
        totals,
        duration_ms,
        resumed: config
            .resume
            .as_ref()
            .map(|resume| resume.session_id.clone()),
        changes,
        git,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(exit_status: ExitStatus) -> TaskReport {
        TaskReport {
            task_id: new_id("tsk_", 24),
            context_id: None,
            exit_status,
            turns: 1,
            result_path: None,
            result_text: None,
            reopen_count: 0,
            error: None,
            outputs: Vec::new(),
            changes: None,
        }
    }

    #[test]
    fn the_first_task_not_ok_decides_when_none_ended_the_session() {
        let mut ran = Ran::default();
        assert_eq!(ran.exit_status(false), ExitStatus::Ok);
        assert_eq!(ran.exit_status(true), ExitStatus::Failed);
        ran.add(report(ExitStatus::Ok));
        ran.add(report(ExitStatus::MaxTurnsReached));
        ran.add(report(ExitStatus::Failed));
        assert_eq!(ran.exit_status(false), ExitStatus::MaxTurnsReached);
        assert_eq!(ran.count, 3);
    }

    #[test]
    fn the_task_that_ended_the_session_decides_whatever_came_before() {
        for ending in [ExitStatus::Failed, ExitStatus::SpendCeilingReached] {
            for earlier in [
                ExitStatus::MaxTurnsReached,
                ExitStatus::ReopenBudgetExhausted,
                ExitStatus::Canceled,
                ExitStatus::Failed,
                ExitStatus::SpendCeilingReached,
            ] {
                let mut ran = Ran::default();
                ran.add(report(ExitStatus::Ok));
                ran.add(report(earlier));
                ran.end_with(report(ending));
                assert_eq!(ran.exit_status(false), ending, "after {earlier:?}");
                assert_eq!(ran.count, 3);
                assert_eq!(ran.reports.back().unwrap().exit_status, ending);
            }
        }
    }
}
