//! The tool contract: calling `murmur:tool/run` and reading what comes back.
//!
//! What a caller can rely on:
//!
//! - One call is one fresh instance in one fresh store, under the call's [`Grants`](crate::Grants): nothing
//!   survives from one call to the next inside the component. The one exception is asked for
//!   by name: [`Engine::call_tool_keeping`](crate::Engine::call_tool_keeping) keeps a driver's
//!   instance for the next turn of the conversation it holds.
//! - A result carrying `data` is used verbatim; `data-path` is then never opened. `data` over
//!   [`DATA_MAX_BYTES`] fails the call ([`RuntimeError::DataTooLarge`]).
//! - Otherwise `data-path` is read on the tool's behalf, beneath the session workdir, by
//!   [`read_data_path`]: `%` escapes are decoded first; an absolute path, any `..`, a symlink
//!   anywhere on the way, a missing file, anything but a regular file, or a file over
//!   [`DATA_PATH_MAX_BYTES`] fails the call ([`RuntimeError::DataPath`]).
//! - `metadata` is kept whole, in order. The reserved keys (`continuation_id`, `state_effect`,
//!   `resource_id`) are read from their first tuple; later tuples of the same key are ignored.
//!   A `state_effect` other than `read` or `mutate`, or a missing one, is unknown. An empty
//!   `continuation_id` is no continuation.
//! - A deadline, a memory limit and a trap are three different errors, and every request a grant
//!   refused during the call is reported, whatever the call's end.

mod call;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bindings;
use crate::error::RuntimeError;
use crate::reported::{PeerSend, Refusal};
pub use call::{BoundTool, KeptInstance, ToolLoader};
use murmur_beneath::{BeneathDir, BeneathError};

/// The largest file `data-path` may name: 10 MiB.
pub const DATA_PATH_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// The most `data` a result may carry: as much as `data-path` may name. More fails the call
/// ([`RuntimeError::DataTooLarge`]), and the data is dropped at once.
pub const DATA_MAX_BYTES: u64 = DATA_PATH_MAX_BYTES;

/// The reserved metadata keys.
pub const CONTINUATION_ID: &str = "continuation_id";
pub const STATE_EFFECT: &str = "state_effect";
pub const RESOURCE_ID: &str = "resource_id";

/// What a tool is called with (`murmur:tool/run.tool-input`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInput {
    pub data: Option<String>,
    pub log_path: Option<String>,
}

/// How a call ended, as the tool sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Passed,
    Failed,
    Error,
}

/// What the tool returned (`murmur:tool/run.tool-result`), as it returned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub status: ToolStatus,
    pub summary: Option<String>,
    pub data: Option<String>,
    pub data_path: Option<String>,
    pub truncated: bool,
    pub metadata: Vec<(String, String)>,
}

impl From<ToolStatus> for murmur_trace::schema::CallStatus {
    fn from(status: ToolStatus) -> Self {
        use murmur_trace::schema::CallStatus;
        match status {
            ToolStatus::Passed => CallStatus::Passed,
            ToolStatus::Failed => CallStatus::Failed,
            ToolStatus::Error => CallStatus::Error,
        }
    }
}

/// How a call affected the resource it addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateEffect {
    Read,
    Mutate,
}

impl StateEffect {
    /// The value as the contract spells it (and the trace records it).
    pub fn as_str(self) -> &'static str {
        match self {
            StateEffect::Read => "read",
            StateEffect::Mutate => "mutate",
        }
    }
}

/// A tool's result, read under the contract's rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolOutput {
    pub result: ToolResult,
    /// The result's text: `data`, else the contents of `data-path`, else nothing.
    pub output: Option<String>,
    pub state_effect: Option<StateEffect>,
    pub resource_id: Option<String>,
    pub continuation_id: Option<String>,
}

/// Everything one call produced.
#[derive(Debug)]
pub struct ToolCallReport {
    pub outcome: Result<ToolOutput, RuntimeError>,
    /// Requests a grant refused during the call, in order.
    pub refusals: Vec<Refusal>,
    /// Tasks the component sent to peer capsules (`murmur:message/send`), sent or refused.
    pub sends: Vec<PeerSend>,
    /// What the component wrote to stdout and stderr (the first 64 KiB of each).
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

impl From<bindings::ToolResult> for ToolResult {
    fn from(result: bindings::ToolResult) -> Self {
        ToolResult {
            status: match result.status {
                bindings::Status::Passed => ToolStatus::Passed,
                bindings::Status::Failed => ToolStatus::Failed,
                bindings::Status::Error => ToolStatus::Error,
            },
            summary: result.summary,
            data: result.data,
            data_path: result.data_path,
            truncated: result.truncated,
            metadata: result.metadata,
        }
    }
}

/// Applies the contract's rules to what a tool returned.
pub fn read_result(
    component: &str,
    workdir: &Path,
    result: ToolResult,
) -> Result<ToolOutput, RuntimeError> {
    let output = match (&result.data, &result.data_path) {
        (Some(data), _) => Some(data.clone()),
        (None, Some(data_path)) => {
            Some(
                read_data_path(workdir, data_path).map_err(|reason| RuntimeError::DataPath {
                    component: component.to_string(),
                    data_path: data_path.clone(),
                    reason,
                })?,
            )
        }
        (None, None) => None,
    };
    let state_effect = match reserved(&result.metadata, STATE_EFFECT) {
        Some("read") => Some(StateEffect::Read),
        Some("mutate") => Some(StateEffect::Mutate),
        _ => None,
    };
    let resource_id = reserved(&result.metadata, RESOURCE_ID).map(str::to_string);
    let continuation_id = reserved(&result.metadata, CONTINUATION_ID)
        .filter(|id| !id.is_empty())
        .map(str::to_string);
    Ok(ToolOutput {
        output,
        state_effect,
        resource_id,
        continuation_id,
        result,
    })
}

/// The value of the first tuple named `key`.
pub fn reserved<'a>(metadata: &'a [(String, String)], key: &str) -> Option<&'a str> {
    metadata
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

/// Reads the file a `data-path` names, beneath `workdir`, or says why it may not.
pub fn read_data_path(workdir: &Path, data_path: &str) -> Result<String, String> {
    let decoded = percent_encoding::percent_decode_str(data_path)
        .decode_utf8()
        .map_err(|_| "its %-escapes do not decode to UTF-8".to_string())?;
    if decoded.is_empty() {
        return Err("it is empty".to_string());
    }
    if decoded.contains('\0') {
        return Err("it holds a NUL byte".to_string());
    }
    let dir = BeneathDir::open(workdir)
        .map_err(|error| format!("the workdir cannot be opened: {error}"))?;
    let bytes = dir
        .read(Path::new(decoded.as_ref()), DATA_PATH_MAX_BYTES)
        .map_err(|error| match error {
            BeneathError::BadPath { reason, .. } => reason.to_string(),
            BeneathError::Symlink { .. } => "it passes through a symlink".to_string(),
            BeneathError::NotRegular { kind, .. } => format!("it is {kind}, not a regular file"),
            BeneathError::Linked { .. } => "it has other hard links".to_string(),
            BeneathError::TooLarge { limit, .. } => {
                format!("it is over the {limit} byte limit")
            }
            BeneathError::NotFound { .. } => "it does not exist".to_string(),
            BeneathError::Io { source, .. } => format!("it cannot be read: {source}"),
        })?;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        data: Option<&str>,
        data_path: Option<&str>,
        metadata: &[(&str, &str)],
    ) -> ToolResult {
        ToolResult {
            status: ToolStatus::Passed,
            summary: None,
            data: data.map(str::to_string),
            data_path: data_path.map(str::to_string),
            truncated: false,
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn data_is_used_verbatim_and_data_path_is_never_opened() {
        let workdir = tempfile::tempdir().unwrap();
        let output = read_result(
            "t",
            workdir.path(),
            result(Some("  verbatim\n"), Some("/etc/passwd"), &[]),
        )
        .unwrap();
        assert_eq!(output.output.as_deref(), Some("  verbatim\n"));
    }

    #[test]
    fn reserved_keys_first_tuple_wins_and_metadata_is_kept_whole() {
        let workdir = tempfile::tempdir().unwrap();
        let metadata = [
            ("state_effect", "read"),
            ("resource_id", "file:a.txt"),
            ("state_effect", "mutate"),
            ("resource_id", "file:b.txt"),
            ("custom", "kept"),
        ];
        let output = read_result("t", workdir.path(), result(Some(""), None, &metadata)).unwrap();
        assert_eq!(output.state_effect, Some(StateEffect::Read));
        assert_eq!(output.resource_id.as_deref(), Some("file:a.txt"));
        assert_eq!(output.result.metadata.len(), 5);
    }

    #[test]
    fn an_unknown_state_effect_and_an_empty_continuation_are_absent() {
        let workdir = tempfile::tempdir().unwrap();
        let metadata = [("state_effect", "write"), ("continuation_id", "")];
        let output = read_result("t", workdir.path(), result(Some(""), None, &metadata)).unwrap();
        assert_eq!(output.state_effect, None);
        assert_eq!(output.continuation_id, None);
    }

    #[test]
    fn data_path_rows() {
        let workdir = tempfile::tempdir().unwrap();
        let root = workdir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/result.txt"), "the result").unwrap();
        std::os::unix::fs::symlink(root.join("out"), root.join("link")).unwrap();
        std::fs::write(
            root.join("big.txt"),
            vec![b'a'; DATA_PATH_MAX_BYTES as usize + 1],
        )
        .unwrap();

        assert_eq!(
            read_data_path(root, "out/result.txt").unwrap(),
            "the result"
        );
        assert_eq!(
            read_data_path(root, "./out/result.txt").unwrap(),
            "the result"
        );
        assert_eq!(
            read_data_path(root, "out%2Fresult.txt").unwrap(),
            "the result"
        );
        assert!(
            read_data_path(root, "/etc/passwd")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(read_data_path(root, "../x").unwrap_err().contains(".."));
        assert!(read_data_path(root, "%2e%2e/x").unwrap_err().contains(".."));
        assert!(
            read_data_path(root, "out/%2E%2E/out/result.txt")
                .unwrap_err()
                .contains("..")
        );
        assert!(
            read_data_path(root, "link/result.txt")
                .unwrap_err()
                .contains("symlink")
        );
        assert!(
            read_data_path(root, "missing.txt")
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            read_data_path(root, "big.txt")
                .unwrap_err()
                .contains("limit")
        );
        assert!(
            read_data_path(root, "out")
                .unwrap_err()
                .contains("regular file")
        );
        assert!(read_data_path(root, "").unwrap_err().contains("empty"));
        assert!(read_data_path(root, "%ff").unwrap_err().contains("UTF-8"));
    }
}
