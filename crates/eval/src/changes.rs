//! The `changes` expectation: what a case's session changed in its workspace, as its trace's
//! `session_end.changes` records it (files and links created, modified, deleted; see
//! `murmur_trace::schema::WorkspaceChanges`), checked against path patterns.
//!
//! ```json
//! "expect": {"changes": {"created": ["notes/*.md"], "modified": ["src/lib.rs"],
//!                        "deleted": [], "untouched": ["tests/**"], "only": true}}
//! ```
//!
//! What a case can rely on:
//!
//! - A pattern ([`PathPattern`]) is a path relative to the workspace as the trace lists it (`/`-separated, no
//!   `.` or `..` part, no leading or trailing `/`), where `*`, `?`, `[…]` and `{a,b}` match
//!   within one path part and `**` across parts (`notes/**` is everything beneath `notes`);
//!   `\` escapes. Anything else is refused when the dataset loads (`E-EVAL-001`, with the line
//!   and the field).
//! - `created`, `modified`, `deleted`: each one given is a scorer (`changes created`, …). A
//!   list of patterns passes when every pattern matches at least one path of that kind; an
//!   empty list passes when no path of that kind changed.
//! - `untouched`: a scorer that fails when any changed path matches one of its patterns.
//! - `only: true`: a scorer that fails when a path changed that no pattern of its own kind's
//!   list matches (a kind with no list may not change at all).
//! - Every detail names what was found: the paths matched, or the patterns nothing matched
//!   with what did change, or the paths that should not have changed.
//! - The record is bounded (a walk that stopped at a bound, a list cut at
//!   `WorkspaceChanges::LISTED`): where the record does not list everything, a scorer that
//!   needs every path (`untouched`, `only`, an empty list, a pattern not found) fails, saying
//!   the record is cut and at which bound. It never passes on what it could not see.
//! - A session whose trace records no changes (no task ran) fails every `changes` scorer.

use murmur_trace::schema::WorkspaceChanges;

use crate::dataset::{ChangesExpect, PathPattern};
use crate::results::Score;

/// The three kinds of change, as the scorers and details name them.
const KINDS: [&str; 3] = ["created", "modified", "deleted"];

/// The most paths a detail names of one list.
const NAMED: usize = 10;

/// The `changes` scorers of `expect` against `recorded` (the trace's `session_end.changes`):
/// `created`, `modified`, `deleted` (those given), then `untouched`, then `only`.
pub fn score(expect: &ChangesExpect, recorded: Option<&WorkspaceChanges>) -> Vec<Score> {
    let mut scorers: Vec<&str> = Vec::new();
    let lists = [&expect.created, &expect.modified, &expect.deleted];
    for (kind, list) in KINDS.iter().zip(lists) {
        if list.is_some() {
            scorers.push(kind);
        }
    }
    if !expect.untouched.is_empty() {
        scorers.push("untouched");
    }
    if expect.only {
        scorers.push("only");
    }
    let Some(recorded) = recorded else {
        return scorers
            .into_iter()
            .map(|name| Score {
                scorer: format!("changes {name}"),
                passed: false,
                detail: "the session's trace records no changes (no task ran)".to_string(),
            })
            .collect();
    };
    let paths: [Vec<&str>; 3] = [
        recorded.created.iter().map(|c| c.path.as_str()).collect(),
        recorded.modified.iter().map(|c| c.path.as_str()).collect(),
        recorded.deleted.iter().map(|c| c.path.as_str()).collect(),
    ];
    let counts = [
        recorded.counts.created,
        recorded.counts.modified,
        recorded.counts.deleted,
    ];
    // Where the record does not list every change: the walk stopped, or a list was cut.
    let cut = recorded.truncated.then(|| {
        let bounds = if recorded.truncated_by.is_empty() {
            "a bound".to_string()
        } else {
            recorded.truncated_by.join(", ")
        };
        format!("the record of the changes is cut ({bounds}), so it cannot tell")
    });
    let mut scores = Vec::new();
    for (index, (kind, list)) in KINDS.iter().zip(lists).enumerate() {
        let Some(patterns) = list else { continue };
        let (passed, detail) = score_kind(kind, patterns, &paths[index], counts[index], &cut);
        scores.push(Score {
            scorer: format!("changes {kind}"),
            passed,
            detail,
        });
    }
    if !expect.untouched.is_empty() {
        let mut touched = Vec::new();
        for (kind, of_kind) in KINDS.iter().zip(&paths) {
            for path in of_kind {
                if let Some(pattern) = expect.untouched.iter().find(|p| p.matches(path)) {
                    touched.push(format!("{kind} {path} (`{}`)", pattern.text));
                }
            }
        }
        let (passed, detail) = if !touched.is_empty() {
            (
                false,
                format!("changed what must stay untouched: {}", names(&touched)),
            )
        } else if let Some(cut) = &cut {
            (false, format!("{cut} that nothing untouched changed"))
        } else {
            (
                true,
                format!("nothing matching {} changed", patterns(&expect.untouched)),
            )
        };
        scores.push(Score {
            scorer: "changes untouched".to_string(),
            passed,
            detail,
        });
    }
    if expect.only {
        let mut others = Vec::new();
        for ((kind, list), of_kind) in KINDS.iter().zip(lists).zip(&paths) {
            let allowed: &[PathPattern] = list.as_deref().unwrap_or(&[]);
            let unexpected: Vec<String> = of_kind
                .iter()
                .filter(|path| !allowed.iter().any(|p| p.matches(path)))
                .map(|path| path.to_string())
                .collect();
            if !unexpected.is_empty() {
                others.push(format!("also {kind} {}", names(&unexpected)));
            }
        }
        let total: u64 = counts.iter().sum();
        let (passed, detail) = if !others.is_empty() {
            (false, others.join("; "))
        } else if let Some(cut) = &cut {
            (false, format!("{cut} that no other path changed"))
        } else {
            (
                true,
                format!(
                    "no other path changed ({} in all)",
                    plural(total, "change", "changes")
                ),
            )
        };
        scores.push(Score {
            scorer: "changes only".to_string(),
            passed,
            detail,
        });
    }
    scores
}

/// One kind's scorer: every pattern matched by a path of `paths` (or, for no pattern, no path
/// of the kind at all).
fn score_kind(
    kind: &str,
    patterns: &[PathPattern],
    paths: &[&str],
    count: u64,
    cut: &Option<String>,
) -> (bool, String) {
    let listing = |paths: &[&str]| {
        if paths.is_empty() && count == 0 {
            format!("nothing was {kind}")
        } else {
            let shown: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
            format!("{kind}: {}", names(&shown))
        }
    };
    if patterns.is_empty() {
        return if count > 0 {
            (
                false,
                format!(
                    "{} {kind} where none should be; {}",
                    plural(count, "path was", "paths were"),
                    listing(paths)
                ),
            )
        } else if let Some(cut) = cut {
            (false, format!("{cut} that nothing was {kind}"))
        } else {
            (true, format!("nothing was {kind}, as expected"))
        };
    }
    let missing: Vec<&PathPattern> = patterns
        .iter()
        .filter(|p| !paths.iter().any(|path| p.matches(path)))
        .collect();
    if missing.is_empty() {
        let matched: Vec<String> = paths
            .iter()
            .filter(|path| patterns.iter().any(|p| p.matches(path)))
            .map(|path| path.to_string())
            .collect();
        return (true, format!("{kind} {}", names(&matched)));
    }
    let mut detail = format!(
        "nothing {kind} matches {}; {}",
        patterns_of(&missing),
        listing(paths)
    );
    if let Some(cut) = cut {
        detail.push_str(&format!(" ({cut} whether it was)"));
    }
    (false, detail)
}

/// `a, b, c` (the first [`NAMED`], then how many more).
fn names(paths: &[String]) -> String {
    let mut shown = paths
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > NAMED {
        shown.push_str(&format!(" and {} more", paths.len() - NAMED));
    }
    shown
}

fn patterns(list: &[PathPattern]) -> String {
    patterns_of(&list.iter().collect::<Vec<_>>())
}

fn patterns_of(list: &[&PathPattern]) -> String {
    list.iter()
        .map(|p| format!("`{}`", p.text))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_trace::schema::{ChangeCounts, FileCreated, FileDeleted, FileModified};

    fn created(path: &str) -> FileCreated {
        FileCreated {
            path: path.into(),
            size: 1,
            sha256: None,
            link: false,
        }
    }

    /// Created `notes/a.md`, `notes/deep/b.md`, `tmp.txt`; modified `src/lib.rs`; deleted
    /// `old.txt`.
    fn recorded() -> WorkspaceChanges {
        WorkspaceChanges {
            created: vec![
                created("notes/a.md"),
                created("notes/deep/b.md"),
                created("tmp.txt"),
            ],
            modified: vec![FileModified {
                path: "src/lib.rs".into(),
                size_before: 1,
                size_after: 2,
                sha256_before: None,
                sha256_after: None,
                link: false,
            }],
            deleted: vec![FileDeleted {
                path: "old.txt".into(),
                size: 1,
                sha256_before: None,
                link: false,
            }],
            counts: ChangeCounts {
                created: 3,
                modified: 1,
                deleted: 1,
            },
            entries: 9,
            truncated: false,
            truncated_by: Vec::new(),
        }
    }

    fn expect(json: serde_json::Value) -> ChangesExpect {
        serde_json::from_value(json).unwrap()
    }

    fn verdicts(scores: &[Score]) -> Vec<(&str, bool)> {
        scores
            .iter()
            .map(|s| (s.scorer.as_str(), s.passed))
            .collect()
    }

    #[test]
    fn a_star_stays_in_its_part_and_two_stars_cross_parts() {
        let p = |text: &str| PathPattern::parse(text).unwrap();
        assert!(p("notes/*.md").matches("notes/a.md"));
        assert!(!p("notes/*.md").matches("notes/deep/b.md"));
        assert!(p("notes/**").matches("notes/deep/b.md"));
        assert!(p("**/*.md").matches("notes/deep/b.md"));
        assert!(p("**/*.md").matches("top.md"));
        assert!(!p("*.md").matches("notes/a.md"));
        assert!(p("{a,b}.txt").matches("b.txt"));
        assert!(p("f?le.txt").matches("file.txt"));
        assert!(p("a\\*.txt").matches("a*.txt"));
        assert!(!p("a\\*.txt").matches("ab.txt"));
        assert!(p("src/lib.rs").matches("src/lib.rs"));
        assert!(!p("src/lib.rs").matches("src/lib.rsx"));
    }

    #[test]
    fn a_pattern_outside_the_workspace_or_not_as_the_trace_lists_paths_is_refused() {
        for (text, why) in [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("../up.txt", "`..`"),
            ("a/../b", "`..`"),
            ("./a.txt", "`.`"),
            ("a//b", "empty part"),
            ("notes/", "dir/**"),
            ("a\nb", "control"),
            ("[a-", "unclosed"),
            ("{a,b", "unclosed"),
        ] {
            let error = PathPattern::parse(text).unwrap_err();
            assert!(error.contains(why), "{text:?}: {error}");
            assert!(error.contains("is not a path pattern"), "{error}");
        }
    }

    #[test]
    fn each_kind_passes_when_every_pattern_names_a_change_of_that_kind() {
        let scores = score(
            &expect(serde_json::json!({
                "created": ["notes/*.md", "tmp.txt"],
                "modified": ["src/lib.rs"],
                "deleted": ["old.txt"],
            })),
            Some(&recorded()),
        );
        assert_eq!(
            verdicts(&scores),
            [
                ("changes created", true),
                ("changes modified", true),
                ("changes deleted", true)
            ]
        );
        // Only what the patterns matched is named.
        assert_eq!(scores[0].detail, "created notes/a.md, tmp.txt");
        assert_eq!(scores[1].detail, "modified src/lib.rs");
    }

    #[test]
    fn a_pattern_nothing_matches_fails_naming_it_and_what_did_change() {
        let scores = score(
            &expect(serde_json::json!({
                "created": ["notes/*.md", "report.md", "src/*.rs"],
                "modified": ["README.md"],
                "deleted": ["tmp.txt"],
            })),
            Some(&recorded()),
        );
        assert_eq!(
            verdicts(&scores),
            [
                ("changes created", false),
                ("changes modified", false),
                ("changes deleted", false)
            ]
        );
        assert_eq!(
            scores[0].detail,
            "nothing created matches `report.md`, `src/*.rs`; created: notes/a.md, notes/deep/b.md, tmp.txt"
        );
        assert_eq!(
            scores[1].detail,
            "nothing modified matches `README.md`; modified: src/lib.rs"
        );
        // A path created is not one deleted.
        assert_eq!(
            scores[2].detail,
            "nothing deleted matches `tmp.txt`; deleted: old.txt"
        );
    }

    #[test]
    fn an_empty_list_means_nothing_of_that_kind_changed() {
        let mut none = recorded();
        none.deleted.clear();
        none.counts.deleted = 0;
        let scores = score(
            &expect(serde_json::json!({"modified": [], "deleted": []})),
            Some(&none),
        );
        assert_eq!(
            verdicts(&scores),
            [("changes modified", false), ("changes deleted", true)]
        );
        assert_eq!(
            scores[0].detail,
            "1 path was modified where none should be; modified: src/lib.rs"
        );
        assert_eq!(scores[1].detail, "nothing was deleted, as expected");
    }

    #[test]
    fn untouched_fails_naming_each_path_it_matched_and_its_pattern() {
        let scores = score(
            &expect(serde_json::json!({"untouched": ["src/**", "*.txt"]})),
            Some(&recorded()),
        );
        assert_eq!(verdicts(&scores), [("changes untouched", false)]);
        assert_eq!(
            scores[0].detail,
            "changed what must stay untouched: created tmp.txt (`*.txt`), modified src/lib.rs (`src/**`), deleted old.txt (`*.txt`)"
        );
        let kept = score(
            &expect(serde_json::json!({"untouched": ["tests/**"]})),
            Some(&recorded()),
        );
        assert_eq!(verdicts(&kept), [("changes untouched", true)]);
        assert_eq!(kept[0].detail, "nothing matching `tests/**` changed");
    }

    #[test]
    fn only_fails_naming_every_change_no_pattern_of_its_kind_allows() {
        let scores = score(
            &expect(serde_json::json!({
                "created": ["notes/**"],
                "modified": ["src/lib.rs"],
                "only": true,
            })),
            Some(&recorded()),
        );
        assert_eq!(
            verdicts(&scores),
            [
                ("changes created", true),
                ("changes modified", true),
                ("changes only", false)
            ]
        );
        // A kind without a list may not change at all.
        assert_eq!(
            scores[2].detail,
            "also created tmp.txt; also deleted old.txt"
        );
        let exact = score(
            &expect(serde_json::json!({
                "created": ["notes/**", "tmp.txt"],
                "modified": ["src/*"],
                "deleted": ["old.txt"],
                "only": true,
            })),
            Some(&recorded()),
        );
        assert!(exact.iter().all(|s| s.passed), "{exact:?}");
        assert_eq!(exact[3].detail, "no other path changed (5 changes in all)");
        // `only` alone: nothing may change.
        let nothing = score(
            &expect(serde_json::json!({"only": true})),
            Some(&recorded()),
        );
        assert_eq!(
            nothing[0].detail,
            "also created notes/a.md, notes/deep/b.md, tmp.txt; also modified src/lib.rs; also deleted old.txt"
        );
        let mut many = WorkspaceChanges::default();
        for n in 0..13 {
            many.created.push(created(&format!("f{n:02}")));
        }
        many.counts.created = 13;
        let cut = score(&expect(serde_json::json!({"only": true})), Some(&many));
        assert!(
            cut[0].detail.ends_with("f09 and 3 more"),
            "{}",
            cut[0].detail
        );
    }

    #[test]
    fn a_cut_record_never_passes_what_it_could_not_see() {
        let mut cut = recorded();
        cut.truncated = true;
        cut.truncated_by = vec!["entries".into()];
        let scores = score(
            &expect(serde_json::json!({
                "created": ["notes/a.md", "missing.md"],
                "modified": ["src/lib.rs"],
                "deleted": [],
                "untouched": ["tests/**"],
                "only": false,
            })),
            Some(&cut),
        );
        assert_eq!(
            verdicts(&scores),
            [
                ("changes created", false),
                ("changes modified", true),
                ("changes deleted", false),
                ("changes untouched", false),
            ]
        );
        assert!(
            scores[0].detail.ends_with(
                "(the record of the changes is cut (entries), so it cannot tell whether it was)"
            ),
            "{}",
            scores[0].detail
        );
        assert_eq!(
            scores[3].detail,
            "the record of the changes is cut (entries), so it cannot tell that nothing untouched changed"
        );
        let only = score(
            &expect(
                serde_json::json!({"created": ["**"], "modified": ["**"], "deleted": ["**"], "only": true}),
            ),
            Some(&cut),
        );
        assert!(!only[3].passed);
        assert!(
            only[3]
                .detail
                .contains("cannot tell that no other path changed")
        );
    }

    #[test]
    fn a_session_with_no_recorded_changes_fails_every_changes_scorer() {
        let scores = score(
            &expect(serde_json::json!({"created": [], "untouched": ["a"], "only": true})),
            None,
        );
        assert_eq!(
            verdicts(&scores),
            [
                ("changes created", false),
                ("changes untouched", false),
                ("changes only", false)
            ]
        );
        assert!(
            scores
                .iter()
                .all(|s| s.detail.contains("records no changes"))
        );
    }

    proptest::proptest! {
        #[test]
        fn no_pattern_makes_parsing_or_matching_panic(
            text in "[a-z*?/.\\\\\\[\\]{},!-]{0,24}",
            path in "[a-z/.]{0,16}",
        ) {
            if let Ok(pattern) = PathPattern::parse(&text) {
                let _ = pattern.matches(&path);
            }
        }

        #[test]
        fn no_text_makes_parsing_panic(text in "\\PC{0,64}") {
            let _ = PathPattern::parse(&text);
        }
    }
}
