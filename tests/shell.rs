//! The model's `shell` tool (`murmur:shell/execute` and the `shell-event` notes), through
//! `mur run` with the real Anthropic driver and the emulator scripting the model's calls. Also
//! the `on-shell` rows of the hook tables.

use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-shell-7c1d";

/// A script whose first turn calls `shell` with `input`, then ends.
fn one_call(input: Value) -> String {
    format!(
        "turns:\n  - reply: {{ tool_calls: [ {{ id: s1, name: shell, input: {input} }} ] }}\n  - reply: {{ text: done }}\n"
    )
}

struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

fn capsule(script: &str, allow: &[&str], extra: &str) -> Capsule {
    capsule_with(script, allow, extra, "")
}

/// [`capsule`] with `capabilities` lines of its own (indented two spaces).
fn capsule_with(script: &str, allow: &[&str], extra: &str, capabilities: &str) -> Capsule {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"name: sheller
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
{extra}
capabilities:
  shell: {{ allow: [ {allow} ] }}
  env: {{ allow: [ LANG ] }}
{capabilities}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
        driver = repo_root().join("artifacts/driver-anthropic").display(),
        endpoint = emulator.url(),
        allow = allow.join(", "),
    );
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

struct Run {
    output: MurOutput,
    report: Value,
    trace: Vec<Value>,
    /// The session's workspace (`report["workspace"]`): the shell child's cwd and `HOME`.
    workspace: PathBuf,
}

impl Run {
    fn shell_events(&self) -> Vec<&Value> {
        self.trace
            .iter()
            .filter(|e| e["event_type"] == "shell")
            .collect()
    }
}

impl Capsule {
    fn run(&self, env: &[(&str, &str)]) -> Run {
        let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("EMU_KEY", KEY)
            .env("LANG", "C.UTF-8")
            .args(["run", "--json", "--task", "go"])
            .arg(self.dir.path())
            .arg("--workdir")
            .arg(self.dir.path().join("work"));
        for (name, value) in env {
            mur = mur.env(name, value);
        }
        let output = mur.run();
        let report: Value = serde_json::from_str(&output.stdout)
            .unwrap_or_else(|_| panic!("no report: {output:#?}"));
        let record = PathBuf::from(report["workdir"].as_str().unwrap());
        let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
        let trace = std::fs::read_to_string(record.join("trace.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        Run {
            output,
            report,
            trace,
            workspace,
        }
    }

    /// What the model was handed for its shell call: the result JSON inside the fence.
    fn result(&self) -> (Value, bool) {
        let request = &self.emulator.requests()[1].body;
        let messages = request["messages"].as_array().unwrap();
        let block = messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|b| b["type"] == "tool_result")
            .expect("a tool result");
        let text = block["content"]
            .as_array()
            .map(|parts| parts[0]["text"].as_str().unwrap().to_string())
            .or_else(|| block["content"].as_str().map(str::to_string))
            .unwrap();
        let inner = text
            .split_once(">\n")
            .map(|(_, rest)| rest.rsplit_once("\n</untrusted-content>").unwrap().0)
            .unwrap();
        let is_error = block["is_error"].as_bool().unwrap_or(false);
        (
            serde_json::from_str(inner).unwrap_or(Value::String(inner.to_string())),
            is_error,
        )
    }
}

/// Whether the kernel offers Landlock, asked directly (not through the runtime under test).
fn landlock() -> bool {
    // SAFETY: the documented Landlock version query.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        ) > 0
    }
}

#[test]
fn an_allowed_binary_runs_in_the_workdir_and_a_non_zero_exit_is_data() {
    let capsule = capsule(
        &one_call(json!({"binary": "bash", "args": ["-c", "pwd; echo out; echo err >&2; exit 3"]})),
        &["bash"],
        "",
    );
    let run = capsule.run(&[]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    let (result, is_error) = capsule.result();
    assert!(!is_error, "a non-zero exit is data: {result}");
    assert_eq!(result["exit_code"], 3);
    assert_eq!(
        result["stdout"],
        format!("{}\nout\n", run.workspace.display())
    );
    assert_eq!(result["stderr"], "err\n");
    assert_eq!(result["truncated"], false);
    let event = run.shell_events()[0];
    assert_eq!(event["exit_code"], 3);
    assert!(
        event["binary"].as_str().unwrap().starts_with('/'),
        "{event}"
    );
    assert!(event["binary"].as_str().unwrap().ends_with("bash"));
    assert_eq!(event["script"], "pwd; echo out; echo err >&2; exit 3");
    assert_eq!(
        event["argv"],
        json!(["-c", "pwd; echo out; echo err >&2; exit 3"])
    );
    assert_eq!(run.report["totals"]["shell_calls"], 1);
}

#[test]
fn a_binary_not_allowed_is_refused_before_anything_is_spawned() {
    let capsule = capsule(
        &one_call(json!({"binary": "rm", "args": ["-rf", "keep"]})),
        &["ls"],
        "",
    );
    // `keep` exists where the session will run: the refusal must leave it.
    std::fs::create_dir_all(capsule.dir.path().join("keep")).unwrap();
    let run = capsule.run(&[]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    let (result, is_error) = capsule.result();
    assert!(is_error);
    assert!(result.as_str().unwrap().contains("E-CAP-006"), "{result}");
    assert!(
        result
            .as_str()
            .unwrap()
            .contains("not in capabilities.shell.allow")
    );
    let event = run.shell_events()[0];
    assert_eq!(event["error"]["code"], "E-CAP-006");
    assert!(event.get("exit_code").is_none());
    assert_eq!(event["argv"], json!(["-rf", "keep"]));
}

#[test]
fn bash_c_runs_only_when_bash_itself_is_allowed() {
    let refused = capsule(
        &one_call(json!({"binary": "bash", "args": ["-c", "touch made-by-bash"]})),
        &["ls", "touch"],
        "",
    );
    let run = refused.run(&[]);
    assert!(!run.workspace.join("made-by-bash").exists());
    assert_eq!(run.shell_events()[0]["error"]["code"], "E-CAP-006");

    let allowed = capsule(
        &one_call(json!({"binary": "bash", "args": ["-c", "echo $((2 + 3))"]})),
        &["bash"],
        "",
    );
    allowed.run(&[]);
    assert_eq!(allowed.result().0["stdout"], "5\n");
}

#[test]
fn output_over_16_kib_is_cut_and_kept_whole_in_the_workdir() {
    let capsule = capsule(
        &one_call(
            json!({"binary": "bash", "args": ["-c", "head -c 40000 /dev/zero | tr '\\0' a; head -c 20 /dev/zero | tr '\\0' e >&2"]}),
        ),
        &["bash", "head", "tr"],
        "",
    );
    let run = capsule.run(&[]);
    let (result, _) = capsule.result();
    assert_eq!(result["truncated"], true, "{result}");
    assert_eq!(result["stdout"].as_str().unwrap().len(), 16 * 1024);
    assert_eq!(result["stderr"], "eeeeeeeeeeeeeeeeeeee");
    // Kept in Murmur's scratch of the workspace, where the model's next call can read it.
    let path = result["full_output_path"].as_str().unwrap();
    assert_eq!(path, ".murmur-scratch/shell-0001.log");
    let full = std::fs::read_to_string(run.workspace.join(path)).unwrap();
    assert!(full.contains(&"a".repeat(40000)));
    assert!(full.contains("eeeeeeeeeeeeeeeeeeee"));
    let event = run.shell_events()[0];
    assert_eq!(event["stdout_bytes"], 40000);
    assert_eq!(event["stderr_bytes"], 20);
    assert_eq!(event["truncated"], true);
    assert_eq!(event["full_output_path"], path);
}

#[test]
fn the_time_limit_ends_the_call_and_its_children() {
    let capsule = capsule(
        &one_call(
            json!({"binary": "bash", "args": ["-c", "sleep 30 & sleep 30"], "timeout_secs": 1}),
        ),
        &["bash", "sleep"],
        "",
    );
    let started = std::time::Instant::now();
    let run = capsule.run(&[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let event = run.shell_events()[0];
    assert_eq!(event["timed_out"], true);
    assert!(event.get("exit_code").is_none());
}

#[test]
fn a_workdir_at_its_byte_limit_refuses_the_next_call_and_no_file_outgrows_the_room_left() {
    let calls = json!([
        {"id": "w1", "name": "shell", "input": {"binary": "bash", "args": ["-c", "head -c 300000 /dev/zero > big"]}},
        {"id": "w2", "name": "shell", "input": {"binary": "bash", "args": ["-c", "echo after"]}}
    ]);
    let script = format!(
        "turns:\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ tool_calls: [ {} ] }}\n  - reply: {{ text: done }}\n",
        calls[0], calls[1]
    );
    let capsule = capsule_with(
        &script,
        &["bash", "head"],
        "",
        "  resources: { workdir_max_bytes: 131072 }",
    );
    let run = capsule.run(&[]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    let events = run.shell_events();
    assert_eq!(events.len(), 2, "{events:#?}");
    // The first call could write no file larger than the room the workspace had left.
    let big = std::fs::metadata(run.workspace.join("big")).unwrap().len();
    assert!(big > 0 && big < 131072, "big is {big} bytes");
    assert_ne!(events[0]["exit_code"], 0, "{:#}", events[0]);
    // Its file filled the room: the next call is refused before anything runs.
    assert_eq!(events[1]["error"]["code"], "E-CAP-022", "{:#}", events[1]);
    assert!(events[1].get("exit_code").is_none(), "{:#}", events[1]);
}

#[test]
fn workdir_exec_makes_the_class_advisory_and_a_stronger_ask_beside_it_is_refused() {
    // The agent writes a script and runs it: only `workdir_exec` lets it, and only advisory.
    let calls = json!([
        {"id": "x1", "name": "shell", "input": {"binary": "bash", "args": ["-c", "printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh && ./run.sh"]}}
    ]);
    let script =
        format!("turns:\n  - reply: {{ tool_calls: {calls} }}\n  - reply: {{ text: done }}\n");
    let capsule = capsule_with(
        &script,
        &["bash", "chmod"],
        "",
        "  filesystem: { workdir_exec: true }",
    );
    let run = capsule.run(&[]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    assert_eq!(run.trace[0]["containment"]["achieved"], "advisory");
    let (result, _) = capsule.result();
    assert_eq!(result["stdout"], "ran\n", "{result}");

    // Asking for `scoped` beside it is a contradiction: refused before anything runs.
    let refused = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--containment", "scoped", "--task", "go"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work2"))
        .run();
    assert_eq!(refused.code, 1, "{refused:#?}");
    let report: Value = serde_json::from_str(&refused.stdout).unwrap();
    assert_eq!(report["error"]["code"], "E-CAP-020", "{report:#}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("workdir_exec"),
        "{report:#}"
    );

    // Without it, the same script cannot run under the default class.
    let scoped = capsule_with(&script, &["bash", "chmod"], "", "");
    scoped.run(&[]);
    let (result, _) = scoped.result();
    assert!(
        result["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{result}"
    );
}

#[test]
fn the_childs_environment_holds_no_secret() {
    let capsule = capsule(&one_call(json!({"binary": "env"})), &["env"], "");
    let run = capsule.run(&[
        ("SECRET_TOKEN", "hunter2-shell"),
        ("AWS_SECRET_ACCESS_KEY", "aws-xyz"),
    ]);
    let (result, _) = capsule.result();
    let env = result["stdout"].as_str().unwrap();
    for secret in ["hunter2-shell", "aws-xyz", KEY] {
        assert!(!env.contains(secret), "{secret} leaked:\n{env}");
    }
    assert!(env.contains("LANG=C.UTF-8"), "{env}");
    let home = format!("HOME={}", run.workspace.display());
    assert!(env.lines().any(|line| line == home), "{home}\n{env}");
    assert!(!env.contains("MURMUR_"), "{env}");
}

#[test]
fn an_allowed_interpreter_cannot_escape_the_workdir_under_landlock() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "the outside secret").unwrap();
    let target = outside.path().join("written.txt");
    let script = format!(
        "cat {} ; cat /etc/shadow | head -c 4 ; echo pwned > {} ; echo inside > inside.txt ; cat inside.txt",
        secret.display(),
        target.display()
    );
    let capsule = capsule(
        &one_call(json!({"binary": "bash", "args": ["-c", script]})),
        &["bash", "cat", "head"],
        "",
    );
    let run = capsule.run(&[]);
    let containment = &run.trace[0]["containment"];
    assert_eq!(containment["achieved"], "scoped", "{containment}");
    let landlock = containment["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "landlock")
        .unwrap();
    assert_eq!(landlock["state"], "enforced", "{containment}");
    let (result, _) = capsule.result();
    let stdout = result["stdout"].as_str().unwrap();
    let stderr = result["stderr"].as_str().unwrap();
    assert!(!stdout.contains("the outside secret"), "{stdout}");
    assert!(!stdout.contains("root"), "/etc/shadow was read: {stdout}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!target.exists(), "wrote outside the workspace");
    assert_eq!(
        stdout.trim_end(),
        "inside",
        "the workspace itself works: {stdout}"
    );
}

#[test]
fn tcp_connections_from_a_shell_child_follow_the_network_allow_list() {
    if !landlock() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let capsule = capsule(
        &one_call(
            json!({"binary": "bash", "args": ["-c", format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")]}),
        ),
        &["bash"],
        "",
    );
    capsule.run(&[]);
    let (result, _) = capsule.result();
    assert!(
        !result["stdout"].as_str().unwrap().contains("connected"),
        "{result}"
    );
}

/// A fake binary named `name` (a shell script) in `dir`.
fn fake(dir: &Path, name: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\necho \"fake $0 $*\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn every_shell_event_field_reaches_hooks_including_recipes_for_make_just_and_npm() {
    let bin = tempfile::tempdir().unwrap();
    fake(bin.path(), "just");
    fake(bin.path(), "npm");
    // The recipes are read from the session's own workspace: a first call writes them there.
    let seed = json!([
        {"id": "w", "name": "shell", "input": {"binary": "bash", "args": ["-c",
            "printf 'build:\\n\\tcargo build --release\\n' > Makefile; printf 'deploy env:\\n    ./deploy.sh {{env}}\\n' > justfile; printf '{\"scripts\":{\"lint\":\"eslint .\"}}' > package.json"]}}
    ]);
    let calls = json!([
        {"id": "m", "name": "shell", "input": {"binary": "make", "args": ["-s", "build"]}},
        {"id": "j", "name": "shell", "input": {"binary": "just", "args": ["deploy", "prod"]}},
        {"id": "n", "name": "shell", "input": {"binary": "npm", "args": ["run", "lint"]}},
        {"id": "b", "name": "shell", "input": {"binary": "bash", "args": ["-c", format!("echo {}", "y".repeat(300))]}}
    ]);
    let script = format!(
        "turns:\n  - reply: {{ tool_calls: {seed} }}\n  - reply: {{ tool_calls: {calls} }}\n  - reply: {{ text: done }}\n"
    );
    let hook = format!(
        "  - {{ name: hook-probe, version: \"0.1.0\", runtime: hook, path: {}, grants: [ runtime/inference, runtime/tokens, task-io/read, conversation/read ], capabilities: {{ filesystem: {{ scope: write }} }} }}",
        repo_root().join("tests/fixtures/hook-probe").display()
    );
    let capsule = capsule(&script, &["make", "just", "npm", "bash"], &hook);
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let run = capsule.run(&[("PATH", &path)]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    let events: Vec<Value> = std::fs::read_to_string(run.workspace.join("hook-probe.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["handler"] == "on-shell")
        .map(|l| l["event"].clone())
        .collect();
    // Unbound, policy none: the observation dispatch alone, one per call.
    assert_eq!(events.len(), 5, "{events:#?}");
    assert!(events.iter().all(|e| e["outcome"].is_object()));
    let make = &events[1];
    assert!(
        make["binary"].as_str().unwrap().ends_with("/make"),
        "{make}"
    );
    assert_eq!(make["argv"], json!(["-s", "build"]));
    assert_eq!(make["command"], "-s build");
    assert_eq!(make["script"], Value::Null);
    assert_eq!(make["recipe"], "cargo build --release");
    assert!(make["outcome"]["exit_code"].is_number());
    let just = &events[2];
    assert_eq!(just["recipe"], "./deploy.sh {{env}}");
    assert!(
        just["binary"]
            .as_str()
            .unwrap()
            .starts_with(bin.path().to_str().unwrap())
    );
    let npm = &events[3];
    assert_eq!(npm["recipe"], "eslint .");
    assert_eq!(npm["outcome"]["exit_code"], 0);
    let bash = &events[4];
    assert_eq!(bash["script"], format!("echo {}", "y".repeat(300)));
    assert_eq!(bash["command"].as_str().unwrap().chars().count(), 200);
    assert_eq!(bash["outcome"]["stdout_bytes"], 301);
    // The trace's shell events carry the same fields.
    let traced = run.shell_events();
    assert_eq!(traced[1]["recipe"], "cargo build --release");
    assert_eq!(traced[3]["recipe"], "eslint .");
}

#[test]
fn on_shell_decision_point_goes_to_deny_policy_hooks_only_and_a_deny_refuses() {
    let hooks = format!(
        "  - {{ name: policy-shell, version: \"0.1.0\", runtime: hook, path: {}, config: {{ rules: [ {{ script: \"rm -rf\", reason: \"no recursive deletes\" }} ] }} }}",
        repo_root().join("artifacts/policy-shell").display()
    );
    let capsule = capsule(
        &format!(
            "turns:\n  - reply: {{ tool_calls: [ {{ id: s1, name: shell, input: {} }}, {{ id: s2, name: shell, input: {} }} ] }}\n  - reply: {{ text: done }}\n",
            json!({"binary": "bash", "args": ["-c", "rm -rf keep"]}),
            json!({"binary": "bash", "args": ["-c", "echo allowed > ok.txt"]})
        ),
        &["bash"],
        &hooks,
    );
    let run = capsule.run(&[]);
    assert_eq!(run.output.code, 0, "{:#?}", run.output);
    assert!(run.workspace.join("ok.txt").exists());
    let denied: Vec<&Value> = run
        .trace
        .iter()
        .filter(|e| e["event_type"] == "call_denied")
        .collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["kind"], "shell");
    assert_eq!(denied[0]["hook"], "policy-shell");
    assert_eq!(denied[0]["reason"], "no recursive deletes");
    assert!(denied[0]["target"].as_str().unwrap().ends_with("bash"));
    // Only one shell event: the denied call never ran.
    assert_eq!(run.shell_events().len(), 1);
    let second = capsule.emulator.requests()[1].body.to_string();
    assert!(
        second.contains("denied by hook `policy-shell`: no recursive deletes"),
        "{second}"
    );
}

#[test]
fn a_sealed_session_runs_its_shell_calls_in_a_composed_root() {
    let script = "test -e /etc/shadow; echo shadow=$?; cat /etc/passwd | cut -d: -f1,6; \
                  ls -A /; echo ---; ls /usr/bin; echo inside > made.txt; cat made.txt; \
                  echo x > /etc/planted";
    let capsule = capsule(
        &one_call(json!({"binary": "bash", "args": ["-c", script]})),
        &["bash", "cat", "cut", "ls"],
        "",
    );
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("LANG", "C.UTF-8")
        .args(["run", "--json", "--containment", "sealed", "--task", "go"])
        .arg(capsule.dir.path())
        .arg("--workdir")
        .arg(capsule.dir.path().join("work"))
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report: Value = serde_json::from_str(&output.stdout).unwrap();
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    let start: Value = serde_json::from_str(
        std::fs::read_to_string(record.join("trace.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let containment = &start["containment"];
    assert_eq!(containment["asked"], "sealed", "{containment}");
    assert_eq!(containment["achieved"], "sealed", "{containment}");
    let root = containment["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "root")
        .expect("the root is a mechanism");
    assert_eq!(root["state"], "enforced", "{containment}");
    let (result, is_error) = capsule.result();
    assert!(!is_error, "{result}");
    let stdout = result["stdout"].as_str().unwrap();
    let (head, bin) = stdout.split_once("---\n").unwrap();
    let mut lines = head.lines();
    assert_eq!(lines.next(), Some("shadow=1"), "{stdout}");
    // The synthetic passwd: root, (the user running mur,) nobody; homes in the workspace.
    let accounts: Vec<&str> = lines.by_ref().take_while(|l| l.contains(':')).collect();
    assert!(accounts.len() <= 3, "{accounts:?}");
    assert!(
        accounts.iter().any(|a| a.starts_with("nobody:")),
        "{accounts:?}"
    );
    assert!(
        accounts
            .iter()
            .any(|a| a.ends_with(&format!(":{}", workspace.display()))),
        "{accounts:?} {}",
        workspace.display()
    );
    let root_entries: Vec<&str> = head.lines().skip(1 + accounts.len()).collect();
    for host_only in ["root", "home", "work", "boot", "srv", "opt", "run", "var"] {
        assert!(!root_entries.contains(&host_only), "{root_entries:?}");
    }
    for composed in ["dev", "etc", "proc", "tmp", "usr"] {
        assert!(root_entries.contains(&composed), "{root_entries:?}");
    }
    let bin: Vec<&str> = bin.lines().collect();
    for name in ["bash", "ls", "cat", "cut"] {
        assert!(bin.contains(&name), "{name} missing: {bin:?}");
    }
    assert!(!bin.contains(&"rm") && !bin.contains(&"python3"), "{bin:?}");
    assert!(bin.contains(&"inside"), "the workspace is written: {bin:?}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("made.txt")).unwrap(),
        "inside\n"
    );
    let stderr = result["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("Read-only file system") || stderr.contains("Permission denied"),
        "{stderr}"
    );
}
