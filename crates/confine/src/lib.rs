//! The shell grant: allowlisted binaries, run directly,
//! confined.
//!
//! What it promises:
//!
//! - **The allowlist is checked before anything is spawned.** Each `capabilities.shell.allow`
//!   entry is resolved against `PATH` and canonicalized at staging. A call names a binary (a
//!   name or a path); it runs only when its name is an allowed name and it resolves to that
//!   entry's canonical file. So a copy, a hard link or a symlink of an allowed binary under
//!   another name is refused (a multi-call binary decides what to be by that name).
//! - **No implicit shell.** The binary runs with exactly the arguments given; an interpreter
//!   runs a script only when it is itself allowed (`bash -c …`).
//! - **A non-zero exit is data.** Only a refusal, a failed spawn or an I/O failure is an error.
//! - **Output is cut at 16 KiB per stream**, `truncated` set, and the whole of both streams
//!   kept at `full-output-path` (beneath the workdir's [`SCRATCH`]).
//! - **The child is confined** ([`confine`]): the workdir as cwd and `HOME`, a minimal
//!   environment (a fixed `PATH`, `LANG`, `TMPDIR` at `SCRATCH/tmp`, and the names
//!   `capabilities.env.allow` lets through: never a credential), a time limit that kills its
//!   whole process group, resource limits, no inherited descriptors, and Landlock where the
//!   kernel has it.
//! - **Nothing outlives its call.** When the call returns, times out or is abandoned (its task
//!   canceled), and when `mur` dies however it dies (`SIGKILL` included), the command's whole
//!   process group is killed by its guardian ([`confine`]). A process that leaves the group
//!   with `setsid` of its own escapes this.

mod cgroup;
mod channel;
pub mod class;
pub mod closure;
mod confine;
pub mod describe;
mod egress;
mod netns;
mod probe;
mod ruleset;
mod sealed;
mod seccomp;
mod start;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use murmur_manifest::Coded;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use murmur_beneath::BeneathDir;

pub use cgroup::CgroupSupport;
pub use class::{Achieved, Class, HostSupport, Mechanism, Missing, State, achieve, host};
pub use confine::{Step, landlock_abi};
pub use describe::{Described, describe};
pub use start::{
    ChildLimits, ChildSpec, Confinement, EgressRefusal, Hold, HoldReport, OnRefused, Prepared,
    SpawnFailure, executables,
};

/// Output kept per stream in the result.
pub const OUTPUT_LIMIT: usize = 16 * 1024;

/// Where the grant keeps its own files in the workdir (full outputs, `tmp/`): one hidden
/// directory, so a workdir that is a user's checkout gains one name, never files among its own.
/// (Not `.murmur`: that is a capsule's project store, which an agent working in place on a
/// capsule's directory may change, and its changes are listed.)
pub const SCRATCH: &str = ".murmur-scratch";
/// Output kept per stream in the full-output file.
const FULL_OUTPUT_LIMIT: usize = 64 * 1024 * 1024;
/// The `PATH` a child gets, before the allowed binaries' own directories.
const BASE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// One allowlist entry, resolved at staging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// As declared.
    pub name: String,
    /// The canonical file it resolved to; `None` when it resolved to nothing (then it allows
    /// nothing).
    pub canonical: Option<PathBuf>,
}

/// A call of the shell.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ShellRequest {
    pub binary: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub timeout_secs: Option<u32>,
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShellOutput {
    /// `None` when the process was ended by a signal (its time limit, say).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    /// Relative to the workdir, when `truncated`.
    pub full_output_path: Option<String>,
    #[serde(skip)]
    pub stdout_bytes: u64,
    #[serde(skip)]
    pub stderr_bytes: u64,
    #[serde(skip)]
    pub timed_out: bool,
    #[serde(skip)]
    pub duration: Duration,
    /// What the kernel refused the call and the limits it hit.
    #[serde(skip)]
    pub contained: HoldReport,
}

/// Why a call did not run (or could not be read).
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("`{binary}` is not in capabilities.shell.allow (allowed: {allowed})")]
    NotAllowed { binary: String, allowed: String },
    #[error("`{binary}` could not be started: {reason}")]
    Spawn { binary: String, reason: String },
    #[error("running `{binary}` failed: {reason}")]
    Io { binary: String, reason: String },
    /// A containment step the kernel refused stopped the child before it ran.
    #[error("`{binary}` was not started: {reason}")]
    Contained { binary: String, reason: String },
    /// The workdir holds `workdir_max_bytes` or more.
    #[error(
        "`{binary}` was not started: the workdir holds {used} bytes, at or past \
         `capabilities.resources.workdir_max_bytes` ({max})"
    )]
    WorkdirFull { binary: String, used: u64, max: u64 },
}

impl ShellError {
    /// The error of a child of `binary` that could not be started.
    fn not_started(binary: &str, failure: SpawnFailure) -> ShellError {
        let binary = binary.to_string();
        let reason = failure.to_string();
        match failure {
            SpawnFailure::Step { .. } => ShellError::Contained { binary, reason },
            SpawnFailure::Prepare(_) | SpawnFailure::Exec(_) => {
                ShellError::Spawn { binary, reason }
            }
        }
    }
}

impl Coded for ShellError {
    fn code(&self) -> &'static str {
        match self {
            ShellError::NotAllowed { .. } => "E-CAP-006",
            ShellError::Spawn { .. } | ShellError::Io { .. } => "E-RUN-017",
            ShellError::Contained { .. } => "E-CAP-021",
            ShellError::WorkdirFull { .. } => "E-CAP-022",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    fn hint(&self) -> String {
        match self {
            ShellError::NotAllowed { .. } => {
                "add the binary to `capabilities.shell.allow`, or use one it allows".to_string()
            }
            ShellError::Spawn { .. } | ShellError::Io { .. } => {
                "check that the binary exists, is executable and runs on this host".to_string()
            }
            ShellError::Contained { .. } => {
                "`mur check` shows what this host gives each class; choose one it can hold \
                 (`--containment`) or give the host what the step needs"
                    .to_string()
            }
            ShellError::WorkdirFull { .. } => {
                "remove files from the workdir, or raise `workdir_max_bytes`".to_string()
            }
        }
    }
}

impl Confinement {
    /// `class` as this host gives it, with no read-only paths, no network, the default limits
    /// and no one told of refusals: the plainest confinement of a class (benchmarks, tools).
    pub fn on_this_host(class: Class) -> Result<Confinement, Missing> {
        Ok(Confinement {
            achieved: achieve(class, host())?,
            read_only: Vec::new(),
            interpreter_runtime: Vec::new(),
            network: Vec::new(),
            unix_sockets: false,
            workdir_exec: false,
            limits: ChildLimits::default(),
            on_refused: None,
        })
    }
}

/// A session's shell grant.
#[derive(Debug, Clone)]
pub struct ShellGrant {
    allowed: Vec<Allowed>,
    workdir: Arc<BeneathDir>,
    env: Vec<(String, String)>,
    confinement: Confinement,
    /// What the allowed binaries need to execute, computed once.
    executables: Arc<Vec<PathBuf>>,
    /// The read-only directories their interpreters need, derived once.
    runtimes: Vec<PathBuf>,
    limits: TimeLimits,
    /// `capabilities.resources.workdir_max_bytes`: see [`ShellGrant::with_workdir_limit`].
    workdir_max_bytes: Option<u64>,
    calls: std::sync::Arc<AtomicU64>,
}

/// How long a child may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeLimits {
    /// When the call names none.
    pub default: Duration,
    /// The most a call may ask for (`capabilities.limits.deadline_seconds`).
    pub max: Duration,
}

/// Resolves `name` the way a shell would: a path as it is, a bare name against `path_var`.
pub fn resolve(name: &str, path_var: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    path_var
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A program the host runs confined on its own account (an agent CLI, say), not one of the
/// model's shell calls: held by `confinement` as a shell call is, with every filesystem right
/// in `writable`, read in `readable`, and execute (`scoped`) only on what `program` needs.
#[derive(Debug, Clone)]
pub struct ConfinedProgram {
    pub program: PathBuf,
    /// What it sees as its name (`argv[0]`).
    pub arg0: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    pub writable: Vec<PathBuf>,
    pub readable: Vec<PathBuf>,
    /// Programs it runs beside itself (an interpreter its launcher names, say).
    pub also_executes: Vec<PathBuf>,
    pub confinement: Confinement,
}

impl ConfinedProgram {
    /// Starts it with stdin, stdout and stderr piped. Dropping the [`Service`]'s guard (or
    /// `mur` dying) ends its whole tree.
    pub fn spawn(&self) -> Result<(Service, tokio::process::ChildStderr), String> {
        let path_var = self
            .env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.as_str())
            .unwrap_or(BASE_PATH);
        let programs: Vec<PathBuf> = std::iter::once(self.program.clone())
            .chain(self.also_executes.iter().cloned())
            .collect();
        let (executables, runtimes) = executables(&programs, path_var);
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg0(&self.arg0)
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spec = ChildSpec {
            writable: std::iter::once(self.cwd.clone())
                .chain(self.writable.iter().filter(|w| **w != self.cwd).cloned())
                .collect(),
            readable: self.readable.iter().cloned().chain(runtimes).collect(),
            executables: Arc::new(executables),
            cpu_seconds: SERVICE_CPU_SECONDS,
        };
        let prepared = self
            .confinement
            .prepare(&mut command, &spec)
            .map_err(|e| e.to_string())?;
        let (mut child, hold) = prepared.spawn(&mut command).map_err(|e| e.to_string())?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("its stdin, stdout or stderr was not piped".to_string());
        };
        Ok((
            Service {
                stdin,
                stdout,
                guard: ServiceGuard { child, hold },
            },
            stderr,
        ))
    }
}

/// A long-lived confined child (an MCP server, say), started by [`ShellGrant::spawn_service`]:
/// the host speaks to it over its stdin and stdout; its stderr goes to a log in the workdir.
/// Dropping it ends its whole process group, whatever the child started.
pub struct Service {
    pub stdin: tokio::process::ChildStdin,
    pub stdout: tokio::process::ChildStdout,
    /// Keeps the child running: whoever holds it (with or without the pipes) holds the child.
    pub guard: ServiceGuard,
}

/// What keeps a [`Service`] running; dropping it ends the child's whole process group.
pub struct ServiceGuard {
    /// The child's guardian (it exits as the command does), held so it is reaped.
    child: tokio::process::Child,
    hold: Hold,
}

impl ServiceGuard {
    /// Waits for the command to end: its guardian mirrors how it ended (its exit code, or
    /// death by the signal that killed it).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// Ends the command's whole tree now, then waits (at most `limit`) until what it sent
    /// through its network namespace has been delivered and its refused system calls are
    /// counted, so that [`ServiceGuard::report`] is final.
    pub async fn end(&mut self, limit: Duration) {
        self.hold.end();
        self.hold.settle(limit).await;
    }

    /// What the kernel refused the child so far, and the limits it hit.
    pub fn report(&self) -> HoldReport {
        self.hold.report()
    }
}

/// How much CPU time a service may use: as good as unlimited (its calls have time limits of
/// their own).
const SERVICE_CPU_SECONDS: u64 = 365 * 24 * 3600;

impl ShellGrant {
    /// The grant of `allow` (resolved against `path_var`, the host's `PATH`), for a session in
    /// `workdir`. `env` is what `capabilities.env.allow` lets through; `tcp_ports` the ports
    /// `capabilities.network.allow` names.
    pub fn new(
        allow: &[String],
        path_var: &str,
        workdir: Arc<BeneathDir>,
        env: Vec<(String, String)>,
        confinement: Confinement,
        limits: TimeLimits,
    ) -> ShellGrant {
        let allowed: Vec<Allowed> = allow
            .iter()
            .map(|name| Allowed {
                name: name.clone(),
                canonical: resolve(name, path_var).and_then(|p| p.canonicalize().ok()),
            })
            .collect();
        let programs: Vec<PathBuf> = allowed.iter().filter_map(|a| a.canonical.clone()).collect();
        let (executables, runtimes) = executables(&programs, &child_path(&allowed));
        ShellGrant {
            allowed,
            workdir,
            env,
            confinement,
            executables: Arc::new(executables),
            runtimes,
            limits,
            workdir_max_bytes: None,
            calls: Default::default(),
        }
    }

    /// The grant with the workdir held to `max` bytes (allocated, counted without following
    /// links). No kernel mechanism bounds a directory's bytes, so the grant holds it this way:
    /// before each call the workdir is counted, and a workdir at or past `max` refuses the call
    /// (`E-CAP-022`); a call may write no single file larger than the room left (its file size
    /// limit). A call writing many files can pass `max` by what that call wrote; the next call
    /// is refused.
    pub fn with_workdir_limit(mut self, max: Option<u64>) -> ShellGrant {
        self.workdir_max_bytes = max;
        self
    }

    /// The same grant for children that work in `workdir` instead (a door principal's
    /// directory of the session's workspace, say).
    pub fn in_workdir(&self, workdir: Arc<BeneathDir>) -> ShellGrant {
        ShellGrant {
            workdir,
            ..self.clone()
        }
    }

    /// How this grant's children are held.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// The allowlist as resolved.
    pub fn allowed(&self) -> &[Allowed] {
        &self.allowed
    }

    /// The allowed entry `binary` names, checked before anything is spawned: its name must be
    /// an allowed entry's name (or that entry's own path), and it must resolve to that entry's
    /// canonical file.
    pub fn check(&self, binary: &str) -> Result<(&Allowed, PathBuf), ShellError> {
        let refused = || ShellError::NotAllowed {
            binary: binary.to_string(),
            allowed: if self.allowed.is_empty() {
                "nothing".to_string()
            } else {
                self.allowed
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        };
        let invoked_name = Path::new(binary)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(refused)?;
        let canonical = if binary.contains('/') {
            Path::new(binary).canonicalize().ok()
        } else {
            self.allowed
                .iter()
                .find(|a| a.name == binary)
                .and_then(|a| a.canonical.clone())
        }
        .ok_or_else(refused)?;
        let entry = self
            .allowed
            .iter()
            .find(|a| {
                let same_name = a.name == binary
                    || Path::new(&a.name).file_name().map(|n| n.to_string_lossy())
                        == Some(invoked_name.as_str().into());
                same_name && a.canonical.as_deref() == Some(canonical.as_path())
            })
            .ok_or_else(refused)?;
        Ok((entry, canonical))
    }

    /// Describes a call for hooks and the trace.
    pub fn describe(&self, request: &ShellRequest) -> Described {
        let canonical = self.check(&request.binary).ok().map(|(_, c)| c);
        describe(
            &request.binary,
            canonical.as_deref(),
            &request.args,
            &self.workdir,
        )
    }

    /// The command that runs `binary` (allowed, resolved to `canonical`) with `args`,
    /// confined as every child of this grant is, ready to spawn. Its stdout is piped, its stdin
    /// piped when `stdin`, its stderr piped unless `stderr` says where it goes.
    fn command(
        &self,
        entry: &Allowed,
        canonical: &Path,
        args: &[String],
        (stdin, stderr): (bool, Option<Stdio>),
        cpu_seconds: u64,
    ) -> Result<(tokio::process::Command, Prepared), ShellError> {
        let binary = entry.name.clone();
        let confinement = match self.workdir_max_bytes {
            None => std::borrow::Cow::Borrowed(&self.confinement),
            Some(max) => {
                let used = workdir_bytes(self.workdir.path(), max);
                if used >= max {
                    return Err(ShellError::WorkdirFull { binary, used, max });
                }
                let mut held = self.confinement.clone();
                held.limits.file_size_bytes = held.limits.file_size_bytes.min(max - used);
                std::borrow::Cow::Owned(held)
            }
        };
        let io = |reason: String| ShellError::Io {
            binary: binary.clone(),
            reason,
        };
        let scratch_tmp = Path::new(SCRATCH).join("tmp");
        self.workdir.create_dir_all(&scratch_tmp).map_err(|e| {
            io(format!(
                "creating the workdir's {}: {e}",
                scratch_tmp.display()
            ))
        })?;
        let workdir = self.workdir.path();
        let tmp = workdir.join(&scratch_tmp);
        let mut command = tokio::process::Command::new(canonical);
        command
            .arg0(Path::new(&entry.name).file_name().unwrap_or_default())
            .args(args)
            .current_dir(workdir)
            .env_clear()
            .env("PATH", child_path(&self.allowed))
            .env("HOME", workdir)
            .env("TMPDIR", &tmp)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .envs(self.env.iter().cloned())
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(stderr.unwrap_or_else(Stdio::piped));
        // Not `kill_on_drop`: killing the guardian alone would leave the command running. The
        // hold, kept by the caller, ends the whole tree when it is let go.
        let spec = ChildSpec {
            writable: vec![workdir.to_path_buf()],
            readable: self.runtimes.clone(),
            executables: self.executables.clone(),
            cpu_seconds,
        };
        let prepared =
            confinement
                .prepare(&mut command, &spec)
                .map_err(|error| ShellError::Spawn {
                    binary: binary.clone(),
                    reason: error.to_string(),
                })?;
        Ok((command, prepared))
    }

    /// Starts an allowed binary with `args` as a [`Service`], confined as a shell call is (the
    /// workdir as cwd, the minimal environment, Landlock, its own process group), its stderr
    /// appended to `log` (a file the caller opened where the child cannot reach it).
    pub fn spawn_service(
        &self,
        binary: &str,
        args: &[String],
        log: std::fs::File,
    ) -> Result<Service, ShellError> {
        let (entry, canonical) = self.check(binary)?;
        let failed = |reason: String| ShellError::Spawn {
            binary: entry.name.clone(),
            reason,
        };
        let stderr = log;
        let (mut command, prepared) = self.command(
            entry,
            &canonical,
            args,
            (true, Some(Stdio::from(stderr))),
            SERVICE_CPU_SECONDS,
        )?;
        let (mut child, hold) = prepared
            .spawn(&mut command)
            .map_err(|error| ShellError::not_started(&entry.name, error))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(failed("its stdin or stdout was not piped".to_string()));
        };
        Ok(Service {
            stdin,
            stdout,
            guard: ServiceGuard { child, hold },
        })
    }

    /// Runs an allowed binary, confined, to its end or its time limit.
    pub async fn execute(&self, request: &ShellRequest) -> Result<ShellOutput, ShellError> {
        let (entry, canonical) = self.check(&request.binary)?;
        let binary = entry.name.clone();
        let io = |reason: String| ShellError::Io {
            binary: binary.clone(),
            reason,
        };
        let timeout = request
            .timeout_secs
            .map(|s| Duration::from_secs(u64::from(s).max(1)))
            .unwrap_or(self.limits.default)
            .min(self.limits.max);
        let (mut command, prepared) = self.command(
            entry,
            &canonical,
            &request.args,
            (request.stdin.is_some(), None),
            timeout.as_secs(),
        )?;
        let started = Instant::now();
        let (mut child, mut hold) = prepared
            .spawn(&mut command)
            .map_err(|error| ShellError::not_started(&binary, error))?;
        if let (Some(text), Some(mut stdin)) = (request.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
            });
        }
        let stdout = tokio::spawn(read_all(child.stdout.take()));
        let stderr = tokio::spawn(read_all(child.stderr.take()));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.map_err(|e| io(e.to_string()))?, false),
            Err(_) => {
                // Ending the hold kills the whole tree.
                hold.end();
                (child.wait().await.map_err(|e| io(e.to_string()))?, true)
            }
        };
        // The call is over: anything the command left running dies with it.
        hold.end();
        hold.settle(Duration::from_secs(1)).await;
        let contained = hold.report();
        drop(hold);
        let (stdout, stdout_bytes) = stdout.await.map_err(|e| io(e.to_string()))?;
        let (stderr, stderr_bytes) = stderr.await.map_err(|e| io(e.to_string()))?;
        let truncated = stdout_bytes > OUTPUT_LIMIT as u64 || stderr_bytes > OUTPUT_LIMIT as u64;
        let full_output_path = if truncated {
            let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
            let relative = format!("{SCRATCH}/shell-{n:04}.log");
            let mut text = Vec::with_capacity(stdout.len() + stderr.len() + 64);
            text.extend_from_slice(format!("--- stdout ({stdout_bytes} bytes) ---\n").as_bytes());
            text.extend_from_slice(&stdout);
            text.extend_from_slice(format!("\n--- stderr ({stderr_bytes} bytes) ---\n").as_bytes());
            text.extend_from_slice(&stderr);
            // Through the workdir handle: a link the child planted at this name is replaced,
            // never written through.
            self.workdir
                .write_whole(&relative, &text)
                .map_err(|e| io(e.to_string()))?;
            Some(relative)
        } else {
            None
        };
        Ok(ShellOutput {
            exit_code: status.code(),
            stdout: cut(&stdout),
            stderr: cut(&stderr),
            truncated,
            full_output_path,
            stdout_bytes,
            stderr_bytes,
            timed_out,
            duration: started.elapsed(),
            contained,
        })
    }
}

/// The most entries [`workdir_bytes`] visits: a workdir holding more counts as full.
const WORKDIR_MAX_ENTRIES: usize = 200_000;

/// The bytes allocated beneath `root` (links not followed, each inode once), counting no
/// further once past `stop_past`; `u64::MAX` for a workdir of more than
/// [`WORKDIR_MAX_ENTRIES`] entries.
fn workdir_bytes(root: &Path, stop_past: u64) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut pending = vec![root.to_path_buf()];
    let mut total = 0u64;
    let mut entries = 0usize;
    while let Some(dir) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > WORKDIR_MAX_ENTRIES {
                return u64::MAX;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.nlink() > 1 && !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if total > stop_past {
                return total;
            }
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// The `PATH` a child of `allowed` gets: the base, then the allowed binaries' directories.
fn child_path(allowed: &[Allowed]) -> String {
    let mut dirs: Vec<&Path> = allowed
        .iter()
        .filter_map(|a| a.canonical.as_ref()?.parent())
        .collect();
    dirs.sort();
    dirs.dedup();
    std::iter::once(BASE_PATH.to_string())
        .chain(dirs.iter().map(|d| d.display().to_string()))
        .collect::<Vec<_>>()
        .join(":")
}

/// Everything a stream produced (the first [`FULL_OUTPUT_LIMIT`] bytes of it), and its size.
async fn read_all<R: tokio::io::AsyncRead + Unpin>(stream: Option<R>) -> (Vec<u8>, u64) {
    let Some(mut stream) = stream else {
        return (Vec::new(), 0);
    };
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = FULL_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

/// The first [`OUTPUT_LIMIT`] bytes as text, cut at a character boundary.
fn cut(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= OUTPUT_LIMIT {
        return text.into_owned();
    }
    let mut end = OUTPUT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a grant of `class` holds its children on this host.
    pub(crate) fn confinement(class: Class) -> Confinement {
        Confinement::on_this_host(class).expect("this host gives the class")
    }

    fn grant(allow: &[&str], workdir: &Path) -> ShellGrant {
        ShellGrant::new(
            &allow.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &std::env::var("PATH").unwrap_or_default(),
            Arc::new(BeneathDir::open(workdir).unwrap()),
            Vec::new(),
            confinement(Class::Scoped),
            TimeLimits {
                default: Duration::from_secs(10),
                max: Duration::from_secs(10),
            },
        )
    }

    #[test]
    fn an_allowed_name_resolves_and_anything_else_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shell = grant(&["ls"], dir.path());
        assert!(shell.check("ls").is_ok());
        assert!(matches!(
            shell.check("cat"),
            Err(ShellError::NotAllowed { .. })
        ));
        // The allowed binary's own path is allowed.
        let ls = resolve("ls", &std::env::var("PATH").unwrap()).unwrap();
        assert!(shell.check(&ls.display().to_string()).is_ok());
    }

    #[test]
    fn a_twin_under_another_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shell = grant(&["ls"], dir.path());
        let ls = resolve("ls", &std::env::var("PATH").unwrap()).unwrap();
        let link = dir.path().join("list");
        std::os::unix::fs::symlink(&ls, &link).unwrap();
        let copy = dir.path().join("ls-copy");
        std::fs::copy(&ls, &copy).unwrap();
        assert!(shell.check(&link.display().to_string()).is_err());
        assert!(shell.check(&copy.display().to_string()).is_err());
        // A copy under the allowed name is still another file.
        let same_name = dir.path().join("ls");
        std::fs::copy(&ls, &same_name).unwrap();
        assert!(shell.check(&same_name.display().to_string()).is_err());
    }

    #[test]
    fn output_is_cut_at_a_character_boundary() {
        let text = "é".repeat(OUTPUT_LIMIT);
        let cut = cut(text.as_bytes());
        assert!(cut.len() <= OUTPUT_LIMIT);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    /// `sh -c script` as a service of a grant of `sh` in `dir`, its stderr in
    /// `logs/service.log`.
    fn sh_service(dir: &Path, script: &str) -> Service {
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        grant(&["sh", "cat", "sleep"], dir)
            .spawn_service(
                "sh",
                &["-c".to_string(), script.to_string()],
                log_file(&dir.join("logs/service.log")),
            )
            .unwrap()
    }

    fn log_file(path: &Path) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
    }

    /// A line written to the service, and what it reads back.
    /// Writes `line` to the service and reads one line back, byte by byte: a buffered reader
    /// would take a second line already waiting in the pipe with it and lose it.
    async fn echo(service: &mut Service, line: &str) -> String {
        use tokio::io::AsyncReadExt;
        service.stdin.write_all(line.as_bytes()).await.unwrap();
        service.stdin.flush().await.unwrap();
        let read_line = async {
            let mut back = Vec::new();
            loop {
                let byte = service.stdout.read_u8().await.unwrap();
                back.push(byte);
                if byte == b'\n' {
                    return String::from_utf8(back).unwrap();
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), read_line)
            .await
            .expect("the service answered no line within 60 s")
    }

    #[tokio::test]
    async fn a_service_speaks_over_its_pipes_and_logs_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let mut service = sh_service(dir.path(), "echo started >&2; exec cat");
        assert_eq!(echo(&mut service, "hello\n").await, "hello\n");
        assert_eq!(echo(&mut service, "again\n").await, "again\n");
        drop(service);
        let log = std::fs::read_to_string(dir.path().join("logs/service.log")).unwrap();
        assert_eq!(log, "started\n");
    }

    #[tokio::test]
    async fn dropping_a_service_kills_everything_it_started() {
        let dir = tempfile::tempdir().unwrap();
        // It starts a sleeper of its own, says its pid, and waits on stdin.
        let mut service = sh_service(dir.path(), "sleep 300 & echo $!; exec cat");
        let pid = echo(&mut service, "").await.trim().to_string();
        let proc = PathBuf::from(format!("/proc/{pid}"));
        assert!(
            proc.exists(),
            "the sleeper {pid} runs while the service does"
        );
        drop(service);
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc.exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A zombie not yet reaped by init has no `cmdline` left to read.
        let alive = std::fs::read(proc.join("cmdline")).is_ok_and(|cmdline| !cmdline.is_empty());
        assert!(!alive, "the sleeper {pid} outlived its service");
    }

    #[tokio::test]
    async fn a_service_is_confined_like_a_shell_call() {
        if landlock_abi().is_none() {
            panic!("this host has no Landlock: the confinement of services cannot be tested");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inside.txt"), "inside").unwrap();
        let script =
            "cat inside.txt; echo; cat /etc/hostname >/dev/null 2>&1; echo outside=$?; exec cat";
        let mut service = sh_service(dir.path(), script);
        assert_eq!(echo(&mut service, "").await, "inside\n");
        assert_eq!(echo(&mut service, "").await, "outside=1\n");
    }

    #[test]
    fn a_service_of_a_binary_not_allowed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let grant = grant(&["sh"], dir.path());
        let refused = grant
            .spawn_service("cat", &[], log_file(&dir.path().join("s.log")))
            .err()
            .unwrap();
        assert_eq!(refused.code(), "E-CAP-006");
    }
}
