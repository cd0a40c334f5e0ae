//! The integration tests of `murmur-manifest`, one test binary: one module a file.

mod codes;
mod common;
mod containment;
mod every_problem;
mod interpolation;
mod lock;
mod never_panics;
mod overlay;
mod spec_example;
