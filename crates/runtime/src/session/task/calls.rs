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
            HookEvent::ToolCall(ToolCallEvent {
                session_id: self.session_id.clone(),
                task_id: run.task_id.clone(),
                turn,
                call_id: call_id.to_string(),
                tool_name: name.to_string(),
                input: input.to_string(),
                outcome,
            })
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
                call_id,
                "tool",
                name,
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
            call_id,
            name,
            "tool",
            message,
            observation,
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
            HookEvent::ToolCall(ToolCallEvent {
                session_id: self.session_id.clone(),
                task_id: run.task_id.clone(),
                turn,
                call_id: call_id.to_string(),
                tool_name: name.to_string(),
                input: input.to_string(),
                outcome,
            })
        };
        let scope = self.scope(run, turn, inference_event);
        let (message, outcome) = match self.hooks.decide(event(None), &scope).await? {
            Some(denial) => self.denied_call(
                &run.task_id,
                turn,
                inference_event,
                call_id,
                "skill",
                name,
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
            call_id,
            name,
            "skill",
            message,
            observation,
        )
        .await
    }

    /// A call a hook's `deny` refused: the `call_denied` event (`kind` `tool` or `skill`), and
    /// the fenced error result the model gets with the outcome the hooks observe.
    #[allow(clippy::too_many_arguments)]
    fn denied_call(
        &self,
        task_id: &str,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        kind: &str,
        name: &str,
        denial: Denial,
    ) -> std::io::Result<(Message, ToolCallOutcome)> {
        let text = format!("denied by hook `{}`: {}", denial.hook, denial.reason);
        self.trace(
            inference_event,
            EventBody::CallDenied {
                task_id: task_id.to_string(),
                turn,
                kind: kind.to_string(),
                call_id: call_id.to_string(),
                target: name.to_string(),
                hook: denial.hook,
                reason: denial.reason,
            },
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

    /// A call's result handed back: shown to the observer, added to the history (sourced
    /// `<source>:<name>`), then `observation` dispatched to the hooks.
    #[allow(clippy::too_many_arguments)]
    async fn hand_back(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        name: &str,
        source: &str,
        message: Message,
        observation: HookEvent,
    ) -> std::io::Result<()> {
        self.observer
            .tool_result(call_id, name, &message.text(), message_is_error(&message));
        let mut stored = StoredMessage::new(message);
        stored.source_id = Some(format!("{source}:{name}"));
        run.history.push(stored);
        let scope = self.scope(run, turn, inference_event);
        self.hooks.dispatch(observation, &scope).await?;
        Ok(())
    }

    /// One call of the agent's `switch-driver` tool, answered in-process: the input checked, the
    /// decision point, then the switch through the control state as `principal: agent` (which
    /// traces it). A refused switch is an error result; the loop goes on either way.
    async fn switch_call(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        call_id: &str,
        input: &Value,
    ) -> std::io::Result<()> {
        self.observer.note(&format!("tool {SWITCH_DRIVER_TOOL}"));
        let wanted = input.get("choice").and_then(Value::as_str);
        let denial = match wanted {
            Some(_) => {
                let event = HookEvent::ToolCall(ToolCallEvent {
                    session_id: self.session_id.clone(),
                    task_id: run.task_id.clone(),
                    turn,
                    call_id: call_id.to_string(),
                    tool_name: SWITCH_DRIVER_TOOL.to_string(),
                    input: input.to_string(),
                    outcome: None,
                });
                let scope = self.scope(run, turn, inference_event);
                self.hooks.decide(event, &scope).await?
            }
            None => None,
        };
        let (text, is_error) = match (wanted, denial) {
            (None, _) => (
                format!(
                    "the input must be {{\"choice\": NAME}} with NAME one of {}",
                    self.staged.choices.names()
                ),
                true,
            ),
            (Some(_), Some(denial)) => {
                self.trace(
                    inference_event,
                    EventBody::CallDenied {
                        task_id: run.task_id.clone(),
                        turn,
                        kind: "tool".to_string(),
                        call_id: call_id.to_string(),
                        target: SWITCH_DRIVER_TOOL.to_string(),
                        hook: denial.hook.clone(),
                        reason: denial.reason.clone(),
                    },
                )?;
                (
                    format!("denied by hook `{}`: {}", denial.hook, denial.reason),
                    true,
                )
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
                        false,
                    )
                }
                Err(refusal) => (format!("not switched: {}", refusal.message), true),
            },
        };
        let message = Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error,
            content: vec![Block::Text {
                text: fence(SWITCH_DRIVER_TOOL, call_id, &text),
            }],
        };
        self.observer
            .tool_result(call_id, SWITCH_DRIVER_TOOL, &message.text(), is_error);
        let mut stored = StoredMessage::new(message);
        stored.source_id = Some(format!("runtime:{SWITCH_DRIVER_TOOL}"));
        run.history.push(stored);
        Ok(())
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
        let refuse = |code: &str, message: String| (code.to_string(), message);
        let request: Result<ShellRequest, (String, String)> =
            match schema_refusal(SHELL_TOOL, &shell.validator, input) {
                None => serde_json::from_value(input.clone())
                    .map_err(|e| refuse("E-RUN-009", format!("the shell input is not valid: {e}"))),
                Some(refusal) => Err(refuse("E-RUN-009", refusal)),
            };
        let request = request.and_then(|request| {
            shell
                .grant
                .check(&request.binary)
                .map(|_| request.clone())
                .map_err(|error| refuse(error.code(), error.to_string()))
        });
        let described = match &request {
            Ok(request) => shell.grant.describe(request),
            Err(_) => describe(
                input.get("binary").and_then(Value::as_str).unwrap_or(""),
                None,
                &input
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|args| {
                        args.iter()
                            .filter_map(|a| a.as_str().map(str::to_string))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default(),
                self.workdir.dir(),
            ),
        };
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
        let shell_event =
            |output: Option<&ShellOutput>, error: Option<ErrorRef>| EventBody::Shell {
                task_id: run.task_id.clone(),
                turn,
                call_id: call_id.to_string(),
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
                    || started.elapsed().as_millis() as u64,
                    |o| o.duration.as_millis() as u64,
                ),
                error,
            };
        let (text, is_error, outcome) = match request {
            Err((code, message)) => {
                let text = format!("error[{code}]: {message}");
                self.trace(
                    inference_event,
                    shell_event(None, Some(ErrorRef { code, message })),
                )?;
                (text, true, None)
            }
            Ok(request) => {
                let scope = self.scope(run, turn, inference_event);
                match self.hooks.decide(event(None), &scope).await? {
                    Some(denial) => {
                        let text = format!("denied by hook `{}`: {}", denial.hook, denial.reason);
                        self.trace(
                            inference_event,
                            EventBody::CallDenied {
                                task_id: run.task_id.clone(),
                                turn,
                                kind: "shell".to_string(),
                                call_id: call_id.to_string(),
                                target: described.binary.clone(),
                                hook: denial.hook,
                                reason: denial.reason,
                            },
                        )?;
                        let outcome = ShellOutcome {
                            exit_code: None,
                            stdout_bytes: 0,
                            stderr_bytes: 0,
                            truncated: false,
                            duration_ms: 0,
                            error: Some(text.clone()),
                        };
                        (text, true, Some(outcome))
                    }
                    None => match shell.grant.execute(&request).await {
                        Ok(output) => {
                            self.trace(inference_event, shell_event(Some(&output), None))?;
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
                            (text, false, Some(outcome))
                        }
                        Err(error) => {
                            let text = format!("error[{}]: {error}", error.code());
                            self.trace(
                                inference_event,
                                shell_event(
                                    None,
                                    Some(ErrorRef {
                                        code: error.code().to_string(),
                                        message: error.to_string(),
                                    }),
                                ),
                            )?;
                            let outcome = ShellOutcome {
                                exit_code: None,
                                stdout_bytes: 0,
                                stderr_bytes: 0,
                                truncated: false,
                                duration_ms: started.elapsed().as_millis() as u64,
                                error: Some(text.clone()),
                            };
                            (text, true, Some(outcome))
                        }
                    },
                }
            }
        };
        self.observer
            .tool_result(call_id, SHELL_TOOL, &text, is_error);
        let mut stored = StoredMessage::new(Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error,
            content: vec![Block::Text {
                text: fence(SHELL_TOOL, call_id, &text),
            }],
        });
        stored.source_id = Some(format!("tool:{SHELL_TOOL}"));
        run.history.push(stored);
        if let Some(outcome) = outcome {
            let scope = self.scope(run, turn, inference_event);
            self.hooks.dispatch(event(Some(outcome)), &scope).await?;
        }
        Ok(())
    }
}
