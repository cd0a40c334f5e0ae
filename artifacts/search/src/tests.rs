//! The core on the host: walk, match, bounds, notes and refusals, and a property test that
//! no pattern or glob makes it panic.

use std::fs;
use std::path::Path;

use proptest::prelude::*;

use super::*;

fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let full = dir.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, content).unwrap();
    }
    dir
}

fn query(pattern: &str) -> Query {
    Query {
        pattern: pattern.to_string(),
        ..Query::default()
    }
}

fn run(root: &Path, q: &Query) -> Report {
    search(root, q).unwrap_or_else(|e| panic!("search failed: {e}"))
}

#[test]
fn matches_come_with_paths_and_line_numbers_in_path_order() {
    let dir = tree(&[
        ("b.txt", b"one\nneedle two\n"),
        ("a/z.txt", b"needle\n"),
        ("a.txt", b"x\ny\nneedle\n"),
    ]);
    let report = run(dir.path(), &query("needle"));
    assert_eq!(
        report.text,
        "a/z.txt:1:needle\na.txt:3:needle\nb.txt:2:needle two\n\n\
         3 matches in 3 files (searched 3 files)"
    );
    assert_eq!(report.summary, "3 matches in 3 files (searched 3 files)");
    assert!(!report.truncated);
}

#[test]
fn gitignored_hidden_and_binary_files_are_skipped_unless_asked() {
    let dir = tree(&[
        (".gitignore", b"build/\n*.log\n"),
        ("build/out.txt", b"needle\n"),
        ("run.log", b"needle\n"),
        (".secret/x.txt", b"needle\n"),
        ("blob.bin", b"needle\0\x01\x02"),
        ("kept.txt", b"needle\n"),
    ]);
    let report = run(dir.path(), &query("needle"));
    assert_eq!(
        report.text,
        "kept.txt:1:needle\n\n1 match in 1 file (searched 1 file; skipped 1 binary file)"
    );
    let mut all = query("needle");
    all.hidden = true;
    all.no_ignore = true;
    let report = run(dir.path(), &all);
    assert_eq!(report.total, 4, "{}", report.text);
    assert_eq!(report.binary_skipped, 1);
}

#[test]
fn include_and_exclude_globs() {
    let dir = tree(&[
        ("src/a.rs", b"needle\n"),
        ("src/deep/b.rs", b"needle\n"),
        ("src/c.md", b"needle\n"),
        ("tests/t.rs", b"needle\n"),
    ]);
    let mut q = query("needle");
    q.include = vec!["*.rs".into()];
    q.exclude = vec!["tests".into()];
    let report = run(dir.path(), &q);
    assert!(
        report
            .text
            .starts_with("src/a.rs:1:needle\nsrc/deep/b.rs:1:needle\n\n")
    );
    assert_eq!(report.total, 2);

    let mut q = query("needle");
    q.include = vec!["src/*".into()];
    let report = run(dir.path(), &q);
    assert_eq!(
        report.total, 2,
        "`*` stays within a directory: {}",
        report.text
    );

    let mut q = query("needle");
    q.exclude = vec!["src/**/*.rs".into()];
    let report = run(dir.path(), &q);
    assert!(
        report
            .text
            .starts_with("src/c.md:1:needle\ntests/t.rs:1:needle\n")
    );
}

#[test]
fn context_lines_and_group_separators() {
    let dir = tree(&[("f.txt", b"1\n2\nhit\n4\n5\n6\n7\nhit\n9\n")]);
    let mut q = query("hit");
    q.context = Some(1);
    let report = run(dir.path(), &q);
    assert_eq!(
        report.text,
        "f.txt-2-2\nf.txt:3:hit\nf.txt-4-4\n--\nf.txt-7-7\nf.txt:8:hit\nf.txt-9-9\n\n\
         2 matches in 1 file (searched 1 file)"
    );
}

#[test]
fn the_match_bound_says_how_many_more() {
    let body = "hit\n".repeat(50);
    let dir = tree(&[("a.txt", body.as_bytes()), ("b.txt", b"hit\n")]);
    let mut q = query("hit");
    q.max_matches = Some(10);
    let report = run(dir.path(), &q);
    assert_eq!(report.shown, 10);
    assert_eq!(report.total, 51);
    assert!(report.truncated);
    assert!(
        report.text.ends_with(
            "51 matches in 2 files (searched 2 files)\n\
             ... and 41 more matches not shown (max_matches 10 reached)"
        ),
        "{}",
        report.text
    );
}

#[test]
fn the_byte_bound_cuts_the_output_and_says_so() {
    let line = format!("hit {}\n", "x".repeat(400));
    let dir = tree(&[("big.txt", line.repeat(1000).as_bytes())]);
    let mut q = query("hit");
    q.max_matches = Some(2000);
    let report = run(dir.path(), &q);
    assert!(
        report.text.len() < OUTPUT_MAX + 512,
        "{}",
        report.text.len()
    );
    assert_eq!(report.total, 1000);
    assert!(report.shown < 1000 && report.shown > 100);
    assert!(report.truncated);
    let more = 1000 - report.shown;
    assert!(
        report.text.contains(&format!(
            "... and {more} more matches not shown (stopped after "
        )),
        "{}",
        &report.text[report.text.len() - 300..]
    );
}

#[test]
fn long_lines_are_cut() {
    let long = format!("hit{}\n", "é".repeat(1000));
    let dir = tree(&[("l.txt", long.as_bytes())]);
    let report = run(dir.path(), &query("hit"));
    let first = report.text.lines().next().unwrap();
    assert!(
        first.ends_with(" [... line cut: 503 more characters]"),
        "{first}"
    );
    assert_eq!(
        first.chars().count(),
        "l.txt:1:".len() + LINE_MAX_CHARS + 36
    );
}

#[test]
fn a_line_past_the_heap_limit_is_reported_not_held() {
    let mut huge = vec![b'a'; HEAP_LIMIT + 1024];
    huge.extend_from_slice(b"\nhit\n");
    let dir = tree(&[("huge.txt", &huge), ("ok.txt", b"hit\n")]);
    let report = run(dir.path(), &query("hit"));
    assert!(report.text.starts_with("ok.txt:1:hit\n"), "{}", report.text);
    assert!(
        report
            .text
            .ends_with("could not search 1 file: huge.txt (a line longer than 8 MiB)"),
        "{}",
        report.text
    );
}

#[test]
fn flags_fixed_strings_and_case() {
    let dir = tree(&[("f.txt", b"a.b\naxb\nA.B\n")]);
    let mut q = query("a.b");
    assert_eq!(run(dir.path(), &q).total, 2);
    q.fixed_strings = true;
    assert_eq!(run(dir.path(), &q).total, 1);
    q.case_insensitive = true;
    assert_eq!(run(dir.path(), &q).total, 2);
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let dir = tree(&[("f.txt", b"x\n")]);
    let err = search(dir.path(), &query("fn (")).unwrap_err();
    assert!(
        err.starts_with("invalid regular expression \"fn (\": "),
        "{err}"
    );
    assert!(err.contains("unclosed group"), "{err}");

    let mut q = query("x");
    q.context = Some(11);
    assert!(
        search(dir.path(), &q)
            .unwrap_err()
            .contains("`context` must be 0 to 10")
    );
    let mut q = query("x");
    q.max_matches = Some(0);
    assert!(
        search(dir.path(), &q)
            .unwrap_err()
            .contains("`max_matches` must be 1 to 2000")
    );
    let mut q = query("x");
    q.include = vec!["a[".into()];
    assert!(
        search(dir.path(), &q)
            .unwrap_err()
            .starts_with("invalid `include` glob \"a[\"")
    );
}

#[test]
fn paths_outside_the_workdir_are_refused_and_links_not_followed() {
    let outside = tree(&[
        ("secret.txt", b"needle outside\n"),
        ("d/s.txt", b"needle outside\n"),
    ]);
    let work = outside.path().join("work");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("in.txt"), "needle inside\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("d"), work.join("dirlink")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), work.join("filelink")).unwrap();

    let report = run(&work, &query("needle"));
    assert_eq!(
        report.text,
        "in.txt:1:needle inside\n\n1 match in 1 file (searched 1 file)"
    );
    for path in ["../", "sub/../..", "./.."] {
        let mut q = query("needle");
        q.path = Some(path.into());
        let err = search(&work, &q).unwrap_err();
        assert!(
            err.contains("cannot leave it") || err.contains("no such file"),
            "{path}: {err}"
        );
    }
    let mut q = query("needle");
    q.path = Some(outside.path().join("secret.txt").display().to_string());
    assert!(
        search(&work, &q)
            .unwrap_err()
            .contains("an absolute path is not permitted")
    );
    q.path = Some("dirlink".into());
    assert!(
        search(&work, &q)
            .unwrap_err()
            .contains("does not follow links")
    );
}

#[test]
fn a_path_narrows_the_search_and_keeps_the_root_gitignore() {
    let dir = tree(&[
        (".gitignore", b"gen.rs\n"),
        ("src/a.rs", b"needle\n"),
        ("src/gen.rs", b"needle\n"),
        ("other/b.rs", b"needle\n"),
    ]);
    let mut q = query("needle");
    q.path = Some("./src/".into());
    let report = run(dir.path(), &q);
    assert_eq!(
        report.text,
        "src/a.rs:1:needle\n\n1 match in 1 file (searched 1 file)"
    );
    // A file named outright is searched even when ignored.
    q.path = Some("src/gen.rs".into());
    assert_eq!(run(dir.path(), &q).total, 1);
    // An ignored directory named outright is not, and the note says why.
    let dir = tree(&[(".gitignore", b"build/\n"), ("build/x.txt", b"needle\n")]);
    q.path = Some("build".into());
    let report = run(dir.path(), &q);
    assert_eq!(report.total, 0);
    assert!(report.text.ends_with("build was not searched: it is hidden or ignored (set `hidden` or `no_ignore` to search it)"), "{}", report.text);
}

#[test]
fn a_binary_file_after_matches_takes_its_matches_back() {
    // The NUL comes after the searcher's first buffer, so matches were seen first.
    let mut content = "hit\n".repeat(40_000).into_bytes();
    content.extend_from_slice(b"\0tail\n");
    let dir = tree(&[("late.bin", &content), ("z.txt", b"hit\n")]);
    let report = run(dir.path(), &query("hit"));
    assert_eq!(
        report.text,
        "z.txt:1:hit\n\n1 match in 1 file (searched 1 file; skipped 1 binary file)"
    );
}

#[test]
fn the_resource_id_is_the_canonical_query() {
    let a: Query = serde_json::from_str(r#"{"pattern":"x"}"#).unwrap();
    let b: Query =
        serde_json::from_str(r#"{"pattern":"x","path":"./","max_matches":200,"context":0}"#)
            .unwrap();
    let c: Query = serde_json::from_str(r#"{"pattern":"y"}"#).unwrap();
    assert_eq!(a.resource_id(), b.resource_id());
    assert_ne!(a.resource_id(), c.resource_id());
    assert!(a.resource_id().starts_with("search:"));
    assert_eq!(a.resource_id().len(), "search:".len() + 16);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any pattern, flags and globs: a report or an error message, never a panic; a pattern
    /// the regex parser refuses is an error naming it.
    #[test]
    fn any_query_is_a_report_or_an_error(
        pattern in ".{0,40}",
        fixed in any::<bool>(),
        ci in any::<bool>(),
        context in 0u64..12,
        max in 0u64..2100,
        glob in proptest::option::of(".{0,12}"),
    ) {
        let dir = tree(&[("a.txt", b"alpha\nbeta (x)\n[gamma]\n"), ("b/c.md", b"\xff\xfe weird\n")]);
        let mut q = query(&pattern);
        q.fixed_strings = fixed;
        q.case_insensitive = ci;
        q.context = Some(context);
        q.max_matches = Some(max);
        q.include = glob.into_iter().collect();
        match search(dir.path(), &q) {
            Ok(report) => {
                prop_assert!(report.shown <= report.total);
                prop_assert!(report.text.len() <= OUTPUT_MAX + 1024);
            }
            Err(message) => prop_assert!(!message.is_empty()),
        }
    }

    /// An unclosed group is always refused, with the regex's own error.
    #[test]
    fn an_unclosed_group_is_an_error(body in "[a-zA-Z0-9 _.,:|-]{0,20}") {
        let dir = tree(&[("a.txt", b"alpha\n")]);
        let message = search(dir.path(), &query(&format!("({body}"))).unwrap_err();
        prop_assert!(message.starts_with("invalid regular expression"), "{}", message);
        prop_assert!(message.contains("unclosed group"), "{}", message);
    }
}
