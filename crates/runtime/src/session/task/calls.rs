//! The model's tool calls, answered: a WASM tool, a skill, the runtime's `switch-driver` and
//! the `shell`, each through the hooks' decision point, into the trace, and back to the model
//! as a fenced result (a refusal or a denial included, so every call gets its answer).

use super::*;
use crate::session::mcp::McpTool;
use crate::session::tools::Dispatched;

/// Who answers an admitted tool call: a WASM component, or an MCP server.
enum Callee<'a> {
    Wasm(&'a SessionTool),
    Mcp(&'a McpTool),
    /// A named peer, asked through the runtime's own `ask-<name>`.
    Peer(&'a crate::session::peers::PeerTool),
}

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
        // The site holds its own copies: the task's run is handed back to afterwards.
        let (task_id, sender) = (run.task_id.clone(), run.sender.clone());
        let task_workspace = run.workdir.workspace.clone();
        let site = ToolCallSite {
            engine: &self.engine,
            staged: &self.staged.tools,
            tools: &self.tools,
            offered: &self.specs,
            task_id: &task_id,
            turn,
            call_id,
            name,
            input,
            broker: run.broker.clone(),
            sender: &sender,
            workspace: (&self.workdir.workspace, &task_workspace),
        };
        // The manifest's check runs first: a hook can only narrow what the manifest allows.
        let admitted = if let Some(peer) = self.peers.named(name) {
            match peer.refusal(input) {
                None => Ok(Callee::Peer(peer)),
                Some(refusal) => Err(Box::new(site.refused(refusal, "E-RUN-009", Instant::now()))),
            }
        } else {
            match self.mcp.iter().find(|tool| tool.spec.name == name) {
                Some(tool) => match schema_refusal(name, &tool.validator, input) {
                    None => Ok(Callee::Mcp(tool)),
                    Some(refusal) => {
                        Err(Box::new(site.refused(refusal, "E-RUN-009", Instant::now())))
                    }
                },
                None => site.admit().map(Callee::Wasm),
            }
        };
        self.call_admitted(run, turn, inference_event, &site, admitted)
            .await
    }

    /// A declared tool's call once the manifest's check has answered (`admitted`): the
    /// decision point, the call (unless denied or refused), its events, the observation.
    async fn call_admitted(
        &self,
        run: &mut TaskRun,
        turn: u32,
        inference_event: &str,
        site: &ToolCallSite<'_>,
        admitted: Result<Callee<'_>, Box<Dispatched>>,
    ) -> std::io::Result<()> {
        let (call_id, name, input) = (site.call_id, site.name, site.input);
        let event = |outcome: Option<ToolCallOutcome>| {
            self.tool_call_event(&run.task_id, turn, (call_id, name), input, outcome)
        };
        let started = Instant::now();
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
                // A peer's call has its event's id before it happens: the peer's task nests
                // under the call's span.
                let mut call_event = None;
                let dispatched = match admitted {
                    Ok(Callee::Wasm(tool)) => site.call(tool).await,
                    Ok(Callee::Mcp(tool)) => tool.call((&run.task_id, turn, call_id), input).await,
                    Ok(Callee::Peer(peer)) => {
                        let id = call_event.insert(murmur_trace::new_event_id());
                        let sender = run.sender.within(id);
                        let workspace = run.workdir.workspace_dir().clone();
                        let site = (run.task_id.as_str(), turn, call_id);
                        peer.call(&self.peers, &sender, site, input, &workspace)
                            .await
                    }
                    Err(refused) => *refused,
                };
                for send in &dispatched.sends {
                    self.trace(inference_event, send.clone())?;
                }
                match call_event {
                    Some(id) => self.trace_as(inference_event, id, dispatched.event.clone())?,
                    None => self.trace(inference_event, dispatched.event.clone())?,
                };
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
        call: (&str, &str, &str),
        denial: Denial,
    ) -> std::io::Result<String> {
        self.trace(inference_event, denial.event(task_id, turn, call))?;
        Ok(denial.text())
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

    /// One call of the model's `shell` tool: the input checked against its schema, then the
    /// one path of every shell call ([`crate::session::shell`]), then the observation. A
    /// non-zero exit is data for the model, not an error.
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
        let read = match schema_refusal(SHELL_TOOL, &shell.validator, input) {
            Some(refusal) => Err(refusal),
            None => serde_json::from_value::<ShellRequest>(input.clone())
                .map_err(|e| format!("the shell input is not valid: {e}")),
        };
        // The grant of the task's workspace (a door principal's own directory of it).
        let grant = shell.grant.in_workdir(run.workdir.workspace_dir().clone());
        let (admitted, described) = match read {
            Ok(request) => shell::admit(Some(&grant), request, &run.workdir),
            Err(refusal) => (
                Err(("E-RUN-009".to_string(), refusal)),
                described_input(input, &run.workdir),
            ),
        };
        self.observer.note(&format!("shell {}", described.command));
        let site = shell::ShellSite {
            session_id: &self.session_id,
            task_id: &run.task_id,
            turn,
            parent: inference_event,
            call_id,
            described: &described,
            started,
        };
        let scope = self.scope(run, turn, inference_event);
        let answer = shell::call(&self.hooks, self.trace.as_ref(), &site, admitted, &scope).await?;
        let (text, is_error) = match &answer.output {
            Ok(output) => (
                serde_json::to_string_pretty(output).unwrap_or_default(),
                false,
            ),
            Err(text) => (text.clone(), true),
        };
        let message = Message::Tool {
            tool_call_id: call_id.to_string(),
            is_error,
            content: vec![Block::Text {
                text: fence(SHELL_TOOL, call_id, &text),
            }],
        };
        self.hand_back(
            run,
            turn,
            inference_event,
            ("tool", call_id, SHELL_TOOL),
            message,
            Some(&text),
            answer.observation,
        )
        .await
    }
}

/// How a shell call whose input could not be read is shown: what of a binary and arguments
/// it holds.
fn described_input(input: &Value, workdir: &Workdir) -> murmur_confine::describe::Described {
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
    describe(binary, None, &args, workdir.workspace_dir())
}
