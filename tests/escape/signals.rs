//! Escape cases: signals.
