//! `ask`: a first-party tool (being written).
