//! The model's tool calls, answered: a WASM tool, a skill, the runtime's `switch-driver` and
//! the `shell`, each through the hooks' decision point, into the trace, and back to the model
//! as a fenced result (a refusal or a denial included, so every call gets its answer).

use super::*;

impl SessionContext<'_> {
    /// One tool call, dispatched in this order: the `shell` tool (when
    /// allowlisted), a skill, the runtime's `switch-driver`, a WASM tool (an undeclared name is
    /// an error result). For a WASM tool: the decision point, the call (unless denied), the
    /// observation.
    pub(super) async fn tool_call(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        name: &str,
        input: &Value,
    ) -> std::io::Result<()> {
        if name == SHELL_TOOL
            && let Some(shell) = &self.shell
        {
            return self
                .shell_call(shell, run, turn, inference_event, call_id, input)
                .await;
        }
        if let Some(skill) = self.staged.skill_named(name) {
            return self
                .skill_call(skill, run, turn, inference_event, call_id, input)
                .await;
        }
        if name == SWITCH_DRIVER_TOOL && self.switch_tool.is_some() {
            return self
                .switch_call(run, turn, inference_event, call_id, input)
                .await;
        }
        self.observer.note(&format!("tool {name}"));
        let event = |outcome: Option<ToolCallOutcome>| {
            self.tool_call_event(&run.task_id, turn, (call_id, name), input, outcome)
        };
        let site = ToolCallSite {
            engine: &self.engine,
            staged: &self.staged.tools,
            tools: &self.tools,
            offered: &self.specs,
            task_id: &run.task_id,
            turn,
            call_id,
            name,
            input,
            broker: run.broker.clone(),
            sender: &run.sender,
        };
        let started = Instant::now();
        // The manifest's check runs first: a hook can only narrow what the manifest allows.
        let admitted = site.admit();
        let denial = match &admitted {
            Ok(_) => {
                let scope = self.scope(run, turn, inference_event);
                self.hooks.decide(event(None), &scope).await?
            }
            Err(_) => None,
        };
        let (message, outcome) = match (admitted, denial) {
            (Ok(_), Some(denial)) => self.denied_call(
                &run.task_id,
                turn,
                inference_event,
                ("tool", call_id, name),
                denial,
            )?,
            (admitted, _) => {
                let dispatched = match admitted {
                    Ok(tool) => site.call(tool).await,
                    Err(refused) => *refused,
                };
                for send in &dispatched.sends {
                    self.trace(inference_event, send.clone())?;
                }
                self.trace(inference_event, dispatched.event.clone())?;
                let (status, error) = match &dispatched.event {
                    EventBody::ToolCall { status, error, .. } => (
                        match status.as_str() {
                            "passed" => Some(ToolStatus::Passed),
                            "failed" => Some(ToolStatus::Failed),
                            "error" if error.is_none() => Some(ToolStatus::Error),
                            _ => None,
                        },
                        error.as_ref().map(|e: &ErrorRef| e.message.clone()),
                    ),
                    _ => (None, None),
                };
                let outcome = ToolCallOutcome {
                    status,
                    output: dispatched.message.text(),
                    error,
                    duration_ms: started.elapsed().as_millis() as u64,
                };
                (dispatched.message, outcome)
            }
        };
        let observation = event(Some(outcome));
        self.hand_back(
            run,
            turn,
            inference_event,
            ("tool", call_id, name),
            message,
            None,
            Some(observation),
        )
        .await
    }

    /// One call of a skill, answered in-process. To the hooks it is a tool call: the
    /// `on-tool-call` decision point (a `deny` is a `call_denied` event of kind `skill` and an
    /// error result), then the observation. Otherwise the skill's markdown, read at staging, goes
    /// back verbatim in the fence with a `skill_call` event. The model's input is not read: a
    /// skill takes none.
    async fn skill_call(
        &self,
        skill: &StagedSkill,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        input: &Value,
    ) -> std::io::Result<()> {
        let name = skill.spec.name.as_str();
        self.observer.note(&format!("skill {name}"));
        let started = Instant::now();
        let event = |outcome: Option<ToolCallOutcome>| {
            self.tool_call_event(&run.task_id, turn, (call_id, name), input, outcome)
        };
        let scope = self.scope(run, turn, inference_event);
        let (message, outcome) = match self.hooks.decide(event(None), &scope).await? {
            Some(denial) => self.denied_call(
                &run.task_id,
                turn,
                inference_event,
                ("skill", call_id, name),
                denial,
            )?,
            None => {
                let answer = skill_answer(skill, &run.task_id, turn, call_id);
                self.trace(inference_event, answer.event)?;
                let outcome = ToolCallOutcome {
                    status: Some(ToolStatus::Passed),
                    output: answer.message.text(),
                    error: None,
                    duration_ms: started.elapsed().as_millis() as u64,
                };
                (answer.message, outcome)
            }
        };
        let observation = event(Some(outcome));
        self.hand_back(
            run,
            turn,
            inference_event,
            ("skill", call_id, name),
            message,
            None,
            Some(observation),
        )
        .await
    }

    /// The `on-tool-call` event of the call `call_id` of tool `name`: its decision point with
    /// no `outcome`, its observation with one.
    fn tool_call_event(
        &self,
        task_id: &str,
        turn: u32,
        (call_id, name): (&str, &str),
        input: &Value,
        outcome: Option<ToolCallOutcome>,
    ) -> HookEvent {
        HookEvent::ToolCall(ToolCallEvent {
            session_id: self.session_id.clone(),
            task_id: task_id.to_string(),
            turn,
            call_id: call_id.to_string(),
            tool_name: name.to_string(),
            input: input.to_string(),
            outcome,
        })
    }

    /// A call a hook's `deny` refused: the `call_denied` event (`kind` `tool` or `skill`), and
    /// the fenced error result the model gets with the outcome the hooks observe.
    fn denied_call(
        &self,
        task_id: &str,
        turn: u32,
        inference_event: &str,
        (kind, call_id, name): (&str, &str, &str),
        denial: Denial,
    ) -> std::io::Result<(Message, ToolCallOutcome)> {
        let text = self.trace_denial(
            task_id,
            turn,
            inference_event,
            (kind, call_id, name),
            denial,
        )?;
        let message = Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error: true,
            content: vec![Block::Text {
                text: fence(name, call_id, &text),
            }],
        };
        let outcome = ToolCallOutcome {
            status: None,
            output: text.clone(),
            error: Some(text),
            duration_ms: 0,
        };
        Ok((message, outcome))
    }

    /// Traces a hook's `deny` of the call `call_id` (`kind` `tool`, `skill` or `shell`) of
    /// `target`, and gives the text the model is answered with.
    fn trace_denial(
        &self,
        task_id: &str,
        turn: u32,
        inference_event: &str,
        (kind, call_id, target): (&str, &str, &str),
        denial: Denial,
    ) -> std::io::Result<String> {
        let text = format!("denied by hook `{}`: {}", denial.hook, denial.reason);
        self.trace(
            inference_event,
            EventBody::CallDenied {
                task_id: task_id.to_string(),
                turn,
                kind: kind.to_string(),
                call_id: call_id.to_string(),
                target: target.to_string(),
                hook: denial.hook,
                reason: denial.reason,
            },
        )?;
        Ok(text)
    }

    /// A call's result handed back: shown to the observer (as `shown`, else as the model gets
    /// it), added to the history (sourced `<source>:<name>`), then `observation` (when there is
    /// one) dispatched to the hooks.
    #[allow(clippy::too_many_arguments)]
    async fn hand_back(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        (source, call_id, name): (&str, &str, &str),
        message: Message,
        shown: Option<&str>,
        observation: Option<HookEvent>,
    ) -> std::io::Result<()> {
        let shown = shown.map_or_else(|| message.text(), str::to_string);
        self.observer
            .tool_result(call_id, name, &shown, message_is_error(&message));
        let mut stored = StoredMessage::new(message);
        stored.source_id = Some(format!("{source}:{name}"));
        run.history.push(stored);
        if let Some(observation) = observation {
            let scope = self.scope(run, turn, inference_event);
            self.hooks.dispatch(observation, &scope).await?;
        }
        Ok(())
    }

    /// One call of the agent's `switch-driver` tool, answered in-process: the input checked, the
    /// decision point, then the switch through the control state as `principal: agent` (which
    /// traces it), then the `on-tool-call` observation like any tool call's (`passed` when it
    /// switched, `failed` when the control state refused; a bad input or a denial carries only
    /// its error). A refused switch is an error result; the loop goes on either way.
    async fn switch_call(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        input: &Value,
    ) -> std::io::Result<()> {
        self.observer.note(&format!("tool {SWITCH_DRIVER_TOOL}"));
        let started = Instant::now();
        let event = |outcome: Option<ToolCallOutcome>| {
            self.tool_call_event(
                &run.task_id,
                turn,
                (call_id, SWITCH_DRIVER_TOOL),
                input,
                outcome,
            )
        };
        let wanted = input.get("choice").and_then(Value::as_str);
        let denial = match wanted {
            Some(_) => {
                let scope = self.scope(run, turn, inference_event);
                self.hooks.decide(event(None), &scope).await?
            }
            None => None,
        };
        // The text the model gets, and the status the hooks observe (`None`: it did not run).
        let (text, status) = match (wanted, denial) {
            (None, _) => (
                format!(
                    "the input must be {{\"choice\": NAME}} with NAME one of {}",
                    self.staged.choices.names()
                ),
                None,
            ),
            (Some(_), Some(denial)) => {
                let site = ("tool", call_id, SWITCH_DRIVER_TOOL);
                let text = self.trace_denial(&run.task_id, turn, inference_event, site, denial)?;
                (text, None)
            }
            (Some(wanted), None) => match self.control.set(
                "inference.driver",
                &Value::from(wanted),
                Principal::Agent,
                Some(&run.task_id),
            ) {
                Ok(_) => {
                    let choices = &self.staged.choices;
                    let choice = choices
                        .index_of(wanted)
                        .and_then(|index| choices.get(index))
                        .unwrap_or(choices.primary());
                    (
                        format!(
                            "switched to `{}` (model {} through {}); your next call runs on it",
                            choice.name, choice.model, choice.driver
                        ),
                        Some(ToolStatus::Passed),
                    )
                }
                Err(refusal) => (
                    format!("not switched: {}", refusal.message),
                    Some(ToolStatus::Failed),
                ),
            },
        };
        let is_error = status != Some(ToolStatus::Passed);
        let message = Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error,
            content: vec![Block::Text {
                text: fence(SWITCH_DRIVER_TOOL, call_id, &text),
            }],
        };
        let outcome = ToolCallOutcome {
            status,
            output: message.text(),
            error: status.is_none().then(|| text.clone()),
            duration_ms: if status.is_some() {
                started.elapsed().as_millis() as u64
            } else {
                0
            },
        };
        let site = ("runtime", call_id, SWITCH_DRIVER_TOOL);
        let observation = Some(event(Some(outcome)));
        self.hand_back(run, turn, inference_event, site, message, None, observation)
            .await
    }

    /// One call of the model's `shell` tool: the input checked against its schema and the
    /// allowlist (nothing spawned on a refusal), the `on-shell` decision point, the run, the
    /// `shell` event, the observation. A non-zero exit is data for the model, not an error.
    async fn shell_call(
        &self,
        shell: &ShellTool,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        input: &Value,
    ) -> std::io::Result<()> {
        let started = Instant::now();
        let (request, described) = shell_request(shell, input, self.workdir.dir());
        self.observer.note(&format!("shell {}", described.command));
        let event = |outcome: Option<ShellOutcome>| {
            HookEvent::Shell(events::ShellEvent {
                session_id: self.session_id.clone(),
                task_id: run.task_id.clone(),
                binary: described.binary.clone(),
                command: described.command.clone(),
                argv: described.argv.clone(),
                script: described.script.clone(),
                recipe: described.recipe.clone(),
                outcome,
            })
        };
        let site = ShellSite {
            task_id: &run.task_id,
            turn,
            inference_event,
            call_id,
            described: &described,
            started,
        };
        let (text, is_error, outcome) = match request {
            Err((code, message)) => {
                let text = format!("error[{code}]: {message}");
                self.trace(
                    inference_event,
                    site.event(None, Some(ErrorRef { code, message })),
                )?;
                (text, true, None)
            }
            Ok(request) => {
                let scope = self.scope(run, turn, inference_event);
                match self.hooks.decide(event(None), &scope).await? {
                    Some(denial) => {
                        let text = self.trace_denial(
                            &run.task_id,
                            turn,
                            inference_event,
                            ("shell", call_id, &described.binary),
                            denial,
                        )?;
                        (text.clone(), true, Some(shell_failed(text, 0)))
                    }
                    None => self.shell_run(shell, &request, &site).await?,
                }
            }
        };
        let message = Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error,
            content: vec![Block::Text {
                text: fence(SHELL_TOOL, call_id, &text),
            }],
        };
        let observation = outcome.map(|outcome| event(Some(outcome)));
        self.hand_back(
            run,
            turn,
            inference_event,
            ("tool", call_id, SHELL_TOOL),
            message,
            Some(&text),
            observation,
        )
        .await
    }

    /// Runs an admitted shell request and traces it: the text the model gets, whether it is an
    /// error, and the outcome the hooks observe.
    async fn shell_run(
        &self,
        shell: &ShellTool,
        request: &ShellRequest,
        site: &ShellSite<'_>,
    ) -> std::io::Result<(String, bool, Option<ShellOutcome>)> {
        match shell.grant.execute(request).await {
            Ok(output) => {
                self.trace(site.inference_event, site.event(Some(&output), None))?;
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
                let text = serde_json::to_string_pretty(&output).unwrap_or_default();
                Ok((text, false, Some(outcome)))
            }
            Err(error) => {
                let text = format!("error[{}]: {error}", error.code());
                let refused = ErrorRef {
                    code: error.code().to_string(),
                    message: error.to_string(),
                };
                self.trace(site.inference_event, site.event(None, Some(refused)))?;
                let elapsed = site.started.elapsed().as_millis() as u64;
                Ok((text.clone(), true, Some(shell_failed(text, elapsed))))
            }
        }
    }
}

/// Where a shell call happens, for its `shell` trace event.
struct ShellSite<'a> {
    task_id: &'a str,
    turn: u32,
    inference_event: &'a str,
    call_id: &'a str,
    described: &'a murmur_shell::describe::Described,
    started: Instant,
}

impl ShellSite<'_> {
    /// The `shell` event of this call: what ran (`output`), or why nothing did (`error`).
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
        }
    }
}

/// A shell call's input read: the request when its schema and the allowlist admit it (else the
/// code and message of the refusal), and how the call is shown, whichever it is.
fn shell_request(
    shell: &ShellTool,
    input: &Value,
    workdir: &murmur_beneath::BeneathDir,
) -> (
    Result<ShellRequest, (String, String)>,
    murmur_shell::describe::Described,
) {
    let refuse = |code: &str, message: String| (code.to_string(), message);
    let request = match schema_refusal(SHELL_TOOL, &shell.validator, input) {
        None => serde_json::from_value::<ShellRequest>(input.clone())
            .map_err(|e| refuse("E-RUN-009", format!("the shell input is not valid: {e}"))),
        Some(refusal) => Err(refuse("E-RUN-009", refusal)),
    };
    let request = request.and_then(|request| match shell.grant.check(&request.binary) {
        Ok(_) => Ok(request),
        Err(error) => Err(refuse(error.code(), error.to_string())),
    });
    let described = match &request {
        Ok(request) => shell.grant.describe(request),
        Err(_) => {
            let args: Vec<String> = input
                .get("args")
                .and_then(Value::as_array)
                .map(|args| {
                    args.iter()
                        .filter_map(|a| a.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let binary = input.get("binary").and_then(Value::as_str).unwrap_or("");
            describe(binary, None, &args, workdir)
        }
    };
    (request, described)
}

/// The outcome hooks observe of a shell call that ran nothing (denied, or failed to start).
fn shell_failed(error: String, duration_ms: u64) -> ShellOutcome {
    ShellOutcome {
        exit_code: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
        duration_ms,
        error: Some(error),
    }
}
