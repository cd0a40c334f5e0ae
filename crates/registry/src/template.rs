//! A new artifact's sources, ready to build: `mur new tool|driver|hook NAME --lang L`.
//!
//! What this module promises:
//!
//! - [`create`] writes a working artifact into a directory that does not exist yet (or is
//!   empty): its `murmur.yaml` (with the `build:` that turns the sources into its component),
//!   the sources, the guest helper library of its language (Python and JavaScript), an
//!   `input.json` that `mur tool invoke` runs at once (tools and drivers), a `.gitignore`, and
//!   its WIT: `wit/world.wit`, the artifact's own world (package `local:NAME`, world `NAME`)
//!   including Murmur's world of its kind, with every package that uses under `wit/deps/` (the
//!   Murmur worlds as `deps/worlds/`, each `murmur:*` package, the WASI packages), so it builds
//!   with nothing copied by hand and its author can import more beside the included world.
//! - Nothing is written unless everything can be: a bad name or a directory that holds files is
//!   refused first (`E-REG-013`, `E-REG-014`); a write that fails midway removes what this call
//!   wrote.
//! - The templates and the helper libraries are files of this repository
//!   (`crates/registry/templates/`, `crates/guest/python/`, `crates/guest/js/`), built into `mur`:
//!   what a user gets is what the tests build.

use std::path::{Path, PathBuf};

use murmur_manifest::Diagnostic;
use murmur_manifest::diagnostic::code;

/// What the artifact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Driver,
    Hook,
}

/// The language its sources are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// The `wit/` folder of this runtime, as the files under it (relative to it).
const WIT: &[(&str, &str)] = &[
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
    (
        "deps/artifact-manager/manage.wit",
        include_str!("../../../wit/deps/artifact-manager/manage.wit"),
    ),
    (
        "deps/capsule/run.wit",
        include_str!("../../../wit/deps/capsule/run.wit"),
    ),
    (
        "deps/conversation/read.wit",
        include_str!("../../../wit/deps/conversation/read.wit"),
    ),
    (
        "deps/hook/lifecycle.wit",
        include_str!("../../../wit/deps/hook/lifecycle.wit"),
    ),
    (
        "deps/message/send.wit",
        include_str!("../../../wit/deps/message/send.wit"),
    ),
    (
        "deps/runtime/inference.wit",
        include_str!("../../../wit/deps/runtime/inference.wit"),
    ),
    (
        "deps/shell/execute.wit",
        include_str!("../../../wit/deps/shell/execute.wit"),
    ),
    (
        "deps/task-io/read.wit",
        include_str!("../../../wit/deps/task-io/read.wit"),
    ),
    (
        "deps/task/task.wit",
        include_str!("../../../wit/deps/task/task.wit"),
    ),
    (
        "deps/text/chunks.wit",
        include_str!("../../../wit/deps/text/chunks.wit"),
    ),
    (
        "deps/tool-registry/invoke.wit",
        include_str!("../../../wit/deps/tool-registry/invoke.wit"),
    ),
    (
        "deps/tool/run.wit",
        include_str!("../../../wit/deps/tool/run.wit"),
    ),
    (
        "deps/wasi-cli/package.wit",
        include_str!("../../../wit/deps/wasi-cli/package.wit"),
    ),
    (
        "deps/wasi-clocks/package.wit",
        include_str!("../../../wit/deps/wasi-clocks/package.wit"),
    ),
    (
        "deps/wasi-filesystem/package.wit",
        include_str!("../../../wit/deps/wasi-filesystem/package.wit"),
    ),
    (
        "deps/wasi-http/package.wit",
        include_str!("../../../wit/deps/wasi-http/package.wit"),
    ),
    (
        "deps/wasi-io/package.wit",
        include_str!("../../../wit/deps/wasi-io/package.wit"),
    ),
    (
        "deps/wasi-random/package.wit",
        include_str!("../../../wit/deps/wasi-random/package.wit"),
    ),
    (
        "deps/wasi-sockets/package.wit",
        include_str!("../../../wit/deps/wasi-sockets/package.wit"),
    ),
];

const PYTHON_HELPER: (&str, &str) = (
    "murmur_guest.py",
    include_str!("../../guest/python/murmur_guest.py"),
);
const JS_HELPER: (&str, &str) = (
    "murmur-guest.js",
    include_str!("../../guest/js/murmur-guest.js"),
);
const JS_FILES: (&str, &str) = (
    "murmur-files.js",
    include_str!("../../guest/js/murmur-files.js"),
);

/// The artifact's own world, by kind (`__NAME__` standing for its name).
fn world(kind: Kind) -> &'static str {
    match kind {
        Kind::Tool => include_str!("../templates/tool/world.wit"),
        Kind::Driver => include_str!("../templates/driver/world.wit"),
        Kind::Hook => include_str!("../templates/hook/world.wit"),
    }
}

macro_rules! template {
    ($dir:literal: $($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("../templates/", $dir, "/", $file)))),*]
    };
}

/// The files of one template, `__NAME__` standing for the artifact's name. `gitignore` is
/// written as `.gitignore`.
fn files(kind: Kind, lang: Lang) -> &'static [(&'static str, &'static str)] {
    match (kind, lang) {
        (Kind::Tool, Lang::Python) => {
            template!("tool/python": "murmur.yaml", "app.py", "input.json", "gitignore")
        }
        (Kind::Tool, Lang::Js) => {
            template!("tool/js": "murmur.yaml", "tool.js", "input.json", "gitignore")
        }
        (Kind::Tool, Lang::Rust) => template!("tool/rust": "murmur.yaml", "Cargo.toml",
            "src/lib.rs", "input.json", "gitignore"),
        (Kind::Driver, Lang::Python) => {
            template!("driver/python": "murmur.yaml", "app.py", "input.json", "gitignore")
        }
        (Kind::Driver, Lang::Js) => {
            template!("driver/js": "murmur.yaml", "driver.js", "input.json", "gitignore")
        }
        (Kind::Driver, Lang::Rust) => template!("driver/rust": "murmur.yaml", "Cargo.toml",
            "src/lib.rs", "input.json", "gitignore"),
        (Kind::Hook, Lang::Python) => {
            template!("hook/python": "murmur.yaml", "app.py", "gitignore")
        }
        (Kind::Hook, Lang::Js) => template!("hook/js": "murmur.yaml", "hook.js", "gitignore"),
        (Kind::Hook, Lang::Rust) => {
            template!("hook/rust": "murmur.yaml", "Cargo.toml", "src/lib.rs", "gitignore")
        }
    }
}

/// The helper libraries written beside the sources.
fn helpers(kind: Kind, lang: Lang) -> Vec<(&'static str, &'static str)> {
    match (kind, lang) {
        (Kind::Hook, _) | (_, Lang::Rust) => Vec::new(),
        (_, Lang::Python) => vec![PYTHON_HELPER],
        (Kind::Tool, Lang::Js) => vec![JS_HELPER, JS_FILES],
        (Kind::Driver, Lang::Js) => vec![JS_HELPER],
    }
}

/// Whether `name` is one an artifact made here can take: words of lowercase letters and
/// digits, each starting with a letter, joined by single hyphens, at most 64 characters. (It
/// is the tool's name to the model, a WIT package and world name, a Rust package name and a
/// file name at once.)
pub fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.split('-').all(|word| {
            word.starts_with(|c: char| c.is_ascii_lowercase())
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Writes the artifact `name` of `kind` in `lang` into `dir` (created; it must not exist or be
/// empty). Returns the files written, relative to `dir`, in the order written.
pub fn create(
    kind: Kind,
    lang: Lang,
    name: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>, Box<Diagnostic>> {
    if !valid_name(name) {
        return Err(Box::new(Diagnostic::new(
            code::E_REG_013,
            format!("`{name}` is not a name an artifact can take"),
        )
        .hint("use words of lowercase letters and digits, each starting with a letter, joined by single hyphens (at most 64 characters), as in `read-notes`")));
    }
    let existed = dir.exists();
    if existed {
        let empty = std::fs::read_dir(dir)
            .map(|mut entries| entries.next().is_none())
            .unwrap_or(false);
        if !dir.is_dir() || !empty {
            return Err(Box::new(
                Diagnostic::new(
                    code::E_REG_014,
                    format!(
                        "{} already exists and is not an empty directory",
                        dir.display()
                    ),
                )
                .hint("name a new directory (`--dir PATH`), or remove this one"),
            ));
        }
    }
    let mut plan: Vec<(PathBuf, String)> = Vec::new();
    for (file, text) in files(kind, lang) {
        let file = if *file == "gitignore" {
            ".gitignore"
        } else {
            file
        };
        plan.push((PathBuf::from(file), text.replace("__NAME__", name)));
    }
    for (file, text) in helpers(kind, lang) {
        plan.push((PathBuf::from(file), text.to_string()));
    }
    plan.push((
        PathBuf::from("wit/world.wit"),
        world(kind).replace("__NAME__", name),
    ));
    for (file, text) in WIT {
        // The Murmur worlds become a dependency of the artifact's own world.
        let file = if *file == "worlds.wit" {
            "deps/worlds/worlds.wit"
        } else {
            file
        };
        plan.push((Path::new("wit").join(file), text.to_string()));
    }
    let write = || -> std::io::Result<()> {
        for (file, text) in &plan {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)?;
        }
        Ok(())
    };
    if let Err(error) = write() {
        // Nothing half-made is left: the directory was new or empty.
        if existed {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let _ = if path.is_dir() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
        return Err(Box::new(Diagnostic::new(
            code::E_REG_014,
            format!("writing the artifact into {}: {error}", dir.display()),
        )
        .hint(
            "check that the directory is writable and the disk has room; nothing was left behind",
        )));
    }
    Ok(plan.into_iter().map(|(file, _)| file).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_an_artifact_can_take() {
        for good in ["a", "read-notes", "tool2", "a-b2-c", &"x".repeat(64)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "Read",
            "2tool",
            "-a",
            "a-",
            "a--b",
            "a_b",
            "a.b",
            "a-2b",
            "../x",
            "a/b",
            &"x".repeat(65),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    /// Every file of the repository's `wit/` is built into `mur`, and nothing else.
    #[test]
    fn the_embedded_wit_is_the_whole_wit_folder() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let mut found = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let relative = path.strip_prefix(&root).unwrap();
                    found.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        found.sort();
        let mut embedded: Vec<String> = WIT.iter().map(|(f, _)| f.to_string()).collect();
        embedded.sort();
        assert_eq!(found, embedded);
        for (file, text) in WIT {
            assert_eq!(
                std::fs::read_to_string(root.join(file)).unwrap(),
                *text,
                "{file}"
            );
        }
    }

    /// Every file of every template directory is one some template writes.
    #[test]
    fn every_template_file_is_written_by_its_template() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
        for (kind, kind_dir) in [
            (Kind::Tool, "tool"),
            (Kind::Driver, "driver"),
            (Kind::Hook, "hook"),
        ] {
            for (lang, lang_dir) in [
                (Lang::Rust, "rust"),
                (Lang::Python, "python"),
                (Lang::Js, "js"),
            ] {
                let dir = root.join(kind_dir).join(lang_dir);
                let mut on_disk = Vec::new();
                let mut stack = vec![dir.clone()];
                while let Some(d) = stack.pop() {
                    for entry in std::fs::read_dir(&d).unwrap().flatten() {
                        if entry.path().is_dir() {
                            stack.push(entry.path());
                        } else {
                            on_disk.push(
                                entry
                                    .path()
                                    .strip_prefix(&dir)
                                    .unwrap()
                                    .to_string_lossy()
                                    .to_string(),
                            );
                        }
                    }
                }
                on_disk.sort();
                let mut listed: Vec<String> = files(kind, lang)
                    .iter()
                    .map(|(f, _)| f.to_string())
                    .collect();
                listed.sort();
                assert_eq!(on_disk, listed, "{kind_dir}/{lang_dir}");
            }
        }
    }

    #[test]
    fn an_artifact_is_written_whole_and_a_used_directory_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("read-notes");
        let written = create(Kind::Tool, Lang::Python, "read-notes", &dir).unwrap();
        assert!(written.contains(&PathBuf::from("murmur_guest.py")));
        assert!(written.contains(&PathBuf::from(".gitignore")));
        let manifest = std::fs::read_to_string(dir.join("murmur.yaml")).unwrap();
        assert!(manifest.contains("name: read-notes"), "{manifest}");
        assert!(!manifest.contains("__NAME__"));
        assert!(dir.join("wit/deps/wasi-filesystem/package.wit").is_file());
        assert!(dir.join("wit/deps/worlds/worlds.wit").is_file());
        let own = std::fs::read_to_string(dir.join("wit/world.wit")).unwrap();
        assert!(own.contains("package local:read-notes;"), "{own}");
        assert!(own.contains("world read-notes {"), "{own}");
        assert!(own.contains("include murmur:worlds/tool@0.1.0;"), "{own}");
        let again = create(Kind::Tool, Lang::Js, "read-notes", &dir).unwrap_err();
        assert_eq!(again.code, code::E_REG_014);
        let bad = create(Kind::Tool, Lang::Js, "Bad Name", &temp.path().join("x")).unwrap_err();
        assert_eq!(bad.code, code::E_REG_013);
        assert!(!temp.path().join("x").exists());
    }
}
