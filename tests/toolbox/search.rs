//! `search` through the real `mur`: `mur tool invoke` of `artifacts/search` on a seeded
//! workdir (matches with paths and line numbers, globs, `.gitignore`d, hidden and binary files
//! skipped, context, the match and byte bounds and their note, bad input, paths and links
//! leading out of the workdir, a big tree and a big file bounded), and one session where the
//! model calls it through the provider emulator.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput};
use serde_json::{Value, json};

use super::KEY;

fn invoke(input: &Value, workdir: &Path) -> MurOutput {
    super::invoke("search", input, workdir)
}

/// A capsule (in `dir/capsule`) on the Anthropic driver against `emulator`, with `search`.
fn capsule(dir: &Path, emulator: &Emulator) -> PathBuf {
    super::capsule(
        &dir.join("capsule"),
        &emulator.url(),
        "searcher",
        &["search"],
        "  system_prompt: \"You find code.\"\n  max_turns: 4",
    )
}

/// The printed result of a call that passed.
fn passed(input: Value, workdir: &Path) -> Value {
    let output = invoke(&input, workdir);
    assert_eq!(output.code, 0, "{input}: {output:#?}");
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "passed", "{printed:#}");
    assert_eq!(printed["state_effect"], "read");
    printed
}

/// The message of a call that failed (exit 1, status `failed`).
fn failed(input: Value, workdir: &Path) -> String {
    let output = invoke(&input, workdir);
    assert_eq!(output.code, 1, "{input}: {output:#?}");
    let printed = output.json();
    assert_eq!(printed["result"]["status"], "failed", "{printed:#}");
    printed["output"].as_str().unwrap().to_string()
}

fn text(printed: &Value) -> &str {
    printed["output"].as_str().unwrap()
}

fn seed(dir: &Path, files: &[(&str, &[u8])]) {
    for (path, content) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
}

/// A small project: sources, an ignored build directory, a log, a hidden file, a binary.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    seed(
        dir.path(),
        &[
            (".gitignore", b"target/\n*.log\n"),
            (
                "src/main.rs",
                b"fn main() {\n    let total = add(1, 2);\n    println!(\"{total}\");\n}\n",
            ),
            (
                "src/lib.rs",
                b"pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
            ),
            (
                "tests/add.rs",
                b"#[test]\nfn adds() { assert_eq!(add(1, 2), 3); }\n",
            ),
            ("README.md", b"Call add(1, 2).\n"),
            ("target/debug/out.rs", b"fn add() {}\n"),
            ("build.log", b"add(1, 2) failed\n"),
            (".env", b"add(1, 2)=secret\n"),
            ("logo.png", b"\x89PNG\r\n\x1a\n\0\0add(1, 2)"),
        ],
    );
    dir
}

#[test]
fn matches_come_with_paths_and_line_numbers_sorted_skipping_ignored_hidden_and_binary_files() {
    let dir = project();
    let printed = passed(json!({"pattern": r"add\(1, 2\)"}), dir.path());
    assert_eq!(
        text(&printed),
        "README.md:1:Call add(1, 2).\n\
         src/main.rs:2:    let total = add(1, 2);\n\
         tests/add.rs:2:fn adds() { assert_eq!(add(1, 2), 3); }\n\
         \n\
         3 matches in 3 files (searched 4 files; skipped 1 binary file)"
    );
    assert_eq!(
        printed["result"]["summary"],
        "3 matches in 3 files (searched 4 files; skipped 1 binary file)"
    );
    assert_eq!(printed["result"]["truncated"], false);

    // Asked for: hidden and ignored files too (the binary one stays skipped).
    let printed = passed(
        json!({"pattern": r"add\(1, 2\)", "hidden": true, "no_ignore": true}),
        dir.path(),
    );
    let out = text(&printed);
    assert!(out.starts_with(".env:1:add(1, 2)=secret\n"), "{out}");
    assert!(out.contains("\nbuild.log:1:add(1, 2) failed\n"), "{out}");
    assert!(
        out.ends_with("5 matches in 5 files (searched 8 files; skipped 1 binary file)"),
        "{out}"
    );
}

#[test]
fn include_and_exclude_globs_choose_the_files() {
    let dir = project();
    let printed = passed(
        json!({"pattern": "add", "include": ["*.rs"], "exclude": ["tests/**"]}),
        dir.path(),
    );
    assert_eq!(
        text(&printed),
        "src/lib.rs:1:pub fn add(a: i32, b: i32) -> i32 {\n\
         src/main.rs:2:    let total = add(1, 2);\n\
         \n\
         2 matches in 2 files (searched 2 files)"
    );
    let printed = passed(
        json!({"pattern": "ADD", "case_insensitive": true, "include": ["tests/*.rs", "*.md"]}),
        dir.path(),
    );
    assert_eq!(
        text(&printed),
        "README.md:1:Call add(1, 2).\n\
         tests/add.rs:2:fn adds() { assert_eq!(add(1, 2), 3); }\n\
         \n\
         2 matches in 2 files (searched 2 files)"
    );
    // `path` narrows the search to a directory; fixed strings are taken literally.
    let printed = passed(
        json!({"pattern": "add(1", "fixed_strings": true, "path": "./src/"}),
        dir.path(),
    );
    assert_eq!(
        text(&printed),
        "src/main.rs:2:    let total = add(1, 2);\n\n1 match in 1 file (searched 2 files)"
    );
}

#[test]
fn context_lines_surround_matches() {
    let dir = project();
    let printed = passed(
        json!({"pattern": "a - b", "context": 1, "path": "src"}),
        dir.path(),
    );
    assert_eq!(
        text(&printed),
        "src/lib.rs-1-pub fn add(a: i32, b: i32) -> i32 {\n\
         src/lib.rs:2:    a - b\n\
         src/lib.rs-3-}\n\
         \n\
         1 match in 1 file (searched 2 files)"
    );
}

#[test]
fn the_match_bound_and_the_byte_bound_say_how_much_more_there_was() {
    let dir = tempfile::tempdir().unwrap();
    let many: String = (1..=500).map(|i| format!("hit {i}\n")).collect();
    seed(
        dir.path(),
        &[("many.txt", many.as_bytes()), ("z.txt", b"hit z\n")],
    );
    let printed = passed(json!({"pattern": "hit", "max_matches": 3}), dir.path());
    assert_eq!(
        text(&printed),
        "many.txt:1:hit 1\nmany.txt:2:hit 2\nmany.txt:3:hit 3\n\n\
         501 matches in 2 files (searched 2 files)\n\
         ... and 498 more matches not shown (max_matches 3 reached)"
    );
    assert_eq!(printed["result"]["truncated"], true);
    assert_eq!(
        printed["result"]["summary"],
        "501 matches in 2 files (searched 2 files)"
    );

    // Long lines: each is cut at 500 characters, and 64 KiB of them stop the output.
    let long: String = (0..2000)
        .map(|i| format!("hit {i:04} {}\n", "x".repeat(800)))
        .collect();
    seed(dir.path(), &[("long.txt", long.as_bytes())]);
    let printed = passed(
        json!({"pattern": "hit", "max_matches": 2000, "include": ["long.txt"]}),
        dir.path(),
    );
    let out = text(&printed);
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "long.txt:1:hit 0000 {} [... line cut: 309 more characters]",
            "x".repeat(491)
        )
    );
    assert!(out.len() < 64 * 1024 + 512, "{}", out.len());
    let shown = out.lines().filter(|l| l.starts_with("long.txt:")).count();
    assert!((100..2000).contains(&shown), "{shown}");
    assert!(
        out.contains(&format!(
            "2000 matches in 1 file (searched 1 file)\n... and {} more matches not shown \
             (stopped after ",
            2000 - shown
        )),
        "{}",
        &out[out.len() - 300..]
    );
    assert_eq!(printed["result"]["truncated"], true);
}

#[test]
fn the_same_query_is_the_same_resource() {
    let dir = project();
    let a = passed(json!({"pattern": "add"}), dir.path());
    let b = passed(
        json!({"pattern": "add", "path": "./", "context": 0, "max_matches": 200}),
        dir.path(),
    );
    let c = passed(json!({"pattern": "add", "path": "src"}), dir.path());
    let id = a["resource_id"].as_str().unwrap();
    assert!(
        id.starts_with("search:") && id.len() == "search:".len() + 16,
        "{id}"
    );
    assert!(id["search:".len()..].chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(a["resource_id"], b["resource_id"]);
    assert_ne!(a["resource_id"], c["resource_id"]);
}

#[test]
fn a_bad_regex_or_bad_input_is_a_failed_result_naming_it() {
    let dir = project();
    let message = failed(json!({"pattern": "fn (main"}), dir.path());
    assert!(
        message.starts_with("invalid regular expression \"fn (main\": "),
        "{message}"
    );
    assert!(message.contains("unclosed group"), "{message}");

    for (input, expected) in [
        (
            json!({"pattern": "x", "include": ["a[b"]}),
            "invalid `include` glob \"a[b\"",
        ),
        (
            json!({"pattern": "x", "exclude": ["{a"]}),
            "invalid `exclude` glob \"{a\"",
        ),
        (
            json!({"pattern": "x", "path": "absent"}),
            "cannot search absent: no such file",
        ),
        (json!({"pattern": "x", "path": ""}), "`path` is empty"),
    ] {
        let message = failed(input.clone(), dir.path());
        assert!(message.contains(expected), "{input}: {message}");
    }

    // Input the schema does not allow is refused before the tool runs, naming the field.
    for (input, expected) in [
        (json!({"path": "src"}), "\"pattern\" is a required property"),
        (json!({"pattern": "x", "nope": 1}), "nope"),
        (json!({"pattern": "x", "context": 11}), "11"),
        (json!({"pattern": "x", "max_matches": 5000}), "5000"),
        (json!({"pattern": 7}), "7"),
    ] {
        let output = invoke(&input, dir.path());
        assert_eq!(output.code, 2, "{input}: {output:#?}");
        let printed = output.json();
        assert_eq!(printed["error"]["code"], "E-RUN-009", "{input}");
        let message = printed["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{input}: {message}");
    }
}

#[test]
fn paths_and_links_leading_out_of_the_workdir_are_refused_and_never_read() {
    let outside = tempfile::tempdir().unwrap();
    seed(
        outside.path(),
        &[
            ("secret.txt", b"needle: the outside secret\n"),
            ("dir/inner.txt", b"needle: the outside inner\n"),
        ],
    );
    let work = outside.path().join("work");
    seed(&work, &[("mine.txt", b"needle: mine\n")]);
    std::os::unix::fs::symlink(outside.path().join("dir"), work.join("dirlink")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), work.join("filelink")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", work.join("rellink")).unwrap();

    // The whole workdir: the planted links are not followed.
    for hidden in [false, true] {
        let printed = passed(
            json!({"pattern": "needle", "hidden": hidden, "no_ignore": true}),
            &work,
        );
        assert_eq!(
            text(&printed),
            "mine.txt:1:needle: mine\n\n1 match in 1 file (searched 1 file)"
        );
    }
    let absolute = outside.path().join("secret.txt").display().to_string();
    let cases = [
        ("../", "cannot leave it"),
        ("../secret.txt", "cannot leave it"),
        ("dirlink/../../secret.txt", "cannot search"),
        (absolute.as_str(), "an absolute path is not permitted"),
        (
            "filelink",
            "a symbolic link leading out of the session workdir",
        ),
        (
            "rellink",
            "a symbolic link leading out of the session workdir",
        ),
        (
            "dirlink",
            "a symbolic link leading out of the session workdir",
        ),
        ("dirlink/inner.txt", "cannot search dirlink/inner.txt"),
    ];
    for (path, expected) in cases {
        let output = invoke(&json!({"pattern": "needle", "path": path}), &work);
        assert_eq!(output.code, 1, "{path}: {output:#?}");
        assert!(
            !output.stdout.contains("outside"),
            "{path}: {}",
            output.stdout
        );
        let printed = output.json();
        assert_eq!(printed["result"]["status"], "failed");
        let message = printed["output"].as_str().unwrap();
        assert!(message.contains(expected), "{path}: {message}");
    }
}

#[test]
fn a_big_tree_and_a_big_file_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // 3000 files with a match each, a 40 MiB file of matching lines, and a file whose one
    // line is 20 MiB (more than the searcher holds).
    for i in 0..3000 {
        seed(
            dir.path(),
            &[(
                &format!("tree/d{:02}/f{i:04}.txt", i % 30),
                b"needle here\n",
            )],
        );
    }
    let line = format!("needle {}\n", "y".repeat(120));
    let big = line.repeat(40 * 1024 * 1024 / line.len());
    let mut one_line = vec![b'z'; 20 * 1024 * 1024];
    one_line.extend_from_slice(b" needle\n");
    seed(
        dir.path(),
        &[("big.txt", big.as_bytes()), ("huge-line.txt", &one_line)],
    );
    let big_lines = big.len() / line.len();

    let printed = passed(
        json!({"pattern": "needle", "max_matches": 2000}),
        dir.path(),
    );
    let out = text(&printed);
    assert!(out.len() < 64 * 1024 + 1024, "{}", out.len());
    assert!(out.starts_with("big.txt:1:needle yyy"), "{}", &out[..200]);
    let total = big_lines + 3000;
    let shown = out.lines().filter(|l| l.contains(":needle ")).count();
    assert!(
        out.contains(&format!(
            "{total} matches in 3001 files (searched 3001 files)\n... and {} more matches \
             not shown (stopped after ",
            total - shown
        )),
        "{}",
        &out[out.len() - 400..]
    );
    assert!(
        out.ends_with("could not search 1 file: huge-line.txt (a line longer than 8 MiB)"),
        "{}",
        &out[out.len() - 400..]
    );
    assert_eq!(printed["result"]["truncated"], true);
}

/// The text of the `tool_result` block answering `call_id` in an Anthropic request body.
fn tool_result(body: &Value, call_id: &str) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result" && b["tool_use_id"] == call_id)
        .map(|b| b["content"].to_string())
        .collect()
}

#[test]
fn in_a_session_the_model_searches_the_workspace_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let checkout = project();
    let emulator = Emulator::builder(
        Script::from_yaml(
            r#"
turns:
  - reply:
      tool_calls:
        - { id: s1, name: search, input: { pattern: "a - b", include: ["*.rs"], context: 1 } }
        - { id: s2, name: search, input: { pattern: "add((" } }
        - { id: s3, name: search, input: { pattern: "needle", path: "../" } }
  - reply: { text: "Found it: {{tool_result:s1}}" }
"#,
        )
        .expect("script"),
    )
    .api_key(KEY)
    .start()
    .expect("emulator");
    let capsule = capsule(dir.path(), &emulator);
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .arg("run")
        .arg(&capsule)
        .arg("--workdir")
        .arg(dir.path().join("runs"))
        .arg("--workspace")
        .arg(checkout.path())
        .args(["--json", "--task", "Where is the bug in add?"])
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{report:#}");

    // The model got the search's output, the regex error and the refusal.
    let requests: Vec<_> = emulator
        .requests()
        .into_iter()
        .filter(|r| r.turn.is_some())
        .collect();
    assert_eq!(requests.len(), 2);
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("\"search\""), "{offered}");
    let found = tool_result(&requests[1].body, "s1");
    assert!(
        found.contains(
            "src/lib.rs-1-pub fn add(a: i32, b: i32) -> i32 {\\nsrc/lib.rs:2:    a - b\\nsrc/lib.rs-3-}"
        ),
        "{found}"
    );
    assert!(
        found.contains("1 match in 1 file (searched 3 files)"),
        "{found}"
    );
    let bad = tool_result(&requests[1].body, "s2");
    assert!(bad.contains("invalid regular expression"), "{bad}");
    let out = tool_result(&requests[1].body, "s3");
    assert!(out.contains("cannot leave it"), "{out}");

    // The answer quotes it; the trace carries what the tool declared.
    let answer =
        std::fs::read_to_string(report["tasks"][0]["result_path"].as_str().unwrap()).unwrap();
    assert!(answer.contains("src/lib.rs:2:    a - b"), "{answer}");
    let trace = std::fs::read_to_string(report["trace_path"].as_str().unwrap()).unwrap();
    let calls: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event_type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    let status: Vec<&str> = calls
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["passed", "failed", "failed"]);
    for call in &calls {
        assert_eq!(call["tool_name"], "search");
        assert_eq!(call["state_effect"], "read");
        assert!(call["resource_id"].as_str().unwrap().starts_with("search:"));
    }
}
