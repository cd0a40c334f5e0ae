//! The first-party toolbox (`artifacts/edit-file`, `search`, `list-files`, `fetch`, `ask`),
//! each driven through `mur tool invoke` and in a session of the real `mur`.

mod ask;
mod edit_file;
mod fetch;
mod list_files;
mod search;
