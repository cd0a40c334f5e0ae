//! `mur eval run|show|diff`: run a dataset through a capsule's arms, read a run back, compare
//! two arms. What runs and how it is scored is [`murmur_eval`]'s; this prints it.
//!
//! `run` exits 0 when every case run passed, 1 when any failed; `diff` exits 1 when a case
//! regressed. Bad input (a dataset, an arms file, an arm the capsule refuses) is 2. Runs are
//! kept under `<workdir root>/eval/` (default `workdir/` beside the manifest), newest last.
//! Names and messages that come from a dataset, a run's results or a scorer are printed with
//! their control characters escaped ([`crate::render::line`]).

use std::path::PathBuf;
use std::sync::Arc;

use murmur_eval::arms::{self, Arm};
use murmur_eval::dataset::{Dataset, DatasetError};
use murmur_eval::results::{self, ArmSummary, CaseResult, Diff, Run};
use murmur_eval::runner::{self, Host, Plan, Progress};
use murmur_runtime::session::StopSignal;
use serde_json::json;

use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

#[derive(clap::Subcommand)]
pub enum EvalCommand {
    /// Run every case of DATASET on each arm, score it, and keep the results.
    Run(RunArgs),
    /// Print a run's scores, cost, turns and time per arm and case (default: the newest run).
    Show(ShowArgs),
    /// Compare two arms, of one run or two: which cases regressed and which improved.
    Diff(DiffArgs),
}

/// Where the capsule and its runs are.
#[derive(clap::Args)]
pub struct Place {
    /// The capsule's directory (or its `murmur.yaml`). Default: the current directory.
    #[arg(long)]
    capsule: Option<PathBuf>,
    /// The workdir root runs are kept under (in `eval/`). Default: `workdir/` beside the
    /// manifest.
    #[arg(long)]
    workdir: Option<PathBuf>,
}

impl Place {
    fn paths(&self) -> (PathBuf, PathBuf) {
        let (file, dir) = crate::environment::capsule_paths(self.capsule.as_deref());
        let root = self.workdir.clone().unwrap_or_else(|| dir.join("workdir"));
        (file, results::runs_dir(&root))
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The dataset: JSON lines, one case each (`id`, `task`, `workdir`, `expect`).
    dataset: PathBuf,
    #[command(flatten)]
    place: Place,
    /// The arms to run, in order (comma-separated). Default: every arm of the arms file.
    #[arg(long, value_delimiter = ',')]
    arms: Vec<String>,
    /// The arms file. Default: `<dataset stem>.arms.yaml` beside the dataset, when it exists;
    /// without one the only arm is `base`, the capsule as it is.
    #[arg(long)]
    arms_file: Option<PathBuf>,
    /// Run every case this many times on each arm.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// At most this many sessions at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: u32,
    /// Run the arms that have `cassettes:` against the provider and write their cassettes.
    #[arg(long)]
    record: bool,
    /// Replaying: `strict` (each request must be the recorded one) or `lenient` (by turn).
    #[arg(long, value_parser = ["strict", "lenient"], default_value = "strict")]
    replay_mode: String,
    /// The containment class of each case's native children and of its `commands` scorers:
    /// `advisory`, `scoped` or `sealed`. The stronger of this and the capsule's
    /// `capabilities.containment` holds; default `scoped`.
    #[arg(long, value_parser = crate::commands::run::parse_containment, value_name = "CLASS")]
    containment: Option<murmur_manifest::capsule::Containment>,
    /// Work every case on this existing directory in place, one case after another (each sees
    /// what the cases before it left; `--jobs` is 1); it must lie apart from the workdir root.
    /// Cases with a `workdir:` fixture are refused (E-EVAL-005). Default: a fresh workspace per
    /// case.
    #[arg(long, value_name = "PATH")]
    workspace: Option<PathBuf>,
    /// Print the run (its summaries and every result) as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// A run: its directory, its `results.jsonl`, or its id. Default: the newest.
    run: Option<PathBuf>,
    #[command(flatten)]
    place: Place,
    /// Print the run as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the self-contained HTML report to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The run compared against.
    base: PathBuf,
    /// The run compared; default: BASE itself (two of its arms).
    new: Option<PathBuf>,
    #[command(flatten)]
    place: Place,
    /// The base's arm. Default: its first.
    #[arg(long)]
    base_arm: Option<String>,
    /// The new side's arm. Default: within one run its second arm; across two runs the base
    /// arm's name when the new run has it, else its first.
    #[arg(long)]
    arm: Option<String>,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(command: EvalCommand) -> Exit {
    match command {
        EvalCommand::Run(args) => run_dataset(args),
        EvalCommand::Show(args) => show(args),
        EvalCommand::Diff(args) => diff(args),
    }
}

fn bad_dataset(json: bool, error: &DatasetError, hint: &str, code: &str) -> Exit {
    render::failure(json, code, &error.to_string(), hint, Exit::BadInput)
}

fn run_dataset(args: RunArgs) -> Exit {
    let json = args.json;
    if let Some(refused) = crate::environment::refuse_workspace(args.workspace.as_deref(), json) {
        return refused;
    }
    let (capsule_file, runs_dir) = args.place.paths();
    let dataset = match Dataset::load(&args.dataset) {
        Ok(dataset) => dataset,
        Err(error) => {
            return bad_dataset(
                json,
                &error,
                "each line is {\"id\": …, \"task\": …, \"expect\": {…}}; see docs/eval.md",
                "E-EVAL-001",
            );
        }
    };
    let arms_file = args
        .arms_file
        .clone()
        .unwrap_or_else(|| arms::default_file(&args.dataset));
    let all_arms = if args.arms_file.is_some() || arms_file.exists() {
        match arms::load(&arms_file) {
            Ok(arms) => arms,
            Err(error) => {
                return bad_dataset(
                    json,
                    &error,
                    "see docs/eval.md for the arms file",
                    "E-EVAL-002",
                );
            }
        }
    } else {
        vec![Arm::base()]
    };
    let arms = match arms::select(all_arms, &args.arms, &arms_file) {
        Ok(arms) => arms,
        Err(error) => return bad_dataset(json, &error, "name arms of the arms file", "E-EVAL-002"),
    };
    let (runtime, engine) = match crate::commands::run::runtime_and_engine(json) {
        Ok(started) => started,
        Err(exit) => return exit,
    };
    let credentials = match crate::environment::user_credentials_warned() {
        Ok(credentials) => credentials,
        Err(diagnostic) => {
            render::diagnostics_human(&[*diagnostic]);
            return Exit::BadInput;
        }
    };
    let cancel = StopSignal::default();
    {
        let cancel = cancel.clone();
        runtime.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("mur: interrupted: the running cases end canceled, no other starts");
                cancel.stop(murmur_runtime::session::StopRequest::Canceled);
            }
        });
    }
    let plan = Plan {
        capsule_file,
        dataset,
        arms,
        repeat: args.repeat,
        jobs: args.jobs as usize,
        record: args.record,
        lenient: args.replay_mode == "lenient",
        runs_dir,
        cancel: cancel.clone(),
        containment: args.containment,
        workspace: args.workspace.clone(),
    };
    let host = Host {
        engine: Arc::new(engine),
        env: Arc::new(host_env),
        config: Arc::new(move |name: &str| credentials.get(name)),
    };
    let progress: Arc<dyn Fn(Progress<'_>) + Send + Sync> = Arc::new(move |event| match event {
        Progress::Started { run, dir, total } => eprintln!(
            "eval {}: {} × {} × {} = {} case runs, {}; results in {}",
            run.run,
            render::plural(run.cases as usize, "case"),
            render::plural(run.arms.len(), "arm"),
            render::plural(run.repeat as usize, "repeat"),
            total,
            match &run.workspace {
                Some(workspace) => format!("one after another on {workspace} in place"),
                None => format!("{} at a time", run.jobs),
            },
            dir.display()
        ),
        Progress::CaseDone {
            result,
            done,
            total,
        } => eprintln!("[{done}/{total}] {}", case_line(result)),
    });
    let run = match runtime.block_on(runner::run(plan, host, progress)) {
        Ok(run) => run,
        Err(error) => {
            render::diagnostics_human(&error.diagnostics);
            let exit = if error.code == "E-EVAL-004" {
                Exit::Failed
            } else {
                Exit::BadInput
            };
            return render::failure(json, error.code, &error.message, &error.hint, exit);
        }
    };
    let summaries = results::summarize(&run);
    if json {
        println!("{}", render::json(&run_json(&run, &summaries)));
    } else {
        print_run(&run, &summaries, false);
    }
    if cancel.reason().is_some() {
        return Exit::Interrupted;
    }
    let expected = run.info.cases as usize * run.info.arms.len() * run.info.repeat as usize;
    if run.results.len() == expected && run.results.iter().all(|r| r.passed) {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

/// One line for a finished case run.
fn case_line(result: &CaseResult) -> String {
    let verdict = if result.passed { "pass" } else { "FAIL" };
    let cache = result
        .tokens
        .cache_hit_ratio()
        .map(|ratio| format!(" ({:.0}% cached)", ratio * 100.0))
        .unwrap_or_default();
    let mut line = format!(
        "{} · {}{}: {verdict} ({}/{} scorers) · {} · {} · {} tokens{cache} · {:.1} s",
        render::line(&result.arm),
        render::line(&result.case),
        if result.repeat > 0 {
            format!(" #{}", result.repeat + 1)
        } else {
            String::new()
        },
        result.scores.iter().filter(|s| s.passed).count(),
        result.scores.len(),
        result.exit_status,
        render::plural(result.turns as usize, "turn"),
        result.tokens.total(),
        result.duration_ms as f64 / 1000.0
    );
    for score in result.scores.iter().filter(|s| !s.passed) {
        line.push_str(&format!(
            "\n      ✗ {}: {}",
            render::line(&score.scorer),
            render::line(&score.detail)
        ));
    }
    line
}

fn run_json(run: &Run, summaries: &[ArmSummary]) -> serde_json::Value {
    json!({
        "run": run.info,
        "dir": run.dir,
        "arms": summaries,
        "results": run.results,
        "report": run.dir.join(results::REPORT_FILE),
    })
}

fn percent(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| format!("{:.0}%", v * 100.0))
}

fn print_run(run: &Run, summaries: &[ArmSummary], with_cases: bool) {
    println!(
        "run {} · capsule {} · dataset {} ({} cases, repeat {})",
        render::line(&run.info.run),
        render::line(&run.info.capsule_name),
        render::line(&run.info.dataset),
        run.info.cases,
        run.info.repeat
    );
    println!(
        "{:<16} {:>7} {:>7} {:>6} {:>10} {:>10} {:>7} {:>7} {:>9}",
        "arm", "passed", "rate", "score", "tokens in", "tokens out", "cache", "turns", "time"
    );
    for summary in summaries {
        let (input, output) = match (summary.tokens.input, summary.tokens.output) {
            (Some(i), Some(o)) => (i.to_string(), o.to_string()),
            _ => (
                format!("~{}", summary.tokens.input_estimated),
                format!("~{}", summary.tokens.output_estimated),
            ),
        };
        println!(
            "{:<16} {:>7} {:>7} {:>6.2} {:>10} {:>10} {:>7} {:>7.1} {:>8.1}s",
            render::line(&summary.arm),
            format!("{}/{}", summary.passed, summary.runs),
            percent(Some(summary.pass_rate)),
            summary.mean_score,
            input,
            output,
            percent(summary.cache_hit_ratio),
            summary.mean_turns,
            summary.mean_duration_ms / 1000.0
        );
        if summary.grading.input.is_some() || summary.grading.input_estimated > 0 {
            println!("{:<16} grading: {} tokens", "", summary.grading.total());
        }
    }
    if with_cases {
        println!();
        for result in &run.results {
            println!("{}", case_line(result));
            if let Some(trace) = &result.trace {
                println!("      trace: {}", run.dir.join(trace).display());
            }
            if let Some(workspace) = &result.workspace {
                // `join` keeps an absolute path (a directory worked on in place) as it is.
                println!("      workspace: {}", run.dir.join(workspace).display());
            }
        }
    } else {
        let failed = run.results.iter().filter(|r| !r.passed).count();
        if failed > 0 {
            println!(
                "\n{} failed: mur eval show {}",
                render::plural(failed, "case run"),
                run.dir.display()
            );
        }
    }
    println!("report: {}", run.dir.join(results::REPORT_FILE).display());
}

fn show(args: ShowArgs) -> Exit {
    let (_, runs_dir) = args.place.paths();
    let run = match results::find(args.run.as_deref(), &runs_dir) {
        Ok(run) => run,
        Err(message) => {
            return render::failure(
                args.json,
                "E-EVAL-003",
                &message,
                "run one with `mur eval run DATASET`, or name its directory",
                Exit::BadInput,
            );
        }
    };
    let summaries = results::summarize(&run);
    if let Some(path) = &args.html
        && let Err(error) = std::fs::write(path, murmur_eval::report::html(&run, &summaries))
    {
        return render::failure(
            args.json,
            "E-EVAL-004",
            &format!("the report {} cannot be written: {error}", path.display()),
            "check the directory exists and is writable",
            Exit::Failed,
        );
    }
    if args.json {
        println!("{}", render::json(&run_json(&run, &summaries)));
    } else {
        print_run(&run, &summaries, true);
    }
    Exit::Ok
}

fn diff(args: DiffArgs) -> Exit {
    let (_, runs_dir) = args.place.paths();
    let missing = |message: String| {
        render::failure(
            args.json,
            "E-EVAL-003",
            &message,
            "name runs by directory, results file or id (`mur eval show` lists the newest)",
            Exit::BadInput,
        )
    };
    let base = match results::find(Some(&args.base), &runs_dir) {
        Ok(run) => run,
        Err(message) => return missing(message),
    };
    let new = match &args.new {
        None => None,
        Some(path) => match results::find(Some(path), &runs_dir) {
            Ok(run) => Some(run),
            Err(message) => return missing(message),
        },
    };
    let arm_names =
        |run: &Run| -> Vec<String> { results::summarize(run).into_iter().map(|s| s.arm).collect() };
    let base_arms = arm_names(&base);
    let Some(base_arm) = args.base_arm.clone().or_else(|| base_arms.first().cloned()) else {
        return missing(format!("the run {} has no arm", base.info.run));
    };
    let new_run = new.as_ref().unwrap_or(&base);
    let new_arms = arm_names(new_run);
    let new_arm = match (&args.arm, &new) {
        (Some(arm), _) => Some(arm.clone()),
        (None, None) => base_arms.iter().find(|a| **a != base_arm).cloned(),
        (None, Some(_)) => new_arms
            .iter()
            .find(|a| **a == base_arm)
            .or(new_arms.first())
            .cloned(),
    };
    let Some(new_arm) = new_arm else {
        return missing(format!(
            "the run {} has one arm: name a second run to compare with, or --arm",
            base.info.run
        ));
    };
    for (run, arm, names) in [
        (&base, &base_arm, &base_arms),
        (new_run, &new_arm, &new_arms),
    ] {
        if !names.contains(arm) {
            return missing(format!(
                "the run {} has no arm `{arm}`; its arms are {}",
                run.info.run,
                names.join(", ")
            ));
        }
    }
    let diff = results::diff(&base, &base_arm, new_run, &new_arm);
    if args.json {
        println!("{}", render::json(&json!(diff)));
    } else {
        print_diff(&diff);
    }
    if diff.regressed.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

fn print_diff(diff: &Diff) {
    let side = |s: &results::Side| format!("{} of {}", render::line(&s.arm), render::line(&s.run));
    println!("base: {}\nnew:  {}", side(&diff.base), side(&diff.new));
    let (b, n) = (&diff.base.summary, &diff.new.summary);
    println!(
        "pass rate {} → {} · mean score {:.2} → {:.2} · tokens {} → {} · cache {} → {} · turns {:.1} → {:.1}",
        percent(Some(b.pass_rate)),
        percent(Some(n.pass_rate)),
        b.mean_score,
        n.mean_score,
        b.tokens.total(),
        n.tokens.total(),
        percent(b.cache_hit_ratio),
        percent(n.cache_hit_ratio),
        b.mean_turns,
        n.mean_turns
    );
    for (title, changes) in [("regressed", &diff.regressed), ("improved", &diff.improved)] {
        println!("\n{} {title}:", render::plural(changes.len(), "case"));
        for change in changes {
            let mut line = format!(
                "  {}: pass {} → {}, score {:.2} → {:.2}, tokens {} → {}, turns {:.1} → {:.1}",
                render::line(&change.case),
                percent(Some(change.base_pass_rate)),
                percent(Some(change.new_pass_rate)),
                change.base_score,
                change.new_score,
                change.base_tokens,
                change.new_tokens,
                change.base_turns,
                change.new_turns
            );
            if !change.newly_failing.is_empty() {
                line.push_str(&format!(
                    "; now failing: {}",
                    render::line(&change.newly_failing.join(", "))
                ));
            }
            println!("{line}");
        }
    }
    println!(
        "\n{} unchanged",
        render::plural(diff.unchanged.len(), "case")
    );
    if !diff.only_base.is_empty() {
        println!(
            "only in the base: {}",
            render::line(&diff.only_base.join(", "))
        );
    }
    if !diff.only_new.is_empty() {
        println!(
            "only in the new: {}",
            render::line(&diff.only_new.join(", "))
        );
    }
}
