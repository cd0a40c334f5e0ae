//! The integration tests of `murmur-runtime`, one test binary: one module a file.

mod control;
mod engine;
mod wit_contract;
