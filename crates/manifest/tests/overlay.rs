//! A manifest overlay (what `mur eval`'s arms vary): merged over the YAML before the manifest
//! is loaded, mapping by mapping, `null` removing a key, anything else replacing; the merged
//! manifest is checked like any other.

use murmur_manifest::{CapsuleSource, merge_overlay, parse_yaml};
use serde_json::json;

#[test]
fn an_overlay_merges_mappings_removes_nulls_and_replaces_the_rest() {
    let mut base = json!({"a": {"b": 1, "c": [1, 2], "d": "x"}, "e": true});
    merge_overlay(
        &mut base,
        &json!({"a": {"b": 2, "c": [3], "d": null}, "f": "new"}),
    );
    assert_eq!(
        base,
        json!({"a": {"b": 2, "c": [3]}, "e": true, "f": "new"})
    );
}

#[test]
fn an_overlaid_capsule_loads_with_the_overlay_and_is_checked_as_any() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: demo\nversion: \"0.1.0\"\nartifacts:\n  - { name: d, version: \"0.1.0\", runtime: driver }\ninference:\n  model: base-model\n  driver: { artifact: d }\n  max_turns: 4\n",
    )
    .unwrap();
    let env = |_: &str| None;
    let overlay = parse_yaml("inference:\n  model: other-model\n").unwrap();
    let source = CapsuleSource::overlaid(dir.path(), &overlay, &env);
    let diagnostics = format!("{:?}", source.loaded.diagnostics);
    let capsule = source.loaded.manifest.expect(&diagnostics);
    let inference = capsule.inference.expect("inference");
    assert_eq!(inference.model.as_deref(), Some("other-model"));
    assert_eq!(inference.max_turns, 4);
    assert!(source.text.unwrap().contains("other-model"));

    // An overlay that breaks the manifest is refused with the manifest's own diagnostics.
    let broken = parse_yaml("inference:\n  max_turns: many\n").unwrap();
    let source = CapsuleSource::overlaid(dir.path(), &broken, &env);
    assert!(source.loaded.manifest.is_none());
    assert!(
        source
            .loaded
            .diagnostics
            .iter()
            .any(|d| d.message.contains("max_turns")),
        "{:?}",
        source.loaded.diagnostics
    );
    // Not YAML at all: a diagnostic, never a panic.
    assert!(parse_yaml("a: [").is_err());
}
