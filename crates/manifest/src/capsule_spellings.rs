//! A capsule manifest written for another Murmur runtime: the keys it spells differently, read
//! as this runtime's, each with a `W-MAN-032` saying what it was read as (what `mur check`
//! lists as mapped).
//!
//! What this module promises:
//!
//! - `inference.endpoint` and `inference.api_key` (that runtime's gateway, written beside the
//!   model) are the primary driver's entry's `gateway.endpoint` and `gateway.api_key`, the entry
//!   being the one `inference.driver.artifact` names. The key stays a credential reference,
//!   never interpolated at load, as a gateway's `api_key` is. When that entry already has a
//!   gateway, the two say where one driver's requests go: `E-MAN-018`, naming both. An
//!   `api_key` with no endpoint on either side is `E-MAN-021`. Without a declared primary
//!   driver entry the keys are left for the loader to judge.
//! - `network.internal_port` is `door.port`, the port `mur run --serve` listens on unless
//!   `--port` says otherwise; with `door.port` also set it is `E-MAN-018`, naming both.
//! - `lifecycle.queue_depth` is this runtime's key too (the most tasks that may wait in the
//!   door's queue); written without `lifecycle.task_acceptance`, as that runtime queues by
//!   default, it is read with `task_acceptance: queue`.
//!
//! Every key read elsewhere keeps its line: diagnostics about where it now lives point at where
//! it was written.

use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, code};
use crate::source::SourceMap;

/// Reads the other runtime's spellings of the capsule manifest `value` (its top level) in
/// place, moving each key's place in `map` with it; the warnings and errors found.
pub(crate) fn read_capsule_spellings(value: &mut Value, map: &mut SourceMap) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let Some(top) = value.as_object_mut() else {
        return found;
    };
    read_gateway(top, map, &mut found);
    read_internal_port(top, map, &mut found);
    read_queue_depth(top, &mut found);
    found
}

/// `inference.endpoint` / `inference.api_key` onto the primary driver entry's `gateway`.
fn read_gateway(top: &mut Map<String, Value>, map: &mut SourceMap, found: &mut Vec<Diagnostic>) {
    let Some(inference) = top.get("inference").and_then(Value::as_object) else {
        return;
    };
    let keys: Vec<&str> = ["endpoint", "api_key"]
        .into_iter()
        .filter(|key| inference.contains_key(*key))
        .collect();
    if keys.is_empty() {
        return;
    }
    let Some(primary) = inference
        .get("driver")
        .and_then(|driver| driver.get("artifact"))
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    let Some(index) = top
        .get("artifacts")
        .and_then(Value::as_array)
        .and_then(|entries| {
            entries.iter().position(|entry| {
                entry.get("name").and_then(Value::as_str) == Some(primary.as_str())
            })
        })
    else {
        return;
    };
    let entry_at = format!("artifacts[{index}]");
    let gateway_at = format!("{entry_at}.gateway");
    let has_gateway = top["artifacts"][index]
        .get("gateway")
        .is_some_and(|gateway| !gateway.is_null());
    let Some(inference) = top.get_mut("inference").and_then(Value::as_object_mut) else {
        return;
    };
    let taken: Vec<(&str, Value)> = keys
        .iter()
        .filter_map(|key| Some((*key, inference.remove(*key)?)))
        .collect();
    if has_gateway {
        for (key, _) in &taken {
            found.push(
                Diagnostic::new(
                    code::E_MAN_018,
                    format!(
                        "`inference.{key}` and `{gateway_at}` both say where driver `{primary}`'s requests go (`inference.{key}` is another runtime's place for the gateway)"
                    ),
                )
                .hint(format!(
                    "keep one: put the endpoint and key in `{gateway_at}` and remove `inference.{key}`, or remove the entry's `gateway:`"
                ))
                .at_path(format!("inference.{key}")),
            );
        }
        return;
    }
    if !taken.iter().any(|(key, _)| *key == "endpoint") {
        found.push(
            Diagnostic::new(
                code::E_MAN_021,
                format!(
                    "`inference.api_key` is the key of driver `{primary}`'s gateway, and nothing says where its requests go"
                ),
            )
            .hint(format!(
                "add `inference.endpoint: https://…` beside it, or write both in `{gateway_at}`: `gateway: {{ endpoint: https://…, api_key: \"${{KEY}}\" }}`"
            ))
            .at_path("inference.api_key"),
        );
        return;
    }
    let mut gateway = Map::new();
    for (key, held) in taken {
        gateway.insert(key.to_string(), held);
        map.alias(&format!("inference.{key}"), format!("{gateway_at}.{key}"));
        found.push(
            Diagnostic::new(
                code::W_MAN_032,
                format!(
                    "`inference.{key}` is another runtime's place for the driver's gateway; read as `{gateway_at}.{key}` (driver `{primary}`)"
                ),
            )
            .hint(format!(
                "move it to the driver's entry: `gateway: {{ endpoint: …, api_key: \"${{KEY}}\" }}` under `{entry_at}`"
            ))
            .at_path(format!("inference.{key}")),
        );
    }
    map.alias("inference", gateway_at);
    if let Some(entry) = top
        .get_mut("artifacts")
        .and_then(|entries| entries.get_mut(index))
        .and_then(Value::as_object_mut)
    {
        entry.insert("gateway".to_string(), Value::Object(gateway));
    }
}

/// `network.internal_port` onto `door.port`.
fn read_internal_port(
    top: &mut Map<String, Value>,
    map: &mut SourceMap,
    found: &mut Vec<Diagnostic>,
) {
    let Some(network) = top.get_mut("network").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(port) = network.remove("internal_port") else {
        return;
    };
    if network.is_empty() {
        top.remove("network");
    }
    let door = top
        .entry("door")
        .and_modify(|door| {
            if door.is_null() {
                *door = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(door) = door.as_object_mut() else {
        // A `door` that is not a mapping is the loader's to report.
        return;
    };
    if door.contains_key("port") {
        found.push(
            Diagnostic::new(
                code::E_MAN_018,
                "`network.internal_port` and `door.port` both name the port the door serves on (`network.internal_port` is another runtime's spelling of `door.port`)",
            )
            .hint("keep `door.port` and remove `network.internal_port`")
            .at_path("network.internal_port"),
        );
        return;
    }
    door.insert("port".to_string(), port);
    map.alias("network.internal_port", "door.port".to_string());
    found.push(
        Diagnostic::new(
            code::W_MAN_032,
            "`network.internal_port` is another runtime's spelling of the served port; read as `door.port` (`mur run --serve --port` still wins)",
        )
        .hint("write `door: { port: … }`")
        .at_path("network.internal_port"),
    );
}

/// `lifecycle.queue_depth` without `task_acceptance`: read with `task_acceptance: queue`.
fn read_queue_depth(top: &mut Map<String, Value>, found: &mut Vec<Diagnostic>) {
    let Some(lifecycle) = top.get_mut("lifecycle").and_then(Value::as_object_mut) else {
        return;
    };
    let given = |key: &str| lifecycle.get(key).is_some_and(|v| !v.is_null());
    if !given("queue_depth") || given("task_acceptance") {
        return;
    }
    lifecycle.insert("task_acceptance".to_string(), Value::String("queue".into()));
    found.push(
        Diagnostic::new(
            code::W_MAN_032,
            "`lifecycle.queue_depth` without `lifecycle.task_acceptance` is another runtime's queue of tasks; read with `task_acceptance: queue`, at most `queue_depth` tasks waiting",
        )
        .hint("write `lifecycle: { task_acceptance: queue, queue_depth: … }`")
        .at_path("lifecycle.queue_depth"),
    );
}
