//! `list-files` through the real `mur`: `mur tool invoke` of `artifacts/list-files` on a planted
//! workspace, and a session whose model (the provider emulator) lists an in-place workspace.
//! Each test asserts the exact lines handed back: sorted, with kinds and sizes, filtered by the
//! glob, bounded with a count of the rest, `.gitignore` and hidden entries skipped, and nothing
//! from outside the workspace ever named (`..`, an absolute path, a planted link).

use std::path::{Path, PathBuf};

use murmur_testkit::MurOutput;
use murmur_testkit::emulator::{Emulator, Script};
use serde_json::{Value, json};

use super::{KEY, ended, text};

fn invoke(input: &Value, workdir: &Path) -> MurOutput {
    super::invoke("list-files", input, workdir)
}

/// A capsule on the Anthropic driver against `endpoint` with list-files as its one tool.
fn capsule(dir: &Path, endpoint: &str) -> PathBuf {
    super::capsule(
        dir,
        endpoint,
        "lister",
        &["list-files"],
        "  system_prompt: \"You look around.\"\n  max_turns: 4",
    )
}

/// A root holding `outside/` (names no listing may show) and `ws/`, the workspace: sources,
/// a `.gitignore`d `target/`, a hidden `.cache/`, and two planted links leading out of it.
fn planted() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir_all(outside.join("inner")).unwrap();
    std::fs::write(outside.join("outside-secret.txt"), "token").unwrap();
    std::fs::write(outside.join("inner/outside-deep.txt"), "token").unwrap();
    let ws = root.path().join("ws");
    for dir in ["src/bin", "target/debug", ".cache", "docs"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    std::fs::write(ws.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(ws.join("Cargo.toml"), "[package]\n").unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(ws.join("src/bin/main.rs"), "fn main() {}").unwrap();
    std::fs::write(ws.join("src-notes.md"), "x").unwrap();
    std::fs::write(ws.join("docs/guide.md"), "# Guide\n\nRead me.\n").unwrap();
    std::fs::write(ws.join("docs/build.log"), "noise").unwrap();
    std::fs::write(ws.join("target/debug/app"), "binary").unwrap();
    std::fs::write(ws.join(".cache/state"), "s").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("escape")).unwrap();
    std::os::unix::fs::symlink("../outside", ws.join("src/up")).unwrap();
    (root, ws)
}

/// No name from `outside/` shows up in `text`.
fn nothing_outside(text: &str) {
    for name in ["outside-secret", "outside-deep"] {
        assert!(!text.contains(name), "{name} leaked: {text}");
    }
}

#[test]
fn lists_sorted_with_kinds_and_sizes_skipping_ignored_and_hidden_and_not_following_links() {
    let (_root, ws) = planted();
    let printed = ended(&invoke(&json!({}), &ws), "passed");
    assert_eq!(
        text(&printed),
        "file 10 Cargo.toml\n\
         dir - docs\n\
         file 18 docs/guide.md\n\
         link - escape\n\
         dir - src\n\
         dir - src/bin\n\
         file 12 src/bin/main.rs\n\
         file 14 src/lib.rs\n\
         link - src/up\n\
         file 1 src-notes.md\n\
         10 entries\n"
    );
    assert_eq!(printed["state_effect"], "read");
    assert_eq!(printed["resource_id"], "list:.:**");
    assert_eq!(printed["result"]["truncated"], false);
    nothing_outside(text(&printed));

    // Asked for, the ignored and the hidden entries come too; links still are not followed.
    let all = ended(
        &invoke(&json!({"hidden": true, "no_ignore": true}), &ws),
        "passed",
    );
    let all = text(&all);
    for line in [
        "dir - .cache\n",
        "file 1 .cache/state\n",
        "file 14 .gitignore\n",
        "file 5 docs/build.log\n",
        "file 6 target/debug/app\n",
        "link - escape\n",
    ] {
        assert!(all.contains(line), "{line:?} missing: {all}");
    }
    assert!(all.ends_with("17 entries\n"), "{all}");
    nothing_outside(all);
}

#[test]
fn the_glob_filters_relative_to_path_and_max_bounds_with_a_count_of_the_rest() {
    let (_root, ws) = planted();
    let rs = ended(&invoke(&json!({"pattern": "**/*.rs"}), &ws), "passed");
    assert_eq!(
        text(&rs),
        "file 12 src/bin/main.rs\nfile 14 src/lib.rs\n2 entries\n"
    );
    // `*` stays in one directory; the pattern is relative to `path`, the lines are not.
    let top = ended(
        &invoke(&json!({"pattern": "*.rs", "path": "./src/"}), &ws),
        "passed",
    );
    assert_eq!(text(&top), "file 14 src/lib.rs\n1 entry\n");
    assert_eq!(top["resource_id"], "list:src:*.rs");
    let none = ended(&invoke(&json!({"pattern": "*.py"}), &ws), "passed");
    assert_eq!(text(&none), "no entries under . match *.py\n");

    let bounded = ended(&invoke(&json!({"max": 3}), &ws), "passed");
    assert_eq!(
        text(&bounded),
        "file 10 Cargo.toml\ndir - docs\nfile 18 docs/guide.md\n\
         3 of 10 entries listed; 7 more not listed (raise `max` or narrow `pattern` or `path`)\n"
    );
    assert_eq!(bounded["result"]["truncated"], true);

    // A directory the .gitignore skips is said to be skipped, and listed when asked.
    let ignored = ended(&invoke(&json!({"path": "target"}), &ws), "passed");
    assert!(
        text(&ignored).starts_with("target is skipped: it is hidden or an ignore file"),
        "{ignored:#}"
    );
    let unignored = ended(
        &invoke(&json!({"path": "target", "no_ignore": true}), &ws),
        "passed",
    );
    assert_eq!(
        text(&unignored),
        "dir - target/debug\nfile 6 target/debug/app\n2 entries\n"
    );
}

#[test]
fn leaving_the_workspace_is_refused_by_dots_absolute_paths_and_planted_links() {
    let (_root, ws) = planted();
    for (path, says) in [
        ("..", "cannot list ..: "),
        ("../outside", "cannot leave it"),
        ("src/../../outside", "cannot leave it"),
        ("/", "an absolute path is not permitted"),
        (
            ws.parent().unwrap().join("outside").to_str().unwrap(),
            "an absolute path is not permitted",
        ),
        (
            "escape",
            "it is a link, and list-files does not follow links",
        ),
        ("escape/inner", "cannot list escape/inner: "),
        ("src/up/inner", "cannot list src/up/inner: "),
    ] {
        let printed = ended(&invoke(&json!({"path": path}), &ws), "failed");
        assert!(text(&printed).contains(says), "{path}: {printed:#}");
        assert_eq!(printed["state_effect"], "read");
        nothing_outside(text(&printed));
    }
}

#[test]
fn bad_input_is_named() {
    let (_root, ws) = planted();
    let glob = ended(&invoke(&json!({"pattern": "src/[a-"}), &ws), "failed");
    assert_eq!(
        text(&glob),
        "invalid input: `pattern` \"src/[a-\" is not a valid glob: unclosed character class; \
         missing ']'"
    );
    let file = ended(&invoke(&json!({"path": "Cargo.toml"}), &ws), "failed");
    assert!(
        text(&file).contains("it is a file, not a directory"),
        "{file:#}"
    );
    let missing = ended(&invoke(&json!({"path": "nope"}), &ws), "failed");
    assert_eq!(
        text(&missing),
        "cannot list nope: no such file or directory"
    );
    // The schema bounds `max` before the tool runs.
    let over = invoke(&json!({"max": 5001}), &ws);
    assert_eq!(over.code, 2, "{over:#?}");
    assert_eq!(over.json()["error"]["code"], "E-RUN-009");
}

const SESSION: &str = r#"
turns:
  - reply:
      tool_calls:
        - { id: l1, name: list-files, input: { pattern: "**/*.md", max: 1 } }
        - { id: l2, name: list-files, input: { path: ../outside } }
        - { id: l3, name: list-files, input: { path: escape/inner } }
        - { id: l4, name: list-files, input: { pattern: "[" } }
  - reply: { text: "Looked around." }
"#;

#[test]
fn in_a_session_the_model_gets_the_listing_and_the_refusals() {
    let (root, ws) = planted();
    let emulator = Emulator::builder(Script::from_yaml(SESSION).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = capsule(&root.path().join("capsule"), &emulator.url());
    let report = super::run_session(&dir, Some(&ws), "what is here?");

    let trace = super::tool_calls(&report);
    let calls: Vec<(&str, &str, &str, &str)> = trace
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["state_effect"].as_str().unwrap(),
                c["resource_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("l1", "passed", "read", "list:.:**/*.md"),
            ("l2", "failed", "read", "list:../outside:**"),
            ("l3", "failed", "read", "list:escape/inner:**"),
            ("l4", "failed", "read", "list:.:["),
        ]
    );

    // What the model was handed back: the bounded listing, then each refusal.
    let second = emulator.requests()[1].body.to_string();
    assert!(
        second.contains(
            "file 18 docs/guide.md\\n1 of 2 entries listed; 1 more not listed (raise `max` or \
             narrow `pattern` or `path`)"
        ),
        "{second}"
    );
    assert!(
        second.contains("cannot list ../outside: ") && second.contains("cannot leave it"),
        "{second}"
    );
    assert!(second.contains("cannot list escape/inner: "), "{second}");
    assert!(
        second.contains("`pattern` \\\"[\\\" is not a valid glob"),
        "{second}"
    );
    nothing_outside(&second);
}
