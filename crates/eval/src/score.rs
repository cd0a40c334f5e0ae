//! Scorers: each expectation of a case, checked against its session.
//!
//! What is read: the session's report (exit status, the task's final text), its trace (turns,
//! tool calls in the order they were written, tokens, what `session_end` says the session
//! changed in its workspace: [`crate::changes`]), and its workspace. Files of the workspace
//! are read beneath it: a link the agent planted is not followed, and a file that is one fails
//! its scorer.
//!
//! A command ([`run_commands`]) is the dataset author's, but what it reads, and what it runs
//! (a `check.sh` of the fixture, say), the agent may have rewritten. So it is held like every
//! native child of the capsule: `sh -c RUN` under the containment class the case's session ran
//! under ([`Hold`]), with the capsule's resource limits. Under `scoped` it may execute only `sh`
//! and the binaries its `allow` names (with their loader and libraries), read and write only
//! the session workspace (plus the read-only runtime its interpreters need), execute nothing the
//! workspace holds, and connect only where its `network` names (nowhere by default). Its
//! environment is `PATH`, `HOME` (the workspace) and `LANG`. At its time limit its whole tree
//! is killed. What the class refuses it is the child's own error: the scorer fails with it in
//! its detail, and the other scorers go on.
//!
//! The rubric is scored by the runner (it runs a grading session); [`rubric_prompt`] and
//! [`rubric_verdict`] are its two ends.

use std::path::Path;
use std::time::Duration;

use murmur_trace::schema::{Event, EventBody};
use serde_json::Value;

use murmur_confine::{Achieved, ChildLimits, ConfinedProgram, Confinement, HoldReport};

use crate::dataset::{CommandExpect, Expect, FileExpect};
use crate::results::{Score, Tokens};

/// The most bytes of a workspace file a scorer reads (16 MiB).
const FILE_MAX_BYTES: u64 = 16 << 20;

/// What a finished session gives the scorers.
pub struct Session<'a> {
    pub exit_status: &'a str,
    pub result_text: Option<&'a str>,
    pub workspace: &'a Path,
    pub events: &'a [Event],
}

/// The tools called, in the order their calls were written to the trace.
pub fn tools_called(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolCall { tool_name, .. } => Some(tool_name.clone()),
            EventBody::SkillCall { skill, .. } => Some(skill.clone()),
            EventBody::Shell { .. } => Some("shell".to_string()),
            _ => None,
        })
        .collect()
}

/// The model turns of the agent loop (`inference` lines of its own, not a hook's).
pub fn turns(events: &[Event]) -> u32 {
    events
        .iter()
        .filter(|event| {
            matches!(&event.body, EventBody::Inference { origin, .. }
                if matches!(origin, murmur_trace::schema::Origin::Agent))
        })
        .count() as u32
}

/// Every call's tokens summed: the provider's counts where reported, the estimates, and the
/// prompt and cached tokens of the calls that reported both (for the cache hit ratio).
pub fn tokens(events: &[Event]) -> Tokens {
    let mut tokens = Tokens::default();
    for event in events {
        let EventBody::Inference {
            driver,
            input_tokens_estimated,
            output_tokens_estimated,
            input_tokens_actual,
            output_tokens_actual,
            cached_tokens_actual,
            cache_write_tokens_actual,
            ..
        } = &event.body
        else {
            continue;
        };
        let call = Tokens {
            input: *input_tokens_actual,
            output: *output_tokens_actual,
            cached: *cached_tokens_actual,
            input_estimated: *input_tokens_estimated,
            output_estimated: *output_tokens_estimated,
            ..Tokens::default()
        };
        tokens.add(&call);
        if let (Some(input), Some(cached)) = (input_tokens_actual, cached_tokens_actual) {
            let prompt = if murmur_trace::analysis::input_excludes_cached(driver) {
                input + cached + cache_write_tokens_actual.unwrap_or(0)
            } else {
                *input
            };
            tokens.prompt += prompt;
            tokens.prompt_cached += cached;
        }
    }
    tokens
}

/// Every expectation of `expect` but the rubric, scored, the exit status first.
pub fn score(expect: &Expect, session: &Session<'_>) -> Vec<Score> {
    let mut scores = Vec::new();
    let wanted = expect.exit.as_deref().unwrap_or("ok");
    scores.push(Score {
        scorer: "exit".to_string(),
        passed: session.exit_status == wanted,
        detail: if session.exit_status == wanted {
            session.exit_status.to_string()
        } else {
            format!("ended {} where {wanted} was expected", session.exit_status)
        },
    });
    if let Some(bounds) = &expect.turns {
        let turns = turns(session.events) as u64;
        scores.push(Score {
            scorer: "turns".to_string(),
            passed: bounds.holds(turns),
            detail: format!("{turns} turns (expected {})", bounds.describe()),
        });
    }
    if let Some(bounds) = &expect.tokens {
        let total = tokens(session.events).total();
        scores.push(Score {
            scorer: "tokens".to_string(),
            passed: bounds.holds(total),
            detail: format!("{total} tokens (expected {})", bounds.describe()),
        });
    }
    if let Some(wanted) = &expect.tools {
        let called = tools_called(session.events);
        let missing = first_missing(wanted, &called);
        scores.push(Score {
            scorer: "tools".to_string(),
            passed: missing.is_none(),
            detail: match missing {
                None => format!("called {}", listing(&called)),
                Some(index) => format!(
                    "`{}` (#{} of {}) was not called in order; called {}",
                    wanted[index],
                    index + 1,
                    listing(wanted),
                    listing(&called)
                ),
            },
        });
    }
    if let Some(result) = &expect.result {
        let (passed, detail) = match session.result_text {
            None => (false, "the task left no result".to_string()),
            Some(text) => matches(text, result.regex.as_deref(), result.schema.as_ref()),
        };
        scores.push(Score {
            scorer: "result".to_string(),
            passed,
            detail,
        });
    }
    for file in &expect.files {
        scores.push(score_file(file, session.workspace));
    }
    if let Some(changes) = &expect.changes {
        scores.extend(crate::changes::score(
            changes,
            recorded_changes(session.events),
        ));
    }
    scores
}

/// What the session changed in its workspace: its `session_end.changes`.
pub fn recorded_changes(events: &[Event]) -> Option<&murmur_trace::schema::WorkspaceChanges> {
    events.iter().rev().find_map(|event| match &event.body {
        EventBody::SessionEnd { changes, .. } => changes.as_ref(),
        _ => None,
    })
}

/// How a case's commands are held: the class its session ran under, and the capsule's limits.
#[derive(Debug, Clone)]
pub struct Hold {
    pub achieved: Achieved,
    pub limits: ChildLimits,
}

/// Every command of `expect`, run in `workspace` under `hold` (or, when the class could not be
/// had, failed with why), in order.
pub async fn run_commands(
    expect: &Expect,
    workspace: &Path,
    hold: Result<&Hold, &str>,
) -> Vec<Score> {
    let mut scores = Vec::new();
    for (index, command) in expect.commands.iter().enumerate() {
        let (passed, detail) = match hold {
            Ok(hold) => run_command(command, workspace, hold).await,
            Err(why) => (false, format!("not run: {why}")),
        };
        scores.push(Score {
            scorer: format!("command {}", index + 1),
            passed,
            detail,
        });
    }
    scores
}

fn listing(names: &[String]) -> String {
    if names.is_empty() {
        "nothing".to_string()
    } else {
        names.join(" → ")
    }
}

/// The index of the first of `wanted` not found in `called` after the ones before it; `None`
/// when `wanted` is a subsequence of `called`.
pub fn first_missing(wanted: &[String], called: &[String]) -> Option<usize> {
    let mut rest = called.iter();
    for (index, name) in wanted.iter().enumerate() {
        if !rest.any(|c| c == name) {
            return Some(index);
        }
    }
    None
}

fn score_file(file: &FileExpect, workspace: &Path) -> Score {
    let scorer = format!("file {}", file.path);
    let read = murmur_beneath::BeneathDir::open(workspace)
        .map_err(|error| error.to_string())
        .and_then(|dir| {
            dir.read(Path::new(&file.path), FILE_MAX_BYTES)
                .map_err(|error| match error {
                    murmur_beneath::BeneathError::NotFound { .. } => "absent".to_string(),
                    other => other.to_string(),
                })
        });
    let (passed, detail) = match (read, file.exists) {
        (Err(why), false) if why == "absent" => (true, "absent, as expected".to_string()),
        (Ok(_), false) => (false, "exists where it must not".to_string()),
        (Err(why), _) if why == "absent" => (false, "absent".to_string()),
        (Err(why), _) => (false, format!("cannot be read: {why}")),
        (Ok(bytes), true) => {
            if file.regex.is_none() && file.schema.is_none() {
                (true, format!("exists ({} bytes)", bytes.len()))
            } else {
                matches(
                    &String::from_utf8_lossy(&bytes),
                    file.regex.as_deref(),
                    file.schema.as_ref(),
                )
            }
        }
    };
    Score {
        scorer,
        passed,
        detail,
    }
}

/// Whether `text` matches `regex` and, parsed as JSON, `schema`; and what was found.
fn matches(text: &str, regex: Option<&str>, schema: Option<&Value>) -> (bool, String) {
    if let Some(pattern) = regex {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => {
                return (
                    false,
                    format!("{} does not match /{pattern}/", excerpt(text)),
                );
            }
            Err(error) => return (false, format!("the regex is invalid: {error}")),
        }
    }
    if let Some(schema) = schema {
        let value: Value = match serde_json::from_str(text.trim()) {
            Ok(value) => value,
            Err(error) => return (false, format!("{} is not JSON: {error}", excerpt(text))),
        };
        let validator = match jsonschema::validator_for(schema) {
            Ok(validator) => validator,
            Err(error) => return (false, format!("the schema is invalid: {error}")),
        };
        if let Some(error) = validator.iter_errors(&value).next() {
            return (
                false,
                format!(
                    "not valid under the schema: {error} at `{}`",
                    error.instance_path()
                ),
            );
        }
    }
    (true, format!("{} matches", excerpt(text)))
}

/// The first 80 characters of `text`, quoted, on one line.
fn excerpt(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = one_line.chars().take(80).collect();
    if cut.len() < one_line.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// The most of a command's stderr kept for its detail (its end).
const STDERR_KEPT: usize = 4096;

/// Runs `command` with `sh -c` in `workspace`, held by `hold`; passes when it exits as expected
/// within its time limit.
async fn run_command(command: &CommandExpect, workspace: &Path, hold: &Hold) -> (bool, String) {
    let path_var = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let found = |name: &str| {
        murmur_confine::resolve(name, &path_var).and_then(|path| path.canonicalize().ok())
    };
    let Some(sh) = found("sh") else {
        return (false, "`sh` is not found on PATH".to_string());
    };
    let mut also_executes = Vec::new();
    for name in &command.allow {
        match found(name) {
            Some(path) => also_executes.push(path),
            None => {
                return (
                    false,
                    format!("`{name}` (in `allow`) is not found on PATH: nothing was run"),
                );
            }
        }
    }
    let env: Vec<(String, String)> = [
        Some(("PATH".to_string(), path_var.clone())),
        Some(("HOME".to_string(), workspace.display().to_string())),
        std::env::var("LANG")
            .ok()
            .map(|lang| ("LANG".to_string(), lang)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let program = ConfinedProgram {
        program: sh,
        arg0: "sh".to_string(),
        args: vec!["-c".to_string(), command.run.clone()],
        cwd: workspace.to_path_buf(),
        env,
        writable: Vec::new(),
        readable: Vec::new(),
        also_executes,
        confinement: Confinement {
            achieved: hold.achieved.clone(),
            read_only: Vec::new(),
            interpreter_runtime: Vec::new(),
            network: command
                .network
                .iter()
                .map(|entry| entry.0.clone())
                .collect(),
            unix_sockets: false,
            workdir_exec: false,
            limits: hold.limits,
            on_refused: None,
        },
    };
    let (service, stderr) = match program.spawn() {
        Ok(started) => started,
        Err(error) => return (false, format!("could not be started: {error}")),
    };
    let murmur_confine::Service {
        stdin,
        stdout,
        mut guard,
    } = service;
    drop(stdin);
    let stdout = tokio::spawn(drain(stdout, 0));
    let stderr = tokio::spawn(drain(stderr, STDERR_KEPT));
    let limit = Duration::from_secs(command.timeout_seconds);
    let waited = tokio::time::timeout(limit, guard.wait()).await;
    // The command is over (or out of time): whatever it left running dies with its tree, and
    // what it sent before it ended is delivered.
    guard.end(Duration::from_secs(1)).await;
    let report = guard.report();
    drop(guard);
    let status = match waited {
        Err(_) => {
            stdout.abort();
            stderr.abort();
            return (
                false,
                format!(
                    "ran past {} s and was killed{}",
                    limit.as_secs(),
                    refusals(&report)
                ),
            );
        }
        Ok(Err(error)) => return (false, format!("could not be waited for: {error}")),
        Ok(Ok(status)) => status,
    };
    // Its tree is being killed: the pipes close as it goes (a bounded wait all the same).
    let _ = tokio::time::timeout(Duration::from_secs(5), stdout).await;
    let stderr = match tokio::time::timeout(Duration::from_secs(5), stderr).await {
        Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => String::new(),
    };
    let expected = command.exit;
    let said = if stderr.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", last_words(&stderr))
    };
    match status.code() {
        Some(code) if code == expected => (true, format!("exited {code}{}", refusals(&report))),
        Some(code) => (
            false,
            format!(
                "exited {code} where {expected} was expected{said}{}",
                refusals(&report)
            ),
        ),
        None => {
            use std::os::unix::process::ExitStatusExt;
            let signal = status
                .signal()
                .map_or(String::new(), |signal| format!(" {signal}"));
            (
                false,
                format!("was killed by signal{signal}{said}{}", refusals(&report)),
            )
        }
    }
}

/// The last 160 characters of `text`, quoted, on one line: where a program says why it
/// failed (a traceback ends with its error).
fn last_words(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let count = one_line.chars().count();
    let kept: String = one_line.chars().skip(count.saturating_sub(160)).collect();
    if count > 160 {
        format!("{:?}", format!("…{kept}"))
    } else {
        format!("{kept:?}")
    }
}

/// Everything `stream` gives, the last `keep` bytes kept (where an error is said).
async fn drain<R: tokio::io::AsyncRead + Unpin>(mut stream: R, keep: usize) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) if keep > 0 => {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > 2 * keep {
                    kept.drain(..kept.len() - keep);
                }
            }
            Ok(_) => {}
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
    kept
}

/// What the class refused the command, as a clause of its detail (empty when nothing was).
fn refusals(report: &HoldReport) -> String {
    let mut parts = Vec::new();
    if !report.syscalls_refused.is_empty() {
        let calls: Vec<String> = report
            .syscalls_refused
            .iter()
            .map(|(name, count)| format!("{name} ×{count}"))
            .collect();
        parts.push(format!("system calls refused: {}", calls.join(", ")));
    }
    if !report.connections_refused.is_empty() {
        let mut places: Vec<String> = report
            .connections_refused
            .iter()
            .map(|refusal| format!("{}:{}", refusal.host, refusal.port))
            .collect();
        places.dedup();
        parts.push(format!("connections refused: {}", places.join(", ")));
    }
    if report.process_limit_hits > 0 {
        parts.push(format!(
            "process limit hit {} times",
            report.process_limit_hits
        ));
    }
    if report.oom_kills > 0 {
        parts.push(format!(
            "killed at its memory limit {} times",
            report.oom_kills
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// The grading task a rubric's session is given.
pub fn rubric_prompt(task: &str, result: Option<&str>, criteria: &str) -> String {
    format!(
        "You grade another agent's answer. Do not call any tool.\n\n\
         The task it was given:\n<task>\n{task}\n</task>\n\n\
         Its final answer:\n<answer>\n{}\n</answer>\n\n\
         The criteria a passing answer meets:\n<criteria>\n{criteria}\n</criteria>\n\n\
         Reply with PASS or FAIL on the first line, then one sentence saying why.",
        result.unwrap_or("(it gave no answer)")
    )
}

/// A grader's reply read as a verdict: its first word, `PASS` or `FAIL` (any case, any
/// punctuation around it); anything else is no verdict, which fails.
pub fn rubric_verdict(reply: &str) -> (bool, String) {
    let first_line = reply.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let word: String = first_line
        .trim()
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect();
    let why = excerpt(reply);
    match word.to_ascii_uppercase().as_str() {
        "PASS" => (true, format!("the grader passed it: {why}")),
        "FAIL" => (false, format!("the grader failed it: {why}")),
        _ => (false, format!("the grader gave no verdict: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Bounds, CommandExpect, Match};
    use murmur_confine::Class;

    fn session<'a>(workspace: &'a Path, result: Option<&'a str>) -> Session<'a> {
        Session {
            exit_status: "ok",
            result_text: result,
            workspace,
            events: &[],
        }
    }

    #[test]
    fn a_tool_sequence_is_a_subsequence() {
        let s = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(first_missing(&s(&["a", "c"]), &s(&["a", "b", "c"])), None);
        assert_eq!(
            first_missing(&s(&["c", "a"]), &s(&["a", "b", "c"])),
            Some(1)
        );
        assert_eq!(first_missing(&s(&["a", "a"]), &s(&["a"])), Some(1));
        assert_eq!(first_missing(&s(&[]), &s(&[])), None);
    }

    fn command(run: &str, allow: &[&str], timeout_seconds: u64) -> CommandExpect {
        CommandExpect {
            run: run.into(),
            exit: 0,
            timeout_seconds,
            allow: allow.iter().map(|name| name.to_string()).collect(),
            network: Vec::new(),
        }
    }

    fn hold(class: Class) -> Hold {
        Hold {
            achieved: murmur_confine::achieve(class, murmur_confine::host())
                .expect("this host gives the class"),
            limits: ChildLimits::default(),
        }
    }

    async fn run_one(run: &str, allow: &[&str], workspace: &Path, class: Class) -> Score {
        let expect = Expect {
            commands: vec![command(run, allow, 10)],
            ..Expect::default()
        };
        run_commands(&expect, workspace, Ok(&hold(class)))
            .await
            .remove(0)
    }

    #[tokio::test]
    async fn a_command_executes_only_sh_and_what_it_declares() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("done.txt"), "done\n").unwrap();
        let declared = run_one(
            "grep -qx done done.txt",
            &["grep"],
            dir.path(),
            Class::Scoped,
        )
        .await;
        assert!(declared.passed, "{}", declared.detail);
        assert_eq!(declared.detail, "exited 0");
        let undeclared = run_one("grep -qx done done.txt", &[], dir.path(), Class::Scoped).await;
        assert!(!undeclared.passed);
        assert!(
            undeclared
                .detail
                .starts_with("exited 126 where 0 was expected")
                && undeclared.detail.contains("grep: Permission denied"),
            "{}",
            undeclared.detail
        );
        // A copy of an allowed binary in the workspace is not it: the workspace executes nothing.
        let grep = murmur_confine::resolve("grep", &std::env::var("PATH").unwrap()).unwrap();
        std::fs::copy(&grep, dir.path().join("grep")).unwrap();
        let copy = run_one(
            "./grep -qx done done.txt",
            &["grep"],
            dir.path(),
            Class::Scoped,
        )
        .await;
        assert!(copy.detail.contains("Permission denied"), "{}", copy.detail);
        let missing = run_one("true", &["no-such-binary-9c1"], dir.path(), Class::Scoped).await;
        assert!(!missing.passed);
        assert!(
            missing.detail.contains("not found on PATH"),
            "{}",
            missing.detail
        );
    }

    #[tokio::test]
    async fn a_command_reads_and_writes_only_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "host secret").unwrap();
        let written = outside.path().join("written.txt");
        let read = run_one(
            &format!("cat {} > stolen.txt", secret.display()),
            &["cat"],
            dir.path(),
            Class::Scoped,
        )
        .await;
        assert!(!read.passed);
        assert!(read.detail.contains("Permission denied"), "{}", read.detail);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("stolen.txt")).unwrap(),
            ""
        );
        let write = run_one(
            &format!("echo pwned > {}", written.display()),
            &[],
            dir.path(),
            Class::Scoped,
        )
        .await;
        assert!(
            write.detail.contains("Permission denied"),
            "{}",
            write.detail
        );
        assert!(!written.exists());
        // Under advisory the workspace is still the only place written.
        let advisory = run_one(
            &format!("echo pwned > {}", written.display()),
            &[],
            dir.path(),
            Class::Advisory,
        )
        .await;
        assert!(!advisory.passed && !written.exists(), "{}", advisory.detail);
        let inside = run_one("echo mine > mine.txt", &[], dir.path(), Class::Scoped).await;
        assert!(inside.passed, "{}", inside.detail);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("mine.txt")).unwrap(),
            "mine\n"
        );
    }

    #[tokio::test]
    async fn the_time_limit_kills_the_whole_tree_and_so_does_the_end() {
        for class in [Class::Scoped, Class::Advisory] {
            let dir = tempfile::tempdir().unwrap();
            let expect = Expect {
                commands: vec![
                    // Out of time: its background writer dies with it.
                    command("(sleep 2; echo late > late.txt) & sleep 30", &["sleep"], 1),
                    // Done in time: what it left running dies as it ends.
                    command("(sleep 2; echo left > left.txt) & exit 0", &["sleep"], 10),
                ],
                ..Expect::default()
            };
            let started = std::time::Instant::now();
            let scores = run_commands(&expect, dir.path(), Ok(&hold(class))).await;
            assert!(started.elapsed() < Duration::from_secs(8), "{class:?}");
            assert_eq!(scores[0].detail, "ran past 1 s and was killed", "{class:?}");
            assert!(scores[1].passed, "{class:?}: {}", scores[1].detail);
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert!(!dir.path().join("late.txt").exists(), "{class:?}");
            assert!(!dir.path().join("left.txt").exists(), "{class:?}");
        }
    }

    #[tokio::test]
    async fn a_class_that_could_not_be_had_fails_every_command_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let expect = Expect {
            commands: vec![command("true", &[], 5), command("true", &[], 5)],
            ..Expect::default()
        };
        let scores = run_commands(&expect, dir.path(), Err("sealed is not built yet")).await;
        assert_eq!(scores.len(), 2);
        assert!(
            scores
                .iter()
                .all(|s| !s.passed && s.detail == "not run: sealed is not built yet")
        );
    }

    #[tokio::test]
    async fn files_results_and_commands_are_scored_against_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("notes")).unwrap();
        std::fs::write(dir.path().join("notes/a.md"), "hello there").unwrap();
        std::fs::write(dir.path().join("data.json"), "{\"n\": \"x\"}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("planted")).unwrap();
        let expect = Expect {
            exit: Some("failed".into()),
            turns: Some(Bounds {
                min: None,
                max: Some(3),
            }),
            result: Some(Match {
                regex: Some("^done".into()),
                schema: None,
            }),
            files: vec![
                FileExpect {
                    path: "notes/a.md".into(),
                    exists: true,
                    regex: Some("hello".into()),
                    schema: None,
                },
                FileExpect {
                    path: "notes/b.md".into(),
                    exists: false,
                    regex: None,
                    schema: None,
                },
                FileExpect {
                    path: "notes/a.md".into(),
                    exists: true,
                    regex: Some("bye".into()),
                    schema: None,
                },
                FileExpect {
                    path: "data.json".into(),
                    exists: true,
                    regex: None,
                    schema: Some(
                        serde_json::json!({"type": "object", "properties": {"n": {"type": "number"}}}),
                    ),
                },
                FileExpect {
                    path: "planted".into(),
                    exists: true,
                    regex: None,
                    schema: None,
                },
            ],
            commands: vec![
                command("test -f notes/a.md", &[], 5),
                command("echo nope >&2; exit 3", &[], 5),
                command("sleep 5", &["sleep"], 1),
            ],
            ..Expect::default()
        };
        let mut scores = score(&expect, &session(dir.path(), Some("done: ok")));
        scores.extend(run_commands(&expect, dir.path(), Ok(&hold(Class::Scoped))).await);
        let verdicts: Vec<(&str, bool)> = scores
            .iter()
            .map(|s| (s.scorer.as_str(), s.passed))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("exit", false),
                ("turns", true),
                ("result", true),
                ("file notes/a.md", true),
                ("file notes/b.md", true),
                ("file notes/a.md", false),
                ("file data.json", false),
                ("file planted", false),
                ("command 1", true),
                ("command 2", false),
                ("command 3", false),
            ]
        );
        assert!(
            scores[0].detail.contains("ended ok where failed"),
            "{}",
            scores[0].detail
        );
        assert!(scores[6].detail.contains("/n"), "{}", scores[6].detail);
        assert!(scores[9].detail.contains("exited 3") && scores[9].detail.contains("nope"));
        assert!(scores[10].detail.contains("killed"));
        let none = score(
            &Expect {
                result: expect.result.clone(),
                ..Expect::default()
            },
            &session(dir.path(), None),
        );
        assert!(!none[1].passed && none[1].detail.contains("no result"));
    }

    #[test]
    fn a_grader_reply_is_a_verdict_only_when_it_says_pass_or_fail_first() {
        assert!(rubric_verdict("PASS\nit names the note").0);
        assert!(rubric_verdict("**Pass** — fine").0);
        assert!(!rubric_verdict("FAIL: wrong file").0);
        let (passed, detail) = rubric_verdict("I think it passes");
        assert!(!passed && detail.contains("no verdict"));
        assert!(!rubric_verdict("").0);
    }

    proptest::proptest! {
        #[test]
        fn no_reply_makes_the_verdict_panic(reply in "\\PC{0,200}") {
            let _ = rubric_verdict(&reply);
        }
    }
}
