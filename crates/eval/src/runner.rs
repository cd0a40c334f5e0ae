//! Running a dataset through a capsule's arms.
//!
//! What a caller can rely on:
//!
//! - Every case runs once per arm per repeat, as a session of its own, its record under the
//!   run's `sessions/`, with a fresh workspace (a copy of the case's `workdir` fixture when it
//!   names one), at most `jobs` at a time. An arm is staged once before any case runs, so a
//!   broken arm (an overlay the manifest loader refuses, a choice the capsule has not) stops
//!   the run before it begins (`E-EVAL-002`).
//! - With [`Plan::workspace`], every case works on that directory in place instead, one at a
//!   time, in order (each repeat, each arm in order, each case in the dataset's order), so a
//!   case sees what the cases before it left; `jobs` is 1. It is refused before anything runs
//!   when a case has a `workdir` fixture of its own (`E-EVAL-005`, naming the cases: its seed
//!   would be copied over the directory), when the directory cannot be a workspace
//!   (`E-RUN-033`: missing, or overlapping the runs' directory) or when another session holds
//!   it (`E-RUN-034`).
//! - An arm with `cassettes:` answers each case from `<dir>/<case>.cassette.json` and sends
//!   nothing (no credential needed); with `record`, it runs against the provider and writes
//!   that file. A request that differs from the recording fails the case (`E-RUN-029`, its
//!   first difference in the result), the other cases go on.
//! - A case's `commands` run after its other scorers but the rubric, under the containment
//!   class its session ran under (the capsule's and the operator's, as
//!   [`murmur_runtime::session::containment::achieve`] decides), with the capsule's resource
//!   limits ([`score::run_commands`]).
//! - A rubric is graded by a session of its own on the arm's capsule, started on the rubric's
//!   choice, its exchanges in the case's cassette after the case's own; its tokens are reported
//!   apart from the case's.
//! - Each result names its session's trace and workspace (relative to the run directory, or
//!   the absolute directory worked on in place).
//! - Each result is appended to `results.jsonl` as its case ends; `run.json` is written first
//!   and again with the finish time; `report.html` last. A stop (the cancel signal) ends the
//!   running sessions `canceled` and starts no other case.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use murmur_manifest::CapsuleSource;
use murmur_runtime::Engine;
use murmur_runtime::grants::cassette::{Cassette, REPLAY_CREDENTIAL};
use murmur_runtime::session::control::ControlState;
use murmur_runtime::session::staging::Lookups;
use murmur_runtime::session::{
    self, HostEnv, SessionConfig, Silent, StageError, Staged, StopSignal, TaskInput, TaskSource,
};

use crate::arms::Arm;
use crate::dataset::{Case, Dataset};
use crate::results::{
    ArmInfo, CaseError, CaseResult, REPORT_FILE, RESULTS_FILE, RUN_FILE, Run, RunInfo,
    SESSIONS_DIR, Score, Tokens,
};
use crate::score;

/// What to run.
pub struct Plan {
    /// The capsule's `murmur.yaml`.
    pub capsule_file: PathBuf,
    pub dataset: Dataset,
    pub arms: Vec<Arm>,
    pub repeat: u32,
    pub jobs: usize,
    /// Record each arm's cassettes instead of replaying them.
    pub record: bool,
    /// Replay by turn, not by request.
    pub lenient: bool,
    /// Where runs are kept (`<workdir root>/eval`).
    pub runs_dir: PathBuf,
    /// Stops the run: running sessions end `canceled`, no other case starts.
    pub cancel: StopSignal,
    /// The containment class the operator asks for (`mur eval run --containment`): each
    /// session, and its commands' scorers, run under the stronger of it and the capsule's.
    pub containment: Option<murmur_confine::Class>,
    /// An existing directory every case works on in place (`mur eval run --workspace`), one
    /// case after another; a fresh workspace per case when `None`.
    pub workspace: Option<PathBuf>,
}

/// What the runner takes from its host.
#[derive(Clone)]
pub struct Host {
    pub engine: Arc<Engine>,
    /// The process environment.
    pub env: HostEnv,
    /// Credentials from the user's credentials file.
    pub config: HostEnv,
}

/// Why a run did not start.
#[derive(Debug)]
pub struct RunError {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
    /// The manifest's diagnostics, when an arm's manifest was refused.
    pub diagnostics: Vec<murmur_manifest::Diagnostic>,
}

/// What the runner tells as it goes.
pub enum Progress<'a> {
    Started {
        run: &'a RunInfo,
        dir: &'a Path,
        total: usize,
    },
    CaseDone {
        result: &'a CaseResult,
        done: usize,
        total: usize,
    },
}

/// Runs `plan`; `progress` hears of the start and of each case as it ends.
pub async fn run(
    plan: Plan,
    host: Host,
    progress: Arc<dyn Fn(Progress<'_>) + Send + Sync>,
) -> Result<Run, RunError> {
    let mode = |arm: &Arm| match (&arm.cassettes, plan.record) {
        (Some(_), true) => "record",
        (Some(_), false) => "replay",
        (None, _) => "live",
    };
    if plan.record {
        if plan.repeat > 1 {
            return Err(refused(
                "`--record` keeps one cassette per case: it cannot repeat",
                "record with --repeat 1, then replay with any --repeat",
            ));
        }
        if let Some(arm) = plan.arms.iter().find(|arm| arm.cassettes.is_none()) {
            return Err(refused(
                &format!(
                    "arm `{}` has no `cassettes:` directory to record into",
                    arm.name
                ),
                "give every recorded arm `cassettes: DIR`, or pick arms with --arms",
            ));
        }
    }
    if let Some(workspace) = &plan.workspace {
        in_place_allowed(&plan.dataset, workspace, &plan.runs_dir)?;
    }
    // Each arm staged once up front: a broken arm stops the run before any case.
    let mut choices = Vec::new();
    let mut capsule_name = String::new();
    for arm in &plan.arms {
        let staged = stage_arm(&plan, &host, arm, None).await?;
        capsule_name.clone_from(&staged.capsule.name);
        let choice = match &arm.choice {
            None => 0,
            Some(name) => staged.choices.index_of(name).ok_or_else(|| {
                refused(
                    &format!(
                        "arm `{}`: the capsule has no driver choice `{name}`; its choices are {}",
                        arm.name,
                        staged.choices.names()
                    ),
                    "name `primary` or one of `inference.alternates`",
                )
            })?,
        };
        choices.push(choice);
    }
    let run_id = run_id();
    let dir = plan.runs_dir.join(&run_id);
    std::fs::create_dir_all(dir.join(SESSIONS_DIR)).map_err(|error| written(&dir, &error))?;
    let mut info = RunInfo {
        format: 1,
        run: run_id,
        dataset: plan.dataset.path.display().to_string(),
        dataset_sha256: plan.dataset.sha256.clone(),
        capsule: plan.capsule_file.display().to_string(),
        capsule_name,
        arms: plan
            .arms
            .iter()
            .map(|arm| ArmInfo {
                name: arm.name.clone(),
                description: arm.description.clone(),
                summary: arm.summary(),
                mode: mode(arm).to_string(),
            })
            .collect(),
        cases: plan.dataset.cases.len() as u32,
        case_ids: plan
            .dataset
            .cases
            .iter()
            .map(|case| case.id.clone())
            .collect(),
        repeat: plan.repeat,
        jobs: if plan.workspace.is_some() {
            1
        } else {
            plan.jobs as u32
        },
        started_unix_ms: unix_ms(),
        finished_unix_ms: None,
        workspace: plan
            .workspace
            .as_ref()
            .map(|path| path.display().to_string()),
        murmur_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    write_info(&dir, &info)?;
    let results_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(RESULTS_FILE))
        .map_err(|error| written(&dir, &error))?;
    let results_file = Arc::new(Mutex::new(results_file));
    let total = plan.dataset.cases.len() * plan.arms.len() * plan.repeat as usize;
    progress(Progress::Started {
        run: &info,
        dir: &dir,
        total,
    });

    let plan = Arc::new(plan);
    let done = Arc::new(Mutex::new(0usize));
    // Runs one case on one arm and keeps its result.
    let one = {
        let (plan, host, dir) = (plan.clone(), host.clone(), dir.clone());
        move |arm_index: usize, choice: usize, case_index: usize, repeat: u32| {
            let (plan, host, dir, done, progress, results_file) = (
                plan.clone(),
                host.clone(),
                dir.clone(),
                done.clone(),
                progress.clone(),
                results_file.clone(),
            );
            async move {
                if plan.cancel.reason().is_some() {
                    return;
                }
                let arm = &plan.arms[arm_index];
                let case = &plan.dataset.cases[case_index];
                let result = run_case(&plan, &host, arm, choice, case, repeat, &dir).await;
                let line = serde_json::to_string(&result).unwrap_or_default();
                {
                    use std::io::Write;
                    let mut file = results_file.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = writeln!(file, "{line}");
                }
                let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
                *done += 1;
                progress(Progress::CaseDone {
                    result: &result,
                    done: *done,
                    total,
                });
            }
        }
    };
    let cases = plan.dataset.cases.len();
    let mut order = Vec::with_capacity(total);
    for repeat in 0..plan.repeat {
        for (arm_index, choice) in choices.iter().copied().enumerate() {
            for case_index in 0..cases {
                order.push((arm_index, choice, case_index, repeat));
            }
        }
    }
    if plan.workspace.is_some() {
        // One directory, worked on in place: one case after another, in order.
        for (arm_index, choice, case_index, repeat) in order {
            one(arm_index, choice, case_index, repeat).await;
        }
    } else {
        let semaphore = Arc::new(tokio::sync::Semaphore::new(plan.jobs.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        for (arm_index, choice, case_index, repeat) in order {
            let (semaphore, case) = (
                semaphore.clone(),
                one(arm_index, choice, case_index, repeat),
            );
            tasks.spawn(async move {
                let Ok(_permit) = semaphore.acquire_owned().await else {
                    return;
                };
                case.await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }
    info.finished_unix_ms = Some(unix_ms());
    write_info(&dir, &info)?;
    // The lines as written (a line that could not be written is not in the report either).
    let run = crate::results::read(&dir).map_err(|message| RunError {
        code: "E-EVAL-004",
        message,
        hint: "check the free space and permissions of the workdir".to_string(),
        diagnostics: Vec::new(),
    })?;
    let summaries = crate::results::summarize(&run);
    std::fs::write(dir.join(REPORT_FILE), crate::report::html(&run, &summaries))
        .map_err(|error| written(&dir, &error))?;
    Ok(run)
}

/// Whether every case of `dataset` may work on `workspace` in place, with the runs' records
/// under `runs`: no case brings a `workdir` fixture (`E-EVAL-005`), and the directory can be a
/// workspace no other session holds now (`E-RUN-033`, `E-RUN-034`; the hold is let go at
/// once: each case's session takes it for itself).
fn in_place_allowed(dataset: &Dataset, workspace: &Path, runs: &Path) -> Result<(), RunError> {
    let seeded: Vec<String> = dataset
        .cases
        .iter()
        .filter(|case| case.workdir.is_some())
        .map(|case| format!("`{}` (line {})", case.id, case.line))
        .collect();
    if let Some(first) = seeded.first() {
        let named = if seeded.len() == 1 {
            format!("case {first} has")
        } else if seeded.len() <= 10 {
            format!("cases {} have", seeded.join(", "))
        } else {
            format!(
                "cases {} and {} more have",
                seeded[..10].join(", "),
                seeded.len() - 10
            )
        };
        return Err(RunError {
            code: "E-EVAL-005",
            message: format!(
                "{named} a `workdir:` fixture of {}, but --workspace {} makes every case work on that directory in place (the fixture would be copied over it)",
                if seeded.len() == 1 { "its own" } else { "their own" },
                workspace.display()
            ),
            hint: "drop `workdir:` from those cases (put what they need in the directory), or run them without --workspace".to_string(),
            diagnostics: Vec::new(),
        });
    }
    use murmur_runtime::session::workdir::{WorkdirError, WorkspaceLock};
    match WorkspaceLock::take(workspace, runs) {
        Ok(_lock) => Ok(()),
        Err(WorkdirError::Held { path, holder }) => Err(RunError {
            code: "E-RUN-034",
            message: format!(
                "the workspace {} is in use by another session: {holder}",
                path.display()
            ),
            hint: "two sessions never write one workspace at once: wait for that session to end, or work on another directory".to_string(),
            diagnostics: Vec::new(),
        }),
        Err(error) => Err(RunError {
            code: "E-RUN-033",
            message: format!("--workspace: {error}"),
            hint: "name an existing directory with --workspace, apart from the workdir root (--workdir) where the runs and their sessions' records go".to_string(),
            diagnostics: Vec::new(),
        }),
    }
}

fn refused(message: &str, hint: &str) -> RunError {
    RunError {
        code: "E-EVAL-002",
        message: message.to_string(),
        hint: hint.to_string(),
        diagnostics: Vec::new(),
    }
}

fn written(dir: &Path, error: &std::io::Error) -> RunError {
    RunError {
        code: "E-EVAL-004",
        message: format!(
            "the run directory {} cannot be written: {error}",
            dir.display()
        ),
        hint: "check the free space and permissions of the workdir root".to_string(),
        diagnostics: Vec::new(),
    }
}

fn write_info(dir: &Path, info: &RunInfo) -> Result<(), RunError> {
    let bytes = serde_json::to_vec_pretty(info).unwrap_or_default();
    std::fs::write(dir.join(RUN_FILE), bytes).map_err(|error| written(dir, &error))
}

/// The lookups of `arm`: its `env` before the process environment; while replaying, a
/// credential set nowhere stands as a placeholder that is never sent.
fn arm_env(host: &Host, arm: &Arm) -> HostEnv {
    let own = arm.env.clone();
    let env = host.env.clone();
    Arc::new(move |name: &str| {
        own.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .or_else(|| env(name))
    })
}

/// `arm`'s capsule staged, with `cassette` for its drivers' exchanges.
async fn stage_arm(
    plan: &Plan,
    host: &Host,
    arm: &Arm,
    cassette: Option<CaseCassette>,
) -> Result<Staged, RunError> {
    let env = arm_env(host, arm);
    let replaying = arm.cassettes.is_some() && !plan.record;
    let (file, overlay, engine, config) = (
        plan.capsule_file.clone(),
        arm.overlay.clone(),
        host.engine.clone(),
        host.config.clone(),
    );
    let name = arm.name.clone();
    let staged = tokio::task::spawn_blocking(move || {
        let source = match &overlay {
            None => CapsuleSource::read(&file, &*env),
            Some(overlay) => CapsuleSource::overlaid(&file, overlay, &*env),
        };
        let config_lookup =
            |key: &str| config(key).or_else(|| replaying.then(|| REPLAY_CREDENTIAL.to_string()));
        let lookups = Lookups {
            env: &*env,
            config: &config_lookup,
        };
        let mut staged = session::staging::stage_source(&source, &engine, &lookups)?;
        staged.cassette = match cassette {
            None => None,
            Some(CaseCassette::Replay(cassette)) => Some(cassette),
            Some(CaseCassette::Record) => {
                Some(Cassette::recording(staged.credential_values(&lookups)))
            }
        };
        Ok::<_, StageError>(staged)
    })
    .await
    .map_err(|error| refused(&format!("arm `{name}`: staging stopped: {error}"), ""))?;
    staged.map_err(|error| {
        let diagnostics = match &error {
            StageError::Manifest(diagnostics) => diagnostics.clone(),
            _ => Vec::new(),
        };
        let (code, message, hint) = match &error {
            StageError::Manifest(_) => (
                "E-EVAL-002",
                format!("arm `{}`: the capsule's manifest is refused", arm.name),
                "fix the manifest or the arm's overlay (the diagnostics follow)".to_string(),
            ),
            other => (
                murmur_manifest::Coded::code(other),
                format!(
                    "arm `{}`: {}",
                    arm.name,
                    murmur_manifest::Coded::message(other)
                ),
                murmur_manifest::Coded::hint(other),
            ),
        };
        RunError {
            code,
            message,
            hint,
            diagnostics,
        }
    })
}

enum CaseCassette {
    Replay(Cassette),
    Record,
}

/// Where `arm` keeps `case`'s cassette.
pub fn cassette_path(arm: &Arm, case: &str) -> Option<PathBuf> {
    arm.cassettes
        .as_ref()
        .map(|dir| dir.join(format!("{case}.cassette.json")))
}

/// Runs one case on one arm and scores it; whatever goes wrong is in the result.
async fn run_case(
    plan: &Plan,
    host: &Host,
    arm: &Arm,
    choice: usize,
    case: &Case,
    repeat: u32,
    dir: &Path,
) -> CaseResult {
    let started = Instant::now();
    let mut result = CaseResult {
        case: case.id.clone(),
        arm: arm.name.clone(),
        repeat,
        passed: false,
        score: 0.0,
        scores: Vec::new(),
        exit_status: "not_run".to_string(),
        turns: 0,
        tools: Vec::new(),
        tokens: Tokens::default(),
        grading: None,
        duration_ms: 0,
        session: None,
        trace: None,
        workspace: None,
        error: None,
    };
    let fail = |mut result: CaseResult, code: &str, message: String| {
        result.scores.push(Score {
            scorer: "run".to_string(),
            passed: false,
            detail: format!("error[{code}]: {message}"),
        });
        result.error = Some(CaseError {
            code: code.to_string(),
            message,
        });
        result.duration_ms = started.elapsed().as_millis() as u64;
        result
    };
    let cassette_file = cassette_path(arm, &case.id);
    let cassette = match (&cassette_file, plan.record) {
        (None, _) => None,
        (Some(_), true) => Some(CaseCassette::Record),
        (Some(path), false) => match Cassette::replaying(path, plan.lenient) {
            Ok(cassette) => Some(CaseCassette::Replay(cassette)),
            Err(why) => return fail(result, "E-RUN-030", why),
        },
    };
    let staged = match stage_arm(plan, host, arm, cassette).await {
        Ok(staged) => Arc::new(staged),
        Err(error) => return fail(result, error.code, error.message),
    };
    let sessions = dir.join(SESSIONS_DIR);
    let config = SessionConfig {
        workdir_root: sessions.clone(),
        tasks: vec![TaskInput::new(case.task.clone(), TaskSource::Eval)],
        stream: false,
        host_env: arm_env(host, arm),
        control: Some(ControlState::starting_on(staged.clone(), choice)),
        cancel: Some(plan.cancel.clone()),
        resume: None,
        seed: case.workdir.clone(),
        containment: plan.containment,
        workspace: plan.workspace.clone(),
    };
    let report = match session::run(
        host.engine.clone(),
        staged.clone(),
        &config,
        Arc::new(Silent),
    )
    .await
    {
        Ok(report) => report,
        Err(error) => return fail(result, error.code, error.message),
    };
    result.session = Some(report.session_id.clone());
    result.trace = Some(format!("{SESSIONS_DIR}/{}/trace.jsonl", report.session_id));
    result.workspace = Some(
        report
            .workspace
            .strip_prefix(dir)
            .unwrap_or(&report.workspace)
            .display()
            .to_string(),
    );
    result.exit_status = report.exit_status.as_str().to_string();
    let events = murmur_trace::analysis::load(&report.trace_path)
        .map(|loaded| loaded.events)
        .unwrap_or_default();
    result.turns = score::turns(&events);
    result.tools = score::tools_called(&events);
    result.tokens = score::tokens(&events);
    let result_text = report
        .tasks
        .iter()
        .rev()
        .find_map(|task| task.result_text.clone());
    let expect = case.expect.clone();
    let workspace = report.workspace.clone();
    let text = result_text.clone();
    let exit_status = result.exit_status.clone();
    let scores = tokio::task::spawn_blocking(move || {
        score::score(
            &expect,
            &score::Session {
                exit_status: &exit_status,
                result_text: text.as_deref(),
                workspace: &workspace,
                events: &events,
            },
        )
    })
    .await
    .unwrap_or_default();
    result.scores = scores;
    // The commands read (and may run) what the agent wrote: held by the session's class.
    let hold = murmur_runtime::session::containment::achieve(&staged.capsule, plan.containment)
        .map(|achieved| score::Hold {
            achieved,
            limits: murmur_runtime::session::containment::limits(&staged.capsule),
        })
        .map_err(|missing| {
            use murmur_manifest::Coded;
            format!("error[{}]: {}", missing.code(), missing.message())
        });
    result.scores.extend(
        score::run_commands(
            &case.expect,
            &report.workspace,
            hold.as_ref().map_err(String::as_str),
        )
        .await,
    );
    if let Some(rubric) = &case.expect.rubric {
        let (score, tokens) = grade(
            plan,
            host,
            &staged,
            rubric,
            case,
            result_text.as_deref(),
            dir,
        )
        .await;
        result.scores.push(score);
        result.grading = Some(tokens);
    }
    if let Some(cassette) = &staged.cassette {
        if plan.record {
            if let Some(path) = &cassette_file {
                let saved = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| cassette.save(path));
                if let Err(error) = saved {
                    return fail(
                        result,
                        "E-RUN-030",
                        format!("the cassette {} cannot be written: {error}", path.display()),
                    );
                }
            }
        } else if let Some(mismatch) = cassette.mismatch() {
            return fail(
                result,
                "E-RUN-029",
                format!("the replay stopped: {mismatch}"),
            );
        }
    }
    let passed = result.scores.iter().filter(|s| s.passed).count();
    result.passed = passed == result.scores.len();
    result.score = if result.scores.is_empty() {
        0.0
    } else {
        passed as f64 / result.scores.len() as f64
    };
    result.duration_ms = started.elapsed().as_millis() as u64;
    result
}

/// The rubric's verdict and its grading session's tokens.
async fn grade(
    plan: &Plan,
    host: &Host,
    staged: &Arc<Staged>,
    rubric: &crate::dataset::Rubric,
    case: &Case,
    result_text: Option<&str>,
    dir: &Path,
) -> (Score, Tokens) {
    let score = |passed: bool, detail: String| Score {
        scorer: "rubric".to_string(),
        passed,
        detail,
    };
    let Some(choice) = staged.choices.index_of(&rubric.choice) else {
        return (
            score(
                false,
                format!(
                    "the capsule has no driver choice `{}` to grade with; its choices are {}",
                    rubric.choice,
                    staged.choices.names()
                ),
            ),
            Tokens::default(),
        );
    };
    let config = SessionConfig {
        workdir_root: dir.join("grading"),
        tasks: vec![TaskInput::new(
            score::rubric_prompt(&case.task, result_text, &rubric.criteria),
            TaskSource::Eval,
        )],
        stream: false,
        host_env: host.env.clone(),
        control: Some(ControlState::starting_on(staged.clone(), choice)),
        cancel: Some(plan.cancel.clone()),
        resume: None,
        seed: None,
        containment: plan.containment,
        workspace: None,
    };
    match session::run(
        host.engine.clone(),
        staged.clone(),
        &config,
        Arc::new(Silent),
    )
    .await
    {
        Err(error) => (
            score(
                false,
                format!(
                    "the grading session failed: error[{}]: {}",
                    error.code, error.message
                ),
            ),
            Tokens::default(),
        ),
        Ok(report) => {
            let events = murmur_trace::analysis::load(&report.trace_path)
                .map(|loaded| loaded.events)
                .unwrap_or_default();
            let reply = report
                .tasks
                .iter()
                .rev()
                .find_map(|task| task.result_text.clone())
                .unwrap_or_default();
            let (passed, detail) = score::rubric_verdict(&reply);
            (score(passed, detail), score::tokens(&events))
        }
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `evl_` + the UTC time (`YYYYMMDDTHHMMSSZ`) + `_` + 6 hex: runs sort by when they began.
fn run_id() -> String {
    let digits: String = murmur_trace::time::utc(unix_ms())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let (date, time) = digits.split_at(digits.len().saturating_sub(6));
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("evl_{date}T{time}Z_{}", &hex[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_plain_names_that_sort_by_time() {
        let id = run_id();
        assert!(
            id.starts_with("evl_2") && id.len() == "evl_20261206T062143Z_abcdef".len(),
            "{id}"
        );
        assert!(crate::dataset::is_plain_name(&id));
    }

    fn dataset(dir: &Path, lines: &str) -> Dataset {
        std::fs::create_dir_all(dir.join("fixture")).unwrap();
        let path = dir.join("cases.jsonl");
        std::fs::write(&path, lines).unwrap();
        Dataset::load(&path).unwrap()
    }

    #[test]
    fn working_in_place_refuses_cases_with_a_fixture_by_name_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let place = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let plain = dataset(
            dir.path(),
            "{\"id\": \"a\", \"task\": \"t\"}\n{\"id\": \"b\", \"task\": \"t\"}\n",
        );
        let one = dataset(
            dir.path(),
            "{\"id\": \"a\", \"task\": \"t\"}\n\n{\"id\": \"seeded\", \"task\": \"t\", \"workdir\": \"fixture\"}\n",
        );
        let error = in_place_allowed(&one, place.path(), &runs).unwrap_err();
        assert_eq!(error.code, "E-EVAL-005");
        assert!(
            error.message.starts_with(
                "case `seeded` (line 3) has a `workdir:` fixture of its own, but --workspace "
            ),
            "{}",
            error.message
        );
        let lines: String = (0..12)
            .map(|n| format!("{{\"id\": \"c{n}\", \"task\": \"t\", \"workdir\": \"fixture\"}}\n"))
            .collect();
        let many = in_place_allowed(&dataset(dir.path(), &lines), place.path(), &runs)
            .unwrap_err()
            .message;
        assert!(
            many.starts_with("cases `c0` (line 1), `c1` (line 2),")
                && many.contains("`c9` (line 10) and 2 more have"),
            "{many}"
        );
        // Nothing was checked or made for a refused dataset: the runs' directory is not there.
        assert!(!runs.exists());
        assert!(in_place_allowed(&plain, place.path(), &runs).is_ok());
    }

    #[test]
    fn working_in_place_refuses_a_directory_over_the_records_or_held_by_a_session() {
        use murmur_runtime::session::workdir::WorkspaceLock;
        let dir = tempfile::tempdir().unwrap();
        let plain = dataset(dir.path(), "{\"id\": \"a\", \"task\": \"t\"}\n");
        let runs = dir.path().join("work/eval");
        std::fs::create_dir(dir.path().join("work")).unwrap();
        let over = in_place_allowed(&plain, &dir.path().join("work"), &runs).unwrap_err();
        assert_eq!(over.code, "E-RUN-033");
        assert!(
            over.message.contains("overlaps the records' root"),
            "{}",
            over.message
        );
        let missing = in_place_allowed(&plain, &dir.path().join("nowhere"), &runs).unwrap_err();
        assert_eq!(missing.code, "E-RUN-033");
        let place = tempfile::tempdir().unwrap();
        let held = WorkspaceLock::take(place.path(), &runs).unwrap();
        let error = in_place_allowed(&plain, place.path(), &runs).unwrap_err();
        assert_eq!(error.code, "E-RUN-034");
        assert!(
            error
                .message
                .contains(&format!("pid {}", std::process::id())),
            "{}",
            error.message
        );
        drop(held);
        // The check lets go of the directory: a session takes it next.
        assert!(in_place_allowed(&plain, place.path(), &runs).is_ok());
        assert!(WorkspaceLock::take(place.path(), &runs).is_ok());
    }
}
