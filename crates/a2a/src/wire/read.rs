//! Reading JSON objects field by field, with the path of every field for error messages.

use serde_json::{Map, Value};

use crate::Version;
use crate::error::FieldError;
use crate::model::Metadata;

/// How hard to be on what peers send.
///
/// Requests are read [`Mode::Strict`]: what the specifications mark required must be there.
/// Results (what an agent answers) are read [`Mode::Lenient`]: a missing id becomes empty, a
/// missing role `agent`, missing parts an empty list, an unknown task state `unknown`; the
/// specifications' own examples leave such fields out. Wrong JSON types are errors either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Strict,
    Lenient,
}

/// A JSON object being read, and where it sits.
pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
    version: Version,
}

/// `a.b`, or `b` at the top.
pub(crate) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `a[3]`.
pub(crate) fn index(path: &str, at: usize) -> String {
    format!("{path}[{at}]")
}

/// What kind of JSON value this is, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `messageId` → `message_id`: the proto field name, which ProtoJSON readers also accept.
fn proto_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for ch in name.chars() {
        if ch.is_ascii_uppercase() {
            out.push('_');
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

impl<'a> Obj<'a> {
    /// `value` as an object at `path`.
    pub(crate) fn of(value: &'a Value, path: &str, version: Version) -> Result<Self, FieldError> {
        match value {
            Value::Object(map) => Ok(Obj {
                map,
                path: path.to_string(),
                version,
            }),
            other => Err(FieldError::new(
                path,
                format!("must be an object, not {}", kind(other)),
            )),
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn version(&self) -> Version {
        self.version
    }

    /// The path of a field of this object.
    pub(crate) fn at(&self, name: &str) -> String {
        join(&self.path, name)
    }

    /// A field's value: by its JSON name, or (v1.0) its proto name. `null` counts as absent, as
    /// ProtoJSON says.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.raw(name).filter(|value| !value.is_null())
    }

    /// A field's value even when `null`.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).or_else(|| match self.version {
            Version::V1_0 => self.map.get(&proto_name(name)),
            Version::V0_3 => None,
        })
    }

    fn wrong(&self, name: &str, expected: &str, got: &Value) -> FieldError {
        FieldError::new(
            self.at(name),
            format!("must be {expected}, not {}", kind(got)),
        )
    }

    /// An optional string; empty counts as absent.
    pub(crate) fn opt_string(&self, name: &str) -> Result<Option<String>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(text)) if text.is_empty() => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.wrong(name, "a string", other)),
        }
    }

    /// A required string: strictly, present and not empty; leniently, empty when missing.
    pub(crate) fn string(&self, name: &str, mode: Mode) -> Result<String, FieldError> {
        match (self.opt_string(name)?, mode) {
            (Some(text), _) => Ok(text),
            (None, Mode::Lenient) => Ok(String::new()),
            (None, Mode::Strict) => Err(FieldError::new(self.at(name), "required")),
        }
    }

    /// A string that may be empty but must be present when strict (a text part's `text`).
    pub(crate) fn text(&self, name: &str) -> Result<String, FieldError> {
        match self.get(name) {
            None => Err(FieldError::new(self.at(name), "required")),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(self.wrong(name, "a string", other)),
        }
    }

    pub(crate) fn opt_bool(&self, name: &str) -> Result<Option<bool>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(self.wrong(name, "a boolean", other)),
        }
    }

    pub(crate) fn bool(&self, name: &str) -> Result<bool, FieldError> {
        Ok(self.opt_bool(name)?.unwrap_or(false))
    }

    /// An optional 32-bit integer. v1.0 (ProtoJSON) also takes it as a decimal string.
    pub(crate) fn opt_int(&self, name: &str) -> Result<Option<i64>, FieldError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let (number, shown) = match value {
            Value::Number(number) => (
                number.as_i64().or_else(|| {
                    number
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() <= f64::from(i32::MAX))
                        .map(|f| f as i64)
                }),
                number.to_string(),
            ),
            Value::String(text) if self.version == Version::V1_0 => {
                (text.trim().parse::<i64>().ok(), format!("{text:?}"))
            }
            other => return Err(self.wrong(name, "an integer", other)),
        };
        match number {
            Some(n) if i32::try_from(n).is_ok() => Ok(Some(n)),
            _ => Err(FieldError::new(
                self.at(name),
                format!("must be a 32-bit integer, got {shown}"),
            )),
        }
    }

    /// An optional count: a non-negative 32-bit integer.
    pub(crate) fn opt_count(&self, name: &str) -> Result<Option<u32>, FieldError> {
        match self.opt_int(name)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| {
                FieldError::new(
                    self.at(name),
                    format!("must be a non-negative integer, got {n}"),
                )
            }),
        }
    }

    /// An optional list of strings (absent: empty).
    pub(crate) fn strings(&self, name: &str) -> Result<Vec<String>, FieldError> {
        let Some(items) = self.array(name)? else {
            return Ok(Vec::new());
        };
        items
            .iter()
            .enumerate()
            .map(|(at, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(FieldError::new(
                    index(&self.at(name), at),
                    format!("must be a string, not {}", kind(other)),
                )),
            })
            .collect()
    }

    pub(crate) fn array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.wrong(name, "an array", other)),
        }
    }

    /// An optional nested object.
    pub(crate) fn object(&self, name: &str) -> Result<Option<Obj<'a>>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => Obj::of(value, &self.at(name), self.version).map(Some),
        }
    }

    /// A required nested object (required in both modes).
    pub(crate) fn required_object(&self, name: &str) -> Result<Obj<'a>, FieldError> {
        self.object(name)?
            .ok_or_else(|| FieldError::new(self.at(name), "required"))
    }

    /// Optional metadata: a JSON object.
    pub(crate) fn metadata(&self, name: &str) -> Result<Option<Metadata>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map.clone())),
            Some(other) => Err(self.wrong(name, "an object", other)),
        }
    }

    /// Every element of an optional array, read with `read(value, path)`.
    pub(crate) fn each<T>(
        &self,
        name: &str,
        mut read: impl FnMut(&'a Value, &str) -> Result<T, FieldError>,
    ) -> Result<Vec<T>, FieldError> {
        let Some(items) = self.array(name)? else {
            return Ok(Vec::new());
        };
        let path = self.at(name);
        items
            .iter()
            .enumerate()
            .map(|(at, item)| read(item, &index(&path, at)))
            .collect()
    }
}
