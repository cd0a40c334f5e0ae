//! Diagnostics: every problem found in a manifest, as a value.
//!
//! A [`Diagnostic`] has a stable code (`E-MAN-004`), a message saying what is wrong, a hint
//! saying how to fix it (every error has one), and the file, line and column where known.
//! Its [`Severity`] follows from the code: `E-` is an error and stops the load, `W-` is a
//! warning and the load goes on.
//!
//! [`CODES`] is the one table of codes for the whole project, every area (MAN manifest, CAP
//! capabilities, RUN running, REG registry and lock, HOOK, CTL control, A2A, TRC trace, MCP). A code,
//! once published, keeps its meaning; a new problem gets a new number. Inside the crate the
//! codes are named by the constants of [`code`], so a code that is not in the table cannot be
//! emitted.
//!
//! Rendering (what `mur check` prints):
//!
//! ```text
//! error[E-MAN-009]: alternate `fast` names driver `driver-x`, which is not declared in `artifacts`
//!   --> path/to/murmur.yaml:23:7
//!   hint: declare `driver-x` under `artifacts:` with `runtime: driver`, or use one of: driver-anthropic
//! ```
//!
//! The `-->` line appears only when the file is known, `:line:column` only when the position is.
//! Serialized (for `--json`) a diagnostic is
//! `{code, severity: "error"|"warning", message, hint, file, line, column}`.

use std::fmt;
use std::path::PathBuf;

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// Whether a diagnostic stops the load (`Error`) or only warns (`Warning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    /// The severity a code carries: `W-…` warns, everything else is an error.
    pub fn of(code: &str) -> Severity {
        if code.starts_with("W-") {
            Severity::Warning
        } else {
            Severity::Error
        }
    }

    /// `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code, one of [`CODES`].
    pub code: &'static str,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it. Every error has one.
    pub hint: Option<String>,
    /// The file the problem is in, when known.
    pub file: Option<PathBuf>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters), when known.
    pub column: Option<usize>,
    /// The manifest field the problem is about, as `inference.alternates[0].driver` (the top
    /// level is the empty path). The loader turns it into `line`/`column`; it is not serialized.
    pub path: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with `code` and `message` and nothing else yet.
    pub fn new(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            message: message.into(),
            hint: None,
            file: None,
            line: None,
            column: None,
            path: None,
        }
    }

    /// Sets the hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// Sets file, line and column (both 1-based).
    pub fn at(mut self, file: impl Into<PathBuf>, line: usize, column: usize) -> Diagnostic {
        self.file = Some(file.into());
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    /// Sets the file alone.
    pub fn in_file(mut self, file: impl Into<PathBuf>) -> Diagnostic {
        self.file = Some(file.into());
        self
    }

    /// Sets the manifest field the problem is about (see [`Diagnostic::path`]).
    pub fn at_path(mut self, path: impl Into<String>) -> Diagnostic {
        self.path = Some(path.into());
        self
    }

    /// Sets line and column from a place in the file.
    pub(crate) fn at_place(mut self, place: crate::source::Place) -> Diagnostic {
        self.line = Some(place.line);
        self.column = Some(place.column);
        self
    }

    /// The severity the code carries.
    pub fn severity(&self) -> Severity {
        Severity::of(self.code)
    }

    /// Whether this diagnostic stops the load.
    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]: {}", self.severity(), self.code, self.message)?;
        if let Some(file) = &self.file {
            write!(f, "\n  --> {}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
                if let Some(column) = self.column {
                    write!(f, ":{column}")?;
                }
            }
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// A coded failure. Every error the project reports gives its stable code (one of [`CODES`]),
/// what went wrong, and how to fix it, through this one trait; `mur` renders every one the same
/// way: `error[CODE]: message` and `  hint: …` on stderr, and with `--json`
/// `{"error": {code, severity, message, hint}}` on stdout.
pub trait Coded {
    /// The stable code: `E-RUN-002`.
    fn code(&self) -> &'static str;
    /// What went wrong, in one sentence.
    fn message(&self) -> String;
    /// How to fix it, in one line.
    fn hint(&self) -> String;
}

impl<T: Coded + ?Sized> Coded for &T {
    fn code(&self) -> &'static str {
        (**self).code()
    }

    fn message(&self) -> String {
        (**self).message()
    }

    fn hint(&self) -> String {
        (**self).hint()
    }
}

impl Coded for Diagnostic {
    fn code(&self) -> &'static str {
        self.code
    }

    fn message(&self) -> String {
        self.message.clone()
    }

    fn hint(&self) -> String {
        self.hint.clone().unwrap_or_default()
    }
}

impl Serialize for Diagnostic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Diagnostic", 7)?;
        s.serialize_field("code", self.code)?;
        s.serialize_field("severity", self.severity().as_str())?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("hint", &self.hint)?;
        let file = self.file.as_ref().map(|f| f.to_string_lossy().into_owned());
        s.serialize_field("file", &file)?;
        s.serialize_field("line", &self.line)?;
        s.serialize_field("column", &self.column)?;
        s.end()
    }
}

/// One entry of [`CODES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    pub code: &'static str,
    pub summary: &'static str,
}

macro_rules! codes {
    ($($ident:ident = $code:literal : $summary:literal;)*) => {
        /// Every code of [`CODES`] as a constant named after it (`E-MAN-004` is `E_MAN_004`).
        pub mod code {
            $(#[doc = $summary] pub const $ident: &str = $code;)*
        }

        /// The one table of diagnostic codes of the whole project.
        pub const CODES: &[CodeInfo] = &[$(CodeInfo { code: $code, summary: $summary }),*];

        #[cfg(test)]
        const CODE_IDENTS: &[(&str, &str)] = &[$((stringify!($ident), $code)),*];
    };
}

codes! {
    E_MAN_001 = "E-MAN-001": "the manifest file cannot be read";
    E_MAN_002 = "E-MAN-002": "the manifest is not YAML the loader reads: a syntax error, more than one document, a merge key, or nesting too deep";
    E_MAN_003 = "E-MAN-003": "a field has the wrong type";
    E_MAN_004 = "E-MAN-004": "`name` is missing or empty";
    E_MAN_005 = "E-MAN-005": "`version` is missing or empty";
    E_MAN_006 = "E-MAN-006": "a version is not a semantic version";
    E_MAN_007 = "E-MAN-007": "`runtime` is missing, unknown, or not the kind of manifest expected";
    E_MAN_008 = "E-MAN-008": "`inference.driver.artifact` names no declared artifact of `runtime: driver`";
    E_MAN_009 = "E-MAN-009": "an alternate names a driver that is not declared with `runtime: driver`";
    E_MAN_010 = "E-MAN-010": "two alternates share a name, or an alternate is named `primary`";
    E_MAN_011 = "E-MAN-011": "`inference.alternates` under `transport: process`";
    E_MAN_012 = "E-MAN-012": "`${NAME}` is set neither in the environment nor in `.env` (nor, for a driver's credential, in the credentials file)";
    W_MAN_013 = "W-MAN-013": "unknown key";
    E_MAN_014 = "E-MAN-014": "two artifacts share a name";
    E_MAN_015 = "E-MAN-015": "a value is outside its allowed set or range";
    E_MAN_016 = "E-MAN-016": "a local artifact's `path:` has no directory or no `murmur.yaml`";
    E_MAN_017 = "E-MAN-017": "a local artifact's own manifest disagrees with its entry";
    E_MAN_018 = "E-MAN-018": "two fields that exclude each other are both set, or an artifact manifest lacks or misstates what its runtime needs";
    W_MAN_019 = "W-MAN-019": "a tool declares no `input_schema`";
    E_MAN_020 = "E-MAN-020": "a key appears twice in one mapping";
    E_MAN_021 = "E-MAN-021": "a required field is missing or empty";
    E_MAN_022 = "E-MAN-022": "a `${...}` reference is malformed";
    E_MAN_023 = "E-MAN-023": "a file the manifest names does not exist";
    E_MAN_024 = "E-MAN-024": "a URL field is not an http or https URL";
    W_MAN_025 = "W-MAN-025": "the `.env` beside the manifest cannot be parsed";
    W_MAN_026 = "W-MAN-026": "a field that only applies to another runtime";
    E_MAN_027 = "E-MAN-027": "the manifest file is larger than the loader reads (1 MiB)";
    W_MAN_029 = "W-MAN-029": "an `inference` field the transport in force does not use (`command` under `transport: http`; `driver`, `max_tokens`, `max_session_tokens`, `compaction` under `transport: process`)";
    E_MAN_028 = "E-MAN-028": "a `runtime: mcp` entry does not say how to reach its server: exactly one of `server.command` and `server.url`, and no `path`";
    W_MAN_030 = "W-MAN-030": "an artifact's component is not built yet (its `build:` makes it)";
    E_MAN_031 = "E-MAN-031": "an artifact's component file is not a WebAssembly component, or does not export its world's entry point";
    W_MAN_032 = "W-MAN-032": "another Murmur runtime's spelling, read as this one's: in an artifact manifest `runtime: wasm`, `requires_files`, `input`, an `input_schema` written as JSON text; in a capsule manifest `inference.endpoint` and `inference.api_key` (the primary driver's gateway), `network.internal_port` (`door.port`), `lifecycle.queue_depth` without `task_acceptance` (a queue)";
    E_MAN_033 = "E-MAN-033": "an unknown key under `capabilities` (the capsule's, or an artifact entry's), or a top-level key that looks like a misspelt `capabilities`: a key about what a capsule may do or how it is contained is never dropped with a warning";

    E_CAP_001 = "E-CAP-001": "a `capabilities.network.allow` entry is malformed";
    E_CAP_002 = "E-CAP-002": "a limit is zero or negative";
    W_CAP_003 = "W-CAP-003": "a `capabilities.filesystem.read_only` path does not exist";
    E_CAP_004 = "E-CAP-004": "a `capabilities.shell.allow` entry is empty or not one binary name";
    E_CAP_005 = "E-CAP-005": "a `capabilities.env.allow` name is empty, contains `=`, or starts with `MURMUR_`";
    E_CAP_006 = "E-CAP-006": "a shell binary is not in `capabilities.shell.allow`";
    W_CAP_007 = "W-CAP-007": "a `capabilities.shell.allow` entry resolves to no executable on this host";
    E_CAP_008 = "E-CAP-008": "a peer capsule's URL is not in `capabilities.network.allow`";
    E_CAP_009 = "E-CAP-009": "an artifact entry's `capabilities.network.allow` names a host, scheme or port the capsule's `capabilities.network.allow` does not";
    E_CAP_010 = "E-CAP-010": "an artifact entry's `capabilities.filesystem.path` is absolute, empty, or climbs out of the workdir with `..`";
    E_CAP_011 = "E-CAP-011": "an MCP server's `server.url` is not in `capabilities.network.allow`";
    E_CAP_012 = "E-CAP-012": "`capabilities.containment` is not one of `advisory`, `scoped`, `sealed`";
    E_CAP_013 = "E-CAP-013": "a `capabilities.resources` value is not a whole number within its range";
    E_CAP_014 = "E-CAP-014": "a `capabilities.shell.interpreter_runtime` path does not exist or is not a directory";
    E_CAP_020 = "E-CAP-020": "this host cannot give the containment class asked for (a mechanism it needs is missing), or a grant contradicts it (`workdir_exec` beside `scoped`): the session is refused before anything runs";
    E_CAP_021 = "E-CAP-021": "a native child could not be started under its containment: a step the kernel refused (named in the message) stopped it before it ran";
    E_CAP_022 = "E-CAP-022": "a shell call was refused because the workdir holds `capabilities.resources.workdir_max_bytes` or more";

    E_RUN_001 = "E-RUN-001": "a component could not be loaded or compiled";
    E_RUN_002 = "E-RUN-002": "a component call exceeded its deadline";
    W_RUN_003 = "W-RUN-003": "an alternate's credential could not be resolved; the choice is staged unavailable";
    E_RUN_004 = "E-RUN-004": "a component call exceeded its memory limit";
    E_RUN_005 = "E-RUN-005": "a component trapped";
    E_RUN_006 = "E-RUN-006": "a tool's data-path was refused";
    E_RUN_007 = "E-RUN-007": "building an artifact from source failed";
    E_RUN_008 = "E-RUN-008": "an artifact's component file is missing";
    E_RUN_009 = "E-RUN-009": "the tool input is not valid";
    E_RUN_010 = "E-RUN-010": "the artifact cannot be called as a tool (it is not a tool or driver)";
    E_RUN_011 = "E-RUN-011": "the inference driver failed or answered malformed";
    E_RUN_012 = "E-RUN-012": "a driver's gateway or credential cannot be used";
    E_RUN_013 = "E-RUN-013": "the capsule has no agent loop this runtime can run";
    E_RUN_014 = "E-RUN-014": "the model called a tool the capsule does not declare";
    E_RUN_015 = "E-RUN-015": "a task used all of `inference.max_turns`";
    E_RUN_016 = "E-RUN-016": "there is no task to run";
    E_RUN_017 = "E-RUN-017": "a shell command could not be started or read";
    E_RUN_018 = "E-RUN-018": "a call was not made: it would have passed `inference.max_session_tokens`";
    E_RUN_019 = "E-RUN-019": "the user's credentials file (`$MURMUR_HOME/credentials.yaml`) cannot be read, or is not a mapping of names to strings";
    W_RUN_020 = "W-RUN-020": "the user's credentials file can be read by its group or by others";
    E_RUN_021 = "E-RUN-021": "a declared tool or skill has the name of a runtime tool the capsule offers (`shell`, `switch-driver`)";
    E_RUN_022 = "E-RUN-022": "the runtime could not write or read its own file in the session workdir (`out/result.txt`, a context's `history.json`, a log): a link or a directory was planted there, or the disk is full";
    E_RUN_023 = "E-RUN-023": "a tool's or driver's `data` is over the limit the runtime takes (10 MiB)";
    E_RUN_024 = "E-RUN-024": "the session to resume is not there, cannot be read, or saved no conversation (`mur run --resume`)";
    E_RUN_029 = "E-RUN-029": "`mur run --replay`: a driver's request differs from the one the cassette recorded, or goes past its end";
    E_RUN_030 = "E-RUN-030": "a cassette cannot be read or written (`mur run --record`, `--replay`)";
    E_RUN_027 = "E-RUN-027": "the agent CLI of `transport: process` is not on PATH, or is not an executable file";
    E_RUN_028 = "E-RUN-028": "the agent CLI of `transport: process` failed: it exited non-zero, printed a line that is not its event stream, was refused a permission, or ran past `inference.timeout_seconds`";
    E_RUN_026 = "E-RUN-026": "a capsule component's capsule declares MCP servers (`runtime: mcp`), which only an agent's model can call";
    E_RUN_031 = "E-RUN-031": "`mur run --resume`: the conversation to resume (`contexts/<context-id>/history.json`) is not the one the earlier session's trace recorded (`history_saved`): its sha256 differs, or it is gone";
    E_RUN_032 = "E-RUN-032": "`mur run --resume`: a record file is over the bound it is read to (a trace over 256 MiB, a history over 32 MiB)";
    E_RUN_033 = "E-RUN-033": "`--workspace`: the directory cannot be a workspace (missing, not a directory, or overlapping the workdir root where the records go)";
    E_RUN_034 = "E-RUN-034": "`--workspace`: another session holds the workspace (the error names its process)";
    E_RUN_035 = "E-RUN-035": "a component asked a person for input (`request-input`) and no answer came: no one to ask where it ran, the wait ran out, or the task was canceled";
    E_RUN_036 = "E-RUN-036": "the agent CLI of `transport: process` is older than the lowest version that runs under Murmur (the error names the version found and the lowest that works)";
    W_RUN_025 = "W-RUN-025": "the capsule changed since the session being resumed (`mur run --resume`)";

    E_REG_001 = "E-REG-001": "an artifact cannot be resolved";
    E_REG_002 = "E-REG-002": "an artifact archive is malformed or unsafe (a path out of it, a link, a special file, no manifest)";
    E_REG_003 = "E-REG-003": "an artifact archive is over a size or entry limit";
    E_REG_004 = "E-REG-004": "an artifact's bytes differ from the registry's sha256";
    E_REG_005 = "E-REG-005": "an artifact's version or bytes differ from its `murmur.lock` pin";
    E_REG_006 = "E-REG-006": "the registry has no such artifact or version";
    E_REG_007 = "E-REG-007": "the registry cannot be reached, or its index is malformed";
    E_REG_008 = "E-REG-008": "`murmur.lock` cannot be read or is malformed";
    E_REG_009 = "E-REG-009": "`--locked` was given and `murmur.lock` would change";
    E_REG_010 = "E-REG-010": "an installed artifact is missing, or its files differ from what was installed";
    E_REG_011 = "E-REG-011": "publishing would replace a version already in the registry with other bytes";
    E_REG_012 = "E-REG-012": "an archive's own manifest is not the artifact it is installed as (another name, version or runtime), or it loads a file the archive does not hold";
    E_REG_013 = "E-REG-013": "`mur new`: the name is not one an artifact can take";
    E_REG_014 = "E-REG-014": "`mur new`: the directory already holds files, or the artifact cannot be written into it";
    E_REG_015 = "E-REG-015": "an OCI registry asks for credentials, or refused the ones given";
    E_REG_016 = "E-REG-016": "a capsule cannot be pushed or pulled as asked: a file it names lies outside its directory or cannot be packed, or the destination already holds files";

    E_DEP_001 = "E-DEP-001": "`mur deploy`: the capsule cannot be served on a cluster as it is (no `door.auth`, a capsule component, no inference, or a name that is not a DNS label)";
    E_DEP_002 = "E-DEP-002": "`mur deploy`: the capsule cannot be pulled at start as asked (a reference not pinned by digest, or registry artifacts not locked from one OCI registry)";
    E_DEP_003 = "E-DEP-003": "`mur deploy`: the rendered objects cannot be written";
    E_DEP_005 = "E-DEP-005": "`mur deploy`: no `--image` names the image that runs `mur` (none is published to default to)";
    W_DEP_004 = "W-DEP-004": "`mur deploy`: the capsule needs what the image must supply (a harness CLI, the binaries its shell grant runs, its read-only paths)";

    E_EVAL_001 = "E-EVAL-001": "`mur eval run`: the dataset cannot be read, or a line is not a case (its line and field named)";
    E_EVAL_002 = "E-EVAL-002": "`mur eval run`: the arms file cannot be read, names no such arm, or an arm cannot run (its overlay refused, a choice the capsule has not, no cassette directory to record into)";
    E_EVAL_003 = "E-EVAL-003": "`mur eval show`/`diff`: no such run, or its files are not a run's";
    E_EVAL_004 = "E-EVAL-004": "`mur eval`: a run's results or report cannot be written";
    E_EVAL_005 = "E-EVAL-005": "`mur eval run --workspace`: a case has a `workdir:` fixture of its own, which would be copied over the directory every case works on in place";

    E_TRC_001 = "E-TRC-001": "the trace cannot be written";
    E_TRC_002 = "E-TRC-002": "no trace found: no such trace file, session directory or session id (`mur trace`)";
    E_TRC_003 = "E-TRC-003": "a trace cannot be read or is malformed: a line that is not a trace event, no event, or no `session_start` (`mur trace`)";
    W_TRC_004 = "W-TRC-004": "spans could not be exported to `observability.otel_endpoint`; the session went on";
    E_TRC_005 = "E-TRC-005": "an OTLP endpoint is not an http or https URL (`mur trace export --endpoint`)";
    E_TRC_006 = "E-TRC-006": "the OTLP receiver did not take every span (`mur trace export`)";
    W_TRC_007 = "W-TRC-007": "a trace ends in a cut line (the disk filled or the process died mid-write); it was read up to its last whole line";
    E_TRC_008 = "E-TRC-008": "a trace is over the 256 MiB a trace is read to (`mur trace`); nothing of it was read";

    E_HOOK_001 = "E-HOOK-001": "a hook's `commit_policy` is not the arm its `binding` honors";
    E_HOOK_002 = "E-HOOK-002": "an `async` hook declares a committing `commit_policy`";
    E_HOOK_003 = "E-HOOK-003": "an `on-stage` hook is declared `async`";
    W_HOOK_005 = "W-HOOK-005": "a hook does not export `on-stage`; staging goes on without it";
    E_HOOK_006 = "E-HOOK-006": "a compaction hook failed, which ends the session";
    E_HOOK_004 = "E-HOOK-004": "unknown `binding`, `commit_policy` or `execution_mode`";
    E_HOOK_007 = "E-HOOK-007": "a hook asked to reopen a task past `lifecycle.max_task_reopens`";
    W_HOOK_008 = "W-HOOK-008": "a capsule component's session dispatches only `on-shell`: a hook's other handlers never run there";

    E_A2A_001 = "E-A2A-001": "the A2A door cannot listen on the address asked for";
    E_A2A_002 = "E-A2A-002": "no input arrived within `lifecycle.input_timeout_secs`";
    E_A2A_003 = "E-A2A-003": "a peer capsule cannot be reached, or answered with an error";
    E_A2A_004 = "E-A2A-004": "a peer capsule's answer is not A2A";
    E_A2A_005 = "E-A2A-005": "the door would serve on an address that is not loopback without `door.auth`: it would authenticate no one";
    W_A2A_006 = "W-A2A-006": "the door serves on an address that is not loopback with --insecure-no-auth: it authenticates no one";
    E_A2A_007 = "E-A2A-007": "a `door.auth` or `peers` entry is malformed: its principal, its credential (exactly one of `bearer` and `api_key`), its header, or its URL";
    E_A2A_008 = "E-A2A-008": "a `door.input_modes` or `door.output_modes` entry is not a media type the door can keep to";
    E_A2A_009 = "E-A2A-009": "two `door.auth` principals resolve to the same credential value";
    W_A2A_010 = "W-A2A-010": "a file a served task wrote under `out/` is not given back to its client";
    W_A2A_011 = "W-A2A-011": "a push notification to a task's webhook was given up or dropped";
    W_A2A_012 = "W-A2A-012": "a `door.auth` or `peers` credential is set nowhere a run looks";
    W_A2A_015 = "W-A2A-015": "a served capsule's oldest conversation could not be deleted to keep `contexts/` within its bound";
    E_A2A_016 = "E-A2A-016": "a peer's answer, or one event of its stream, is larger than the 16 MiB Murmur reads from a peer (its agent card: 1 MiB)";

    E_A2A_020 = "E-A2A-020": "a `door.allowed_hosts`, `door.allowed_origins` or `door.tls` entry is malformed";
    E_A2A_021 = "E-A2A-021": "the door's TLS certificate or key cannot be read, or the key does not fit the certificate";
    E_A2A_022 = "E-A2A-022": "the door would serve on an address that is not loopback without TLS: credentials and tasks would cross the network in clear";
    W_A2A_023 = "W-A2A-023": "the door serves on an address that is not loopback without TLS (--insecure-no-tls)";
    W_A2A_024 = "W-A2A-024": "a served capsule's door principals share its stdio MCP servers, which work in the session's workspace (every principal's directory beneath it)";
    E_A2A_025 = "E-A2A-025": "a named `peers` entry cannot be offered to the model as a tool: its `name` is not 1 to 59 lowercase letters, digits and `-` starting with a letter, another entry has it, or its `description` is empty, over 2,000 characters or on an unnamed entry";
    E_A2A_026 = "E-A2A-026": "a named peer's tool `ask-<name>` has the name of a tool or skill the capsule declares";
    E_A2A_027 = "E-A2A-027": "a named peer's agent card changed since `mur install` pinned it in murmur.lock";
    W_A2A_028 = "W-A2A-028": "a named peer's agent card is not pinned in murmur.lock: it is taken as the peer serves it";
    E_A2A_029 = "E-A2A-029": "a named peer's agent card cannot be fetched, and the manifest gives no `description` the model could be told instead";
    W_A2A_030 = "W-A2A-030": "a named peer's agent card cannot be fetched; the manifest's `description` is used, unpinned";
    E_A2A_031 = "E-A2A-031": "`door.a2a_versions` is empty, names a version the door does not speak (it speaks `0.3` and `1.0`), or names one twice";
    E_A2A_032 = "E-A2A-032": "`door.conversations_max_bytes` is less than 1 MiB";

    E_CTL_001 = "E-CTL-001": "a `control.settings` or `control.agent_settings` entry is not a setting that may be granted there";
    E_CTL_002 = "E-CTL-002": "a `control.secrets` name is empty or contains `=` or whitespace";
    E_CTL_003 = "E-CTL-003": "a control change was refused: by the control plane, or before it was sent (no secret value on stdin)";
    E_CTL_004 = "E-CTL-004": "no control plane can be reached: no running capsule found (or several), no connection, or the token refused";
    E_CTL_005 = "E-CTL-005": "the control plane's token cannot be made or its token file written";

    E_MCP_001 = "E-MCP-001": "an MCP server did not start, or its connection could not be made";
    E_MCP_002 = "E-MCP-002": "an MCP server did not answer within its time limit (the call was cancelled)";
    E_MCP_003 = "E-MCP-003": "an MCP server answered out of protocol";
    E_MCP_004 = "E-MCP-004": "an MCP server has stopped, or closed its connection";
    E_MCP_005 = "E-MCP-005": "an MCP server's identity or tools differ from its pin in murmur.lock";
    E_MCP_007 = "E-MCP-007": "`mur mcp serve --http` on an address that is not loopback, with no bearer token";
    E_MCP_008 = "E-MCP-008": "an MCP server sent more than Murmur reads from one: a message over 8 MiB, or a tool list over 64 pages, 1,024 tools or 8 MiB";
    W_MCP_006 = "W-MCP-006": "an MCP server is not pinned in murmur.lock: its tools are taken as it lists them";
}

/// The closest of `candidates` to `word`, when one is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

// A type's `Deserialize` impl reports a problem that has its own code (an unknown `runtime`, a
// malformed network rule) through serde's string-only error channel: the code, message and
// hint travel inside the error text, marked so the loader can take them apart again.
const MARK: char = '\u{1e}';

/// A serde error that carries a full diagnostic (code, message, hint).
pub(crate) fn serde_error<E: serde::de::Error>(diagnostic: &Diagnostic) -> E {
    E::custom(format!(
        "{MARK}{}{MARK}{}{MARK}{}",
        diagnostic.code,
        diagnostic.message,
        diagnostic.hint.as_deref().unwrap_or("")
    ))
}

/// The diagnostic inside an error text made by [`serde_error`], if it is one.
pub(crate) fn from_serde_error(text: &str) -> Option<Diagnostic> {
    let rest = &text[text.find(MARK)? + MARK.len_utf8()..];
    let mut parts = rest.splitn(3, MARK);
    let code = parts.next()?;
    let message = parts.next()?;
    let hint = parts.next()?;
    let code = CODES.iter().find(|info| info.code == code)?.code;
    let diagnostic = Diagnostic::new(code, message);
    Some(if hint.is_empty() {
        diagnostic
    } else {
        diagnostic.hint(hint)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const AREAS: &[&str] = &[
        "MAN", "CAP", "RUN", "REG", "HOOK", "CTL", "A2A", "TRC", "MCP", "DEP", "EVAL",
    ];

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen_codes = HashSet::new();
        let mut seen_numbers = HashSet::new();
        for info in CODES {
            assert!(seen_codes.insert(info.code), "{} listed twice", info.code);
            let parts: Vec<&str> = info.code.split('-').collect();
            assert_eq!(parts.len(), 3, "{} is not X-AREA-NNN", info.code);
            assert!(
                matches!(parts[0], "E" | "W"),
                "{} has a bad prefix",
                info.code
            );
            assert!(
                AREAS.contains(&parts[1]),
                "{} has an unknown area",
                info.code
            );
            assert!(
                parts[2].len() == 3 && parts[2].chars().all(|c| c.is_ascii_digit()),
                "{} has a bad number",
                info.code
            );
            // Numbers are unique within an area whatever the severity.
            assert!(
                seen_numbers.insert((parts[1], parts[2])),
                "{} reuses a number of its area",
                info.code
            );
            assert!(!info.summary.is_empty(), "{} has no summary", info.code);
        }
    }

    /// Every `E-…`/`W-…` code written as a string literal anywhere in the project's Rust
    /// sources is one of [`CODES`], so no code reaches a user without its table entry.
    #[test]
    fn every_code_the_sources_use_is_in_the_table() {
        fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                if path.is_dir() && name != "target" && name != ".git" {
                    rust_files(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    found.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["crates", "artifacts", "tests"] {
            rust_files(&root.join(dir), &mut files);
        }
        assert!(files.len() > 20, "found only {} sources", files.len());
        let known: HashSet<&str> = CODES.iter().map(|info| info.code).collect();
        let mut unknown = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let bytes = text.as_bytes();
            for (at, _) in text.match_indices('"') {
                let rest = &bytes[at + 1..];
                let Some(end) = rest.iter().position(|b| *b == b'"') else {
                    continue;
                };
                let Ok(literal) = std::str::from_utf8(&rest[..end]) else {
                    continue;
                };
                let parts: Vec<&str> = literal.split('-').collect();
                if parts.len() == 3
                    && matches!(parts[0], "E" | "W")
                    && AREAS.contains(&parts[1])
                    && parts[2].len() == 3
                    && parts[2].chars().all(|c| c.is_ascii_digit())
                    && !known.contains(literal)
                {
                    unknown.push(format!("{literal} in {}", file.display()));
                }
            }
        }
        assert!(unknown.is_empty(), "codes missing from CODES: {unknown:?}");
    }

    #[test]
    fn code_constants_spell_their_codes() {
        for (ident, code) in CODE_IDENTS {
            assert_eq!(ident.replace('_', "-"), *code);
        }
    }

    #[test]
    fn severity_follows_the_code_prefix() {
        assert_eq!(
            Diagnostic::new(code::W_MAN_013, "x").severity(),
            Severity::Warning
        );
        assert_eq!(
            Diagnostic::new(code::E_MAN_004, "x").severity(),
            Severity::Error
        );
    }

    #[test]
    fn display_renders_position_and_hint() {
        let d = Diagnostic::new(
            code::E_MAN_009,
            "alternate `fast` names driver `driver-x`, which is not declared in `artifacts`",
        )
        .hint("declare `driver-x` under `artifacts:` with `runtime: driver`, or use one of: driver-anthropic")
        .at("path/to/murmur.yaml", 23, 7);
        assert_eq!(
            d.to_string(),
            "error[E-MAN-009]: alternate `fast` names driver `driver-x`, which is not declared in `artifacts`\n  --> path/to/murmur.yaml:23:7\n  hint: declare `driver-x` under `artifacts:` with `runtime: driver`, or use one of: driver-anthropic"
        );
    }

    #[test]
    fn display_omits_what_is_unknown() {
        let no_file = Diagnostic::new(code::W_MAN_013, "unknown key `x`");
        assert_eq!(no_file.to_string(), "warning[W-MAN-013]: unknown key `x`");
        let file_only = Diagnostic::new(code::E_MAN_001, "cannot read")
            .hint("check the path")
            .in_file("m.yaml");
        assert_eq!(
            file_only.to_string(),
            "error[E-MAN-001]: cannot read\n  --> m.yaml\n  hint: check the path"
        );
    }

    #[test]
    fn serializes_for_json_output() {
        let d = Diagnostic::new(code::W_CAP_003, "missing")
            .at("a.yaml", 2, 3)
            .at_path("capabilities");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "code": "W-CAP-003", "severity": "warning", "message": "missing",
                "hint": null, "file": "a.yaml", "line": 2, "column": 3
            })
        );
    }

    #[test]
    fn coded_serde_errors_round_trip() {
        let d = Diagnostic::new(code::E_CAP_001, "bad rule").hint("fix it");
        let err: serde_json::Error = serde_error(&d);
        assert_eq!(from_serde_error(&err.to_string()), Some(d));
        assert_eq!(from_serde_error("invalid type: integer"), None);
    }

    #[test]
    fn closest_suggests_typos_only() {
        assert_eq!(closest("gatway", ["gateway", "config"]), Some("gateway"));
        assert_eq!(closest("zzz", ["gateway", "config"]), None);
    }
}
