//! Starting one native child under its grant's [`Confinement`], and holding it: the host's
//! side of everything [`confine`](crate::confine) arranges in the child.
//!
//! What it promises:
//!
//! - **One path for every native child** (a shell call, an MCP stdio server, an agent CLI, an
//!   eval command): [`Confinement::prepare`] turns the class this host achieved into the
//!   child's steps, and [`Prepared::spawn`] starts it and hands back a [`Hold`].
//! - **A step that fails stops the child before `exec`**, and the error names the step
//!   ([`SpawnFailure`]): no child ever runs with less than its class.
//! - **Dropping the [`Hold`] ends the child's whole tree**: its guardian kills the command's
//!   PID namespace (or process group), the cgroup is killed whole, the egress proxy stops.
//! - **What the kernel refused is counted** ([`Hold::report`]): system calls seccomp refused
//!   (by name), connections the egress proxy refused (host and port), and the limits the
//!   cgroup hit.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use murmur_manifest::network::{EgressHost, NetworkRule};

use crate::channel::{self, Channel, Kind};
use crate::class::{Achieved, Class};
use crate::confine::{self, Namespaces, Step, Steps};
pub use crate::egress::{EgressRefusal, OnRefused};

/// Resource limits of each native child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ChildLimits {
    pub max_processes: u64,
    pub memory_bytes: u64,
    /// Percent of one CPU; `None`: no rate limit.
    pub cpu_percent: Option<u32>,
    pub open_files: u64,
    pub file_size_bytes: u64,
}

impl Default for ChildLimits {
    fn default() -> ChildLimits {
        ChildLimits {
            max_processes: 256,
            memory_bytes: 2 << 30,
            cpu_percent: None,
            open_files: 1024,
            file_size_bytes: 1 << 30,
        }
    }
}

/// How every native child of one grant is held: the class achieved on this host and what
/// the grant gives.
#[derive(Clone)]
pub struct Confinement {
    pub achieved: Achieved,
    /// Declared read-only paths.
    pub read_only: Vec<PathBuf>,
    /// Read-only directories interpreters need (declared; the derived ones are added).
    pub interpreter_runtime: Vec<PathBuf>,
    /// Where the child may connect (through the egress proxy, or forwarded when loopback).
    pub network: Vec<NetworkRule>,
    pub unix_sockets: bool,
    pub workdir_exec: bool,
    pub limits: ChildLimits,
    pub on_refused: Option<OnRefused>,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("achieved", &self.achieved.achieved)
            .field("network", &self.network)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What one child needs beyond its grant's confinement.
#[derive(Debug, Clone, Default)]
pub struct ChildSpec {
    /// Written freely; the first is the working directory.
    pub writable: Vec<PathBuf>,
    /// Read-only beyond the grant's.
    pub readable: Vec<PathBuf>,
    /// What may be executed (`scoped`): their closure is computed by [`executables`].
    pub executables: Arc<Vec<PathBuf>>,
    /// CPU seconds (a little past the wall-clock limit).
    pub cpu_seconds: u64,
}

/// The files the programs in `programs` need to execute (`path_var` resolves `#!` lines'
/// `env` names), and the read-only directories they need: their interpreters' runtimes, and
/// the system's library directories (read, never executed: a library an extension module
/// loads by name is found there).
pub fn executables(programs: &[PathBuf], path_var: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let closure = crate::closure::exec_closure(programs, path_var);
    let mut runtimes: Vec<PathBuf> = closure
        .executables
        .iter()
        .flat_map(|program| crate::closure::interpreter_runtime(program))
        .chain(crate::closure::system_library_dirs())
        .collect();
    runtimes.sort();
    runtimes.dedup();
    (closure.executables, runtimes)
}

/// A child that could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnFailure {
    /// Preparing it in the host failed.
    #[error("{0}")]
    Prepare(String),
    /// A containment step failed in the child: it never ran.
    #[error("containment failed {} ({error})", step.describe())]
    Step { step: Step, error: String },
    /// `exec` (or what std does around it) failed.
    #[error("{0}")]
    Exec(String),
}

/// A child ready to start.
pub struct Prepared {
    steps: Arc<Steps>,
    lifeline: crate::confine::Lifeline,
    channel: OwnedFd,
    /// What the child inherits at `fork`, the host's copies closed once it has started.
    until_spawned: Vec<OwnedFd>,
    group: Option<crate::cgroup::CallGroup>,
    egress: Option<EgressPlan>,
    on_refused: Option<OnRefused>,
}

struct EgressPlan {
    rules: Vec<NetworkRule>,
    forwarded: Vec<u16>,
}

/// The egress proxy's port inside a child's namespace: the first of these no forwarded port
/// takes.
const PROXY_PORTS: [u16; 3] = [3128, 3129, 8118];

/// The ports of `rules` that name a loopback host: forwarded to the host's loopback as they
/// are, so a local gateway is reached at the address the child was given.
fn loopback_ports(rules: &[NetworkRule]) -> Vec<u16> {
    let mut ports: Vec<u16> = rules
        .iter()
        .filter(|rule| match rule.host() {
            EgressHost::Ip(ip) => ip.is_loopback(),
            EgressHost::Name(name) => name == "localhost",
            EgressHost::Subdomains(_) => false,
        })
        .flat_map(|rule| rule.ports())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn c_path(path: &Path) -> Result<CString, SpawnFailure> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SpawnFailure::Prepare(format!("{} holds a NUL byte", path.display())))
}

impl Confinement {
    /// The child's steps for `spec` under this confinement, set on `command` (whose
    /// environment gains the proxy's variables under `scoped`).
    pub fn prepare(
        &self,
        command: &mut tokio::process::Command,
        spec: &ChildSpec,
    ) -> Result<Prepared, SpawnFailure> {
        let prepare = |what: &str, error: &dyn std::fmt::Display| {
            SpawnFailure::Prepare(format!("{what}: {error}"))
        };
        let scoped = self.achieved.achieved != Class::Advisory;
        let sealed = self.achieved.achieved == Class::Sealed;
        let (lifeline, lifeline_child) =
            crate::confine::lifeline().map_err(|e| prepare("the child's lifeline", &e))?;
        let channel = Channel::new().map_err(|e| prepare("the child's channel", &e))?;
        let limits = &self.limits;
        let mut rlimits = vec![
            (libc::RLIMIT_CORE, 0),
            (libc::RLIMIT_FSIZE, limits.file_size_bytes),
            (libc::RLIMIT_NOFILE, limits.open_files),
            (libc::RLIMIT_CPU, spec.cpu_seconds.saturating_add(1)),
        ];
        let mut group = None;
        if scoped {
            if self.achieved.uses_cgroups() {
                group = Some(
                    crate::cgroup::CallGroup::create(&crate::cgroup::GroupLimits {
                        max_processes: limits.max_processes,
                        memory_bytes: limits.memory_bytes,
                        cpu_percent: limits.cpu_percent,
                    })
                    .map_err(|e| prepare("the child's cgroup", &e))?,
                );
            } else {
                // The kernel counts RLIMIT_NPROC over all the user's processes (threads, in
                // fact), not the child's: the child gets `max_processes` more than that.
                let running = threads_of_this_user();
                rlimits.push((
                    libc::RLIMIT_NPROC,
                    running.saturating_add(limits.max_processes),
                ));
                rlimits.push((libc::RLIMIT_AS, limits.memory_bytes));
            }
        }
        let cgroup_fds = group
            .as_ref()
            .map(|g| {
                let (fds, count) = g.join_fds();
                fds[..count].to_vec()
            })
            .unwrap_or_default();
        let workdir = spec.writable.first();
        let mut root = None;
        let (landlock, namespaces, egress, seccomp) = if scoped {
            let forwarded = loopback_ports(&self.network);
            let proxy_port = PROXY_PORTS
                .into_iter()
                .find(|port| !forwarded.contains(port))
                .unwrap_or(3128);
            let mut tcp_ports = forwarded.clone();
            tcp_ports.push(proxy_port);
            let readable: Vec<&Path> = spec
                .readable
                .iter()
                .chain(&self.read_only)
                .chain(&self.interpreter_runtime)
                .map(PathBuf::as_path)
                .collect();
            let exact = crate::ruleset::Exact {
                writable: spec.writable.iter().map(PathBuf::as_path).collect(),
                workdir_exec: self.workdir_exec,
                executables: &spec.executables,
                readable,
                tcp_ports: &tcp_ports,
            };
            let abi = crate::class::host().landlock_abi.unwrap_or(0);
            let ruleset = crate::ruleset::scoped(&exact, abi).map_err(SpawnFailure::Prepare)?;
            // `sealed`: the root binds the workdir noexec itself.
            let noexec = spec
                .writable
                .iter()
                .filter(|_| !sealed)
                .map(|dir| {
                    let flags = confine::noexec_flags(dir)
                        .map_err(|e| prepare("the workdir's mount", &e))?;
                    Ok((c_path(dir)?, flags))
                })
                .collect::<Result<Vec<_>, SpawnFailure>>()?;
            if sealed {
                let plan = crate::sealed::RootPlan::new(&crate::sealed::RootSpec {
                    writable: &spec.writable,
                    readable: exact.readable.clone(),
                    executables: &spec.executables,
                    etc: crate::ruleset::ETC_FILES,
                    tmp_bytes: limits.memory_bytes,
                    landlock_abi: abi,
                })
                .map_err(|e| prepare("the sealed root", &e))?;
                root = Some(plan);
            }
            let cwd = c_path(workdir.map(PathBuf::as_path).unwrap_or(Path::new("/")))?;
            command.envs(crate::egress::proxy_env(proxy_port, !forwarded.is_empty()));
            let namespaces = Namespaces {
                net: crate::netns::NetnsPlan::new(proxy_port, &forwarded),
                noexec,
                cwd,
            };
            let filter = crate::seccomp::Filter::shared(self.unix_sockets)
                .map_err(|e| prepare("the seccomp filter", &e))?;
            (
                Some(ruleset),
                Some(namespaces),
                Some(EgressPlan {
                    rules: self.network.clone(),
                    forwarded,
                }),
                Some(filter),
            )
        } else {
            let writable: Vec<&Path> = spec.writable.iter().map(PathBuf::as_path).collect();
            let read_only: Vec<PathBuf> = spec
                .readable
                .iter()
                .chain(&self.read_only)
                .cloned()
                .collect();
            let binary_dirs: Vec<PathBuf> = spec
                .executables
                .iter()
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .collect();
            let ruleset = crate::ruleset::advisory(
                &writable,
                &read_only,
                &binary_dirs,
                &NetworkRule::ports_of(&self.network),
            )
            .map_err(SpawnFailure::Prepare)?;
            (ruleset, None, None, None)
        };
        let steps = Arc::new(Steps {
            rlimits,
            cgroup: cgroup_fds,
            namespaces,
            drop_capabilities: scoped.then(confine::cap_last_cap),
            seccomp,
            landlock: landlock.as_ref().map(|fd| fd.as_raw_fd()),
            root,
            channel: channel.child.as_raw_fd(),
            lifeline: lifeline_child.as_raw_fd(),
        });
        confine::confine(command, steps.clone());
        let mut until_spawned = vec![lifeline_child, channel.child];
        until_spawned.extend(landlock);
        Ok(Prepared {
            steps,
            lifeline,
            channel: channel.host,
            until_spawned,
            group,
            egress,
            on_refused: self.on_refused.clone(),
        })
    }
}

impl Prepared {
    /// Starts `command` (the one [`Confinement::prepare`] set up).
    pub fn spawn(
        self,
        command: &mut tokio::process::Command,
    ) -> Result<(tokio::process::Child, Hold), SpawnFailure> {
        let spawned = command.spawn();
        drop(self.until_spawned);
        let messages = channel::receive_all(&self.channel);
        let child = match spawned {
            Ok(child) => child,
            Err(error) => {
                // The low byte names the step; the rest, for the root, which of its steps.
                let failed_step = messages.iter().find_map(|m| {
                    (m.kind == Some(Kind::Failed))
                        .then(|| {
                            Step::from_number(m.words[0] & 0xff)
                                .map(|s| (s, m.words[0] >> 8, m.words[1]))
                        })
                        .flatten()
                });
                return Err(match failed_step {
                    Some((step, detail, errno)) => {
                        let error = std::io::Error::from_raw_os_error(errno);
                        SpawnFailure::Step {
                            step,
                            error: match (&self.steps.root, step) {
                                (Some(root), Step::Root) => {
                                    format!("{}: {error}", root.describe(detail as usize))
                                }
                                _ => error.to_string(),
                            },
                        }
                    }
                    None => SpawnFailure::Exec(error.to_string()),
                });
            }
        };
        drop(self.steps);
        let mut hold = Hold {
            lifeline: Some(self.lifeline),
            group: self.group,
            egress: None,
            refusals: None,
        };
        for message in messages {
            match message.kind {
                Some(Kind::Seccomp) => {
                    if let Some(listener) = message.fds.into_iter().next() {
                        hold.refusals = Some(crate::seccomp::Refusals::watch(listener));
                    }
                }
                Some(Kind::Egress) => {
                    let Some(plan) = &self.egress else { continue };
                    let mut fds = message.fds.into_iter();
                    let Some(proxy) = fds.next() else { continue };
                    let forwards = plan
                        .forwarded
                        .iter()
                        .copied()
                        .zip(fds.map(std::net::TcpListener::from))
                        .collect();
                    let events = crate::egress::EgressEvents::new(self.on_refused.clone());
                    hold.egress = Some(crate::egress::Egress::serve(
                        std::net::TcpListener::from(proxy),
                        forwards,
                        plan.rules.clone(),
                        events,
                    ));
                }
                _ => {}
            }
        }
        Ok((child, hold))
    }
}

/// What holds one started child; dropping it ends the child's whole tree.
pub struct Hold {
    lifeline: Option<crate::confine::Lifeline>,
    group: Option<crate::cgroup::CallGroup>,
    egress: Option<crate::egress::Egress>,
    refusals: Option<crate::seccomp::Refusals>,
}

/// What the kernel refused a child, and the limits it hit.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HoldReport {
    /// System calls seccomp refused, by name, with how often.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscalls_refused: Vec<(String, u64)>,
    /// Connections the egress proxy refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connections_refused: Vec<EgressRefusal>,
    #[serde(skip_serializing_if = "is_zero")]
    pub oom_kills: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub process_limit_hits: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl HoldReport {
    pub fn is_empty(&self) -> bool {
        *self == HoldReport::default()
    }
}

impl Hold {
    /// Ends the child's tree now (its guardian kills it; the cgroup is killed whole).
    pub fn end(&mut self) {
        self.lifeline.take();
        if let Some(group) = &self.group {
            group.kill_all();
        }
    }

    /// Waits (at most `limit`) until every process of the child is gone, so that
    /// [`Hold::report`]'s counts of refused system calls are final, and until what the child
    /// sent through its network namespace before it ended has reached where it was going;
    /// call it after [`Hold::end`].
    pub async fn settle(&mut self, limit: std::time::Duration) {
        let refusals = self.refusals.clone();
        let processes_gone = async move {
            if let Some(refusals) = refusals {
                // The wait blocks a thread: not one of the runtime's workers.
                let _ = tokio::task::spawn_blocking(move || refusals.settle(limit)).await;
            }
        };
        let delivered = async {
            if let Some(egress) = &mut self.egress {
                egress.finish(limit).await;
            }
        };
        tokio::join!(processes_gone, delivered);
    }

    /// What was refused and which limits were hit, so far.
    pub fn report(&self) -> HoldReport {
        let mut report = HoldReport::default();
        if let Some(refusals) = &self.refusals {
            report.syscalls_refused = refusals.counts();
        }
        if let Some(egress) = &self.egress {
            report.connections_refused = egress.refused();
        }
        if let Some(group) = &self.group {
            let events = group.events();
            report.oom_kills = events.oom_kills;
            report.process_limit_hits = events.pids_limit_hits;
        }
        report
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.end();
    }
}

/// How many threads processes of this process's real user run now (what the kernel counts
/// against RLIMIT_NPROC), read from `/proc`.
fn threads_of_this_user() -> u64 {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() }.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .as_encoded_bytes()
                .iter()
                .all(u8::is_ascii_digit)
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                == Some(uid.as_str())
        })
        .filter_map(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}
