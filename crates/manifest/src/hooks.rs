//! A hook's contract: which handler it binds to, whether it blocks, and which arm it expects
//! to be committed. The rules are the table "What each handler can commit".
//!
//! - [`honored_arm`] is that table: the one arm each handler commits (`on-stage` commits
//!   `write-manifests`, `on-task-end` commits `reopen-task`, …; the session handlers commit
//!   none).
//! - [`check_hook_contract`] checks a hook's declared triple against it, and is used both when a
//!   hook's own manifest is loaded and at staging:
//!   - with a `binding`, `commit_policy` must be `none` or the arm that binding honors, else
//!     `E-HOOK-001`, naming the binding, the declared policy and the honored one. A hook with no
//!     `binding` receives every event, so any policy is valid for it;
//!   - an `async` hook's return value is never committed, so it requires `commit_policy: none`,
//!     else `E-HOOK-002`;
//!   - `on-stage` runs once, before any session, and is never `async`, else `E-HOOK-003`.
//! - An unknown binding, policy or mode is `E-HOOK-004`, listing the valid words.

use crate::diagnostic::{Diagnostic, code};

closed_set! {
    /// The handler a hook binds to.
    pub enum Binding (code::E_HOOK_004, "binding") {
        OnStage = "on-stage",
        OnSessionStart = "on-session-start",
        OnTaskStart = "on-task-start",
        OnInference = "on-inference",
        OnToolCall = "on-tool-call",
        OnShell = "on-shell",
        OnCompaction = "on-compaction",
        OnTaskEnd = "on-task-end",
        OnSessionEnd = "on-session-end",
    }
}

closed_set! {
    /// The `hook-output` arm a hook expects the runtime to commit. Default `none`.
    #[derive(Default)]
    pub enum CommitPolicy (code::E_HOOK_004, "commit_policy") {
        #[default]
        None = "none",
        Deny = "deny",
        SeedContext = "seed-context",
        ReopenTask = "reopen-task",
        ReplaceContext = "replace-context",
        WriteManifests = "write-manifests",
        Artifact = "artifact",
    }
}

closed_set! {
    /// Whether the agent loop waits for the hook. Default `blocking`.
    #[derive(Default)]
    pub enum ExecutionMode (code::E_HOOK_004, "execution_mode") {
        #[default]
        Blocking = "blocking",
        Async = "async",
    }
}

/// The one arm the handler `binding` commits, or `None` for a handler that commits none
/// (`on-session-start`, `on-session-end`). `deny` is honored at the decision-point dispatch of
/// `on-tool-call` and `on-shell` only.
pub fn honored_arm(binding: Binding) -> Option<CommitPolicy> {
    match binding {
        Binding::OnStage => Some(CommitPolicy::WriteManifests),
        Binding::OnInference => Some(CommitPolicy::Artifact),
        Binding::OnCompaction => Some(CommitPolicy::ReplaceContext),
        Binding::OnTaskEnd => Some(CommitPolicy::ReopenTask),
        Binding::OnTaskStart => Some(CommitPolicy::SeedContext),
        Binding::OnShell | Binding::OnToolCall => Some(CommitPolicy::Deny),
        Binding::OnSessionStart | Binding::OnSessionEnd => None,
    }
}

/// Every problem with the contract of hook `hook` (see the module docs). Each diagnostic's
/// path is the top-level field of the hook's own manifest it is about.
pub fn check_hook_contract(
    hook: &str,
    binding: Option<Binding>,
    execution_mode: ExecutionMode,
    commit_policy: CommitPolicy,
) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    if let Some(binding) = binding {
        let honored = honored_arm(binding);
        if commit_policy != CommitPolicy::None && Some(commit_policy) != honored {
            let honored_name = honored.unwrap_or(CommitPolicy::None).as_str();
            let binders: Vec<&str> = Binding::ALL
                .iter()
                .filter(|b| honored_arm(**b) == Some(commit_policy))
                .map(|b| b.as_str())
                .collect();
            found.push(
                Diagnostic::new(
                    code::E_HOOK_001,
                    format!(
                        "hook `{hook}` declares `commit_policy: {commit_policy}` on `binding: {binding}`, which honors only `{honored_name}`"
                    ),
                )
                .hint(format!(
                    "declare `commit_policy: {honored_name}`{}, or bind the hook to the handler that commits `{commit_policy}`: {}",
                    if honored.is_some() { " (or `none`)" } else { "" },
                    binders.join(" or ")
                ))
                .at_path("commit_policy"),
            );
        }
    }
    if execution_mode == ExecutionMode::Async && commit_policy != CommitPolicy::None {
        found.push(
            Diagnostic::new(
                code::E_HOOK_002,
                format!(
                    "hook `{hook}` is `execution_mode: async` with `commit_policy: {commit_policy}`, but an async hook's return value is never committed"
                ),
            )
            .hint("declare `commit_policy: none` for an async hook, or make it `execution_mode: blocking`")
            .at_path("commit_policy"),
        );
    }
    if execution_mode == ExecutionMode::Async && binding == Some(Binding::OnStage) {
        found.push(
            Diagnostic::new(
                code::E_HOOK_003,
                format!("hook `{hook}` is `execution_mode: async` on `binding: on-stage`, which always runs blocking"),
            )
            .hint("remove `execution_mode: async`: staging waits for every on-stage hook")
            .at_path("execution_mode"),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honored_arms_follow_the_seed_table() {
        use Binding::*;
        use CommitPolicy as P;
        let table = [
            (OnStage, Some(P::WriteManifests)),
            (OnInference, Some(P::Artifact)),
            (OnCompaction, Some(P::ReplaceContext)),
            (OnTaskEnd, Some(P::ReopenTask)),
            (OnTaskStart, Some(P::SeedContext)),
            (OnShell, Some(P::Deny)),
            (OnToolCall, Some(P::Deny)),
            (OnSessionStart, None),
            (OnSessionEnd, None),
        ];
        for (binding, arm) in table {
            assert_eq!(honored_arm(binding), arm, "{binding}");
        }
    }

    #[test]
    fn every_binding_accepts_none_and_its_own_arm() {
        for &binding in Binding::ALL {
            assert!(
                check_hook_contract(
                    "h",
                    Some(binding),
                    ExecutionMode::Blocking,
                    CommitPolicy::None
                )
                .is_empty()
            );
            if let Some(arm) = honored_arm(binding) {
                assert!(
                    check_hook_contract("h", Some(binding), ExecutionMode::Blocking, arm)
                        .is_empty()
                );
            }
        }
    }

    #[test]
    fn no_binding_accepts_any_blocking_policy() {
        for &policy in CommitPolicy::ALL {
            assert!(check_hook_contract("h", None, ExecutionMode::Blocking, policy).is_empty());
        }
    }

    #[test]
    fn a_policy_the_binding_cannot_commit_names_all_three() {
        let found = check_hook_contract(
            "gate",
            Some(Binding::OnStage),
            ExecutionMode::Blocking,
            CommitPolicy::ReopenTask,
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].code, "E-HOOK-001");
        assert_eq!(
            found[0].message,
            "hook `gate` declares `commit_policy: reopen-task` on `binding: on-stage`, which honors only `write-manifests`"
        );
        assert!(found[0].hint.as_deref().unwrap().contains("on-task-end"));
    }

    #[test]
    fn a_session_handler_honors_only_none() {
        let found = check_hook_contract(
            "h",
            Some(Binding::OnSessionEnd),
            ExecutionMode::Blocking,
            CommitPolicy::Deny,
        );
        assert_eq!(found[0].code, "E-HOOK-001");
        assert!(found[0].message.ends_with("which honors only `none`"));
        assert!(
            found[0]
                .hint
                .as_deref()
                .unwrap()
                .contains("on-tool-call or on-shell")
        );
    }

    #[test]
    fn async_requires_none_and_never_on_stage() {
        let found = check_hook_contract(
            "h",
            Some(Binding::OnShell),
            ExecutionMode::Async,
            CommitPolicy::Deny,
        );
        assert_eq!(
            found.iter().map(|d| d.code).collect::<Vec<_>>(),
            ["E-HOOK-002"]
        );
        let found = check_hook_contract(
            "h",
            Some(Binding::OnStage),
            ExecutionMode::Async,
            CommitPolicy::None,
        );
        assert_eq!(
            found.iter().map(|d| d.code).collect::<Vec<_>>(),
            ["E-HOOK-003"]
        );
        assert!(
            check_hook_contract("h", None, ExecutionMode::Async, CommitPolicy::None).is_empty()
        );
    }

    #[test]
    fn unknown_words_list_the_valid_ones() {
        let err = serde_json::from_str::<Binding>("\"on-stag\"").unwrap_err();
        let d = crate::diagnostic::from_serde_error(&err.to_string()).unwrap();
        assert_eq!(d.code, "E-HOOK-004");
        let hint = d.hint.unwrap();
        assert!(hint.contains("on-session-start") && hint.contains("did you mean `on-stage`"));
    }
}
