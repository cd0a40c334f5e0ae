//! Tools: implement [`Tool`], export it with [`crate::export_tool!`].
//!
//! [`ToolInput`] and [`ToolResult`] are the WIT records of `murmur:tool/run@0.1.0`, with
//! helpers: [`ToolInput::json`] parses the input, [`ToolResult::passed`],
//! [`ToolResult::failed`] and [`ToolResult::error`] start a result, and builder methods fill
//! in the rest. The fields stay public, so a result can also be written out by hand.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::bindings::exports::murmur::tool::run::{
    Guest as Tool, Status, ToolInput, ToolResult,
};

/// Reserved metadata key: the opaque id of conversation state a driver holds provider-side.
/// A non-empty value asks the runtime to send only new messages next turn; an empty value
/// or none drops the held id.
pub const CONTINUATION_ID: &str = "continuation_id";
/// Reserved metadata key: how the call affected the resource it addressed, `read` or `mutate`
/// (see [`StateEffect`]).
pub const STATE_EFFECT: &str = "state_effect";
/// Reserved metadata key: which resource the call addressed, an opaque string scoped by its
/// addressing scheme (`file:notes.md`, `sym:Foo::bar`). Two calls address the same resource
/// when their values are byte-equal.
pub const RESOURCE_ID: &str = "resource_id";

/// How a call affected the resource it addressed: the value of the `state_effect` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateEffect {
    /// The call only read the resource.
    Read,
    /// The call changed the resource.
    Mutate,
}

impl StateEffect {
    /// The wire value: `"read"` or `"mutate"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StateEffect::Read => "read",
            StateEffect::Mutate => "mutate",
        }
    }
}

impl std::fmt::Display for StateEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToolInput {
    /// An input carrying `data` and no log path (handy for testing a tool on the host).
    pub fn new(data: impl Into<String>) -> Self {
        ToolInput {
            data: Some(data.into()),
            log_path: None,
        }
    }

    /// Parse `data` as JSON into `T`.
    ///
    /// A missing or blank `data`, invalid JSON, or JSON of the wrong shape gives a `failed`
    /// result saying what was wrong, ready to be returned as is:
    /// `let args: Args = match input.json() { Ok(a) => a, Err(failed) => return failed };`
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ToolResult> {
        let data = match self.data.as_deref() {
            Some(data) if !data.trim().is_empty() => data,
            _ => {
                return Err(ToolResult::failed(
                    "missing input: this tool expects a JSON object in the call's input",
                ));
            }
        };
        serde_json::from_str(data).map_err(|e| ToolResult::failed(format!("invalid input: {e}")))
    }
}

impl ToolResult {
    /// An empty result with `status`: no summary, data or data path, not truncated, no
    /// metadata.
    pub fn new(status: Status) -> Self {
        ToolResult {
            status,
            summary: None,
            data: None,
            data_path: None,
            truncated: false,
            metadata: Vec::new(),
        }
    }

    /// The call succeeded; `data` is the result, handed on verbatim.
    pub fn passed(data: impl Into<String>) -> Self {
        ToolResult {
            data: Some(data.into()),
            ..ToolResult::new(Status::Passed)
        }
    }

    /// The call succeeded; the result is `value` serialized as JSON. Should serialization
    /// fail, the result is an `error` saying so.
    pub fn passed_json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(data) => ToolResult::passed(data),
            Err(e) => ToolResult::error(format!("could not serialize the result: {e}")),
        }
    }

    /// The operation did not succeed (bad input, missing file, refused request). `message`
    /// becomes the result's `data`, and its first line the `summary`.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolResult::with_message(Status::Failed, message.into())
    }

    /// The tool itself broke (a bug, an unexpected state). `message` becomes the result's
    /// `data`, and its first line the `summary`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult::with_message(Status::Error, message.into())
    }

    fn with_message(status: Status, message: String) -> Self {
        let summary = message.lines().next().unwrap_or_default().to_string();
        ToolResult {
            summary: Some(summary),
            data: Some(message),
            ..ToolResult::new(status)
        }
    }

    /// Set the one-line summary for people and traces.
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// Return the result by file instead of inline: `path` names a file relative to the
    /// session workdir that the runtime reads (regular file, at most 10 MiB, no `..`, no
    /// absolute path, no symlink). Because a result carrying `data` is used verbatim and its
    /// `data-path` never opened, this clears `data`.
    pub fn data_path(mut self, path: impl Into<String>) -> Self {
        self.data = None;
        self.data_path = Some(path.into());
        self
    }

    /// Say whether the tool cut its own output.
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }

    /// Append a metadata pair. The runtime reads the first pair of a reserved key; to set a
    /// reserved key use [`state_effect`](Self::state_effect),
    /// [`resource_id`](Self::resource_id) or [`continuation_id`](Self::continuation_id),
    /// which replace an earlier value.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Set `state_effect` (replacing any earlier value).
    pub fn state_effect(self, effect: StateEffect) -> Self {
        self.set_metadata(STATE_EFFECT, effect.as_str())
    }

    /// Set `resource_id` (replacing any earlier value). Scope it by addressing scheme, e.g.
    /// `file:notes.md`.
    pub fn resource_id(self, id: impl Into<String>) -> Self {
        self.set_metadata(RESOURCE_ID, id)
    }

    /// Set `continuation_id` (replacing any earlier value). For drivers holding conversation
    /// state provider-side; an empty id drops the one the runtime holds.
    pub fn continuation_id(self, id: impl Into<String>) -> Self {
        self.set_metadata(CONTINUATION_ID, id)
    }

    /// Set `key` to `value`: remove every earlier pair of `key`, then append this one.
    pub fn set_metadata(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata.retain(|(k, _)| k != key);
        self.metadata.push((key.to_string(), value.into()));
        self
    }

    /// The value the runtime will read for `key`: the first pair's.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        path: String,
        #[serde(default)]
        limit: Option<u32>,
    }

    fn message(result: &ToolResult) -> &str {
        result.data.as_deref().unwrap_or_default()
    }

    #[test]
    fn json_parses_valid_input() {
        let input = ToolInput::new(r#"{"path":"notes.md","limit":3}"#);
        let args: Args = input.json().unwrap();
        assert_eq!(
            args,
            Args {
                path: "notes.md".into(),
                limit: Some(3)
            }
        );
    }

    #[test]
    fn json_missing_or_blank_data_is_failed() {
        for input in [
            ToolInput {
                data: None,
                log_path: None,
            },
            ToolInput::new("  \n"),
        ] {
            let failed = input.json::<Args>().unwrap_err();
            assert_eq!(failed.status, Status::Failed);
            assert!(message(&failed).contains("missing input"), "{failed:?}");
            assert_eq!(failed.summary.as_deref(), Some(message(&failed)));
        }
    }

    #[test]
    fn json_invalid_or_wrong_shape_is_failed_with_reason() {
        let failed = ToolInput::new("{not json").json::<Args>().unwrap_err();
        assert_eq!(failed.status, Status::Failed);
        assert!(
            message(&failed).starts_with("invalid input: "),
            "{failed:?}"
        );

        let failed = ToolInput::new(r#"{"limit":3}"#).json::<Args>().unwrap_err();
        assert!(
            message(&failed).contains("missing field `path`"),
            "{failed:?}"
        );

        let failed = ToolInput::new(r#"{"path":"a","nope":1}"#)
            .json::<Args>()
            .unwrap_err();
        assert!(
            message(&failed).contains("unknown field `nope`"),
            "{failed:?}"
        );
    }

    #[test]
    fn passed_failed_error_constructors() {
        let r = ToolResult::passed("hello");
        assert_eq!(r.status, Status::Passed);
        assert_eq!(r.data.as_deref(), Some("hello"));
        assert_eq!(r.summary, None);
        assert_eq!(r.data_path, None);
        assert!(!r.truncated);
        assert!(r.metadata.is_empty());

        let r = ToolResult::failed("no such file: a.txt\nmore detail");
        assert_eq!(r.status, Status::Failed);
        assert_eq!(r.data.as_deref(), Some("no such file: a.txt\nmore detail"));
        assert_eq!(r.summary.as_deref(), Some("no such file: a.txt"));

        let r = ToolResult::error("bug");
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.data.as_deref(), Some("bug"));

        let r = ToolResult::passed_json(&serde_json::json!({"ok": true}));
        assert_eq!(r.status, Status::Passed);
        assert_eq!(r.data.as_deref(), Some(r#"{"ok":true}"#));
    }

    #[test]
    fn builders_fill_every_field() {
        let r = ToolResult::passed("x")
            .summary("read 1 line of a.txt")
            .truncated(true)
            .metadata("custom", "1")
            .state_effect(StateEffect::Read)
            .resource_id("file:a.txt")
            .continuation_id("conv-1");
        assert_eq!(r.summary.as_deref(), Some("read 1 line of a.txt"));
        assert!(r.truncated);
        assert_eq!(
            r.metadata,
            vec![
                ("custom".to_string(), "1".to_string()),
                (STATE_EFFECT.to_string(), "read".to_string()),
                (RESOURCE_ID.to_string(), "file:a.txt".to_string()),
                (CONTINUATION_ID.to_string(), "conv-1".to_string()),
            ]
        );
    }

    #[test]
    fn reserved_keys_are_replaced_not_duplicated() {
        let r = ToolResult::passed("x")
            .metadata(STATE_EFFECT, "read")
            .state_effect(StateEffect::Mutate)
            .resource_id("file:a")
            .resource_id("file:b");
        assert_eq!(r.metadata_value(STATE_EFFECT), Some("mutate"));
        assert_eq!(r.metadata_value(RESOURCE_ID), Some("file:b"));
        assert_eq!(r.metadata.len(), 2);
    }

    #[test]
    fn metadata_value_is_first_pair() {
        let r = ToolResult::new(Status::Passed)
            .metadata("k", "first")
            .metadata("k", "second");
        assert_eq!(r.metadata_value("k"), Some("first"));
        assert_eq!(r.metadata_value("absent"), None);
    }

    #[test]
    fn data_path_clears_data() {
        let r = ToolResult::passed("inline").data_path(".murmur-scratch/results/big.txt");
        assert_eq!(r.data, None);
        assert_eq!(
            r.data_path.as_deref(),
            Some(".murmur-scratch/results/big.txt")
        );
        assert_eq!(r.status, Status::Passed);
    }

    #[test]
    fn state_effect_wire_values() {
        assert_eq!(StateEffect::Read.as_str(), "read");
        assert_eq!(StateEffect::Mutate.to_string(), "mutate");
        assert_eq!(CONTINUATION_ID, "continuation_id");
        assert_eq!(STATE_EFFECT, "state_effect");
        assert_eq!(RESOURCE_ID, "resource_id");
    }
}
