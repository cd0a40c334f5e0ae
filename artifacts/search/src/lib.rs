//! `search`: a first-party tool (being written).
