//! The example `examples/fix-tests` through the real `mur`, as `./scripts/example` runs it: the
//! capsule, installed from the registry folder the set-up builds, fixes the failing test of a
//! copy of its project in place (`mur run --workspace`) against the provider emulator playing
//! the model; afterwards the project's tests pass, and the session's trace lists exactly the
//! buggy file as changed (and the commit the checkout was on). Its shell runs the test command
//! and refuses other command lines. Its dataset (`evals/fixes.jsonl`) passes every case
//! replayed from the committed cassettes, with no key and no network; recorded again against
//! the emulator, the cassettes hold no credential.
//!
//! `MURMUR_UPDATE_CASSETTES=1 cargo test --test mur example_fix_tests::` writes the freshly
//! recorded cassettes over the committed ones (after a change to what the runtime sends a
//! provider).

use std::path::{Path, PathBuf};
use std::process::Command;

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

const KEY: &str = "sk-ant-example-fix-tests-7c41e9";
/// The interpreter the project's tests run with (the capsule's one allowed binary).
const PYTHON: &str = "/usr/bin/python3";
/// The dataset's cases, in its order.
const CASES: [&str; 4] = ["wordcount", "fizzbuzz", "temperature", "shop-discount"];

fn mur() -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
}

fn example_dir() -> PathBuf {
    repo_root().join("examples/fix-tests")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if [".murmur", "workdir", "murmur.lock", "__pycache__"]
            .iter()
            .any(|n| name == *n)
        {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// A copy of examples/fix-tests under `dir` (its project and evals with it), installed from the
/// registry folder the set-up builds.
fn example(dir: &Path) -> PathBuf {
    let to = dir.join("fix-tests");
    copy_dir(&example_dir(), &to);
    let installed = mur()
        .args(["install", "--json", "--registry"])
        .arg(repo_root().join("target/registry"))
        .arg(&to)
        .run();
    assert_eq!(installed.code, 0, "{installed:#?}");
    to
}

/// `git` in `dir` with a fixed identity; `None` when git is not installed.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=example",
            "-c",
            "user.email=example@localhost",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(output.status.success(), "git {args:?}: {output:?}");
    Some(String::from_utf8(output.stdout).unwrap().trim().to_string())
}

/// A copy of the example's project under `dir`, made a git checkout with one commit when git
/// is installed: `(checkout, commit)`.
fn checkout(dir: &Path) -> (PathBuf, Option<String>) {
    let to = dir.join("shop");
    copy_dir(&example_dir().join("project"), &to);
    let commit = git(&to, &["init", "-q", "-b", "main"]).and_then(|_| {
        git(&to, &["add", "-A"])?;
        git(&to, &["commit", "-q", "-m", "shop: a discount bug"])?;
        git(&to, &["rev-parse", "HEAD"])
    });
    (to, commit)
}

/// The project's tests, run in `dir` as a user runs them: `(exit code, stderr)`.
fn project_tests(dir: &Path) -> (i32, String) {
    let output = Command::new(PYTHON)
        .args(["-B", "-m", "unittest"])
        .current_dir(dir)
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn trace_of(report: &Value) -> Vec<Value> {
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn events<'a>(trace: &'a [Value], kind: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event_type"] == kind).collect()
}

fn paths(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect()
}

/// `mur run CAPSULE --workspace CHECKOUT --json` against `emulator`.
fn run_in_place(capsule: &Path, checkout: &Path, emulator: &Emulator) -> MurOutput {
    mur()
        .env("ANTHROPIC_BASE_URL", emulator.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .args(["run", "--json"])
        .arg(capsule)
        .arg("--workspace")
        .arg(checkout)
        .run()
}

#[test]
fn the_example_fixes_the_checkout_in_place_and_its_tests_pass() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let (checkout, commit) = checkout(work.path());
    let (before, failures) = project_tests(&checkout);
    assert_eq!(before, 1, "the project's tests fail before the fix");
    assert!(failures.contains("FAILED (failures=2)"), "{failures}");

    let script = Script::from_file(example_dir().join("emulator.yaml")).unwrap();
    let emulator = Emulator::builder(script).api_key(KEY).start().unwrap();
    let output = run_in_place(&capsule, &checkout, &emulator);
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{report}");
    assert_eq!(
        PathBuf::from(report["workspace"].as_str().unwrap()),
        checkout.canonicalize().unwrap()
    );

    // The checkout itself was fixed: its tests pass, run as a user runs them.
    let (after, text) = project_tests(&checkout);
    assert_eq!(after, 0, "{text}");
    assert!(
        text.contains("Ran 5 tests") && text.ends_with("OK\n"),
        "{text}"
    );
    let pricing = std::fs::read_to_string(checkout.join("pricing.py")).unwrap();
    assert!(
        pricing.contains("return round(amount - amount * percent / 100, 2)"),
        "{pricing}"
    );

    // The tools in the order the model called them, each one passed; then the shell ran the
    // tests in the checkout, and they passed there.
    let trace = trace_of(&report);
    let calls: Vec<(&str, &str)> = events(&trace, "tool_call")
        .iter()
        .map(|e| {
            (
                e["tool_name"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("list-files", "passed"),
            ("search", "passed"),
            ("read-file", "passed"),
            ("edit-file", "passed")
        ]
    );
    let shell = events(&trace, "shell");
    assert_eq!(shell.len(), 1, "{shell:#?}");
    assert_eq!(
        shell[0]["argv"],
        serde_json::json!(["-B", "-m", "unittest"])
    );
    assert_eq!(shell[0]["exit_code"], 0, "{:#}", shell[0]);
    // What the model was told the tests said.
    let last = emulator.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("Ran 5 tests") && last.contains("OK"),
        "{last}"
    );

    // Exactly the buggy file changed, as the record says, on the commit the checkout was on.
    let end = events(&trace, "session_end")[0];
    let changes = &end["changes"];
    assert_eq!(paths(&changes["modified"]), ["pricing.py"], "{changes}");
    assert!(paths(&changes["created"]).is_empty(), "{changes}");
    assert!(paths(&changes["deleted"]).is_empty(), "{changes}");
    if let Some(commit) = &commit {
        assert_eq!(end["git"]["commit"], commit.as_str(), "{end}");
        // git sees the same one file changed.
        let status = git(&checkout, &["status", "--porcelain"]).unwrap();
        assert_eq!(status, "M pricing.py");
    }
    // `mur trace show` lists it too, for a person.
    let shown = mur()
        .args(["trace", "show"])
        .arg(PathBuf::from(report["workdir"].as_str().unwrap()).join("trace.jsonl"))
        .run();
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert!(shown.stdout.contains("pricing.py"), "{}", shown.stdout);
    if let Some(commit) = &commit {
        assert!(
            shown.stdout.contains(&format!("git commit {commit}")),
            "{}",
            shown.stdout
        );
    }
}

#[test]
fn the_example_shell_runs_the_test_command_and_refuses_other_command_lines() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let (checkout, _) = checkout(work.path());
    let call = |id: &str, binary: &str, args: &[&str], stdin: Option<&str>| {
        let mut input = serde_json::json!({"binary": binary, "args": args});
        if let Some(stdin) = stdin {
            input["stdin"] = stdin.into();
        }
        format!("{{ id: {id}, name: shell, input: {input} }}")
    };
    let script = format!(
        "turns:\n  - reply: {{ tool_calls: [ {}, {}, {}, {}, {}, {} ] }}\n  - reply: {{ text: done }}\n",
        call("s1", PYTHON, &["-c", "open('made.txt', 'w')"], None),
        call("s2", PYTHON, &["-m", "pip", "list"], None),
        call("s3", PYTHON, &["tests/test_pricing.py"], None),
        call("s4", "python3", &["-B", "-m", "unittest"], None),
        call("s5", PYTHON, &["-B", "-m", "unittest"], None),
        // The interpreter alone, reading a program from stdin: not the test command either.
        call("s6", PYTHON, &[], Some("print('from stdin')")),
    );
    let emulator = Emulator::builder(Script::from_yaml(&script).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let output = run_in_place(&capsule, &checkout, &emulator);
    assert_eq!(output.code, 0, "{output:#?}");
    let trace = trace_of(&output.json());

    // Every other command line of the interpreter (`-c`, `-m pip`, a script, the interpreter
    // alone with a program on stdin): refused by the policy before anything runs. The shim's
    // name is refused by the allowlist.
    let denied = events(&trace, "call_denied");
    let reasons: Vec<(&str, &str)> = denied
        .iter()
        .map(|e| (e["hook"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    let refusal = (
        "policy-shell",
        "only these commands run here: /usr/bin/python3 -B -m unittest",
    );
    assert_eq!(reasons, [refusal; 4], "{denied:#?}");
    assert!(!checkout.join("made.txt").exists());
    // The test command alone ran (and failed: the bug is still there).
    let shell = events(&trace, "shell");
    assert!(
        shell
            .iter()
            .any(|e| e["call_id"] == "s4" && e["error"]["code"] == "E-CAP-006"),
        "{shell:#?}"
    );
    let ran: Vec<&Value> = shell
        .iter()
        .copied()
        .filter(|e| e.get("exit_code").is_some())
        .collect();
    assert_eq!(ran.len(), 1, "{shell:#?}");
    assert_eq!(ran[0]["argv"], serde_json::json!(["-B", "-m", "unittest"]));
    assert_eq!(ran[0]["exit_code"], 1, "{:#}", ran[0]);
}

fn eval_run(capsule: &Path, extra: &[&str]) -> MurOutput {
    mur()
        .args(["eval", "run", "--json"])
        .arg(capsule.join("evals/fixes.jsonl"))
        .arg("--capsule")
        .arg(capsule)
        .args(extra)
        .run()
}

/// Every case passed every scorer, each checkout's own tests included.
fn assert_every_case_passes(output: &MurOutput) {
    let run = output.json();
    let results = run["results"].as_array().unwrap();
    let cases: Vec<&str> = results
        .iter()
        .map(|r| r["case"].as_str().unwrap())
        .collect();
    let mut sorted = cases.clone();
    sorted.sort();
    let mut expected = CASES.to_vec();
    expected.sort();
    assert_eq!(sorted, expected, "{}", output.stdout);
    for result in results {
        let scorers: Vec<(&str, bool)> = result["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["scorer"].as_str().unwrap(), s["passed"] == true))
            .collect();
        assert_eq!(result["passed"], true, "{result:#}");
        assert!(
            scorers.iter().any(|(name, _)| name.starts_with("command")),
            "{scorers:?}"
        );
        assert!(
            scorers.iter().any(|(name, _)| name.starts_with("changes")),
            "{scorers:?}"
        );
        assert!(scorers.iter().all(|(_, passed)| *passed), "{scorers:?}");
    }
    assert_eq!(run["arms"][0]["arm"], "scripted");
    assert_eq!(run["arms"][0]["passed"], CASES.len() as u64);
}

#[test]
fn the_example_dataset_passes_every_case_from_its_cassettes() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    // No key anywhere, no emulator: the cassettes answer.
    let output = eval_run(&capsule, &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    assert_every_case_passes(&output);
    let modes = output.json()["run"]["arms"][0]["mode"].clone();
    assert_eq!(modes, "replay");
    // Each case's own checkout was fixed in its fresh workspace; the fixtures were not.
    let run_dir = PathBuf::from(output.json()["dir"].as_str().unwrap());
    for result in output.json()["results"].as_array().unwrap() {
        let workspace = run_dir.join(result["workspace"].as_str().unwrap());
        assert_eq!(project_tests(&workspace).0, 0, "{result:#}");
    }
    for fixture in ["wordcount", "fizzbuzz", "temperature"] {
        let dir = capsule.join("evals/fixtures").join(fixture);
        assert_eq!(project_tests(&dir).0, 1, "fixture {fixture} was written");
    }
}

#[test]
fn the_example_cassettes_recorded_against_the_emulator_hold_no_credential_and_replay_alike() {
    let script = Script::from_file(example_dir().join("evals/emulator.yaml")).unwrap();
    let emulator = Emulator::builder(script).api_key(KEY).start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let cassettes = capsule.join("evals/cassettes");
    let _ = std::fs::remove_dir_all(&cassettes);
    let recorded = mur()
        .env("ANTHROPIC_BASE_URL", emulator.url())
        .env("ANTHROPIC_API_KEY", KEY)
        .args(["eval", "run", "--record", "--json"])
        .arg(capsule.join("evals/fixes.jsonl"))
        .arg("--capsule")
        .arg(&capsule)
        .run();
    assert_eq!(recorded.code, 0, "{recorded:#?}");
    assert_every_case_passes(&recorded);
    assert_eq!(recorded.json()["run"]["arms"][0]["mode"], "record");
    let mut count = 0;
    for entry in std::fs::read_dir(cassettes.join("scripted")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains(KEY), "a cassette holds the key");
        assert!(
            !text.contains("x-api-key"),
            "a cassette holds the key's header"
        );
        count += 1;
    }
    assert_eq!(count, CASES.len());

    // Replayed with the emulator gone and no key anywhere: the same verdicts.
    drop(emulator);
    let replayed = eval_run(&capsule, &[]);
    assert_eq!(replayed.code, 0, "{replayed:#?}");
    assert_every_case_passes(&replayed);

    if std::env::var_os("MURMUR_UPDATE_CASSETTES").is_some() {
        let committed = example_dir().join("evals/cassettes");
        let _ = std::fs::remove_dir_all(&committed);
        copy_dir(&cassettes, &committed);
    }
}
