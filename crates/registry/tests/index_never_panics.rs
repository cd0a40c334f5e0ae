//! Whatever text it is given, the index parser returns an index or `E-REG-007`; it never
//! panics, and what it accepts resolves without panicking either.

use murmur_manifest::Coded;
use murmur_registry::index::Index;
use proptest::prelude::*;

fn check(text: &str) {
    match Index::parse(text) {
        Ok(index) => {
            let names: Vec<String> = index.names().map(str::to_string).collect();
            for name in names {
                let _ = index.resolve(&name, None);
                let _ = index.resolve(&name, Some("0.1.0"));
            }
            let _ = index.resolve("absent", None);
            assert_eq!(Index::parse(&index.to_json()).ok(), Some(index));
        }
        Err(error) => {
            assert_eq!(error.code(), "E-REG-007");
            assert!(!error.hint().is_empty());
        }
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\"format\"",
    "1",
    "2",
    "-1",
    "1.5",
    "null",
    "true",
    "\"artifacts\"",
    "\"read-file\"",
    "\"0.1.0\"",
    "\"1.0\"",
    "\"2.0.0-rc.1\"",
    "\"runtime\"",
    "\"tool\"",
    "\"capsule\"",
    "\"url\"",
    "\"a.tar.gz\"",
    "\"sha256\"",
    "\"size\"",
    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
    " ",
    "\n",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn json_flavoured_text_never_panics(
        pieces in prop::collection::vec(prop::sample::select(PIECES), 0..80)
    ) {
        check(&pieces.concat());
    }

    #[test]
    fn well_formed_indexes_with_arbitrary_values_never_panic(
        name in prop_oneof!["[a-z][a-z0-9-]{0,8}", any::<String>()],
        version in prop_oneof!["[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}(-[a-z0-9.]{1,6})?", any::<String>()],
        runtime in prop_oneof![Just("tool".to_string()), any::<String>()],
        url in any::<String>(),
        sha in prop_oneof!["[0-9a-fA-F]{64}", any::<String>()],
        size in prop::option::of(any::<i64>()),
    ) {
        let mut entry = serde_json::json!({"runtime": runtime, "url": url, "sha256": sha});
        if let Some(size) = size {
            entry["size"] = serde_json::json!(size);
        }
        let text = serde_json::json!({"format": 1, "artifacts": {name: {version: entry}}});
        check(&text.to_string());
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    check(&deep);
    let deep = format!(
        "{{\"format\": 1, \"artifacts\": {}}}",
        "{\"a\":".repeat(50_000)
    );
    check(&deep);
}
