//! `${NAME}` interpolation in string values.
//!
//! Every string value (never a key, never a number) has each `${NAME}` replaced by the
//! variable's value, looked up in the environment first and then in the `.env` file beside the
//! manifest, which is read only if a variable is missing from the environment and is never
//! exported into the process. `$${` is a literal `${`; any other `$` is itself. `NAME` is
//! letters, digits and `_`, not starting with a digit.
//!
//! A variable set nowhere is `E-MAN-012` (and the string is left as written); an unclosed
//! `${` or a bad name is `E-MAN-022`. A `.env` that cannot be parsed is `W-MAN-025`: the
//! variables before the bad line still count. The caller names the paths that are not
//! interpolated (credential references, resolved at staging).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::diagnostic::{Diagnostic, code};
use crate::fields::is_variable_name;
use crate::source::{join_index, join_key};

/// Where variables come from: the environment, then `.env`.
pub(crate) struct Variables<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    dotenv_path: PathBuf,
    dotenv: Option<HashMap<String, String>>,
    /// `W-MAN-025`, once the `.env` has been read.
    pub(crate) dotenv_problem: Option<Diagnostic>,
}

impl<'a> Variables<'a> {
    pub(crate) fn new(env: &'a dyn Fn(&str) -> Option<String>, dir: &Path) -> Variables<'a> {
        Variables {
            env,
            dotenv_path: dir.join(".env"),
            dotenv: None,
            dotenv_problem: None,
        }
    }

    pub(crate) fn get(&mut self, name: &str) -> Option<String> {
        if let Some(value) = (self.env)(name) {
            return Some(value);
        }
        if self.dotenv.is_none() {
            let (vars, problem) = read_dotenv(&self.dotenv_path);
            self.dotenv = Some(vars);
            self.dotenv_problem = problem;
        }
        self.dotenv
            .as_ref()
            .and_then(|vars| vars.get(name).cloned())
    }
}

fn read_dotenv(path: &Path) -> (HashMap<String, String>, Option<Diagnostic>) {
    let mut vars = HashMap::new();
    let problem = |e: dotenvy::Error| {
        Diagnostic::new(
            code::W_MAN_025,
            format!("`.env` cannot be parsed ({e}); the variables after the problem are ignored"),
        )
        .hint("write one `NAME=value` per line")
        .in_file(path)
    };
    let iter = match dotenvy::from_path_iter(path) {
        Ok(iter) => iter,
        Err(e) if e.not_found() => return (vars, None),
        Err(e) => return (vars, Some(problem(e))),
    };
    for item in iter {
        match item {
            Ok((name, value)) => {
                vars.insert(name, value);
            }
            Err(e) => return (vars, Some(problem(e))),
        }
    }
    (vars, None)
}

/// Interpolates every string in `value` whose path `skip` does not name; returns the
/// diagnostics, each with its path.
pub(crate) fn interpolate(
    value: &mut Value,
    vars: &mut Variables<'_>,
    skip: &dyn Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    walk(value, String::new(), vars, skip, &mut found);
    found
}

fn walk(
    value: &mut Value,
    path: String,
    vars: &mut Variables<'_>,
    skip: &dyn Fn(&str) -> bool,
    found: &mut Vec<Diagnostic>,
) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                walk(child, join_key(&path, key), vars, skip, found);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                walk(child, join_index(&path, i), vars, skip, found);
            }
        }
        Value::String(text) if !skip(&path) => match expand(text, &mut |name| vars.get(name)) {
            Ok(expanded) => *text = expanded,
            Err(Problem::Unset(names)) => {
                for name in names {
                    found.push(unset(&name, &path, &vars.dotenv_path));
                }
            }
            Err(Problem::Malformed(reason)) => found.push(
                Diagnostic::new(
                    code::E_MAN_022,
                    format!("`{path}` holds a malformed `${{...}}` reference: {reason}"),
                )
                .hint("write `${NAME}` with NAME made of letters, digits and `_`; write `$${` for a literal `${`")
                .at_path(path.clone()),
            ),
        },
        _ => {}
    }
}

fn unset(name: &str, path: &str, dotenv: &Path) -> Diagnostic {
    Diagnostic::new(
        code::E_MAN_012,
        format!("`${{{name}}}` in `{path}` is set neither in the environment nor in `.env`"),
    )
    .hint(format!(
        "export {name}, or add `{name}=...` to the .env beside the manifest ({})",
        dotenv.display()
    ))
    .at_path(path)
}

#[derive(Debug, PartialEq)]
pub(crate) enum Problem {
    /// These variables are set nowhere.
    Unset(Vec<String>),
    /// The text cannot be read; why.
    Malformed(String),
}

/// `text` with its references replaced; see the module docs.
pub(crate) fn expand(
    text: &str,
    lookup: &mut dyn FnMut(&str) -> Option<String>,
) -> Result<String, Problem> {
    let mut out = String::with_capacity(text.len());
    let mut unset: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let here = &rest[i..];
        if let Some(after) = here.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(body) = here.strip_prefix("${") {
            let Some(end) = body.find('}') else {
                return Err(Problem::Malformed("`${` is never closed with `}`".into()));
            };
            let name = &body[..end];
            if !is_variable_name(name) {
                return Err(Problem::Malformed(format!(
                    "`${{{name}}}` does not name a variable"
                )));
            }
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None if !unset.iter().any(|n| n == name) => unset.push(name.to_string()),
                None => {}
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &here[1..];
        }
    }
    out.push_str(rest);
    if unset.is_empty() {
        Ok(out)
    } else {
        Err(Problem::Unset(unset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Result<String, Problem> {
        expand(text, &mut |name| (name == "A").then(|| "1".to_string()))
    }

    #[test]
    fn replaces_references_and_keeps_other_dollars() {
        assert_eq!(run("x${A}y${A}"), Ok("x1y1".into()));
        assert_eq!(run("cost $5 and $A"), Ok("cost $5 and $A".into()));
        assert_eq!(run("$${A} and $$"), Ok("${A} and $$".into()));
        assert_eq!(run("$$${A}"), Ok("$${A}".into()));
    }

    #[test]
    fn reports_unset_and_malformed() {
        assert_eq!(
            run("${B}${A}${B}${C}"),
            Err(Problem::Unset(vec!["B".into(), "C".into()]))
        );
        assert!(matches!(run("${A"), Err(Problem::Malformed(_))));
        assert!(matches!(run("${}"), Err(Problem::Malformed(_))));
        assert!(matches!(run("${1A}"), Err(Problem::Malformed(_))));
        assert!(matches!(run("${A:-x}"), Err(Problem::Malformed(_))));
    }
}
