//! Named peers' agent cards, pinned in `murmur.lock` by `mur install` and held to that pin: a
//! lead capsule names a researcher capsule served by `mur run --serve` (a real peer with a
//! real card), all on loopback.

use std::path::Path;

use murmur_testkit::door::Served;
use murmur_testkit::emulator::{Emulator, Script, capsule_manifest};
use murmur_testkit::{Mur, MurOutput, free_port, shared_home};
use sha2::Digest;

const KEY: &str = "sk-emulator-peers";

/// A capsule in its own directory, on its own emulator.
struct Capsule {
    dir: tempfile::TempDir,
    emulator: Emulator,
}

/// A capsule named `name`, described as `description`, whose model plays `script`, with
/// `extra` lines at the end of its manifest.
fn capsule(name: &str, description: &str, script: &str, extra: &str) -> Capsule {
    let emulator = Emulator::builder(Script::from_yaml(script).expect("script"))
        .api_key(KEY)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = capsule_manifest(&emulator.url(), name, description, "", extra);
    std::fs::write(dir.path().join("murmur.yaml"), text).unwrap();
    Capsule { dir, emulator }
}

/// The researcher, described as `description`, served on `port`.
fn researcher(description: &str, port: u16) -> (Capsule, Served) {
    let peer = capsule(
        "researcher",
        description,
        "turns:\n  - reply: { text: \"Lima.\" }\n",
        "lifecycle: { task_acceptance: queue }",
    );
    let served = Served::start_with_args(
        Path::new(env!("CARGO_BIN_EXE_mur")),
        peer.dir.path(),
        &[("EMU_KEY", KEY)],
        &shared_home(),
        &["--port", &port.to_string()],
    );
    (peer, served)
}

/// A lead capsule naming the peer at `url` `researcher` (with `description` when given).
fn lead(url: &str, description: Option<&str>) -> Capsule {
    let description = description.map_or(String::new(), |d| format!(", description: \"{d}\""));
    capsule(
        "lead",
        "Leads.",
        "turns:\n  - reply: { text: \"done\" }\n",
        &format!(
            "capabilities:\n  network: {{ allow: [\"{url}\"] }}\npeers:\n  - {{ url: \"{url}/\", name: researcher{description}, bearer: \"${{PEER_TOKEN}}\" }}"
        ),
    )
}

fn mur() -> Mur {
    Mur::new(env!("CARGO_BIN_EXE_mur"))
        .env("EMU_KEY", KEY)
        .env("PEER_TOKEN", "peer-token")
}

fn install(dir: &Path) -> MurOutput {
    mur().arg("install").arg(dir).run()
}

fn run(dir: &Path) -> MurOutput {
    mur()
        .arg("run")
        .arg(dir)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--task", "Ask the researcher."])
        .run()
}

/// The sha256 of the card `url` serves to a client that names no version, as `mur install`
/// fetches it.
fn card_sha256(url: &str) -> String {
    let bytes = murmur_testkit::door::client_builder()
        .build()
        .unwrap()
        .get(format!("{url}/.well-known/agent-card.json"))
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    hex::encode(sha2::Sha256::digest(&bytes))
}

/// The `card_sha256` murmur.lock pins for `researcher`.
fn pinned(dir: &Path) -> Option<String> {
    let lock = murmur_manifest::lock::Lock::load(&dir.join("murmur.lock"))
        .unwrap()
        .unwrap_or_default();
    lock.peer("researcher").map(|pin| pin.card_sha256.clone())
}

/// The researcher served on a port of its own, describing itself as `description`, and a lead
/// naming it whose `mur install` pinned its card: the lead, the served peer, the port and the
/// pinned sha256.
fn pinned_lead(description: &str) -> (Capsule, (Capsule, Served), u16, String) {
    let port = free_port();
    let (peer, served) = researcher(description, port);
    let lead = lead(&served.url, None);
    let first = install(lead.dir.path());
    assert_eq!(first.code, 0, "{first:?}");
    let sha = card_sha256(&served.url);
    assert_eq!(pinned(lead.dir.path()).as_deref(), Some(sha.as_str()));
    assert!(
        first.stdout.contains(&format!(
            "researcher (peer {}/, agent card) {}: pinned",
            served.url,
            &sha[..12]
        )),
        "{first:?}"
    );
    (lead, (peer, served), port, sha)
}

#[test]
fn mur_install_pins_a_named_peers_card_and_pins_it_again_when_it_changed() {
    let (lead, (_peer, mut served), port, sha) = pinned_lead("Finds capitals.");
    let again = install(lead.dir.path());
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains(": unchanged"), "{again:?}");
    // --locked takes an unchanged card.
    let locked = mur()
        .args(["install", "--locked"])
        .arg(lead.dir.path())
        .run();
    assert_eq!(locked.code, 0, "{locked:?}");

    // The same peer, at the same address, now describing itself otherwise.
    served.stop();
    let (_peer, mut served) = researcher("Finds capitals and rivers.", port);
    let changed = card_sha256(&served.url);
    assert_ne!(changed, sha);
    let locked = mur()
        .args(["install", "--locked"])
        .arg(lead.dir.path())
        .run();
    assert_ne!(locked.code, 0, "{locked:?}");
    assert!(
        locked
            .stderr
            .contains("peer `researcher`'s agent card differs from its pin"),
        "{locked:?}"
    );
    assert_eq!(pinned(lead.dir.path()).as_deref(), Some(sha.as_str()));
    let reinstalled = install(lead.dir.path());
    assert_eq!(reinstalled.code, 0, "{reinstalled:?}");
    assert!(
        reinstalled.stdout.contains(": re-pinned"),
        "{reinstalled:?}"
    );
    assert_eq!(pinned(lead.dir.path()).as_deref(), Some(changed.as_str()));
    served.stop();
}

#[test]
fn a_changed_card_refuses_the_session_before_the_model_is_called_until_mur_install() {
    let (lead, (_peer, mut served), port, sha) = pinned_lead("Finds capitals.");
    served.stop();
    let (_peer, mut served) = researcher("Finds capitals and rivers.", port);
    let changed = card_sha256(&served.url);
    let refused = run(lead.dir.path());
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused.stderr.contains("E-A2A-027")
            && refused.stderr.contains(&format!(
                "peer `researcher`'s agent card changed since `mur install` pinned it (sha256 {} → {})",
                &sha[..12],
                &changed[..12]
            )),
        "{refused:?}"
    );
    assert!(
        lead.emulator.requests().is_empty(),
        "the model was called before the card was checked"
    );
    let reinstalled = install(lead.dir.path());
    assert_eq!(reinstalled.code, 0, "{reinstalled:?}");
    let ran = run(lead.dir.path());
    assert_eq!(ran.code, 0, "{ran:?}");
    assert_eq!(lead.emulator.requests().len(), 1);
    served.stop();
}

#[test]
fn mur_install_refuses_a_peer_whose_card_cannot_be_fetched_unless_the_manifest_describes_it() {
    // Allowed, but nothing listens there.
    let url = format!("http://127.0.0.1:{}", free_port());
    let lead_capsule = lead(&url, None);
    let refused = install(lead_capsule.dir.path());
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused.stderr.contains("E-A2A-029")
            && refused
                .stderr
                .contains("peer `researcher`'s agent card cannot be fetched"),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("description:"), "{refused:?}");
    assert_eq!(pinned(lead_capsule.dir.path()), None);

    let described = lead(&url, Some("Finds capitals."));
    let warned = install(described.dir.path());
    assert_eq!(warned.code, 0, "{warned:?}");
    assert!(
        warned.stderr.contains("W-A2A-030") && warned.stderr.contains("researcher"),
        "{warned:?}"
    );
    assert_eq!(pinned(described.dir.path()), None);
}
