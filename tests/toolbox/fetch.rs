//! `fetch` through the real `mur` (being written).
