//! The session workdir (SPEC §6): `<root>/<session-id>/` holding `trace.jsonl`,
//! `out/result.txt`, `logs/`, `contexts/<context-id>/history.json`, `MURMUR.md`, and whatever
//! the capsule's components write there.

use std::path::{Path, PathBuf};

use crate::inference::neutral::StoredMessage;
use crate::session::staging::Staged;

/// The paths of one session's workdir.
#[derive(Debug, Clone)]
pub struct Workdir {
    pub root: PathBuf,
}

impl Workdir {
    /// Creates `<root>/<session_id>/` with its `out/`, `logs/` and `contexts/`.
    pub fn create(parent: &Path, session_id: &str) -> std::io::Result<Workdir> {
        let root = parent.join(session_id);
        for dir in ["out", "logs", "contexts"] {
            std::fs::create_dir_all(root.join(dir))?;
        }
        Ok(Workdir {
            root: root.canonicalize()?,
        })
    }

    pub fn trace(&self) -> PathBuf {
        self.root.join("trace.jsonl")
    }

    pub fn result(&self) -> PathBuf {
        self.root.join("out").join("result.txt")
    }

    pub fn history(&self, context_id: &str) -> PathBuf {
        self.root
            .join("contexts")
            .join(context_id)
            .join("history.json")
    }

    /// Writes a context's history (envelope keys included), replacing the file whole.
    pub fn save_history(&self, context_id: &str, history: &[StoredMessage]) -> std::io::Result<()> {
        let path = self.history(context_id);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(history).map_err(std::io::Error::other)?;
        write_whole(&path, &json)
    }

    /// Writes the task's final text to `out/result.txt`.
    pub fn save_result(&self, text: &str) -> std::io::Result<PathBuf> {
        let path = self.result();
        write_whole(&path, text.as_bytes())?;
        Ok(path)
    }

    /// Writes `MURMUR.md`: who the agent is, its tools, its limits.
    pub fn write_murmur_md(&self, staged: &Staged) -> std::io::Result<()> {
        std::fs::write(self.root.join("MURMUR.md"), murmur_md(staged))
    }
}

fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temp, bytes)?;
    temp.persist(path).map_err(|error| error.error)?;
    Ok(())
}

/// The text of `MURMUR.md`.
pub fn murmur_md(staged: &Staged) -> String {
    let capsule = &staged.capsule;
    let mut text = format!("# {} {}\n\n", capsule.name, capsule.version);
    if let Some(description) = &capsule.description {
        text.push_str(description.trim());
        text.push_str("\n\n");
    }
    text.push_str(
        "This directory is your working directory: the only files you can read and write, \
         apart from any read-only paths listed below. What you leave here stays with the \
         session.\n\n## Tools\n\n",
    );
    if staged.tools.is_empty()
        && staged.skills.is_empty()
        && capsule.capabilities.shell.allow.is_empty()
        && capsule.control.agent_settings.is_empty()
    {
        text.push_str("None.\n");
    }
    for spec in staged
        .tools
        .iter()
        .map(|tool| &tool.spec)
        .chain(staged.skills.iter().map(|skill| &skill.spec))
    {
        text.push_str(&format!("- `{}`: {}\n", spec.name, spec.description.trim()));
    }
    let shell = &capsule.capabilities.shell.allow;
    if !shell.is_empty() {
        text.push_str(&format!(
            "- `shell`: runs one of {} directly in this directory (no implicit shell).\n",
            shell
                .iter()
                .map(|b| format!("`{b}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if capsule
        .control
        .agent_settings
        .contains(&murmur_manifest::capsule::Setting::InferenceDriver)
    {
        let choices: Vec<String> = staged
            .choices
            .iter()
            .map(|choice| format!("`{}` ({})", choice.name, choice.model))
            .collect();
        text.push_str(&format!(
            "- `switch-driver`: switches the model that answers your next turns: {}.\n",
            choices.join(", ")
        ));
    }
    let limits = &capsule.capabilities.limits;
    text.push_str(&format!(
        "\n## Limits\n\n- At most {} turns per task.\n- At most {} output tokens per reply.\n",
        staged.max_turns, staged.max_tokens
    ));
    if let Some(ceiling) = staged.max_session_tokens {
        text.push_str(&format!(
            "- At most about {ceiling} tokens over the whole session (estimated).\n"
        ));
    }
    if let Some(seconds) = limits.deadline_seconds {
        text.push_str(&format!(
            "- Each tool call must finish within {seconds} s.\n"
        ));
    }
    if let Some(bytes) = limits.memory_bytes {
        text.push_str(&format!(
            "- Each tool call may use at most {bytes} bytes of memory.\n"
        ));
    }
    let network = &capsule.capabilities.network.allow;
    if network.is_empty() {
        text.push_str("- Tools reach no network host.\n");
    } else {
        let hosts: Vec<&str> = network.iter().map(|rule| rule.as_str()).collect();
        text.push_str(&format!("- Tools may reach: {}.\n", hosts.join(", ")));
    }
    let read_only = &capsule.capabilities.filesystem.read_only;
    if !read_only.is_empty() {
        let paths: Vec<String> = read_only
            .iter()
            .map(|path| path.resolved.display().to_string())
            .collect();
        text.push_str(&format!("- Read-only paths: {}.\n", paths.join(", ")));
    }
    text
}
