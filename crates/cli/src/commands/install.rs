//! `mur install [DIR] [--registry R] [--locked] [--json]`: installs a capsule's registry
//! artifacts (entries without `path:`) into its project store, verified against the registry and
//! `murmur.lock`, then compiles each component into the cache so the first run starts warm,
//! then pins the capsule's MCP servers (identity and tools) and the agent cards of its named
//! peers (sha256 of the card's bytes, fetched only when `capabilities.network.allow` permits
//! the peer) in the lock. Progress goes to
//! stderr; `--json` prints the report on stdout.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use murmur_manifest::Coded;
use murmur_manifest::Runtime;
use murmur_registry::install::{self, InstallError, InstallOptions, Progress};
use serde_json::json;

use crate::environment::{cached_engine, compile_into_cache, host_env, murmur_home};
use crate::exit::Exit;
use crate::render;

#[derive(clap::Args)]
pub struct InstallArgs {
    /// The capsule's directory (or its `murmur.yaml`). Default: the current directory.
    dir: Option<PathBuf>,
    /// The registry: a directory, or an `http(s)://` index. Default: `$MURMUR_REGISTRY`, else
    /// `$MURMUR_HOME/registry`.
    #[arg(long)]
    registry: Option<String>,
    /// Refuse any change to `murmur.lock`.
    #[arg(long)]
    locked: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: InstallArgs) -> Exit {
    let (file, capsule_dir) = crate::environment::capsule_paths(args.dir.as_deref());
    let loaded = murmur_manifest::load_capsule(&file, &host_env);
    let Some(capsule) = loaded.manifest else {
        if args.json {
            println!(
                "{}",
                render::json(&json!({ "diagnostics": loaded.diagnostics }))
            );
        } else {
            render::diagnostics_human(&loaded.diagnostics);
        }
        return Exit::BadInput;
    };
    let registry = match crate::environment::registry(args.registry.as_deref()) {
        Ok(registry) => registry,
        Err(error) => {
            return render::coded(args.json, &error, Exit::BadInput);
        }
    };
    let options = InstallOptions {
        registry,
        locked: args.locked,
        user_store: murmur_home().join("artifacts"),
        limits: Default::default(),
    };
    let show = !args.json;
    let terminal = std::io::stderr().is_terminal();
    let mut progress = |event: Progress<'_>| {
        if !show {
            return;
        }
        match event {
            Progress::Resolved { name, version } => {
                eprintln!("· {} {}", render::line(name), render::line(version))
            }
            Progress::Fetching { name, done, total } if terminal => {
                let shown = match total {
                    Some(total) if total > 0 => format!("{}%", done * 100 / total),
                    _ => format!("{done} bytes"),
                };
                eprint!("\r  fetching {}: {shown}   ", render::line(name));
                let _ = std::io::stderr().flush();
            }
            Progress::Fetching { .. } => {}
            Progress::Ready { name, how } => {
                if terminal {
                    eprint!("\r\x1b[K");
                }
                eprintln!("  {}: {}", render::line(name), how);
            }
        }
    };
    let installed = match install::install(&capsule_dir, &capsule, &options, &mut progress) {
        Ok(installed) => installed,
        Err(error) => return failed(args.json, &error),
    };
    // Compile each installed component into the cache (progress on stderr): the first run
    // starts warm. One the runtime cannot compile is named now, not at the first run.
    if let Ok(engine) = cached_engine() {
        for artifact in &installed {
            let Ok(local) = murmur_registry::LocalArtifact::open(&artifact.dir, &host_env) else {
                continue;
            };
            if matches!(local.manifest.runtime, Runtime::Skill | Runtime::Mcp) {
                continue;
            }
            let component = local.component_path();
            if !component.is_file() {
                continue;
            }
            if let Err(error) = compile_into_cache(&engine, &artifact.name, &component) {
                return render::failure(
                    args.json,
                    error.code(),
                    &format!("artifact `{}`: {error}", artifact.name),
                    &error.hint(),
                    Exit::BadInput,
                );
            }
        }
    }
    let (servers, peers) = match pin_live(&file, &capsule, &capsule_dir, &args) {
        Ok(pinned) => pinned,
        Err(exit) => return exit,
    };
    if args.json {
        println!(
            "{}",
            render::json(
                &json!({ "installed": installed, "mcp_servers": servers, "peers": peers })
            )
        );
        return Exit::Ok;
    }
    for peer in &peers {
        println!(
            "{} (peer {}, agent card) {}: {}",
            render::line(&peer.name),
            render::line(&peer.url),
            &peer.card_sha256[..12],
            peer.how
        );
    }
    for server in &servers {
        println!(
            "{} (mcp, {} tools) {}: {}",
            render::line(&server.name),
            server.tools,
            &server.tools_sha256[..12],
            server.how
        );
        for change in &server.changes {
            println!("  {}", render::line(change));
        }
    }
    if installed.is_empty() {
        if servers.is_empty() && peers.is_empty() {
            println!("nothing to install: every artifact has a `path:`");
        }
    } else {
        for artifact in &installed {
            println!(
                "{} {} ({}) {}: {}",
                render::line(&artifact.name),
                render::line(&artifact.version),
                artifact.runtime,
                &artifact.sha256[..12.min(artifact.sha256.len())],
                artifact.how
            );
        }
        println!(
            "murmur.lock: {}",
            install::lock_path(&capsule_dir).display()
        );
    }
    Exit::Ok
}

/// Pins what the capsule reaches live in `murmur.lock`: its MCP servers (each started as a
/// session would start it, its identity and tools read) and the agent card of each named peer
/// (fetched only when `capabilities.network.allow` permits the peer, with its credential when
/// set; the sha256 of its bytes kept). The lock is read once, the user's credentials once (only
/// when there is something to pin), and the lock written once. A card that cannot be fetched
/// is `E-A2A-029` (the lock left alone) unless the entry gives a `description` (then
/// `W-A2A-030` and the peer stays as it was pinned, or unpinned). With `--locked`, a server or
/// card that is not pinned or differs from its pin is refused and the lock is left alone. Pins
/// of servers and peers the manifest no longer declares are dropped.
fn pin_live(
    file: &Path,
    capsule: &murmur_manifest::CapsuleManifest,
    capsule_dir: &Path,
    args: &InstallArgs,
) -> Result<(Vec<PinnedServer>, Vec<PinnedPeer>), Exit> {
    let declared: Vec<&str> = capsule
        .artifacts
        .iter()
        .filter(|entry| entry.runtime == Runtime::Mcp)
        .map(|entry| entry.name.as_str())
        .collect();
    let named: Vec<&str> = capsule
        .peers
        .iter()
        .filter_map(|peer| peer.name.as_deref())
        .collect();
    let lock_path = install::lock_path(capsule_dir);
    let mut lock = match install::read_lock(capsule_dir) {
        Ok(lock) => lock,
        Err(error) => return Err(failed(args.json, &error)),
    };
    if declared.is_empty() && named.is_empty() && lock.servers.is_empty() && lock.peers.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let credentials = crate::environment::user_credentials_warned()
        .map_err(|diagnostic| render::coded(args.json, &*diagnostic, Exit::BadInput))?;
    let config_lookup = |name: &str| credentials.get(name);
    let lookups = murmur_runtime::session::staging::Lookups {
        env: &host_env,
        config: &config_lookup,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            render::failure(
                args.json,
                "E-RUN-001",
                &format!("cannot start the async runtime: {error}"),
                "this is a bug in mur",
                Exit::Failed,
            )
        })?;
    let before = lock.clone();
    let servers = if declared.is_empty() {
        Vec::new()
    } else {
        pin_mcp_servers(file, capsule, &lookups, &runtime, &mut lock, args)?
    };
    lock.servers
        .retain(|server| declared.contains(&server.name.as_str()));
    let peers = if named.is_empty() {
        Vec::new()
    } else {
        pin_peer_cards(file, capsule, &lookups, &runtime, &mut lock, args)?
    };
    lock.peers
        .retain(|peer| named.contains(&peer.name.as_str()));
    if lock == before {
        return Ok((servers, peers));
    }
    if args.locked {
        // What differs, as (how, what it is, what changed): a new pin or a changed one.
        let changed = servers
            .iter()
            .map(|server| {
                let what = format!("MCP server `{}`", server.name);
                (server.how, what, format!(": {}", server.changes.join("; ")))
            })
            .chain(peers.iter().map(|peer| {
                let what = format!("peer `{}`'s agent card", peer.name);
                (peer.how, what, String::new())
            }));
        let mut differ: Vec<String> = changed
            .filter_map(|(how, what, changes)| match how {
                "unchanged" => None,
                "pinned" => Some(format!("{what} is not in murmur.lock")),
                _ => Some(format!("{what} differs from its pin{changes}")),
            })
            .collect();
        if lock.servers != before.servers && servers.iter().all(|server| server.how == "unchanged")
        {
            differ.push("murmur.lock pins MCP servers the manifest no longer declares".into());
        }
        if lock.peers != before.peers && peers.iter().all(|peer| peer.how == "unchanged") {
            differ.push("murmur.lock pins peers the manifest no longer names".into());
        }
        return Err(failed(args.json, &InstallError::Locked(differ.join("; "))));
    }
    write_lock(args.json, &lock, &lock_path)?;
    Ok((servers, peers))
}

/// An MCP server as `mur install` pinned it.
#[derive(serde::Serialize)]
struct PinnedServer {
    name: String,
    identity: String,
    tools_sha256: String,
    tools: usize,
    /// `pinned` (new), `unchanged`, or `re-pinned` (with `changes`).
    how: &'static str,
    changes: Vec<String>,
}

/// Reads each declared MCP server's identity and tools into `lock`.
fn pin_mcp_servers(
    file: &Path,
    capsule: &murmur_manifest::CapsuleManifest,
    lookups: &murmur_runtime::session::staging::Lookups<'_>,
    runtime: &tokio::runtime::Runtime,
    lock: &mut murmur_manifest::lock::Lock,
    args: &InstallArgs,
) -> Result<Vec<PinnedServer>, Exit> {
    if !args.json {
        for entry in capsule
            .artifacts
            .iter()
            .filter(|e| e.runtime == Runtime::Mcp)
        {
            eprintln!("· mcp server {}: starting to read its tools", entry.name);
        }
    }
    let host: murmur_runtime::session::HostEnv = std::sync::Arc::new(host_env);
    let pins = runtime
        .block_on(murmur_runtime::session::pin_mcp_servers(
            file, capsule, lookups, &host,
        ))
        .map_err(|error| render::coded(args.json, &error, Exit::Failed))?;
    let mut pinned = Vec::new();
    for pin in pins {
        let (how, changes) = match lock.server(&pin.name) {
            None => ("pinned", Vec::new()),
            Some(old) if *old == pin => ("unchanged", Vec::new()),
            Some(old) => (
                "re-pinned",
                murmur_runtime::session::pin_differences(old, &pin),
            ),
        };
        pinned.push(PinnedServer {
            name: pin.name.clone(),
            identity: pin.identity.clone(),
            tools_sha256: pin.tools_sha256.clone(),
            tools: pin.tools.len(),
            how,
            changes,
        });
        lock.upsert_server(pin);
    }
    Ok(pinned)
}

/// A named peer's agent card as `mur install` pinned it.
#[derive(serde::Serialize)]
struct PinnedPeer {
    name: String,
    url: String,
    card_sha256: String,
    /// `pinned` (new), `unchanged`, or `re-pinned` (the card changed).
    how: &'static str,
}

/// Fetches each named peer's agent card into `lock`.
fn pin_peer_cards(
    file: &Path,
    capsule: &murmur_manifest::CapsuleManifest,
    lookups: &murmur_runtime::session::staging::Lookups<'_>,
    runtime: &tokio::runtime::Runtime,
    lock: &mut murmur_manifest::lock::Lock,
    args: &InstallArgs,
) -> Result<Vec<PinnedPeer>, Exit> {
    use murmur_runtime::session::peer_cards;
    let peer_credentials =
        murmur_runtime::session::staging::peer_credentials(capsule, file, lookups);
    if !args.json {
        for name in capsule.peers.iter().filter_map(|peer| peer.name.as_deref()) {
            eprintln!("· peer {name}: fetching its agent card");
        }
    }
    let cards = runtime.block_on(peer_cards::fetch_for_install(capsule, &peer_credentials));
    let mut pinned = Vec::new();
    let mut warnings = Vec::new();
    for card in cards {
        let fetched = match card.fetched {
            Ok(fetched) => fetched,
            Err(why) => {
                if card.description.is_none() {
                    return Err(render::failure(
                        args.json,
                        "E-A2A-029",
                        &format!(
                            "peer `{}`'s agent card cannot be fetched: {why}; its `peers:` entry gives no `description`, so the model could not be told what it does",
                            card.name
                        ),
                        &format!(
                            "check that an agent serves its card at {} (and that `capabilities.network.allow` permits it), or give the entry a `description:`",
                            card.url
                        ),
                        Exit::Failed,
                    ));
                }
                warnings.push(
                    murmur_manifest::Diagnostic::new(
                        murmur_manifest::diagnostic::code::W_A2A_030,
                        format!(
                            "peer `{}`'s agent card cannot be fetched: {why}; it is not pinned, and sessions offer it with the manifest's description",
                            card.name
                        ),
                    )
                    .hint(format!(
                        "check that an agent serves its card at {}, then run `mur install` again to pin it",
                        card.url
                    )),
                );
                continue;
            }
        };
        let pin = murmur_manifest::lock::LockedPeer {
            name: card.name.clone(),
            url: card.url.clone(),
            card_sha256: fetched.sha256,
        };
        let how = match lock.peer(&pin.name) {
            None => "pinned",
            Some(old) if *old == pin => "unchanged",
            Some(_) => "re-pinned",
        };
        pinned.push(PinnedPeer {
            name: pin.name.clone(),
            url: pin.url.clone(),
            card_sha256: pin.card_sha256.clone(),
            how,
        });
        lock.upsert_peer(pin);
    }
    if !warnings.is_empty() && !args.json {
        render::diagnostics_human(&warnings);
    }
    Ok(pinned)
}

/// Writes `lock` to `lock_path`, or the failure (`E-REG-008`) told.
fn write_lock(
    json: bool,
    lock: &murmur_manifest::lock::Lock,
    lock_path: &Path,
) -> Result<(), Exit> {
    lock.write(lock_path).map_err(|error| {
        render::failure(
            json,
            "E-REG-008",
            &format!("cannot write {}: {error}", lock_path.display()),
            "check that the capsule's directory is writable",
            Exit::Failed,
        )
    })
}

fn failed(json: bool, error: &InstallError) -> Exit {
    if let InstallError::Lock(diagnostics) = error {
        if json {
            println!("{}", render::json(&json!({ "diagnostics": diagnostics })));
        } else {
            render::diagnostics_human(diagnostics);
        }
        return Exit::BadInput;
    }
    let exit = match error.code() {
        "E-REG-007" => Exit::Stopped,
        _ => Exit::Failed,
    };
    render::coded(json, &error, exit)
}
