//! `list-files` through the real `mur` (being written).
