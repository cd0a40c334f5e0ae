//! YAML text to a JSON value plus a [`SourceMap`].
//!
//! Scalars keep their YAML type: plain `1.0` is a number, quoted `"1.0"` a string, `true`,
//! `null` and integers as such. Anchors and aliases are expanded (within saphyr's node budget,
//! which defeats "billion laughs"); merge keys (`<<`) are not. Refused, each as a diagnostic
//! with its position: a syntax error, more than one document and a merge key (`E-MAN-002`),
//! nesting deeper than [`MAX_DEPTH`] (`E-MAN-002`: the tree is never built, so no input can
//! exhaust the stack), a key that appears twice in one mapping (`E-MAN-020`), a top level that
//! is not a mapping, a key that is not a scalar, and a value its tag cannot read (`E-MAN-003`),
//! and a non-finite number (`E-MAN-015`).

use std::collections::HashMap;

use saphyr::{MarkedYaml, Scalar, YamlData, YamlLoader};
use saphyr_parser::{Event, Marker, Parser, ScanError, Span, SpannedEventReceiver};
use serde_json::{Map, Number, Value};

use crate::diagnostic::{Diagnostic, code};
use crate::source::{Place, SourceMap, join_index, join_key};

/// How deep mappings and sequences may nest, in the text and after alias expansion.
pub(crate) const MAX_DEPTH: usize = 64;

/// A parsed document. Diagnostics here carry a line/column but no file.
pub(crate) struct Document {
    pub(crate) value: Value,
    pub(crate) map: SourceMap,
}

/// Parses `text`; `Err` holds the errors that make it unusable, `Ok` may come with diagnostics
/// about parts that were dropped.
pub(crate) fn parse(text: &str) -> Result<(Document, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut receiver = Guarded {
        loader: YamlLoader::default(),
        depth: 0,
        too_deep: None,
    };
    let mut parser = Parser::new_from_str(text);
    if let Err(error) = parser.load(&mut receiver, true) {
        return Err(vec![scan_error(&error)]);
    }
    if let Some(mark) = receiver.too_deep {
        return Err(vec![
            Diagnostic::new(
                code::E_MAN_002,
                format!("the manifest nests mappings and lists deeper than {MAX_DEPTH} levels"),
            )
            .hint("flatten the structure; no manifest field nests this deep")
            .at_place(place(mark)),
        ]);
    }
    if let Some(error) = receiver.loader.error() {
        return Err(vec![scan_error(error)]);
    }
    let mut documents = receiver.loader.into_documents();
    if documents.len() > 1 {
        let second = place(documents[1].span.start);
        return Err(vec![
            Diagnostic::new(
                code::E_MAN_002,
                "the manifest holds more than one YAML document",
            )
            .hint("keep one document: remove the `---` and what follows it")
            .at_place(second),
        ]);
    }
    let root = match documents.pop() {
        Some(root) if !matches!(root.data, YamlData::BadValue) => root,
        _ => {
            return Err(vec![
                Diagnostic::new(code::E_MAN_003, "the manifest is empty")
                    .hint("start with `name:` and `version:` at the top level")
                    .at_place(Place { line: 1, column: 1 }),
            ]);
        }
    };
    if !matches!(root.data, YamlData::Mapping(_)) {
        return Err(vec![
            Diagnostic::new(
                code::E_MAN_003,
                "the top level of the manifest is not a mapping",
            )
            .hint("write the manifest as `key: value` lines, starting with `name:` and `version:`")
            .at_place(place(root.span.start)),
        ]);
    }
    let mut converter = Converter {
        lines: text.lines().map(|line| (line, line.is_ascii())).collect(),
        char_starts: HashMap::new(),
        map: SourceMap::default(),
        diagnostics: Vec::new(),
    };
    let value = converter.convert(&root, String::new(), None, 0);
    Ok((
        Document {
            value,
            map: converter.map,
        },
        converter.diagnostics,
    ))
}

fn place(mark: Marker) -> Place {
    Place {
        line: mark.line().max(1),
        column: mark.col() + 1,
    }
}

fn scan_error(error: &ScanError) -> Diagnostic {
    let at = place(*error.marker());
    if error.info() == "duplicated key in mapping" {
        return Diagnostic::new(
            code::E_MAN_020,
            "this key appears twice in the same mapping",
        )
        .hint("keep one of the two entries; YAML mappings cannot repeat a key")
        .at_place(at);
    }
    Diagnostic::new(
        code::E_MAN_002,
        format!("YAML syntax error: {}", error.info()),
    )
    .hint("fix the YAML at this position (check indentation, quotes and brackets)")
    .at_place(at)
}

/// Feeds the loader, and stops feeding it once the text nests deeper than [`MAX_DEPTH`].
struct Guarded<'input> {
    loader: YamlLoader<'input, MarkedYaml<'input>>,
    depth: usize,
    too_deep: Option<Marker>,
}

impl<'input> SpannedEventReceiver<'input> for Guarded<'input> {
    fn on_event(&mut self, event: Event<'input>, span: Span) {
        if self.too_deep.is_some() {
            return;
        }
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    self.too_deep = Some(span.start);
                    return;
                }
            }
            Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        self.loader.on_event(event, span);
    }
}

struct Converter<'t> {
    /// The text's lines, each with whether it is ASCII (a column is then a byte offset).
    lines: Vec<(&'t str, bool)>,
    /// For each line that is not ASCII and held a scalar's source text: the byte offset at
    /// which each of its characters starts, built once, so taking a scalar's text out of a
    /// long line costs the scalar's length, not the line's.
    char_starts: HashMap<usize, Vec<usize>>,
    map: SourceMap,
    diagnostics: Vec<Diagnostic>,
}

impl Converter<'_> {
    fn convert(
        &mut self,
        node: &MarkedYaml<'_>,
        path: String,
        key: Option<Place>,
        depth: usize,
    ) -> Value {
        let at = place(node.span.start);
        if depth > MAX_DEPTH {
            // Only alias expansion can get here: the text itself was checked.
            self.diagnostics.push(
                Diagnostic::new(
                    code::E_MAN_002,
                    format!("aliases expand this value deeper than {MAX_DEPTH} levels"),
                )
                .hint("write the value out instead of nesting aliases")
                .at_place(at),
            );
            return Value::Null;
        }
        match &node.data {
            YamlData::Mapping(entries) => {
                self.map.insert(path.clone(), key, key.unwrap_or(at), None);
                let mut object = Map::new();
                for (k, v) in entries {
                    let key_at = place(k.span.start);
                    let Some(name) = self.key_text(k) else {
                        self.diagnostics.push(
                            Diagnostic::new(code::E_MAN_003, "a mapping key is not a plain scalar")
                                .hint("write keys as plain words, such as `name:`")
                                .at_place(key_at),
                        );
                        continue;
                    };
                    if name == "<<" {
                        self.diagnostics.push(
                            Diagnostic::new(code::E_MAN_002, "YAML merge keys (`<<`) are not supported")
                                .hint("write the keys out, or use an alias as a whole value (`key: *anchor`)")
                                .at_place(key_at),
                        );
                        continue;
                    }
                    if object.contains_key(&name) {
                        self.diagnostics.push(
                            Diagnostic::new(
                                code::E_MAN_020,
                                format!("key `{name}` appears twice in the same mapping"),
                            )
                            .hint("keep one of the two entries; YAML mappings cannot repeat a key")
                            .at_place(key_at),
                        );
                        continue;
                    }
                    let child = join_key(&path, &name);
                    let value = self.convert(v, child, Some(key_at), depth + 1);
                    object.insert(name, value);
                }
                Value::Object(object)
            }
            YamlData::Sequence(items) => {
                self.map.insert(path.clone(), key, key.unwrap_or(at), None);
                let items = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.convert(item, join_index(&path, i), None, depth + 1))
                    .collect();
                Value::Array(items)
            }
            YamlData::Tagged(_, inner) => self.convert(inner, path, key, depth),
            YamlData::Value(scalar) => {
                let raw = match scalar {
                    Scalar::String(_) => None,
                    _ => Some(self.source_text(node.span)),
                };
                let shown_at = match (scalar, key) {
                    (Scalar::Null, Some(key)) => key,
                    _ => at,
                };
                let value = self.scalar(scalar, raw.as_deref().unwrap_or(""), at);
                self.map.insert(path, key, shown_at, raw);
                value
            }
            YamlData::Representation(text, _, _) => {
                self.map.insert(path, key, at, None);
                Value::String(text.to_string())
            }
            YamlData::BadValue | YamlData::Alias(_) => {
                self.map.insert(path, key, at, None);
                self.diagnostics.push(
                    Diagnostic::new(code::E_MAN_003, "this value cannot be read as its tag says")
                        .hint("remove the `!!` tag, or write a value of the tagged type")
                        .at_place(at),
                );
                Value::Null
            }
        }
    }

    fn scalar(&mut self, scalar: &Scalar<'_>, raw: &str, at: Place) -> Value {
        match scalar {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Bool(*b),
            Scalar::Integer(i) => Value::Number((*i).into()),
            Scalar::String(s) => Value::String(s.to_string()),
            Scalar::FloatingPoint(f) => match Number::from_f64(f.into_inner()) {
                Some(n) => Value::Number(n),
                None => {
                    self.diagnostics.push(
                        Diagnostic::new(code::E_MAN_015, format!("`{raw}` is not a finite number"))
                            .hint("write a finite number, or quote the value to make it a string")
                            .at_place(at),
                    );
                    Value::Null
                }
            },
        }
    }

    fn key_text(&mut self, key: &MarkedYaml<'_>) -> Option<String> {
        match &key.data {
            YamlData::Value(Scalar::String(s)) => Some(s.to_string()),
            YamlData::Value(_) => Some(self.source_text(key.span)),
            YamlData::Representation(text, _, _) => Some(text.to_string()),
            YamlData::Tagged(_, inner) => self.key_text(inner),
            _ => None,
        }
    }

    /// The text a one-line scalar was written as.
    fn source_text(&mut self, span: Span) -> String {
        let (start, end) = (span.start, span.end);
        let Some(index) = start.line().checked_sub(1) else {
            return String::new();
        };
        let Some(&(line, ascii)) = self.lines.get(index) else {
            return String::new();
        };
        if end.line() != start.line() || end.col() <= start.col() {
            return String::new();
        }
        let text = if ascii {
            line.get(start.col()..end.col().min(line.len()))
        } else {
            let starts = self.char_starts.entry(index).or_insert_with(|| {
                line.char_indices()
                    .map(|(at, _)| at)
                    .chain([line.len()])
                    .collect()
            });
            let from = starts.get(start.col()).copied();
            let to = starts.get(end.col()).or(starts.last()).copied();
            from.zip(to).and_then(|(from, to)| line.get(from..to))
        };
        text.unwrap_or("").trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Document {
        match parse(text) {
            Ok((doc, diags)) if diags.is_empty() => doc,
            Ok((_, diags)) | Err(diags) => panic!("{diags:?}"),
        }
    }

    fn err(text: &str) -> Diagnostic {
        match parse(text) {
            Err(mut diags) => diags.remove(0),
            Ok((_, mut diags)) if !diags.is_empty() => diags.remove(0),
            Ok(_) => panic!("`{text}` parsed cleanly"),
        }
    }

    #[test]
    fn scalars_keep_their_yaml_types() {
        let doc = ok("a: 1.0\nb: \"1.0\"\nc: true\nd: null\ne: 7\nf: ~\ng: x\n");
        assert_eq!(
            doc.value,
            serde_json::json!({"a": 1.0, "b": "1.0", "c": true, "d": null, "e": 7, "f": null, "g": "x"})
        );
        assert_eq!(doc.map.raw("a"), Some("1.0"));
        assert_eq!(doc.map.raw("b"), None);
    }

    #[test]
    fn places_point_at_values_and_at_keys_of_collections() {
        let doc = ok("name: x\ninference:\n  alternates:\n    - { name: fast, driver: d }\n");
        assert_eq!(doc.map.locate("name"), Some(Place { line: 1, column: 7 }));
        assert_eq!(
            doc.map.locate("inference.alternates"),
            Some(Place { line: 3, column: 3 })
        );
        assert_eq!(
            doc.map.locate("inference.alternates[0].driver"),
            Some(Place {
                line: 4,
                column: 29
            })
        );
        assert_eq!(
            doc.map.locate_key("inference.alternates[0].driver"),
            Some(Place {
                line: 4,
                column: 21
            })
        );
    }

    #[test]
    fn raw_text_is_taken_from_long_and_non_ascii_lines() {
        let keys: String = (0..2000).map(|i| format!(", k{i}: {i}.50")).collect();
        let doc = ok(&format!("{{a: 1{keys}}}\n"));
        assert_eq!(doc.map.raw("k1999"), Some("1999.50"));
        let doc = ok("{ä: \"é\", b: 1.50, ü: true}\n");
        assert_eq!(doc.map.raw("b"), Some("1.50"));
        assert_eq!(doc.map.raw("ü"), Some("true"));
        let doc = ok("1.0: ä\n");
        assert_eq!(doc.value, serde_json::json!({"1.0": "ä"}));
    }

    #[test]
    fn aliases_expand() {
        let doc = ok("base: &b { x: 1 }\ncopy: *b\n");
        assert_eq!(doc.value["copy"], serde_json::json!({"x": 1}));
    }

    #[test]
    fn refusals() {
        assert_eq!(err("a: [1, 2\n").code, "E-MAN-002");
        assert_eq!(err("a: 1\n---\nb: 2\n").code, "E-MAN-002");
        assert_eq!(err("").code, "E-MAN-003");
        assert_eq!(err("- a\n- b\n").code, "E-MAN-003");
        let dup = err("a: 1\nb: 2\na: 3\n");
        assert_eq!((dup.code, dup.line), ("E-MAN-020", Some(3)));
        let deep = format!("a: {}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(err(&deep).code, "E-MAN-002");
        let block_deep: String = (0..100)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        assert_eq!(err(&block_deep).code, "E-MAN-002");
        assert_eq!(err("a: .nan\n").code, "E-MAN-015");
        assert_eq!(err("? [a]\n: 1\n").code, "E-MAN-003");
        assert_eq!(err("a: &x { b: 1 }\nc:\n  <<: *x\n").code, "E-MAN-002");
    }
}
