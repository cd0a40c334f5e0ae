//! `door:` and `peers:`: who may use a served capsule, what it takes and gives, and the
//! credentials it presents to the peers it calls.
//!
//! ```yaml
//! door:
//!   auth:
//!     - { principal: ops, bearer: "${OPS_TOKEN}" }
//!     - { principal: ci, api_key: "${CI_KEY}", header: X-API-Key, trust: peer }
//!   input_modes: [text/plain]
//!   output_modes: [text/plain, application/json]
//!   a2a_versions: ["1.0"]
//!   conversations_max_bytes: 67108864
//!   port: 8080
//! peers:
//!   - { url: "http://127.0.0.1:9000", bearer: "${PEER_TOKEN}" }
//! ```
//!
//! What this module promises:
//!
//! - **A principal is one credential.** Each `door.auth` entry names a principal (1 to 64
//!   letters, digits, `-`, `_`, `.` or `@`, not starting with `.`, unique) and exactly one credential: `bearer` (sent
//!   as `Authorization: Bearer …`) or `api_key` (sent in `header`, default `X-API-Key`; never
//!   `Authorization`, `Host`, `Cookie` or another header HTTP itself gives meaning). `trust` is
//!   `external` (the default: what the client claims of its trust is recorded, never honoured)
//!   or `peer` (the client is another capsule, whose claimed `x-murmur-task-trust` its tasks
//!   inherit).
//! - **Secrets are references.** Every credential value is `${NAME}`, kept as written at load
//!   and resolved at staging from the usual credential sources (the environment, the `.env`,
//!   the credentials file). A literal secret in the manifest is refused (`E-MAN-022`).
//! - **Modes are media types.** `input_modes` (default `[text/plain]`) are the text types the
//!   capsule takes: the door hands the agent text, so each is `text/…`. `output_modes` (default
//!   `[text/plain]`) are what it produces and must hold `text/plain` (the answer). A malformed
//!   or wildcard type is `E-A2A-008`.
//! - **The versions served are the ones listed.** `a2a_versions` (default `["0.3", "1.0"]`)
//!   names the A2A versions the door speaks and its card advertises: with both, one card
//!   carries both versions' fields (as a client of either reads it); with one, the card is
//!   that version's alone, valid under its schema, and a call in the other version is refused
//!   (`VersionNotSupported`, -32009). A version written as a YAML number (`1.0`) is read as the
//!   text it is. An empty list, a version other than `0.3` and `1.0`, or one listed twice is
//!   `E-A2A-031`.
//! - **What conversations keep on disk is bounded.** `conversations_max_bytes` (default 256 MiB,
//!   at least 1 MiB, else `E-A2A-032`) is the most the saved conversations of a served
//!   capsule's contexts take in all; past it the one idle longest is deleted.
//! - **The port is the manifest's unless the command line says.** `port` is the port
//!   `mur run --serve` listens on when no `--port` is given (absent: one the system chooses).
//! - **A peer entry matches by origin.** `peers[].url` is an http(s) URL in
//!   `capabilities.network.allow` (`E-CAP-008` otherwise); a send whose URL has the same scheme,
//!   host and port presents that entry's credential. One entry per origin.
//! - **A named peer is a tool.** `peers[].name` (1 to 59 lowercase letters, digits and `-`,
//!   starting with a letter, unique) offers the peer to the model as the tool `ask-<name>`,
//!   which may not be the name of a declared tool or skill (`E-A2A-026`); `description` (on a
//!   named entry, not blank, at most 2,000 characters) is what the model is told it does. Each
//!   problem of the two is `E-A2A-025`.
//!
//! Every other problem of an entry is `E-A2A-007`, naming the field.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Diagnostic, code};
use crate::fields::is_variable_name;
use crate::fields::{check_http_url, null_as_default};
use crate::network::NetworkRule;

/// The header an `api_key` goes in when the entry names none.
pub const DEFAULT_API_KEY_HEADER: &str = "X-API-Key";

/// `door`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Door {
    /// Who may use the door; empty: no one is asked for a credential (loopback only).
    #[serde(default, deserialize_with = "null_as_default")]
    pub auth: Vec<Principal>,
    #[serde(default = "text_plain", deserialize_with = "text_plain_if_null")]
    pub input_modes: Vec<String>,
    #[serde(default = "text_plain", deserialize_with = "text_plain_if_null")]
    pub output_modes: Vec<String>,
    /// Names (`name` or `name:port`) the door answers to besides its own address.
    #[serde(default, deserialize_with = "null_as_default")]
    pub allowed_hosts: Vec<String>,
    /// Web pages (`scheme://host[:port]`) that may call the door besides its own.
    #[serde(default, deserialize_with = "null_as_default")]
    pub allowed_origins: Vec<String>,
    /// HTTPS with this certificate and key.
    #[serde(default)]
    pub tls: Option<DoorTls>,
    /// The A2A versions the door speaks and its card advertises (`"0.3"`, `"1.0"`), as
    /// written; [`Door::serves`] answers for one.
    #[serde(default = "all_versions", deserialize_with = "versions_if_null")]
    pub a2a_versions: Vec<String>,
    /// The port `mur run --serve` listens on without `--port`.
    #[serde(default)]
    pub port: Option<u16>,
    /// The most bytes the kept conversations of a served capsule's contexts take on disk in
    /// all; absent: [`CONVERSATIONS_MAX_BYTES`].
    #[serde(default)]
    pub conversations_max_bytes: Option<u64>,
}

/// What `door.conversations_max_bytes` is when absent (256 MiB).
pub const CONVERSATIONS_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The least `door.conversations_max_bytes` may be (1 MiB).
pub const CONVERSATIONS_LEAST_BYTES: u64 = 1024 * 1024;

/// The A2A versions a door can speak, as `door.a2a_versions` names them.
pub const A2A_VERSIONS: [&str; 2] = ["0.3", "1.0"];

fn all_versions() -> Vec<String> {
    A2A_VERSIONS.iter().map(|v| v.to_string()).collect()
}

/// `door.a2a_versions`: absent or empty is both; each item is text, or a YAML number read as
/// the text it is written as (`1.0` is `"1.0"`).
fn versions_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Word {
        Text(String),
        Number(f64),
    }
    Ok(Option::<Vec<Word>>::deserialize(d)?
        .map(|words| {
            words
                .into_iter()
                .map(|word| match word {
                    Word::Text(text) => text,
                    Word::Number(number) => format!("{number:?}"),
                })
                .collect()
        })
        .unwrap_or_else(all_versions))
}

/// `door.tls`: PEM files, relative to the manifest's directory or absolute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorTls {
    /// The certificate chain, the door's own certificate first.
    pub cert: String,
    /// The private key of that certificate.
    pub key: String,
}

impl Default for Door {
    fn default() -> Door {
        Door {
            auth: Vec::new(),
            input_modes: text_plain(),
            output_modes: text_plain(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tls: None,
            a2a_versions: all_versions(),
            port: None,
            conversations_max_bytes: None,
        }
    }
}

impl Door {
    /// Whether the door speaks A2A `version` (`"0.3"` or `"1.0"`): listed in `a2a_versions`.
    pub fn serves(&self, version: &str) -> bool {
        self.a2a_versions.iter().any(|listed| listed == version)
    }
}

fn text_plain() -> Vec<String> {
    vec!["text/plain".to_string()]
}

fn text_plain_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_else(text_plain))
}

closed_set! {
    /// What a principal's tasks are trusted as.
    #[derive(Default)]
    pub enum PrincipalTrust (code::E_MAN_015, "trust") {
        /// A client: its trust claims are recorded, never honoured.
        #[default]
        External = "external",
        /// Another capsule: its tasks inherit the trust class it claims for them.
        Peer = "peer",
    }
}

/// One `door.auth` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    #[serde(default)]
    pub principal: String,
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    /// The header of an `api_key` (default [`DEFAULT_API_KEY_HEADER`]).
    pub header: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub trust: PrincipalTrust,
}

/// One `peers` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    #[serde(default)]
    pub url: String,
    /// The peer's name: a named peer is offered to the model as the tool `ask-<name>`. An
    /// unnamed entry only holds the credential presented to its origin.
    #[serde(default)]
    pub name: Option<String>,
    /// What the model is told the peer does; without it, what the peer's agent card says.
    #[serde(default)]
    pub description: Option<String>,
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    /// The header of an `api_key` (default [`DEFAULT_API_KEY_HEADER`]).
    pub header: Option<String>,
}

/// How a credential travels, with the name of the credential that holds its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    /// `Authorization: Bearer <value>`.
    Bearer { credential: String },
    /// `<header>: <value>`.
    ApiKey { header: String, credential: String },
}

impl Presented {
    /// The name of the credential holding the value.
    pub fn credential(&self) -> &str {
        match self {
            Presented::Bearer { credential } | Presented::ApiKey { credential, .. } => credential,
        }
    }

    /// The request header that carries `value`: `authorization: Bearer <value>`, or
    /// `<header>: <value>`.
    pub fn header(&self, value: &str) -> (String, String) {
        match self {
            Presented::Bearer { .. } => ("authorization".to_string(), format!("Bearer {value}")),
            Presented::ApiKey { header, .. } => (header.clone(), value.to_string()),
        }
    }

    /// The scheme's name, as the card and the trace give it: `bearer` or `api_key`.
    pub fn scheme(&self) -> &'static str {
        match self {
            Presented::Bearer { .. } => "bearer",
            Presented::ApiKey { .. } => "api_key",
        }
    }
}

/// The credential of an entry with `bearer`, `api_key` and `header`, when exactly one of the
/// two is a `${NAME}` reference.
fn presented(
    bearer: &Option<String>,
    api_key: &Option<String>,
    header: &Option<String>,
) -> Option<Presented> {
    match (bearer, api_key) {
        (Some(bearer), None) => Some(Presented::Bearer {
            credential: reference(bearer)?.to_string(),
        }),
        (None, Some(key)) => Some(Presented::ApiKey {
            header: header
                .clone()
                .unwrap_or_else(|| DEFAULT_API_KEY_HEADER.to_string()),
            credential: reference(key)?.to_string(),
        }),
        _ => None,
    }
}

/// `NAME` when `value` is exactly `${NAME}`.
fn reference(value: &str) -> Option<&str> {
    let name = value.strip_prefix("${")?.strip_suffix('}')?;
    is_variable_name(name).then_some(name)
}

impl Principal {
    /// The entry's credential (`None` only for an entry validation refuses).
    pub fn presented(&self) -> Option<Presented> {
        presented(&self.bearer, &self.api_key, &self.header)
    }
}

impl Peer {
    /// The entry's credential (`None` only for an entry validation refuses).
    pub fn presented(&self) -> Option<Presented> {
        presented(&self.bearer, &self.api_key, &self.header)
    }

    /// Whether a send to `url` presents this entry's credential: same scheme, host and port.
    pub fn matches(&self, url: &str) -> bool {
        match (url::Url::parse(&self.url), url::Url::parse(url)) {
            (Ok(mine), Ok(theirs)) => mine.origin() == theirs.origin(),
            _ => false,
        }
    }
}

/// The peer entry whose origin `url` has.
pub fn peer_for<'a>(peers: &'a [Peer], url: &str) -> Option<&'a Peer> {
    peers.iter().find(|peer| peer.matches(url))
}

/// Headers HTTP or the protocol gives meaning to, which an API key may not travel in.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "host",
    "cookie",
    "content-type",
    "content-length",
    "transfer-encoding",
    "connection",
    "a2a-version",
    "traceparent",
];

fn malformed(message: String, hint: &str, path: String) -> Diagnostic {
    Diagnostic::new(code::E_A2A_007, message)
        .hint(hint)
        .at_path(path)
}

/// The problems of one credential: exactly one of `bearer` and `api_key`, a reference each, a
/// header that is a token HTTP does not reserve.
fn validate_credential(
    bearer: &Option<String>,
    api_key: &Option<String>,
    header: &Option<String>,
    at: &str,
    what: &str,
    found: &mut Vec<Diagnostic>,
) {
    match (bearer, api_key) {
        (None, None) => found.push(malformed(
            format!("{what} has no credential"),
            "give it `bearer: \"${TOKEN}\"` or `api_key: \"${KEY}\"` (with `header:` if not X-API-Key)",
            at.to_string(),
        )),
        (Some(_), Some(_)) => found.push(malformed(
            format!("{what} has both `bearer` and `api_key`"),
            "give one credential per entry; add another entry for the other",
            at.to_string(),
        )),
        _ => {}
    }
    for (field, value) in [("bearer", bearer), ("api_key", api_key)] {
        if let Some(value) = value
            && reference(value).is_none()
        {
            found.push(
                Diagnostic::new(
                    code::E_MAN_022,
                    format!("{what}'s `{field}` is not a credential reference"),
                )
                .hint("write `${NAME}` and set NAME in the environment, the .env or the credentials file: a secret never sits in the manifest")
                .at_path(format!("{at}.{field}")),
            );
        }
    }
    if let Some(name) = header {
        if bearer.is_some() {
            found.push(malformed(
                format!("{what} has `header`, which only an `api_key` uses"),
                "remove `header:` (a bearer token travels in Authorization)",
                format!("{at}.header"),
            ));
        } else if !is_header_token(name) {
            found.push(malformed(
                format!("{what}'s `header` `{name}` is not an HTTP header name"),
                "name a header such as `X-API-Key`: letters, digits and `-`",
                format!("{at}.header"),
            ));
        } else if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            found.push(malformed(
                format!("{what}'s `header` `{name}` is a header HTTP or A2A gives its own meaning"),
                "use a header of your own, such as `X-API-Key` (a bearer token goes in `bearer:`)",
                format!("{at}.header"),
            ));
        }
    }
}

/// An HTTP header field name (RFC 9110 token), at most 64 bytes.
fn is_header_token(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A principal's name: 1 to 64 letters, digits, `-`, `_`, `.` or `@`, not starting with `.`
/// (it names the principal's directory of a served session's workspace).
pub fn is_principal_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b))
}

/// Whether `text` is a concrete media type `type/subtype` (no wildcard, no parameters).
pub fn is_media_type(text: &str) -> bool {
    let Some((kind, subtype)) = text.split_once('/') else {
        return false;
    };
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 127
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    part(kind) && part(subtype)
}

impl Door {
    pub(crate) fn validate(&self, found: &mut Vec<Diagnostic>) {
        let mut names = HashSet::new();
        for (i, principal) in self.auth.iter().enumerate() {
            let at = format!("door.auth[{i}]");
            let what = format!("door principal `{}`", principal.principal);
            if !is_principal_name(&principal.principal) {
                found.push(malformed(
                    format!("`{at}.principal` is `{}`, which is not a principal's name", principal.principal),
                    "name who holds the credential, such as `principal: ops`: 1 to 64 letters, digits, `-`, `_`, `.` or `@`, not starting with `.`",
                    format!("{at}.principal"),
                ));
            } else if !names.insert(principal.principal.as_str()) {
                found.push(malformed(
                    format!("door principal `{}` is declared twice", principal.principal),
                    "give each principal one entry and a name of its own",
                    format!("{at}.principal"),
                ));
            }
            validate_credential(
                &principal.bearer,
                &principal.api_key,
                &principal.header,
                &at,
                &what,
                found,
            );
        }
        let modes = [
            ("input_modes", &self.input_modes),
            ("output_modes", &self.output_modes),
        ];
        for (field, modes) in modes {
            if modes.is_empty() {
                found.push(
                    Diagnostic::new(code::E_A2A_008, format!("`door.{field}` is empty"))
                        .hint("list at least `text/plain`, or remove the key")
                        .at_path(format!("door.{field}")),
                );
            }
            for (i, mode) in modes.iter().enumerate() {
                if !is_media_type(mode) {
                    found.push(
                        Diagnostic::new(
                            code::E_A2A_008,
                            format!("`door.{field}[{i}]` is `{mode}`, which is not a media type"),
                        )
                        .hint("write a media type such as `text/plain` or `application/json`, with no wildcard or parameters")
                        .at_path(format!("door.{field}[{i}]")),
                    );
                } else if field == "input_modes" && !mode.starts_with("text/") {
                    found.push(
                        Diagnostic::new(
                            code::E_A2A_008,
                            format!("`door.input_modes[{i}]` is `{mode}`; the door hands the agent text only"),
                        )
                        .hint("list text types (`text/plain`, `text/markdown`); a client's file or data parts are refused")
                        .at_path(format!("door.input_modes[{i}]")),
                    );
                }
            }
        }
        self.validate_reach(found);
        self.validate_versions(found);
        if let Some(bytes) = self
            .conversations_max_bytes
            .filter(|bytes| *bytes < CONVERSATIONS_LEAST_BYTES)
        {
            found.push(
                Diagnostic::new(
                    code::E_A2A_032,
                    format!(
                        "`door.conversations_max_bytes` is {bytes}: less than {} MiB would keep \
                         no more than the last conversation",
                        CONVERSATIONS_LEAST_BYTES >> 20
                    ),
                )
                .hint(format!(
                    "write at least {CONVERSATIONS_LEAST_BYTES} ({} MiB), or remove the key for {} MiB",
                    CONVERSATIONS_LEAST_BYTES >> 20,
                    CONVERSATIONS_MAX_BYTES >> 20
                ))
                .at_path("door.conversations_max_bytes"),
            );
        }
        if !self.output_modes.is_empty() && !self.output_modes.iter().any(|m| m == "text/plain") {
            found.push(
                Diagnostic::new(
                    code::E_A2A_008,
                    "`door.output_modes` leaves out `text/plain`, which every answer is"
                        .to_string(),
                )
                .hint("add `text/plain` to `door.output_modes`")
                .at_path("door.output_modes"),
            );
        }
    }
}

impl Door {
    /// The problems of `a2a_versions` (`E-A2A-031`): empty, unknown, or listed twice.
    fn validate_versions(&self, found: &mut Vec<Diagnostic>) {
        if self.a2a_versions.is_empty() {
            found.push(
                Diagnostic::new(code::E_A2A_031, "`door.a2a_versions` is empty: the door would speak no A2A version")
                    .hint("list the versions to serve, such as `[\"1.0\"]`, or remove the key to serve `0.3` and `1.0`")
                    .at_path("door.a2a_versions"),
            );
        }
        for (i, version) in self.a2a_versions.iter().enumerate() {
            let at = format!("door.a2a_versions[{i}]");
            if !A2A_VERSIONS.contains(&version.as_str()) {
                found.push(
                    Diagnostic::new(
                        code::E_A2A_031,
                        format!(
                            "`{at}` is `{version}`, which is not an A2A version the door speaks"
                        ),
                    )
                    .hint("write `\"0.3\"` or `\"1.0\"` (Major.Minor, as A2A-Version names them)")
                    .at_path(at),
                );
            } else if let Some(first) = self.a2a_versions[..i].iter().position(|v| v == version) {
                found.push(
                    Diagnostic::new(
                        code::E_A2A_031,
                        format!(
                            "`door.a2a_versions` lists `{version}` twice (items {first} and {i})"
                        ),
                    )
                    .hint("list each version once")
                    .at_path(at),
                );
            }
        }
    }

    /// The problems of `allowed_hosts`, `allowed_origins` and `tls` (`E-A2A-020`).
    fn validate_reach(&self, found: &mut Vec<Diagnostic>) {
        let mut bad = |at: String, message: String, hint: &str| {
            found.push(
                Diagnostic::new(code::E_A2A_020, message)
                    .hint(hint)
                    .at_path(at),
            );
        };
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            if !is_host_name(host) {
                bad(
                    format!("door.allowed_hosts[{i}]"),
                    format!("`door.allowed_hosts[{i}]` is `{host}`, which is not a host name"),
                    "write a name the door is reached by, such as `agent.internal` or `agent.internal:8443`",
                );
            }
        }
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            if !is_origin(origin) {
                bad(
                    format!("door.allowed_origins[{i}]"),
                    format!("`door.allowed_origins[{i}]` is `{origin}`, which is not a web origin"),
                    "write the scheme, host and port of the page, such as `https://console.example.com`, with no path; `*` and `null` are not taken",
                );
            }
        }
        if let Some(tls) = &self.tls {
            for (field, path) in [("cert", &tls.cert), ("key", &tls.key)] {
                if path.trim().is_empty() {
                    bad(
                        format!("door.tls.{field}"),
                        format!("`door.tls.{field}` is empty"),
                        "name a PEM file, relative to murmur.yaml or absolute",
                    );
                }
            }
        }
    }
}

/// A host name or IP literal, with an optional port: what `door.allowed_hosts` lists.
fn is_host_name(text: &str) -> bool {
    let (name, port) = match text.rsplit_once(':') {
        Some((name, port)) if !text.starts_with('[') || name.ends_with(']') => (name, Some(port)),
        _ => (text, None),
    };
    let port_ok = port.is_none_or(|port| port.parse::<u16>().is_ok_and(|p| p > 0));
    let name_ok = if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        inner.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    };
    port_ok && name_ok
}

/// `http(s)://host[:port]` with nothing after it: what `door.allowed_origins` lists.
fn is_origin(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
        && is_host_name(rest.strip_suffix('/').unwrap_or(rest))
}

/// The problems of `peers`, against the capsule's network allowlist.
pub(crate) fn validate_peers(peers: &[Peer], allow: &[NetworkRule], found: &mut Vec<Diagnostic>) {
    let mut origins = Vec::new();
    for (i, peer) in peers.iter().enumerate() {
        let at = format!("peers[{i}]");
        let what = format!("peer `{}`", peer.url);
        if let Some(problem) = check_http_url(&peer.url, &format!("{at}.url")) {
            found.push(problem);
        } else if let Ok(url) = url::Url::parse(&peer.url) {
            let host = url
                .host_str()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']');
            let port = url.port_or_known_default().unwrap_or(0);
            if !allow
                .iter()
                .any(|rule| rule.permits(url.scheme(), host, port))
            {
                found.push(
                    Diagnostic::new(
                        code::E_CAP_008,
                        format!("peer `{}` is not in `capabilities.network.allow`", peer.url),
                    )
                    .hint(format!(
                        "add `{}` to `capabilities.network.allow`, or remove the entry",
                        url.origin().ascii_serialization()
                    ))
                    .at_path(format!("{at}.url")),
                );
            }
            let origin = url.origin();
            if origins.contains(&origin) {
                found.push(malformed(
                    format!(
                        "peer `{}` has the same origin as an earlier entry",
                        peer.url
                    ),
                    "give each origin (scheme, host, port) one entry",
                    format!("{at}.url"),
                ));
            }
            origins.push(origin);
        }
        validate_credential(&peer.bearer, &peer.api_key, &peer.header, &at, &what, found);
        validate_peer_tool(peers, i, found);
    }
}

/// The longest peer name: `ask-` and it are at most 63 characters.
pub const MAX_PEER_NAME: usize = 59;

/// The longest `description` of a peer.
pub const MAX_PEER_DESCRIPTION: usize = 2_000;

/// A peer's name: 1 to [`MAX_PEER_NAME`] lowercase ASCII letters, digits and `-`, starting with
/// a letter (so its tool `ask-<name>` never holds `__`, the MCP tools' separator).
pub fn is_peer_name(name: &str) -> bool {
    (1..=MAX_PEER_NAME).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The problems (`E-A2A-025`) of `peers[i]`'s `name` and `description`.
fn validate_peer_tool(peers: &[Peer], i: usize, found: &mut Vec<Diagnostic>) {
    let peer = &peers[i];
    let bad = |field: &str, message: String, hint: &str| {
        Diagnostic::new(code::E_A2A_025, message)
            .hint(hint)
            .at_path(format!("peers[{i}].{field}"))
    };
    if let Some(name) = &peer.name {
        if !is_peer_name(name) {
            found.push(bad(
                "name",
                format!("`peers[{i}].name` is `{name}`, which is not a peer's name"),
                "name the peer as its tool `ask-<name>` will say it, such as `name: researcher`: 1 to 59 lowercase letters, digits and `-`, starting with a letter",
            ));
        } else if let Some(first) = peers[..i]
            .iter()
            .position(|other| other.name.as_deref() == Some(name))
        {
            found.push(bad(
                "name",
                format!(
                    "peer name `{name}` is given twice (peers[{first}] and peers[{i}]): the model would see two tools `ask-{name}`"
                ),
                "give each peer a name of its own",
            ));
        }
    }
    if let Some(description) = &peer.description {
        let chars = description.chars().count();
        if description.trim().is_empty() {
            found.push(bad(
                "description",
                format!("`peers[{i}].description` is empty"),
                "say in a sentence what the peer does, or remove the key to take its agent card's",
            ));
        } else if chars > MAX_PEER_DESCRIPTION {
            found.push(bad(
                "description",
                format!(
                    "`peers[{i}].description` is {chars} characters; a peer's is at most {MAX_PEER_DESCRIPTION}"
                ),
                "shorten it: it is what the model reads of the tool on every turn",
            ));
        }
        if peer.name.is_none() {
            found.push(bad(
                "description",
                format!("`peers[{i}]` has a `description` but no `name`: only a named peer is offered to the model"),
                "add `name:` to offer the peer as the tool `ask-<name>`, or remove `description:`",
            ));
        }
    }
}

/// The tool names of the named `peers`: `ask-<name>`, with the entry's index.
pub fn peer_tool_names(peers: &[Peer]) -> impl Iterator<Item = (usize, String)> + '_ {
    peers.iter().enumerate().filter_map(|(i, peer)| {
        let name = peer.name.as_deref().filter(|name| is_peer_name(name))?;
        Some((i, format!("{PEER_TOOL_PREFIX}{name}")))
    })
}

/// What a named peer's tool name starts with.
pub const PEER_TOOL_PREFIX: &str = "ask-";

/// Whether the value at `path` is a door or peer credential reference, left as written at
/// load.
pub(crate) fn is_credential_path(path: &str) -> bool {
    let entry = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.split_once("]."))
            .is_some_and(|(index, field)| {
                !index.is_empty()
                    && index.bytes().all(|b| b.is_ascii_digit())
                    && matches!(field, "bearer" | "api_key")
            })
    };
    entry("door.auth[") || entry("peers[")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_paths_are_the_door_and_peer_secrets_only() {
        assert!(is_credential_path("door.auth[0].bearer"));
        assert!(is_credential_path("door.auth[12].api_key"));
        assert!(is_credential_path("peers[3].bearer"));
        assert!(!is_credential_path("door.auth[0].principal"));
        assert!(!is_credential_path("door.auth[].bearer"));
        assert!(!is_credential_path("peers[x].bearer"));
        assert!(!is_credential_path("door.input_modes[0]"));
    }

    #[test]
    fn a_peer_matches_its_origin_only() {
        let peer = Peer {
            url: "http://127.0.0.1:9000".into(),
            name: None,
            description: None,
            bearer: Some("${T}".into()),
            api_key: None,
            header: None,
        };
        assert!(peer.matches("http://127.0.0.1:9000/"));
        assert!(peer.matches("http://127.0.0.1:9000/a2a"));
        assert!(!peer.matches("http://127.0.0.1:9001/"));
        assert!(!peer.matches("https://127.0.0.1:9000/"));
        assert!(!peer.matches("http://localhost:9000/"));
    }

    #[test]
    fn media_types_are_concrete() {
        assert!(is_media_type("text/plain"));
        assert!(is_media_type("application/vnd.murmur+json"));
        for bad in [
            "text",
            "*/*",
            "text/*",
            "text/plain; charset=utf-8",
            "/plain",
            "a/b/c",
            "",
        ] {
            assert!(!is_media_type(bad), "{bad}");
        }
    }
}
