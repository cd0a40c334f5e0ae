//! The runtime's errors. Each variant carries a stable diagnostic code (listed in
//! `murmur_manifest::diagnostic::CODES`) and a hint, so the CLI can print it as a diagnostic
//! without knowing the runtime's internals.

use murmur_manifest::Coded;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The component file could not be read, compiled or instantiated.
    #[error("component `{component}` could not be loaded: {reason}")]
    Load { component: String, reason: String },

    /// The component imports a `murmur:*` interface its world does not provide.
    #[error(
        "{kind} `{component}` imports `{import}`, which the `{world}` world does not provide: {why}"
    )]
    WorldImport {
        /// `tool`, `driver`, `hook` or `capsule component`.
        kind: &'static str,
        component: String,
        import: String,
        world: &'static str,
        /// Which worlds provide it, and what to do instead.
        why: String,
    },

    /// The component file does not exist.
    #[error("component file {} does not exist", path.display())]
    ComponentMissing { path: PathBuf },

    /// The call ran past its wall-clock deadline and was stopped.
    #[error("component `{component}` exceeded its deadline of {}", format_duration(*deadline))]
    Deadline {
        component: String,
        deadline: Duration,
    },

    /// The component asked for more memory than its limit and could not go on.
    #[error(
        "component `{component}` exceeded its memory limit of {limit_bytes} bytes (asked for {requested_bytes})"
    )]
    MemoryLimit {
        component: String,
        limit_bytes: u64,
        requested_bytes: u64,
    },

    /// The component trapped: a panic, an `unreachable`, a failed host call.
    #[error("component `{component}` trapped: {message}")]
    Trap { component: String, message: String },

    /// The component asked a person for input (`murmur:task/task.request-input`) and no answer
    /// came: no one to ask here, the wait ran out, or the task was canceled.
    #[error("component `{component}` asked for input and got no answer: {why}")]
    InputUnanswered { component: String, why: String },

    /// The tool returned a `data-path` the runtime refuses to read.
    #[error("tool `{component}` returned data-path `{data_path}`, which was refused: {reason}")]
    DataPath {
        component: String,
        data_path: String,
        reason: String,
    },

    /// The tool returned more `data` than the runtime takes.
    #[error("tool `{component}` returned {bytes} bytes of data, over the {limit} byte limit")]
    DataTooLarge {
        component: String,
        bytes: u64,
        limit: u64,
    },

    /// The runtime's own I/O failed (workdir, cache, …).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Coded for RuntimeError {
    /// The stable diagnostic code.
    fn code(&self) -> &'static str {
        match self {
            RuntimeError::Load { .. }
            | RuntimeError::WorldImport { .. }
            | RuntimeError::Io { .. } => "E-RUN-001",
            RuntimeError::Deadline { .. } => "E-RUN-002",
            RuntimeError::MemoryLimit { .. } => "E-RUN-004",
            RuntimeError::Trap { .. } => "E-RUN-005",
            RuntimeError::InputUnanswered { .. } => "E-RUN-035",
            RuntimeError::DataPath { .. } => "E-RUN-006",
            RuntimeError::DataTooLarge { .. } => "E-RUN-023",
            RuntimeError::ComponentMissing { .. } => "E-RUN-008",
        }
    }

    fn message(&self) -> String {
        self.to_string()
    }

    /// How to fix it, in one line.
    fn hint(&self) -> String {
        match self {
            RuntimeError::Load { .. } => {
                "check that the file is a WebAssembly component built for wasm32-wasip2 against \
                 the murmur WIT (wit/), and that it imports only interfaces the runtime provides"
                    .to_string()
            }
            RuntimeError::WorldImport { world, .. } => format!(
                "rebuild the component against the `{world}` world of wit/worlds.wit, importing \
                 only what it provides, or declare it as the kind of artifact whose world does"
            ),
            RuntimeError::ComponentMissing { .. } => {
                "build it (`mur build <artifact-dir>`), or declare a `build:` in the artifact's \
                 murmur.yaml so the runtime can"
                    .to_string()
            }
            RuntimeError::Deadline { .. } => {
                "raise `capabilities.limits.deadline_seconds` if the work is legitimate, or find \
                 the loop that never ends"
                    .to_string()
            }
            RuntimeError::MemoryLimit { .. } => {
                "raise `capabilities.limits.memory_bytes` if the work is legitimate, or bound \
                 what the component keeps in memory"
                    .to_string()
            }
            RuntimeError::Trap { .. } => {
                "the component failed on its own (a panic, an uncaught exception, a result its \
                 language's bindings could not return): the end of its stderr, quoted above, \
                 is its own account; fix the component"
                    .to_string()
            }
            RuntimeError::InputUnanswered { .. } => {
                "run it where a person can answer: a task of `mur run --serve` (answered with \
                 `mur send`), `mur mcp serve` to a client that takes questions, or `mur tool \
                 invoke --reply TEXT`"
                    .to_string()
            }
            RuntimeError::DataPath { .. } => {
                "return a path relative to the session workdir naming a regular file of at most \
                 10 MiB, with no `..`, no symlink on the way, or return the result in `data`"
                    .to_string()
            }
            RuntimeError::DataTooLarge { limit, .. } => format!(
                "return at most {} MiB in `data`; for more, write a file and return only the \
                 part the model needs",
                limit >> 20
            ),
            RuntimeError::Io { .. } => {
                "check the permissions and free space of the directory named".to_string()
            }
        }
    }
}

fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}ms", millis)
    }
}
