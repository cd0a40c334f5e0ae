//! One load reports every problem: a value at fault for its type does not hide the meaning
//! problems elsewhere, is not reported twice, and never makes a sound part look broken.

use crate::common;

use common::{codes, load_text};

#[test]
fn type_and_meaning_problems_come_back_from_one_load() {
    let text = "name: both\nversion: \"1.0\"\nartifacts:\n  - { name: driver-a, version: \"1.0.0\", runtime: driver }\ninference:\n  model: m\n  driver: { artifact: driver-a }\n  alternates:\n    - { name: fast, model: m2, driver: driver-x }\ncapabilities:\n  network: { allow: [ \"ftp://example.com\", \"api.example.com\" ] }\n  limits: { memory_bytes: lots }\n";
    let loaded = load_text(text);
    // semver (meaning), the undeclared alternate (meaning), the allow entry and the limit (types)
    let mut found = codes(&loaded);
    found.sort();
    assert_eq!(found, ["E-CAP-001", "E-MAN-003", "E-MAN-006", "E-MAN-009"]);
}

#[test]
fn a_value_at_fault_for_its_type_is_not_reported_again_as_missing() {
    let loaded = load_text("name: twice\nversion: 1.5\n");
    assert_eq!(codes(&loaded), ["E-MAN-003"]);
}

#[test]
fn an_artifact_entry_at_fault_does_not_make_references_to_it_dangle() {
    // `runtime: drivr` takes the whole entry out for its type; the alternate naming it must not
    // be reported as naming an undeclared driver.
    let text = "name: refs\nversion: \"1.0.0\"\nartifacts:\n  - { name: driver-a, version: \"1.0.0\", runtime: drivr }\ninference:\n  model: m\n  driver: { artifact: driver-a }\n  alternates:\n    - { name: fast, model: m2, driver: driver-a }\n";
    let loaded = load_text(text);
    assert!(
        loaded
            .diagnostics
            .iter()
            .all(|d| d.code != "E-MAN-008" && d.code != "E-MAN-009"),
        "{:#?}",
        loaded.diagnostics
    );
    assert!(loaded.has_errors());
}
