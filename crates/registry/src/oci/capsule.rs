//! Whole capsules in an OCI registry: `mur push oci://HOST/REPO[:TAG]` and
//! `mur pull oci://HOST/REPO[:TAG|@sha256:DIGEST]`.
//!
//! What this module promises:
//!
//! - **What a capsule image holds** ([`capsule_files`]): its `murmur.yaml`, its `murmur.lock`
//!   when there is one, the system prompt files it names, its own component when it is a
//!   capsule component, and each local artifact (an `artifacts:` entry with `path:`) as the
//!   artifact's reproducible archive. Each is a layer titled with its path in the capsule.
//!   Registry artifacts are not copied: the lock pins them (by digest, for an OCI registry),
//!   and `mur install --locked` fetches them where the capsule is pulled. Every file named
//!   must lie inside the capsule's directory (`E-REG-016` otherwise): a pulled capsule is the
//!   same tree.
//! - **The identity is the manifest's sha256.** The same files give the same digest; a tag
//!   already naming other files is refused (`E-REG-011`), nothing pushed.
//! - **Pulling is checked and all or nothing** ([`pull`]): by digest, the manifest's bytes
//!   must have it; every layer is held to the image bounds (media types, sizes, plain
//!   relative titles with no hidden part, at most [`MAX_CAPSULE_LAYERS`]), verified against
//!   its digest, and artifact archives are unpacked with the archive guards (their files given
//!   one time, so a local artifact is as built and never rebuilt where it lands); everything is
//!   written into a staging directory and put in place only when all of it is there: renamed
//!   to a new destination, or moved into an existing empty one (a volume's mount point, whose
//!   parent may be read-only). The destination must not exist or be empty (`E-REG-016`).

use std::path::{Component, Path, PathBuf};

use murmur_manifest::capsule::CapsuleManifest;
use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use serde_json::json;
use std::collections::BTreeMap;

use super::{
    Built, Credentials, Layout, Pushed, Remote, SCHEME, WASM_LAYER_MEDIA_TYPE, check_host,
    check_image, check_path_component, descriptor, shown, write_new,
};
use crate::answer::RegistryError;
use crate::archive::{self, UnpackLimits};
use crate::source::LocalArtifact;

/// A capsule image's config.
pub const CAPSULE_CONFIG_MEDIA_TYPE: &str = "application/vnd.murmur.capsule.config.v1+json";
/// The layer holding the capsule's `murmur.yaml`.
pub const CAPSULE_MANIFEST_MEDIA_TYPE: &str = "application/vnd.murmur.capsule.manifest.v1+yaml";
/// The layer holding its `murmur.lock`.
pub const LOCK_MEDIA_TYPE: &str = "application/vnd.murmur.lock.v1";
/// A local artifact's archive (see [`crate::archive`]).
pub const ARTIFACT_ARCHIVE_MEDIA_TYPE: &str = "application/vnd.murmur.artifact.v1.tar+gzip";
/// A text file the capsule names (a system prompt).
pub const TEXT_MEDIA_TYPE: &str = "text/plain";
/// The most layers a capsule image may have.
pub const MAX_CAPSULE_LAYERS: usize = 64;

const CAPSULE_LAYERS: &[&str] = &[
    CAPSULE_MANIFEST_MEDIA_TYPE,
    LOCK_MEDIA_TYPE,
    ARTIFACT_ARCHIVE_MEDIA_TYPE,
    TEXT_MEDIA_TYPE,
    WASM_LAYER_MEDIA_TYPE,
];

/// One file of a capsule image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleFile {
    /// Its path in the capsule, `/`-separated.
    pub title: String,
    pub media_type: &'static str,
    pub bytes: Vec<u8>,
}

/// A capsule's place in a registry: `oci://HOST/REPOSITORY[:TAG][@sha256:DIGEST]`.
#[derive(Clone)]
pub struct CapsuleReference {
    remote: Remote,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl CapsuleReference {
    /// Parses `given`; a user name or password in it is refused (and never shown).
    pub fn parse(given: &str) -> Result<CapsuleReference, RegistryError> {
        let refuse = |reason: String| RegistryError::NotARegistry {
            given: if given.contains('@') && !given.contains("@sha256:") {
                "the reference given".to_string()
            } else {
                given.to_string()
            },
            reason,
        };
        let rest = given
            .trim()
            .strip_prefix(SCHEME)
            .ok_or_else(|| refuse(format!("it does not begin with `{SCHEME}`")))?;
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| refuse("it names no repository: oci://HOST/REPOSITORY[:TAG]".into()))?;
        check_host(host).map_err(&refuse)?;
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                let hex = digest
                    .strip_prefix("sha256:")
                    .filter(|hex| murmur_manifest::lock::is_sha256_hex(hex))
                    .ok_or_else(|| {
                        refuse("its digest is not `sha256:` and 64 lowercase hex digits".into())
                    })?;
                (path, Some(format!("sha256:{hex}")))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag.to_string())),
            _ => (path, None),
        };
        for part in repository.split('/') {
            check_path_component(part)
                .map_err(|why| refuse(format!("its repository path part `{part}` {why}")))?;
        }
        if let Some(tag) = &tag {
            check_tag(tag).map_err(&refuse)?;
        }
        Ok(CapsuleReference {
            remote: Remote::new(host),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The registry's host, the key of its credentials.
    pub fn host(&self) -> &str {
        &self.remote.host
    }

    /// The same reference, presenting what `sources` bind to its registry's host (see
    /// [`super::credentials`]).
    pub fn with_sources(
        mut self,
        sources: &super::CredentialSources,
    ) -> Result<CapsuleReference, RegistryError> {
        self.remote = self.remote.with_sources(sources)?;
        Ok(self)
    }

    /// The same reference, presenting `credentials`.
    pub fn with_credentials(mut self, credentials: Credentials) -> CapsuleReference {
        self.remote.credentials = credentials;
        self
    }

    /// Whether it names a digest.
    pub fn has_digest(&self) -> bool {
        self.digest.is_some()
    }

    /// The reference, tagged `tag` when it names neither a tag nor a digest (a version whose
    /// `+` becomes `_`).
    fn resolved(&self, tag: Option<&str>) -> Reference {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => Reference::with_digest(
                self.remote.host.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (None, Some(tag)) => Reference::with_tag(
                self.remote.host.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            (None, None) => Reference::with_tag(
                self.remote.host.clone(),
                self.repository.clone(),
                super::version_tag(tag.unwrap_or("latest")),
            ),
        }
    }
}

/// A tag: a letter, digit or `_`, then up to 127 of those, `.` and `-`.
fn check_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        && !tag.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its tag `{}` is not a tag (letters, digits, `_`, `.` and `-`, at most 128)",
            tag.escape_debug()
        ))
    }
}

/// `path` (relative to the capsule's directory) as a plain `/`-separated title, or why it
/// cannot be one: it is absolute, climbs out with `..`, or has a hidden part.
fn inside(path: &Path) -> Result<String, &'static str> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => {
                let part = part.to_str().ok_or("is not UTF-8")?;
                if part.starts_with('.') {
                    return Err("has a hidden part (beginning with `.`)");
                }
                parts.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err("climbs out of the capsule's directory with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
        }
    }
    if parts.is_empty() {
        return Err("is the capsule's directory itself");
    }
    Ok(parts.join("/"))
}

/// The files of the capsule in `capsule_dir` whose manifest is `manifest` and whose
/// `murmur.yaml` holds `text` (see the module docs). Local artifacts must have their
/// components (see [`crate::source::ensure_components`]).
pub fn capsule_files(
    capsule_dir: &Path,
    text: &str,
    manifest: &CapsuleManifest,
) -> Result<Vec<CapsuleFile>, RegistryError> {
    let refuse = |reason: String| RegistryError::CapsuleNotMovable {
        capsule: manifest.name.clone(),
        reason,
    };
    let mut files = vec![CapsuleFile {
        title: archive::MANIFEST_NAME.to_string(),
        media_type: CAPSULE_MANIFEST_MEDIA_TYPE,
        bytes: text.as_bytes().to_vec(),
    }];
    match std::fs::read(capsule_dir.join(murmur_manifest::lock::LOCK_FILE)) {
        Ok(bytes) => files.push(CapsuleFile {
            title: murmur_manifest::lock::LOCK_FILE.to_string(),
            media_type: LOCK_MEDIA_TYPE,
            bytes,
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(refuse(format!("murmur.lock cannot be read: {error}"))),
    }
    let mut named: Vec<(&str, &Path, &'static str)> = Vec::new();
    if let Some(inference) = &manifest.inference {
        if let Some(file) = &inference.system_prompt_file {
            named.push(("inference.system_prompt_file", file, TEXT_MEDIA_TYPE));
        }
        if let Some(file) = &inference.compaction.system_prompt_file {
            named.push((
                "inference.compaction.system_prompt_file",
                file,
                TEXT_MEDIA_TYPE,
            ));
        }
    }
    if manifest.component.is_some() || manifest.build.is_some() {
        let component = manifest
            .component
            .as_deref()
            .unwrap_or(Path::new(murmur_manifest::artifact::DEFAULT_COMPONENT));
        named.push(("component", component, WASM_LAYER_MEDIA_TYPE));
    }
    for (field, path, media_type) in named {
        let title =
            inside(path).map_err(|why| refuse(format!("`{field}: {}` {why}", path.display())))?;
        let bytes = std::fs::read(capsule_dir.join(path))
            .map_err(|e| refuse(format!("`{field}: {}` cannot be read: {e}", path.display())))?;
        files.push(CapsuleFile {
            title,
            media_type,
            bytes,
        });
    }
    for entry in &manifest.artifacts {
        let Some(path) = &entry.path else { continue };
        let title = inside(path).map_err(|why| {
            refuse(format!(
                "artifact `{}` has `path: {}`, which {why}",
                entry.name,
                path.display()
            ))
        })?;
        let artifact = LocalArtifact::open(&capsule_dir.join(path), &|_| None)
            .map_err(|e| refuse(format!("artifact `{}`: {e}", entry.name)))?;
        let packed = archive::pack(&artifact)
            .map_err(|e| refuse(format!("artifact `{}`: {e}", entry.name)))?;
        files.push(CapsuleFile {
            title,
            media_type: ARTIFACT_ARCHIVE_MEDIA_TYPE,
            bytes: packed.bytes,
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for file in &files {
        if !seen.insert(file.title.as_str()) {
            return Err(refuse(format!("two of its files are at `{}`", file.title)));
        }
    }
    if files.len() > MAX_CAPSULE_LAYERS {
        return Err(refuse(format!(
            "it has {} files, more than {MAX_CAPSULE_LAYERS}",
            files.len()
        )));
    }
    Ok(files)
}

/// The image of `files` for the capsule `name` at `version`.
fn build(name: &str, version: &str, files: &[CapsuleFile]) -> Result<Built, String> {
    let config = serde_json::to_vec(&json!({"name": name, "version": version}))
        .map_err(|e| e.to_string())?;
    let descriptors = files
        .iter()
        .map(|file| descriptor(file.media_type, &file.bytes, Some(&file.title)))
        .collect();
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: descriptor(CAPSULE_CONFIG_MEDIA_TYPE, &config, None),
        layers: descriptors,
        subject: None,
        artifact_type: None,
        annotations: Some(BTreeMap::from([
            (
                "org.opencontainers.image.title".to_string(),
                name.to_string(),
            ),
            (
                "org.opencontainers.image.version".to_string(),
                version.to_string(),
            ),
        ])),
    };
    Ok(Built {
        config,
        layers: files.iter().map(|f| f.bytes.clone()).collect(),
        manifest: serde_json::to_vec(&manifest).map_err(|e| e.to_string())?,
    })
}

/// Pushes the capsule `name` at `version` made of `files` ([`capsule_files`]) to `reference`
/// (tagged with the version when it names no tag). A reference by digest is refused.
pub fn push(
    reference: &CapsuleReference,
    name: &str,
    version: &str,
    files: &[CapsuleFile],
) -> Result<Pushed, RegistryError> {
    if reference.has_digest() {
        return Err(RegistryError::CapsuleNotMovable {
            capsule: name.to_string(),
            reason: "a capsule is pushed to a tag (oci://HOST/REPOSITORY[:TAG]), not a digest"
                .to_string(),
        });
    }
    let built = build(name, version, files).map_err(|reason| RegistryError::CapsuleNotMovable {
        capsule: name.to_string(),
        reason,
    })?;
    let target = reference.resolved(Some(version));
    reference
        .remote
        .push_image(&target, (name, version), &built)
}

/// A capsule [`pull`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// `oci://HOST/REPOSITORY@sha256:…`: what was pulled, by digest.
    pub reference: String,
    /// The manifest's sha256.
    pub sha256: String,
    /// Every file written, relative to the destination.
    pub files: Vec<String>,
}

/// Pulls the capsule at `reference` (a tag, `latest` when it names none, or a digest) into
/// `dest` (see the module docs).
pub fn pull(
    reference: &CapsuleReference,
    dest: &Path,
    limits: &UnpackLimits,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<Pulled, RegistryError> {
    let refuse = |reason: String| RegistryError::CapsuleNotMovable {
        capsule: shown(&reference.resolved(None)),
        reason,
    };
    let empty = match std::fs::read_dir(dest) {
        Ok(mut entries) => entries.next().is_none(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
        Err(error) => {
            return Err(refuse(format!(
                "{} cannot be read: {error}",
                dest.display()
            )));
        }
    };
    if !empty {
        return Err(refuse(format!(
            "{} already holds files; a capsule is pulled into a new or empty directory",
            dest.display()
        )));
    }
    let target = reference.resolved(None);
    if reference.remote.manifest(&target)?.is_none() {
        return Err(RegistryError::NoArtifact {
            name: shown(&target),
            known: Vec::new(),
        });
    }
    let layout = Layout {
        configs: &[CAPSULE_CONFIG_MEDIA_TYPE],
        layers: CAPSULE_LAYERS,
        max_layers: MAX_CAPSULE_LAYERS,
    };
    let check = |bytes: &[u8], location: &str| {
        let (_, layers) = check_image(bytes, location, &layout, limits)?;
        let not_capsule = |reason: String| RegistryError::NotAnArtifact {
            location: location.to_string(),
            reason,
        };
        for layer in &layers {
            let fixed = [
                (archive::MANIFEST_NAME, CAPSULE_MANIFEST_MEDIA_TYPE),
                (murmur_manifest::lock::LOCK_FILE, LOCK_MEDIA_TYPE),
            ];
            for (title, media_type) in fixed {
                if (layer.title == title) != (layer.descriptor.media_type == media_type) {
                    return Err(not_capsule(format!(
                        "its `{title}` must be the one layer of `{media_type}`"
                    )));
                }
            }
        }
        if !layers.iter().any(|l| l.title == archive::MANIFEST_NAME) {
            return Err(not_capsule(
                "it is not a capsule: it has no murmur.yaml".into(),
            ));
        }
        Ok(layers)
    };
    let (sha256, layers) =
        reference
            .remote
            .fetch_image(&target, (&shown(&target), ""), &check, progress)?;

    // An existing empty destination (a volume's mount point, whose parent may be read-only)
    // holds the staging directory itself; a new one is staged beside it.
    let into_existing = dest.is_dir();
    let parent = match dest.parent() {
        _ if into_existing => dest.to_path_buf(),
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let staging = tempfile::Builder::new()
        .prefix(".pulling-")
        .tempdir_in(&parent)
        .map_err(|e| {
            refuse(format!(
                "{} cannot hold a staging directory: {e}",
                parent.display()
            ))
        })?;
    let mut written = Vec::new();
    for (layer, bytes) in layers {
        let path = staging.path().join(&layer.title);
        if layer.descriptor.media_type == ARTIFACT_ARCHIVE_MEDIA_TYPE {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| RegistryError::Write {
                    path: parent.to_path_buf(),
                    source: e,
                })?;
            }
            let unpacked = archive::unpack(&bytes, &path, limits).map_err(|e| {
                RegistryError::NotAnArtifact {
                    location: format!("{} (layer `{}`)", shown(&target), layer.title),
                    reason: e.to_string(),
                }
            })?;
            // As built: its files share one time, so no source looks newer than its component
            // and `mur run` does not build it again where it was pulled (written one after the
            // other, the manifest could be a clock tick younger than the component).
            let now = std::time::SystemTime::now();
            for (file, _) in &unpacked.files {
                let opened = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path.join(file));
                opened
                    .and_then(|f| f.set_modified(now))
                    .map_err(|e| RegistryError::Write {
                        path: path.join(file),
                        source: e,
                    })?;
            }
            written.extend(
                unpacked
                    .files
                    .into_iter()
                    .map(|(file, _)| format!("{}/{file}", layer.title)),
            );
        } else {
            write_new(&path, &bytes)?;
            written.push(layer.title);
        }
    }
    if into_existing {
        move_entries(staging.path(), dest)?;
    } else {
        let staged = staging.keep();
        std::fs::rename(&staged, dest).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            RegistryError::Write {
                path: dest.to_path_buf(),
                source: e,
            }
        })?;
    }
    written.sort();
    Ok(Pulled {
        reference: shown(&target.clone_with_digest(format!("sha256:{sha256}"))),
        sha256,
        files: written,
    })
}

/// Moves every entry of `staging` into `dest` (on one filesystem: renames); when one cannot be
/// moved, those moved already are taken out again, so `dest` is left as it was.
fn move_entries(staging: &Path, dest: &Path) -> Result<(), RegistryError> {
    let failed = |path: &Path, e: std::io::Error| RegistryError::Write {
        path: path.to_path_buf(),
        source: e,
    };
    let entries = std::fs::read_dir(staging).map_err(|e| failed(staging, e))?;
    let mut moved = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| failed(staging, e))?;
        let target = dest.join(entry.file_name());
        if let Err(error) = std::fs::rename(entry.path(), &target) {
            for done in moved.iter().rev() {
                let _ = std::fs::remove_dir_all(done).or_else(|_| std::fs::remove_file(done));
            }
            return Err(failed(&target, error));
        }
        moved.push(target);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capsule_reference_is_a_repository_with_a_tag_or_a_digest() {
        let tagged = CapsuleReference::parse("oci://127.0.0.1:5000/team/helper:v1").unwrap();
        assert_eq!(
            shown(&tagged.resolved(None)),
            "oci://127.0.0.1:5000/team/helper:v1"
        );
        let bare = CapsuleReference::parse("oci://localhost:5000/helper").unwrap();
        assert_eq!(
            shown(&bare.resolved(Some("0.2.0+x"))),
            "oci://localhost:5000/helper:0.2.0_x"
        );
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned =
            CapsuleReference::parse(&format!("oci://localhost:5000/helper@{digest}")).unwrap();
        assert!(pinned.has_digest());
        assert_eq!(
            shown(&pinned.resolved(None)),
            format!("oci://localhost:5000/helper@{digest}")
        );
        for bad in [
            "oci://localhost:5000",
            "oci://localhost:5000/Helper",
            "oci://localhost:5000/helper:",
            "oci://localhost:5000/helper:-x",
            "oci://localhost:5000/helper@sha256:abc",
            "oci://user:pw@localhost:5000/helper",
            "https://localhost/helper",
        ] {
            let error = CapsuleReference::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad}"));
            assert!(!error.to_string().contains("pw@"), "{error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn no_reference_makes_parsing_panic(text in "(oci://)?[ -~]{0,60}") {
            let _ = CapsuleReference::parse(&text);
            let _ = super::super::OciRegistry::parse(&text);
        }
    }

    #[test]
    fn files_a_capsule_names_must_lie_inside_it() {
        assert_eq!(
            inside(Path::new("./artifacts/read-file")).unwrap(),
            "artifacts/read-file"
        );
        for bad in [
            "../elsewhere",
            "/etc/prompt.md",
            ".",
            ".murmur/artifacts/x",
            "a/.git",
        ] {
            assert!(inside(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
