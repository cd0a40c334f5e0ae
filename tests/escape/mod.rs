//! The escape suite: hostile fixtures (a tool, a hook, a shell child, an A2A client, an
//! archive) try to reach outside the session through the host around the sandbox, and each
//! test proves that nothing outside the workdir was read or written, that `mur` survived, and
//! that the session's trace is whole. `docs/security.md` lists every case.

mod archive;
mod door;
mod failures;
mod fence;
mod hooks;
mod limits;
mod manifest;
mod overload;
mod record;
mod record_door;
mod signals;
mod workdir;
