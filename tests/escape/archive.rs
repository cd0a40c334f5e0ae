//! Escape cases: archives. A hostile registry serves, under a name and version it lists and
//! with the sha256 it lists, an archive whose own `murmur.yaml` loads a component outside the
//! artifact's directory, or says it is another artifact; and a project store is edited after
//! install so its manifest points outside. Nothing unpinned is ever loaded: install refuses
//! and writes nothing, `mur check` names the field, `mur run` refuses before any model call.

use std::path::{Path, PathBuf};

use murmur_testkit::registry::{replace_archive, tar_gz};
use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};

/// A registry with the first-party driver and `read-file` published, and a capsule using both
/// by name and version only; the model's endpoint records whether anything was asked.
struct Project {
    home: tempfile::TempDir,
    registry: tempfile::TempDir,
    work: tempfile::TempDir,
    model: RecordingServer,
}

impl Project {
    fn new() -> Project {
        let home = tempfile::tempdir().unwrap();
        let registry = tempfile::tempdir().unwrap();
        let root = repo_root();
        let published = Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", home.path())
            .args(["publish", "--json", "--registry"])
            .arg(registry.path())
            .arg(root.join("artifacts/driver-anthropic"))
            .arg(root.join("artifacts/read-file"))
            .run();
        assert_eq!(published.code, 0, "{published:#?}");
        let work = tempfile::tempdir().unwrap();
        let model = RecordingServer::start("{}");
        let project = Project {
            home,
            registry,
            work,
            model,
        };
        std::fs::create_dir_all(project.capsule()).unwrap();
        std::fs::write(
            project.capsule().join("murmur.yaml"),
            format!(
                r#"name: pinned
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    gateway: {{ endpoint: "{}", api_key: "sk-unused" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#,
                project.model.url()
            ),
        )
        .unwrap();
        // Outside every artifact directory: a real component an attacker wants loaded.
        std::fs::copy(
            root.join("tests/fixtures/probe/component.wasm"),
            project.outside(),
        )
        .unwrap();
        project
    }

    fn capsule(&self) -> PathBuf {
        self.work.path().join("capsule")
    }

    fn outside(&self) -> PathBuf {
        self.work.path().join("outside.wasm")
    }

    fn mur(&self, args: &[&str]) -> MurOutput {
        Mur::new(env!("CARGO_BIN_EXE_mur"))
            .env("MURMUR_HOME", self.home.path())
            .args(args)
            .run()
    }

    fn install(&self) -> MurOutput {
        self.mur(&[
            "install",
            "--json",
            "--registry",
            self.registry.path().to_str().unwrap(),
            self.capsule().to_str().unwrap(),
        ])
    }

    fn run(&self) -> MurOutput {
        self.mur(&[
            "run",
            "--json",
            "--task",
            "hello",
            self.capsule().to_str().unwrap(),
        ])
    }

    /// `read-file` as the registry serves it: a manifest of our choosing beside the real
    /// component.
    fn serve_read_file_with(&self, manifest: &str) {
        let component = std::fs::read(repo_root().join("artifacts/read-file/component.wasm"))
            .expect("artifacts/read-file/component.wasm: run ./scripts/setup");
        let bytes = tar_gz(&[
            ("murmur.yaml", manifest.as_bytes()),
            ("component.wasm", &component),
        ]);
        replace_archive(self.registry.path(), "read-file", "0.1.0", &bytes);
    }
}

/// Every file under `dir`, relative and sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).into_iter().flatten().flatten() {
            let path = entry.path();
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

fn refused(output: &MurOutput, code: &str) {
    assert_ne!(output.code, 0, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], code, "{output:#?}");
}

#[test]
fn an_archive_whose_component_climbs_out_of_its_directory_is_never_installed_checked_or_run() {
    let project = Project::new();
    let climbing = format!(
        "name: read-file\nversion: \"0.1.0\"\nruntime: tool\ncomponent: ../../../../../../{}\ninput_schema: {{ type: object }}\n",
        project.outside().display()
    );
    project.serve_read_file_with(&climbing);
    let before = tree(&project.capsule());
    let installed = project.install();
    refused(&installed, "E-REG-012");
    assert!(installed.stdout.contains("E-MAN-015"), "{installed:#?}");
    assert_eq!(tree(&project.capsule()), before, "install wrote something");

    // The same manifest on disk: `mur check` names the field.
    let unpacked = project.work.path().join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    std::fs::write(unpacked.join("murmur.yaml"), &climbing).unwrap();
    let checked = project.mur(&["check", "--json", unpacked.to_str().unwrap()]);
    assert_eq!(checked.code, 1, "{checked:#?}");
    let diagnostics = checked.json()["diagnostics"].clone();
    assert!(
        diagnostics
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "E-MAN-015"
                && d["message"].as_str().unwrap().contains("`component`")),
        "{diagnostics:#}"
    );

    // Nothing installed: run refuses, and no model is asked.
    refused(&project.run(), "E-REG-010");
    assert_eq!(project.model.connections(), 0);
}

#[test]
fn an_archive_that_says_it_is_another_artifact_is_refused() {
    let project = Project::new();
    for manifest in [
        "name: write-file\nversion: \"0.1.0\"\nruntime: tool\ninput_schema: { type: object }\n",
        "name: read-file\nversion: \"9.9.9\"\nruntime: tool\ninput_schema: { type: object }\n",
        "name: read-file\nversion: \"0.1.0\"\nruntime: hook\nbinding: on-tool-call\n",
        "name: read-file\nversion: \"0.1.0\"\nruntime: tool\ncomponent: other.wasm\ninput_schema: { type: object }\n",
    ] {
        project.serve_read_file_with(manifest);
        let before = tree(&project.capsule());
        let installed = project.install();
        refused(&installed, "E-REG-012");
        assert_eq!(tree(&project.capsule()), before, "{manifest}: written");
    }
    assert_eq!(project.model.connections(), 0);
}

#[test]
fn an_installed_manifest_edited_to_load_a_file_outside_is_refused_at_run() {
    let project = Project::new();
    let installed = project.install();
    assert_eq!(installed.code, 0, "{installed:#?}");
    let manifest = project
        .capsule()
        .join(".murmur/artifacts/read-file/0.1.0/murmur.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("component: component.wasm"), "{text}");
    let outside = format!("component: {}", project.outside().display());
    std::fs::write(
        &manifest,
        text.replace("component: component.wasm", &outside),
    )
    .unwrap();
    refused(&project.run(), "E-REG-010");
    assert_eq!(project.model.connections(), 0);
}
