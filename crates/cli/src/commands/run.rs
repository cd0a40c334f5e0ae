//! `mur run [DIR] [--task TEXT]… [--stream] [--json] [--workdir ROOT] [--workspace PATH]`:
//! stage the capsule at DIR and run its tasks as one session, in a fresh workspace or on PATH
//! in place.
//!
//! Tasks come from `--task` (several run in order, each in its own context) or, without any,
//! from `task.md` beside the manifest. `--stream` prints the model's text as it arrives (its
//! control characters escaped, as everything from the model or a tool is: [`render::text`]). At the
//! end: where the result and the trace are, turns, tokens (the runtime's estimate and the
//! provider's counts) and the exit status; `--json` prints the session report instead.
//!
//! A capsule without `inference:` that names a capsule component (`world capsule`) runs that
//! component's `murmur:capsule/run` once instead, as one session with the same report; its
//! `murmur:artifact-manager/manage.pull` resolves in `--registry` (default: as `mur install`).
//!
//! Credentials a manifest names as `${NAME}` come from the environment, the `.env` beside the
//! manifest, then `$MURMUR_HOME/credentials.yaml` ([`murmur_manifest::credentials`]). With `--serve`, the
//! control plane's token file is written under `$MURMUR_HOME/control/` and named on stderr.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use murmur_door::auth::DoorAuth;
use murmur_door::{DoorConfig, OnListening, control};
use murmur_runtime::Engine;
use murmur_runtime::grants::ChunkKind;
use murmur_runtime::grants::cassette::{Cassette, REPLAY_CREDENTIAL};
use murmur_runtime::session::capsule::{self, CapsuleConfig};
use murmur_runtime::session::resume;
use murmur_runtime::session::staging::Lookups;
use murmur_runtime::session::{
    self, ExitStatus, Observer, SessionConfig, SessionReport, StageError, TaskInput, TaskSource,
};
use serde_json::json;

use crate::environment::{cached_engine, host_env, murmur_home};
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The capsule's directory (or its `murmur.yaml`). Default: the current directory.
    dir: Option<PathBuf>,
    /// A task for the agent; repeat for several, run in order. Default: `task.md`.
    #[arg(long = "task")]
    tasks: Vec<String>,
    /// Print the model's text as it arrives.
    #[arg(long)]
    stream: bool,
    /// Print the session report as JSON.
    #[arg(long)]
    json: bool,
    /// Where sessions keep their records (trace, results, conversations). Default: `workdir/`
    /// beside the manifest.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Work on this existing directory in place (tools, shell, MCP servers and the agent CLI
    /// see it as `.`), held for this session alone; it must lie apart from the workdir root.
    /// Default: a fresh `workspace/` in each session's record.
    #[arg(long, value_name = "PATH")]
    workspace: Option<PathBuf>,
    /// Serve the capsule over A2A (JSON-RPC + SSE) until its tasks are done or it is stopped.
    #[arg(long)]
    serve: bool,
    /// With --serve: the port (default: the manifest's `door.port`, else one the system
    /// chooses, printed).
    #[arg(long, requires = "serve")]
    port: Option<u16>,
    /// With --serve: the address to listen on.
    #[arg(long, requires = "serve", default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// With --serve: allow a --host that is not loopback although the capsule declares no
    /// `door.auth` (anyone who reaches the door can run tasks).
    #[arg(long, requires = "serve")]
    insecure_no_auth: bool,
    /// With --serve: the door's certificate chain (PEM), for HTTPS; overrides `door.tls.cert`.
    #[arg(long, requires_all = ["serve", "tls_key"], value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// With --serve: the private key of --tls-cert (PEM); overrides `door.tls.key`.
    #[arg(long, requires_all = ["serve", "tls_cert"], value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// With --serve: allow a --host that is not loopback without TLS (when TLS ends in front
    /// of the door: a proxy, a service mesh). Otherwise tokens and tasks cross in clear.
    #[arg(long, requires = "serve")]
    insecure_no_tls: bool,
    /// The containment class of the capsule's native children (shell calls, MCP servers, the
    /// agent CLI): `advisory`, `scoped` or `sealed`. The stronger of this and the capsule's
    /// `capabilities.containment` holds; default `scoped`.
    #[arg(long, value_parser = parse_containment, value_name = "CLASS")]
    containment: Option<murmur_manifest::capsule::Containment>,
    /// The registry a capsule component pulls from: a directory, or an `http(s)://` index.
    /// Default: `$MURMUR_REGISTRY`, else `$MURMUR_HOME/registry`.
    #[arg(long)]
    registry: Option<String>,
    /// Go on with the conversation an earlier session of this capsule left: SESSION is its id
    /// (`ses_…`); none resumes the session whose trace was written last under the workdir root.
    /// Every task of this run continues that conversation, starting on the primary choice.
    #[arg(long, value_name = "SESSION", num_args = 0..=1, conflicts_with = "serve")]
    resume: Option<Option<String>>,
    /// Record every driver exchange (request and answer, credentials scrubbed) to CASSETTE.
    /// With --serve: every task's, saved when the capsule stops.
    #[arg(long, value_name = "CASSETTE", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer every driver request from CASSETTE, sending nothing; no credential is needed.
    #[arg(long, value_name = "CASSETTE")]
    replay: Option<PathBuf>,
    /// With --replay: `strict` (each request must be the recorded one) or `lenient` (the next
    /// recorded answer, whatever was asked).
    #[arg(long, requires = "replay", value_parser = ["strict", "lenient"], default_value = "strict")]
    replay_mode: String,
}

/// Prints what a session says while it runs: streamed text on stdout, notes on stderr, each
/// note on a line of its own.
struct Terminal {
    stream: bool,
    quiet: bool,
    /// Whether streamed text left stdout in the middle of a line.
    mid_line: std::sync::atomic::AtomicBool,
}

impl Observer for Terminal {
    fn chunk(&self, kind: ChunkKind, text: &str) {
        use std::io::Write;
        if !self.stream {
            return;
        }
        match kind {
            ChunkKind::Text => {
                print!("{}", render::text(text));
                let _ = std::io::stdout().flush();
                if let Some(last) = text.chars().last() {
                    self.mid_line
                        .store(last != '\n', std::sync::atomic::Ordering::Relaxed);
                }
            }
            ChunkKind::Thinking => eprint!("{}", render::text(text)),
        }
    }

    fn warning(&self, warning: &murmur_manifest::Diagnostic) {
        if self
            .mid_line
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            println!();
        }
        render::diagnostics_human(std::slice::from_ref(warning));
    }

    fn note(&self, text: &str) {
        if self.quiet {
            return;
        }
        if self
            .mid_line
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            println!();
        }
        eprintln!("· {}", render::line(text));
    }
}

pub fn run(args: RunArgs) -> Exit {
    if let Some(refused) =
        crate::environment::refuse_workspace(args.workspace.as_deref(), args.json)
    {
        return refused;
    }
    let (file, capsule_dir) = crate::environment::capsule_paths(args.dir.as_deref());
    // Read once: whether it runs a component, and then everything staging checks.
    let source = murmur_manifest::CapsuleSource::read(&file, &host_env);
    if let Some(capsule) = &source.loaded.manifest
        && capsule::runs_component(capsule)
    {
        return run_component(&args, &source, &capsule_dir);
    }
    let tasks = match tasks(&args.tasks, &capsule_dir) {
        Ok(tasks) => tasks,
        // A served capsule takes its tasks from the door.
        Err(_) if args.serve => Vec::new(),
        Err(message) => {
            return render::failure(
                args.json,
                "E-RUN-016",
                &message,
                "pass --task \"…\", or write the task in task.md beside murmur.yaml",
                Exit::BadInput,
            );
        }
    };
    let (runtime, engine) = match runtime_and_engine(args.json) {
        Ok(started) => started,
        Err(exit) => return exit,
    };
    let mut staged = match stage_capsule(
        &source,
        &engine,
        args.json,
        args.replay.is_some(),
        StageFor::Agent,
    ) {
        Ok(staged) => staged,
        Err(exit) => return exit,
    };
    staged.cassette = match cassette(&args, &staged) {
        Ok(cassette) => cassette,
        Err(exit) => return exit,
    };
    let cassette = staged.cassette.clone();
    // Warnings go to stderr whatever the output mode: stdout stays one JSON document.
    render::diagnostics_human(&staged.warnings);
    let workdir_root = args
        .workdir
        .clone()
        .unwrap_or_else(|| capsule_dir.join("workdir"));
    let resume = match &args.resume {
        None => None,
        Some(session) => {
            let now = resume::CapsuleNow {
                name: &staged.capsule.name,
                manifest_sha256: &staged.manifest_sha256,
                components: &staged.components,
            };
            match resume::find(&workdir_root, session.as_deref(), &now) {
                Ok(resume) => {
                    if let Some(warning) = resume.warning() {
                        render::diagnostics_human(&[warning]);
                    }
                    if !args.json {
                        eprintln!(
                            "resuming session {} (context {}, {} messages)",
                            render::line(&resume.session_id),
                            render::line(&resume.context_id),
                            resume.history.len()
                        );
                    }
                    Some(resume)
                }
                Err(error) => return render::coded(args.json, &error, Exit::BadInput),
            }
        }
    };
    let config = SessionConfig {
        workdir_root,
        tasks,
        stream: args.stream,
        host_env: Arc::new(host_env),
        control: None,
        cancel: None,
        resume,
        seed: None,
        containment: args.containment,
        workspace: args.workspace.clone(),
    };
    let observer = Arc::new(Terminal {
        stream: args.stream,
        quiet: args.json,
        mid_line: Default::default(),
    });
    let (engine, staged) = (Arc::new(engine), Arc::new(staged));
    let signals = match listen_for_signals(&runtime) {
        Ok(signals) => signals,
        Err(error) => return signals_failed(args.json, &error),
    };
    let mut config = config;
    if !args.serve {
        // A signal cancels the session: the running task ends `canceled` with its end hooks,
        // no other task starts, and the trace is closed.
        config.cancel = Some(cancel_on_signal(&runtime, &signals));
    }
    let outcome = if args.serve {
        // Each principal gets a workspace of its own; one directory worked on in place is one.
        if args.workspace.is_some() && staged.capsule.door.auth.len() > 1 {
            return render::failure(
                args.json,
                "E-RUN-033",
                &format!(
                    "--workspace names one directory, and the door has {} principals (`door.auth`): each principal's tasks work in a workspace of their own",
                    staged.capsule.door.auth.len()
                ),
                "serve without --workspace (each principal gets its own fresh workspace), or serve one principal per directory",
                Exit::BadInput,
            );
        }
        let control_dir = murmur_home().join("control");
        let auth = match door_auth(&staged, args.json) {
            Ok(auth) => auth,
            Err(exit) => return exit,
        };
        let tls = match door_tls(&args, &staged) {
            Ok(tls) => tls,
            Err(exit) => return exit,
        };
        let door = DoorConfig {
            host: args.host,
            // The command line wins over the manifest.
            port: args.port.or(staged.capsule.door.port).unwrap_or(0),
            control_dir: Some(control_dir.clone()),
            insecure_no_auth: args.insecure_no_auth,
            auth: Arc::new(auth),
            tls,
            insecure_no_tls: args.insecure_no_tls,
            ..DoorConfig::default()
        };
        // Stdio MCP servers start once per session, in its workspace, which holds every
        // principal's directory: they are not kept apart as the principals' own calls are.
        let stdio_servers: Vec<&str> = staged
            .mcp_servers
            .iter()
            .filter(|server| server.server.command.is_some())
            .map(|server| server.entry.name.as_str())
            .collect();
        if staged.capsule.door.auth.len() > 1 && !stdio_servers.is_empty() {
            eprintln!(
                "warning[W-A2A-024]: the door's {} principals share the stdio MCP server(s) {}:                  each starts once for the served session, in its workspace, which holds every                  principal's directory; give such servers no access to the principals' files, or                  serve one principal per capsule",
                staged.capsule.door.auth.len(),
                stdio_servers.join(", ")
            );
        }
        if args.insecure_no_tls && !args.host.is_loopback() && door.tls.is_none() {
            eprintln!(
                "warning[W-A2A-023]: --insecure-no-tls: the door on {} speaks plain HTTP; \
                 credentials, tasks and answers cross the network in clear unless TLS ends in \
                 front of it",
                args.host
            );
        }
        if args.insecure_no_auth && !args.host.is_loopback() && !door.auth.required() {
            eprintln!(
                "warning[W-A2A-006]: --insecure-no-auth: the door on {} authenticates no one; \
                 anyone who reaches it can run tasks on this capsule and read their answers",
                args.host
            );
        }
        let scheme = if door.tls.is_some() { "https" } else { "http" };
        let on_listening: OnListening = Box::new(move |addr| {
            use std::io::Write;
            println!("listening on {scheme}://{addr}");
            let _ = std::io::stdout().flush();
            eprintln!(
                "control: {}",
                control::token_file_path(&control_dir, addr.port()).display()
            );
        });
        runtime.block_on(murmur_door::serve(
            engine,
            staged,
            &config,
            door,
            on_listening,
            observer.clone(),
            {
                let mut signals = signals.clone();
                async move {
                    let _ = signals.wait_for(Option::is_some).await;
                }
            },
        ))
    } else {
        runtime.block_on(session::run(engine, staged, &config, observer.clone()))
    };
    if let Some(exit) = finish_cassette(&args, cassette.as_ref()) {
        if let Ok(report) = &outcome
            && !args.json
        {
            print_report(report, false);
        }
        return exit;
    }
    match outcome {
        Ok(report) => {
            if args.stream {
                println!();
                observer
                    .mid_line
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            }
            print_report(&report, args.json);
            let signal = *signals.borrow();
            match signal {
                // A served capsule is stopped by a signal as a matter of course.
                Some(signal) if !args.serve => signal.exit(),
                _ if report.exit_status == ExitStatus::Ok => Exit::Ok,
                _ => Exit::Failed,
            }
        }
        Err(error) => render::failure(
            args.json,
            error.code,
            &error.message,
            &error.hint,
            // A directory that cannot be a workspace is the operator's input to fix.
            if error.code == "E-RUN-033" {
                Exit::BadInput
            } else {
                Exit::Failed
            },
        ),
    }
}

/// Runs the capsule component of the capsule manifest `source` as one session.
fn run_component(
    args: &RunArgs,
    source: &murmur_manifest::CapsuleSource,
    capsule_dir: &Path,
) -> Exit {
    if args.resume.is_some() {
        return render::failure(
            args.json,
            "E-RUN-024",
            "a capsule component's session holds no conversation to resume: it runs `murmur:capsule/run` once",
            "run it without --resume",
            Exit::BadInput,
        );
    }
    if args.serve {
        return render::failure(
            args.json,
            "E-RUN-013",
            "a capsule component cannot be served: it runs `murmur:capsule/run` once",
            "run it without --serve, or give the capsule an `inference:` block to serve it as an agent",
            Exit::BadInput,
        );
    }
    let registry = match crate::environment::registry(args.registry.as_deref()) {
        Ok(registry) => registry,
        Err(error) => {
            return render::coded(args.json, &error, Exit::BadInput);
        }
    };
    let (runtime, engine) = match runtime_and_engine(args.json) {
        Ok(started) => started,
        Err(exit) => return exit,
    };
    let staged = match capsule::stage_source(source, &engine, &host_env) {
        Ok(staged) => staged,
        Err(error) => return stage_failed(error, args.json),
    };
    render::diagnostics_human(&staged.warnings);
    // A signal ends the run as it ends an agent's session: the component's call is stopped,
    // its shell children killed, the trace closed, and `mur` exits 128 + the signal.
    let signals = match listen_for_signals(&runtime) {
        Ok(signals) => signals,
        Err(error) => return signals_failed(args.json, &error),
    };
    let cancel = cancel_on_signal(&runtime, &signals);
    let config = CapsuleConfig {
        workdir_root: args
            .workdir
            .clone()
            .unwrap_or_else(|| capsule_dir.join("workdir")),
        registry: Some(registry),
        user_store: murmur_home().join("artifacts"),
        host_env: Arc::new(host_env),
        containment: args.containment,
        workspace: args.workspace.clone(),
        cancel: Some(cancel),
    };
    let observer = Arc::new(Terminal {
        stream: false,
        quiet: args.json,
        mid_line: Default::default(),
    });
    let outcome = runtime.block_on(capsule::run(
        Arc::new(engine),
        Arc::new(staged),
        &config,
        observer,
    ));
    match outcome {
        Ok(report) => {
            print_report(&report, args.json);
            match *signals.borrow() {
                Some(signal) if report.exit_status == ExitStatus::Canceled => signal.exit(),
                _ if report.exit_status == ExitStatus::Ok => Exit::Ok,
                _ => Exit::Failed,
            }
        }
        Err(error) => render::failure(
            args.json,
            error.code,
            &error.message,
            &error.hint,
            Exit::Failed,
        ),
    }
}

/// A signal that ends a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndSignal {
    Hangup,
    Interrupt,
    Terminate,
}

impl EndSignal {
    fn name(self) -> &'static str {
        match self {
            EndSignal::Hangup => "SIGHUP",
            EndSignal::Interrupt => "SIGINT",
            EndSignal::Terminate => "SIGTERM",
        }
    }

    /// `mur run`'s exit when this signal canceled its session: 128 + the signal's number.
    fn exit(self) -> Exit {
        match self {
            EndSignal::Hangup => Exit::HungUp,
            EndSignal::Interrupt => Exit::Interrupted,
            EndSignal::Terminate => Exit::Terminated,
        }
    }
}

/// Takes SIGINT, SIGTERM and SIGHUP from now on: the first is published on the returned
/// channel (the session is canceled, or a served capsule stops, and `mur` ends once its trace
/// is closed); a second ends the process at once with 128 + its number. A shell child's whole
/// process group dies with `mur` either way.
fn listen_for_signals(
    runtime: &tokio::runtime::Runtime,
) -> std::io::Result<tokio::sync::watch::Receiver<Option<EndSignal>>> {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed now, before anything runs, so no signal finds the default action.
    let _entered = runtime.enter();
    let mut hangup = signal(SignalKind::hangup())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let (sender, receiver) = tokio::sync::watch::channel(None);
    runtime.spawn(async move {
        loop {
            let received = tokio::select! {
                _ = hangup.recv() => EndSignal::Hangup,
                _ = interrupt.recv() => EndSignal::Interrupt,
                _ = terminate.recv() => EndSignal::Terminate,
            };
            if sender.borrow().is_some() {
                eprintln!("mur: {} again: exiting now", received.name());
                std::process::exit(received.exit() as i32);
            }
            eprintln!(
                "mur: {}: ending the session (the trace is being closed; send it again to exit at once)",
                received.name()
            );
            sender.send_replace(Some(received));
        }
    });
    Ok(receiver)
}

/// `E-RUN-001`: the signal handlers could not be installed.
fn signals_failed(json: bool, error: &std::io::Error) -> Exit {
    render::failure(
        json,
        "E-RUN-001",
        &format!("the signal handlers cannot be installed: {error}"),
        "retry; this is a problem of the host",
        Exit::Failed,
    )
}

/// A stop the first of `signals` requests (`canceled`).
fn cancel_on_signal(
    runtime: &tokio::runtime::Runtime,
    signals: &tokio::sync::watch::Receiver<Option<EndSignal>>,
) -> session::StopSignal {
    let cancel = session::StopSignal::default();
    let stopper = cancel.clone();
    let mut first = signals.clone();
    runtime.spawn(async move {
        if first.wait_for(Option::is_some).await.is_ok() {
            stopper.stop(session::StopRequest::Canceled);
        }
    });
    cancel
}

fn tasks(given: &[String], capsule_dir: &Path) -> Result<Vec<TaskInput>, String> {
    if !given.is_empty() {
        return Ok(given
            .iter()
            .map(|text| TaskInput::new(text.clone(), TaskSource::Cli))
            .collect());
    }
    let task_md = capsule_dir.join("task.md");
    match std::fs::read_to_string(&task_md) {
        Ok(text) if !text.trim().is_empty() => Ok(vec![TaskInput::new(text, TaskSource::TaskMd)]),
        Ok(_) => Err(format!("{} is empty", task_md.display())),
        Err(_) => Err(format!(
            "no --task was given and there is no {}",
            task_md.display()
        )),
    }
}

fn print_report(report: &SessionReport, json: bool) {
    if json {
        println!("{}", render::json(&json!(report)));
        return;
    }
    for task in &report.tasks {
        if let Some(error) = &task.error {
            render::failure_human(&error.code, &error.message, &error.hint);
        }
    }
    // What the session changed in the directory its agent works in, in one line.
    if let Some(changes) = &report.changes {
        eprintln!("{}", changes.summary());
    }
    let totals = &report.totals;
    println!("exit: {}", report.exit_status.as_str());
    if let Some(result) = report
        .tasks
        .iter()
        .rev()
        .find_map(|t| t.result_path.as_ref())
    {
        println!("result: {}", result.display());
    }
    println!("trace: {}", report.trace_path.display());
    let mut tokens = format!(
        "tokens: {} in / {} out (estimated)",
        totals.input_tokens_estimated, totals.output_tokens_estimated
    );
    if let (Some(input), Some(output)) = (totals.input_tokens_actual, totals.output_tokens_actual) {
        tokens.push_str(&format!(", {input} in / {output} out (provider)"));
    }
    if let Some(cached) = totals.cached_tokens_actual {
        tokens.push_str(&format!(", {cached} cached"));
    }
    println!(
        "turns: {}, tool calls: {}, {tokens}",
        totals.turns, totals.tool_calls
    );
}

/// What a command stages a capsule for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum StageFor {
    /// `mur run`: an agent's loop, which needs a model.
    Agent,
    /// `mur mcp serve`: its tools, with a model only if it declares one.
    Tools,
}

/// The capsule manifest `source` staged as a session runs it, credentials looked up in the
/// environment, the `.env` beside it and the user's credentials file; a failure is reported
/// and its exit returned.
pub(crate) fn stage_capsule(
    source: &murmur_manifest::CapsuleSource,
    engine: &Engine,
    json: bool,
    replaying: bool,
    purpose: StageFor,
) -> Result<session::Staged, Exit> {
    let credentials = crate::environment::user_credentials_warned()
        .map_err(|diagnostic| stage_failed(StageError::Manifest(vec![*diagnostic]), json))?;
    // Replaying sends nothing: a credential set nowhere stands as a placeholder never sent.
    let config_lookup = |name: &str| {
        credentials
            .get(name)
            .or_else(|| replaying.then(|| REPLAY_CREDENTIAL.to_string()))
    };
    let lookups = Lookups {
        env: &host_env,
        config: &config_lookup,
    };
    match purpose {
        StageFor::Agent => session::staging::stage_source(source, engine, &lookups),
        StageFor::Tools => session::staging::stage_tools_source(source, engine, &lookups),
    }
    .map_err(|error| stage_failed(error, json))
}

/// The cassette `--record` or `--replay` asks for: recording scrubs every credential value the
/// capsule resolves; replaying loads the file (`E-RUN-030` when it cannot).
fn cassette(args: &RunArgs, staged: &session::Staged) -> Result<Option<Cassette>, Exit> {
    if let Some(path) = &args.replay {
        return Cassette::replaying(path, args.replay_mode == "lenient")
            .map(Some)
            .map_err(|why| {
                render::failure(
                    args.json,
                    "E-RUN-030",
                    &why,
                    "record one with `mur run --record CASSETTE`",
                    Exit::BadInput,
                )
            });
    }
    if args.record.is_none() {
        return Ok(None);
    }
    let credentials = crate::environment::user_credentials().ok().map(|(c, _)| c);
    let config = |name: &str| credentials.as_ref().and_then(|c| c.get(name));
    let secrets = staged.credential_values(&Lookups {
        env: &host_env,
        config: &config,
    });
    Ok(Some(Cassette::recording(secrets)))
}

/// After the session: a recording is saved (`E-RUN-030` when it cannot be); a replay that was
/// refused a request is `E-RUN-029`, naming the first difference. `Some` is the exit then.
fn finish_cassette(args: &RunArgs, cassette: Option<&Cassette>) -> Option<Exit> {
    let cassette = cassette?;
    if let Some(path) = &args.record {
        if let Err(error) = cassette.save(path) {
            return Some(render::failure(
                args.json,
                "E-RUN-030",
                &format!("the cassette {} cannot be written: {error}", path.display()),
                "check the directory exists and is writable",
                Exit::Failed,
            ));
        }
        let peers = match cassette.peer_len() {
            0 => String::new(),
            n => format!(" and {n} peer exchanges"),
        };
        eprintln!(
            "recorded {} driver exchanges{peers} to {}",
            cassette.len(),
            path.display()
        );
        return None;
    }
    let mismatch = cassette.mismatch()?;
    Some(render::failure(
        args.json,
        "E-RUN-029",
        &format!(
            "the replay stopped: {mismatch} (cassette {})",
            args.replay.as_deref().unwrap_or(Path::new("?")).display()
        ),
        "record the cassette again if the change is intended, or replay with --replay-mode lenient",
        Exit::Failed,
    ))
}

/// The door's principals (`door.auth`), each credential looked up where staging looks: the
/// environment, the `.env` beside the manifest, the user's credentials file. A failure is
/// reported and its exit returned.
/// The door's TLS: `--tls-cert`/`--tls-key`, else `door.tls` (its paths relative to the
/// manifest), read now; `E-A2A-021` when they cannot be.
fn door_tls(
    args: &RunArgs,
    staged: &session::Staged,
) -> Result<Option<murmur_front::tls::Tls>, Exit> {
    let beside = |path: &str| {
        staged
            .capsule_file
            .parent()
            .unwrap_or(Path::new("."))
            .join(path)
    };
    let (cert, key) = match (&args.tls_cert, &args.tls_key, &staged.capsule.door.tls) {
        (Some(cert), Some(key), _) => (cert.clone(), key.clone()),
        (_, _, Some(tls)) => (beside(&tls.cert), beside(&tls.key)),
        _ => return Ok(None),
    };
    murmur_front::tls::Tls::read(&cert, &key)
        .map(Some)
        .map_err(|error| {
            render::failure(
                args.json,
                "E-A2A-021",
                &error.0,
                "give a PEM certificate chain and the PEM private key that belongs to it \
                 (--tls-cert/--tls-key or `door.tls`)",
                Exit::BadInput,
            )
        })
}

fn door_auth(staged: &session::Staged, json: bool) -> Result<DoorAuth, Exit> {
    // A credentials file that cannot be read already stopped staging.
    let credentials = crate::environment::user_credentials()
        .map(|(credentials, _)| credentials)
        .unwrap_or_default();
    let config = |name: &str| credentials.get(name);
    let lookup = |name: &str| {
        murmur_manifest::credentials::resolve(name, &staged.capsule_file, &host_env, &config)
            .map(|(value, _)| value)
            .ok_or_else(|| {
                format!(
                    "not in the environment, the .env beside murmur.yaml or {}",
                    crate::environment::credentials_file().display()
                )
            })
    };
    DoorAuth::resolve(&staged.capsule.door, &lookup).map_err(|error| {
        render::failure(
            json,
            error.code,
            &error.message,
            &error.hint,
            Exit::BadInput,
        )
    })
}

pub(crate) fn stage_failed(error: StageError, json: bool) -> Exit {
    match error {
        StageError::Manifest(diagnostics) => {
            if json {
                println!("{}", render::json(&json!({ "diagnostics": diagnostics })));
            } else {
                render::diagnostics_human(&diagnostics);
            }
            Exit::BadInput
        }
        StageError::Invalid { .. } => render::coded(json, &error, Exit::BadInput),
        StageError::Build(error) => {
            crate::commands::build::report_error(&error, json, Exit::Failed)
        }
        StageError::Component(error) => render::coded(json, &error, Exit::Stopped),
    }
}

/// The async runtime `mur` runs sessions on (two workers), and the engine with the user's
/// compile cache (`$MURMUR_HOME/cache/components`); a failure is reported and its exit returned.
pub(crate) fn runtime_and_engine(json: bool) -> Result<(tokio::runtime::Runtime, Engine), Exit> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| {
            render::failure(
                json,
                "E-RUN-001",
                &format!("the async runtime could not start: {error}"),
                "check the process's thread limits",
                Exit::Stopped,
            )
        })?;
    let engine = cached_engine().map_err(|error| render::coded(json, &error, Exit::Stopped))?;
    Ok((runtime, engine))
}

/// `--containment`'s value.
pub(crate) fn parse_containment(
    value: &str,
) -> Result<murmur_manifest::capsule::Containment, String> {
    use murmur_manifest::capsule::Containment;
    Containment::parse(value).ok_or_else(|| {
        format!(
            "`{value}` is not a containment class ({})",
            Containment::NAMES.join(", ")
        )
    })
}
