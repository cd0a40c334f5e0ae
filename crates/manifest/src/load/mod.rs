//! Loading a manifest: file → YAML → interpolation → types → meaning, every problem a
//! [`Diagnostic`] with the file and, where known, the line and column.
//!
//! 1. The file is read (`E-MAN-001`). Given a directory, its `murmur.yaml` is read. A file
//!    larger than [`MANIFEST_MAX_BYTES`] is `E-MAN-027`, refused before parsing: at most one
//!    byte past the cap is ever read, so no file, however large or endless, is read whole.
//! 2. The YAML is parsed with positions (see `yaml`: `E-MAN-002`, `E-MAN-003`, `E-MAN-020`).
//! 3. `${NAME}` in string values is interpolated from the environment, then from the `.env`
//!    beside the manifest (see `interpolate`). A gateway's `api_key` is left as written: it is a
//!    credential reference resolved at staging.
//! 4. The top-level `runtime:` decides the kind: `tool`, `driver`, `hook` or `skill` is an
//!    artifact manifest; no `runtime:` or `runtime: capsule` a capsule manifest.
//! 5. The value is deserialized into the types, every type problem reported once and unknown
//!    keys warned about (see `shape`); in a capsule manifest an unknown key under
//!    `capabilities` (the capsule's or an artifact entry's) is the error `E-MAN-033`.
//! 6. If the shape is sound, the meaning is checked (the `validate` of each manifest type), so
//!    one mistake is never reported twice.
//!
//! [`Loaded::manifest`] is `Some` exactly when no diagnostic is an error. Nothing here panics,
//! writes a file, or changes the process environment. Loading takes time linear in the size of
//! the text, whatever it holds (many unknown keys, many type problems, one long line).

mod interpolate;
mod shape;
pub(crate) mod yaml;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::artifact::{ArtifactManifest, Runtime};
use crate::capsule::CapsuleManifest;
use crate::diagnostic::{Diagnostic, code};
use crate::source::SourceMap;
use crate::{Loaded, Manifest};

/// Looks up a process-environment variable (the CLI passes `|n| std::env::var(n).ok()`).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The file name of a manifest inside its directory.
pub const MANIFEST_FILE: &str = "murmur.yaml";

/// The largest manifest file the loader reads, in bytes (1 MiB): the project's manifests are a
/// few KiB (`examples/hello/murmur.yaml` is under 2 KiB), so this leaves room for long schemas
/// and prompts while bounding the memory and time one manifest can cost. A larger file is
/// `E-MAN-027`. [`load_str`] is given its text already read, and takes it whatever its size.
pub const MANIFEST_MAX_BYTES: u64 = 1024 * 1024;

/// Loads the manifest at `path` (a file, or a directory holding `murmur.yaml`), capsule or
/// artifact as its `runtime:` says.
pub fn load(path: &Path, env: Env<'_>) -> Loaded<Manifest> {
    load_file(path, env, Want::Any)
}

/// Loads a capsule manifest; an artifact manifest is `E-MAN-007`.
pub fn load_capsule(path: &Path, env: Env<'_>) -> Loaded<CapsuleManifest> {
    capsule_of(load_file(path, env, Want::Capsule))
}

/// A capsule manifest read once: its file, its text (`None` when it could not be read), and
/// the manifest loaded from that text. What staging starts from, so that the file is read
/// once however many steps look at it.
#[derive(Debug, Clone)]
pub struct CapsuleSource {
    pub file: PathBuf,
    pub text: Option<String>,
    pub loaded: Loaded<CapsuleManifest>,
}

impl CapsuleSource {
    /// Reads and loads the capsule manifest at `path` (a file, or a directory holding
    /// `murmur.yaml`), as [`load_capsule`] does.
    pub fn read(path: &Path, env: Env<'_>) -> CapsuleSource {
        let file = manifest_file(path);
        match read_manifest(&file) {
            Ok(text) => {
                let loaded = capsule_of(load_text(&text, &file, env, Want::Capsule));
                CapsuleSource {
                    file,
                    text: Some(text),
                    loaded,
                }
            }
            Err(diagnostic) => CapsuleSource {
                file,
                text: None,
                loaded: Loaded::failed(vec![*diagnostic]),
            },
        }
    }
}

impl CapsuleSource {
    /// The capsule manifest at `path` with `overlay` merged over its YAML ([`merge_overlay`])
    /// before anything else is done with it: interpolation, types and checks see the merged
    /// manifest, whose text (as JSON, which is YAML) is [`CapsuleSource::text`]. Diagnostics
    /// name `path`; their lines are those of the merged text.
    pub fn overlaid(path: &Path, overlay: &Value, env: Env<'_>) -> CapsuleSource {
        let file = manifest_file(path);
        let failed = |diagnostics| CapsuleSource {
            file: file.clone(),
            text: None,
            loaded: Loaded::failed(diagnostics),
        };
        let text = match read_manifest(&file) {
            Ok(text) => text,
            Err(diagnostic) => return failed(vec![*diagnostic]),
        };
        let mut value = match parse_yaml(&text) {
            Ok(value) => value,
            Err(mut diagnostics) => {
                place_in_file(&mut diagnostics, &file);
                return failed(diagnostics);
            }
        };
        merge_overlay(&mut value, overlay);
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let loaded = capsule_of(load_text(&text, &file, env, Want::Capsule));
        CapsuleSource {
            file,
            text: Some(text),
            loaded,
        }
    }
}

/// YAML `text` as a JSON value under the loader's rules (see the `yaml` module): one document,
/// a mapping at the top, no merge keys, no key twice, bounded depth. The diagnostics carry a
/// line and column but no file.
pub fn parse_yaml(text: &str) -> Result<Value, Vec<Diagnostic>> {
    let (document, found) = yaml::parse(text)?;
    if found.iter().any(Diagnostic::is_error) {
        return Err(found);
    }
    Ok(document.value)
}

/// Merges `overlay` over `base`: a mapping merges into a mapping key by key, a `null` removes
/// the key it stands at, anything else replaces what was there (a list replaces a list).
pub fn merge_overlay(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                if value.is_null() {
                    base.remove(key);
                } else if let Some(existing) = base.get_mut(key) {
                    merge_overlay(existing, value);
                } else {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

fn capsule_of(loaded: Loaded<Manifest>) -> Loaded<CapsuleManifest> {
    match loaded.manifest {
        Some(Manifest::Capsule(capsule)) => Loaded::new(Some(capsule), loaded.diagnostics),
        _ => Loaded::new(None, loaded.diagnostics),
    }
}

fn manifest_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(MANIFEST_FILE)
    } else {
        path.to_path_buf()
    }
}

/// Loads an artifact manifest; a capsule manifest is `E-MAN-007`.
pub fn load_artifact(path: &Path, env: Env<'_>) -> Loaded<ArtifactManifest> {
    let Loaded {
        manifest,
        diagnostics,
    } = load_file(path, env, Want::Artifact);
    match manifest {
        Some(Manifest::Artifact(artifact)) => Loaded::new(Some(artifact), diagnostics),
        _ => Loaded::new(None, diagnostics),
    }
}

/// Loads a manifest from `text`. `file` names it in diagnostics, and its directory is where
/// `.env` and relative paths are looked up. The text is not held to [`MANIFEST_MAX_BYTES`]:
/// that bounds what is read from a file.
pub fn load_str(text: &str, file: &Path, env: Env<'_>) -> Loaded<Manifest> {
    load_text(text, file, env, Want::Any)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Any,
    Capsule,
    Artifact,
}

fn load_file(path: &Path, env: Env<'_>, want: Want) -> Loaded<Manifest> {
    let file = manifest_file(path);
    match read_manifest(&file) {
        Ok(text) => load_text(&text, &file, env, want),
        Err(diagnostic) => Loaded::failed(vec![*diagnostic]),
    }
}

/// The text of the manifest file `file`, read with a bound: `E-MAN-027` when it holds more than
/// [`MANIFEST_MAX_BYTES`] (known from reading one byte past the cap, never the whole file),
/// `E-MAN-001` when it cannot be read or is not UTF-8.
fn read_manifest(file: &Path) -> Result<String, Box<Diagnostic>> {
    let read = crate::capped::read_text(file, MANIFEST_MAX_BYTES);
    let read = read.map_err(|e| Box::new(unreadable(&e, file)))?;
    if read == crate::capped::Capped::TooLarge {
        let limit = format!(
            "{} ({MANIFEST_MAX_BYTES} bytes)",
            crate::capped::size_words(MANIFEST_MAX_BYTES)
        );
        let too_large = Diagnostic::new(
            code::E_MAN_027,
            format!("the manifest is larger than {limit}, the most the loader reads"),
        )
        .hint(format!(
            "keep the manifest under {limit}; a manifest names artifacts and settings, and needs a few KiB"
        ))
        .in_file(file);
        return Err(Box::new(too_large));
    }
    match read {
        crate::capped::Capped::Text(text) => Ok(text),
        crate::capped::Capped::TooLarge => unreachable!("refused above"),
    }
}

/// `E-MAN-001` for the manifest file `file` that could not be read.
fn unreadable(e: &std::io::Error, file: &Path) -> Diagnostic {
    let hint = match e.kind() {
        std::io::ErrorKind::NotFound => {
            "check the path; a capsule's manifest is `murmur.yaml` in its directory"
        }
        std::io::ErrorKind::InvalidData => "save the manifest as UTF-8 text",
        _ => "check that the file exists and is readable",
    };
    Diagnostic::new(code::E_MAN_001, format!("cannot read the manifest: {e}"))
        .hint(hint)
        .in_file(file)
}

/// The directory `file` sits in (`.` for a bare file name).
pub(crate) fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn load_text(text: &str, file: &Path, env: Env<'_>, want: Want) -> Loaded<Manifest> {
    let dir = dir_of(file);
    let (document, mut found) = match yaml::parse(text) {
        Ok(parsed) => parsed,
        Err(found) => return finish(None, found, file, &SourceMap::default()),
    };
    let yaml::Document { mut value, mut map } = document;

    let mut vars = interpolate::Variables::new(env, &dir);
    found.extend(interpolate::interpolate(
        &mut value,
        &mut vars,
        &is_credential,
    ));
    found.extend(vars.dotenv_problem.take());

    // An artifact manifest may be written in another Murmur runtime's spellings.
    let runtime = value.get("runtime").and_then(Value::as_str);
    let capsule_like = runtime.is_none_or(|r| r == "capsule");
    if !matches!(want, Want::Capsule) && runtime.is_some_and(|r| r != "capsule" && r != "mcp") {
        found.extend(crate::artifact::read_reference_spellings(&mut value));
    }
    // And a capsule manifest in its spellings of the gateway, the port and the queue.
    if !matches!(want, Want::Artifact) && capsule_like {
        found.extend(crate::capsule_spellings::read_capsule_spellings(
            &mut value, &mut map,
        ));
    }
    let (kind, mismatch) = kind_of(&value, want);
    if let Some(mismatch) = mismatch {
        found.push(mismatch);
        return finish(None, found, file, &map);
    }
    let manifest = match kind {
        Runtime::Capsule => {
            let shape = shape::deserialize::<CapsuleManifest>(
                &value,
                &map,
                crate::capsule::is_containment_key,
            );
            checked(shape, &mut found, |capsule| {
                capsule.resolve(&dir);
                capsule.validate(&dir)
            })
            .map(Manifest::Capsule)
        }
        _ => {
            let shape = shape::deserialize::<ArtifactManifest>(&value, &map, shape::lenient);
            checked(shape, &mut found, |artifact| artifact.validate(&dir)).map(Manifest::Artifact)
        }
    };
    finish(manifest, found, file, &map)
}

/// The value of variable `name` as `${name}` in the manifest at `manifest_file` would get it:
/// the environment `env`, then the `.env` beside the manifest. Staging resolves credential
/// references (`gateway.api_key: "${NAME}"`) with it.
pub fn variable(name: &str, manifest_file: &Path, env: Env<'_>) -> Option<String> {
    interpolate::Variables::new(env, &dir_of(manifest_file)).get(name)
}

/// Checks the meaning of what deserialized, even when some values had to be taken out for their
/// type, so one load reports every problem. A meaning problem at (or under) a value already
/// reported for its type is the same mistake and is dropped, and so is one inside a sequence
/// an element was taken out of (its indices no longer match the file). When a whole entry (an
/// artifact, an alternate) had to be taken out, the meaning is not checked until the types are
/// fixed: another part referring to that entry would be misreported as dangling.
fn checked<T>(
    shape: shape::Shape<T>,
    found: &mut Vec<Diagnostic>,
    validate: impl FnOnce(&mut T) -> Vec<Diagnostic>,
) -> Option<T> {
    let shape::Shape {
        repaired,
        problems,
        lost_entry,
        shifted,
    } = shape;
    let at_fault: Vec<String> = problems
        .iter()
        .filter(|d| d.is_error())
        .filter_map(|d| d.path.clone())
        .chain(shifted)
        .collect();
    // Reported even when nothing deserialized (the top level at fault, or more problems than
    // the shape looks for), so a manifest refused is never refused without a word.
    found.extend(problems);
    let mut manifest = repaired?;
    if lost_entry {
        return Some(manifest);
    }
    let meaning = validate(&mut manifest);
    found.extend(meaning.into_iter().filter(|diagnostic| {
        let Some(path) = &diagnostic.path else {
            return true;
        };
        !at_fault.iter().any(|fault| {
            path == fault
                || path.starts_with(&format!("{fault}."))
                || path.starts_with(&format!("{fault}["))
        })
    }));
    Some(manifest)
}

/// Whether the value at `path` is a credential reference, left as written: a driver's
/// `gateway.api_key`, an MCP server's `server.headers.<name>`, a door principal's or a peer's
/// `bearer` / `api_key`.
fn is_credential(path: &str) -> bool {
    // Another runtime's place for the primary driver's gateway key (see `capsule_spellings`).
    if crate::door::is_credential_path(path) || path == "inference.api_key" {
        return true;
    }
    let Some((index, field)) = path
        .strip_prefix("artifacts[")
        .and_then(|rest| rest.split_once("]."))
    else {
        return false;
    };
    let entry = !index.is_empty() && index.chars().all(|c| c.is_ascii_digit());
    let header = field
        .strip_prefix("server.headers.")
        .is_some_and(|name| !name.is_empty() && !name.contains('.'));
    entry && (field == "gateway.api_key" || header)
}

/// Which manifest `value` is, and `E-MAN-007` when it is not what the caller wants. A
/// `runtime` that is absent, empty or unknown makes a capsule manifest, whose types report an
/// unknown one.
fn kind_of(value: &Value, want: Want) -> (Runtime, Option<Diagnostic>) {
    let declared = value
        .get("runtime")
        .and_then(Value::as_str)
        .and_then(Runtime::parse);
    let kind = declared.unwrap_or(Runtime::Capsule);
    let mismatch = match (want, kind) {
        (Want::Capsule, Runtime::Tool | Runtime::Driver | Runtime::Hook | Runtime::Skill) => Some(
            Diagnostic::new(
                code::E_MAN_007,
                format!("`runtime: {kind}` makes this an artifact manifest, but a capsule manifest is expected"),
            )
            .hint("use `runtime: capsule` (or no `runtime:`) for a capsule"),
        ),
        (_, Runtime::Mcp) => Some(
            Diagnostic::new(
                code::E_MAN_007,
                "`runtime: mcp` is not a manifest of its own: an MCP server is declared in a capsule's `artifacts:`",
            )
            .hint("in the capsule's murmur.yaml: `- { name: notes, runtime: mcp, server: { command: notes-server } }`"),
        ),
        (Want::Artifact, Runtime::Capsule) => {
            let message = if declared.is_some() {
                "this is a capsule manifest (`runtime: capsule`), but an artifact manifest is expected"
            } else {
                "an artifact manifest needs `runtime:` tool, driver, hook or skill"
            };
            Some(
                Diagnostic::new(code::E_MAN_007, message)
                    .hint("declare the artifact's kind: `runtime:` tool, driver, hook or skill"),
            )
        }
        _ => None,
    };
    (kind, mismatch.map(|d| d.at_path("runtime")))
}

/// Where each field of the YAML file `file` sits (empty when it cannot be read, is over
/// [`MANIFEST_MAX_BYTES`], or cannot be parsed).
pub(crate) fn source_map_of(file: &Path) -> SourceMap {
    read_manifest(file)
        .ok()
        .and_then(|text| yaml::parse(&text).ok())
        .map(|(document, _)| {
            // A key read under another path (another runtime's spelling) keeps its line.
            let yaml::Document { mut value, mut map } = document;
            if value
                .get("runtime")
                .and_then(Value::as_str)
                .is_none_or(|r| r == "capsule")
            {
                crate::capsule_spellings::read_capsule_spellings(&mut value, &mut map);
            }
            map
        })
        .unwrap_or_default()
}

/// Places every diagnostic, and keeps the manifest only when none is an error.
fn finish(
    manifest: Option<Manifest>,
    mut found: Vec<Diagnostic>,
    file: &Path,
    map: &SourceMap,
) -> Loaded<Manifest> {
    for diagnostic in &mut found {
        place(diagnostic, file, map);
    }
    // In the order of the text, whatever order the checks ran in.
    found.sort_by_key(|d| (d.line, d.column));
    Loaded::new(manifest, found)
}

/// Gives each of `diagnostics` found outside the loader (about the manifest at `file`) the file,
/// and from its path the line and column, as the loader places its own.
pub fn place_in_file(diagnostics: &mut [Diagnostic], file: &Path) {
    let map = source_map_of(file);
    for diagnostic in diagnostics {
        place(diagnostic, file, &map);
    }
}

/// Gives `diagnostic` the file and, from its path, the line and column, unless it has them.
pub(crate) fn place(diagnostic: &mut Diagnostic, file: &Path, map: &SourceMap) {
    if diagnostic.file.is_none() {
        diagnostic.file = Some(file.to_path_buf());
    }
    if diagnostic.line.is_none()
        && let Some(at) = diagnostic.path.as_deref().and_then(|p| map.locate(p))
    {
        diagnostic.line = Some(at.line);
        diagnostic.column = Some(at.column);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// `count` distinct keys no manifest type knows (`u0`, `u1`, …).
    fn unknown_lines(count: usize, indent: &str) -> String {
        (0..count).map(|i| format!("{indent}u{i}: 1\n")).collect()
    }

    #[test]
    fn a_file_over_the_cap_is_refused_with_e_man_027_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(MANIFEST_FILE);
        let mut text = String::from("name: big\nversion: \"1.0.0\"\n");
        let filler = "# a comment line that pads the manifest out\n";
        while (text.len() as u64) <= MANIFEST_MAX_BYTES {
            text.push_str(filler);
        }
        std::fs::write(&file, &text).unwrap();
        for loaded in [load(&file, &no_env), load(dir.path(), &no_env)] {
            assert!(loaded.manifest.is_none());
            assert_eq!(loaded.diagnostics.len(), 1, "{:#?}", loaded.diagnostics);
            let d = &loaded.diagnostics[0];
            assert_eq!(d.code, code::E_MAN_027);
            assert!(d.message.contains("1 MiB"), "{d}");
            assert!(
                d.hint.as_deref().is_some_and(|h| h.contains("1048576")),
                "{d}"
            );
            assert_eq!(d.file.as_deref(), Some(file.as_path()));
        }
        assert!(load_capsule(&file, &no_env).diagnostics[0].code == code::E_MAN_027);
        assert!(load_artifact(&file, &no_env).diagnostics[0].code == code::E_MAN_027);
        assert!(source_map_of(&file) == SourceMap::default());
    }

    #[test]
    fn a_file_of_exactly_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(MANIFEST_FILE);
        let mut text = String::from("name: big\nversion: \"1.0.0\"\n");
        let cap = usize::try_from(MANIFEST_MAX_BYTES).unwrap();
        text.push('#');
        text.push_str(&"x".repeat(cap - text.len() - 1));
        text.push('\n');
        assert_eq!(text.len(), cap);
        std::fs::write(&file, &text).unwrap();
        let loaded = load(&file, &no_env);
        assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
        assert!(loaded.manifest.is_some());
    }

    #[test]
    fn a_file_that_is_not_utf8_is_still_e_man_001() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(MANIFEST_FILE);
        std::fs::write(&file, b"name: \xff\xfe\n").unwrap();
        let loaded = load(&file, &no_env);
        assert_eq!(loaded.diagnostics.len(), 1);
        assert_eq!(loaded.diagnostics[0].code, code::E_MAN_001);
        assert_eq!(
            loaded.diagnostics[0].hint.as_deref(),
            Some("save the manifest as UTF-8 text")
        );
    }

    #[test]
    fn unknown_keys_are_warned_at_their_lines_up_to_the_cap() {
        let head = "name: x\nversion: \"1.0.0\"\n";
        for (count, holder) in [(3, ""), (250, ""), (250, "trace")] {
            let (opening, indent, first_line) = if holder.is_empty() {
                ("", "", 3)
            } else {
                ("trace:\n", "  ", 4)
            };
            let text = format!("{head}{opening}{}", unknown_lines(count, indent));
            let loaded = load_str(&text, Path::new("/m/murmur.yaml"), &no_env);
            assert!(!loaded.has_errors(), "{:#?}", loaded.diagnostics);
            let warned: Vec<&Diagnostic> = loaded
                .diagnostics
                .iter()
                .filter(|d| d.code == code::W_MAN_013)
                .collect();
            let listed = count.min(shape::MAX_UNKNOWN_KEYS);
            let summary = usize::from(count > shape::MAX_UNKNOWN_KEYS);
            assert_eq!(warned.len(), listed + summary, "{count} under `{holder}`");
            let place = if holder.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in `{holder}`")
            };
            for (i, d) in warned.iter().take(listed).enumerate() {
                assert_eq!(d.message, format!("unknown key `u{i}` {place}"));
                assert_eq!(d.line, Some(first_line + i), "{d}");
                assert_eq!(d.column, Some(indent.len() + 1), "{d}");
            }
            if summary == 1 {
                let d = warned[listed];
                let first = crate::source::join_key(holder, &format!("u{listed}"));
                assert_eq!(
                    d.message,
                    format!(
                        "{} more unknown keys, from `{first}` on, are not listed one by one",
                        count - listed
                    )
                );
                assert_eq!(d.line, Some(first_line + listed), "{d}");
                assert!(d.hint.as_deref().is_some_and(|h| h.contains("first 100")));
            }
        }
    }

    #[test]
    fn a_typo_of_a_missing_field_is_named_after_an_earlier_pass_took_it_out() {
        // The first pass ignores `runtim` and stops at `gateway`; the pass that finds
        // `runtime` missing no longer walks `runtim`, but the hint still names it.
        let text = "name: x\nversion: \"1.0.0\"\nartifacts:\n  - { name: d, version: \"1.0.0\", runtim: driver, gateway: 5 }\n";
        let loaded = load_str(text, Path::new("/m/murmur.yaml"), &no_env);
        let missing = loaded
            .diagnostics
            .iter()
            .find(|d| d.code == code::E_MAN_021)
            .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics));
        assert!(
            missing
                .hint
                .as_deref()
                .is_some_and(|h| h.contains("is `runtim` meant to be `runtime`?")),
            "{missing}"
        );
    }

    #[test]
    fn more_type_problems_than_the_shape_looks_for_are_still_reported() {
        let mut text = String::from("name: x\nversion: \"1.0.0\"\nartifacts:\n");
        for _ in 0..150 {
            text.push_str("- { name: [1], version: \"1.0.0\", runtime: driver }\n");
        }
        let loaded = load_str(&text, Path::new("/m/murmur.yaml"), &no_env);
        assert!(loaded.manifest.is_none());
        assert!(loaded.has_errors());
        assert!(loaded.diagnostics.iter().all(|d| d.code == code::E_MAN_003));
    }

    #[test]
    fn only_gateway_keys_are_credentials() {
        assert!(is_credential("artifacts[0].gateway.api_key"));
        assert!(is_credential("artifacts[12].gateway.api_key"));
        assert!(!is_credential("artifacts[].gateway.api_key"));
        assert!(!is_credential("artifacts[0].gateway.endpoint"));
        assert!(!is_credential("artifacts[0].config.gateway.api_key"));
        assert!(is_credential("artifacts[3].server.headers.Authorization"));
        assert!(!is_credential("artifacts[3].server.url"));
        assert!(!is_credential("artifacts[3].server.headers"));
        assert!(!is_credential(
            "artifacts[3].config.server.headers.Authorization"
        ));
    }
}
