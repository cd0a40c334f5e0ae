//! OCI registries: artifacts kept in any registry that speaks the OCI distribution API, named
//! `oci://HOST[:PORT]/NAMESPACE`.
//!
//! What this module promises:
//!
//! - **Where an artifact is.** Artifact NAME at VERSION is the manifest tagged VERSION in the
//!   repository NAMESPACE/NAME: `oci://HOST/NAMESPACE/NAME:VERSION` (a `+` of the version is
//!   `_` in the tag, which cannot hold `+`). Without a version, the newest tag that is a semantic
//!   version is taken, a release before any prerelease.
//! - **The layout other Wasm tools read.** A component artifact is an OCI image manifest whose
//!   config is the Wasm config (`application/vnd.wasm.config.v0+json`: architecture `wasm`, os
//!   `wasip2`, the component's imports and exports), whose first layer is the component
//!   (`application/wasm`), and whose second is the artifact's own `murmur.yaml`
//!   (`application/vnd.murmur.artifact.manifest.v1+yaml`). A skill's config is a Murmur skill
//!   config and its text a `text/markdown` layer. Each layer is annotated with
//!   `org.opencontainers.image.title`, its path inside the artifact. Nothing in it depends on
//!   when, where or by whom it was pushed: the same files give the same digest.
//! - **The identity is the manifest's sha256** ([`OciRegistry::resolve`]): what `murmur.lock`
//!   pins. Fetching ([`OciRegistry::stage`]) reads the manifest again by that digest, checks
//!   its bytes have it, and writes a layer only when its bytes have the digest the manifest
//!   lists (`E-REG-004` otherwise).
//! - **A hostile registry is held to bounds.** A manifest of another media type, with more
//!   than [`MAX_LAYERS`] layers, a layer of an unknown media type, a digest that is not sha256,
//!   a size over the unpacking limits (`E-REG-003`), a title that is not a plain relative path
//!   inside the artifact or has a hidden part (the install receipt, a project store), two
//!   layers of one title, or no `murmur.yaml` is refused (`E-REG-002`) before any layer is
//!   read; a layer body is never read past the size the manifest gives it.
//! - **Publishing** ([`OciRegistry::push`]) the same files again changes nothing; other files
//!   under a version already there are refused (`E-REG-011`) and nothing is pushed.
//! - **Credentials are bound to hosts** ([`credentials`]): `MURMUR_REGISTRY_USERNAME` and
//!   `MURMUR_REGISTRY_PASSWORD` (or `MURMUR_REGISTRY_TOKEN`) go only to the host
//!   `$MURMUR_REGISTRY` names or `MURMUR_REGISTRY_HOSTS` lists; `NAME@HOST` entries and the
//!   Docker credential file to their own host; a token realm on another host gets only what is
//!   bound to it ([`wire`]). A value is never printed, never in an error and never in
//!   `murmur.lock`; a registry that refuses the request for want of credentials is
//!   `E-REG-015`, saying why none were sent.
//! - **Every read bounded** ([`wire`]): a manifest past [`MAX_MANIFEST_BYTES`] (4 MiB), a tag
//!   list or a token answer past theirs is refused as it streams (`E-REG-003`).
//! - **Plain HTTP only on loopback.** A registry on `localhost`, `127.0.0.0/8` or `::1` is
//!   spoken to over HTTP (and never through a proxy); any other over HTTPS.
//! - **Whole capsules** go the same way ([`capsule`]).
//! - **Blocking calls**, each on a thread of its own, so callers inside an async runtime or
//!   not may make them; a connect timeout, a stall timeout on every read, and an overall
//!   deadline.

pub mod capsule;
pub mod credentials;
pub mod host;
pub mod wire;

pub use credentials::{
    CredentialSources, Credentials, HOSTS_VARIABLE, PASSWORD_CREDENTIAL, TOKEN_CREDENTIAL,
    USERNAME_CREDENTIAL,
};
pub use host::SCHEME;
pub(crate) use host::check_host;
pub use wire::MAX_MANIFEST_BYTES;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use murmur_manifest::Runtime;
use murmur_manifest::artifact::ArtifactManifest;
use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use serde_json::json;

use crate::answer::{IndexEntry, RegistryError};
use crate::archive::{MANIFEST_NAME, UnpackLimits, entry_path};
use crate::sha256_hex;
use wire::{Session, WireError};

/// The Wasm config's media type (the Wasm OCI artifact layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// A component layer's media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of the layer holding an artifact's own `murmur.yaml`.
pub const ARTIFACT_MANIFEST_MEDIA_TYPE: &str = "application/vnd.murmur.artifact.manifest.v1+yaml";
/// A skill artifact's config.
pub const SKILL_CONFIG_MEDIA_TYPE: &str = "application/vnd.murmur.skill.config.v1+json";
/// A skill's text.
pub const SKILL_LAYER_MEDIA_TYPE: &str = "text/markdown";
/// The annotation naming a layer's path inside the artifact.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The annotation naming the artifact's runtime on its manifest.
pub const RUNTIME_ANNOTATION: &str = "dev.murmur.artifact.runtime";
/// The most layers an artifact's manifest may list.
pub const MAX_LAYERS: usize = 8;
/// The largest config blob read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one whole operation (a resolve, a fetch, a push) may take.
const DEADLINE: Duration = Duration::from_secs(600);

/// The layer media types an artifact may have.
const LAYER_MEDIA_TYPES: &[&str] = &[
    WASM_LAYER_MEDIA_TYPE,
    ARTIFACT_MANIFEST_MEDIA_TYPE,
    SKILL_LAYER_MEDIA_TYPE,
];

/// An OCI registry and the namespace artifacts are kept under in it.
#[derive(Clone, PartialEq, Eq)]
pub struct OciRegistry {
    remote: Remote,
    /// Repository path components before the artifact's name; may be empty.
    namespace: String,
}

impl std::fmt::Debug for OciRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciRegistry")
            .field("host", &self.remote.host)
            .field("namespace", &self.namespace)
            .field("credentials", &self.remote.credentials.origin())
            .finish()
    }
}

/// An artifact pushed by [`OciRegistry::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `oci://HOST/REPOSITORY:TAG`.
    pub reference: String,
    /// The manifest's sha256 (64 lowercase hex digits).
    pub sha256: String,
    /// The bytes of every layer and the config.
    pub bytes: u64,
    /// `pushed`, or `unchanged` when the tag already named these very files.
    pub how: &'static str,
}

impl OciRegistry {
    /// The registry `given` names: `oci://HOST[:PORT][/NAMESPACE]`. A tag or digest is refused:
    /// a registry holds many artifacts, each at `NAMESPACE/NAME:VERSION`.
    pub fn parse(given: &str) -> Result<OciRegistry, RegistryError> {
        // Shown without any user name or password written into it.
        let shown = match given.trim().strip_prefix(SCHEME) {
            Some(rest) => match rest
                .split('/')
                .next()
                .and_then(|host| host.rsplit_once('@'))
            {
                Some((_, host)) => format!("{SCHEME}…@{host}"),
                None => given.to_string(),
            },
            None => given.to_string(),
        };
        let refuse = |reason: String| RegistryError::NotARegistry {
            given: shown.clone(),
            reason,
        };
        let rest = given
            .trim()
            .strip_prefix(SCHEME)
            .ok_or_else(|| refuse(format!("it does not begin with `{SCHEME}`")))?;
        let (host, namespace) = rest.split_once('/').unwrap_or((rest, ""));
        let namespace = namespace.trim_end_matches('/');
        check_host(host).map_err(refuse)?;
        if let Some(last) = namespace.rsplit('/').next()
            && (last.contains(':') || last.contains('@'))
        {
            return Err(refuse(
                "it names a tag or digest; a registry is `oci://HOST/NAMESPACE`, and artifact \
                 NAME at VERSION is found at NAMESPACE/NAME:VERSION"
                    .to_string(),
            ));
        }
        if !namespace.is_empty() {
            for part in namespace.split('/') {
                check_path_component(part)
                    .map_err(|why| refuse(format!("its repository path part `{part}` {why}")))?;
            }
        }
        Ok(OciRegistry {
            remote: Remote::new(host),
            namespace: namespace.to_string(),
        })
    }

    /// The registry's host (`HOST` or `HOST:PORT`), the key of its credentials.
    pub fn host(&self) -> &str {
        &self.remote.host
    }

    /// The same registry, presenting what `sources` bind to its host (see [`credentials`]);
    /// a token realm on another host gets only what they bind to that host.
    pub fn with_sources(
        mut self,
        sources: &CredentialSources,
    ) -> Result<OciRegistry, RegistryError> {
        self.remote = self.remote.with_sources(sources)?;
        Ok(self)
    }

    /// The same registry, presenting `credentials` (and nothing to a token realm on another
    /// host).
    pub fn with_credentials(mut self, credentials: Credentials) -> OciRegistry {
        self.remote.credentials = credentials;
        self
    }

    /// `oci://HOST/NAMESPACE`: what `murmur.lock` records as the source (no credentials).
    pub fn describe(&self) -> String {
        if self.namespace.is_empty() {
            format!("{SCHEME}{}", self.remote.host)
        } else {
            format!("{SCHEME}{}/{}", self.remote.host, self.namespace)
        }
    }

    /// The repository of artifact `name`, or why `name` cannot be one.
    fn repository(&self, name: &str) -> Result<String, RegistryError> {
        check_path_component(name).map_err(|why| RegistryError::Unpublishable {
            name: name.to_string(),
            version: String::new(),
            reason: format!("an OCI repository name {why}, and the artifact's name is one"),
        })?;
        Ok(if self.namespace.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.namespace)
        })
    }

    fn tagged(&self, name: &str, version: &str) -> Result<Reference, RegistryError> {
        Ok(Reference::with_tag(
            self.remote.host.clone(),
            self.repository(name)?,
            version_tag(version),
        ))
    }

    /// `oci://HOST/REPOSITORY:TAG` of artifact `name` at `version`.
    pub fn reference(&self, name: &str, version: &str) -> Result<String, RegistryError> {
        Ok(shown(&self.tagged(name, version)?))
    }

    /// Artifact `name` at `version` (else the newest version tagged): its manifest's sha256 as
    /// the entry's `sha256`, its runtime from the manifest, and as `url` the reference by
    /// digest. The manifest is checked as [`OciRegistry::stage`] checks it.
    pub fn resolve(&self, name: &str, version: Option<&str>) -> Result<IndexEntry, RegistryError> {
        let version = match version {
            Some(version) => version.trim().to_string(),
            None => self.newest_version(name)?,
        };
        let reference = self.tagged(name, &version)?;
        let Some(bytes) = self.remote.manifest(&reference)? else {
            return Err(RegistryError::NoVersion {
                name: name.to_string(),
                version,
                available: self.versions(name).unwrap_or_default(),
            });
        };
        let sha256 = sha256_hex(&bytes);
        let checked = check_artifact(&bytes, &shown(&reference), &UnpackLimits::default())?;
        Ok(IndexEntry {
            name: name.to_string(),
            version,
            runtime: checked.runtime.to_string(),
            url: shown(&reference.clone_with_digest(format!("sha256:{sha256}"))),
            sha256,
            size: Some(checked.total),
        })
    }

    /// The versions tagged in artifact `name`'s repository, as semantic versions, oldest first.
    fn versions(&self, name: &str) -> Result<Vec<String>, RegistryError> {
        let tags = self.remote.tags(&self.tagged(name, "latest")?)?;
        let mut versions: Vec<semver::Version> = tags
            .iter()
            .filter_map(|tag| semver::Version::parse(&tag.replace('_', "+")).ok())
            .collect();
        versions.sort();
        Ok(versions.iter().map(ToString::to_string).collect())
    }

    fn newest_version(&self, name: &str) -> Result<String, RegistryError> {
        let versions = self.versions(name)?;
        let parsed: Vec<semver::Version> = versions
            .iter()
            .filter_map(|v| semver::Version::parse(v).ok())
            .collect();
        parsed
            .iter()
            .filter(|v| v.pre.is_empty())
            .max()
            .or_else(|| parsed.iter().max())
            .map(ToString::to_string)
            .ok_or_else(|| RegistryError::NoArtifact {
                name: name.to_string(),
                known: Vec::new(),
            })
    }

    /// Fetches the artifact `entry` names ([`OciRegistry::resolve`]'s answer) into `dest`,
    /// which must not exist: its manifest by digest, checked, then each layer verified against
    /// its digest and written at its title. Returns each file with its sha256, as an unpacked
    /// archive's. `progress(done, total)` as bytes arrive.
    pub fn stage(
        &self,
        entry: &IndexEntry,
        dest: &Path,
        limits: &UnpackLimits,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<Vec<(String, String)>, RegistryError> {
        let reference = self
            .tagged(&entry.name, &entry.version)?
            .clone_with_digest(format!("sha256:{}", entry.sha256));
        let (_, layers) = self.remote.fetch_image(
            &reference,
            (&entry.name, &entry.version),
            &|bytes, location| check_artifact(bytes, location, limits).map(|c| c.layers),
            progress,
        )?;
        let write_failed = |path: &Path, e: std::io::Error| RegistryError::Write {
            path: path.to_path_buf(),
            source: e,
        };
        std::fs::create_dir(dest).map_err(|e| write_failed(dest, e))?;
        let mut written = Vec::new();
        for (layer, bytes) in layers {
            write_new(&dest.join(&layer.title), &bytes)?;
            written.push((layer.title, layer.sha256));
        }
        Ok(written)
    }

    /// Pushes the artifact made of `files` ([`crate::archive::packed_files`]) whose manifest is
    /// `manifest`, tagged with its version: `unchanged` when the tag already names these very
    /// files, `E-REG-011` (nothing pushed) when it names others.
    pub fn push(
        &self,
        manifest: &ArtifactManifest,
        files: &[(String, Vec<u8>)],
    ) -> Result<Pushed, RegistryError> {
        let (name, version) = (&manifest.name, &manifest.version);
        let reference = self.tagged(name, version)?;
        let built =
            build_manifest(manifest, files).map_err(|reason| RegistryError::Unpublishable {
                name: name.clone(),
                version: version.clone(),
                reason,
            })?;
        self.remote.push_image(&reference, (name, version), &built)
    }
}

/// `path`, a new file, holding `bytes` (its directories made as needed).
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let write_failed = |path: &Path, e: std::io::Error| RegistryError::Write {
        path: path.to_path_buf(),
        source: e,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| write_failed(parent, e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| write_failed(path, e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| write_failed(path, e))
}

/// `oci://HOST/REPOSITORY:TAG`, or `…@sha256:…` for a reference by digest.
pub(crate) fn shown(reference: &Reference) -> String {
    match (reference.digest(), reference.tag()) {
        (Some(digest), _) => format!(
            "{SCHEME}{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        (None, Some(tag)) => format!(
            "{SCHEME}{}/{}:{tag}",
            reference.registry(),
            reference.repository()
        ),
        (None, None) => format!(
            "{SCHEME}{}/{}",
            reference.registry(),
            reference.repository()
        ),
    }
}

/// A registry's host and the credentials presented to it: what every request needs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Remote {
    /// `HOST` or `HOST:PORT`.
    pub(crate) host: String,
    pub(crate) credentials: Credentials,
    /// Where credentials for a token realm on another host are looked for.
    pub(crate) sources: CredentialSources,
}

impl Remote {
    pub(crate) fn new(host: &str) -> Remote {
        Remote {
            host: host.to_string(),
            credentials: Credentials::Anonymous,
            sources: CredentialSources::none(),
        }
    }

    /// The same registry, presenting what `sources` bind to its host.
    pub(crate) fn with_sources(
        mut self,
        sources: &CredentialSources,
    ) -> Result<Remote, RegistryError> {
        self.credentials = sources.find(&self.host)?;
        self.sources = sources.clone();
        Ok(self)
    }

    fn session(&self) -> Result<Session, WireError> {
        Session::new(
            &self.host,
            self.credentials.clone(),
            self.sources.clone(),
            CONNECT_TIMEOUT,
            STALL_TIMEOUT,
        )
    }

    /// The manifest bytes at `reference` (a tag or a digest), or `None` when it names none;
    /// at most [`MAX_MANIFEST_BYTES`].
    pub(crate) fn manifest(&self, reference: &Reference) -> Result<Option<Vec<u8>>, RegistryError> {
        let location = shown(reference);
        let session = self.session().map_err(|e| self.failure(&location, e))?;
        let at = reference_part(reference);
        blocking(|| async {
            session
                .manifest(reference.repository(), &at, OCI_IMAGE_MEDIA_TYPE)
                .await
        })
        .map_err(|e| self.failure(&location, e))
    }

    /// The tags of `reference`'s repository (none when it has none).
    pub(crate) fn tags(&self, reference: &Reference) -> Result<Vec<String>, RegistryError> {
        let location = format!("{SCHEME}{}/{}", self.host, reference.repository());
        let session = self.session().map_err(|e| self.failure(&location, e))?;
        blocking(|| async { session.tags(reference.repository()).await })
            .map_err(|e| self.failure(&location, e))
    }

    /// The image at `reference`: its manifest (whose sha256 must be the reference's digest,
    /// when it has one), checked by `check`, then each layer `check` gives, read no further
    /// than its size and verified against its digest. `who` (a name and version) names it in a
    /// mismatch. Returns the manifest's sha256 and each layer with its bytes.
    #[allow(clippy::type_complexity)]
    pub(crate) fn fetch_image(
        &self,
        reference: &Reference,
        who: (&str, &str),
        check: &(dyn Fn(&[u8], &str) -> Result<Vec<CheckedLayer>, RegistryError> + Sync),
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<(String, Vec<(CheckedLayer, Vec<u8>)>), RegistryError> {
        let location = shown(reference);
        let mismatch =
            |location: String, expected: String, actual: String| RegistryError::HashMismatch {
                name: who.0.to_string(),
                version: who.1.to_string(),
                location,
                expected,
                actual,
            };
        let session = self.session().map_err(|e| self.failure(&location, e))?;
        let at = reference_part(reference);
        let (session, shown_at, at) = (&session, &location, &at);
        let repository = reference.repository();
        let fetched = blocking_reporting(
            |report| async move {
                let location = shown_at;
                let Some(bytes) = session
                    .manifest(repository, at, OCI_IMAGE_MEDIA_TYPE)
                    .await?
                else {
                    return Err(WireError::Status {
                        status: 404,
                        what: "the manifest".to_string(),
                    });
                };
                let sha256 = sha256_hex(&bytes);
                if let Some(expected) = reference.digest()
                    && expected != format!("sha256:{sha256}")
                {
                    return Ok(Err(mismatch(
                        location.clone(),
                        expected.to_string(),
                        sha256,
                    )));
                }
                let layers = match check(&bytes, location) {
                    Ok(layers) => layers,
                    Err(error) => return Ok(Err(error)),
                };
                let total: u64 = layers.iter().map(|l| l.size).sum();
                let mut fetched = Vec::new();
                let mut done = 0u64;
                let _ = report.send((0, total));
                for layer in layers {
                    let at = format!("{location} (layer `{}`)", layer.title);
                    let response = session.blob(repository, &layer.descriptor.digest).await?;
                    if response.content_length().is_some_and(|n| n > layer.size) {
                        let actual =
                            format!("more than the {} bytes the manifest lists", layer.size);
                        return Ok(Err(mismatch(at, layer.sha256.clone(), actual)));
                    }
                    let mut stream = response.bytes_stream();
                    let mut bytes = Vec::with_capacity(layer.size.min(8 << 20) as usize);
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk?;
                        if (bytes.len() + chunk.len()) as u64 > layer.size {
                            let actual =
                                format!("more than the {} bytes the manifest lists", layer.size);
                            return Ok(Err(mismatch(at, layer.sha256.clone(), actual)));
                        }
                        done += chunk.len() as u64;
                        bytes.extend_from_slice(&chunk);
                        let _ = report.send((done, total));
                    }
                    let actual = sha256_hex(&bytes);
                    if actual != layer.sha256 {
                        return Ok(Err(mismatch(at, layer.sha256.clone(), actual)));
                    }
                    fetched.push((layer, bytes));
                }
                Ok::<_, WireError>(Ok((sha256, fetched)))
            },
            progress,
        )
        .map_err(|e| self.failure(&location, e))??;
        Ok(fetched)
    }

    /// Pushes `built` tagged as `reference` says: `unchanged` when the tag already names this
    /// very manifest, `E-REG-011` (nothing pushed) when it names another; `who` names it.
    pub(crate) fn push_image(
        &self,
        reference: &Reference,
        who: (&str, &str),
        built: &Built,
    ) -> Result<Pushed, RegistryError> {
        let location = shown(reference);
        let sha256 = sha256_hex(&built.manifest);
        let bytes =
            built.config.len() as u64 + built.layers.iter().map(|l| l.len() as u64).sum::<u64>();
        if let Some(existing) = self.manifest(reference)? {
            let existing = sha256_hex(&existing);
            if existing != sha256 {
                return Err(RegistryError::VersionTaken {
                    name: who.0.to_string(),
                    version: who.1.to_string(),
                    existing: format!("sha256:{existing} (its manifest)"),
                    offered: format!("sha256:{sha256}"),
                });
            }
            return Ok(Pushed {
                reference: location,
                sha256,
                bytes,
                how: "unchanged",
            });
        }
        let session = self.session().map_err(|e| self.failure(&location, e))?;
        let repository = reference.repository();
        let tag = reference_part(reference);
        blocking(|| async {
            for blob in built.layers.iter().chain(std::iter::once(&built.config)) {
                let digest = format!("sha256:{}", sha256_hex(blob));
                session
                    .push_blob(repository, &digest, bytes::Bytes::from(blob.clone()))
                    .await?;
            }
            session
                .put_manifest(
                    repository,
                    &tag,
                    bytes::Bytes::from(built.manifest.clone()),
                    OCI_IMAGE_MEDIA_TYPE,
                )
                .await
        })
        .map_err(|e| self.failure(&location, e))?;
        Ok(Pushed {
            reference: location,
            sha256,
            bytes,
            how: "pushed",
        })
    }

    /// What a failed request means, as this crate's error for `location`.
    fn failure(&self, location: &str, error: WireError) -> RegistryError {
        let host = &self.host;
        match error {
            WireError::Unauthorized {
                sent: Some(origin), ..
            } => RegistryError::Credentials {
                registry: host.clone(),
                detail: format!(
                    "it refused the credentials from {origin} (or they may not do this)"
                ),
                hint: None,
            },
            WireError::Unauthorized {
                sent: None,
                unbound_realm: Some(realm),
            } => RegistryError::Credentials {
                registry: host.clone(),
                detail: format!(
                    "it asks for a token from {realm}, another host, and no credential is \
                     bound to {realm}, so the credentials from {} were not sent there",
                    self.credentials.origin()
                ),
                hint: Some(format!(
                    "if {realm} is the registry's own token service, bind a credential to it: \
                     add it to {HOSTS_VARIABLE} (e.g. {HOSTS_VARIABLE}={host},{realm}), or put \
                     MURMUR_REGISTRY_USERNAME@{realm} and MURMUR_REGISTRY_PASSWORD@{realm} in \
                     $MURMUR_HOME/credentials.yaml"
                )),
            },
            WireError::Unauthorized { sent: None, .. } => match &self.credentials {
                Credentials::Withheld { origin, bound } => RegistryError::Credentials {
                    registry: host.clone(),
                    detail: format!(
                        "it asks for credentials, and none were sent: those from {origin} are \
                         bound to {} ($MURMUR_REGISTRY and {HOSTS_VARIABLE}), not to {host}",
                        if bound.is_empty() {
                            "no registry host".to_string()
                        } else {
                            bound.join(", ")
                        }
                    ),
                    hint: Some(format!(
                        "only if {host} is a registry you trust with them: add it to \
                         {HOSTS_VARIABLE} (e.g. {HOSTS_VARIABLE}={host}), or name it in \
                         $MURMUR_REGISTRY; or give it its own credentials \
                         (MURMUR_REGISTRY_TOKEN@{host}, or MURMUR_REGISTRY_USERNAME@{host} and \
                         MURMUR_REGISTRY_PASSWORD@{host}, in $MURMUR_HOME/credentials.yaml), or \
                         log in to it with a Docker credential file"
                    )),
                },
                _ => RegistryError::Credentials {
                    registry: host.clone(),
                    detail: "it asks for credentials, and none were found for it".to_string(),
                    hint: None,
                },
            },
            WireError::TooLarge { .. } => RegistryError::BodyTooLarge {
                location: location.to_string(),
                detail: error.to_string(),
            },
            other => RegistryError::Unreachable {
                location: location.to_string(),
                detail: other.to_string(),
            },
        }
    }
}

/// The tag or digest `reference` names (`latest` when neither).
fn reference_part(reference: &Reference) -> String {
    reference
        .digest()
        .or(reference.tag())
        .unwrap_or("latest")
        .to_string()
}

/// Runs the future `make` gives to its end on a runtime of its own, on a thread of its own (so
/// it may be called from inside another runtime), within [`DEADLINE`].
fn blocking<F, Fut, T>(make: F) -> Result<T, WireError>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<T, WireError>>,
    T: Send,
{
    blocking_reporting(|_| make(), &mut |_, _| {})
}

/// [`blocking`], the future reporting `(done, total)` bytes on the sender it is given, each
/// passed on to `progress` on the calling thread.
fn blocking_reporting<F, Fut, T>(
    make: F,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<T, WireError>
where
    F: FnOnce(std::sync::mpsc::Sender<(u64, u64)>) -> Fut + Send,
    Fut: Future<Output = Result<T, WireError>>,
    T: Send,
{
    let (sender, reports) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| WireError::Transport(e.to_string()))?;
            runtime
                .block_on(async { tokio::time::timeout(DEADLINE, make(sender)).await })
                .map_err(|_| {
                    WireError::Transport(format!(
                        "it took longer than {} seconds",
                        DEADLINE.as_secs()
                    ))
                })?
        });
        // Ends when the future (and so its sender) is dropped.
        for (done, total) in reports {
            progress(done, Some(total));
        }
        worker.join().unwrap_or_else(|_| {
            Err(WireError::Transport(
                "the registry client stopped unexpectedly".to_string(),
            ))
        })
    })
}

/// A version as a tag: tags cannot hold `+`.
pub(crate) fn version_tag(version: &str) -> String {
    version.replace('+', "_")
}

/// Whether `part` is a repository path component: lowercase letters and digits, separated by
/// one `.`, one or two `_`, or any number of `-`.
pub(crate) fn check_path_component(part: &str) -> Result<(), &'static str> {
    if part.is_empty() || part.len() > 128 {
        return Err("must have 1 to 128 characters");
    }
    let bytes = part.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err("must begin and end with a lowercase letter or digit");
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if alnum(b) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &part[start..i];
        let ok = separator == "."
            || separator == "_"
            || separator == "__"
            || separator.bytes().all(|b| b == b'-');
        if !ok {
            return Err(
                "may hold only lowercase letters and digits, separated by `.`, `_`, `__` or `-`",
            );
        }
    }
    Ok(())
}

/// A layer the manifest lists, checked.
#[derive(Debug)]
pub(crate) struct CheckedLayer {
    pub(crate) descriptor: OciDescriptor,
    /// Its path inside the artifact or capsule: plain, relative, `/`-separated.
    pub(crate) title: String,
    pub(crate) sha256: String,
    pub(crate) size: u64,
}

/// An artifact's manifest, checked against the bounds.
#[derive(Debug)]
struct CheckedManifest {
    runtime: Runtime,
    layers: Vec<CheckedLayer>,
    total: u64,
}

/// What an image may hold, for [`check_image`].
pub(crate) struct Layout<'a> {
    /// The config media types it may have.
    pub(crate) configs: &'a [&'a str],
    /// The layer media types it may have.
    pub(crate) layers: &'a [&'a str],
    pub(crate) max_layers: usize,
}

/// The manifest `bytes` of the image at `location`, checked against `layout` and `limits`
/// (see the module docs): every layer's media type, digest, size and title. What it is not is
/// `E-REG-002` (`E-REG-003` for a size over a limit).
pub(crate) fn check_image(
    bytes: &[u8],
    location: &str,
    layout: &Layout<'_>,
    limits: &UnpackLimits,
) -> Result<(OciImageManifest, Vec<CheckedLayer>), RegistryError> {
    let refuse = |reason: String| RegistryError::NotAnArtifact {
        location: location.to_string(),
        reason,
    };
    let manifest: OciImageManifest = serde_json::from_slice(bytes)
        .map_err(|e| refuse(format!("its manifest is not an OCI image manifest ({e})")))?;
    if manifest.schema_version != 2 {
        return Err(refuse(format!(
            "its manifest has schemaVersion {}, not 2",
            manifest.schema_version
        )));
    }
    if let Some(media_type) = &manifest.media_type
        && media_type != OCI_IMAGE_MEDIA_TYPE
    {
        return Err(refuse(format!(
            "its manifest is `{media_type}`, not `{OCI_IMAGE_MEDIA_TYPE}`"
        )));
    }
    let config_type = manifest.config.media_type.as_str();
    if !layout.configs.contains(&config_type) {
        return Err(refuse(format!(
            "its config is `{config_type}`, not {}",
            layout.configs.join(" or ")
        )));
    }
    if manifest.config.size < 0 || manifest.config.size as u64 > MAX_CONFIG_BYTES {
        return Err(refuse(format!(
            "its config's size {} is outside 0..={MAX_CONFIG_BYTES}",
            manifest.config.size
        )));
    }
    if manifest.layers.len() > layout.max_layers {
        return Err(refuse(format!(
            "it lists {} layers, more than {}",
            manifest.layers.len(),
            layout.max_layers
        )));
    }
    let mut titles = BTreeSet::new();
    let mut layers = Vec::new();
    let mut total = 0u64;
    for descriptor in &manifest.layers {
        if !layout.layers.contains(&descriptor.media_type.as_str()) {
            return Err(refuse(format!(
                "it has a layer of media type `{}`, not one of {}",
                descriptor.media_type,
                layout.layers.join(", ")
            )));
        }
        let sha256 = descriptor
            .digest
            .strip_prefix("sha256:")
            .filter(|hex| murmur_manifest::lock::is_sha256_hex(hex))
            .ok_or_else(|| {
                refuse(format!(
                    "a layer's digest `{}` is not `sha256:` and 64 lowercase hex digits",
                    descriptor.digest.escape_debug()
                ))
            })?
            .to_string();
        let size = u64::try_from(descriptor.size)
            .map_err(|_| refuse(format!("a layer has the size {}", descriptor.size)))?;
        if size > limits.max_file_bytes {
            return Err(RegistryError::TooLarge {
                name: location.to_string(),
                version: String::new(),
                limit: limits.max_file_bytes,
                size: Some(size),
            });
        }
        total = total.saturating_add(size);
        if total > limits.max_total_bytes {
            return Err(RegistryError::TooLarge {
                name: location.to_string(),
                version: String::new(),
                limit: limits.max_total_bytes,
                size: Some(total),
            });
        }
        let raw_title = descriptor
            .annotations
            .as_ref()
            .and_then(|a| a.get(TITLE_ANNOTATION))
            .ok_or_else(|| refuse(format!("a layer has no `{TITLE_ANNOTATION}` annotation")))?;
        let title = entry_path(raw_title.as_bytes()).map_err(|why| {
            refuse(format!(
                "its layer titled `{}` {why}",
                raw_title.escape_debug()
            ))
        })?;
        // Nothing hidden: not the install receipt, not a project store, not a dotfile.
        if title.is_empty() || title.split('/').any(|part| part.starts_with('.')) {
            return Err(refuse(format!(
                "its layer titled `{}` is not a file it may hold",
                raw_title.escape_debug()
            )));
        }
        if !titles.insert(title.clone()) {
            return Err(refuse(format!("two layers are titled `{title}`")));
        }
        layers.push(CheckedLayer {
            descriptor: descriptor.clone(),
            title,
            sha256,
            size,
        });
    }
    // A file and a directory of one name cannot both be written.
    for title in &titles {
        let mut prefix = String::new();
        for part in title.split('/') {
            if !prefix.is_empty() && titles.contains(&prefix) {
                return Err(refuse(format!(
                    "`{prefix}` is both a file and a directory in it"
                )));
            }
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
        }
    }
    Ok((manifest, layers))
}

/// Checks the manifest `bytes` of the artifact at `location` (see the module docs).
fn check_artifact(
    bytes: &[u8],
    location: &str,
    limits: &UnpackLimits,
) -> Result<CheckedManifest, RegistryError> {
    let refuse = |reason: String| RegistryError::NotAnArtifact {
        location: location.to_string(),
        reason,
    };
    let layout = Layout {
        configs: &[WASM_CONFIG_MEDIA_TYPE, SKILL_CONFIG_MEDIA_TYPE],
        layers: LAYER_MEDIA_TYPES,
        max_layers: MAX_LAYERS,
    };
    let (manifest, layers) = check_image(bytes, location, &layout, limits)?;
    let runtime_text = manifest
        .annotations
        .as_ref()
        .and_then(|a| a.get(RUNTIME_ANNOTATION))
        .ok_or_else(|| {
            refuse(format!(
                "it is not a Murmur artifact: its manifest has no `{RUNTIME_ANNOTATION}` annotation"
            ))
        })?;
    let runtime = Runtime::parse(runtime_text)
        .filter(|r| {
            matches!(
                r,
                Runtime::Tool | Runtime::Driver | Runtime::Hook | Runtime::Skill
            )
        })
        .ok_or_else(|| {
            refuse(format!(
                "its runtime `{}` is not an artifact runtime",
                runtime_text.escape_debug()
            ))
        })?;
    let wanted_config = if runtime == Runtime::Skill {
        SKILL_CONFIG_MEDIA_TYPE
    } else {
        WASM_CONFIG_MEDIA_TYPE
    };
    if manifest.config.media_type != wanted_config {
        return Err(refuse(format!(
            "its config is `{}`, and a {runtime} artifact's is `{wanted_config}`",
            manifest.config.media_type
        )));
    }
    for layer in &layers {
        if (layer.title == MANIFEST_NAME)
            != (layer.descriptor.media_type == ARTIFACT_MANIFEST_MEDIA_TYPE)
        {
            return Err(refuse(format!(
                "its `{MANIFEST_NAME}` must be the one layer of `{ARTIFACT_MANIFEST_MEDIA_TYPE}`"
            )));
        }
    }
    if !layers.iter().any(|l| l.title == MANIFEST_NAME) {
        return Err(refuse(format!("it has no `{MANIFEST_NAME}` layer")));
    }
    let total = layers.iter().map(|l| l.size).sum();
    Ok(CheckedManifest {
        runtime,
        layers,
        total,
    })
}

/// The descriptor of the blob `bytes` of `media_type`, titled `title` when it is a layer.
pub(crate) fn descriptor(media_type: &str, bytes: &[u8], title: Option<&str>) -> OciDescriptor {
    OciDescriptor {
        media_type: media_type.to_string(),
        digest: format!("sha256:{}", sha256_hex(bytes)),
        size: bytes.len() as i64,
        urls: None,
        artifact_type: None,
        annotations: title
            .map(|title| BTreeMap::from([(TITLE_ANNOTATION.to_string(), title.to_string())])),
    }
}

/// The blobs and manifest of one image (an artifact or a capsule), as pushed.
pub(crate) struct Built {
    pub(crate) config: Vec<u8>,
    pub(crate) layers: Vec<Vec<u8>>,
    pub(crate) manifest: Vec<u8>,
}

/// The OCI manifest, config and layers of the artifact of `files` (see the module docs).
fn build_manifest(
    manifest: &ArtifactManifest,
    files: &[(String, Vec<u8>)],
) -> Result<Built, String> {
    let is_skill = manifest.runtime == Runtime::Skill;
    // The payload (component or skill) first, as Wasm tools read the first layer; then the
    // artifact's own manifest.
    let mut ordered: Vec<&(String, Vec<u8>)> = files.iter().collect();
    ordered.sort_by_key(|(name, _)| name == MANIFEST_NAME);
    let mut layers = Vec::new();
    let mut descriptors = Vec::new();
    for (name, bytes) in ordered {
        let media_type = if name == MANIFEST_NAME {
            ARTIFACT_MANIFEST_MEDIA_TYPE
        } else if is_skill {
            SKILL_LAYER_MEDIA_TYPE
        } else {
            WASM_LAYER_MEDIA_TYPE
        };
        descriptors.push(descriptor(media_type, bytes, Some(name)));
        layers.push(bytes.clone());
    }
    let config = if is_skill {
        json!({"name": manifest.name, "version": manifest.version, "runtime": "skill"})
    } else {
        let component = files
            .iter()
            .find(|(name, _)| name != MANIFEST_NAME)
            .map(|(_, bytes)| bytes.as_slice())
            .ok_or("it has no component")?;
        let (imports, exports) = component_names(component)?;
        json!({
            "created": "1970-01-01T00:00:00Z",
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": descriptors.iter()
                .filter(|d| d.media_type == WASM_LAYER_MEDIA_TYPE)
                .map(|d| d.digest.clone()).collect::<Vec<_>>(),
            "component": {"exports": exports, "imports": imports, "target": null},
        })
    };
    let config = serde_json::to_vec(&config).map_err(|e| e.to_string())?;
    let config_type = if is_skill {
        SKILL_CONFIG_MEDIA_TYPE
    } else {
        WASM_CONFIG_MEDIA_TYPE
    };
    let mut annotations = BTreeMap::from([
        (RUNTIME_ANNOTATION.to_string(), manifest.runtime.to_string()),
        (
            "org.opencontainers.image.title".to_string(),
            manifest.name.clone(),
        ),
        (
            "org.opencontainers.image.version".to_string(),
            manifest.version.clone(),
        ),
    ]);
    if let Some(description) = manifest.description.as_ref().filter(|d| !d.is_empty()) {
        annotations.insert(
            "org.opencontainers.image.description".to_string(),
            description.clone(),
        );
    }
    let oci = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: descriptor(config_type, &config, None),
        layers: descriptors,
        subject: None,
        artifact_type: None,
        annotations: Some(annotations),
    };
    let manifest = serde_json::to_vec(&oci).map_err(|e| e.to_string())?;
    Ok(Built {
        config,
        layers,
        manifest,
    })
}

/// The names a component imports and exports, as the Wasm config lists them.
fn component_names(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Parser, Payload};
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| format!("its component does not parse: {e}"))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import.map_err(|e| e.to_string())?;
                    imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    let export = export.map_err(|e| e.to_string())?;
                    exports.push(export.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_is_a_host_and_a_namespace_and_never_a_tag() {
        let registry = OciRegistry::parse("oci://127.0.0.1:5000/team/agents").unwrap();
        assert_eq!(registry.describe(), "oci://127.0.0.1:5000/team/agents");
        assert_eq!(
            registry.reference("read-file", "0.1.0+build.7").unwrap(),
            "oci://127.0.0.1:5000/team/agents/read-file:0.1.0_build.7"
        );
        assert_eq!(
            OciRegistry::parse("oci://localhost:5000")
                .unwrap()
                .describe(),
            "oci://localhost:5000"
        );
        for bad in [
            "oci://",
            "oci:///ns",
            "oci://host/ns/read-file:0.1.0",
            "oci://host/ns@sha256:00",
            "oci://user:secret@host/ns",
            "oci://host/Upper",
            "oci://host/a//b",
            "oci://host/-a",
        ] {
            let error = OciRegistry::parse(bad).unwrap_err();
            assert!(
                matches!(error, RegistryError::NotARegistry { .. }),
                "{bad}: {error}"
            );
            assert!(!error.to_string().contains("secret"), "{error}");
        }
    }

    #[test]
    fn only_loopback_hosts_are_spoken_to_in_plain_http() {
        for host in [
            "localhost:5000",
            "127.0.0.1:5000",
            "127.9.9.9",
            "[::1]:5000",
            "[::1]",
        ] {
            assert!(host::is_loopback_host(host), "{host}");
        }
        for host in [
            "registry.example:5000",
            "10.0.0.1:5000",
            "[2001:db8::1]:443",
            "localhost.example",
        ] {
            assert!(!host::is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn repository_names_follow_the_distribution_grammar() {
        for good in ["a", "read-file", "a.b", "a_b", "a__b", "a---b", "x9"] {
            assert!(check_path_component(good).is_ok(), "{good}");
        }
        for bad in ["", "A", "a_", ".a", "a..b", "a___b", "a-_b", "ä"] {
            assert!(check_path_component(bad).is_err(), "{bad}");
        }
    }

    fn skill_manifest() -> ArtifactManifest {
        serde_json::from_value(json!({
            "name": "notes", "version": "1.0.0", "runtime": "skill", "description": "Notes"
        }))
        .expect("a skill manifest")
    }

    #[test]
    fn the_same_files_make_the_same_manifest_and_it_passes_its_own_check() {
        let manifest = skill_manifest();
        let files = vec![
            ("murmur.yaml".to_string(), b"name: notes\n".to_vec()),
            ("skill.md".to_string(), b"# Notes\n".to_vec()),
        ];
        let first = build_manifest(&manifest, &files).unwrap();
        let second = build_manifest(&manifest, &files).unwrap();
        assert_eq!(first.manifest, second.manifest);
        let checked = check_artifact(&first.manifest, "here", &UnpackLimits::default()).unwrap();
        assert_eq!(checked.runtime, Runtime::Skill);
        let titles: Vec<&str> = checked.layers.iter().map(|l| l.title.as_str()).collect();
        assert_eq!(titles, ["skill.md", "murmur.yaml"]);
        assert_eq!(checked.total, 12 + 8);
    }

    fn with_layer(title: &str, media_type: &str, size: i64) -> Vec<u8> {
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
            "layers": [
                {"mediaType": media_type, "digest": format!("sha256:{}", "1".repeat(64)), "size": size,
                 "annotations": {TITLE_ANNOTATION: title}},
                {"mediaType": ARTIFACT_MANIFEST_MEDIA_TYPE, "digest": format!("sha256:{}", "2".repeat(64)), "size": 10,
                 "annotations": {TITLE_ANNOTATION: "murmur.yaml"}},
            ],
            "annotations": {RUNTIME_ANNOTATION: "tool"},
        });
        serde_json::to_vec(&manifest).unwrap()
    }

    #[test]
    fn a_manifest_that_leads_out_of_the_artifact_or_past_the_limits_is_refused() {
        let limits = UnpackLimits::default();
        assert!(
            check_artifact(
                &with_layer("component.wasm", WASM_LAYER_MEDIA_TYPE, 10),
                "x",
                &limits
            )
            .is_ok()
        );
        for (title, media_type, size) in [
            ("../evil.wasm", WASM_LAYER_MEDIA_TYPE, 10),
            ("/etc/passwd", WASM_LAYER_MEDIA_TYPE, 10),
            (".murmur-receipt.json", WASM_LAYER_MEDIA_TYPE, 10),
            ("murmur.yaml", WASM_LAYER_MEDIA_TYPE, 10),
            ("murmur.yaml/x", WASM_LAYER_MEDIA_TYPE, 10),
            ("c.wasm", "application/x-sh", 10),
            ("c.wasm", WASM_LAYER_MEDIA_TYPE, -1),
            ("c.wasm", WASM_LAYER_MEDIA_TYPE, 65 * 1024 * 1024),
        ] {
            let error =
                check_artifact(&with_layer(title, media_type, size), "x", &limits).unwrap_err();
            assert!(
                matches!(
                    error,
                    RegistryError::NotAnArtifact { .. } | RegistryError::TooLarge { .. }
                ),
                "{title} {media_type} {size}: {error}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn no_manifest_makes_the_check_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = check_artifact(&bytes, "x", &UnpackLimits::default());
        }

        #[test]
        fn no_title_or_size_makes_the_check_panic(title in ".{0,40}", size in proptest::prelude::any::<i64>()) {
            let _ = check_artifact(&with_layer(&title, WASM_LAYER_MEDIA_TYPE, size), "x", &UnpackLimits::default());
        }
    }
}
