//! Starting a native child held by the kernel: what the child does between `fork` and `exec`,
//! in this order, and the guardian that ends its whole tree.
//!
//! 1. a session and process group of its own (`setsid`);
//! 2. hard resource limits (soft = hard): they hold even if a later step fails;
//! 3. its cgroup, joined through descriptors the parent opened (while it still has the host's
//!    credentials);
//! 4. `scoped`: its own user, network, PID and mount namespaces (one `unshare`), identity
//!    uid/gid maps, `lo` up and the egress listeners bound inside (sent to the host over the
//!    [`channel`](crate::channel)); the workdir bind-mounted onto itself `noexec`, `nosuid`,
//!    `nodev` (so the loader cannot map a file the agent wrote as code), and the working
//!    directory entered again through that mount (`sealed`: its root does this);
//! 5. the split: the process forked by the host stays as the command's *guardian*; the
//!    command runs in a process of its own (PID 1 of its namespace under `scoped`) and process
//!    group of its own. The steps below are the command's, so they hold the command and
//!    everything it starts (the guardian only waits and kills);
//! 6. `sealed`: its composed root ([`sealed`](crate::sealed)): only here, as PID 1 of the new
//!    PID namespace, can a fresh `/proc` be mounted;
//! 7. `scoped`: every capability set cleared (bounding first, while it may, then effective,
//!    permitted, inheritable, ambient); then, every class, `no_new_privs`;
//! 8. `scoped`: the seccomp filter (its notification listener sent to the host);
//! 9. Landlock, last, so nothing after it can widen anything (`sealed`: with the new root's
//!    own entries added first); every descriptor beyond stdio closed at `exec`.
//!
//! Every step is a plain system call on values prepared in the parent: no allocation, no
//! lock. A failed step stops the child before `exec`; it sends its step number and errno to
//! the host first, so the host can say which step failed ([`Step`]).
//!
//! The guardian waits for the command and mirrors how it ended, then kills whatever the
//! command left running; when the host's end of the lifeline closes first (the call ended or
//! timed out, or `mur` died however it died), it kills the command's tree at once and dies by
//! `SIGKILL`. Under `scoped` the command's tree is its PID namespace: killing its PID 1 ends
//! every process in it, `setsid` or not; the cgroup is killed whole by the host as well.

use std::ffi::CString;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use crate::channel::{self, Kind};

/// The Landlock ABI the kernel offers, or `None` without Landlock.
pub fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: no attributes, size 0, the version flag.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (version > 0).then_some(version as i32)
}

/// The end of a shell call's lifeline that the host holds. While it is open the call's
/// command runs; when it closes (the call ended, timed out or was abandoned, or `mur` died,
/// however it died, since the kernel closes a dead process's descriptors) the command's
/// guardian kills the command's whole process group.
pub(crate) struct Lifeline(#[allow(dead_code)] OwnedFd);

/// A new lifeline: the host's end, and the end the child's guardian watches (both close on
/// `exec`; the guardian never execs).
pub(crate) fn lifeline() -> std::io::Result<(Lifeline, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both descriptors are new and owned by nothing else.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    Ok((Lifeline(write), read))
}

/// The steps a child takes, numbered as a failure reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Step {
    Session = 1,
    Limits = 2,
    Cgroup = 3,
    Namespaces = 4,
    Mounts = 5,
    Privileges = 6,
    Seccomp = 7,
    Landlock = 8,
    Split = 9,
    Root = 10,
}

impl Step {
    pub(crate) fn from_number(number: i32) -> Option<Step> {
        [
            Step::Session,
            Step::Limits,
            Step::Cgroup,
            Step::Namespaces,
            Step::Mounts,
            Step::Privileges,
            Step::Seccomp,
            Step::Landlock,
            Step::Split,
            Step::Root,
        ]
        .into_iter()
        .find(|step| *step as i32 == number)
    }

    /// What the step does, for an error message.
    pub fn describe(self) -> &'static str {
        match self {
            Step::Session => "starting its own session",
            Step::Limits => "setting its resource limits",
            Step::Cgroup => "joining its cgroup",
            Step::Namespaces => "entering its user, network and PID namespaces",
            Step::Mounts => "mounting its workdir noexec",
            Step::Privileges => "dropping its capabilities",
            Step::Seccomp => "installing its seccomp filter",
            Step::Landlock => "applying its Landlock ruleset",
            Step::Split => "starting its guardian",
            Step::Root => "composing its sealed root",
        }
    }
}

/// The namespaces of a `scoped` child, prepared in the parent.
pub(crate) struct Namespaces {
    pub net: crate::netns::NetnsPlan,
    /// Bind-mounted onto themselves with these extra flags (the workdir).
    pub noexec: Vec<(CString, libc::c_ulong)>,
    /// Entered again once mounted.
    pub cwd: CString,
}

/// Everything one child does between `fork` and `exec`, prepared in the parent.
pub(crate) struct Steps {
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    pub cgroup: Vec<RawFd>,
    pub namespaces: Option<Namespaces>,
    /// `Some(cap_last_cap)`: clear every capability.
    pub drop_capabilities: Option<libc::c_int>,
    pub seccomp: Option<Arc<crate::seccomp::Filter>>,
    pub landlock: Option<RawFd>,
    /// `sealed`: the root the command composes.
    pub root: Option<crate::sealed::RootPlan>,
    pub channel: RawFd,
    pub lifeline: RawFd,
}

/// The highest capability number this kernel knows.
pub(crate) fn cap_last_cap() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(63)
}

/// The mount flags a bind remount of `path` must keep (a remount inside a user namespace may
/// not clear a flag the outer mount locked), plus `noexec`, `nosuid`, `nodev`.
pub(crate) fn noexec_flags(path: &std::path::Path) -> std::io::Result<libc::c_ulong> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a path holds a NUL byte"))?;
    // SAFETY: statvfs writes into the zeroed struct we own.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let kept = stat.f_flag
        & (libc::ST_RDONLY
            | libc::ST_NOSUID
            | libc::ST_NODEV
            | libc::ST_NOEXEC
            | libc::ST_NOATIME
            | libc::ST_NODIRATIME
            | libc::ST_RELATIME);
    Ok(kept as libc::c_ulong | libc::MS_NOEXEC | libc::MS_NOSUID | libc::MS_NODEV)
}

/// Arranges for `command`'s child to take `steps` before `exec`, and to split into guardian
/// and command (see the module doc).
pub(crate) fn confine(command: &mut tokio::process::Command, steps: Arc<Steps>) {
    // SAFETY: the closure only makes async-signal-safe system calls on values it owns.
    unsafe {
        command.pre_exec(move || {
            let failed = |step: Step, errno: i32| -> std::io::Error {
                // The host reads this once the child is gone; if it cannot be sent, the
                // errno alone still reaches it through the spawn's error.
                let _ = channel::send(steps.channel, Kind::Failed, [step as i32, errno], &[]);
                std::io::Error::from_raw_os_error(errno)
            };
            let errno = || *libc::__errno_location();
            if libc::setsid() == -1 {
                return Err(failed(Step::Session, errno()));
            }
            for (resource, value) in steps.rlimits.iter().copied() {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(failed(Step::Limits, errno()));
                }
            }
            if let Err(errno) = crate::cgroup::CallGroup::join(&steps.cgroup) {
                return Err(failed(Step::Cgroup, errno));
            }
            if let Some(namespaces) = &steps.namespaces {
                let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
                let listeners = match crate::netns::enter(&namespaces.net, flags) {
                    Ok(listeners) => listeners,
                    Err((_, errno)) => return Err(failed(Step::Namespaces, errno)),
                };
                let fds = listeners.fds();
                let sent = channel::send(steps.channel, Kind::Egress, [0, 0], fds);
                for fd in fds {
                    libc::close(*fd);
                }
                if let Err(errno) = sent {
                    return Err(failed(Step::Namespaces, errno));
                }
                if let Err(errno) = mount_noexec(namespaces) {
                    return Err(failed(Step::Mounts, errno));
                }
            }
            let child = libc::fork();
            if child == -1 {
                return Err(failed(Step::Split, errno()));
            }
            if child > 0 {
                // The guardian keeps the host's memory and none of the command's steps: not
                // dumpable, so nothing of its user can read or trace it.
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                guard(child, steps.lifeline);
            }
            // The command: a process group of its own, so its guardian can kill all of it.
            libc::setpgid(0, 0);
            if let Some(root) = &steps.root {
                // The step's number carries which of the root's steps failed.
                let composed = root
                    .compose()
                    .and_then(|()| steps.landlock.map_or(Ok(()), |fd| root.grant(fd)));
                if let Err((index, errno)) = composed {
                    let step = Step::Root as i32 | ((index as i32) << 8);
                    let _ = channel::send(steps.channel, Kind::Failed, [step, errno], &[]);
                    return Err(std::io::Error::from_raw_os_error(errno));
                }
            }
            if let Some(last_cap) = steps.drop_capabilities
                && let Err(errno) = drop_capabilities(last_cap)
            {
                return Err(failed(Step::Privileges, errno));
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(failed(Step::Privileges, errno()));
            }
            if let Some(filter) = &steps.seccomp {
                match filter.install() {
                    Ok(Some(listener)) => {
                        let sent = channel::send(steps.channel, Kind::Seccomp, [0, 0], &[listener]);
                        libc::close(listener);
                        if let Err(errno) = sent {
                            return Err(failed(Step::Seccomp, errno));
                        }
                    }
                    Ok(None) => {}
                    Err(errno) => return Err(failed(Step::Seccomp, errno)),
                }
            }
            if let Some(fd) = steps.landlock
                && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0
            {
                return Err(failed(Step::Landlock, errno()));
            }
            // Every descriptor beyond stdio closes at exec, whoever opened it.
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
}

/// Makes every mount the child sees private to it, bind-mounts each `noexec` path onto itself
/// with its flags, and enters the working directory again through the new mount.
///
/// # Safety
/// Called only between `fork` and `exec`, inside the child's own mount namespace.
unsafe fn mount_noexec(namespaces: &Namespaces) -> Result<(), i32> {
    let errno = || unsafe { *libc::__errno_location() };
    // SAFETY: mount(2) and chdir(2) on NUL-terminated strings prepared in the parent.
    unsafe {
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(errno());
        }
        for (path, flags) in &namespaces.noexec {
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                return Err(errno());
            }
            if libc::mount(
                std::ptr::null(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REMOUNT | flags,
                std::ptr::null(),
            ) != 0
            {
                return Err(errno());
            }
        }
        if libc::chdir(namespaces.cwd.as_ptr()) != 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Clears every capability: the bounding set (while `CAP_SETPCAP` is still effective), then
/// the effective, permitted and inheritable sets, then the ambient set.
///
/// # Safety
/// Called only between `fork` and `exec`.
unsafe fn drop_capabilities(last_cap: libc::c_int) -> Result<(), i32> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on this process, with structs on this stack.
    unsafe {
        for cap in 0..=last_cap {
            // EINVAL: a number this kernel does not know; nothing to drop.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && *libc::__errno_location() != libc::EINVAL
            {
                return Err(*libc::__errno_location());
            }
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(*libc::__errno_location());
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(*libc::__errno_location());
        }
        // Not dumpable: no core, and its /proc entries belong to root (exec resets this for
        // the command; seccomp refuses ptrace and process_vm_* there).
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    Ok(())
}

extern "C" fn wake(_: libc::c_int) {}

/// The guardian of `command`: see [`confine`]. Never returns.
///
/// # Safety
/// Called only in a child between `fork` and `exec`; makes only async-signal-safe calls.
unsafe fn guard(command: libc::pid_t, lifeline: libc::c_int) -> ! {
    // SAFETY: plain system calls on this process and its own child.
    unsafe {
        // Either side may run first; both ask the same.
        libc::setpgid(command, command);
        // Hold nothing of the host's but the lifeline: not its output pipes, not its files.
        for fd in 0..3 {
            libc::close(fd);
        }
        if lifeline > 3 {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                (lifeline - 1) as libc::c_uint,
                0 as libc::c_uint,
            );
        }
        libc::syscall(
            libc::SYS_close_range,
            (lifeline + 1) as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
        // SIGCHLD is blocked but while waiting in ppoll, so an exit is never missed.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = wake as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        libc::sigaddset(&mut blocked, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
        let mut waiting: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut waiting);
        loop {
            let mut status: libc::c_int = 0;
            if libc::waitpid(command, &mut status, libc::WNOHANG) == command {
                // Whatever the command left running in its group ends with it.
                libc::kill(-command, libc::SIGKILL);
                if libc::WIFEXITED(status) {
                    libc::_exit(libc::WEXITSTATUS(status));
                }
                let signal = if libc::WIFSIGNALED(status) {
                    libc::WTERMSIG(status)
                } else {
                    libc::SIGKILL
                };
                libc::signal(signal, libc::SIG_DFL);
                libc::sigprocmask(libc::SIG_UNBLOCK, &blocked, std::ptr::null_mut());
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal);
            }
            let mut watched = libc::pollfd {
                fd: lifeline,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::ppoll(&mut watched, 1, std::ptr::null(), &waiting) > 0 {
                // The host let go (the call is over, or `mur` is gone): the group dies now.
                libc::kill(-command, libc::SIGKILL);
                libc::waitpid(command, &mut status, 0);
                libc::kill(libc::getpid(), libc::SIGKILL);
                libc::_exit(137);
            }
        }
    }
}
