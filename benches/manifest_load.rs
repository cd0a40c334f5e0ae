//! Loading a hostile manifest of 200,000 unknown keys (`docs/security.md`, "Manifests load in
//! linear time"): at the top level, read from a file (it fits under
//! `murmur_manifest::load::MANIFEST_MAX_BYTES`); under one artifact entry, given as text to
//! `load_str`, the entry point below the file-size check (indented that way, the keys take more
//! than the cap); and at the top level with more type problems than the shape looks for, so
//! every pass of the shape runs.

use criterion::{Criterion, criterion_group, criterion_main};
use murmur_manifest::load::MANIFEST_MAX_BYTES;
use murmur_manifest::{load, load_str};

const KEYS: usize = 200_000;

/// The `i`th of a run of distinct keys no manifest type knows: a letter, then up to two letters
/// or digits (every key of the first 203,164 is at most three characters).
fn key(mut i: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut key = vec![ALPHABET[i % 52]];
    i /= 52;
    while i > 0 {
        i -= 1;
        key.push(ALPHABET[i % 62]);
        i /= 62;
    }
    String::from_utf8(key).expect("ASCII")
}

fn unknown_keys(indent: &str) -> String {
    (0..KEYS)
        .map(|i| format!("{indent}{}:\n", key(i)))
        .collect()
}

const HEAD: &str = "name: hostile\nversion: \"1.0.0\"\n";

fn no_env(_: &str) -> Option<String> {
    None
}

fn manifest_load(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("murmur.yaml");
    let top_level = format!("{HEAD}{}", unknown_keys(""));
    assert!(top_level.len() as u64 <= MANIFEST_MAX_BYTES);
    std::fs::write(&file, &top_level).expect("writing the manifest");
    let in_entry = format!(
        "{HEAD}artifacts:\n- name: d\n  version: \"1.0.0\"\n  runtime: driver\n{}",
        unknown_keys("  ")
    );
    let mut with_type_problems = format!("{HEAD}{}artifacts:\n", unknown_keys(""));
    for _ in 0..150 {
        with_type_problems.push_str("- { name: [1], version: \"1.0.0\", runtime: driver }\n");
    }

    let mut group = c.benchmark_group("manifest_load_200k_unknown_keys");
    group.sample_size(10);
    group.measurement_time(std::time::Duration::from_secs(8));
    group.bench_function("top_level_from_file", |b| {
        b.iter(|| {
            let loaded = load(&file, &no_env);
            assert!(!loaded.has_errors());
            loaded
        })
    });
    group.bench_function("in_an_artifact_entry", |b| {
        b.iter(|| load_str(&in_entry, &file, &no_env))
    });
    group.bench_function("top_level_with_150_type_problems", |b| {
        b.iter(|| {
            let loaded = load_str(&with_type_problems, &file, &no_env);
            assert!(loaded.has_errors());
            loaded
        })
    });
    group.finish();
}

criterion_group!(benches, manifest_load);
criterion_main!(benches);
