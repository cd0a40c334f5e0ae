//! Arms: the named variations of a capsule a dataset runs through.
//!
//! An arms file is YAML (by default `<dataset>.arms.yaml` beside the dataset):
//!
//! ```yaml
//! arms:
//!   baseline: {}
//!   terse:
//!     description: the short prompt on the fast choice
//!     choice: fast                  # start every session on this driver choice
//!     model: small-model            # inference.model
//!     overlay: overlays/terse.yaml  # or an inline mapping, merged over murmur.yaml
//!     env: { HELLO_MODEL: terse }   # variables the manifest and the grants read
//!     cassettes: cassettes/terse    # replay each case from <dir>/<case>.cassette.json
//! ```
//!
//! What loading promises: the arms keep the file's order; a name is a plain name; unknown keys
//! are refused (`E-EVAL-002`, naming the arm and field); an overlay file is read and parsed as
//! the manifest loader parses YAML; relative paths are taken from the arms file's directory.
//! Without an arms file there is one arm, `base`: the capsule as it is.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::dataset::{DatasetError, is_plain_name, read_bounded};

/// One arm.
#[derive(Debug, Clone, Default)]
pub struct Arm {
    pub name: String,
    pub description: Option<String>,
    /// The driver choice sessions start on.
    pub choice: Option<String>,
    /// Merged over the capsule's manifest (`model` included).
    pub overlay: Option<Value>,
    /// Variables looked up before the process environment.
    pub env: Vec<(String, String)>,
    /// Where each case's cassette is: replayed, or written by `--record`.
    pub cassettes: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArmsFile {
    arms: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArmSpec {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    choice: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    overlay: Option<Value>,
    #[serde(default)]
    env: Map<String, Value>,
    #[serde(default)]
    cassettes: Option<String>,
}

/// The largest arms or overlay file read (1 MiB).
const ARMS_MAX_BYTES: u64 = 1 << 20;

impl Arm {
    /// The arm `base`: the capsule as it is.
    pub fn base() -> Arm {
        Arm {
            name: "base".to_string(),
            ..Arm::default()
        }
    }

    /// What this arm changes, in a few words (for reports).
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(choice) = &self.choice {
            parts.push(format!("choice {choice}"));
        }
        if let Some(model) = self
            .overlay
            .as_ref()
            .and_then(|o| o.pointer("/inference/model"))
            .and_then(Value::as_str)
        {
            parts.push(format!("model {model}"));
        }
        if self.overlay.is_some() {
            parts.push("overlay".to_string());
        }
        for (name, value) in &self.env {
            parts.push(format!("{name}={value}"));
        }
        if let Some(dir) = &self.cassettes {
            parts.push(format!("cassettes {}", dir.display()));
        }
        if parts.is_empty() {
            "the capsule as it is".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// The arms file that goes with `dataset` when none is named: `<stem>.arms.yaml` beside it.
pub fn default_file(dataset: &Path) -> PathBuf {
    let stem = dataset
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    dataset.with_file_name(format!("{stem}.arms.yaml"))
}

/// Reads the arms file at `path`.
pub fn load(path: &Path) -> Result<Vec<Arm>, DatasetError> {
    let error = |message: String| DatasetError {
        path: path.to_path_buf(),
        line: None,
        message,
    };
    let bytes = read_bounded(path, ARMS_MAX_BYTES).map_err(&error)?;
    let text = String::from_utf8(bytes).map_err(|_| error("not UTF-8 text".to_string()))?;
    let value = murmur_manifest::parse_yaml(&text).map_err(|diagnostics| DatasetError {
        path: path.to_path_buf(),
        line: diagnostics.first().and_then(|d| d.line),
        message: diagnostics
            .first()
            .map(|d| d.message.clone())
            .unwrap_or_else(|| "not YAML".to_string()),
    })?;
    let file: ArmsFile =
        serde_json::from_value(value).map_err(|e| error(format!("not an arms file: {e}")))?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut arms = Vec::new();
    for (name, spec) in file.arms {
        if !is_plain_name(&name) {
            return Err(error(format!(
                "the arm `{}` is not a plain name (1-64 of A-Z a-z 0-9 . _ -)",
                name.escape_debug()
            )));
        }
        let spec: ArmSpec = if spec.is_null() {
            serde_json::from_value(Value::Object(Map::new()))
        } else {
            serde_json::from_value(spec)
        }
        .map_err(|e| error(format!("arm `{name}`: {e}")))?;
        arms.push(arm(name, spec, base).map_err(&error)?);
    }
    if arms.is_empty() {
        return Err(error("`arms` names no arm".to_string()));
    }
    Ok(arms)
}

fn arm(name: String, spec: ArmSpec, base: &Path) -> Result<Arm, String> {
    let mut overlay = match spec.overlay {
        None => None,
        Some(Value::String(file)) => {
            let path = base.join(&file);
            let bytes = read_bounded(&path, ARMS_MAX_BYTES)
                .map_err(|e| format!("arm `{name}`: the overlay {} {e}", path.display()))?;
            let text = String::from_utf8(bytes).map_err(|_| {
                format!("arm `{name}`: the overlay {} is not UTF-8", path.display())
            })?;
            Some(murmur_manifest::parse_yaml(&text).map_err(|diagnostics| {
                format!(
                    "arm `{name}`: the overlay {}: {}",
                    path.display(),
                    diagnostics
                        .first()
                        .map(|d| d.message.clone())
                        .unwrap_or_default()
                )
            })?)
        }
        Some(value @ Value::Object(_)) => Some(value),
        Some(_) => {
            return Err(format!(
                "arm `{name}`: `overlay` is a file name or a mapping"
            ));
        }
    };
    if let Some(model) = spec.model {
        let overlay = overlay.get_or_insert_with(|| Value::Object(Map::new()));
        murmur_manifest::merge_overlay(
            overlay,
            &serde_json::json!({ "inference": { "model": model } }),
        );
    }
    let mut env = Vec::new();
    for (key, value) in spec.env {
        let value = match value {
            Value::String(text) => text,
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            _ => return Err(format!("arm `{name}`: `env.{key}` is not a string")),
        };
        env.push((key, value));
    }
    if let Some(choice) = &spec.choice
        && choice.trim().is_empty()
    {
        return Err(format!("arm `{name}`: `choice` is empty"));
    }
    Ok(Arm {
        description: spec.description,
        choice: spec.choice,
        overlay: overlay.take(),
        env,
        cassettes: spec.cassettes.map(|dir| base.join(dir)),
        name,
    })
}

/// The arms `wanted` names (`--arms a,b`), in that order; all of them when empty.
pub fn select(arms: Vec<Arm>, wanted: &[String], path: &Path) -> Result<Vec<Arm>, DatasetError> {
    if wanted.is_empty() {
        return Ok(arms);
    }
    let names = arms
        .iter()
        .map(|arm| arm.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut chosen = Vec::new();
    for name in wanted {
        let Some(arm) = arms.iter().find(|arm| &arm.name == name) else {
            return Err(DatasetError {
                path: path.to_path_buf(),
                line: None,
                message: format!("there is no arm `{name}`; the arms are {names}"),
            });
        };
        if chosen.iter().any(|c: &Arm| &c.name == name) {
            continue;
        }
        chosen.push(arm.clone());
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_load_in_order_with_overlays_models_and_env() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("terse.yaml"),
            "inference:\n  max_turns: 2\n",
        )
        .unwrap();
        let path = dir.path().join("cases.arms.yaml");
        std::fs::write(
            &path,
            "arms:\n  zeta: {}\n  terse:\n    model: small\n    overlay: terse.yaml\n    env: { HELLO_MODEL: terse, N: 3 }\n    cassettes: tapes/terse\n  alpha:\n",
        )
        .unwrap();
        let arms = load(&path).unwrap();
        let names: Vec<_> = arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["zeta", "terse", "alpha"]);
        let terse = &arms[1];
        assert_eq!(
            terse.overlay.as_ref().unwrap(),
            &serde_json::json!({"inference": {"max_turns": 2, "model": "small"}})
        );
        assert_eq!(
            terse.env,
            [
                ("HELLO_MODEL".into(), "terse".into()),
                ("N".into(), "3".into())
            ]
        );
        assert!(terse.cassettes.as_ref().unwrap().ends_with("tapes/terse"));
        assert_eq!(
            default_file(Path::new("e/cases.jsonl")),
            Path::new("e/cases.arms.yaml")
        );
        let picked = select(arms.clone(), &["alpha".into(), "zeta".into()], &path).unwrap();
        assert_eq!(picked[0].name, "alpha");
        let unknown = select(arms, &["beta".into()], &path).unwrap_err();
        assert!(unknown.message.contains("zeta, terse, alpha"), "{unknown}");
    }

    #[test]
    fn a_misspelled_field_or_a_bad_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.arms.yaml");
        for (text, needle) in [
            ("arms:\n  a: { modle: x }\n", "modle"),
            ("arms:\n  ../a: {}\n", "plain name"),
            ("arms: {}\n", "no arm"),
            ("arm: {}\n", "not an arms file"),
            ("arms:\n  a: { overlay: missing.yaml }\n", "overlay"),
            ("arms:\n  a: { env: { X: [1] } }\n", "env.X"),
            ("arms: [\n", ""),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = load(&path).unwrap_err();
            assert!(error.message.contains(needle), "{text}: {error}");
        }
    }
}
