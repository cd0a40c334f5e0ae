//! The first-party toolbox (`artifacts/edit-file`, `search`, `list-files`, `fetch`, `ask`),
//! each driven through `mur tool invoke` and in a session of the real `mur`. What every module
//! shares is here: the tool's artifact, one invocation, the printed result, a capsule of it.

mod ask;
mod edit_file;
mod fetch;
mod list_files;
mod search;

use std::path::{Path, PathBuf};

use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

/// The key the provider emulator of every toolbox session asks for.
const KEY: &str = "sk-emulator-0001";

/// The first-party tool `name`.
fn artifact(name: &str) -> PathBuf {
    repo_root().join("artifacts").join(name)
}

/// `mur tool invoke --json` of the tool `name` on `input` (given on stdin, so of any size) in
/// `workdir`.
fn invoke_bytes(name: &str, input: Vec<u8>, workdir: &Path) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .args(["tool", "invoke", "--json"])
        .arg(artifact(name))
        .args(["--input", "-"])
        .arg("--workdir")
        .arg(workdir)
        .stdin(input)
        .run()
}

/// [`invoke_bytes`] of `input` as JSON.
fn invoke(name: &str, input: &Value, workdir: &Path) -> MurOutput {
    invoke_bytes(name, input.to_string().into_bytes(), workdir)
}

/// The printed result of a call that ended `status`, its exit code checked (`passed` exits 0,
/// any other status 1).
fn ended(output: &MurOutput, status: &str) -> Value {
    let printed = output.json();
    assert_eq!(printed["result"]["status"], status, "{printed:#}");
    assert_eq!(
        output.code,
        if status == "passed" { 0 } else { 1 },
        "{output:#?}"
    );
    printed
}

/// The text a printed result hands the model.
fn text(printed: &Value) -> &str {
    printed["output"].as_str().unwrap_or_default()
}

/// `mur run --json` of the capsule in `dir` on `task` against the emulator (key `KEY`), its
/// sessions under `dir/work`, working in `workspace` in place when given; the report of a
/// session that ended `ok`.
fn run_session(dir: &Path, workspace: Option<&Path>, task: &str) -> Value {
    let mut mur = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .args(["run", "--json"])
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"));
    if let Some(workspace) = workspace {
        mur = mur.arg("--workspace").arg(workspace);
    }
    let output = mur.args(["--task", task]).run();
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    assert_eq!(report["exit_status"], "ok", "{report:#}");
    report
}

/// The `tool_call` events of the session `report` names, in order.
fn tool_calls(report: &Value) -> Vec<Value> {
    std::fs::read_to_string(report["trace_path"].as_str().unwrap())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["event_type"] == "tool_call")
        .collect()
}

/// A capsule named `name` in `dir` whose model is the emulator at `endpoint` (the first-party
/// Anthropic driver, key `${EMU_KEY}`), with the first-party `tools`; `rest` follows its
/// `inference:` block (lines indented by two spaces add to it).
fn capsule(dir: &Path, endpoint: &str, name: &str, tools: &[&str], rest: &str) -> PathBuf {
    let entries: Vec<String> = tools
        .iter()
        .map(|tool| {
            format!(
                "  - {{ name: {tool}, version: \"0.1.0\", runtime: tool, path: {} }}",
                artifact(tool).display()
            )
        })
        .collect();
    let text = murmur_testkit::emulator::capsule_manifest(
        endpoint,
        name,
        "A capsule of the toolbox's tests.",
        &entries.join("\n"),
        rest,
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), text).unwrap();
    dir.to_path_buf()
}
