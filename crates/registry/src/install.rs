//! Installing a capsule's artifacts from a registry, and finding them again at run time.
//!
//! What installing promises:
//!
//! - **Every registry artifact of the manifest** (an `artifacts:` entry without `path:`) is
//!   resolved in the registry at the version the manifest names, its bytes are fetched (from
//!   the user's store `$MURMUR_HOME/artifacts/<sha256>.tar.gz` when they are already there),
//!   verified against the registry's sha256 and against the `murmur.lock` pin when there is
//!   one, and unpacked with the archive guards ([`crate::archive`]) into the project store
//!   `.murmur/artifacts/<name>/<version>/` beside the manifest, with a receipt of every file's
//!   sha256.
//! - **All or nothing.** Every artifact is fetched, verified and unpacked into a staging
//!   directory before anything is put in place; a refusal (tampered bytes, a pin conflict, an
//!   unsafe or oversized archive, a missing version) leaves the project store, the lock and the
//!   user's store as they were.
//! - **The lock.** `murmur.lock` gains or updates one entry per installed artifact (name,
//!   version, runtime, sha256, source) and is written last, atomically. A pin is never moved to
//!   other bytes for the same version (E-REG-005). With `locked`, any change the lock would
//!   need is refused instead (E-REG-009), and nothing is written.
//!
//! - **One artifact mid-session** ([`pull`], for `murmur:artifact-manager/manage`): the same
//!   path for one name and an optional version (else the lock's pin, else the newest); a
//!   version or bytes other than the lock's pin is E-REG-005, before anything is written.
//!
//! - **Only the pinned artifact.** An archive whose own `murmur.yaml` is another artifact than
//!   the one listed (name, version or runtime), or loads a file the archive does not hold, is
//!   refused (E-REG-012) before anything is put in place.
//!
//! What finding promises ([`installed`]): the directory of an installed artifact, only when its
//! receipt names the lock's sha256 and every file it lists still has its recorded sha256; a
//! missing or changed artifact is E-REG-010, naming it. [`pinned_file`] then holds the
//! artifact's manifest to the lock (E-REG-012) and gives the sha256 the file it loads must
//! have.

use std::path::{Path, PathBuf};

use murmur_manifest::Runtime;
use murmur_manifest::artifact::ArtifactManifest;
use murmur_manifest::capsule::CapsuleManifest;
use murmur_manifest::lock::{Lock, LockedArtifact};
use serde::{Deserialize, Serialize};

use crate::archive::{self, ArchiveError, UnpackLimits};
use crate::index::{IndexEntry, Registry, RegistryError, Resolver};
use crate::source::LocalArtifact;
use murmur_manifest::Coded;

/// The project store's directory, beside the manifest.
pub const PROJECT_STORE: &str = ".murmur/artifacts";
/// The receipt written beside an installed artifact's files.
pub const RECEIPT: &str = ".murmur-receipt.json";
/// The largest archive fetched, in bytes.
pub const MAX_ARCHIVE_BYTES: u64 = 64 * 1024 * 1024;

/// Why an install or a lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("artifact `{name}`: {source}")]
    Archive {
        name: String,
        #[source]
        source: ArchiveError,
    },
    /// The lock pins other bytes or another version.
    #[error("{0}")]
    LockConflict(String),
    /// `--locked`, and the lock would change.
    #[error("{0}")]
    Locked(String),
    /// The lock cannot be read.
    #[error("murmur.lock has errors")]
    Lock(Vec<murmur_manifest::Diagnostic>),
    /// An installed artifact is missing or changed.
    #[error("{0}")]
    NotInstalled(String),
    /// An archive's own manifest is not the artifact it is installed as (another name,
    /// version or runtime), or it loads a file the archive does not hold.
    #[error("{0}")]
    NotThePinned(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl InstallError {
    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> InstallError {
        let context = context.into();
        move |source| InstallError::Io { context, source }
    }
}

impl Coded for InstallError {
    fn code(&self) -> &'static str {
        match self {
            InstallError::Registry(error) => error.code(),
            InstallError::Archive { source, .. } => source.code(),
            InstallError::LockConflict(_) => "E-REG-005",
            InstallError::Locked(_) => "E-REG-009",
            InstallError::Lock(_) => "E-REG-008",
            InstallError::NotInstalled(_) => "E-REG-010",
            InstallError::NotThePinned(_) => "E-REG-012",
            InstallError::Io { .. } => "E-REG-001",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    fn hint(&self) -> String {
        match self {
            InstallError::Registry(error) => error.hint(),
            InstallError::Archive { source, .. } => source.hint(),
            InstallError::LockConflict(_) => {
                "if the new bytes are the ones you want, delete the artifact's entry from murmur.lock and install again; otherwise ask the registry's owner why they changed".to_string()
            }
            InstallError::Locked(_) => {
                "run `mur install` without --locked to update murmur.lock, and commit it".to_string()
            }
            InstallError::Lock(_) => "fix murmur.lock, or delete it and run `mur install`".to_string(),
            InstallError::NotInstalled(_) => "run `mur install`".to_string(),
            InstallError::NotThePinned(_) => "the registry serves an archive that is not what it lists: do not use it, and tell the registry's owner".to_string(),
            InstallError::Io { .. } => "check the permissions and free space of the project and of $MURMUR_HOME".to_string(),
        }
    }
}

/// How to install.
pub struct InstallOptions {
    pub registry: Registry,
    /// Refuse any change to `murmur.lock`.
    pub locked: bool,
    /// The user's store of verified archives, by sha256 (`$MURMUR_HOME/artifacts`).
    pub user_store: PathBuf,
    pub limits: UnpackLimits,
}

/// What happened to one artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Installed {
    pub name: String,
    pub version: String,
    pub runtime: String,
    pub sha256: String,
    pub source: String,
    /// Where its files are.
    pub dir: PathBuf,
    /// `fetched` from the registry, `cached` from the user's store, or `unchanged` (already
    /// installed with these bytes).
    pub how: &'static str,
}

/// Where install is, for a person watching.
pub enum Progress<'a> {
    /// Resolved in the registry.
    Resolved { name: &'a str, version: &'a str },
    /// Bytes arriving.
    Fetching {
        name: &'a str,
        done: u64,
        total: Option<u64>,
    },
    /// Verified and unpacked.
    Ready { name: &'a str, how: &'static str },
}

/// The receipt of an installed artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Receipt {
    name: String,
    version: String,
    sha256: String,
    /// Every file with its sha256.
    files: Vec<(String, String)>,
}

/// The project store of the capsule whose manifest is in `capsule_dir`.
pub fn project_store(capsule_dir: &Path) -> PathBuf {
    capsule_dir.join(PROJECT_STORE)
}

fn installed_dir(capsule_dir: &Path, name: &str, version: &str) -> PathBuf {
    project_store(capsule_dir).join(name).join(version)
}

/// The lock file of the capsule whose manifest is in `capsule_dir`.
pub fn lock_path(capsule_dir: &Path) -> PathBuf {
    capsule_dir.join("murmur.lock")
}

/// Reads `murmur.lock` beside the manifest (an empty lock when there is none).
pub fn read_lock(capsule_dir: &Path) -> Result<Lock, InstallError> {
    Lock::load(&lock_path(capsule_dir))
        .map(Option::unwrap_or_default)
        .map_err(InstallError::Lock)
}

/// Whether `entry` is installed from a registry: it has no `path:` and is not an MCP server
/// (which has no artifact, only its `server:`).
fn from_registry(entry: &murmur_manifest::capsule::ArtifactEntry) -> bool {
    entry.path.is_none() && entry.runtime != Runtime::Mcp
}

/// One artifact fetched, verified and unpacked into staging.
struct Staged {
    locked: LockedArtifact,
    bytes: Option<Vec<u8>>,
    staging_dir: Option<PathBuf>,
    receipt: Receipt,
    how: &'static str,
}

/// Installs every registry artifact of `capsule` (manifest in `capsule_dir`).
pub fn install(
    capsule_dir: &Path,
    capsule: &CapsuleManifest,
    options: &InstallOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<Installed>, InstallError> {
    if !capsule.artifacts.iter().any(from_registry) {
        return Ok(Vec::new());
    }
    let resolver = options.registry.resolver()?;
    with_staging(capsule_dir, |staging| {
        install_staged(capsule_dir, capsule, options, progress, &resolver, staging)
    })
}

fn install_staged(
    capsule_dir: &Path,
    capsule: &CapsuleManifest,
    options: &InstallOptions,
    progress: &mut dyn FnMut(Progress<'_>),
    index: &Resolver<'_>,
    staging: &Path,
) -> Result<Vec<Installed>, InstallError> {
    let lock = read_lock(capsule_dir)?;
    let source = options.registry.describe();
    let wanted = capsule
        .artifacts
        .iter()
        .filter(|entry| from_registry(entry));

    let mut staged = Vec::new();
    for entry in wanted {
        let pin = lock.get(&entry.name).cloned();
        let resolved = index.resolve(&entry.name, Some(&entry.version))?;
        progress(Progress::Resolved {
            name: &resolved.name,
            version: &resolved.version,
        });
        if let Some(pin) = &pin {
            if pin.version == resolved.version && pin.sha256 != resolved.sha256 {
                return Err(moved(&options.registry, pin, &resolved));
            }
            if options.locked && pin.version != resolved.version {
                return Err(InstallError::Locked(format!(
                    "`{}` is locked at {}, and the manifest asks for {}",
                    entry.name, pin.version, resolved.version
                )));
            }
        } else if options.locked {
            return Err(InstallError::Locked(format!(
                "`{}` {} is not in murmur.lock",
                entry.name, resolved.version
            )));
        }
        let locked = LockedArtifact {
            name: resolved.name.clone(),
            version: resolved.version.clone(),
            runtime: entry.runtime,
            sha256: resolved.sha256.clone(),
            source: source.clone(),
        };
        staged.push(fetch_and_stage(
            capsule_dir,
            options,
            progress,
            &resolved,
            locked,
            staging,
        )?);
    }

    let mut next = lock.clone();
    for artifact in &staged {
        next.upsert(artifact.locked.clone());
    }
    if options.locked && next != lock {
        return Err(InstallError::Locked(
            "murmur.lock would change (an entry's source or runtime differs)".to_string(),
        ));
    }

    put_in_place(capsule_dir, options, staged, &lock, next)
}

/// The refusal of `resolved` when `murmur.lock` pins other bytes for its version: for an OCI
/// registry, its tag has moved.
fn moved(registry: &Registry, pin: &LockedArtifact, resolved: &IndexEntry) -> InstallError {
    let source = registry.describe();
    InstallError::LockConflict(match registry {
        Registry::Oci(oci) => format!(
            "the tag {} has moved: murmur.lock pins its manifest at sha256:{}, and the registry \
             now gives sha256:{}",
            oci.reference(&pin.name, &pin.version)
                .unwrap_or_else(|_| format!("{source}/{}:{}", pin.name, pin.version)),
            pin.sha256,
            resolved.sha256
        ),
        _ => format!(
            "`{}` {} is pinned in murmur.lock at sha256 {}, but the registry {source} now has {}",
            pin.name, pin.version, pin.sha256, resolved.sha256
        ),
    })
}

/// Fetches (or takes from the user's store) and verifies the bytes of `resolved`, and unpacks
/// them with the archive guards into `staging`; nothing outside `staging` is written. An
/// artifact already installed with these bytes is taken as it is.
fn fetch_and_stage(
    capsule_dir: &Path,
    options: &InstallOptions,
    progress: &mut dyn FnMut(Progress<'_>),
    resolved: &IndexEntry,
    locked: LockedArtifact,
    staging: &Path,
) -> Result<Staged, InstallError> {
    // Already installed with these bytes: nothing to fetch.
    let dir = installed_dir(capsule_dir, &locked.name, &locked.version);
    if let Ok(receipt) = verify_installed(&dir, &locked) {
        progress(Progress::Ready {
            name: &resolved.name,
            how: "unchanged",
        });
        return Ok(Staged {
            locked,
            bytes: None,
            staging_dir: None,
            receipt,
            how: "unchanged",
        });
    }
    let staging_dir = staging.join(&locked.name);
    let (bytes, how, files) = match &options.registry {
        // An OCI artifact is its layers, each verified against its digest as it is written.
        Registry::Oci(oci) => {
            let name = resolved.name.clone();
            let files = oci.stage(
                resolved,
                &staging_dir,
                &options.limits,
                &mut |done, total| {
                    progress(Progress::Fetching {
                        name: &name,
                        done,
                        total,
                    })
                },
            )?;
            (None, "fetched", files)
        }
        _ => {
            let (bytes, how) = fetch_archive(options, progress, resolved)?;
            let unpacked =
                archive::unpack(&bytes, &staging_dir, &options.limits).map_err(|source| {
                    InstallError::Archive {
                        name: locked.name.clone(),
                        source,
                    }
                })?;
            (Some(bytes), how, unpacked.files)
        }
    };
    let receipt = Receipt {
        name: locked.name.clone(),
        version: locked.version.clone(),
        sha256: locked.sha256.clone(),
        files,
    };
    // The archive's own manifest must be the artifact the registry listed, and load only what
    // the archive holds; it is read without the environment, as nothing of it is run yet.
    let opened = LocalArtifact::open(&staging_dir, &|_| None).map_err(|error| {
        let why = match &error {
            crate::source::BuildError::Manifest { loaded, .. } => loaded
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| format!("{}: {}", d.code, d.message))
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_string(),
        };
        InstallError::NotThePinned(format!(
            "artifact `{}` {}: the archive's murmur.yaml does not load ({why})",
            locked.name, locked.version
        ))
    })?;
    pinned_file_of(&opened.manifest, &locked, &receipt.files)
        .map_err(InstallError::NotThePinned)?;
    progress(Progress::Ready {
        name: &resolved.name,
        how,
    });
    Ok(Staged {
        locked,
        bytes,
        staging_dir: Some(staging_dir),
        receipt,
        how,
    })
}

/// The archive of `resolved`, from the user's store when it holds it, else fetched and verified.
fn fetch_archive(
    options: &InstallOptions,
    progress: &mut dyn FnMut(Progress<'_>),
    resolved: &IndexEntry,
) -> Result<(Vec<u8>, &'static str), InstallError> {
    let cached = options
        .user_store
        .join(format!("{}.tar.gz", resolved.sha256));
    let (bytes, how) = match std::fs::read(&cached) {
        Ok(bytes) if archive::sha256_hex(&bytes) == resolved.sha256 => (bytes, "cached"),
        _ => {
            let name = resolved.name.clone();
            let bytes =
                options
                    .registry
                    .fetch(resolved, MAX_ARCHIVE_BYTES, &mut |done, total| {
                        progress(Progress::Fetching {
                            name: &name,
                            done,
                            total,
                        })
                    })?;
            (bytes, "fetched")
        }
    };
    Ok((bytes, how))
}

/// Puts every staged artifact in place, then writes `next` as `murmur.lock` when it differs
/// from `lock` (or there is no lock file yet).
fn put_in_place(
    capsule_dir: &Path,
    options: &InstallOptions,
    staged: Vec<Staged>,
    lock: &Lock,
    next: Lock,
) -> Result<Vec<Installed>, InstallError> {
    // Everything verified: put it in place, the lock last.
    let mut report = Vec::new();
    for artifact in staged {
        let dir = installed_dir(capsule_dir, &artifact.locked.name, &artifact.locked.version);
        if let Some(staging_dir) = &artifact.staging_dir {
            let receipt_text = serde_json::to_vec_pretty(&artifact.receipt)
                .map_err(|e| InstallError::io("the receipt")(std::io::Error::other(e)))?;
            std::fs::write(staging_dir.join(RECEIPT), receipt_text)
                .map_err(InstallError::io("the receipt cannot be written"))?;
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(InstallError::io(format!(
                    "{} cannot be replaced",
                    dir.display()
                )))?;
            }
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(InstallError::io(format!(
                    "{} cannot be made",
                    parent.display()
                )))?;
            }
            std::fs::rename(staging_dir, &dir).map_err(InstallError::io(format!(
                "{} cannot be put in place",
                dir.display()
            )))?;
        }
        if let Some(bytes) = &artifact.bytes {
            cache(&options.user_store, &artifact.locked.sha256, bytes)?;
        }
        report.push(Installed {
            name: artifact.locked.name.clone(),
            version: artifact.locked.version.clone(),
            runtime: artifact.locked.runtime.to_string(),
            sha256: artifact.locked.sha256.clone(),
            source: artifact.locked.source.clone(),
            dir,
            how: artifact.how,
        });
    }
    if next != *lock || !lock_path(capsule_dir).exists() {
        next.write(&lock_path(capsule_dir))
            .map_err(InstallError::io("murmur.lock cannot be written"))?;
    }
    Ok(report)
}

/// Runs `work` with a staging directory inside the project store, made for this run and removed
/// whatever happens; directories the run made are removed again when it fails.
fn with_staging<T>(
    capsule_dir: &Path,
    work: impl FnOnce(&Path) -> Result<T, InstallError>,
) -> Result<T, InstallError> {
    let store = project_store(capsule_dir);
    // Directories this run makes, removed again when it is refused.
    let made: Vec<PathBuf> = [capsule_dir.join(".murmur"), store.clone()]
        .into_iter()
        .filter(|dir| !dir.exists())
        .collect();
    std::fs::create_dir_all(&store).map_err(InstallError::io(format!(
        "the project store {} cannot be made",
        store.display()
    )))?;
    // A staging area of this run only; removed whatever happens.
    let staging = tempfile::Builder::new()
        .prefix(".staging-")
        .tempdir_in(&store)
        .map_err(InstallError::io("a staging directory cannot be made"))?;
    let outcome = work(staging.path());
    drop(staging);
    if outcome.is_err() {
        for dir in made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    outcome
}

/// Pulls ONE artifact into the project store of the capsule in `capsule_dir` (the
/// `murmur:artifact-manager/manage.pull` of a capsule component), by the same path as
/// [`install`]: resolved in the registry (`version`, else the version `murmur.lock` pins, else
/// the newest), verified against the registry's sha256 and the lock's pin, unpacked with the
/// archive guards into staging, put in place, and pinned in `murmur.lock`, written last.
///
/// A version other than the pinned one, or other bytes for the pinned version, is E-REG-005;
/// like every refusal it comes before anything is written.
pub fn pull(
    capsule_dir: &Path,
    name: &str,
    version: Option<&str>,
    options: &InstallOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Installed, InstallError> {
    let index = options.registry.resolver()?;
    let lock = read_lock(capsule_dir)?;
    let source = options.registry.describe();
    let pin = lock.get(name).cloned();
    if let (Some(pin), Some(wanted)) = (&pin, version) {
        let same = pin.version == wanted
            || semver::Version::parse(wanted.trim()).ok()
                == semver::Version::parse(&pin.version).ok();
        if !same {
            return Err(InstallError::LockConflict(format!(
                "`{name}` is pinned in murmur.lock at {}, and {wanted} was asked for",
                pin.version
            )));
        }
    }
    let wanted = version.or(pin.as_ref().map(|pin| pin.version.as_str()));
    let resolved = index.resolve(name, wanted)?;
    progress(Progress::Resolved {
        name: &resolved.name,
        version: &resolved.version,
    });
    if let Some(pin) = &pin
        && pin.version == resolved.version
        && pin.sha256 != resolved.sha256
    {
        return Err(moved(&options.registry, pin, &resolved));
    }
    if options.locked && pin.is_none() {
        return Err(InstallError::Locked(format!(
            "`{name}` {} is not in murmur.lock",
            resolved.version
        )));
    }
    let runtime = Runtime::parse(&resolved.runtime).ok_or_else(|| {
        InstallError::Registry(RegistryError::MalformedIndex {
            location: format!("`{name}` {}", resolved.version),
            detail: format!("runtime `{}` is not an artifact runtime", resolved.runtime),
        })
    })?;
    let locked = LockedArtifact {
        name: resolved.name.clone(),
        version: resolved.version.clone(),
        runtime,
        sha256: resolved.sha256.clone(),
        source,
    };
    let mut installed = with_staging(capsule_dir, |staging| {
        let staged = fetch_and_stage(
            capsule_dir,
            options,
            progress,
            &resolved,
            locked.clone(),
            staging,
        )?;
        let mut next = lock.clone();
        next.upsert(locked.clone());
        if options.locked && next != lock {
            return Err(InstallError::Locked(
                "murmur.lock would change (the entry's source or runtime differs)".to_string(),
            ));
        }
        put_in_place(capsule_dir, options, vec![staged], &lock, next)
    })?;
    Ok(installed.remove(0))
}

/// Keeps verified archive bytes in the user's store, by sha256, written whole or not at all.
fn cache(user_store: &Path, sha256: &str, bytes: &[u8]) -> Result<(), InstallError> {
    let path = user_store.join(format!("{sha256}.tar.gz"));
    if path.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(user_store).map_err(InstallError::io(format!(
        "the user's store {} cannot be made",
        user_store.display()
    )))?;
    let mut temp = tempfile::NamedTempFile::new_in(user_store)
        .map_err(InstallError::io("the user's store cannot be written"))?;
    std::io::Write::write_all(&mut temp, bytes)
        .map_err(InstallError::io("the user's store cannot be written"))?;
    temp.persist(&path)
        .map_err(|e| InstallError::io("the user's store cannot be written")(e.error))?;
    Ok(())
}

/// The receipt in `dir`, when it names `locked`'s bytes and every file it lists is unchanged.
fn verify_installed(dir: &Path, locked: &LockedArtifact) -> Result<Receipt, String> {
    let text = std::fs::read(dir.join(RECEIPT)).map_err(|_| "it is not installed".to_string())?;
    let receipt: Receipt = serde_json::from_slice(&text)
        .map_err(|_| "its install receipt is unreadable".to_string())?;
    if receipt.sha256 != locked.sha256 || receipt.version != locked.version {
        return Err(format!(
            "the installed copy is {} (sha256 {}), not the locked {} (sha256 {})",
            receipt.version, receipt.sha256, locked.version, locked.sha256
        ));
    }
    for (file, sha256) in &receipt.files {
        // A receipt is the installer's, but it lives on disk: its names must still be plain.
        if !Path::new(file)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(format!(
                "its receipt names `{}`, which is not a file inside it",
                file.escape_debug()
            ));
        }
        let bytes =
            std::fs::read(dir.join(file)).map_err(|_| format!("its file `{file}` is missing"))?;
        if archive::sha256_hex(&bytes) != *sha256 {
            return Err(format!(
                "its file `{file}` has changed since it was installed"
            ));
        }
    }
    Ok(receipt)
}

/// The sha256 (as installed) of the one file `manifest` loads, when `manifest` is the artifact
/// `locked` pins (its name, version and runtime) and that file is among `files`, inside the
/// artifact's directory; else what is wrong.
fn pinned_file_of(
    manifest: &ArtifactManifest,
    locked: &LockedArtifact,
    files: &[(String, String)],
) -> Result<String, String> {
    let who = format!("artifact `{}` {}", locked.name, locked.version);
    if manifest.name != locked.name
        || manifest.version != locked.version
        || manifest.runtime != locked.runtime
    {
        return Err(format!(
            "{who}: its own murmur.yaml says it is `{}` {} (runtime: {}), not `{}` {} (runtime: {})",
            manifest.name,
            manifest.version,
            manifest.runtime,
            locked.name,
            locked.version,
            locked.runtime
        ));
    }
    let loaded = if manifest.runtime == Runtime::Skill {
        manifest.skill_path(Path::new(""))
    } else {
        manifest.component_path(Path::new(""))
    };
    // Plain names only (the manifest refused `..` and absolute paths); `./` is dropped.
    let relative: Vec<String> = loaded
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let relative = relative.join("/");
    files
        .iter()
        .find(|(file, _)| *file == relative)
        .map(|(_, sha256)| sha256.clone())
        .ok_or_else(|| {
            format!(
                "{who}: its murmur.yaml loads `{}`, which the archive does not hold",
                loaded.display().to_string().escape_debug()
            )
        })
}

/// For the installed artifact in `dir` (as [`installed`] found it) whose manifest is
/// `manifest`: the sha256 its file to load had when it was installed. E-REG-012 when the
/// manifest is not the artifact the lock pins under `name`, or loads a file the archive did not
/// hold; E-REG-010 when the artifact is no longer as installed. A caller loading the file
/// compares what it read with this, so a file swapped after the check is still caught.
pub fn pinned_file(
    dir: &Path,
    lock: &Lock,
    name: &str,
    manifest: &ArtifactManifest,
) -> Result<String, InstallError> {
    let Some(locked) = lock.get(name) else {
        return Err(InstallError::NotInstalled(format!(
            "artifact `{name}` has no `path:` and is not in murmur.lock"
        )));
    };
    let receipt = verify_installed(dir, locked).map_err(|why| {
        InstallError::NotInstalled(format!("artifact `{name}` {}: {why}", locked.version))
    })?;
    pinned_file_of(manifest, locked, &receipt.files).map_err(InstallError::NotThePinned)
}

/// The directory of installed artifact `name` at `version`, as `murmur.lock` pins it and as it
/// was installed; E-REG-010 when it is not in the lock, pinned at another version, not
/// installed, or changed.
pub fn installed(
    capsule_dir: &Path,
    lock: &Lock,
    name: &str,
    version: &str,
) -> Result<PathBuf, InstallError> {
    let Some(locked) = lock.get(name) else {
        return Err(InstallError::NotInstalled(format!(
            "artifact `{name}` has no `path:` and is not in murmur.lock"
        )));
    };
    if locked.version != version {
        return Err(InstallError::NotInstalled(format!(
            "artifact `{name}`: the manifest asks for {version}, murmur.lock pins {}",
            locked.version
        )));
    }
    let dir = installed_dir(capsule_dir, &locked.name, &locked.version);
    verify_installed(&dir, locked).map_err(|why| {
        InstallError::NotInstalled(format!("artifact `{name}` {}: {why}", locked.version))
    })?;
    Ok(dir)
}
