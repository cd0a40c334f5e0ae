//! The user's credentials file, `$MURMUR_HOME/credentials.yaml`: credential names mapped to
//! their values, the `config` source staging tries after the environment and the `.env`.
//!
//! ```yaml
//! ANTHROPIC_API_KEY: sk-ant-…
//! OPENAI_API_KEY: "sk-…"
//! ```
//!
//! - A missing file holds nothing.
//! - A file that cannot be read, is not YAML, is not one mapping, or maps a name to anything but
//!   a string is `E-RUN-019`, naming the file and the line.
//! - A file its group or others may read is used, with `W-RUN-020`.
//! - No value is ever printed.
//!
//! [`unresolved`] says, before any run, which driver credentials a capsule references that
//! resolve nowhere (what `mur check` reports).

use std::collections::HashMap;
use std::path::Path;

use crate::Diagnostic;
use crate::diagnostic::code;
use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

/// The credentials the file holds.
#[derive(Default)]
pub struct Credentials {
    values: HashMap<String, String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.values.keys().collect();
        names.sort();
        f.debug_struct("Credentials")
            .field("names", &names)
            .finish()
    }
}

impl Credentials {
    /// The value of credential `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }
}

/// The most the credentials file may hold: `NAME: value` lines, a few dozen bytes each.
pub const CREDENTIALS_MAX_BYTES: u64 = 1024 * 1024;

/// Loads the credentials file at `path`, with its warnings; `Err` is the one error that makes it
/// unusable.
pub fn load(path: &Path) -> Result<(Credentials, Vec<Diagnostic>), Box<Diagnostic>> {
    let text = match crate::capped::read_text(path, CREDENTIALS_MAX_BYTES) {
        Ok(crate::capped::Capped::Text(text)) => text,
        Ok(crate::capped::Capped::TooLarge) => {
            return Err(Box::new(
                Diagnostic::new(
                    code::E_RUN_019,
                    format!(
                        "the credentials file is larger than {}, the most it may hold",
                        crate::capped::size_words(CREDENTIALS_MAX_BYTES)
                    ),
                )
                .hint("it holds `NAME: value` lines: keep only the credentials, or remove it")
                .in_file(path),
            ));
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Credentials::default(), Vec::new()));
        }
        Err(error) => {
            return Err(Box::new(
                Diagnostic::new(
                    code::E_RUN_019,
                    format!("the credentials file cannot be read: {error}"),
                )
                .hint("make it a file you can read, or remove it")
                .in_file(path),
            ));
        }
    };
    let values = parse(&text).map_err(|(line, column, message, hint)| {
        Box::new(
            Diagnostic::new(code::E_RUN_019, message)
                .hint(hint)
                .at(path, line, column),
        )
    })?;
    let mut warnings = Vec::new();
    if let Some(mode) = loose_mode(path) {
        warnings.push(
            Diagnostic::new(
                code::W_RUN_020,
                format!(
                    "the credentials file can be read by its group or by others (mode {mode:03o})"
                ),
            )
            .hint(format!("chmod 600 {}", path.display()))
            .in_file(path),
        );
    }
    Ok((Credentials { values }, warnings))
}

/// Where a credential's value was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundIn {
    /// The environment, or the `.env` beside the manifest.
    Environment,
    /// The user's credentials file.
    Config,
}

/// The value of credential `name` where a run looks, in order: the environment (`env`), the
/// `.env` beside `manifest_file`, then the user's credentials file (`config`). An empty value
/// counts as none.
pub fn resolve(
    name: &str,
    manifest_file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    config: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, FoundIn)> {
    let set = |value: Option<String>| value.filter(|value| !value.is_empty());
    set(crate::variable(name, manifest_file, env))
        .map(|value| (value, FoundIn::Environment))
        .or_else(|| set(config(name)).map(|value| (value, FoundIn::Config)))
}

/// The driver credentials `capsule` (loaded from `manifest_file`) references as `${NAME}` that
/// resolve nowhere a run looks: the environment (`env`), the `.env` beside the manifest, and the
/// user's credentials file (`config`, read from `config_file`). A name in `control.secrets` is
/// injected at run time and not looked for. The primary driver's credential is `E-MAN-012`; a
/// driver only alternates use is `W-RUN-003` (the run stages that choice unavailable); a driver
/// no choice names is not looked at. An MCP server's header credential (`server.headers`) set
/// nowhere is `E-MAN-012` too: the run cannot reach that server. A `door.auth` or `peers`
/// credential set nowhere is `W-A2A-012` (a run that does not serve, or sends nothing to that
/// peer, does not need it).
pub fn unresolved(
    capsule: &crate::CapsuleManifest,
    manifest_file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    config: &dyn Fn(&str) -> Option<String>,
    config_file: &Path,
) -> Vec<Diagnostic> {
    let dotenv = manifest_file
        .parent()
        .unwrap_or(Path::new("."))
        .join(".env");
    let mut found = Vec::new();
    let injected = |name: &str| capsule.control.secrets.iter().any(|s| s == name);
    let nowhere = format!(
        "not in the environment, not in {}, not in {}",
        dotenv.display(),
        config_file.display()
    );
    for (index, entry) in capsule.artifacts.iter().enumerate() {
        let Some(server) = &entry.server else {
            continue;
        };
        for (header, value) in &server.headers {
            let Some(name) = crate::capsule::credential_reference(value) else {
                continue;
            };
            if injected(name) || resolve(name, manifest_file, env, config).is_some() {
                continue;
            }
            found.push(
                Diagnostic::new(
                    code::E_MAN_012,
                    format!(
                        "`${{{name}}}` in header `{header}` of MCP server `{}` is set nowhere: {}; the run cannot reach that server",
                        entry.name,
                        nowhere
                    ),
                )
                .hint(format!(
                    "export {name}, add `{name}=...` to the .env or `{name}: ...` to the credentials file, or name it in `control.secrets` to inject it at run time"
                ))
                .in_file(manifest_file)
                .at_path(format!("artifacts[{index}].server.headers.{header}")),
            );
        }
    }
    let credentials = capsule
        .door
        .auth
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let what = format!("door principal `{}`", p.principal);
            Some((format!("door.auth[{i}]"), what, p.presented()?))
        })
        .chain(capsule.peers.iter().enumerate().filter_map(|(i, p)| {
            let what = format!("peer `{}`", p.url);
            Some((format!("peers[{i}]"), what, p.presented()?))
        }));
    for (at, what, presented) in credentials {
        let name = presented.credential();
        if resolve(name, manifest_file, env, config).is_some() {
            continue;
        }
        let consequence = if at.starts_with("door") {
            "`mur run --serve` will not start"
        } else {
            "a send to that peer will be refused"
        };
        found.push(
            Diagnostic::new(
                code::W_A2A_012,
                format!(
                    "`${{{name}}}` (the credential of {what}) is set nowhere: {nowhere}; {consequence}"
                ),
            )
            .hint(format!(
                "export {name}, or add `{name}=...` to the .env or `{name}: ...` to the credentials file"
            ))
            .in_file(manifest_file)
            .at_path(format!("{at}.{}", presented.scheme())),
        );
    }
    if let Some(inference) = &capsule.inference {
        found.extend(unresolved_driver_credentials(
            capsule,
            inference,
            manifest_file,
            env,
            config,
            &nowhere,
        ));
    }
    // Placed like every diagnostic of the manifest: file, line and column of the value.
    crate::place_in_file(&mut found, manifest_file);
    found
}

/// The credentials of the drivers the choices name that resolve nowhere (see [`unresolved`]).
fn unresolved_driver_credentials(
    capsule: &crate::CapsuleManifest,
    inference: &crate::capsule::Inference,
    manifest_file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    config: &dyn Fn(&str) -> Option<String>,
    nowhere: &str,
) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let injected = |name: &str| capsule.control.secrets.iter().any(|s| s == name);
    let primary = inference.driver.as_ref().map(|d| d.artifact.as_str());
    for (index, entry) in capsule.artifacts.iter().enumerate() {
        let Some(name) = entry.gateway.as_ref().and_then(|g| g.env_reference()) else {
            continue;
        };
        let is_primary = primary == Some(entry.name.as_str());
        let for_alternates = inference.alternates.iter().any(|a| a.driver == entry.name);
        if !(is_primary || for_alternates) || injected(name) {
            continue;
        }
        if resolve(name, manifest_file, env, config).is_some() {
            continue;
        }
        let path = format!("artifacts[{index}].gateway.api_key");
        let (code, consequence) = if is_primary {
            (code::E_MAN_012, "the run cannot call its primary driver")
        } else {
            (
                code::W_RUN_003,
                "the run stages the alternates on it unavailable",
            )
        };
        found.push(
            Diagnostic::new(
                code,
                format!(
                    "`${{{name}}}` in `{path}` (the credential of driver `{}`) is set nowhere: {}; {consequence}",
                    entry.name,
                    nowhere
                ),
            )
            .hint(format!(
                "export {name}, add `{name}=...` to the .env or `{name}: ...` to the credentials file, or name it in `control.secrets` to inject it at run time"
            ))
            .in_file(manifest_file)
            .at_path(path),
        );
    }
    found
}

/// The file's permission bits, when they let its group or others read it.
fn loose_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then_some(mode)
}

/// `(line, column, message, hint)` of what makes a credentials text unusable.
type Unusable = (usize, usize, String, String);

fn parse(text: &str) -> Result<HashMap<String, String>, Unusable> {
    let at = |node: &MarkedYaml<'_>| (node.span.start.line().max(1), node.span.start.col() + 1);
    let documents = MarkedYaml::load_from_str(text).map_err(|error| {
        let marker = error.marker();
        (
            marker.line().max(1),
            marker.col() + 1,
            format!("the credentials file is not YAML: {}", error.info()),
            "write one `NAME: value` line per credential".to_string(),
        )
    })?;
    if documents.len() > 1 {
        let (line, column) = at(&documents[1]);
        return Err((
            line,
            column,
            "the credentials file holds more than one YAML document".to_string(),
            "keep one document: remove the `---` and what follows it".to_string(),
        ));
    }
    let Some(root) = documents.first() else {
        return Ok(HashMap::new());
    };
    let entries = match &root.data {
        YamlData::Mapping(entries) => entries,
        YamlData::Value(Scalar::Null) => return Ok(HashMap::new()),
        _ => {
            let (line, column) = at(root);
            return Err((
                line,
                column,
                "the credentials file is not a mapping of names to values".to_string(),
                "write one `NAME: value` line per credential".to_string(),
            ));
        }
    };
    let mut values = HashMap::new();
    for (key, value) in entries {
        let Some(name) = string(key).filter(|name| !name.is_empty()) else {
            let (line, column) = at(key);
            return Err((
                line,
                column,
                "a key of the credentials file is not a credential name".to_string(),
                "write each credential as `NAME: value`, NAME a plain word".to_string(),
            ));
        };
        let Some(secret) = string(value) else {
            let (line, column) = at(value);
            return Err((
                line,
                column,
                format!("credential `{name}` is not a string"),
                format!("quote the value: `{name}: \"…\"`"),
            ));
        };
        values.insert(name, secret);
    }
    Ok(values)
}

/// A node's text, when it is a string.
fn string(node: &MarkedYaml<'_>) -> Option<String> {
    match &node.data {
        YamlData::Value(Scalar::String(text)) => Some(text.to_string()),
        YamlData::Representation(text, _, _) => Some(text.to_string()),
        YamlData::Tagged(_, inner) => string(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_of_names_to_strings_is_read() {
        let values = parse("# keys\nA_KEY: sk-one\nB_KEY: \"sk-two\"\n").unwrap();
        assert_eq!(values["A_KEY"], "sk-one");
        assert_eq!(values["B_KEY"], "sk-two");
        assert!(parse("").unwrap().is_empty());
        assert!(parse("# nothing yet\n").unwrap().is_empty());
    }

    #[test]
    fn what_is_not_a_mapping_of_strings_is_placed_at_its_line() {
        let (line, _, message, hint) = parse("A_KEY: sk-one\nB_KEY: 12345\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(message.contains("`B_KEY` is not a string"), "{message}");
        assert!(hint.contains("quote"), "{hint}");
        let (line, _, message, _) = parse("A_KEY: [sk\n").unwrap_err();
        assert_eq!(line, 2, "{message}");
        assert!(message.starts_with("the credentials file is not YAML"));
        let (line, _, message, _) = parse("- sk-one\n").unwrap_err();
        assert_eq!(line, 1);
        assert!(message.contains("not a mapping"));
        let (line, _, _, _) = parse("A: x\nA: y\n").unwrap_err();
        assert_eq!(line, 2);
        let (line, _, message, _) = parse("A: x\n---\nB: y\n").unwrap_err();
        assert_eq!(line, 3, "{message}");
        let (_, _, message, _) = parse("A:\n").unwrap_err();
        assert!(message.contains("`A` is not a string"));
    }

    #[test]
    fn debug_names_the_credentials_but_never_their_values() {
        let credentials = Credentials {
            values: parse("A_KEY: sk-secret\n").unwrap(),
        };
        let shown = format!("{credentials:?}");
        assert!(
            shown.contains("A_KEY") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }
}
