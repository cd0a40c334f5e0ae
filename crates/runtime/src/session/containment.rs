//! The containment of a session's native children: which class they run under, and the
//! [`Confinement`] each kind of child gets.
//!
//! What it promises:
//!
//! - **One decision per session** ([`achieve`]): the stronger of `capabilities.containment`
//!   and the operator's `--containment`, `scoped` when neither asks; a host that cannot give
//!   it refuses the session before anything runs (`E-CAP-020`). `filesystem.workdir_exec`
//!   gives execution back in the workdir, which only `advisory` allows: it makes the default
//!   `advisory`, and asking for a stronger class beside it is refused.
//! - **Every native child of the session is held under that class**: shell calls and capsule
//!   components' shell (the capsule's `network.allow`), MCP stdio servers (their own
//!   `network.allow`), the agent CLI of `transport: process` (its provider or relay only).
//! - **Limits come from `capabilities.resources`**, each absent key taking
//!   [`ChildLimits::default`].

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use murmur_confine::{
    Achieved, ChildLimits, Class, Confinement, EgressRefusal, Missing, OnRefused,
};
use murmur_manifest::capsule::CapsuleManifest;
use murmur_manifest::network::NetworkRule;
use murmur_trace::Trace;
use murmur_trace::schema::EventBody;

use crate::session::SessionError;

/// The class `capsule`'s children run under on this host when the operator asks for
/// `operator`, or why it cannot be had.
pub fn achieve(capsule: &CapsuleManifest, operator: Option<Class>) -> Result<Achieved, Missing> {
    let declared = capsule.capabilities.containment;
    let workdir_exec = capsule.capabilities.filesystem.workdir_exec;
    if workdir_exec {
        let asked = Class::resolve(declared, operator);
        if declared.is_some_and(|c| c > Class::Advisory)
            || operator.is_some_and(|c| c > Class::Advisory)
        {
            return Err(Missing {
                asked,
                mechanism: "an execution-free workdir (the capsule asks for `workdir_exec`)",
                why: "`capabilities.filesystem.workdir_exec: true` lets children execute files \
                      the agent wrote, which only `advisory` allows"
                    .to_string(),
                how: "drop `workdir_exec`, so the allowlist holds".to_string(),
            });
        }
        return murmur_confine::achieve(Class::Advisory, murmur_confine::host());
    }
    murmur_confine::achieve(Class::resolve(declared, operator), murmur_confine::host())
}

/// [`achieve`] as a session's error.
pub(crate) fn achieve_for_session(
    capsule: &CapsuleManifest,
    operator: Option<Class>,
) -> Result<Achieved, SessionError> {
    achieve(capsule, operator).map_err(|missing| {
        use murmur_manifest::Coded;
        SessionError {
            code: missing.code(),
            message: missing.message(),
            hint: missing.hint(),
            workdir: None,
        }
    })
}

/// The limits of `capsule`'s children.
pub fn limits(capsule: &CapsuleManifest) -> ChildLimits {
    let declared = &capsule.capabilities.resources;
    let default = ChildLimits::default();
    ChildLimits {
        max_processes: declared
            .max_processes
            .map_or(default.max_processes, u64::from),
        memory_bytes: declared.memory_bytes.unwrap_or(default.memory_bytes),
        cpu_percent: declared.cpu_percent.or(default.cpu_percent),
        open_files: declared.open_files.map_or(default.open_files, u64::from),
        file_size_bytes: declared.file_size_bytes.unwrap_or(default.file_size_bytes),
    }
}

/// Where a session's native children's refused connections go: an `egress_refused` event
/// each, under `session_start`, once the trace is open (the first [`RefusalLog::MOST`] of a
/// session; the children's own reports count every one).
#[derive(Clone, Default)]
pub(crate) struct RefusalLog {
    trace: Arc<OnceLock<(Trace, String)>>,
    written: Arc<AtomicU32>,
}

impl RefusalLog {
    /// The most `egress_refused` events one session writes: a child that loops on refused
    /// connections cannot flood the trace.
    pub(crate) const MOST: u32 = 256;

    /// Events go to `trace`, under `session_event`, from now on.
    pub(crate) fn attach(&self, trace: Trace, session_event: String) {
        let _ = self.trace.set((trace, session_event));
    }

    /// The sink of the child named `child` (`shell`, `mcp:<server>`, `cli:<command>`).
    pub(crate) fn sink(&self, child: &str) -> OnRefused {
        let log = self.clone();
        let child = child.to_string();
        Arc::new(move |refusal: &EgressRefusal| {
            let Some((trace, parent)) = log.trace.get() else {
                return;
            };
            if log.written.fetch_add(1, Ordering::Relaxed) >= RefusalLog::MOST {
                return;
            }
            // A trace that cannot be written is reported by the session's own writes.
            let _ = trace.write(
                Some(parent),
                EventBody::EgressRefused {
                    child: child.clone(),
                    host: refusal.host.clone(),
                    port: refusal.port,
                    reason: refusal.reason.clone(),
                },
            );
        })
    }
}

/// How `capsule`'s children that may reach `network` are held, under `achieved` (their
/// refused connections told to no one until the caller sets `on_refused`, say to a
/// [`RefusalLog::sink`]).
pub(crate) fn confinement(
    capsule: &CapsuleManifest,
    achieved: &Achieved,
    network: Vec<NetworkRule>,
    workdir_root: &Path,
) -> Confinement {
    let capabilities = &capsule.capabilities;
    Confinement {
        achieved: achieved.clone(),
        read_only: crate::grants::Grants::of_capsule(capsule, workdir_root).read_only,
        interpreter_runtime: capabilities.shell.interpreter_runtime_resolved(),
        network,
        unix_sockets: capabilities.network.unix_sockets,
        workdir_exec: capabilities.filesystem.workdir_exec,
        limits: limits(capsule),
        on_refused: None,
    }
}
