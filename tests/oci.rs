//! Artifacts through a real OCI registry on loopback (`docker-registry`, started and stopped by
//! each test): `mur publish --registry oci://…` pushes in the Wasm OCI layout, `mur install`
//! pulls, verifies and pins by the manifest's digest, and `mur run` runs what was installed; a
//! tampered blob, a moved tag and a registry asking for credentials are each refused with their
//! own code, leaving nothing written.

use std::path::Path;

use crate::artifacts::{KEY, SCRIPT, capsule, tree};
use base64::Engine;
use murmur_testkit::emulator::{Emulator, Script};
use murmur_testkit::oci_registry::OciRegistry;
use murmur_testkit::{Mur, MurOutput, repo_root};
use serde_json::Value;

/// `mur` with its own home, and a Docker credential directory of its own (empty unless a test
/// writes one), so nothing of the machine's own login is used.
fn mur(home: &Path) -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home)
        .env("DOCKER_CONFIG", home.join("docker"))
}

fn publish(home: &Path, registry: &str, artifacts: &[&str]) -> MurOutput {
    let mut command = mur(home).args(["publish", "--json", "--registry", registry]);
    for artifact in artifacts {
        command = command.arg(repo_root().join("artifacts").join(artifact));
    }
    command.run()
}

fn install(home: &Path, capsule_dir: &Path, registry: &str, extra: &[&str]) -> MurOutput {
    mur(home)
        .args(["install", "--json", "--registry", registry])
        .args(extra)
        .arg(capsule_dir)
        .run()
}

fn refused(output: &MurOutput, code: &str) {
    assert_ne!(output.code, 0, "{output:#?}");
    assert_eq!(output.json()["error"]["code"], code, "{output:#?}");
}

const FIRST_PARTY: [&str; 3] = ["driver-anthropic", "read-file", "write-file"];

#[test]
fn publish_to_an_oci_registry_then_install_and_run_from_it() {
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let oci = registry.oci("murmur/agents");

    let published = publish(home.path(), &oci, &FIRST_PARTY);
    assert_eq!(published.code, 0, "{published:#?}\n{}", registry.log());
    let report = published.json();
    let entries = report["published"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    let read_file = entries.iter().find(|e| e["name"] == "read-file").unwrap();
    assert_eq!(
        read_file["reference"],
        format!("{oci}/read-file:0.1.0"),
        "{report:#}"
    );
    assert_eq!(read_file["how"], "pushed");

    // The layout other Wasm tools read: the Wasm config, the component as `application/wasm`
    // first, the artifact's own murmur.yaml as a titled layer; the digest is the one printed.
    let manifest_bytes = registry.manifest("murmur/agents/read-file", "0.1.0");
    assert_eq!(
        murmur_registry::sha256_hex(&manifest_bytes),
        read_file["sha256"].as_str().unwrap()
    );
    let manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(
        manifest["layers"][0]["annotations"]["org.opencontainers.image.title"],
        "component.wasm"
    );
    assert_eq!(
        manifest["layers"][1]["annotations"]["org.opencontainers.image.title"],
        "murmur.yaml"
    );
    let config: Value = serde_json::from_slice(&registry.blob(
        "murmur/agents/read-file",
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert!(
        config["component"]["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("murmur:tool/run")),
        "{config:#}"
    );
    let shipped = registry.blob(
        "murmur/agents/read-file",
        manifest["layers"][1]["digest"].as_str().unwrap(),
    );
    assert_eq!(
        shipped,
        std::fs::read(repo_root().join("artifacts/read-file/murmur.yaml")).unwrap()
    );

    // The same files again change nothing.
    let again = publish(home.path(), &oci, &["read-file"]);
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(again.json()["published"][0]["how"], "unchanged");
    assert_eq!(again.json()["published"][0]["sha256"], read_file["sha256"]);

    // Install from it into a capsule naming the artifacts by name and version only.
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, &emulator.url());
    let fresh_home = tempfile::tempdir().unwrap();
    let installed = install(fresh_home.path(), &dir, &oci, &[]);
    assert_eq!(installed.code, 0, "{installed:#?}\n{}", registry.log());
    let installed = installed.json()["installed"].as_array().unwrap().clone();
    assert!(
        installed.iter().all(|a| a["how"] == "fetched"),
        "{installed:?}"
    );
    assert!(installed.iter().all(|a| a["source"] == oci.as_str()));
    let pinned = installed.iter().find(|a| a["name"] == "read-file").unwrap();
    assert_eq!(
        pinned["sha256"], read_file["sha256"],
        "pinned by the manifest's digest"
    );
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(
        lock.contains(read_file["sha256"].as_str().unwrap()),
        "{lock}"
    );
    assert!(
        std::fs::read(dir.join(".murmur/artifacts/read-file/0.1.0/component.wasm")).unwrap()
            == std::fs::read(repo_root().join("artifacts/read-file/component.wasm")).unwrap()
    );

    // Again, and --locked: nothing changes.
    let locked = install(fresh_home.path(), &dir, &oci, &["--locked"]);
    assert_eq!(locked.code, 0, "{locked:#?}");
    assert!(
        locked.json()["installed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["how"] == "unchanged")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("murmur.lock")).unwrap(),
        lock
    );

    // And `mur run` runs what was installed.
    let run = mur(fresh_home.path())
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "write and read a note"])
        .arg(&dir)
        .run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json()["tasks"][0]["result_text"], "It says installed.");
}

#[test]
fn a_tampered_blob_is_refused_and_nothing_is_written() {
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let oci = registry.oci("murmur");
    let published = publish(home.path(), &oci, &FIRST_PARTY);
    assert_eq!(published.code, 0, "{published:#?}");

    // The component's blob changes under the registry: same length, one byte off.
    let manifest: Value =
        serde_json::from_slice(&registry.manifest("murmur/read-file", "0.1.0")).unwrap();
    let blob = registry.blob_file(manifest["layers"][0]["digest"].as_str().unwrap());
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();

    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, "http://127.0.0.1:9");
    let before = tree(&dir);
    let output = install(home.path(), &dir, &oci, &[]);
    refused(&output, "E-REG-004");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("component.wasm"), "{message}");
    assert_eq!(tree(&dir), before, "nothing is written: no store, no lock");
}

#[test]
fn a_tag_that_moved_is_refused_against_the_lock() {
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let oci = registry.oci("murmur");
    assert_eq!(publish(home.path(), &oci, &FIRST_PARTY).code, 0);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule(&dir, "http://127.0.0.1:9");
    let first = install(home.path(), &dir, &oci, &[]);
    assert_eq!(first.code, 0, "{first:#?}");
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();

    // Someone re-tags 0.1.0: the same blobs under another manifest (one annotation more).
    let original = registry.manifest("murmur/read-file", "0.1.0");
    let mut moved: Value = serde_json::from_slice(&original).unwrap();
    moved["annotations"]["org.example.retagged"] = Value::from("yes");
    registry.put_manifest(
        "murmur/read-file",
        "0.1.0",
        &serde_json::to_vec(&moved).unwrap(),
    );

    let output = install(home.path(), &dir, &oci, &[]);
    refused(&output, "E-REG-005");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("has moved") && message.contains(&format!("{oci}/read-file:0.1.0")),
        "{message}"
    );
    assert!(
        message.contains(&murmur_registry::sha256_hex(&original)),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("murmur.lock")).unwrap(),
        lock
    );

    // Publishing other files under a version already there is refused, and pushes nothing.
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().join("read-file");
    std::fs::create_dir_all(&copy).unwrap();
    let source = repo_root().join("artifacts/read-file");
    let manifest = std::fs::read_to_string(source.join("murmur.yaml")).unwrap();
    let build = "build:\n  cargo: { package: read-file }\n";
    assert!(manifest.contains(build), "{manifest}");
    std::fs::write(copy.join("murmur.yaml"), manifest.replace(build, "")).unwrap();
    let mut component = std::fs::read(source.join("component.wasm")).unwrap();
    component.extend_from_slice(&[0, 3, 1, b'x', 0]); // a custom section: still a component
    std::fs::write(copy.join("component.wasm"), component).unwrap();
    let taken = mur(home.path())
        .args(["publish", "--json", "--registry", &oci])
        .arg(&copy)
        .run();
    refused(&taken, "E-REG-011");
}

#[test]
fn a_registry_asking_for_credentials_is_given_them_from_the_sources_or_docker_login() {
    let registry = OciRegistry::start_with_user("murmur-ci", "s3cret-pass");
    let home = tempfile::tempdir().unwrap();
    let oci = registry.oci("private");

    // No credentials anywhere: refused, saying what to do.
    let anonymous = publish(home.path(), &oci, &["read-file"]);
    refused(&anonymous, "E-REG-015");
    assert_eq!(anonymous.code, 1);
    assert!(
        anonymous.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("MURMUR_REGISTRY_USERNAME")
    );

    // From the credential sources: the environment.
    let pushed = mur(home.path())
        .env("MURMUR_REGISTRY_USERNAME", "murmur-ci")
        .env("MURMUR_REGISTRY_PASSWORD", "s3cret-pass")
        .args(["publish", "--json", "--registry", &oci])
        .arg(repo_root().join("artifacts/read-file"))
        .run();
    assert_eq!(pushed.code, 0, "{pushed:#?}\n{}", registry.log());

    // A wrong password is refused, and never printed.
    let wrong = mur(home.path())
        .env("MURMUR_REGISTRY_USERNAME", "murmur-ci")
        .env("MURMUR_REGISTRY_PASSWORD", "not-the-pass")
        .args(["publish", "--json", "--registry", &oci])
        .arg(repo_root().join("artifacts/read-file"))
        .run();
    refused(&wrong, "E-REG-015");
    assert!(!wrong.stdout.contains("not-the-pass") && !wrong.stderr.contains("not-the-pass"));

    // From the Docker credential file: install a capsule using the tool.
    let docker = home.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode("murmur-ci:s3cret-pass");
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: private\nversion: \"0.1.0\"\nartifacts:\n  - { name: read-file, version: \"0.1.0\", runtime: tool }\n",
    )
    .unwrap();
    let installed = install(home.path(), &dir, &oci, &[]);
    assert_eq!(installed.code, 0, "{installed:#?}");
    assert_eq!(installed.json()["installed"][0]["how"], "fetched");
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(!lock.contains("s3cret") && !lock.contains(&auth), "{lock}");
    assert!(lock.contains(&oci), "{lock}");
}

#[test]
fn a_whole_capsule_pushes_pulls_by_digest_installs_its_pins_and_runs() {
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let artifacts = registry.oci("murmur");
    assert_eq!(
        publish(home.path(), &artifacts, &["driver-anthropic", "write-file"]).code,
        0
    );
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();

    // A capsule with registry artifacts, a local one (`path:`) and a prompt file.
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("notes");
    let local = dir.join("artifacts/read-file");
    std::fs::create_dir_all(&local).unwrap();
    let source = repo_root().join("artifacts/read-file");
    // Its own manifest still says how to build it: where it is pulled it must not be rebuilt.
    std::fs::copy(source.join("murmur.yaml"), local.join("murmur.yaml")).unwrap();
    std::fs::copy(source.join("component.wasm"), local.join("component.wasm")).unwrap();
    std::fs::write(dir.join("prompt.md"), "Keep notes.\n").unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        format!(
            r#"name: notes
version: "0.1.0"
artifacts:
  - name: driver-anthropic
    version: "0.1.0"
    runtime: driver
    gateway: {{ endpoint: "{}", api_key: "${{EMU_KEY}}" }}
  - {{ name: read-file, version: "0.1.0", runtime: tool, path: ./artifacts/read-file }}
  - {{ name: write-file, version: "0.1.0", runtime: tool }}
inference:
  model: test-model
  driver: {{ artifact: driver-anthropic }}
  system_prompt_file: prompt.md
"#,
            emulator.url()
        ),
    )
    .unwrap();
    let installed = install(home.path(), &dir, &artifacts, &[]);
    assert_eq!(installed.code, 0, "{installed:#?}");

    let capsules = format!("oci://{}/capsules/notes", registry.host());
    let pushed = mur(home.path())
        .args(["push", "--json", &capsules])
        .arg(&dir)
        .run();
    assert_eq!(pushed.code, 0, "{pushed:#?}\n{}", registry.log());
    let pushed = pushed.json();
    assert_eq!(pushed["reference"], format!("{capsules}:0.1.0"));
    let mut files: Vec<&str> = pushed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "artifacts/read-file",
            "murmur.lock",
            "murmur.yaml",
            "prompt.md"
        ],
        "registry artifacts travel as the lock's pins, not as files"
    );
    let again = mur(home.path())
        .args(["push", "--json", &capsules])
        .arg(&dir)
        .run();
    assert_eq!(again.json()["how"], "unchanged", "{again:#?}");
    assert_eq!(again.json()["sha256"], pushed["sha256"]);

    // Pulled by digest elsewhere: the same tree.
    let sha256 = pushed["sha256"].as_str().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let pulled_dir = elsewhere.path().join("notes");
    let pulled = mur(home.path())
        .args(["pull", "--json", &format!("{capsules}@sha256:{sha256}")])
        .arg(&pulled_dir)
        .run();
    assert_eq!(pulled.code, 0, "{pulled:#?}");
    assert_eq!(pulled.json()["sha256"], sha256);
    for file in [
        "murmur.yaml",
        "murmur.lock",
        "prompt.md",
        "artifacts/read-file/murmur.yaml",
        "artifacts/read-file/component.wasm",
    ] {
        assert_eq!(
            std::fs::read(pulled_dir.join(file)).unwrap(),
            std::fs::read(dir.join(file)).unwrap(),
            "{file}"
        );
    }
    assert!(
        !pulled_dir.join(".murmur").exists(),
        "no installed copies travel"
    );

    // Its pins are fetched where it was pulled, as locked; then it runs, the pulled local
    // artifact as it came (not rebuilt: its component keeps its time).
    let component = pulled_dir.join("artifacts/read-file/component.wasm");
    let pulled_at = std::fs::metadata(&component).unwrap().modified().unwrap();
    let fresh_home = tempfile::tempdir().unwrap();
    let locked = install(fresh_home.path(), &pulled_dir, &artifacts, &["--locked"]);
    assert_eq!(locked.code, 0, "{locked:#?}");
    let run = mur(fresh_home.path())
        .env("EMU_KEY", KEY)
        .args(["run", "--json", "--task", "write and read a note"])
        .arg(&pulled_dir)
        .run();
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json()["tasks"][0]["result_text"], "It says installed.");
    assert_eq!(
        std::fs::metadata(&component).unwrap().modified().unwrap(),
        pulled_at,
        "the pulled component was rebuilt: {}",
        run.stderr
    );

    // Never over files, never what the registry does not have; nothing written either way.
    let again = mur(home.path())
        .args(["pull", "--json", &format!("{capsules}:0.1.0")])
        .arg(&pulled_dir)
        .run();
    refused(&again, "E-REG-016");
    let missing = elsewhere.path().join("missing");
    let absent = mur(home.path())
        .args(["pull", "--json", &format!("{capsules}:9.9.9")])
        .arg(&missing)
        .run();
    refused(&absent, "E-REG-006");
    assert!(!missing.exists());
    let leftovers: Vec<_> = std::fs::read_dir(elsewhere.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(leftovers, ["notes"], "no staging directory is left behind");

    // A capsule naming a file outside itself cannot be pushed.
    std::fs::write(work.path().join("outside.md"), "x").unwrap();
    murmur_testkit::replace_in(&dir.join("murmur.yaml"), "prompt.md", "../outside.md");
    let outside = mur(home.path())
        .args(["push", "--json", &format!("{capsules}:outside")])
        .arg(&dir)
        .run();
    refused(&outside, "E-REG-016");
}

#[test]
fn a_capsule_component_pulls_a_tool_from_an_oci_registry_mid_session() {
    // The session's own pull (`murmur:artifact-manager/manage.pull`, from inside the async
    // session) goes to the OCI registry as `mur install` does, and pins by digest.
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let oci = registry.oci("murmur");
    let published = publish(home.path(), &oci, &["write-file"]);
    assert_eq!(published.code, 0, "{published:#?}");
    let digest = published.json()["published"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let work = tempfile::tempdir().unwrap();
    let dir = crate::capsule_components::capsule(&work.path().join("puller"));
    let output = mur(home.path())
        .args(["run", "--json", "--registry", &oci])
        .arg(&dir)
        .run();
    let (_, workspace, seen, _) = crate::capsule_components::session(&output);
    assert_eq!(seen["pull"]["ok"], true, "{seen:#}");
    assert_eq!(seen["pull"]["info"]["sha256"], digest.as_str(), "{seen:#}");
    assert_eq!(seen["invoke"]["status"], "passed", "{seen:#}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("pulled.md")).unwrap(),
        "pulled and written"
    );
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(lock.contains(&digest) && lock.contains(&oci), "{lock}");
}

/// One request a [`Hostile`] registry saw: its path and `Authorization`.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

/// How a [`Hostile`] registry answers one request.
enum Answer {
    /// A status line's code, its headers, its body.
    Fixed(u16, Vec<(String, String)>, Vec<u8>),
    /// `200` with these headers and a body that never ends (no length: until the close).
    Endless(Vec<(String, String)>),
}

/// A registry of a test's own on loopback: it records every request's method, path and
/// `Authorization`, and answers as `answer` says (given the request and its own port); bytes of
/// endless bodies written are counted in `written`.
struct Hostile {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Hostile {
    fn start(answer: impl Fn(&Seen, u16) -> Answer + Send + Sync + 'static) -> Hostile {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let answer = std::sync::Arc::new(answer);
        let (log, counter) = (seen.clone(), written.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (log, counter, answer) = (log.clone(), counter.clone(), answer.clone());
                std::thread::spawn(move || {
                    stream
                        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                        .unwrap();
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                        match stream.read(&mut buffer) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_string();
                    let mut lines = text.split("\r\n");
                    let mut first = lines.next().unwrap_or("").split(' ');
                    let _method = first.next();
                    let request = Seen {
                        path: first.next().unwrap_or("").to_string(),
                        authorization: lines
                            .filter_map(|line| line.split_once(':'))
                            .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
                            .map(|(_, value)| value.trim().to_string()),
                    };
                    log.lock().unwrap().push(request.clone());
                    let headers = |status: u16, headers: &[(String, String)], extra: &str| {
                        let mut text =
                            format!("HTTP/1.1 {status} Hostile\r\nConnection: close\r\n{extra}");
                        for (name, value) in headers {
                            text.push_str(&format!("{name}: {value}\r\n"));
                        }
                        text.push_str("\r\n");
                        text
                    };
                    match answer(&request, port) {
                        Answer::Fixed(status, fields, body) => {
                            let length = if fields
                                .iter()
                                .any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                            {
                                String::new()
                            } else {
                                format!("Content-Length: {}\r\n", body.len())
                            };
                            let _ = stream.write_all(headers(status, &fields, &length).as_bytes());
                            let _ = stream.write_all(&body);
                        }
                        Answer::Endless(fields) => {
                            if stream
                                .write_all(headers(200, &fields, "").as_bytes())
                                .is_err()
                            {
                                return;
                            }
                            let chunk = [b' '; 64 * 1024];
                            let _ = stream.write_all(b"{\"schemaVersion\": 2, \"x\": \"");
                            while stream.write_all(&chunk).is_ok() {
                                counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                            }
                        }
                    }
                });
            }
        });
        Hostile {
            port,
            seen,
            written,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn header(name: &str, value: String) -> (String, String) {
    (name.to_string(), value)
}

/// A 401 asking for a token from `realm`.
fn bearer_challenge(realm: &str) -> Answer {
    Answer::Fixed(
        401,
        vec![header(
            "WWW-Authenticate",
            format!(r#"Bearer realm="{realm}",service="hostile""#),
        )],
        b"{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}".to_vec(),
    )
}

/// A token endpoint's answer.
fn token(value: &str) -> Answer {
    Answer::Fixed(
        200,
        vec![header("Content-Type", "application/json".into())],
        format!(r#"{{"token": "{value}"}}"#).into_bytes(),
    )
}

/// A capsule naming one registry artifact, `read-file` 0.1.0.
fn capsule_naming_read_file(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: private\nversion: \"0.1.0\"\nartifacts:\n  - { name: read-file, version: \"0.1.0\", runtime: tool }\n",
    )
    .unwrap();
}

const USER: &str = "ci-user";
const PASS: &str = "pa55-for-a-only";
const TOKEN: &str = "t0ken-for-a-only";

/// Whether `output` or any request `seen` holds a credential value (plain or in Basic).
fn leaks(output: &MurOutput, seen: &[Seen]) -> Vec<String> {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASS}"));
    let mut found = Vec::new();
    for secret in [USER, PASS, TOKEN, basic.as_str()] {
        if output.stdout.contains(secret) || output.stderr.contains(secret) {
            found.push(format!("printed {secret}"));
        }
        for request in seen {
            if request
                .authorization
                .as_deref()
                .is_some_and(|a| a.contains(secret) || a.starts_with("Basic"))
            {
                found.push(format!("{request:?}"));
            }
        }
    }
    found
}

/// Issue 39, point 6: the environment's registry credentials belong to the registry
/// `$MURMUR_REGISTRY` names. `mur install --registry` and `mur pull` from another registry, one
/// that asks for credentials (a Bearer challenge whose realm is its own), send it none: it sees
/// only an anonymous token it handed out itself, and the command fails `E-REG-015` saying why
/// and how to bind one. Listed in `MURMUR_REGISTRY_HOSTS`, the same registry gets them.
#[test]
fn credentials_of_one_registry_never_reach_another() {
    let other = Hostile::start(|request, port| {
        if request.path.starts_with("/token") {
            token("anonymous-token")
        } else {
            bearer_challenge(&format!("http://127.0.0.1:{port}/token"))
        }
    });
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule_naming_read_file(&dir);
    let own = "oci://127.0.0.1:9/murmur";
    let with_secrets = |mur: Mur| {
        mur.env("MURMUR_REGISTRY", own)
            .env("MURMUR_REGISTRY_USERNAME", USER)
            .env("MURMUR_REGISTRY_PASSWORD", PASS)
    };

    let installed = with_secrets(mur(home.path()))
        .args(["install", "--json", "--registry"])
        .arg(format!("oci://{}/murmur", other.host()))
        .arg(&dir)
        .run();
    let pulled = mur(home.path())
        .env("MURMUR_REGISTRY", own)
        .env("MURMUR_REGISTRY_TOKEN", TOKEN)
        .args(["pull", "--json"])
        .arg(format!("oci://{}/capsules/notes:1.0.0", other.host()))
        .arg(work.path().join("pulled"))
        .run();
    for output in [&installed, &pulled] {
        refused(output, "E-REG-015");
        let error = &output.json()["error"];
        let message = error["message"].as_str().unwrap();
        let hint = error["hint"].as_str().unwrap();
        assert!(
            message.contains("none were sent") && message.contains("127.0.0.1:9"),
            "{message}"
        );
        assert!(
            hint.contains("MURMUR_REGISTRY_HOSTS") && hint.contains(&other.host()),
            "{hint}"
        );
    }
    assert!(!work.path().join("pulled").exists());
    let seen = other.seen();
    assert!(
        seen.iter().any(|r| r.path.starts_with("/token")),
        "the challenge was followed: {seen:#?}"
    );
    assert!(
        seen.iter().all(|r| r.authorization.is_none()
            || r.authorization.as_deref() == Some("Bearer anonymous-token")),
        "{seen:#?}"
    );
    assert_eq!(leaks(&installed, &seen), Vec::<String>::new());
    assert_eq!(leaks(&pulled, &seen), Vec::<String>::new());

    // Bound to it with MURMUR_REGISTRY_HOSTS, the same request carries them to its realm.
    let bound = with_secrets(mur(home.path()))
        .env(
            "MURMUR_REGISTRY_HOSTS",
            format!("registry.example, {}", other.host()),
        )
        .args(["install", "--json", "--registry"])
        .arg(format!("oci://{}/murmur", other.host()))
        .arg(&dir)
        .run();
    refused(&bound, "E-REG-015");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASS}"));
    assert!(
        other.seen().iter().any(|r| r.path.starts_with("/token")
            && r.authorization.as_deref() == Some(&format!("Basic {basic}"))),
        "{:#?}",
        other.seen()
    );
}

/// Issue 39, point 6: a registry whose Bearer challenge names a token realm on another host
/// (another port, or `localhost` for `127.0.0.1`) gets no Basic credential sent there, even
/// though the credentials are bound to the registry itself; the realm on the registry's own
/// host and port gets them.
#[test]
fn credentials_never_go_to_a_token_realm_on_another_host() {
    let realm = Hostile::start(|_, _| token("realm-token"));
    let realm_url = format!("http://127.0.0.1:{}/token", realm.port);
    let cases = [
        ("another port", Some(realm_url)),
        ("localhost for 127.0.0.1", None),
    ];
    for (case, elsewhere) in cases {
        let registry = Hostile::start(move |request, port| {
            if request.path.starts_with("/token") {
                token("own-token")
            } else {
                bearer_challenge(
                    &elsewhere
                        .clone()
                        .unwrap_or_else(|| format!("http://localhost:{port}/token")),
                )
            }
        });
        let output = pull_with_password(&registry);
        refused(&output, "E-REG-015");
        let hint = output.json()["error"]["hint"].as_str().unwrap().to_string();
        assert!(hint.contains("MURMUR_REGISTRY_HOSTS"), "{case}: {hint}");
        let mut seen = registry.seen();
        seen.extend(realm.seen());
        assert!(
            seen.iter().any(|r| r.path.starts_with("/token")),
            "{case}: the realm was asked: {seen:#?}"
        );
        assert!(
            seen.iter()
                .filter(|r| r.path.starts_with("/token"))
                .all(|r| r.authorization.is_none()),
            "{case}: {seen:#?}"
        );
        assert_eq!(leaks(&output, &seen), Vec::<String>::new(), "{case}");
    }

    // The realm on the registry's own host and port is the registry's: it gets them.
    let registry = Hostile::start(|request, port| {
        if request.path.starts_with("/token") {
            token("own-token")
        } else {
            bearer_challenge(&format!("http://127.0.0.1:{port}/token"))
        }
    });
    let output = pull_with_password(&registry);
    refused(&output, "E-REG-015");
    assert!(
        registry.seen().iter().any(|r| r.path.starts_with("/token")
            && r.authorization
                .as_deref()
                .is_some_and(|a| a.starts_with("Basic "))),
        "{:#?}",
        registry.seen()
    );
}

/// `mur pull` of a capsule from `registry` into a fresh directory, with a username and password
/// bound to that registry by `$MURMUR_REGISTRY`.
fn pull_with_password(registry: &Hostile) -> MurOutput {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    mur(home.path())
        .env(
            "MURMUR_REGISTRY",
            format!("oci://{}/murmur", registry.host()),
        )
        .env("MURMUR_REGISTRY_USERNAME", USER)
        .env("MURMUR_REGISTRY_PASSWORD", PASS)
        .args(["pull", "--json"])
        .arg(format!("oci://{}/capsules/notes:1.0.0", registry.host()))
        .arg(work.path().join("pulled"))
        .run()
}

/// Issue 39, point 7: a manifest body that never ends is refused (`E-REG-003`) as it passes
/// 4 MiB, quickly, the registry cut off (it got out no more than the bound and what loopback's
/// socket buffers hold); one whose `Content-Length` is over the bound is refused unread.
#[test]
fn an_endless_manifest_is_refused_at_the_bound() {
    let manifest_type = || {
        header(
            "Content-Type",
            "application/vnd.oci.image.manifest.v1+json".into(),
        )
    };
    let endless = Hostile::start(move |_, _| Answer::Endless(vec![manifest_type()]));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let output = mur(home.path())
        .args(["pull", "--json"])
        .arg(format!("oci://{}/capsules/notes:1.0.0", endless.host()))
        .arg(work.path().join("pulled"))
        .run();
    let took = started.elapsed();
    refused(&output, "E-REG-003");
    let message = output.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("past the limit of 4194304 bytes"),
        "{message}"
    );
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let written = endless.written.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!(
        "endless manifest: refused in {took:?}, {:.1} MiB written",
        written as f64 / (1 << 20) as f64
    );
    assert!(written >= 4 << 20, "{written}");
    assert!(written < 24 << 20, "{} MiB went out", written >> 20);

    // Announced too large: refused before a byte is read.
    let announced = Hostile::start(move |_, _| {
        Answer::Fixed(
            200,
            vec![
                manifest_type(),
                header("Content-Length", "5000000000".into()),
            ],
            Vec::new(),
        )
    });
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capsule");
    capsule_naming_read_file(&dir);
    let installed = install(
        home.path(),
        &dir,
        &format!("oci://{}/murmur", announced.host()),
        &[],
    );
    refused(&installed, "E-REG-003");
    let message = installed.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("5000000000 bytes"), "{message}");
}
