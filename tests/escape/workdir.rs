//! Escape cases: workdir.
