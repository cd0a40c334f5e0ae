//! The seccomp filter of a native child: which system calls it may make at all.
//!
//! ## What is refused, with which errno, and why (for `docs/security.md`)
//!
//! Under `scoped` and `sealed` every native child runs under a **default-deny** seccomp
//! filter: a system call not on its allowlist never reaches the kernel's code for it.
//!
//! - **Allowed**: what ordinary programs need (shells, coreutils, `python3`, `node`, `perl`,
//!   `git`, a Rust CLI on tokio): processes and threads (`fork`, `vfork`, `clone` without any
//!   namespace flag, `execve`, `wait*`, signals, `prctl`, scheduling, resource limits), memory
//!   (`mmap` and its kin, `futex`, `rseq`, `membarrier`, memory keys), files (open, read, write,
//!   stat, directories, links, renames, `mknod` (Landlock and the capability drop decide what
//!   it may make), modes and owners, xattrs, locks, `inotify`, `memfd_create`, `ioctl` except
//!   `TIOCSTI`/`TIOCLINUX`), every socket call but `socket()` itself, clocks and timers,
//!   user and group ids (harmless without capabilities), `getrandom`, `uname`, `sysinfo`, and
//!   Landlock's three calls (they only restrict).
//! - **`socket()`** is allowed only for `AF_INET` and `AF_INET6`, and `AF_UNIX` when the
//!   capsule declares `capabilities.network.unix_sockets: true`. Every other family
//!   (`AF_UNIX` without the grant, `AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`, `AF_ALG`, …) fails
//!   with **`EACCES`**: the call exists, this argument is refused (as Landlock refuses a
//!   path). `socketpair` is allowed: it reaches no one.
//! - **Everything else** fails with **`EPERM`** ("outside the surface"). Pinned by tests:
//!   `io_uring_*`, `bpf`, `userfaultfd`, `perf_event_open`, `process_vm_readv`/`writev`,
//!   `open_by_handle_at`, `name_to_handle_at`, `keyctl`/`add_key`/`request_key`, `ptrace`,
//!   `mount`/`umount2`/`pivot_root`/`chroot` and the new mount API, `unshare`/`setns` (and
//!   `clone` with a namespace flag), kernel modules and `kexec`, `seccomp`, `personality`,
//!   `kcmp`, `reboot`, `swapon`/`swapoff`, `acct`, `quotactl`, `lookup_dcookie`, setting the
//!   clock, `iopl`/`ioperm`, `syslog`. Also refused: System V IPC and POSIX message queues
//!   (there is no IPC namespace under `scoped`: they would reach the host's), Linux AIO,
//!   `fanotify`, `pidfd_getfd`, `process_madvise`, `memfd_secret`, `statmount`/`listmount`.
//! - **`clone3` fails with `ENOSYS`**: its flags live in memory seccomp cannot read, so a
//!   namespace flag could not be refused; `ENOSYS` is the answer every libc and runtime
//!   (glibc, musl, Go, Rust's std) takes to fall back to `clone`, whose flags are checked.
//!   It is not counted as a refusal.
//! - A system call of another ABI (32-bit `int 0x80` on x86_64) kills the process: the
//!   filter only knows the native one.
//!
//! **Refusals are counted.** The host answers every refused call itself (through the
//! filter's notification listener) and counts it by name (`io_uring_setup`,
//! `socket(AF_UNIX)`, …); the `shell` trace event carries the counts. Where the kernel cannot
//! hand the host a listener (user notifications absent, or `mur` already under a filter
//! that has one, as in some containers), the kernel answers the same errnos itself and the
//! counts are unavailable: [`seccomp_refusals_counted`] says which.
//!
//! ## The contract
//!
//! - [`Filter::new`] compiles, in the parent, the programs for this architecture (x86_64 or
//!   aarch64) with `seccompiler`; [`Filter::install`] loads them between `fork` and `exec`
//!   with nothing but the `seccomp` system call (no allocation, no lock), assuming
//!   `no_new_privs` is already set, and returns the notification listener.
//! - [`Refusals::watch`] serves that listener on a thread of its own: every notification is
//!   answered with the refusal's errno, never "continue" (so no argument in the child's
//!   memory is ever read, and none can change under us), and counted. The thread ends when
//!   every process under the filter is gone. Its memory is bounded whatever the child does:
//!   names come from a fixed table, unknown numbers are `syscall_<nr>`, and at most
//!   [`MAX_NAMES`] distinct names are kept (the rest count under `(other)`).
//! - If the listener is lost (the host closed it), a refused call fails with `ENOSYS`: the
//!   filter never fails open.
//!
//! ## How the user notification is expressed
//!
//! `seccompiler` has no user-notification action. The main program is compiled with a
//! marker as its mismatch action (`SECCOMP_RET_TRACE` with data [`MARKER`], an action this
//! filter never uses otherwise), then exactly the return instructions that carry it are
//! rewritten to `SECCOMP_RET_USER_NOTIF` (or to `SECCOMP_RET_ERRNO | EPERM` where
//! notifications are unavailable); a test proves nothing else changes. The answers that
//! must not go through the host come from small programs loaded *before* the main one (so
//! the main one, which refuses `seccomp`, is loaded last); the kernel takes the strongest
//! action of all programs, and `ERRNO` outranks `USER_NOTIF`:
//!
//! - `clone3` → `ENOSYS` (the main program allows it by name and leaves it to this one);
//! - without notifications only: `socket()` of a refused family → `EACCES` (the main program
//!   then allows `socket` by name: between two `ERRNO` answers the kernel takes the program
//!   loaded last, which would turn `EACCES` into `EPERM`). With notifications the main
//!   program allows `socket` only by equality rules on its family, and the host answers
//!   `EACCES` for the rest, counted.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The data of the marker action the main program is compiled with, rewritten after.
pub(crate) const MARKER: u32 = 0x4d55;
/// The most distinct names a [`Refusals`] keeps; more count under `(other)`.
pub(crate) const MAX_NAMES: usize = 64;
/// The name refusals beyond [`MAX_NAMES`] are counted under.
const OTHER: &str = "(other)";

const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;

/// What a system call gets from the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Allowed by name.
    Allow,
    /// Refused (`EPERM`).
    Deny,
    /// Allowed without a namespace flag.
    Clone,
    /// `ENOSYS`, so that the caller falls back to `clone`.
    Clone3,
    /// Allowed except `TIOCSTI` and `TIOCLINUX`.
    Ioctl,
    /// Allowed for the granted families only; the rest `EACCES`.
    Socket,
}

use Rule::*;

/// Every system call this filter knows, by name, on both architectures (numbers from
/// `libc`), with what it gets. A call not listed is refused like a `Deny`.
const COMMON: &[(&str, i64, Rule)] = &[
    // Processes, threads, signals, scheduling, limits.
    ("clone", libc::SYS_clone, Clone),
    ("clone3", libc::SYS_clone3, Clone3),
    ("execve", libc::SYS_execve, Allow),
    ("execveat", libc::SYS_execveat, Allow),
    ("wait4", libc::SYS_wait4, Allow),
    ("waitid", libc::SYS_waitid, Allow),
    ("exit", libc::SYS_exit, Allow),
    ("exit_group", libc::SYS_exit_group, Allow),
    ("kill", libc::SYS_kill, Allow),
    ("tkill", libc::SYS_tkill, Allow),
    ("tgkill", libc::SYS_tgkill, Allow),
    ("rt_sigaction", libc::SYS_rt_sigaction, Allow),
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask, Allow),
    ("rt_sigreturn", libc::SYS_rt_sigreturn, Allow),
    ("rt_sigpending", libc::SYS_rt_sigpending, Allow),
    ("rt_sigtimedwait", libc::SYS_rt_sigtimedwait, Allow),
    ("rt_sigqueueinfo", libc::SYS_rt_sigqueueinfo, Allow),
    ("rt_tgsigqueueinfo", libc::SYS_rt_tgsigqueueinfo, Allow),
    ("rt_sigsuspend", libc::SYS_rt_sigsuspend, Allow),
    ("sigaltstack", libc::SYS_sigaltstack, Allow),
    ("restart_syscall", libc::SYS_restart_syscall, Allow),
    ("pidfd_open", libc::SYS_pidfd_open, Allow),
    ("pidfd_send_signal", libc::SYS_pidfd_send_signal, Allow),
    ("prctl", libc::SYS_prctl, Allow),
    ("sched_yield", libc::SYS_sched_yield, Allow),
    ("sched_getaffinity", libc::SYS_sched_getaffinity, Allow),
    ("sched_setaffinity", libc::SYS_sched_setaffinity, Allow),
    ("sched_getparam", libc::SYS_sched_getparam, Allow),
    ("sched_setparam", libc::SYS_sched_setparam, Allow),
    ("sched_getscheduler", libc::SYS_sched_getscheduler, Allow),
    ("sched_setscheduler", libc::SYS_sched_setscheduler, Allow),
    (
        "sched_get_priority_max",
        libc::SYS_sched_get_priority_max,
        Allow,
    ),
    (
        "sched_get_priority_min",
        libc::SYS_sched_get_priority_min,
        Allow,
    ),
    (
        "sched_rr_get_interval",
        libc::SYS_sched_rr_get_interval,
        Allow,
    ),
    ("sched_getattr", libc::SYS_sched_getattr, Allow),
    ("sched_setattr", libc::SYS_sched_setattr, Allow),
    ("getcpu", libc::SYS_getcpu, Allow),
    ("prlimit64", libc::SYS_prlimit64, Allow),
    ("getrusage", libc::SYS_getrusage, Allow),
    ("getpriority", libc::SYS_getpriority, Allow),
    ("setpriority", libc::SYS_setpriority, Allow),
    ("ioprio_get", libc::SYS_ioprio_get, Allow),
    ("set_tid_address", libc::SYS_set_tid_address, Allow),
    ("gettid", libc::SYS_gettid, Allow),
    ("getpid", libc::SYS_getpid, Allow),
    ("getppid", libc::SYS_getppid, Allow),
    ("getpgid", libc::SYS_getpgid, Allow),
    ("setpgid", libc::SYS_setpgid, Allow),
    ("getsid", libc::SYS_getsid, Allow),
    ("setsid", libc::SYS_setsid, Allow),
    ("capget", libc::SYS_capget, Allow),
    ("capset", libc::SYS_capset, Allow),
    ("times", libc::SYS_times, Allow),
    // Memory.
    ("brk", libc::SYS_brk, Allow),
    ("mmap", libc::SYS_mmap, Allow),
    ("munmap", libc::SYS_munmap, Allow),
    ("mprotect", libc::SYS_mprotect, Allow),
    ("mremap", libc::SYS_mremap, Allow),
    ("madvise", libc::SYS_madvise, Allow),
    ("msync", libc::SYS_msync, Allow),
    ("mincore", libc::SYS_mincore, Allow),
    ("mlock", libc::SYS_mlock, Allow),
    ("mlock2", libc::SYS_mlock2, Allow),
    ("munlock", libc::SYS_munlock, Allow),
    ("mlockall", libc::SYS_mlockall, Allow),
    ("munlockall", libc::SYS_munlockall, Allow),
    ("membarrier", libc::SYS_membarrier, Allow),
    ("futex", libc::SYS_futex, Allow),
    ("futex_waitv", libc::SYS_futex_waitv, Allow),
    ("set_robust_list", libc::SYS_set_robust_list, Allow),
    ("rseq", libc::SYS_rseq, Allow),
    ("mbind", libc::SYS_mbind, Allow),
    ("set_mempolicy", libc::SYS_set_mempolicy, Allow),
    ("get_mempolicy", libc::SYS_get_mempolicy, Allow),
    (
        "set_mempolicy_home_node",
        libc::SYS_set_mempolicy_home_node,
        Allow,
    ),
    ("pkey_alloc", libc::SYS_pkey_alloc, Allow),
    ("pkey_free", libc::SYS_pkey_free, Allow),
    ("pkey_mprotect", libc::SYS_pkey_mprotect, Allow),
    ("memfd_create", libc::SYS_memfd_create, Allow),
    ("mseal", libc::SYS_mseal, Allow),
    // Files and descriptors.
    ("read", libc::SYS_read, Allow),
    ("write", libc::SYS_write, Allow),
    ("readv", libc::SYS_readv, Allow),
    ("writev", libc::SYS_writev, Allow),
    ("pread64", libc::SYS_pread64, Allow),
    ("pwrite64", libc::SYS_pwrite64, Allow),
    ("preadv", libc::SYS_preadv, Allow),
    ("pwritev", libc::SYS_pwritev, Allow),
    ("preadv2", libc::SYS_preadv2, Allow),
    ("pwritev2", libc::SYS_pwritev2, Allow),
    ("openat", libc::SYS_openat, Allow),
    ("openat2", libc::SYS_openat2, Allow),
    ("close", libc::SYS_close, Allow),
    ("close_range", libc::SYS_close_range, Allow),
    ("lseek", libc::SYS_lseek, Allow),
    ("fstat", libc::SYS_fstat, Allow),
    ("newfstatat", libc::SYS_newfstatat, Allow),
    ("statx", libc::SYS_statx, Allow),
    ("statfs", libc::SYS_statfs, Allow),
    ("fstatfs", libc::SYS_fstatfs, Allow),
    ("getdents64", libc::SYS_getdents64, Allow),
    ("fcntl", libc::SYS_fcntl, Allow),
    ("ioctl", libc::SYS_ioctl, Ioctl),
    ("dup", libc::SYS_dup, Allow),
    ("dup3", libc::SYS_dup3, Allow),
    ("pipe2", libc::SYS_pipe2, Allow),
    ("ppoll", libc::SYS_ppoll, Allow),
    ("pselect6", libc::SYS_pselect6, Allow),
    ("epoll_create1", libc::SYS_epoll_create1, Allow),
    ("epoll_ctl", libc::SYS_epoll_ctl, Allow),
    ("epoll_pwait", libc::SYS_epoll_pwait, Allow),
    ("epoll_pwait2", libc::SYS_epoll_pwait2, Allow),
    ("eventfd2", libc::SYS_eventfd2, Allow),
    ("timerfd_create", libc::SYS_timerfd_create, Allow),
    ("timerfd_settime", libc::SYS_timerfd_settime, Allow),
    ("timerfd_gettime", libc::SYS_timerfd_gettime, Allow),
    ("signalfd4", libc::SYS_signalfd4, Allow),
    ("inotify_init1", libc::SYS_inotify_init1, Allow),
    ("inotify_add_watch", libc::SYS_inotify_add_watch, Allow),
    ("inotify_rm_watch", libc::SYS_inotify_rm_watch, Allow),
    ("sendfile", libc::SYS_sendfile, Allow),
    ("splice", libc::SYS_splice, Allow),
    ("tee", libc::SYS_tee, Allow),
    ("vmsplice", libc::SYS_vmsplice, Allow),
    ("copy_file_range", libc::SYS_copy_file_range, Allow),
    ("renameat2", libc::SYS_renameat2, Allow),
    ("linkat", libc::SYS_linkat, Allow),
    ("symlinkat", libc::SYS_symlinkat, Allow),
    ("unlinkat", libc::SYS_unlinkat, Allow),
    ("mkdirat", libc::SYS_mkdirat, Allow),
    ("mknodat", libc::SYS_mknodat, Allow),
    ("fchmod", libc::SYS_fchmod, Allow),
    ("fchmodat", libc::SYS_fchmodat, Allow),
    ("fchown", libc::SYS_fchown, Allow),
    ("fchownat", libc::SYS_fchownat, Allow),
    ("truncate", libc::SYS_truncate, Allow),
    ("ftruncate", libc::SYS_ftruncate, Allow),
    ("fallocate", libc::SYS_fallocate, Allow),
    ("fsync", libc::SYS_fsync, Allow),
    ("fdatasync", libc::SYS_fdatasync, Allow),
    ("sync", libc::SYS_sync, Allow),
    ("syncfs", libc::SYS_syncfs, Allow),
    ("fadvise64", libc::SYS_fadvise64, Allow),
    ("readahead", libc::SYS_readahead, Allow),
    ("getxattr", libc::SYS_getxattr, Allow),
    ("lgetxattr", libc::SYS_lgetxattr, Allow),
    ("fgetxattr", libc::SYS_fgetxattr, Allow),
    ("setxattr", libc::SYS_setxattr, Allow),
    ("lsetxattr", libc::SYS_lsetxattr, Allow),
    ("fsetxattr", libc::SYS_fsetxattr, Allow),
    ("listxattr", libc::SYS_listxattr, Allow),
    ("llistxattr", libc::SYS_llistxattr, Allow),
    ("flistxattr", libc::SYS_flistxattr, Allow),
    ("removexattr", libc::SYS_removexattr, Allow),
    ("lremovexattr", libc::SYS_lremovexattr, Allow),
    ("fremovexattr", libc::SYS_fremovexattr, Allow),
    ("flock", libc::SYS_flock, Allow),
    ("utimensat", libc::SYS_utimensat, Allow),
    ("getcwd", libc::SYS_getcwd, Allow),
    ("chdir", libc::SYS_chdir, Allow),
    ("fchdir", libc::SYS_fchdir, Allow),
    ("umask", libc::SYS_umask, Allow),
    ("readlinkat", libc::SYS_readlinkat, Allow),
    ("faccessat", libc::SYS_faccessat, Allow),
    ("faccessat2", libc::SYS_faccessat2, Allow),
    // Sockets: all but socket() by name.
    ("socket", libc::SYS_socket, Socket),
    ("socketpair", libc::SYS_socketpair, Allow),
    ("bind", libc::SYS_bind, Allow),
    ("listen", libc::SYS_listen, Allow),
    ("accept", libc::SYS_accept, Allow),
    ("accept4", libc::SYS_accept4, Allow),
    ("connect", libc::SYS_connect, Allow),
    ("getsockname", libc::SYS_getsockname, Allow),
    ("getpeername", libc::SYS_getpeername, Allow),
    ("sendto", libc::SYS_sendto, Allow),
    ("recvfrom", libc::SYS_recvfrom, Allow),
    ("sendmsg", libc::SYS_sendmsg, Allow),
    ("recvmsg", libc::SYS_recvmsg, Allow),
    ("sendmmsg", libc::SYS_sendmmsg, Allow),
    ("recvmmsg", libc::SYS_recvmmsg, Allow),
    ("shutdown", libc::SYS_shutdown, Allow),
    ("setsockopt", libc::SYS_setsockopt, Allow),
    ("getsockopt", libc::SYS_getsockopt, Allow),
    // Time.
    ("clock_gettime", libc::SYS_clock_gettime, Allow),
    ("clock_getres", libc::SYS_clock_getres, Allow),
    ("clock_nanosleep", libc::SYS_clock_nanosleep, Allow),
    ("nanosleep", libc::SYS_nanosleep, Allow),
    ("gettimeofday", libc::SYS_gettimeofday, Allow),
    ("getitimer", libc::SYS_getitimer, Allow),
    ("setitimer", libc::SYS_setitimer, Allow),
    ("timer_create", libc::SYS_timer_create, Allow),
    ("timer_settime", libc::SYS_timer_settime, Allow),
    ("timer_gettime", libc::SYS_timer_gettime, Allow),
    ("timer_getoverrun", libc::SYS_timer_getoverrun, Allow),
    ("timer_delete", libc::SYS_timer_delete, Allow),
    // Ids: harmless without capabilities.
    ("getuid", libc::SYS_getuid, Allow),
    ("geteuid", libc::SYS_geteuid, Allow),
    ("getgid", libc::SYS_getgid, Allow),
    ("getegid", libc::SYS_getegid, Allow),
    ("getresuid", libc::SYS_getresuid, Allow),
    ("getresgid", libc::SYS_getresgid, Allow),
    ("getgroups", libc::SYS_getgroups, Allow),
    ("setuid", libc::SYS_setuid, Allow),
    ("setgid", libc::SYS_setgid, Allow),
    ("setreuid", libc::SYS_setreuid, Allow),
    ("setregid", libc::SYS_setregid, Allow),
    ("setresuid", libc::SYS_setresuid, Allow),
    ("setresgid", libc::SYS_setresgid, Allow),
    ("setgroups", libc::SYS_setgroups, Allow),
    ("setfsuid", libc::SYS_setfsuid, Allow),
    ("setfsgid", libc::SYS_setfsgid, Allow),
    // The rest of what programs ask.
    ("getrandom", libc::SYS_getrandom, Allow),
    ("uname", libc::SYS_uname, Allow),
    ("sysinfo", libc::SYS_sysinfo, Allow),
    (
        "landlock_create_ruleset",
        libc::SYS_landlock_create_ruleset,
        Allow,
    ),
    ("landlock_add_rule", libc::SYS_landlock_add_rule, Allow),
    (
        "landlock_restrict_self",
        libc::SYS_landlock_restrict_self,
        Allow,
    ),
    // Numbered alike on both architectures (424 and up), not all in `libc` yet.
    ("cachestat", 451, Allow),
    ("fchmodat2", 452, Allow),
    ("map_shadow_stack", 453, Allow),
    ("futex_wake", 454, Allow),
    ("futex_wait", 455, Allow),
    ("futex_requeue", 456, Allow),
    ("setxattrat", 463, Allow),
    ("getxattrat", 464, Allow),
    ("listxattrat", 465, Allow),
    ("removexattrat", 466, Allow),
    ("file_getattr", 468, Allow),
    ("file_setattr", 469, Allow),
    ("statmount", 457, Deny),
    ("listmount", 458, Deny),
    ("lsm_get_self_attr", 459, Deny),
    ("lsm_set_self_attr", 460, Deny),
    ("lsm_list_modules", 461, Deny),
    ("open_tree_attr", 467, Deny),
    // Never allowed.
    ("io_uring_setup", libc::SYS_io_uring_setup, Deny),
    ("io_uring_enter", libc::SYS_io_uring_enter, Deny),
    ("io_uring_register", libc::SYS_io_uring_register, Deny),
    ("bpf", libc::SYS_bpf, Deny),
    ("userfaultfd", libc::SYS_userfaultfd, Deny),
    ("perf_event_open", libc::SYS_perf_event_open, Deny),
    ("process_vm_readv", libc::SYS_process_vm_readv, Deny),
    ("process_vm_writev", libc::SYS_process_vm_writev, Deny),
    ("open_by_handle_at", libc::SYS_open_by_handle_at, Deny),
    ("name_to_handle_at", libc::SYS_name_to_handle_at, Deny),
    ("keyctl", libc::SYS_keyctl, Deny),
    ("add_key", libc::SYS_add_key, Deny),
    ("request_key", libc::SYS_request_key, Deny),
    ("ptrace", libc::SYS_ptrace, Deny),
    ("mount", libc::SYS_mount, Deny),
    ("umount2", libc::SYS_umount2, Deny),
    ("pivot_root", libc::SYS_pivot_root, Deny),
    ("chroot", libc::SYS_chroot, Deny),
    ("move_mount", libc::SYS_move_mount, Deny),
    ("open_tree", libc::SYS_open_tree, Deny),
    ("fsopen", libc::SYS_fsopen, Deny),
    ("fsmount", libc::SYS_fsmount, Deny),
    ("fsconfig", libc::SYS_fsconfig, Deny),
    ("fspick", libc::SYS_fspick, Deny),
    ("mount_setattr", libc::SYS_mount_setattr, Deny),
    ("unshare", libc::SYS_unshare, Deny),
    ("setns", libc::SYS_setns, Deny),
    ("kexec_load", libc::SYS_kexec_load, Deny),
    ("init_module", libc::SYS_init_module, Deny),
    ("finit_module", libc::SYS_finit_module, Deny),
    ("delete_module", libc::SYS_delete_module, Deny),
    ("seccomp", libc::SYS_seccomp, Deny),
    ("personality", libc::SYS_personality, Deny),
    ("kcmp", libc::SYS_kcmp, Deny),
    ("reboot", libc::SYS_reboot, Deny),
    ("swapon", libc::SYS_swapon, Deny),
    ("swapoff", libc::SYS_swapoff, Deny),
    ("acct", libc::SYS_acct, Deny),
    ("quotactl", libc::SYS_quotactl, Deny),
    ("quotactl_fd", libc::SYS_quotactl_fd, Deny),
    ("lookup_dcookie", libc::SYS_lookup_dcookie, Deny),
    ("clock_settime", libc::SYS_clock_settime, Deny),
    ("clock_adjtime", libc::SYS_clock_adjtime, Deny),
    ("settimeofday", libc::SYS_settimeofday, Deny),
    ("adjtimex", libc::SYS_adjtimex, Deny),
    ("syslog", libc::SYS_syslog, Deny),
    ("sethostname", libc::SYS_sethostname, Deny),
    ("setdomainname", libc::SYS_setdomainname, Deny),
    ("vhangup", libc::SYS_vhangup, Deny),
    ("nfsservctl", libc::SYS_nfsservctl, Deny),
    ("ioprio_set", libc::SYS_ioprio_set, Deny),
    ("fanotify_init", libc::SYS_fanotify_init, Deny),
    ("fanotify_mark", libc::SYS_fanotify_mark, Deny),
    ("pidfd_getfd", libc::SYS_pidfd_getfd, Deny),
    ("process_madvise", libc::SYS_process_madvise, Deny),
    ("process_mrelease", libc::SYS_process_mrelease, Deny),
    ("memfd_secret", libc::SYS_memfd_secret, Deny),
    ("get_robust_list", libc::SYS_get_robust_list, Deny),
    ("migrate_pages", libc::SYS_migrate_pages, Deny),
    ("move_pages", libc::SYS_move_pages, Deny),
    ("remap_file_pages", libc::SYS_remap_file_pages, Deny),
    ("io_setup", libc::SYS_io_setup, Deny),
    ("io_destroy", libc::SYS_io_destroy, Deny),
    ("io_submit", libc::SYS_io_submit, Deny),
    ("io_cancel", libc::SYS_io_cancel, Deny),
    ("io_getevents", libc::SYS_io_getevents, Deny),
    ("mq_open", libc::SYS_mq_open, Deny),
    ("mq_unlink", libc::SYS_mq_unlink, Deny),
    ("mq_timedsend", libc::SYS_mq_timedsend, Deny),
    ("mq_timedreceive", libc::SYS_mq_timedreceive, Deny),
    ("mq_notify", libc::SYS_mq_notify, Deny),
    ("mq_getsetattr", libc::SYS_mq_getsetattr, Deny),
    ("msgget", libc::SYS_msgget, Deny),
    ("msgsnd", libc::SYS_msgsnd, Deny),
    ("msgrcv", libc::SYS_msgrcv, Deny),
    ("msgctl", libc::SYS_msgctl, Deny),
    ("semget", libc::SYS_semget, Deny),
    ("semop", libc::SYS_semop, Deny),
    ("semctl", libc::SYS_semctl, Deny),
    ("semtimedop", libc::SYS_semtimedop, Deny),
    ("shmget", libc::SYS_shmget, Deny),
    ("shmat", libc::SYS_shmat, Deny),
    ("shmctl", libc::SYS_shmctl, Deny),
    ("shmdt", libc::SYS_shmdt, Deny),
];

/// The calls only x86_64 has (the older, path-taking forms among them).
#[cfg(target_arch = "x86_64")]
const ARCH: &[(&str, i64, Rule)] = &[
    ("fork", libc::SYS_fork, Allow),
    ("vfork", libc::SYS_vfork, Allow),
    ("arch_prctl", libc::SYS_arch_prctl, Allow),
    ("getrlimit", libc::SYS_getrlimit, Allow),
    ("setrlimit", libc::SYS_setrlimit, Allow),
    ("getpgrp", libc::SYS_getpgrp, Allow),
    ("pause", libc::SYS_pause, Allow),
    ("alarm", libc::SYS_alarm, Allow),
    ("time", libc::SYS_time, Allow),
    ("open", libc::SYS_open, Allow),
    ("creat", libc::SYS_creat, Allow),
    ("stat", libc::SYS_stat, Allow),
    ("lstat", libc::SYS_lstat, Allow),
    ("access", libc::SYS_access, Allow),
    ("readlink", libc::SYS_readlink, Allow),
    ("getdents", libc::SYS_getdents, Allow),
    ("dup2", libc::SYS_dup2, Allow),
    ("pipe", libc::SYS_pipe, Allow),
    ("poll", libc::SYS_poll, Allow),
    ("select", libc::SYS_select, Allow),
    ("epoll_create", libc::SYS_epoll_create, Allow),
    ("epoll_wait", libc::SYS_epoll_wait, Allow),
    ("eventfd", libc::SYS_eventfd, Allow),
    ("signalfd", libc::SYS_signalfd, Allow),
    ("inotify_init", libc::SYS_inotify_init, Allow),
    ("rename", libc::SYS_rename, Allow),
    ("renameat", libc::SYS_renameat, Allow),
    ("link", libc::SYS_link, Allow),
    ("symlink", libc::SYS_symlink, Allow),
    ("unlink", libc::SYS_unlink, Allow),
    ("mkdir", libc::SYS_mkdir, Allow),
    ("rmdir", libc::SYS_rmdir, Allow),
    ("mknod", libc::SYS_mknod, Allow),
    ("chmod", libc::SYS_chmod, Allow),
    ("chown", libc::SYS_chown, Allow),
    ("lchown", libc::SYS_lchown, Allow),
    ("utime", libc::SYS_utime, Allow),
    ("utimes", libc::SYS_utimes, Allow),
    ("futimesat", libc::SYS_futimesat, Allow),
    ("sync_file_range", libc::SYS_sync_file_range, Allow),
    ("kexec_file_load", libc::SYS_kexec_file_load, Deny),
    ("iopl", libc::SYS_iopl, Deny),
    ("ioperm", libc::SYS_ioperm, Deny),
    ("modify_ldt", libc::SYS_modify_ldt, Deny),
    ("get_thread_area", libc::SYS_get_thread_area, Deny),
    ("set_thread_area", libc::SYS_set_thread_area, Deny),
    ("_sysctl", libc::SYS__sysctl, Deny),
    ("sysfs", libc::SYS_sysfs, Deny),
    ("ustat", libc::SYS_ustat, Deny),
    ("uselib", libc::SYS_uselib, Deny),
    ("epoll_ctl_old", libc::SYS_epoll_ctl_old, Deny),
    ("epoll_wait_old", libc::SYS_epoll_wait_old, Deny),
];

/// The calls only aarch64 has (numbers from the kernel's generic table where `libc` lacks
/// them).
#[cfg(target_arch = "aarch64")]
const ARCH: &[(&str, i64, Rule)] = &[
    ("renameat", 38, Allow),
    ("sync_file_range", 84, Allow),
    ("getrlimit", 163, Allow),
    ("setrlimit", 164, Allow),
    ("kexec_file_load", 294, Deny),
];

#[cfg(target_arch = "x86_64")]
const TARGET: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: TargetArch = TargetArch::aarch64;

/// Every known call, this architecture's included.
fn table() -> impl Iterator<Item = &'static (&'static str, i64, Rule)> {
    COMMON.iter().chain(ARCH.iter())
}

/// The name of system call `nr`, or `syscall_<nr>` for one the table does not know.
pub(crate) fn syscall_name(nr: i64) -> Cow<'static, str> {
    static NAMES: OnceLock<HashMap<i64, &'static str>> = OnceLock::new();
    let names = NAMES.get_or_init(|| table().map(|(name, nr, _)| (*nr, *name)).collect());
    match names.get(&nr) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("syscall_{nr}")),
    }
}

/// How refusals reach the caller: through the host (counted) or from the kernel alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Refused calls are user notifications the host answers and counts.
    Notify,
    /// Refused calls get their errno from the kernel; nothing is counted.
    Errno,
}

/// The seccomp programs of one native child, compiled in the parent. Installing them is a
/// few plain system calls ([`Filter::install`]).
pub(crate) struct Filter {
    mode: Mode,
    /// Loaded first, in this order: the answers the host must not give (see the module doc).
    first: Vec<Vec<libc::sock_filter>>,
    /// The allowlist, loaded last (it refuses `seccomp` itself).
    main: Vec<libc::sock_filter>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("mode", &self.mode)
            .field(
                "first",
                &self.first.iter().map(Vec::len).collect::<Vec<_>>(),
            )
            .field("main", &self.main.len())
            .finish()
    }
}

impl Filter {
    /// The filter for a child, `AF_UNIX` sockets allowed when `unix_sockets`; refusals
    /// counted where this host can ([`seccomp_refusals_counted`]).
    pub(crate) fn new(unix_sockets: bool) -> Result<Filter, String> {
        let mode = if seccomp_refusals_counted() {
            Mode::Notify
        } else {
            Mode::Errno
        };
        Filter::build(unix_sockets, mode)
    }

    /// The same filter as [`Filter::new`], compiled once per process for each value of
    /// `unix_sockets` (compiling takes about half a millisecond; installing reads it only).
    pub(crate) fn shared(unix_sockets: bool) -> Result<Arc<Filter>, String> {
        static SHARED: [OnceLock<Result<Arc<Filter>, String>>; 2] =
            [OnceLock::new(), OnceLock::new()];
        SHARED[usize::from(unix_sockets)]
            .get_or_init(|| Filter::new(unix_sockets).map(Arc::new))
            .clone()
    }

    /// How this filter's refusals are answered.
    #[cfg(test)]
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The filter in `mode`.
    pub(crate) fn build(unix_sockets: bool, mode: Mode) -> Result<Filter, String> {
        let mut first = vec![errno_program(
            [(libc::SYS_clone3, Vec::new())].into(),
            libc::ENOSYS,
        )?];
        if mode == Mode::Errno {
            first.push(errno_program(
                [(libc::SYS_socket, vec![refused_families_rule(unix_sockets)?])].into(),
                libc::EACCES,
            )?);
        }
        let rules = main_rules(unix_sockets, mode)?;
        let mut main = compile(rules, SeccompAction::Trace(MARKER), SeccompAction::Allow)?;
        let refusal = match mode {
            Mode::Notify => libc::SECCOMP_RET_USER_NOTIF,
            Mode::Errno => libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        };
        if rewrite_marker(&mut main, refusal) == 0 {
            return Err("the compiled seccomp program has no refusal to rewrite".into());
        }
        Ok(Filter { mode, first, main })
    }

    /// Loads the filter into the calling process, from between `fork` and `exec`: only
    /// `seccomp` system calls on the programs prepared in the parent (async-signal-safe).
    /// Returns the notification listener (close-on-exec) under [`Mode::Notify`], `None`
    /// under [`Mode::Errno`], or the errno of the load that failed (then nothing may run:
    /// part of the filter may be in place).
    ///
    /// # Safety
    /// Call it in a child between `fork` and `exec`, after `no_new_privs` is set: the filter
    /// holds for the rest of the process's life and its descendants'.
    pub(crate) unsafe fn install(&self) -> Result<Option<RawFd>, i32> {
        for program in &self.first {
            // SAFETY: a program compiled in the parent, alive as long as `self`.
            unsafe { load(program, 0) }?;
        }
        match self.mode {
            Mode::Notify => {
                // SAFETY: as above.
                let fd = unsafe { load(&self.main, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER) }?;
                Ok(Some(fd as RawFd))
            }
            Mode::Errno => {
                // SAFETY: as above.
                unsafe { load(&self.main, 0) }?;
                Ok(None)
            }
        }
    }
}

/// The allowlist of the main program: each allowed call, with its argument rules.
fn main_rules(unix_sockets: bool, mode: Mode) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr, rule) in table() {
        let chain = match rule {
            Deny => continue,
            Allow | Clone3 => Vec::new(),
            Clone => vec![rule_of(vec![condition(
                0,
                SeccompCmpOp::MaskedEq(NAMESPACE_FLAGS),
                0,
            )?])?],
            Ioctl => vec![rule_of(vec![
                condition(1, SeccompCmpOp::Ne, u64::from(TIOCSTI))?,
                condition(1, SeccompCmpOp::Ne, u64::from(TIOCLINUX))?,
            ])?],
            Socket if mode == Mode::Errno => Vec::new(),
            Socket => allowed_families(unix_sockets)
                .iter()
                .map(|family| rule_of(vec![condition(0, SeccompCmpOp::Eq, *family as u64)?]))
                .collect::<Result<_, _>>()?,
        };
        rules.insert(*nr, chain);
    }
    Ok(rules)
}

/// The terminal requests refused (`ioctl`'s request is an `unsigned int` for the kernel):
/// pushing input into a terminal, and the console's selection and paste.
const TIOCSTI: u32 = libc::TIOCSTI as u32;
const TIOCLINUX: u32 = libc::TIOCLINUX as u32;

/// `clone`'s namespace flags (`CLONE_NEWTIME` shares its bit with the exit signal there).
const NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

fn allowed_families(unix_sockets: bool) -> &'static [i32] {
    if unix_sockets {
        &[libc::AF_INET, libc::AF_INET6, libc::AF_UNIX]
    } else {
        &[libc::AF_INET, libc::AF_INET6]
    }
}

/// `socket()`'s family is none of the allowed ones.
fn refused_families_rule(unix_sockets: bool) -> Result<SeccompRule, String> {
    rule_of(
        allowed_families(unix_sockets)
            .iter()
            .map(|family| condition(0, SeccompCmpOp::Ne, *family as u64))
            .collect::<Result<_, _>>()?,
    )
}

/// A 32-bit comparison of argument `arg` (every argument compared here is an `int` or an
/// `unsigned int` for the kernel, whatever the upper half holds).
fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule_of(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// A program that answers `errno` where `rules` match and allows everything else.
fn errno_program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
) -> Result<Vec<libc::sock_filter>, String> {
    compile(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
    )
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    matched: SeccompAction,
) -> Result<Vec<libc::sock_filter>, String> {
    let filter = SeccompFilter::new(rules, mismatch, matched, TARGET).map_err(|e| e.to_string())?;
    let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| {
        format!("the seccomp program does not compile: {e}")
    })?;
    if program.len() > u16::MAX as usize {
        return Err(format!(
            "the seccomp program is too long ({} instructions)",
            program.len()
        ));
    }
    Ok(program
        .into_iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect())
}

/// Rewrites every return of the marker action to `to`; returns how many it rewrote.
fn rewrite_marker(program: &mut [libc::sock_filter], to: u32) -> usize {
    let mut rewritten = 0;
    for instruction in program {
        if instruction.code == BPF_RET_K && instruction.k == SECCOMP_RET_TRACE | MARKER {
            instruction.k = to;
            rewritten += 1;
        }
    }
    rewritten
}

/// Loads one program. Async-signal-safe.
///
/// # Safety
/// `program` is a valid classic BPF program.
unsafe fn load(program: &[libc::sock_filter], flags: libc::c_ulong) -> Result<libc::c_long, i32> {
    let fprog = libc::sock_fprog {
        len: program.len() as libc::c_ushort,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `program`, alive for the call.
    let loaded = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if loaded < 0 {
        // SAFETY: reading this thread's errno.
        Err(unsafe { *libc::__errno_location() })
    } else {
        Ok(loaded)
    }
}

/// What this host's kernel gives: probed once per process, in forked children (a filter
/// cannot be taken back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Support {
    /// Filters, and user notifications handed to the host.
    Counted,
    /// Filters, refusals answered by the kernel alone.
    Uncounted,
    /// No seccomp filter can be loaded here.
    Absent,
}

fn support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        if probe(Mode::Notify) {
            Support::Counted
        } else if probe(Mode::Errno) {
            Support::Uncounted
        } else {
            Support::Absent
        }
    })
}

/// Whether a native child can be held by this module's filter on this host (probed once,
/// in a forked child).
pub fn seccomp_available() -> bool {
    support() != Support::Absent
}

/// Whether the refusals a child hits are counted on this host (user notifications handed
/// to the host), rather than answered by the kernel alone.
pub fn seccomp_refusals_counted() -> bool {
    support() == Support::Counted
}

/// Loads the filter of `mode` in a forked child that then exits: `true` when it loads (with
/// a listener, for [`Mode::Notify`]).
fn probe(mode: Mode) -> bool {
    let Ok(filter) = Filter::build(false, mode) else {
        return false;
    };
    // SAFETY: the child makes only system calls on what was prepared before the fork, then
    // `_exit`s; the parent reaps it.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let code = if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                2
            } else {
                match (filter.install(), mode) {
                    (Ok(Some(_)), Mode::Notify) | (Ok(None), Mode::Errno) => 0,
                    _ => 1,
                }
            };
            libc::_exit(code);
        }
        let mut status = 0;
        loop {
            let reaped = libc::waitpid(pid, &mut status, 0);
            if reaped == pid {
                break;
            }
            if reaped < 0 && *libc::__errno_location() != libc::EINTR {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

/// The refusal a notification gets: the name it is counted under and the errno.
fn judge(data: &libc::seccomp_data) -> (Cow<'static, str>, i32) {
    let nr = i64::from(data.nr);
    if nr == libc::SYS_socket {
        // `int family`: the lower half of the register.
        let family = data.args[0] as u32 as i32;
        let name = match family {
            libc::AF_UNIX => Cow::Borrowed("socket(AF_UNIX)"),
            libc::AF_NETLINK => Cow::Borrowed("socket(AF_NETLINK)"),
            libc::AF_PACKET => Cow::Borrowed("socket(AF_PACKET)"),
            libc::AF_VSOCK => Cow::Borrowed("socket(AF_VSOCK)"),
            libc::AF_ALG => Cow::Borrowed("socket(AF_ALG)"),
            libc::AF_BLUETOOTH => Cow::Borrowed("socket(AF_BLUETOOTH)"),
            libc::AF_KEY => Cow::Borrowed("socket(AF_KEY)"),
            libc::AF_INET => Cow::Borrowed("socket(AF_INET)"),
            libc::AF_INET6 => Cow::Borrowed("socket(AF_INET6)"),
            other => Cow::Owned(format!("socket({other})")),
        };
        return (name, libc::EACCES);
    }
    (syscall_name(nr), libc::EPERM)
}

/// The counts, bounded: at most [`MAX_NAMES`] names, then `(other)`.
#[derive(Debug, Default)]
struct Tally {
    names: BTreeMap<String, u64>,
    total: u64,
}

impl Tally {
    fn add(&mut self, name: &str) {
        self.total += 1;
        if let Some(count) = self.names.get_mut(name) {
            *count += 1;
        } else if self.names.len() < MAX_NAMES {
            self.names.insert(name.to_string(), 1);
        } else {
            *self.names.entry(OTHER.to_string()).or_default() += 1;
        }
    }

    fn remove(&mut self, name: &str) {
        self.total = self.total.saturating_sub(1);
        let key = if self.names.contains_key(name) {
            name
        } else {
            OTHER
        };
        if let Some(count) = self.names.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                self.names.remove(key);
            }
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    tally: Mutex<Tally>,
    ended: Mutex<bool>,
    ended_changed: Condvar,
}

/// The refusals of one child's filter, answered and counted by the host: a handle
/// (clonable) on the thread that serves the filter's listener.
#[derive(Debug, Clone)]
pub(crate) struct Refusals {
    shared: Arc<Shared>,
}

impl Refusals {
    /// Serves `listener` (from [`Filter::install`]) on a thread of its own until every
    /// process under the filter is gone: each notification is answered with its refusal's
    /// errno (`EPERM`, `EACCES` for a socket family) and counted by name. If the thread
    /// cannot be started the listener is closed, and refused calls fail with `ENOSYS`
    /// uncounted.
    pub(crate) fn watch(listener: OwnedFd) -> Refusals {
        let shared = Arc::new(Shared::default());
        let serving = Arc::clone(&shared);
        let started = std::thread::Builder::new()
            .name("seccomp-refusals".into())
            .spawn(move || {
                serve(&listener, &serving.tally);
                drop(listener);
                *serving.ended.lock().unwrap_or_else(|e| e.into_inner()) = true;
                serving.ended_changed.notify_all();
            });
        if started.is_err() {
            *shared.ended.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
        Refusals { shared }
    }

    /// The refusals so far, by name, sorted by name.
    pub(crate) fn counts(&self) -> Vec<(String, u64)> {
        let tally = self.shared.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally
            .names
            .iter()
            .map(|(name, count)| (name.clone(), *count))
            .collect()
    }

    /// How many refusals so far.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.shared
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .total
    }

    /// Waits, at most `timeout`, until every process under the filter is gone (after the
    /// child has been reaped, say): then the counts are final. Returns whether they are.
    pub(crate) fn settle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut ended = self.shared.ended.lock().unwrap_or_else(|e| e.into_inner());
        while !*ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            ended = self
                .shared
                .ended_changed
                .wait_timeout(ended, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// Answers every notification on `listener` until no process uses the filter any more.
fn serve(listener: &OwnedFd, tally: &Mutex<Tally>) {
    let fd = listener.as_raw_fd();
    loop {
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on this stack.
        let ready = unsafe { libc::poll(&mut pollfd, 1, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if pollfd.revents & libc::POLLIN == 0 {
            // POLLHUP: every process under the filter is gone; or an error.
            if pollfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                return;
            }
            continue;
        }
        // SAFETY: the kernel requires a zeroed request; all-zero is a valid seccomp_notif.
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the documented ioctl on the listener with a request it fills.
        let received = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut request) };
        if received != 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                // Interrupted, or the caller went (killed) before we took its call.
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return,
            }
        }
        let (name, errno) = judge(&request.data);
        // Counted before the answer, so the caller never runs on before its refusal shows.
        tally.lock().unwrap_or_else(|e| e.into_inner()).add(&name);
        let response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: -errno,
            flags: 0,
        };
        // SAFETY: the documented ioctl on the listener with the response to `request`.
        let sent = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &response) };
        if sent != 0 {
            // ENOENT: the caller died, or a signal interrupted its call (which it will make
            // again, and be counted then): this one never reached it.
            tally
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Output, Stdio};

    /// The calls a child must never make, each with arguments that are harmless should the
    /// filter let one through (the test would then fail on its errno, not do damage).
    fn never_allowed() -> Vec<(&'static str, Vec<i64>)> {
        let mut calls = vec![
            ("io_uring_setup", vec![1, 0]),
            ("io_uring_enter", vec![-1, 0, 0, 0, 0, 0]),
            ("io_uring_register", vec![-1, 0, 0, 0]),
            ("bpf", vec![0, 0, 0]),
            ("userfaultfd", vec![0]),
            ("perf_event_open", vec![0, 0, -1, -1, 0]),
            ("process_vm_readv", vec![1, 0, 0, 0, 0, 0]),
            ("process_vm_writev", vec![1, 0, 0, 0, 0, 0]),
            ("open_by_handle_at", vec![-1, 0, 0]),
            ("name_to_handle_at", vec![-100, 0, 0, 0, 0]),
            ("keyctl", vec![0, 0]),
            ("add_key", vec![0, 0, 0, 0, 0]),
            ("request_key", vec![0, 0, 0, 0]),
            ("ptrace", vec![12, 999_999_999, 0, 0]),
            ("mount", vec![0, 0, 0, 0, 0]),
            ("umount2", vec![0, 0]),
            ("pivot_root", vec![0, 0]),
            ("chroot", vec![0]),
            ("move_mount", vec![-1, 0, -1, 0, 0]),
            ("open_tree", vec![-1, 0, 0]),
            ("fsopen", vec![0, 0]),
            ("fsmount", vec![-1, 0, 0]),
            ("fsconfig", vec![-1, 0, 0, 0, 0]),
            ("unshare", vec![0]),
            ("setns", vec![-1, 0]),
            ("kexec_load", vec![0, 9999, 0, 0]),
            ("kexec_file_load", vec![-1, -1, 0, 0, 0]),
            ("init_module", vec![0, 0, 0]),
            ("finit_module", vec![-1, 0, 0]),
            ("delete_module", vec![0, 0]),
            ("seccomp", vec![99, 0, 0]),
            ("personality", vec![0xffff_ffff]),
            ("kcmp", vec![1, 1, 0, 0, 0]),
            ("reboot", vec![0, 0, 0, 0]),
            ("swapon", vec![0, 0]),
            ("swapoff", vec![0]),
            ("acct", vec![1]),
            ("quotactl", vec![0, 0, 0, 0]),
            ("lookup_dcookie", vec![0, 0, 0]),
            ("clock_settime", vec![0, 0]),
            ("settimeofday", vec![0, 0]),
            ("adjtimex", vec![0]),
            ("syslog", vec![3, 0, 0]),
        ];
        if cfg!(target_arch = "x86_64") {
            calls.push(("iopl", vec![0]));
            calls.push(("ioperm", vec![0, 0, 0]));
        }
        calls
    }

    fn nr_of(name: &str) -> i64 {
        table()
            .find(|(n, _, _)| *n == name)
            .map(|(_, nr, _)| *nr)
            .unwrap_or_else(|| panic!("{name} is not in the table"))
    }

    /// Runs `program` under `filter` (`no_new_privs`, then the filter, in `pre_exec`), the
    /// host answering its refusals; returns its output and the refusals once settled.
    fn run(
        filter: Filter,
        program: &str,
        args: &[&str],
        dir: Option<&Path>,
    ) -> (Output, Option<Refusals>) {
        let crate::channel::Channel { host, child } =
            crate::channel::Channel::new().expect("a channel");
        let child_end = child.as_raw_fd();
        let filter = Arc::new(filter);
        let mut command = Command::new(program);
        // Without HOME, Python's start asks the user database, whose lookups try Unix sockets
        // (nscd, systemd's userdb) that the filter refuses: counted refusals the tests did not make.
        command
            .env("HOME", std::env::temp_dir())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let in_child = Arc::clone(&filter);
        // SAFETY: the closure makes only system calls on what was prepared before the fork.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                match in_child.install() {
                    Ok(Some(listener)) => {
                        let sent = crate::channel::send(
                            child_end,
                            crate::channel::Kind::Seccomp,
                            [0, 0],
                            &[listener],
                        );
                        libc::close(listener);
                        sent.map_err(std::io::Error::from_raw_os_error)
                    }
                    Ok(None) => Ok(()),
                    Err(errno) => Err(std::io::Error::from_raw_os_error(errno)),
                }
            });
        }
        let spawned = command.spawn().expect("the child starts under the filter");
        drop(child);
        let refusals = crate::channel::receive_all(&host)
            .into_iter()
            .find(|message| message.kind == Some(crate::channel::Kind::Seccomp))
            .and_then(|message| message.fds.into_iter().next())
            .map(Refusals::watch);
        assert_eq!(refusals.is_some(), filter.mode() == Mode::Notify);
        let output = spawned.wait_with_output().expect("the child ends");
        if let Some(refusals) = &refusals {
            assert!(
                refusals.settle(Duration::from_secs(10)),
                "the listener ends with its child"
            );
        }
        (output, refusals)
    }

    fn python(filter: Filter, script: &str) -> (String, Option<Refusals>) {
        let (output, refusals) = run(
            filter,
            crate::netns::testkit::python(),
            &["-c", script],
            None,
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "python3 failed: {stderr}");
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            refusals,
        )
    }

    const CTYPES: &str = "import ctypes\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        libc.syscall.restype = ctypes.c_long\n\
        def call(nr, *args):\n    \
            ctypes.set_errno(0)\n    \
            r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])\n    \
            return r, ctypes.get_errno()\n";

    /// name → errno, from lines `name result errno`.
    fn errnos(stdout: &str) -> BTreeMap<String, (i64, i32)> {
        stdout
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let name = words.next()?.to_string();
                let result = words.next()?.parse().ok()?;
                let errno = words.next()?.parse().ok()?;
                Some((name, (result, errno)))
            })
            .collect()
    }

    fn never_allowed_script() -> String {
        let mut script = CTYPES.to_string();
        for (name, args) in never_allowed() {
            let args: Vec<String> = args.iter().map(i64::to_string).collect();
            script.push_str(&format!(
                "r, e = call({}, {})\nprint('{name}', r, e)\n",
                nr_of(name),
                args.join(", ")
            ));
        }
        // clone with a namespace flag (a child that got through would exit at once).
        script.push_str(&format!(
            "r, e = call({}, {} | 17, 0, 0, 0, 0)\n\
             import os\n\
             if r == 0: os._exit(0)\n\
             print('clone(CLONE_NEWUSER)', r, e)\n",
            libc::SYS_clone,
            libc::CLONE_NEWUSER
        ));
        // clone3 falls back: ENOSYS.
        script.push_str(&format!(
            "r, e = call({}, 0, 0)\nprint('clone3', r, e)\n",
            libc::SYS_clone3
        ));
        // TIOCSTI is refused; an ordinary ioctl on a pipe is not.
        script.push_str(&format!(
            "import array, fcntl, termios\n\
             r, e = call({ioctl}, 1, {sti}, 0)\nprint('ioctl(TIOCSTI)', r, e)\n\
             rd, wr = os.pipe(); os.write(wr, b'abc')\n\
             n = array.array('i', [0]); fcntl.ioctl(rd, termios.FIONREAD, n)\n\
             print('ioctl(FIONREAD)', n[0], 0)\n",
            ioctl = libc::SYS_ioctl,
            sti = libc::TIOCSTI
        ));
        script
    }

    fn assert_never_allowed(stdout: &str) {
        let seen = errnos(stdout);
        for (name, _) in never_allowed() {
            assert_eq!(seen.get(name), Some(&(-1, libc::EPERM)), "{name}: {stdout}");
        }
        assert_eq!(
            seen.get("clone(CLONE_NEWUSER)"),
            Some(&(-1, libc::EPERM)),
            "{stdout}"
        );
        assert_eq!(seen.get("clone3"), Some(&(-1, libc::ENOSYS)), "{stdout}");
        assert_eq!(
            seen.get("ioctl(TIOCSTI)"),
            Some(&(-1, libc::EPERM)),
            "{stdout}"
        );
        assert_eq!(seen.get("ioctl(FIONREAD)"), Some(&(3, 0)), "{stdout}");
    }

    #[test]
    fn every_never_allowed_call_is_refused_with_eperm_and_counted() {
        let (stdout, refusals) = python(
            Filter::build(false, Mode::Notify).unwrap(),
            &never_allowed_script(),
        );
        assert_never_allowed(&stdout);
        let refusals = refusals.expect("a listener");
        let counts: BTreeMap<String, u64> = refusals.counts().into_iter().collect();
        for (name, _) in never_allowed() {
            assert_eq!(
                counts.get(name),
                Some(&1),
                "{name} counted once: {counts:?}"
            );
        }
        assert!(counts.get("clone").is_some_and(|c| *c >= 1), "{counts:?}");
        assert!(counts.get("ioctl").is_some_and(|c| *c >= 1), "{counts:?}");
        assert_eq!(
            counts.get("clone3"),
            None,
            "clone3's ENOSYS is no refusal: {counts:?}"
        );
        assert_eq!(refusals.total(), counts.values().sum::<u64>());
    }

    #[test]
    fn without_notifications_the_kernel_answers_the_same_errnos() {
        let (stdout, refusals) = python(
            Filter::build(false, Mode::Errno).unwrap(),
            &never_allowed_script(),
        );
        assert!(refusals.is_none());
        assert_never_allowed(&stdout);
    }

    fn socket_script() -> String {
        "import ctypes, socket\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         for name, fam, typ in [('unix', 1, 1), ('netlink', 16, 3), ('packet', 17, 3), ('vsock', 40, 1), ('alg', 38, 5), ('inet', 2, 1), ('inet_udp', 2, 2)]:\n    \
             ctypes.set_errno(0)\n    \
             fd = libc.socket(fam, typ, 0)\n    \
             print(name, 0 if fd >= 0 else -1, ctypes.get_errno())\n\
         server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n\
         server.bind(('127.0.0.1', 0)); server.listen(1)\n\
         client = socket.create_connection(server.getsockname())\n\
         peer, _ = server.accept(); client.sendall(b'ping')\n\
         print('tcp', 0 if peer.recv(4) == b'ping' else -1, 0)\n\
         a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(('127.0.0.1', 0))\n\
         b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); b.sendto(b'pong', a.getsockname())\n\
         print('udp', 0 if a.recv(4) == b'pong' else -1, 0)\n\
         l, r = socket.socketpair(); l.send(b'x')\n\
         print('socketpair', 0 if r.recv(1) == b'x' else -1, 0)\n"
            .to_string()
    }

    #[test]
    fn socket_families_are_refused_with_eacces_and_inet_works() {
        for mode in [Mode::Notify, Mode::Errno] {
            let (stdout, refusals) = python(Filter::build(false, mode).unwrap(), &socket_script());
            let seen = errnos(&stdout);
            for refused in ["unix", "netlink", "packet", "vsock", "alg"] {
                assert_eq!(
                    seen.get(refused),
                    Some(&(-1, libc::EACCES)),
                    "{mode:?} {refused}: {stdout}"
                );
            }
            for works in ["inet", "inet_udp", "tcp", "udp", "socketpair"] {
                assert_eq!(seen.get(works), Some(&(0, 0)), "{mode:?} {works}: {stdout}");
            }
            if let Some(refusals) = refusals {
                let counts: BTreeMap<String, u64> = refusals.counts().into_iter().collect();
                for name in [
                    "socket(AF_UNIX)",
                    "socket(AF_NETLINK)",
                    "socket(AF_PACKET)",
                    "socket(AF_VSOCK)",
                    "socket(AF_ALG)",
                ] {
                    assert_eq!(counts.get(name), Some(&1), "{name}: {counts:?}");
                }
            }
        }
    }

    #[test]
    fn unix_sockets_work_when_granted() {
        for mode in [Mode::Notify, Mode::Errno] {
            let script = socket_script().replace(
                "print('socketpair'",
                "import os, tempfile\n\
                 path = os.path.join(tempfile.mkdtemp(), 's')\n\
                 srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)\n\
                 cl = socket.socket(socket.AF_UNIX); cl.connect(path); cl.sendall(b'u')\n\
                 print('unix_stream', 0 if srv.accept()[0].recv(1) == b'u' else -1, 0)\n\
                 print('socketpair'",
            );
            let (stdout, _) = python(Filter::build(true, mode).unwrap(), &script);
            let seen = errnos(&stdout);
            assert_eq!(seen.get("unix"), Some(&(0, 0)), "{mode:?}: {stdout}");
            assert_eq!(seen.get("unix_stream"), Some(&(0, 0)), "{mode:?}: {stdout}");
            for refused in ["netlink", "packet", "vsock"] {
                assert_eq!(
                    seen.get(refused),
                    Some(&(-1, libc::EACCES)),
                    "{mode:?} {refused}: {stdout}"
                );
            }
        }
    }

    #[test]
    fn refusals_are_counted_by_name() {
        let nr = nr_of("io_uring_setup");
        let script =
            format!("{CTYPES}for _ in range(3):\n    print('io_uring_setup', *call({nr}, 1, 0))\n");
        let (stdout, refusals) = python(Filter::build(false, Mode::Notify).unwrap(), &script);
        assert_eq!(
            stdout
                .matches(&format!("io_uring_setup -1 {}", libc::EPERM))
                .count(),
            3,
            "{stdout}"
        );
        let refusals = refusals.unwrap();
        assert_eq!(refusals.counts(), vec![("io_uring_setup".to_string(), 3)]);
        assert_eq!(refusals.total(), 3);
    }

    #[test]
    fn a_child_spamming_refusals_is_counted_in_bounded_memory() {
        let io_uring = nr_of("io_uring_setup");
        // 100,000 refusals of one call, then 500 distinct numbers no kernel has.
        let script = format!(
            "{CTYPES}bad = 0\n\
             for _ in range(100000):\n    \
                 r, e = call({io_uring}, 1, 0)\n    \
                 bad += (r, e) != (-1, {eperm})\n\
             for nr in range(5000, 5500):\n    \
                 r, e = call(nr)\n    \
                 bad += (r, e) != (-1, {eperm})\n\
             print('bad', bad, 0)\n",
            eperm = libc::EPERM
        );
        let started = Instant::now();
        let (stdout, refusals) = python(Filter::build(false, Mode::Notify).unwrap(), &script);
        let took = started.elapsed();
        assert_eq!(errnos(&stdout).get("bad"), Some(&(0, 0)), "{stdout}");
        let refusals = refusals.unwrap();
        assert_eq!(refusals.total(), 100_500);
        let counts: BTreeMap<String, u64> = refusals.counts().into_iter().collect();
        assert_eq!(counts.get("io_uring_setup"), Some(&100_000));
        assert_eq!(
            counts.len(),
            MAX_NAMES + 1,
            "bounded: {} names",
            counts.len()
        );
        assert_eq!(counts.get("syscall_5000"), Some(&1));
        assert_eq!(counts.get(OTHER), Some(&(500 - (MAX_NAMES as u64 - 1))));
        eprintln!("100,500 refusals answered by the host in {took:?}");
    }

    #[test]
    fn ordinary_programs_work_under_the_filter() {
        let cases: Vec<(&str, Vec<&str>, &str)> = vec![
            (
                "sh",
                vec![
                    "-c",
                    "set -e; echo 'b a c' | tr ' ' '\\n' | sort | head -n 2 | tr -d '\\n'; \
                     mkdir -p d/e && touch d/e/f && mv d/e/f d/g && ln -s g d/h && cat d/h; \
                     chmod 600 d/g; cp d/g d/i; rm -r d; ls / >/dev/null; date +%s >/dev/null; \
                     wc -c </etc/hostname >/dev/null; env | grep -q PATH; sleep 0.01; echo ' done'",
                ],
                "ab done",
            ),
            (
                "bash",
                vec![
                    "-c",
                    "x=$(echo sub | (read v; echo $v)); coproc cat; echo hi >&${COPROC[1]}; read -u ${COPROC[0]} y; echo $x $y",
                ],
                "sub hi",
            ),
            (
                crate::netns::testkit::python(),
                vec![
                    "-c",
                    "import threading, subprocess, tempfile, os, json, hashlib, asyncio, concurrent.futures as cf\n\
                     out = []\n\
                     ts = [threading.Thread(target=lambda i=i: out.append(i)) for i in range(8)]\n\
                     [t.start() for t in ts]; [t.join() for t in ts]\n\
                     with cf.ProcessPoolExecutor(2) as pool: squares = list(pool.map(abs, [-1, -2]))\n\
                     p = subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True, check=True)\n\
                     with tempfile.NamedTemporaryFile('w', delete=False) as f: f.write('x')\n\
                     os.unlink(f.name)\n\
                     async def main(): await asyncio.sleep(0.01); return 1\n\
                     print(len(out), squares, p.stdout.strip(), asyncio.run(main()), hashlib.sha256(b'').hexdigest()[:4])",
                ],
                "8 [1, 2] sub 1 e3b0",
            ),
            (
                "perl",
                vec![
                    "-e",
                    "my $p = fork(); if ($p == 0) { exit 3 } waitpid($p, 0); print $? >> 8",
                ],
                "3",
            ),
            ("git", vec!["--version"], "git version"),
            (
                "sh",
                vec![
                    "-c",
                    "set -e; git init -q r && cd r && echo x > f && git add f && \
                     git -c user.name=t -c user.email=t@t commit -qm m && git log --format=%s",
                ],
                "m",
            ),
        ];
        let mut cases = cases;
        match Command::new("sh").args(["-c", "command -v node"]).output() {
            Ok(found) if found.status.success() => cases.push((
                "node",
                vec![
                    "-e",
                    "const cp = require('child_process'); const fs = require('fs'); const os = require('os');\
                     const w = new (require('worker_threads').Worker)('1', { eval: true });\
                     w.on('exit', () => { fs.writeFileSync('n', 'ok');\
                     const s = require('net').createServer(c => c.end('hi')).listen(0, '127.0.0.1', () => {\
                     require('net').connect(s.address().port, '127.0.0.1').on('data', d => {\
                     console.log(fs.readFileSync('n', 'utf8'), cp.execSync('echo sub').toString().trim(), String(d)); s.close(); }); }); });",
                ],
                "ok sub hi",
            )),
            _ => eprintln!("node is not on PATH: its case is skipped"),
        }
        for (program, args, expected) in cases {
            for mode in [Mode::Notify, Mode::Errno] {
                let dir = tempfile::tempdir().unwrap();
                let (output, refusals) = run(
                    Filter::build(false, mode).unwrap(),
                    program,
                    &args,
                    Some(dir.path()),
                );
                let stdout = String::from_utf8_lossy(&output.stdout);
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    output.status.success(),
                    "{program} {mode:?}: {stdout} {stderr}"
                );
                assert!(
                    stdout.contains(expected),
                    "{program} {mode:?}: {stdout} {stderr}"
                );
                if let Some(refusals) = refusals {
                    eprintln!("{program}: refusals {:?}", refusals.counts());
                }
            }
        }
    }

    /// A Rust program on a multi-threaded tokio runtime (as an agent CLI such as Codex is):
    /// run by `a_tokio_program_works_under_the_filter` in a child under the filter.
    #[test]
    #[ignore = "run in a child by a_tokio_program_works_under_the_filter"]
    fn tokio_program_body() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        let said = runtime.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let server = tokio::spawn(async move {
                let (mut stream, _) = listener.accept().await.unwrap();
                stream.write_all(b"hello").await.unwrap();
            });
            let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
            let mut said = String::new();
            client.read_to_string(&mut said).await.unwrap();
            server.await.unwrap();
            let child = tokio::process::Command::new("sh")
                .args(["-c", "echo child"])
                .output()
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            tokio::fs::write("tokio-file", &said).await.unwrap();
            let back = tokio::fs::read_to_string("tokio-file").await.unwrap();
            format!("{back} {}", String::from_utf8_lossy(&child.stdout).trim())
        });
        println!("TOKIO: {said}");
    }

    #[test]
    fn a_tokio_program_works_under_the_filter() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::env::current_exe().unwrap();
        let (output, refusals) = run(
            Filter::build(false, Mode::Notify).unwrap(),
            me.to_str().unwrap(),
            &[
                "--ignored",
                "--exact",
                "seccomp::tests::tokio_program_body",
                "--nocapture",
                "--test-threads",
                "1",
            ],
            Some(dir.path()),
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stdout} {stderr}");
        assert!(stdout.contains("TOKIO: hello child"), "{stdout} {stderr}");
        eprintln!("tokio: refusals {:?}", refusals.unwrap().counts());
    }

    #[test]
    fn the_listener_ends_when_the_child_is_gone() {
        let (output, refusals) = run(
            Filter::build(false, Mode::Notify).unwrap(),
            "true",
            &[],
            None,
        );
        assert!(output.status.success());
        // `run` waited for the settle; a second wait returns at once.
        assert!(refusals.unwrap().settle(Duration::ZERO));
    }

    #[test]
    fn the_host_probe_matches_the_kernel() {
        let actions =
            std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
        assert_eq!(seccomp_available(), actions.contains("errno"));
        assert_eq!(seccomp_refusals_counted(), actions.contains("user_notif"));
        let filter = Filter::new(false).unwrap();
        assert_eq!(filter.mode() == Mode::Notify, seccomp_refusals_counted());
        let shared = Filter::shared(true).unwrap();
        assert!(Arc::ptr_eq(&shared, &Filter::shared(true).unwrap()));
        assert!(!Arc::ptr_eq(&shared, &Filter::shared(false).unwrap()));
        // The shared one is the one `new` compiles: with AF_UNIX allowed.
        assert_eq!(shared.main.len(), Filter::new(true).unwrap().main.len());
        assert_ne!(shared.main.len(), filter.main.len());
    }

    #[test]
    fn the_rewrite_touches_only_the_marker_returns() {
        for unix in [false, true] {
            for mode in [Mode::Notify, Mode::Errno] {
                let marked = compile(
                    main_rules(unix, mode).unwrap(),
                    SeccompAction::Trace(MARKER),
                    SeccompAction::Allow,
                )
                .unwrap();
                let filter = Filter::build(unix, mode).unwrap();
                assert_eq!(marked.len(), filter.main.len());
                let refusal = match mode {
                    Mode::Notify => libc::SECCOMP_RET_USER_NOTIF,
                    Mode::Errno => libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                };
                let mut rewritten = 0;
                for (before, after) in marked.iter().zip(&filter.main) {
                    assert_eq!(
                        (before.code, before.jt, before.jf),
                        (after.code, after.jt, after.jf)
                    );
                    if before.code == BPF_RET_K && before.k == SECCOMP_RET_TRACE | MARKER {
                        assert_eq!(after.k, refusal);
                        rewritten += 1;
                    } else {
                        assert_eq!(before.k, after.k);
                    }
                }
                // seccompiler ends every syscall's block with the mismatch return (reached
                // when its rules fail), and the program with one more: all of them, only them.
                let blocks = main_rules(unix, mode).unwrap().len();
                assert_eq!(rewritten, blocks + 1, "{mode:?}");
                assert!(
                    filter
                        .main
                        .iter()
                        .all(|i| !(i.code == BPF_RET_K && i.k & 0xffff_0000 == SECCOMP_RET_TRACE))
                );
                if mode == Mode::Errno {
                    // Exactly what seccompiler makes with EPERM as the mismatch action.
                    let direct = compile(
                        main_rules(unix, mode).unwrap(),
                        SeccompAction::Errno(libc::EPERM as u32),
                        SeccompAction::Allow,
                    )
                    .unwrap();
                    assert!(direct.iter().zip(&filter.main).all(|(a, b)| (
                        a.code, a.jt, a.jf, a.k
                    ) == (
                        b.code, b.jt, b.jf, b.k
                    )));
                }
            }
        }
    }

    #[test]
    fn the_table_pins_what_is_never_allowed_and_what_the_guardian_needs() {
        let mut names = std::collections::HashSet::new();
        let mut numbers = std::collections::HashSet::new();
        for (name, nr, _) in table() {
            assert!(names.insert(*name), "{name} twice");
            assert!(numbers.insert(*nr), "{name}: number {nr} twice");
        }
        let never = [
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "bpf",
            "userfaultfd",
            "perf_event_open",
            "process_vm_readv",
            "process_vm_writev",
            "open_by_handle_at",
            "name_to_handle_at",
            "keyctl",
            "add_key",
            "request_key",
            "ptrace",
            "mount",
            "umount2",
            "pivot_root",
            "chroot",
            "move_mount",
            "open_tree",
            "fsopen",
            "fsmount",
            "fsconfig",
            "unshare",
            "setns",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "seccomp",
            "personality",
            "kcmp",
            "reboot",
            "swapon",
            "swapoff",
            "acct",
            "quotactl",
            "lookup_dcookie",
            "clock_settime",
            "settimeofday",
            "adjtimex",
            "syslog",
        ];
        for name in never.iter().chain(if cfg!(target_arch = "x86_64") {
            &["iopl", "ioperm"][..]
        } else {
            &[][..]
        }) {
            let nr = nr_of(name);
            for mode in [Mode::Notify, Mode::Errno] {
                assert!(
                    !main_rules(true, mode).unwrap().contains_key(&nr),
                    "{name} allowed"
                );
            }
        }
        let guardian = [
            "wait4",
            "ppoll",
            "kill",
            "rt_sigaction",
            "rt_sigprocmask",
            "close",
            "close_range",
            "setpgid",
            "getpid",
            "exit_group",
            "exit",
            "prctl",
            "landlock_create_ruleset",
            "landlock_add_rule",
            "landlock_restrict_self",
            "execve",
            "sendmsg",
        ];
        for name in guardian {
            let chain = main_rules(false, Mode::Notify)
                .unwrap()
                .remove(&nr_of(name));
            assert!(
                chain.is_some_and(|c| c.is_empty()),
                "{name} allowed by name"
            );
        }
        assert_eq!(syscall_name(nr_of("bpf")), "bpf");
        assert_eq!(syscall_name(100_000), "syscall_100000");
    }

    #[test]
    fn judge_names_socket_families_and_unknown_calls() {
        let mut data: libc::seccomp_data = unsafe { std::mem::zeroed() };
        data.nr = libc::SYS_socket as i32;
        data.args[0] = 0xffff_ffff_0000_0000 | libc::AF_NETLINK as u64;
        assert_eq!(
            judge(&data),
            (Cow::Borrowed("socket(AF_NETLINK)"), libc::EACCES)
        );
        data.args[0] = 99;
        assert_eq!(
            judge(&data),
            (Cow::Owned("socket(99)".to_string()), libc::EACCES)
        );
        data.nr = libc::SYS_ptrace as i32;
        assert_eq!(judge(&data), (Cow::Borrowed("ptrace"), libc::EPERM));
        data.nr = 0x4000_0000;
        assert_eq!(
            judge(&data),
            (Cow::Owned("syscall_1073741824".to_string()), libc::EPERM)
        );
    }
}
