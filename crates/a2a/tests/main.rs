//! The integration tests of `murmur-a2a`, one test binary: one module a file.

mod properties;
mod rpc_errors;
mod schema;
mod spec_examples;
mod wire;
