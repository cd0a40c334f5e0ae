//! What a registry answers: one version of one artifact as it lists it ([`IndexEntry`]), or why
//! it could not give what was asked ([`RegistryError`], each with its code and a hint). Every
//! kind of registry (a directory, an HTTP index, an OCI registry) answers in these terms.

use std::io;
use std::path::PathBuf;

use murmur_manifest::Coded;
use murmur_manifest::diagnostic::code;

/// One version of one artifact, as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub name: String,
    pub version: String,
    /// `tool`, `driver`, `hook` or `skill`.
    pub runtime: String,
    /// Where the archive is: relative to the index, or an absolute http(s) URL.
    pub url: String,
    /// The archive's sha256: 64 lowercase hex digits.
    pub sha256: String,
    /// The archive's size in bytes, when the index says.
    pub size: Option<u64>,
}

/// Why a registry could not give what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// What was given as a registry is not one.
    #[error("`{given}` is not a registry: {reason}")]
    NotARegistry { given: String, reason: String },
    /// No answer: the directory or file cannot be read, the connection failed, it timed out.
    #[error("cannot reach {location}: {detail}")]
    Unreachable { location: String, detail: String },
    /// The server answered with a status other than 2xx.
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    /// The index is not a format-1 index.
    #[error("the registry index {location} is malformed: {detail}")]
    MalformedIndex { location: String, detail: String },
    /// An entry's url points somewhere it may not.
    #[error("artifact `{name}` {version}: its url `{url}` {reason}")]
    BadUrl {
        name: String,
        version: String,
        url: String,
        reason: String,
    },
    /// The index has no artifact of this name.
    #[error(
        "the registry has no artifact `{name}`{}",
        listed(" (it has: ", known, ")")
    )]
    NoArtifact { name: String, known: Vec<String> },
    /// The index has the artifact, but not this version.
    #[error(
        "the registry has no version {version} of `{name}`{}",
        listed(" (it has: ", available, ")")
    )]
    NoVersion {
        name: String,
        version: String,
        available: Vec<String>,
    },
    /// The archive is larger than the caller accepts.
    #[error("artifact `{name}` {version} is larger than the limit of {limit} bytes{}", size.map(|s| format!(" ({s} bytes)")).unwrap_or_default())]
    TooLarge {
        name: String,
        version: String,
        limit: u64,
        size: Option<u64>,
    },
    /// The bytes are not the ones the index lists.
    #[error(
        "the bytes of `{name}` {version} from {location} have sha256 {actual}, but the registry lists {expected}"
    )]
    HashMismatch {
        name: String,
        version: String,
        location: String,
        expected: String,
        actual: String,
    },
    /// Publishing would change the bytes of a published version.
    #[error(
        "`{name}` {version} is already in the registry with sha256 {existing}; these bytes have sha256 {offered}"
    )]
    VersionTaken {
        name: String,
        version: String,
        existing: String,
        offered: String,
    },
    /// What was asked to be published cannot go in an index.
    #[error("cannot publish `{name}` {version}: {reason}")]
    Unpublishable {
        name: String,
        version: String,
        reason: String,
    },
    /// The registry asks for credentials, or refused the ones given, or the credential sources
    /// cannot be used; `hint`, when given, says how to fix it.
    #[error("the registry {registry} refused the request: {detail}")]
    Credentials {
        registry: String,
        detail: String,
        hint: Option<String>,
    },
    /// An answer of the registry runs past the bound mur reads (an OCI manifest or index, a
    /// tag list, a token answer).
    #[error("{location}: {detail}")]
    BodyTooLarge { location: String, detail: String },
    /// What an OCI registry holds there is not a Murmur artifact, or breaks a bound.
    #[error("{location} is not an artifact mur installs: {reason}")]
    NotAnArtifact { location: String, reason: String },
    /// A capsule cannot be pushed or pulled as asked.
    #[error("capsule {capsule}: {reason}")]
    CapsuleNotMovable { capsule: String, reason: String },
    /// Writing into a directory registry failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Coded for RegistryError {
    /// The stable diagnostic code.
    fn code(&self) -> &'static str {
        match self {
            RegistryError::NotARegistry { .. }
            | RegistryError::Unreachable { .. }
            | RegistryError::Status { .. }
            | RegistryError::MalformedIndex { .. }
            | RegistryError::BadUrl { .. }
            | RegistryError::Unpublishable { .. }
            | RegistryError::Write { .. } => code::E_REG_007,
            RegistryError::NoArtifact { .. } | RegistryError::NoVersion { .. } => code::E_REG_006,
            RegistryError::TooLarge { .. } | RegistryError::BodyTooLarge { .. } => code::E_REG_003,
            RegistryError::HashMismatch { .. } => code::E_REG_004,
            RegistryError::VersionTaken { .. } => code::E_REG_011,
            RegistryError::Credentials { .. } => code::E_REG_015,
            RegistryError::NotAnArtifact { .. } => code::E_REG_002,
            RegistryError::CapsuleNotMovable { .. } => code::E_REG_016,
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    /// How to fix it.
    fn hint(&self) -> String {
        match self {
            RegistryError::NotARegistry { .. } => {
                "give a directory holding index.json, or the http(s):// URL it is under".into()
            }
            RegistryError::Unreachable { .. } => "check the registry's address and the network; \
                a directory registry holds index.json (`mur publish` creates it)"
                .into(),
            RegistryError::Status { status: 404, .. } => {
                "check the registry URL: its index.json and archives must be under it".into()
            }
            RegistryError::Status { .. } => {
                "the server refused the request; check the URL, or try again later".into()
            }
            RegistryError::MalformedIndex { .. } => "the registry's index.json is not one this \
                mur reads; tell the registry's maintainer, or rewrite it with `mur publish`"
                .into(),
            RegistryError::BadUrl { .. } => "a directory registry's urls are paths inside it \
                (`name/name-1.0.0.tar.gz`); an HTTP registry's are relative to index.json or \
                http(s) URLs"
                .into(),
            RegistryError::NoArtifact { name, known } => {
                let names = known.iter().map(String::as_str);
                match closest(name, names) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => "check the artifact's name in murmur.yaml, or publish it with \
                             `mur publish` (a whole capsule: check the reference, or push it \
                             with `mur push`)"
                        .into(),
                }
            }
            RegistryError::NoVersion { available, .. } if !available.is_empty() => {
                "set `version:` in murmur.yaml to one of the versions listed, or publish this one"
                    .into()
            }
            RegistryError::NoVersion { .. } => "publish a version with `mur publish`".into(),
            RegistryError::TooLarge { .. } => "this artifact is larger than mur accepts; check \
                that the registry lists the artifact you meant"
                .into(),
            RegistryError::HashMismatch { .. } => "do not use these bytes: the registry's copy \
                was changed or corrupted after it was indexed; ask its maintainer to publish it \
                again"
                .into(),
            RegistryError::VersionTaken { .. } => "a published version never changes: raise \
                `version:` in the artifact's murmur.yaml and publish again"
                .into(),
            RegistryError::Unpublishable { .. } => "give the artifact a name of letters, digits, \
                `-`, `_` and `.` (starting with a letter or digit), a semantic version, and a \
                runtime of tool, driver, hook or skill"
                .into(),
            RegistryError::Write { .. } => "check that the registry directory is writable".into(),
            RegistryError::Credentials {
                hint: Some(hint), ..
            } => hint.clone(),
            RegistryError::Credentials { .. } => "set MURMUR_REGISTRY_USERNAME and \
                MURMUR_REGISTRY_PASSWORD (or MURMUR_REGISTRY_TOKEN) in the environment, the \
                .env or $MURMUR_HOME/credentials.yaml, bound to the registry's host (the one \
                $MURMUR_REGISTRY names, or listed in MURMUR_REGISTRY_HOSTS), or log in to the \
                registry with a Docker credential file"
                .into(),
            RegistryError::BodyTooLarge { .. } => format!(
                "the registry sent more than mur reads (an OCI manifest or index at most {} \
                 MiB): do not use it; check the reference, and tell the registry's owner",
                crate::oci::MAX_MANIFEST_BYTES >> 20
            ),
            RegistryError::CapsuleNotMovable { .. } => "keep every file the capsule names \
                (its local artifacts, prompt files, component) inside its directory and built; \
                pull into a new or empty directory"
                .into(),
            RegistryError::NotAnArtifact { .. } => "do not use it: check the reference, and \
                push the artifact with `mur publish --registry oci://HOST/NAMESPACE`"
                .into(),
        }
    }
}

fn listed(before: &str, items: &[String], after: &str) -> String {
    if items.is_empty() {
        return String::new();
    }
    const SHOWN: usize = 20;
    let mut text = items
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    format!("{before}{text}{after}")
}

/// The closest of `candidates` to `word`, when close enough to be a likely typo.
fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .map(|c| (edit_distance(word, c), c))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// An error and its sources, `: `-separated.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("read-file", "read-fil"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            closest("raed-file", ["read-file", "x"].into_iter()),
            Some("read-file")
        );
    }
}
