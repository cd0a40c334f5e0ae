//! `murmur:tool-registry/invoke`: a capsule component calls a tool by name.
//!
//! What a capsule component can rely on, and what it cannot change:
//!
//! - **Only allowlisted tools are called.** The allowlist is the capsule's declared
//!   `runtime: tool` artifacts, plus the WASM tools the component pulled in this session
//!   ([`super::artifacts`]), which join it as soon as their pull returns. Any other name is an
//!   error naming the allowlisted tools, and nothing is called.
//! - **Input is checked first.** When a tool declares an `input_schema`, `data` must be JSON
//!   matching it; otherwise the call is refused (`error[E-RUN-009]: …`) and nothing runs.
//! - **A tool runs as it would for an agent.** One fresh instance under the grants every tool of
//!   the capsule gets (the session workdir, `capabilities.env.allow`, the network allowlist, the
//!   limits), with its entry's `config:` as `MURMUR_ARTIFACT_CONFIG`. Its `tool-result` comes
//!   back as the tool returned it (`data` read from `data-path` when the tool used one).
//! - **A stopped tool is an error, not a trap of the caller.** A deadline, a memory limit, a
//!   trap or a load failure of the tool comes back as `Err("error[<code>]: …")`.
//! - **Every call is recorded** ([`Invoked`]); the session writes each as a `tool_call` event.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::bindings::capsule::murmur::tool::run::{
    Status as WitStatus, ToolInput as WitInput, ToolResult as WitResult,
};
use crate::bindings::capsule::murmur::tool_registry::invoke::Host;
use crate::error::RuntimeError;
use crate::tool::{ToolCallReport, ToolInput, ToolStatus};
use murmur_manifest::Coded;
use murmur_trace::schema::{CallStatus, ErrorRef};
use murmur_trace::{EventBody, Trace};

/// How the registry reaches a tool: through the runtime's one call path, behind a trait so
/// that this capability needs nothing of the engine.
pub trait CallTool: Send + Sync {
    /// One call of the tool with `input`, under the grants it was bound to.
    fn call(&self, input: ToolInput) -> Pin<Box<dyn Future<Output = ToolCallReport> + Send + '_>>;
}

/// Makes a tool pulled mid-session callable: loads its component and binds it to the grants
/// pulled tools run under.
pub trait LoadTool: Send + Sync {
    fn load(&self, name: &str, component: &Path) -> Result<Arc<dyn CallTool>, RuntimeError>;
}

/// A tool a capsule component may call.
#[derive(Clone)]
pub struct AllowedTool {
    /// The tool, bound to the grants each call runs under.
    pub tool: Arc<dyn CallTool>,
    /// The tool's `input_schema`, compiled, when it declares one.
    pub input_schema: Option<Arc<jsonschema::Validator>>,
}

impl AllowedTool {
    /// Why `data` is not input this tool accepts, if it is not.
    fn refuse_input(&self, name: &str, data: Option<&str>) -> Option<String> {
        let validator = self.input_schema.as_ref()?;
        let value: serde_json::Value = match data.map(serde_json::from_str) {
            Some(Ok(value)) => value,
            Some(Err(error)) => {
                return Some(format!("the input of `{name}` is not JSON: {error}"));
            }
            None => serde_json::Value::Object(Default::default()),
        };
        schema_refusal(name, validator, &value)
    }
}

/// Why `input` does not match the `input_schema` of `tool`, if it does not: every problem, each
/// at its place in the input (`/path: …`). The one wording of an `E-RUN-009` schema refusal,
/// for the model's tool calls, the shell and a capsule component's calls alike.
pub fn schema_refusal(
    tool: &str,
    validator: &jsonschema::Validator,
    input: &serde_json::Value,
) -> Option<String> {
    let problems: Vec<String> = validator
        .iter_errors(input)
        .map(|error| {
            let at = error.instance_path().to_string();
            if at.is_empty() {
                error.to_string()
            } else {
                format!("{at}: {error}")
            }
        })
        .collect();
    (!problems.is_empty()).then(|| {
        format!(
            "the input does not match the input_schema of `{tool}`: {}",
            problems.join("; ")
        )
    })
}

/// Compiles the `input_schema` of the tool `tool`: the one place a schema that is not valid
/// JSON Schema is refused (`E-MAN-018`), for an agent's tools and a capsule component's alike.
pub fn compile_input_schema(
    tool: &str,
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, Box<murmur_manifest::Diagnostic>> {
    jsonschema::validator_for(schema).map_err(|error| {
        Box::new(
            murmur_manifest::Diagnostic::new(
                "E-MAN-018",
                format!("the input_schema of tool `{tool}` is not a valid JSON Schema: {error}"),
            )
            .hint("fix `input_schema` in the tool's murmur.yaml"),
        )
    })
}

/// Starts building, on another thread, what checking a tool's `input_schema` against the JSON
/// Schema meta-schema needs (about a millisecond, once a process), so that staging the first
/// tool does not wait for it.
pub fn prepare_schema_checks() {
    std::thread::spawn(|| jsonschema::meta::is_valid(&serde_json::json!({"type": "object"})));
}

/// The tools a capsule component may call, by name. Shared with the artifact manager, which
/// adds what it pulls.
#[derive(Default)]
pub struct Allowlist {
    tools: Mutex<BTreeMap<String, AllowedTool>>,
}

impl Allowlist {
    /// Allows `name` (replacing an earlier tool of that name).
    pub fn allow(&self, name: &str, tool: AllowedTool) {
        self.lock().insert(name.to_string(), tool);
    }

    /// The tool allowed as `name`.
    pub fn get(&self, name: &str) -> Option<AllowedTool> {
        self.lock().get(name).cloned()
    }

    /// Every allowed name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, AllowedTool>> {
        self.tools
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// One `invoke`, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoked {
    pub tool: String,
    /// `refused` when not allowlisted or the input was refused: not called.
    pub status: CallStatus,
    pub output_bytes: u64,
    pub duration_ms: u64,
    pub error: Option<ErrorRef>,
    /// Requests a grant refused during the call.
    pub refusals: Vec<String>,
    /// What the tool declared of the resource it addressed (`read`/`mutate`, its id).
    pub state_effect: Option<String>,
    pub resource_id: Option<String>,
    /// The input's path-like field: the redundancy detector's fallback.
    pub input_path: Option<String>,
}

/// The per-call state of the tool-registry grant of a capsule component's store.
pub struct ToolRegistryGrant {
    pub(crate) allowlist: Arc<Allowlist>,
    pub(crate) calls: Vec<Invoked>,
    /// Where each call is written as a `tool_call` event, as it ends.
    pub(crate) trace: Option<CallTrace>,
    /// Set when a `tool_call` line could not be written: the session then fails.
    pub(crate) trace_failed: bool,
}

/// Where a capsule component's calls are traced.
#[derive(Clone)]
pub struct CallTrace {
    pub trace: Trace,
    /// The `task_start` event of the component's run.
    pub parent: String,
    pub task_id: String,
}

impl ToolRegistryGrant {
    /// A component's registry: the tools of `allowlist`, its calls traced at `trace`.
    pub fn new(allowlist: Arc<Allowlist>, trace: Option<CallTrace>) -> ToolRegistryGrant {
        ToolRegistryGrant {
            allowlist,
            calls: Vec::new(),
            trace,
            trace_failed: false,
        }
    }

    /// Records one call, and writes it to the trace.
    fn record(&mut self, call: Invoked) {
        if let Some(at) = &self.trace {
            let event = EventBody::ToolCall {
                task_id: at.task_id.clone(),
                turn: 0,
                call_id: format!("call_{}", uuid::Uuid::new_v4().simple()),
                tool_name: call.tool.clone(),
                status: call.status,
                is_error: call.status != CallStatus::Passed,
                state_effect: call.state_effect.clone(),
                resource_id: call.resource_id.clone(),
                input_path: call.input_path.clone(),
                output_bytes: call.output_bytes,
                duration_ms: call.duration_ms,
                summary: None,
                error: call.error.clone(),
                refusals: call.refusals.clone(),
            };
            if at.trace.write(Some(&at.parent), event).is_err() {
                self.trace_failed = true;
            }
        }
        self.calls.push(call);
    }
}

impl Host for Option<ToolRegistryGrant> {
    async fn invoke(
        &mut self,
        name: String,
        input: WitInput,
    ) -> wasmtime::Result<Result<WitResult, String>> {
        let started = Instant::now();
        let input_path = input
            .data
            .as_deref()
            .and_then(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .and_then(|value| murmur_trace::schema::input_path(&value));
        let Some(grant) = self.as_mut() else {
            return Ok(Err(
                "murmur:tool-registry/invoke is available to capsule components only".to_string(),
            ));
        };
        let Some(tool) = grant.allowlist.get(&name) else {
            let names = grant.allowlist.names();
            let known = if names.is_empty() {
                "no tool is allowlisted".to_string()
            } else {
                format!("the allowlisted tools are: {}", names.join(", "))
            };
            let text = format!("`{name}` is not an allowlisted tool; {known}");
            grant.record(Invoked {
                tool: name,
                status: CallStatus::Refused,
                output_bytes: 0,
                duration_ms: started.elapsed().as_millis() as u64,
                error: Some(ErrorRef {
                    code: "E-RUN-014".to_string(),
                    message: text.clone(),
                }),
                refusals: Vec::new(),
                state_effect: None,
                resource_id: None,
                input_path: input_path.clone(),
            });
            return Ok(Err(text));
        };
        if let Some(text) = tool.refuse_input(&name, input.data.as_deref()) {
            grant.record(Invoked {
                tool: name,
                status: CallStatus::Refused,
                output_bytes: 0,
                duration_ms: started.elapsed().as_millis() as u64,
                error: Some(ErrorRef {
                    code: "E-RUN-009".to_string(),
                    message: text.clone(),
                }),
                refusals: Vec::new(),
                state_effect: None,
                resource_id: None,
                input_path: input_path.clone(),
            });
            return Ok(Err(format!("error[E-RUN-009]: {text}")));
        }
        let report = tool
            .tool
            .call(ToolInput {
                data: input.data,
                log_path: input.log_path,
            })
            .await;
        let refusals = report
            .refusals
            .iter()
            .map(|r| format!("{} {} ({})", r.grant, r.target, r.reason))
            .collect();
        let duration_ms = report.duration.as_millis() as u64;
        let (record, answer) = match report.outcome {
            Ok(output) => {
                let result = output.result;
                let data = output.output.or(result.data);
                let record = Invoked {
                    tool: name,
                    status: result.status.into(),
                    output_bytes: data.as_ref().map_or(0, |d| d.len() as u64),
                    duration_ms,
                    error: None,
                    refusals,
                    state_effect: output
                        .state_effect
                        .map(|effect| effect.as_str().to_string()),
                    resource_id: output.resource_id,
                    input_path,
                };
                let answer = WitResult {
                    status: match result.status {
                        ToolStatus::Passed => WitStatus::Passed,
                        ToolStatus::Failed => WitStatus::Failed,
                        ToolStatus::Error => WitStatus::Error,
                    },
                    summary: result.summary,
                    data,
                    data_path: result.data_path,
                    truncated: result.truncated,
                    metadata: result.metadata,
                };
                (record, Ok(answer))
            }
            Err(error) => {
                let text = format!("error[{}]: {error}", error.code());
                let record = Invoked {
                    tool: name,
                    status: CallStatus::Error,
                    output_bytes: 0,
                    duration_ms,
                    error: Some(ErrorRef {
                        code: error.code().to_string(),
                        message: error.to_string(),
                    }),
                    refusals,
                    state_effect: None,
                    resource_id: None,
                    input_path,
                };
                (record, Err(text))
            }
        };
        if let Some(grant) = self.as_mut() {
            grant.record(record);
        }
        Ok(answer)
    }
}

/// `murmur:tool/run` comes into the `capsule` world for the types `invoke` uses; its `run` is a
/// tool's export, never the host's, so calling it traps.
impl crate::bindings::capsule::murmur::tool::run::Host for Option<ToolRegistryGrant> {
    async fn run(&mut self, _input: WitInput) -> wasmtime::Result<WitResult> {
        Err(wasmtime::Error::msg(
            "murmur:tool/run is exported by tools, not provided by the host: call a tool with \
             murmur:tool-registry/invoke",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The one wording of a schema refusal: the tool named, and every problem at its place in
    /// the input, so a model, the shell's caller or a capsule component can find it.
    #[test]
    fn a_schema_refusal_names_the_tool_and_where_each_problem_is() {
        let schema = json!({
            "type": "object",
            "required": ["path"],
            "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}}
        });
        let validator = compile_input_schema("read-file", &schema).unwrap();
        assert_eq!(
            schema_refusal("read-file", &validator, &json!({"path": "a.md"})),
            None
        );
        let refusal =
            schema_refusal("read-file", &validator, &json!({"path": 3, "bytes": "x"})).unwrap();
        assert!(
            refusal.starts_with("the input does not match the input_schema of `read-file`: "),
            "{refusal}"
        );
        assert!(refusal.contains("/path: "), "{refusal}");
        assert!(refusal.contains("/bytes: "), "{refusal}");
        let missing = schema_refusal("read-file", &validator, &json!({})).unwrap();
        assert!(
            missing.contains("\"path\" is a required property"),
            "{missing}"
        );
    }
}
