//! From the JSON value to the typed manifest, reporting every type problem once.
//!
//! serde stops at the first problem, so deserialization runs again after each: the offending
//! value (or, for a missing field, the value holding it) is taken out of a working copy and the
//! rest is tried again, until the copy deserializes or the top level itself is at fault. Every
//! problem is reported at its original path, so the line points at what the user wrote.
//! Keys no type knows, in any pass, are `W-MAN-013`, with the closest key known at that spot
//! as the hint; a missing field's hint names a key that looks like a typo of it. Where the
//! caller's [`Strict`] says so (in a capsule manifest: under `capabilities`, see
//! [`crate::capsule::is_containment_key`]) an unknown key is the error `E-MAN-033` instead,
//! with the same hint: a key about what a capsule may do is never dropped with a warning. Only
//! the first [`MAX_UNKNOWN_KEYS`] of each kind, in the order of the text, are reported one by
//! one; one more diagnostic of that kind counts the rest. Each unknown key costs constant work,
//! so a manifest of many unknown keys loads in time linear in its size.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diagnostic::{Diagnostic, closest, code, from_serde_error};
use crate::source::{Place, SourceMap, join_index, join_key, last_key};

/// The most problems reported before giving up on the shape.
const MAX_PROBLEMS: usize = 100;

/// The most unknown keys warned about one by one; the rest are counted in one more warning.
pub(crate) const MAX_UNKNOWN_KEYS: usize = 100;

/// Whether an unknown `key` in the mapping at `holder` (a path such as `capabilities.shell`),
/// whose closest known sibling is `closest`, is an error rather than a warning.
pub(crate) type Strict = fn(holder: &str, key: &str, closest: Option<&str>) -> bool;

/// The [`Strict`] of a manifest whose unknown keys are all warnings.
pub(crate) fn lenient(_: &str, _: &str, _: Option<&str>) -> bool {
    false
}

/// What [`deserialize`] found.
pub(crate) struct Shape<T> {
    /// The typed value of `value` with every value at fault taken out, when that much
    /// deserializes; equal to the whole value's when `problems` holds no error.
    pub(crate) repaired: Option<T>,
    /// Every type problem and every unknown key.
    pub(crate) problems: Vec<Diagnostic>,
    /// Whether an entry with structure (a mapping or a sequence) was taken out of a sequence:
    /// other parts of the manifest may refer to it, so its absence would be misreported.
    pub(crate) lost_entry: bool,
    /// Original paths of the sequences an element was taken out of: indices into them in
    /// `repaired` no longer match the file's.
    pub(crate) shifted: Vec<String>,
}

/// Deserializes `value`, reporting every type problem and every unknown key (an error where
/// `strict` says so, else a warning).
pub(crate) fn deserialize<T: DeserializeOwned + Serialize>(
    value: &Value,
    map: &SourceMap,
    strict: Strict,
) -> Shape<T> {
    let mut work = value.clone();
    let mut removed = Removed::default();
    let mut found: Vec<Diagnostic> = Vec::new();
    // Original paths of unknown keys, from every pass: a key may sit in a value a later pass
    // no longer sees. Kept once each, in the order first seen; the set makes each check O(1),
    // so a manifest of many unknown keys loads in time linear in its size.
    let mut unknown: Vec<(String, String)> = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut typed = None;
    for _ in 0..MAX_PROBLEMS {
        let mut ignored: Vec<(Vec<Seg>, bool)> = Vec::new();
        let mut track = serde_path_to_error::Track::new();
        let result = {
            let mut note = |path: serde_ignored::Path<'_>| {
                let mut exact = true;
                let segs = from_ignored(&path, &mut exact);
                ignored.push((segs, exact));
            };
            T::deserialize(serde_ignored::Deserializer::new(
                serde_path_to_error::Deserializer::new(&work, &mut track),
                &mut note,
            ))
        };
        for (segs, _) in &ignored {
            if let Some((Seg::Key(key), up)) = segs.split_last() {
                let entry = (removed.original(up), key.clone());
                if !seen.contains(&entry) {
                    seen.insert(entry.clone());
                    unknown.push(entry);
                }
            }
        }
        match result {
            Ok(value) => {
                typed = Some(value);
                break;
            }
            Err(error) => {
                let segs = from_track(&track.path());
                let path = removed.original(&segs);
                let text = error.to_string();
                // A field taken out for its type is not reported again as missing.
                let repeated = missing_field(&text).is_some_and(|name| {
                    let field = join_key(&path, name);
                    found
                        .iter()
                        .any(|d| d.path.as_deref() == Some(field.as_str()))
                });
                if !repeated {
                    // The value as written: the working copy no longer holds the keys earlier
                    // passes ignored, and a missing field's hint looks among them for a typo.
                    let written = navigate(value, &removed.original_segs(&segs));
                    found.push(diagnose(&text, &path, written, map));
                }
                // Before the faulted value goes: its going may shift the indices in `ignored`.
                prune(&mut work, &ignored);
                if !removed.remove(&mut work, &segs) {
                    break;
                }
            }
        }
    }
    // The typed value serialized back holds every field its types know, so the keys of an
    // object in it are the keys known at that spot.
    let known = typed
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .map(|v| known_keys(&v, &removed))
        .unwrap_or_default();
    found.extend(unknown_keys(unknown, &known, map, strict));
    Shape {
        repaired: typed,
        problems: found,
        lost_entry: removed.lost_entry,
        shifted: removed.by_sequence.keys().cloned().collect(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

fn from_track(path: &serde_path_to_error::Path) -> Vec<Seg> {
    use serde_path_to_error::Segment;
    let mut segs = Vec::new();
    for segment in path.iter() {
        match segment {
            Segment::Map { key } => segs.push(Seg::Key(key.clone())),
            Segment::Enum { variant } => segs.push(Seg::Key(variant.clone())),
            Segment::Seq { index } => segs.push(Seg::Index(*index)),
            Segment::Unknown => break,
        }
    }
    segs
}

/// The segments of an ignored key's path; `exact` turns false when a segment of the value is
/// not in them (an enum variant's), so the segments may not name where the key sits.
fn from_ignored(path: &serde_ignored::Path<'_>, exact: &mut bool) -> Vec<Seg> {
    use serde_ignored::Path;
    match path {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => {
            let mut segs = from_ignored(parent, exact);
            segs.push(Seg::Index(*index));
            segs
        }
        Path::Map { parent, key } => {
            let mut segs = from_ignored(parent, exact);
            segs.push(Seg::Key(key.clone()));
            segs
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } => from_ignored(parent, exact),
        Path::NewtypeVariant { parent } => {
            *exact = false;
            from_ignored(parent, exact)
        }
    }
}

/// Takes the keys a pass ignored out of the working copy: the types ignore them, so the next
/// pass deserializes the same without them, and it no longer walks them. Without this, each of
/// up to [`MAX_PROBLEMS`] passes would walk every unknown key again. Only keys whose segments
/// name exactly where they sit are taken, and each mapping is filtered once.
fn prune(work: &mut Value, ignored: &[(Vec<Seg>, bool)]) {
    let mut by_holder: HashMap<&[Seg], HashSet<&str>> = HashMap::new();
    for (segs, exact) in ignored {
        if let (true, Some((Seg::Key(key), up))) = (*exact, segs.split_last()) {
            by_holder.entry(up).or_default().insert(key.as_str());
        }
    }
    for (up, keys) in by_holder {
        let mut holder = Some(&mut *work);
        for seg in up {
            holder = holder.and_then(|v| match seg {
                Seg::Key(key) => v.get_mut(key.as_str()),
                Seg::Index(i) => v.get_mut(*i),
            });
        }
        if let Some(Value::Object(object)) = holder {
            object.retain(|key, _| !keys.contains(key.as_str()));
        }
    }
}

fn navigate<'v>(value: &'v Value, segs: &[Seg]) -> Option<&'v Value> {
    segs.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(key) => v.get(key.as_str()),
        Seg::Index(i) => v.get(*i),
    })
}

/// Which elements were taken out of which sequence of the working copy, so a path in the copy
/// can be turned back into the path the user wrote.
#[derive(Default)]
struct Removed {
    /// Original path of a sequence → original indices taken out of it, ascending.
    by_sequence: HashMap<String, Vec<usize>>,
    /// Whether a mapping or sequence was taken out of a sequence.
    lost_entry: bool,
}

impl Removed {
    fn original(&self, segs: &[Seg]) -> String {
        let mut path = String::new();
        for seg in segs {
            path = match seg {
                Seg::Key(key) => join_key(&path, key),
                Seg::Index(i) => join_index(&path, self.original_index(&path, *i)),
            };
        }
        path
    }

    /// [`Removed::original`] as segments, to find the value in the manifest as written.
    fn original_segs(&self, segs: &[Seg]) -> Vec<Seg> {
        let mut path = String::new();
        let mut original = Vec::with_capacity(segs.len());
        for seg in segs {
            let seg = match seg {
                Seg::Key(key) => Seg::Key(key.clone()),
                Seg::Index(i) => Seg::Index(self.original_index(&path, *i)),
            };
            path = match &seg {
                Seg::Key(key) => join_key(&path, key),
                Seg::Index(i) => join_index(&path, *i),
            };
            original.push(seg);
        }
        original
    }

    fn original_index(&self, sequence: &str, index: usize) -> usize {
        let mut original = index;
        for &gone in self.by_sequence.get(sequence).into_iter().flatten() {
            if gone <= original {
                original += 1;
            }
        }
        original
    }

    /// Takes the value at `segs` out of `work`; false when there is nothing to take.
    fn remove(&mut self, work: &mut Value, segs: &[Seg]) -> bool {
        let Some((last, up)) = segs.split_last() else {
            return false;
        };
        let mut holder = Some(work);
        for seg in up {
            holder = holder.and_then(|v| match seg {
                Seg::Key(key) => v.get_mut(key.as_str()),
                Seg::Index(i) => v.get_mut(*i),
            });
        }
        match (holder, last) {
            (Some(Value::Object(map)), Seg::Key(key)) => map.remove(key).is_some(),
            (Some(Value::Array(items)), Seg::Index(i)) if *i < items.len() => {
                let item = items.remove(*i);
                self.lost_entry |= item.is_object() || item.is_array();
                let sequence = self.original(up);
                let original = self.original_index(&sequence, *i);
                let gone = self.by_sequence.entry(sequence).or_default();
                gone.push(original);
                gone.sort_unstable();
                true
            }
            _ => false,
        }
    }
}

fn diagnose(text: &str, path: &str, found: Option<&Value>, map: &SourceMap) -> Diagnostic {
    let field = if path.is_empty() {
        "the top level".to_string()
    } else {
        format!("`{path}`")
    };
    if let Some(diagnostic) = from_serde_error(text) {
        return diagnostic.at_path(path);
    }
    if let Some(name) = missing_field(text) {
        let mut hint = format!("add `{name}:` here");
        let written = found
            .and_then(Value::as_object)
            .map(|o| o.keys().map(String::as_str));
        if let Some(typo) = written.and_then(|keys| closest(name, keys)) {
            hint.push_str(&format!(" (is `{typo}` meant to be `{name}`?)"));
        }
        return Diagnostic::new(
            code::E_MAN_021,
            format!("{field} is missing the required field `{name}`"),
        )
        .hint(hint)
        .at_path(path);
    }
    let expected = text
        .rsplit_once(", expected ")
        .map(|(_, expected)| expected_in_words(expected));
    let Some(expected) = expected else {
        return Diagnostic::new(code::E_MAN_003, format!("{field}: {text}"))
            .hint("see the field's type in the manifest reference")
            .at_path(path);
    };
    let raw = map.raw(path);
    let hint = match found {
        Some(Value::Number(_) | Value::Bool(_)) if expected == "a string" => {
            let written = raw.map_or_else(
                || found.map(Value::to_string).unwrap_or_default(),
                str::to_string,
            );
            let kind = if matches!(found, Some(Value::Bool(_))) {
                "a boolean"
            } else {
                "a number"
            };
            format!(
                "quote it: `{}: \"{written}\"` (unquoted, YAML reads `{written}` as {kind})",
                last_key(path).unwrap_or("value")
            )
        }
        _ => format!("write {expected} here"),
    };
    Diagnostic::new(
        code::E_MAN_003,
        format!(
            "{field} should be {expected}, but is {}",
            describe(found, raw)
        ),
    )
    .hint(hint)
    .at_path(path)
}

/// The field named by serde's "missing field" error.
fn missing_field(text: &str) -> Option<&str> {
    text.strip_prefix("missing field `")?.split('`').next()
}

/// serde's name for an expected type, in the words of a manifest author.
fn expected_in_words(expected: &str) -> String {
    let words = match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number of 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" | "a JSON number" => "a number",
        "a string" | "path string" | "a borrowed string" => "a string",
        "a boolean" => "`true` or `false`",
        "a sequence" => "a list",
        "a map" => "a mapping",
        other if other.starts_with("struct ") => "a mapping",
        other => return other.to_string(),
    };
    words.to_string()
}

fn describe(found: Option<&Value>, raw: Option<&str>) -> String {
    match found {
        None => "missing".to_string(),
        Some(Value::Null) => "empty".to_string(),
        Some(Value::Bool(b)) => format!(
            "the boolean `{}`",
            raw.unwrap_or(if *b { "true" } else { "false" })
        ),
        Some(Value::Number(n)) => format!(
            "the number `{}`",
            raw.map_or_else(|| n.to_string(), str::to_string)
        ),
        Some(Value::String(s)) => {
            let shown: String = s.chars().take(60).collect();
            let more = if shown.len() < s.len() { "…" } else { "" };
            format!("the string `\"{shown}{more}\"`")
        }
        Some(Value::Array(_)) => "a list".to_string(),
        Some(Value::Object(_)) => "a mapping".to_string(),
    }
}

/// Original path of each object in `known` → its keys.
fn known_keys(known: &Value, removed: &Removed) -> HashMap<String, Vec<String>> {
    fn walk(
        value: &Value,
        segs: &mut Vec<Seg>,
        removed: &Removed,
        out: &mut HashMap<String, Vec<String>>,
    ) {
        match value {
            Value::Object(object) => {
                out.insert(removed.original(segs), object.keys().cloned().collect());
                for (key, child) in object {
                    segs.push(Seg::Key(key.clone()));
                    walk(child, segs, removed, out);
                    segs.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    segs.push(Seg::Index(i));
                    walk(child, segs, removed, out);
                    segs.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = HashMap::new();
    walk(known, &mut Vec::new(), removed, &mut out);
    out
}

/// One diagnostic for each unknown key, in two kinds: `E-MAN-033` where `strict` says so,
/// `W-MAN-013` elsewhere. For each kind, the first [`MAX_UNKNOWN_KEYS`] in the order of the text
/// are listed one by one and, when there are more, one more diagnostic of that kind at the next
/// says how many more there are: a hostile manifest of a million unknown keys gets at most 202
/// diagnostics, not a million.
fn unknown_keys(
    unknown: Vec<(String, String)>,
    known: &HashMap<String, Vec<String>>,
    map: &SourceMap,
    strict: Strict,
) -> Vec<Diagnostic> {
    let mut errors: Vec<Unknown> = Vec::new();
    let mut warnings: Vec<Unknown> = Vec::new();
    for (holder, key) in unknown {
        let siblings: Vec<&str> = known
            .get(&holder)
            .map(|keys| keys.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let close = closest(&key, siblings.iter().copied()).map(str::to_string);
        let at = map.locate_key(&join_key(&holder, &key));
        let is_error = strict(&holder, &key, close.as_deref());
        let unknown = Unknown {
            at,
            holder,
            key,
            close,
        };
        if is_error {
            errors.push(unknown);
        } else {
            warnings.push(unknown);
        }
    }
    let mut out = listed(errors, known, code::E_MAN_033);
    out.extend(listed(warnings, known, code::W_MAN_013));
    out
}

/// An unknown key: where it is written, the mapping holding it, and the closest known key there.
struct Unknown {
    at: Option<Place>,
    holder: String,
    key: String,
    close: Option<String>,
}

/// `code` for each of the first [`MAX_UNKNOWN_KEYS`] of `placed`, and one more counting the rest.
fn listed(
    mut placed: Vec<Unknown>,
    known: &HashMap<String, Vec<String>>,
    code: &'static str,
) -> Vec<Diagnostic> {
    let total = placed.len();
    if total > MAX_UNKNOWN_KEYS {
        // Keys without a place last, as the loader's final sort puts them.
        let order = |at: &Option<Place>| match at {
            Some(at) => (0, at.line, at.column),
            None => (1, 0, 0),
        };
        placed.sort_by_key(|unknown| order(&unknown.at));
    }
    let mut out: Vec<Diagnostic> = placed
        .iter()
        .take(MAX_UNKNOWN_KEYS)
        .map(|unknown| unknown_key(unknown, known, code))
        .collect();
    if let Some(next) = placed.get(MAX_UNKNOWN_KEYS) {
        let more = total - MAX_UNKNOWN_KEYS;
        let what = if code == code::E_MAN_033 {
            "unknown keys about capabilities"
        } else {
            "unknown keys"
        };
        let mut summary = Diagnostic::new(
            code,
            format!(
                "{more} more {what}, from `{}` on, are not listed one by one",
                join_key(&next.holder, &next.key)
            ),
        )
        .hint(format!(
            "remove the unknown keys; only the first {MAX_UNKNOWN_KEYS} are listed"
        ));
        if let Some(at) = next.at {
            summary = summary.at_place(at);
        }
        out.push(summary);
    }
    out
}

/// `code` for `unknown`, suggesting a known key at that spot. An error always has a hint.
fn unknown_key(
    unknown: &Unknown,
    known: &HashMap<String, Vec<String>>,
    code: &'static str,
) -> Diagnostic {
    let Unknown {
        at,
        holder,
        key,
        close,
    } = unknown;
    let path = join_key(holder, key);
    let place = if holder.is_empty() {
        "at the top level".to_string()
    } else {
        format!("in `{holder}`")
    };
    let siblings: Vec<&str> = known
        .get(holder)
        .map(|keys| keys.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let message = if code == code::E_MAN_033 {
        format!(
            "unknown key `{key}` {place}: this runtime does not honour it, so it is refused rather than dropped"
        )
    } else {
        format!("unknown key `{key}` {place}")
    };
    let mut diagnostic = Diagnostic::new(code, message).at_path(path.as_str());
    if let Some(close) = close {
        diagnostic = diagnostic.hint(format!("did you mean `{close}`?"));
    } else if !siblings.is_empty() {
        diagnostic = diagnostic.hint(format!(
            "remove it; the keys known here are: {}",
            siblings.join(", ")
        ));
    } else if code == code::E_MAN_033 {
        diagnostic = diagnostic.hint("remove it; see the `capabilities` keys in the README");
    }
    match at {
        Some(at) => diagnostic.at_place(*at),
        None => diagnostic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_elements_map_back_to_original_indices() {
        let mut removed = Removed::default();
        let mut work = serde_json::json!({"a": [0, 1, 2, 3, 4]});
        assert!(removed.remove(&mut work, &[Seg::Key("a".into()), Seg::Index(1)]));
        // Working index 1 is now the original 2.
        assert_eq!(
            removed.original(&[Seg::Key("a".into()), Seg::Index(1)]),
            "a[2]"
        );
        assert!(removed.remove(&mut work, &[Seg::Key("a".into()), Seg::Index(0)]));
        assert_eq!(
            removed.original(&[Seg::Key("a".into()), Seg::Index(0)]),
            "a[2]"
        );
        assert_eq!(
            removed.original(&[Seg::Key("a".into()), Seg::Index(2)]),
            "a[4]"
        );
        assert_eq!(
            removed.original_segs(&[Seg::Key("a".into()), Seg::Index(2)]),
            [Seg::Key("a".into()), Seg::Index(4)]
        );
        assert_eq!(work, serde_json::json!({"a": [2, 3, 4]}));
        assert!(!removed.remove(&mut work, &[]));
    }
}
