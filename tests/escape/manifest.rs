//! Escape cases: manifest.
