//! Registries: where `mur install` finds an artifact's archive by name and version, and where
//! `mur publish` puts one.
//!
//! A registry is a directory or an HTTP(S) location holding `index.json`:
//!
//! ```json
//! {"format": 1, "artifacts": {"read-file": {"0.1.0": {
//!     "runtime": "tool", "url": "read-file/read-file-0.1.0.tar.gz",
//!     "sha256": "<64 hex digits>", "size": 12345}}}}
//! ```
//!
//! What this module promises:
//!
//! - **A strict index** ([`Index::parse`]): format 1 only; every version a semantic version;
//!   every entry exactly `runtime` (tool, driver, hook or skill), `url`, `sha256` (64 hex
//!   digits, kept lowercase) and an optional `size`; nothing else. Anything off is `E-REG-007`
//!   naming the artifact and version at fault. No input makes it panic.
//! - **Resolution** ([`Index::resolve`]): an exact version, or with none asked the newest by
//!   semver, a release before any prerelease. A name or version the index lacks is `E-REG-006`,
//!   listing what it has.
//! - **Verified bytes** ([`Registry::fetch`]): the bytes are returned only when their sha256 is
//!   the one the index lists (`E-REG-004` otherwise), and never more than the caller's limit is
//!   read (`E-REG-003`: an entry or a `Content-Length` over it is refused before the body is
//!   read, and a body that runs past it is cut off there).
//! - **URLs stay where they belong.** An entry's `url` is relative to the index, or (HTTP
//!   registries only) an absolute `http`/`https` URL. A directory registry's urls are paths
//!   inside the directory: a scheme (`file://`), an absolute path, `..`, or a link leading out
//!   of it is `E-REG-007`.
//! - **HTTP with bounds**: blocking requests (never call them from inside an async runtime),
//!   a connect timeout, a stall timeout on every read and an overall deadline; at most
//!   [`MAX_REDIRECTS`] redirects, each keeping the scheme; any status but 2xx is `E-REG-007`
//!   naming the status and the URL. Loopback addresses never go through a proxy. rustls, with
//!   the ring provider.
//! - **Publishing** ([`publish`]) into a directory registry writes the archive as
//!   `<name>/<name>-<version>.tar.gz`, then the index, each atomically (a temporary file beside
//!   it, renamed over it), so a reader sees the old registry or the new one and never an index
//!   entry without its archive. The same bytes again change nothing; other bytes for a version
//!   already there are `E-REG-011` and nothing is written. One publisher at a time: two running
//!   at once may each miss the other's index entry.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::answer::error_chain;
pub use crate::answer::{IndexEntry, RegistryError};
use crate::oci::{self, OciRegistry};
use crate::sha256_hex;
use serde_json::{Map, Value, json};
use url::Url;

/// The index's file name at the registry's root.
pub const INDEX_FILE: &str = "index.json";
/// The one index format this code reads and writes.
pub const INDEX_FORMAT: u64 = 1;
/// The largest index read, in bytes.
pub const MAX_INDEX_BYTES: u64 = 16 * 1024 * 1024;
/// The most redirects an HTTP request follows.
pub const MAX_REDIRECTS: usize = 5;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may stay silent: for the answer's head, and for each read of its body.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long reading the whole index may take.
const INDEX_DEADLINE: Duration = Duration::from_secs(60);
/// How long reading a whole archive may take.
const FETCH_DEADLINE: Duration = Duration::from_secs(600);
/// How much is read at a time, and so how often progress is reported.
const CHUNK: usize = 64 * 1024;
/// The runtimes an artifact in a registry can have.
const RUNTIMES: &[&str] = &["tool", "driver", "hook", "skill"];

/// Where a registry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registry {
    /// A directory holding `index.json`.
    Dir(PathBuf),
    /// The base URL `index.json` is under; it ends in `/`.
    Http(Url),
    /// An OCI registry and namespace: no index, each artifact asked for by name
    /// ([`crate::oci`]).
    Oci(OciRegistry),
}

/// What a registry resolves names with: a directory or HTTP registry's index, read once; an
/// OCI registry, asked per artifact.
pub enum Resolver<'a> {
    Index(Index),
    Oci(&'a OciRegistry),
}

impl Resolver<'_> {
    /// Artifact `name` at `version` (else the newest), as [`Index::resolve`] gives it.
    pub fn resolve(&self, name: &str, version: Option<&str>) -> Result<IndexEntry, RegistryError> {
        match self {
            Resolver::Index(index) => index.resolve(name, version),
            Resolver::Oci(oci) => oci.resolve(name, version),
        }
    }
}

/// A registry's list of artifacts: name → version → entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    artifacts: BTreeMap<String, BTreeMap<String, IndexEntry>>,
}

impl Registry {
    /// The registry `given` names: an `http://` or `https://` URL (of the directory holding
    /// `index.json`, or of `index.json` itself), a `file://` URL, an `oci://HOST/NAMESPACE`
    /// OCI registry (presenting no credentials until [`Registry::with_credentials`]), or a
    /// directory path, relative to `base_dir`.
    pub fn parse(given: &str, base_dir: &Path) -> Result<Registry, RegistryError> {
        let refuse = |reason: &str| RegistryError::NotARegistry {
            given: given.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = given.trim();
        if trimmed.is_empty() {
            return Err(refuse("it is empty"));
        }
        let scheme = trimmed
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http" | "https") => {
                let mut url =
                    Url::parse(trimmed).map_err(|e| refuse(&format!("it is not a URL ({e})")))?;
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(refuse("the URL has no host"));
                }
                url.set_query(None);
                url.set_fragment(None);
                let path = url.path().to_string();
                if let Some(dir) = path.strip_suffix(INDEX_FILE)
                    && dir.ends_with('/')
                {
                    url.set_path(dir);
                } else if !path.ends_with('/') {
                    url.set_path(&format!("{path}/"));
                }
                Ok(Registry::Http(url))
            }
            Some("file") => {
                let url =
                    Url::parse(trimmed).map_err(|e| refuse(&format!("it is not a URL ({e})")))?;
                let path = url
                    .to_file_path()
                    .map_err(|()| refuse("the file URL names no local path"))?;
                Ok(Registry::Dir(without_index_file(path)))
            }
            Some("oci") => Ok(Registry::Oci(OciRegistry::parse(trimmed)?)),
            Some(other) => Err(refuse(&format!(
                "`{other}://` is not a registry scheme; use a directory, an http(s):// URL or \
                 oci://HOST/NAMESPACE"
            ))),
            None => {
                let dir: PathBuf = base_dir.join(trimmed).components().collect();
                Ok(Registry::Dir(without_index_file(dir)))
            }
        }
    }

    /// The same registry presenting the credentials `sources` bind to it, for an OCI registry
    /// (see [`oci::credentials`]); others unchanged.
    pub fn with_credentials(
        self,
        sources: &oci::CredentialSources,
    ) -> Result<Registry, RegistryError> {
        match self {
            Registry::Oci(registry) => Ok(Registry::Oci(registry.with_sources(sources)?)),
            other => Ok(other),
        }
    }

    /// How names are resolved in this registry: its index, read now, or the OCI registry.
    pub fn resolver(&self) -> Result<Resolver<'_>, RegistryError> {
        match self {
            Registry::Oci(registry) => Ok(Resolver::Oci(registry)),
            _ => self.index().map(Resolver::Index),
        }
    }

    /// The registry as `murmur.lock` records it (`source`): the directory's path, or the base
    /// URL without any user name or password, or `oci://HOST/NAMESPACE`.
    pub fn describe(&self) -> String {
        match self {
            Registry::Oci(registry) => registry.describe(),
            Registry::Dir(dir) => dir.display().to_string(),
            Registry::Http(url) => {
                let mut shown = url.clone();
                let _ = shown.set_username("");
                let _ = shown.set_password(None);
                shown.to_string()
            }
        }
    }

    /// Reads and parses the registry's index; an OCI registry has none (use
    /// [`Registry::resolver`]).
    pub fn index(&self) -> Result<Index, RegistryError> {
        let (location, bytes) = match self {
            Registry::Oci(registry) => {
                return Err(RegistryError::NotARegistry {
                    given: registry.describe(),
                    reason:
                        "an OCI registry has no index.json: its artifacts are asked for by name"
                            .to_string(),
                });
            }
            Registry::Dir(dir) => {
                let path = dir.join(INDEX_FILE);
                let location = path.display().to_string();
                let unreachable = |detail: String| RegistryError::Unreachable {
                    location: location.clone(),
                    detail,
                };
                let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
                    io::ErrorKind::NotFound => {
                        unreachable("there is no index.json: this is not a registry".into())
                    }
                    _ => unreachable(e.to_string()),
                })?;
                let bytes = read_capped(&mut { file }, MAX_INDEX_BYTES, None, None, &mut |_, _| {})
                    .map_err(|stop| match stop {
                        Stop::OverLimit => too_large_index(&location),
                        Stop::TimedOut => unreachable("reading timed out".into()),
                        Stop::Failed(e) => unreachable(e.to_string()),
                    })?;
                (location, bytes)
            }
            Registry::Http(base) => {
                let url = base
                    .join(INDEX_FILE)
                    .map_err(|e| RegistryError::Unreachable {
                        location: base.to_string(),
                        detail: e.to_string(),
                    })?;
                let location = url.to_string();
                let bytes = http_get(&url, MAX_INDEX_BYTES, None, INDEX_DEADLINE, &mut |_, _| {})
                    .map_err(|failure| match failure {
                    HttpFailure::OverLimit(_) => too_large_index(&location),
                    HttpFailure::Other(error) => error,
                })?;
                (location, bytes)
            }
        };
        let text = String::from_utf8(bytes).map_err(|_| RegistryError::MalformedIndex {
            location: location.clone(),
            detail: "it is not UTF-8 text".into(),
        })?;
        Index::parse(&text).map_err(|error| match error {
            RegistryError::MalformedIndex { detail, .. } => {
                RegistryError::MalformedIndex { location, detail }
            }
            other => other,
        })
    }

    /// The bytes of `entry`, at most `max_bytes`, with `progress(done, total)` called as they
    /// arrive (`total` when the size is known); verified against `entry.sha256` (`E-REG-004`
    /// when they differ; the bytes are not returned). An OCI artifact is not one archive: it is
    /// fetched by [`OciRegistry::stage`].
    pub fn fetch(
        &self,
        entry: &IndexEntry,
        max_bytes: u64,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<Vec<u8>, RegistryError> {
        let too_large = |size: Option<u64>| RegistryError::TooLarge {
            name: entry.name.clone(),
            version: entry.version.clone(),
            limit: max_bytes,
            size,
        };
        if let Some(size) = entry.size
            && size > max_bytes
        {
            return Err(too_large(Some(size)));
        }
        let (location, bytes) = match self {
            Registry::Oci(registry) => {
                return Err(RegistryError::NotARegistry {
                    given: registry.describe(),
                    reason: "an OCI artifact is fetched layer by layer, not as one archive"
                        .to_string(),
                });
            }
            Registry::Dir(dir) => {
                let path = inside_dir(dir, entry)?;
                let location = path.display().to_string();
                let unreachable = |detail: String| RegistryError::Unreachable {
                    location: location.clone(),
                    detail,
                };
                let file = std::fs::File::open(&path).map_err(|e| unreachable(e.to_string()))?;
                let size = file
                    .metadata()
                    .map_err(|e| unreachable(e.to_string()))?
                    .len();
                if size > max_bytes {
                    return Err(too_large(Some(size)));
                }
                let bytes = read_capped(&mut { file }, max_bytes, Some(size), None, progress)
                    .map_err(|stop| match stop {
                        Stop::OverLimit => too_large(None),
                        Stop::TimedOut => unreachable("reading timed out".into()),
                        Stop::Failed(e) => unreachable(e.to_string()),
                    })?;
                (location, bytes)
            }
            Registry::Http(base) => {
                let url = http_url(base, entry)?;
                let bytes = http_get(&url, max_bytes, entry.size, FETCH_DEADLINE, progress)
                    .map_err(|failure| match failure {
                        HttpFailure::OverLimit(size) => too_large(size),
                        HttpFailure::Other(error) => error,
                    })?;
                (url.to_string(), bytes)
            }
        };
        let actual = sha256_hex(&bytes);
        if actual != entry.sha256.to_ascii_lowercase() {
            return Err(RegistryError::HashMismatch {
                name: entry.name.clone(),
                version: entry.version.clone(),
                location,
                expected: entry.sha256.clone(),
                actual,
            });
        }
        Ok(bytes)
    }
}

/// `path` itself, or its directory when it names `index.json`.
fn without_index_file(path: PathBuf) -> PathBuf {
    match path.parent() {
        Some(parent) if path.file_name().is_some_and(|name| name == INDEX_FILE) => {
            parent.to_path_buf()
        }
        _ => path,
    }
}

fn too_large_index(location: &str) -> RegistryError {
    RegistryError::MalformedIndex {
        location: location.to_string(),
        detail: format!("it is larger than {MAX_INDEX_BYTES} bytes"),
    }
}

/// The file `entry.url` names inside directory registry `dir`, refusing any way out of it.
fn inside_dir(dir: &Path, entry: &IndexEntry) -> Result<PathBuf, RegistryError> {
    let refuse = |reason: &str| RegistryError::BadUrl {
        name: entry.name.clone(),
        version: entry.version.clone(),
        url: entry.url.clone(),
        reason: reason.to_string(),
    };
    let url = entry.url.as_str();
    if Url::parse(url).is_ok() {
        return Err(refuse(
            "has a scheme, but a directory registry's urls are paths inside it",
        ));
    }
    if url.starts_with('/') || url.contains('\\') || url.contains('\0') {
        return Err(refuse(
            "is not a relative path with `/` separators inside the registry",
        ));
    }
    if url.split('/').any(|segment| segment == "..") {
        return Err(refuse("leads out of the registry directory (`..`)"));
    }
    let path = dir.join(url);
    let unreachable = |e: io::Error| RegistryError::Unreachable {
        location: path.display().to_string(),
        detail: e.to_string(),
    };
    let root = dir.canonicalize().map_err(unreachable)?;
    let real = path.canonicalize().map_err(unreachable)?;
    if !real.starts_with(&root) {
        return Err(refuse("leads out of the registry directory through a link"));
    }
    Ok(real)
}

/// The URL `entry.url` names in an HTTP registry at `base`: relative to it, or absolute http(s).
fn http_url(base: &Url, entry: &IndexEntry) -> Result<Url, RegistryError> {
    let refuse = |reason: String| RegistryError::BadUrl {
        name: entry.name.clone(),
        version: entry.version.clone(),
        url: entry.url.clone(),
        reason,
    };
    let url = base
        .join(&entry.url)
        .map_err(|e| refuse(format!("is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(format!(
            "has scheme `{}`; an HTTP registry's urls are http or https",
            url.scheme()
        )));
    }
    Ok(url)
}

enum HttpFailure {
    /// The body is, or would be, larger than the limit (its declared size when known).
    OverLimit(Option<u64>),
    Other(RegistryError),
}

/// GETs `url`: at most `max_bytes` of a 2xx body, within `deadline`.
fn http_get(
    url: &Url,
    max_bytes: u64,
    expected_size: Option<u64>,
    deadline: Duration,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<Vec<u8>, HttpFailure> {
    let location = url.to_string();
    let unreachable = |detail: String| {
        HttpFailure::Other(RegistryError::Unreachable {
            location: location.clone(),
            detail,
        })
    };
    let started = Instant::now();
    let client = http_client(url).map_err(|e| unreachable(error_chain(&e)))?;
    let mut response = client
        .get(url.clone())
        .send()
        .map_err(|e| unreachable(error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(HttpFailure::Other(RegistryError::Status {
            url: location,
            status: status.as_u16(),
        }));
    }
    let declared = response.content_length();
    if let Some(size) = declared
        && size > max_bytes
    {
        return Err(HttpFailure::OverLimit(Some(size)));
    }
    let total = declared.or(expected_size);
    read_capped(
        &mut response,
        max_bytes,
        total,
        Some(started + deadline),
        progress,
    )
    .map_err(|stop| match stop {
        Stop::OverLimit => HttpFailure::OverLimit(None),
        Stop::TimedOut => unreachable(format!(
            "the transfer took longer than {} seconds",
            deadline.as_secs()
        )),
        Stop::Failed(e) => unreachable(error_chain(&e)),
    })
}

fn http_client(url: &Url) -> Result<reqwest::blocking::Client, reqwest::Error> {
    // reqwest's rustls backend uses the process's default crypto provider; install ring
    // unless someone already installed one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scheme = url.scheme().to_string();
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            let message = format!("more than {MAX_REDIRECTS} redirects");
            attempt.error(message)
        } else if attempt.url().scheme() != scheme {
            let message = format!(
                "a redirect to {} leaves the `{scheme}` scheme",
                attempt.url()
            );
            attempt.error(message)
        } else {
            attempt.follow()
        }
    });
    let mut builder = reqwest::blocking::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(STALL_TIMEOUT)
        .redirect(redirects);
    if is_loopback(url) {
        builder = builder.no_proxy();
    }
    builder.build()
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

enum Stop {
    OverLimit,
    TimedOut,
    Failed(io::Error),
}

/// Reads `reader` to its end: at most `max_bytes` (one byte more stops the read), before
/// `deadline`, calling `progress(done, total)` after each chunk.
fn read_capped(
    reader: &mut dyn Read,
    max_bytes: u64,
    total: Option<u64>,
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<Vec<u8>, Stop> {
    const MOST_RESERVED: u64 = 8 * 1024 * 1024;
    let reserve = total.unwrap_or(0).min(max_bytes).min(MOST_RESERVED);
    let mut bytes = Vec::with_capacity(usize::try_from(reserve).unwrap_or(0));
    let mut chunk = vec![0u8; CHUNK];
    let mut done: u64 = 0;
    progress(0, total);
    loop {
        let read = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Stop::Failed(e)),
        };
        done = done.saturating_add(read as u64);
        if done > max_bytes {
            return Err(Stop::OverLimit);
        }
        bytes.extend_from_slice(&chunk[..read]);
        progress(done, total);
        if deadline.is_some_and(|deadline| Instant::now() > deadline) {
            return Err(Stop::TimedOut);
        }
    }
    Ok(bytes)
}

impl Index {
    /// Parses an index's text; every problem is `E-REG-007` naming where it is.
    pub fn parse(text: &str) -> Result<Index, RegistryError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| malformed(format!("it is not JSON ({e})")))?;
        let Value::Object(top) = value else {
            return Err(malformed("the top level is not an object".into()));
        };
        if let Some(key) = top
            .keys()
            .find(|k| !matches!(k.as_str(), "format" | "artifacts"))
        {
            return Err(malformed(format!(
                "unknown key `{key}` at the top level (known: format, artifacts)"
            )));
        }
        match top.get("format") {
            Some(format) if format.as_u64() == Some(INDEX_FORMAT) => {}
            Some(format) => {
                return Err(malformed(format!(
                    "its format is {format}, and this mur reads format {INDEX_FORMAT}"
                )));
            }
            None => return Err(malformed("it has no `format`".into())),
        }
        let Some(Value::Object(names)) = top.get("artifacts") else {
            return Err(malformed("`artifacts` is missing or not an object".into()));
        };
        let mut index = Index::default();
        for (name, versions) in names {
            if let Some(problem) = name_problem(name) {
                return Err(malformed(format!("artifact name `{name}` {problem}")));
            }
            let Value::Object(versions) = versions else {
                return Err(malformed(format!(
                    "artifact `{name}` is not an object of versions"
                )));
            };
            let listed = index.artifacts.entry(name.clone()).or_default();
            for (version, fields) in versions {
                let entry = parse_entry(name, version, fields).map_err(|detail| {
                    malformed(format!("artifact `{name}` version `{version}`: {detail}"))
                })?;
                listed.insert(version.clone(), entry);
            }
        }
        Ok(index)
    }

    /// The entry for `name` at `version`, or with `None` the newest version by semver (a
    /// release before any prerelease). `E-REG-006` when there is none, listing what there is.
    pub fn resolve(&self, name: &str, version: Option<&str>) -> Result<IndexEntry, RegistryError> {
        let Some(versions) = self.artifacts.get(name) else {
            return Err(RegistryError::NoArtifact {
                name: name.to_string(),
                known: self.artifacts.keys().cloned().collect(),
            });
        };
        let found = match version {
            Some(wanted) => versions.get(wanted).or_else(|| {
                let wanted = semver::Version::parse(wanted.trim()).ok()?;
                versions.values().find(|entry| {
                    semver::Version::parse(&entry.version).ok() == Some(wanted.clone())
                })
            }),
            None => newest(versions.values()),
        };
        found.cloned().ok_or_else(|| RegistryError::NoVersion {
            name: name.to_string(),
            version: version.unwrap_or("(any)").to_string(),
            available: self.versions(name),
        })
    }

    /// The entry for exactly `name` at `version`.
    pub fn get(&self, name: &str, version: &str) -> Option<&IndexEntry> {
        self.artifacts.get(name)?.get(version)
    }

    /// Every artifact's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.artifacts.keys().map(String::as_str)
    }

    /// The versions of `name`, oldest first by semver.
    pub fn versions(&self, name: &str) -> Vec<String> {
        let mut versions: Vec<&IndexEntry> = self
            .artifacts
            .get(name)
            .map(|v| v.values().collect())
            .unwrap_or_default();
        versions.sort_by_key(|entry| semver::Version::parse(&entry.version).ok());
        versions.into_iter().map(|e| e.version.clone()).collect()
    }

    /// Every entry, by name, then version as written.
    pub fn entries(&self) -> impl Iterator<Item = &IndexEntry> {
        self.artifacts.values().flat_map(BTreeMap::values)
    }

    /// The index as `index.json` holds it: pretty JSON, names and versions sorted.
    pub fn to_json(&self) -> String {
        let mut names = Map::new();
        for (name, versions) in &self.artifacts {
            let mut listed = Map::new();
            for (version, entry) in versions {
                let mut fields = Map::new();
                fields.insert("runtime".into(), json!(entry.runtime));
                fields.insert("url".into(), json!(entry.url));
                fields.insert("sha256".into(), json!(entry.sha256));
                if let Some(size) = entry.size {
                    fields.insert("size".into(), json!(size));
                }
                listed.insert(version.clone(), Value::Object(fields));
            }
            names.insert(name.clone(), Value::Object(listed));
        }
        let index = json!({ "format": INDEX_FORMAT, "artifacts": names });
        let mut text = serde_json::to_string_pretty(&index).unwrap_or_default();
        text.push('\n');
        text
    }

    fn insert(&mut self, entry: IndexEntry) {
        self.artifacts
            .entry(entry.name.clone())
            .or_default()
            .insert(entry.version.clone(), entry);
    }
}

fn malformed(detail: String) -> RegistryError {
    RegistryError::MalformedIndex {
        location: INDEX_FILE.to_string(),
        detail,
    }
}

/// The newest of `entries` by semver, a release before any prerelease.
fn newest<'a>(entries: impl Iterator<Item = &'a IndexEntry>) -> Option<&'a IndexEntry> {
    entries
        .filter_map(|entry| Some((semver::Version::parse(&entry.version).ok()?, entry)))
        .max_by(|(a, _), (b, _)| (a.pre.is_empty(), a).cmp(&(b.pre.is_empty(), b)))
        .map(|(_, entry)| entry)
}

/// One version's entry; `Err` says what is wrong with it.
fn parse_entry(name: &str, version: &str, fields: &Value) -> Result<IndexEntry, String> {
    if let Err(e) = semver::Version::parse(version) {
        return Err(format!("the version is not a semantic version ({e})"));
    }
    let Value::Object(fields) = fields else {
        return Err("the entry is not an object".into());
    };
    if let Some(key) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "runtime" | "url" | "sha256" | "size"))
    {
        return Err(format!(
            "unknown key `{key}` (known: runtime, url, sha256, size)"
        ));
    }
    let text = |key: &str| -> Result<String, String> {
        match fields.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(format!("`{key}` is not a string")),
            None => Err(format!("`{key}` is missing")),
        }
    };
    let runtime = text("runtime")?;
    if !RUNTIMES.contains(&runtime.as_str()) {
        return Err(format!(
            "runtime `{runtime}` is not one of: {}",
            RUNTIMES.join(", ")
        ));
    }
    let url = text("url")?;
    if url.trim().is_empty() {
        return Err("`url` is empty".into());
    }
    let sha256 = text("sha256")?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("sha256 `{sha256}` is not 64 hex digits"));
    }
    let size = match fields.get("size") {
        None => None,
        Some(size) => Some(
            size.as_u64()
                .ok_or_else(|| format!("size `{size}` is not a whole number of bytes"))?,
        ),
    };
    Ok(IndexEntry {
        name: name.to_string(),
        version: version.to_string(),
        runtime,
        url,
        sha256: sha256.to_ascii_lowercase(),
        size,
    })
}

/// What is wrong with `name` as an artifact's name in a registry, if anything: it must be
/// letters, digits, `-`, `_` and `.`, start with a letter or digit, and not be `index.json`.
fn name_problem(name: &str) -> Option<&'static str> {
    let first = name.chars().next()?;
    if !first.is_ascii_alphanumeric() {
        return Some("does not start with a letter or digit");
    }
    if name.len() > 128 {
        return Some("is longer than 128 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Some("has a character other than letters, digits, `-`, `_` and `.`");
    }
    if name == INDEX_FILE {
        return Some("is the index's own file name");
    }
    None
}

/// Writes `archive` (already packed; its sha256 computed here) into directory registry `dir`
/// as `<name>/<name>-<version>.tar.gz` and adds it to `index.json` (created when missing),
/// atomically (temp + rename); publishing the same bytes again is a no-op; other bytes for an
/// existing version is `E-REG-011` and nothing is written.
pub fn publish(
    dir: &Path,
    name: &str,
    version: &str,
    runtime: &str,
    archive: &[u8],
) -> Result<IndexEntry, RegistryError> {
    let unpublishable = |reason: String| RegistryError::Unpublishable {
        name: name.to_string(),
        version: version.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(unpublishable("the name is empty".into()));
    }
    if let Some(problem) = name_problem(name) {
        return Err(unpublishable(format!("the name {problem}")));
    }
    if let Err(e) = semver::Version::parse(version) {
        return Err(unpublishable(format!(
            "the version is not a semantic version ({e})"
        )));
    }
    if !RUNTIMES.contains(&runtime) {
        return Err(unpublishable(format!(
            "runtime `{runtime}` is not one of: {}",
            RUNTIMES.join(", ")
        )));
    }
    let registry = Registry::Dir(dir.to_path_buf());
    let mut index = match registry.index() {
        Ok(index) => index,
        Err(RegistryError::Unreachable { .. }) if !dir.join(INDEX_FILE).exists() => {
            Index::default()
        }
        Err(error) => return Err(error),
    };
    let offered = sha256_hex(archive);
    if let Some(existing) = index.get(name, version) {
        if existing.sha256 == offered {
            return Ok(existing.clone());
        }
        return Err(RegistryError::VersionTaken {
            name: name.to_string(),
            version: version.to_string(),
            existing: existing.sha256.clone(),
            offered,
        });
    }
    let url = format!("{name}/{name}-{version}.tar.gz");
    let archive_dir = dir.join(name);
    std::fs::create_dir_all(&archive_dir).map_err(|source| RegistryError::Write {
        path: archive_dir.clone(),
        source,
    })?;
    write_atomically(&dir.join(&url), archive)?;
    let entry = IndexEntry {
        name: name.to_string(),
        version: version.to_string(),
        runtime: runtime.to_string(),
        url,
        sha256: offered,
        size: Some(archive.len() as u64),
    };
    index.insert(entry.clone());
    write_atomically(&dir.join(INDEX_FILE), index.to_json().as_bytes())?;
    Ok(entry)
}

/// Writes `bytes` to a temporary file beside `path`, flushes it to disk and renames it over
/// `path`. The file is readable by everyone (0644): a registry is meant to be shared.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let failed = |source: io::Error| RegistryError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(".publish-")
        .tempfile_in(dir)
        .map_err(failed)?;
    temp.write_all(bytes).map_err(failed)?;
    {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(failed)?;
    }
    temp.as_file().sync_all().map_err(failed)?;
    temp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use murmur_manifest::Coded;

    fn entry(version: &str) -> IndexEntry {
        IndexEntry {
            name: "a".into(),
            version: version.into(),
            runtime: "tool".into(),
            url: "a.tar.gz".into(),
            sha256: "0".repeat(64),
            size: None,
        }
    }

    #[test]
    fn newest_prefers_releases() {
        let entries = [entry("1.0.0"), entry("2.0.0-rc.1"), entry("1.10.0")];
        assert_eq!(
            newest(entries.iter()).map(|e| e.version.as_str()),
            Some("1.10.0")
        );
        let pre = [entry("2.0.0-rc.1"), entry("2.0.0-rc.2")];
        assert_eq!(
            newest(pre.iter()).map(|e| e.version.as_str()),
            Some("2.0.0-rc.2")
        );
        assert_eq!(newest([].iter()), None);
    }

    #[test]
    fn registry_addresses() {
        let base = Path::new("/capsule");
        let http = |text: &str| match Registry::parse(text, base) {
            Ok(Registry::Http(url)) => url.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(http("https://r.example/reg"), "https://r.example/reg/");
        assert_eq!(
            http("https://r.example/reg/index.json"),
            "https://r.example/reg/"
        );
        assert_eq!(http("HTTP://r.example"), "http://r.example/");
        assert_eq!(
            Registry::parse("./reg", base).ok(),
            Some(Registry::Dir(PathBuf::from("/capsule/reg")))
        );
        assert_eq!(
            Registry::parse("/srv/reg/index.json", base).ok(),
            Some(Registry::Dir(PathBuf::from("/srv/reg")))
        );
        assert_eq!(
            Registry::parse("file:///srv/reg", base).ok(),
            Some(Registry::Dir(PathBuf::from("/srv/reg")))
        );
        for bad in ["", "  ", "ftp://r.example/", "https://"] {
            let error = Registry::parse(bad, base).err();
            assert_eq!(error.map(|e| e.code()), Some("E-REG-007"), "{bad}");
        }
        let with_password = Registry::Http(Url::parse("https://u:p@r.example/x/").unwrap());
        assert_eq!(with_password.describe(), "https://r.example/x/");
    }
}
