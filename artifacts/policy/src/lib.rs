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
//!   - `binary`: the shell event's `binary`, by file name (`rm` matches `/usr/bin/rm`) or full
//!     path, equal;
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
//! - A config that does not parse (unknown keys, a bad regex) is an error at the decision
//!   point; the runtime treats a policy hook's failure as a refusal.

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
        if let Some(binary) = &self.binary {
            let file_name = event.binary.rsplit('/').next().unwrap_or_default();
            if *binary != event.binary && binary != file_name {
                return false;
            }
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

fn compile(pattern: &str, rule: usize, field: &str) -> Result<Regex, String> {
    Regex::new(pattern)
        .map_err(|e| format!("policy: rule {rule}: `{field}` is not a valid regex: {e}"))
}

/// Parse and compile the rules of a `MURMUR_ARTIFACT_CONFIG` value.
fn rules_from(raw: Option<&str>) -> Result<Vec<Rule>, String> {
    let config: Config = hook::config_from(raw).map_err(|e| format!("policy: {e}"))?;
    config
        .rules
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

fn decide_shell(rules: &[Rule], event: &ShellEvent) -> HookOutput {
    if !event.is_decision() {
        return HookOutput::None;
    }
    decide(rules.iter().find(|rule| rule.matches_shell(event)))
}

fn raw_config() -> Option<String> {
    std::env::var("MURMUR_ARTIFACT_CONFIG").ok()
}

struct Policy;

impl Hook for Policy {
    fn on_tool_call(event: ToolCallEvent) -> HookResult {
        if !event.is_decision() {
            return Ok(HookOutput::None);
        }
        let rules = rules_from(raw_config().as_deref())?;
        Ok(decide_tool_call(&rules, &event))
    }

    fn on_shell(event: ShellEvent) -> HookResult {
        if !event.is_decision() {
            return Ok(HookOutput::None);
        }
        let rules = rules_from(raw_config().as_deref())?;
        Ok(decide_shell(&rules, &event))
    }
}

murmur_guest::export_hook!(Policy);

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

    fn rules() -> Vec<Rule> {
        rules_from(Some(CONFIG)).unwrap()
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
        let deny = |name, input| denied(decide_tool_call(&r, &tool(name, input)));
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
        let r = rules_from(Some(
            r#"{"rules":[{"input":{"limit":"^1\\d\\d$","all":"true"}}]}"#,
        ))
        .unwrap();
        assert_eq!(
            denied(decide_tool_call(
                &r,
                &tool("x", r#"{"limit":150,"all":true}"#)
            ))
            .as_deref(),
            Some("refused by policy rule 1")
        );
        assert_eq!(
            denied(decide_tool_call(
                &r,
                &tool("x", r#"{"limit":15,"all":true}"#)
            )),
            None
        );
        assert_eq!(
            denied(decide_tool_call(
                &r,
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
            denied(decide_tool_call(&r, &tool("rm", r#"{"argv":"--force"}"#))),
            None
        );
        // A shell command is never matched by the tool rule.
        assert_eq!(
            denied(decide_shell(&r, &shell("write-file", &["secrets/"], None))),
            None
        );
        let mixed = rules_from(Some(r#"{"rules":[{"tool":"shell","binary":"rm"}]}"#)).unwrap();
        assert_eq!(denied(decide_tool_call(&mixed, &tool("shell", "{}"))), None);
        assert_eq!(denied(decide_shell(&mixed, &shell("rm", &[], None))), None);
        // A rule naming no field matches every call.
        let all = rules_from(Some(r#"{"rules":[{"reason":"locked down"}]}"#)).unwrap();
        assert_eq!(
            denied(decide_tool_call(&all, &tool("anything", "{}"))).as_deref(),
            Some("locked down")
        );
        assert_eq!(
            denied(decide_shell(&all, &shell("ls", &[], None))).as_deref(),
            Some("locked down")
        );
    }

    #[test]
    fn first_matching_rule_wins() {
        let r = rules_from(Some(
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
        assert_eq!(decide_tool_call(&r, &event), HookOutput::None);
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
        assert!(rules_from(None).unwrap().is_empty());
        assert!(rules_from(Some(r#"{"rules":[]}"#)).unwrap().is_empty());
        let err = rules_from(Some(r#"{"rules":[{"tool":"x"},{"argv":"("}]}"#)).unwrap_err();
        assert!(
            err.starts_with("policy: rule 2: `argv` is not a valid regex"),
            "{err}"
        );
        let err = rules_from(Some(r#"{"rules":[{"input":{"path":"["}}]}"#)).unwrap_err();
        assert!(err.contains("rule 1: `input.path`"), "{err}");
        let err = rules_from(Some(r#"{"rules":[{"tools":"x"}]}"#)).unwrap_err();
        assert!(err.contains("unknown field `tools`"), "{err}");
        let err = rules_from(Some(r#"{"rule":[]}"#)).unwrap_err();
        assert!(err.contains("unknown field `rule`"), "{err}");
    }
}
