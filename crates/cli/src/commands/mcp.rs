//! `mur mcp serve [DIR] [--http ADDR:PORT] [--workdir ROOT] [--workspace PATH]`: the capsule's tools served to MCP
//! clients, each client a session of its own (see the runtime's served sessions). Over stdio
//! (the default) stdout carries the protocol only; notes and warnings go to stderr. Over HTTP
//! the endpoint is `http://ADDR:PORT/mcp`; with `MURMUR_MCP_TOKEN` set every request must carry
//! it as a bearer token, and an address that is not loopback refuses to start without it
//! (`E-MCP-007`). A tool's `request-input` is put to the client's user (MCP elicitation) when
//! the client takes it. The command ends when the stdio client goes, or on Ctrl-C / SIGTERM over
//! HTTP, once every session has written its `session_end`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use murmur_mcp::Called;
use murmur_mcp::serve::{Boxed, Elicitor, Identity, ServedTools, Sessions};
use murmur_runtime::Engine;
use murmur_runtime::grants::task::{InputBroker, SharedBroker};
use murmur_runtime::session::{self, ServedEnd, ServedSession, SessionConfig, Silent, Staged};
use serde_json::{Value, json};

use crate::commands::run::{StageFor, runtime_and_engine, stage_capsule};
use crate::environment::host_env;
use crate::exit::Exit;
use crate::render;

/// The variable whose value an HTTP client must present as its bearer token.
const TOKEN_VARIABLE: &str = "MURMUR_MCP_TOKEN";

#[derive(clap::Subcommand)]
pub enum McpCommand {
    /// Serve the capsule's tools to MCP clients (stdio unless --http).
    Serve(ServeArgs),
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The capsule's directory (or its `murmur.yaml`). Default: the current directory.
    dir: Option<PathBuf>,
    /// Serve streamable HTTP at ADDR:PORT (path `/mcp`) instead of stdio.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<SocketAddr>,
    /// Where sessions keep their records. Default: `workdir/` beside the manifest.
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Work on this existing directory in place, as `mur run --workspace`: one client's
    /// session holds it at a time, and another client's is refused while it does.
    #[arg(long, value_name = "PATH")]
    workspace: Option<PathBuf>,
    /// The containment class of the capsule's native children, as `mur run --containment`.
    #[arg(long, value_parser = super::run::parse_containment, value_name = "CLASS")]
    containment: Option<murmur_manifest::capsule::Containment>,
}

pub fn run(command: McpCommand) -> Exit {
    match command {
        McpCommand::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> Exit {
    if let Some(refused) = crate::environment::refuse_workspace(args.workspace.as_deref(), false) {
        return refused;
    }
    let (file, capsule_dir) = crate::environment::capsule_paths(args.dir.as_deref());
    let token = std::env::var(TOKEN_VARIABLE)
        .ok()
        .filter(|token| !token.is_empty());
    if let Some(address) = args.http
        && !address.ip().is_loopback()
        && token.is_none()
    {
        return render::failure(
            false,
            "E-MCP-007",
            &format!(
                "`mur mcp serve --http {address}` would serve the capsule's tools beyond this machine to anyone"
            ),
            &format!(
                "set {TOKEN_VARIABLE} to a secret bearer token clients must present, or bind to 127.0.0.1"
            ),
            Exit::BadInput,
        );
    }
    let (runtime, engine) = match runtime_and_engine(false) {
        Ok(started) => started,
        Err(exit) => return exit,
    };
    let source = murmur_manifest::CapsuleSource::read(&file, &crate::environment::host_env);
    let staged = match stage_capsule(&source, &engine, false, false, StageFor::Tools) {
        Ok(staged) => staged,
        Err(exit) => return exit,
    };
    render::diagnostics_human(&staged.warnings);
    // A host that cannot hold the capsule's children as asked refuses before serving anything.
    if let Err(missing) =
        murmur_runtime::session::containment::achieve(&staged.capsule, args.containment)
    {
        return render::coded(false, &missing, Exit::Failed);
    }
    let identity = Identity {
        name: format!("murmur:{}", staged.capsule.name),
        version: staged.capsule.version.clone(),
    };
    let sessions = Arc::new(CapsuleSessions {
        engine: Arc::new(engine),
        staged: Arc::new(staged),
        workdir_root: args
            .workdir
            .clone()
            .unwrap_or_else(|| capsule_dir.join("workdir")),
        workspace: args.workspace.clone(),
        containment: args.containment,
        ends: Mutex::new(Vec::new()),
    });
    let served = runtime.block_on(async {
        match args.http {
            None => murmur_mcp::serve::serve_stdio(sessions.clone(), identity).await,
            Some(address) => {
                let listener = tokio::net::TcpListener::bind(address)
                    .await
                    .map_err(|error| format!("cannot listen on {address}: {error}"))?;
                eprintln!("serving MCP at http://{address}/mcp");
                murmur_mcp::serve::serve_http(
                    listener,
                    sessions.clone(),
                    identity,
                    token,
                    stopped(),
                )
                .await
            }
        }
    });
    // Every session ends (its `session_end` written) before the command does.
    let ends: Vec<ServedEnd> =
        std::mem::take(&mut *sessions.ends.lock().unwrap_or_else(|e| e.into_inner()));
    drop(sessions);
    runtime.block_on(async {
        for end in ends {
            if let Ok(Err(error)) = end.await {
                eprintln!("error[{}]: {}", error.code, render::text(&error.message));
            }
        }
    });
    match served {
        Ok(()) => Exit::Ok,
        Err(reason) => render::failure(
            false,
            "E-MCP-001",
            &format!("serving MCP stopped: {reason}"),
            "see the client's side for why the connection failed",
            Exit::Failed,
        ),
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match &mut terminate {
                Some(terminate) => { terminate.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

/// A served session for each client of the capsule.
struct CapsuleSessions {
    engine: Arc<Engine>,
    staged: Arc<Staged>,
    workdir_root: PathBuf,
    /// What `--workspace` named.
    workspace: Option<PathBuf>,
    /// What `--containment` asked for.
    containment: Option<murmur_manifest::capsule::Containment>,
    /// Each opened session's end, awaited before the command exits.
    ends: Mutex<Vec<ServedEnd>>,
}

impl Sessions for CapsuleSessions {
    fn open(&self) -> Boxed<'_, Result<Arc<dyn ServedTools>, String>> {
        Box::pin(async move {
            let config = SessionConfig {
                workdir_root: self.workdir_root.clone(),
                tasks: Vec::new(),
                stream: false,
                host_env: Arc::new(host_env),
                control: None,
                cancel: None,
                resume: None,
                seed: None,
                containment: self.containment,
                workspace: self.workspace.clone(),
            };
            let (served, end) = session::open_served(
                self.engine.clone(),
                self.staged.clone(),
                config,
                Arc::new(Silent),
            )
            .await
            .map_err(|error| {
                format!("error[{}]: {} ({})", error.code, error.message, error.hint)
            })?;
            self.ends
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(end);
            Ok(Arc::new(Served(served)) as Arc<dyn ServedTools>)
        })
    }
}

/// One client's session.
struct Served(ServedSession);

impl ServedTools for Served {
    fn listing(&self) -> Vec<Value> {
        self.0
            .tools()
            .iter()
            .map(|spec| {
                json!({
                    "name": spec.name,
                    "description": spec.description,
                    "inputSchema": spec.input_schema,
                })
            })
            .collect()
    }

    fn call(
        &self,
        name: String,
        arguments: Value,
        elicitor: Option<Elicitor>,
    ) -> Boxed<'_, Called> {
        Box::pin(async move {
            let asks = elicitor.map(|elicitor| Arc::new(Asking(elicitor)) as SharedBroker);
            let answer = self.0.call(name, arguments, asks).await;
            Called {
                text: answer.text,
                is_error: answer.is_error,
            }
        })
    }
}

/// A tool's `request-input`, put to the client's user.
struct Asking(Elicitor);

impl InputBroker for Asking {
    fn request(
        &self,
        prompt: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>> {
        let elicitor = self.0.clone();
        Box::pin(async move { elicitor.ask(prompt).await })
    }
}
