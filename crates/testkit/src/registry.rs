//! Hostile registries for tests: archives made by hand (so they can hold what `mur build` never
//! packs) and put into a directory registry's index in place of what was published.

use std::io::Write;
use std::path::Path;

use serde_json::Value;
use sha2::Digest;

/// A gzip-compressed tar of regular files, in the order given, with no check of the names or
/// contents: as a hostile registry would make it.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        let raw = name.as_bytes();
        header.as_old_mut().name[..raw.len()].copy_from_slice(raw);
        header.set_cksum();
        tar.append(&header, *bytes).expect("a tar entry");
    }
    let tar = tar.into_inner().expect("a tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    gz.finish().expect("gzip")
}

/// Serves `bytes` as artifact `name` at `version` of the directory registry `registry`: the
/// archive file its index names is overwritten and the index's sha256 and size follow, so the
/// bytes pass every check of the registry's own.
pub fn replace_archive(registry: &Path, name: &str, version: &str, bytes: &[u8]) {
    let index_path = registry.join("index.json");
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).expect("index.json"))
            .expect("index.json is JSON");
    let entry = &mut index["artifacts"][name][version];
    let url = entry["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} {version} is not in the registry"))
        .to_string();
    std::fs::write(registry.join(&url), bytes).expect("writing the archive");
    entry["sha256"] = Value::from(hex::encode(sha2::Sha256::digest(bytes)));
    entry["size"] = Value::from(bytes.len());
    std::fs::write(
        &index_path,
        serde_json::to_vec_pretty(&index).expect("index JSON"),
    )
    .expect("writing index.json");
}
