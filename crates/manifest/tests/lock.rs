//! `murmur.lock`: the text it is written as, the round trip, and every refusal (`E-REG-008`,
//! with its line), and that no text makes loading panic.

use std::path::Path;

use murmur_manifest::lock::{HEADER, LOCK_FILE};
use murmur_manifest::{CODES, Diagnostic, Lock, LockedArtifact, Runtime};
use proptest::prelude::*;

const SHA_A: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const SHA_B: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

fn pin(name: &str, version: &str, runtime: Runtime, sha256: &str) -> LockedArtifact {
    LockedArtifact {
        name: name.to_string(),
        version: version.to_string(),
        runtime,
        sha256: sha256.to_string(),
        source: "/srv/registry".to_string(),
    }
}

fn parse(text: &str) -> Result<Lock, Vec<Diagnostic>> {
    Lock::parse(text, Path::new("/capsule/murmur.lock"))
}

/// The one diagnostic loading `text` gives; it must be `E-REG-008` on `line`, with a hint.
fn refused(text: &str, line: usize) -> Diagnostic {
    let mut found = match parse(text) {
        Ok(lock) => panic!("loaded {lock:?} from:\n{text}"),
        Err(found) => found,
    };
    assert_eq!(found.len(), 1, "{found:#?}");
    let d = found.remove(0);
    assert_eq!(d.code, "E-REG-008", "{d}");
    assert_eq!(d.line, Some(line), "{d}");
    assert_eq!(d.file.as_deref(), Some(Path::new("/capsule/murmur.lock")));
    assert!(d.hint.as_deref().is_some_and(|h| h.contains("mur install")));
    d
}

fn line(text: &str) -> String {
    format!("{HEADER}\nversion: 1\nartifacts:\n  - {text}\n")
}

#[test]
fn the_text_is_sorted_quoted_one_pin_a_line() {
    let mut lock = Lock::default();
    lock.upsert(pin("read-file", "0.1.0", Runtime::Tool, SHA_A));
    lock.upsert(pin("driver-anthropic", "1.0.0", Runtime::Driver, SHA_B));
    let expected = format!(
        "{HEADER}\nversion: 1\nartifacts:\n\
         \x20 - {{ name: \"driver-anthropic\", version: \"1.0.0\", runtime: \"driver\", sha256: \"{SHA_B}\", source: \"/srv/registry\" }}\n\
         \x20 - {{ name: \"read-file\", version: \"0.1.0\", runtime: \"tool\", sha256: \"{SHA_A}\", source: \"/srv/registry\" }}\n"
    );
    assert_eq!(lock.to_text(), expected);
    assert_eq!(
        Lock::default().to_text(),
        format!("{HEADER}\nversion: 1\nartifacts: []\n")
    );
}

#[test]
fn upsert_replaces_the_pin_of_the_same_name() {
    let mut lock = Lock::default();
    lock.upsert(pin("read-file", "0.1.0", Runtime::Tool, SHA_A));
    lock.upsert(pin("read-file", "0.2.0", Runtime::Tool, SHA_B));
    assert_eq!(lock.artifacts.len(), 1);
    assert_eq!(
        lock.get("read-file").map(|a| a.version.as_str()),
        Some("0.2.0")
    );
    assert_eq!(lock.get("other"), None);
}

#[test]
fn write_then_load_gives_the_lock_back_and_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE);
    assert_eq!(Lock::load(&path).unwrap(), None);
    let mut lock = Lock::default();
    lock.upsert(pin("read-file", "1.0.0-rc.1+b7", Runtime::Tool, SHA_A));
    lock.upsert(pin("compactor", "0.1.0", Runtime::Hook, SHA_B));
    lock.write(&path).unwrap();
    let first = std::fs::read(&path).unwrap();
    assert_eq!(Lock::load(&path).unwrap(), Some(lock.clone()));
    lock.write(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first);
    // Nothing but the lock is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [LOCK_FILE]);
}

#[test]
fn a_hand_written_lock_in_block_style_loads_sorted() {
    let text = format!(
        "version: 1\nartifacts:\n  - name: b\n    version: \"1.0.0\"\n    runtime: skill\n    sha256: {SHA_A}\n    source: https://r.example/\n  - {{ name: a, version: 0.1.0, runtime: tool, sha256: {SHA_B}, source: ./reg }}\n"
    );
    let lock = parse(&text).unwrap();
    let names: Vec<&str> = lock.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn lock_beside_the_manifest() {
    assert_eq!(
        Lock::beside(Path::new("/c/murmur.yaml")),
        Path::new("/c/murmur.lock")
    );
    assert_eq!(
        Lock::beside(Path::new("murmur.yaml")),
        Path::new("./murmur.lock")
    );
}

#[test]
fn an_unreadable_lock_is_e_reg_008() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE);
    std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
    let found = Lock::load(&path).unwrap_err();
    assert_eq!(found[0].code, "E-REG-008");
    assert_eq!(found[0].file.as_deref(), Some(path.as_path()));
    // A directory where the file should be.
    let found = Lock::load(dir.path()).unwrap_err();
    assert_eq!(found[0].code, "E-REG-008");
}

#[test]
fn refusals_each_name_their_line() {
    let good =
        format!("{{ name: a, version: \"1.0.0\", runtime: tool, sha256: \"{SHA_A}\", source: s }}");
    assert!(parse(&line(&good)).is_ok());

    // YAML itself.
    refused("version: 1\nartifacts: [\n", 3);
    refused("version: 1\nversion: 1\nartifacts: []\n", 2);
    refused("", 1);
    refused("- a\n", 1);
    // The format.
    let d = refused("version: 2\nartifacts: []\n", 1);
    assert!(d.message.contains("format version 2"), "{d}");
    refused("version: \"1\"\nartifacts: []\n", 1);
    refused("artifacts: []\n", 1);
    refused("version: 1\nartifacts: []\nextra: 1\n", 3);
    // One pin.
    let d = refused(
        &line(&good.replace("source: s", "source: s, pinned: true")),
        4,
    );
    assert!(d.message.contains("pinned"), "{d}");
    refused(&line(&good.replace(", source: s", "")), 4);
    let d = refused(&line(&good.replace("\"1.0.0\"", "1.0")), 4);
    assert!(d.message.contains("artifacts[0].version"), "{d}");
    let d = refused(&line(&good.replace("\"1.0.0\"", "\"1.0\"")), 4);
    assert!(d.message.contains("semantic version"), "{d}");
    let d = refused(&line(&good.replace(SHA_A, &SHA_A.to_uppercase())), 4);
    assert!(d.message.contains("64 lowercase hex"), "{d}");
    refused(&line(&good.replace(SHA_A, &SHA_A[1..])), 4);
    let d = refused(&line(&good.replace("tool", "toul")), 4);
    assert!(d.message.contains("toul"), "{d}");
    refused(&line(&good.replace("tool", "capsule")), 4);
    refused(&line(&good.replace("name: a", "name: \" \"")), 4);
    refused(&line(&good.replace("source: s", "source: \"\"")), 4);
    // The same name twice: the second is at fault.
    let twice = format!("{HEADER}\nversion: 1\nartifacts:\n  - {good}\n  - {good}\n");
    let d = refused(&twice, 5);
    assert!(d.message.contains("pinned twice"), "{d}");
}

#[test]
fn every_problem_with_the_values_is_reported() {
    let text = line("{ name: a, version: x, runtime: tool, sha256: nope, source: \"\" }");
    let found = parse(&text).unwrap_err();
    assert_eq!(found.len(), 3, "{found:#?}");
}

fn version() -> impl Strategy<Value = String> {
    (
        0u32..2000,
        0u32..2000,
        0u32..2000,
        prop::option::of("[a-z]{1,5}(\\.[1-9][0-9]{0,2})?"),
        prop::option::of("[a-z0-9]{1,6}"),
    )
        .prop_map(|(major, minor, patch, pre, build)| {
            let mut v = format!("{major}.{minor}.{patch}");
            if let Some(pre) = pre {
                v.push('-');
                v.push_str(&pre);
            }
            if let Some(build) = build {
                v.push('+');
                v.push_str(&build);
            }
            v
        })
}

fn non_blank() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,20}",
        any::<String>().prop_filter("blank", |s| !s.trim().is_empty()),
    ]
}

fn pinned() -> impl Strategy<Value = LockedArtifact> {
    (
        non_blank(),
        version(),
        prop::sample::select(vec![
            Runtime::Tool,
            Runtime::Driver,
            Runtime::Hook,
            Runtime::Skill,
        ]),
        "[0-9a-f]{64}",
        prop_oneof![non_blank(), Just("https://registry.example/".to_string())],
    )
        .prop_map(|(name, version, runtime, sha256, source)| LockedArtifact {
            name,
            version,
            runtime,
            sha256,
            source,
        })
}

fn lock() -> impl Strategy<Value = Lock> {
    prop::collection::vec(pinned(), 0..6).prop_map(|pins| {
        let mut lock = Lock::default();
        for pin in pins {
            lock.upsert(pin);
        }
        lock
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_text_loads_back_as_the_same_lock(lock in lock()) {
        let text = lock.to_text();
        let loaded = parse(&text);
        prop_assert_eq!(loaded.as_ref(), Ok(&lock), "text:\n{}", text);
        prop_assert_eq!(loaded.map(|l| l.to_text()), Ok(text));
    }

    #[test]
    fn loading_any_text_never_panics(text in any::<String>()) {
        check_result(&text);
    }

    #[test]
    fn loading_lock_flavoured_text_never_panics(
        pieces in prop::collection::vec(
            prop::sample::select(&[
                "version: ", "1", "2", "artifacts:", "\n", "  - ", "{ ", " }", ", ", "name: ",
                "a", "\"1.0.0\"", "runtime: ", "tool", "sha256: ", SHA_A, "source: ", "s",
                "[", "]", "\"", "&x ", "*x", "#", "---\n", "\t", ": ",
            ][..]),
            0..60,
        )
    ) {
        check_result(&pieces.concat());
    }
}

fn check_result(text: &str) {
    let lines = text.lines().count() + 1;
    if let Err(found) = parse(text) {
        assert!(!found.is_empty());
        for d in found {
            assert!(CODES.iter().any(|c| c.code == d.code));
            assert_eq!(d.code, "E-REG-008");
            assert!(d.hint.is_some());
            if let Some(line) = d.line {
                assert!((1..=lines).contains(&line), "line {line}: {d}");
            }
        }
    }
}
