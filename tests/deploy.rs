//! `mur deploy kubernetes` through the real `mur`: the objects rendered for a capsule with
//! alternates, hooks, a shell grant and a peer are the golden ones (baked into the image, and
//! pulled at start by digest), every one of them passes the official Kubernetes Python
//! client's models strictly, no credential value is ever in them, and each refusal has its
//! code. `MURMUR_UPDATE_GOLDEN=1` rewrites the golden files from what is rendered.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use murmur_testkit::{Mur, MurOutput, repo_root};

const CAPSULE_REF: &str = "oci://registry.example.com:5000/capsules/team-lead@sha256:7777777777777777777777777777777777777777777777777777777777777777";

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden/deploy")
}

/// `mur deploy kubernetes` of `dir` with the configuration the golden capsule reads, and the
/// credentials set to values that must never appear.
fn deploy(dir: &Path, extra: &[&str]) -> MurOutput {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
        .env("LEAD_MODEL", "claude-sonnet-4-5")
        .env("OPS_TOKEN", "ops-token-value-never-rendered")
        .env("ANTHROPIC_API_KEY", "sk-ant-never-rendered")
        .args(["deploy", "kubernetes"])
        .arg(dir)
        .args(extra)
        .args(if extra.contains(&"--image") {
            &[][..]
        } else {
            &["--image", "murmur/mur:0.1.0"][..]
        })
        .run()
}

/// What the official Kubernetes client's models say of `objects` (YAML or JSON).
fn schema_check(objects: &str) -> (bool, String) {
    let python = repo_root().join("target/kubernetes-python-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/python-env kubernetes",
        python.display()
    );
    let mut child = Command::new(python)
        .arg(repo_root().join("tests/python/kubernetes/check_objects.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), objects.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

fn matches_golden(name: &str, rendered: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("MURMUR_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, rendered).unwrap();
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (MURMUR_UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        golden == rendered,
        "{} differs from what is rendered now (MURMUR_UPDATE_GOLDEN=1 rewrites it):\n{rendered}",
        path.display()
    );
}

#[test]
fn the_objects_for_a_capsule_are_the_golden_ones_and_pass_the_kubernetes_schema() {
    let team = golden_dir().join("team");
    for (golden, extra) in [
        ("team.baked.yaml", vec![]),
        (
            "team.pulled.yaml",
            vec![
                "--capsule-ref",
                CAPSULE_REF,
                "--image",
                "registry.example.com:5000/murmur/mur:0.1.0",
                "--namespace",
                "agents",
            ],
        ),
    ] {
        let rendered = deploy(&team, &extra);
        assert_eq!(rendered.code, 0, "{rendered:#?}");
        assert!(
            rendered.stderr.contains("warning[W-DEP-004]") && rendered.stderr.contains("git, ls"),
            "the shell grant's binaries are named: {}",
            rendered.stderr
        );
        for secret in ["ops-token-value-never-rendered", "sk-ant-never-rendered"] {
            assert!(
                !rendered.stdout.contains(secret),
                "a credential value was rendered"
            );
        }
        matches_golden(golden, &rendered.stdout);
        let (valid, said) = schema_check(&rendered.stdout);
        assert!(valid, "{golden}: {said}");
        assert_eq!(said.lines().count(), 4, "{said}");

        // The same objects as JSON, for scripts, pass the same check.
        let mut json_extra = extra.clone();
        json_extra.push("--json");
        let as_json = deploy(&team, &json_extra);
        assert_eq!(as_json.code, 0, "{as_json:#?}");
        let (valid, said) = schema_check(&as_json.stdout);
        assert!(valid, "{golden} as JSON: {said}");
    }
}

/// The door's port: `--port`, else the manifest's `door.port`, else 8080: in the container's
/// command, its port, and the NetworkPolicy's way in.
#[test]
fn the_doors_port_is_the_flags_else_the_manifests_else_8080() {
    let work = tempfile::tempdir().unwrap();
    let team = golden_dir().join("team");
    let dir = work.path().join("team");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["murmur.yaml", "murmur.lock"] {
        std::fs::copy(team.join(file), dir.join(file)).unwrap();
    }
    let ported = dir.join("murmur.yaml");
    let text = std::fs::read_to_string(&ported)
        .unwrap()
        .replace("door:\n", "door:\n  port: 9090\n");
    std::fs::write(&ported, text).unwrap();
    let port_of = |extra: &[&str]| -> (u64, String, u64) {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let output = deploy(&dir, &args);
        assert_eq!(output.code, 0, "{output:#?}");
        let objects = output.json();
        let items = objects["items"].as_array().unwrap();
        let of_kind = |kind: &str| items.iter().find(|o| o["kind"] == kind).unwrap();
        let container = &of_kind("Deployment")["spec"]["template"]["spec"]["containers"][0];
        let policy = &of_kind("NetworkPolicy")["spec"]["ingress"][0]["ports"][0]["port"];
        (
            container["ports"][0]["containerPort"].as_u64().unwrap(),
            container["args"].to_string(),
            policy.as_u64().unwrap(),
        )
    };
    let (port, args, policy) = port_of(&[]);
    assert_eq!((port, policy), (9090, 9090));
    assert!(args.contains("\"9090\""), "{args}");
    let (port, args, policy) = port_of(&["--port", "7070"]);
    assert_eq!((port, policy), (7070, 7070));
    assert!(
        args.contains("\"7070\"") && !args.contains("9090"),
        "{args}"
    );
    // The golden capsule names no port: 8080, as its golden objects show.
    let golden = deploy(&team, &["--json"]).json();
    assert!(golden.to_string().contains("8080"));
}

#[test]
fn the_schema_check_refuses_what_the_api_does_not_have() {
    // The check itself can fail: a field the API lacks, and a number where a string goes.
    let rendered = deploy(&golden_dir().join("team"), &[]);
    let bogus = rendered.stdout.replacen(
        "automountServiceAccountToken: false",
        "automountServiceAccount: false",
        1,
    );
    let (valid, said) = schema_check(&bogus);
    assert!(!valid && said.contains("automountServiceAccount"), "{said}");
    let mistyped = rendered.stdout.replacen("port: 80\n", "port: \"80\"\n", 1);
    let (valid, said) = schema_check(&mistyped);
    assert!(!valid, "{said}");
}

#[test]
fn a_capsule_that_cannot_be_served_or_pulled_as_asked_is_refused_with_its_code() {
    let work = tempfile::tempdir().unwrap();
    let team = golden_dir().join("team");
    let copy = |name: &str, edit: &dyn Fn(String) -> String, lock: Option<&str>| {
        let dir = work.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = std::fs::read_to_string(team.join("murmur.yaml")).unwrap();
        std::fs::write(dir.join("murmur.yaml"), edit(manifest)).unwrap();
        if let Some(lock) = lock {
            std::fs::write(dir.join("murmur.lock"), lock).unwrap();
        }
        dir
    };
    let refused = |output: &MurOutput, code: &str| {
        assert_ne!(output.code, 0, "{output:#?}");
        assert_eq!(output.json()["error"]["code"], code, "{output:#?}");
        assert!(
            !output.stdout.contains("kind"),
            "nothing rendered: {output:#?}"
        );
    };
    let lock = std::fs::read_to_string(team.join("murmur.lock")).unwrap();

    // No door.auth: on a cluster anyone could use it.
    let open = copy(
        "open",
        &|m| {
            let start = m.find("door:").unwrap();
            let end = m.find("peers:").unwrap();
            format!("{}{}", &m[..start], &m[end..])
        },
        None,
    );
    refused(&deploy(&open, &["--json"]), "E-DEP-001");

    // A tag, not a digest.
    let tagged = "oci://registry.example.com:5000/capsules/team-lead:1.2.0";
    refused(
        &deploy(&team, &["--json", "--capsule-ref", tagged]),
        "E-DEP-002",
    );
    // A registry artifact the lock does not pin.
    let unlocked = copy(
        "unlocked",
        &|m| m,
        Some(&lock.replace("  - { name: \"policy\",", "  - { name: \"other\",")),
    );
    refused(
        &deploy(&unlocked, &["--json", "--capsule-ref", CAPSULE_REF]),
        "E-DEP-002",
    );
    // Pinned from a directory registry a pod cannot reach.
    let local = copy(
        "local",
        &|m| m,
        Some(&lock.replacen(
            "oci://registry.example.com:5000/murmur",
            "/home/someone/registry",
            1,
        )),
    );
    let output = deploy(&local, &["--json", "--capsule-ref", CAPSULE_REF]);
    refused(&output, "E-DEP-002");
    assert!(
        output.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/home/someone/registry")
    );

    // No image named: none is published to default to; nothing is written.
    let out = work.path().join("never.yaml");
    let output = Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
        .env("LEAD_MODEL", "claude-sonnet-4-5")
        .env("OPS_TOKEN", "ops-token-value-never-rendered")
        .args(["deploy", "kubernetes", "--json", "--out"])
        .arg(&out)
        .arg(&team)
        .run();
    refused(&output, "E-DEP-005");
    assert!(
        output.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--image"),
        "{output:#?}"
    );
    assert!(!out.exists());

    // An output that cannot be written; nothing is left behind.
    let output = deploy(&team, &["--json", "--out", "/nonexistent-dir/objects.yaml"]);
    refused(&output, "E-DEP-003");

    // Written with --out: the same objects as on stdout.
    let out = work.path().join("objects.yaml");
    let written = deploy(&team, &["--out", out.to_str().unwrap()]);
    assert_eq!(written.code, 0, "{written:#?}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        deploy(&team, &[]).stdout
    );
}

/// A rendered container run here as the pod would run it: as its user (65532), with its args
/// and environment, each volume's mount path mapped to a directory under `root`.
struct Pod {
    root: PathBuf,
    mur: PathBuf,
    secrets: Vec<(&'static str, String)>,
}

impl Pod {
    const MOUNTS: [&'static str; 4] = ["/capsule", "/work", "/murmur-home", "/tmp"];

    fn mapped(&self, text: &str) -> String {
        for mount in Pod::MOUNTS {
            if text == mount || text.starts_with(&format!("{mount}/")) {
                return format!("{}{text}", self.root.display());
            }
        }
        text.to_string()
    }

    fn command(&self, container: &serde_json::Value) -> Command {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65532", "--regid=65532", "--clear-groups", "--"])
            .arg(&self.mur)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        for arg in container["args"].as_array().unwrap() {
            command.arg(self.mapped(arg.as_str().unwrap()));
        }
        for variable in container["env"].as_array().unwrap() {
            let name = variable["name"].as_str().unwrap();
            if let Some(value) = variable["value"].as_str() {
                command.env(name, self.mapped(value));
            } else {
                let reference = &variable["valueFrom"]["secretKeyRef"];
                let key = reference["key"].as_str().unwrap();
                match self.secrets.iter().find(|(k, _)| *k == key) {
                    Some((_, value)) => {
                        command.env(name, value);
                    }
                    None => assert_eq!(
                        reference["optional"], true,
                        "a required Secret key the test does not supply: {key}"
                    ),
                }
            }
        }
        command
    }
}

fn chown(path: &Path, uid: u32) {
    let status = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_rendered_pod_pulls_installs_and_serves_as_its_own_user_from_a_read_only_capsule() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: running as the pod's user (65532) needs root, as CI has");
        return;
    }
    use crate::artifacts::{KEY, SCRIPT, capsule};
    use murmur_testkit::emulator::{Emulator, Script};
    use murmur_testkit::oci_registry::OciRegistry;

    // Artifacts in an OCI registry, a capsule installed from it and pushed.
    let registry = OciRegistry::start();
    let home = tempfile::tempdir().unwrap();
    let mur = |home: &Path| Mur::new(env!("CARGO_BIN_EXE_mur")).env("MURMUR_HOME", home);
    let artifacts = registry.oci("murmur");
    let mut publish = mur(home.path()).args(["publish", "--registry", &artifacts]);
    for name in ["driver-anthropic", "read-file", "write-file"] {
        publish = publish.arg(repo_root().join("artifacts").join(name));
    }
    assert_eq!(publish.run().code, 0);
    let emulator = Emulator::builder(Script::from_yaml(SCRIPT).unwrap())
        .api_key(KEY)
        .start()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("served");
    let file = capsule(&dir, &emulator.url());
    let mut manifest = std::fs::read_to_string(&file).unwrap();
    manifest.push_str("door:\n  auth:\n    - { principal: ops, bearer: \"${OPS_TOKEN}\" }\n");
    std::fs::write(&file, manifest).unwrap();
    let installed = mur(home.path())
        .args(["install", "--registry", &artifacts])
        .arg(&dir)
        .run();
    assert_eq!(installed.code, 0, "{installed:#?}");
    let capsules = format!("oci://{}/capsules/served", registry.host());
    let pushed = mur(home.path())
        .args(["push", "--json", &capsules])
        .arg(&dir)
        .run();
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let reference = format!(
        "{capsules}@sha256:{}",
        pushed.json()["sha256"].as_str().unwrap()
    );

    // What runs it.
    let port = murmur_testkit::free_port();
    let rendered = mur(home.path())
        .env("EMU_KEY", KEY)
        .args([
            "deploy",
            "kubernetes",
            "--json",
            "--image",
            "murmur/mur:0.1.0",
            "--capsule-ref",
            &reference,
        ])
        .args(["--port", &port.to_string()])
        .arg(&dir)
        .run();
    assert_eq!(rendered.code, 0, "{rendered:#?}");
    let objects = rendered.json();
    let deployment = objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap()
        .clone();
    let spec = &deployment["spec"]["template"]["spec"];

    // The pod's volumes: empty directories its user owns; the binary where that user can run it.
    let pod_root = tempfile::tempdir().unwrap();
    let root = pod_root.path().to_path_buf();
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for mount in Pod::MOUNTS {
        std::fs::create_dir_all(root.join(&mount[1..])).unwrap();
        chown(&root.join(&mount[1..]), 65532);
    }
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_mur"), bin.join("mur")).unwrap();
    let pod = Pod {
        root: root.clone(),
        mur: bin.join("mur"),
        secrets: vec![
            ("EMU_KEY", KEY.to_string()),
            ("OPS_TOKEN", "pod-token".to_string()),
        ],
    };

    // The init containers, in order: pull by digest, install as locked.
    let init = spec["initContainers"].as_array().unwrap();
    assert_eq!(init.len(), 2);
    for container in init {
        let output = pod.command(container).output().unwrap();
        assert!(
            output.status.success(),
            "init container `{}`: {}{}",
            container["name"],
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(
        root.join("capsule/.murmur/artifacts/read-file/0.1.0")
            .is_dir()
    );

    // The capsule's container mounts /capsule read-only: the pod's user can no longer write it.
    chown(&root.join("capsule"), 0);
    let main = &spec["containers"][0];
    assert_eq!(main["volumeMounts"][3]["readOnly"], true);
    let mut server = pod
        .command(main)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stdout.take().unwrap()));
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("listening on "), "{first}");

    // Its probe path answers, and a task sent with the door's credential is answered.
    let probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        ["httpGet"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!("GET {probe} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let sent = mur(home.path())
        .env("OPS_TOKEN", "pod-token")
        .args(["send", &format!("http://127.0.0.1:{port}/")])
        .args([
            "--text",
            "write and read a note",
            "--credential",
            "OPS_TOKEN",
        ])
        .run();
    assert!(sent.stdout.contains("It says installed."), "{sent:#?}");
    let _ = server.kill();
    let _ = server.wait();
    // The session wrote only where the pod may: its workdir is under /work.
    assert!(
        std::fs::read_dir(root.join("work"))
            .unwrap()
            .next()
            .is_some(),
        "the session's workdir is under /work"
    );
    assert!(!root.join("capsule/workdir").exists());
}
