//! `murmur.lock`: what `mur install` installed, pinned by its bytes.
//!
//! The lock sits beside the capsule's `murmur.yaml` and records, for each artifact installed
//! from a registry, its name, version, runtime, the sha256 of its archive and the registry it
//! came from; and for each MCP server the capsule declares, its identity and a digest of every
//! tool it lists ([`LockedServer`]). `mur install` writes it; `mur install` and `mur run` refuse
//! bytes that differ from a pin, and a server whose tools differ from its pin.
//!
//! What this module promises:
//!
//! - **One format**, YAML, written the same way every time ([`Lock::to_text`]): a header
//!   comment, `version: 1`, then the artifacts sorted by name, one flow mapping per line, every
//!   string quoted (so a version such as `"1.0"` stays a string). Writing the same lock twice
//!   gives the same bytes, and loading what was written gives the same lock.
//! - **Strict loading** ([`Lock::load`]): no file is `None`; anything else that is not exactly
//!   a lock is `E-REG-008` with the file and, where known, the line: a YAML error, an unknown
//!   key, a missing field, an unknown format version, a version that is not semver, a sha256
//!   that is not 64 lowercase hex digits, a runtime that is not an artifact's, an empty name or
//!   source, a name pinned twice, a server's `tools_sha256` that is not the digest of its tools
//!   ([`tools_sha256`]). Nothing here panics, whatever the file holds.
//! - **Servers are optional**: a lock without `servers` has none, and a lock with none is
//!   written without the key, byte for byte as before servers were pinned.
//! - **Peers are optional** too: each named `peers:` entry whose agent card `mur install`
//!   fetched is pinned as [`LockedPeer`] (its name, URL and the sha256 of the card's bytes),
//!   sorted by name; a lock with none is written without the key. A peer pin with an empty or
//!   repeated name, an empty URL or a `card_sha256` that is not 64 lowercase hex digits is
//!   `E-REG-008`.
//! - **Atomic writes** ([`Lock::write`]): the text goes to a temporary file beside the lock,
//!   which is then renamed over it, so a reader sees the old lock or the new one, never half.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::artifact::Runtime;
use crate::diagnostic::{Diagnostic, code, from_serde_error};
use crate::source::{SourceMap, join_index, join_key};

// The manifest loader's YAML reader (positions, depth guard, duplicate keys), compiled here
// too: the loader keeps its module private. A `pub(crate) use` of it in `load` would replace
// this.
use crate::load::yaml;

/// The lock's file name, beside `murmur.yaml`.
pub const LOCK_FILE: &str = "murmur.lock";

/// The one format version this code reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// The first line of every lock written.
pub const HEADER: &str = "# murmur.lock: written by `mur install`. Do not edit.";

/// What every lock diagnostic suggests: the file is the tool's, not the user's.
const REWRITE_HINT: &str = "murmur.lock is written by `mur install`: restore it from version \
                            control, or delete it and run `mur install` to write it again";

/// The artifacts a capsule installed, each pinned by its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Kept sorted by name by [`Lock::load`] and [`Lock::upsert`].
    pub artifacts: Vec<LockedArtifact>,
    /// The MCP servers pinned, sorted by name.
    #[serde(default)]
    pub servers: Vec<LockedServer>,
    /// The named peers whose agent cards are pinned, sorted by name.
    #[serde(default)]
    pub peers: Vec<LockedPeer>,
}

/// One named peer, pinned by its agent card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPeer {
    /// Its entry's `name` in `murmur.yaml`.
    pub name: String,
    /// Its entry's `url`.
    pub url: String,
    /// The sha256 (64 lowercase hex digits) of the card's bytes as they were fetched.
    pub card_sha256: String,
}

/// One MCP server, pinned by what it is and what it offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedServer {
    /// Its entry's name in `murmur.yaml`.
    pub name: String,
    /// How it is reached (its command and arguments, or its URL) and the name and version it
    /// introduced itself with.
    pub identity: String,
    /// [`tools_sha256`] of `tools`: the one fingerprint of its tool list.
    pub tools_sha256: String,
    /// Each tool it listed, sorted by name.
    pub tools: Vec<LockedTool>,
}

/// One tool of a pinned server: its name, and the sha256 of each part a model reads (the
/// canonical JSON of its description, input schema and annotations), so a change names the
/// part that changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    pub name: String,
    pub description: String,
    pub input_schema: String,
    pub annotations: String,
}

/// The fingerprint of a tool list: the sha256 (hex) of the JSON array of each tool's name and
/// part digests, tools sorted by name. The same list gives the same fingerprint whatever order
/// it came in.
pub fn tools_sha256(tools: &[LockedTool]) -> String {
    use sha2::Digest;
    let mut sorted: Vec<&LockedTool> = tools.iter().collect();
    sorted.sort();
    let rows: Vec<[&str; 4]> = sorted
        .iter()
        .map(|t| [&t.name[..], &t.description, &t.input_schema, &t.annotations])
        .collect();
    let text = serde_json::to_string(&rows).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// One installed artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedArtifact {
    pub name: String,
    /// A semantic version, as the registry lists it.
    pub version: String,
    pub runtime: Runtime,
    /// The sha256 of the artifact's archive: 64 lowercase hex digits.
    pub sha256: String,
    /// The registry it came from: a directory or an index URL.
    pub source: String,
}

/// The file as written: the format version, then the artifacts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    version: u64,
    artifacts: Vec<LockedArtifact>,
    #[serde(default)]
    servers: Vec<LockedServer>,
    #[serde(default)]
    peers: Vec<LockedPeer>,
}

/// The most `murmur.lock` may hold: a lock pins each artifact, MCP server (its tools'
/// schemas) and peer in a few KiB.
pub const LOCK_MAX_BYTES: u64 = 8 * 1024 * 1024;

impl Lock {
    /// Where the lock of the capsule whose manifest is `manifest_file` lives.
    pub fn beside(manifest_file: &Path) -> PathBuf {
        crate::load::dir_of(manifest_file).join(LOCK_FILE)
    }

    /// The lock at `path`: `Ok(None)` when there is no file, `E-REG-008` diagnostics when it
    /// cannot be read, holds more than [`LOCK_MAX_BYTES`] (known from reading one byte past
    /// the cap) or is not a lock.
    pub fn load(path: &Path) -> Result<Option<Lock>, Vec<Diagnostic>> {
        match crate::capped::read_text(path, LOCK_MAX_BYTES) {
            Ok(crate::capped::Capped::Text(text)) => Lock::parse(&text, path).map(Some),
            Ok(crate::capped::Capped::TooLarge) => Err(vec![
                Diagnostic::new(
                    code::E_REG_008,
                    format!(
                        "murmur.lock is larger than {}, the most a lock may hold",
                        crate::capped::size_words(LOCK_MAX_BYTES)
                    ),
                )
                .hint(format!(
                    "a lock pins artifacts, servers and peers in a few KiB each: {REWRITE_HINT}"
                ))
                .in_file(path),
            ]),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(vec![
                Diagnostic::new(code::E_REG_008, format!("cannot read murmur.lock: {error}"))
                    .hint(match error.kind() {
                        io::ErrorKind::InvalidData => {
                            "the file is not UTF-8 text; ".to_string() + REWRITE_HINT
                        }
                        _ => format!("check that the file is readable; {REWRITE_HINT}"),
                    })
                    .in_file(path),
            ]),
        }
    }

    /// The lock written as `text`; `file` names it in diagnostics.
    pub fn parse(text: &str, file: &Path) -> Result<Lock, Vec<Diagnostic>> {
        let mut found = Vec::new();
        let document = match yaml::parse(text) {
            Ok((document, problems)) => {
                found.extend(problems.into_iter().map(as_lock_problem));
                document
            }
            Err(problems) => {
                return Err(finish(
                    problems.into_iter().map(as_lock_problem).collect(),
                    file,
                    &SourceMap::default(),
                ));
            }
        };
        if !found.is_empty() {
            return Err(finish(found, file, &document.map));
        }
        let lock_file = match shape(&document.value) {
            Ok(lock_file) => lock_file,
            Err(problem) => return Err(finish(vec![*problem], file, &document.map)),
        };
        if lock_file.version != FORMAT_VERSION {
            found.push(
                Diagnostic::new(
                    code::E_REG_008,
                    format!(
                        "murmur.lock has format version {}; this mur reads version {FORMAT_VERSION}",
                        lock_file.version
                    ),
                )
                .hint(format!(
                    "use the mur that wrote it, or delete the lock and run `mur install` to \
                     write a version {FORMAT_VERSION} one"
                ))
                .at_path("version"),
            );
            return Err(finish(found, file, &document.map));
        }
        found.extend(check(&lock_file.artifacts));
        found.extend(check_servers(&lock_file.servers));
        found.extend(check_peers(&lock_file.peers));
        if !found.is_empty() {
            return Err(finish(found, file, &document.map));
        }
        let mut lock = Lock {
            artifacts: lock_file.artifacts,
            servers: lock_file.servers,
            peers: lock_file.peers,
        };
        lock.sort();
        Ok(lock)
    }

    /// The pin for artifact `name`.
    pub fn get(&self, name: &str) -> Option<&LockedArtifact> {
        self.artifacts.iter().find(|a| a.name == name)
    }

    /// Pins `artifact`, replacing any pin of the same name; the artifacts stay sorted by name.
    pub fn upsert(&mut self, artifact: LockedArtifact) {
        self.artifacts.retain(|a| a.name != artifact.name);
        self.artifacts.push(artifact);
        self.sort();
    }

    /// The pin of MCP server `name`.
    pub fn server(&self, name: &str) -> Option<&LockedServer> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// Pins `server`, replacing any pin of the same name; servers stay sorted by name.
    pub fn upsert_server(&mut self, server: LockedServer) {
        self.servers.retain(|s| s.name != server.name);
        self.servers.push(server);
        self.sort();
    }

    /// The pin of the named peer `name`.
    pub fn peer(&self, name: &str) -> Option<&LockedPeer> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// Pins `peer`, replacing any pin of the same name; peers stay sorted by name.
    pub fn upsert_peer(&mut self, peer: LockedPeer) {
        self.peers.retain(|p| p.name != peer.name);
        self.peers.push(peer);
        self.sort();
    }

    /// The lock as its file holds it (see the module docs). Artifacts and servers are written
    /// sorted by name whatever their order here.
    pub fn to_text(&self) -> String {
        let mut text = format!("{HEADER}\nversion: {FORMAT_VERSION}\n");
        self.artifacts_text(&mut text);
        let mut servers: Vec<&LockedServer> = self.servers.iter().collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        if !servers.is_empty() {
            text.push_str("servers:\n");
        }
        for server in servers {
            text.push_str(&format!(
                "  - name: {}\n    identity: {}\n    tools_sha256: {}\n",
                quoted(&server.name),
                quoted(&server.identity),
                quoted(&server.tools_sha256)
            ));
            let mut tools: Vec<&LockedTool> = server.tools.iter().collect();
            tools.sort();
            if tools.is_empty() {
                text.push_str("    tools: []\n");
                continue;
            }
            text.push_str("    tools:\n");
            for tool in tools {
                text.push_str(&format!(
                    "      - {{ name: {}, description: {}, input_schema: {}, annotations: {} }}\n",
                    quoted(&tool.name),
                    quoted(&tool.description),
                    quoted(&tool.input_schema),
                    quoted(&tool.annotations),
                ));
            }
        }
        let mut peers: Vec<&LockedPeer> = self.peers.iter().collect();
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        if !peers.is_empty() {
            text.push_str("peers:\n");
        }
        for peer in peers {
            text.push_str(&format!(
                "  - {{ name: {}, url: {}, card_sha256: {} }}\n",
                quoted(&peer.name),
                quoted(&peer.url),
                quoted(&peer.card_sha256)
            ));
        }
        text
    }

    fn artifacts_text(&self, text: &mut String) {
        let mut sorted: Vec<&LockedArtifact> = self.artifacts.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        if sorted.is_empty() {
            text.push_str("artifacts: []\n");
            return;
        }
        text.push_str("artifacts:\n");
        for artifact in sorted {
            text.push_str(&format!(
                "  - {{ name: {}, version: {}, runtime: {}, sha256: {}, source: {} }}\n",
                quoted(&artifact.name),
                quoted(&artifact.version),
                quoted(artifact.runtime.as_str()),
                quoted(&artifact.sha256),
                quoted(&artifact.source),
            ));
        }
    }

    /// Writes [`Lock::to_text`] to `path` atomically: a temporary file beside it, flushed to
    /// disk, then renamed over it.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = crate::load::dir_of(path);
        let name = path
            .file_name()
            .map_or_else(|| LOCK_FILE.into(), |n| n.to_string_lossy().into_owned());
        let temp = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            out.write_all(self.to_text().as_bytes())?;
            out.sync_all()?;
            std::fs::rename(&temp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    fn sort(&mut self) {
        self.artifacts.sort_by(|a, b| a.name.cmp(&b.name));
        self.servers.sort_by(|a, b| a.name.cmp(&b.name));
        self.peers.sort_by(|a, b| a.name.cmp(&b.name));
        for server in &mut self.servers {
            server.tools.sort();
        }
    }
}

/// The value as a [`LockFile`], or the first problem with its type, at its path.
fn shape(value: &Value) -> Result<LockFile, Box<Diagnostic>> {
    let mut track = serde_path_to_error::Track::new();
    let result = LockFile::deserialize(serde_path_to_error::Deserializer::new(value, &mut track));
    result.map_err(|error| {
        let path = path_of(&track.path());
        let text = error.to_string();
        let what = if path.is_empty() {
            "the top level".to_string()
        } else {
            format!("`{path}`")
        };
        let message = match from_serde_error(&text) {
            Some(inner) => format!("{what} in murmur.lock: {}", inner.message),
            None => format!("{what} in murmur.lock: {text}"),
        };
        Box::new(
            Diagnostic::new(code::E_REG_008, message)
                .hint(REWRITE_HINT)
                .at_path(path),
        )
    })
}

fn path_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        out = match segment {
            Segment::Seq { index } => join_index(&out, *index),
            Segment::Map { key } => join_key(&out, key),
            Segment::Enum { variant } => join_key(&out, variant),
            Segment::Unknown => break,
        };
    }
    out
}

/// Every problem with the pins' values.
fn check(artifacts: &[LockedArtifact]) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let mut problem = |index: usize, field: &str, message: String| {
        found.push(
            Diagnostic::new(code::E_REG_008, message)
                .hint(REWRITE_HINT)
                .at_path(join_key(&join_index("artifacts", index), field)),
        );
    };
    for (index, artifact) in artifacts.iter().enumerate() {
        let which = format!("artifact {} in murmur.lock", index + 1);
        if artifact.name.trim().is_empty() {
            problem(index, "name", format!("{which} has an empty `name`"));
        } else if let Some(first) = artifacts[..index]
            .iter()
            .position(|a| a.name == artifact.name)
        {
            problem(
                index,
                "name",
                format!(
                    "`{}` is pinned twice in murmur.lock (artifacts {} and {})",
                    artifact.name,
                    first + 1,
                    index + 1
                ),
            );
        }
        if let Err(error) = semver::Version::parse(&artifact.version) {
            problem(
                index,
                "version",
                format!(
                    "{which} has version `{}`, which is not a semantic version ({error})",
                    artifact.version
                ),
            );
        }
        if artifact.runtime == Runtime::Capsule {
            problem(
                index,
                "runtime",
                format!("{which} has runtime `capsule`; a pin is a tool, driver, hook or skill"),
            );
        }
        if !is_sha256_hex(&artifact.sha256) {
            problem(
                index,
                "sha256",
                format!(
                    "{which} has sha256 `{}`, which is not 64 lowercase hex digits",
                    artifact.sha256
                ),
            );
        }
        if artifact.source.trim().is_empty() {
            problem(index, "source", format!("{which} has an empty `source`"));
        }
    }
    found
}

/// Every problem with the server pins' values.
fn check_servers(servers: &[LockedServer]) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let mut problem = |path: String, message: String| {
        found.push(
            Diagnostic::new(code::E_REG_008, message)
                .hint(REWRITE_HINT)
                .at_path(path),
        );
    };
    for (index, server) in servers.iter().enumerate() {
        let at = |field: &str| join_key(&join_index("servers", index), field);
        let which = format!("server {} in murmur.lock", index + 1);
        if server.name.trim().is_empty() {
            problem(at("name"), format!("{which} has an empty `name`"));
        } else if servers[..index].iter().any(|s| s.name == server.name) {
            problem(
                at("name"),
                format!("server `{}` is pinned twice in murmur.lock", server.name),
            );
        }
        if server.identity.trim().is_empty() {
            problem(at("identity"), format!("{which} has an empty `identity`"));
        }
        for (t, tool) in server.tools.iter().enumerate() {
            let tool_at = |field: &str| join_key(&join_index(&at("tools"), t), field);
            if server.tools[..t]
                .iter()
                .any(|other| other.name == tool.name)
            {
                problem(
                    tool_at("name"),
                    format!("{which} pins tool `{}` twice", tool.name),
                );
            }
            for (field, digest) in [
                ("description", &tool.description),
                ("input_schema", &tool.input_schema),
                ("annotations", &tool.annotations),
            ] {
                if !is_sha256_hex(digest) {
                    problem(
                        tool_at(field),
                        format!(
                            "{which}, tool `{}`: `{field}` is not 64 lowercase hex digits",
                            tool.name
                        ),
                    );
                }
            }
        }
        if server.tools_sha256 != tools_sha256(&server.tools) {
            problem(
                at("tools_sha256"),
                format!(
                    "{which} has a `tools_sha256` that is not the digest of its `tools` (the pin was edited)"
                ),
            );
        }
    }
    found
}

/// Every problem with the peer pins' values.
fn check_peers(peers: &[LockedPeer]) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for (index, peer) in peers.iter().enumerate() {
        let mut problem = |field: &str, message: String| {
            found.push(
                Diagnostic::new(code::E_REG_008, message)
                    .hint(REWRITE_HINT)
                    .at_path(join_key(&join_index("peers", index), field)),
            );
        };
        let which = format!("peer {} in murmur.lock", index + 1);
        if peer.name.trim().is_empty() {
            problem("name", format!("{which} has an empty `name`"));
        } else if peers[..index].iter().any(|p| p.name == peer.name) {
            problem(
                "name",
                format!("peer `{}` is pinned twice in murmur.lock", peer.name),
            );
        }
        if peer.url.trim().is_empty() {
            problem("url", format!("{which} has an empty `url`"));
        }
        if !is_sha256_hex(&peer.card_sha256) {
            problem(
                "card_sha256",
                format!(
                    "{which} has card_sha256 `{}`, which is not 64 lowercase hex digits",
                    peer.card_sha256
                ),
            );
        }
    }
    found
}

/// Whether `text` is a sha256 as the lock writes it: 64 lowercase hex digits.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A YAML reader's diagnostic (about YAML, with a manifest's code) as a lock's.
fn as_lock_problem(diagnostic: Diagnostic) -> Diagnostic {
    Diagnostic {
        code: code::E_REG_008,
        message: format!(
            "murmur.lock: {}",
            diagnostic.message.replace("the manifest", "the lock")
        ),
        hint: Some(REWRITE_HINT.to_string()),
        ..diagnostic
    }
}

/// Places every diagnostic in `file`, in the order of the text.
fn finish(mut found: Vec<Diagnostic>, file: &Path, map: &SourceMap) -> Vec<Diagnostic> {
    for diagnostic in &mut found {
        crate::load::place(diagnostic, file, map);
    }
    found.sort_by_key(|d| (d.line, d.column));
    found
}

/// `text` as a YAML double-quoted scalar: `"` and `\` escaped, and every character YAML would
/// not keep as written (controls, line separators, the byte-order mark, non-characters).
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let code = u32::from(c);
                if code <= 0xFF {
                    out.push_str(&format!("\\x{code:02X}"));
                } else if code <= 0xFFFF {
                    out.push_str(&format!("\\u{code:04X}"));
                } else {
                    out.push_str(&format!("\\U{code:08X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn needs_escape(c: char) -> bool {
    let code = u32::from(c);
    code < 0x20
        || (0x7F..=0xA0).contains(&code)
        || matches!(code, 0x2028 | 0x2029 | 0xFEFF)
        || (0xFDD0..=0xFDEF).contains(&code)
        || code & 0xFFFE == 0xFFFE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_what_yaml_would_change() {
        assert_eq!(quoted("1.0"), "\"1.0\"");
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quoted("\u{0}\u{85}\u{feff}"), "\"\\x00\\x85\\uFEFF\"");
        assert_eq!(quoted("\u{10FFFF}é"), "\"\\U0010FFFFé\"");
    }

    fn server(name: &str, tools: &[&str]) -> LockedServer {
        let tools: Vec<LockedTool> = tools
            .iter()
            .map(|tool| LockedTool {
                name: tool.to_string(),
                description: "a".repeat(64),
                input_schema: "b".repeat(64),
                annotations: "c".repeat(64),
            })
            .collect();
        LockedServer {
            name: name.to_string(),
            identity: format!("{name} \"quoted\" (notes 1.2.0)"),
            tools_sha256: tools_sha256(&tools),
            tools,
        }
    }

    #[test]
    fn servers_round_trip_and_a_lock_without_them_is_written_as_before() {
        let bare = Lock::default();
        assert!(!bare.to_text().contains("servers"));
        let mut lock = Lock::default();
        lock.upsert_server(server("zeta", &["write", "read"]));
        lock.upsert_server(server("alpha", &[]));
        let text = lock.to_text();
        let again = Lock::parse(&text, Path::new("murmur.lock")).unwrap();
        assert_eq!(again, lock);
        assert_eq!(again.to_text(), text);
        assert_eq!(again.servers[0].name, "alpha");
        assert_eq!(again.server("zeta").unwrap().tools[0].name, "read");
    }

    #[test]
    fn an_edited_server_pin_is_refused_naming_the_field() {
        let mut lock = Lock::default();
        lock.upsert_server(server("notes", &["read"]));
        let text = lock.to_text().replace(&"a".repeat(64), &"d".repeat(64));
        let problems = Lock::parse(&text, Path::new("murmur.lock")).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].code, code::E_REG_008);
        assert!(problems[0].message.contains("tools_sha256"), "{problems:?}");
        assert!(problems[0].line.is_some(), "{problems:?}");
    }

    #[test]
    fn the_tool_list_fingerprint_ignores_order_and_sees_every_part() {
        let a = server("s", &["x", "y"]);
        let mut reversed = a.tools.clone();
        reversed.reverse();
        assert_eq!(tools_sha256(&reversed), a.tools_sha256);
        let mut changed = a.tools.clone();
        changed[1].annotations = "e".repeat(64);
        assert_ne!(tools_sha256(&changed), a.tools_sha256);
    }

    fn peer(name: &str, digit: char) -> LockedPeer {
        LockedPeer {
            name: name.to_string(),
            url: format!("http://127.0.0.1:9000/{name}"),
            card_sha256: digit.to_string().repeat(64),
        }
    }

    #[test]
    fn peers_round_trip_sorted_and_a_lock_without_them_has_no_key() {
        assert!(!Lock::default().to_text().contains("peers"));
        let mut lock = Lock::default();
        lock.upsert_peer(peer("scout", 'a'));
        lock.upsert_peer(peer("critic", 'b'));
        lock.upsert_peer(peer("scout", 'c'));
        let text = lock.to_text();
        assert!(
            text.ends_with(&format!(
                "peers:\n  - {{ name: \"critic\", url: \"http://127.0.0.1:9000/critic\", card_sha256: \"{b}\" }}\n  - {{ name: \"scout\", url: \"http://127.0.0.1:9000/scout\", card_sha256: \"{c}\" }}\n",
                b = "b".repeat(64),
                c = "c".repeat(64)
            )),
            "{text}"
        );
        let again = Lock::parse(&text, Path::new("murmur.lock")).unwrap();
        assert_eq!(again, lock);
        assert_eq!(again.to_text(), text);
        assert_eq!(again.peer("scout").unwrap().card_sha256, "c".repeat(64));
        assert!(again.peer("nobody").is_none());
    }

    #[test]
    fn a_malformed_peer_pin_is_refused_at_its_line() {
        let mut lock = Lock::default();
        lock.upsert_peer(peer("scout", 'a'));
        lock.upsert_peer(peer("zed", 'b'));
        let good = lock.to_text();
        for (from, to, says) in [
            ("a".repeat(64), "A".repeat(64), "card_sha256"),
            (
                "\"zed\"".to_string(),
                "\"scout\"".to_string(),
                "pinned twice",
            ),
            (
                "\"http://127.0.0.1:9000/zed\"".to_string(),
                "\"\"".to_string(),
                "empty `url`",
            ),
            (
                "card_sha256".to_string(),
                "card_sha".to_string(),
                "card_sha",
            ),
        ] {
            let text = good.replacen(&from, &to, 1);
            let problems = Lock::parse(&text, Path::new("murmur.lock")).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].code, code::E_REG_008);
            assert!(problems[0].message.contains(says), "{problems:?}");
            // The line the edit changed.
            let line = text
                .lines()
                .zip(good.lines())
                .position(|(edited, was)| edited != was)
                .unwrap()
                + 1;
            assert_eq!(problems[0].line, Some(line), "{problems:?}");
        }
    }

    #[test]
    fn sha256_is_64_lowercase_hex() {
        assert!(is_sha256_hex(&"a".repeat(64)));
        assert!(!is_sha256_hex(&"A".repeat(64)));
        assert!(!is_sha256_hex(&"a".repeat(63)));
        assert!(!is_sha256_hex(&"g".repeat(64)));
    }
}
