//! An artifact's own manifest: the `murmur.yaml` shipped inside a tool, driver, hook or skill.
//!
//! It declares `name`, `version` (semver), `runtime`, `description`, the component file
//! (`component:`, relative to the artifact's directory, default `component.wasm`), how to build
//! it from source (`build:`), and per runtime:
//!
//! `component:` and `skill:` name files inside the artifact's directory: an absolute path or
//! one climbing with `..` is `E-MAN-015`, so an installed archive can load nothing its pin does
//! not cover.
//!
//! - tool: `input_schema`, the JSON Schema offered to the model. It must be a mapping; a tool
//!   without one is `W-MAN-019` (the model is offered an empty object schema).
//! - driver: `upstream_auth { header, value }`, how the host attaches the credential to the
//!   driver's requests; `value` is a template holding `{key}` (`x-api-key` / `{key}`,
//!   `Authorization` / `Bearer {key}`). A missing or malformed header, or a value without
//!   `{key}`, is `E-MAN-018`. A driver without `upstream_auth` is keyless.
//! - hook: `binding`, `execution_mode` (default `blocking`), `commit_policy` (default `none`),
//!   checked by [`crate::hooks::check_hook_contract`].
//! - skill: the markdown file returned verbatim, `skill:` (default `skill.md`), which must exist
//!   beside the manifest (`E-MAN-023`).
//!
//! A field that belongs to another runtime (an `input_schema` on a driver) is `W-MAN-026`.
//!
//! Another Murmur runtime's spellings that mean the same thing (`runtime: wasm`,
//! `requires_files`, `input:`, an `input_schema` written as JSON text) are read as this one's,
//! each with a `W-MAN-032` ([`read_reference_spellings`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diagnostic::{Diagnostic, code, serde_error};
use crate::fields::{check_inside_dir, check_name, check_version};
use crate::hooks::{Binding, CommitPolicy, ExecutionMode, check_hook_contract};

closed_set! {
    /// What kind of thing an artifact is.
    pub enum Runtime (code::E_MAN_007, "runtime") {
        Tool = "tool",
        Driver = "driver",
        Hook = "hook",
        Skill = "skill",
        Capsule = "capsule",
        /// An MCP server, declared by a capsule's entry (`server:`), never an artifact of its
        /// own.
        Mcp = "mcp",
    }
}

/// The component file's name when `component:` is absent.
pub const DEFAULT_COMPONENT: &str = "component.wasm";
/// A skill's markdown file's name when `skill:` is absent.
pub const DEFAULT_SKILL: &str = "skill.md";

/// An artifact's own manifest (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactManifest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    /// Never `Capsule` as [`crate::load_artifact`] loads it (a capsule loads as a capsule
    /// manifest); `Capsule` for a capsule component opened by `murmur_registry::LocalArtifact`.
    pub runtime: Runtime,
    pub description: Option<String>,
    /// The component file, relative to the artifact's directory; see [`Self::component_path`].
    pub component: Option<PathBuf>,
    pub build: Option<Build>,
    /// Tool: the JSON Schema of its input, a mapping.
    pub input_schema: Option<Value>,
    /// Driver: how the host attaches its credential.
    pub upstream_auth: Option<UpstreamAuth>,
    /// Hook: the handler it binds to; `None` receives every event.
    pub binding: Option<Binding>,
    /// Hook: whether the agent loop waits for it.
    #[serde(default)]
    pub execution_mode: ExecutionMode,
    /// Hook: the arm it expects committed.
    #[serde(default)]
    pub commit_policy: CommitPolicy,
    /// Skill: the markdown file, relative to the artifact's directory; see [`Self::skill_path`].
    pub skill: Option<PathBuf>,
}

impl ArtifactManifest {
    /// The component file of an artifact whose directory is `dir`.
    pub fn component_path(&self, dir: &Path) -> PathBuf {
        dir.join(
            self.component
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_COMPONENT)),
        )
    }

    /// The skill file of an artifact whose directory is `dir`.
    pub fn skill_path(&self, dir: &Path) -> PathBuf {
        dir.join(self.skill.as_deref().unwrap_or(Path::new(DEFAULT_SKILL)))
    }

    /// Every meaning problem of this manifest, whose directory is `dir`.
    pub(crate) fn validate(&self, dir: &Path) -> Vec<Diagnostic> {
        let mut found = Vec::new();
        found.extend(check_name(&self.name, "", "the artifact manifest"));
        found.extend(check_version(&self.version, "", "the artifact manifest"));
        if let Some(build) = &self.build {
            found.extend(build.validate("build"));
        }
        for (field, file) in [("component", &self.component), ("skill", &self.skill)] {
            if let Some(file) = file {
                found.extend(check_inside_dir(file, field));
            }
        }
        let name = self.name.as_str();
        match self.runtime {
            Runtime::Tool => match &self.input_schema {
                None => found.push(
                    Diagnostic::new(code::W_MAN_019, format!("tool `{name}` declares no `input_schema`"))
                        .hint("add `input_schema:` (a JSON Schema mapping, such as `{ type: object, properties: {...} }`) so the model knows what to send")
                        .at_path(""),
                ),
                Some(Value::Object(_)) => {}
                Some(_) => found.push(
                    Diagnostic::new(code::E_MAN_003, format!("tool `{name}` has an `input_schema` that is not a mapping"))
                        .hint("write `input_schema:` as a JSON Schema mapping, such as `{ type: object, properties: {...} }`")
                        .at_path("input_schema"),
                ),
            },
            Runtime::Driver => {
                if let Some(auth) = &self.upstream_auth {
                    found.extend(auth.validate(name));
                }
            }
            Runtime::Hook => found.extend(check_hook_contract(
                name,
                self.binding,
                self.execution_mode,
                self.commit_policy,
            )),
            Runtime::Skill => {
                let skill = self.skill_path(dir);
                if !skill.is_file() {
                    found.push(
                        Diagnostic::new(
                            code::E_MAN_023,
                            format!("skill `{name}` has no markdown file at {}", skill.display()),
                        )
                        .hint(format!(
                            "write the skill's text to {} beside the manifest, or point `skill:` at it",
                            self.skill.as_deref().unwrap_or(Path::new(DEFAULT_SKILL)).display()
                        ))
                        .at_path("skill"),
                    );
                }
            }
            // `kind_of` refuses an artifact manifest of `runtime: mcp` before its fields load.
            Runtime::Capsule | Runtime::Mcp => {}
        }
        found.extend(self.foreign_fields());
        found
    }

    /// `W-MAN-026` for each field that only another runtime reads.
    fn foreign_fields(&self) -> Vec<Diagnostic> {
        let runtime = self.runtime;
        let owned: [(&str, Runtime, bool); 6] = [
            ("input_schema", Runtime::Tool, self.input_schema.is_some()),
            (
                "upstream_auth",
                Runtime::Driver,
                self.upstream_auth.is_some(),
            ),
            ("binding", Runtime::Hook, self.binding.is_some()),
            (
                "execution_mode",
                Runtime::Hook,
                self.execution_mode != ExecutionMode::default(),
            ),
            (
                "commit_policy",
                Runtime::Hook,
                self.commit_policy != CommitPolicy::default(),
            ),
            ("skill", Runtime::Skill, self.skill.is_some()),
        ];
        let mut found: Vec<Diagnostic> = owned
            .into_iter()
            .filter(|(_, owner, set)| *set && runtime != *owner)
            .map(|(field, owner, _)| {
                Diagnostic::new(
                    code::W_MAN_026,
                    format!("`{field}` only applies to `runtime: {owner}`, and this is `runtime: {runtime}`"),
                )
                .hint(format!("remove `{field}:`, or check `runtime:`"))
                .at_path(field)
            })
            .collect();
        if runtime == Runtime::Skill {
            for (field, set) in [
                ("component", self.component.is_some()),
                ("build", self.build.is_some()),
            ] {
                if set {
                    found.push(
                        Diagnostic::new(
                            code::W_MAN_026,
                            format!("`{field}` is ignored for `runtime: skill`, whose text is its markdown file"),
                        )
                        .hint(format!("remove `{field}:`"))
                        .at_path(field),
                    );
                }
            }
        }
        found
    }
}

/// How to build an artifact's component from source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Build {
    /// `build: { cargo: { package: NAME } }`:
    /// `cargo build --release --target wasm32-wasip2 -p NAME`.
    Cargo { package: String },
    /// `build: { command: [program, args...] }`, run in the artifact's directory.
    Command(Vec<String>),
}

impl Build {
    /// The command line that builds the component.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Build::Cargo { package } => [
                "cargo",
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                package,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            Build::Command(argv) => argv.clone(),
        }
    }

    /// `E-MAN-021` for an empty package or command; `holder` is the path of `build`.
    pub(crate) fn validate(&self, holder: &str) -> Option<Diagnostic> {
        let (empty, field, example) = match self {
            Build::Cargo { package } => (
                package.trim().is_empty(),
                format!("{holder}.cargo.package"),
                "`build: { cargo: { package: my-tool } }`",
            ),
            Build::Command(argv) => (
                argv.first().is_none_or(|p| p.trim().is_empty()),
                format!("{holder}.command"),
                "`build: { command: [make, component] }`",
            ),
        };
        empty.then(|| {
            Diagnostic::new(code::E_MAN_021, format!("`{field}` is empty"))
                .hint(format!("name what to build, as in {example}"))
                .at_path(field)
        })
    }
}

/// `build` as written: exactly one of the two keys.
#[derive(Serialize, Deserialize)]
struct BuildSpec {
    cargo: Option<CargoSpec>,
    command: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
struct CargoSpec {
    package: String,
}

impl Serialize for Build {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let spec = match self {
            Build::Cargo { package } => BuildSpec {
                cargo: Some(CargoSpec {
                    package: package.clone(),
                }),
                command: None,
            },
            Build::Command(argv) => BuildSpec {
                cargo: None,
                command: Some(argv.clone()),
            },
        };
        spec.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Build {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Build, D::Error> {
        let spec = BuildSpec::deserialize(deserializer)?;
        match (spec.cargo, spec.command) {
            (Some(cargo), None) => Ok(Build::Cargo {
                package: cargo.package,
            }),
            (None, Some(argv)) => Ok(Build::Command(argv)),
            (cargo, _) => {
                let which = if cargo.is_some() { "both" } else { "neither" };
                Err(serde_error(
                    &Diagnostic::new(
                        code::E_MAN_003,
                        format!("`build` names {which} `cargo` and `command`; it takes exactly one"),
                    )
                    .hint("write `build: { cargo: { package: NAME } }` or `build: { command: [program, args...] }`"),
                ))
            }
        }
    }
}

/// How a driver's credential is attached to its upstream requests: header `header` with value
/// `value`, in which `{key}` stands for the credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamAuth {
    pub header: String,
    pub value: String,
}

impl UpstreamAuth {
    /// The header value for credential `key`.
    pub fn header_value(&self, key: &str) -> String {
        self.value.replace("{key}", key)
    }

    fn validate(&self, driver: &str) -> Vec<Diagnostic> {
        let mut found = Vec::new();
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if self.header.is_empty() || !self.header.chars().all(token) {
            found.push(
                Diagnostic::new(
                    code::E_MAN_018,
                    format!(
                        "driver `{driver}` has `upstream_auth.header` `{}`, which is not an HTTP header name",
                        self.header
                    ),
                )
                .hint("name the header the provider reads, such as `x-api-key` or `Authorization`")
                .at_path("upstream_auth.header"),
            );
        }
        if !self.value.contains("{key}") {
            found.push(
                Diagnostic::new(
                    code::E_MAN_018,
                    format!("driver `{driver}` has an `upstream_auth.value` without `{{key}}`, so the credential is never sent"),
                )
                .hint("write where the credential goes, such as `value: \"{key}\"` or `value: \"Bearer {key}\"`")
                .at_path("upstream_auth.value"),
            );
        }
        found
    }
}

/// Reads the spellings of another Murmur runtime's artifact manifests that mean what this
/// runtime's do, rewriting `value` (the top level of an artifact manifest) in place, each with
/// a `W-MAN-032` saying what it was read as:
///
/// - `runtime: wasm` (that runtime's former name for a tool) is `runtime: tool`;
/// - `requires_files: [...]` (the files it packs beside the manifest) is dropped: here an
///   archive holds the manifest and its component (or skill). Its one `.wasm` file, when the
///   manifest names no `component:`, is the component;
/// - `input:` is `input_schema:`, and an `input_schema` written as JSON text is that JSON.
///
/// Anything else is left for the loader to judge.
pub(crate) fn read_reference_spellings(value: &mut Value) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let Some(map) = value.as_object_mut() else {
        return found;
    };
    if map.get("runtime").and_then(Value::as_str) == Some("wasm") {
        map.insert("runtime".into(), Value::String("tool".into()));
        found.push(
            Diagnostic::new(
                code::W_MAN_032,
                "`runtime: wasm` is another runtime's name for a tool; read as `runtime: tool`",
            )
            .hint("write `runtime: tool`")
            .at_path("runtime"),
        );
    }
    if let Some(files) = map.remove("requires_files") {
        let listed: Vec<String> = files
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let wasm: Vec<&String> = listed.iter().filter(|f| f.ends_with(".wasm")).collect();
        let component =
            (!map.contains_key("component") && wasm.len() == 1).then(|| wasm[0].clone());
        let message = match &component {
            Some(file) => format!(
                "`requires_files` is another runtime's list of files packed with the artifact; its component `{file}` is read as `component: {file}`, the rest is not packed"
            ),
            None => "`requires_files` is another runtime's list of files packed with the artifact; here the archive holds this manifest and its `component:` (or `skill:`), so it is ignored".to_string(),
        };
        if let Some(file) = component {
            map.insert("component".into(), Value::String(file));
        }
        found.push(
            Diagnostic::new(code::W_MAN_032, message)
                .hint("name the component with `component:` and remove `requires_files`")
                .at_path("requires_files"),
        );
    }
    if !map.contains_key("input_schema")
        && let Some(input) = map.remove("input")
    {
        map.insert("input_schema".into(), input);
        found.push(
            Diagnostic::new(
                code::W_MAN_032,
                "`input:` is another runtime's name for `input_schema:`; read as `input_schema:`",
            )
            .hint("rename `input:` to `input_schema:`")
            .at_path("input"),
        );
    }
    if let Some(Value::String(text)) = map.get("input_schema")
        && let Ok(schema @ Value::Object(_)) = serde_json::from_str::<Value>(text)
    {
        map.insert("input_schema".into(), schema);
        found.push(
            Diagnostic::new(
                code::W_MAN_032,
                "`input_schema` is written as JSON text; read as the mapping it holds",
            )
            .hint("write `input_schema:` as a YAML mapping")
            .at_path("input_schema"),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_default_beside_the_manifest() {
        let m: ArtifactManifest = serde_json::from_value(
            serde_json::json!({"name": "t", "version": "0.1.0", "runtime": "skill"}),
        )
        .unwrap();
        assert_eq!(
            m.component_path(Path::new("/a")),
            Path::new("/a/component.wasm")
        );
        assert_eq!(m.skill_path(Path::new("/a")), Path::new("/a/skill.md"));
    }

    #[test]
    fn cargo_build_is_a_release_wasip2_build() {
        let b: Build =
            serde_json::from_value(serde_json::json!({"cargo": {"package": "read-file"}})).unwrap();
        assert_eq!(
            b.argv().join(" "),
            "cargo build --release --target wasm32-wasip2 -p read-file"
        );
        let c: Build =
            serde_json::from_value(serde_json::json!({"command": ["make", "wasm"]})).unwrap();
        assert_eq!(c.argv(), ["make", "wasm"]);
        assert_eq!(serde_json::to_value(&c).unwrap()["command"][1], "wasm");
    }

    #[test]
    fn upstream_auth_fills_in_the_key() {
        let auth = UpstreamAuth {
            header: "Authorization".into(),
            value: "Bearer {key}".into(),
        };
        assert_eq!(auth.header_value("sk-1"), "Bearer sk-1");
        assert!(auth.validate("d").is_empty());
    }
}
