//! The capsule manifest, `murmur.yaml`: what a capsule uses, what it may reach, how
//! it infers, how it lives.
//!
//! Every key of the manifest is a typed field here; closed sets are enums; defaults are applied at
//! load (`max_turns` 10, `compaction.threshold` 0.9, `seed_budget` 0.25, `task_acceptance`
//! single, `after_task` exit, `conversation` stateless, `input_timeout_secs` 600,
//! `max_task_reopens` 1). An empty value (`artifacts:` with nothing under it) is the same as
//! leaving the key out.
//!
//! Meaning rules, checked once the shape is sound (codes in [`crate::diagnostic::CODES`]):
//!
//! - `name` and `version` (semver) are required, for the capsule and every artifact entry;
//!   artifact names are unique.
//! - `inference.driver.artifact` and every alternate's `driver` name an artifact declared with
//!   `runtime: driver`. Alternate names are unique and never `primary`; alternates are refused
//!   under `transport: process`. `transport: http` needs `model` and `driver`.
//! - `system_prompt` excludes `system_prompt_file` (the same for compaction's pair); a named
//!   prompt file must exist (relative paths are relative to the manifest's directory).
//! - Ranges: `compaction.threshold` in (0, 1], `seed_budget` in [0, 1], `max_turns`,
//!   `max_tokens`, `max_session_tokens`, `context.max_tokens` and `input_timeout_secs` at least 1;
//!   limits above 0.
//! - Capabilities: `network.allow` entries parse as [`NetworkRule`]s; `filesystem.read_only`
//!   paths are kept as written and resolved against the manifest's directory (one that does not
//!   exist warns); `shell.allow` entries are single binary names; `env.allow` names are
//!   non-empty, without `=`, and never `MURMUR_*` (the runtime owns those).
//! - Containment: `containment` is one of [`Containment`]'s words (`E-CAP-012`), absent is
//!   `None`; each `resources` value is a whole number within its [`RESOURCE_RANGES`] entry
//!   (`E-CAP-013`); each `shell.interpreter_runtime` path, resolved against the manifest's
//!   directory, is an existing directory (`E-CAP-014`); `network.unix_sockets` and
//!   `filesystem.workdir_exec` are booleans, `false` when absent. An unknown key anywhere under
//!   the capsule's or an entry's `capabilities` is `E-MAN-033`, an error: a key about what a
//!   capsule may do, or how it is held, is honoured or refused, never dropped.
//! - An artifact entry's `capabilities` narrow the capsule's for that artifact, never widen
//!   them: each `network.allow` entry must be within `capabilities.network.allow` (`E-CAP-009`,
//!   naming the artifact and the entry); `filesystem.path` is relative to the workdir and never
//!   climbs out of it (`E-CAP-010`). What each artifact then holds is [`CapsuleManifest::grants_of`].
//! - A gateway's `api_key` is a credential reference, not interpolated at load: `${NAME}` is
//!   resolved at staging (see [`Gateway::env_reference`]), anything else is a literal.
//! - `lifecycle.queue_depth` (1 to 1,000) bounds the tasks waiting in the door's queue and is
//!   taken only with `task_acceptance: queue` (`E-MAN-018` otherwise). A manifest written for
//!   another Murmur runtime is read in this one's spellings first (`capsule_spellings`).
//! - `control.settings` name settings a controller may change; `control.agent_settings` only
//!   `inference.driver`.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::artifact::{Build, Runtime};
use crate::diagnostic::{Diagnostic, code, serde_error};
use crate::fields::is_variable_name;
use crate::fields::resolve_path;
use crate::fields::{check_http_url, check_inside_dir, check_name, check_version, null_as_default};
use crate::network::NetworkRule;

/// The name of the primary driver choice, reserved among alternates.
pub const PRIMARY_CHOICE: &str = "primary";

/// A capsule's `murmur.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapsuleManifest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    pub description: Option<String>,
    /// `capsule` or absent.
    pub runtime: Option<Runtime>,
    /// A WASM capsule's component file, relative to the manifest's directory.
    pub component: Option<PathBuf>,
    pub build: Option<Build>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub artifacts: Vec<ArtifactEntry>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub capabilities: Capabilities,
    /// An agent capsule's inference; absent for a WASM program capsule.
    pub inference: Option<Inference>,
    /// Absent when the manifest has no `context:` block.
    pub context: Option<Context>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub lifecycle: Lifecycle,
    #[serde(default, deserialize_with = "null_as_default")]
    pub control: Control,
    #[serde(default, deserialize_with = "null_as_default")]
    pub trace: TraceSettings,
    #[serde(default, deserialize_with = "null_as_default")]
    pub observability: Observability,
    /// Who may use the served capsule, and what it takes and gives.
    #[serde(default, deserialize_with = "null_as_default")]
    pub door: crate::door::Door,
    /// The credentials presented to peers, by origin.
    #[serde(default, deserialize_with = "null_as_default")]
    pub peers: Vec<crate::door::Peer>,
}

/// One entry of `artifacts:`: an artifact the capsule uses, pinned by `murmur.lock`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactEntry {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    pub runtime: Runtime,
    /// A local artifact: its directory (holding `murmur.yaml`) or its manifest file, relative
    /// to the capsule manifest's directory.
    pub path: Option<PathBuf>,
    /// A driver's gateway.
    pub gateway: Option<Gateway>,
    /// Handed to the artifact as `MURMUR_ARTIFACT_CONFIG` (JSON).
    pub config: Option<Value>,
    /// For a hook: the host interfaces it may import. Anything not listed is not linked, and a
    /// hook importing it fails to load.
    #[serde(default, deserialize_with = "null_as_default")]
    pub grants: Vec<HookGrant>,
    /// For an `async` hook: its queue.
    pub queue: Option<HookQueue>,
    /// For a hook: the deadline of each of its calls, in seconds (default 30).
    pub deadline_seconds: Option<u64>,
    /// This artifact's narrowing of the capsule's `capabilities`; absent parts take the
    /// runtime's default (see [`CapsuleManifest::grants_of`]).
    #[serde(default, deserialize_with = "null_as_default")]
    pub capabilities: EntryCapabilities,
    /// For a `runtime: mcp` entry: how to reach its MCP server.
    pub server: Option<McpServerSpec>,
}

/// `server:` of a `runtime: mcp` entry: a stdio server (`command`, `args`, `env`) or a
/// streamable HTTP one (`url`, `headers`), exactly one of the two.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerSpec {
    /// The program of a stdio server: a name resolved against `PATH` at staging, or a path.
    pub command: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub args: Vec<String>,
    /// Host variables the stdio server sees, by name, beside its minimal environment.
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<String>,
    /// The URL of a streamable HTTP server; it must be in `capabilities.network.allow`.
    pub url: Option<String>,
    /// Headers the host sends to an HTTP server with every request. Each value is a
    /// credential reference (`${NAME}`, or `Bearer ${NAME}`) or a literal, as written: never
    /// interpolated at load, resolved at staging from the usual credential sources.
    #[serde(default, deserialize_with = "null_as_default")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The seconds the handshake, and each call, may take (default 30).
    pub timeout_seconds: Option<u64>,
}

/// `capabilities:` of an artifact entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryCapabilities {
    /// What of the workdir the artifact's `.` is.
    pub filesystem: Option<EntryFilesystem>,
    /// The hosts it may reach: each within the capsule's `capabilities.network.allow`.
    pub network: Option<EntryNetwork>,
}

/// `capabilities.network` of an artifact entry: only `allow`. The capsule-wide switches
/// (`unix_sockets`) are not narrowed per entry, so an entry naming one is an unknown key
/// (`E-MAN-033`), never a grant silently dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryNetwork {
    #[serde(default, deserialize_with = "null_as_default")]
    pub allow: Vec<NetworkRule>,
}

/// `capabilities.filesystem` of an artifact entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryFilesystem {
    pub scope: FsScope,
    /// A directory beneath the workdir, relative to it; absent means the workdir itself.
    pub path: Option<PathBuf>,
}

closed_set! {
    /// How much of its directory an artifact holds.
    #[derive(Default)]
    pub enum FsScope (code::E_MAN_015, "filesystem scope") {
        /// No directory at all.
        #[default]
        None = "none",
        Read = "read",
        Write = "write",
    }
}

/// What one artifact holds, after its entry narrowed the capsule's grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactGrants {
    pub filesystem: FilesystemAccess,
    pub network: NetworkAccess,
    /// The host variables passed through (`capabilities.env.allow`), by name.
    pub env: Vec<String>,
}

/// The directory an artifact sees as its `.`, and the read-only paths it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilesystemAccess {
    pub scope: FsScope,
    /// Beneath the workdir, relative to it; `None` is the workdir itself.
    pub path: Option<PathBuf>,
    /// The capsule's `filesystem.read_only` paths (resolved), held only with a scope other than
    /// `none`.
    pub read_only: Vec<PathBuf>,
}

/// Where an artifact's outgoing requests may go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkAccess {
    /// A driver's gateway endpoint, always reachable by that driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    pub allow: Vec<NetworkRule>,
}

closed_set! {
    /// A host interface a capsule may grant one of its hooks.
    pub enum HookGrant (code::E_MAN_015, "hook grant") {
        Inference = "runtime/inference",
        Tokens = "runtime/tokens",
        TaskIo = "task-io/read",
        Conversation = "conversation/read",
    }
}

closed_set! {
    /// What an `async` hook's full queue does with the next event.
    #[derive(Default)]
    pub enum Overflow (code::E_MAN_015, "on_overflow") {
        /// The agent loop waits for room.
        #[default]
        Block = "block",
        /// The event is dropped (and the drop traced).
        Drop = "drop",
    }
}

/// The queue of an `async` hook: events wait here, in order, for its one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookQueue {
    /// Events that may wait (default 64).
    #[serde(default = "default_queue_capacity")]
    pub capacity: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    pub on_overflow: Overflow,
    /// How long the session waits for the queue to drain before `session_end` (default 5).
    #[serde(default = "default_drain_seconds")]
    pub drain_seconds: u64,
}

impl Default for HookQueue {
    fn default() -> Self {
        HookQueue {
            capacity: default_queue_capacity(),
            on_overflow: Overflow::default(),
            drain_seconds: default_drain_seconds(),
        }
    }
}

fn default_queue_capacity() -> u32 {
    64
}

fn default_drain_seconds() -> u64 {
    5
}

/// Where a driver's requests go and which credential the host attaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    pub endpoint: String,
    /// As written, never interpolated at load: `${NAME}` (see [`Gateway::env_reference`]) or a
    /// literal. Resolved at staging, so no secret sits in a loaded manifest.
    pub api_key: Option<String>,
}

impl Gateway {
    /// `NAME` when `api_key` is exactly `${NAME}`.
    pub fn env_reference(&self) -> Option<&str> {
        let name = self
            .api_key
            .as_deref()?
            .strip_prefix("${")?
            .strip_suffix('}')?;
        is_variable_name(name).then_some(name)
    }
}

/// What the sandbox grants, and how the native children are held.
///
/// Every key in here, and below, is known or refused: an unknown one is `E-MAN-033`, never a
/// warning that drops it (see the `load` module).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default, deserialize_with = "null_as_default")]
    pub network: NetworkGrant,
    #[serde(default, deserialize_with = "null_as_default")]
    pub filesystem: FilesystemGrant,
    #[serde(default, deserialize_with = "null_as_default")]
    pub shell: ShellGrant,
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: EnvGrant,
    #[serde(default, deserialize_with = "null_as_default")]
    pub limits: Limits,
    /// The containment class the capsule asks for its native children; `None` when the
    /// manifest does not say (the runtime then takes [`Containment::DEFAULT`], or what
    /// `mur run --containment` asks: see [`Containment::resolve`]).
    #[serde(default)]
    pub containment: Option<Containment>,
    /// Resource ceilings of the native children; each `None` takes the runtime's default.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resources: Resources,
}

closed_set! {
    /// `capabilities.containment`: how the kernel holds each native child (shell calls, MCP
    /// stdio servers, agent CLIs). Ordered from weakest to strongest: `advisory < scoped <
    /// sealed`. What each class promises is in `docs/security.md`.
    #[derive(PartialOrd, Ord)]
    pub enum Containment (code::E_CAP_012, "containment class") {
        /// Only what the runtime does without the kernel's help; chosen explicitly, never a default.
        Advisory = "advisory",
        /// The default: Landlock, seccomp, a network namespace behind the egress proxy, no
        /// privileges, a cgroup.
        Scoped = "scoped",
        /// `scoped` plus mount and PID namespaces with a composed root.
        Sealed = "sealed",
    }
}

impl Containment {
    /// The class when neither the manifest nor the command line names one.
    pub const DEFAULT: Containment = Containment::Scoped;

    /// The stronger of `a` and `b`.
    pub fn stronger(a: Containment, b: Containment) -> Containment {
        a.max(b)
    }

    /// The class a child runs under: the stronger of what the manifest `declared` and what
    /// the command line `asked`; the one given when only one is; [`Containment::DEFAULT`]
    /// when neither is. `advisory` is had only by naming it, and never over a stronger ask.
    pub fn resolve(declared: Option<Containment>, asked: Option<Containment>) -> Containment {
        match (declared, asked) {
            (Some(a), Some(b)) => Containment::stronger(a, b),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => Containment::DEFAULT,
        }
    }
}

/// `capabilities.resources`: ceilings on the native children of the capsule. Each key is
/// optional (`None` takes the runtime's default); a value outside its range is `E-CAP-013`
/// at its line. Sizes are whole numbers of bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Live processes (and threads) at once, at least 1.
    #[serde(default, deserialize_with = "de_max_processes")]
    pub max_processes: Option<u32>,
    /// Memory, swap included, at least 1 MiB.
    #[serde(default, deserialize_with = "de_memory_bytes")]
    pub memory_bytes: Option<u64>,
    /// CPU time as a percent of one CPU (`200` is two CPUs), 1 to 102,400.
    #[serde(default, deserialize_with = "de_cpu_percent")]
    pub cpu_percent: Option<u32>,
    /// Open file descriptors per process, 16 to 1,048,576.
    #[serde(default, deserialize_with = "de_open_files")]
    pub open_files: Option<u32>,
    /// The largest file a child may write, at least 1.
    #[serde(default, deserialize_with = "de_file_size_bytes")]
    pub file_size_bytes: Option<u64>,
    /// The bytes the session workdir may hold, at least 1.
    #[serde(default, deserialize_with = "de_workdir_max_bytes")]
    pub workdir_max_bytes: Option<u64>,
}

/// The range of one `capabilities.resources` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceRange {
    pub key: &'static str,
    /// The least value taken.
    pub least: u64,
    /// The most value taken.
    pub most: u64,
    /// What the value counts, in words.
    pub unit: &'static str,
}

macro_rules! resource_ranges {
    ($($konst:ident, $de:ident: $key:literal as $ty:ty, $least:expr, $most:expr, $unit:literal;)*) => {
        $(
            #[doc = concat!("The range of `capabilities.resources.", $key, "`.")]
            pub const $konst: ResourceRange = ResourceRange { key: $key, least: $least, most: $most, unit: $unit };

            fn $de<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<$ty>, D::Error> {
                // Every range lies within its type, so the conversion never fails.
                resource(deserializer, $konst).map(|n| n.and_then(|n| <$ty>::try_from(n).ok()))
            }
        )*

        /// Every `capabilities.resources` key's range, in the order of [`Resources`]' fields.
        pub const RESOURCE_RANGES: &[ResourceRange] = &[$($konst),*];
    };
}

resource_ranges! {
    MAX_PROCESSES, de_max_processes: "max_processes" as u32, 1, u32::MAX as u64, "processes";
    MEMORY_BYTES, de_memory_bytes: "memory_bytes" as u64, 1 << 20, u64::MAX, "bytes";
    CPU_PERCENT, de_cpu_percent: "cpu_percent" as u32, 1, 100 * 1024, "percent of one CPU";
    OPEN_FILES, de_open_files: "open_files" as u32, 16, 1 << 20, "open files";
    FILE_SIZE_BYTES, de_file_size_bytes: "file_size_bytes" as u64, 1, u64::MAX, "bytes";
    WORKDIR_MAX_BYTES, de_workdir_max_bytes: "workdir_max_bytes" as u64, 1, u64::MAX, "bytes";
}

/// A `capabilities.resources` value: absent or empty is `None`; a whole number within `range`
/// is kept; any other number (negative, fractional, out of range) is `E-CAP-013`.
fn resource<'de, D: Deserializer<'de>>(
    deserializer: D,
    range: ResourceRange,
) -> Result<Option<u64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let ResourceRange {
        key,
        least,
        most,
        unit,
    } = range;
    match number.as_u64() {
        Some(n) if (least..=most).contains(&n) => Ok(Some(n)),
        _ => {
            // A float in plain digits, as the user wrote it (`2.5`, not `2.5e0`).
            let number = number
                .as_f64()
                .filter(|_| number.is_f64())
                .map_or_else(|| number.to_string(), |f| f.to_string());
            let allowed = if most == u64::MAX {
                format!("a whole number of at least {least}")
            } else {
                format!("a whole number from {least} to {most}")
            };
            Err(serde_error(
                &Diagnostic::new(
                    code::E_CAP_013,
                    format!(
                        "`capabilities.resources.{key}` is {number}; it must be {allowed} ({unit})"
                    ),
                )
                .hint(format!(
                    "write {allowed} for `{key}`, or remove it to take the runtime's default"
                )),
            ))
        }
    }
}

/// `capabilities.network`: hosts outgoing requests may reach. Empty denies all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkGrant {
    #[serde(default, deserialize_with = "null_as_default")]
    pub allow: Vec<NetworkRule>,
    /// Whether a native child may open Unix sockets (`socket(AF_UNIX)`); default `false`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub unix_sockets: bool,
}

/// `capabilities.filesystem`: paths a component may read beyond the session workdir.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesystemGrant {
    #[serde(default, deserialize_with = "null_as_default")]
    pub read_only: Vec<ReadOnlyPath>,
    /// Whether a native child may execute files in the workdir; default `false`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub workdir_exec: bool,
}

impl FilesystemGrant {
    /// Every `read_only` path, resolved against the manifest's directory.
    pub fn read_only_resolved(&self) -> Vec<PathBuf> {
        self.read_only.iter().map(|p| p.resolved.clone()).collect()
    }
}

/// A `read_only` path as written and as resolved against the manifest's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyPath {
    pub raw: PathBuf,
    /// `raw` when absolute, else the manifest's directory joined with `raw`.
    pub resolved: PathBuf,
}

impl Serialize for ReadOnlyPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ReadOnlyPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ReadOnlyPath, D::Error> {
        let raw = PathBuf::deserialize(deserializer)?;
        Ok(ReadOnlyPath {
            resolved: raw.clone(),
            raw,
        })
    }
}

/// `capabilities.shell`: binaries the capsule may run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellGrant {
    #[serde(default, deserialize_with = "null_as_default")]
    pub allow: Vec<String>,
    /// Directories an interpreter among `allow` needs read-only (its standard library, its
    /// packages), resolved against the manifest's directory; each must exist as a directory
    /// when the manifest loads (`E-CAP-014`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub interpreter_runtime: Vec<ReadOnlyPath>,
}

impl ShellGrant {
    /// Every `interpreter_runtime` path, resolved against the manifest's directory.
    pub fn interpreter_runtime_resolved(&self) -> Vec<PathBuf> {
        self.interpreter_runtime
            .iter()
            .map(|p| p.resolved.clone())
            .collect()
    }
}

/// `capabilities.env`: environment variables passed into components.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvGrant {
    #[serde(default, deserialize_with = "null_as_default")]
    pub allow: Vec<String>,
}

/// `capabilities.limits`: per-call limits; `None` takes the runtime's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(default, deserialize_with = "positive_limit")]
    pub memory_bytes: Option<u64>,
    #[serde(default, deserialize_with = "positive_limit")]
    pub deadline_seconds: Option<u64>,
}

closed_set! {
    /// How inference is done: through a driver over HTTP, or by a harness process.
    #[derive(Default)]
    pub enum Transport (code::E_MAN_015, "transport") {
        #[default]
        Http = "http",
        Process = "process",
    }
}

/// `inference`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inference {
    #[serde(default, deserialize_with = "null_as_default")]
    pub transport: Transport,
    /// Under `transport: process`: the agent CLI that is the model (`claude`, `codex`, or a
    /// path to one). Its base name picks the dialect: `codex` speaks Codex's event stream,
    /// anything else Claude Code's.
    pub command: Option<String>,
    /// Under `transport: process`: the most seconds one task's CLI run may take (default
    /// 1800); past it the CLI is stopped and the task fails.
    pub timeout_seconds: Option<u64>,
    pub model: Option<String>,
    /// The primary choice's driver.
    pub driver: Option<DriverRef>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub alternates: Vec<Alternate>,
    pub system_prompt: Option<String>,
    /// Relative to the manifest's directory.
    pub system_prompt_file: Option<PathBuf>,
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// The per-call output cap; `None` takes the model's.
    pub max_tokens: Option<u32>,
    /// The spend ceiling over every gateway of a session.
    pub max_session_tokens: Option<u64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub compaction: Compaction,
}

fn default_max_turns() -> u32 {
    10
}

/// `inference.driver`: the primary choice's driver artifact and the config every declared
/// driver receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverRef {
    pub artifact: String,
    pub config: Option<Value>,
}

/// One `inference.alternates` entry: a named (driver, model) choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alternate {
    pub name: String,
    pub model: String,
    /// The driver artifact's name.
    pub driver: String,
}

/// `inference.compaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The share of the context window at which compaction runs, in (0, 1].
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    /// Relative to the manifest's directory.
    pub system_prompt_file: Option<PathBuf>,
}

fn default_threshold() -> f64 {
    0.9
}

impl Default for Compaction {
    fn default() -> Compaction {
        Compaction {
            threshold: default_threshold(),
            model: None,
            system_prompt: None,
            system_prompt_file: None,
        }
    }
}

/// `context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// The context window; `None` takes the model's.
    pub max_tokens: Option<u64>,
    /// The share of the window a `seed-context` may fill, in [0, 1].
    #[serde(default = "default_seed_budget")]
    pub seed_budget: f64,
}

fn default_seed_budget() -> f64 {
    0.25
}

closed_set! {
    /// `lifecycle.task_acceptance`.
    #[derive(Default)]
    pub enum TaskAcceptance (code::E_MAN_015, "task_acceptance") {
        None = "none",
        #[default]
        Single = "single",
        Queue = "queue",
    }
}

closed_set! {
    /// `lifecycle.after_task`.
    #[derive(Default)]
    pub enum AfterTask (code::E_MAN_015, "after_task") {
        #[default]
        Exit = "exit",
        Sleep = "sleep",
    }
}

closed_set! {
    /// `lifecycle.conversation`.
    #[derive(Default)]
    pub enum Conversation (code::E_MAN_015, "conversation") {
        #[default]
        Stateless = "stateless",
        Threaded = "threaded",
    }
}

/// `lifecycle`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    #[serde(default, deserialize_with = "null_as_default")]
    pub task_acceptance: TaskAcceptance,
    #[serde(default, deserialize_with = "null_as_default")]
    pub after_task: AfterTask,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conversation: Conversation,
    #[serde(default = "default_input_timeout")]
    pub input_timeout_secs: u64,
    /// How often an `on-task-end` hook may reopen one task.
    #[serde(default = "default_max_task_reopens")]
    pub max_task_reopens: u32,
    /// Under `task_acceptance: queue`: the most tasks that may wait for the session (the
    /// running one not counted); the door refuses a new one past it. `None`: the door's own
    /// bound alone.
    #[serde(default)]
    pub queue_depth: Option<u32>,
}

/// The largest `lifecycle.queue_depth`: the door holds at most this many tasks that have not
/// ended.
pub const MAX_QUEUE_DEPTH: u32 = 1_000;

fn default_input_timeout() -> u64 {
    600
}

fn default_max_task_reopens() -> u32 {
    1
}

impl Default for Lifecycle {
    fn default() -> Lifecycle {
        Lifecycle {
            task_acceptance: TaskAcceptance::default(),
            after_task: AfterTask::default(),
            conversation: Conversation::default(),
            input_timeout_secs: default_input_timeout(),
            max_task_reopens: default_max_task_reopens(),
            queue_depth: None,
        }
    }
}

closed_set! {
    /// A setting a controller (or, for `inference.driver`, the agent) may change.
    pub enum Setting (code::E_CTL_001, "control setting") {
        InferenceDriver = "inference.driver",
        InferenceMaxTokens = "inference.max_tokens",
    }
}

/// `control`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// What a controller may change.
    #[serde(default, deserialize_with = "null_as_default")]
    pub settings: Vec<Setting>,
    /// Credentials injectable at run time, by name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub secrets: Vec<String>,
    /// Settings the agent itself may change (`inference.driver` gives it `switch-driver`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub agent_settings: Vec<Setting>,
}

/// `trace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSettings {
    #[serde(default, deserialize_with = "null_as_default")]
    pub include_tool_output: bool,
}

/// `observability`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observability {
    /// An OTLP/HTTP endpoint; spans are exported when set.
    pub otel_endpoint: Option<String>,
}

/// A limit: a whole number above 0 (`E-CAP-002` otherwise).
fn positive_limit<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    match number.as_u64() {
        Some(n) if n > 0 => Ok(Some(n)),
        _ if number.is_f64() => Err(serde_error(
            &Diagnostic::new(code::E_MAN_003, format!("limit `{number}` is not a whole number"))
                .hint("write a whole number: bytes for `memory_bytes`, seconds for `deadline_seconds`"),
        )),
        _ => Err(serde_error(
            &Diagnostic::new(code::E_CAP_002, format!("a limit of `{number}` allows nothing"))
                .hint("set a number above 0 (bytes for `memory_bytes`, seconds for `deadline_seconds`), or remove the limit to take the default"),
        )),
    }
}

impl CapsuleManifest {
    /// Every credential the capsule names, each once, sorted by name: a driver's
    /// `gateway.api_key`, an MCP server header's, a door principal's and a peer's
    /// `${NAME}`, and each `control.secrets` name. `true` beside a name `control.secrets`
    /// lists: a controller may inject it at run time, so it need not be set beforehand.
    pub fn credential_names(&self) -> Vec<(String, bool)> {
        let mut names: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for entry in &self.artifacts {
            if let Some(name) = entry.gateway.as_ref().and_then(Gateway::env_reference) {
                names.insert(name);
            }
            if let Some(server) = &entry.server {
                names.extend(
                    server
                        .headers
                        .values()
                        .filter_map(|v| credential_reference(v)),
                );
            }
        }
        let presented = self
            .door
            .auth
            .iter()
            .filter_map(crate::door::Principal::presented)
            .chain(self.peers.iter().filter_map(crate::door::Peer::presented));
        let presented: Vec<_> = presented.collect();
        names.extend(presented.iter().map(|p| p.credential()));
        names.extend(self.control.secrets.iter().map(String::as_str));
        names
            .into_iter()
            .map(|name| {
                (
                    name.to_string(),
                    self.control.secrets.iter().any(|s| s == name),
                )
            })
            .collect()
    }

    /// What `entry` holds. Without a word in the entry: a tool gets the workdir read-write,
    /// the `read_only` paths and the capsule's whole network allowlist; an MCP server the
    /// workdir read-write and the `read_only` paths, no network; a hook gets no
    /// directory and no network; a driver no directory and its gateway only. The entry's
    /// `capabilities.filesystem` replaces the directory part and `capabilities.network` the
    /// allowlist part (for a driver, hosts beside its gateway); both are checked at load to be
    /// within the capsule's. Every artifact gets the `env.allow` names.
    pub fn grants_of(&self, entry: &ArtifactEntry) -> ArtifactGrants {
        let tool = entry.runtime == Runtime::Tool;
        // An MCP server runs in the workdir (its cwd), with no network unless its entry says.
        let mcp = entry.runtime == Runtime::Mcp;
        let (scope, path) = match &entry.capabilities.filesystem {
            Some(fs) => (fs.scope, fs.path.clone()),
            None if tool || mcp => (FsScope::Write, None),
            None => (FsScope::None, None),
        };
        let read_only = if scope == FsScope::None {
            Vec::new()
        } else {
            self.capabilities.filesystem.read_only_resolved()
        };
        let allow = match &entry.capabilities.network {
            Some(network) => network.allow.clone(),
            None if tool => self.capabilities.network.allow.clone(),
            None => Vec::new(),
        };
        let gateway = (entry.runtime == Runtime::Driver)
            .then(|| entry.gateway.as_ref().map(|g| g.endpoint.clone()))
            .flatten();
        ArtifactGrants {
            filesystem: FilesystemAccess {
                scope,
                path,
                read_only,
            },
            network: NetworkAccess { gateway, allow },
            env: self.capabilities.env.allow.clone(),
        }
    }

    /// The artifact entry named `name`.
    pub fn artifact(&self, name: &str) -> Option<&ArtifactEntry> {
        self.artifacts.iter().find(|a| a.name == name)
    }

    /// Resolves relative paths against `dir`, the manifest's directory.
    pub(crate) fn resolve(&mut self, dir: &Path) {
        for path in &mut self.capabilities.filesystem.read_only {
            path.resolved = resolve_path(dir, &path.raw);
        }
        for path in &mut self.capabilities.shell.interpreter_runtime {
            path.resolved = resolve_path(dir, &path.raw);
        }
    }

    /// Every meaning problem; `dir` is the manifest's directory.
    pub(crate) fn validate(&self, dir: &Path) -> Vec<Diagnostic> {
        let mut found = Vec::new();
        found.extend(check_name(&self.name, "", "the manifest"));
        found.extend(check_version(&self.version, "", "the manifest"));
        if let Some(build) = &self.build {
            found.extend(build.validate("build"));
        }
        if let Some(component) = &self.component {
            found.extend(check_inside_dir(component, "component"));
        }
        self.validate_artifacts(&mut found);
        self.capabilities.validate(&mut found);
        if let Some(inference) = &self.inference {
            self.validate_inference(inference, dir, &mut found);
        }
        if let Some(context) = &self.context {
            if context.max_tokens == Some(0) {
                found.push(out_of_range(
                    "context.max_tokens",
                    0,
                    "at least 1",
                    "the context window in tokens, such as 200000",
                ));
            }
            if !(0.0..=1.0).contains(&context.seed_budget) {
                found.push(out_of_range(
                    "context.seed_budget",
                    context.seed_budget,
                    "in [0, 1]",
                    "a share of the window, such as 0.25",
                ));
            }
        }
        if self.lifecycle.input_timeout_secs == 0 {
            found.push(out_of_range(
                "lifecycle.input_timeout_secs",
                0,
                "at least 1",
                "seconds to wait for input, such as 600",
            ));
        }
        self.validate_queue_depth(&mut found);
        self.control.validate(&mut found);
        self.door.validate(&mut found);
        crate::door::validate_peers(&self.peers, &self.capabilities.network.allow, &mut found);
        self.validate_peer_tool_names(&mut found);
        if let Some(endpoint) = &self.observability.otel_endpoint {
            found.extend(check_http_url(endpoint, "observability.otel_endpoint"));
        }
        found
    }

    /// `lifecycle.queue_depth`: 1 to [`MAX_QUEUE_DEPTH`] (`E-MAN-015`), and only beside
    /// `task_acceptance: queue` (`E-MAN-018`: no other acceptance has a queue).
    fn validate_queue_depth(&self, found: &mut Vec<Diagnostic>) {
        let Some(depth) = self.lifecycle.queue_depth else {
            return;
        };
        if !(1..=MAX_QUEUE_DEPTH).contains(&depth) {
            found.push(out_of_range(
                "lifecycle.queue_depth",
                depth,
                "from 1 to 1000",
                "the most tasks that may wait while one runs, such as 8",
            ));
        }
        if self.lifecycle.task_acceptance != TaskAcceptance::Queue {
            found.push(
                Diagnostic::new(
                    code::E_MAN_018,
                    format!(
                        "`lifecycle.queue_depth` bounds a queue, and `lifecycle.task_acceptance: {}` has none",
                        self.lifecycle.task_acceptance
                    ),
                )
                .hint("set `task_acceptance: queue`, or remove `queue_depth`")
                .at_path("lifecycle.queue_depth"),
            );
        }
    }

    /// `E-A2A-026` when a named peer's tool `ask-<name>` is the name of a declared tool or
    /// skill: the model would be offered two tools of one name.
    fn validate_peer_tool_names(&self, found: &mut Vec<Diagnostic>) {
        for (i, tool) in crate::door::peer_tool_names(&self.peers) {
            let Some(entry) = self.artifacts.iter().find(|entry| {
                matches!(entry.runtime, Runtime::Tool | Runtime::Skill) && entry.name == tool
            }) else {
                continue;
            };
            found.push(
                Diagnostic::new(
                    code::E_A2A_026,
                    format!(
                        "peer `{}` is offered as the tool `{tool}`, which is the name of the {} `{}` the capsule declares",
                        self.peers[i].name.as_deref().unwrap_or_default(),
                        entry.runtime.as_str(),
                        entry.name
                    ),
                )
                .hint("rename the peer (its tool is `ask-<name>`) or the artifact: the model tells tools apart by name")
                .at_path(format!("peers[{i}].name")),
            );
        }
    }

    fn validate_artifacts(&self, found: &mut Vec<Diagnostic>) {
        // Name → index of the first entry with it, so finding a repeated name costs one lookup.
        let mut first_of: HashMap<&str, usize> = HashMap::new();
        for (i, entry) in self.artifacts.iter().enumerate() {
            let at = format!("artifacts[{i}]");
            let what = if entry.name.trim().is_empty() {
                format!("artifact entry {}", i + 1)
            } else {
                format!("artifact `{}`", entry.name)
            };
            found.extend(check_name(&entry.name, &at, &what));
            // An MCP server says its own version (the lock keeps it); an entry may name one.
            if !(entry.runtime == Runtime::Mcp && entry.version.is_empty()) {
                found.extend(check_version(&entry.version, &at, &what));
            }
            let repeated = if entry.name.is_empty() {
                None
            } else {
                match first_of.entry(entry.name.as_str()) {
                    Entry::Occupied(first) => Some(*first.get()),
                    Entry::Vacant(vacant) => {
                        vacant.insert(i);
                        None
                    }
                }
            };
            if let Some(first) = repeated {
                found.push(
                    Diagnostic::new(
                        code::E_MAN_014,
                        format!(
                            "artifact `{}` is declared twice (entries {} and {})",
                            entry.name,
                            first + 1,
                            i + 1
                        ),
                    )
                    .hint("remove one entry, or rename one of the artifacts")
                    .at_path(format!("{at}.name")),
                );
            }
            if entry.runtime != Runtime::Hook {
                for (field, present) in [
                    ("grants", !entry.grants.is_empty()),
                    ("queue", entry.queue.is_some()),
                    ("deadline_seconds", entry.deadline_seconds.is_some()),
                ] {
                    if present {
                        found.push(
                            Diagnostic::new(
                                code::W_MAN_026,
                                format!("{what} has `{field}`, which only a `runtime: hook` uses"),
                            )
                            .hint(format!("remove `{field}:`, or check `runtime:`"))
                            .at_path(format!("{at}.{field}")),
                        );
                    }
                }
            }
            self.validate_entry_capabilities(entry, &at, &what, found);
            if entry.deadline_seconds == Some(0) {
                found.push(out_of_range(
                    &format!("{at}.deadline_seconds"),
                    0,
                    "at least 1",
                    "the seconds each call may take, such as 30",
                ));
            }
            if let Some(queue) = &entry.queue
                && queue.capacity == 0
            {
                found.push(out_of_range(
                    &format!("{at}.queue.capacity"),
                    0,
                    "at least 1",
                    "the number of events that may wait, such as 64",
                ));
            }
            self.validate_mcp_server(entry, &at, &what, found);
            if let Some(gateway) = &entry.gateway {
                if entry.runtime != Runtime::Driver {
                    found.push(
                        Diagnostic::new(
                            code::W_MAN_026,
                            format!("{what} has a `gateway`, which only a `runtime: driver` uses"),
                        )
                        .hint("remove `gateway:`, or check `runtime:`")
                        .at_path(format!("{at}.gateway")),
                    );
                }
                found.extend(check_http_url(
                    &gateway.endpoint,
                    &format!("{at}.gateway.endpoint"),
                ));
                if let Some(key) = &gateway.api_key
                    && key.contains("${")
                    && gateway.env_reference().is_none()
                {
                    found.push(
                        Diagnostic::new(
                            code::E_MAN_022,
                            format!("{what} has a gateway `api_key` that mixes `${{...}}` with other text"),
                        )
                        .hint("write the whole value as `${NAME}`: the runtime resolves it at launch")
                        .at_path(format!("{at}.gateway.api_key")),
                    );
                }
            }
        }
    }

    /// `server:` of an entry: only on `runtime: mcp` (`W-MAN-026` elsewhere), where it names
    /// exactly one way to the server and no `path` (`E-MAN-028`); a URL allowed by the
    /// capsule (`E-MAN-024`, `E-CAP-011`); variable names as `env.allow` takes them
    /// (`E-CAP-005`); header values that are a credential reference or a literal (`E-MAN-022`);
    /// a time limit of at least a second.
    fn validate_mcp_server(
        &self,
        entry: &ArtifactEntry,
        at: &str,
        what: &str,
        found: &mut Vec<Diagnostic>,
    ) {
        let Some(server) = &entry.server else {
            if entry.runtime == Runtime::Mcp {
                found.push(
                    Diagnostic::new(code::E_MAN_028, format!("{what} is `runtime: mcp` but has no `server:`"))
                        .hint("add `server: { command: notes-server }` for a stdio server, or `server: { url: \"https://…/mcp\" }`")
                        .at_path(format!("{at}.runtime")),
                );
            }
            return;
        };
        let at = format!("{at}.server");
        if entry.runtime != Runtime::Mcp {
            found.push(
                Diagnostic::new(
                    code::W_MAN_026,
                    format!("{what} has a `server`, which only a `runtime: mcp` uses"),
                )
                .hint("remove `server:`, or check `runtime:`")
                .at_path(at),
            );
            return;
        }
        let how = match (&server.command, &server.url) {
            (Some(_), Some(_)) => Some("names both `server.command` and `server.url`"),
            (None, None) => Some("names neither `server.command` nor `server.url`"),
            _ => None,
        };
        if let Some(how) = how {
            found.push(
                Diagnostic::new(code::E_MAN_028, format!("{what} {how}"))
                    .hint("a stdio server has `command:` (and `args:`, `env:`); an HTTP server has `url:` (and `headers:`)")
                    .at_path(at.clone()),
            );
        }
        if entry.path.is_some() {
            found.push(
                Diagnostic::new(
                    code::E_MAN_028,
                    format!("{what} has a `path`, but an MCP server is no artifact directory"),
                )
                .hint("remove `path:`; `server.command` names the program to run")
                .at_path(format!("{}.path", at.trim_end_matches(".server"))),
            );
        }
        if let Some(command) = &server.command
            && (command.trim().is_empty() || command.contains('\0'))
        {
            found.push(
                Diagnostic::new(code::E_MAN_028, format!("{what} has a `server.command` that names no program"))
                    .hint("name the program, such as `notes-server` (looked up in PATH) or `/opt/notes/bin/server`")
                    .at_path(format!("{at}.command")),
            );
        }
        for (field, present) in [
            ("args", !server.args.is_empty()),
            ("env", !server.env.is_empty()),
        ] {
            if present && server.command.is_none() {
                found.push(
                    Diagnostic::new(code::W_MAN_026, format!("{what} has `server.{field}`, which only a stdio server (`server.command`) uses"))
                        .hint(format!("remove `server.{field}:`, or give the entry a `server.command`"))
                        .at_path(format!("{at}.{field}")),
                );
            }
        }
        if !server.headers.is_empty() && server.url.is_none() {
            found.push(
                Diagnostic::new(
                    code::W_MAN_026,
                    format!(
                        "{what} has `server.headers`, which only an HTTP server (`server.url`) uses"
                    ),
                )
                .hint("remove `server.headers:`, or give the entry a `server.url`")
                .at_path(format!("{at}.headers")),
            );
        }
        if let Some(url) = &server.url {
            match check_http_url(url, &format!("{at}.url")) {
                Some(bad) => found.push(bad),
                None => {
                    let allowed = url::Url::parse(url).ok().is_some_and(|parsed| {
                        let host = parsed.host_str().unwrap_or_default();
                        let port = parsed.port_or_known_default().unwrap_or(0);
                        self.capabilities
                            .network
                            .allow
                            .iter()
                            .any(|rule| rule.permits(parsed.scheme(), host, port))
                    });
                    if !allowed {
                        found.push(
                            Diagnostic::new(
                                code::E_CAP_011,
                                format!("{what} is reached at `{url}`, which `capabilities.network.allow` does not allow"),
                            )
                            .hint("add the server's host (and port) to `capabilities.network.allow`")
                            .at_path(format!("{at}.url")),
                        );
                    }
                }
            }
        }
        for (i, name) in server.env.iter().enumerate() {
            if let Some(problem) = env_name_problem(name) {
                found.push(
                    Diagnostic::new(
                        code::E_CAP_005,
                        format!("{what}'s `server.env` name `{name}` {problem}"),
                    )
                    .hint("name a host variable to pass to the server, such as `NOTES_HOME`")
                    .at_path(format!("{at}.env[{i}]")),
                );
            }
        }
        for (name, value) in &server.headers {
            if credential_reference(value).is_none() && value.contains("${") {
                found.push(
                    Diagnostic::new(code::E_MAN_022, format!("{what}'s header `{name}` mixes `${{...}}` with text other than a `Bearer ` prefix"))
                        .hint("write the value as `${NAME}` or `Bearer ${NAME}`: the runtime resolves it at launch")
                        .at_path(format!("{at}.headers.{name}")),
                );
            }
        }
        if server.timeout_seconds == Some(0) {
            found.push(out_of_range(
                &format!("{at}.timeout_seconds"),
                0,
                "at least 1",
                "the seconds the server's handshake and each call may take, such as 30",
            ));
        }
    }

    /// `E-CAP-009` / `E-CAP-010`: an entry's `capabilities` wider than the capsule's.
    fn validate_entry_capabilities(
        &self,
        entry: &ArtifactEntry,
        at: &str,
        what: &str,
        found: &mut Vec<Diagnostic>,
    ) {
        let capabilities = &entry.capabilities;
        if entry.runtime == Runtime::Skill
            && (capabilities.filesystem.is_some() || capabilities.network.is_some())
        {
            found.push(
                Diagnostic::new(
                    code::W_MAN_026,
                    format!("{what} has `capabilities`, which a `runtime: skill` never uses"),
                )
                .hint("remove `capabilities:`; a skill runs no code")
                .at_path(format!("{at}.capabilities")),
            );
        }
        if let Some(network) = &capabilities.network {
            let capsule = &self.capabilities.network.allow;
            for (i, rule) in network.allow.iter().enumerate() {
                if !rule.within(capsule) {
                    found.push(
                        Diagnostic::new(
                            code::E_CAP_009,
                            format!(
                                "{what} is granted network `{rule}`, which the capsule's `capabilities.network.allow` does not allow"
                            ),
                        )
                        .hint(format!(
                            "an artifact entry may only narrow the capsule's grants: add `{rule}` to `capabilities.network.allow`, or remove it from the entry"
                        ))
                        .at_path(format!("{at}.capabilities.network.allow[{i}]")),
                    );
                }
            }
        }
        if let Some(path) = capabilities
            .filesystem
            .as_ref()
            .and_then(|fs| fs.path.as_deref())
        {
            let problem = if path.as_os_str().is_empty() {
                Some("is empty")
            } else if path.has_root() {
                Some("is absolute")
            } else if path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                Some("climbs with `..`")
            } else {
                None
            };
            if let Some(problem) = problem {
                found.push(
                    Diagnostic::new(
                        code::E_CAP_010,
                        format!(
                            "{what} is granted filesystem path `{}`, which {problem}: an artifact may only be given a directory beneath the workdir",
                            path.display()
                        ),
                    )
                    .hint("write a path relative to the workdir, such as `logs`, or leave `path:` out for the workdir itself")
                    .at_path(format!("{at}.capabilities.filesystem.path")),
                );
            }
        }
    }

    /// Why `name` is not a declared driver, if it is not.
    /// Why `name` is not a driver's, looked up in `by_name` (see [`CapsuleManifest::by_name`]).
    fn not_a_driver(by_name: &HashMap<&str, &ArtifactEntry>, name: &str) -> Option<String> {
        match by_name.get(name) {
            Some(entry) if entry.runtime == Runtime::Driver => None,
            Some(entry) => Some(format!(
                "which is declared with `runtime: {}`, not `runtime: driver`",
                entry.runtime
            )),
            None => Some("which is not declared in `artifacts`".to_string()),
        }
    }

    /// Each artifact name → its first entry, as [`CapsuleManifest::artifact`] finds it.
    fn by_name(&self) -> HashMap<&str, &ArtifactEntry> {
        let mut by_name = HashMap::new();
        for entry in &self.artifacts {
            by_name.entry(entry.name.as_str()).or_insert(entry);
        }
        by_name
    }

    fn driver_hint(&self, name: &str) -> String {
        let drivers: Vec<&str> = self
            .artifacts
            .iter()
            .filter(|a| a.runtime == Runtime::Driver)
            .map(|a| a.name.as_str())
            .collect();
        let mut hint = format!("declare `{name}` under `artifacts:` with `runtime: driver`");
        if !drivers.is_empty() {
            hint.push_str(&format!(", or use one of: {}", drivers.join(", ")));
        }
        hint
    }

    /// Under `transport: http`, the fields only `transport: process` reads are `W-MAN-029`.
    fn validate_http_only_fields(&self, inference: &Inference, found: &mut Vec<Diagnostic>) {
        for (field, set) in [
            ("command", inference.command.is_some()),
            ("timeout_seconds", inference.timeout_seconds.is_some()),
        ] {
            if set {
                found.push(
                    Diagnostic::new(
                        code::W_MAN_029,
                        format!(
                            "`inference.{field}` is set, but only `transport: process` uses it"
                        ),
                    )
                    .hint(format!("remove `{field}:`, or set `transport: process`"))
                    .at_path(format!("inference.{field}")),
                );
            }
        }
    }

    /// Under `transport: process`: a `command` is required (`E-MAN-021`), a positive
    /// `timeout_seconds` (`E-CAP-002`), and each field the CLI's own loop makes inert is
    /// named (`W-MAN-029`).
    fn validate_process_fields(inference: &Inference, found: &mut Vec<Diagnostic>) {
        match inference.command.as_deref() {
            None => found.push(
                Diagnostic::new(code::E_MAN_021, "`inference` has no `command`, which `transport: process` needs")
                    .hint("add `command: claude` (Claude Code) or `command: codex` (Codex), or the path to either")
                    .at_path("inference.command"),
            ),
            Some(command) if command.trim().is_empty() || command.contains('\0') => found.push(
                Diagnostic::new(code::E_MAN_021, "`inference.command` is empty")
                    .hint("name the CLI: `claude`, `codex`, or a path to one")
                    .at_path("inference.command"),
            ),
            Some(_) => {}
        }
        if inference.timeout_seconds == Some(0) {
            found.push(
                Diagnostic::new(code::E_CAP_002, "`inference.timeout_seconds` is 0")
                    .hint("set the most seconds one task's CLI run may take, or remove it to take 1800")
                    .at_path("inference.timeout_seconds"),
            );
        }
        let inert = [
            (
                "driver",
                inference.driver.is_some(),
                "the CLI calls its provider itself; no driver artifact is staged",
            ),
            (
                "max_tokens",
                inference.max_tokens.is_some(),
                "the CLI sets its own output cap",
            ),
            (
                "max_session_tokens",
                inference.max_session_tokens.is_some(),
                "the CLI's calls are not admitted against a ceiling; their reported usage is traced",
            ),
            (
                "compaction",
                inference.compaction != Compaction::default(),
                "compaction does not run: the CLI manages its own context",
            ),
        ];
        for (field, set, why) in inert {
            if set {
                found.push(
                    Diagnostic::new(
                        code::W_MAN_029,
                        format!(
                            "`inference.{field}` has no effect under `transport: process`: {why}"
                        ),
                    )
                    .hint(format!(
                        "remove `{field}:`, or use `transport: http` with a driver"
                    ))
                    .at_path(format!("inference.{field}")),
                );
            }
        }
    }

    fn validate_inference(&self, inference: &Inference, dir: &Path, found: &mut Vec<Diagnostic>) {
        let by_name = self.by_name();
        if inference.transport == Transport::Http {
            if inference
                .model
                .as_deref()
                .is_none_or(|m| m.trim().is_empty())
            {
                found.push(
                    Diagnostic::new(code::E_MAN_021, "`inference` has no `model`, which `transport: http` needs")
                        .hint("add `model:` with the provider's model name, such as `model: claude-sonnet-4-5`")
                        .at_path("inference.model"),
                );
            }
            if inference.driver.is_none() {
                found.push(
                    Diagnostic::new(code::E_MAN_021, "`inference` has no `driver`, which `transport: http` needs")
                        .hint("add `driver: { artifact: NAME }` naming an artifact declared with `runtime: driver`")
                        .at_path("inference.driver"),
                );
            }
        }
        if let Some(driver) = &inference.driver
            && let Some(why) = Self::not_a_driver(&by_name, &driver.artifact)
        {
            found.push(
                Diagnostic::new(
                    code::E_MAN_008,
                    format!(
                        "`inference.driver.artifact` names `{}`, {why}",
                        driver.artifact
                    ),
                )
                .hint(self.driver_hint(&driver.artifact))
                .at_path("inference.driver.artifact"),
            );
        }
        match inference.transport {
            Transport::Http => self.validate_http_only_fields(inference, found),
            Transport::Process => Self::validate_process_fields(inference, found),
        }
        if inference.transport == Transport::Process && !inference.alternates.is_empty() {
            found.push(
                Diagnostic::new(
                    code::E_MAN_011,
                    "`inference.alternates` is set under `transport: process`, where the harness owns the conversation and its model",
                )
                .hint("remove `alternates:`, or use `transport: http`")
                .at_path("inference.alternates"),
            );
        }
        let mut names: HashSet<&str> = HashSet::new();
        for (i, alternate) in inference.alternates.iter().enumerate() {
            let at = format!("inference.alternates[{i}]");
            let repeated = !names.insert(alternate.name.as_str());
            if alternate.name == PRIMARY_CHOICE || repeated {
                let message = if alternate.name == PRIMARY_CHOICE {
                    "an alternate is named `primary`, the name of the primary choice".to_string()
                } else {
                    format!("two alternates are named `{}`", alternate.name)
                };
                found.push(
                    Diagnostic::new(code::E_MAN_010, message)
                        .hint("give each alternate its own name, other than `primary`")
                        .at_path(format!("{at}.name")),
                );
            }
            if let Some(why) = Self::not_a_driver(&by_name, &alternate.driver) {
                found.push(
                    Diagnostic::new(
                        code::E_MAN_009,
                        format!(
                            "alternate `{}` names driver `{}`, {why}",
                            alternate.name, alternate.driver
                        ),
                    )
                    .hint(self.driver_hint(&alternate.driver))
                    .at_path(format!("{at}.driver")),
                );
            }
            for (field, value) in [("name", &alternate.name), ("model", &alternate.model)] {
                if value.trim().is_empty() {
                    found.push(
                        Diagnostic::new(code::E_MAN_021, format!("`{at}.{field}` is empty"))
                            .hint(format!("give the alternate a `{field}`"))
                            .at_path(format!("{at}.{field}")),
                    );
                }
            }
        }
        prompt_pair(
            "inference",
            inference.system_prompt.is_some(),
            inference.system_prompt_file.as_deref(),
            dir,
            found,
        );
        let compaction = &inference.compaction;
        prompt_pair(
            "inference.compaction",
            compaction.system_prompt.is_some(),
            compaction.system_prompt_file.as_deref(),
            dir,
            found,
        );
        if !(compaction.threshold > 0.0 && compaction.threshold <= 1.0) {
            found.push(out_of_range(
                "inference.compaction.threshold",
                compaction.threshold,
                "in (0, 1]",
                "a share of the context window, such as 0.9",
            ));
        }
        if inference.max_turns == 0 {
            found.push(out_of_range(
                "inference.max_turns",
                0,
                "at least 1",
                "the turns one task may take, such as 10",
            ));
        }
        if inference.max_tokens == Some(0) {
            found.push(out_of_range(
                "inference.max_tokens",
                0,
                "at least 1",
                "the output cap per call, such as 8192",
            ));
        }
        if inference.max_session_tokens == Some(0) {
            found.push(out_of_range(
                "inference.max_session_tokens",
                0,
                "at least 1",
                "the session's token ceiling, such as 2000000",
            ));
        }
    }
}

/// `E-MAN-018` when both prompt fields of `holder` are set, `E-MAN-023` when the file is
/// missing.
fn prompt_pair(
    holder: &str,
    inline: bool,
    file: Option<&Path>,
    dir: &Path,
    found: &mut Vec<Diagnostic>,
) {
    let Some(file) = file else {
        return;
    };
    if inline {
        found.push(
            Diagnostic::new(
                code::E_MAN_018,
                format!("`{holder}` sets both `system_prompt` and `system_prompt_file`"),
            )
            .hint("keep one of the two")
            .at_path(format!("{holder}.system_prompt_file")),
        );
    }
    let resolved = resolve_path(dir, file);
    if !resolved.is_file() {
        found.push(
            Diagnostic::new(
                code::E_MAN_023,
                format!(
                    "`{holder}.system_prompt_file` names {}, which does not exist",
                    resolved.display()
                ),
            )
            .hint("create the file, or fix the path (relative to the manifest's directory)")
            .at_path(format!("{holder}.system_prompt_file")),
        );
    }
}

/// `E-MAN-015` for a number outside its range.
fn out_of_range(path: &str, value: impl fmt::Display, allowed: &str, example: &str) -> Diagnostic {
    Diagnostic::new(
        code::E_MAN_015,
        format!("`{path}` is {value}; it must be {allowed}"),
    )
    .hint(format!("write {example}"))
    .at_path(path)
}

impl Capabilities {
    fn validate(&self, found: &mut Vec<Diagnostic>) {
        for (i, path) in self.filesystem.read_only.iter().enumerate() {
            if !path.resolved.exists() {
                found.push(
                    Diagnostic::new(
                        code::W_CAP_003,
                        format!(
                            "read-only path `{}` does not exist (resolved to {})",
                            path.raw.display(),
                            path.resolved.display()
                        ),
                    )
                    .hint("create it, or fix the path (relative paths are relative to the manifest's directory)")
                    .at_path(format!("capabilities.filesystem.read_only[{i}]")),
                );
            }
        }
        for (i, path) in self.shell.interpreter_runtime.iter().enumerate() {
            let problem = match std::fs::metadata(&path.resolved) {
                Ok(meta) if meta.is_dir() => continue,
                Ok(_) => "is not a directory",
                Err(_) => "does not exist",
            };
            found.push(
                Diagnostic::new(
                    code::E_CAP_014,
                    format!(
                        "interpreter runtime `{}` {problem} (resolved to {})",
                        path.raw.display(),
                        path.resolved.display()
                    ),
                )
                .hint("name a directory the interpreter reads, such as `/usr/lib/python3`; relative paths are relative to the manifest's directory, and a single file goes under `filesystem.read_only`")
                .at_path(format!("capabilities.shell.interpreter_runtime[{i}]")),
            );
        }
        for (i, binary) in self.shell.allow.iter().enumerate() {
            let problem = if binary.trim().is_empty() {
                "is empty"
            } else if binary.chars().any(char::is_whitespace) {
                "holds whitespace; it must name one binary"
            } else {
                continue;
            };
            found.push(
                Diagnostic::new(
                    code::E_CAP_004,
                    format!("`capabilities.shell.allow` entry `{binary}` {problem}"),
                )
                .hint("name one binary per entry, such as `git`; arguments are given at call time")
                .at_path(format!("capabilities.shell.allow[{i}]")),
            );
        }
        for (i, name) in self.env.allow.iter().enumerate() {
            let Some(problem) = env_name_problem(name) else {
                continue;
            };
            found.push(
                Diagnostic::new(code::E_CAP_005, format!("`capabilities.env.allow` name `{name}` {problem}"))
                    .hint("name an environment variable to pass in, such as `LANG`; `MURMUR_*` variables are always set by the runtime")
                    .at_path(format!("capabilities.env.allow[{i}]")),
            );
        }
    }
}

/// Whether an unknown `key` in the capsule manifest's mapping at `holder` is `E-MAN-033`
/// rather than `W-MAN-013`: anywhere under `capabilities` or under an artifact entry's
/// `capabilities` (what a capsule may do and how its children are contained), and a key at
/// the top level or of an artifact entry whose closest known key (`closest`) is
/// `capabilities`, a misspelling that would drop every grant and containment key under it.
pub(crate) fn is_containment_key(holder: &str, _key: &str, closest: Option<&str>) -> bool {
    let under = |path: &str| {
        path == "capabilities"
            || path.starts_with("capabilities.")
            || path.starts_with("capabilities[")
    };
    let entry = holder.strip_prefix("artifacts[").and_then(|rest| {
        let (index, after) = rest.split_once(']')?;
        index.chars().all(|c| c.is_ascii_digit()).then_some(after)
    });
    match entry {
        Some("") => closest == Some("capabilities"),
        Some(after) => after.strip_prefix('.').is_some_and(under),
        None => under(holder) || (holder.is_empty() && closest == Some("capabilities")),
    }
}

/// Why `name` cannot name a host variable passed to a component or server, if it cannot.
fn env_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.contains('=') {
        Some("contains `=`")
    } else if name.starts_with("MURMUR_") {
        Some("starts with `MURMUR_`, which the runtime sets itself")
    } else {
        None
    }
}

/// `NAME` when `value` is exactly `${NAME}` or `Bearer ${NAME}`.
pub fn credential_reference(value: &str) -> Option<&str> {
    let reference = value.strip_prefix("Bearer ").unwrap_or(value);
    let name = reference.strip_prefix("${")?.strip_suffix('}')?;
    is_variable_name(name).then_some(name)
}

impl Control {
    fn validate(&self, found: &mut Vec<Diagnostic>) {
        for (i, setting) in self.agent_settings.iter().enumerate() {
            if *setting != Setting::InferenceDriver {
                found.push(
                    Diagnostic::new(
                        code::E_CTL_001,
                        format!("`control.agent_settings` grants `{setting}`, which an agent may not change"),
                    )
                    .hint("an agent may only be given `inference.driver`; put other settings under `control.settings`")
                    .at_path(format!("control.agent_settings[{i}]")),
                );
            }
        }
        for (i, name) in self.secrets.iter().enumerate() {
            if name.trim().is_empty() || name.contains('=') || name.chars().any(char::is_whitespace)
            {
                found.push(
                    Diagnostic::new(
                        code::E_CTL_002,
                        format!("`control.secrets` name `{name}` is not a variable name"),
                    )
                    .hint(
                        "name the secret as its environment variable, such as `ANTHROPIC_API_KEY`",
                    )
                    .at_path(format!("control.secrets[{i}]")),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capsule(yaml: &str) -> CapsuleManifest {
        let loaded = crate::load_str(yaml, Path::new("/capsule/murmur.yaml"), &|_| None);
        match loaded.manifest {
            Some(crate::Manifest::Capsule(capsule)) => capsule,
            _ => panic!("not a capsule: {:#?}", loaded.diagnostics),
        }
    }

    const GRANTS: &str = r#"
name: c
version: "0.1.0"
artifacts:
  - { name: t, version: "0.1.0", runtime: tool }
  - { name: h, version: "0.1.0", runtime: hook }
  - { name: d, version: "0.1.0", runtime: driver, gateway: { endpoint: "https://gw.example" } }
  - name: h2
    version: "0.1.0"
    runtime: hook
    capabilities:
      filesystem: { scope: read, path: logs }
      network: { allow: [ "https://api.example.com" ] }
  - { name: t2, version: "0.1.0", runtime: tool, capabilities: { filesystem: { scope: none }, network: { allow: [] } } }
  - { name: d2, version: "0.1.0", runtime: driver, capabilities: { network: { allow: [ api.example.com ] } } }
capabilities:
  network: { allow: [ api.example.com, "http://127.0.0.1:9" ] }
  filesystem: { read_only: [ docs ] }
  env: { allow: [ LANG ] }
"#;

    fn grants(capsule: &CapsuleManifest, name: &str) -> ArtifactGrants {
        capsule.grants_of(capsule.artifact(name).unwrap())
    }

    fn allow(grants: &ArtifactGrants) -> Vec<&str> {
        grants
            .network
            .allow
            .iter()
            .map(NetworkRule::as_str)
            .collect()
    }

    #[test]
    fn defaults_per_runtime_tool_everything_hook_nothing_driver_its_gateway() {
        let c = capsule(GRANTS);
        let tool = grants(&c, "t");
        assert_eq!(tool.filesystem.scope, FsScope::Write);
        assert_eq!(tool.filesystem.path, None);
        assert_eq!(tool.filesystem.read_only, [PathBuf::from("/capsule/docs")]);
        assert_eq!(allow(&tool), ["api.example.com", "http://127.0.0.1:9"]);
        assert_eq!(tool.network.gateway, None);
        assert_eq!(tool.env, ["LANG"]);
        let hook = grants(&c, "h");
        assert_eq!(hook.filesystem.scope, FsScope::None);
        assert!(hook.filesystem.read_only.is_empty());
        assert!(allow(&hook).is_empty());
        assert_eq!(hook.network.gateway, None);
        assert_eq!(hook.env, ["LANG"]);
        let driver = grants(&c, "d");
        assert_eq!(driver.filesystem.scope, FsScope::None);
        assert!(allow(&driver).is_empty());
        assert_eq!(
            driver.network.gateway.as_deref(),
            Some("https://gw.example")
        );
    }

    #[test]
    fn an_entry_replaces_what_it_names_and_keeps_the_rest() {
        let c = capsule(GRANTS);
        let hook = grants(&c, "h2");
        assert_eq!(hook.filesystem.scope, FsScope::Read);
        assert_eq!(hook.filesystem.path, Some(PathBuf::from("logs")));
        assert_eq!(hook.filesystem.read_only, [PathBuf::from("/capsule/docs")]);
        assert_eq!(allow(&hook), ["https://api.example.com"]);
        // A tool narrowed to nothing holds nothing.
        let tool = grants(&c, "t2");
        assert_eq!(tool.filesystem.scope, FsScope::None);
        assert!(tool.filesystem.read_only.is_empty());
        assert!(allow(&tool).is_empty());
        // A driver's extra hosts sit beside its gateway, which it keeps.
        let driver = grants(&c, "d2");
        assert_eq!(allow(&driver), ["api.example.com"]);
        assert!(driver.network.gateway.is_none(), "d2 declares no gateway");
    }

    #[test]
    fn entry_capabilities_are_checked_against_the_capsule_both_ways() {
        let c = capsule(GRANTS);
        assert!(
            c.validate(Path::new("/capsule"))
                .iter()
                .all(|d| d.code != code::E_CAP_009 && d.code != code::E_CAP_010)
        );
        let mut wider = c.clone();
        wider.artifacts[3].capabilities.network = Some(EntryNetwork {
            allow: vec![NetworkRule::parse("https://127.0.0.1:9").unwrap()],
        });
        wider.artifacts[3].capabilities.filesystem = Some(EntryFilesystem {
            scope: FsScope::Write,
            path: Some(PathBuf::from("../other")),
        });
        let found: Vec<&str> = wider
            .validate(Path::new("/capsule"))
            .iter()
            .map(|d| d.code)
            .filter(|code| code.starts_with("E-CAP"))
            .collect();
        assert_eq!(found, [code::E_CAP_009, code::E_CAP_010]);
        // `write` on the workdir is within: the capsule gives its tools the workdir read-write.
        wider.artifacts[3].capabilities.filesystem = Some(EntryFilesystem {
            scope: FsScope::Write,
            path: Some(PathBuf::from("a/b")),
        });
        wider.artifacts[3].capabilities.network = None;
        assert!(
            wider
                .validate(Path::new("/capsule"))
                .iter()
                .all(|d| !d.code.starts_with("E-CAP"))
        );
    }

    #[test]
    fn env_reference_is_only_a_whole_reference() {
        let gateway = |key: &str| Gateway {
            endpoint: "https://x".into(),
            api_key: Some(key.into()),
        };
        assert_eq!(gateway("${KEY_1}").env_reference(), Some("KEY_1"));
        assert_eq!(gateway("sk-literal").env_reference(), None);
        assert_eq!(gateway("Bearer ${KEY}").env_reference(), None);
        assert_eq!(gateway("${A}${B}").env_reference(), None);
        assert_eq!(gateway("${}").env_reference(), None);
    }

    /// The codes, with their paths, of what loading `yaml` said.
    fn said(yaml: &str) -> Vec<(String, String)> {
        let env = |name: &str| (name == "NOTES_TOKEN").then(|| "t0ken".to_string());
        crate::load_str(yaml, Path::new("/capsule/murmur.yaml"), &env)
            .diagnostics
            .into_iter()
            .map(|d| (d.code.to_string(), d.path.clone().unwrap_or_default()))
            .collect()
    }

    const MCP: &str = r#"
name: c
version: "0.1.0"
artifacts:
  - name: notes
    runtime: mcp
    server: { command: notes-server, args: [--quiet], env: [NOTES_HOME], timeout_seconds: 10 }
  - name: remote
    version: "1.2.0"
    runtime: mcp
    server: { url: "http://127.0.0.1:8123/mcp", headers: { Authorization: "Bearer ${NOTES_TOKEN}", X-Team: murmur } }
capabilities:
  network: { allow: [ "http://127.0.0.1:8123" ] }
"#;

    #[test]
    fn mcp_servers_of_either_transport_load_without_a_word() {
        assert_eq!(said(MCP), Vec::<(String, String)>::new());
        let capsule = capsule(MCP);
        let notes = capsule.artifact("notes").unwrap().server.as_ref().unwrap();
        assert_eq!(notes.command.as_deref(), Some("notes-server"));
        assert_eq!(notes.env, ["NOTES_HOME"]);
        let remote = capsule.artifact("remote").unwrap().server.as_ref().unwrap();
        // A header is a credential reference: kept as written, never interpolated at load.
        assert_eq!(remote.headers["Authorization"], "Bearer ${NOTES_TOKEN}");
        assert_eq!(
            credential_reference(&remote.headers["Authorization"]),
            Some("NOTES_TOKEN")
        );
        assert_eq!(credential_reference("murmur"), None);
        // By default a server runs in the workdir with no network.
        let grants = capsule.grants_of(capsule.artifact("notes").unwrap());
        assert_eq!(grants.filesystem.scope, FsScope::Write);
        assert!(grants.network.allow.is_empty());
    }

    #[test]
    fn an_mcp_entry_that_cannot_reach_its_server_is_refused_with_the_field() {
        let entry = |server: &str| {
            format!(
                "name: c\nversion: \"0.1.0\"\nartifacts:\n  - {{ name: s, runtime: mcp{server} }}\ncapabilities:\n  network: {{ allow: [ \"https://ok.example\" ] }}\n"
            )
        };
        let cases = [
            ("", "E-MAN-028", "artifacts[0].runtime"),
            (", server: {}", "E-MAN-028", "artifacts[0].server"),
            (
                ", server: { command: a, url: \"https://ok.example/mcp\" }",
                "E-MAN-028",
                "artifacts[0].server",
            ),
            (
                ", server: { command: \" \" }",
                "E-MAN-028",
                "artifacts[0].server.command",
            ),
            (
                ", path: x, server: { command: a }",
                "E-MAN-028",
                "artifacts[0].path",
            ),
            (
                ", server: { url: \"ftp://ok.example/mcp\" }",
                "E-MAN-024",
                "artifacts[0].server.url",
            ),
            (
                ", server: { url: \"https://elsewhere.example/mcp\" }",
                "E-CAP-011",
                "artifacts[0].server.url",
            ),
            (
                ", server: { url: \"http://ok.example/mcp\" }",
                "E-CAP-011",
                "artifacts[0].server.url",
            ),
            (
                ", server: { command: a, env: [ MURMUR_X ] }",
                "E-CAP-005",
                "artifacts[0].server.env[0]",
            ),
            (
                ", server: { url: \"https://ok.example/mcp\", headers: { A: \"x ${T}\" } }",
                "E-MAN-022",
                "artifacts[0].server.headers.A",
            ),
            (
                ", server: { command: a, timeout_seconds: 0 }",
                "E-MAN-015",
                "artifacts[0].server.timeout_seconds",
            ),
            (
                ", server: { url: \"https://ok.example/mcp\", args: [ x ] }",
                "W-MAN-026",
                "artifacts[0].server.args",
            ),
            (
                ", server: { command: a, headers: { A: b } }",
                "W-MAN-026",
                "artifacts[0].server.headers",
            ),
        ];
        for (server, code, path) in cases {
            let found = said(&entry(server));
            assert!(
                found.iter().any(|(c, p)| c == code && p == path),
                "{server}: wanted {code} at {path}, got {found:?}"
            );
        }
        // `server:` on anything else is a warning; `runtime: mcp` as a manifest of its own an error.
        let tool = "name: c\nversion: \"0.1.0\"\nartifacts:\n  - { name: t, version: \"0.1.0\", runtime: tool, server: { command: a } }\n";
        assert!(said(tool).contains(&("W-MAN-026".to_string(), "artifacts[0].server".to_string())));
        let own = "name: s\nversion: \"0.1.0\"\nruntime: mcp\n";
        assert!(
            said(own).iter().any(|(c, _)| c == "E-MAN-007"),
            "{:?}",
            said(own)
        );
    }
}
