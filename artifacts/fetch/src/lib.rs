//! `fetch`: a first-party tool (being written).
