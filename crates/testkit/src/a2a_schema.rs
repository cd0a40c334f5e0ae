//! Schema validation for tests: the published A2A schemas (copied into `crates/a2a/schemas/`),
//! made usable and a little stricter. Every request and response a test sees can be checked
//! against the schema of the protocol version it speaks.
//!
//! - v1.0: the bundle's `$ref`s name sibling files (`lf.a2a.v1.TaskStatus.jsonschema.json`);
//!   each is pointed at the bundle's own definition (`Task Status`, keyed here as `TaskStatus`).
//!   The bundle has no `required` lists, so the proto's `REQUIRED` annotations are added
//!   (repeated ones as `minItems: 1`, as A2A 1.0 §5.7 says), and `date-time` formats are checked.
//! - v0.3: validated against the schema as published, and against a closed copy in which every
//!   plain object definition gets `additionalProperties: false`, so that a v1.0 field or a typo
//!   in a v0.3 object cannot pass unnoticed.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Map, Value, json};

const V1_SCHEMA: &str = include_str!("../../a2a/schemas/a2a-v1.0.schema.json");
const V1_PROTO: &str = include_str!("../../a2a/schemas/a2a-v1.0.1.proto");
const V03_SCHEMA: &str = include_str!("../../a2a/schemas/a2a-v0.3.0.schema.json");

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for ch in snake.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.push(ch.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// `message name → [(json field name, repeated)]` for every `REQUIRED` field of the proto.
fn proto_required() -> HashMap<String, Vec<(String, bool)>> {
    let mut required: HashMap<String, Vec<(String, bool)>> = HashMap::new();
    let mut depth = 0i32;
    let mut current: Option<String> = None;
    for line in V1_PROTO.lines() {
        let line = line.trim();
        if line.starts_with("//") {
            continue;
        }
        if depth == 0
            && let Some(rest) = line.strip_prefix("message ")
        {
            current = Some(rest.trim_end_matches('{').trim().to_string());
        }
        if line.contains("field_behavior) = REQUIRED")
            && let Some(message) = &current
        {
            let declaration = line.split('=').next().unwrap();
            let tokens: Vec<&str> = declaration.split_whitespace().collect();
            let name = camel(tokens.last().unwrap());
            let repeated = tokens.first() == Some(&"repeated");
            required
                .entry(message.clone())
                .or_default()
                .push((name, repeated));
        }
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
        if depth == 0 {
            current = None;
        }
    }
    required
}

fn rewrite_refs(value: &mut Value, keys: &[String]) {
    match value {
        Value::Object(map) => {
            map.remove("$schema");
            for (key, inner) in map.iter_mut() {
                if key == "$ref"
                    && let Value::String(target) = inner
                {
                    let stem = target.trim_end_matches(".jsonschema.json");
                    let name = stem.rsplit('.').next().unwrap();
                    assert!(
                        keys.iter().any(|key| key == name),
                        "no definition for {target}"
                    );
                    *target = format!("#/definitions/{name}");
                } else {
                    rewrite_refs(inner, keys);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_refs(item, keys)),
        _ => {}
    }
}

fn v1_definitions() -> Value {
    let schema: Value = serde_json::from_str(V1_SCHEMA).unwrap();
    let mut definitions = Map::new();
    for (key, definition) in schema["definitions"].as_object().unwrap() {
        definitions.insert(key.replace(' ', ""), definition.clone());
    }
    let keys: Vec<String> = definitions.keys().cloned().collect();
    let mut definitions = Value::Object(definitions);
    rewrite_refs(&mut definitions, &keys);
    let required = proto_required();
    assert!(required.contains_key("Message"), "the proto parsed");
    for (message, fields) in required {
        let Some(definition) = definitions.get_mut(&message) else {
            panic!("the schema has no definition for proto message {message}");
        };
        let mut names = Vec::new();
        for (field, repeated) in fields {
            assert!(
                definition["properties"].get(&field).is_some(),
                "{message}.{field} is not in the schema"
            );
            // A page of tasks may be empty; every other required list needs an element.
            if repeated && !(message == "ListTasksResponse" && field == "tasks") {
                definition["properties"][&field]["minItems"] = json!(1);
            }
            names.push(Value::String(field));
        }
        definition["required"] = Value::Array(names);
    }
    definitions
}

fn v03_definitions(closed: bool) -> Value {
    let schema: Value = serde_json::from_str(V03_SCHEMA).unwrap();
    let mut definitions = schema["definitions"].clone();
    if closed {
        for definition in definitions.as_object_mut().unwrap().values_mut() {
            let object = definition.as_object_mut().unwrap();
            let plain = object.contains_key("properties")
                && !object.contains_key("additionalProperties")
                && !["allOf", "anyOf", "oneOf"]
                    .iter()
                    .any(|k| object.contains_key(*k));
            if plain {
                object.insert("additionalProperties".into(), json!(false));
            }
        }
    }
    definitions
}

static V1_DEFINITIONS: LazyLock<Value> = LazyLock::new(v1_definitions);
static V03_DEFINITIONS: LazyLock<Value> = LazyLock::new(|| v03_definitions(false));
static V03_CLOSED_DEFINITIONS: LazyLock<Value> = LazyLock::new(|| v03_definitions(true));

type Cache = Mutex<HashMap<(u8, String), Arc<jsonschema::Validator>>>;
static VALIDATORS: LazyLock<Cache> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn validator(which: u8, definition: &str) -> Arc<jsonschema::Validator> {
    let mut cache = VALIDATORS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry((which, definition.to_string()))
        .or_insert_with(|| {
            let (draft, definitions) = match which {
                0 => (
                    "https://json-schema.org/draft/2020-12/schema",
                    &*V1_DEFINITIONS,
                ),
                1 => ("http://json-schema.org/draft-07/schema#", &*V03_DEFINITIONS),
                _ => (
                    "http://json-schema.org/draft-07/schema#",
                    &*V03_CLOSED_DEFINITIONS,
                ),
            };
            assert!(
                definitions.get(definition).is_some(),
                "no schema definition {definition:?}"
            );
            let schema = json!({
                "$schema": draft,
                "allOf": [{"$ref": format!("#/definitions/{definition}")}],
                "definitions": definitions,
            });
            Arc::new(
                jsonschema::options()
                    .should_validate_formats(true)
                    .build(&schema)
                    .unwrap_or_else(|error| panic!("schema for {definition}: {error}")),
            )
        })
        .clone()
}

fn check(which: u8, definition: &str, instance: &Value) -> Vec<String> {
    validator(which, definition)
        .iter_errors(instance)
        .map(|error| format!("at {:?}: {error}", error.instance_path().as_str()))
        .collect()
}

/// Panics, listing every violation, unless `instance` is a valid A2A 1.0 `definition`
/// (bundle key without spaces: `Task`, `SendMessageResponse`, `StreamResponse`, …).
pub fn assert_v1(definition: &str, instance: &Value) {
    let errors = check(0, definition, instance);
    assert!(
        errors.is_empty(),
        "not a valid v1.0 {definition}:\n{}\n{instance:#}",
        errors.join("\n")
    );
}

/// Panics unless `instance` is a valid A2A 0.3 `definition`, both as published and closed.
pub fn assert_v03(definition: &str, instance: &Value) {
    for (which, label) in [(1, "as published"), (2, "closed")] {
        let errors = check(which, definition, instance);
        assert!(
            errors.is_empty(),
            "not a valid v0.3 {definition} ({label}):\n{}\n{instance:#}",
            errors.join("\n")
        );
    }
}

/// Whether `instance` is a valid A2A 1.0 `definition` (for tests that expect a failure).
pub fn is_v1(definition: &str, instance: &Value) -> bool {
    check(0, definition, instance).is_empty()
}

/// Whether `instance` is a valid A2A 0.3 `definition`, closed.
pub fn is_v03(definition: &str, instance: &Value) -> bool {
    check(2, definition, instance).is_empty()
}

/// Checks an A2A 1.0 JSON-RPC error response (§9.5): the envelope, and `data` as a list of
/// objects each naming its `@type`, with the fields of the well-known types.
pub fn assert_v1_error_response(response: &Value, code: i64) {
    assert_eq!(response["jsonrpc"], "2.0");
    assert!(response.get("id").is_some(), "{response}");
    assert!(response.get("result").is_none(), "{response}");
    let error = &response["error"];
    assert_eq!(error["code"], code, "{response}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|message| !message.is_empty()),
        "{response}"
    );
    if let Some(data) = error.get("data") {
        let details = data.as_array().expect("v1.0 error data is a list");
        for detail in details {
            match detail["@type"]
                .as_str()
                .expect("each detail names its @type")
            {
                "type.googleapis.com/google.rpc.ErrorInfo" => {
                    let reason = detail["reason"].as_str().unwrap();
                    assert!(
                        reason.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                        "{reason}"
                    );
                    assert_eq!(detail["domain"], "a2a-protocol.org");
                    if let Some(metadata) = detail.get("metadata") {
                        assert!(
                            metadata.as_object().unwrap().values().all(Value::is_string),
                            "ErrorInfo.metadata is a map of strings: {metadata}"
                        );
                    }
                }
                "type.googleapis.com/google.rpc.BadRequest" => {
                    for violation in detail["fieldViolations"].as_array().unwrap() {
                        assert!(violation["field"].is_string(), "{violation}");
                        assert!(violation["description"].is_string(), "{violation}");
                    }
                }
                other => panic!("unexpected detail type {other}"),
            }
        }
    }
}

/// The door's discovery card (both versions' fields in one object) split into what each
/// version's reader takes: `(v1.0 card, v0.3 card)`, each with the other version's fields set
/// aside, then checked against its version's schema (0.3 as published and closed). Panics
/// unless both halves are valid.
pub fn split_discovery_card(card: &Value) -> (Value, Value) {
    const V03_ONLY: [&str; 5] = [
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "security",
    ];
    const V1_ONLY: [&str; 2] = ["supportedInterfaces", "securityRequirements"];
    const V1_SCHEME_FORMS: [&str; 2] = ["httpAuthSecurityScheme", "apiKeySecurityScheme"];
    let mut v1 = card.clone();
    let mut v03 = card.clone();
    let v1_fields = v1.as_object_mut().expect("a card is an object");
    let v03_fields = v03.as_object_mut().expect("a card is an object");
    for key in V03_ONLY {
        v1_fields.remove(key);
    }
    for key in V1_ONLY {
        v03_fields.remove(key);
    }
    if let Some(capabilities) = v03_fields
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.remove("extendedAgentCard");
    }
    if let Some(capabilities) = v1_fields
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.remove("stateTransitionHistory");
    }
    if let Some(schemes) = v1_fields
        .get_mut("securitySchemes")
        .and_then(Value::as_object_mut)
    {
        for scheme in schemes.values_mut().filter_map(Value::as_object_mut) {
            scheme.retain(|key, _| V1_SCHEME_FORMS.contains(&key.as_str()));
        }
    }
    if let Some(schemes) = v03_fields
        .get_mut("securitySchemes")
        .and_then(Value::as_object_mut)
    {
        for scheme in schemes.values_mut().filter_map(Value::as_object_mut) {
            scheme.retain(|key, _| !V1_SCHEME_FORMS.contains(&key.as_str()));
        }
    }
    assert_v1("AgentCard", &v1);
    assert_v03("AgentCard", &v03);
    (v1, v03)
}
