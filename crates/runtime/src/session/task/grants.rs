//! What each component of an agent session may touch, read from the manifest once as the
//! session begins: the grants of every driver choice, tool and hook, the shell's, and their
//! listing for `session_start`.
//!
//! - Every component starts from the capsule's grants ([`Grants::of_capsule`]) with its own
//!   environment ([`component_env`]: identity, its config, `capabilities.env.allow`), narrowed
//!   to its artifact entry ([`Grants::narrow`]).
//! - A driver choice adds `MURMUR_INFERENCE_*` for its target, its gateway ahead of what its
//!   entry allows, its credential, and streams its text to the session's observer.
//! - A tool and a hook see `MURMUR_INFERENCE_*` naming the primary choice for the whole
//!   session, whatever is selected. A tool streams to the observer too; a hook runs under its
//!   own deadline.
//! - The shell's grant is every shell call's ([`crate::session::shell::grant`]).

use murmur_confine::ShellGrant;
use murmur_trace::schema::ComponentGrants;
use serde_json::Value;

use crate::grants::env::{HostEnv, Identity, InferenceTarget, component_env};
use crate::grants::{ChunkSink, Grants};
use crate::session::Staged;
use crate::session::workdir::Workdir;

/// The grants of one agent session's components, by position in [`Staged`]'s lists.
pub(super) struct SessionGrants {
    /// One per driver choice, in the order of `staged.choices`.
    pub choices: Vec<Grants>,
    /// One per tool, in the order of `staged.tools`.
    pub tools: Vec<Grants>,
    /// One per hook, in the order of `staged.hooks`.
    pub hooks: Vec<Grants>,
    pub shell: Option<ShellGrant>,
    /// What `session_start` lists: tools, hooks, then each driver once.
    pub listing: Vec<ComponentGrants>,
}

impl SessionGrants {
    pub(super) fn of(
        staged: &Staged,
        host_env: &HostEnv,
        session_id: &str,
        workdir: &Workdir,
        sink: ChunkSink,
        containment: (
            &murmur_confine::Achieved,
            &crate::session::containment::RefusalLog,
        ),
    ) -> SessionGrants {
        let capsule = &staged.capsule;
        let identity = Identity::of(capsule, Some(session_id));
        let lookup = {
            let host_env = host_env.clone();
            move |name: &str| host_env(name)
        };
        let allow = &capsule.capabilities.env.allow;
        let mut base = Grants::of_capsule(capsule, &workdir.workspace);
        base.peers = staged.peers.clone();
        // What the artifact named `name` holds: its entry's narrowing of the capsule's grants.
        let planned = |name: &str| capsule.artifact(name).map(|entry| capsule.grants_of(entry));
        // Tools and hooks are told of the primary choice for the whole session, whatever the
        // agent selects: a switch moves only the agent loop's calls.
        let primary = InferenceTarget {
            endpoint: staged
                .driver
                .as_ref()
                .map(|driver| driver.endpoint.clone())
                .unwrap_or_default(),
            model: staged.choices.primary().model.clone(),
            driver: staged.choices.primary().driver.clone(),
            config: None,
        }
        .env();
        let component_grants = |name: &str, config: Option<&Value>| {
            let mut grants = base.clone();
            grants.env = component_env(&identity, config, allow, &lookup);
            grants.env.extend(primary.iter().cloned());
            grants.narrow(planned(name).as_ref(), None);
            grants
        };
        // Under `transport: process` there is no driver: the one choice holds the capsule's
        // grants and nothing is called with them.
        let choices: Vec<Grants> = staged
            .choices
            .iter()
            .map(|choice| {
                let Some(driver) = staged
                    .driver_named(&choice.driver)
                    .or(staged.driver.as_ref())
                else {
                    return base.clone();
                };
                let mut grants = base.clone();
                grants.env = component_env(&identity, driver.config.as_ref(), allow, &lookup);
                grants.env.extend(
                    InferenceTarget {
                        endpoint: driver.endpoint.clone(),
                        model: choice.model.clone(),
                        driver: driver.name.clone(),
                        config: driver.config.clone(),
                    }
                    .env(),
                );
                // Its gateway, then what its entry adds within the capsule's allowlist.
                grants.narrow(planned(&driver.name).as_ref(), driver.network.clone());
                grants.credential = driver.credential.clone();
                grants.cassette = staged.session_cassette();
                grants.chunks = Some(sink.clone());
                grants
            })
            .collect();
        let tools: Vec<Grants> = staged
            .tools
            .iter()
            .map(|tool| {
                let mut grants = component_grants(&tool.spec.name, tool.config.as_ref());
                grants.chunks = Some(sink.clone());
                grants
            })
            .collect();
        let hooks: Vec<Grants> = staged
            .hooks
            .iter()
            .map(|hook| {
                let mut grants = component_grants(&hook.name, hook.config.as_ref());
                grants.limits.deadline = hook.deadline;
                grants
            })
            .collect();
        let shell = crate::session::shell::grant(capsule, workdir, host_env, containment);
        let mut listing: Vec<ComponentGrants> = Vec::new();
        for (tool, grants) in staged.tools.iter().zip(&tools) {
            listing.push(grants.listing(&tool.spec.name, "tool"));
        }
        for (hook, grants) in staged.hooks.iter().zip(&hooks) {
            listing.push(grants.listing(&hook.name, "hook"));
        }
        for (choice, grants) in staged.choices.iter().zip(&choices) {
            if staged.driver.is_some()
                && !listing
                    .iter()
                    .any(|g| g.runtime == "driver" && g.name == choice.driver)
            {
                listing.push(grants.listing(&choice.driver, "driver"));
            }
        }
        if let Some(cli) = &staged.process {
            listing.push(cli.grants(host_env, &base.read_only));
        }
        SessionGrants {
            choices,
            tools,
            hooks,
            shell,
            listing,
        }
    }
}
