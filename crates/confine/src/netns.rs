//! The network of a native child: a network namespace of its own, whose only way out is the
//! egress proxy inside `mur` ([`crate::egress`]).
//!
//! What it promises:
//!
//! - **[`enter`] puts the calling process in a fresh user and network namespace** that holds
//!   nothing but a loopback interface, up. Its user namespace maps the caller's own uid and gid
//!   to themselves (one id each, `setgroups` denied), so files keep their owners and `mur` is
//!   not root there unless it was root already.
//! - **Nothing leaves but through listeners `mur` holds.** Before returning, `enter` binds inside
//!   the namespace a TCP listener on `127.0.0.1:<proxy port>` (the HTTP proxy) and one on
//!   `127.0.0.1:P` for each forwarded port `P` (a loopback destination the manifest allows, such
//!   as a local gateway). It returns their descriptors; the caller hands them to `mur` before
//!   `exec`, and `mur` accepts on them from the host. Any other destination fails the way a
//!   disconnected machine fails: a non-loopback address with `ENETUNREACH`, an unbound loopback
//!   port with `ECONNREFUSED`; UDP (DNS included) reaches nothing.
//! - **`enter` is async-signal-safe**: it runs between `fork` and `exec` and makes only system
//!   calls on what [`NetnsPlan::new`] prepared in the parent (no allocation, no lock). A failure
//!   names its step ([`step_name`]) and the `errno`.
//! - **The host is probed once** ([`netns_available`]): a forked child tries the whole of
//!   `enter`, and the answer (or the step that failed, with a hint) is kept for the process.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use libc::c_int;

/// Forwarded ports a plan may carry.
pub(crate) const MAX_FORWARDED: usize = 15;
/// Listeners [`enter`] may return: the proxy's and one per forwarded port.
pub(crate) const MAX_LISTENERS: usize = MAX_FORWARDED + 1;
/// The proxy's port in the namespace [`netns_available`] probes.
const PROBE_PROXY_PORT: u16 = 3128;

/// The steps of [`enter`], as its error names them.
pub(crate) const STEP_PLAN: u8 = 1;
pub(crate) const STEP_UNSHARE: u8 = 2;
pub(crate) const STEP_DUMPABLE: u8 = 3;
pub(crate) const STEP_SETGROUPS: u8 = 4;
pub(crate) const STEP_UID_MAP: u8 = 5;
pub(crate) const STEP_GID_MAP: u8 = 6;
pub(crate) const STEP_LOOPBACK: u8 = 7;
pub(crate) const STEP_PROXY_LISTENER: u8 = 8;
pub(crate) const STEP_FORWARD_LISTENER: u8 = 9;

/// What step `step` of [`enter`] does, in words.
pub(crate) fn step_name(step: u8) -> &'static str {
    match step {
        STEP_PLAN => "checking the plan (more forwarded ports than a child may have)",
        STEP_UNSHARE => "creating a user and network namespace (unshare)",
        STEP_DUMPABLE => "making the process dumpable to write its id maps (prctl)",
        STEP_SETGROUPS => "denying setgroups (/proc/self/setgroups)",
        STEP_UID_MAP => "mapping the user id (/proc/self/uid_map)",
        STEP_GID_MAP => "mapping the group id (/proc/self/gid_map)",
        STEP_LOOPBACK => "bringing the loopback interface up",
        STEP_PROXY_LISTENER => "listening on the proxy's port in the namespace",
        STEP_FORWARD_LISTENER => "listening on a forwarded port in the namespace",
        _ => "an unknown step",
    }
}

/// Everything [`enter`] needs, prepared in the parent.
#[derive(Debug, Clone)]
pub(crate) struct NetnsPlan {
    proxy_port: u16,
    forwarded: [u16; MAX_FORWARDED],
    forwarded_count: usize,
    /// More distinct forwarded ports were asked for than [`MAX_FORWARDED`].
    too_many: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    setgroups_path: CString,
    uid_map_path: CString,
    gid_map_path: CString,
}

impl NetnsPlan {
    /// A plan for a child whose proxy listens on `127.0.0.1:proxy_port` in its namespace and
    /// which reaches `127.0.0.1:P` for each of `forwarded_ports` (duplicates count once). With
    /// more than [`MAX_FORWARDED`] distinct ports, [`enter`] fails at [`STEP_PLAN`]; a forwarded
    /// port equal to the proxy's fails at [`STEP_FORWARD_LISTENER`] (`EADDRINUSE`): choose a
    /// proxy port none of them takes.
    pub(crate) fn new(proxy_port: u16, forwarded_ports: &[u16]) -> NetnsPlan {
        let mut forwarded = [0u16; MAX_FORWARDED];
        let mut forwarded_count = 0;
        let mut too_many = false;
        for &port in forwarded_ports {
            if forwarded[..forwarded_count].contains(&port) {
                continue;
            }
            if forwarded_count == MAX_FORWARDED {
                too_many = true;
                break;
            }
            forwarded[forwarded_count] = port;
            forwarded_count += 1;
        }
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let path = |text: &str| CString::new(text).expect("a fixed path has no NUL");
        NetnsPlan {
            proxy_port,
            forwarded,
            forwarded_count,
            too_many,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            setgroups_path: path("/proc/self/setgroups"),
            uid_map_path: path("/proc/self/uid_map"),
            gid_map_path: path("/proc/self/gid_map"),
        }
    }

    /// The forwarded ports, in the order of their listeners in [`Listeners::fds`].
    pub(crate) fn forwarded_ports(&self) -> &[u16] {
        &self.forwarded[..self.forwarded_count]
    }
}

/// The listeners [`enter`] bound in the namespace: raw descriptors, close-on-exec, listening;
/// the proxy's first, then one per forwarded port in the order of [`NetnsPlan::forwarded_ports`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listeners {
    fds: [c_int; MAX_LISTENERS],
    count: usize,
}

impl Listeners {
    /// All of them: the proxy's first, then the forwarded ports'.
    pub(crate) fn fds(&self) -> &[c_int] {
        &self.fds[..self.count]
    }
}

/// The calling thread's `errno`.
fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

/// Moves the calling process into a fresh user and network namespace (with `extra_flags` also
/// given to `unshare`, e.g. `CLONE_NEWPID | CLONE_NEWNS`), maps its ids, brings `lo` up and binds
/// the plan's listeners there. On failure: the step ([`step_name`]) and its `errno`; the
/// listeners bound so far are closed.
///
/// It must run before anything that forbids `unshare` or writing `/proc/self` (seccomp,
/// Landlock), in a single-threaded process (a child between `fork` and `exec`).
///
/// # Safety
/// Called in a child between `fork` and `exec` (or any single-threaded process it is fine to
/// move): it makes only async-signal-safe system calls on `plan`.
pub(crate) unsafe fn enter(plan: &NetnsPlan, extra_flags: c_int) -> Result<Listeners, (u8, i32)> {
    if plan.too_many {
        return Err((STEP_PLAN, libc::E2BIG));
    }
    // SAFETY: plain system calls on memory `plan` owns and on this function's locals.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | extra_flags) != 0 {
            return Err((STEP_UNSHARE, errno()));
        }
        // A process that is not dumpable cannot write its own maps: dumpable for the writes,
        // as it was after.
        let dumpable = libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0);
        if dumpable != 1 && libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 {
            return Err((STEP_DUMPABLE, errno()));
        }
        let written = write_file(&plan.setgroups_path, b"deny")
            .map_err(|e| (STEP_SETGROUPS, e))
            .and_then(|()| {
                write_file(&plan.uid_map_path, &plan.uid_map).map_err(|e| (STEP_UID_MAP, e))
            })
            .and_then(|()| {
                write_file(&plan.gid_map_path, &plan.gid_map).map_err(|e| (STEP_GID_MAP, e))
            });
        if dumpable != 1 {
            // 2 (root-only dumps) cannot be set again: not dumpable is the nearer.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
        written?;
        loopback_up().map_err(|e| (STEP_LOOPBACK, e))?;
        let mut listeners = Listeners {
            fds: [-1; MAX_LISTENERS],
            count: 0,
        };
        let ports = std::iter::once((STEP_PROXY_LISTENER, plan.proxy_port)).chain(
            plan.forwarded_ports()
                .iter()
                .map(|&port| (STEP_FORWARD_LISTENER, port)),
        );
        for (step, port) in ports {
            match listen_loopback(port) {
                Ok(fd) => {
                    listeners.fds[listeners.count] = fd;
                    listeners.count += 1;
                }
                Err(e) => {
                    for &fd in listeners.fds() {
                        libc::close(fd);
                    }
                    return Err((step, e));
                }
            }
        }
        Ok(listeners)
    }
}

/// Writes `bytes` to `path` in one `write`, as `/proc/self/*_map` wants.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn write_file(path: &CStr, bytes: &[u8]) -> Result<(), i32> {
    // SAFETY: `path` is NUL-terminated; `bytes` is valid for its length.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = errno();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(if written < 0 { error } else { libc::EIO });
        }
        Ok(())
    }
}

/// Brings `lo` up in the current network namespace.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn loopback_up() -> Result<(), i32> {
    // SAFETY: `request` is a zeroed ifreq naming `lo`, valid for both ioctls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let mut result = Ok(());
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) != 0 {
            result = Err(errno());
        } else {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) != 0 {
                result = Err(errno());
            }
        }
        libc::close(fd);
        result
    }
}

/// A TCP listener on `127.0.0.1:port`, close-on-exec.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn listen_loopback(port: u16) -> Result<c_int, i32> {
    // SAFETY: `address` is a valid sockaddr_in for bind.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let address = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        if libc::bind(
            fd,
            (&address as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
            || libc::listen(fd, libc::SOMAXCONN) != 0
        {
            let error = errno();
            libc::close(fd);
            return Err(error);
        }
        Ok(fd)
    }
}

/// Whether this host can give a child its network namespace: `Ok`, or which step fails, why,
/// and what would make it work. Probed once (a forked child tries the whole of [`enter`]) and
/// kept.
pub fn netns_available() -> Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let plan = NetnsPlan::new(PROBE_PROXY_PORT, &[PROBE_PROXY_PORT + 1]);
            probe(&plan).map_err(|failure| match failure {
                Probe::Failed(step, errno) => describe_failure(step, errno),
                Probe::Unknown(reason) => {
                    format!("the network namespace probe could not run: {reason}")
                }
            })
        })
        .clone()
}

/// Why [`probe`] did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    /// [`enter`] failed at this step with this errno.
    Failed(u8, i32),
    /// The probe itself could not run or answer.
    Unknown(String),
}

/// The failure of `step` with `errno`, in words, with what would fix it.
pub(crate) fn describe_failure(step: u8, errno: i32) -> String {
    let error = std::io::Error::from_raw_os_error(errno);
    let hint = match (step, errno) {
        (STEP_UNSHARE, libc::EPERM | libc::EACCES) => {
            "user namespaces are refused to this user: allow them (`sysctl -w \
             kernel.unprivileged_userns_clone=1` where it exists; on Ubuntu \
             `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile \
             for mur), or run with a weaker containment class knowingly"
        }
        (STEP_UNSHARE, libc::ENOSPC) => {
            "the limit of user namespaces is reached or zero: raise `user.max_user_namespaces`"
        }
        (STEP_UNSHARE, libc::EINVAL) => {
            "the kernel lacks user or network namespaces (CONFIG_USER_NS, CONFIG_NET_NS)"
        }
        _ => {
            "this host's kernel or its policy (seccomp of a container, a security module) refuses it"
        }
    };
    format!(
        "a network namespace cannot be made here: {} failed: {error}; {hint}",
        step_name(step)
    )
}

/// Runs [`enter`] with `plan` in a forked child and reports how it went.
pub(crate) fn probe(plan: &NetnsPlan) -> Result<(), Probe> {
    probe_as(plan, false, 0).map(|_| ())
}

/// [`probe`] with `extra_flags` for `unshare`, the child made not dumpable first when
/// `undumpable`; on success, whether the child was dumpable after `enter`.
fn probe_as(plan: &NetnsPlan, undumpable: bool, extra_flags: c_int) -> Result<bool, Probe> {
    // SAFETY: the trial makes only async-signal-safe calls (prctl, enter, the report).
    let report = unsafe {
        crate::probe::in_child::<6>(|report| {
            if undumpable {
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            }
            report(match enter(plan, extra_flags) {
                Ok(_) => {
                    let dumpable = libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0);
                    [0, 0, 0, 0, 0, dumpable as u8]
                }
                Err((step, errno)) => {
                    let e = errno.to_ne_bytes();
                    [step, e[0], e[1], e[2], e[3], 0]
                }
            });
        })
    }
    .map_err(Probe::Unknown)?;
    match report[0] {
        0 => Ok(report[5] == 1),
        step => Err(Probe::Failed(
            step,
            i32::from_ne_bytes([report[1], report[2], report[3], report[4]]),
        )),
    }
}

/// For tests: children started in a namespace, their listeners handed back over a socket.
#[cfg(test)]
pub(crate) mod testkit {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};

    use super::*;

    /// The Python the tests' children run (the system's, not a per-user shim).
    pub(crate) fn python() -> &'static str {
        if std::path::Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        }
    }

    #[repr(C, align(8))]
    struct Control([u8; 256]);

    /// Sends `fds` over `socket` with one byte of data.
    ///
    /// # Safety
    /// Async-signal-safe: system calls on stack memory only.
    unsafe fn send_fds(socket: c_int, fds: &[c_int]) -> Result<(), i32> {
        // SAFETY: every pointer is to a local that outlives sendmsg; the control buffer has room
        // for MAX_LISTENERS descriptors.
        unsafe {
            let mut byte = [1u8];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut control = Control([0; 256]);
            let data_len = std::mem::size_of_val(fds) as libc::c_uint;
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.0.as_mut_ptr().cast();
            message.msg_controllen = libc::CMSG_SPACE(data_len) as usize;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(data_len) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                data_len as usize,
            );
            if libc::sendmsg(socket, &message, 0) < 0 {
                return Err(errno());
            }
            Ok(())
        }
    }

    /// Receives the descriptors one [`send_fds`] sent.
    fn receive_fds(socket: &UnixStream) -> std::io::Result<Vec<OwnedFd>> {
        // SAFETY: as in send_fds; the descriptors received are new and ours.
        unsafe {
            let mut byte = [0u8];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut control = Control([0; 256]);
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.0.as_mut_ptr().cast();
            message.msg_controllen = control.0.len();
            if libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut fds = Vec::new();
            let mut header = libc::CMSG_FIRSTHDR(&message);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_RIGHTS
                {
                    let data = libc::CMSG_DATA(header);
                    let count = ((*header).cmsg_len - libc::CMSG_LEN(0) as usize)
                        / std::mem::size_of::<c_int>();
                    for i in 0..count {
                        let fd = std::ptr::read_unaligned(data.cast::<c_int>().add(i));
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                header = libc::CMSG_NXTHDR(&message, header);
            }
            Ok(fds)
        }
    }

    /// `command` started in a namespace made by [`enter`] with `plan`, and the listeners it
    /// bound there: the proxy's, then one per forwarded port, as std listeners of the host.
    pub(crate) fn spawn_in_netns(
        plan: &NetnsPlan,
        mut command: Command,
    ) -> std::io::Result<(Child, std::net::TcpListener, Vec<std::net::TcpListener>)> {
        let (ours, theirs) = UnixStream::pair()?;
        let socket = theirs.as_raw_fd();
        let plan_in_child = plan.clone();
        // SAFETY: the closure makes only async-signal-safe calls on what it owns.
        unsafe {
            command.pre_exec(move || {
                let listeners = enter(&plan_in_child, 0).map_err(|(step, errno)| {
                    // The step travels in the error's code: step * 1000 + errno.
                    std::io::Error::from_raw_os_error(i32::from(step) * 1000 + errno)
                })?;
                send_fds(socket, listeners.fds()).map_err(std::io::Error::from_raw_os_error)?;
                Ok(())
            });
        }
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = command.spawn()?;
        drop(theirs);
        let mut fds = receive_fds(&ours)?
            .into_iter()
            .map(std::net::TcpListener::from);
        let proxy = fds
            .next()
            .ok_or_else(|| std::io::Error::other("no proxy listener came back"))?;
        Ok((child, proxy, fds.collect()))
    }

    /// `python3 -c script` in a namespace, with `env` added.
    pub(crate) fn python_in_netns(
        plan: &NetnsPlan,
        script: &str,
        env: &[(String, String)],
    ) -> (Child, std::net::TcpListener, Vec<std::net::TcpListener>) {
        let mut command = Command::new(python());
        command
            .args(["-c", script])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .envs(env.iter().cloned());
        spawn_in_netns(plan, command).expect("the child starts in its namespace")
    }

    /// A child's stdout, after it ended with success (its stderr shown if not).
    pub(crate) fn output_of(child: Child) -> String {
        let output = child.wait_with_output().expect("the child is waited for");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "the child failed ({}): stdout {stdout}\nstderr {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use super::testkit::*;
    use super::*;

    /// The first `nameserver` of /etc/resolv.conf.
    fn resolver() -> String {
        std::fs::read_to_string("/etc/resolv.conf")
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.trim().strip_prefix("nameserver").map(str::trim))
            .map(str::to_string)
            .unwrap_or_else(|| "127.0.0.53".to_string())
    }

    #[test]
    fn this_host_gives_a_child_its_network_namespace() {
        assert_eq!(netns_available(), Ok(()));
    }

    #[test]
    fn inside_the_namespace_nothing_but_its_listeners_is_reachable() {
        // A real listener of the host on another loopback address: the child must not reach it.
        let host = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        let port = host.local_addr().unwrap().port();
        // The host itself reaches it: the listener is real.
        drop(std::net::TcpStream::connect(("127.0.0.2", port)).unwrap());
        let (accepted, _) = host.accept().unwrap();
        drop(accepted);
        host.set_nonblocking(true).unwrap();

        let resolver = resolver();
        let script = format!(
            r#"
import errno, socket, struct
def tcp(host, port):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect((host, port)); return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
print("tcp 10.1.2.3:80", tcp("10.1.2.3", 80))
print("tcp 127.0.0.2:{port}", tcp("127.0.0.2", {port}))
print("tcp 127.0.0.1:3128", tcp("127.0.0.1", 3128))
query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00\x00\x01\x00\x01"
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2)
try:
    u.sendto(query, ("{resolver}", 53))
    data, _ = u.recvfrom(512)
    print("dns answered", len(data))
except socket.timeout:
    print("dns none timeout")
except OSError as e:
    print("dns none", errno.errorcode.get(e.errno, str(e)))
u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u2.sendto(b"secret", ("10.1.2.3", 53)); print("udp sent")
except OSError as e:
    print("udp", errno.errorcode.get(e.errno, str(e)))
"#
        );
        let plan = NetnsPlan::new(3128, &[]);
        let (child, _proxy, _) = python_in_netns(&plan, &script, &[]);
        let out = output_of(child);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "tcp 10.1.2.3:80 ENETUNREACH", "{out}");
        assert_eq!(
            lines[1],
            format!("tcp 127.0.0.2:{port} ECONNREFUSED"),
            "{out}"
        );
        // Its own proxy listener is there (nothing accepts yet, the backlog takes it).
        assert_eq!(lines[2], "tcp 127.0.0.1:3128 connected", "{out}");
        assert!(lines[3].starts_with("dns none"), "{out}");
        if !resolver.starts_with("127.") {
            assert_eq!(lines[3], "dns none ENETUNREACH", "{out}");
        }
        assert_eq!(lines[4], "udp ENETUNREACH", "{out}");
        // The host's listener saw nothing of the child.
        assert_eq!(
            host.accept().unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn the_listeners_come_back_to_the_host_and_carry_the_childs_connections() {
        let plan = NetnsPlan::new(3128, &[8080, 9000, 8080]);
        assert_eq!(plan.forwarded_ports(), &[8080, 9000]);
        let script = r#"
import socket, os
for port, word in ((3128, b"proxy"), (8080, b"gateway"), (9000, b"relay")):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(word); s.shutdown(socket.SHUT_WR)
    print(s.recv(100).decode())
print(os.getuid(), os.getgid())
print(open("/proc/self/uid_map").read().split())
"#;
        let (child, proxy, forwarded) = python_in_netns(&plan, script, &[]);
        assert_eq!(forwarded.len(), 2);
        for listener in std::iter::once(&proxy).chain(&forwarded) {
            let (mut stream, _) = listener.accept().unwrap();
            let mut word = String::new();
            stream.read_to_string(&mut word).unwrap();
            let port = listener.local_addr().unwrap().port();
            stream
                .write_all(format!("{word} on {port}").as_bytes())
                .unwrap();
        }
        let out = output_of(child);
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        assert_eq!(
            out,
            format!(
                "proxy on 3128\ngateway on 8080\nrelay on 9000\n{uid} {gid}\n['{uid}', '{uid}', '1']\n"
            )
        );
    }

    #[test]
    fn a_plan_that_cannot_be_entered_names_its_step() {
        let too_many: Vec<u16> = (9000..9000 + MAX_FORWARDED as u16 + 1).collect();
        assert_eq!(
            probe(&NetnsPlan::new(3128, &too_many)),
            Err(Probe::Failed(STEP_PLAN, libc::E2BIG))
        );
        assert_eq!(
            probe(&NetnsPlan::new(3128, &[3128])),
            Err(Probe::Failed(STEP_FORWARD_LISTENER, libc::EADDRINUSE))
        );
        assert_eq!(
            probe(&NetnsPlan::new(3128, &too_many[..MAX_FORWARDED])),
            Ok(())
        );
        let message = describe_failure(STEP_UNSHARE, libc::EPERM);
        assert!(
            message.contains("unshare") && message.contains("user namespaces"),
            "{message}"
        );
    }

    #[test]
    fn a_process_that_is_not_dumpable_enters_and_stays_not_dumpable() {
        let plan = NetnsPlan::new(3128, &[8080]);
        assert_eq!(probe_as(&plan, true, 0), Ok(false));
        assert_eq!(probe_as(&plan, false, 0), Ok(true));
    }

    #[test]
    fn pid_and_mount_namespaces_may_come_with_it() {
        let plan = NetnsPlan::new(3128, &[8080]);
        let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        assert_eq!(probe_as(&plan, true, flags), Ok(false));
    }

    /// Not a test of behaviour: how long `enter` adds to starting a child (`--ignored`).
    #[test]
    #[ignore]
    fn measure_what_enter_adds_to_a_spawn() {
        let runs = 100;
        let time = |with: bool| {
            let started = Instant::now();
            for _ in 0..runs {
                let mut command = std::process::Command::new("/bin/true");
                if with {
                    let plan = NetnsPlan::new(3128, &[8080]);
                    let (mut child, _, _) = spawn_in_netns(&plan, command).unwrap();
                    assert!(child.wait().unwrap().success());
                } else {
                    command
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped());
                    assert!(command.status().unwrap().success());
                }
            }
            started.elapsed() / runs
        };
        let plain = time(false);
        let entered = time(true);
        let mean = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "spawn of /bin/true: {:.2} ms plain, {:.2} ms with enter (+{:.2} ms)",
            mean(plain),
            mean(entered),
            mean(entered) - mean(plain)
        );
    }
}
