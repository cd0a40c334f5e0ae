//! Confining a shell child: its own process group watched by a guardian that kills the whole
//! group when the call ends or the host goes away (however it dies), resource limits, no
//! inherited descriptors, and, where the kernel has it, Landlock.
//!
//! Landlock rules (built in the parent, applied in the child just before `exec`):
//! - the workdir: every filesystem right;
//! - declared read-only paths: read (and execute);
//! - what the allowed binaries need to run: read and execute under `/usr`, `/bin`, `/sbin`,
//!   `/lib*`, each allowed binary's own directory; a short list of `/etc` files programs read
//!   to start (`ld.so.cache`, `passwd`, `group`, `nsswitch.conf`, `localtime`, `hosts`,
//!   `resolv.conf`, certificates); `/dev/null`, `/dev/zero`, `/dev/urandom`, `/dev/random`;
//! - TCP: `connect` only to the ports of `capabilities.network.allow` (none without it), and
//!   no `bind`.
//!
//! Nothing else: not `/etc` at large (`/etc/shadow`), not `/proc` (another process's
//! environment), not `/tmp`, not the user's home.
//!
//! Where Landlock is absent the child runs without it, and [`landlock_abi`] says so, so the
//! session can report it rather than pretend.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};

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

/// Directories whose files programs need to start, read and execute only.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries programs read to start; nothing secret.
const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
];

/// Devices a program may read and write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

/// The Landlock ruleset of one call, ready to be applied in the child. `None` when the kernel
/// has no Landlock.
pub(crate) fn ruleset(
    writable: &[&Path],
    read_only: &[PathBuf],
    binary_dirs: &[PathBuf],
    tcp_ports: &[u16],
) -> Result<Option<OwnedFd>, String> {
    let abi = ABI::V7;
    let failed = |error: &dyn std::fmt::Display| format!("building the Landlock ruleset: {error}");
    let mut created = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
        .and_then(|r| r.create())
        .map_err(|e| failed(&e))?;
    let mut add = |path: &Path, access: landlock::BitFlags<AccessFs>| -> Result<(), String> {
        let Ok(fd) = PathFd::new(path) else {
            return Ok(()); // absent on this system: nothing to grant
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        (&mut created)
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| failed(&e))?;
        Ok(())
    };
    for dir in writable {
        add(dir, AccessFs::from_all(abi))?;
    }
    for path in read_only {
        add(path, AccessFs::from_read(abi))?;
    }
    for dir in SYSTEM_DIRS {
        add(Path::new(dir), AccessFs::from_read(abi))?;
    }
    for dir in binary_dirs {
        add(dir, AccessFs::from_read(abi))?;
    }
    for file in ETC_FILES {
        add(Path::new(file), AccessFs::ReadFile | AccessFs::ReadDir)?;
    }
    for device in DEVICES {
        add(Path::new(device), AccessFs::ReadFile | AccessFs::WriteFile)?;
    }
    for port in tcp_ports {
        (&mut created)
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(|e| failed(&e))?;
    }
    Ok(created.into())
}

/// Resource limits of a child: no core dumps, files of at most 1 GiB, 1024 descriptors, and
/// CPU time a little past its wall-clock limit.
pub(crate) fn rlimits(cpu_seconds: u64) -> [(libc::__rlimit_resource_t, libc::rlim_t); 4] {
    [
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_FSIZE, 1 << 30),
        (libc::RLIMIT_NOFILE, 1024),
        (libc::RLIMIT_CPU, cpu_seconds + 1),
    ]
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

/// Arranges for `command`'s child to start confined, in two processes: the child forked by the
/// host becomes the command's *guardian* (the process the host waits for), and the command
/// runs in a process of its own, in a process group of its own. The guardian waits for the
/// command and mirrors how it ended, then kills whatever the command left running in its
/// group; when `lifeline` closes first, it kills the group at once and dies by `SIGKILL`, as a
/// time limit always ended a child. Everything either process does between `fork` and `exec`
/// is a plain system call (no allocation, no lock).
pub(crate) fn confine(
    command: &mut tokio::process::Command,
    ruleset: Option<&OwnedFd>,
    limits: [(libc::__rlimit_resource_t, libc::rlim_t); 4],
    lifeline: &OwnedFd,
) {
    let ruleset = ruleset.map(|fd| fd.as_raw_fd());
    let lifeline = lifeline.as_raw_fd();
    // SAFETY: the closure only makes async-signal-safe system calls on values it owns.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            for (resource, value) in limits {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(fd) = ruleset {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            let child = libc::fork();
            if child == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if child > 0 {
                guard(child, lifeline);
            }
            // The command: a process group of its own, so its guardian can kill all of it.
            libc::setpgid(0, 0);
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
