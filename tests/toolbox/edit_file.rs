//! `edit-file` through the real `mur`: `mur tool invoke` of `artifacts/edit-file`, and a
//! session whose model (the provider emulator) edits a file of an in-place workspace. Each test
//! checks the file on disk as well as the result: an edit is the exact replacement, a refusal
//! leaves every byte where it was.

use std::path::{Path, PathBuf};

use murmur_testkit::MurOutput;
use murmur_testkit::emulator::{Emulator, Script};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{KEY, ended};

fn invoke(input: &Value, workdir: &Path) -> MurOutput {
    super::invoke("edit-file", input, workdir)
}

/// The input through stdin: past the size one command-line argument may have.
fn invoke_stdin(input: Vec<u8>, workdir: &Path) -> MurOutput {
    super::invoke_bytes("edit-file", input, workdir)
}

/// A capsule on the Anthropic driver against `endpoint` with edit-file as its one tool.
fn capsule(dir: &Path, endpoint: &str) -> PathBuf {
    super::capsule(
        dir,
        endpoint,
        "editor",
        &["edit-file"],
        "  system_prompt: \"You fix code.\"\n  max_turns: 8",
    )
}

fn message(printed: &Value) -> &str {
    printed["output"].as_str().unwrap_or_default()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const LIB: &str = "pub fn add(a: i32) -> i32 {\n    a + 1\n}\n\npub fn one() -> i32 {\n    1\n}\n";

#[test]
fn an_exact_edit_rewrites_the_file_and_reports_lines_effects_and_digest() {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("src")).unwrap();
    let file = work.path().join("src/lib.rs");
    std::fs::write(&file, LIB).unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "src/lib.rs", "old": "    a + 1\n", "new": "    a + 2\n"}),
            work.path(),
        ),
        "passed",
    );
    let after = LIB.replacen("a + 1", "a + 2", 1);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
    assert_eq!(
        message(&printed),
        "edited src/lib.rs: 1 replacement, line 2\n2 |     a + 2\n3 | }\n4 | \n5 | pub fn one() -> i32 {\n"
    );
    assert_eq!(printed["state_effect"], "mutate");
    assert_eq!(printed["resource_id"], "file:src/lib.rs");
    assert!(
        printed["result"]["metadata"]
            .as_array()
            .unwrap()
            .contains(&json!(["sha256", sha256(after.as_bytes())])),
        "{printed:#}"
    );
    // Nothing left beside it: the temp file was renamed over the file.
    let names: Vec<_> = std::fs::read_dir(work.path().join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["lib.rs"]);
    // The usual mode is kept.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

#[test]
fn replace_all_replaces_every_occurrence_and_crlf_files_stay_crlf() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "x1 x1\nx1\n").unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "a.txt", "old": "x1", "new": "y", "replace_all": true}),
            work.path(),
        ),
        "passed",
    );
    assert!(
        message(&printed).starts_with("edited a.txt: 3 replacements, lines 1-2\n"),
        "{printed:#}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "y y\ny\n"
    );

    std::fs::write(work.path().join("w.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "w.txt", "old": "one\ntwo\n", "new": "1\n2\n"}),
            work.path(),
        ),
        "passed",
    );
    assert!(
        message(&printed).contains("(CRLF line endings kept)"),
        "{printed:#}"
    );
    assert_eq!(
        std::fs::read(work.path().join("w.txt")).unwrap(),
        b"1\r\n2\r\nthree\r\n"
    );
}

#[test]
fn absent_and_ambiguous_old_are_refused_naming_count_and_lines_file_unchanged() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("lib.rs");
    std::fs::write(&file, LIB).unwrap();

    let printed = ended(
        &invoke(
            &json!({"path": "lib.rs", "old": "1\n}", "new": "9\n}"}),
            work.path(),
        ),
        "failed",
    );
    assert_eq!(
        message(&printed),
        "cannot edit lib.rs: `old` matches 2 times, on lines 2, 6: add surrounding lines to \
         `old` to make it unique, or set `replace_all`"
    );
    assert_eq!(printed["state_effect"], "mutate");
    assert_eq!(printed["resource_id"], "file:lib.rs");

    let printed = ended(
        &invoke(
            &json!({"path": "lib.rs", "old": "pub fn one() -> i32 {\n  1\n}", "new": "x"}),
            work.path(),
        ),
        "failed",
    );
    assert_eq!(
        message(&printed),
        "cannot edit lib.rs: `old` was not found (it must match exactly, whitespace included); \
         its first line, trimmed, appears on line 5: read those lines again and copy them exactly"
    );

    let many = "hit\n".repeat(30);
    std::fs::write(work.path().join("many.txt"), &many).unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "many.txt", "old": "hit", "new": "x"}),
            work.path(),
        ),
        "failed",
    );
    let lines: Vec<String> = (1..=20).map(|n| n.to_string()).collect();
    assert!(
        message(&printed).contains(&format!(
            "matches 30 times, on lines {} (first 20 shown)",
            lines.join(", ")
        )),
        "{printed:#}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIB);
    assert_eq!(
        std::fs::read_to_string(work.path().join("many.txt")).unwrap(),
        many
    );
}

#[test]
fn a_stale_expected_sha256_is_refused_naming_both_digests() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("lib.rs");
    std::fs::write(&file, LIB).unwrap();
    let stale = sha256(b"what the model read before");
    let printed = ended(
        &invoke(
            &json!({"path": "lib.rs", "old": "a + 1", "new": "a + 2", "expected_sha256": stale}),
            work.path(),
        ),
        "failed",
    );
    assert_eq!(
        message(&printed),
        format!(
            "cannot edit lib.rs: it changed since you read it: `expected_sha256` is {stale} but \
             the file's sha256 is {}; read it again and redo the edit",
            sha256(LIB.as_bytes())
        )
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIB);

    // The current digest lets the edit through.
    ended(
        &invoke(
            &json!({"path": "lib.rs", "old": "a + 1", "new": "a + 2",
                    "expected_sha256": sha256(LIB.as_bytes())}),
            work.path(),
        ),
        "passed",
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        LIB.replace("a + 1", "a + 2")
    );
}

#[test]
fn bad_input_is_refused_naming_the_problem_and_the_file_is_unchanged() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("lib.rs");
    std::fs::write(&file, LIB).unwrap();

    // Input the schema rules out never reaches the tool: `mur` refuses it (E-RUN-009, exit
    // 2) naming the field, as a session refuses it to the model.
    let schema_cases = [
        (
            json!({"path": "lib.rs", "old": "a + 1"}),
            "\"new\" is a required property",
        ),
        (
            json!({"path": "lib.rs", "old": "", "new": "x"}),
            "/old: \"\" is shorter than 1 character",
        ),
        (
            json!({"path": "lib.rs", "old": "a", "new": "b", "force": true}),
            "('force' was unexpected)",
        ),
        (
            json!({"path": "lib.rs", "old": "a", "new": "b", "replace_all": "yes"}),
            "/replace_all: \"yes\" is not of type \"boolean\"",
        ),
    ];
    for (input, want) in schema_cases {
        let output = invoke(&input, work.path());
        assert_eq!(output.code, 2, "{input}: {output:#?}");
        let printed = output.json();
        assert_eq!(printed["error"]["code"], "E-RUN-009", "{input}");
        let message = printed["error"]["message"].as_str().unwrap();
        assert!(message.contains(want), "{input}: {message}");
    }

    // Input the tool itself refuses: a failed result naming the problem.
    let absolute = file.display().to_string();
    let cases = [
        (
            json!({"path": absolute, "old": "a + 1", "new": "x"}),
            "an absolute path is not permitted",
        ),
        (
            json!({"path": "lib.rs", "old": "a + 1", "new": "x", "expected_sha256": "abc"}),
            "`expected_sha256` must be 64 hex digits",
        ),
        (
            json!({"path": "lib.rs", "old": "a + 1", "new": "a + 1"}),
            "`old` and `new` are the same",
        ),
        (
            json!({"path": ".", "old": "a", "new": "b"}),
            "it is a directory",
        ),
        (
            json!({"path": "absent.rs", "old": "a", "new": "b"}),
            "cannot edit absent.rs: no such file or directory",
        ),
    ];
    for (input, want) in cases {
        let printed = ended(&invoke(&input, work.path()), "failed");
        assert!(message(&printed).contains(want), "{input}: {printed:#}");
    }
    std::fs::write(work.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "latin1.txt", "old": "caf", "new": "x"}),
            work.path(),
        ),
        "failed",
    );
    assert!(
        message(&printed).contains("not UTF-8 text (invalid byte at offset 3)"),
        "{printed:#}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), LIB);
    assert_eq!(
        std::fs::read(work.path().join("latin1.txt")).unwrap(),
        b"caf\xe9\n"
    );
}

#[test]
fn paths_leaving_the_workspace_and_planted_links_are_refused_outside_untouched() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("secret.txt");
    std::fs::write(&outside, "token = 1\n").unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", work.join("relative-link.txt")).unwrap();
    std::os::unix::fs::symlink(root.path(), work.join("up")).unwrap();

    let cases = [
        ("../secret.txt", "cannot leave it"),
        ("sub/../../secret.txt", "cannot leave it"),
        (
            "link.txt",
            "it is a symbolic link that leads outside the workspace",
        ),
        (
            "relative-link.txt",
            "it is a symbolic link that leads outside the workspace",
        ),
        ("up/secret.txt", "permission denied"),
    ];
    for (path, want) in cases {
        let printed = ended(
            &invoke(
                &json!({"path": path, "old": "token = 1", "new": "token = 2"}),
                &work,
            ),
            "failed",
        );
        assert!(message(&printed).contains(want), "{path}: {printed:#}");
        assert!(
            message(&printed).starts_with(&format!("cannot edit {path}: ")),
            "{path}: {printed:#}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "token = 1\n");
    }
    // Nothing was written anywhere: no temp file beside the secret or in the workspace.
    let mut names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["secret.txt", "work"]);
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 3);
}

#[test]
fn big_files_and_big_inputs_are_refused_without_reading_them_whole() {
    let work = tempfile::tempdir().unwrap();
    // A 20 MiB file of text: refused by its size.
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let big = line.repeat(20 * 1024 * 1024 / line.len());
    std::fs::write(work.path().join("big.txt"), &big).unwrap();
    let printed = ended(
        &invoke(
            &json!({"path": "big.txt", "old": "0123", "new": "x"}),
            work.path(),
        ),
        "failed",
    );
    assert_eq!(
        message(&printed),
        "cannot edit big.txt: it is 20971520 bytes, over the 16777216-byte limit of edit-file"
    );
    assert_eq!(
        std::fs::metadata(work.path().join("big.txt"))
            .unwrap()
            .len(),
        20 * 1024 * 1024
    );

    // A 4 MiB `new`: refused before the file is touched.
    std::fs::write(work.path().join("small.txt"), "a\n").unwrap();
    let input = json!({"path": "small.txt", "old": "a", "new": "b".repeat(4 * 1024 * 1024)});
    let printed = ended(
        &invoke_stdin(input.to_string().into_bytes(), work.path()),
        "failed",
    );
    assert_eq!(
        message(&printed),
        "cannot edit small.txt: `new` is 4194304 bytes, over the 1048576-byte limit: make \
         smaller edits"
    );

    // 64 KiB of `a`, each replaced by 1 MiB: 64 GiB asked for, refused before it is built.
    std::fs::write(work.path().join("many.txt"), "a".repeat(64 * 1024)).unwrap();
    let input = json!({"path": "many.txt", "old": "a", "new": "b".repeat(1024 * 1024),
                       "replace_all": true});
    let printed = ended(
        &invoke_stdin(input.to_string().into_bytes(), work.path()),
        "failed",
    );
    assert!(
        message(&printed).contains("over the 16777216-byte limit of edit-file"),
        "{printed:#}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("small.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::metadata(work.path().join("many.txt"))
            .unwrap()
            .len(),
        64 * 1024
    );
}

const SESSION: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: c1, name: edit-file, input: { path: src/lib.rs, old: "1\n}", new: "2\n}" } } ]
  - reply:
      tool_calls:
        - { id: c2, name: edit-file, input: { path: src/lib.rs, old: "    a + 1\n", new: "    a + 2\n" } }
        - { id: c3, name: edit-file, input: { path: ../secret.txt, old: "token", new: "stolen" } }
        - { id: c4, name: edit-file, input: { path: link.txt, old: "token", new: "stolen" } }
        - { id: c5, name: edit-file, input: { path: src/lib.rs, old: "    1\n" } }
  - reply: { text: "Fixed add." }
"#;

#[test]
fn in_a_session_the_model_edits_the_workspace_and_refusals_reach_it() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("secret.txt");
    std::fs::write(&outside, "token = 1\n").unwrap();
    let workspace = root.path().join("checkout");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/lib.rs"), LIB).unwrap();
    std::os::unix::fs::symlink(&outside, workspace.join("link.txt")).unwrap();

    let emulator = Emulator::builder(Script::from_yaml(SESSION).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = capsule(&root.path().join("capsule"), &emulator.url());
    let report = super::run_session(&dir, Some(&workspace), "make add add two");

    // The edit landed in place; the outside file is untouched.
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/lib.rs")).unwrap(),
        LIB.replace("a + 1", "a + 2")
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "token = 1\n");

    let calls = super::tool_calls(&report);
    let seen: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("c1", "failed"),
            ("c2", "passed"),
            ("c3", "failed"),
            ("c4", "failed"),
            ("c5", "refused")
        ],
        "{calls:#?}"
    );
    for call in &calls[..4] {
        assert_eq!(call["state_effect"], "mutate", "{call}");
    }
    assert_eq!(calls[0]["resource_id"], "file:src/lib.rs");
    assert_eq!(calls[1]["resource_id"], "file:src/lib.rs");
    assert_eq!(
        calls[0]["summary"],
        "cannot edit src/lib.rs: `old` matches 2 times, on lines 2, 6: add surrounding lines \
         to `old` to make it unique, or set `replace_all`"
    );
    assert_eq!(
        calls[1]["summary"],
        "edited src/lib.rs: 1 replacement, line 2"
    );

    // What the model was handed back: the count and lines, then the refusals.
    let requests = emulator.requests();
    let second = requests[1].body.to_string();
    assert!(
        second.contains("matches 2 times, on lines 2, 6"),
        "{second}"
    );
    let third = requests[2].body.to_string();
    assert!(
        third.contains("edited src/lib.rs: 1 replacement, line 2"),
        "{third}"
    );
    assert!(third.contains("cannot leave it"), "{third}");
    assert!(
        third.contains("symbolic link that leads outside the workspace"),
        "{third}"
    );
    // The call missing `new` was refused by the schema, before the tool ran.
    assert_eq!(calls[4]["error"]["code"], "E-RUN-009");
    assert!(third.contains("is a required property"), "{third}");
}
