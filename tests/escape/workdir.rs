//! Escape cases: the session's two places. A hostile tool (the `probe` fixture's `symlink`
//! action) or a shell child plants links where the host writes or reads its own files, and
//! the host must never act through them: nothing outside the workspace is read or written,
//! `mur` survives, and the trace is whole.
//!
//! The record's files (`out/result.txt`, `logs/hook-<name>.log`) are out of the attacker's
//! reach: a link planted at their names lands in the workspace (the tool's and the child's
//! `.`), stays there as planted, and the record's file is written whole beside it. The files
//! the host keeps in the workspace (the shell's full output, `.murmur-scratch/shell-0001.log`), and
//! those it reads there (a `Makefile`, a `data-path`), are where a planted link is met: it is
//! replaced, or refused, never followed.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-escape-workdir";
const SECRET: &str = "the host's secret: never in a trace, never overwritten\n";

/// A capsule in a temp dir (with a `victim/` beside it, holding `secret.txt`), the probe tool,
/// optional shell binaries and hooks, and the emulator playing `turns`.
pub(crate) struct Setup {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

impl Setup {
    /// `turns` gets the victim directory (outside the workspace and the record) and gives the
    /// model's turns.
    pub(crate) fn new(
        turns: impl FnOnce(&Path) -> Vec<Value>,
        shell: &[&str],
        hooks: &str,
    ) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("secret.txt"), SECRET).unwrap();
        let script = serde_json::to_string(&json!({ "turns": turns(&victim) })).unwrap();
        let emulator = Emulator::builder(Script::from_yaml(&script).expect("script"))
            .api_key(KEY)
            .start()
            .unwrap();
        let shell = if shell.is_empty() {
            String::new()
        } else {
            format!("  shell: {{ allow: [ {} ] }}\n", shell.join(", "))
        };
        let text = format!(
            r#"name: escapee
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: probe, version: "0.1.0", runtime: tool, path: {probe} }}
{hooks}capabilities:
{shell}  env: {{ allow: [ LANG ] }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
            driver = repo_root().join("artifacts/driver-anthropic").display(),
            probe = repo_root().join("tests/fixtures/probe").display(),
            endpoint = emulator.url(),
        );
        std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
        Setup { dir, emulator }
    }

    fn victim(&self) -> PathBuf {
        self.dir.path().join("victim")
    }

    /// `mur run --json` of the capsule, not started yet.
    pub(crate) fn mur(&self) -> Mur {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .env("LANG", "C.UTF-8")
            .args(["run", "--json", "--task", "go"])
            .arg(self.dir.path())
            .arg("--workdir")
            .arg(self.dir.path().join("work"))
    }

    /// Where sessions get their directories.
    pub(crate) fn sessions(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub(crate) fn run(&self) -> Session {
        let output = self.mur().run();
        let report: Value = serde_json::from_str(&output.stdout)
            .unwrap_or_else(|_| panic!("mur did not survive to report: {output:#?}"));
        let workdir = PathBuf::from(
            report["workdir"]
                .as_str()
                .unwrap_or_else(|| panic!("no session: {output:#?}")),
        );
        let workspace = PathBuf::from(
            report["workspace"]
                .as_str()
                .unwrap_or_else(|| panic!("no workspace: {output:#?}")),
        );
        let trace = whole_trace(&workdir.join("trace.jsonl"));
        Session {
            output,
            report,
            trace,
            workdir,
            workspace,
        }
    }

    /// Nothing outside the workspace was written: `victim/` holds only the untouched secret.
    pub(crate) fn assert_victim_untouched(&self) {
        let names: Vec<_> = std::fs::read_dir(self.victim())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["secret.txt".to_string()], "written outside");
        assert_eq!(
            std::fs::read_to_string(self.victim().join("secret.txt")).unwrap(),
            SECRET
        );
    }

    /// Nothing outside the workspace was read into what the model or the trace saw.
    fn assert_secret_never_read(&self, session: &Session) {
        let trace = std::fs::read_to_string(session.workdir.join("trace.jsonl")).unwrap();
        assert!(
            !trace.contains("the host's secret"),
            "the secret reached the trace"
        );
        for request in self.emulator.requests() {
            assert!(
                !request.body.to_string().contains("the host's secret"),
                "the secret reached the model"
            );
        }
    }
}

pub(crate) struct Session {
    pub(crate) output: MurOutput,
    pub(crate) report: Value,
    pub(crate) trace: Vec<Value>,
    /// The record (`report["workdir"]`): the trace, the result, the runtime's logs.
    pub(crate) workdir: PathBuf,
    /// The workspace (`report["workspace"]`): the tools' and children's `.`.
    pub(crate) workspace: PathBuf,
}

impl Session {
    pub(crate) fn events(&self, event_type: &str) -> Vec<&Value> {
        self.trace
            .iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }

    /// `path` in the workspace is the link the attacker planted, still leading to `target`
    /// (absolute), outside.
    fn assert_planted(&self, path: &str, target: &Path) {
        let link = self.workspace.join(path);
        assert!(
            std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()),
            "the attacker's link is not in the workspace: {}",
            link.display()
        );
        assert_eq!(
            std::fs::canonicalize(&link).ok(),
            Some(target.canonicalize().unwrap()),
            "{} does not lead to {}",
            link.display(),
            target.display()
        );
    }

    /// The record's `path` is a regular file (no link) whose text passes `expected`.
    fn assert_record_file(&self, path: &str, expected: impl FnOnce(&str) -> bool) {
        let file = self.workdir.join(path);
        let meta =
            std::fs::symlink_metadata(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(meta.is_file(), "{} is not a regular file", file.display());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(expected(&text), "{}: {text:?}", file.display());
    }
}

/// Every line of the trace parses, and it ends with `session_end`.
pub(crate) fn whole_trace(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "the trace ends mid-line");
    let events: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("a whole trace line"))
        .collect();
    assert_eq!(
        events.last().unwrap()["event_type"],
        "session_end",
        "the trace has no session_end"
    );
    events
}

pub(crate) fn probe_call(id: &str, input: Value) -> Value {
    json!({ "reply": { "tool_calls": [ { "id": id, "name": "probe", "input": input } ] } })
}

pub(crate) fn shell_call(id: &str, binary: &str, args: &[&str]) -> Value {
    json!({ "reply": { "tool_calls": [ {
        "id": id, "name": "shell", "input": { "binary": binary, "args": args }
    } ] } })
}

/// The probe plants `path -> target` (absolute) in its workspace. Its WASI filesystem makes no
/// link to an absolute path, so the link climbs there: out of `<dir>/work/<session>/workspace/`
/// (`dir` the capsule's folder, holding `victim`), then to `target`.
fn plant(id: &str, path: &str, target: &Path, victim: &Path) -> Value {
    let dir = victim.parent().unwrap();
    let mut relative = PathBuf::new();
    for _ in 0..3 + path.matches('/').count() {
        relative.push("..");
    }
    match target.strip_prefix(dir) {
        Ok(rest) => relative.push(rest),
        Err(_) => {
            for _ in dir.components().skip(1) {
                relative.push("..");
            }
            relative.push(target.strip_prefix("/").unwrap());
        }
    }
    probe_call(
        id,
        json!({"action": "symlink", "path": path, "target": relative.display().to_string(), "replace": true}),
    )
}

pub(crate) fn text(reply: &str) -> Value {
    json!({ "reply": { "text": reply } })
}

#[test]
fn a_planted_out_link_never_receives_the_result() {
    // `out -> <victim>`: the tool replaces its `out/` with a link to the victim. The final
    // answer is saved in the record's own `out/`, which the tool never reached; nothing goes
    // through the link.
    let setup = Setup::new(
        |victim| vec![plant("p1", "out", victim, victim), text("the final answer")],
        &[],
        "",
    );
    let session = setup.run();
    setup.assert_victim_untouched();
    setup.assert_secret_never_read(&session);
    session.assert_planted("out", &setup.victim());
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    assert_eq!(session.report["exit_status"], "ok", "{:#}", session.report);
    let end = session.events("task_end")[0];
    assert_eq!(end["exit_status"], "ok", "{end:#}");
    let result = session.report["tasks"][0]["result_path"].as_str().unwrap();
    assert_eq!(Path::new(result), session.workdir.join("out/result.txt"));
    session.assert_record_file("out/result.txt", |text| text == "the final answer");
    assert!(
        !session.output.stderr.contains("E-TRC-001"),
        "{:#?}",
        session.output
    );
}

#[test]
fn a_planted_result_link_is_replaced_not_written_through() {
    let setup = Setup::new(
        |victim| {
            vec![
                plant("p1", "out/result.txt", &victim.join("secret.txt"), victim),
                text("the final answer"),
            ]
        },
        &[],
        "",
    );
    let session = setup.run();
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    setup.assert_victim_untouched();
    // The tool's link landed in the workspace, and stays there as planted: the answer was
    // never written at it, nor through it.
    session.assert_planted("out/result.txt", &setup.victim().join("secret.txt"));
    // The record's result is the answer, in a regular file of its own.
    let result = session.report["tasks"][0]["result_path"].as_str().unwrap();
    assert_eq!(Path::new(result), session.workdir.join("out/result.txt"));
    session.assert_record_file("out/result.txt", |text| text == "the final answer");
    assert_eq!(session.report["exit_status"], "ok");
}

#[test]
fn a_hook_log_planted_as_a_link_is_never_appended_through() {
    // The tool plants `logs/hook-hostile.log` as a link to the secret; then the hook answers
    // `error` at the call's `on-tool-call` observation (a fault: the host appends a line of
    // the hook's choosing to that log).
    let hooks_dir = tempfile::tempdir().unwrap();
    let hook = murmur_testkit::fixture_hook(
        hooks_dir.path(),
        "hostile",
        "hook-probe",
        "binding: on-tool-call\nexecution_mode: blocking\ncommit_policy: none\n",
    );
    let config =
        json!({"respond": {"on-tool-call": {"arm": "error", "value": "a line the hook chose"}}});
    let entry = format!(
        "  - {{ name: hostile, version: \"0.1.0\", runtime: hook, path: {}, config: {config}, grants: [runtime/inference, runtime/tokens, task-io/read, conversation/read] }}\n",
        hook.display()
    );
    let setup = Setup::new(
        |victim| {
            vec![
                plant(
                    "p1",
                    "logs/hook-hostile.log",
                    &victim.join("secret.txt"),
                    victim,
                ),
                text("done"),
            ]
        },
        &[],
        &entry,
    );
    let session = setup.run();
    setup.assert_victim_untouched();
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    // The tool's link landed in the workspace and stays there as planted.
    session.assert_planted("logs/hook-hostile.log", &setup.victim().join("secret.txt"));
    // The fault was logged in the record's own log, a regular file the tool never reached.
    session.assert_record_file("logs/hook-hostile.log", |text| {
        text.contains("a line the hook chose")
    });
    assert_eq!(session.events("hook_dispatch_error").len(), 1);
}

#[test]
fn a_shell_child_cannot_aim_the_full_output_log_outside() {
    // The child plants the full output's log, `.murmur-scratch/shell-0001.log` in its workspace, as a
    // link to the secret (and the record's old name for it, `logs/shell-0001.log`, too), then
    // prints more than the 16 KiB the result keeps, so the host writes the full output.
    let setup = Setup::new(
        |victim| {
            let script = format!(
                "mkdir -p .murmur-scratch logs && ln -sf {secret} .murmur-scratch/shell-0001.log && ln -sf {secret} logs/shell-0001.log && head -c 40000 /dev/zero | tr '\\0' x",
                secret = victim.join("secret.txt").display()
            );
            vec![shell_call("s1", "bash", &["-c", &script]), text("done")]
        },
        &["bash", "mkdir", "ln", "head", "tr"],
        "",
    );
    let session = setup.run();
    setup.assert_victim_untouched();
    assert_eq!(session.output.code, 0, "{:#?}", session.output);
    let shell = session.events("shell")[0];
    assert_eq!(shell["exit_code"], 0, "{shell:#}");
    let full = shell["full_output_path"]
        .as_str()
        .unwrap_or_else(|| panic!("no full output: {shell:#}"));
    assert_eq!(full, ".murmur-scratch/shell-0001.log", "{shell:#}");
    // The host replaced the planted link with a regular file holding the whole output.
    let path = session.workspace.join(full);
    assert!(
        std::fs::symlink_metadata(&path).unwrap().is_file(),
        "{full}"
    );
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.windows(40000).any(|w| w.iter().all(|b| *b == b'x')));
    // The link at the record's old name reached the workspace only: it stays as planted, and
    // the record's logs hold no shell output.
    session.assert_planted("logs/shell-0001.log", &setup.victim().join("secret.txt"));
    assert!(
        std::fs::symlink_metadata(session.workdir.join("logs/shell-0001.log")).is_err(),
        "a shell log in the record"
    );
}

#[test]
fn a_planted_makefile_link_is_never_read_into_the_recipe() {
    // `Makefile -> <secret>` and `GNUmakefile -> /dev/zero` (looked at first: without a cap
    // it would take the host's memory). `make build` runs; its `shell` event has no recipe,
    // and the host read neither the secret nor the zeros.
    let setup = Setup::new(
        |victim| {
            vec![
                plant("p1", "Makefile", &victim.join("secret.txt"), victim),
                plant("p2", "GNUmakefile", Path::new("/dev/zero"), victim),
                // The child's own `make` follows the links as any program may (the zeros are
                // readable): its call ends after 5 s.
                json!({ "reply": { "tool_calls": [ {
                    "id": "s1", "name": "shell",
                    "input": { "binary": "make", "args": ["build"], "timeout_secs": 5 }
                } ] } }),
                text("done"),
            ]
        },
        &["make"],
        "",
    );
    let session = setup.run();
    session.assert_planted("Makefile", &setup.victim().join("secret.txt"));
    session.assert_planted("GNUmakefile", Path::new("/dev/zero"));
    setup.assert_victim_untouched();
    setup.assert_secret_never_read(&session);
    let shell = session.events("shell");
    assert_eq!(shell.len(), 1, "{:#?}", session.trace);
    assert!(shell[0]["recipe"].is_null(), "{:#}", shell[0]);
}

#[test]
fn a_data_path_through_a_planted_link_is_refused() {
    // The probe plants `leak -> <victim>` and returns `data-path: leak/secret.txt`.
    let setup = Setup::new(
        |victim| {
            vec![
                plant("p1", "leak", victim, victim),
                probe_call(
                    "p2",
                    json!({"action": "result", "status": "passed", "data_path": "leak/secret.txt"}),
                ),
                text("done"),
            ]
        },
        &[],
        "",
    );
    let session = setup.run();
    session.assert_planted("leak", &setup.victim());
    setup.assert_victim_untouched();
    setup.assert_secret_never_read(&session);
    let calls = session.events("tool_call");
    assert_eq!(calls.len(), 2, "{:#?}", session.trace);
    assert_eq!(calls[1]["error"]["code"], "E-RUN-006", "{:#}", calls[1]);
}
