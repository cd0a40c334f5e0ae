//! Escape cases: limits.
