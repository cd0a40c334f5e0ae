//! Artifact archives: what `mur build` packs and what installing unpacks.
//!
//! An archive is a gzip-compressed tar holding two files: the artifact's manifest, at the root
//! as `murmur.yaml` whatever the file was called on disk, and the one file its runtime uses,
//! under its path relative to the artifact directory: the component for a tool, driver, hook or
//! capsule (`component:`, default `component.wasm`), the markdown text for a skill (`skill:`,
//! default `skill.md`). Nothing else goes in: sources, build output and hidden files stay
//! behind. The sha256 of the archive's bytes ([`Packed::sha256`]) is the artifact's identity.
//!
//! What [`pack`] promises:
//!
//! - The same manifest and file bytes give the same archive bytes, whatever the files' times,
//!   owners and permissions on disk, and whoever packs them: entries sorted by path, tar headers
//!   with time 0, owner 0, no owner names and mode 0o644, gzip at a fixed level with no file name,
//!   time 0 and no operating system.
//! - It does not build: the component must already be there (see [`crate::source`]). A missing
//!   component is `E-RUN-008`, a missing skill text `E-MAN-023`, and a `component:` or `skill:`
//!   pointing out of the artifact directory `E-REG-002`.
//! - What it packs, [`unpack`] accepts with the default [`UnpackLimits`] (a file over them is
//!   refused when packing, `E-REG-003`).
//!
//! What [`unpack`] promises, for any bytes at all:
//!
//! - Everything is written into a fresh temporary directory beside `dest` and renamed to `dest`
//!   only once the whole archive passed. On any refusal or failure neither `dest` nor the
//!   temporary directory is left behind, and nothing was written anywhere else.
//! - Malformed or unsafe archives are refused with `E-REG-002`: bytes that are not a
//!   gzip-compressed tar (a bad checksum, a truncated entry, a bad gzip checksum); an entry path
//!   that is empty, absolute, climbs with `..`, or holds a NUL, a backslash or a `:`; an entry
//!   that is not a regular file or a directory (links, devices, FIFOs, sparse files); a path that
//!   appears twice, or both as a file and as a directory; no `murmur.yaml` at the root.
//! - Archives over a limit are refused with `E-REG-003`: more members than
//!   [`UnpackLimits::max_entries`], a file over [`UnpackLimits::max_file_bytes`], a total over
//!   [`UnpackLimits::max_total_bytes`], oversized name records, or too much after the end of the
//!   tar. Sizes are checked against the headers before reading and against the bytes actually
//!   decompressed while copying, so a gzip bomb is stopped while it is read.
//! - Files are written 0o644 and directories 0o755 (on Unix), never over anything: no time,
//!   owner or permission from the archive is kept.
//! - A `dest` that already exists, or a write that fails, is `E-REG-001`.
//! - Error messages quote entry paths with escapes, so an archive cannot put control characters
//!   on a terminal.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use murmur_manifest::artifact::{DEFAULT_COMPONENT, DEFAULT_SKILL, Runtime};
use sha2::{Digest, Sha256};

use crate::source::LocalArtifact;
use murmur_manifest::Coded;

/// The manifest's name inside an archive.
pub(crate) const MANIFEST_NAME: &str = "murmur.yaml";
/// The gzip level every archive is compressed at; part of what makes packing reproducible.
const GZIP_LEVEL: u32 = 9;
/// The gzip header's "unknown" operating system, so archives do not depend on the packer's.
const GZIP_UNKNOWN_OS: u8 = 255;
/// The longest GNU long-name record unpacking reads.
const MAX_NAME_BYTES: u64 = 4096;
/// The longest pax header record unpacking reads.
const MAX_PAX_BYTES: u64 = 64 * 1024;
/// How many bytes may follow the end of the tar inside the gzip stream (tar pads to 10 KiB).
const MAX_TRAILING_BYTES: u64 = 1024 * 1024;
/// How much is copied at a time.
const COPY_CHUNK: usize = 64 * 1024;

/// An archive made by [`pack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// The archive itself: a gzip-compressed tar.
    pub bytes: Vec<u8>,
    /// The lowercase hex sha256 of `bytes`: the artifact's identity.
    pub sha256: String,
    /// The relative paths of the files inside, in archive order.
    pub files: Vec<String>,
}

/// How much [`unpack`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// The most members (files, directories, pax global headers) an archive may have.
    pub max_entries: usize,
    /// The most bytes one file may have.
    pub max_file_bytes: u64,
    /// The most bytes all files together may have.
    pub max_total_bytes: u64,
}

impl Default for UnpackLimits {
    /// 4096 entries, 64 MiB per file, 256 MiB in all.
    fn default() -> UnpackLimits {
        UnpackLimits {
            max_entries: 4096,
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
        }
    }
}

/// What [`unpack`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// Each file as (relative path with `/` separators, lowercase hex sha256 of its bytes), in
    /// archive order. Directories are not listed.
    pub files: Vec<(String, String)>,
}

/// Packing or unpacking an archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The artifact's manifest file could not be read.
    #[error("cannot read the manifest {}: {reason}", path.display())]
    ManifestUnreadable { path: PathBuf, reason: String },
    /// The component file the manifest names is missing or unreadable.
    #[error("artifact `{artifact}` has no readable component at {}: {reason}", path.display())]
    ComponentMissing {
        artifact: String,
        path: PathBuf,
        reason: String,
    },
    /// A skill's markdown file is missing or unreadable.
    #[error("skill `{artifact}` has no readable markdown file at {}: {reason}", path.display())]
    SkillMissing {
        artifact: String,
        path: PathBuf,
        reason: String,
    },
    /// `component:` or `skill:` is not a plain path inside the artifact directory.
    #[error("artifact `{artifact}` has `{field}: {}`, which cannot go in an archive: it {reason}", path.display())]
    PathNotPackable {
        artifact: String,
        field: &'static str,
        path: PathBuf,
        reason: &'static str,
    },
    /// A file to pack is bigger than unpacking accepts.
    #[error(
        "artifact `{artifact}` file {path:?} is {size} bytes, over the {limit}-byte limit an archive's file may have"
    )]
    PackedFileTooLarge {
        artifact: String,
        path: String,
        size: u64,
        limit: u64,
    },
    /// The bytes are not a gzip-compressed tar this module reads.
    #[error("the archive is malformed: {reason}")]
    Malformed { reason: String },
    /// An entry's path could lead out of the destination, or cannot be written safely.
    #[error("archive entry {path:?} {reason}")]
    UnsafePath { path: String, reason: &'static str },
    /// An entry is neither a regular file nor a directory.
    #[error("archive entry {path:?} is {kind}; only regular files and directories are unpacked")]
    NotAFile { path: String, kind: String },
    /// A path appears twice, or as a file and as a directory.
    #[error("archive entry {path:?} appears twice, or both as a file and as a directory")]
    Duplicate { path: String },
    /// There is no `murmur.yaml` file at the archive's root.
    #[error("the archive has no `murmur.yaml` file at its root")]
    NoManifest,
    /// More members than [`UnpackLimits::max_entries`].
    #[error("the archive has more than {limit} entries")]
    TooManyEntries { limit: usize },
    /// A file over [`UnpackLimits::max_file_bytes`]: by its header or by the bytes read.
    #[error(
        "archive entry {path:?} has {size} bytes or more, over the {limit}-byte limit for one file"
    )]
    FileTooLarge { path: String, size: u64, limit: u64 },
    /// The files together pass [`UnpackLimits::max_total_bytes`].
    #[error("archive entry {path:?} takes the unpacked total past the {limit}-byte limit")]
    TotalTooLarge { path: String, limit: u64 },
    /// A GNU long name or pax record longer than this module reads.
    #[error("the archive has a {record} record of {size} bytes, over its {limit}-byte limit")]
    RecordTooLarge {
        record: &'static str,
        size: u64,
        limit: u64,
    },
    /// More than 1 MiB follows the end of the tar inside the gzip stream.
    #[error("the archive goes on for more than {limit} bytes after the end of its tar")]
    TrailingTooLarge { limit: u64 },
    /// The destination exists already, or writing under it failed.
    #[error("cannot unpack into {}: {reason}", path.display())]
    Destination { path: PathBuf, reason: String },
}

impl Coded for ArchiveError {
    /// The stable diagnostic code.
    fn code(&self) -> &'static str {
        match self {
            ArchiveError::ManifestUnreadable { .. } => "E-MAN-001",
            ArchiveError::ComponentMissing { .. } => "E-RUN-008",
            ArchiveError::SkillMissing { .. } => "E-MAN-023",
            ArchiveError::PathNotPackable { .. }
            | ArchiveError::Malformed { .. }
            | ArchiveError::UnsafePath { .. }
            | ArchiveError::NotAFile { .. }
            | ArchiveError::Duplicate { .. }
            | ArchiveError::NoManifest => "E-REG-002",
            ArchiveError::PackedFileTooLarge { .. }
            | ArchiveError::TooManyEntries { .. }
            | ArchiveError::FileTooLarge { .. }
            | ArchiveError::TotalTooLarge { .. }
            | ArchiveError::RecordTooLarge { .. }
            | ArchiveError::TrailingTooLarge { .. } => "E-REG-003",
            ArchiveError::Destination { .. } => "E-REG-001",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    /// How to fix it.
    fn hint(&self) -> String {
        match self {
            ArchiveError::ManifestUnreadable { .. } => {
                "check that the file exists and can be read".to_string()
            }
            ArchiveError::ComponentMissing { .. } => {
                "build the component first (`mur build` builds from source when the manifest \
                 declares `build:`), or point `component:` at it"
                    .to_string()
            }
            ArchiveError::SkillMissing { .. } => {
                "write the skill's text beside the manifest, or point `skill:` at it".to_string()
            }
            ArchiveError::PathNotPackable { field, .. } => format!(
                "make `{field}:` a relative path inside the artifact directory, such as \
                 `{}`",
                if *field == "skill" {
                    DEFAULT_SKILL
                } else {
                    DEFAULT_COMPONENT
                }
            ),
            ArchiveError::PackedFileTooLarge { .. } => {
                "make the file smaller: unpacking refuses it".to_string()
            }
            ArchiveError::Malformed { .. }
            | ArchiveError::UnsafePath { .. }
            | ArchiveError::NotAFile { .. }
            | ArchiveError::Duplicate { .. }
            | ArchiveError::NoManifest => {
                "this is not an archive `mur build` makes: get the artifact again from a source \
                 you trust, or rebuild it with `mur build`"
                    .to_string()
            }
            ArchiveError::TooManyEntries { .. }
            | ArchiveError::FileTooLarge { .. }
            | ArchiveError::TotalTooLarge { .. }
            | ArchiveError::RecordTooLarge { .. }
            | ArchiveError::TrailingTooLarge { .. } => {
                "the archive is bigger than an artifact may be: check where it came from"
                    .to_string()
            }
            ArchiveError::Destination { .. } => {
                "remove what is at the destination, or check that its directory exists and is \
                 writable"
                    .to_string()
            }
        }
    }
}

pub use crate::sha256_hex;

/// Packs `artifact`: its manifest and the component (or skill text) it names, read as they are
/// on disk now (see the module docs).
pub fn pack(artifact: &LocalArtifact) -> Result<Packed, ArchiveError> {
    let entries = packed_files(artifact)?;
    let bytes = write_archive(&entries).map_err(|error| ArchiveError::Malformed {
        reason: format!("writing the archive failed: {error}"),
    })?;
    Ok(Packed {
        sha256: sha256_hex(&bytes),
        files: entries.into_iter().map(|(name, _)| name).collect(),
        bytes,
    })
}

/// What an artifact is made of, wherever it is stored (an archive, an OCI artifact's layers):
/// `(path inside the artifact, bytes)` for its `murmur.yaml` and the one file it loads (the
/// component, or a skill's text), sorted by path, each within the unpacking limit of one file.
pub fn packed_files(artifact: &LocalArtifact) -> Result<Vec<(String, Vec<u8>)>, ArchiveError> {
    let manifest = &artifact.manifest;
    let manifest_bytes =
        fs::read(&artifact.manifest_file).map_err(|error| ArchiveError::ManifestUnreadable {
            path: artifact.manifest_file.clone(),
            reason: error.to_string(),
        })?;
    let is_skill = manifest.runtime == Runtime::Skill;
    let (field, relative) = if is_skill {
        (
            "skill",
            manifest
                .skill
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_SKILL)),
        )
    } else {
        (
            "component",
            manifest
                .component
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_COMPONENT)),
        )
    };
    let name = packable_name(relative).map_err(|reason| ArchiveError::PathNotPackable {
        artifact: manifest.name.clone(),
        field,
        path: relative.to_path_buf(),
        reason,
    })?;
    let path = artifact.dir.join(relative);
    let payload = fs::read(&path).map_err(|error| {
        let (artifact, reason) = (manifest.name.clone(), error.to_string());
        if is_skill {
            ArchiveError::SkillMissing {
                artifact,
                path: path.clone(),
                reason,
            }
        } else {
            ArchiveError::ComponentMissing {
                artifact,
                path: path.clone(),
                reason,
            }
        }
    })?;

    let mut entries = vec![(MANIFEST_NAME.to_string(), manifest_bytes), (name, payload)];
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let limits = UnpackLimits::default();
    for (name, data) in &entries {
        let size = data.len() as u64;
        if size > limits.max_file_bytes {
            return Err(ArchiveError::PackedFileTooLarge {
                artifact: manifest.name.clone(),
                path: name.clone(),
                size,
                limit: limits.max_file_bytes,
            });
        }
    }
    Ok(entries)
}

/// The archive name of `relative` (a `component:` or `skill:` path), or why it has none.
fn packable_name(relative: &Path) -> Result<String, &'static str> {
    let mut parts: Vec<&str> = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or("is not UTF-8")?),
            Component::CurDir => {}
            Component::ParentDir => return Err("climbs out of the artifact directory with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
        }
    }
    let name = parts.join("/");
    let name = entry_path(name.as_bytes())?;
    if name == MANIFEST_NAME {
        return Err("is the manifest's own name in the archive");
    }
    Ok(name)
}

/// A reproducible gzip-compressed tar of `entries` (already in order).
fn write_archive(entries: &[(String, Vec<u8>)]) -> io::Result<Vec<u8>> {
    let gzip = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(GZIP_UNKNOWN_OS)
        .write(Vec::new(), Compression::new(GZIP_LEVEL));
    let mut builder = tar::Builder::new(gzip);
    for (name, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        builder.append_data(&mut header, name, data.as_slice())?;
    }
    builder.into_inner()?.finish()
}

/// Unpacks the archive `bytes` into `dest`, which must not exist (see the module docs).
pub fn unpack(bytes: &[u8], dest: &Path, limits: &UnpackLimits) -> Result<Unpacked, ArchiveError> {
    let destination = |reason: String| ArchiveError::Destination {
        path: dest.to_path_buf(),
        reason,
    };
    if dest.symlink_metadata().is_ok() {
        return Err(destination("it already exists".to_string()));
    }
    let parent = match dest.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // Dropping `staging` removes it, so every early return below leaves nothing behind.
    let staging = tempfile::Builder::new()
        .prefix(".murmur-unpack-")
        .tempdir_in(parent)
        .map_err(|error| destination(format!("cannot create a directory beside it: {error}")))?;
    let unpacked = Extraction::new(staging.path(), limits).run(bytes)?;
    set_mode(staging.path(), 0o755).map_err(|error| destination(error.to_string()))?;
    if dest.symlink_metadata().is_ok() {
        return Err(destination("it appeared while unpacking".to_string()));
    }
    fs::rename(staging.path(), dest).map_err(|error| destination(error.to_string()))?;
    // Renamed: there is nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(unpacked)
}

/// One unpacking into a fresh directory.
struct Extraction<'a> {
    root: &'a Path,
    limits: &'a UnpackLimits,
    members: usize,
    total_bytes: u64,
    files: Vec<(String, String)>,
    /// Every file path written.
    file_paths: HashSet<String>,
    /// Every directory created, named by an entry or as a file's parent.
    dir_paths: HashSet<String>,
    /// The directories an entry named.
    named_dirs: HashSet<String>,
}

/// The GNU long name and pax record that describe the next member.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

impl<'a> Extraction<'a> {
    fn new(root: &'a Path, limits: &'a UnpackLimits) -> Extraction<'a> {
        Extraction {
            root,
            limits,
            members: 0,
            total_bytes: 0,
            files: Vec::new(),
            file_paths: HashSet::new(),
            dir_paths: HashSet::new(),
            named_dirs: HashSet::new(),
        }
    }

    fn run(mut self, bytes: &[u8]) -> Result<Unpacked, ArchiveError> {
        let mut archive = tar::Archive::new(GzDecoder::new(bytes));
        {
            // Raw: every header is seen here, long names and pax records included, so none is
            // read before its size is checked.
            let entries = archive.entries().map_err(malformed)?.raw(true);
            let mut pending = Pending::default();
            for entry in entries {
                let mut entry = entry.map_err(malformed)?;
                let kind = entry.header().entry_type();
                if kind.is_gnu_longname() {
                    if pending.long_name.is_some() {
                        return Err(malformed_because("two long names describe one entry"));
                    }
                    pending.long_name = Some(read_record(&mut entry, "long name", MAX_NAME_BYTES)?);
                    continue;
                }
                if kind.is_pax_local_extensions() {
                    if pending.pax.is_some() {
                        return Err(malformed_because("two pax records describe one entry"));
                    }
                    pending.pax = Some(read_record(&mut entry, "pax", MAX_PAX_BYTES)?);
                    continue;
                }
                self.members += 1;
                if self.members > self.limits.max_entries {
                    return Err(ArchiveError::TooManyEntries {
                        limit: self.limits.max_entries,
                    });
                }
                if kind.is_pax_global_extensions() {
                    let record = read_record(&mut entry, "pax global", MAX_PAX_BYTES)?;
                    check_global_pax(&record)?;
                    continue;
                }
                let pending = std::mem::take(&mut pending);
                self.member(&mut entry, pending)?;
            }
            if pending.long_name.is_some() || pending.pax.is_some() {
                return Err(malformed_because(
                    "it ends with a long name or pax record that describes no entry",
                ));
            }
        }
        let mut rest = archive.into_inner();
        let trailing = io::copy(
            &mut (&mut rest).take(MAX_TRAILING_BYTES + 1),
            &mut io::sink(),
        )
        .map_err(malformed)?;
        if trailing > MAX_TRAILING_BYTES {
            return Err(ArchiveError::TrailingTooLarge {
                limit: MAX_TRAILING_BYTES,
            });
        }
        if !self.file_paths.contains(MANIFEST_NAME) {
            return Err(ArchiveError::NoManifest);
        }
        Ok(Unpacked { files: self.files })
    }

    /// Checks and writes one file or directory entry.
    fn member<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        pending: Pending,
    ) -> Result<(), ArchiveError> {
        let header = entry.header();
        let declared = header.entry_size().map_err(malformed)?;
        let raw_path = member_path(header, pending, declared)?;
        let shown = String::from_utf8_lossy(&raw_path).into_owned();
        let kind = header.entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err(ArchiveError::NotAFile {
                path: shown,
                kind: kind_name(kind),
            });
        }
        let path = entry_path(&raw_path).map_err(|reason| ArchiveError::UnsafePath {
            path: shown.clone(),
            reason,
        })?;
        if kind.is_dir() {
            if declared != 0 {
                return Err(ArchiveError::UnsafePath {
                    path: shown,
                    reason: "is a directory with contents",
                });
            }
            return self.directory(path);
        }
        if raw_path.ends_with(b"/") {
            return Err(ArchiveError::UnsafePath {
                path: shown,
                reason: "is a file whose path ends with `/`",
            });
        }
        // The header's own size field too: for GNU sparse or pax-sized entries it can differ.
        let header_size = header.size().map_err(malformed)?.max(declared);
        if header_size > self.limits.max_file_bytes {
            return Err(ArchiveError::FileTooLarge {
                path,
                size: header_size,
                limit: self.limits.max_file_bytes,
            });
        }
        if self.total_bytes.saturating_add(declared) > self.limits.max_total_bytes {
            return Err(ArchiveError::TotalTooLarge {
                path,
                limit: self.limits.max_total_bytes,
            });
        }
        self.file(path, declared, entry)
    }

    fn directory(&mut self, path: String) -> Result<(), ArchiveError> {
        if path.is_empty() {
            // `./`: the destination itself.
            return Ok(());
        }
        if self.named_dirs.contains(&path)
            || self.file_paths.contains(&path)
            || ancestors(&path).any(|a| self.file_paths.contains(a))
        {
            return Err(ArchiveError::Duplicate { path });
        }
        self.make_dirs(&path)?;
        self.named_dirs.insert(path);
        Ok(())
    }

    fn file<R: Read>(
        &mut self,
        path: String,
        declared: u64,
        entry: &mut tar::Entry<'_, R>,
    ) -> Result<(), ArchiveError> {
        if path.is_empty() {
            return Err(ArchiveError::UnsafePath {
                path,
                reason: "names no file",
            });
        }
        if self.file_paths.contains(&path)
            || self.dir_paths.contains(&path)
            || ancestors(&path).any(|a| self.file_paths.contains(a))
        {
            return Err(ArchiveError::Duplicate { path });
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.make_dirs(parent)?;
        }
        let target = self.root.join(&path);
        let mut file = create_new_file(&target).map_err(|error| self.write_failed(&path, error))?;
        let copied = copy_counted(entry, &mut file, &path, self.limits, &mut self.total_bytes)?;
        if copied.bytes != declared {
            return Err(malformed_because(&format!(
                "entry {path:?} is cut short: {} of {declared} bytes",
                copied.bytes
            )));
        }
        set_mode(&target, 0o644).map_err(|error| self.write_failed(&path, error))?;
        self.file_paths.insert(path.clone());
        self.files.push((path, copied.sha256));
        Ok(())
    }

    /// Creates `path` and each missing directory above it, 0o755.
    fn make_dirs(&mut self, path: &str) -> Result<(), ArchiveError> {
        let mut wanted: Vec<&str> = ancestors(path).collect();
        wanted.reverse();
        wanted.push(path);
        for dir in wanted {
            if self.dir_paths.contains(dir) {
                continue;
            }
            let target = self.root.join(dir);
            fs::create_dir(&target)
                .and_then(|()| set_mode(&target, 0o755))
                .map_err(|error| self.write_failed(dir, error))?;
            self.dir_paths.insert(dir.to_string());
        }
        Ok(())
    }

    fn write_failed(&self, path: &str, error: io::Error) -> ArchiveError {
        ArchiveError::Destination {
            path: self.root.to_path_buf(),
            reason: format!("writing {path:?}: {error}"),
        }
    }
}

/// The path of a member: its GNU long name, else its pax `path`, else its header's. The pax
/// record must not say anything this module would read differently from other tar readers.
fn member_path(
    header: &tar::Header,
    pending: Pending,
    declared: u64,
) -> Result<Vec<u8>, ArchiveError> {
    let mut pax_path: Option<Vec<u8>> = None;
    if let Some(record) = &pending.pax {
        for extension in tar::PaxExtensions::new(record) {
            let extension =
                extension.map_err(|_| malformed_because("a pax record is not well formed"))?;
            let key = extension.key_bytes();
            let value = extension.value_bytes();
            if key == b"path" {
                pax_path = Some(value.to_vec());
            } else if key == b"linkpath" {
                return Err(ArchiveError::NotAFile {
                    path: String::from_utf8_lossy(value).into_owned(),
                    kind: "a link (by its pax record)".to_string(),
                });
            } else if key == b"size" {
                let size = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                if size != Some(declared) {
                    return Err(malformed_because(
                        "a pax record's size disagrees with its entry's header",
                    ));
                }
            } else if key.starts_with(b"GNU.sparse") {
                return Err(ArchiveError::NotAFile {
                    path: String::from_utf8_lossy(&header.path_bytes()).into_owned(),
                    kind: "a sparse file".to_string(),
                });
            }
        }
    }
    match (pending.long_name, pax_path) {
        (Some(_), Some(_)) => Err(malformed_because(
            "an entry has both a GNU long name and a pax path",
        )),
        (Some(mut name), None) => {
            if name.last() == Some(&0) {
                name.pop();
            }
            Ok(name)
        }
        (None, Some(path)) => Ok(path),
        (None, None) => Ok(header.path_bytes().into_owned()),
    }
}

/// A pax global record is skipped only when it names no path, link or size.
fn check_global_pax(record: &[u8]) -> Result<(), ArchiveError> {
    for extension in tar::PaxExtensions::new(record) {
        let extension =
            extension.map_err(|_| malformed_because("a pax global record is not well formed"))?;
        let key = extension.key_bytes();
        if key == b"path" || key == b"linkpath" || key == b"size" || key.starts_with(b"GNU.") {
            return Err(malformed_because(&format!(
                "a pax global record sets {:?} for every entry",
                String::from_utf8_lossy(key)
            )));
        }
    }
    Ok(())
}

/// Reads a long name or pax record after checking its size.
fn read_record<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    record: &'static str,
    limit: u64,
) -> Result<Vec<u8>, ArchiveError> {
    let size = entry.header().entry_size().map_err(malformed)?;
    if size > limit {
        return Err(ArchiveError::RecordTooLarge {
            record,
            size,
            limit,
        });
    }
    let mut bytes = Vec::new();
    entry
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(malformed)?;
    if bytes.len() as u64 != size {
        return Err(malformed_because(&format!(
            "a {record} record is cut short"
        )));
    }
    Ok(bytes)
}

/// `raw` as a relative path with `/` separators and no `.` or empty parts, or why it is unsafe.
/// `.` and `./` give the empty path (the destination itself).
pub(crate) fn entry_path(raw: &[u8]) -> Result<String, &'static str> {
    if raw.is_empty() {
        return Err("has an empty path");
    }
    if raw.contains(&0) {
        return Err("has a NUL byte in its path");
    }
    if raw.starts_with(b"/") {
        return Err("has an absolute path");
    }
    if raw.contains(&b'\\') {
        return Err("has a backslash in its path (a separator on Windows)");
    }
    if raw.contains(&b':') {
        return Err("has a `:` in its path (a drive or stream name on Windows)");
    }
    let text = std::str::from_utf8(raw).map_err(|_| "has a path that is not UTF-8")?;
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("has a path that climbs with `..`"),
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// The directories above `path` (`a/b/c` gives `a/b`, then `a`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let (parent, _) = rest.rsplit_once('/')?;
        rest = parent;
        Some(parent)
    })
}

/// What an entry type is, in words.
fn kind_name(kind: tar::EntryType) -> String {
    match kind.as_byte() {
        b'1' => "a hard link".to_string(),
        b'2' => "a symbolic link".to_string(),
        b'3' => "a character device".to_string(),
        b'4' => "a block device".to_string(),
        b'6' => "a FIFO".to_string(),
        b'7' => "a contiguous file".to_string(),
        b'K' => "a link (by its GNU long link name)".to_string(),
        b'S' => "a sparse file".to_string(),
        other => format!("an entry of type {:?}", char::from(other)),
    }
}

/// What [`copy_counted`] copied.
struct Copied {
    bytes: u64,
    sha256: String,
}

/// Copies `from` into `to`, hashing it and counting every byte read: it stops as soon as the
/// file passes `limits.max_file_bytes` or `total` passes `limits.max_total_bytes`, whatever any
/// header said, so an endless stream is refused while it is read.
fn copy_counted(
    from: &mut impl Read,
    to: &mut impl Write,
    path: &str,
    limits: &UnpackLimits,
    total: &mut u64,
) -> Result<Copied, ArchiveError> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; COPY_CHUNK];
    let mut bytes: u64 = 0;
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(malformed(error)),
        };
        bytes += read as u64;
        *total = total.saturating_add(read as u64);
        if bytes > limits.max_file_bytes {
            return Err(ArchiveError::FileTooLarge {
                path: path.to_string(),
                size: bytes,
                limit: limits.max_file_bytes,
            });
        }
        if *total > limits.max_total_bytes {
            return Err(ArchiveError::TotalTooLarge {
                path: path.to_string(),
                limit: limits.max_total_bytes,
            });
        }
        let chunk = &buffer[..read];
        hasher.update(chunk);
        to.write_all(chunk)
            .map_err(|error| ArchiveError::Destination {
                path: PathBuf::from(path),
                reason: error.to_string(),
            })?;
    }
    Ok(Copied {
        bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Creates `path`, failing if anything is there (a file, a directory or a link).
fn create_new_file(path: &Path) -> io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o644);
    }
    options.open(path)
}

/// Sets `path`'s permission bits to `mode` exactly, whatever the umask (Unix only).
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// A read error as [`ArchiveError::Malformed`]. The tar reader's messages quote header fields
/// as they are, so their control characters are escaped.
fn malformed(error: io::Error) -> ArchiveError {
    let reason = error
        .to_string()
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    ArchiveError::Malformed { reason }
}

fn malformed_because(reason: &str) -> ArchiveError {
    ArchiveError::Malformed {
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tar::{EntryType, Header};

    use crate::source::BuildError;

    /// The first-party `read-file` tool.
    fn read_file_artifact() -> LocalArtifact {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/read-file");
        let artifact = LocalArtifact::open(&dir, &|_| None).expect("artifacts/read-file opens");
        assert!(
            artifact.component_path().is_file(),
            "artifacts/read-file/component.wasm is missing: run ./scripts/setup"
        );
        artifact
    }

    /// A copy of `artifact`'s directory (its top-level files) under `into`.
    fn copy_artifact(artifact: &LocalArtifact, into: &Path) -> LocalArtifact {
        for entry in fs::read_dir(&artifact.dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                fs::copy(entry.path(), into.join(entry.file_name())).unwrap();
            }
        }
        LocalArtifact::open(into, &|_| None).unwrap()
    }

    /// One raw tar member: a GNU header whose name (and link name) bytes are written as they
    /// are, so nothing refuses `..` on the way, then `data` padded to a block.
    fn member_with(name: &[u8], kind: EntryType, data: &[u8], link: &[u8], size: u64) -> Vec<u8> {
        let mut header = Header::new_gnu();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(data);
        bytes.resize(bytes.len().div_ceil(512) * 512, 0);
        bytes
    }

    fn member(name: &[u8], kind: EntryType, data: &[u8]) -> Vec<u8> {
        member_with(name, kind, data, b"", data.len() as u64)
    }

    fn file(name: &str, data: &[u8]) -> Vec<u8> {
        member(name.as_bytes(), EntryType::Regular, data)
    }

    fn manifest() -> Vec<u8> {
        file("murmur.yaml", b"name: t\nversion: 0.1.0\nruntime: tool\n")
    }

    fn tar_of(members: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = members.concat();
        bytes.extend_from_slice(&[0; 1024]);
        bytes
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn archive(members: &[Vec<u8>]) -> Vec<u8> {
        gzip(&tar_of(members))
    }

    /// Unpacks `bytes` into a fresh directory's `out` and checks that on error nothing was
    /// left, neither `out` nor anything else in that directory.
    fn unpack_fresh(bytes: &[u8], limits: &UnpackLimits) -> Result<Unpacked, ArchiveError> {
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("out");
        let result = unpack(bytes, &dest, limits);
        let left: Vec<_> = fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        match &result {
            Ok(_) => assert_eq!(left, ["out"]),
            Err(error) => {
                assert!(!dest.exists(), "{error}: dest exists");
                assert!(left.is_empty(), "{error}: left behind {left:?}");
            }
        }
        result
    }

    fn refused(bytes: &[u8], limits: &UnpackLimits, code: &str) -> ArchiveError {
        let error = unpack_fresh(bytes, limits).expect_err("the archive is refused");
        assert_eq!(error.code(), code, "{error}");
        assert!(!error.hint().is_empty());
        error
    }

    fn small_limits() -> UnpackLimits {
        UnpackLimits {
            max_entries: 16,
            max_file_bytes: 4096,
            max_total_bytes: 8192,
        }
    }

    #[test]
    fn packing_twice_gives_the_same_bytes() {
        let artifact = read_file_artifact();
        let first = pack(&artifact).unwrap();
        let second = pack(&artifact).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.sha256, sha256_hex(&first.bytes));
        assert_eq!(first.sha256.len(), 64);
    }

    #[test]
    fn an_archive_holds_the_manifest_and_the_component_only() {
        let packed = pack(&read_file_artifact()).unwrap();
        assert_eq!(packed.files, ["component.wasm", "murmur.yaml"]);
    }

    #[cfg(unix)]
    #[test]
    fn packing_ignores_times_and_permissions_on_disk() {
        use std::os::unix::fs::PermissionsExt;
        let artifact = read_file_artifact();
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = copy_artifact(&artifact, copy_dir.path());
        let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1234567);
        for (name, mode) in [("murmur.yaml", 0o600), ("component.wasm", 0o755)] {
            let path = copy_dir.path().join(name);
            let file = fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(long_ago).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        }
        assert_eq!(pack(&copy).unwrap(), pack(&artifact).unwrap());
    }

    #[test]
    fn the_gzip_header_carries_no_name_time_or_system() {
        let packed = pack(&read_file_artifact()).unwrap();
        let header = &packed.bytes[..10];
        assert_eq!(&header[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(
            header[3], 0,
            "no flags: no file name, comment or extra field"
        );
        assert_eq!(&header[4..8], &[0, 0, 0, 0], "time 0");
        assert_eq!(header[9], GZIP_UNKNOWN_OS);
    }

    #[test]
    fn a_packed_archive_unpacks_to_the_same_files() {
        let artifact = read_file_artifact();
        let packed = pack(&artifact).unwrap();
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("read-file");
        let unpacked = unpack(&packed.bytes, &dest, &UnpackLimits::default()).unwrap();
        let originals = [
            ("component.wasm", artifact.component_path()),
            ("murmur.yaml", artifact.manifest_file.clone()),
        ];
        let expected: Vec<(String, String)> = originals
            .iter()
            .map(|(name, path)| (name.to_string(), sha256_hex(&fs::read(path).unwrap())))
            .collect();
        assert_eq!(unpacked.files, expected);
        for (name, original) in &originals {
            assert_eq!(
                fs::read(dest.join(name)).unwrap(),
                fs::read(original).unwrap()
            );
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dest), 0o755);
            assert_eq!(mode(&dest.join("component.wasm")), 0o644);
        }
        let names: Vec<_> = fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["read-file"], "no temporary directory is left");
    }

    #[test]
    fn a_skill_archive_holds_its_markdown() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("murmur.yaml"),
            "name: tips\nversion: 0.1.0\nruntime: skill\ndescription: Tips.\n",
        )
        .unwrap();
        fs::write(dir.path().join("skill.md"), "# Tips\n").unwrap();
        fs::write(dir.path().join("notes.txt"), "not shipped").unwrap();
        let artifact = LocalArtifact::open(dir.path(), &|_| None).unwrap();
        let packed = pack(&artifact).unwrap();
        assert_eq!(packed.files, ["murmur.yaml", "skill.md"]);
        let unpacked = unpack_fresh(&packed.bytes, &UnpackLimits::default()).unwrap();
        assert_eq!(
            unpacked.files[1],
            ("skill.md".into(), sha256_hex(b"# Tips\n"))
        );
    }

    fn tool_dir(component: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let component = component.map_or(String::new(), |c| format!("component: {c}\n"));
        fs::write(
            dir.path().join("murmur.yaml"),
            format!(
                "name: t\nversion: 0.1.0\nruntime: tool\n{component}input_schema: {{ type: object }}\n"
            ),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_missing_component_is_e_run_008() {
        let dir = tool_dir(None);
        let artifact = LocalArtifact::open(dir.path(), &|_| None).unwrap();
        let error = pack(&artifact).unwrap_err();
        assert_eq!(error.code(), "E-RUN-008", "{error}");
        assert!(error.to_string().contains("component.wasm"), "{error}");
    }

    #[test]
    fn a_component_in_a_subdirectory_keeps_its_relative_name() {
        let dir = tool_dir(Some("out/tool.wasm"));
        fs::create_dir(dir.path().join("out")).unwrap();
        fs::write(dir.path().join("out/tool.wasm"), b"\0asm").unwrap();
        let artifact = LocalArtifact::open(dir.path(), &|_| None).unwrap();
        let packed = pack(&artifact).unwrap();
        assert_eq!(packed.files, ["murmur.yaml", "out/tool.wasm"]);
        let unpacked = unpack_fresh(&packed.bytes, &UnpackLimits::default()).unwrap();
        assert_eq!(unpacked.files[1].0, "out/tool.wasm");
    }

    #[test]
    fn a_component_out_of_the_artifact_directory_is_not_packed() {
        // The manifest refuses a path out of the directory before anything is read.
        for component in ["../elsewhere.wasm", "/tmp/x.wasm", "a/../../x.wasm"] {
            let dir = tool_dir(Some(component));
            let Err(BuildError::Manifest { loaded, .. }) =
                LocalArtifact::open(dir.path(), &|_| None)
            else {
                panic!("{component}: opened");
            };
            assert!(
                loaded.diagnostics.iter().any(|d| d.code == "E-MAN-015"),
                "{component}: {:?}",
                loaded.diagnostics
            );
        }
        // A plain name that is the manifest itself is refused when packing.
        let dir = tool_dir(Some("murmur.yaml"));
        let artifact = LocalArtifact::open(dir.path(), &|_| None).unwrap();
        let error = pack(&artifact).unwrap_err();
        assert_eq!(error.code(), "E-REG-002", "{error}");
    }

    #[test]
    fn paths_out_of_the_destination_are_refused() {
        for name in [
            &b"../evil"[..],
            b"/etc/evil",
            b"a/../../evil",
            b"..",
            b"a\\..\\evil",
            b"C:evil",
        ] {
            let error = refused(
                &archive(&[manifest(), member(name, EntryType::Regular, b"x")]),
                &UnpackLimits::default(),
                "E-REG-002",
            );
            assert!(matches!(error, ArchiveError::UnsafePath { .. }), "{error}");
        }
        assert!(!Path::new("/etc/evil").exists());
    }

    #[test]
    fn long_names_and_pax_paths_are_checked_like_header_names() {
        let long_name = member(b"././@LongLink", EntryType::GNULongName, b"../evil\0");
        let pax_body = b"16 path=../evil\n";
        let pax = member(b"PaxHeader", EntryType::XHeader, pax_body);
        for prefix in [long_name, pax] {
            let bytes = archive(&[manifest(), prefix, file("innocent", b"x")]);
            refused(&bytes, &UnpackLimits::default(), "E-REG-002");
        }
    }

    #[test]
    fn links_and_special_files_are_refused() {
        let cases = [
            (EntryType::Symlink, &b"../../../etc/passwd"[..]),
            (EntryType::Link, b"murmur.yaml"),
            (EntryType::Char, b""),
            (EntryType::Block, b""),
            (EntryType::Fifo, b""),
            (EntryType::GNUSparse, b""),
        ];
        for (kind, link) in cases {
            let entry = member_with(b"entry", kind, b"", link, 0);
            let error = refused(
                &archive(&[manifest(), entry]),
                &UnpackLimits::default(),
                "E-REG-002",
            );
            assert!(matches!(error, ArchiveError::NotAFile { .. }), "{error}");
        }
    }

    #[test]
    fn a_path_that_appears_twice_is_refused() {
        let cases = [
            vec![manifest(), file("a", b"1"), file("a", b"2")],
            vec![manifest(), file("a", b"1"), file("./a", b"2")],
            vec![manifest(), file("a", b"1"), file("a/b", b"2")],
            vec![manifest(), file("a/b", b"1"), file("a", b"2")],
            vec![manifest(), manifest()],
        ];
        for members in cases {
            let error = refused(&archive(&members), &UnpackLimits::default(), "E-REG-002");
            assert!(matches!(error, ArchiveError::Duplicate { .. }), "{error}");
        }
    }

    #[test]
    fn an_archive_without_a_root_manifest_is_refused() {
        for members in [
            vec![file("component.wasm", b"x")],
            vec![file("sub/murmur.yaml", b"x")],
            vec![member(b"murmur.yaml", EntryType::Directory, b"")],
            vec![],
        ] {
            let error = refused(&archive(&members), &UnpackLimits::default(), "E-REG-002");
            assert!(matches!(error, ArchiveError::NoManifest), "{error}");
        }
    }

    #[test]
    fn bytes_that_are_not_a_gzip_tar_are_refused() {
        let good = archive(&[manifest()]);
        let mut bad_crc = good.clone();
        let at = bad_crc.len() - 8;
        bad_crc[at] ^= 0xff;
        let mut bad_checksum = tar_of(&[manifest()]);
        bad_checksum[0] = b'n';
        for bytes in [
            b"not an archive".to_vec(),
            tar_of(&[manifest()]),
            gzip(b"not a tar at all, but long enough to read a header from? no."),
            gzip(&bad_checksum),
            bad_crc,
            good[..good.len() / 2].to_vec(),
        ] {
            let error = refused(&bytes, &UnpackLimits::default(), "E-REG-002");
            assert!(matches!(error, ArchiveError::Malformed { .. }), "{error}");
        }
        unpack_fresh(&good, &UnpackLimits::default()).unwrap();
    }

    #[test]
    fn an_entry_cut_short_is_refused() {
        let mut bytes = manifest();
        bytes.extend(member_with(b"short", EntryType::Regular, b"abc", b"", 1000));
        let error = refused(&gzip(&bytes), &UnpackLimits::default(), "E-REG-002");
        assert!(matches!(error, ArchiveError::Malformed { .. }), "{error}");
    }

    #[test]
    fn a_file_over_the_file_limit_is_refused() {
        let error = refused(
            &archive(&[manifest(), file("big", &[7; 5000])]),
            &small_limits(),
            "E-REG-003",
        );
        assert!(
            matches!(error, ArchiveError::FileTooLarge { limit: 4096, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("\"big\""), "{error}");
    }

    #[test]
    fn small_files_over_the_total_limit_are_refused() {
        let mut members = vec![manifest()];
        members.extend((0..10).map(|i| file(&format!("part{i}"), &[1; 1000])));
        let error = refused(&archive(&members), &small_limits(), "E-REG-003");
        assert!(
            matches!(error, ArchiveError::TotalTooLarge { limit: 8192, .. }),
            "{error}"
        );
    }

    #[test]
    fn a_header_that_lies_about_its_size_is_refused() {
        // The header claims 8 GiB; ten bytes follow.
        let liar = member_with(b"liar", EntryType::Regular, b"0123456789", b"", 8 << 30);
        let error = refused(
            &gzip(&[manifest(), liar].concat()),
            &UnpackLimits::default(),
            "E-REG-003",
        );
        assert!(
            matches!(error, ArchiveError::FileTooLarge { .. }),
            "{error}"
        );
    }

    #[test]
    fn too_many_entries_are_refused() {
        let mut members = vec![manifest()];
        members.extend((0..16).map(|i| file(&format!("f{i}"), b"")));
        let error = refused(&archive(&members), &small_limits(), "E-REG-003");
        assert!(
            matches!(error, ArchiveError::TooManyEntries { limit: 16 }),
            "{error}"
        );
    }

    #[test]
    fn oversized_name_records_are_refused() {
        let name = vec![b'a'; 5000];
        let record = member(b"././@LongLink", EntryType::GNULongName, &name);
        let bytes = archive(&[manifest(), record, file("x", b"")]);
        refused(&bytes, &UnpackLimits::default(), "E-REG-003");
    }

    /// A gzip stream of the tar `prefix` followed by `zeros` zero bytes, built without ever
    /// holding or compressing the zeros in full: one mebibyte of them is compressed once, with a
    /// sync flush, and that block run repeated (its back-references stay inside itself).
    fn gzip_with_zeros(prefix: &[u8], zeros: u64) -> Vec<u8> {
        fn deflate_flushed(data: &[u8]) -> Vec<u8> {
            let mut compress = flate2::Compress::new(Compression::fast(), false);
            let mut out = Vec::with_capacity(data.len() / 2 + 1024);
            compress
                .compress_vec(data, &mut out, flate2::FlushCompress::Sync)
                .unwrap();
            assert_eq!(compress.total_in(), data.len() as u64);
            out
        }
        const MIB: u64 = 1024 * 1024;
        let mut bytes = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
        bytes.extend(deflate_flushed(prefix));
        let chunk = deflate_flushed(&vec![0; MIB as usize]);
        for _ in 0..zeros.div_ceil(MIB) {
            bytes.extend_from_slice(&chunk);
        }
        bytes
    }

    #[test]
    fn a_gzip_bomb_is_stopped_while_reading() {
        const MIB: u64 = 1024 * 1024;
        let limits = UnpackLimits {
            max_total_bytes: MIB,
            ..UnpackLimits::default()
        };
        // 300 MiB of zeros, as five 60 MiB files; each is within the file limit.
        let mut prefix = manifest();
        let mut header = Header::new_gnu();
        header.set_path("zeros").unwrap();
        header.set_size(60 * MIB);
        header.set_cksum();
        prefix.extend_from_slice(header.as_bytes());
        let bomb = gzip_with_zeros(&prefix, 300 * MIB);
        assert!(bomb.len() < 2 * MIB as usize, "{} bytes", bomb.len());
        let started = std::time::Instant::now();
        let error = refused(&bomb, &limits, "E-REG-003");
        assert!(
            matches!(error, ArchiveError::TotalTooLarge { .. }),
            "{error}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(10));

        // Zeros after the tar's end are read only so far.
        let trailing = gzip_with_zeros(&tar_of(&[manifest()]), 300 * MIB);
        let error = refused(&trailing, &UnpackLimits::default(), "E-REG-003");
        assert!(
            matches!(error, ArchiveError::TrailingTooLarge { .. }),
            "{error}"
        );
    }

    #[test]
    fn copying_stops_at_the_limit_while_reading() {
        let limits = UnpackLimits {
            max_entries: 1,
            max_file_bytes: 1024 * 1024,
            max_total_bytes: 10 * 1024 * 1024,
        };
        let mut endless = io::repeat(0);
        let mut total = 0;
        let error = copy_counted(&mut endless, &mut io::sink(), "f", &limits, &mut total)
            .err()
            .expect("an endless stream is refused");
        assert!(
            matches!(error, ArchiveError::FileTooLarge { .. }),
            "{error}"
        );
        assert!(total <= limits.max_file_bytes + COPY_CHUNK as u64);

        let mut total = limits.max_total_bytes - 10;
        let error = copy_counted(&mut endless, &mut io::sink(), "g", &limits, &mut total)
            .err()
            .expect("the total is refused");
        assert!(
            matches!(error, ArchiveError::TotalTooLarge { .. }),
            "{error}"
        );
    }

    #[test]
    fn an_existing_destination_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("out");
        fs::create_dir(&dest).unwrap();
        let error = unpack(&archive(&[manifest()]), &dest, &UnpackLimits::default()).unwrap_err();
        assert!(matches!(error, ArchiveError::Destination { .. }), "{error}");
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 1);
    }

    #[test]
    fn directories_and_nested_files_unpack() {
        let bytes = archive(&[
            member(b"./", EntryType::Directory, b""),
            manifest(),
            member(b"docs/", EntryType::Directory, b""),
            file("docs/a/b.md", b"b"),
        ]);
        let unpacked = unpack_fresh(&bytes, &UnpackLimits::default()).unwrap();
        let names: Vec<&str> = unpacked.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["murmur.yaml", "docs/a/b.md"]);
    }

    #[test]
    fn tar_reader_messages_escape_control_characters() {
        let mut header = Header::new_gnu();
        header.as_old_mut().name[..8].copy_from_slice(b"\x1b[31mred");
        header
            .as_old_mut()
            .cksum
            .copy_from_slice(b"\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b");
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&[0; 1024]);
        let error = refused(&gzip(&bytes), &UnpackLimits::default(), "E-REG-002");
        let message = error.to_string();
        assert!(!message.chars().any(char::is_control), "{message}");
    }

    #[test]
    fn messages_escape_control_characters() {
        let error = refused(
            &archive(&[
                manifest(),
                member(b"../\x1b[31mred", EntryType::Regular, b""),
            ]),
            &UnpackLimits::default(),
            "E-REG-002",
        );
        let message = error.to_string();
        assert!(!message.contains('\x1b'), "{message}");
        assert!(message.contains("\\u{1b}"), "{message}");
    }
}
