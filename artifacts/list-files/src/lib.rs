//! `list-files`: a first-party tool (being written).
