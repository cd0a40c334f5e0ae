//! `policy`: refuse tool calls and shell commands by rule, at the decision point.
//!
//! One component, two manifests: `artifacts/policy` binds it to `on-tool-call`,
//! `artifacts/policy-shell` to `on-shell`, both with `commit_policy: deny`, which is what makes
//! the runtime dispatch the decision point (the event's `outcome` is `None`, the call has not
//! run) to it.
//!
//! Config (`MURMUR_ARTIFACT_CONFIG`):
//!
//! ```json
//! {"rules": [
//!   {"tool": "write-file", "input": {"path": "^secrets/"}, "reason": "secrets/ is read-only"},
//!   {"binary": "rm", "reason": "no deleting"},
//!   {"argv": "^--force$", "reason": "no forcing"},
//!   {"script": "curl", "reason": "no downloads from scripts"}
//! ]}
//! ```
//!
//! - A rule matches when every field it names matches:
//!   - `tool`: the tool's name, equal;
//!   - `input`: for each named field of the tool call's input (a JSON object), its value
//!     matches the regex (a string as it is, a number or boolean as its JSON text; any other
//!     value, or a missing field, does not match);
//!   - `binary`: the shell event's `binary` (the resolved program: its canonical path) names
//!     the same program: equal by full path or by file name (`rm` matches `/usr/bin/rm`), a
//!     version suffix allowed (`python3` and `/usr/bin/python3` match `/usr/bin/python3.11`,
//!     where `python3` is a link to it);
//!   - `argv`: any one element of the exact argument list matches the regex;
//!   - `script`: the `-c` script matches the regex (a command without one does not match).
//!
//!   Regexes are unanchored searches (write `^…$` to anchor). `tool` and `input` only match a
//!   tool call and `binary`, `argv` and `script` only a shell command, so a rule naming fields
//!   of both never matches; a rule naming none matches every call.
//! - At the decision point the first matching rule refuses the call: `deny(reason)`, with the
//!   rule's `reason` or, when it has none, `refused by policy rule <n>` (1-based). No match
//!   returns `none`.
//! - At the observation, and at every other handler, it returns `none`.
//! - `only_commands` (shell commands only): a list of exact command lines, each the binary
//!   (compared as `binary` is) then every argument:
//!   `{"only_commands": [["python3", "-B", "-m", "unittest"]]}`. When it is given, a shell
//!   command that is not exactly one of them is refused, before any rule is looked at:
//!   `deny("only these commands run here: …")`. A command with a `-c` script or a make recipe
//!   is never one of them. This is how a capsule says "only the project's test command".
//! - A config that does not parse (unknown keys, a bad regex, an empty command line in
//!   `only_commands`) is an error at the decision point; the runtime treats a policy hook's
//!   failure as a refusal.

use std::collections::BTreeMap;

use murmur_guest::hook::{self, Hook, HookOutput, HookResult, ShellEvent, ToolCallEvent};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    rules: Vec<RuleSpec>,
    #[serde(default)]
    only_commands: Option<Vec<Vec<String>>>,
}

/// The config, compiled.
#[derive(Debug, Default)]
struct Policy {
    rules: Vec<Rule>,
    /// `only_commands`: when given, the only shell command lines that may run.
    only_commands: Option<Vec<Vec<String>>>,
}

impl Policy {
    /// Why `event` is not one of `only_commands`, when they are given and it is not.
    fn outside_only_commands(&self, event: &ShellEvent) -> Option<String> {
        let only = self.only_commands.as_ref()?;
        let listed = event.script.is_none()
            && event.recipe.is_none()
            && only.iter().any(|line| {
                let (binary, args) = line.split_first().expect("checked non-empty at load");
                same_program(binary, &event.binary) && *args == event.argv[..]
            });
        if listed {
            return None;
        }
        let lines: Vec<String> = only.iter().map(|line| line.join(" ")).collect();
        Some(format!(
            "only these commands run here: {}",
            lines.join("; ")
        ))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    tool: Option<String>,
    input: Option<BTreeMap<String, String>>,
    binary: Option<String>,
    argv: Option<String>,
    script: Option<String>,
    reason: Option<String>,
}

/// A rule with its regexes compiled.
#[derive(Debug)]
struct Rule {
    tool: Option<String>,
    input: Vec<(String, Regex)>,
    binary: Option<String>,
    argv: Option<Regex>,
    script: Option<Regex>,
    reason: String,
}

impl Rule {
    fn names_tool_fields(&self) -> bool {
        self.tool.is_some() || !self.input.is_empty()
    }

    fn names_shell_fields(&self) -> bool {
        self.binary.is_some() || self.argv.is_some() || self.script.is_some()
    }

    fn matches_tool(&self, event: &ToolCallEvent) -> bool {
        if self.names_shell_fields() {
            return false;
        }
        if self
            .tool
            .as_ref()
            .is_some_and(|tool| *tool != event.tool_name)
        {
            return false;
        }
        if self.input.is_empty() {
            return true;
        }
        let Ok(Value::Object(input)) = serde_json::from_str::<Value>(&event.input) else {
            return false;
        };
        self.input.iter().all(|(field, regex)| {
            let text = match input.get(field) {
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                _ => return false,
            };
            regex.is_match(&text)
        })
    }

    fn matches_shell(&self, event: &ShellEvent) -> bool {
        if self.names_tool_fields() {
            return false;
        }
        if let Some(binary) = &self.binary
            && !same_program(binary, &event.binary)
        {
            return false;
        }
        if let Some(argv) = &self.argv
            && !event.argv.iter().any(|arg| argv.is_match(arg))
        {
            return false;
        }
        if let Some(script) = &self.script
            && !event.script.as_deref().is_some_and(|s| script.is_match(s))
        {
            return false;
        }
        true
    }
}

/// Whether `named` (a config's binary: a file name or a path) names `resolved` (a shell event's
/// binary, the canonical path the runtime resolved): the same path, or the same file name (in
/// the same directory when `named` is a path), `resolved`'s name possibly carrying a version
/// suffix (`python3` for `python3.11`: distributions install the versioned file and link the
/// plain name to it, and the event names the file).
fn same_program(named: &str, resolved: &str) -> bool {
    if named == resolved {
        return true;
    }
    let split = |path: &str| match path.rsplit_once('/') {
        Some((dir, name)) => (Some(dir.to_string()), name.to_string()),
        None => (None, path.to_string()),
    };
    let (named_dir, named_name) = split(named);
    let (resolved_dir, resolved_name) = split(resolved);
    if named_dir.is_some() && named_dir != resolved_dir {
        return false;
    }
    if named_name.is_empty() {
        return false;
    }
    match resolved_name.strip_prefix(named_name.as_str()) {
        Some("") => true,
        Some(suffix) => {
            suffix.starts_with('.')
                && suffix.len() > 1
                && suffix[1..].chars().all(|c| c.is_ascii_digit() || c == '.')
                || named_name.ends_with(|c: char| c.is_ascii_alphabetic())
                    && suffix.chars().next().is_some_and(|c| c.is_ascii_digit())
                    && suffix.chars().all(|c| c.is_ascii_digit() || c == '.')
        }
        None => false,
    }
}

fn compile(pattern: &str, rule: usize, field: &str) -> Result<Regex, String> {
    Regex::new(pattern)
        .map_err(|e| format!("policy: rule {rule}: `{field}` is not a valid regex: {e}"))
}

/// Parse and compile a `MURMUR_ARTIFACT_CONFIG` value.
fn policy_from(raw: Option<&str>) -> Result<Policy, String> {
    let config: Config = hook::config_from(raw).map_err(|e| format!("policy: {e}"))?;
    if let Some(only) = &config.only_commands
        && let Some(n) = only
            .iter()
            .position(|line| line.first().is_none_or(|binary| binary.trim().is_empty()))
    {
        return Err(format!(
            "policy: only_commands[{n}] names no binary: each entry is [binary, arg, …]"
        ));
    }
    let rules = rules_from(config.rules)?;
    Ok(Policy {
        rules,
        only_commands: config.only_commands,
    })
}

/// Compile the rules.
fn rules_from(specs: Vec<RuleSpec>) -> Result<Vec<Rule>, String> {
    specs
        .into_iter()
        .enumerate()
        .map(|(i, spec)| {
            let n = i + 1;
            let input = spec
                .input
                .unwrap_or_default()
                .into_iter()
                .map(|(field, pattern)| {
                    let regex = compile(&pattern, n, &format!("input.{field}"))?;
                    Ok((field, regex))
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Rule {
                tool: spec.tool,
                input,
                binary: spec.binary,
                argv: spec.argv.map(|p| compile(&p, n, "argv")).transpose()?,
                script: spec.script.map(|p| compile(&p, n, "script")).transpose()?,
                reason: spec
                    .reason
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or_else(|| format!("refused by policy rule {n}")),
            })
        })
        .collect()
}

fn decide(rule: Option<&Rule>) -> HookOutput {
    match rule {
        Some(rule) => HookOutput::deny(rule.reason.clone()),
        None => HookOutput::None,
    }
}

fn decide_tool_call(rules: &[Rule], event: &ToolCallEvent) -> HookOutput {
    if !event.is_decision() {
        return HookOutput::None;
    }
    decide(rules.iter().find(|rule| rule.matches_tool(event)))
}

fn decide_shell(policy: &Policy, event: &ShellEvent) -> HookOutput {
    if !event.is_decision() {
        return HookOutput::None;
    }
    if let Some(why) = policy.outside_only_commands(event) {
        return HookOutput::deny(why);
    }
    decide(policy.rules.iter().find(|rule| rule.matches_shell(event)))
}

fn raw_config() -> Option<String> {
    std::env::var("MURMUR_ARTIFACT_CONFIG").ok()
}

struct PolicyHook;

impl Hook for PolicyHook {
    fn on_tool_call(event: ToolCallEvent) -> HookResult {
        if !event.is_decision() {
            return Ok(HookOutput::None);
        }
        let policy = policy_from(raw_config().as_deref())?;
        Ok(decide_tool_call(&policy.rules, &event))
    }

    fn on_shell(event: ShellEvent) -> HookResult {
        if !event.is_decision() {
            return Ok(HookOutput::None);
        }
        let policy = policy_from(raw_config().as_deref())?;
        Ok(decide_shell(&policy, &event))
    }
}

murmur_guest::export_hook!(PolicyHook);

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_guest::hook::{ShellOutcome, ToolCallOutcome, ToolStatus};

    const CONFIG: &str = r#"{"rules": [
        {"tool": "write-file", "input": {"path": "^secrets/"}, "reason": "secrets are read-only"},
        {"binary": "rm", "reason": "no deleting"},
        {"argv": "^--force$", "reason": "no forcing"},
        {"script": "curl", "reason": "no downloads"},
        {"binary": "/opt/bin/deploy", "argv": "^prod$"}
    ]}"#;

    fn rules() -> Policy {
        policy_from(Some(CONFIG)).unwrap()
    }

    fn tool(name: &str, input: &str) -> ToolCallEvent {
        ToolCallEvent {
            session_id: "ses_1".into(),
            task_id: "t1".into(),
            turn: 1,
            call_id: "c1".into(),
            tool_name: name.into(),
            input: input.into(),
            outcome: None,
        }
    }

    fn shell(binary: &str, argv: &[&str], script: Option<&str>) -> ShellEvent {
        ShellEvent {
            session_id: "ses_1".into(),
            task_id: "t1".into(),
            binary: binary.into(),
            command: argv.join(" "),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            script: script.map(str::to_string),
            recipe: None,
            outcome: None,
        }
    }

    fn denied(output: HookOutput) -> Option<String> {
        match output {
            HookOutput::Deny(reason) => Some(reason),
            HookOutput::None => None,
            other => panic!("unexpected arm {other:?}"),
        }
    }

    #[test]
    fn tool_rule_needs_name_and_every_input_field() {
        let r = rules();
        let deny = |name, input| denied(decide_tool_call(&r.rules, &tool(name, input)));
        assert_eq!(
            deny("write-file", r#"{"path":"secrets/key","content":"x"}"#).as_deref(),
            Some("secrets are read-only")
        );
        assert_eq!(deny("write-file", r#"{"path":"notes/secrets/key"}"#), None);
        assert_eq!(deny("read-file", r#"{"path":"secrets/key"}"#), None);
        assert_eq!(deny("write-file", r#"{"content":"secrets/"}"#), None);
        assert_eq!(deny("write-file", r#"{"path":7}"#), None);
        assert_eq!(deny("write-file", "not json"), None);
    }

    #[test]
    fn input_numbers_and_bools_match_as_json_text() {
        let r = policy_from(Some(
            r#"{"rules":[{"input":{"limit":"^1\\d\\d$","all":"true"}}]}"#,
        ))
        .unwrap();
        assert_eq!(
            denied(decide_tool_call(
                &r.rules,
                &tool("x", r#"{"limit":150,"all":true}"#)
            ))
            .as_deref(),
            Some("refused by policy rule 1")
        );
        assert_eq!(
            denied(decide_tool_call(
                &r.rules,
                &tool("x", r#"{"limit":15,"all":true}"#)
            )),
            None
        );
        assert_eq!(
            denied(decide_tool_call(
                &r.rules,
                &tool("x", r#"{"limit":"150","all":[true]}"#)
            )),
            None
        );
    }

    #[test]
    fn shell_rules_match_binary_argv_and_script() {
        let r = rules();
        let deny =
            |binary, argv: &[&str], script| denied(decide_shell(&r, &shell(binary, argv, script)));
        assert_eq!(
            deny("/usr/bin/rm", &["-r", "x"], None).as_deref(),
            Some("no deleting")
        );
        assert_eq!(deny("rm", &["x"], None).as_deref(), Some("no deleting"));
        assert_eq!(deny("/usr/bin/rmdir", &["x"], None), None);
        assert_eq!(
            deny("/usr/bin/git", &["push", "--force"], None).as_deref(),
            Some("no forcing")
        );
        assert_eq!(
            deny("/usr/bin/git", &["push", "--force-with-lease"], None),
            None
        );
        assert_eq!(
            deny("/bin/sh", &["-c", "curl x | sh"], Some("curl x | sh")).as_deref(),
            Some("no downloads")
        );
        // The script rule decides on `script`, never on argv or the display command.
        assert_eq!(deny("/usr/bin/echo", &["curl"], None), None);
        // Every named field must match: the binary by full path, and an argv element.
        assert_eq!(
            deny("/opt/bin/deploy", &["prod"], None).as_deref(),
            Some("refused by policy rule 5")
        );
        assert_eq!(deny("/opt/bin/deploy", &["staging"], None), None);
        assert_eq!(deny("/usr/bin/deploy", &["prod"], None), None);
    }

    #[test]
    fn rules_of_one_kind_never_match_the_other() {
        let r = rules();
        // `rm` as a tool name is not a shell binary.
        assert_eq!(
            denied(decide_tool_call(
                &r.rules,
                &tool("rm", r#"{"argv":"--force"}"#)
            )),
            None
        );
        // A shell command is never matched by the tool rule.
        assert_eq!(
            denied(decide_shell(&r, &shell("write-file", &["secrets/"], None))),
            None
        );
        let mixed = policy_from(Some(r#"{"rules":[{"tool":"shell","binary":"rm"}]}"#)).unwrap();
        assert_eq!(
            denied(decide_tool_call(&mixed.rules, &tool("shell", "{}"))),
            None
        );
        assert_eq!(denied(decide_shell(&mixed, &shell("rm", &[], None))), None);
        // A rule naming no field matches every call.
        let all = policy_from(Some(r#"{"rules":[{"reason":"locked down"}]}"#)).unwrap();
        assert_eq!(
            denied(decide_tool_call(&all.rules, &tool("anything", "{}"))).as_deref(),
            Some("locked down")
        );
        assert_eq!(
            denied(decide_shell(&all, &shell("ls", &[], None))).as_deref(),
            Some("locked down")
        );
    }

    #[test]
    fn first_matching_rule_wins() {
        let r = policy_from(Some(
            r#"{"rules":[{"binary":"git","reason":"first"},{"argv":"push","reason":"second"}]}"#,
        ))
        .unwrap();
        assert_eq!(
            denied(decide_shell(&r, &shell("/usr/bin/git", &["push"], None))).as_deref(),
            Some("first")
        );
        assert_eq!(
            denied(decide_shell(&r, &shell("/usr/bin/hg", &["push"], None))).as_deref(),
            Some("second")
        );
    }

    #[test]
    fn observation_is_always_none() {
        let r = rules();
        let mut event = tool("write-file", r#"{"path":"secrets/key"}"#);
        event.outcome = Some(ToolCallOutcome {
            status: Some(ToolStatus::Passed),
            output: String::new(),
            error: None,
            duration_ms: 1,
        });
        assert_eq!(decide_tool_call(&r.rules, &event), HookOutput::None);
        let mut event = shell("/usr/bin/rm", &["x"], None);
        event.outcome = Some(ShellOutcome {
            exit_code: Some(0),
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
            duration_ms: 1,
            error: None,
        });
        assert_eq!(decide_shell(&r, &event), HookOutput::None);
    }

    #[test]
    fn config_errors_name_the_rule_and_field() {
        assert!(policy_from(None).unwrap().rules.is_empty());
        assert!(
            policy_from(Some(r#"{"rules":[]}"#))
                .unwrap()
                .rules
                .is_empty()
        );
        let err = policy_from(Some(r#"{"rules":[{"tool":"x"},{"argv":"("}]}"#)).unwrap_err();
        assert!(
            err.starts_with("policy: rule 2: `argv` is not a valid regex"),
            "{err}"
        );
        let err = policy_from(Some(r#"{"rules":[{"input":{"path":"["}}]}"#)).unwrap_err();
        assert!(err.contains("rule 1: `input.path`"), "{err}");
        let err = policy_from(Some(r#"{"rules":[{"tools":"x"}]}"#)).unwrap_err();
        assert!(err.contains("unknown field `tools`"), "{err}");
        let err = policy_from(Some(r#"{"rule":[]}"#)).unwrap_err();
        assert!(err.contains("unknown field `rule`"), "{err}");
    }

    #[test]
    fn only_commands_lets_exactly_the_listed_command_lines_run() {
        let policy = policy_from(Some(
            r#"{"only_commands": [["python3", "-B", "-m", "unittest"]],
                "rules": [{"argv": "^-B$", "reason": "rules still apply"}]}"#,
        ))
        .unwrap();
        let outcome = |binary, argv: &[&str], script| {
            denied(decide_shell(&policy, &shell(binary, argv, script)))
        };
        let only = "only these commands run here: python3 -B -m unittest";
        // Listed, by file name or full path: then the rules decide.
        assert_eq!(
            outcome("/usr/bin/python3", &["-B", "-m", "unittest"], None).as_deref(),
            Some("rules still apply")
        );
        // Anything else is refused before the rules: another argument list, none at all (a
        // program on stdin), a `-c` script, another binary.
        for (binary, argv, script) in [
            ("/usr/bin/python3", &[][..], None),
            ("/usr/bin/python3", &["-B"][..], None),
            (
                "/usr/bin/python3",
                &["-B", "-m", "unittest", "-x"][..],
                None,
            ),
            ("/usr/bin/python3", &["-m", "pip"][..], None),
            (
                "/usr/bin/python3",
                &["-B", "-m", "unittest"][..],
                Some("import os"),
            ),
            ("/usr/bin/perl", &["-B", "-m", "unittest"][..], None),
        ] {
            assert_eq!(
                outcome(binary, argv, script).as_deref(),
                Some(only),
                "{binary} {argv:?}"
            );
        }
        let open = policy_from(Some(r#"{"only_commands": [["make", "test"]]}"#)).unwrap();
        assert_eq!(
            denied(decide_shell(&open, &shell("make", &["test"], None))),
            None
        );
        // Tool calls are not shell commands: `only_commands` says nothing of them.
        assert_eq!(
            denied(decide_tool_call(&open.rules, &tool("write-file", "{}"))),
            None
        );
        // An entry without a binary is a config error (a refusal at the decision point).
        for bad in [
            r#"{"only_commands": [[]]}"#,
            r#"{"only_commands": [[" "]]}"#,
        ] {
            let err = policy_from(Some(bad)).unwrap_err();
            assert!(err.contains("only_commands[0] names no binary"), "{err}");
        }
    }

    #[test]
    fn a_binary_names_its_program_by_path_name_or_version_suffix() {
        for (named, resolved) in [
            ("/usr/bin/rm", "/usr/bin/rm"),
            ("rm", "/usr/bin/rm"),
            ("python3", "/usr/bin/python3.11"),
            ("/usr/bin/python3", "/usr/bin/python3.11"),
            ("python", "/usr/bin/python3.12"),
            ("rm", "rm"),
        ] {
            assert!(same_program(named, resolved), "{named} ~ {resolved}");
        }
        for (named, resolved) in [
            ("rm", "/usr/bin/rmdir"),
            ("/usr/local/bin/python3", "/usr/bin/python3.11"),
            ("python3", "/usr/bin/python3-config"),
            ("python3", "/usr/bin/python3.11x"),
            ("python3", "/usr/bin/python3."),
            ("", "/usr/bin/rm"),
            ("/usr/bin/", "/usr/bin/rm"),
        ] {
            assert!(!same_program(named, resolved), "{named} !~ {resolved}");
        }
    }
}
