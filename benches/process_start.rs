//! Process start to first call: `mur tool invoke` of the read-file tool, as a new process, with
//! the compiled-component cache warm (a second start) and cold (an empty murmur home, so the
//! component is compiled before the call).

use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};

fn read_file_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/read-file")
}

fn invoke(home: &Path, workdir: &Path) {
    let status = Command::new(env!("CARGO_BIN_EXE_mur"))
        .env("MURMUR_HOME", home)
        .args(["tool", "invoke"])
        .arg(read_file_dir())
        .args(["--input", r#"{"path": "notes.md"}"#, "--workdir"])
        .arg(workdir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("running mur");
    assert!(status.success());
}

fn process_start(c: &mut Criterion) {
    let workdir = tempfile::tempdir().unwrap();
    std::fs::write(workdir.path().join("notes.md"), "one\ntwo\n").unwrap();
    let warm_home = tempfile::tempdir().unwrap();
    // Builds the component if needed and fills the cache.
    invoke(warm_home.path(), workdir.path());

    let mut group = c.benchmark_group("process_start_to_first_call");
    group.sample_size(20);
    group.bench_function("warm_cache", |b| {
        b.iter(|| invoke(warm_home.path(), workdir.path()))
    });
    group.bench_function("cold_cache", |b| {
        b.iter_with_setup(
            || tempfile::tempdir().unwrap(),
            |home| invoke(home.path(), workdir.path()),
        )
    });
    group.finish();
}

criterion_group!(benches, process_start);
criterion_main!(benches);
