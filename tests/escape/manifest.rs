//! Escape cases: manifest.
//!
//! A manifest is hostile input, and `mur check` reads it before anything else. A manifest file
//! over `MANIFEST_MAX_BYTES` (1 MiB) is refused with `E-MAN-027` after reading at most one byte
//! past the cap, however large the file; a manifest of 200,000 unknown keys loads, with the
//! first 100 warned about one by one and one more `W-MAN-013` counting the rest.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use murmur_manifest::load::MANIFEST_MAX_BYTES;
use murmur_testkit::{Mur, MurOutput};
use serde_json::Value;

/// How long `mur check` may take before the test calls it hung: far longer than the check
/// takes, so it only turns a hang into a failure.
const HANG: Duration = Duration::from_secs(300);

/// `mur check` (with `--json` when `json`) of `file`, failing the test if it never ends.
fn check(file: &Path, json: bool) -> MurOutput {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur")).arg("check");
    if json {
        mur = mur.arg("--json");
    }
    let mur = mur.arg(file);
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(mur.run());
    });
    finished
        .recv_timeout(HANG)
        .unwrap_or_else(|_| panic!("`mur check` of {} did not finish", file.display()))
}

/// The `i`th of a run of distinct keys no manifest type knows: a letter, then up to two letters
/// or digits, so 200,000 of them fit under the cap.
fn key(mut i: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut key = vec![ALPHABET[i % 52]];
    i /= 52;
    while i > 0 {
        i -= 1;
        key.push(ALPHABET[i % 62]);
        i /= 62;
    }
    String::from_utf8(key).expect("ASCII")
}

const HEAD: &str = "name: hostile\nversion: \"1.0.0\"\n";

#[test]
fn a_manifest_over_the_size_cap_is_refused_with_e_man_027_without_being_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    // Just over the cap, and a sparse 1 GiB file: neither is read past the cap.
    let just_over = dir.path().join("just-over.yaml");
    let mut text = String::from(HEAD);
    while text.len() as u64 <= MANIFEST_MAX_BYTES {
        text.push_str("# padding the manifest out past the cap\n");
    }
    std::fs::write(&just_over, &text).unwrap();
    let huge = dir.path().join("huge.yaml");
    let opened = std::fs::File::create(&huge).unwrap();
    std::io::Write::write_all(&mut &opened, HEAD.as_bytes()).unwrap();
    opened.set_len(1 << 30).unwrap();
    drop(opened);

    for file in [&just_over, &huge] {
        let output = check(file, false);
        assert_eq!(output.code, 1, "{output:#?}");
        assert!(
            output.stderr.contains("error[E-MAN-027]"),
            "{}",
            output.stderr
        );
        assert!(output.stderr.contains("1 MiB"), "{}", output.stderr);
        assert!(output.stdout.contains("1 error"), "{}", output.stdout);

        let output = check(file, true);
        assert_eq!(output.code, 1, "{output:#?}");
        let report = output.json();
        assert_eq!(report["errors"], 1, "{report:#}");
        let diagnostics = report["diagnostics"].as_array().unwrap();
        assert_eq!(diagnostics.len(), 1, "{report:#}");
        assert_eq!(diagnostics[0]["code"], "E-MAN-027");
        assert!(
            diagnostics[0]["hint"]
                .as_str()
                .unwrap()
                .contains(&MANIFEST_MAX_BYTES.to_string())
        );
    }
}

#[test]
fn a_manifest_of_200000_unknown_keys_is_checked_with_its_warnings_capped() {
    const KEYS: usize = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("murmur.yaml");
    let mut text = String::from(HEAD);
    for i in 0..KEYS {
        text.push_str(&key(i));
        text.push_str(":\n");
    }
    assert!(
        text.len() as u64 <= MANIFEST_MAX_BYTES,
        "{} bytes",
        text.len()
    );
    std::fs::write(&file, &text).unwrap();

    let output = check(&file, true);
    assert_eq!(output.code, 0, "{}", output.stderr);
    let report = output.json();
    assert_eq!(report["kind"], "capsule");
    assert_eq!(report["errors"], 0);
    assert_eq!(report["warnings"], 101);
    let diagnostics = report["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 101);
    assert!(
        diagnostics
            .iter()
            .all(|d| d["code"] == "W-MAN-013" && d["severity"] == "warning")
    );
    // The first 100 keys, each at its own line, then one warning counting the rest.
    for (i, d) in diagnostics[..100].iter().enumerate() {
        assert_eq!(
            d["message"],
            Value::from(format!("unknown key `{}` at the top level", key(i)))
        );
        assert_eq!(d["line"], i + 3);
    }
    let summary = &diagnostics[100];
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .starts_with("199900 more unknown keys"),
        "{summary:#}"
    );
    assert_eq!(summary["line"], 103);
}
