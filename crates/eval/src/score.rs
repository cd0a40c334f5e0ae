//! Scorers: each expectation of a case, checked against its session.
//!
//! What is read: the session's report (exit status, the task's final text), its trace (turns,
//! tool calls in the order they were written, tokens), and its workdir. Files of the workdir
//! are read beneath it: a link the agent planted is not followed, and a file that is one fails
//! its scorer. A command runs with `sh -c` in the workdir, its environment cleared but `PATH`,
//! `HOME` and `LANG`, killed at its time limit; it is the dataset author's command, not the
//! agent's, but what it reads is the agent's work.
//!
//! The rubric is scored by the runner (it runs a grading session); [`rubric_prompt`] and
//! [`rubric_verdict`] are its two ends.

use std::path::Path;
use std::time::Duration;

use murmur_trace::schema::{Event, EventBody};
use serde_json::Value;

use crate::dataset::{Expect, FileExpect};
use crate::results::{Score, Tokens};

/// The most bytes of a workdir file a scorer reads (16 MiB).
const FILE_MAX_BYTES: u64 = 16 << 20;

/// What a finished session gives the scorers.
pub struct Session<'a> {
    pub exit_status: &'a str,
    pub result_text: Option<&'a str>,
    pub workdir: &'a Path,
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
        scores.push(score_file(file, session.workdir));
    }
    for (index, command) in expect.commands.iter().enumerate() {
        let (passed, detail) = run_command(
            &command.run,
            session.workdir,
            command.exit,
            Duration::from_secs(command.timeout_seconds),
        );
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

fn score_file(file: &FileExpect, workdir: &Path) -> Score {
    let scorer = format!("file {}", file.path);
    let read = murmur_beneath::BeneathDir::open(workdir)
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

/// Runs `command` with `sh -c` in `workdir`; passes when it exits `expected` within `limit`.
fn run_command(command: &str, workdir: &Path, expected: i32, limit: Duration) -> (bool, String) {
    use std::process::{Command, Stdio};
    let mut child = match Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(workdir)
        .env_clear()
        .envs(
            ["PATH", "HOME", "LANG"]
                .into_iter()
                .filter_map(|name| std::env::var_os(name).map(|v| (name, v))),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => return (false, format!("`sh` could not be started: {error}")),
    };
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return (
                    false,
                    format!("ran past {} s and was killed", limit.as_secs()),
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(error) => return (false, format!("could not be waited for: {error}")),
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.by_ref().take(4096).read_to_string(&mut stderr);
    }
    match status.code() {
        Some(code) if code == expected => (true, format!("exited {code}")),
        Some(code) => (
            false,
            format!(
                "exited {code} where {expected} was expected{}",
                if stderr.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", excerpt(&stderr))
                }
            ),
        ),
        None => (false, "was killed by a signal".to_string()),
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

    fn session<'a>(workdir: &'a Path, result: Option<&'a str>) -> Session<'a> {
        Session {
            exit_status: "ok",
            result_text: result,
            workdir,
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

    #[test]
    fn files_results_and_commands_are_scored_against_the_workdir() {
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
                CommandExpect {
                    run: "test -f notes/a.md".into(),
                    exit: 0,
                    timeout_seconds: 5,
                },
                CommandExpect {
                    run: "echo nope >&2; exit 3".into(),
                    exit: 0,
                    timeout_seconds: 5,
                },
                CommandExpect {
                    run: "sleep 5".into(),
                    exit: 0,
                    timeout_seconds: 1,
                },
            ],
            ..Expect::default()
        };
        let scores = score(&expect, &session(dir.path(), Some("done: ok")));
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
