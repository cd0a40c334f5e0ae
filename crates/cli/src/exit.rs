//! How `mur` ends: the exit codes docs/cli.md documents, one variant each.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Failed = 1,
    BadInput = 2,
    Stopped = 3,
    /// `mur send`: the agent's task waits for input.
    Waiting = 4,
    /// `mur run`: SIGHUP canceled the session (128 + 1).
    HungUp = 129,
    /// `mur run`: SIGINT canceled the session (128 + 2).
    Interrupted = 130,
    /// `mur run`: SIGTERM canceled the session (128 + 15).
    Terminated = 143,
}
