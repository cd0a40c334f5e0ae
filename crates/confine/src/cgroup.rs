//! Resource limits for native children, held by the kernel through cgroups.
//!
//! What it promises:
//!
//! - **One group per native child, per call.** Each native child Murmur starts (one `shell`
//!   call, one MCP stdio server, one agent CLI run) gets a fresh, uniquely named group
//!   ([`CallGroup`]) with a process limit, a memory limit (swap included: none is allowed) and,
//!   when asked, a CPU limit. Per call, not per session: one call's limit is its own (a fork bomb
//!   in one call does not starve the next call, nor an MCP server running beside it), the
//!   `events` of a group name the limit that contained *that* call, and a call's end kills
//!   exactly its own processes and nothing of its siblings.
//! - **The child joins before it runs anything.** The parent opens every `cgroup.procs` of the
//!   group (v1: every `tasks`, which moves the one thread the child has between fork and exec
//!   without the kernel's global migration lock; write-only, close-on-exec); the child, between
//!   fork and exec, writes `0` into each
//!   ([`CallGroup::join`]: plain `write(2)`s, async-signal-safe). Everything it forks after that,
//!   `setsid` or double-fork included, is in the group: no process leaves a cgroup by itself.
//!   (A child killed before it joined was never in the group; the caller's own kill of the
//!   child covers that moment.)
//! - **Killing the group kills everything in it.** [`CallGroup::kill_all`] uses `cgroup.kill`
//!   where the kernel has it (cgroup v2, Linux 5.14+), atomic against forks; else it freezes the
//!   group (v2 `cgroup.freeze`, or the v1 freezer when mounted), sends `SIGKILL` to every process
//!   listed in the group, thaws, and repeats until the group is empty or a deadline passes. It
//!   never signals a process that is not listed in the group: each pid is pinned with a pidfd and
//!   signalled only if the group still lists it after the pin.
//! - **Nothing is left behind.** Dropping a [`CallGroup`] kills what is in it, then removes its
//!   directories (retrying briefly while the last processes are reaped). If a directory cannot be
//!   removed, one line on stderr says which: a group is never leaked silently.
//! - **Which limit held is visible.** [`CallGroup::events`] counts OOM kills, refused forks (the
//!   process limit) and CPU throttling, and reports the peak memory where the kernel keeps it.
//! - **What it costs.** Creating and removing a group takes well under a millisecond. Joining
//!   one moves a process between cgroups, which the kernel serialises with a lock whose first
//!   taking after a quiet spell waits for an RCU grace period (milliseconds, more on a busy
//!   host); a host mounted with the `favordynmods` cgroup option does not wait.
//!
//! What each host gives ([`cgroup_support`], probed once per process):
//!
//! - **cgroup v2** ([`CgroupSupport::V2`]): a `cgroup2` mount on which this process's own cgroup
//!   is writable by it and offers the `memory`, `pids` and `cpu` controllers. Root on a v2 host
//!   gets it; so does a non-root user under a delegated systemd scope
//!   (`systemd-run --user --scope -p Delegate=yes mur …`). The call groups are created under
//!   that cgroup (the *base*); because cgroup v2 forbids processes in a group that hands
//!   controllers to its children, `mur` first moves itself into a leaf `murmur-supervisor`
//!   beside them when the kernel asks for it (`EBUSY`). As root, when the own cgroup holds other
//!   processes too, the base is `murmur` under the hierarchy's root instead.
//! - **cgroup v1** ([`CgroupSupport::V1`]): the `pids`, `memory` and `cpu` controllers mounted
//!   each on its own hierarchy (a hybrid host whose `cgroup2` mount carries no controllers is
//!   one), this process's group writable in each (root, or directories handed over by an
//!   administrator). A call group is one directory per controller (and one in the freezer, when
//!   it is mounted and writable, to stop a fork race while killing). Swap is capped with
//!   `memory.memsw.limit_in_bytes` (v2: `memory.swap.max` = 0) when the kernel accounts swap;
//!   where it does not, the limit holds on memory in RAM only, and on a host with swap a call's
//!   pages could spill into it.
//! - **Neither** ([`CgroupSupport::None`]): no group can be had; `why` names what is missing and
//!   how to get it. Then no limit here holds: the caller must use its stand-ins (per-process
//!   rlimits on processes, address space and CPU time, and a PID namespace so that killing its
//!   init kills every process of the call), and must say so rather than claim these limits.

// The orchestration (confine.rs) wires this module in; until it does, parts are used by tests
// only.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The controllers a group needs.
const NEEDED: [&str; 3] = ["memory", "pids", "cpu"];
/// The leaf `mur` moves itself into on cgroup v2 when its own cgroup must hand out controllers.
const SUPERVISOR: &str = "murmur-supervisor";
/// The most `cgroup.procs` a group has (v1: pids, memory, cpu, freezer).
pub(crate) const MAX_JOIN_FDS: usize = 4;
/// The CPU period the CPU limit is expressed in, in microseconds.
const CPU_PERIOD_US: u64 = 100_000;
/// How long `kill_all` keeps trying before it gives up and says which processes remain.
const KILL_DEADLINE: Duration = Duration::from_secs(5);
/// How long `Drop` retries `rmdir` while the last processes are reaped.
const RMDIR_DEADLINE: Duration = Duration::from_secs(2);
/// How to get cgroups where none could be had.
const HOW_TO_GET: &str = "run as root, or under a delegated systemd scope: \
     systemd-run --user --scope -p Delegate=yes mur …";

/// What cgroups this host gives this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupSupport {
    /// cgroup v2: call groups are created under `base`, which hands out memory, pids and cpu.
    V2 { base: PathBuf },
    /// cgroup v1: one directory per controller under which call groups are created.
    V1 {
        pids: PathBuf,
        memory: PathBuf,
        cpu: PathBuf,
        /// The v1 freezer, when it is mounted and writable (used to stop forks while killing).
        freezer: Option<PathBuf>,
    },
    /// Neither: `why` names what is missing and how to get it.
    None { why: String },
}

impl CgroupSupport {
    /// One line for `mur check` and `session_start`: the layout, or why there is none and how
    /// to get one.
    pub fn describe(&self) -> Result<String, String> {
        match self {
            CgroupSupport::V2 { base } => Ok(format!(
                "cgroup v2 under {} (memory, pids, cpu; one group per call)",
                base.display()
            )),
            CgroupSupport::V1 {
                pids,
                memory,
                cpu,
                freezer,
            } => Ok(format!(
                "cgroup v1 under {}, {}, {}{} (one group per call)",
                pids.display(),
                memory.display(),
                cpu.display(),
                freezer
                    .as_ref()
                    .map(|f| format!(", freezer {}", f.display()))
                    .unwrap_or_default()
            )),
            CgroupSupport::None { why } => Err(why.clone()),
        }
    }
}

/// The limits of one call's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Live tasks (processes and their threads) at once, the first process included.
    pub max_processes: u64,
    /// Memory, in bytes; swap is not allowed on top of it.
    pub memory_bytes: u64,
    /// CPU time, in percent of one CPU (200 = two CPUs); `None` for no limit.
    pub cpu_percent: Option<u32>,
}

/// What the kernel counted in a group: which limit contained the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupEvents {
    /// Processes the OOM killer killed because the group hit its memory limit.
    pub oom_kills: u64,
    /// Times a fork or clone was refused because the group was at its process limit.
    pub pids_limit_hits: u64,
    /// CPU periods in which the group was throttled by its CPU limit.
    pub cpu_throttled_periods: u64,
    /// The most memory the group used at once, where the kernel keeps it.
    pub memory_peak_bytes: Option<u64>,
}

/// The probe, run once per process.
pub fn cgroup_support() -> &'static CgroupSupport {
    static SUPPORT: OnceLock<CgroupSupport> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

fn probe() -> CgroupSupport {
    let mountinfo = match std::fs::read_to_string("/proc/self/mountinfo") {
        Ok(text) => text,
        Err(e) => {
            return CgroupSupport::None {
                why: format!("cannot read /proc/self/mountinfo ({e}): is /proc mounted?"),
            };
        }
    };
    let own = match std::fs::read_to_string("/proc/self/cgroup") {
        Ok(text) => text,
        Err(e) => {
            return CgroupSupport::None {
                why: format!("this kernel has no cgroups (/proc/self/cgroup: {e})"),
            };
        }
    };
    probe_with(&mountinfo, &own)
}

/// The probe on a `mountinfo` and a `/proc/self/cgroup` text (the live files, or a fixture).
fn probe_with(mountinfo: &str, own: &str) -> CgroupSupport {
    let mounts = parse_mountinfo(mountinfo);
    let lines = parse_proc_cgroup(own);
    let v2 = match probe_v2(&mounts, &lines) {
        Ok(base) => return CgroupSupport::V2 { base },
        Err(why) => why,
    };
    let v1 = match probe_v1(&mounts, &lines) {
        Ok(support) => return support,
        Err(why) => why,
    };
    CgroupSupport::None {
        why: format!("no cgroup limits can be had: {v2}; {v1}; {HOW_TO_GET}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing what the kernel says (outside input: property-tested for panics).

/// One line of `/proc/self/mountinfo`, the fields this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// The directory of the filesystem that is mounted (for cgroups: the group at the mount).
    pub root: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub super_options: Vec<String>,
}

/// The mounts of a `/proc/<pid>/mountinfo` text; malformed lines are skipped.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_mount_line).collect()
}

fn parse_mount_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let dash = fields.iter().position(|f| *f == "-")?;
    // id, parent, major:minor, root, mount point, mount options, then optional fields.
    if dash < 6 || fields.len() < dash + 4 {
        return None;
    }
    Some(Mount {
        root: unescape_octal(fields[3]),
        mount_point: PathBuf::from(unescape_octal(fields[4])),
        fstype: fields[dash + 1].to_string(),
        super_options: fields[dash + 3].split(',').map(str::to_string).collect(),
    })
}

/// `mountinfo` writes space, tab, newline and backslash in paths as `\ooo`.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = u32::from(bytes[i + 1] - b'0') * 64
                + u32::from(bytes[i + 2] - b'0') * 8
                + u32::from(bytes[i + 3] - b'0');
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupLine {
    pub hierarchy: String,
    /// Empty for the cgroup v2 line (`0::/path`); `name=systemd` style entries kept as they are.
    pub controllers: Vec<String>,
    pub path: String,
}

/// The lines of a `/proc/<pid>/cgroup` text; malformed lines are skipped.
pub(crate) fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            if hierarchy.is_empty() || !path.starts_with('/') {
                return None;
            }
            Some(CgroupLine {
                hierarchy: hierarchy.to_string(),
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A `cgroup.controllers` or `cgroup.subtree_control` text.
pub(crate) fn parse_controllers(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// The value of `key` in a flat keyed file (`memory.events`, `pids.events`, `cpu.stat`,
/// `memory.oom_control`): lines of `key value`.
pub(crate) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != key {
            return None;
        }
        words.next()?.parse().ok()
    })
}

/// Where the group at `path` (as `/proc/self/cgroup` names it) is on `mount`, if it is
/// reachable through it. A path outside this process's cgroup namespace (`/../…`) is not.
pub(crate) fn resolve(mount: &Mount, path: &str) -> Option<PathBuf> {
    if path.split('/').any(|c| c == ".." || c == ".") {
        return None;
    }
    let root = mount.root.trim_end_matches('/');
    let rest = if root.is_empty() {
        path
    } else if path == root {
        ""
    } else {
        let after = path.strip_prefix(root)?;
        if !after.starts_with('/') {
            return None;
        }
        after
    };
    let rest = rest.trim_start_matches('/');
    if rest.is_empty() {
        Some(mount.mount_point.clone())
    } else {
        Some(mount.mount_point.join(rest))
    }
}

// ---------------------------------------------------------------------------------------------
// The probe.

fn probe_v2(mounts: &[Mount], lines: &[CgroupLine]) -> Result<PathBuf, String> {
    let Some(line) = lines
        .iter()
        .find(|l| l.hierarchy == "0" && l.controllers.is_empty())
    else {
        return Err(
            "cgroup v2: this process has no v2 cgroup (no `0::` line in /proc/self/cgroup)".into(),
        );
    };
    let v2_mounts: Vec<&Mount> = mounts.iter().filter(|m| m.fstype == "cgroup2").collect();
    let Some((mount, own)) = v2_mounts
        .iter()
        .find_map(|m| resolve(m, &line.path).map(|dir| (*m, dir)))
    else {
        return Err(if v2_mounts.is_empty() {
            "cgroup v2: not mounted".to_string()
        } else {
            format!(
                "cgroup v2: this process's cgroup {} is not reachable through any cgroup2 mount",
                line.path
            )
        });
    };
    // A `mur` started inside a supervisor leaf (say, re-executed) climbs out of it.
    let own = if own.file_name().is_some_and(|n| n == SUPERVISOR) {
        own.parent().map(Path::to_path_buf).unwrap_or(own)
    } else {
        own
    };
    let first = try_v2_base(&own, true);
    let err = match first {
        Ok(()) => return Ok(own),
        Err(e) => e,
    };
    // Root whose own cgroup also holds other processes: a base under the hierarchy's root,
    // which the kernel exempts from the no-internal-processes rule.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && mount.root == "/" && own != mount.mount_point {
        let base = mount.mount_point.join("murmur");
        if enable_subtree(&mount.mount_point).is_ok()
            && mkdir_existing_ok(&base).is_ok()
            && try_v2_base(&base, false).is_ok()
        {
            return Ok(base);
        }
    }
    Err(format!(
        "cgroup v2 at {}: {err}",
        mount.mount_point.display()
    ))
}

/// Makes `dir` a base: it hands memory, pids and cpu to its children and a child can be made.
fn try_v2_base(dir: &Path, may_move_self: bool) -> Result<(), String> {
    let offered = parse_controllers(&read(&dir.join("cgroup.controllers"))?);
    let missing: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|c| !offered.iter().any(|o| o == c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the cgroup {} offers this process no {} controller ({} are delegated to it)",
            dir.display(),
            missing.join(", "),
            if offered.is_empty() {
                "none".to_string()
            } else {
                offered.join(", ")
            }
        ));
    }
    match enable_subtree(dir) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) && may_move_self => {
            // No internal processes: move ourselves into a leaf, then ask again. Only worth it
            // when we are alone in the group (a login shell beside us would stay).
            let ours = std::process::id().to_string();
            let procs = read(&dir.join("cgroup.procs"))?;
            if let Some(other) = procs.lines().map(str::trim).find(|p| *p != ours) {
                return Err(format!(
                    "cannot hand memory, pids, cpu to the children of {}: process {other} shares \
                     this cgroup with mur (start mur in a scope of its own)",
                    dir.display()
                ));
            }
            let leaf = dir.join(SUPERVISOR);
            mkdir_existing_ok(&leaf).map_err(|e| describe_io("create", &leaf, &e))?;
            let procs = leaf.join("cgroup.procs");
            write_file(&procs, "0").map_err(|e| describe_io("move mur into", &procs, &e))?;
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                match enable_subtree(dir) {
                    Ok(()) => break,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => {
                        return Err(format!(
                            "cannot hand memory, pids, cpu to the children of {} ({e}): other processes share this cgroup",
                            dir.display()
                        ));
                    }
                }
            }
        }
        Err(e) => {
            let control = dir.join("cgroup.subtree_control");
            return Err(describe_io("enable memory, pids, cpu in", &control, &e));
        }
    }
    prove_mkdir(dir, |probe| {
        let have = parse_controllers(&read(&probe.join("cgroup.controllers"))?);
        match NEEDED.iter().find(|c| !have.iter().any(|h| h == *c)) {
            Some(c) => Err(format!(
                "a child of {} gets no {c} controller",
                dir.display()
            )),
            None => Ok(()),
        }
    })
}

/// Turns memory, pids and cpu on for `dir`'s children (nothing written if they already are).
fn enable_subtree(dir: &Path) -> io::Result<()> {
    let control = dir.join("cgroup.subtree_control");
    let on = parse_controllers(&std::fs::read_to_string(&control)?);
    let wanted: Vec<String> = NEEDED
        .iter()
        .filter(|c| !on.iter().any(|o| o == *c))
        .map(|c| format!("+{c}"))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    write_file(&control, &wanted.join(" "))
}

fn probe_v1(mounts: &[Mount], lines: &[CgroupLine]) -> Result<CgroupSupport, String> {
    let mut dirs = Vec::new();
    let mut problems = Vec::new();
    for controller in NEEDED {
        match v1_dir(mounts, lines, controller).and_then(|dir| {
            prove_mkdir(&dir, |probe| {
                let file = match controller {
                    "memory" => "memory.limit_in_bytes",
                    "pids" => "pids.max",
                    _ => "cpu.cfs_quota_us",
                };
                if probe.join(file).exists() {
                    Ok(())
                } else {
                    Err(format!("{} has no {file}", probe.display()))
                }
            })?;
            Ok(dir)
        }) {
            Ok(dir) => dirs.push(dir),
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        return Err(format!("cgroup v1: {}", problems.join("; ")));
    }
    let freezer = v1_dir(mounts, lines, "freezer")
        .and_then(|dir| prove_mkdir(&dir, |_| Ok(())).map(|()| dir))
        .ok();
    let [memory, pids, cpu]: [PathBuf; 3] = dirs.try_into().map_err(|_| "cgroup v1: internal")?;
    Ok(CgroupSupport::V1 {
        pids,
        memory,
        cpu,
        freezer,
    })
}

/// This process's group in the v1 hierarchy of `controller`.
fn v1_dir(mounts: &[Mount], lines: &[CgroupLine], controller: &str) -> Result<PathBuf, String> {
    let Some(line) = lines
        .iter()
        .find(|l| l.hierarchy != "0" && l.controllers.iter().any(|c| c == controller))
    else {
        return Err(format!("no {controller} controller on a v1 hierarchy"));
    };
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == controller))
        .find_map(|m| resolve(m, &line.path))
        .ok_or_else(|| format!("the v1 {controller} hierarchy is not mounted where this process can reach its group {}", line.path))
}

/// Proves a child group can be made under `dir` (and passes `check`), then removes it.
fn prove_mkdir(dir: &Path, check: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let probe = dir.join(format!("murmur-probe-{}", unique_suffix()));
    std::fs::create_dir(&probe).map_err(|e| describe_io("create a group in", dir, &e))?;
    let checked = check(&probe);
    let removed = std::fs::remove_dir(&probe);
    checked?;
    removed.map_err(|e| describe_io("remove the probe group", &probe, &e))
}

// ---------------------------------------------------------------------------------------------
// One call's group.

#[derive(Debug)]
enum Layout {
    V2 {
        dir: PathBuf,
    },
    V1 {
        pids: PathBuf,
        memory: PathBuf,
        cpu: PathBuf,
        freezer: Option<PathBuf>,
    },
}

/// The group of one native child and everything it starts. Dropping it kills them all and
/// removes the group.
#[derive(Debug)]
pub(crate) struct CallGroup {
    layout: Layout,
    /// Every `cgroup.procs` of the group, opened write-only and close-on-exec.
    procs: Vec<OwnedFd>,
}

impl CallGroup {
    /// A fresh group with `limits`, on this host's cgroups. Fails when the host gives none
    /// (the reason and how to get them) or when a limit cannot be written.
    pub(crate) fn create(limits: &GroupLimits) -> Result<CallGroup, String> {
        static SWEPT: OnceLock<()> = OnceLock::new();
        SWEPT.get_or_init(|| sweep_stale(cgroup_support()));
        Self::create_on(cgroup_support(), limits)
    }

    fn create_on(support: &CgroupSupport, limits: &GroupLimits) -> Result<CallGroup, String> {
        check_limits(limits)?;
        let name = format!("murmur-{}", unique_suffix());
        match support {
            CgroupSupport::None { why } => Err(why.clone()),
            CgroupSupport::V2 { base } => {
                let dir = base.join(&name);
                std::fs::create_dir(&dir).map_err(|e| describe_io("create", &dir, &e))?;
                // From here, dropping `group` removes what was made.
                let mut group = CallGroup {
                    layout: Layout::V2 { dir: dir.clone() },
                    procs: Vec::new(),
                };
                limit(&dir, "pids.max", &limits.max_processes.to_string())?;
                limit(&dir, "memory.max", &limits.memory_bytes.to_string())?;
                let swap = dir.join("memory.swap.max");
                if swap.exists() {
                    limit(&dir, "memory.swap.max", "0")?;
                }
                if let Some(pct) = limits.cpu_percent {
                    let quota = u64::from(pct) * CPU_PERIOD_US / 100;
                    limit(&dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
                }
                group.procs.push(open_join(&dir, "cgroup.procs")?);
                Ok(group)
            }
            CgroupSupport::V1 {
                pids,
                memory,
                cpu,
                freezer,
            } => {
                let (pids, memory, cpu) = (pids.join(&name), memory.join(&name), cpu.join(&name));
                let freezer = freezer.as_ref().map(|f| f.join(&name));
                // From here, dropping `group` removes what was made (a directory not made yet
                // is skipped).
                let mut group = CallGroup {
                    layout: Layout::V1 {
                        pids: pids.clone(),
                        memory: memory.clone(),
                        cpu: cpu.clone(),
                        freezer: freezer.clone(),
                    },
                    procs: Vec::new(),
                };
                for dir in [Some(&pids), Some(&memory), Some(&cpu), freezer.as_ref()]
                    .into_iter()
                    .flatten()
                {
                    std::fs::create_dir(dir).map_err(|e| describe_io("create", dir, &e))?;
                }
                limit(&pids, "pids.max", &limits.max_processes.to_string())?;
                limit(
                    &memory,
                    "memory.limit_in_bytes",
                    &limits.memory_bytes.to_string(),
                )?;
                if memory.join("memory.memsw.limit_in_bytes").exists() {
                    limit(
                        &memory,
                        "memory.memsw.limit_in_bytes",
                        &limits.memory_bytes.to_string(),
                    )?;
                }
                if let Some(pct) = limits.cpu_percent {
                    let quota = u64::from(pct) * CPU_PERIOD_US / 100;
                    limit(&cpu, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                    limit(&cpu, "cpu.cfs_quota_us", &quota.to_string())?;
                }
                // v1 joins through `tasks`: the child writing "0" there moves only its own
                // thread, which spares the kernel the global lock (and its RCU grace period,
                // 7-10 ms on a quiet host) that moving a whole process through
                // `cgroup.procs` takes. Between fork and exec the child has one thread, so it
                // is the same move.
                for dir in [Some(&pids), Some(&memory), Some(&cpu), freezer.as_ref()]
                    .into_iter()
                    .flatten()
                {
                    group.procs.push(open_join(dir, "tasks")?);
                }
                Ok(group)
            }
        }
    }

    /// The `cgroup.procs` descriptors the child writes into ([`CallGroup::join`]), and how many
    /// of the array are in use. They are close-on-exec: the program the child runs has none.
    pub(crate) fn join_fds(&self) -> ([RawFd; MAX_JOIN_FDS], usize) {
        let mut fds = [-1; MAX_JOIN_FDS];
        for (slot, fd) in fds.iter_mut().zip(&self.procs) {
            *slot = fd.as_raw_fd();
        }
        (fds, self.procs.len())
    }

    /// Moves the calling process into the group: one `write(fd, "0")` per descriptor of
    /// [`CallGroup::join_fds`]. Async-signal-safe (no allocation, no lock), for a child between
    /// fork and exec. The error is the errno of the first write that failed.
    ///
    /// # Safety
    ///
    /// `fds` must be descriptors from [`CallGroup::join_fds`] of a group that is still alive.
    pub(crate) unsafe fn join(fds: &[RawFd]) -> Result<(), i32> {
        // SAFETY: the caller's promise, passed on.
        unsafe { join(fds) }
    }

    /// The directories of the group (one on v2, one per controller on v1).
    pub(crate) fn dirs(&self) -> Vec<&Path> {
        match &self.layout {
            Layout::V2 { dir } => vec![dir],
            Layout::V1 {
                pids,
                memory,
                cpu,
                freezer,
            } => [Some(pids), Some(memory), Some(cpu), freezer.as_ref()]
                .into_iter()
                .flatten()
                .map(PathBuf::as_path)
                .collect(),
        }
    }

    /// Every process the group lists now.
    pub(crate) fn pids(&self) -> Vec<i32> {
        let mut all = BTreeSet::new();
        for dir in self.dirs() {
            if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                all.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        all.into_iter().collect()
    }

    /// Kills every process in the group, `setsid` daemons and a fork bomb racing the kill
    /// included, and returns once the group is empty. Signals no process the group does not
    /// list. If processes still survive after a deadline (a kernel that does not deliver the
    /// kill), one line on stderr names them.
    pub(crate) fn kill_all(&self) {
        if let Err(e) = self.try_kill_all() {
            eprintln!("murmur: {e}");
        }
    }

    /// [`CallGroup::kill_all`], saying whether the group emptied.
    pub(crate) fn try_kill_all(&self) -> Result<(), String> {
        if let Layout::V2 { dir } = &self.layout {
            let kill = dir.join("cgroup.kill");
            if kill.exists() && write_file(&kill, "1").is_ok() {
                return self.wait_empty(Instant::now() + KILL_DEADLINE);
            }
        }
        self.freeze_and_kill(true)
    }

    /// Freezes (when `freeze` and a freezer is there), signals every listed process, thaws,
    /// repeats until empty.
    fn freeze_and_kill(&self, freeze: bool) -> Result<(), String> {
        let deadline = Instant::now() + KILL_DEADLINE;
        let freezer = if freeze { self.freezer() } else { None };
        loop {
            let frozen = freezer.as_ref().is_some_and(|f| f.freeze());
            let listed = self.pids();
            if listed.is_empty() {
                if let Some(f) = &freezer {
                    f.thaw();
                }
                return Ok(());
            }
            self.signal_listed(&listed);
            if let Some(f) = &freezer {
                f.thaw();
            }
            // Give the kernel a moment to finish the killed (a frozen round needs only one).
            let settle = Instant::now() + Duration::from_millis(if frozen { 200 } else { 20 });
            while Instant::now() < settle && !self.pids().is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            if Instant::now() >= deadline {
                let left = self.pids();
                if left.is_empty() {
                    return Ok(());
                }
                return Err(format!(
                    "processes {left:?} of cgroup {} survived SIGKILL for {} s",
                    self.dirs()[0].display(),
                    KILL_DEADLINE.as_secs()
                ));
            }
        }
    }

    /// Sends SIGKILL to each pid of `listed` that the group still lists once it is pinned.
    fn signal_listed(&self, listed: &[i32]) {
        let pinned: Vec<(i32, Option<OwnedFd>)> = listed
            .iter()
            .filter_map(|&pid| {
                // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
                if fd >= 0 {
                    // SAFETY: a fresh descriptor we own.
                    Some((pid, Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })))
                } else if io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                    None // gone already
                } else {
                    Some((pid, None)) // no pidfd on this kernel: checked by listing only
                }
            })
            .collect();
        let still = self.pids();
        for (pid, fd) in pinned {
            if still.binary_search(&pid).is_err() {
                continue;
            }
            match fd {
                // SAFETY: a valid pidfd, no siginfo, no flags.
                Some(fd) => unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        libc::SIGKILL,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    );
                },
                // SAFETY: kill has no memory preconditions.
                None => unsafe {
                    libc::kill(pid, libc::SIGKILL);
                },
            }
        }
    }

    fn wait_empty(&self, deadline: Instant) -> Result<(), String> {
        loop {
            let left = self.pids();
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "processes {left:?} of cgroup {} survived cgroup.kill",
                    self.dirs()[0].display()
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn freezer(&self) -> Option<Freezer> {
        match &self.layout {
            Layout::V2 { dir } => dir
                .join("cgroup.freeze")
                .exists()
                .then(|| Freezer::V2(dir.clone())),
            Layout::V1 { freezer, .. } => freezer.clone().map(Freezer::V1),
        }
    }

    /// What the kernel counted in the group so far.
    pub(crate) fn events(&self) -> GroupEvents {
        let get = |dir: &Path, file: &str, key: &str| {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| keyed_value(&t, key))
        };
        let single = |dir: &Path, file: &str| {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        match &self.layout {
            Layout::V2 { dir } => GroupEvents {
                oom_kills: get(dir, "memory.events", "oom_kill").unwrap_or(0),
                pids_limit_hits: get(dir, "pids.events", "max").unwrap_or(0),
                cpu_throttled_periods: get(dir, "cpu.stat", "nr_throttled").unwrap_or(0),
                memory_peak_bytes: single(dir, "memory.peak"),
            },
            Layout::V1 {
                pids, memory, cpu, ..
            } => GroupEvents {
                oom_kills: get(memory, "memory.oom_control", "oom_kill").unwrap_or(0),
                pids_limit_hits: get(pids, "pids.events", "max").unwrap_or(0),
                cpu_throttled_periods: get(cpu, "cpu.stat", "nr_throttled").unwrap_or(0),
                memory_peak_bytes: single(memory, "memory.max_usage_in_bytes"),
            },
        }
    }
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        let killed = self.try_kill_all();
        self.procs.clear();
        let deadline = Instant::now() + RMDIR_DEADLINE;
        let mut left = Vec::new();
        for dir in self.dirs() {
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => {
                        left.push(format!("{} ({e})", dir.display()));
                        break;
                    }
                }
            }
        }
        if !left.is_empty() {
            let why = killed.err().map(|e| format!(": {e}")).unwrap_or_default();
            eprintln!(
                "murmur: could not remove the cgroup of a finished call{why}; left: {}",
                left.join(", ")
            );
        }
    }
}

/// The freezer of a group.
enum Freezer {
    V2(PathBuf),
    V1(PathBuf),
}

impl Freezer {
    /// Freezes the group; true once the kernel says it is frozen (waits a little for it).
    fn freeze(&self) -> bool {
        let (file, value) = match self {
            Freezer::V2(dir) => (dir.join("cgroup.freeze"), "1"),
            Freezer::V1(dir) => (dir.join("freezer.state"), "FROZEN"),
        };
        if write_file(&file, value).is_err() {
            return false;
        }
        let deadline = Instant::now() + Duration::from_millis(200);
        loop {
            let frozen = match self {
                Freezer::V2(dir) => {
                    std::fs::read_to_string(dir.join("cgroup.events"))
                        .ok()
                        .and_then(|t| keyed_value(&t, "frozen"))
                        == Some(1)
                }
                Freezer::V1(dir) => std::fs::read_to_string(dir.join("freezer.state"))
                    .is_ok_and(|t| t.trim() == "FROZEN"),
            };
            if frozen || Instant::now() >= deadline {
                return frozen;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn thaw(&self) {
        let _ = match self {
            Freezer::V2(dir) => write_file(&dir.join("cgroup.freeze"), "0"),
            Freezer::V1(dir) => write_file(&dir.join("freezer.state"), "THAWED"),
        };
    }
}

/// Moves the calling process into a group: one `write(fd, "0")` per descriptor of
/// [`CallGroup::join_fds`]. Async-signal-safe (no allocation, no lock), for a child between
/// fork and exec. The error is the errno of the first write that failed.
///
/// # Safety
///
/// `fds` must be descriptors from [`CallGroup::join_fds`] of a group that is still alive.
pub(crate) unsafe fn join(fds: &[RawFd]) -> Result<(), i32> {
    for &fd in fds {
        // SAFETY: a valid buffer of one byte; `fd` is the caller's promise.
        let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        if written != 1 {
            // SAFETY: reading errno of this thread.
            let errno = unsafe { *libc::__errno_location() };
            return Err(if written < 0 { errno } else { libc::EIO });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Helpers.

fn check_limits(limits: &GroupLimits) -> Result<(), String> {
    if limits.max_processes == 0 {
        return Err("a process limit of 0 would not let the call's own process start".into());
    }
    if limits.memory_bytes < 1 << 20 {
        return Err(format!(
            "a memory limit of {} bytes is below 1 MiB: no program starts in it",
            limits.memory_bytes
        ));
    }
    if limits.cpu_percent == Some(0) {
        return Err("a CPU limit of 0% would never let the call run".into());
    }
    Ok(())
}

fn limit(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    let path = dir.join(file);
    write_file(&path, value).map_err(|e| format!("cannot set {} to {value}: {e}", path.display()))
}

/// `dir`'s `file` (`cgroup.procs`, or v1's `tasks`), opened for the child to join through.
fn open_join(dir: &Path, file: &str) -> Result<OwnedFd, String> {
    let path = dir.join(file);
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map(OwnedFd::from)
        .map_err(|e| describe_io("open", &path, &e))
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    file.write_all(value.as_bytes())
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| describe_io("read", path, &e))
}

fn mkdir_existing_ok(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

fn describe_io(what: &str, path: &Path, e: &io::Error) -> String {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "cannot {what} {} as uid {uid} ({e}): it is not delegated to this user",
            path.display()
        ),
        Some(libc::EROFS) => format!(
            "cannot {what} {}: cgroups are mounted read-only here",
            path.display()
        ),
        _ => format!("cannot {what} {} ({e})", path.display()),
    }
}

/// `<pid>-<counter>-<random>`: unique among this process's groups and across processes.
/// Removes the groups a `mur` that is gone left behind (killed before its groups' `Drop`
/// ran): empty `murmur-<pid>-…` groups of a pid that no longer runs, a minute old or more (a
/// group another `mur` has just made, in another PID namespace, is never that old and
/// empty). `rmdir` removes only empty groups: nothing running is touched.
fn sweep_stale(support: &CgroupSupport) {
    let parents: Vec<&PathBuf> = match support {
        CgroupSupport::V2 { base } => vec![base],
        CgroupSupport::V1 {
            pids,
            memory,
            cpu,
            freezer,
        } => [Some(pids), Some(memory), Some(cpu), freezer.as_ref()]
            .into_iter()
            .flatten()
            .collect(),
        CgroupSupport::None { .. } => Vec::new(),
    };
    let old = std::time::SystemTime::now() - Duration::from_secs(60);
    for parent in parents {
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten().take(4096) {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("murmur-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            let stale = !Path::new(&format!("/proc/{pid}")).exists()
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|made| made < old);
            if stale {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut random = [0u8; 8];
    // SAFETY: a valid buffer of its length.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    let random = if got == random.len() as isize {
        u64::from_ne_bytes(random)
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    };
    format!("{}-{n}-{random:016x}", std::process::id())
}

#[cfg(test)]
mod tests;
