//! The home of a session's agent CLI: a directory of the `mur` session's own, never the
//! user's.
//!
//! What it promises:
//!
//! - **One per session, the user's never written.** [`CliHome::create`] makes a directory in
//!   the host's temporary directory (`murmur-cli-home-XXXXXX`, mode 0700) that is the CLI's
//!   `HOME`, with its config directory inside (Claude Code's `CLAUDE_CONFIG_DIR` is
//!   `HOME/.claude`, Codex's `CODEX_HOME` is `HOME/.codex`). Every task of the session runs the
//!   CLI in it, so the CLI's own sessions (its `--resume`) last as long as the `mur` session;
//!   dropping the [`CliHome`] (the session ending) removes it, with the copies in it.
//! - **Seeded with what the CLI needs to authenticate and run, nothing else**, copied from the
//!   user's config directory ([`user_config_dir`]: `CLAUDE_CONFIG_DIR`, else `~/.claude`;
//!   `CODEX_HOME`, else `~/.codex`): Claude Code's `.credentials.json`, and from its state file
//!   (`$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`) only the entries naming the
//!   account and its key ([`CLAUDE_STATE_KEPT`]); Codex's `auth.json` and `config.toml`. Not
//!   the user's settings, hooks, plugins, agents, histories or projects.
//! - **Copied, never followed.** Each file is read through [`murmur_beneath`]: a regular file
//!   with no other hard links, its last name not a symbolic link, at most [`SEED_MAX_BYTES`]
//!   (the state file: [`CLAUDE_STATE_MAX_BYTES`]). A file that is not there is not copied; one
//!   that is there but breaks a rule stops the run with a message naming it, never silently
//!   dropped. Copies are written mode 0600.

use std::path::{Path, PathBuf};

use murmur_beneath::{BeneathDir, BeneathError};
use serde_json::Value;

use crate::grants::env::HostEnv;

/// The most bytes of one file copied into the session's home.
pub const SEED_MAX_BYTES: u64 = 1 << 20;
/// The most bytes of Claude Code's state file (`.claude.json`) read, to keep its account
/// entries: it also holds every project's history and grows.
pub const CLAUDE_STATE_MAX_BYTES: u64 = 64 << 20;
/// The entries of Claude Code's state file that name the account and its key: the only ones
/// copied.
pub const CLAUDE_STATE_KEPT: &[&str] = &[
    "oauthAccount",
    "primaryApiKey",
    "customApiKeyResponses",
    "userID",
    "hasCompletedOnboarding",
    "lastOnboardingVersion",
];

/// What one CLI's home holds: its config directory's name in the home, the variable naming
/// it, the files of the user's config directory copied whole, and whether Claude Code's state
/// file is taken (its [`CLAUDE_STATE_KEPT`] entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub dir: &'static str,
    pub variable: &'static str,
    pub seeded: &'static [&'static str],
    pub claude_state: bool,
}

/// Claude Code's: `HOME/.claude` (`CLAUDE_CONFIG_DIR`), its `.credentials.json`, and the
/// account entries of its state file.
pub const CLAUDE_CODE: Layout = Layout {
    dir: ".claude",
    variable: "CLAUDE_CONFIG_DIR",
    seeded: &[".credentials.json"],
    claude_state: true,
};

/// Codex's: `HOME/.codex` (`CODEX_HOME`), its `auth.json` and `config.toml`.
pub const CODEX: Layout = Layout {
    dir: ".codex",
    variable: "CODEX_HOME",
    seeded: &["auth.json", "config.toml"],
    claude_state: false,
};

/// The user's own config directory of the CLI: the host's `CLAUDE_CONFIG_DIR` (Codex:
/// `CODEX_HOME`), else `~/.claude` (`~/.codex`). Read by Murmur to seed the session's copy;
/// the CLI never gets it.
pub fn user_config_dir(layout: &Layout, host_env: &HostEnv) -> Option<PathBuf> {
    host_env(layout.variable)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            host_env("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(layout.dir))
        })
}

/// The user's Claude Code state file: `$CLAUDE_CONFIG_DIR/.claude.json`, else
/// `~/.claude.json`.
fn claude_state_file(host_env: &HostEnv) -> Option<(PathBuf, &'static str)> {
    let dir = host_env("CLAUDE_CONFIG_DIR")
        .filter(|dir| !dir.is_empty())
        .or_else(|| host_env("HOME").filter(|home| !home.is_empty()))?;
    Some((PathBuf::from(dir), ".claude.json"))
}

/// A session's CLI home; removed when dropped.
#[derive(Debug)]
pub struct CliHome {
    dir: tempfile::TempDir,
    layout: Layout,
}

impl CliHome {
    /// Makes the home of a CLI laid out as `layout` for one session, seeded from the user's
    /// config directory as the module docs say; the error says which file could not be copied.
    pub fn create(layout: &Layout, host_env: &HostEnv) -> Result<CliHome, String> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("murmur-cli-home-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|error| format!("the CLI's home for this session cannot be made: {error}"))?;
        let home = CliHome {
            dir,
            layout: *layout,
        };
        let config = home.config_dir();
        std::fs::create_dir(&config).map_err(|error| {
            format!(
                "the CLI's config directory {} cannot be made: {error}",
                config.display()
            )
        })?;
        if let Some(user) = user_config_dir(layout, host_env) {
            for name in layout.seeded {
                if let Some(bytes) = read_seed(&user, name, SEED_MAX_BYTES)? {
                    write_private(&config.join(name), &bytes)?;
                }
            }
        }
        if layout.claude_state
            && let Some((dir, name)) = claude_state_file(host_env)
            && let Some(bytes) = read_seed(&dir, name, CLAUDE_STATE_MAX_BYTES)?
        {
            write_private(
                &config.join(".claude.json"),
                claude_state_kept(&bytes).as_bytes(),
            )?;
        }
        Ok(home)
    }

    /// The CLI's `HOME`.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// Its config directory: `HOME/.claude` or `HOME/.codex`.
    pub fn config_dir(&self) -> PathBuf {
        self.home().join(self.layout.dir)
    }

    /// The variable naming the config directory (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`), and its
    /// value.
    pub fn config_env(&self) -> (String, String) {
        (
            self.layout.variable.to_string(),
            self.config_dir().display().to_string(),
        )
    }
}

/// `dir/name`'s bytes, or none when there is no such file (or no such directory); a file
/// that is there but is a link, not a regular file, hard-linked elsewhere or over `limit` is
/// an error naming it.
fn read_seed(dir: &Path, name: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let opened = match BeneathDir::open(dir) {
        Ok(opened) => opened,
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(error) => {
            return Err(format!(
                "{} cannot be read to seed the CLI's home: {error}",
                dir.display()
            ));
        }
    };
    match opened.read(name, limit) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(BeneathError::NotFound { .. }) => Ok(None),
        Err(error) => Err(format!(
            "{} is not copied into the CLI's home for this session ({error}): Murmur copies a \
             CLI's login files only as regular files of at most {limit} bytes, never through a \
             link; replace it with the file itself, or point {} at a directory that holds it",
            dir.join(name).display(),
            if name == ".claude.json" {
                "CLAUDE_CONFIG_DIR"
            } else {
                "the CLI's config variable"
            }
        )),
    }
}

/// Of Claude Code's state file, only the entries of [`CLAUDE_STATE_KEPT`], as a JSON object
/// (empty when the file is not a JSON object).
pub fn claude_state_kept(bytes: &[u8]) -> String {
    let kept: serde_json::Map<String, Value> = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(state)) => state
            .into_iter()
            .filter(|(key, _)| CLAUDE_STATE_KEPT.contains(&key.as_str()))
            .collect(),
        _ => serde_json::Map::new(),
    };
    Value::Object(kept).to_string()
}

/// Writes `bytes` to the new file `path`, readable by this user only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|error| format!("{} cannot be written: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::fs::PermissionsExt;

    fn env_of(pairs: &[(&str, &Path)]) -> HostEnv {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string()))
            .collect();
        std::sync::Arc::new(move |name: &str| map.get(name).cloned())
    }

    #[test]
    fn claude_gets_its_credentials_and_account_but_nothing_else_of_the_users() {
        let user = tempfile::tempdir().unwrap();
        let claude = user.path().join(".claude");
        std::fs::create_dir_all(claude.join("projects")).unwrap();
        std::fs::write(claude.join(".credentials.json"), r#"{"token":"t"}"#).unwrap();
        std::fs::write(claude.join("settings.json"), r#"{"hooks":{}}"#).unwrap();
        std::fs::write(claude.join("projects/p.jsonl"), "history").unwrap();
        std::fs::write(
            user.path().join(".claude.json"),
            r#"{"oauthAccount":{"email":"a@b"},"projects":{"/x":{}},"mcpServers":{"s":{}}}"#,
        )
        .unwrap();
        let home = CliHome::create(&CLAUDE_CODE, &env_of(&[("HOME", user.path())])).unwrap();
        let config = home.config_dir();
        assert_eq!(config, home.home().join(".claude"));
        let mut names: Vec<_> = std::fs::read_dir(&config)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [".claude.json", ".credentials.json"]);
        assert_eq!(
            std::fs::read_to_string(config.join(".credentials.json")).unwrap(),
            r#"{"token":"t"}"#
        );
        assert_eq!(
            std::fs::read_to_string(config.join(".claude.json")).unwrap(),
            r#"{"oauthAccount":{"email":"a@b"}}"#
        );
        let mode = std::fs::metadata(config.join(".credentials.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(home.home()).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Gone with the session.
        let path = home.home().to_path_buf();
        drop(home);
        assert!(!path.exists());
    }

    #[test]
    fn codex_gets_auth_and_config_from_codex_home() {
        let user = tempfile::tempdir().unwrap();
        let codex = user.path().join("elsewhere");
        std::fs::create_dir_all(&codex).unwrap();
        std::fs::write(codex.join("auth.json"), "{}").unwrap();
        std::fs::write(codex.join("config.toml"), "model = \"m\"\n").unwrap();
        std::fs::write(codex.join("history.jsonl"), "x").unwrap();
        let env = env_of(&[("HOME", user.path()), ("CODEX_HOME", &codex)]);
        let home = CliHome::create(&CODEX, &env).unwrap();
        assert_eq!(home.config_env().0, "CODEX_HOME");
        let config = home.config_dir();
        assert_eq!(
            std::fs::read_to_string(config.join("config.toml")).unwrap(),
            "model = \"m\"\n"
        );
        assert!(config.join("auth.json").is_file());
        assert!(!config.join("history.jsonl").exists());
    }

    #[test]
    fn nothing_to_copy_is_an_empty_home() {
        let user = tempfile::tempdir().unwrap();
        let home = CliHome::create(&CODEX, &env_of(&[("HOME", user.path())])).unwrap();
        assert_eq!(std::fs::read_dir(home.config_dir()).unwrap().count(), 0);
    }

    #[test]
    fn a_link_a_hard_link_or_an_oversized_file_is_refused_by_name() {
        let user = tempfile::tempdir().unwrap();
        let codex = user.path().join(".codex");
        std::fs::create_dir_all(&codex).unwrap();
        let secret = user.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        let env = env_of(&[("HOME", user.path())]);

        std::os::unix::fs::symlink(&secret, codex.join("auth.json")).unwrap();
        let refused = CliHome::create(&CODEX, &env).unwrap_err();
        assert!(
            refused.contains("auth.json") && refused.contains("link"),
            "{refused}"
        );

        std::fs::remove_file(codex.join("auth.json")).unwrap();
        std::fs::hard_link(&secret, codex.join("auth.json")).unwrap();
        let refused = CliHome::create(&CODEX, &env).unwrap_err();
        assert!(refused.contains("hard links"), "{refused}");

        std::fs::remove_file(codex.join("auth.json")).unwrap();
        std::fs::write(
            codex.join("config.toml"),
            vec![b'#'; SEED_MAX_BYTES as usize + 1],
        )
        .unwrap();
        let refused = CliHome::create(&CODEX, &env).unwrap_err();
        assert!(
            refused.contains("config.toml") && refused.contains("limit"),
            "{refused}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_state_file_keeps_only_account_entries(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300), key in "[a-zA-Z]{1,12}") {
            let kept: Value = serde_json::from_str(&claude_state_kept(&bytes)).unwrap();
            proptest::prop_assert!(kept.is_object());
            let text = format!("{{\"{key}\": 1, \"userID\": \"u\"}}");
            let kept: Value = serde_json::from_str(&claude_state_kept(text.as_bytes())).unwrap();
            let object = kept.as_object().unwrap();
            proptest::prop_assert!(object.keys().all(|k| CLAUDE_STATE_KEPT.contains(&k.as_str())));
            proptest::prop_assert_eq!(&object["userID"], "u");
        }
    }
}
