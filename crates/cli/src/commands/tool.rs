//! `mur tool invoke <artifact-dir> --input JSON [--workdir DIR] [--capsule FILE] [--json]`: call a
//! tool or driver component once, the way a session would, and print its tool-result.
//!
//! A tool's input is checked against its manifest's `input_schema` first, as a session checks
//! the model's (`E-RUN-009` naming every mismatch, nothing called; no input counts as `{}`).
//!
//! `--reply TEXT` (repeated) answers the tool's `request-input` calls in order.
//!
//! The call runs under the grants of `--capsule` (its `capabilities` and the artifact entry's
//! `config`; for a driver, its entry's gateway with the credential attached outside the sandbox
//! and `MURMUR_INFERENCE_*` naming its first choice), or under none but the workdir. The component is built from source first when it is
//! missing or older than its sources. The tool-result is printed as JSON on stdout, with what the
//! runtime read from it (`output`, `state_effect`, `resource_id`, `continuation_id`) and every
//! request a grant refused. Text the component streams goes to stderr as it arrives.
//! What the component wrote reaches the terminal with its control characters escaped: JSON
//! escapes in the printed JSON ([`crate::render::json`]), `\u{1b}` in its streamed text and
//! stderr ([`crate::render::text`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use murmur_manifest::Runtime;
use murmur_manifest::capsule::CapsuleManifest;
use murmur_registry::source::{self, LocalArtifact};
use murmur_runtime::grants::env::{Identity, InferenceTarget, component_env};
use murmur_runtime::grants::message::SendingTask;
use murmur_runtime::grants::{ChunkKind, Grants};
use murmur_runtime::tool::{ToolInput, ToolStatus};
use murmur_runtime::{RunWorld, RuntimeError};
use serde_json::json;

use crate::commands::build::report_error;
use crate::environment::{cached_engine, host_env};
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct InvokeArgs {
    /// The artifact directory (or its `murmur.yaml`).
    artifact: PathBuf,
    /// The tool's input: JSON text, or `-` to read it from stdin. Default: no input.
    #[arg(long)]
    input: Option<String>,
    /// The session workdir the tool sees as `.`. Default: a new directory under the system's
    /// temporary directory (kept, and named on stderr).
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// A capsule manifest whose capabilities (and this artifact's `config`) the call runs under.
    #[arg(long)]
    capsule: Option<PathBuf>,
    /// Answer the tool's `request-input` calls, in order, with these texts (repeat the flag
    /// for each); a call past the last one fails as it would outside an A2A task.
    #[arg(long = "reply", value_name = "TEXT")]
    replies: Vec<String>,
    /// Print failures as JSON on stdout too.
    #[arg(long)]
    json: bool,
}

/// Answers `request-input` from `--reply`, in order, and keeps what was asked and answered.
struct Replies {
    left: std::sync::Mutex<std::collections::VecDeque<String>>,
    asked: std::sync::Mutex<Vec<serde_json::Value>>,
    quiet: bool,
}

impl murmur_runtime::grants::task::InputBroker for Replies {
    fn request(
        &self,
        prompt: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>> {
        let reply = self
            .left
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .pop_front();
        if !self.quiet {
            match &reply {
                Some(reply) => eprintln!(
                    "request-input: {}\n  reply: {}",
                    render::text(&prompt),
                    render::line(reply)
                ),
                None => eprintln!(
                    "request-input: {}\n  (no --reply left)",
                    render::text(&prompt)
                ),
            }
        }
        self.asked
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(json!({"prompt": prompt, "reply": reply}));
        Box::pin(async move {
            reply.ok_or_else(|| {
                "the tool asked for more input than --reply gave (each --reply answers one \
                 request-input, in order)"
                    .to_string()
            })
        })
    }
}

pub fn invoke(args: InvokeArgs) -> Exit {
    let artifact = match LocalArtifact::open(&args.artifact, &host_env) {
        Ok(artifact) => artifact,
        Err(error) => return report_error(&error, args.json, Exit::BadInput),
    };
    if !matches!(artifact.manifest.runtime, Runtime::Tool | Runtime::Driver) {
        return bad_input(
            args.json,
            "E-RUN-010",
            &format!(
                "`{}` is a {} artifact; `mur tool invoke` calls tools and drivers",
                artifact.manifest.name, artifact.manifest.runtime
            ),
            "point it at an artifact whose murmur.yaml says `runtime: tool` or `runtime: driver`",
        );
    }
    let input = match read_input(args.input.as_deref()) {
        Ok(input) => input,
        Err(message) => {
            return bad_input(
                args.json,
                "E-RUN-009",
                &message,
                "pass a JSON document, e.g. --input '{\"path\": \"notes.md\"}'",
            );
        }
    };
    if let Err(exit) = check_schema(&artifact, &input, args.json) {
        return exit;
    }
    let capsule = match &args.capsule {
        Some(path) => match load_capsule(path, args.json) {
            Some(capsule) => Some((capsule, path.clone())),
            None => return Exit::BadInput,
        },
        None => None,
    };
    if let Err(error) = source::ensure_components(&[&artifact]) {
        return report_error(&error, args.json, Exit::Failed);
    }
    let (workdir, _left_empty_goes) = match prepare_workdir(args.workdir.as_deref()) {
        Ok(workdir) => workdir,
        Err(message) => {
            return bad_input(
                args.json,
                "E-RUN-001",
                &message,
                "pass a directory you can write to with --workdir",
            );
        }
    };
    let mut grants = match grants_for(&artifact, capsule.as_ref(), &workdir) {
        Ok(grants) => grants,
        Err(error) => return render::coded(args.json, &error, Exit::BadInput),
    };
    let replies = Arc::new(Replies {
        left: std::sync::Mutex::new(args.replies.iter().cloned().collect()),
        asked: Default::default(),
        quiet: args.json,
    });
    if !args.replies.is_empty() {
        grants.input = Some(replies.clone());
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return bad_input(
                args.json,
                "E-RUN-001",
                &format!("the async runtime could not start: {error}"),
                "check the process's thread limits",
            );
        }
    };
    let engine = match cached_engine() {
        Ok(engine) => engine,
        Err(error) => return stopped(&error, args.json),
    };
    let component = match engine.load_component(
        &artifact.manifest.name,
        &artifact.component_path(),
        RunWorld::of(artifact.manifest.runtime),
    ) {
        Ok(component) => component,
        Err(error) => return stopped(&error, args.json),
    };
    let report = runtime.block_on(engine.call_tool(&component, &grants, &input));

    if !report.stderr.is_empty() && !args.json {
        eprintln!(
            "--- {} stderr ---\n{}",
            render::line(component.name()),
            render::text(report.stderr.trim_end())
        );
    }
    for refusal in &report.refusals {
        if !args.json {
            eprintln!(
                "refused: {} request to {} ({})",
                refusal.grant,
                render::line(&refusal.target),
                render::line(&refusal.reason)
            );
        }
    }
    for send in &report.sends {
        if !args.json {
            match (&send.error, &send.peer_task_id, &send.state) {
                (Some((code, message)), _, _) => {
                    eprintln!(
                        "send: {} failed [{}]: {}",
                        render::line(&send.peer),
                        render::line(code),
                        render::text(message)
                    )
                }
                (None, task, state) => eprintln!(
                    "send: {} task {} is {}",
                    render::line(&send.peer),
                    render::line(task.as_deref().unwrap_or("(none)")),
                    render::line(state.as_deref().unwrap_or("unknown"))
                ),
            }
        }
    }
    let common = json!({
        "tool": component.name(),
        "component": {"sha256": component.sha256(), "cache": component.cache_status()},
        "workdir": workdir,
        "refusals": report.refusals,
        "sends": report.sends,
        "inputs": *replies.asked.lock().unwrap_or_else(|poison| poison.into_inner()),
        "duration_ms": report.duration.as_millis() as u64,
        "stdout": report.stdout,
        "stderr": report.stderr,
    });
    match report.outcome {
        Ok(output) => {
            let status = output.result.status;
            let mut printed = serde_json::to_value(&output).unwrap_or_default();
            merge(&mut printed, common);
            println!("{}", render::json(&printed));
            if status == ToolStatus::Passed {
                Exit::Ok
            } else {
                Exit::Failed
            }
        }
        Err(error) => {
            let mut printed = json!({
                "error": render::coded_json(&error),
            });
            merge(&mut printed, common);
            render::coded_human(&error);
            if args.json {
                println!("{}", render::json(&printed));
            }
            Exit::Stopped
        }
    }
}

/// Refuses an input a session would refuse: not what the tool's `input_schema` describes
/// (`E-RUN-009`), or a schema that is not JSON Schema (`E-MAN-018`).
fn check_schema(artifact: &LocalArtifact, input: &ToolInput, json: bool) -> Result<(), Exit> {
    let Some(schema) = artifact
        .manifest
        .input_schema
        .as_ref()
        .filter(|_| artifact.manifest.runtime == Runtime::Tool)
    else {
        return Ok(());
    };
    let name = &artifact.manifest.name;
    let validator = murmur_runtime::grants::tool_registry::compile_input_schema(name, schema)
        .map_err(|diagnostic| render::coded(json, &*diagnostic, Exit::BadInput))?;
    let value = match &input.data {
        Some(text) => serde_json::from_str(text).unwrap_or(serde_json::Value::Null),
        None => json!({}),
    };
    match murmur_runtime::grants::tool_registry::schema_refusal(name, &validator, &value) {
        None => Ok(()),
        Some(refusal) => Err(bad_input(
            json,
            "E-RUN-009",
            &refusal,
            "pass an input the tool's input_schema describes: a session refuses this one the same way",
        )),
    }
}

fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    if let (Some(into), serde_json::Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

fn read_input(input: Option<&str>) -> Result<ToolInput, String> {
    let text = match input {
        None => return Ok(ToolInput::default()),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|error| format!("reading the input from stdin: {error}"))?;
            text
        }
        Some(text) => text.to_string(),
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .map_err(|error| format!("the tool input is not valid JSON: {error}"))?;
    Ok(ToolInput {
        data: Some(text),
        log_path: None,
    })
}

fn load_capsule(path: &Path, json: bool) -> Option<CapsuleManifest> {
    let file = if path.is_dir() {
        path.join("murmur.yaml")
    } else {
        path.to_path_buf()
    };
    let loaded = murmur_manifest::load_capsule(&file, &host_env);
    if json {
        if loaded.has_errors() {
            println!(
                "{}",
                render::json(&json!({ "diagnostics": loaded.diagnostics }))
            );
        }
    } else {
        render::diagnostics_human(&loaded.diagnostics);
    }
    loaded.manifest
}

/// The workdir of the call: `--workdir` (made if missing), else a new temporary directory,
/// removed when the command ends if the call left nothing in it (the guard returned).
fn prepare_workdir(workdir: Option<&Path>) -> Result<(PathBuf, RemovedIfEmpty), String> {
    let (workdir, temporary) = match workdir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|error| format!("creating the workdir {}: {error}", dir.display()))?;
            (dir.to_path_buf(), false)
        }
        None => {
            let dir = tempfile::Builder::new()
                .prefix("mur-invoke-")
                .tempdir()
                .map_err(|error| format!("creating a workdir: {error}"))?
                .keep();
            eprintln!(
                "workdir: {} (removed at the end if left empty)",
                dir.display()
            );
            (dir, true)
        }
    };
    let workdir = workdir
        .canonicalize()
        .map_err(|error| format!("resolving the workdir {}: {error}", workdir.display()))?;
    let guard = RemovedIfEmpty(temporary.then(|| workdir.clone()));
    Ok((workdir, guard))
}

/// Removes its directory when dropped, if it is empty (`rmdir`: a directory holding anything
/// is left as it is).
struct RemovedIfEmpty(Option<PathBuf>);

impl Drop for RemovedIfEmpty {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The grants a session of `capsule` would give `artifact` (a driver: its gateway, its
/// credential attached outside the sandbox, `MURMUR_INFERENCE_*` naming its choice), or none
/// but the workdir. A driver's gateway that cannot be used is `E-RUN-012`, as at staging.
fn grants_for(
    artifact: &LocalArtifact,
    capsule: Option<&(CapsuleManifest, PathBuf)>,
    workdir: &Path,
) -> Result<Grants, murmur_runtime::session::staging::StageError> {
    let name = &artifact.manifest.name;
    let mut grants = match capsule {
        Some((capsule, capsule_file)) => {
            let entry = capsule.artifacts.iter().find(|entry| &entry.name == name);
            let mut grants = Grants::of_capsule(capsule, workdir);
            let inference = capsule.inference.as_ref();
            let driver_ref = inference.and_then(|inference| inference.driver.as_ref());
            // A driver's config is the capsule's `inference.driver.config`, as in a session.
            let config = match artifact.manifest.runtime {
                Runtime::Driver => driver_ref.and_then(|driver| driver.config.as_ref()),
                _ => entry.and_then(|entry| entry.config.as_ref()),
            };
            grants.env = component_env(
                &Identity::of(capsule, None),
                config,
                &capsule.capabilities.env.allow,
                &host_env,
            );
            let credentials = crate::environment::user_credentials()
                .map(|(credentials, _)| credentials)
                .unwrap_or_default();
            let config = |name: &str| credentials.get(name);
            let lookups = murmur_runtime::session::staging::Lookups {
                env: &host_env,
                config: &config,
            };
            let mut gateway_rule = None;
            if artifact.manifest.runtime == Runtime::Driver
                && let Some(entry) = entry
            {
                let gateway = murmur_runtime::session::staging::DriverGateway::of(
                    entry,
                    artifact,
                    capsule_file,
                    &lookups,
                )?;
                // The model of the first choice on this driver: the primary's, else an
                // alternate's.
                let model = match driver_ref {
                    Some(driver) if &driver.artifact == name => {
                        inference.and_then(|inference| inference.model.clone())
                    }
                    _ => None,
                }
                .or_else(|| {
                    inference?
                        .alternates
                        .iter()
                        .find(|alternate| &alternate.driver == name)
                        .map(|alternate| alternate.model.clone())
                })
                .unwrap_or_default();
                grants.env.extend(
                    InferenceTarget {
                        endpoint: gateway.endpoint.clone(),
                        model,
                        driver: name.clone(),
                        config: driver_ref.and_then(|driver| driver.config.clone()),
                    }
                    .env(),
                );
                grants.credential = gateway.credential;
                gateway_rule = gateway.network;
            }
            // As in a session: what the artifact's entry grants it, within the capsule's (a
            // driver's gateway ahead of it), and the credentials its sends to the capsule's
            // peers present.
            grants.narrow(
                entry.map(|entry| capsule.grants_of(entry)).as_ref(),
                gateway_rule,
            );
            grants.peers =
                murmur_runtime::session::staging::peer_credentials(capsule, capsule_file, &lookups);
            grants
        }
        None => {
            let mut grants = Grants::new(workdir);
            grants.env = component_env(
                &Identity {
                    capsule_name: "mur-tool-invoke".to_string(),
                    capsule_version: "0.0.0".to_string(),
                    ..Identity::default()
                },
                None,
                &[],
                &host_env,
            );
            if artifact.manifest.runtime == Runtime::Driver {
                // No gateway: no network; the driver is told its own name.
                grants.env.extend(
                    InferenceTarget {
                        endpoint: String::new(),
                        model: String::new(),
                        driver: name.clone(),
                        config: None,
                    }
                    .env(),
                );
            }
            grants
        }
    };
    if artifact.manifest.runtime == Runtime::Tool {
        grants.sender = Some(SendingTask::new(
            None,
            SendingTask::OPERATOR.to_string(),
            murmur_trace::context::SpanRef::fresh(),
        ));
    }
    grants.chunks = Some(Arc::new(|kind, text: &str| match kind {
        ChunkKind::Text => eprint!("{}", render::text(text)),
        ChunkKind::Thinking => eprint!("[thinking] {}", render::text(text)),
    }));
    Ok(grants)
}

fn bad_input(json: bool, code: &str, message: &str, hint: &str) -> Exit {
    render::failure_human(code, message, hint);
    if json {
        println!(
            "{}",
            render::json(&json!({ "error": render::failure_json(code, message, hint) }))
        );
    }
    Exit::BadInput
}

fn stopped(error: &RuntimeError, json: bool) -> Exit {
    render::coded_human(&error);
    if json {
        println!(
            "{}",
            render::json(&json!({ "error": render::coded_json(&error) }))
        );
    }
    Exit::Stopped
}
