//! A session's two places, never overlapping:
//!
//! - **The record**, `<root>/<session-id>/`: `trace.jsonl`, `out/result.txt`, `logs/` (the
//!   runtime's own logs), `contexts/<context-id>/history.json`. Only the runtime writes it, and
//!   every reader of a session (`mur trace`, `--resume`, the door's task store, hooks'
//!   `conversation/read`) reads it. No grant reaches it: it is not beneath the workspace, and
//!   the workspace is never the record or above it.
//! - **The workspace**: the directory components and native children see as `.`, the only
//!   one they may write. A fresh one per session at `<root>/<session-id>/workspace/` (holding
//!   `MURMUR.md` and `out/`, the files given back to a door client), or an existing directory
//!   the agent works on in place (`--workspace PATH`), held by one session at a time
//!   ([`WorkspaceLock`]). Murmur's own files in a workspace (the shell's full outputs, its
//!   temporary files) go beneath [`SCRATCH`].
//!
//! Every host-side access to either goes through a [`BeneathDir`] handle: nothing planted in
//! them is ever followed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::inference::neutral::StoredMessage;
use crate::session::staging::Staged;
use murmur_beneath::{BeneathDir, BeneathError};
use murmur_trace::TraceWriter;

/// The largest `history.json` the runtime writes and loads back: 32 MiB (a conversation far
/// past any model's context window). A bigger file was not written by the runtime.
pub const HISTORY_MAX_BYTES: u64 = 32 << 20;

/// The record layout this runtime writes (`session_start.record_layout`): 2 keeps the
/// workspace apart from the record; sessions written before (no field, layout 1) had one
/// directory for both, and are read as such.
pub const RECORD_LAYOUT: u32 = 2;

/// The directory a fresh workspace takes beneath the record.
pub const FRESH_WORKSPACE: &str = "workspace";

/// Murmur's own files in a workspace: a component or child may read them (the shell's full
/// output is the model's to read), and they are never counted as the agent's changes.
pub const SCRATCH: &str = murmur_confine::SCRATCH;

/// The most entries [`Workdir::tidy_scratch`] removes.
const SCRATCH_TIDY_MAX: usize = 100_000;

/// What [`Workdir::save_history`] wrote: the record `history_saved` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedHistory {
    /// sha256 (hex) of the bytes written.
    pub sha256: String,
    pub bytes: u64,
    pub messages: u64,
}

/// The most files under `contexts/<context-id>/` [`Workdir::history_bytes`] counts.
const HISTORY_FILES_SEEN: usize = 64;

/// One session's record and workspace (see the module doc).
#[derive(Debug, Clone)]
pub struct Workdir {
    /// `<root>/<session-id>/`.
    pub record: PathBuf,
    dir: Arc<BeneathDir>,
    /// The directory the agent works in.
    pub workspace: PathBuf,
    workspace_dir: Arc<BeneathDir>,
    /// The workspace is a directory the operator named, not the session's own.
    pub in_place: bool,
    _lock: Option<Arc<WorkspaceLock>>,
    /// The door principals given a directory of the workspace ([`Workdir::for_principal`]),
    /// whose scratch [`Workdir::tidy_scratch`] tidies too.
    principals: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl Workdir {
    /// Creates the record `<parent>/<session_id>/` (with its `out/`, `logs/` and `contexts/`)
    /// and the workspace: `in_place` (an existing directory, locked for this session: see
    /// [`WorkspaceLock`]), else a fresh `<record>/workspace/` with its `out/`.
    pub fn create(
        parent: &Path,
        session_id: &str,
        in_place: Option<&Path>,
    ) -> Result<Workdir, WorkdirError> {
        let io = |error: std::io::Error| WorkdirError::Io(error.to_string());
        let held = match in_place {
            Some(path) => Some(WorkspaceLock::take(path, parent)?),
            None => None,
        };
        let record = parent.join(session_id);
        std::fs::create_dir_all(&record).map_err(io)?;
        let record = record.canonicalize().map_err(io)?;
        let dir = BeneathDir::open(&record).map_err(io)?;
        for sub in ["out", "logs", "contexts"] {
            dir.create_dir_all(sub).map_err(|e| io(e.into_io()))?;
        }
        let (workspace, workspace_dir) = match &held {
            Some(lock) => (lock.path.clone(), BeneathDir::open(&lock.path).map_err(io)?),
            None => {
                let workspace = dir
                    .subdir(FRESH_WORKSPACE, true)
                    .map_err(|e| io(e.into_io()))?;
                workspace
                    .create_dir_all("out")
                    .map_err(|e| io(e.into_io()))?;
                (record.join(FRESH_WORKSPACE), workspace)
            }
        };
        Ok(Workdir {
            record,
            dir: Arc::new(dir),
            workspace,
            workspace_dir: Arc::new(workspace_dir),
            in_place: held.is_some(),
            _lock: held.map(Arc::new),
            principals: Arc::default(),
        })
    }

    /// The existing session `<parent>/<session_id>/`, opened beneath `parent` to be read:
    /// `session_id` must be a plain name ([`is_safe_id`]), and a link in its place is not
    /// followed. Its workspace is its fresh `workspace/` when it has one, else (a session of
    /// layout 1, or one that worked in place) the record itself.
    pub fn open(parent: &Path, session_id: &str) -> std::io::Result<Workdir> {
        if !is_safe_id(session_id) {
            return Err(std::io::Error::other(SAFE_ID_RULE));
        }
        let parent = parent.canonicalize()?;
        let dir = BeneathDir::open(&parent)?
            .subdir(session_id, false)
            .map_err(BeneathError::into_io)?;
        let record = parent.join(session_id);
        let (workspace, workspace_dir) = match dir.subdir(FRESH_WORKSPACE, false) {
            Ok(workspace) => (record.join(FRESH_WORKSPACE), workspace),
            Err(_) => (record.clone(), BeneathDir::open(&record)?),
        };
        Ok(Workdir {
            record,
            dir: Arc::new(dir),
            workspace,
            workspace_dir: Arc::new(workspace_dir),
            in_place: false,
            _lock: None,
            principals: Arc::default(),
        })
    }

    /// What the runtime writes itself in the workspace, never counted as the agent's changes:
    /// [`SCRATCH`], and a fresh workspace's `MURMUR.md` (the same in each door principal's
    /// directory of it: see [`Workdir::for_principal`]).
    pub fn runtime_entries(&self) -> &'static [&'static str] {
        if self.in_place {
            &[SCRATCH]
        } else {
            &[SCRATCH, "MURMUR.md", "*/.murmur-scratch", "*/MURMUR.md"]
        }
    }

    /// The view of a task of door principal `principal`: the same record, and a workspace of
    /// the principal's own, `<workspace>/<principal>/` (made on first use, with its `out/` and
    /// `MURMUR.md`), so one principal's task never reads the files another's left. A task of
    /// no principal (a door that asks for none) and a workspace worked on in place (the door
    /// refuses one shared by several principals) keep the session's.
    pub fn for_principal(
        &self,
        principal: Option<&str>,
        staged: &Staged,
    ) -> Result<Workdir, BeneathError> {
        let Some(principal) = principal.filter(|_| !self.in_place) else {
            return Ok(self.clone());
        };
        if !murmur_manifest::door::is_principal_name(principal) {
            return Err(BeneathError::BadPath {
                path: principal.escape_debug().to_string(),
                reason: "a door principal's name is 1 to 64 letters, digits, `-`, `_`, `.` or `@`, not starting with `.`",
            });
        }
        let fresh = self.workspace_dir.subdir(principal, false).is_err();
        let dir = self.workspace_dir.subdir(principal, true)?;
        if fresh {
            dir.create_dir_all("out")?;
            dir.write_whole("MURMUR.md", murmur_md(staged).as_bytes())?;
        }
        self.principals
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(principal.to_string());
        Ok(Workdir {
            workspace: self.workspace.join(principal),
            workspace_dir: Arc::new(dir),
            ..self.clone()
        })
    }

    /// At the session's end: the shell's temporary files (`SCRATCH/tmp`) are removed from the
    /// workspace, and `SCRATCH` itself when nothing else is in it, so a directory worked on in
    /// place keeps nothing of the session but what the agent made there (and the whole text
    /// of a cut output, when one was cut). Nothing planted there is followed.
    /// Each door principal's directory of the workspace is tidied alike.
    pub fn tidy_scratch(&self) {
        let principals = self
            .principals
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone();
        for top in std::iter::once(PathBuf::new()).chain(principals.into_iter().map(PathBuf::from))
        {
            let scratch = top.join(SCRATCH);
            let _ = self
                .workspace_dir
                .remove_tree(scratch.join("tmp"), SCRATCH_TIDY_MAX);
            let _ = self.workspace_dir.remove(&scratch, true);
        }
    }

    /// The handle the workspace is reached through (no link planted there is followed).
    pub fn workspace_dir(&self) -> &Arc<BeneathDir> {
        &self.workspace_dir
    }

    /// The handle every host-side read and write of the record goes through.
    pub fn record_dir(&self) -> &Arc<BeneathDir> {
        &self.dir
    }

    pub fn trace(&self) -> PathBuf {
        self.record.join(TRACE)
    }

    /// The session's trace writer, appending to `trace.jsonl` through the workdir handle
    /// (whatever an `on-stage` hook planted at that name is replaced).
    pub fn create_trace(&self, session_id: &str) -> std::io::Result<TraceWriter> {
        let file = self.dir.open_append(TRACE)?;
        Ok(TraceWriter::to_file(&self.trace(), file, session_id))
    }

    pub fn result(&self) -> PathBuf {
        self.record.join(RESULT)
    }

    /// `contexts/<context_id>/history.json`, or why `context_id` cannot name a context
    /// directory (it must be one plain name: see [`is_safe_id`]).
    pub fn history(&self, context_id: &str) -> Result<PathBuf, BeneathError> {
        Ok(self.record.join(history_path(context_id)?))
    }

    /// Writes a context's history (envelope keys included), replacing the file whole; a history
    /// over [`HISTORY_MAX_BYTES`] is not written (it could not be loaded back).
    pub fn save_history(
        &self,
        context_id: &str,
        history: &[StoredMessage],
    ) -> Result<SavedHistory, BeneathError> {
        let path = history_path(context_id)?;
        let json = serde_json::to_vec_pretty(history).map_err(|error| BeneathError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(error),
        })?;
        if json.len() as u64 > HISTORY_MAX_BYTES {
            return Err(BeneathError::TooLarge {
                path: path.display().to_string(),
                limit: HISTORY_MAX_BYTES,
            });
        }
        self.dir.write_whole(&path, &json)?;
        Ok(SavedHistory {
            sha256: murmur_registry::sha256_hex(&json),
            bytes: json.len() as u64,
            messages: history.len() as u64,
        })
    }

    /// The bytes of a context's saved `history.json` (at most [`HISTORY_MAX_BYTES`]), read
    /// beneath the workdir handle: `Ok(None)` when the context has none.
    pub fn history_file(&self, context_id: &str) -> Result<Option<Vec<u8>>, BeneathError> {
        let path = history_path(context_id)?;
        match self.dir.read(&path, HISTORY_MAX_BYTES) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(BeneathError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The saved history of `context_id`: `Ok(None)` when the context has none yet.
    pub fn load_history(&self, context_id: &str) -> Result<Option<Vec<StoredMessage>>, String> {
        let path = history_path(context_id).map_err(|error| error.to_string())?;
        match self.dir.read(&path, HISTORY_MAX_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|error| format!("`{}` is not a saved history: {error}", path.display())),
            Err(BeneathError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    /// The bytes `contexts/<context_id>/` holds (its regular files, no link followed), or
    /// `None` when it holds no file: the context has no saved conversation. A directory that
    /// cannot be read counts as one of unknown size, 0.
    pub fn history_bytes(&self, context_id: &str) -> Option<u64> {
        if !is_safe_id(context_id) {
            return None;
        }
        match self
            .dir
            .files(Path::new("contexts").join(context_id), HISTORY_FILES_SEEN)
        {
            Ok(files) if files.is_empty() => None,
            Ok(files) => Some(files.iter().map(|file| file.len).sum()),
            Err(BeneathError::NotFound { .. }) => None,
            Err(_) => Some(0),
        }
    }

    /// Deletes the saved conversation of `context_id` (`contexts/<context_id>/history.json`,
    /// then its directory when nothing else is in it): a later task of that id starts with no
    /// history. A context with none is fine.
    pub fn remove_history(&self, context_id: &str) -> Result<(), BeneathError> {
        let path = history_path(context_id)?;
        match self.dir.remove(&path, false) {
            Ok(()) | Err(BeneathError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
        if let Some(context_dir) = path.parent() {
            // Left when a component wrote more there: only the runtime's file is its to drop.
            let _ = self.dir.remove(context_dir, true);
        }
        Ok(())
    }

    /// Writes the task's final text to `out/result.txt`.
    pub fn save_result(&self, text: &str) -> Result<PathBuf, BeneathError> {
        self.dir.write_whole(RESULT, text.as_bytes())?;
        Ok(self.result())
    }

    /// What `out/` holds now (its regular files, no link followed), to tell later what a task
    /// made or changed ([`Workdir::outputs_since`]).
    pub fn out_snapshot(&self) -> OutSnapshot {
        OutSnapshot(
            self.workspace_dir
                .files("out", OUT_FILES_SEEN)
                .unwrap_or_default()
                .into_iter()
                .map(|stamp| (stamp.path.clone(), stamp))
                .collect(),
        )
    }

    /// The files under the workspace's `out/` that are new since `before`, or changed (size,
    /// time or inode), in name order, at most [`OUTPUTS_LISTED`].
    pub fn outputs_since(&self, before: &OutSnapshot) -> Vec<OutputFile> {
        self.workspace_dir
            .files("out", OUT_FILES_SEEN)
            .unwrap_or_default()
            .into_iter()
            .filter(|stamp| before.0.get(&stamp.path) != Some(stamp))
            .take(OUTPUTS_LISTED)
            .map(|stamp| OutputFile {
                path: stamp.path,
                size: stamp.len,
                dir: self.workspace_dir.clone(),
            })
            .collect()
    }

    /// Copies the directory `fixture` into the workspace, as the files a session starts with:
    /// its directories and regular files, at most [`SEED_MAX_FILES`] files and
    /// [`SEED_MAX_BYTES`] in all. The whole fixture is looked over before anything is copied,
    /// and nothing is copied when any of it is refused: a symbolic link or a special file
    /// (nothing is followed), a regular file with more than one link (a hard link: the same
    /// file may lie outside the fixture, so its bytes are not the fixture's to give), and a
    /// name the runtime writes itself in a workspace (`MURMUR.md`, [`SCRATCH`]). The
    /// copy itself reads beneath the fixture ([`BeneathDir::read`]), so a file swapped for a
    /// link or a hard link after the look is refused then.
    pub fn seed_from(&self, fixture: &Path) -> std::io::Result<()> {
        let mut plan = SeedPlan::default();
        plan_seed(fixture, Path::new(""), 0, &mut plan)?;
        let source = BeneathDir::open(fixture)?;
        for dir in &plan.dirs {
            self.workspace_dir
                .create_dir_all(dir)
                .map_err(BeneathError::into_io)?;
        }
        let mut bytes_left = SEED_MAX_BYTES;
        for file in &plan.files {
            let bytes = source.read(file, bytes_left).map_err(|error| {
                std::io::Error::other(format!("{}: {error}", fixture.display()))
            })?;
            bytes_left -= bytes.len() as u64;
            self.workspace_dir
                .write_whole(file, &bytes)
                .map_err(BeneathError::into_io)?;
        }
        Ok(())
    }

    /// Writes `MURMUR.md` into a fresh workspace: who the agent is, its tools, its limits. A
    /// workspace worked on in place is the operator's: nothing is written there.
    pub fn write_murmur_md(&self, staged: &Staged) -> Result<(), BeneathError> {
        if self.in_place {
            return Ok(());
        }
        self.workspace_dir
            .write_whole("MURMUR.md", murmur_md(staged).as_bytes())
    }
}

/// Why a session's two places could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkdirError {
    /// The record or a fresh workspace could not be made.
    #[error("{0}")]
    Io(String),
    /// The directory named to work on in place cannot be one (`E-RUN-033`).
    #[error("{} cannot be a workspace: {reason}", path.display())]
    Workspace { path: PathBuf, reason: String },
    /// Another session holds the workspace (`E-RUN-034`).
    #[error("the workspace {} is in use by another session: {holder}", path.display())]
    Held { path: PathBuf, holder: String },
}

/// An existing directory held for one session's work in place: an exclusive `flock` on the
/// directory itself, released when the session's last handle on it is dropped (or its process
/// dies). Dropping unlocks it outright: a child forked meanwhile by any thread of the process
/// shares the locked descriptor until it executes, and closing ours alone would leave the
/// workspace held by that child. A second session that asks for it is refused at once, naming
/// the holder (its process id and command line, read from `/proc/locks`), never left waiting
/// behind a session that may run for hours. Nothing is written into the directory.
#[derive(Debug)]
pub struct WorkspaceLock {
    pub path: PathBuf,
    held: std::os::fd::OwnedFd,
}

impl WorkspaceLock {
    /// Takes `path` for a session whose records go under `records`: it must be an existing
    /// directory, neither the records' root nor above or beneath it (a workspace over the
    /// records would let the agent write them).
    pub fn take(path: &Path, records: &Path) -> Result<WorkspaceLock, WorkdirError> {
        use rustix::fs::{FlockOperation, Mode, OFlags};
        let refused = |reason: String| WorkdirError::Workspace {
            path: path.to_path_buf(),
            reason,
        };
        let canonical = path
            .canonicalize()
            .map_err(|error| refused(format!("it cannot be opened: {error}")))?;
        if !canonical.is_dir() {
            return Err(refused("it is not a directory".to_string()));
        }
        std::fs::create_dir_all(records).map_err(|error| {
            refused(format!(
                "the records' root {} cannot be made: {error}",
                records.display()
            ))
        })?;
        let records = records.canonicalize().map_err(|error| {
            refused(format!(
                "the records' root {} cannot be opened: {error}",
                records.display()
            ))
        })?;
        if records.starts_with(&canonical) || canonical.starts_with(&records) {
            return Err(refused(format!(
                "it overlaps the records' root {} (the agent could write the session's record)",
                records.display()
            )));
        }
        let fd = rustix::fs::open(
            &canonical,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|errno| refused(format!("it cannot be opened: {errno}")))?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(WorkspaceLock {
                path: canonical,
                held: fd,
            }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(WorkdirError::Held {
                holder: lock_holder(&fd).unwrap_or_else(|| "another process".to_string()),
                path: canonical,
            }),
            Err(errno) => Err(refused(format!("it cannot be locked: {errno}"))),
        }
    }
}

impl Drop for WorkspaceLock {
    fn drop(&mut self) {
        // Unlocking acts on the open file description, which a forked child's copy shares.
        let _ = rustix::fs::flock(&self.held, rustix::fs::FlockOperation::Unlock);
    }
}

/// Who holds the `flock` on `fd`'s file: `pid N (command line)`, from `/proc/locks`.
fn lock_holder(fd: &std::os::fd::OwnedFd) -> Option<String> {
    let stat = rustix::fs::fstat(fd).ok()?;
    let (major, minor) = (
        rustix::fs::major(stat.st_dev),
        rustix::fs::minor(stat.st_dev),
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `1: FLOCK  ADVISORY  WRITE 4242 00:2a:1234 0 EOF`
        let (kind, pid, id) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
        let mut parts = id.split(':');
        let dev_major = u32::from_str_radix(parts.next()?, 16).ok()?;
        let dev_minor = u32::from_str_radix(parts.next()?, 16).ok()?;
        let inode: u64 = parts.next()?.parse().ok()?;
        (*kind == "FLOCK" && dev_major == major && dev_minor == minor && inode == stat.st_ino)
            .then(|| pid.to_string())
    })?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let command: Vec<String> = cmdline
        .split(|byte| *byte == 0)
        .filter(|arg| !arg.is_empty())
        .take(8)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    Some(if command.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid} (`{}`)", command.join(" "))
    })
}

/// What a seed copies, in order: its directories, then its regular files (relative paths).
#[derive(Default)]
struct SeedPlan {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
    bytes: u64,
}

/// Looks over the fixture directory `from` (at `rel` within the seed), adding what it holds to
/// `plan`, or says why the seed is refused (see [`Workdir::seed_from`]).
fn plan_seed(from: &Path, rel: &Path, depth: usize, plan: &mut SeedPlan) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| std::io::Error::other(why);
    if depth > 16 {
        return Err(refuse(format!(
            "{} nests deeper than 16 directories",
            from.display()
        )));
    }
    let mut entries = std::fs::read_dir(from)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name();
        let target = rel.join(&name);
        if depth == 0 && ["MURMUR.md", SCRATCH].iter().any(|own| name == *own) {
            return Err(refuse(format!(
                "{} holds `{}`, a name the runtime writes in a session's workspace",
                from.display(),
                name.to_string_lossy()
            )));
        }
        // Not followed: the entry itself, whatever it is.
        let meta = entry.metadata()?;
        let kind = meta.file_type();
        if kind.is_dir() {
            plan.dirs.push(target.clone());
            plan_seed(&entry.path(), &target, depth + 1, plan)?;
        } else if kind.is_file() && meta.nlink() > 1 {
            return Err(refuse(format!(
                "{} is a hard link (the file has {} links, and another may lie outside the fixture): a seed holds only directories and regular files of its own",
                entry.path().display(),
                meta.nlink()
            )));
        } else if kind.is_file() {
            if plan.files.len() == SEED_MAX_FILES {
                return Err(refuse(format!(
                    "{} holds more than {SEED_MAX_FILES} files",
                    from.display()
                )));
            }
            plan.bytes = plan.bytes.saturating_add(meta.len());
            if plan.bytes > SEED_MAX_BYTES {
                return Err(refuse(format!(
                    "{} holds more than {} MiB",
                    from.display(),
                    SEED_MAX_BYTES >> 20
                )));
            }
            plan.files.push(target);
        } else {
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else {
                "a special file"
            };
            return Err(refuse(format!(
                "{} is {what}: a seed holds only directories and regular files, and no link is followed",
                entry.path().display()
            )));
        }
    }
    Ok(())
}

/// The most files a seed ([`Workdir::seed_from`]) may hold.
pub const SEED_MAX_FILES: usize = 10_000;
/// The most bytes a seed may hold in all (256 MiB).
pub const SEED_MAX_BYTES: u64 = 256 << 20;

/// The most files under `out/` a task's report lists ([`Workdir::outputs_since`]).
pub const OUTPUTS_LISTED: usize = 32;
/// The most files under `out/` a snapshot looks at.
const OUT_FILES_SEEN: usize = 10_000;

/// What `out/` held when a task began ([`Workdir::out_snapshot`]).
#[derive(Debug, Default)]
pub struct OutSnapshot(std::collections::HashMap<PathBuf, murmur_beneath::FileStamp>);

/// A file a task made or changed under the workspace's `out/`, readable beneath it (no link
/// followed).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OutputFile {
    /// Relative to the workspace: `out/…`.
    pub path: PathBuf,
    pub size: u64,
    #[serde(skip)]
    dir: Arc<BeneathDir>,
}

impl OutputFile {
    /// The path below `out/`: `report.csv`, `charts/a.png`.
    pub fn name(&self) -> String {
        self.path
            .strip_prefix("out")
            .unwrap_or(&self.path)
            .to_string_lossy()
            .into_owned()
    }

    /// Its bytes now, at most `limit` of them (a file changed into a link or a FIFO since is
    /// refused, as every read beneath the workspace).
    pub fn read(&self, limit: u64) -> Result<Vec<u8>, BeneathError> {
        self.dir.read(&self.path, limit)
    }
}

const RESULT: &str = "out/result.txt";
const TRACE: &str = "trace.jsonl";

/// The longest id a client may choose (a context id, a task id, a message id).
pub const ID_MAX_LEN: usize = 128;

/// Whether `id` is an id a client may choose, safe to name a directory under `contexts/`: 1 to
/// [`ID_MAX_LEN`] ASCII letters, digits, `-`, `_` or `.`, not starting with `.`. The door
/// refuses any other id a client sends; the workdir refuses to make a path of one.
pub fn is_safe_id(id: &str) -> bool {
    (1..=ID_MAX_LEN).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What [`is_safe_id`] wants, in words.
pub const SAFE_ID_RULE: &str =
    "an id is 1 to 128 ASCII letters, digits, `-`, `_` or `.`, and does not start with `.`";

fn history_path(context_id: &str) -> Result<PathBuf, BeneathError> {
    if !is_safe_id(context_id) {
        return Err(BeneathError::BadPath {
            path: format!("contexts/{}/history.json", context_id.escape_debug()),
            reason: SAFE_ID_RULE,
        });
    }
    Ok(Path::new("contexts").join(context_id).join("history.json"))
}

/// The text of `MURMUR.md`.
pub fn murmur_md(staged: &Staged) -> String {
    let capsule = &staged.capsule;
    let mut text = format!("# {} {}\n\n", capsule.name, capsule.version);
    if let Some(description) = &capsule.description {
        text.push_str(description.trim());
        text.push_str("\n\n");
    }
    text.push_str(
        "This directory is your working directory: the only files you can read and write, \
         apart from any read-only paths listed below. What you leave here stays with the \
         session.\n\n## Tools\n\n",
    );
    if staged.tools.is_empty()
        && staged.skills.is_empty()
        && capsule.capabilities.shell.allow.is_empty()
        && capsule.control.agent_settings.is_empty()
    {
        text.push_str("None.\n");
    }
    for spec in staged
        .tools
        .iter()
        .map(|tool| &tool.spec)
        .chain(staged.skills.iter().map(|skill| &skill.spec))
    {
        text.push_str(&format!(
            "- `{}`: {}\n",
            spec.name,
            spec.description.as_deref().unwrap_or_default().trim()
        ));
    }
    let shell = &capsule.capabilities.shell.allow;
    if !shell.is_empty() {
        text.push_str(&format!(
            "- `shell`: runs one of {} directly in this directory (no implicit shell).\n",
            shell
                .iter()
                .map(|b| format!("`{b}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if capsule
        .control
        .agent_settings
        .contains(&murmur_manifest::capsule::Setting::InferenceDriver)
    {
        let choices: Vec<String> = staged
            .choices
            .iter()
            .map(|choice| format!("`{}` ({})", choice.name, choice.model))
            .collect();
        text.push_str(&format!(
            "- `switch-driver`: switches the model that answers your next turns: {}.\n",
            choices.join(", ")
        ));
    }
    let limits = &capsule.capabilities.limits;
    text.push_str(&format!(
        "\n## Limits\n\n- At most {} turns per task.\n- At most {} output tokens per reply.\n",
        staged.max_turns, staged.max_tokens
    ));
    if let Some(ceiling) = staged.max_session_tokens {
        text.push_str(&format!(
            "- At most about {ceiling} tokens over the whole session (estimated).\n"
        ));
    }
    if let Some(seconds) = limits.deadline_seconds {
        text.push_str(&format!(
            "- Each tool call must finish within {seconds} s.\n"
        ));
    }
    if let Some(bytes) = limits.memory_bytes {
        text.push_str(&format!(
            "- Each tool call may use at most {bytes} bytes of memory.\n"
        ));
    }
    let network = &capsule.capabilities.network.allow;
    if network.is_empty() {
        text.push_str("- Tools reach no network host.\n");
    } else {
        let hosts: Vec<&str> = network.iter().map(|rule| rule.as_str()).collect();
        text.push_str(&format!("- Tools may reach: {}.\n", hosts.join(", ")));
    }
    let read_only = &capsule.capabilities.filesystem.read_only;
    if !read_only.is_empty() {
        let paths: Vec<String> = read_only
            .iter()
            .map(|path| path.resolved.display().to_string())
            .collect();
        text.push_str(&format!("- Read-only paths: {}.\n", paths.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workdir() -> (tempfile::TempDir, Workdir) {
        let root = tempfile::tempdir().unwrap();
        let workdir = Workdir::create(root.path(), "ses_seed", None).unwrap();
        (root, workdir)
    }

    #[test]
    fn a_seed_is_copied_whole_directories_and_files() {
        let fixture = tempfile::tempdir().unwrap();
        std::fs::create_dir(fixture.path().join("notes")).unwrap();
        std::fs::write(fixture.path().join("notes/a.md"), "alpha").unwrap();
        std::fs::write(fixture.path().join("b.txt"), "beta").unwrap();
        let (_root, workdir) = workdir();
        workdir.seed_from(fixture.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(workdir.workspace.join("notes/a.md")).unwrap(),
            "alpha"
        );
        assert_eq!(
            std::fs::read_to_string(workdir.workspace.join("b.txt")).unwrap(),
            "beta"
        );
    }

    #[test]
    fn a_hard_linked_file_refuses_the_seed_and_nothing_is_copied() {
        let outside = tempfile::tempdir().unwrap();
        let host_file = outside.path().join("host-secret");
        std::fs::write(&host_file, "host bytes").unwrap();
        let fixture = tempfile::tempdir().unwrap();
        // Sorted before the link: refused all the same, nothing of the seed is copied.
        std::fs::write(fixture.path().join("a-first.txt"), "first").unwrap();
        std::fs::create_dir(fixture.path().join("deep")).unwrap();
        std::fs::hard_link(&host_file, fixture.path().join("deep/linked.txt")).unwrap();
        let (_root, workdir) = workdir();
        let error = workdir.seed_from(fixture.path()).unwrap_err().to_string();
        assert!(
            error.contains("deep/linked.txt") && error.contains("is a hard link"),
            "{error}"
        );
        assert!(!workdir.workspace.join("a-first.txt").exists());
        assert!(!workdir.workspace.join("deep").exists());

        // A symbolic link and a FIFO are refused as before.
        std::fs::remove_file(fixture.path().join("deep/linked.txt")).unwrap();
        std::os::unix::fs::symlink(&host_file, fixture.path().join("deep/sym")).unwrap();
        let error = workdir.seed_from(fixture.path()).unwrap_err().to_string();
        assert!(error.contains("is a symbolic link"), "{error}");
        std::fs::remove_file(fixture.path().join("deep/sym")).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(fixture.path().join("deep/fifo"))
            .status()
            .unwrap();
        assert!(status.success());
        let error = workdir.seed_from(fixture.path()).unwrap_err().to_string();
        assert!(error.contains("is a special file"), "{error}");
        assert!(!workdir.workspace.join("a-first.txt").exists());
    }

    #[test]
    fn a_fresh_workspace_lies_beneath_the_record_and_holds_none_of_it() {
        let (_root, workdir) = workdir();
        assert_eq!(workdir.workspace, workdir.record.join(FRESH_WORKSPACE));
        assert!(!workdir.in_place);
        for own in ["out", "logs", "contexts"] {
            assert!(workdir.record.join(own).is_dir(), "{own}");
        }
        assert!(workdir.workspace.join("out").is_dir());
        for record in ["trace.jsonl", "logs", "contexts"] {
            assert!(!workdir.workspace.join(record).exists(), "{record}");
        }
        let reopened = Workdir::open(workdir.record.parent().unwrap(), "ses_seed").unwrap();
        assert_eq!(reopened.workspace, workdir.workspace);
    }

    #[test]
    fn a_fresh_workspace_skips_the_scratch_of_each_principal_and_not_the_project_store() {
        let records = tempfile::tempdir().unwrap();
        let fresh = Workdir::create(records.path(), "ses_f", None).unwrap();
        let entries = fresh.runtime_entries();
        assert!(entries.contains(&SCRATCH));
        assert!(
            entries.contains(&format!("*/{SCRATCH}").as_str()),
            "{entries:?}"
        );
        // A capsule's project store (`.murmur/artifacts/`) is the agent's to change, and listed.
        assert!(
            !entries
                .iter()
                .any(|e| e.trim_start_matches("*/") == ".murmur")
        );
    }

    #[test]
    fn a_workspace_in_place_is_held_by_one_session_and_named_to_the_next() {
        let records = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let first = Workdir::create(records.path(), "ses_a", Some(checkout.path())).unwrap();
        assert!(first.in_place);
        assert_eq!(first.workspace, checkout.path().canonicalize().unwrap());
        assert_eq!(first.runtime_entries(), &[SCRATCH]);
        let second = Workdir::create(records.path(), "ses_b", Some(checkout.path())).unwrap_err();
        let WorkdirError::Held { holder, .. } = &second else {
            panic!("{second:?}");
        };
        assert!(
            holder.contains(&format!("pid {}", std::process::id())),
            "{holder}"
        );
        // Released with the session's last handle.
        drop(first);
        let third = Workdir::create(records.path(), "ses_c", Some(checkout.path())).unwrap();
        assert!(third.in_place);
        // Nothing of the record was written into the checkout.
        assert_eq!(std::fs::read_dir(checkout.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_workspace_let_go_is_free_even_while_a_child_forked_meanwhile_has_not_executed() {
        use std::io::{Read, Write};
        use std::os::unix::process::CommandExt;
        let records = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let lock = WorkspaceLock::take(checkout.path(), records.path()).unwrap();
        let (mut forked, said) = std::io::pipe().unwrap();
        // Another thread spawns a child (as a session's shell does) while the lock is held:
        // between its fork and its exec the child shares every descriptor, the lock's too.
        let spawner = std::thread::spawn(move || {
            let mut child = std::process::Command::new("true");
            // SAFETY: only a write(2) and a nanosleep(2) run in the forked child.
            unsafe {
                child.pre_exec(move || {
                    (&said).write_all(b"f")?;
                    std::thread::sleep(std::time::Duration::from_secs(2));
                    Ok(())
                });
            }
            child.status().unwrap()
        });
        let mut byte = [0u8; 1];
        forked.read_exact(&mut byte).unwrap();
        drop(lock);
        // The child has not executed yet, and the workspace is free at once.
        let again = WorkspaceLock::take(checkout.path(), records.path());
        assert!(again.is_ok(), "{again:?}");
        assert!(spawner.join().unwrap().success());
    }

    #[test]
    fn a_workspace_over_or_beneath_the_records_or_not_a_directory_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let records = top.path().join("records");
        std::fs::create_dir_all(records.join("inner")).unwrap();
        std::fs::write(top.path().join("file"), "x").unwrap();
        for (workspace, why) in [
            (top.path().to_path_buf(), "overlaps"),
            (records.clone(), "overlaps"),
            (records.join("inner"), "overlaps"),
            (top.path().join("file"), "not a directory"),
            (top.path().join("missing"), "cannot be opened"),
        ] {
            let error = Workdir::create(&records, "ses_x", Some(&workspace)).unwrap_err();
            match &error {
                WorkdirError::Workspace { reason, .. } => {
                    assert!(reason.contains(why), "{workspace:?}: {reason}")
                }
                other => panic!("{workspace:?}: {other:?}"),
            }
        }
        assert!(!records.join("ses_x").exists());
    }
}
