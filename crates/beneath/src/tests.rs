use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

const SECRET: &[u8] = b"outside the directory";

/// One entry of a random tree beneath the handle's directory.
#[derive(Debug, Clone)]
enum Entry {
    File,
    Dir,
    Fifo,
    Link(&'static str),
}

/// Link targets: inside, outside (relative and absolute), dangling outside, self, loops.
const TARGETS: &[&str] = &[
    "a",
    "a/b",
    "../secret",
    "../../secret",
    "../escaped",
    "/etc/passwd",
    "OUTER/secret",
    "OUTER/escaped",
    ".",
    "..",
    "c",
];

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        3 => Just(Entry::File),
        3 => Just(Entry::Dir),
        1 => Just(Entry::Fifo),
        3 => proptest::sample::select(TARGETS).prop_map(Entry::Link),
    ]
}

fn rel_path() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(proptest::sample::select(&["a", "b", "c"][..]), 1..4)
}

fn query() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        proptest::collection::vec(
            proptest::sample::select(&["a", "b", "c", "a", "b", "..", "."][..]),
            1..5,
        ),
    )
        .prop_map(|(absolute, parts)| {
            let joined = parts.join("/");
            if absolute {
                format!("/{joined}")
            } else {
                joined
            }
        })
}

struct Tree {
    _outer: tempfile::TempDir,
    outer: PathBuf,
    root: PathBuf,
}

fn plant(entries: &[(Vec<&'static str>, Entry)]) -> Tree {
    let outer = tempfile::tempdir().unwrap();
    let outer_path = outer.path().canonicalize().unwrap();
    std::fs::write(outer_path.join("secret"), SECRET).unwrap();
    let root = outer_path.join("root");
    std::fs::create_dir(&root).unwrap();
    for (parts, entry) in entries {
        let path = root.join(parts.join("/"));
        // Plant only where the parent is a real directory (as sandboxed code could).
        let parent = path.parent().unwrap();
        if !std::fs::symlink_metadata(parent).is_ok_and(|m| m.is_dir())
            || std::fs::symlink_metadata(&path).is_ok()
        {
            continue;
        }
        match entry {
            Entry::File => std::fs::write(&path, parts.join("/")).unwrap(),
            Entry::Dir => std::fs::create_dir(&path).unwrap(),
            Entry::Fifo => {
                let c = CString::new(path.as_os_str().as_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            }
            Entry::Link(target) => {
                let target = target.replace("OUTER", &outer_path.display().to_string());
                std::os::unix::fs::symlink(target, &path).unwrap();
            }
        }
    }
    Tree {
        _outer: outer,
        outer: outer_path,
        root,
    }
}

/// What a walk that never follows links finds at `query`: `Some(true)` a regular file,
/// `Some(false)` something else or nothing, `None` a path that is not plain or passes a link.
fn expected(root: &Path, query: &str) -> Option<bool> {
    if query.starts_with('/') || query.split('/').any(|part| part == "..") {
        return None;
    }
    let parts: Vec<&str> = query
        .split('/')
        .filter(|p| *p != "." && !p.is_empty())
        .collect();
    let (last, dirs) = parts.split_last()?;
    let mut current = root.to_path_buf();
    for dir in dirs {
        current.push(dir);
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => return None,
            Ok(m) if m.is_dir() => {}
            _ => return Some(false),
        }
    }
    current.push(last);
    match std::fs::symlink_metadata(&current) {
        Ok(m) if m.file_type().is_symlink() => None,
        Ok(m) => Some(m.is_file()),
        Err(_) => Some(false),
    }
}

/// Everything outside `root` under `outer`, with its contents.
fn outside(tree: &Tree) -> BTreeSet<(String, Vec<u8>)> {
    std::fs::read_dir(&tree.outer)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != &tree.root)
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_default();
            (p.display().to_string(), bytes)
        })
        .collect()
}

fn tree_entries() -> impl Strategy<Value = Vec<(Vec<&'static str>, Entry)>> {
    proptest::collection::vec((rel_path(), entry()), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn reads_never_leave_the_directory_nor_follow_a_link(
        entries in tree_entries(),
        queries in proptest::collection::vec(query(), 1..6),
    ) {
        let tree = plant(&entries);
        let dir = BeneathDir::open(&tree.root).unwrap();
        for query in &queries {
            let read = dir.read(query, 1 << 20);
            match expected(&tree.root, query) {
                Some(true) => {
                    let bytes = read.unwrap();
                    prop_assert_ne!(&bytes[..], SECRET);
                    let clean: Vec<&str> =
                        query.split('/').filter(|p| *p != "." && !p.is_empty()).collect();
                    let want = std::fs::read(tree.root.join(clean.join("/"))).unwrap();
                    prop_assert_eq!(bytes, want);
                }
                Some(false) => prop_assert!(read.is_err(), "{query}: {read:?}"),
                None => prop_assert!(
                    matches!(read, Err(BeneathError::Symlink { .. } | BeneathError::BadPath { .. })),
                    "{query}: {read:?}"
                ),
            }
        }
    }

    #[test]
    fn writes_and_appends_never_leave_the_directory(
        entries in tree_entries(),
        queries in proptest::collection::vec((query(), any::<bool>()), 1..6),
    ) {
        let tree = plant(&entries);
        let before = outside(&tree);
        let dir = BeneathDir::open(&tree.root).unwrap();
        for (query, whole) in &queries {
            let wrote = if *whole {
                dir.write_whole(query, b"written")
            } else {
                dir.append(query, b"appended")
            };
            if wrote.is_ok() {
                // What was written is a regular file of its own at that very name.
                let clean: Vec<&str> =
                    query.split('/').filter(|p| *p != "." && !p.is_empty()).collect();
                let meta = std::fs::symlink_metadata(tree.root.join(clean.join("/"))).unwrap();
                prop_assert!(meta.is_file());
                prop_assert!(dir.is_file(query));
            }
            prop_assert_eq!(&outside(&tree), &before, "{} wrote outside", query);
        }
        prop_assert_eq!(std::fs::read(tree.outer.join("secret")).unwrap(), SECRET);
    }
}

#[test]
fn a_planted_link_at_a_host_file_is_replaced_not_written_through() {
    let tree = plant(&[(vec!["a"], Entry::Link("../secret"))]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    dir.write_whole("a", b"result").unwrap();
    assert_eq!(std::fs::read(tree.outer.join("secret")).unwrap(), SECRET);
    assert_eq!(std::fs::read(tree.root.join("a")).unwrap(), b"result");

    let tree = plant(&[(vec!["a"], Entry::Link("../secret"))]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    dir.append("a", b"line\n").unwrap();
    dir.append("a", b"line\n").unwrap();
    assert_eq!(std::fs::read(tree.outer.join("secret")).unwrap(), SECRET);
    assert_eq!(std::fs::read(tree.root.join("a")).unwrap(), b"line\nline\n");
}

#[test]
fn a_linked_parent_directory_stops_the_write() {
    let tree = plant(&[(vec!["a"], Entry::Link("OUTER"))]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    let error = dir.write_whole("a/result.txt", b"x").unwrap_err();
    assert!(matches!(error, BeneathError::Symlink { .. }), "{error:?}");
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert!(!tree.outer.join("result.txt").exists());
    let error = dir.append("a/log", b"x").unwrap_err();
    assert!(matches!(error, BeneathError::Symlink { .. }), "{error:?}");
    assert!(dir.create_dir_all("a/b").is_err());
    assert!(dir.subdir("a", false).is_err());
}

#[test]
fn a_fifo_is_refused_at_once_and_a_big_file_is_refused_by_its_size() {
    let tree = plant(&[(vec!["a"], Entry::Fifo)]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    let error = dir.read("a", 10).unwrap_err();
    assert!(
        matches!(error, BeneathError::NotRegular { kind: "a FIFO", .. }),
        "{error:?}"
    );
    // Appending replaces the FIFO with a file of its own; it never blocks.
    dir.append("a", b"x").unwrap();
    assert_eq!(std::fs::read(tree.root.join("a")).unwrap(), b"x");

    std::fs::write(tree.root.join("big"), vec![b'x'; 100]).unwrap();
    let error = dir.read("big", 99).unwrap_err();
    assert!(
        matches!(error, BeneathError::TooLarge { limit: 99, .. }),
        "{error:?}"
    );
    assert_eq!(dir.read("big", 100).unwrap().len(), 100);
}

#[test]
fn a_hard_link_is_neither_read_nor_appended_to() {
    let tree = plant(&[]);
    std::fs::hard_link(tree.outer.join("secret"), tree.root.join("linked")).unwrap();
    let dir = BeneathDir::open(&tree.root).unwrap();
    let error = dir.read("linked", 1 << 20).unwrap_err();
    assert!(matches!(error, BeneathError::Linked { .. }), "{error:?}");
    dir.append("linked", b"appended").unwrap();
    assert_eq!(std::fs::read(tree.outer.join("secret")).unwrap(), SECRET);
    dir.write_whole("linked", b"whole").unwrap();
    assert_eq!(std::fs::read(tree.outer.join("secret")).unwrap(), SECRET);
}

#[test]
fn a_directory_at_the_name_fails_the_write_with_its_kind() {
    let tree = plant(&[(vec!["a"], Entry::Dir), (vec!["a", "b"], Entry::File)]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    let error = dir.write_whole("a", b"x").unwrap_err();
    assert!(
        matches!(
            error,
            BeneathError::NotRegular {
                kind: "a directory",
                ..
            }
        ),
        "{error:?}"
    );
    let error = dir.append("a", b"x").unwrap_err();
    assert!(
        matches!(
            error,
            BeneathError::NotRegular {
                kind: "a directory",
                ..
            }
        ),
        "{error:?}"
    );
    // Nothing of the failed write is left behind.
    let names: Vec<_> = std::fs::read_dir(&tree.root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("a")]);
}

#[test]
fn a_subdirectory_is_created_at_any_depth_and_never_reached_through_a_link() {
    let tree = plant(&[
        (vec!["link"], Entry::Link("OUTER")),
        (vec!["file"], Entry::File),
    ]);
    let dir = BeneathDir::open(&tree.root).unwrap();
    let sub = dir.subdir("a/./b", true).unwrap();
    assert!(tree.root.join("a/b").is_dir());
    assert_eq!(sub.path(), tree.root.join("a/./b"));
    for through in ["link", "link/inner"] {
        let error = dir.subdir(through, true).unwrap_err();
        assert!(
            matches!(error, BeneathError::Symlink { .. }),
            "{through}: {error:?}"
        );
    }
    assert!(!tree.outer.join("inner").exists());
    assert!(dir.subdir("file", true).is_err());
    assert!(matches!(
        dir.subdir("a/../..", true),
        Err(BeneathError::BadPath { .. })
    ));
    assert!(matches!(
        dir.subdir("missing", false),
        Err(BeneathError::NotFound { .. })
    ));
}

#[test]
fn files_lists_regular_files_beneath_and_never_follows_a_link() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret"), SECRET).unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir_all(root.join("out/deep/er")).unwrap();
    std::fs::write(root.join("out/b.txt"), b"bee").unwrap();
    std::fs::write(root.join("out/a.csv"), b"a,1").unwrap();
    std::fs::write(root.join("out/deep/er/c.json"), b"{}").unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret"), root.join("out/link.txt")).unwrap();
    std::os::unix::fs::symlink(outer.path(), root.join("out/outer")).unwrap();
    let dir = BeneathDir::open(&root).unwrap();
    let found = dir.files("out", 100).unwrap();
    let paths: Vec<&Path> = found.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        paths,
        [
            Path::new("out/a.csv"),
            Path::new("out/b.txt"),
            Path::new("out/deep/er/c.json")
        ]
    );
    assert_eq!(found[1].len, 3);
    assert_eq!(dir.files("out", 2).unwrap().len(), 2, "at most `max`");
    // A link where the listed directory should be is refused.
    std::os::unix::fs::symlink(outer.path(), root.join("elsewhere")).unwrap();
    assert!(matches!(
        dir.files("elsewhere", 10),
        Err(BeneathError::Symlink { .. })
    ));
}

#[test]
fn remove_takes_away_a_file_or_a_link_itself_and_never_passes_through_a_link() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir_all(root.join("ctx")).unwrap();
    std::fs::write(outer.path().join("secret"), SECRET).unwrap();
    std::fs::create_dir(outer.path().join("elsewhere")).unwrap();
    std::fs::write(outer.path().join("elsewhere/history.json"), SECRET).unwrap();
    std::fs::write(root.join("ctx/history.json"), b"{}").unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret"), root.join("ctx/link")).unwrap();
    std::os::unix::fs::symlink(outer.path().join("elsewhere"), root.join("planted")).unwrap();
    let dir = BeneathDir::open(&root).unwrap();

    dir.remove("ctx/history.json", false).unwrap();
    assert!(!root.join("ctx/history.json").exists());
    // The link goes; what it named stays.
    dir.remove("ctx/link", false).unwrap();
    assert_eq!(std::fs::read(outer.path().join("secret")).unwrap(), SECRET);
    dir.remove("ctx", true).unwrap();
    assert!(!root.join("ctx").exists());
    // Through a planted directory link: refused, the file outside untouched.
    assert!(matches!(
        dir.remove("planted/history.json", false),
        Err(BeneathError::Symlink { .. })
    ));
    assert!(outer.path().join("elsewhere/history.json").exists());
    assert!(matches!(
        dir.remove("gone", false),
        Err(BeneathError::NotFound { .. })
    ));
}

#[test]
fn a_tree_is_removed_whole_and_a_link_in_it_is_removed_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("kept")).unwrap();
    std::fs::write(outside.path().join("kept/host.txt"), "host").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("scratch/tmp");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    std::fs::write(tree.join("a/b/f"), "x").unwrap();
    std::fs::write(tree.join("g"), "y").unwrap();
    std::os::unix::fs::symlink(outside.path().join("kept"), tree.join("link")).unwrap();
    let beneath = BeneathDir::open(dir.path()).unwrap();
    // a, a/b, a/b/f, g, link and tmp itself.
    assert_eq!(beneath.remove_tree("scratch/tmp", 100).unwrap(), 6);
    assert!(!tree.exists());
    assert!(dir.path().join("scratch").is_dir());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("kept/host.txt")).unwrap(),
        "host"
    );
    // Gone already: no error. Through a link: refused.
    assert_eq!(beneath.remove_tree("scratch/tmp", 100).unwrap(), 0);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("via")).unwrap();
    assert!(beneath.remove_tree("via/kept", 100).is_err());
    assert!(outside.path().join("kept/host.txt").exists());
    // Past its bound a tree is left in part.
    std::fs::create_dir_all(tree.join("many")).unwrap();
    for n in 0..10 {
        std::fs::write(tree.join(format!("many/{n}")), "z").unwrap();
    }
    assert_eq!(beneath.remove_tree("scratch/tmp", 4).unwrap(), 4);
    assert!(tree.exists());
}
