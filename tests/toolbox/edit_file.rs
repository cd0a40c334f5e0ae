//! `edit-file` through the real `mur` (being written).
