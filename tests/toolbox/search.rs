//! `search` through the real `mur` (being written).
