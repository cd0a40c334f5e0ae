//! The Landlock ruleset of a native child: built in the parent, applied in the child as the
//! last step before `exec` (so nothing it does later can widen it).
//!
//! Under `advisory`:
//! - the writable directories (the workdir): every right;
//! - declared read-only paths and the allowed binaries' directories: read and execute;
//! - read and execute under `/usr`, `/bin`, `/sbin`, `/lib*`;
//! - a short list of `/etc` entries programs read to start ([`ETC_FILES`]), the devices
//!   `/dev/null`, `/dev/zero`, `/dev/urandom`, `/dev/random`;
//! - TCP: `connect` only to the given ports, no `bind`.
//!
//! Under `scoped` ([`Exact`]), the same idea made exact:
//! - the writable directories: every right but `Execute`, `MakeChar`, `MakeBlock` and
//!   `MakeSock` (`workdir_exec` gives `Execute` back, which only `advisory` allows);
//! - `Execute` (and read) only on the files of the allowed binaries' closure (the binaries,
//!   their ELF interpreter, their libraries, the interpreters their `#!` lines name);
//! - read-only (no execute): the interpreter runtimes, the declared read-only paths, the
//!   `/etc` entries of [`ETC_FILES`];
//! - devices: `/dev/null` read and write, `/dev/zero` and `/dev/urandom` read;
//! - TCP: `connect` only to the given ports (the egress proxy's and forwarded ones in the
//!   child's own network namespace), no `bind`;
//! - where the kernel has it (ABI 6), signals and abstract Unix sockets only within the
//!   child's own domain.
//!
//! Nothing else: not `/usr` at large, not `/etc` at large (`/etc/shadow`), not `/proc`, not
//! `/tmp`, not the user's home. A path that does not exist grants nothing. Under `scoped` the
//! kernel must enforce Landlock ABI 3 or newer in full, or the ruleset is not built.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

/// Directories whose files programs need to start (under `advisory`: read and execute).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries programs read to start; nothing secret.
pub const ETC_FILES: &[&str] = &[
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

/// Devices a program may read and write under `advisory`.
const ADVISORY_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

fn failed(error: &dyn std::fmt::Display) -> String {
    format!("building the Landlock ruleset: {error}")
}

/// Grants `access` beneath `path` (only the file rights when it is a file); a path that does
/// not exist grants nothing.
fn allow(
    ruleset: &mut RulesetCreated,
    abi: ABI,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<(), String> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(());
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    if access.is_empty() {
        return Ok(());
    }
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| failed(&e))?;
    Ok(())
}

/// The `advisory` ruleset. `None` when the kernel has no Landlock.
pub(crate) fn advisory(
    writable: &[&Path],
    read_only: &[PathBuf],
    binary_dirs: &[PathBuf],
    tcp_ports: &[u16],
) -> Result<Option<OwnedFd>, String> {
    let abi = ABI::V7;
    let mut created = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
        .and_then(|r| r.create())
        .map_err(|e| failed(&e))?;
    for dir in writable {
        allow(&mut created, abi, dir, AccessFs::from_all(abi))?;
    }
    for path in read_only.iter().chain(binary_dirs) {
        allow(&mut created, abi, path, AccessFs::from_read(abi))?;
    }
    for dir in SYSTEM_DIRS {
        allow(&mut created, abi, Path::new(dir), AccessFs::from_read(abi))?;
    }
    for file in ETC_FILES {
        allow(
            &mut created,
            abi,
            Path::new(file),
            AccessFs::ReadFile | AccessFs::ReadDir,
        )?;
    }
    for device in ADVISORY_DEVICES {
        allow(
            &mut created,
            abi,
            Path::new(device),
            AccessFs::ReadFile | AccessFs::WriteFile,
        )?;
    }
    for port in tcp_ports {
        (&mut created)
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(|e| failed(&e))?;
    }
    Ok(created.into())
}

/// What a `scoped` child may touch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exact<'a> {
    /// Written freely (the workdir), executed only with `workdir_exec`.
    pub writable: Vec<&'a Path>,
    pub workdir_exec: bool,
    /// Files that may be executed (and read): the allowed binaries' closure.
    pub executables: &'a [PathBuf],
    /// Read-only: interpreter runtimes and declared read-only paths.
    pub readable: Vec<&'a Path>,
    pub tcp_ports: &'a [u16],
}

/// The `scoped` ruleset: [`Exact`] on a kernel that enforces ABI 3 or newer in full, with
/// the newer ABIs' rights (TCP, device ioctl, scoping) where the kernel has them.
pub(crate) fn scoped(exact: &Exact<'_>, kernel_abi: i32) -> Result<OwnedFd, String> {
    let abi = ABI::from(kernel_abi.min(7));
    if (abi as i32) < crate::class::SCOPED_LANDLOCK_ABI {
        return Err(format!(
            "the kernel's Landlock ABI {kernel_abi} cannot express `scoped` (3 or newer is needed)"
        ));
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| failed(&e))?;
    if abi as i32 >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| failed(&e))?;
    }
    if abi as i32 >= 6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| failed(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| failed(&e))?;
    let mut workdir = AccessFs::from_all(abi)
        & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::MakeSock | AccessFs::Execute);
    if exact.workdir_exec {
        workdir |= AccessFs::Execute;
    }
    for dir in &exact.writable {
        allow(&mut created, abi, dir, workdir)?;
    }
    for file in exact.executables {
        allow(
            &mut created,
            abi,
            file,
            AccessFs::ReadFile | AccessFs::Execute,
        )?;
    }
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    for path in &exact.readable {
        allow(&mut created, abi, path, read)?;
    }
    for file in ETC_FILES {
        allow(&mut created, abi, Path::new(file), read)?;
    }
    allow(
        &mut created,
        abi,
        Path::new("/dev/null"),
        AccessFs::ReadFile | AccessFs::WriteFile,
    )?;
    for device in ["/dev/zero", "/dev/urandom"] {
        allow(
            &mut created,
            abi,
            Path::new(device),
            AccessFs::ReadFile.into(),
        )?;
    }
    if abi as i32 >= 4 {
        for port in exact.tcp_ports {
            (&mut created)
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| failed(&e))?;
        }
    }
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| "the kernel did not enforce the Landlock ruleset".to_string())
}
