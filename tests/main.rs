//! The black-box tests of `mur`: every module drives the real `mur` binary (built by cargo for
//! this test, `CARGO_BIN_EXE_mur`) against real components over real sockets on loopback. They
//! are one test binary, so the suite links once; `cargo test --test mur <module>::` runs one
//! file's tests.

mod a2a_python;
mod artifacts;
mod capsule_components;
mod check;
mod control;
mod deploy;
mod door;
mod door_auth;
mod driver_choices;
mod escape;
mod eval;
mod example_fix_tests;
mod first_party_hooks;
mod guest_languages;
mod hooks;
mod hostile_clients;
mod hostile_peers;
mod house;
mod mcp;
mod mcp_serve;
mod native_escape;
mod oci;
mod otel;
mod peer_tools;
mod peers;
mod process_transport;
mod replay;
mod run_credentials;
mod run_driver_answers;
mod run_session;
mod sandbox;
mod shell;
mod tool_invoke;
mod toolbox;
mod trace_cli;
mod workspace_changes;
mod worlds;
