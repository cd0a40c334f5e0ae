//! Evaluating a capsule: a dataset of cases run through named variations of it (arms), each
//! session scored against what the case expects, the results kept beside the sessions' traces
//! and compared run to run.
//!
//! - [`dataset`]: the cases (JSON lines) and their expectations.
//! - [`arms`]: the variations (a driver choice, a model, a manifest overlay, variables, a
//!   directory of cassettes to replay or record).
//! - [`runner`]: running every case on every arm, in parallel, each in a fresh workspace (or
//!   one after another on one directory in place).
//! - [`score`]: the scorers; [`changes`]: the `changes` expectation (what a session changed in
//!   its workspace, as its trace records it).
//! - [`results`]: `run.json` and `results.jsonl` read back, summaries per arm, diffs.
//! - [`report`]: the self-contained HTML report.

pub mod arms;
pub mod changes;
pub mod dataset;
pub mod report;
pub mod results;
pub mod runner;
pub mod score;
