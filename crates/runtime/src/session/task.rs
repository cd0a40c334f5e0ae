//! One task through the agent loop: turns of driver call → answer → tool calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::grants::env::{Identity, InferenceTarget, component_env};
use crate::grants::{ChunkSink, Grants, NetworkPolicy};
use crate::inference::cache_key::prompt_cache_key;
use crate::inference::continuation::{Continuation, Plan};
use crate::inference::neutral::{Message, StoredMessage};
use crate::inference::request::{DriverRequest, ToolSpec};
use crate::inference::response::{Answer, StopReason, read_answer};
use crate::inference::tokens::{self, MessageCounts};
use crate::session::tools::{SessionTool, dispatch};
use crate::session::workdir::Workdir;
use crate::session::{
    ExitStatus, Failure, Observer, SessionConfig, Staged, TaskInput, TaskReport, new_id,
};
use crate::tool::ToolInput;
use crate::trace::TraceWriter;
use crate::trace::schema::{EventBody, Sent};

/// The choice every agent-loop call goes through until alternates land.
const PRIMARY: &str = "primary";

/// What every task of one session shares.
pub(crate) struct SessionContext<'a> {
    engine: &'a Engine,
    staged: &'a Staged,
    config: &'a SessionConfig,
    workdir: &'a Workdir,
    observer: Arc<dyn Observer>,
    driver_grants: Grants,
    tools: Vec<SessionTool<'a>>,
    /// The tool inventory as every request carries it.
    specs: Vec<ToolSpec>,
    /// Tokens of the system prompt and the tool inventory: the part every request repeats.
    fixed_tokens: std::sync::OnceLock<u64>,
}

impl<'a> SessionContext<'a> {
    pub(crate) fn new(
        engine: &'a Engine,
        staged: &'a Staged,
        config: &'a SessionConfig,
        session_id: &str,
        workdir: &'a Workdir,
        observer: Arc<dyn Observer>,
    ) -> SessionContext<'a> {
        let capsule = &staged.capsule;
        let identity = Identity {
            capsule_name: capsule.name.clone(),
            capsule_version: capsule.version.clone(),
            session_id: Some(session_id.to_string()),
            capsule_url: None,
        };
        let host_env = config.host_env.clone();
        let lookup = move |name: &str| host_env(name);
        let allow = &capsule.capabilities.env.allow;
        let sink: ChunkSink = {
            let observer = observer.clone();
            Arc::new(move |kind, text: &str| observer.chunk(kind, text))
        };
        let mut base = Grants::new(&workdir.root);
        if let Some(bytes) = capsule.capabilities.limits.memory_bytes {
            base.limits.memory_bytes = bytes;
        }
        if let Some(seconds) = capsule.capabilities.limits.deadline_seconds {
            base.limits.deadline = Duration::from_secs(seconds);
        }
        base.chunks = Some(sink);

        let driver = &staged.driver;
        let mut driver_grants = base.clone();
        driver_grants.env = component_env(&identity, driver.config.as_ref(), allow, &lookup);
        driver_grants.env.extend(
            InferenceTarget {
                endpoint: driver.endpoint.clone(),
                model: staged.model.clone(),
                driver: driver.name.clone(),
            }
            .env(),
        );
        driver_grants.network = NetworkPolicy::allow(vec![driver.network.clone()]);
        driver_grants.credential = driver.credential.clone();

        let read_only: Vec<_> = capsule
            .capabilities
            .filesystem
            .read_only
            .iter()
            .filter_map(|path| path.resolved.canonicalize().ok())
            .collect();
        let tools = staged
            .tools
            .iter()
            .map(|tool| {
                let mut grants = base.clone();
                grants.env = component_env(&identity, tool.config.as_ref(), allow, &lookup);
                grants.network = NetworkPolicy::allow(capsule.capabilities.network.allow.clone());
                grants.read_only = read_only.clone();
                SessionTool {
                    staged: tool,
                    grants,
                }
            })
            .collect();
        SessionContext {
            engine,
            staged,
            config,
            workdir,
            observer,
            driver_grants,
            specs: staged.tools.iter().map(|t| t.spec.clone()).collect(),
            tools,
            fixed_tokens: std::sync::OnceLock::new(),
        }
    }

    fn fixed_tokens(&self) -> u64 {
        *self.fixed_tokens.get_or_init(|| {
            let tools = serde_json::to_string(&self.specs).unwrap_or_default();
            tokens::count(&self.staged.system_prompt) + tokens::count(&tools)
        })
    }

    /// Runs one task to its end; only a failed trace write is an error.
    pub(crate) async fn run_task(
        &self,
        trace: &mut TraceWriter,
        session_event: &str,
        input: &TaskInput,
    ) -> std::io::Result<TaskReport> {
        let task_id = new_id("tsk_", 24);
        let context_id = new_id("ctx_", 24);
        let task_event = trace.write(
            Some(session_event),
            EventBody::TaskStart {
                task_id: task_id.clone(),
                context_id: Some(context_id.clone()),
                source: input.source.as_str().to_string(),
                input_chars: input.text.chars().count() as u64,
            },
        )?;
        self.observer.note(&format!("task {task_id}"));
        let mut run = TaskRun {
            task_id: task_id.clone(),
            context_id: Some(context_id.clone()),
            cache_key: prompt_cache_key(&self.staged.capsule.name, Some(&context_id), &task_id),
            history: vec![StoredMessage::new(Message::user_text(input.text.clone()))],
            continuation: Continuation::default(),
            counts: MessageCounts::default(),
        };
        let (exit_status, turns, error, final_text) =
            self.turns(trace, &task_event, &mut run).await?;
        let result_path = match &final_text {
            Some(text) => match self.workdir.save_result(text) {
                Ok(path) => Some(path),
                Err(error) => return Err(error),
            },
            None => None,
        };
        self.workdir.save_history(&context_id, &run.history)?;
        trace.write(
            Some(&task_event),
            EventBody::TaskEnd {
                task_id: task_id.clone(),
                context_id: Some(context_id.clone()),
                exit_status: exit_status.as_str().to_string(),
                turns,
                result_path: result_path.as_ref().map(|p| p.display().to_string()),
                error: error.as_ref().map(Failure::to_ref),
            },
        )?;
        Ok(TaskReport {
            task_id,
            context_id: Some(context_id),
            exit_status,
            turns,
            result_path,
            error,
        })
    }

    /// The turns of one task: `(exit status, turns taken, failure, final text)`.
    async fn turns(
        &self,
        trace: &mut TraceWriter,
        task_event: &str,
        run: &mut TaskRun,
    ) -> std::io::Result<(ExitStatus, u32, Option<Failure>, Option<String>)> {
        let staged = self.staged;
        for turn in 1..=staged.max_turns {
            let started = Instant::now();
            let plan = run
                .continuation
                .plan(run.context_id.as_deref(), PRIMARY, run.history.len());
            let (from, continuation_id) = match &plan {
                Plan::Full => (0, None),
                Plan::Since { id, from } => (*from, Some(id.as_str())),
            };
            let request = DriverRequest {
                model: &staged.model,
                max_tokens: staged.max_tokens,
                system: Some(&staged.system_prompt),
                messages: run.history[from..].iter().map(|m| &m.message).collect(),
                tools: &self.specs,
                prompt_cache_key: &run.cache_key,
                stream: self.config.stream,
                continuation_id,
            };
            let sent = Sent {
                messages: request.messages.len() as u32,
                full_resend: continuation_id.is_none(),
                continuation_id: continuation_id.map(str::to_string),
            };
            let data = serde_json::to_string(&request).map_err(std::io::Error::other)?;
            let report = self
                .engine
                .call_tool(
                    &staged.driver.component,
                    &self.driver_grants,
                    &ToolInput {
                        data: Some(data),
                        log_path: None,
                    },
                )
                .await;
            let input_estimate = self.fixed_tokens() + run.estimate();
            let answer: Result<Answer, Failure> = match report.outcome {
                Ok(output) => read_answer(&output).map_err(|failure| Failure {
                    code: "E-RUN-011".to_string(),
                    message: match failure.status {
                        Some(status) => format!(
                            "driver `{}` failed (HTTP {status}): {}",
                            staged.driver.name, failure.message
                        ),
                        None => format!(
                            "driver `{}` failed: {}",
                            staged.driver.name, failure.message
                        ),
                    },
                    hint: "read the provider's message; check the model name, the key and the \
                           gateway endpoint"
                        .to_string(),
                }),
                Err(error) => Err(Failure {
                    code: error.code().to_string(),
                    message: error.to_string(),
                    hint: error.hint(),
                }),
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(failure) => {
                    trace.write(
                        Some(task_event),
                        self.inference_event(
                            run,
                            turn,
                            sent,
                            input_estimate,
                            0,
                            None,
                            "error",
                            "fail",
                            &[],
                            started,
                            Some(&failure),
                        ),
                    )?;
                    return Ok((ExitStatus::Failed, turn, Some(failure), None));
                }
            };

            let mut assistant = StoredMessage::new(Message::Assistant {
                content: answer.content.clone(),
            });
            assistant.source_id = Some(format!("driver:{}", staged.driver.name));
            let output_estimate =
                tokens::count(&serde_json::to_string(&assistant.message).unwrap_or_default());
            run.history.push(assistant);
            run.continuation.record(
                answer.continuation_id.as_deref(),
                run.context_id.as_deref(),
                PRIMARY,
                run.history.len(),
            );
            let calls: Vec<(String, String, serde_json::Value)> = run
                .history
                .last()
                .map(|m| {
                    m.message
                        .tool_calls()
                        .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let wants_tools = answer.stop_reason == StopReason::ToolCall && !calls.is_empty();
            let inference_event = trace.write(
                Some(task_event),
                self.inference_event(
                    run,
                    turn,
                    sent,
                    input_estimate,
                    output_estimate,
                    Some(&answer),
                    answer.stop_reason.as_str(),
                    if wants_tools { "call_tools" } else { "finish" },
                    &calls,
                    started,
                    None,
                ),
            )?;
            if !wants_tools {
                let text = run
                    .history
                    .last()
                    .map(|m| m.message.text())
                    .unwrap_or_default();
                return Ok((ExitStatus::Ok, turn, None, Some(text)));
            }
            for (call_id, name, input) in &calls {
                self.observer.note(&format!("tool {name}"));
                let dispatched = dispatch(
                    self.engine,
                    &self.tools,
                    &run.task_id,
                    turn,
                    call_id,
                    name,
                    input,
                )
                .await;
                let mut message = StoredMessage::new(dispatched.message);
                message.source_id = Some(format!("tool:{name}"));
                run.history.push(message);
                trace.write(Some(&inference_event), dispatched.event)?;
            }
        }
        let failure = Failure {
            code: "E-RUN-015".to_string(),
            message: format!(
                "the task used all {} turns of `inference.max_turns` without finishing",
                staged.max_turns
            ),
            hint: "raise `inference.max_turns`, or give the agent a narrower task".to_string(),
        };
        Ok((
            ExitStatus::MaxTurnsReached,
            staged.max_turns,
            Some(failure),
            None,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn inference_event(
        &self,
        run: &TaskRun,
        turn: u32,
        sent: Sent,
        input_estimate: u64,
        output_estimate: u64,
        answer: Option<&Answer>,
        stop_reason: &str,
        decision: &str,
        calls: &[(String, String, serde_json::Value)],
        started: Instant,
        failure: Option<&Failure>,
    ) -> EventBody {
        let usage = answer.and_then(|a| a.usage).unwrap_or_default();
        EventBody::Inference {
            task_id: run.task_id.clone(),
            turn,
            origin: "agent".to_string(),
            choice: PRIMARY.to_string(),
            driver: self.staged.driver.name.clone(),
            model: self.staged.model.clone(),
            prompt_cache_key: run.cache_key.clone(),
            sent,
            input_tokens_estimated: input_estimate,
            output_tokens_estimated: output_estimate,
            input_tokens_actual: usage.input_tokens,
            output_tokens_actual: usage.output_tokens,
            cached_tokens_actual: usage.cached_tokens,
            cache_write_tokens_actual: usage.cache_write_tokens,
            stop_reason: stop_reason.to_string(),
            decision: decision.to_string(),
            tool_name: calls.first().map(|(_, name, _)| name.clone()),
            tool_calls: calls.len() as u32,
            duration_ms: started.elapsed().as_millis() as u64,
            error: failure.map(Failure::to_ref),
        }
    }
}

/// The state of one task's conversation.
struct TaskRun {
    task_id: String,
    context_id: Option<String>,
    cache_key: String,
    history: Vec<StoredMessage>,
    continuation: Continuation,
    counts: MessageCounts,
}

impl TaskRun {
    /// The estimate of the whole conversation (never only the part a continuation sends).
    fn estimate(&mut self) -> u64 {
        let TaskRun {
            history, counts, ..
        } = self;
        history
            .iter()
            .map(|m| {
                counts.count(&m.id, || {
                    serde_json::to_string(&m.message).unwrap_or_default()
                })
            })
            .sum()
    }
}
