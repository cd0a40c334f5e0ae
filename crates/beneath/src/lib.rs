//! A directory the host acts in on behalf of sandboxed code: every path resolves beneath it,
//! and no symbolic link is ever followed.
//!
//! What this module promises:
//!
//! - **Beneath, or not at all.** A [`BeneathDir`] is an open directory handle. Every path given
//!   to it is relative, made only of plain names (no `..`, no absolute path, no NUL), and is
//!   walked one component at a time from the handle with `O_NOFOLLOW`, so a symbolic link
//!   anywhere on the way (a directory or the last name) stops the access with
//!   [`BeneathError::Symlink`]. Nothing a component, a shell child or a hook planted in the
//!   directory (a link `out -> ../../victim`, a link `logs/hook-x.log -> /etc/passwd`) makes the
//!   host read or write outside it. The walk holds descriptors, so renaming things under it
//!   while it runs cannot redirect it either.
//! - **Regular files only, with a size cap.** Reads open only regular files (a FIFO, a device,
//!   a socket or a directory is [`BeneathError::NotRegular`], and opening never blocks on a
//!   FIFO), refuse a file with other hard links, and read at most the limit the caller names
//!   ([`BeneathError::TooLarge`]): a planted `/dev/zero` or a huge file costs nothing.
//! - **The host's own files are replaced, never written through.** [`BeneathDir::write_whole`]
//!   writes a temporary file and renames it over the name, so whatever was planted at that name
//!   (a link, a FIFO, a hard link to another file) is replaced, not followed.
//!   [`BeneathDir::append`] appends only to a regular file with no other links, and replaces
//!   anything else planted at the name with a new file. A planted directory at the name, or a
//!   link where a parent directory should be, fails the write with the reason.
//!
//! Linux and other Unix systems: the walk uses `openat`, `mkdirat`, `renameat` and `unlinkat`
//! relative to descriptors the handle owns.

use std::fmt;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Why an access beneath a [`BeneathDir`] was refused or failed. Each names the path as given
/// (relative to the directory).
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error("`{path}` is not a plain relative path: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("`{path}` passes through a symbolic link (links in the workdir are never followed)")]
    Symlink { path: String },
    #[error("`{path}` is {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    #[error("`{path}` has other hard links; the host reads and appends only to files of its own")]
    Linked { path: String },
    #[error("`{path}` is over the {limit} byte limit")]
    TooLarge { path: String, limit: u64 },
    #[error("`{path}` does not exist")]
    NotFound { path: String },
    #[error("`{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl BeneathError {
    /// The error as an `std::io::Error` (kind `NotFound` for a missing path, `InvalidInput` for
    /// refusals), for callers that report I/O failures.
    pub fn into_io(self) -> std::io::Error {
        let kind = match &self {
            BeneathError::NotFound { .. } => std::io::ErrorKind::NotFound,
            BeneathError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, self)
    }

    /// An error opening the directory itself.
    pub fn from_io(source: std::io::Error) -> BeneathError {
        BeneathError::Io {
            path: ".".to_string(),
            source,
        }
    }

    /// The `BeneathError` an `std::io::Error` made by [`BeneathError::into_io`] carries.
    pub fn inside(error: &std::io::Error) -> Option<&BeneathError> {
        error.get_ref()?.downcast_ref::<BeneathError>()
    }
}

impl From<BeneathError> for std::io::Error {
    fn from(error: BeneathError) -> std::io::Error {
        error.into_io()
    }
}

/// An open directory; see the module doc for what every access through it promises.
pub struct BeneathDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl AsFd for BeneathDir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl fmt::Debug for BeneathDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeneathDir")
            .field("path", &self.path)
            .finish()
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl BeneathDir {
    /// Opens `path`, a directory the host chose (it may be reached through links: only what
    /// lies beneath it is untrusted).
    pub fn open(path: &Path) -> std::io::Result<BeneathDir> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(BeneathDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path the directory was opened at (for messages and for handing to child processes).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel`'s bytes, when it is a regular file of at most `limit` bytes with no other links.
    pub fn read(&self, rel: impl AsRef<Path>, limit: u64) -> Result<Vec<u8>, BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.walk(rel, false)?;
        let shown = show(rel);
        let fd = rustix::fs::openat(
            parent.as_fd(),
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| from_errno(errno, &shown))?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| from_errno(errno, &shown))?;
        check_regular(&stat, &shown)?;
        if stat.st_size as u64 > limit {
            return Err(BeneathError::TooLarge { path: shown, limit });
        }
        let mut bytes = Vec::with_capacity(stat.st_size as usize);
        std::fs::File::from(fd)
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| BeneathError::Io {
                path: shown.clone(),
                source,
            })?;
        if bytes.len() as u64 > limit {
            return Err(BeneathError::TooLarge { path: shown, limit });
        }
        Ok(bytes)
    }

    /// Writes `bytes` as the whole of `rel`, creating its parent directories: a temporary file
    /// beside it, renamed over the name (so whatever was at the name is replaced, not followed).
    pub fn write_whole(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.walk(rel, true)?;
        let shown = show(rel);
        let io = |source: std::io::Error| BeneathError::Io {
            path: shown.clone(),
            source,
        };
        let temp = format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple());
        let fd = rustix::fs::openat(
            parent.as_fd(),
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|errno| io(errno.into()))?;
        let written = std::fs::File::from(fd).write_all(bytes);
        let renamed = written.map_err(io).and_then(|()| {
            rustix::fs::renameat(parent.as_fd(), temp.as_str(), parent.as_fd(), name.as_str())
                .map_err(|errno| match errno {
                    Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST => BeneathError::NotRegular {
                        path: shown.clone(),
                        kind: "a directory",
                    },
                    errno => io(errno.into()),
                })
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(parent.as_fd(), temp.as_str(), AtFlags::empty());
        }
        renamed
    }

    /// Appends `bytes` to `rel` (created, with its parent directories, when missing). Anything
    /// at the name that is not a regular file of its own (a link, a FIFO, a file with other
    /// hard links) is removed first and a new file made in its place.
    pub fn append(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        self.open_append(rel)?
            .write_all(bytes)
            .map_err(|source| BeneathError::Io {
                path: show(rel),
                source,
            })
    }

    /// `rel` opened for appending, as [`BeneathDir::append`] opens it.
    pub fn open_append(&self, rel: impl AsRef<Path>) -> Result<std::fs::File, BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.walk(rel, true)?;
        let shown = show(rel);
        let io = |source: std::io::Error| BeneathError::Io {
            path: shown.clone(),
            source,
        };
        let flags = OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        let mode = Mode::from_raw_mode(0o644);
        let directory = || BeneathError::NotRegular {
            path: shown.clone(),
            kind: "a directory",
        };
        let own = match rustix::fs::openat(parent.as_fd(), name.as_str(), flags, mode) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd).map_err(|errno| io(errno.into()))?;
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::RegularFile if stat.st_nlink == 1 => Some(fd),
                    FileType::Directory => return Err(directory()),
                    _ => None,
                }
            }
            // A link at the name (`O_NOFOLLOW`), or a FIFO with no reader (`O_NONBLOCK`).
            Err(Errno::LOOP | Errno::NXIO) => None,
            Err(Errno::ISDIR) => return Err(directory()),
            Err(errno) => return Err(io(errno.into())),
        };
        let fd = match own {
            Some(fd) => fd,
            None => {
                rustix::fs::unlinkat(parent.as_fd(), name.as_str(), AtFlags::empty())
                    .map_err(|errno| io(errno.into()))?;
                rustix::fs::openat(parent.as_fd(), name.as_str(), flags | OFlags::EXCL, mode)
                    .map_err(|errno| io(errno.into()))?
            }
        };
        // Appends are ordinary blocking writes from here on.
        rustix::fs::fcntl_setfl(&fd, OFlags::APPEND).map_err(|errno| io(errno.into()))?;
        Ok(std::fs::File::from(fd))
    }

    /// Creates `rel` and its missing parents as directories (an existing directory is fine; a
    /// link or a file on the way is refused).
    pub fn create_dir_all(&self, rel: impl AsRef<Path>) -> Result<(), BeneathError> {
        self.subdir(rel, true).map(drop)
    }

    /// The directory `rel` as a handle of its own (created with its parents when `create`).
    pub fn subdir(&self, rel: impl AsRef<Path>, create: bool) -> Result<BeneathDir, BeneathError> {
        let rel = rel.as_ref();
        let names = names(rel)?;
        let mut dir = self.fd.try_clone().map_err(|source| BeneathError::Io {
            path: show(rel),
            source,
        })?;
        for (depth, name) in names.iter().enumerate() {
            let so_far = names[..=depth].join("/");
            dir = enter(&dir, name, create, &so_far)?;
        }
        Ok(BeneathDir {
            fd: dir,
            path: self.path.join(rel),
        })
    }

    /// The regular files beneath the directory `rel`, depth-first with names sorted, at most
    /// `max` of them and 8 directories deep: each with its path relative to this directory and
    /// what tells one version of it from another. A link, or anything that is neither a regular
    /// file nor a directory, is passed over and never followed.
    pub fn files(&self, rel: impl AsRef<Path>, max: usize) -> Result<Vec<FileStamp>, BeneathError> {
        let rel = rel.as_ref();
        let top = self.subdir(rel, false)?;
        let mut found = Vec::new();
        collect_files(top.fd, rel.to_path_buf(), 0, max, &mut found)?;
        Ok(found)
    }

    /// Removes `rel` from beneath the directory: a file, a link (the link, never what it
    /// points to), or, with `dir`, an empty directory. A link on the way stops it, as every
    /// access.
    pub fn remove(&self, rel: impl AsRef<Path>, dir: bool) -> Result<(), BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.walk(rel, false)?;
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        rustix::fs::unlinkat(parent.as_fd(), name.as_str(), flags)
            .map_err(|errno| from_errno(errno, &show(rel)))
    }

    /// Removes the directory `rel` and everything beneath it, at most `max` entries and 16
    /// directories deep: links are removed as links (never followed), nothing outside is
    /// touched. Gives how many entries were removed; a tree past a bound is left in part, and
    /// `rel` stays when anything beneath it does. A `rel` that is not there is no error.
    pub fn remove_tree(&self, rel: impl AsRef<Path>, max: usize) -> Result<usize, BeneathError> {
        let rel = rel.as_ref();
        let (parent, name) = self.walk(rel, false)?;
        let dir = match rustix::fs::openat(parent.as_fd(), name.as_str(), DIR_FLAGS, Mode::empty())
        {
            Ok(dir) => dir,
            Err(Errno::NOENT) => return Ok(0),
            Err(errno) => return Err(from_errno(errno, &show(rel))),
        };
        let mut removed = 0;
        empty_tree(&dir, 0, max, &mut removed);
        match rustix::fs::unlinkat(parent.as_fd(), name.as_str(), AtFlags::REMOVEDIR) {
            Ok(()) => Ok(removed + 1),
            Err(Errno::NOTEMPTY) => Ok(removed),
            Err(errno) => Err(from_errno(errno, &show(rel))),
        }
    }

    /// Whether `rel` names a regular file beneath the directory (no link on the way).
    pub fn is_file(&self, rel: impl AsRef<Path>) -> bool {
        let rel = rel.as_ref();
        let Ok((parent, name)) = self.walk(rel, false) else {
            return false;
        };
        rustix::fs::statat(parent.as_fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile)
    }

    /// The directory holding `rel`'s last name (created when `create`), and that name.
    fn walk(&self, rel: &Path, create: bool) -> Result<(OwnedFd, String), BeneathError> {
        let mut names = names(rel)?;
        let Some(last) = names.pop() else {
            return Err(BeneathError::BadPath {
                path: show(rel),
                reason: "it names the directory itself, not a file",
            });
        };
        let mut dir = self.fd.try_clone().map_err(|source| BeneathError::Io {
            path: show(rel),
            source,
        })?;
        for (depth, name) in names.iter().enumerate() {
            let so_far = names[..=depth].join("/");
            dir = enter(&dir, name, create, &so_far)?;
        }
        Ok((dir, last))
    }
}

/// A regular file [`BeneathDir::files`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// Relative to the [`BeneathDir`] it was found beneath.
    pub path: PathBuf,
    pub len: u64,
    /// Nanoseconds since the epoch.
    pub modified_ns: i128,
    pub inode: u64,
}

/// The deepest [`BeneathDir::files`] goes below the directory it lists.
const FILES_DEPTH: usize = 8;

fn collect_files(
    dir: OwnedFd,
    at: PathBuf,
    depth: usize,
    max: usize,
    found: &mut Vec<FileStamp>,
) -> Result<(), BeneathError> {
    let shown = show(&at);
    let mut names: Vec<String> = Vec::new();
    let listing = rustix::fs::Dir::read_from(&dir).map_err(|errno| from_errno(errno, &shown))?;
    for entry in listing {
        let entry = entry.map_err(|errno| from_errno(errno, &shown))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        if found.len() >= max {
            return Ok(());
        }
        let Ok(stat) = rustix::fs::statat(dir.as_fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        let path = at.join(&name);
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => found.push(FileStamp {
                path,
                len: stat.st_size as u64,
                modified_ns: stat.st_mtime as i128 * 1_000_000_000 + stat.st_mtime_nsec as i128,
                inode: stat.st_ino,
            }),
            FileType::Directory if depth < FILES_DEPTH => {
                if let Ok(sub) =
                    rustix::fs::openat(dir.as_fd(), name.as_str(), DIR_FLAGS, Mode::empty())
                {
                    collect_files(sub, path, depth + 1, max, found)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes what `dir` holds, depth-first, into `removed` (at most `max`, 16 directories deep);
/// what cannot be removed stays.
fn empty_tree(dir: &OwnedFd, depth: usize, max: usize, removed: &mut usize) {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let names: Vec<String> = listing
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "." && name != "..")
        .collect();
    for name in names {
        if *removed >= max {
            return;
        }
        let is_dir = rustix::fs::statat(dir.as_fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory);
        if is_dir {
            if depth < 16
                && let Ok(sub) =
                    rustix::fs::openat(dir.as_fd(), name.as_str(), DIR_FLAGS, Mode::empty())
            {
                empty_tree(&sub, depth + 1, max, removed);
            }
            if rustix::fs::unlinkat(dir.as_fd(), name.as_str(), AtFlags::REMOVEDIR).is_ok() {
                *removed += 1;
            }
        } else if rustix::fs::unlinkat(dir.as_fd(), name.as_str(), AtFlags::empty()).is_ok() {
            *removed += 1;
        }
    }
}

/// Opens the directory `name` in `dir` without following a link (creating it when `create`).
fn enter(dir: &OwnedFd, name: &str, create: bool, shown: &str) -> Result<OwnedFd, BeneathError> {
    match rustix::fs::openat(dir.as_fd(), name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) if create => {
            match rustix::fs::mkdirat(dir.as_fd(), name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(errno) => return Err(from_errno(errno, shown)),
            }
            rustix::fs::openat(dir.as_fd(), name, DIR_FLAGS, Mode::empty())
                .map_err(|errno| from_errno(errno, shown))
        }
        // `O_DIRECTORY | O_NOFOLLOW` on a link answers ENOTDIR on Linux: say which it was.
        Err(Errno::NOTDIR) => {
            let link = rustix::fs::statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink);
            Err(if link {
                BeneathError::Symlink {
                    path: shown.to_string(),
                }
            } else {
                from_errno(Errno::NOTDIR, shown)
            })
        }
        Err(errno) => Err(from_errno(errno, shown)),
    }
}

/// The plain names `rel` is made of (`.` components dropped), or why it is not a plain
/// relative path.
fn names(rel: &Path) -> Result<Vec<String>, BeneathError> {
    let bad = |reason| BeneathError::BadPath {
        path: show(rel),
        reason,
    };
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::CurDir => {}
            Component::Normal(name) => {
                let name = name.to_str().ok_or_else(|| bad("it is not UTF-8"))?;
                if name.contains('\0') {
                    return Err(bad("it holds a NUL byte"));
                }
                names.push(name.to_string());
            }
            Component::ParentDir => return Err(bad("it climbs with `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(bad("it is absolute")),
        }
    }
    Ok(names)
}

fn show(rel: &Path) -> String {
    rel.display().to_string()
}

/// What a failed `openat` with `O_NOFOLLOW` means for `shown`.
fn from_errno(errno: Errno, shown: &str) -> BeneathError {
    match errno {
        // `O_NOFOLLOW` on a link gives ELOOP.
        Errno::LOOP => BeneathError::Symlink {
            path: shown.to_string(),
        },
        Errno::NOTDIR => BeneathError::NotRegular {
            path: shown.to_string(),
            kind: "not a directory",
        },
        Errno::NOENT => BeneathError::NotFound {
            path: shown.to_string(),
        },
        Errno::NXIO => BeneathError::NotRegular {
            path: shown.to_string(),
            kind: "a FIFO or a device",
        },
        errno => BeneathError::Io {
            path: shown.to_string(),
            source: errno.into(),
        },
    }
}

fn check_regular(stat: &rustix::fs::Stat, shown: &str) -> Result<(), BeneathError> {
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {
            if stat.st_nlink > 1 {
                return Err(BeneathError::Linked {
                    path: shown.to_string(),
                });
            }
            return Ok(());
        }
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        FileType::Symlink => {
            return Err(BeneathError::Symlink {
                path: shown.to_string(),
            });
        }
        FileType::Unknown => "of an unknown kind",
    };
    Err(BeneathError::NotRegular {
        path: shown.to_string(),
        kind,
    })
}

#[cfg(test)]
mod tests;
