//! `search` over this repository's own tree, warm: the component compiled and pre-linked once,
//! the files in the page cache, a fresh instance per call (the cost a session pays per search),
//! the workdir the repository root (`target/` left out by `.gitignore`, as the tool walks).
//!
//! For comparison, the same query on the host: `rg` (its default, several threads), `rg
//! --sort path` (one thread, files in path order, as the tool runs), and `grep -rn` (which
//! does not read `.gitignore`: `target/` and `.git/` are excluded by hand). `rg` is looked for
//! at `target/ripgrep/bin/rg` (`cargo install ripgrep --locked --root target/ripgrep`), then on
//! `PATH`; without it those rows are skipped. Each host row spawns a process per iteration.
//!
//! `walk/*` separates the walk from the search: the tool with an `include` glob no file matches
//! (every directory read, its ignore files applied, no file opened) against `rg --files`.
//! `SEARCH_COMPONENT=path/to/component.wasm` measures another build of the component (for
//! example one built with `-C target-feature=+simd128`) in place of `artifacts/search`'s.
//!
//! Before measuring, the bench prints the tool's note and `rg`'s count of matching lines, so
//! a reader can see both searched the same files.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use murmur_runtime::tool::{ToolInput, ToolStatus};
use murmur_runtime::{Grants, RunWorld};

/// The queries: a regular expression with a few hundred matches, and a rare literal.
const QUERIES: [(&str, &str, bool); 2] = [
    ("regex", r"E-RUN-0[0-9]{2}", false),
    ("literal", "fn main", true),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn rg() -> Option<PathBuf> {
    let local = repo().join("target/ripgrep/bin/rg");
    if local.is_file() {
        return Some(local);
    }
    let found = Command::new("rg").arg("--version").output().ok()?;
    found.status.success().then(|| PathBuf::from("rg"))
}

fn quiet(mut command: Command) {
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawning");
    // 0: matches, 1: none; 2 would be an error.
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "{command:?}: {status}"
    );
}

fn search_repo(c: &mut Criterion) {
    let (runtime, engine) = support::runtime_and_engine();
    let mut search = support::load_tool(&engine, "artifacts/search");
    if let Some(other) = std::env::var_os("SEARCH_COMPONENT") {
        eprintln!("measuring {}", other.to_string_lossy());
        search = engine
            .load_component("search", Path::new(&other), RunWorld::Tool)
            .expect("loading SEARCH_COMPONENT");
    }
    let root = repo();
    let grants = Grants::new(&root);
    let rg = rg();
    if rg.is_none() {
        eprintln!("rg not found: the rg rows are skipped (grep -rn is still measured)");
    }

    let mut group = c.benchmark_group("search_repo");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    let walk_input = ToolInput {
        data: Some(r#"{"pattern": "x", "include": ["*.no-such-extension"]}"#.to_string()),
        log_path: None,
    };
    group.bench_function("walk/engine", |b| {
        b.iter(|| {
            let report = runtime.block_on(engine.call_tool(&search, &grants, &walk_input));
            assert_eq!(
                report.outcome.expect("ran").result.status,
                ToolStatus::Passed
            );
        })
    });
    if let Some(rg) = &rg {
        group.bench_function("walk/rg_files_sort_path_host", |b| {
            b.iter(|| {
                let mut command = Command::new(rg);
                command
                    .current_dir(&root)
                    .args(["--files", "--no-config", "--sort=path"]);
                quiet(command);
            })
        });
    }
    for (name, pattern, fixed) in QUERIES {
        let input = ToolInput {
            data: Some(
                serde_json::json!({"pattern": pattern, "fixed_strings": fixed, "max_matches": 2000})
                    .to_string(),
            ),
            log_path: None,
        };
        let call = || {
            let report = runtime.block_on(engine.call_tool(&search, &grants, &input));
            let output = report.outcome.expect("the call ran");
            assert_eq!(output.result.status, ToolStatus::Passed, "{output:?}");
            output
        };
        // Warm the page cache and show what was searched.
        let first = call();
        eprintln!(
            "{name}: search says: {}",
            first.result.summary.as_deref().unwrap_or_default()
        );
        if let Some(rg) = &rg {
            let counted = Command::new(rg)
                .current_dir(&root)
                .args(["-c", "--no-config"])
                .args(fixed.then_some("-F"))
                .arg("--")
                .arg(pattern)
                .output()
                .expect("running rg");
            let (lines, files) = String::from_utf8_lossy(&counted.stdout)
                .lines()
                .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
                .fold((0, 0), |(n, f), c| (n + c, f + 1));
            eprintln!("{name}: rg says: {lines} matching lines in {files} files");
        }

        group.bench_function(format!("{name}/engine"), |b| b.iter(call));
        if let Some(rg) = &rg {
            for (row, extra) in [
                ("rg_host", None),
                ("rg_sort_path_host", Some("--sort=path")),
            ] {
                group.bench_function(format!("{name}/{row}"), |b| {
                    b.iter(|| {
                        let mut command = Command::new(rg);
                        command
                            .current_dir(&root)
                            .args(["-n", "--no-config", "--color=never"])
                            .args(extra)
                            .args(fixed.then_some("-F"))
                            .arg("--")
                            .arg(pattern);
                        quiet(command);
                    })
                });
            }
        }
        group.bench_function(format!("{name}/grep_rn_host"), |b| {
            b.iter(|| {
                let mut command = Command::new("grep");
                command
                    .current_dir(&root)
                    .args(["-rnI", "--exclude-dir=target", "--exclude-dir=.git"])
                    .arg(if fixed { "-F" } else { "-E" })
                    .arg("--")
                    .arg(pattern)
                    .arg(".");
                quiet(command);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, search_repo);
criterion_main!(benches);
