//! Escape cases: archive.
