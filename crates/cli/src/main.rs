//! `mur`: the Murmur command line. Argument parsing and presentation only: what a command does
//! lives in the library crates; this binary decides what is printed and the exit code.
//!
//! Exit codes (stable, documented in docs/cli.md):
//! 0 success; 1 the work ran and failed (errors found, a tool reported `failed`/`error`, a build
//! failed); 2 bad input (arguments, an unloadable manifest, invalid tool input); 3 the runtime
//! stopped a component (deadline, memory limit, trap, load failure, refused data-path), or
//! `mur send`/`mur control` reached no agent or control plane, or `mur trace export` no OTLP
//! receiver; 4 `mur send`: the task waits for input. `mur trace`: 2 when no trace is found or
//! it cannot be read.

mod commands;
mod environment;
mod exit;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mur",
    version,
    about = "Run AI agents as capsules: WebAssembly components under the grants their manifest declares"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a manifest (capsule or artifact) and print every problem found.
    Check {
        /// A `murmur.yaml`, or a directory holding one. Default: the current directory.
        path: Option<PathBuf>,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
        /// Explain the native children's containment as under `mur run --containment CLASS`.
        #[arg(long, value_parser = commands::run::parse_containment, value_name = "CLASS")]
        containment: Option<murmur_manifest::capsule::Containment>,
    },
    /// Build artifacts' components from source (their manifest's `build:`) and pack each into
    /// its archive.
    Build {
        /// Artifact directories (or their `murmur.yaml`). Default: the current directory.
        paths: Vec<PathBuf>,
        /// Where the archives go (`<name>-<version>.tar.gz`). Default: `dist/` in the current
        /// directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Build only; pack nothing.
        #[arg(long)]
        no_pack: bool,
        /// Do not compile the built components into the compile cache (the first run will).
        #[arg(long)]
        no_compile: bool,
        /// Print what was built as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add artifacts to a registry: a directory, or an OCI registry (built and packed first).
    Publish(commands::publish::PublishArgs),
    /// Push a whole capsule (manifest, lock, local artifacts) to an OCI registry.
    Push(commands::push_pull::PushArgs),
    /// Pull a whole capsule from an OCI registry into a new directory.
    Pull(commands::push_pull::PullArgs),
    /// Install a capsule's registry artifacts and write `murmur.lock`.
    Install(commands::install::InstallArgs),
    /// The Model Context Protocol: serve a capsule's tools to MCP clients.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// Render what serves a capsule elsewhere: `kubernetes` (Deployment, Service,
    /// NetworkPolicy).
    #[command(subcommand)]
    Deploy(commands::deploy::DeployCommand),
    /// Run a capsule: stage it, then run its tasks through the agent loop as one session.
    Run(commands::run::RunArgs),
    /// Evaluate a capsule: run a dataset of cases through its arms, score, compare runs.
    #[command(subcommand)]
    Eval(commands::eval::EvalCommand),
    /// Send a message to an A2A agent (a served capsule) and print its answer.
    Send(commands::send::SendArgs),
    /// Read and change a served capsule's settings and secrets (its control plane).
    Control {
        #[command(subcommand)]
        command: commands::control::ControlCommand,
    },
    /// Read a session's trace back: turn by turn (show), its cost (report), what changed
    /// between two sessions (diff), or send its spans to an OTLP receiver (export).
    Trace {
        #[command(subcommand)]
        command: commands::trace::TraceCommand,
    },
    /// The compiled-component cache: list it, prune it.
    #[command(subcommand)]
    Cache(commands::cache::CacheCommand),
    /// Start a new tool, driver or hook from a template (manifest, sources, build, test input).
    New(commands::new::NewArgs),
    /// Work with tool artifacts.
    Tool {
        #[command(subcommand)]
        command: ToolCommand,
    },
}

#[derive(Subcommand)]
enum ToolCommand {
    /// Call a tool (or driver) component once and print its tool-result.
    Invoke(commands::tool::InvokeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    quiet_when_the_reader_leaves();
    match std::panic::catch_unwind(move || dispatch(cli)) {
        Ok(exit) => ExitCode::from(exit as u8),
        // The reader of `mur`'s output went away (`mur trace show | head`): the output ended
        // early, which is a normal end, not a failure.
        Err(payload) if reader_left(payload_text(&*payload)) => ExitCode::SUCCESS,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// A panic of `print!`/`eprint!` because the reader of standard output or error closed it:
/// said nowhere (the stream is gone) and ended as a normal end of output by `main`. Every
/// other panic is reported as before. `mur` keeps ignoring `SIGPIPE`, so a child it writes to
/// that dies is an error it handles, never its own death.
fn quiet_when_the_reader_leaves() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !reader_left(payload_text(info.payload())) {
            report(info);
        }
    }));
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// Whether a panic's message is the standard streams' "failed printing to stdout/stderr" on a
/// closed pipe.
fn reader_left(message: &str) -> bool {
    message.starts_with("failed printing to std")
        && message.ends_with(&format!("(os error {})", libc::EPIPE))
}

fn dispatch(cli: Cli) -> exit::Exit {
    match cli.command {
        Command::Check {
            path,
            json,
            containment,
        } => commands::check::run(path, json, containment),
        Command::Mcp(command) => commands::mcp::run(command),
        Command::Build {
            paths,
            out,
            no_pack,
            no_compile,
            json,
        } => commands::build::run(
            paths,
            (!no_pack).then(|| out.unwrap_or_else(|| PathBuf::from("dist"))),
            !no_compile,
            json,
        ),
        Command::Publish(args) => commands::publish::run(args),
        Command::Push(args) => commands::push_pull::push(args),
        Command::Deploy(command) => commands::deploy::run(command),
        Command::Pull(args) => commands::push_pull::pull(args),
        Command::Install(args) => commands::install::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Eval(command) => commands::eval::run(command),
        Command::Send(args) => commands::send::run(args),
        Command::Control { command } => commands::control::run(command),
        Command::Trace { command } => commands::trace::run(command),
        Command::New(args) => commands::new::run(args),
        Command::Cache(command) => commands::cache::run(command),
        Command::Tool {
            command: ToolCommand::Invoke(args),
        } => commands::tool::invoke(args),
    }
}
