//! The control state of one running capsule: the settings in force and the injected secrets,
//! changed by a controller (the door's `/control`) or by the agent (`switch-driver`).
//!
//! What it promises:
//!
//! - **Settings.** `inference.driver` (a choice name; a launch starts on `primary`) and
//!   `inference.max_tokens` (the output cap of every later call, whatever the choice; until set,
//!   each choice's own cap). A controller may change what `control.settings` lists; the agent
//!   what `control.agent_settings` lists. Anything else is refused and nothing changes.
//! - **Secrets.** `control.secrets` names may be injected and forgotten; an injected credential
//!   reads the new value on its next request.
//! - **The checks, under one lock.** A switch is refused `409 credential_unresolvable` unless the
//!   choice's credential can produce a value now; forgetting the secret that keys the choice in
//!   use is refused `409 in_use`. Both are decided under the same lock, so no switch and forget
//!   can interleave to leave the loop on a choice without a credential.
//! - **Every change and refusal is a trace event** (`control_change`, `control_refused`) naming
//!   its principal; one made before the session's trace exists is written when it does. A
//!   secret's value is never written anywhere.
//!
//! Refusal statuses: 403 not granted to the principal, 404 no such setting or secret, 422 a
//! value of the wrong kind (or a choice that does not exist), 409 as above.

use std::sync::{Arc, Mutex};

use murmur_manifest::capsule::Setting;
use serde_json::{Value, json};

use crate::inference::choices::DriverChoice;
use crate::session::Staged;
use murmur_trace::Trace;
use murmur_trace::schema::EventBody;

/// Who asks for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    /// Through the control plane, with the session's token.
    Controller,
    /// The agent, through its `switch-driver` tool.
    Agent,
}

impl Principal {
    pub fn as_str(self) -> &'static str {
        match self {
            Principal::Controller => "controller",
            Principal::Agent => "agent",
        }
    }
}

/// Why a change was refused: an HTTP status, a machine-readable reason and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRefusal {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ControlRefusal {
    fn new(status: u16, reason: &'static str, message: impl Into<String>) -> ControlRefusal {
        ControlRefusal {
            status,
            reason,
            message: message.into(),
        }
    }

    /// The JSON body a refusal is answered with.
    pub fn body(&self) -> Value {
        json!({"error": self.reason, "message": self.message})
    }
}

/// The settings in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settings {
    /// The selected choice's index.
    driver: usize,
    /// A controller's `inference.max_tokens`, when one was set.
    max_tokens: Option<u32>,
}

/// The control state of one launch.
pub struct ControlState {
    staged: Arc<Staged>,
    settings: Mutex<Settings>,
    trace: Mutex<TraceSlot>,
}

/// Where events go: the trace once it exists, a queue until then.
#[derive(Default)]
struct TraceSlot {
    trace: Option<(Trace, String)>,
    pending: Vec<EventBody>,
}

impl ControlState {
    /// A launch's control state: on `primary`, no `max_tokens` set.
    pub fn new(staged: Arc<Staged>) -> Arc<ControlState> {
        Arc::new(ControlState {
            staged,
            settings: Mutex::new(Settings {
                driver: 0,
                max_tokens: None,
            }),
            trace: Mutex::new(TraceSlot::default()),
        })
    }

    /// A launch's control state on the choice at `index` of `staged.choices` (the operator's
    /// pick at launch, as `mur eval`'s arms make it; no grant is asked and no change recorded);
    /// `primary` when there is no such choice.
    pub fn starting_on(staged: Arc<Staged>, index: usize) -> Arc<ControlState> {
        let index = if index < staged.choices.len() {
            index
        } else {
            0
        };
        let state = ControlState::new(staged);
        state.settings().driver = index;
        state
    }

    fn settings(&self) -> std::sync::MutexGuard<'_, Settings> {
        self.settings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes events to `trace` under `parent` from now on, after any that waited for it.
    pub fn attach_trace(&self, trace: Trace, parent: String) -> std::io::Result<()> {
        let mut slot = self.trace.lock().unwrap_or_else(|p| p.into_inner());
        for event in std::mem::take(&mut slot.pending) {
            trace.write(Some(&parent), event)?;
        }
        slot.trace = Some((trace, parent));
        Ok(())
    }

    fn record(&self, event: EventBody) {
        let mut slot = self.trace.lock().unwrap_or_else(|p| p.into_inner());
        match &slot.trace {
            // A failed write here is the session's to notice: its next write fails too.
            Some((trace, parent)) => {
                let _ = trace.write(Some(parent), event);
            }
            None => slot.pending.push(event),
        }
    }

    /// The index of the choice in force.
    pub fn selected(&self) -> usize {
        self.settings().driver
    }

    /// The output cap of the next call on `choice`: a controller's `inference.max_tokens`, else
    /// the choice's own.
    pub fn max_tokens_for(&self, choice: &DriverChoice) -> u32 {
        self.settings()
            .max_tokens
            .unwrap_or(choice.limits.limits.max_output_tokens)
    }

    /// Whether a switch to `choice` would be accepted now: its credential can produce a value.
    pub fn available(&self, choice: &DriverChoice) -> bool {
        self.staged
            .driver_named(&choice.driver)
            .is_some_and(|driver| driver.credential_available())
    }

    /// What `GET /control` answers: the settings in force, the choices, what may be changed,
    /// and which secrets hold a value (never the value).
    pub fn snapshot(&self) -> Value {
        let settings = *self.settings();
        let choices = &self.staged.choices;
        let selected = choices.get(settings.driver).unwrap_or(choices.primary());
        let control = &self.staged.capsule.control;
        json!({
            "settings": {
                "inference.driver": selected.name,
                "inference.max_tokens": settings.max_tokens.unwrap_or(selected.limits.limits.max_output_tokens),
            },
            "choices": choices.listing(|choice| self.available(choice)),
            "controllable": control.settings.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "agent_settings": control.agent_settings.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "secrets": control.secrets.iter().map(|name| json!({
                "name": name,
                "injected": self.staged.secrets.has(name),
            })).collect::<Vec<_>>(),
        })
    }

    /// Changes setting `name` to `value` for `principal`; the settings in force after it.
    pub fn set(
        &self,
        name: &str,
        value: &Value,
        principal: Principal,
        task_id: Option<&str>,
    ) -> Result<Value, ControlRefusal> {
        let outcome = self.try_set(name, value, principal);
        match &outcome {
            Ok((from, to)) => self.record(EventBody::ControlChange {
                principal: principal.as_str().to_string(),
                target: name.to_string(),
                action: "set".to_string(),
                from: from.clone(),
                to: to.clone(),
                task_id: task_id.map(str::to_string),
            }),
            Err(refusal) => self.refused(principal, name, "set", refusal, task_id),
        }
        outcome.map(|_| self.snapshot()["settings"].clone())
    }

    fn refused(
        &self,
        principal: Principal,
        target: &str,
        action: &str,
        refusal: &ControlRefusal,
        task_id: Option<&str>,
    ) {
        self.record(EventBody::ControlRefused {
            principal: principal.as_str().to_string(),
            target: target.to_string(),
            action: action.to_string(),
            status: refusal.status,
            reason: refusal.reason.to_string(),
            message: refusal.message.clone(),
            task_id: task_id.map(str::to_string),
        });
    }

    fn try_set(
        &self,
        name: &str,
        value: &Value,
        principal: Principal,
    ) -> Result<(Value, Value), ControlRefusal> {
        let setting = match name {
            "inference.driver" => Setting::InferenceDriver,
            "inference.max_tokens" => Setting::InferenceMaxTokens,
            other => {
                return Err(ControlRefusal::new(
                    404,
                    "unknown_setting",
                    format!(
                        "there is no setting `{other}`; the settings are inference.driver and inference.max_tokens"
                    ),
                ));
            }
        };
        let control = &self.staged.capsule.control;
        let granted = match principal {
            Principal::Controller => &control.settings,
            Principal::Agent => &control.agent_settings,
        };
        if !granted.contains(&setting) {
            let field = match principal {
                Principal::Controller => "control.settings",
                Principal::Agent => "control.agent_settings",
            };
            return Err(ControlRefusal::new(
                403,
                "not_granted",
                format!("`{name}` is not in `{field}`"),
            ));
        }
        let choices = &self.staged.choices;
        match setting {
            Setting::InferenceDriver => {
                let Some(wanted) = value.as_str() else {
                    return Err(ControlRefusal::new(
                        422,
                        "invalid_value",
                        format!(
                            "`inference.driver` takes a choice name (one of {})",
                            choices.names()
                        ),
                    ));
                };
                let Some(index) = choices.index_of(wanted) else {
                    return Err(ControlRefusal::new(
                        422,
                        "unknown_choice",
                        format!(
                            "there is no choice `{wanted}`; the choices are {}",
                            choices.names()
                        ),
                    ));
                };
                let choice = choices.get(index).unwrap_or(choices.primary());
                // The switch check: under the settings lock, which forget also holds.
                let mut settings = self.settings();
                if !self.available(choice) {
                    let credential = choice
                        .unresolved_credential
                        .as_deref()
                        .or(choice.injected_secret.as_deref())
                        .unwrap_or("its credential");
                    return Err(ControlRefusal::new(
                        409,
                        "credential_unresolvable",
                        format!(
                            "choice `{wanted}` cannot be used: the credential `{credential}` of driver `{}` has no value",
                            choice.driver
                        ),
                    ));
                }
                let from = choices
                    .get(settings.driver)
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                settings.driver = index;
                Ok((json!(from), json!(wanted)))
            }
            Setting::InferenceMaxTokens => {
                let Some(cap) = value
                    .as_u64()
                    .filter(|cap| *cap >= 1)
                    .and_then(|cap| u32::try_from(cap).ok())
                else {
                    return Err(ControlRefusal::new(
                        422,
                        "invalid_value",
                        "`inference.max_tokens` takes a whole number from 1 to 4294967295",
                    ));
                };
                let mut settings = self.settings();
                let from = settings.max_tokens.map_or(Value::Null, |v| json!(v));
                settings.max_tokens = Some(cap);
                Ok((from, json!(cap)))
            }
        }
    }

    fn secret_declared(&self, name: &str) -> Result<(), ControlRefusal> {
        if self
            .staged
            .capsule
            .control
            .secrets
            .iter()
            .any(|s| s == name)
        {
            Ok(())
        } else {
            Err(ControlRefusal::new(
                404,
                "unknown_secret",
                format!("`{name}` is not in `control.secrets`"),
            ))
        }
    }

    /// Injects secret `name` (a controller's only).
    pub fn put_secret(&self, name: &str, value: &str) -> Result<(), ControlRefusal> {
        let target = format!("secrets/{name}");
        let outcome = self.secret_declared(name).and_then(|()| {
            if value.is_empty() {
                return Err(ControlRefusal::new(
                    422,
                    "invalid_value",
                    "a secret's value cannot be empty; DELETE forgets it",
                ));
            }
            self.staged.secrets.put(name, value);
            Ok(())
        });
        match &outcome {
            Ok(()) => self.record(EventBody::ControlChange {
                principal: Principal::Controller.as_str().to_string(),
                target,
                action: "inject".to_string(),
                from: Value::Null,
                to: Value::Null,
                task_id: None,
            }),
            Err(refusal) => self.refused(Principal::Controller, &target, "inject", refusal, None),
        }
        outcome
    }

    /// Forgets secret `name`, unless it keys the choice in force.
    pub fn forget_secret(&self, name: &str) -> Result<(), ControlRefusal> {
        let target = format!("secrets/{name}");
        let outcome = self.secret_declared(name).and_then(|()| {
            // The forget check: under the settings lock, which the switch also holds.
            let settings = self.settings();
            let choices = &self.staged.choices;
            let in_force = choices.get(settings.driver).unwrap_or(choices.primary());
            if in_force.injected_secret.as_deref() == Some(name) {
                return Err(ControlRefusal::new(
                    409,
                    "in_use",
                    format!(
                        "`{name}` keys choice `{}`, which is in use; switch to another choice first",
                        in_force.name
                    ),
                ));
            }
            self.staged.secrets.forget(name);
            Ok(())
        });
        match &outcome {
            Ok(()) => self.record(EventBody::ControlChange {
                principal: Principal::Controller.as_str().to_string(),
                target,
                action: "forget".to_string(),
                from: Value::Null,
                to: Value::Null,
                task_id: None,
            }),
            Err(refusal) => self.refused(Principal::Controller, &target, "forget", refusal, None),
        }
        outcome
    }
}
