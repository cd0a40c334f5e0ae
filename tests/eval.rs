//! `mur eval` through the real `mur`: the example capsule's dataset (examples/hello/evals) is
//! replayed from its committed cassettes, two arms (two scripted models) scored case by case,
//! and the diff names the cases the second arm regressed on; recording the cassettes again
//! against the provider emulator keeps no credential in them; a capsule changed since the
//! recording fails its replay naming the difference; bad input is refused with its code.
//!
//! `MURMUR_UPDATE_CASSETTES=1 cargo test --test mur eval::` writes the freshly recorded
//! cassettes over the committed ones (after a change to what the runtime sends a provider).

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

/// The cases the `hasty` arm's scripted model regresses on, and the one it improves.
const REGRESSED: [&str; 4] = ["hello-note", "todo-json", "journal-append", "sea-poem"];
const IMPROVED: &str = "ok-file";
const CASES: usize = 11;

fn mur() -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
}

/// A copy of examples/hello under `dir` (its evals with it), installed from the registry
/// folder the set-up builds.
fn example(dir: &Path) -> PathBuf {
    let to = dir.join("hello");
    copy_dir(&repo_root().join("examples/hello"), &to);
    let installed = mur()
        .args(["install", "--json", "--registry"])
        .arg(repo_root().join("target/registry"))
        .arg(&to)
        .run();
    assert_eq!(installed.code, 0, "{installed:#?}");
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if [".murmur", "workdir", "murmur.lock"]
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

fn eval(capsule: &Path, extra: &[&str]) -> MurOutput {
    mur()
        .args(["eval", "run"])
        .arg(capsule.join("evals/notes.jsonl"))
        .arg("--capsule")
        .arg(capsule)
        .args(extra)
        .run()
}

/// The workspace of the session whose trace is `trace`, as its `session_start` names it:
/// where the case's fixture was copied and what the agent and the scorers worked in.
fn workspace_of(trace: &Path) -> PathBuf {
    let text = std::fs::read_to_string(trace).unwrap();
    let start: Value = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["event_type"] == "session_start")
        .expect("a session_start event");
    PathBuf::from(
        start["workspace"]
            .as_str()
            .expect("session_start.workspace"),
    )
}

/// `(case, arm) → result` of a `mur eval run --json` answer.
/// An arms file in `work` whose one arm, `careful`, replays the example's greeting cassette as
/// the cassette of the case `case`.
fn careful_arm_replaying_the_greeting(work: &Path, capsule: &Path, case: &str) -> PathBuf {
    let arms = work.join("arms.yaml");
    std::fs::write(
        &arms,
        "arms:\n  careful:\n    env: { HELLO_MODEL: scripted-careful }\n    cassettes: tapes\n",
    )
    .unwrap();
    std::fs::create_dir(work.join("tapes")).unwrap();
    std::fs::copy(
        capsule.join("evals/cassettes/careful/greeting.cassette.json"),
        work.join(format!("tapes/{case}.cassette.json")),
    )
    .unwrap();
    arms
}

/// `mur eval run --json DATASET --capsule CAPSULE --arms-file ARMS`, then `extra`.
fn eval_run(dataset: &Path, capsule: &Path, arms: &Path, extra: &[&str]) -> MurOutput {
    mur()
        .args(["eval", "run", "--json"])
        .arg(dataset)
        .arg("--capsule")
        .arg(capsule)
        .arg("--arms-file")
        .arg(arms)
        .args(extra)
        .run()
}

fn results(output: &MurOutput) -> Vec<Value> {
    output.json()["results"].as_array().unwrap().clone()
}

fn result<'a>(results: &'a [Value], case: &str, arm: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["case"] == case && r["arm"] == arm)
        .unwrap_or_else(|| panic!("no result for {case} on {arm}"))
}

fn failing(results: &[Value], arm: &str) -> Vec<String> {
    let mut cases: Vec<String> = results
        .iter()
        .filter(|r| r["arm"] == arm && r["passed"] == false)
        .map(|r| r["case"].as_str().unwrap().to_string())
        .collect();
    cases.sort();
    cases
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    names
}

/// What every replay or recording of the example dataset scores.
fn assert_example_scores(output: &MurOutput) {
    let results = results(output);
    assert_eq!(results.len(), 2 * CASES, "{}", output.stdout);
    assert_eq!(failing(&results, "careful"), [IMPROVED]);
    assert_eq!(failing(&results, "hasty"), sorted(&REGRESSED));
    let arms = output.json()["arms"].clone();
    assert_eq!(arms[0]["arm"], "careful");
    assert_eq!(arms[0]["passed"], CASES as u64 - 1);
    assert_eq!(arms[1]["passed"], (CASES - REGRESSED.len()) as u64);
    // The provider's counts, with the cache reads the scripted models report.
    assert!(
        arms[0]["tokens"]["input"].as_u64().unwrap() > 10_000,
        "{arms}"
    );
    let ratio = arms[0]["cache_hit_ratio"].as_f64().unwrap();
    assert!(ratio > 0.3 && ratio < 0.7, "{ratio}");
    // Why the hasty arm failed, scorer by scorer.
    let failed = |case: &str, arm: &str| -> Vec<String> {
        result(&results, case, arm)["scores"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["passed"] == false)
            .map(|s| s["scorer"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(failed("hello-note", "hasty"), ["tools", "result"]);
    assert_eq!(failed("todo-json", "hasty"), ["file notes/todo.json"]);
    assert_eq!(
        failed("journal-append", "hasty"),
        ["tools", "file notes/journal.md"]
    );
    assert_eq!(failed("sea-poem", "hasty"), ["rubric"]);
    assert_eq!(failed("ok-file", "careful"), ["turns"]);
    // The rubric was graded by the grader choice, its cost reported apart.
    let poem = result(&results, "sea-poem", "careful");
    let rubric = poem["scores"].as_array().unwrap().last().unwrap();
    assert_eq!(rubric["scorer"], "rubric");
    assert!(
        rubric["detail"].as_str().unwrap().contains("Two lines"),
        "{rubric}"
    );
    assert_eq!(poem["grading"]["input"], 600);
    let hasty_rubric = &result(&results, "sea-poem", "hasty")["scores"];
    assert!(
        hasty_rubric.to_string().contains("One line"),
        "{hasty_rubric}"
    );
}

#[test]
fn the_example_dataset_replays_from_its_cassettes_and_the_diff_names_the_regressed_cases() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let output = eval(&capsule, &["--json", "--jobs", "4"]);
    // Some case runs failed: exit 1, the run complete.
    assert_eq!(output.code, 1, "{output:#?}");
    assert_example_scores(&output);
    assert!(output.stderr.contains("[22/22]"), "{}", output.stderr);
    let run_dir = PathBuf::from(output.json()["dir"].as_str().unwrap());
    assert!(
        run_dir.starts_with(capsule.join("workdir/eval")),
        "{}",
        run_dir.display()
    );

    // Each case ran in a fresh copy of its fixture, its session and trace linked.
    let all = results(&output);
    let append = result(&all, "journal-append", "careful");
    let trace = run_dir.join(append["trace"].as_str().unwrap());
    let session = append["session"].as_str().unwrap();
    assert!(std::fs::read_to_string(&trace).unwrap().contains(session));
    let journal = workspace_of(&trace).join("notes/journal.md");
    assert_eq!(
        std::fs::read_to_string(journal).unwrap(),
        "Met Ana at 10:00 by the station.\nLunch with Bo at 13:00.\n"
    );
    assert_eq!(
        std::fs::read_to_string(capsule.join("evals/fixtures/journal/notes/journal.md")).unwrap(),
        "Met Ana at 10:00 by the station.\n",
        "the fixture itself is never written"
    );
    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(report.contains("<svg") && report.contains("journal-append"));
    assert!(!report.contains("<script"));

    // The diff of the two arms names the regressed cases and what now fails in each.
    let diff = mur().args(["eval", "diff", "--json"]).arg(&run_dir).run();
    assert_eq!(diff.code, 1, "a regression fails the diff: {diff:#?}");
    let json = diff.json();
    let names = |key: &str| -> Vec<String> {
        json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["case"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("regressed"), REGRESSED);
    assert_eq!(names("improved"), [IMPROVED]);
    assert_eq!(names("unchanged").len(), CASES - REGRESSED.len() - 1);
    assert_eq!(
        json["regressed"][0]["newly_failing"],
        serde_json::json!(["tools", "result"])
    );
    let human = mur().args(["eval", "diff"]).arg(&run_dir).run();
    assert_eq!(human.code, 1);
    assert!(
        human.stdout.contains("4 cases regressed:"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains("journal-append: pass 100% → 0%"),
        "{}",
        human.stdout
    );
    // The other way round, only the case the careful arm takes a turn too many on.
    let reverse = mur()
        .args(["eval", "diff", "--base-arm", "hasty", "--arm", "careful"])
        .arg(&run_dir)
        .run();
    assert_eq!(reverse.code, 1, "{reverse:#?}");
    assert!(
        reverse.stdout.contains("1 case regressed:\n  ok-file"),
        "{}",
        reverse.stdout
    );

    // `show` finds the newest run of the capsule by itself, and writes the report elsewhere.
    let html = work.path().join("report.html");
    let show = mur()
        .args(["eval", "show", "--capsule"])
        .arg(&capsule)
        .arg("--html")
        .arg(&html)
        .run();
    assert_eq!(show.code, 0, "{show:#?}");
    assert!(
        show.stdout.contains("careful") && show.stdout.contains("10/11"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("✗ rubric: the grader failed it"),
        "{}",
        show.stdout
    );
    assert_eq!(std::fs::read_to_string(html).unwrap(), report);

    // Two runs compare arm by arm: one arm again, repeated twice, against the first run.
    let again = eval(&capsule, &["--json", "--arms", "hasty", "--repeat", "2"]);
    assert_eq!(again.code, 1, "{again:#?}");
    assert_eq!(results(&again).len(), 2 * CASES);
    let second = again.json()["dir"].as_str().unwrap().to_string();
    let across = mur()
        .args(["eval", "diff", "--json"])
        .arg(&run_dir)
        .arg(&second)
        .run();
    // careful (the base run's first arm) against hasty, the new run's only arm.
    assert_eq!(across.json()["new"]["summary"]["runs"], 2 * CASES as u64);
    let regressed = across.json()["regressed"].as_array().unwrap().len();
    assert_eq!(regressed, REGRESSED.len(), "{}", across.stdout);
}

#[test]
fn cassettes_recorded_against_the_emulator_hold_no_credential_and_replay_alike() {
    const SECRET: &str = "sk-ant-eval-recording-9f3b2c7d";
    let script = Script::from_file(repo_root().join("examples/hello/evals/emulator.yaml")).unwrap();
    let emulator = Emulator::builder(script).api_key(SECRET).start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let _ = std::fs::remove_dir_all(capsule.join("evals/cassettes"));
    let recorded = mur()
        .env("ANTHROPIC_BASE_URL", emulator.url())
        .env("ANTHROPIC_API_KEY", SECRET)
        .args(["eval", "run", "--record", "--json", "--jobs", "6"])
        .arg(capsule.join("evals/notes.jsonl"))
        .arg("--capsule")
        .arg(&capsule)
        .run();
    assert_eq!(recorded.code, 1, "{recorded:#?}");
    assert_example_scores(&recorded);
    let run = recorded.json();
    let modes: Vec<&str> = run["run"]["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["record", "record"]);
    let mut cassettes = 0;
    for arm in ["careful", "hasty"] {
        for entry in std::fs::read_dir(capsule.join("evals/cassettes").join(arm)).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            assert!(!text.contains(SECRET), "a cassette holds the key");
            assert!(
                !text.contains("x-api-key"),
                "a cassette holds the key's header"
            );
            cassettes += 1;
        }
    }
    assert_eq!(cassettes, 2 * CASES);

    // Replayed with the emulator gone and no key anywhere: the same verdicts.
    drop(emulator);
    let replayed = eval(&capsule, &["--json"]);
    assert_eq!(replayed.code, 1, "{replayed:#?}");
    assert_example_scores(&replayed);

    if std::env::var_os("MURMUR_UPDATE_CASSETTES").is_some() {
        let committed = repo_root().join("examples/hello/evals/cassettes");
        let _ = std::fs::remove_dir_all(&committed);
        copy_dir(&capsule.join("evals/cassettes"), &committed);
    }
}

#[test]
fn a_capsule_changed_since_the_recording_fails_its_replay_naming_the_difference() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let manifest = capsule.join("murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("Answer in one or two sentences.", "Answer in one sentence."),
    )
    .unwrap();
    let strict = eval(&capsule, &["--json", "--arms", "careful"]);
    assert_eq!(strict.code, 1, "{strict:#?}");
    for result in results(&strict) {
        assert_eq!(result["error"]["code"], "E-RUN-029", "{result}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains("`system"), "{message}");
    }
    // By turn, the recorded answers serve the changed capsule as before.
    let lenient = eval(
        &capsule,
        &["--json", "--arms", "careful", "--replay-mode", "lenient"],
    );
    assert_eq!(lenient.code, 1);
    assert_eq!(failing(&results(&lenient), "careful"), [IMPROVED]);
}

#[test]
fn bad_datasets_arms_and_fixtures_are_refused_with_their_codes() {
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let dataset = work.path().join("bad.jsonl");
    let run = |extra: &[&str]| {
        mur()
            .args(["eval", "run"])
            .arg(&dataset)
            .arg("--capsule")
            .arg(&capsule)
            .args(extra)
            .run()
    };
    std::fs::write(
        &dataset,
        "{\"id\": \"a\", \"task\": \"t\"}\n{\"id\": \"b\", \"task\": \"t\", \"expect\": {\"tool\": [\"x\"]}}\n",
    )
    .unwrap();
    let output = run(&["--json"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], "E-EVAL-001");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("bad.jsonl:2:") && message.contains("unknown field `tool`"),
        "{message}"
    );

    // A command's `allow` and `network` entries are checked like the rest.
    std::fs::write(
        &dataset,
        "{\"id\": \"a\", \"task\": \"t\", \"expect\": {\"commands\": [{\"run\": \"true\", \"allow\": [\"grep\"], \"network\": [\"ftp://files.example.com\"]}]}}\n",
    )
    .unwrap();
    let output = run(&["--json"]);
    assert_eq!(output.code, 2, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], "E-EVAL-001");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("bad.jsonl:1: `expect.commands[0].network[0]`"),
        "{message}"
    );

    // A fixture holding a link is refused: nothing it points at is copied.
    let fixture = work.path().join("linked");
    std::fs::create_dir(&fixture).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", fixture.join("passwd")).unwrap();
    std::fs::write(
        &dataset,
        "{\"id\": \"linked\", \"task\": \"Greet me in one line; do not write any file.\", \"workdir\": \"linked\"}\n",
    )
    .unwrap();
    let arms = work.path().join("arms.yaml");
    std::fs::write(
        &arms,
        "arms:\n  careful:\n    env: { HELLO_MODEL: scripted-careful }\n    choice: nowhere\n    cassettes: missing\n",
    )
    .unwrap();
    let arms_arg = arms.to_str().unwrap();
    let unknown_choice = run(&["--json", "--arms-file", arms_arg]);
    assert_eq!(unknown_choice.code, 2, "{unknown_choice:#?}");
    assert_eq!(unknown_choice.json()["error"]["code"], "E-EVAL-002");
    assert!(unknown_choice.stdout.contains("no driver choice `nowhere`"));
    let unknown_arm = run(&["--json", "--arms-file", arms_arg, "--arms", "reckless"]);
    assert_eq!(unknown_arm.json()["error"]["code"], "E-EVAL-002");
    assert!(unknown_arm.stdout.contains("the arms are careful"));

    std::fs::write(
        &arms,
        "arms:\n  careful:\n    env: { HELLO_MODEL: scripted-careful }\n    cassettes: missing\n",
    )
    .unwrap();
    let linked = run(&["--json", "--arms-file", arms_arg]);
    assert_eq!(linked.code, 1, "{linked:#?}");
    let result = &results(&linked)[0];
    assert_eq!(
        result["error"]["code"], "E-RUN-030",
        "no cassette: {result}"
    );
    std::fs::create_dir(work.path().join("missing")).unwrap();
    std::fs::copy(
        capsule.join("evals/cassettes/careful/greeting.cassette.json"),
        work.path().join("missing/linked.cassette.json"),
    )
    .unwrap();
    let linked = run(&["--json", "--arms-file", arms_arg]);
    let result = &results(&linked)[0];
    assert_eq!(result["error"]["code"], "E-RUN-001", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("link"),
        "{result}"
    );

    let show = mur()
        .args(["eval", "show", "--json", "--workdir"])
        .arg(work.path().join("nothing"))
        .run();
    assert_eq!(show.code, 2);
    assert_eq!(show.json()["error"]["code"], "E-EVAL-003");
}

#[test]
fn a_fixture_holding_a_hard_link_is_refused_and_nothing_of_the_linked_file_is_copied() {
    // A host file outside the fixture, hard-linked into it: the link count says so.
    const MARKER: &str = "HOST-ONLY-BYTES-0d5b1f: not the fixture's to give";
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let outside = work.path().join("outside.txt");
    std::fs::write(&outside, MARKER).unwrap();
    let fixture = work.path().join("hardlinked");
    std::fs::create_dir_all(fixture.join("notes")).unwrap();
    // Sorted before the link: not copied either, the whole seed is refused.
    std::fs::write(fixture.join("a-first.txt"), "the fixture's own").unwrap();
    std::fs::hard_link(&outside, fixture.join("notes/linked.txt")).unwrap();
    let dataset = work.path().join("cases.jsonl");
    std::fs::write(
        &dataset,
        "{\"id\": \"hardlinked\", \"task\": \"Greet me in one line; do not write any file.\", \"workdir\": \"hardlinked\"}\n",
    )
    .unwrap();
    let arms = careful_arm_replaying_the_greeting(work.path(), &capsule, "hardlinked");

    let output = eval_run(&dataset, &capsule, &arms, &[]);
    assert_eq!(output.code, 1, "{output:#?}");
    let result = &results(&output)[0];
    assert_eq!(result["error"]["code"], "E-RUN-001", "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("notes/linked.txt") && message.contains("is a hard link"),
        "{message}"
    );

    // Nothing of the linked file, nor anything else of the fixture, is in the case's
    // workspace (or anywhere the run wrote).
    let run_dir = PathBuf::from(output.json()["dir"].as_str().unwrap());
    let mut seen = 0;
    let mut stack = vec![run_dir.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                seen += 1;
                let bytes = std::fs::read(entry.path()).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains("HOST-ONLY-BYTES"),
                    "{} holds the linked host file's bytes",
                    entry.path().display()
                );
                assert!(
                    !entry.path().ends_with("linked.txt") && !entry.path().ends_with("a-first.txt"),
                    "{} was copied",
                    entry.path().display()
                );
            }
        }
    }
    assert!(
        seen > 0,
        "the run wrote its results under {}",
        run_dir.display()
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), MARKER);
}

/// A listener on 127.0.0.1 that never blocks: `connections()` says how many came.
struct Listener(std::net::TcpListener);

impl Listener {
    fn start() -> Listener {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Listener(listener)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    fn connections(&self) -> usize {
        let mut count = 0;
        while self.0.accept().is_ok() {
            count += 1;
        }
        count
    }
}

#[test]
fn a_commands_scorer_runs_what_the_agent_wrote_held_by_the_sessions_class() {
    // The fixture's check.sh, as an agent that rewrote it left it: it copies a host secret
    // into the workspace, writes outside it, and reaches a listener of the host, each through
    // a binary the dataset author allowed for the check.
    const SECRET: &str = "HOST-SECRET-7e2a41: never the scorer's to read";
    let work = tempfile::tempdir().unwrap();
    let capsule = example(work.path());
    let secret = work.path().join("host-secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    let outside = work.path().join("written-outside.txt");
    let forbidden = Listener::start();
    let granted = Listener::start();
    let fixture = work.path().join("hostile");
    std::fs::create_dir_all(fixture.join("notes")).unwrap();
    std::fs::write(fixture.join("notes/seed.txt"), "hello\n").unwrap();
    // The host's python3 by its real path (a version manager's shim is a script of its own).
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = PathBuf::from(String::from_utf8_lossy(&python.stdout).trim())
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let connect = |port: u16| {
        format!(
            "{python} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=5)'"
        )
    };
    std::fs::write(
        fixture.join("check.sh"),
        format!(
            "cat {secret} > stolen.txt 2>>errors.txt; echo \"read=$?\" >> outcomes.txt\n\
             (echo pwned > {outside}) 2>>errors.txt; echo \"write=$?\" >> outcomes.txt\n\
             {connect} 2>>errors.txt; echo \"connect=$?\" >> outcomes.txt\n\
             exit 0\n",
            secret = secret.display(),
            outside = outside.display(),
            connect = connect(forbidden.port()),
        ),
    )
    .unwrap();
    let commands = serde_json::json!([
        {"run": "sh check.sh", "allow": ["cat", python]},
        {"run": "grep -qx hello notes/seed.txt", "allow": ["grep"]},
        {"run": "grep -qx hello notes/seed.txt"},
        {"run": connect(granted.port()), "allow": [python],
         "network": [format!("127.0.0.1:{}", granted.port())]},
        {"run": connect(forbidden.port()), "allow": [python], "network": ["127.0.0.1:1"]},
    ]);
    let case = serde_json::json!({
        "id": "hostile",
        "task": "Greet me in one line; do not write any file.",
        "workdir": "hostile",
        "expect": {"commands": commands},
    });
    let dataset = work.path().join("hostile.jsonl");
    std::fs::write(&dataset, format!("{case}\n")).unwrap();
    let arms = careful_arm_replaying_the_greeting(work.path(), &capsule, "hostile");

    let output = eval_run(&dataset, &capsule, &arms, &[]);
    assert_eq!(output.code, 1, "{output:#?}");
    let result = &results(&output)[0];
    assert!(result["error"].is_null(), "{result}");
    let verdicts: Vec<(String, bool)> = result["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["scorer"].as_str().unwrap().to_string(),
                s["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, bool)> = [
        ("exit", true),
        ("command 1", true),
        ("command 2", true),
        ("command 3", false),
        ("command 4", true),
        ("command 5", false),
    ]
    .iter()
    .map(|(name, passed)| (name.to_string(), *passed))
    .collect();
    assert_eq!(verdicts, expected, "{result}");
    let detail = |n: usize| result["scores"][n]["detail"].as_str().unwrap().to_string();
    // A binary the command did not declare is refused, the child's error in the detail.
    assert!(
        detail(3).starts_with("exited 126") && detail(3).contains("grep: Permission denied"),
        "{}",
        detail(3)
    );
    // A port the command's `network` does not name is refused however the host listens.
    assert!(
        detail(5).starts_with("exited 1 ") && detail(5).contains("PermissionError"),
        "{}",
        detail(5)
    );

    // What check.sh tried, each refused.
    let run_dir = PathBuf::from(output.json()["dir"].as_str().unwrap());
    let workspace = workspace_of(&run_dir.join(result["trace"].as_str().unwrap()));
    let outcomes = std::fs::read_to_string(workspace.join("outcomes.txt")).unwrap();
    assert_eq!(outcomes, "read=1\nwrite=2\nconnect=1\n", "{outcomes}");
    let errors = std::fs::read_to_string(workspace.join("errors.txt")).unwrap();
    assert!(
        errors.contains(&format!("{}: Permission denied", secret.display())),
        "{errors}"
    );
    assert!(
        errors.contains(&format!(
            "cannot create {}: Permission denied",
            outside.display()
        )),
        "{errors}"
    );
    // Landlock allows `connect` only to the ports the command's `network` names (none here).
    assert!(
        errors.contains("PermissionError: [Errno 13] Permission denied"),
        "{errors}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("stolen.txt")).unwrap(),
        "",
        "the host secret was copied into the workspace"
    );
    assert!(!outside.exists(), "the scorer wrote outside the workspace");
    assert_eq!(forbidden.connections(), 0, "the scorer reached the host");
    // The one place a command's `network` granted was reached.
    assert_eq!(granted.connections(), 1);

    // `--containment advisory`, asked for knowingly, reaches the scorer too: any binary runs,
    // and the workspace is still the only place written.
    let advisory = eval_run(&dataset, &capsule, &arms, &["--containment", "advisory"]);
    let result = &results(&advisory)[0];
    assert_eq!(result["scores"][3]["scorer"], "command 3");
    assert_eq!(result["scores"][3]["passed"], true, "{result}");
    assert!(!outside.exists(), "the scorer wrote outside the workspace");
}

const EMU_KEY: &str = "sk-emulator-eval-changes-41";

/// An emulator answering each task (by a substring of it) with one `shell` call running
/// `bash -c SCRIPT`, then `done`; and a capsule of its in `dir` that may run `bash`, `rm`, `cat`.
fn shell_scripted(dir: &Path, conversations: &[(&str, &str)]) -> Emulator {
    let mut yaml = String::from("conversations:\n");
    for (n, (task, script)) in conversations.iter().enumerate() {
        yaml.push_str(&format!(
            "  - task: \"{task}\"\n    turns:\n      - {{ tool_calls: [ {{ id: c{n}, name: shell, input: {{ binary: bash, args: [ \"-c\", \"{script}\" ] }} }} ] }}\n      - {{ text: done }}\n"
        ));
    }
    let emulator = Emulator::builder(Script::from_yaml(&yaml).expect("script"))
        .api_key(EMU_KEY)
        .start()
        .unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        emulator.capsule_manifest(
            "changer",
            "",
            "capabilities:\n  shell: { allow: [ bash, rm, cat ] }",
        ),
    )
    .unwrap();
    emulator
}

/// `(scorer, passed, detail)` of a result's scores.
fn scored(result: &Value) -> Vec<(String, bool, String)> {
    result["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["scorer"].as_str().unwrap().to_string(),
                s["passed"].as_bool().unwrap(),
                s["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_case_is_scored_on_what_its_session_changed_in_its_workspace() {
    let work = tempfile::tempdir().unwrap();
    let capsule = work.path().join("capsule");
    std::fs::create_dir(&capsule).unwrap();
    let _emulator = shell_scripted(
        &capsule,
        &[
            (
                "Tidy exactly",
                "printf more >> notes/a.md; rm old.txt; printf b > notes/b.md",
            ),
            (
                "Tidy sloppily",
                "printf more >> notes/a.md; printf x > keep.txt; printf t > tmp.txt",
            ),
        ],
    );
    let fixture = work.path().join("notes-fixture");
    std::fs::create_dir_all(fixture.join("notes")).unwrap();
    std::fs::write(fixture.join("notes/a.md"), "a\n").unwrap();
    std::fs::write(fixture.join("old.txt"), "old\n").unwrap();
    std::fs::write(fixture.join("keep.txt"), "keep\n").unwrap();
    let changes = serde_json::json!({
        "created": ["notes/*.md"],
        "modified": ["notes/a.md"],
        "deleted": ["old.txt"],
        "untouched": ["keep.txt"],
        "only": true,
    });
    let dataset = work.path().join("tidy.jsonl");
    let case = |id: &str, task: &str| {
        serde_json::json!({"id": id, "task": task, "workdir": "notes-fixture",
                           "expect": {"changes": changes}})
    };
    std::fs::write(
        &dataset,
        format!(
            "{}\n{}\n",
            case("exact", "Tidy exactly the notes."),
            case("sloppy", "Tidy sloppily the notes.")
        ),
    )
    .unwrap();
    let run = |dataset: &Path| {
        mur()
            .env("EMU_KEY", EMU_KEY)
            .args(["eval", "run", "--json"])
            .arg(dataset)
            .arg("--capsule")
            .arg(&capsule)
            .run()
    };
    let output = run(&dataset);
    assert_eq!(output.code, 1, "{output:#?}");
    let all = results(&output);
    let exact = result(&all, "exact", "base");
    assert_eq!(exact["passed"], true, "{exact}");
    assert_eq!(
        scored(exact),
        [
            ("exit", true, "ok"),
            ("changes created", true, "created notes/b.md"),
            ("changes modified", true, "modified notes/a.md"),
            ("changes deleted", true, "deleted old.txt"),
            (
                "changes untouched",
                true,
                "nothing matching `keep.txt` changed"
            ),
            (
                "changes only",
                true,
                "no other path changed (3 changes in all)"
            ),
        ]
        .map(|(s, p, d)| (s.to_string(), p, d.to_string()))
    );
    // Each miss is named: the pattern nothing matched, and what changed instead.
    assert_eq!(
        scored(result(&all, "sloppy", "base")),
        [
            ("exit", true, "ok"),
            (
                "changes created",
                false,
                "nothing created matches `notes/*.md`; created: tmp.txt"
            ),
            ("changes modified", true, "modified notes/a.md"),
            (
                "changes deleted",
                false,
                "nothing deleted matches `old.txt`; nothing was deleted"
            ),
            (
                "changes untouched",
                false,
                "changed what must stay untouched: modified keep.txt (`keep.txt`)"
            ),
            (
                "changes only",
                false,
                "also created tmp.txt; also modified keep.txt"
            ),
        ]
        .map(|(s, p, d)| (s.to_string(), p, d.to_string()))
    );
    // The result names the case's workspace beside its trace, both in the run directory.
    let run_dir = PathBuf::from(output.json()["dir"].as_str().unwrap());
    let session = exact["session"].as_str().unwrap();
    assert_eq!(
        exact["workspace"],
        format!("sessions/{session}/workspace"),
        "{exact}"
    );
    assert_eq!(exact["trace"], format!("sessions/{session}/trace.jsonl"));
    let workspace = run_dir.join(exact["workspace"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/a.md")).unwrap(),
        "a\nmore"
    );
    assert_eq!(
        workspace,
        workspace_of(&run_dir.join(exact["trace"].as_str().unwrap()))
    );

    // A pattern that climbs out of the workspace refuses the dataset, naming line and field.
    let bad = work.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        format!(
            "{}\n{}\n",
            case("exact", "Tidy exactly the notes."),
            serde_json::json!({"id": "b", "task": "t",
                               "expect": {"changes": {"deleted": ["notes/**", "../secret"]}}})
        ),
    )
    .unwrap();
    let refused = run(&bad);
    assert_eq!(refused.code, 2, "{refused:#?}");
    assert_eq!(refused.json()["error"]["code"], "E-EVAL-001");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("bad.jsonl:2: `expect.changes.deleted[1]`: `../secret` is not a path pattern of the workspace"),
        "{message}"
    );
}

#[test]
fn with_workspace_every_case_works_on_one_directory_in_place_one_after_another() {
    let work = tempfile::tempdir().unwrap();
    let capsule = work.path().join("capsule");
    std::fs::create_dir(&capsule).unwrap();
    let _emulator = shell_scripted(
        &capsule,
        &[
            ("Make the file", "printf hello > made.txt"),
            ("Copy the file", "cat made.txt > seen.txt"),
        ],
    );
    let dataset = work.path().join("inplace.jsonl");
    let first = serde_json::json!({"id": "make", "task": "Make the file made.txt.",
        "expect": {"changes": {"created": ["made.txt"], "only": true}}});
    let second = serde_json::json!({"id": "copy", "task": "Copy the file made.txt to seen.txt.",
        "expect": {"files": [{"path": "seen.txt", "regex": "^hello$"}],
                   "changes": {"created": ["seen.txt"], "only": true}}});
    std::fs::write(&dataset, format!("{first}\n{second}\n")).unwrap();
    let place = tempfile::tempdir().unwrap();
    std::fs::write(place.path().join("README.md"), "mine\n").unwrap();
    let run = |dataset: &Path, place: &Path| {
        mur()
            .env("EMU_KEY", EMU_KEY)
            .args(["eval", "run", "--json", "--jobs", "4"])
            .arg(dataset)
            .arg("--capsule")
            .arg(&capsule)
            .arg("--workspace")
            .arg(place)
            .run()
    };
    let output = run(&dataset, place.path());
    assert_eq!(output.code, 0, "{output:#?}");
    let all = results(&output);
    // The second case read what the first wrote; each session's changes are its own.
    for id in ["make", "copy"] {
        let case = result(&all, id, "base");
        assert_eq!(case["passed"], true, "{case}");
        assert_eq!(
            case["workspace"],
            place.path().canonicalize().unwrap().display().to_string(),
            "{case}"
        );
    }
    assert_eq!(output.json()["run"]["jobs"], 1);
    // The directory holds its own file and what the cases made: nothing of any record.
    let mut names: Vec<String> = std::fs::read_dir(place.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["README.md", "made.txt", "seen.txt"]);
    assert_eq!(
        std::fs::read_to_string(place.path().join("seen.txt")).unwrap(),
        "hello"
    );

    // A case with a fixture of its own is refused before anything runs, by name and line.
    let fixture = work.path().join("fixture");
    std::fs::create_dir(&fixture).unwrap();
    let seeded = work.path().join("seeded.jsonl");
    let own = serde_json::json!({"id": "seeded", "task": "t", "workdir": "fixture"});
    std::fs::write(&seeded, format!("{first}\n{own}\n")).unwrap();
    let refused = run(&seeded, place.path());
    assert_eq!(refused.code, 2, "{refused:#?}");
    assert_eq!(refused.json()["error"]["code"], "E-EVAL-005");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("case `seeded` (line 2)"), "{message}");
    let runs = std::fs::read_dir(capsule.join("workdir/eval"))
        .unwrap()
        .count();
    assert_eq!(runs, 1, "the refused run left no run directory");

    // A directory over the runs' records cannot be worked on in place.
    let over = run(&dataset, &capsule);
    assert_eq!(over.code, 2, "{over:#?}");
    assert_eq!(over.json()["error"]["code"], "E-RUN-033");
}
