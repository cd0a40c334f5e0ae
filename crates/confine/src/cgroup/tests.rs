//! The call groups, tried with real children: each test forks a real program into a group (a
//! `pre_exec` that calls [`CallGroup::join`]) and checks what the kernel did.

use super::*;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};

use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn limits(max_processes: u64, memory_bytes: u64, cpu_percent: Option<u32>) -> GroupLimits {
    GroupLimits {
        max_processes,
        memory_bytes,
        cpu_percent,
    }
}

/// The group for a test, or `None` (with a line saying why) where this host gives no cgroups
/// to this user. As root, a host without them fails the test: root always has them on Linux.
fn group(limits: &GroupLimits) -> Option<CallGroup> {
    match cgroup_support() {
        CgroupSupport::None { why } => {
            // SAFETY: geteuid has no preconditions.
            assert_ne!(unsafe { libc::geteuid() }, 0, "root gets no cgroups: {why}");
            eprintln!("skipped: {why}");
            None
        }
        _ => Some(CallGroup::create(limits).expect("a call group")),
    }
}

/// A command whose child joins `group` before it execs.
fn command_in(group: &CallGroup, program: &str, args: &[&str]) -> Command {
    let (fds, n) = group.join_fds();
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    // SAFETY: `join` is async-signal-safe; the descriptors outlive the spawn (the group does).
    unsafe {
        command.pre_exec(move || CallGroup::join(&fds[..n]).map_err(io::Error::from_raw_os_error));
    }
    command
}

/// Dead: gone from /proc, or a zombie waiting for its new parent to reap it.
fn is_dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => proc_state(&stat) == Some('Z') || proc_state(&stat) == Some('X'),
    }
}

fn proc_state(stat: &str) -> Option<char> {
    stat.rsplit_once(") ")?.1.chars().next()
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the busy child");
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // After the state (field 3), utime and stime are fields 14 and 15.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn forks_past_the_process_limit_fail_with_eagain() {
    let Some(group) = group(&limits(8, 256 * MIB, None)) else {
        return;
    };
    let script = "import os, time\n\
                  n = 0\n\
                  try:\n\
                  \x20   while True:\n\
                  \x20       if os.fork() == 0:\n\
                  \x20           os.closerange(0, 3); time.sleep(60); os._exit(0)\n\
                  \x20       n += 1\n\
                  except OSError as e:\n\
                  \x20   print(n, e.errno, flush=True)\n";
    let out = command_in(&group, crate::netns::testkit::python(), &["-c", script])
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // The interpreter is the first of 8: 7 forks succeed, the 8th is refused with EAGAIN.
    assert_eq!(
        text.trim(),
        format!("7 {}", libc::EAGAIN),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(group.events().pids_limit_hits >= 1, "{:?}", group.events());
    // The parent is gone; its 7 sleeping children are still held by the group.
    assert_eq!(group.pids().len(), 7);
    let dirs: Vec<PathBuf> = group.dirs().iter().map(|d| d.to_path_buf()).collect();
    let children = group.pids();
    drop(group);
    for pid in children {
        assert!(is_dead(pid), "child {pid} outlived the group");
    }
    for dir in dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

/// A fork bomb in which every process forks again as soon as it can, for ever: held at the
/// limit while it runs, and all of it dies with the group (racing the kill), through the freezer
/// when the host has one, and by signals alone when it does not.
fn fork_bomb_is_held_and_killed(freeze: bool) {
    let max = 24;
    let Some(group) = group(&limits(max, 256 * MIB, None)) else {
        return;
    };
    let script = "import os\nos.closerange(0, 3)\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let mut bomb = command_in(&group, crate::netns::testkit::python(), &["-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs");
    let mut most = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        most = most.max(group.pids().len() as u64);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(most <= max, "{most} live processes past a limit of {max}");
    assert!(
        most >= max / 2,
        "the bomb never got going ({most} processes)"
    );
    assert!(group.events().pids_limit_hits >= 1, "{:?}", group.events());
    let listed = group.pids();
    let killing = Instant::now();
    group.freeze_and_kill(freeze).expect("the bomb dies");
    eprintln!(
        "fork bomb ({} processes, freezer: {freeze}) killed in {:?}",
        listed.len(),
        killing.elapsed()
    );
    assert!(group.pids().is_empty());
    assert_eq!(bomb.wait().unwrap().signal(), Some(libc::SIGKILL));
    for pid in listed {
        assert!(is_dead(pid), "bomb process {pid} survived");
    }
}

#[test]
fn a_fork_bomb_is_held_at_the_process_limit_and_dies_with_its_group() {
    fork_bomb_is_held_and_killed(true);
}

#[test]
fn a_fork_bomb_dies_by_signals_alone_without_a_freezer() {
    fork_bomb_is_held_and_killed(false);
}

#[test]
fn a_memory_hog_is_oom_killed_at_the_memory_limit() {
    let memory = 128 * MIB;
    let Some(group) = group(&limits(16, memory, None)) else {
        return;
    };
    let out = command_in(
        &group,
        crate::netns::testkit::python(),
        &["-c", "x = b'a' * (1 << 30)\nprint('survived', len(x))"],
    )
    .output()
    .expect("python runs");
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{:?}", out.status);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("survived"));
    let events = group.events();
    assert!(events.oom_kills >= 1, "{events:?}");
    let peak = events.memory_peak_bytes.expect("the kernel keeps the peak");
    assert!(peak <= memory, "peak {peak} past the limit {memory}");
    assert!(
        peak >= memory / 2,
        "peak {peak}: the hog never reached the limit"
    );
}

/// A Python child that starts a daemon (fork, setsid, fork) and exits; prints nothing, writes
/// the daemon's pid into `pidfile`.
fn start_daemon(group: &CallGroup, pidfile: &Path) -> i32 {
    let script = format!(
        "import os, sys, time\n\
         if os.fork() == 0:\n\
         \x20   os.setsid()\n\
         \x20   if os.fork() == 0:\n\
         \x20       fd = os.open('{p}.tmp', os.O_WRONLY | os.O_CREAT)\n\
         \x20       os.write(fd, str(os.getpid()).encode()); os.close(fd)\n\
         \x20       os.rename('{p}.tmp', '{p}')\n\
         \x20       time.sleep(120)\n\
         \x20   os._exit(0)\n\
         os.wait()\n\
         while not os.path.exists('{p}'):\n\
         \x20   time.sleep(0.01)\n",
        p = pidfile.display()
    );
    let status = command_in(group, crate::netns::testkit::python(), &["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("python runs");
    assert!(status.success(), "{status:?}");
    let pid: i32 = std::fs::read_to_string(pidfile).unwrap().parse().unwrap();
    // It left our session (and so the process group a caller would kill).
    // SAFETY: getsid has no memory preconditions.
    let (session, ours) = unsafe { (libc::getsid(pid), libc::getsid(0)) };
    assert!(session > 0 && session != ours, "the daemon did not setsid");
    assert!(!is_dead(pid));
    assert_eq!(
        group.pids(),
        vec![pid],
        "the daemon is what is left in the group"
    );
    pid
}

#[test]
fn a_setsid_daemon_dies_with_kill_all() {
    let Some(group) = group(&limits(16, 256 * MIB, None)) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pid = start_daemon(&group, &tmp.path().join("pid"));
    group.try_kill_all().expect("the group empties");
    assert!(is_dead(pid), "the daemon {pid} outlived kill_all");
    assert!(group.pids().is_empty());
}

#[test]
fn dropping_a_group_kills_its_daemon_and_removes_its_directories() {
    let Some(group) = group(&limits(16, 256 * MIB, Some(50))) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pid = start_daemon(&group, &tmp.path().join("pid"));
    let dirs: Vec<PathBuf> = group.dirs().iter().map(|d| d.to_path_buf()).collect();
    assert!(dirs.iter().all(|d| d.is_dir()));
    drop(group);
    assert!(is_dead(pid), "the daemon {pid} outlived its group");
    for dir in dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn kill_all_signals_no_process_outside_the_group() {
    let Some(group) = group(&limits(16, 256 * MIB, None)) else {
        return;
    };
    let mut outside = Command::new("sleep").arg("60").spawn().unwrap();
    let mut inside = command_in(&group, "sleep", &["60"]).spawn().unwrap();
    wait_for("the sleeper to join", Duration::from_secs(5), || {
        group.pids() == vec![inside.id() as i32]
    });
    group.try_kill_all().unwrap();
    assert_eq!(inside.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(
        outside.try_wait().unwrap(),
        None,
        "a process outside the group was killed"
    );
    outside.kill().unwrap();
    outside.wait().unwrap();
}

#[test]
fn a_cpu_limit_of_20_percent_holds_a_busy_loop() {
    let Some(group) = group(&limits(16, 256 * MIB, Some(20))) else {
        return;
    };
    let mut busy = command_in(&group, "/bin/sh", &["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (t0, c0) = (Instant::now(), cpu_seconds(busy.id()));
    std::thread::sleep(Duration::from_secs(2));
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds(busy.id()) - c0);
    let events = group.events();
    busy.kill().unwrap();
    busy.wait().unwrap();
    let share = cpu / wall;
    eprintln!(
        "busy loop under a 20% limit used {:.1}% of one CPU over {wall:.2} s",
        share * 100.0
    );
    // A loaded machine gives it less, never more: the bound is the limit plus tick slack.
    assert!(
        share <= 0.25,
        "{:.1}% of one CPU under a 20% limit",
        share * 100.0
    );
    assert!(events.cpu_throttled_periods >= 1, "{events:?}");
}

#[test]
fn a_limit_that_cannot_hold_is_refused_and_leaves_nothing() {
    let support = cgroup_support();
    for bad in [
        limits(0, 256 * MIB, None),
        limits(8, 1000, None),
        limits(8, 256 * MIB, Some(0)),
    ] {
        let err = CallGroup::create_on(support, &bad).expect_err("refused");
        assert!(!err.is_empty());
    }
    let none = CgroupSupport::None {
        why: "no cgroups here".into(),
    };
    let err = CallGroup::create_on(&none, &limits(8, 256 * MIB, None)).expect_err("refused");
    assert_eq!(err, "no cgroups here");
}

/// Times `rounds` calls: create, spawn `/bin/true` joined (and, to compare, one not joined),
/// destroy; `pause` between calls.
fn time_calls(rounds: u32, pause: Duration) -> [Duration; 4] {
    let mut total = [Duration::ZERO; 4];
    for _ in 0..rounds {
        std::thread::sleep(pause);
        let t = Instant::now();
        let group = CallGroup::create(&limits(16, 256 * MIB, Some(100))).unwrap();
        total[0] += t.elapsed();
        let t = Instant::now();
        assert!(
            command_in(&group, "/bin/true", &[])
                .status()
                .unwrap()
                .success()
        );
        total[1] += t.elapsed();
        let t = Instant::now();
        assert!(Command::new("/bin/true").status().unwrap().success());
        total[2] += t.elapsed();
        let t = Instant::now();
        drop(group);
        total[3] += t.elapsed();
    }
    total.map(|d| d / rounds)
}

#[test]
fn create_join_destroy_is_measured() {
    let Some(first) = group(&limits(16, 256 * MIB, Some(100))) else {
        return;
    };
    drop(first);
    for (what, pause) in [
        ("back to back", Duration::ZERO),
        ("100 ms apart", Duration::from_millis(100)),
    ] {
        let [create, joined, plain, destroy] = time_calls(10, pause);
        eprintln!(
            "calls {what}: create {create:?}, spawn+join+wait {joined:?} (plain spawn+wait \
             {plain:?}), destroy {destroy:?}"
        );
        // Loose: making and removing a group is not a noticeable pause in a call.
        assert!(create + destroy < Duration::from_millis(250), "{what}");
    }
}

#[test]
fn the_probe_finds_what_this_host_has() {
    let support = cgroup_support();
    eprintln!("{:?}", support.describe());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    // As root on Linux some layout is always usable; a cgroup2 mount without the controllers
    // (a hybrid host) must not be taken for one.
    let mounts = parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let v2_with_controllers = mounts.iter().filter(|m| m.fstype == "cgroup2").any(|m| {
        std::fs::read_to_string(m.mount_point.join("cgroup.controllers"))
            .map(|t| {
                NEEDED
                    .iter()
                    .all(|c| parse_controllers(&t).iter().any(|h| h == c))
            })
            .unwrap_or(false)
    });
    match support {
        CgroupSupport::V2 { base } => {
            assert!(v2_with_controllers);
            assert!(base.is_dir());
        }
        CgroupSupport::V1 {
            pids, memory, cpu, ..
        } => {
            assert!(
                !v2_with_controllers,
                "v1 taken on a host whose v2 has the controllers"
            );
            // The v2 probe said why not, naming the missing controllers.
            let own = parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
            let why = probe_v2(&mounts, &own).expect_err("no usable v2");
            assert!(why.contains("no memory, pids, cpu controller"), "{why}");
            assert!(pids.join("cgroup.procs").exists());
            assert!(memory.join("cgroup.procs").exists());
            assert!(cpu.join("cgroup.procs").exists());
        }
        CgroupSupport::None { why } => panic!("root gets no cgroups: {why}"),
    }
}

/// The v2 kill paths on this host's cgroup2 mount, when it is writable and has `cgroup.kill`
/// (a hybrid host's empty v2 mount is enough: kill and freeze are core files, no controller
/// is needed). On a v2 host the tests above run on v2 anyway.
fn bare_v2_group() -> Option<CallGroup> {
    let lines = parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").ok()?);
    let line = lines.iter().find(|l| l.hierarchy == "0")?;
    let mounts = parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").ok()?);
    let own = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup2")
        .find_map(|m| resolve(m, &line.path))?;
    let dir = own.join(format!("murmur-test-{}", unique_suffix()));
    if std::fs::create_dir(&dir).is_err() {
        eprintln!("skipped: cannot create a group under {}", own.display());
        return None;
    }
    let procs = open_join(&dir, "cgroup.procs").ok()?;
    let group = CallGroup {
        layout: Layout::V2 { dir: dir.clone() },
        procs: vec![procs],
    };
    if !dir.join("cgroup.kill").exists() {
        eprintln!("skipped: no cgroup.kill under {}", dir.display());
        return None;
    }
    Some(group)
}

#[test]
fn v2_cgroup_kill_ends_a_setsid_daemon() {
    let Some(group) = bare_v2_group() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pid = start_daemon(&group, &tmp.path().join("pid"));
    group.try_kill_all().expect("cgroup.kill empties the group");
    assert!(is_dead(pid), "the daemon {pid} outlived cgroup.kill");
    let dir = group.dirs()[0].to_path_buf();
    drop(group);
    assert!(!dir.exists());
}

#[test]
fn v2_freeze_and_signal_ends_a_setsid_daemon() {
    let Some(group) = bare_v2_group() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pid = start_daemon(&group, &tmp.path().join("pid"));
    assert!(group.freezer().is_some());
    group.freeze_and_kill(true).expect("the group empties");
    assert!(is_dead(pid), "the daemon {pid} outlived freeze and kill");
    // Thawed again: the group is usable (and removable).
    let events = std::fs::read_to_string(group.dirs()[0].join("cgroup.events")).unwrap();
    assert_eq!(keyed_value(&events, "frozen"), Some(0));
}

// ---------------------------------------------------------------------------------------------
// Parsers, on what real hosts print.

/// Ubuntu 22.04 (systemd, pure cgroup v2), a user's terminal under a delegated scope.
const UBUNTU_MOUNTINFO: &str = "\
22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
31 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
const UBUNTU_CGROUP: &str =
    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r5b7e.scope\n";

/// A Docker container with a private cgroup namespace on a v2 host.
const DOCKER_MOUNTINFO: &str = "\
612 544 0:52 / / rw,relatime master:298 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,upperdir=/u,workdir=/w
618 616 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot
";
const DOCKER_CGROUP: &str = "0::/\n";

/// The hybrid layout of this project's CI machine (v1 controllers, an empty v2 mount).
const HYBRID_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/328458cde680a56441c700987f71529c
2:cpuacct:/
1:cpu:/
0::/
";

/// Debian 10 style: cpu and cpuacct co-mounted, the group of a systemd service.
const COMOUNTED_MOUNTINFO: &str = "\
26 25 0:23 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
27 25 0:24 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,pids
";
const COMOUNTED_CGROUP: &str = "\
5:pids:/system.slice/ssh.service
3:cpu,cpuacct:/system.slice/ssh.service
";

#[test]
fn v2_paths_resolve_on_real_layouts() {
    let mounts = parse_mountinfo(UBUNTU_MOUNTINFO);
    assert_eq!(mounts.len(), 4);
    let v2 = mounts.iter().find(|m| m.fstype == "cgroup2").unwrap();
    assert_eq!(v2.mount_point, Path::new("/sys/fs/cgroup"));
    assert_eq!(
        v2.super_options,
        ["rw", "nsdelegate", "memory_recursiveprot"]
    );
    let lines = parse_proc_cgroup(UBUNTU_CGROUP);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].hierarchy, "0");
    assert!(lines[0].controllers.is_empty());
    assert_eq!(
        resolve(v2, &lines[0].path).unwrap(),
        Path::new(
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r5b7e.scope"
        )
    );

    let docker = parse_mountinfo(DOCKER_MOUNTINFO);
    let v2 = docker.iter().find(|m| m.fstype == "cgroup2").unwrap();
    let line = &parse_proc_cgroup(DOCKER_CGROUP)[0];
    assert_eq!(
        resolve(v2, &line.path).unwrap(),
        Path::new("/sys/fs/cgroup")
    );
}

#[test]
fn v1_paths_resolve_per_controller_and_an_empty_v2_mount_is_found_empty() {
    let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
    let lines = parse_proc_cgroup(HYBRID_CGROUP);
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0].controllers, ["name=systemd"]);
    assert_eq!(
        v1_dir(&mounts, &lines, "pids").unwrap(),
        Path::new("/sys/fs/cgroup/pids")
    );
    assert_eq!(
        v1_dir(&mounts, &lines, "memory").unwrap(),
        Path::new("/sys/fs/cgroup/memory/process_api/328458cde680a56441c700987f71529c")
    );
    // `cpu` is its own hierarchy here, not `cpuacct`'s or `cpuset`'s.
    assert_eq!(
        v1_dir(&mounts, &lines, "cpu").unwrap(),
        Path::new("/sys/fs/cgroup/cpu")
    );
    assert!(v1_dir(&mounts, &lines, "blkio").is_err());

    let mounts = parse_mountinfo(COMOUNTED_MOUNTINFO);
    let lines = parse_proc_cgroup(COMOUNTED_CGROUP);
    assert_eq!(lines[1].controllers, ["cpu", "cpuacct"]);
    assert_eq!(
        v1_dir(&mounts, &lines, "cpu").unwrap(),
        Path::new("/sys/fs/cgroup/cpu,cpuacct/system.slice/ssh.service")
    );
    assert!(v1_dir(&mounts, &lines, "memory").is_err());
}

#[test]
fn a_mount_of_a_subtree_resolves_only_the_groups_beneath_it() {
    let mount = &parse_mountinfo(
        "1234 1200 0:30 /system.slice/docker-ab12.scope /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n",
    )[0];
    assert_eq!(mount.root, "/system.slice/docker-ab12.scope");
    assert_eq!(
        resolve(mount, "/system.slice/docker-ab12.scope").unwrap(),
        Path::new("/sys/fs/cgroup")
    );
    assert_eq!(
        resolve(mount, "/system.slice/docker-ab12.scope/init").unwrap(),
        Path::new("/sys/fs/cgroup/init")
    );
    // A sibling whose name starts alike, and a path outside the namespace, are not reachable.
    assert_eq!(resolve(mount, "/system.slice/docker-ab12.scope2"), None);
    assert_eq!(resolve(mount, "/user.slice"), None);
    let root = &parse_mountinfo(DOCKER_MOUNTINFO)[1];
    assert_eq!(resolve(root, "/../../user.slice/session-2.scope"), None);
}

#[test]
fn mount_points_with_escaped_characters_are_decoded() {
    let mount = &parse_mountinfo(
        "50 31 0:40 / /mnt/my\\040cgroups\\011x rw shared:3 master:1 - cgroup2 none rw\n",
    )[0];
    assert_eq!(mount.mount_point, Path::new("/mnt/my cgroups\tx"));
    assert_eq!(mount.fstype, "cgroup2");
    assert_eq!(unescape_octal("a\\13"), "a\\13"); // too short: kept as is
    assert_eq!(unescape_octal("\\777"), "\\777"); // past a byte: kept as is
}

#[test]
fn controllers_and_keyed_files_parse() {
    assert_eq!(
        parse_controllers("cpuset cpu io memory hugetlb pids rdma misc\n").len(),
        8
    );
    assert!(parse_controllers("\n").is_empty());
    let events = "low 0\nhigh 0\nmax 17\noom 2\noom_kill 2\noom_group_kill 0\n";
    assert_eq!(keyed_value(events, "oom_kill"), Some(2));
    assert_eq!(keyed_value(events, "max"), Some(17));
    assert_eq!(keyed_value(events, "oom"), Some(2));
    assert_eq!(keyed_value(events, "missing"), None);
    let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    assert_eq!(keyed_value(oom_control, "oom_kill"), Some(3));
    assert_eq!(keyed_value("max junk\n", "max"), None);
}

#[test]
fn a_host_without_cgroups_is_told_how_to_get_them() {
    let mountinfo = "28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n";
    let CgroupSupport::None { why } = probe_with(mountinfo, UBUNTU_CGROUP) else {
        panic!("cgroups found where none is mounted");
    };
    assert!(why.contains("cgroup v2: not mounted"), "{why}");
    assert!(
        why.contains("no pids controller on a v1 hierarchy"),
        "{why}"
    );
    assert!(
        why.contains("systemd-run --user --scope -p Delegate=yes"),
        "{why}"
    );
    assert_eq!(
        CgroupSupport::None { why: why.clone() }.describe(),
        Err(why)
    );
}

#[test]
fn malformed_lines_are_skipped() {
    assert!(parse_mountinfo("garbage\n1 2 3\n- - -\n").is_empty());
    assert!(parse_proc_cgroup("nonsense\n:x:/a\n1:pids:relative\n").is_empty());
}

proptest! {
    #[test]
    fn the_parsers_never_panic(text in "\\PC*", path in "[/a-z.\\\\0-9 ]{0,40}") {
        let mounts = parse_mountinfo(&text);
        let lines = parse_proc_cgroup(&text);
        let _ = parse_controllers(&text);
        let _ = keyed_value(&text, "max");
        let _ = unescape_octal(&text);
        for mount in &mounts {
            let _ = resolve(mount, &path);
        }
        let _ = v1_dir(&mounts, &lines, "pids");
    }

    #[test]
    fn mountinfo_like_lines_never_panic(
        fields in proptest::collection::vec("[^ \n]{0,12}", 0..14),
        dash in 0usize..14,
    ) {
        let mut fields = fields;
        if dash < fields.len() {
            fields[dash] = "-".into();
        }
        let line = fields.join(" ");
        for mount in parse_mountinfo(&line) {
            let _ = resolve(&mount, "/a/b");
            let _ = resolve(&mount, &mount.root.clone());
        }
    }
}

#[test]
fn groups_a_gone_mur_left_behind_are_swept_and_nothing_else() {
    let support = cgroup_support();
    let parent = match support {
        CgroupSupport::V2 { base } => base.clone(),
        CgroupSupport::V1 { pids, .. } => pids.clone(),
        CgroupSupport::None { why } => {
            eprintln!("skipped: no cgroups here: {why}");
            return;
        }
    };
    let gone = (4_000_000u32..)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .unwrap();
    let make = |name: String, old: bool| {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).unwrap();
        if old {
            let status = std::process::Command::new("touch")
                .args(["-d", "2 hours ago"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        dir
    };
    let stale = make(format!("murmur-{gone}-0-sweep"), true);
    let fresh = make(format!("murmur-{gone}-1-sweep"), false);
    let alive = make(format!("murmur-{}-2-sweep", std::process::id()), true);
    sweep_stale(support);
    assert!(!stale.exists(), "an old group of a gone mur is removed");
    assert!(fresh.exists(), "a group made a moment ago is kept");
    assert!(alive.exists(), "a group of a running mur is kept");
    std::fs::remove_dir(fresh).unwrap();
    std::fs::remove_dir(alive).unwrap();
}
