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
