//! Keeping the conversation within the model's window: a task's seed fitted into its budget
//! before the first turn, and compaction when the history's estimate crosses the threshold (the
//! first `replace-context` an `on-compaction` hook returns replaces it, each message handed back
//! unchanged keeping its producer's `produced_by`, and thinking the hook wrote or changed sent to
//! no driver choice: see [`crate::inference::choices`]).

use super::*;
use crate::inference::choices::carry_producers;

impl SessionContext<'_> {
    /// Fits a seed into `budget`: `(outcome, messages, reason)`.
    pub(super) async fn fit_seed(
        &self,
        run: &TaskRun,
        task_event: &str,
        messages: Vec<StoredMessage>,
        budget: u64,
    ) -> std::io::Result<(&'static str, Vec<StoredMessage>, Option<String>)> {
        let sizes: Vec<u64> = messages
            .iter()
            .map(|m| tokens::count(&serde_json::to_string(&m.message).unwrap_or_default()))
            .collect();
        let total: u64 = sizes.iter().sum();
        if messages.is_empty() || total <= budget {
            return Ok(("committed", messages, None));
        }
        if budget == 0 {
            return Ok((
                "refused",
                Vec::new(),
                Some("the seed budget is 0 (context.max_tokens × context.seed_budget)".to_string()),
            ));
        }
        // The overflowing front: the fewest oldest messages whose removal makes the rest fit.
        let mut front = 0;
        let mut rest = total;
        while front < messages.len() && rest > budget {
            rest -= sizes[front];
            front += 1;
        }
        if self.hooks.any_hears(crate::hooks::Handler::Compaction) && front > 0 {
            let event = HookEvent::Compaction(events::CompactionEvent {
                session_id: self.session_id.clone(),
                task_id: run.task_id.clone(),
                messages: messages[..front].iter().map(to_wit).collect(),
                estimated_tokens: sizes[..front].iter().sum(),
                context_window: budget,
                model: self
                    .staged
                    .capsule
                    .inference
                    .as_ref()
                    .and_then(|i| i.compaction.model.clone()),
                system_prompt: self.staged.compaction_prompt.clone(),
            });
            let dispatched = self
                .hooks
                .dispatch(event, &self.scope(run, 0, task_event))
                .await?;
            let summary = dispatched
                .committed
                .into_iter()
                .find_map(|(_, output)| match output {
                    HookOutput::ReplaceContext(list) => from_wit_list(&list).ok(),
                    _ => None,
                });
            if let Some(mut summarized) = summary {
                summarized.extend(messages[front..].iter().cloned());
                let size: u64 = summarized
                    .iter()
                    .map(|m| tokens::count(&serde_json::to_string(&m.message).unwrap_or_default()))
                    .sum();
                if size <= budget && !summarized.is_empty() {
                    return Ok(("summarized", summarized, None));
                }
            }
        }
        // Whole exchanges at a time: the kept part opens with a user message.
        while front < messages.len() && !matches!(messages[front].message, Message::User { .. }) {
            front += 1;
        }
        if front < messages.len() {
            return Ok(("dropped_oldest", messages[front..].to_vec(), None));
        }
        Ok((
            "refused",
            Vec::new(),
            Some(format!(
                "even the newest seeded message is over the seed budget of {budget} tokens"
            )),
        ))
    }

    /// Compaction: when the conversation's estimate crosses `threshold × context window` (the
    /// window of the choice the next call runs on, so a switch measures against the new
    /// choice's), the first `replace-context` an `on-compaction` hook returns replaces it (fresh
    /// message ids, the held continuation dropped). A hook's error ends the session.
    pub(super) async fn maybe_compact(
        &self,
        run: &mut TaskRun,
        turn: u32,
        task_event: &str,
    ) -> std::io::Result<Option<Ending>> {
        // The window of the choice the next call runs on: a switch during this turn measures
        // against the new choice's window (`context.max_tokens` when set).
        let (_, choice) = self.selected_choice();
        let window = choice.limits.limits.context_window;
        let Some(inference) = &self.staged.capsule.inference else {
            return Ok(None);
        };
        let threshold = inference.compaction.threshold;
        let before = self.fixed_tokens() + run.estimate();
        if (before as f64) <= threshold * window as f64
            || !self.hooks.any_hears(crate::hooks::Handler::Compaction)
        {
            return Ok(None);
        }
        let event = HookEvent::Compaction(events::CompactionEvent {
            session_id: self.session_id.clone(),
            task_id: run.task_id.clone(),
            messages: run.history.iter().map(to_wit).collect(),
            estimated_tokens: before,
            context_window: window,
            model: inference.compaction.model.clone(),
            system_prompt: self.staged.compaction_prompt.clone(),
        });
        let refusals_before = self.spend.refusals();
        let compaction_started = Instant::now();
        let dispatched = self
            .hooks
            .dispatch(event, &self.scope(run, turn, task_event))
            .await?;
        if let Some((hook, message)) = dispatched.errors.into_iter().next() {
            // A summary the spend ceiling refused is the ceiling's end, not the hook's fault;
            // the session ends all the same.
            if self.spend.refusals() > refusals_before {
                return Ok(Some(Ending::SessionSpent(Failure {
                    code: "E-RUN-018".to_string(),
                    message: format!(
                        "compaction hook `{hook}` could not summarize: its call would have passed `inference.max_session_tokens` ({message})"
                    ),
                    hint: "raise `inference.max_session_tokens`".to_string(),
                })));
            }
            return Ok(Some(Ending::Stop(Failure {
                code: "E-HOOK-006".to_string(),
                message: format!("compaction hook `{hook}` failed, so the session ends: {message}"),
                hint: "read logs/hook-<name>.log; a compaction hook must return replace-context"
                    .to_string(),
            })));
        }
        let replacement =
            dispatched
                .committed
                .into_iter()
                .find_map(|(hook, output)| match output {
                    HookOutput::ReplaceContext(list) => Some((hook, list)),
                    _ => None,
                });
        let Some((hook, list)) = replacement else {
            return Ok(None);
        };
        let mut messages = match from_wit_list(&list) {
            Ok(messages) => messages,
            Err(reason) => {
                return Ok(Some(Ending::Stop(Failure {
                    code: "E-HOOK-006".to_string(),
                    message: format!(
                        "compaction hook `{hook}` returned a context that cannot be used, so the session ends: {reason}"
                    ),
                    hint: "return messages whose content is a JSON array of neutral blocks"
                        .to_string(),
                })));
            }
        };
        // The producer of each message handed back unchanged is carried through; thinking the
        // hook wrote or changed goes to no driver choice ([`carry_producers`]).
        let several = self.staged.choices.has_alternates()
            || run.history.iter().any(|m| m.produced_by.is_some());
        let ids: Vec<&str> = list.iter().map(|m| m.id.as_str()).collect();
        carry_producers(&run.history, &ids, &mut messages, &hook, several);
        let messages_before = run.history.len() as u32;
        run.history = messages;
        run.counts.clear();
        run.continuation.drop_held();
        let after = self.fixed_tokens() + run.estimate();
        self.trace(
            task_event,
            EventBody::Compaction {
                task_id: run.task_id.clone(),
                turn,
                hook,
                tokens_before: before,
                tokens_after: after,
                messages_before,
                messages_after: run.history.len() as u32,
                context_window: window,
                threshold,
                duration_ms: compaction_started.elapsed().as_millis() as u64,
            },
        )?;
        Ok(None)
    }
}
