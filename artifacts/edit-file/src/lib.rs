//! `edit-file`: a first-party tool (being written).
