//! `ask` through the real `mur` (being written).
