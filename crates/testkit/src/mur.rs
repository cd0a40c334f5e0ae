//! Running the `mur` binary from a test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// A murmur home shared by the test suite (`target/test-murmur-home`), so the compiled-component
/// cache is filled once for every test rather than once per test (`scripts/setup --tests`
/// fills it with every artifact and fixture).
pub fn shared_home() -> PathBuf {
    let home = repo_root().join("target").join("test-murmur-home");
    std::fs::create_dir_all(&home).expect("creating the shared test home");
    home
}

/// A local hook artifact `parent/name/` for a capsule of a test: the component of the fixture
/// `tests/fixtures/<fixture>` copied in (a component loads from inside its artifact's
/// directory only) and a `murmur.yaml` naming it, with `manifest_tail` (binding, mode,
/// policy lines) after the common fields. Returns the directory.
pub fn fixture_hook(parent: &Path, name: &str, fixture: &str, manifest_tail: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).expect("creating the hook's directory");
    std::fs::copy(
        repo_root()
            .join("tests/fixtures")
            .join(fixture)
            .join("component.wasm"),
        dir.join("component.wasm"),
    )
    .expect("the fixture's component: run ./scripts/setup --tests");
    std::fs::write(
        dir.join("murmur.yaml"),
        format!(
            "name: {name}\nversion: \"0.1.0\"\nruntime: hook\ndescription: test hook\ncomponent: component.wasm\n{manifest_tail}"
        ),
    )
    .expect("writing the hook's manifest");
    dir
}

/// Replaces `from`, which must be in it, with `to` in the text file `file` (a test's manifest).
pub fn replace_in(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("reading the file to edit");
    assert!(text.contains(from), "`{from}` is not in {}", file.display());
    std::fs::write(file, text.replace(from, to)).expect("writing the edited file");
}

/// One `mur` invocation being put together.
pub struct Mur {
    command: Command,
    stdin: Option<Vec<u8>>,
}

/// What one `mur` invocation printed and how it exited.
#[derive(Debug)]
pub struct MurOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl MurOutput {
    /// stdout parsed as JSON; panics with both streams when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!(
                "stdout is not JSON ({error})\n--- stdout ---\n{}\n--- stderr ---\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl Mur {
    /// `bin` is the `mur` binary (`env!("CARGO_BIN_EXE_mur")` in the test). The environment is
    /// cleared but for `PATH`, `HOME`, `CARGO` and `RUSTUP_HOME`/`CARGO_HOME`, and `MURMUR_HOME`
    /// points at [`shared_home`].
    pub fn new(bin: impl AsRef<Path>) -> Mur {
        let mut command = Command::new(bin.as_ref());
        command.env_clear();
        for name in [
            "PATH",
            "HOME",
            "CARGO",
            "RUSTUP_HOME",
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
        ] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.env("MURMUR_HOME", shared_home());
        Mur {
            command,
            stdin: None,
        }
    }

    /// [`Mur::new`], run as user `uid` and group `gid` with no supplementary groups, through
    /// `setpriv` (util-linux) which then `exec`s `mur` (so the child's pid is `mur`'s). Only a
    /// root test process can switch users; `HOME` and `MURMUR_HOME` should then be set to
    /// directories that user can write.
    pub fn as_user(bin: impl AsRef<Path>, uid: u32, gid: u32) -> Mur {
        let mut mur = Mur::new("setpriv");
        mur.command.args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".to_string(),
            "--".to_string(),
        ]);
        mur.command.arg(bin.as_ref());
        mur
    }

    /// The command as put together so far, for what this type does not offer (a `pre_exec`,
    /// other standard streams).
    pub fn into_command(self) -> Command {
        self.command
    }

    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Mur {
        self.command.arg(arg);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Mur
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Mur {
        self.command.env(name, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Mur {
        self.command.current_dir(dir);
        self
    }

    /// Feeds `bytes` to `mur`'s stdin (otherwise stdin is what `Command::output` gives: empty).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Mur {
        self.stdin = Some(bytes.into());
        self
    }

    /// Starts `mur` and returns at once, its stdout and stderr piped.
    pub fn spawn(mut self) -> std::process::Child {
        use std::process::Stdio;
        self.command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting mur")
    }

    /// Runs `mur` to its end.
    pub fn run(mut self) -> MurOutput {
        let output = match self.stdin.take() {
            None => self.command.output().expect("running mur"),
            Some(bytes) => {
                use std::io::Write;
                use std::process::Stdio;
                let mut child = self
                    .command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("running mur");
                let mut stdin = child.stdin.take().expect("mur's stdin");
                let writer = std::thread::spawn(move || {
                    let _ = stdin.write_all(&bytes);
                });
                let output = child.wait_with_output().expect("running mur");
                let _ = writer.join();
                output
            }
        };
        MurOutput {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}
