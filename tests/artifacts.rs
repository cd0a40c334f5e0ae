//! Artifacts through the real `mur`: `mur build` packs reproducibly, `mur publish`
//! fills a directory registry, `mur install` installs from a directory and from an HTTP
//! registry on loopback and writes `murmur.lock`, and `mur run` uses what was installed. Every
//! refusal has its own code and leaves nothing written.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::{Mur, MurOutput, RecordingServer, repo_root};
use serde_json::Value;

pub(crate) const KEY: &str = "sk-emulator-artifacts";

fn mur(home: &Path) -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", home)
}

/// A registry directory with the first-party driver and tools published into it.
fn registry(home: &Path, dir: &Path) -> MurOutput {
    let root = repo_root();
    let output = mur(home)
        .args(["publish", "--json", "--registry"])
        .arg(dir)
        .arg(root.join("artifacts/driver-anthropic"))
        .arg(root.join("artifacts/read-file"))
        .arg(root.join("artifacts/write-file"))
        .run();
    assert_eq!(output.code, 0, "{output:#?}");
    output
}

/// A capsule using the three published artifacts by name and version only.
pub(crate) fn capsule(dir: &Path, endpoint: &str) -> PathBuf {
    let text = format!(
        r#"name: installed
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    gateway: {{ endpoint: "{endpoint}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool }}
  - {{ name: write-file, version: "0.1.0", runtime: tool }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
"#
    );
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("murmur.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

fn install(home: &Path, capsule_dir: &Path, registry: &str, extra: &[&str]) -> MurOutput {
    mur(home)
        .args(["install", "--json", "--registry", registry])
        .args(extra)
        .arg(capsule_dir)
        .run()
}

/// Every file under `dir`, relative, sorted (what a refusal must leave unchanged).
pub(crate) fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, found: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            found.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() {
                walk(root, &path, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

pub(crate) const SCRIPT: &str = r#"
turns:
  - reply:
      tool_calls: [ { id: toolu_1, name: write-file, input: { path: note.md, content: "installed" } } ]
  - reply:
      tool_calls: [ { id: toolu_2, name: read-file, input: { path: note.md } } ]
  - reply: { text: "It says installed." }
"#;

#[test]
fn build_packs_the_same_bytes_every_time_whatever_is_built_beside() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let read_file = repo_root().join("artifacts/read-file");
    // Alone, then beside other artifacts (whose dependencies' features differ): a component's
    // bytes never depend on what was built with it.
    let beside = [repo_root().join("artifacts/driver-anthropic")];
    let mut shas = Vec::new();
    for (sub, others) in [("a", &beside[..0]), ("b", &beside[..])] {
        let output = mur(home.path())
            .args(["build", "--json", "--out"])
            .arg(out.path().join(sub))
            .arg(&read_file)
            .args(others)
            .run();
        assert_eq!(output.code, 0, "{output:#?}");
        let report = output.json();
        let built = &report["built"][0];
        let archive = PathBuf::from(built["archive"].as_str().unwrap());
        assert_eq!(archive.file_name().unwrap(), "read-file-0.1.0.tar.gz");
        shas.push((
            built["sha256"].as_str().unwrap().to_string(),
            std::fs::read(&archive).unwrap(),
        ));
    }
    assert_eq!(shas[0], shas[1], "same inputs, same bytes");
    assert_eq!(shas[0].0.len(), 64);
}

#[test]
fn install_from_a_directory_registry_then_run_what_was_installed() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, &emulator.url());

    let output = install(home.path(), &dir, reg.path().to_str().unwrap(), &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    let report = output.json();
    let names: Vec<&str> = report["installed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["driver-anthropic", "read-file", "write-file"]);
    assert!(
        report["installed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["how"] == "fetched")
    );
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    for name in names {
        assert!(lock.contains(name), "{lock}");
    }

    // The lock round trip is stable: installing again changes nothing, and --locked agrees.
    let again = install(
        home.path(),
        &dir,
        reg.path().to_str().unwrap(),
        &["--locked"],
    );
    assert_eq!(again.code, 0, "{again:#?}");
    assert!(
        again.json()["installed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["how"] == "unchanged")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("murmur.lock")).unwrap(),
        lock
    );

    // `mur run` uses the installed artifacts.
    let run = mur(home.path())
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "write and read a note"])
        .arg(&dir)
        .run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json()["tasks"][0]["result_text"], "It says installed.");

    // A second project reuses the user's store: nothing is fetched.
    let other = work.path().join("other");
    capsule(&other, &emulator.url());
    std::fs::remove_dir_all(reg.path().join("read-file")).unwrap();
    let cached = install(home.path(), &other, reg.path().to_str().unwrap(), &[]);
    assert_eq!(cached.code, 0, "{cached:#?}");
    assert!(
        cached.json()["installed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["how"] == "cached")
    );
}

#[test]
fn install_from_an_http_registry_on_loopback() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let server = RecordingServer::serve_dir(reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, "http://127.0.0.1:9");
    let fresh_home = tempfile::tempdir().unwrap();
    let output = install(fresh_home.path(), &dir, &format!("{}/", server.url()), &[]);
    assert_eq!(output.code, 0, "{output:#?}");
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.contains(&"/index.json".to_string()), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.ends_with("read-file-0.1.0.tar.gz")),
        "{paths:?}"
    );
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(
        lock.contains(&server.url()),
        "the source is the registry: {lock}"
    );
}

fn refused(output: &MurOutput, code: &str) {
    assert_ne!(output.code, 0, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], code, "{output:#?}");
}

/// Publishes `bytes` as `read-file` 0.1.0 straight into the registry's index (as a hostile or
/// broken registry would serve it).
fn replace_in_registry(reg: &Path, bytes: &[u8]) {
    murmur_testkit::registry::replace_archive(reg, "read-file", "0.1.0", bytes);
}

/// A gzipped tar holding `murmur.yaml` and one entry with a raw (unchecked) `name`.
fn hostile_archive(name: &str, size: u64) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let manifest = b"name: read-file\nversion: \"0.1.0\"\nruntime: tool\n";
    let mut header = tar::Header::new_gnu();
    header.set_size(manifest.len() as u64);
    header.set_mode(0o644);
    header.set_path("murmur.yaml").unwrap();
    header.set_cksum();
    tar.append(&header, &manifest[..]).unwrap();
    let mut header = tar::Header::new_gnu();
    let bytes = name.as_bytes();
    header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    tar.append(&header, std::io::repeat(0).take(size)).unwrap();
    let tar = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

#[test]
fn every_refusal_has_its_code_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let clean = tempfile::tempdir().unwrap();
    registry(home.path(), clean.path());
    let check = |name: &str, prepare: &dyn Fn(&Path, &Path), code: &str| {
        let reg = tempfile::tempdir().unwrap();
        registry(home.path(), reg.path());
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("capsule");
        capsule(&dir, "http://127.0.0.1:9");
        let fresh_home = tempfile::tempdir().unwrap();
        prepare(reg.path(), &dir);
        let before = tree(&dir);
        let output = install(fresh_home.path(), &dir, reg.path().to_str().unwrap(), &[]);
        refused(&output, code);
        assert_eq!(tree(&dir), before, "{name}: something was written");
        assert!(
            tree(fresh_home.path())
                .iter()
                .all(|p| !p.contains("artifacts/")),
            "{name}: the user's store was written"
        );
        assert!(!work.path().join("evil").exists(), "{name}");
    };
    // Tampered: the registry's bytes are not the ones its index names.
    check(
        "tampered",
        &|reg, _| {
            let index: Value =
                serde_json::from_str(&std::fs::read_to_string(reg.join("index.json")).unwrap())
                    .unwrap();
            let url = index["artifacts"]["read-file"]["0.1.0"]["url"]
                .as_str()
                .unwrap()
                .to_string();
            let mut bytes = std::fs::read(reg.join(&url)).unwrap();
            let at = bytes.len() / 2;
            bytes[at] ^= 0xff;
            std::fs::write(reg.join(&url), bytes).unwrap();
        },
        "E-REG-004",
    );
    // A lock pinning other bytes for the same version.
    check(
        "wrong pin",
        &|_, dir| {
            std::fs::write(
                dir.join("murmur.lock"),
                format!(
                    "version: 1\nartifacts:\n  - {{ name: read-file, version: \"0.1.0\", runtime: tool, sha256: \"{}\", source: \"elsewhere\" }}\n",
                    "ab".repeat(32)
                ),
            )
            .unwrap();
        },
        "E-REG-005",
    );
    // An archive with a path out of it.
    check(
        "traversal",
        &|reg, _| replace_in_registry(reg, &hostile_archive("../../evil", 4)),
        "E-REG-002",
    );
    // An archive with a file over the size limit (64 MiB of zeros, compressed small).
    check(
        "oversized",
        &|reg, _| replace_in_registry(reg, &hostile_archive("component.wasm", 65 * 1024 * 1024)),
        "E-REG-003",
    );
    // A version the registry does not have.
    check(
        "missing version",
        &|_, dir| {
            let file = dir.join("murmur.yaml");
            let text = std::fs::read_to_string(&file).unwrap().replace(
                "{ name: read-file, version: \"0.1.0\"",
                "{ name: read-file, version: \"9.9.9\"",
            );
            std::fs::write(file, text).unwrap();
        },
        "E-REG-006",
    );
}

#[test]
fn locked_refuses_any_change_to_the_lock() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, "http://127.0.0.1:9");
    let output = install(
        home.path(),
        &dir,
        reg.path().to_str().unwrap(),
        &["--locked"],
    );
    refused(&output, "E-REG-009");
    assert!(!dir.join("murmur.lock").exists());
    assert!(!dir.join(".murmur").exists());
}

#[test]
fn run_refuses_an_artifact_not_installed_or_changed_since() {
    let home = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    registry(home.path(), reg.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, "http://127.0.0.1:9");
    let run = || {
        mur(home.path())
            .env("EMU_KEY", KEY)
            .args(["run", "--json", "--task", "hi"])
            .arg(&dir)
            .run()
    };
    // Never installed.
    let output = run();
    refused(&output, "E-REG-010");
    assert!(
        output.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("driver-anthropic")
    );

    let installed = install(home.path(), &dir, reg.path().to_str().unwrap(), &[]);
    assert_eq!(installed.code, 0, "{installed:#?}");
    // Changed after install: one byte of an installed component.
    let component = dir.join(".murmur/artifacts/read-file/0.1.0/component.wasm");
    let mut bytes = std::fs::read(&component).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&component, bytes).unwrap();
    let output = run();
    refused(&output, "E-REG-010");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("read-file") && message.contains("component.wasm"),
        "{message}"
    );
}
