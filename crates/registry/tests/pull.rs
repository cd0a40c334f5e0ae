//! `install::pull` (what a capsule component's `murmur:artifact-manager/manage.pull` does)
//! against a `murmur.lock` that pins the artifact: a version other than the pin is refused
//! before the registry is read for it, and nothing is written.

use murmur_manifest::Coded;
use murmur_registry::index::{Registry, publish};
use murmur_registry::install::{self, InstallOptions};

#[test]
fn a_pull_of_a_version_other_than_the_locks_pin_is_refused_and_nothing_is_written() {
    let registry = tempfile::tempdir().unwrap();
    publish(registry.path(), "read-file", "0.1.0", "tool", b"first").unwrap();
    publish(registry.path(), "read-file", "0.2.0", "tool", b"second").unwrap();
    let capsule = tempfile::tempdir().unwrap();
    let lock = format!(
        "version: 1\nartifacts:\n  - {{ name: \"read-file\", version: \"0.1.0\", runtime: \"tool\", sha256: \"{}\", source: \"{}\" }}\n",
        "ab".repeat(32),
        registry.path().display()
    );
    std::fs::write(capsule.path().join("murmur.lock"), &lock).unwrap();
    let store = tempfile::tempdir().unwrap();
    let options = InstallOptions {
        registry: Registry::Dir(registry.path().to_path_buf()),
        locked: false,
        user_store: store.path().to_path_buf(),
        limits: Default::default(),
    };
    let mut progress = 0;
    let refused = install::pull(
        capsule.path(),
        "read-file",
        Some("0.2.0"),
        &options,
        &mut |_| progress += 1,
    )
    .unwrap_err();
    assert_eq!(refused.code(), "E-REG-005", "{refused}");
    let message = refused.to_string();
    assert!(
        message.contains("0.1.0") && message.contains("0.2.0"),
        "{message}"
    );
    assert_eq!(progress, 0, "nothing was resolved");
    assert_eq!(
        std::fs::read_to_string(capsule.path().join("murmur.lock")).unwrap(),
        lock
    );
    assert!(!capsule.path().join(".murmur").exists());
    assert_eq!(std::fs::read_dir(store.path()).unwrap().count(), 0);
    // The pinned version, written another way, is the pin: not a conflict (it goes on to the
    // registry, where the pin's hash differs from the bytes: another refusal, the same code,
    // naming the hashes rather than the versions).
    let same = install::pull(
        capsule.path(),
        "read-file",
        Some(" 0.1.0 "),
        &options,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(!same.to_string().contains("0.2.0"), "{same}");
    assert!(same.to_string().contains(&"ab".repeat(32)), "{same}");
}
