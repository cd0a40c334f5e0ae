//! What a task changed in the directory the agent works in: a look at the directory before
//! the task and one after it, compared.
//!
//! The promise:
//! - **Nothing is followed.** The walk opens every directory beneath the one before it
//!   (`O_NOFOLLOW`), never through a link; a symbolic link is recorded as a link (its size the
//!   length of its target text, its sha256 that text's hash), never read through. Other
//!   special files (fifos, sockets, devices) are not recorded.
//! - **Bounded, and says so.** A look records at most [`ENTRIES_MAX`] entries (files, links,
//!   directories) and descends at most [`DEPTH_MAX`] directories. Past a bound, or beneath a
//!   directory it cannot open, the look knows it did not see everything: the comparison claims
//!   nothing about what lies past it, and its result says `truncated: true` with the bounds
//!   hit (`entries`, `depth`, `unreadable`), never a silently partial list. Each list of the
//!   result holds at most [`WorkspaceChanges::LISTED`] paths (`listed` when cut); the counts
//!   stay exact.
//! - **What is compared.** For each regular file: size, mtime and ctime (ns) and inode. A path
//!   whose stat differs is looked at by content when both hashes are known: the same bytes
//!   (a `touch`, a rewrite with the same text) is no change. A file whose times lie within
//!   [`RACY_NS`] of the look that recorded it may change again unseen in the same clock tick,
//!   so the next look hashes it again rather than trust its stat.
//! - **Hashing only what it must.** A "before" sha256 can only be taken before: the first look
//!   of a session hashes every regular file up to [`FIRST_HASH_MAX`] (1 MiB), the files most
//!   edits touch; a larger file's before hash is reported absent. Every later look
//!   ([`Snapshot::retake`]) reuses the hash of a file whose stat is unchanged and hashes only
//!   new or changed files, up to [`CHANGED_HASH_MAX`] each. No look hashes more than
//!   [`HASH_BUDGET`] bytes in all; past it hashes are absent (sizes and stat still compared).
//!
//! [`Watch`] keeps the looks of one session: one before and one after each task, and the
//! session's total (the look before its first task against the one after its last). It also
//! reads, once, the git commit the directory was on ([`git_state`]), from `.git` directly, and
//! never compares `.git` itself. Tasks that run at once (a served capsule) share the
//! directory: each task's list holds whatever changed there while it ran.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use murmur_trace::schema::{
    ChangeCounts, FileCreated, FileDeleted, FileModified, WorkspaceChanges, WorkspaceGit,
};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use sha2::{Digest, Sha256};

/// The most entries (files, links, directories) one look records.
pub const ENTRIES_MAX: usize = 100_000;
/// The most directories one look descends into below the top one.
pub const DEPTH_MAX: usize = 64;
/// The largest file the first look of a session hashes (its "before" hash).
pub const FIRST_HASH_MAX: u64 = 1 << 20;
/// The largest new or changed file a later look hashes.
pub const CHANGED_HASH_MAX: u64 = 64 << 20;
/// The most bytes one look hashes in all.
pub const HASH_BUDGET: u64 = 256 << 20;
/// How close to a look a file's times may be before its stat is not trusted at the next look.
pub const RACY_NS: i128 = 100_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Link,
}

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    sha256: Option<[u8; 32]>,
}

impl Entry {
    fn same_stat(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
            && self.ctime_ns == other.ctime_ns
            && self.inode == other.inode
    }
}

/// A path relative to the directory looked at, its names joined by NUL (a byte no name holds):
/// byte order of keys is the walk's order, names compared one by one.
type Key = Vec<u8>;

/// One look at a directory (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    entries: BTreeMap<Key, Entry>,
    /// Every entry seen, directories included.
    seen: u64,
    /// The first path not looked at when the entry bound stopped the walk: it and every path
    /// after it (in path order) are unknown.
    stopped_at: Option<Key>,
    /// Directories whose contents were not seen (too deep, or could not be opened).
    unseen: Vec<Key>,
    truncated_by: Vec<&'static str>,
    /// When the look began (wall clock, ns since the epoch).
    taken_ns: i128,
    hashed_bytes: u64,
}

struct Walk<'a> {
    skip: Vec<Key>,
    previous: Option<&'a Snapshot>,
    snap: Snapshot,
}

impl Snapshot {
    /// Looks at `dir` (not followed past `dir` itself), leaving out the paths of `skip`
    /// (relative paths, or `*/name` for `name` in any directory of the top one; a directory's
    /// whole subtree), hashing as the first look of a session.
    pub fn take(dir: &Path, skip: &[&str]) -> Snapshot {
        Snapshot::look(dir, skip, None)
    }

    /// Looks at `dir` again after `self`: hashes of files whose stat is unchanged are reused.
    pub fn retake(&self, dir: &Path, skip: &[&str]) -> Snapshot {
        Snapshot::look(dir, skip, Some(self))
    }

    /// How many files and links the look recorded.
    pub fn files(&self) -> usize {
        self.entries.len()
    }

    /// Whether the look stopped at a bound.
    pub fn truncated(&self) -> bool {
        !self.truncated_by.is_empty()
    }

    fn look(dir: &Path, skip: &[&str], previous: Option<&Snapshot>) -> Snapshot {
        let taken_ns = now_ns();
        let mut walk = Walk {
            skip: skip.iter().map(|path| key_of(path)).collect(),
            previous,
            snap: Snapshot {
                taken_ns,
                ..Snapshot::default()
            },
        };
        match rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => walk.dir(&fd, &[], 0),
            Err(_) => {
                walk.snap.unseen.push(Key::new());
                walk.snap.mark("unreadable");
            }
        }
        walk.snap
    }

    fn mark(&mut self, bound: &'static str) {
        if !self.truncated_by.contains(&bound) {
            self.truncated_by.push(bound);
        }
    }

    /// Whether this look saw `path` (or saw it is absent).
    fn knows(&self, path: &[u8]) -> bool {
        if self.stopped_at.as_deref().is_some_and(|stop| path >= stop) {
            return false;
        }
        !self
            .unseen
            .iter()
            .any(|dir| dir.is_empty() || (path.starts_with(dir) && path.get(dir.len()) == Some(&0)))
    }

    /// What changed from this look to `after` (see the module doc).
    pub fn changes_to(&self, after: &Snapshot) -> WorkspaceChanges {
        let mut changes = WorkspaceChanges {
            entries: after.seen,
            ..WorkspaceChanges::default()
        };
        let mut counts = ChangeCounts::default();
        let mut listed_all = true;
        let known = |path: &[u8]| self.knows(path) && after.knows(path);
        let mut created = |path: &[u8], entry: &Entry, changes: &mut WorkspaceChanges| {
            counts.created += 1;
            if changes.created.len() < WorkspaceChanges::LISTED {
                changes.created.push(FileCreated {
                    path: display(path),
                    size: entry.size,
                    sha256: entry.sha256.map(hex::encode),
                    link: entry.kind == Kind::Link,
                });
            } else {
                listed_all = false;
            }
        };
        let mut deleted_list = Vec::new();
        let mut modified_list = Vec::new();
        for (path, before) in &self.entries {
            if !known(path) {
                continue;
            }
            match after.entries.get(path) {
                None => deleted_list.push((path, before)),
                Some(now) if now.kind != before.kind => {
                    deleted_list.push((path, before));
                    created(path, now, &mut changes);
                }
                Some(now) => {
                    let same_bytes = match (before.sha256, now.sha256) {
                        (Some(a), Some(b)) => Some(a == b),
                        _ => None,
                    };
                    let changed = match same_bytes {
                        Some(same) => !same,
                        None => !before.same_stat(now),
                    };
                    if changed {
                        modified_list.push((path, before, now));
                    }
                }
            }
        }
        for (path, now) in &after.entries {
            if known(path) && !self.entries.contains_key(path) {
                created(path, now, &mut changes);
            }
        }
        // `created` pushed in two passes: put the list back in path order.
        changes.created.sort_by_key(|created| key_of(&created.path));
        counts.modified = modified_list.len() as u64;
        counts.deleted = deleted_list.len() as u64;
        listed_all &= modified_list.len() <= WorkspaceChanges::LISTED
            && deleted_list.len() <= WorkspaceChanges::LISTED;
        changes.modified = modified_list
            .into_iter()
            .take(WorkspaceChanges::LISTED)
            .map(|(path, before, now)| FileModified {
                path: display(path),
                size_before: before.size,
                size_after: now.size,
                sha256_before: before.sha256.map(hex::encode),
                sha256_after: now.sha256.map(hex::encode),
                link: now.kind == Kind::Link,
            })
            .collect();
        changes.deleted = deleted_list
            .into_iter()
            .take(WorkspaceChanges::LISTED)
            .map(|(path, before)| FileDeleted {
                path: display(path),
                size: before.size,
                sha256_before: before.sha256.map(hex::encode),
                link: before.kind == Kind::Link,
            })
            .collect();
        changes.counts = counts;
        let mut bounds: Vec<&str> = Vec::new();
        for bound in self.truncated_by.iter().chain(&after.truncated_by) {
            if !bounds.contains(bound) {
                bounds.push(bound);
            }
        }
        if !listed_all {
            bounds.push("listed");
        }
        changes.truncated = !bounds.is_empty();
        changes.truncated_by = bounds.into_iter().map(str::to_string).collect();
        changes
    }
}

impl Walk<'_> {
    /// Whether `rel` is one of the paths left out: a path of `skip`, or, for one written
    /// `*/name`, `name` in any directory of the top one.
    fn skipped(&self, rel: &[u8]) -> bool {
        self.skip
            .iter()
            .any(|skip| match skip.strip_prefix(b"*\0") {
                Some(name) => rel
                    .iter()
                    .position(|b| *b == 0)
                    .is_some_and(|at| &rel[at + 1..] == name),
                None => rel == skip.as_slice(),
            })
    }

    fn dir(&mut self, fd: &OwnedFd, rel: &[u8], depth: usize) {
        let mut names: Vec<Vec<u8>> = Vec::new();
        let read = rustix::fs::Dir::read_from(fd).map(|dir| {
            for entry in dir {
                let Ok(entry) = entry else {
                    return false;
                };
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    names.push(name.to_vec());
                }
            }
            true
        });
        if read != Ok(true) {
            self.snap.unseen.push(rel.to_vec());
            self.snap.mark("unreadable");
            return;
        }
        // Byte order of names, one directory at a time: the walk goes in path order.
        names.sort();
        for name in names {
            let mut path = Key::with_capacity(rel.len() + 1 + name.len());
            if !rel.is_empty() {
                path.extend_from_slice(rel);
                path.push(0);
            }
            path.extend_from_slice(&name);
            let name = OsStr::from_bytes(&name);
            if self.snap.stopped_at.is_some() {
                return;
            }
            if self.skipped(&path) {
                continue;
            }
            if self.snap.seen as usize >= ENTRIES_MAX {
                self.snap.stopped_at = Some(path);
                self.snap.mark("entries");
                return;
            }
            self.snap.seen += 1;
            let Ok(stat) = rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
                // Gone between the listing and the look, or not ours to see.
                continue;
            };
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {
                    if depth + 1 > DEPTH_MAX {
                        self.snap.unseen.push(path);
                        self.snap.mark("depth");
                        continue;
                    }
                    match rustix::fs::openat(
                        fd,
                        name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(sub) => self.dir(&sub, &path, depth + 1),
                        Err(_) => {
                            self.snap.unseen.push(path);
                            self.snap.mark("unreadable");
                        }
                    }
                }
                FileType::RegularFile => {
                    let mut entry = Entry {
                        kind: Kind::File,
                        size: stat.st_size as u64,
                        mtime_ns: stat.st_mtime as i128 * 1_000_000_000
                            + stat.st_mtime_nsec as i128,
                        ctime_ns: stat.st_ctime as i128 * 1_000_000_000
                            + stat.st_ctime_nsec as i128,
                        inode: stat.st_ino,
                        sha256: None,
                    };
                    entry.sha256 = self.file_hash(fd, name, &path, &entry);
                    self.snap.entries.insert(path, entry);
                }
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(fd, name, Vec::new())
                        .map(|target| target.into_bytes())
                        .unwrap_or_default();
                    let entry = Entry {
                        kind: Kind::Link,
                        size: target.len() as u64,
                        mtime_ns: 0,
                        ctime_ns: 0,
                        inode: stat.st_ino,
                        sha256: Some(Sha256::digest(&target).into()),
                    };
                    self.snap.entries.insert(path, entry);
                }
                _ => {}
            }
        }
    }

    /// The file's sha256: the earlier look's when its stat is unchanged (and was not racy),
    /// else read within the bounds of the module doc.
    fn file_hash(
        &mut self,
        fd: &OwnedFd,
        name: &OsStr,
        path: &[u8],
        entry: &Entry,
    ) -> Option<[u8; 32]> {
        let limit = match self.previous {
            None => FIRST_HASH_MAX,
            Some(previous) => {
                if let Some(earlier) = previous.entries.get(path)
                    && earlier.same_stat(entry)
                {
                    let racy = entry.mtime_ns.max(entry.ctime_ns) + RACY_NS >= previous.taken_ns;
                    if !racy || earlier.sha256.is_none() {
                        return earlier.sha256;
                    }
                }
                CHANGED_HASH_MAX
            }
        };
        if entry.size > limit || self.snap.hashed_bytes + entry.size > HASH_BUDGET {
            return None;
        }
        let file = rustix::fs::openat(
            fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )
        .ok()?;
        let stat = rustix::fs::fstat(&file).ok()?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || stat.st_ino != entry.inode
        {
            return None;
        }
        let mut file = std::fs::File::from(file).take(limit + 1);
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 << 10];
        let mut read = 0u64;
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    read += n as u64;
                    hasher.update(&buffer[..n]);
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        self.snap.hashed_bytes += read;
        // Grown or shrunk while read: the bytes hashed are not the ones the stat describes.
        (read == entry.size).then(|| hasher.finalize().into())
    }
}

/// `a/b` as a key.
fn key_of(path: &str) -> Key {
    path.bytes()
        .map(|b| if b == b'/' { 0 } else { b })
        .collect()
}

/// A key as the path it is, `/` between its names.
fn display(path: &[u8]) -> String {
    let bytes: Vec<u8> = path
        .iter()
        .map(|&b| if b == 0 { b'/' } else { b })
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// The looks of one session at the directory its agent works in.
#[derive(Debug)]
pub(crate) struct Watch {
    dir: PathBuf,
    /// The paths of `new`'s `skip`, and `.git`: a checkout's own store is git's to tell (an
    /// agent's commit shows as the files it changed, not as thousands of objects).
    skip: Vec<&'static str>,
    state: Mutex<WatchState>,
}

#[derive(Debug, Default)]
struct WatchState {
    first: Option<Arc<Snapshot>>,
    last: Option<Arc<Snapshot>>,
    git: Option<WorkspaceGit>,
}

impl Watch {
    pub(crate) fn new(dir: &Path, skip: &'static [&'static str]) -> Watch {
        Watch {
            dir: dir.to_path_buf(),
            skip: skip.iter().copied().chain([".git"]).collect(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A look before a task; the first of the session also reads the git state.
    pub(crate) fn before_task(&self) -> Arc<Snapshot> {
        let last = self.state().last.clone();
        let snapshot = Arc::new(match &last {
            Some(last) => last.retake(&self.dir, &self.skip),
            None => Snapshot::take(&self.dir, &self.skip),
        });
        let mut state = self.state();
        if state.first.is_none() {
            state.first = Some(snapshot.clone());
            state.git = git_state(&self.dir);
        }
        state.last = Some(snapshot.clone());
        snapshot
    }

    /// A look after a task, and what the task changed since `before`.
    pub(crate) fn after_task(&self, before: &Snapshot) -> WorkspaceChanges {
        let after = Arc::new(before.retake(&self.dir, &self.skip));
        let changes = before.changes_to(&after);
        self.state().last = Some(after);
        changes
    }

    /// What the whole session changed (absent when no task ran), and its git state.
    pub(crate) fn session(&self) -> (Option<WorkspaceChanges>, Option<WorkspaceGit>) {
        let state = self.state();
        let changes = match (&state.first, &state.last) {
            (Some(first), Some(last)) => Some(first.changes_to(last)),
            _ => None,
        };
        (changes, state.git.clone())
    }
}

/// The most bytes read of `HEAD`, a ref or `packed-refs`.
const GIT_FILE_MAX: u64 = 1 << 20;
/// The most symbolic refs followed from `HEAD`.
const GIT_REF_HOPS: usize = 5;

/// When `dir` is a git checkout (`.git` a directory, or a file `gitdir: <path>`): the commit
/// `HEAD` names, read from `HEAD`, the loose ref it points to or `packed-refs` (a linked
/// worktree's refs in its `commondir`), and the branch. `None` when `dir` is not a checkout,
/// or `HEAD` names no commit yet (an unborn branch) or cannot be read. `clean`: whether no
/// tracked file differs from `HEAD`, staged or not (untracked files do not count), as `gix`
/// computes it from the index and the object store; absent when `gix` cannot tell (a
/// repository it cannot open or read).
pub fn git_state(dir: &Path) -> Option<WorkspaceGit> {
    let mut state = git_head(dir)?;
    state.clean = gix::open(dir)
        .ok()
        .and_then(|repo| repo.is_dirty().ok())
        .map(|dirty| !dirty);
    Some(state)
}

/// [`git_state`] without `clean`: `HEAD` read from `.git` directly.
fn git_head(dir: &Path) -> Option<WorkspaceGit> {
    let dot_git = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        let text = read_small(&dot_git)?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        dir.join(target)
    } else {
        return None;
    };
    let common = match read_small(&git_dir.join("commondir")) {
        Some(common) => git_dir.join(common.trim()),
        None => git_dir.clone(),
    };
    let mut text = read_small(&git_dir.join("HEAD"))?;
    let mut branch = None;
    for _ in 0..GIT_REF_HOPS {
        let line = text.trim();
        let Some(name) = line.strip_prefix("ref:") else {
            return is_object_id(line).then(|| WorkspaceGit {
                commit: line.to_ascii_lowercase(),
                branch,
                clean: None,
            });
        };
        let name = name.trim();
        if !is_ref_name(name) {
            return None;
        }
        branch.get_or_insert_with(|| name.strip_prefix("refs/heads/").unwrap_or(name).to_string());
        text = match read_small(&git_dir.join(name)).or_else(|| read_small(&common.join(name))) {
            Some(text) => text,
            None => packed_ref(&common, name)?,
        };
    }
    None
}

fn read_small(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(GIT_FILE_MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The commit `packed-refs` gives `name`.
fn packed_ref(common: &Path, name: &str) -> Option<String> {
    let text = read_small(&common.join("packed-refs"))?;
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with('^'))
        .find_map(|line| {
            let (id, reference) = line.split_once(' ')?;
            (reference.trim() == name).then(|| id.to_string())
        })
}

/// A sha1 or sha256 object id in hex.
fn is_object_id(text: &str) -> bool {
    (text.len() == 40 || text.len() == 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A ref name beneath `refs/` (or `HEAD`-like plain names): no way out of the git directory.
fn is_ref_name(name: &str) -> bool {
    let path = Path::new(name);
    !name.is_empty()
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::fs;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn created_modified_deleted_are_listed_with_sizes_and_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("keep.txt"), b"same").unwrap();
        fs::write(root.join("edit.txt"), b"old text").unwrap();
        fs::write(root.join("gone.txt"), b"bye").unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        fs::write(root.join("sub/touched.txt"), b"untouched bytes").unwrap();
        let before = Snapshot::take(root, &[]);
        fs::write(root.join("edit.txt"), b"new text!").unwrap();
        fs::remove_file(root.join("gone.txt")).unwrap();
        fs::write(root.join("sub/new.txt"), b"fresh").unwrap();
        // Same bytes, new times: not a change.
        fs::write(root.join("sub/touched.txt"), b"untouched bytes").unwrap();
        let after = before.retake(root, &[]);
        let changes = before.changes_to(&after);
        assert_eq!(
            changes.created,
            vec![FileCreated {
                path: "sub/new.txt".into(),
                size: 5,
                sha256: Some(sha(b"fresh")),
                link: false,
            }]
        );
        assert_eq!(
            changes.modified,
            vec![FileModified {
                path: "edit.txt".into(),
                size_before: 8,
                size_after: 9,
                sha256_before: Some(sha(b"old text")),
                sha256_after: Some(sha(b"new text!")),
                link: false,
            }]
        );
        assert_eq!(
            changes.deleted,
            vec![FileDeleted {
                path: "gone.txt".into(),
                size: 3,
                sha256_before: Some(sha(b"bye")),
                link: false,
            }]
        );
        assert!(!changes.truncated);
        assert_eq!(
            changes.summary(),
            "3 files changed: 1 created, 1 modified, 1 deleted"
        );
        // The runtime's own entries are never the agent's changes.
        fs::write(root.join("trace.jsonl"), b"{}").unwrap();
        fs::create_dir(root.join("logs")).unwrap();
        fs::write(root.join("logs/shell-0001.log"), b"x").unwrap();
        let skip = ["trace.jsonl", "logs"];
        let again = after.retake(root, &skip);
        assert_eq!(after.changes_to(&again).summary(), "no files changed");
    }

    #[test]
    fn a_starred_skip_leaves_out_a_name_one_directory_down_and_no_deeper() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let skip = [".murmur-scratch", "*/.murmur-scratch"];
        let before = Snapshot::take(root, &skip);
        for path in [
            "alice/.murmur-scratch",
            "bob/.murmur-scratch",
            "bob/deep/.murmur-scratch",
            ".murmur-scratch",
        ] {
            fs::create_dir_all(root.join(path)).unwrap();
            fs::write(root.join(path).join("shell-0001.log"), b"log").unwrap();
        }
        fs::write(root.join("alice/notes.md"), b"mine").unwrap();
        let changes = before.changes_to(&before.retake(root, &skip));
        let paths: Vec<&str> = changes.created.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            ["alice/notes.md", "bob/deep/.murmur-scratch/shell-0001.log"],
            "{changes:?}"
        );
    }

    #[test]
    fn a_link_pointing_outside_is_recorded_as_a_link_and_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"outside bytes").unwrap();
        fs::create_dir(outside.path().join("tree")).unwrap();
        fs::write(outside.path().join("tree/deep.txt"), b"deep").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let before = Snapshot::take(root, &[]);
        let target = outside.path().join("secret");
        std::os::unix::fs::symlink(&target, root.join("planted")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("tree"), root.join("dirlink")).unwrap();
        let after = before.retake(root, &[]);
        let changes = before.changes_to(&after);
        let target_text = target.as_os_str().as_bytes();
        let paths: Vec<&str> = changes.created.iter().map(|c| c.path.as_str()).collect();
        // Only the links themselves: nothing beneath `dirlink`, nothing of `secret`'s bytes.
        assert_eq!(paths, ["dirlink", "planted"]);
        let planted = &changes.created[1];
        assert!(planted.link);
        assert_eq!(planted.size, target_text.len() as u64);
        assert_eq!(planted.sha256, Some(sha(target_text)));
        assert_ne!(planted.sha256, Some(sha(b"outside bytes")));
        // Replacing the target's bytes is no change in the directory.
        fs::write(&target, b"other outside bytes").unwrap();
        let later = after.retake(root, &[]);
        assert_eq!(after.changes_to(&later).counts, ChangeCounts::default());
    }

    #[test]
    fn past_the_entry_bound_the_result_says_truncated_and_claims_nothing_beyond() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Directories of many empty files: past ENTRIES_MAX in all.
        for d in 0..11 {
            let sub = root.join(format!("d{d:02}"));
            fs::create_dir(&sub).unwrap();
            for f in 0..10_000 {
                fs::File::create(sub.join(format!("{f:05}"))).unwrap();
            }
        }
        let before = Snapshot::take(root, &[]);
        assert!(before.truncated());
        assert_eq!(before.files(), ENTRIES_MAX - 10);
        // One change the walk sees, one past its reach.
        fs::write(root.join("d00/00001"), b"seen").unwrap();
        fs::remove_file(root.join("d10/09999")).unwrap();
        let after = before.retake(root, &[]);
        let changes = before.changes_to(&after);
        assert!(changes.truncated);
        assert_eq!(changes.truncated_by, ["entries"]);
        assert_eq!(
            changes.counts,
            ChangeCounts {
                created: 0,
                modified: 1,
                deleted: 0
            }
        );
        assert_eq!(changes.modified[0].path, "d00/00001");
        assert_eq!(
            changes.summary(),
            "1 file changed: 1 modified (truncated: entries)"
        );
    }

    #[test]
    fn too_deep_a_tree_is_unseen_not_reported_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut deep = dir.path().to_path_buf();
        for _ in 0..DEPTH_MAX + 2 {
            deep.push("d");
        }
        fs::create_dir_all(&deep).unwrap();
        fs::write(deep.join("f"), b"x").unwrap();
        let before = Snapshot::take(dir.path(), &[]);
        fs::remove_file(deep.join("f")).unwrap();
        let changes = before.changes_to(&before.retake(dir.path(), &[]));
        assert_eq!(changes.truncated_by, ["depth"]);
        assert_eq!(changes.counts, ChangeCounts::default());
    }

    #[test]
    fn a_large_file_has_no_before_hash_at_the_first_look_but_is_still_seen_modified() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![7u8; FIRST_HASH_MAX as usize + 1];
        fs::write(dir.path().join("big"), &big).unwrap();
        let before = Snapshot::take(dir.path(), &[]);
        let mut bigger = big.clone();
        bigger.push(1);
        fs::write(dir.path().join("big"), &bigger).unwrap();
        let changes = before.changes_to(&before.retake(dir.path(), &[]));
        let modified = &changes.modified[0];
        assert_eq!(modified.sha256_before, None);
        assert_eq!(modified.sha256_after, Some(sha(&bigger)));
    }

    #[test]
    fn a_same_size_rewrite_in_the_same_clock_tick_is_still_seen() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), b"aaaa").unwrap();
        let before = Snapshot::take(dir.path(), &[]);
        fs::write(dir.path().join("f"), b"bbbb").unwrap();
        let changes = before.changes_to(&before.retake(dir.path(), &[]));
        assert_eq!(changes.counts.modified, 1);
    }

    #[test]
    fn a_real_checkout_is_clean_until_a_tracked_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "init.defaultBranch=trunk",
                ])
                .args(args)
                .current_dir(dir.path())
                .status()
                .expect("git on PATH");
            assert!(status.success());
        };
        git(&["init", "-q"]);
        fs::write(dir.path().join("a.txt"), b"one").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "first"]);
        let head = fs::read_to_string(dir.path().join(".git/refs/heads/trunk")).unwrap();
        let state = git_state(dir.path()).unwrap();
        assert_eq!(state.commit, head.trim());
        assert_eq!(state.branch.as_deref(), Some("trunk"));
        assert_eq!(state.clean, Some(true));
        // An untracked file leaves it clean; a changed tracked file does not.
        fs::write(dir.path().join("new.txt"), b"x").unwrap();
        assert_eq!(git_state(dir.path()).unwrap().clean, Some(true));
        fs::write(dir.path().join("a.txt"), b"two").unwrap();
        assert_eq!(git_state(dir.path()).unwrap().clean, Some(false));
        // Staged counts too.
        git(&["add", "a.txt"]);
        assert_eq!(git_state(dir.path()).unwrap().clean, Some(false));
    }

    #[test]
    fn git_state_reads_head_loose_and_packed_refs_and_a_gitdir_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(git_state(root), None);
        let git = root.join(".git");
        fs::create_dir_all(git.join("refs/heads")).unwrap();
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        // Unborn branch: no commit yet.
        assert_eq!(git_state(root), None);
        let packed = "a".repeat(40);
        fs::write(
            git.join("packed-refs"),
            format!("# pack-refs with: peeled\n{packed} refs/heads/main\n"),
        )
        .unwrap();
        let state = git_state(root).unwrap();
        assert_eq!(state.commit, packed);
        assert_eq!(state.branch.as_deref(), Some("main"));
        let loose = "b".repeat(40);
        fs::write(git.join("refs/heads/main"), format!("{loose}\n")).unwrap();
        assert_eq!(git_state(root).unwrap().commit, loose);
        let detached = "c".repeat(40);
        fs::write(git.join("HEAD"), format!("{detached}\n")).unwrap();
        assert_eq!(git_state(root).unwrap().branch, None);
        // A ref name that climbs out of the git directory is not read.
        fs::write(git.join("HEAD"), "ref: ../../etc/passwd\n").unwrap();
        assert_eq!(git_state(root), None);
        // A worktree: `.git` a file naming the git directory.
        let worktree = tempfile::tempdir().unwrap();
        fs::write(
            worktree.path().join(".git"),
            format!("gitdir: {}\n", git.display()),
        )
        .unwrap();
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_state(worktree.path()).unwrap().commit, loose);
    }

    #[derive(Debug, Clone)]
    enum Op {
        File(u8, Vec<u8>),
        Dir(u8),
        Link(u8, u8),
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..64))
                .prop_map(|(n, b)| Op::File(n, b)),
            any::<u8>().prop_map(Op::Dir),
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Link(a, b)),
            any::<u8>().prop_map(Op::Remove),
        ]
    }

    fn name(n: u8) -> PathBuf {
        // A few names nested a few deep, so ops collide and kinds change under one path.
        let mut path = PathBuf::new();
        for part in [n % 3, n / 3 % 3, n / 9 % 3]
            .iter()
            .take(1 + (n as usize / 27) % 3)
        {
            path.push(format!("n{part}"));
        }
        path
    }

    fn apply(root: &Path, op: &Op) {
        let _ = match op {
            Op::File(n, bytes) => fs::write(root.join(name(*n)), bytes),
            Op::Dir(n) => fs::create_dir_all(root.join(name(*n))),
            Op::Link(n, t) => std::os::unix::fs::symlink(name(*t), root.join(name(*n))),
            Op::Remove(n) => fs::remove_file(root.join(name(*n)))
                .or_else(|_| fs::remove_dir_all(root.join(name(*n)))),
        };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random trees and random edits: never a panic, and the counts add up to what the
        /// lists say when nothing is truncated.
        #[test]
        fn random_trees_never_panic(first in proptest::collection::vec(op(), 0..24),
                                    then in proptest::collection::vec(op(), 0..24)) {
            let dir = tempfile::tempdir().unwrap();
            for op in &first { apply(dir.path(), op); }
            let before = Snapshot::take(dir.path(), &["n0/n1"]);
            for op in &then { apply(dir.path(), op); }
            let after = before.retake(dir.path(), &["n0/n1"]);
            let changes = before.changes_to(&after);
            prop_assert!(!changes.truncated);
            prop_assert_eq!(changes.counts.created as usize, changes.created.len());
            prop_assert_eq!(changes.counts.modified as usize, changes.modified.len());
            prop_assert_eq!(changes.counts.deleted as usize, changes.deleted.len());
            prop_assert_eq!(after.changes_to(&after.retake(dir.path(), &["n0/n1"])).counts,
                            ChangeCounts::default());
        }
    }
}
