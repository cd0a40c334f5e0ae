//! What an evaluation run leaves, and reading it back.
//!
//! A run is a directory `<workdir root>/eval/<run id>/` holding `run.json` (what ran: the
//! dataset, the arms, when), `results.jsonl` (one line per case, arm and repeat, appended as
//! each finishes, so a run cut short keeps what it did), `sessions/<session id>/` (each case's
//! session record, its `trace.jsonl`, and its fresh `workspace/`, both of which its result
//! line names) and `report.html`.
//!
//! A run read back lists its results in the dataset's order (then the arms', then by repeat),
//! whatever order the cases finished in. Summaries and diffs are computed from the lines alone: a pass rate, a mean score, the
//! provider's token counts with the cache hit ratio, turns and time per arm; between two arms
//! (of one run or two), which cases regressed (passed, now fail; or scored lower) and which
//! improved.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub format: u32,
    pub run: String,
    pub dataset: String,
    pub dataset_sha256: String,
    pub capsule: String,
    pub capsule_name: String,
    pub arms: Vec<ArmInfo>,
    pub cases: u32,
    /// The cases' ids, in the dataset's order.
    #[serde(default)]
    pub case_ids: Vec<String>,
    pub repeat: u32,
    pub jobs: u32,
    pub started_unix_ms: u64,
    #[serde(default)]
    pub finished_unix_ms: Option<u64>,
    /// The directory every case worked on in place, one after another (`--workspace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub murmur_version: String,
}

/// An arm as a run records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What it changes, in a few words.
    pub summary: String,
    /// `live` (the provider), `replay` (its cassettes) or `record` (the provider, kept).
    pub mode: String,
}

/// One line of `results.jsonl`: a case run once on an arm.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaseResult {
    pub case: String,
    pub arm: String,
    /// Which repeat (from 0).
    pub repeat: u32,
    /// Every scorer passed.
    pub passed: bool,
    /// The share of scorers passed, 0 to 1.
    pub score: f64,
    pub scores: Vec<Score>,
    /// The session's exit status; `not_run` when no session ran.
    pub exit_status: String,
    pub turns: u32,
    /// The tools called, in order (a skill by its name, the shell as `shell`).
    pub tools: Vec<String>,
    pub tokens: Tokens,
    /// The rubric's grading call, when the case has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grading: Option<Tokens>,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The session's trace, relative to the run directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The directory the session's agent worked in and its scorers read: relative to the run
    /// directory for a fresh workspace (`sessions/<id>/workspace`), absolute for one worked on
    /// in place (`mur eval run --workspace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Why the case could not be run or scored in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CaseError>,
}

/// One scorer's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Score {
    /// `exit`, `turns`, `tokens`, `tools`, `result`, `file <path>`, `changes created`,
    /// `changes modified`, `changes deleted`, `changes untouched`, `changes only`,
    /// `command <n>`, `rubric`.
    pub scorer: String,
    pub passed: bool,
    /// What was found, in words.
    pub detail: String,
}

/// Tokens of a session or a grading call.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tokens {
    /// The provider's counts; absent when it reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
    /// The prompt tokens the cache hit ratio is over (cached included).
    #[serde(default)]
    pub prompt: u64,
    /// The cached tokens of the calls counted in `prompt`.
    #[serde(default)]
    pub prompt_cached: u64,
    pub input_estimated: u64,
    pub output_estimated: u64,
}

impl Tokens {
    /// Input plus output: the provider's where reported, else the runtime's estimate.
    pub fn total(&self) -> u64 {
        match (self.input, self.output) {
            (Some(input), Some(output)) => input + output,
            _ => self.input_estimated + self.output_estimated,
        }
    }

    pub fn add(&mut self, other: &Tokens) {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        }
        self.input = sum(self.input, other.input);
        self.output = sum(self.output, other.output);
        self.cached = sum(self.cached, other.cached);
        self.prompt += other.prompt;
        self.prompt_cached += other.prompt_cached;
        self.input_estimated += other.input_estimated;
        self.output_estimated += other.output_estimated;
    }

    /// Σ cached / Σ prompt, when any call reported both.
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        (self.prompt > 0).then(|| self.prompt_cached as f64 / self.prompt as f64)
    }
}

/// Why a case was not run or scored in full.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CaseError {
    pub code: String,
    pub message: String,
}

/// A run read back.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub info: RunInfo,
    pub results: Vec<CaseResult>,
}

/// The run directory's files.
pub const RUN_FILE: &str = "run.json";
pub const RESULTS_FILE: &str = "results.jsonl";
pub const REPORT_FILE: &str = "report.html";
/// Where a run's sessions are, under its directory.
pub const SESSIONS_DIR: &str = "sessions";

/// The directory runs are kept in under a workdir root.
pub fn runs_dir(workdir_root: &Path) -> PathBuf {
    workdir_root.join("eval")
}

/// Reads a run: `path` is its directory, its `results.jsonl` or `run.json`, or a run id under
/// `runs` (the newest when `path` is `None`).
pub fn find(path: Option<&Path>, runs: &Path) -> Result<Run, String> {
    let dir = match path {
        None => newest(runs)?,
        Some(path) if path.is_dir() => path.to_path_buf(),
        Some(path) if path.is_file() => path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
        Some(path) => {
            let id = path.to_string_lossy();
            if !crate::dataset::is_plain_name(&id) || !runs.join(&*id).is_dir() {
                return Err(format!(
                    "no evaluation run {}: not a run directory, its results, or a run id under {}",
                    path.display(),
                    runs.display()
                ));
            }
            runs.join(&*id)
        }
    };
    read(&dir)
}

fn newest(runs: &Path) -> Result<PathBuf, String> {
    let mut ids: Vec<String> = std::fs::read_dir(runs)
        .map_err(|error| format!("no evaluation runs under {}: {error}", runs.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join(RUN_FILE).is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids.pop()
        .map(|id| runs.join(id))
        .ok_or_else(|| format!("no evaluation runs under {}", runs.display()))
}

/// Reads the run in `dir`. A cut last line of `results.jsonl` (the run was killed mid-write) is
/// left out; any other line that is not a result refuses the run.
pub fn read(dir: &Path) -> Result<Run, String> {
    let info_path = dir.join(RUN_FILE);
    let info_bytes = crate::dataset::read_bounded(&info_path, 16 << 20)
        .map_err(|e| format!("{} {e}", info_path.display()))?;
    let info: RunInfo = serde_json::from_slice(&info_bytes)
        .map_err(|e| format!("{} is not a run: {e}", info_path.display()))?;
    let results_path = dir.join(RESULTS_FILE);
    let bytes = match crate::dataset::read_bounded(&results_path, 256 << 20) {
        Ok(bytes) => bytes,
        Err(_) if !results_path.exists() => Vec::new(),
        Err(e) => return Err(format!("{} {e}", results_path.display())),
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut results = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<CaseResult>(line) {
            Ok(result) => results.push(result),
            Err(_) if index + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(error) => {
                return Err(format!(
                    "{}:{}: not a case result: {error}",
                    results_path.display(),
                    index + 1
                ));
            }
        }
    }
    // In the dataset's order, then the arms', then by repeat (they were written as they
    // finished).
    let rank =
        |list: &[String], name: &str| list.iter().position(|n| n == name).unwrap_or(usize::MAX);
    let arms: Vec<String> = info.arms.iter().map(|arm| arm.name.clone()).collect();
    results.sort_by_key(|r| (rank(&info.case_ids, &r.case), rank(&arms, &r.arm), r.repeat));
    Ok(Run {
        dir: dir.to_path_buf(),
        info,
        results,
    })
}

/// One arm's totals over a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ArmSummary {
    pub arm: String,
    /// Case runs (cases × repeats).
    pub runs: u32,
    pub passed: u32,
    pub pass_rate: f64,
    pub mean_score: f64,
    pub tokens: Tokens,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hit_ratio: Option<f64>,
    /// The rubrics' grading calls.
    pub grading: Tokens,
    pub mean_turns: f64,
    pub mean_duration_ms: f64,
    /// Case runs that ended in an error before or while scoring.
    pub errors: u32,
}

/// Each arm's summary, in the run's arm order (then any arm only the results name).
pub fn summarize(run: &Run) -> Vec<ArmSummary> {
    let mut order: Vec<String> = run.info.arms.iter().map(|a| a.name.clone()).collect();
    for result in &run.results {
        if !order.contains(&result.arm) {
            order.push(result.arm.clone());
        }
    }
    order
        .into_iter()
        .map(|arm| {
            let of_arm: Vec<&CaseResult> = run.results.iter().filter(|r| r.arm == arm).collect();
            let runs = of_arm.len() as u32;
            let mean = |f: &dyn Fn(&CaseResult) -> f64| {
                if runs == 0 {
                    0.0
                } else {
                    of_arm.iter().map(|r| f(r)).sum::<f64>() / runs as f64
                }
            };
            let mut tokens = Tokens::default();
            let mut grading = Tokens::default();
            for result in &of_arm {
                tokens.add(&result.tokens);
                if let Some(g) = &result.grading {
                    grading.add(g);
                }
            }
            let passed = of_arm.iter().filter(|r| r.passed).count() as u32;
            ArmSummary {
                pass_rate: if runs == 0 {
                    0.0
                } else {
                    passed as f64 / runs as f64
                },
                mean_score: mean(&|r| r.score),
                cache_hit_ratio: tokens.cache_hit_ratio(),
                mean_turns: mean(&|r| r.turns as f64),
                mean_duration_ms: mean(&|r| r.duration_ms as f64),
                errors: of_arm.iter().filter(|r| r.error.is_some()).count() as u32,
                arm,
                runs,
                passed,
                tokens,
                grading,
            }
        })
        .collect()
}

/// One case compared across two arms: its pass rate and mean score on each.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CaseChange {
    pub case: String,
    pub base_pass_rate: f64,
    pub new_pass_rate: f64,
    pub base_score: f64,
    pub new_score: f64,
    pub base_tokens: u64,
    pub new_tokens: u64,
    pub base_turns: f64,
    pub new_turns: f64,
    /// The scorers that passed on the base and fail on the new arm (any repeat).
    pub newly_failing: Vec<String>,
    /// `regressed`, `improved` or `same`.
    pub verdict: String,
}

/// Two arms compared.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diff {
    pub base: Side,
    pub new: Side,
    pub regressed: Vec<CaseChange>,
    pub improved: Vec<CaseChange>,
    pub unchanged: Vec<CaseChange>,
    /// Cases only one side ran.
    pub only_base: Vec<String>,
    pub only_new: Vec<String>,
}

/// One side of a diff.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Side {
    pub run: String,
    pub arm: String,
    pub summary: ArmSummary,
}

/// Compares `new_arm` of `new` with `base_arm` of `base` case by case. A case regressed when
/// its pass rate fell, or its mean score fell with the pass rate the same; improved the other
/// way round.
pub fn diff(base: &Run, base_arm: &str, new: &Run, new_arm: &str) -> Diff {
    let side = |run: &Run, arm: &str| Side {
        run: run.info.run.clone(),
        arm: arm.to_string(),
        summary: summarize(run)
            .into_iter()
            .find(|s| s.arm == arm)
            .unwrap_or_else(|| summarize_none(arm)),
    };
    let cases = |run: &Run, arm: &str| -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for result in run.results.iter().filter(|r| r.arm == arm) {
            if !ids.contains(&result.case) {
                ids.push(result.case.clone());
            }
        }
        ids
    };
    let base_cases = cases(base, base_arm);
    let new_cases = cases(new, new_arm);
    let mut out = Diff {
        base: side(base, base_arm),
        new: side(new, new_arm),
        regressed: Vec::new(),
        improved: Vec::new(),
        unchanged: Vec::new(),
        only_base: base_cases
            .iter()
            .filter(|c| !new_cases.contains(c))
            .cloned()
            .collect(),
        only_new: new_cases
            .iter()
            .filter(|c| !base_cases.contains(c))
            .cloned()
            .collect(),
    };
    for case in base_cases.iter().filter(|c| new_cases.contains(c)) {
        let of = |run: &Run, arm: &str| -> Vec<CaseResult> {
            run.results
                .iter()
                .filter(|r| r.arm == arm && &r.case == case)
                .cloned()
                .collect()
        };
        let (b, n) = (of(base, base_arm), of(new, new_arm));
        let rate =
            |rs: &[CaseResult]| rs.iter().filter(|r| r.passed).count() as f64 / rs.len() as f64;
        let score = |rs: &[CaseResult]| rs.iter().map(|r| r.score).sum::<f64>() / rs.len() as f64;
        let tokens =
            |rs: &[CaseResult]| rs.iter().map(|r| r.tokens.total()).sum::<u64>() / rs.len() as u64;
        let turns =
            |rs: &[CaseResult]| rs.iter().map(|r| r.turns as f64).sum::<f64>() / rs.len() as f64;
        let passed_on_base: Vec<&str> = b
            .iter()
            .flat_map(|r| {
                r.scores
                    .iter()
                    .filter(|s| s.passed)
                    .map(|s| s.scorer.as_str())
            })
            .collect();
        let mut newly_failing: Vec<String> = Vec::new();
        for score in n.iter().flat_map(|r| r.scores.iter().filter(|s| !s.passed)) {
            if passed_on_base.contains(&score.scorer.as_str())
                && !newly_failing.contains(&score.scorer)
            {
                newly_failing.push(score.scorer.clone());
            }
        }
        let (base_rate, new_rate) = (rate(&b), rate(&n));
        let (base_score, new_score) = (score(&b), score(&n));
        const EPSILON: f64 = 1e-9;
        let verdict = if new_rate + EPSILON < base_rate
            || ((new_rate - base_rate).abs() < EPSILON && new_score + EPSILON < base_score)
        {
            "regressed"
        } else if new_rate > base_rate + EPSILON
            || ((new_rate - base_rate).abs() < EPSILON && new_score > base_score + EPSILON)
        {
            "improved"
        } else {
            "same"
        };
        let change = CaseChange {
            case: case.clone(),
            base_pass_rate: base_rate,
            new_pass_rate: new_rate,
            base_score,
            new_score,
            base_tokens: tokens(&b),
            new_tokens: tokens(&n),
            base_turns: turns(&b),
            new_turns: turns(&n),
            newly_failing,
            verdict: verdict.to_string(),
        };
        match verdict {
            "regressed" => out.regressed.push(change),
            "improved" => out.improved.push(change),
            _ => out.unchanged.push(change),
        }
    }
    out
}

fn summarize_none(arm: &str) -> ArmSummary {
    ArmSummary {
        arm: arm.to_string(),
        runs: 0,
        passed: 0,
        pass_rate: 0.0,
        mean_score: 0.0,
        tokens: Tokens::default(),
        cache_hit_ratio: None,
        grading: Tokens::default(),
        mean_turns: 0.0,
        mean_duration_ms: 0.0,
        errors: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn result(case: &str, arm: &str, passed: bool, score: f64) -> CaseResult {
        CaseResult {
            case: case.into(),
            arm: arm.into(),
            repeat: 0,
            passed,
            score,
            scores: vec![Score {
                scorer: "tools".into(),
                passed,
                detail: String::new(),
            }],
            exit_status: "ok".into(),
            turns: 2,
            tools: vec![],
            tokens: Tokens {
                input: Some(100),
                output: Some(10),
                cached: Some(50),
                prompt: 150,
                prompt_cached: 50,
                input_estimated: 90,
                output_estimated: 9,
            },
            grading: None,
            duration_ms: 10,
            session: None,
            trace: None,
            workspace: None,
            error: None,
        }
    }

    fn run(results: Vec<CaseResult>) -> Run {
        Run {
            dir: PathBuf::from("."),
            info: RunInfo {
                format: 1,
                run: "evl_x".into(),
                dataset: "d".into(),
                dataset_sha256: String::new(),
                capsule: ".".into(),
                capsule_name: "c".into(),
                arms: vec![],
                cases: 2,
                case_ids: vec![],
                repeat: 1,
                jobs: 1,
                started_unix_ms: 0,
                finished_unix_ms: None,
                workspace: None,
                murmur_version: "0".into(),
            },
            results,
        }
    }

    #[test]
    fn a_diff_names_what_regressed_and_what_improved() {
        let run = run(vec![
            result("a", "old", true, 1.0),
            result("b", "old", true, 1.0),
            result("c", "old", false, 0.5),
            result("d", "old", true, 1.0),
            result("a", "new", true, 1.0),
            result("b", "new", false, 0.5),
            result("c", "new", true, 1.0),
            result("e", "new", true, 1.0),
        ]);
        let diff = diff(&run, "old", &run, "new");
        let names =
            |changes: &[CaseChange]| changes.iter().map(|c| c.case.clone()).collect::<Vec<_>>();
        assert_eq!(names(&diff.regressed), ["b"]);
        assert_eq!(diff.regressed[0].newly_failing, ["tools"]);
        assert_eq!(names(&diff.improved), ["c"]);
        assert_eq!(names(&diff.unchanged), ["a"]);
        assert_eq!(diff.only_base, ["d"]);
        assert_eq!(diff.only_new, ["e"]);
        let summary = summarize(&run);
        let old = summary.iter().find(|s| s.arm == "old").unwrap();
        assert_eq!((old.runs, old.passed), (4, 3));
        assert_eq!(old.tokens.input, Some(400));
        assert!((old.cache_hit_ratio.unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_cut_last_line_is_left_out_and_any_other_bad_line_refuses_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(vec![]);
        std::fs::write(
            dir.path().join(RUN_FILE),
            serde_json::to_vec(&r.info).unwrap(),
        )
        .unwrap();
        let line = serde_json::to_string(&result("a", "x", true, 1.0)).unwrap();
        std::fs::write(
            dir.path().join(RESULTS_FILE),
            format!("{line}\n{{\"case\": \"b\", \"ar"),
        )
        .unwrap();
        assert_eq!(read(dir.path()).unwrap().results.len(), 1);
        std::fs::write(dir.path().join(RESULTS_FILE), format!("nonsense\n{line}\n")).unwrap();
        assert!(read(dir.path()).unwrap_err().contains(":1:"));
    }

    #[test]
    fn a_result_keeps_its_workspace_and_a_line_written_before_it_reads_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = run(vec![]);
        r.info.workspace = Some("/srv/checkout".into());
        std::fs::write(
            dir.path().join(RUN_FILE),
            serde_json::to_vec(&r.info).unwrap(),
        )
        .unwrap();
        let mut fresh = result("a", "x", true, 1.0);
        fresh.trace = Some("sessions/ses_1/trace.jsonl".into());
        fresh.workspace = Some("sessions/ses_1/workspace".into());
        let line = serde_json::to_string(&fresh).unwrap();
        assert!(
            line.contains(r#""workspace":"sessions/ses_1/workspace""#),
            "{line}"
        );
        // A line of a run made before results named their workspace.
        let mut older = serde_json::to_value(result("b", "x", true, 1.0)).unwrap();
        older.as_object_mut().unwrap().remove("workspace");
        std::fs::write(dir.path().join(RESULTS_FILE), format!("{line}\n{older}\n")).unwrap();
        let read = read(dir.path()).unwrap();
        assert_eq!(read.info.workspace.as_deref(), Some("/srv/checkout"));
        assert_eq!(read.results[0], fresh);
        assert_eq!(read.results[1].workspace, None);
    }
}
