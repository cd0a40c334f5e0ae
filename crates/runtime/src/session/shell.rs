//! One shell call, the same whoever makes it: the model's `shell` tool or a capsule
//! component's `murmur:shell/execute`.
//!
//! What a caller can rely on:
//!
//! - **One grant** ([`grant`]): when `capabilities.shell.allow` names any binary, the shell
//!   sees the session workdir as its cwd, the capsule's read-only paths as they are, the
//!   environment `capabilities.env.allow` lets through without the `MURMUR_*` identity, the
//!   ports of the network allowlist, and a time limit within the capsule's deadline. A capsule
//!   that allows no binary has no shell: every request is refused (`E-CAP-006`).
//! - **One path a call** ([`call`]): the allowlist first (a refused binary is never spawned;
//!   the refusal is traced as a `shell` event with its error), then the `on-shell` decision
//!   point (a denial is traced as `call_denied`, nothing is spawned), then the run, traced as a
//!   `shell` event. Whatever was admitted (it ran, failed to start, or was denied) comes back
//!   with its `on-shell` observation for the caller to dispatch. A non-zero exit is data.

use std::time::{Duration, Instant};

use murmur_confine::describe::{Described, describe};
use murmur_confine::{ShellGrant, ShellOutput, ShellRequest, TimeLimits};
use murmur_manifest::Coded;
use murmur_manifest::capsule::CapsuleManifest;
use murmur_trace::Trace;
use murmur_trace::schema::{ErrorRef, EventBody};

use crate::grants::env::{HostEnv, Identity, component_env};
use crate::hooks::events::{HookEvent, ShellEvent, ShellOutcome};
use crate::hooks::{HookSet, Scope};
use crate::session::workdir::Workdir;

/// How long a shell call may run when it names no limit.
const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(60);

/// The shell grant of `capsule`'s sessions in `workdir`, when it allows any binary.
pub(crate) fn grant(
    capsule: &CapsuleManifest,
    workdir: &Workdir,
    host_env: &HostEnv,
    (containment, refusals): (
        &murmur_confine::Achieved,
        &crate::session::containment::RefusalLog,
    ),
) -> Option<ShellGrant> {
    let capabilities = &capsule.capabilities;
    if capabilities.shell.allow.is_empty() {
        return None;
    }
    let deadline = capabilities
        .limits
        .deadline_seconds
        .map(Duration::from_secs)
        .unwrap_or(crate::engine::limits::DEFAULT_DEADLINE);
    let lookup = |name: &str| host_env(name);
    let env = component_env(&Identity::default(), None, &capabilities.env.allow, &lookup)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("MURMUR_"))
        .collect();
    let mut confinement = crate::session::containment::confinement(
        capsule,
        containment,
        capabilities.network.allow.clone(),
        &workdir.workspace,
    );
    confinement.on_refused = Some(refusals.sink("shell"));
    Some(
        ShellGrant::new(
            &capabilities.shell.allow,
            &lookup("PATH").unwrap_or_default(),
            workdir.workspace_dir().clone(),
            env,
            confinement,
            TimeLimits {
                default: DEFAULT_SHELL_TIMEOUT.min(deadline),
                max: deadline,
            },
        )
        .with_workdir_limit(capabilities.resources.workdir_max_bytes),
    )
}

/// A refusal before anything ran: its code and message.
pub(crate) type Refused = (String, String);

/// A request the allowlist admits, and the grant it runs under.
pub(crate) struct Admitted<'g> {
    pub request: ShellRequest,
    pub grant: &'g ShellGrant,
}

/// `request` checked against the allowlist of `grant` (none: no shell is granted), and how
/// the call is shown whichever it is.
pub(crate) fn admit<'g>(
    grant: Option<&'g ShellGrant>,
    request: ShellRequest,
    workdir: &Workdir,
) -> (Result<Admitted<'g>, Refused>, Described) {
    let refused = |request: &ShellRequest, refusal: Refused| {
        let described = describe(
            &request.binary,
            None,
            &request.args,
            workdir.workspace_dir(),
        );
        (Err(refusal), described)
    };
    let Some(grant) = grant else {
        let refusal = (
            "E-CAP-006".to_string(),
            format!(
                "`{}` was not run: the capsule allows no binary (capabilities.shell.allow is empty)",
                request.binary
            ),
        );
        return refused(&request, refusal);
    };
    match grant.check(&request.binary) {
        Ok(_) => {
            let described = grant.describe(&request);
            (Ok(Admitted { request, grant }), described)
        }
        Err(error) => refused(&request, (error.code().to_string(), error.to_string())),
    }
}

/// Where one shell call happens: in which session and task, under which trace event, as
/// which call, and what it runs.
pub(crate) struct ShellSite<'a> {
    pub session_id: &'a str,
    pub task_id: &'a str,
    /// The turn of the model's call; 0 for a capsule component's.
    pub turn: u32,
    /// The trace event the call's events hang under.
    pub parent: &'a str,
    pub call_id: &'a str,
    pub described: &'a Described,
    pub started: Instant,
}

impl ShellSite<'_> {
    /// The `shell` trace event of this call: what ran (`output`), or why nothing did
    /// (`error`).
    fn event(&self, output: Option<&ShellOutput>, error: Option<ErrorRef>) -> EventBody {
        let described = self.described;
        EventBody::Shell {
            task_id: self.task_id.to_string(),
            turn: self.turn,
            call_id: self.call_id.to_string(),
            binary: described.binary.clone(),
            command: described.command.clone(),
            argv: described.argv.clone(),
            script: described.script.clone(),
            recipe: described.recipe.clone(),
            exit_code: output.and_then(|o| o.exit_code),
            stdout_bytes: output.map_or(0, |o| o.stdout_bytes),
            stderr_bytes: output.map_or(0, |o| o.stderr_bytes),
            truncated: output.is_some_and(|o| o.truncated),
            full_output_path: output.and_then(|o| o.full_output_path.clone()),
            timed_out: output.is_some_and(|o| o.timed_out),
            duration_ms: output.map_or_else(
                || self.started.elapsed().as_millis() as u64,
                |o| o.duration.as_millis() as u64,
            ),
            error,
            contained: output
                .filter(|o| !o.contained.is_empty())
                .and_then(|o| serde_json::to_value(&o.contained).ok()),
        }
    }

    /// The `on-shell` event of this call: before it runs (`outcome: none`), or after.
    pub(crate) fn hook_event(&self, outcome: Option<ShellOutcome>) -> HookEvent {
        let described = self.described;
        HookEvent::Shell(ShellEvent {
            session_id: self.session_id.to_string(),
            task_id: self.task_id.to_string(),
            binary: described.binary.clone(),
            command: described.command.clone(),
            argv: described.argv.clone(),
            script: described.script.clone(),
            recipe: described.recipe.clone(),
            outcome,
        })
    }
}

/// How one shell call ended.
pub(crate) struct ShellAnswer {
    /// What the process produced, or why none ran (`error[CODE]: …`, or the hook's denial).
    pub output: Result<ShellOutput, String>,
    /// The `on-shell` observation, for every call that got past the allowlist.
    pub observation: Option<HookEvent>,
}

/// One call, admitted or refused by [`admit`]: the decision point, the run, the trace.
/// Only writing the trace fails it.
pub(crate) async fn call(
    hooks: &HookSet,
    trace: Option<&Trace>,
    site: &ShellSite<'_>,
    admitted: Result<Admitted<'_>, Refused>,
    scope: &Scope,
) -> std::io::Result<ShellAnswer> {
    let write = |body: EventBody| match trace {
        Some(trace) => trace.write(Some(site.parent), body).map(drop),
        None => Ok(()),
    };
    let Admitted { request, grant } = match admitted {
        Ok(admitted) => admitted,
        Err((code, message)) => {
            let text = format!("error[{code}]: {message}");
            write(site.event(None, Some(ErrorRef { code, message })))?;
            return Ok(ShellAnswer {
                output: Err(text),
                observation: None,
            });
        }
    };
    if let Some(denial) = hooks.decide(site.hook_event(None), scope).await? {
        let text = denial.text();
        write(denial.event(
            site.task_id,
            site.turn,
            ("shell", site.call_id, &site.described.binary),
        ))?;
        return Ok(ShellAnswer {
            observation: Some(site.hook_event(Some(failed(text.clone(), 0)))),
            output: Err(text),
        });
    }
    match grant.execute(&request).await {
        Ok(output) => {
            write(site.event(Some(&output), None))?;
            let outcome = ShellOutcome {
                exit_code: output.exit_code,
                stdout_bytes: output.stdout_bytes,
                stderr_bytes: output.stderr_bytes,
                truncated: output.truncated,
                duration_ms: output.duration.as_millis() as u64,
                error: output
                    .timed_out
                    .then(|| "the time limit ended it".to_string()),
            };
            Ok(ShellAnswer {
                output: Ok(output),
                observation: Some(site.hook_event(Some(outcome))),
            })
        }
        Err(error) => {
            let text = format!("error[{}]: {error}", error.code());
            let refused = ErrorRef {
                code: error.code().to_string(),
                message: error.to_string(),
            };
            write(site.event(None, Some(refused)))?;
            let elapsed = site.started.elapsed().as_millis() as u64;
            Ok(ShellAnswer {
                observation: Some(site.hook_event(Some(failed(text.clone(), elapsed)))),
                output: Err(text),
            })
        }
    }
}

/// The outcome hooks observe of a shell call that ran nothing (denied, or failed to start).
fn failed(error: String, duration_ms: u64) -> ShellOutcome {
    ShellOutcome {
        exit_code: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
        duration_ms,
        error: Some(error),
    }
}
