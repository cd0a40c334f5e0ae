//! The file work of [`edit`] on a temp directory: the file on disk is the exact replacement or
//! untouched, and no temp file is left behind.

use super::*;
use murmur_guest::tool::Status;
use proptest::prelude::*;

fn args(path: &str, old: &str, new: &str) -> Args {
    Args {
        path: path.into(),
        old: old.into(),
        new: new.into(),
        replace_all: false,
        expected_sha256: None,
    }
}

fn message(result: &ToolResult) -> &str {
    result.data.as_deref().unwrap_or_default()
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_edit_rewrites_the_file_and_reports_lines_digest_and_effects() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "fn a() {\n    1\n}\nfn b() {}\n").unwrap();
    let result = edit(dir.path(), &args("./a.rs", "    1\n", "    2\n    3\n"));
    assert_eq!(result.status, Status::Passed, "{result:?}");
    let content = fs::read_to_string(dir.path().join("a.rs")).unwrap();
    assert_eq!(content, "fn a() {\n    2\n    3\n}\nfn b() {}\n");
    assert_eq!(
        message(&result),
        "edited ./a.rs: 1 replacement, lines 2-3\n2 |     2\n3 |     3\n4 | }\n5 | fn b() {}\n"
    );
    assert_eq!(
        result.summary.as_deref(),
        Some("edited ./a.rs: 1 replacement, lines 2-3")
    );
    assert_eq!(
        result.metadata_value("sha256"),
        Some(sha256_hex(content.as_bytes()).as_str())
    );
    assert_eq!(result.metadata_value("state_effect"), Some("mutate"));
    assert_eq!(result.metadata_value("resource_id"), Some("file:a.rs"));
    assert_eq!(names(dir.path()), ["a.rs"]);
}

#[test]
fn a_stale_digest_is_refused_naming_both_and_a_fresh_one_passes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("n.txt");
    fs::write(&file, "x = 1\n").unwrap();
    let stale = sha256_hex(b"x = 0\n");
    let actual = sha256_hex(b"x = 1\n");
    let mut a = args("n.txt", "1", "2");
    a.expected_sha256 = Some(stale.clone());
    let result = edit(dir.path(), &a);
    assert_eq!(result.status, Status::Failed);
    assert!(message(&result).contains(&stale), "{result:?}");
    assert!(message(&result).contains(&actual), "{result:?}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "x = 1\n");

    a.expected_sha256 = Some(actual.to_uppercase());
    assert_eq!(edit(dir.path(), &a).status, Status::Passed);
    assert_eq!(fs::read_to_string(&file).unwrap(), "x = 2\n");

    a.expected_sha256 = Some("abc".into());
    let result = edit(dir.path(), &a);
    assert!(
        message(&result).contains("`expected_sha256` must be 64 hex digits"),
        "{result:?}"
    );
}

#[test]
fn non_utf8_oversize_directories_and_links_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("bin"), b"ab\xffcd").unwrap();
    let result = edit(dir.path(), &args("bin", "ab", "x"));
    assert!(
        message(&result).contains("not UTF-8 text (invalid byte at offset 2)"),
        "{result:?}"
    );
    assert_eq!(fs::read(dir.path().join("bin")).unwrap(), b"ab\xffcd");

    let big = File::create(dir.path().join("big")).unwrap();
    big.set_len(MAX_FILE as u64 + 1).unwrap();
    let result = edit(dir.path(), &args("big", "a", "b"));
    assert!(
        message(&result).contains("over the 16777216-byte limit"),
        "{result:?}"
    );

    fs::create_dir(dir.path().join("sub")).unwrap();
    let result = edit(dir.path(), &args("sub", "a", "b"));
    assert!(message(&result).contains("is a directory"), "{result:?}");

    fs::write(dir.path().join("real.txt"), "a").unwrap();
    std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
    let result = edit(dir.path(), &args("link.txt", "a", "b"));
    assert!(
        message(&result).contains("symbolic link (to real.txt)"),
        "{result:?}"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("real.txt")).unwrap(),
        "a"
    );

    let result = edit(dir.path(), &args("missing.txt", "a", "b"));
    assert_eq!(
        message(&result),
        "cannot edit missing.txt: no such file or directory"
    );
}

#[test]
fn bad_input_is_refused_before_the_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), "a").unwrap();
    let result = edit(dir.path(), &args("/etc/passwd", "a", "b"));
    assert!(
        message(&result).contains("absolute path is not permitted"),
        "{result:?}"
    );
    let result = edit(dir.path(), &args("f", "", "b"));
    assert!(message(&result).contains("`old` is empty"), "{result:?}");
    let huge = "x".repeat(MAX_TEXT + 1);
    let result = edit(dir.path(), &args("f", "a", &huge));
    assert!(
        message(&result).contains("`new` is 1048577 bytes, over the 1048576-byte limit"),
        "{result:?}"
    );
    assert_eq!(fs::read_to_string(dir.path().join("f")).unwrap(), "a");
}

#[test]
fn an_edit_that_would_grow_the_file_past_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let content = "ab".repeat(10_000);
    fs::write(dir.path().join("f"), &content).unwrap();
    let mut a = args("f", "a", &"x".repeat(MAX_TEXT));
    a.replace_all = true;
    let result = edit(dir.path(), &a);
    assert!(message(&result).contains("would be"), "{result:?}");
    assert_eq!(fs::read_to_string(dir.path().join("f")).unwrap(), content);
}

#[test]
fn the_mode_of_a_usual_file_is_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, "a").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        edit(dir.path(), &args("f", "a", "b")).status,
        Status::Passed
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop::sample::select(vec!['a', 'b', '\n', '\r', 'é']), 0..30)
        .prop_map(|cs| cs.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// On disk: the exact replacement (computed with `str` methods) or the same bytes, and
    /// never a temp file left beside.
    #[test]
    fn the_file_is_the_exact_replacement_or_unchanged(
        content in prop_oneof![
            text(),
            proptest::collection::vec("[ab é]{0,5}", 1..6).prop_map(|l| l.join("\r\n")),
        ],
        old in prop_oneof![text(), "[ab]{1,2}"],
        new in text(),
        replace_all in any::<bool>(),
        with_digest in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        fs::write(&file, &content).unwrap();
        let mut a = args("f.txt", &old, &new);
        a.replace_all = replace_all;
        if with_digest {
            a.expected_sha256 = Some(sha256_hex(content.as_bytes()));
        }
        let result = edit(dir.path(), &a);
        let on_disk = fs::read_to_string(&file).unwrap();

        let crlf = content.contains("\r\n")
            && content.matches('\n').count() == content.matches("\r\n").count();
        let conv = |s: &str| if crlf { s.replace("\r\n", "\n").replace('\n', "\r\n") } else { s.to_string() };
        let (o, n) = (conv(&old), conv(&new));
        let overlapping = (0..content.len())
            .filter(|&i| content.is_char_boundary(i) && !o.is_empty() && content[i..].starts_with(&o))
            .count();
        let ok = !old.is_empty() && old != new && overlapping >= 1 && (replace_all || overlapping == 1);
        if ok {
            prop_assert_eq!(result.status, Status::Passed, "{:?}", result);
            let want = if replace_all { content.replace(&o, &n) } else { content.replacen(&o, &n, 1) };
            prop_assert_eq!(&on_disk, &want);
            let digest = sha256_hex(want.as_bytes());
            prop_assert_eq!(result.metadata_value("sha256"), Some(digest.as_str()));
        } else {
            prop_assert_eq!(result.status, Status::Failed, "{:?}", result);
            prop_assert_eq!(&on_disk, &content);
        }
        prop_assert_eq!(names(dir.path()), ["f.txt"]);
    }
}
