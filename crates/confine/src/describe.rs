//! What a shell call is, for people and for policy hooks.
//!
//! - `binary`: the canonical absolute path when the name resolved, else the bare name.
//! - `argv`: the exact arguments passed to the executable, after its name, untruncated.
//! - `script`: the `-c` body when the binary is a shell interpreter; absent otherwise.
//! - `command`: a display string, the script or the quoted arguments, cut to 200 characters.
//!   Never decide on it.
//! - `recipe`: the body of the target a `make`, `just` or `npm run` call names, read from the
//!   workdir by the runtime (a hook holds no grant on the workdir).

use std::path::Path;

use serde_json::Value;

use murmur_beneath::BeneathDir;

/// The longest `command` display string.
pub const COMMAND_DISPLAY_CHARS: usize = 200;

/// Shell interpreters whose `-c` argument is a script.
const INTERPRETERS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// The description of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub binary: String,
    pub command: String,
    pub argv: Vec<String>,
    pub script: Option<String>,
    pub recipe: Option<String>,
}

/// Describes a call of `invoked` (the name the model gave) with `args`; `canonical` is the
/// resolved binary, when it resolved; recipes are read from `workdir`.
pub fn describe(
    invoked: &str,
    canonical: Option<&Path>,
    args: &[String],
    workdir: &BeneathDir,
) -> Described {
    let name = Path::new(invoked)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| invoked.to_string());
    let script = if INTERPRETERS.contains(&name.as_str()) {
        script_of(args)
    } else {
        None
    };
    let display = match &script {
        Some(script) => script.clone(),
        None => args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
    };
    Described {
        binary: canonical
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| invoked.to_string()),
        command: display.chars().take(COMMAND_DISPLAY_CHARS).collect(),
        argv: args.to_vec(),
        recipe: match name.as_str() {
            "make" | "gmake" => make_recipe(args, workdir),
            "just" => just_recipe(args, workdir),
            "npm" => npm_script(args, workdir),
            _ => None,
        },
        script,
    }
}

/// The argument after the first `-c` (or a combined flag cluster ending in `c`, like `-lc`).
fn script_of(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            return None;
        }
        if arg.starts_with('-') && !arg.starts_with("--") && arg.ends_with('c') {
            return iter.next().cloned();
        }
        if !arg.starts_with('-') {
            return None;
        }
    }
    None
}

fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// The largest recipe file (`Makefile`, `justfile`, `package.json`) read for a description.
pub const RECIPE_FILE_MAX_BYTES: u64 = 1 << 20;

/// The first of `names` that is a regular file in the workdir (no link followed) of at most
/// [`RECIPE_FILE_MAX_BYTES`], as text.
fn read(workdir: &BeneathDir, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| {
        let bytes = workdir.read(name, RECIPE_FILE_MAX_BYTES).ok()?;
        String::from_utf8(bytes).ok()
    })
}

/// `make [options] TARGET`: the target's recipe lines (tab-indented) after its rule line.
fn make_recipe(args: &[String], workdir: &BeneathDir) -> Option<String> {
    let mut file = None;
    let mut target = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "-f" | "--file" | "--makefile" => file = iter.next().cloned(),
            "-C" | "--directory" | "-I" | "-j" | "-l" | "-o" | "-W" => {
                iter.next();
            }
            a if a.starts_with('-') || a.contains('=') => {}
            a => {
                target = Some(a.to_string());
                break;
            }
        }
    }
    let target = target?;
    let text = match &file {
        Some(file) if !file.contains("..") && !file.starts_with('/') => read(workdir, &[file])?,
        Some(_) => return None,
        None => read(workdir, &["GNUmakefile", "makefile", "Makefile"])?,
    };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some((head, _)) = line.split_once(':') else {
            continue;
        };
        if line.starts_with('\t') || line.starts_with('#') {
            continue;
        }
        if head.split_whitespace().any(|t| t == target) && !line.contains(":=") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.starts_with('\t') || l.trim().is_empty())
                .filter(|l| !l.trim().is_empty())
                .map(|l| &l[1..])
                .collect();
            return Some(body.join("\n"));
        }
    }
    None
}

/// `just [options] RECIPE`: the recipe's indented body.
fn just_recipe(args: &[String], workdir: &BeneathDir) -> Option<String> {
    let name = args.iter().find(|a| !a.starts_with('-'))?;
    let text = read(workdir, &["justfile", ".justfile", "Justfile", "JUSTFILE"])?;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with(char::is_whitespace) || line.starts_with('#') {
            continue;
        }
        let head = line.trim_start_matches('@');
        let Some((signature, _)) = head.split_once(':') else {
            continue;
        };
        if signature.split_whitespace().next() == Some(name.as_str()) && !head.contains(":=") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.starts_with(char::is_whitespace) || l.trim().is_empty())
                .filter(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            return Some(body.join("\n"));
        }
    }
    None
}

/// `npm run SCRIPT` (also `run-script`, `test`, `start`): the script from `package.json`.
fn npm_script(args: &[String], workdir: &BeneathDir) -> Option<String> {
    let mut words = args.iter().filter(|a| !a.starts_with('-'));
    let script = match words.next()?.as_str() {
        "run" | "run-script" => words.next()?.clone(),
        "test" | "start" | "stop" | "restart" => args.iter().find(|a| !a.starts_with('-'))?.clone(),
        _ => return None,
    };
    let package: Value = serde_json::from_str(&read(workdir, &["package.json"])?).ok()?;
    package
        .get("scripts")?
        .get(&script)?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workdir(dir: &tempfile::TempDir) -> BeneathDir {
        BeneathDir::open(dir.path()).unwrap()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_interpreters_c_body_is_the_script_and_the_display() {
        let dir = tempfile::tempdir().unwrap();
        let d = describe(
            "bash",
            Some(Path::new("/usr/bin/bash")),
            &args(&["-c", "echo hi && rm -rf build"]),
            &workdir(&dir),
        );
        assert_eq!(d.binary, "/usr/bin/bash");
        assert_eq!(d.script.as_deref(), Some("echo hi && rm -rf build"));
        assert_eq!(d.command, "echo hi && rm -rf build");
        assert_eq!(d.argv, args(&["-c", "echo hi && rm -rf build"]));
        let lc = describe("sh", None, &args(&["-lc", "ls"]), &workdir(&dir));
        assert_eq!(lc.script.as_deref(), Some("ls"));
        assert_eq!(lc.binary, "sh");
    }

    #[test]
    fn other_binaries_have_no_script_and_a_quoted_display_cut_to_200() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(300);
        let d = describe(
            "git",
            None,
            &args(&["commit", "-m", "two words", &long]),
            &workdir(&dir),
        );
        assert_eq!(d.script, None);
        assert!(d.command.starts_with("commit -m 'two words' xxx"));
        assert_eq!(d.command.chars().count(), COMMAND_DISPLAY_CHARS);
        assert_eq!(d.argv[3].len(), 300, "argv is never cut");
        // -c of a non-interpreter is not a script.
        assert_eq!(
            describe("python3", None, &args(&["-c", "print(1)"]), &workdir(&dir)).script,
            None
        );
    }

    #[test]
    fn recipes_of_make_just_and_npm_come_from_the_workdir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Makefile"),
            "CC := cc\n\nbuild: deps\n\tcargo build\n\tcp a b\n\ntest:\n\tcargo test\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("justfile"),
            "default:\n    echo default\n\ndeploy env='dev':\n    ./deploy.sh {{env}}\n    echo done\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts": {"lint": "eslint .", "test": "jest"}}"#,
        )
        .unwrap();
        let recipe = |binary: &str, list: &[&str]| {
            describe(binary, None, &args(list), &workdir(&dir)).recipe
        };
        assert_eq!(
            recipe("make", &["-j", "4", "build"]).as_deref(),
            Some("cargo build\ncp a b")
        );
        assert_eq!(recipe("make", &["test"]).as_deref(), Some("cargo test"));
        assert_eq!(recipe("make", &["missing"]), None);
        assert_eq!(
            recipe("just", &["deploy", "prod"]).as_deref(),
            Some("./deploy.sh {{env}}\necho done")
        );
        assert_eq!(recipe("npm", &["run", "lint"]).as_deref(), Some("eslint ."));
        assert_eq!(recipe("npm", &["test"]).as_deref(), Some("jest"));
        assert_eq!(recipe("npm", &["install"]), None);
        assert_eq!(recipe("git", &["status"]), None);
    }

    #[test]
    fn every_file_name_make_and_just_read_is_read_in_their_order() {
        let recipe = |names: &[(&str, &str)], binary: &str| {
            let dir = tempfile::tempdir().unwrap();
            for (name, body) in names {
                let text = match binary {
                    "make" => format!("build:\n\t{body}\n"),
                    _ => format!("build:\n    {body}\n"),
                };
                std::fs::write(dir.path().join(name), text).unwrap();
            }
            describe(binary, None, &args(&["build"]), &workdir(&dir)).recipe
        };
        // Each name alone is read, as make and just read it.
        for name in ["GNUmakefile", "makefile", "Makefile"] {
            assert_eq!(recipe(&[(name, name)], "make").as_deref(), Some(name));
        }
        for name in ["justfile", ".justfile", "Justfile", "JUSTFILE"] {
            assert_eq!(recipe(&[(name, name)], "just").as_deref(), Some(name));
        }
        // Where several are there, the one make (GNU make) runs wins: GNUmakefile, makefile,
        // then Makefile.
        assert_eq!(
            recipe(&[("Makefile", "third"), ("makefile", "second")], "make").as_deref(),
            Some("second")
        );
        assert_eq!(
            recipe(
                &[
                    ("Makefile", "third"),
                    ("makefile", "second"),
                    ("GNUmakefile", "first")
                ],
                "make"
            )
            .as_deref(),
            Some("first")
        );
    }

    #[test]
    fn a_planted_recipe_link_is_never_read() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::write(outer.path().join("secret"), "build:\n\tthe host's secret\n").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), dir.path().join("Makefile"))
            .unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("justfile")).unwrap();
        let recipe = |binary: &str, list: &[&str]| {
            describe(binary, None, &args(list), &workdir(&dir)).recipe
        };
        assert_eq!(recipe("make", &["build"]), None);
        assert_eq!(recipe("just", &["build"]), None);
        // A huge regular file is not read either.
        std::fs::write(
            dir.path().join("package.json"),
            vec![b' '; RECIPE_FILE_MAX_BYTES as usize + 1],
        )
        .unwrap();
        assert_eq!(recipe("npm", &["test"]), None);
    }
}
