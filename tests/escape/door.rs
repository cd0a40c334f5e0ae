//! Escape cases: door.
