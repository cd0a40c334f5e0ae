//! What a completed task gives back beside its answer: the files it made or changed under
//! `out/`.
//!
//! What this module promises:
//!
//! - **`out/result.json` is structured data.** When the task wrote it, it holds JSON of at most
//!   [`DATA_LIMIT`] bytes, and `door.output_modes` lists `application/json`, it comes back as
//!   the artifact `result`, one data part.
//! - **Every other file is a file part** of the artifact `file-<n>`, named by its path below
//!   `out/`, with the media type its extension names ([`media_type_of`];
//!   `application/octet-stream` when none does): inline up to [`INLINE_LIMIT`] bytes (and
//!   [`INLINE_TOTAL`] for all of a task's files), else a URL on the door
//!   (`/files/<task id>/<n>`) that serves it, up to [`SERVED_LIMIT`] bytes, to the principal
//!   the task belongs to.
//! - **Only what the capsule declares and the client takes.** A file whose media type is not in
//!   `door.output_modes`, or not in the client's `acceptedOutputModes` (when it sent any), is
//!   not given back; nor is one over [`SERVED_LIMIT`]. Each left out is named in a warning
//!   (`W-A2A-010`, on the operator's terminal), never silently dropped.
//! - Files are read beneath the workdir when the task ends: a link planted under `out/` is
//!   never followed (it is not listed at all).

use murmur_a2a::{Artifact, Part};
use murmur_runtime::session::workdir::OutputFile;

/// The largest file given back inline; past it, a URL.
pub const INLINE_LIMIT: u64 = 256 * 1024;
/// The most bytes of files one task gives back inline; the rest go by URL.
pub const INLINE_TOTAL: u64 = 1 << 20;
/// The largest file the door serves by URL; past it, the file is not given back.
pub const SERVED_LIMIT: u64 = 64 << 20;
/// The largest `out/result.json` given back as a data part.
pub const DATA_LIMIT: u64 = 1 << 20;

/// The media type a file name's extension names (lower case), `application/octet-stream` for
/// any other.
pub fn media_type_of(name: &str) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "zip" => "application/zip",
        "tar" => "application/x-tar",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

/// Whether `media_type` is one of `modes` (`*/*` and `type/*` included; parameters and case
/// set aside).
fn listed(modes: &[String], media_type: &str) -> bool {
    let (kind, _) = media_type.split_once('/').unwrap_or((media_type, ""));
    modes.iter().any(|mode| {
        let mode = mode
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        mode == media_type || mode == "*/*" || mode == format!("{kind}/*")
    })
}

/// What a task's files give back: the artifacts, the files the door serves by URL (the `n` of
/// `/files/<task id>/<n>` is the index), and a note for each left out (what, and what to do).
#[derive(Debug, Default)]
pub struct Offered {
    pub artifacts: Vec<Artifact>,
    pub served: Vec<OutputFile>,
    pub notes: Vec<(String, &'static str)>,
}

/// The artifacts of `outputs` under `output_modes` (the capsule's) and `accepted` (the
/// client's; empty takes anything); `files_url` is where the door serves this task's files
/// (`http://host:port/files/<task id>/`).
pub fn offer(
    outputs: &[OutputFile],
    output_modes: &[String],
    accepted: &[String],
    files_url: &str,
) -> Offered {
    let mut offered = Offered::default();
    let mut inline = 0;
    let takes = |media_type: &str| {
        listed(output_modes, media_type) && (accepted.is_empty() || listed(accepted, media_type))
    };
    for file in outputs {
        let name = file.name();
        if name == "result.json" && takes("application/json") && file.size <= DATA_LIMIT {
            match file
                .read(DATA_LIMIT)
                .map_err(|error| error.to_string())
                .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
            {
                Ok(value) => {
                    offered.artifacts.push(Artifact {
                        name: Some("result".to_string()),
                        ..Artifact::new("result", vec![Part::data(value)])
                    });
                    continue;
                }
                Err(error) => offered.notes.push((
                    format!("out/result.json is not given back as data: {error}"),
                    "write JSON of at most 1 MiB there, or another name for a file",
                )),
            }
        }
        let media_type = media_type_of(&name);
        if !takes(media_type) {
            offered.notes.push(if listed(output_modes, media_type) {
                (
                    format!("out/{name} ({media_type}) is not given back: the client does not accept that type"),
                    "the client's acceptedOutputModes decide; nothing to change in the capsule",
                )
            } else {
                (
                    format!("out/{name} ({media_type}) is not given back: door.output_modes does not list that type"),
                    "list the type in `door.output_modes` to give such files back",
                )
            });
            continue;
        }
        if file.size > SERVED_LIMIT {
            offered.notes.push((
                format!(
                    "out/{name} ({} bytes) is not given back: the door serves files of at most {SERVED_LIMIT} bytes",
                    file.size
                ),
                "write smaller files; the session's workdir keeps this one",
            ));
            continue;
        }
        let id = format!("file-{}", offered.artifacts.len());
        let part = if file.size <= INLINE_LIMIT && inline + file.size <= INLINE_TOTAL {
            match file.read(INLINE_LIMIT) {
                Ok(bytes) => {
                    inline += bytes.len() as u64;
                    Part::file_bytes(bytes, Some(name.clone()), Some(media_type.into()))
                }
                Err(error) => {
                    offered.notes.push((
                        format!("out/{name} is not given back: {error}"),
                        "leave regular files under out/: links and special files are never read",
                    ));
                    continue;
                }
            }
        } else {
            let url = format!("{files_url}{}", offered.served.len());
            offered.served.push(file.clone());
            Part::file_uri(url, Some(name.clone()), Some(media_type.into()))
        };
        offered.artifacts.push(Artifact {
            name: Some(name),
            ..Artifact::new(id, vec![part])
        });
    }
    offered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_come_from_extensions() {
        assert_eq!(media_type_of("report.CSV"), "text/csv");
        assert_eq!(media_type_of("charts/a.png"), "image/png");
        assert_eq!(media_type_of("notes"), "application/octet-stream");
        assert_eq!(media_type_of("archive.tar.gz"), "application/gzip");
    }

    #[test]
    fn listed_takes_wildcards_case_and_parameters() {
        let modes = |m: &[&str]| m.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        assert!(listed(&modes(&["Text/CSV; charset=utf-8"]), "text/csv"));
        assert!(listed(&modes(&["image/*"]), "image/png"));
        assert!(listed(&modes(&["*/*"]), "application/pdf"));
        assert!(!listed(&modes(&["text/plain"]), "text/csv"));
        assert!(!listed(&modes(&["image/*"]), "text/plain"));
    }
}
