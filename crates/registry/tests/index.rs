//! Registries: a directory made by `publish`, and an HTTP registry served on 127.0.0.1 by a
//! small HTTP/1.1 responder started here. Nothing contacts any other address.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use murmur_manifest::Coded;
use murmur_registry::index::{INDEX_FILE, Index, IndexEntry, Registry, RegistryError, publish};
use murmur_registry::sha256_hex;

fn archive(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn refused<T: std::fmt::Debug>(result: Result<T, RegistryError>) -> (&'static str, String) {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(error) => {
            assert!(!error.hint().is_empty());
            (error.code(), error.to_string())
        }
    }
}

fn no_progress(_: u64, _: Option<u64>) {}

// ---------------------------------------------------------------- directory registries

#[test]
fn publish_writes_archive_and_index_and_never_changes_a_version() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    let bytes = archive(1, 1000);
    let entry = publish(&registry, "read-file", "0.1.0", "tool", &bytes).unwrap();
    assert_eq!(entry.url, "read-file/read-file-0.1.0.tar.gz");
    assert_eq!(entry.sha256, sha256_hex(&bytes));
    assert_eq!(entry.size, Some(1000));
    assert_eq!(
        std::fs::read(registry.join(&entry.url)).unwrap(),
        bytes,
        "the archive is where the index says"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        for file in [registry.join(&entry.url), registry.join("index.json")] {
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "{} is shared read-only", file.display());
        }
    }
    let index_before = std::fs::read(registry.join(INDEX_FILE)).unwrap();

    // The same bytes again: nothing changes.
    assert_eq!(
        publish(&registry, "read-file", "0.1.0", "tool", &bytes).unwrap(),
        entry
    );
    assert_eq!(
        std::fs::read(registry.join(INDEX_FILE)).unwrap(),
        index_before
    );

    // Other bytes for the same version: refused, nothing written.
    let (code, message) = refused(publish(
        &registry,
        "read-file",
        "0.1.0",
        "tool",
        &archive(2, 1000),
    ));
    assert_eq!(code, "E-REG-011");
    assert!(message.contains(&entry.sha256), "{message}");
    assert_eq!(
        std::fs::read(registry.join(INDEX_FILE)).unwrap(),
        index_before
    );
    assert_eq!(std::fs::read(registry.join(&entry.url)).unwrap(), bytes);

    // Another version sits beside it; no temporary file is left behind.
    publish(&registry, "read-file", "0.2.0", "tool", &archive(3, 10)).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(registry.join("read-file"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["read-file-0.1.0.tar.gz", "read-file-0.2.0.tar.gz"]);
    let index = Registry::Dir(registry.clone()).index().unwrap();
    assert_eq!(index.versions("read-file"), ["0.1.0", "0.2.0"]);
    // What publish writes, the parser reads back the same.
    let text = std::fs::read_to_string(registry.join(INDEX_FILE)).unwrap();
    assert_eq!(Index::parse(&text).unwrap().to_json(), text);
}

#[test]
fn publish_refuses_what_cannot_go_in_an_index() {
    let dir = tempfile::tempdir().unwrap();
    for (name, version, runtime) in [
        ("../x", "0.1.0", "tool"),
        ("a/b", "0.1.0", "tool"),
        ("", "0.1.0", "tool"),
        (".hidden", "0.1.0", "tool"),
        ("index.json", "0.1.0", "tool"),
        ("a", "1.0", "tool"),
        ("a", "0.1.0", "capsule"),
    ] {
        let (code, _) = refused(publish(dir.path(), name, version, runtime, b"x"));
        assert_eq!(code, "E-REG-007", "{name} {version} {runtime}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn registry_with_versions(versions: &[&str]) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    for (i, version) in versions.iter().enumerate() {
        publish(
            dir.path(),
            "read-file",
            version,
            "tool",
            &archive(i as u8, 64),
        )
        .unwrap();
    }
    publish(dir.path(), "driver-x", "1.0.0", "driver", b"driver").unwrap();
    let registry = Registry::Dir(dir.path().to_path_buf());
    (dir, registry)
}

#[test]
fn resolve_exact_and_newest() {
    let (_dir, registry) = registry_with_versions(&["0.1.0", "0.10.0", "0.9.0", "1.0.0-rc.1"]);
    let index = registry.index().unwrap();
    let exact = index.resolve("read-file", Some("0.9.0")).unwrap();
    assert_eq!(
        (exact.version.as_str(), exact.runtime.as_str()),
        ("0.9.0", "tool")
    );
    // Newest by semver, a release before a prerelease.
    assert_eq!(index.resolve("read-file", None).unwrap().version, "0.10.0");
    // Only prereleases: the newest of them.
    let (_dir, registry) = registry_with_versions(&["2.0.0-rc.1", "2.0.0-rc.2"]);
    let index = registry.index().unwrap();
    assert_eq!(
        index.resolve("read-file", None).unwrap().version,
        "2.0.0-rc.2"
    );
}

#[test]
fn missing_name_and_missing_version_are_e_reg_006_listing_what_exists() {
    let (_dir, registry) = registry_with_versions(&["0.1.0", "0.2.0"]);
    let index = registry.index().unwrap();
    let error = index.resolve("raed-file", Some("0.1.0")).unwrap_err();
    assert_eq!(error.code(), "E-REG-006");
    assert!(error.to_string().contains("driver-x, read-file"), "{error}");
    assert!(error.hint().contains("read-file"), "{}", error.hint());
    let (code, message) = refused(index.resolve("read-file", Some("0.3.0")));
    assert_eq!(code, "E-REG-006");
    assert!(
        message.contains("0.3.0") && message.contains("0.1.0, 0.2.0"),
        "{message}"
    );
}

#[test]
fn fetch_from_a_directory_verifies_and_reports_progress() {
    let (dir, registry) = registry_with_versions(&["0.1.0"]);
    let entry = registry
        .index()
        .unwrap()
        .resolve("read-file", None)
        .unwrap();
    let mut calls = Vec::new();
    let bytes = registry
        .fetch(&entry, 1024, &mut |done, total| calls.push((done, total)))
        .unwrap();
    assert_eq!(bytes, archive(0, 64));
    assert_eq!(calls.last(), Some(&(64, Some(64))));

    // The bytes in the directory changed after publishing: refused.
    std::fs::write(dir.path().join(&entry.url), archive(9, 64)).unwrap();
    let (code, message) = refused(registry.fetch(&entry, 1024, &mut no_progress));
    assert_eq!(code, "E-REG-004");
    assert!(message.contains(&entry.sha256), "{message}");

    // Over the caller's limit: refused before reading.
    let (code, _) = refused(registry.fetch(&entry, 10, &mut no_progress));
    assert_eq!(code, "E-REG-003");
    let without_size = IndexEntry {
        size: None,
        ..entry.clone()
    };
    let (code, _) = refused(registry.fetch(&without_size, 10, &mut no_progress));
    assert_eq!(code, "E-REG-003");
}

#[test]
fn a_directory_registrys_urls_stay_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let registry_dir = dir.path().join("registry");
    std::fs::create_dir(&registry_dir).unwrap();
    std::fs::write(dir.path().join("outside.tar.gz"), b"secret").unwrap();
    let sha = sha256_hex(b"secret");
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        dir.path().join("outside.tar.gz"),
        registry_dir.join("link.tar.gz"),
    )
    .unwrap();
    let outside = dir.path().join("outside.tar.gz");
    let registry = Registry::Dir(registry_dir);
    for url in [
        "../outside.tar.gz".to_string(),
        "a/../../outside.tar.gz".to_string(),
        format!("file://{}", outside.display()),
        outside.display().to_string(),
        "https://127.0.0.1:9/x.tar.gz".to_string(),
        "link.tar.gz".to_string(),
    ] {
        let entry = IndexEntry {
            name: "a".into(),
            version: "0.1.0".into(),
            runtime: "tool".into(),
            url: url.clone(),
            sha256: sha.clone(),
            size: None,
        };
        let (code, message) = refused(registry.fetch(&entry, 1024, &mut no_progress));
        assert_eq!(code, "E-REG-007", "{url}: {message}");
    }
}

#[test]
fn a_directory_without_an_index_is_e_reg_007() {
    let dir = tempfile::tempdir().unwrap();
    let (code, message) = refused(Registry::Dir(dir.path().join("none")).index());
    assert_eq!(code, "E-REG-007");
    assert!(message.contains("index.json"), "{message}");
    std::fs::write(
        dir.path().join(INDEX_FILE),
        "{\"format\": 2, \"artifacts\": {}}",
    )
    .unwrap();
    let (code, message) = refused(Registry::Dir(dir.path().to_path_buf()).index());
    assert_eq!(code, "E-REG-007");
    assert!(message.contains(&dir.path().join(INDEX_FILE).display().to_string()));
}

#[test]
fn malformed_indexes_name_what_is_wrong() {
    let sha = "a".repeat(64);
    let entry = |fields: &str| {
        format!("{{\"format\": 1, \"artifacts\": {{\"read-file\": {{\"0.1.0\": {{{fields}}}}}}}}}")
    };
    let good = format!("\"runtime\": \"tool\", \"url\": \"r.tar.gz\", \"sha256\": \"{sha}\"");
    assert!(Index::parse(&entry(&good)).is_ok());
    let upper = Index::parse(&entry(&good.replace(&sha, &sha.to_uppercase()))).unwrap();
    assert_eq!(upper.resolve("read-file", None).unwrap().sha256, sha);
    for (text, expected) in [
        ("".to_string(), "not JSON"),
        ("[]".to_string(), "top level"),
        ("{\"artifacts\": {}}".to_string(), "no `format`"),
        (
            "{\"format\": 2, \"artifacts\": {}}".to_string(),
            "format is 2",
        ),
        ("{\"format\": 1}".to_string(), "`artifacts`"),
        (
            "{\"format\": 1, \"artifacts\": {}, \"x\": 1}".to_string(),
            "`x`",
        ),
        (
            "{\"format\": 1, \"artifacts\": {\"../a\": {}}}".to_string(),
            "`../a`",
        ),
        (
            "{\"format\": 1, \"artifacts\": {\"a\": []}}".to_string(),
            "`a`",
        ),
        (
            format!("{{\"format\": 1, \"artifacts\": {{\"a\": {{\"1.0\": {{{good}}}}}}}}}"),
            "`a` version `1.0`",
        ),
        (
            entry(&good.replace(", \"url\": \"r.tar.gz\"", "")),
            "`url` is missing",
        ),
        (
            entry(&good.replace("\"tool\"", "\"capsule\"")),
            "runtime `capsule`",
        ),
        (entry(&good.replace(&sha, "abc")), "sha256 `abc`"),
        (entry(&format!("{good}, \"size\": -1")), "size `-1`"),
        (entry(&format!("{good}, \"extra\": 1")), "`extra`"),
        (
            entry(&good.replace("\"r.tar.gz\"", "\"\"")),
            "`url` is empty",
        ),
    ] {
        let error = Index::parse(&text).unwrap_err();
        assert_eq!(error.code(), "E-REG-007", "{text}");
        let message = error.to_string();
        assert!(message.contains(expected), "{text}: {message}");
        if text.contains("read-file") {
            assert!(message.contains("`read-file` version `0.1.0`"), "{message}");
        }
    }
}

// ---------------------------------------------------------------- HTTP registries

/// What the test server answers for a path.
#[derive(Clone)]
enum Reply {
    /// A status and a body with its `Content-Length`.
    Body(u16, Vec<u8>),
    /// A body of `total` bytes with no length, ended by closing; how much was written before
    /// the client went away is sent on the channel.
    Endless(u64, Arc<Mutex<mpsc::Sender<u64>>>),
    /// A `Content-Length` of this much, and a few bytes of it.
    Claims(u64),
    /// A redirect to this location.
    Redirect(String),
}

/// Serves `routes` on 127.0.0.1 until the test process ends; returns `http://127.0.0.1:port`.
fn serve(routes: HashMap<String, Reply>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes = Arc::new(routes);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let routes = Arc::clone(&routes);
            std::thread::spawn(move || answer(stream, &routes));
        }
    });
    base
}

fn answer(mut stream: TcpStream, routes: &HashMap<String, Reply>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
    let reply = routes
        .get(&path)
        .cloned()
        .unwrap_or(Reply::Body(404, b"not found".to_vec()));
    let head = |status: u16, extra: &str| {
        format!("HTTP/1.1 {status} X\r\nConnection: close\r\n{extra}\r\n")
    };
    match reply {
        Reply::Body(status, body) => {
            let _ = stream
                .write_all(head(status, &format!("Content-Length: {}\r\n", body.len())).as_bytes());
            let _ = stream.write_all(&body);
        }
        Reply::Claims(length) => {
            let _ =
                stream.write_all(head(200, &format!("Content-Length: {length}\r\n")).as_bytes());
            let _ = stream.write_all(&[0u8; 100]);
            std::thread::sleep(Duration::from_millis(200));
        }
        Reply::Redirect(location) => {
            let _ = stream.write_all(
                head(
                    302,
                    &format!("Location: {location}\r\nContent-Length: 0\r\n"),
                )
                .as_bytes(),
            );
        }
        Reply::Endless(total, done) => {
            let mut written = 0u64;
            if stream.write_all(head(200, "").as_bytes()).is_ok() {
                let chunk = vec![7u8; 64 * 1024];
                while written < total {
                    if stream.write_all(&chunk).is_err() {
                        break;
                    }
                    written += chunk.len() as u64;
                }
            }
            let _ = done.lock().unwrap().send(written);
        }
    }
    let _ = stream.flush();
}

/// One artifact version to list: name, version, its bytes, url, and the size to declare.
type Listing<'a> = (&'a str, &'a str, &'a [u8], &'a str, Option<u64>);

fn index_json(entries: &[Listing<'_>]) -> Vec<u8> {
    let mut artifacts = serde_json::Map::new();
    for (name, version, bytes, url, size) in entries {
        let mut entry = serde_json::json!({
            "runtime": "tool", "url": url, "sha256": sha256_hex(bytes)
        });
        if let Some(size) = size {
            entry["size"] = serde_json::json!(size);
        }
        artifacts
            .entry(name.to_string())
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .unwrap()
            .insert(version.to_string(), entry);
    }
    serde_json::to_vec(&serde_json::json!({"format": 1, "artifacts": artifacts})).unwrap()
}

#[test]
fn install_bytes_from_an_http_registry_on_loopback() {
    let bytes = archive(5, 300_000);
    let index = index_json(&[
        (
            "read-file",
            "0.1.0",
            &bytes,
            "read-file/read-file-0.1.0.tar.gz",
            Some(300_000),
        ),
        ("other", "1.0.0", b"elsewhere", "/files/other.tar.gz", None),
    ]);
    let base = serve(HashMap::from([
        ("/reg/index.json".to_string(), Reply::Body(200, index)),
        (
            "/reg/read-file/read-file-0.1.0.tar.gz".to_string(),
            Reply::Body(200, bytes.clone()),
        ),
        (
            "/files/other.tar.gz".to_string(),
            Reply::Body(200, b"elsewhere".to_vec()),
        ),
    ]));
    let registry = Registry::parse(&format!("{base}/reg"), Path::new("/unused")).unwrap();
    assert_eq!(registry.describe(), format!("{base}/reg/"));
    let index = registry.index().unwrap();
    let entry = index.resolve("read-file", Some("0.1.0")).unwrap();
    let mut calls = Vec::new();
    let fetched = registry
        .fetch(&entry, 1 << 20, &mut |done, total| {
            calls.push((done, total))
        })
        .unwrap();
    assert_eq!(fetched, bytes);
    assert!(calls.len() > 2, "progress as the bytes arrive: {calls:?}");
    assert_eq!(calls.last(), Some(&(300_000, Some(300_000))));
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
    // A url relative to the index's host root.
    let other = index.resolve("other", None).unwrap();
    assert_eq!(
        registry.fetch(&other, 1024, &mut no_progress).unwrap(),
        b"elsewhere"
    );
}

#[test]
fn http_errors_name_the_status_and_the_url() {
    let bytes = b"archive".to_vec();
    let index = index_json(&[("a", "0.1.0", &bytes, "missing.tar.gz", None)]);
    let base = serve(HashMap::from([
        ("/ok/index.json".to_string(), Reply::Body(200, index)),
        (
            "/broken/index.json".to_string(),
            Reply::Body(200, b"{\"format\": 1".to_vec()),
        ),
        ("/down/index.json".to_string(), Reply::Body(503, Vec::new())),
    ]));
    let parse = |path: &str| Registry::parse(&format!("{base}{path}"), Path::new(".")).unwrap();

    let (code, message) = refused(parse("/nothing-here/").index());
    assert_eq!(code, "E-REG-007");
    assert!(
        message.contains("404") && message.contains(&format!("{base}/nothing-here/index.json")),
        "{message}"
    );
    let (code, message) = refused(parse("/down").index());
    assert_eq!(code, "E-REG-007");
    assert!(message.contains("503"), "{message}");
    let (code, message) = refused(parse("/broken").index());
    assert_eq!(code, "E-REG-007");
    assert!(
        message.contains("malformed") && message.contains("/broken/index.json"),
        "{message}"
    );

    let registry = parse("/ok/");
    let entry = registry.index().unwrap().resolve("a", None).unwrap();
    let (code, message) = refused(registry.fetch(&entry, 1024, &mut no_progress));
    assert_eq!(code, "E-REG-007");
    assert!(
        message.contains("404") && message.contains("/ok/missing.tar.gz"),
        "{message}"
    );

    // Nobody listening.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let registry = Registry::parse(&format!("http://{address}/"), Path::new(".")).unwrap();
    let (code, _) = refused(registry.index());
    assert_eq!(code, "E-REG-007");
}

#[test]
fn http_bytes_that_differ_from_the_index_are_e_reg_004() {
    let listed = b"the published archive".to_vec();
    let index = index_json(&[("a", "0.1.0", &listed, "a.tar.gz", None)]);
    let base = serve(HashMap::from([
        ("/index.json".to_string(), Reply::Body(200, index)),
        (
            "/a.tar.gz".to_string(),
            Reply::Body(200, b"the tampered archive".to_vec()),
        ),
    ]));
    let registry = Registry::parse(&base, Path::new(".")).unwrap();
    let entry = registry.index().unwrap().resolve("a", None).unwrap();
    let (code, message) = refused(registry.fetch(&entry, 1024, &mut no_progress));
    assert_eq!(code, "E-REG-004");
    assert!(message.contains(&sha256_hex(&listed)), "{message}");
    assert!(
        message.contains(&sha256_hex(b"the tampered archive")),
        "{message}"
    );
}

#[test]
fn an_http_body_past_the_limit_is_cut_off_without_reading_it_all() {
    let (sent, finished) = mpsc::channel();
    let total = 256 * 1024 * 1024;
    let unsized_entry = |url: &str| IndexEntry {
        name: "big".into(),
        version: "1.0.0".into(),
        runtime: "tool".into(),
        url: url.into(),
        sha256: "0".repeat(64),
        size: None,
    };
    let base = serve(HashMap::from([
        (
            "/endless.tar.gz".to_string(),
            Reply::Endless(total, Arc::new(Mutex::new(sent))),
        ),
        (
            "/claims.tar.gz".to_string(),
            Reply::Claims(10 * 1024 * 1024),
        ),
    ]));
    let registry = Registry::parse(&base, Path::new(".")).unwrap();

    let mut most = 0;
    let (code, _) = refused(registry.fetch(
        &unsized_entry("endless.tar.gz"),
        100_000,
        &mut |done, _| most = most.max(done),
    ));
    assert_eq!(code, "E-REG-003");
    assert!(most <= 100_000);
    let written = finished.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(written < total, "the server wrote all {written} bytes");

    // A declared length over the limit is refused before the body.
    let started = std::time::Instant::now();
    let (code, message) =
        refused(registry.fetch(&unsized_entry("claims.tar.gz"), 100_000, &mut no_progress));
    assert_eq!(code, "E-REG-003");
    assert!(message.contains("10485760"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn redirects_keep_the_scheme() {
    let bytes = b"bytes".to_vec();
    let index = index_json(&[
        ("same", "0.1.0", &bytes, "moved.tar.gz", None),
        ("other", "0.1.0", &bytes, "to-https.tar.gz", None),
    ]);
    let base = serve(HashMap::from([
        ("/index.json".to_string(), Reply::Body(200, index)),
        (
            "/moved.tar.gz".to_string(),
            Reply::Redirect("/here.tar.gz".into()),
        ),
        ("/here.tar.gz".to_string(), Reply::Body(200, bytes.clone())),
        (
            "/to-https.tar.gz".to_string(),
            Reply::Redirect("https://127.0.0.1:9/x.tar.gz".into()),
        ),
    ]));
    let registry = Registry::parse(&base, Path::new(".")).unwrap();
    let index = registry.index().unwrap();
    let same = index.resolve("same", None).unwrap();
    assert_eq!(
        registry.fetch(&same, 1024, &mut no_progress).unwrap(),
        bytes
    );
    let other = index.resolve("other", None).unwrap();
    let (code, message) = refused(registry.fetch(&other, 1024, &mut no_progress));
    assert_eq!(code, "E-REG-007");
    assert!(message.contains("scheme"), "{message}");
}

#[test]
fn an_http_registrys_urls_are_http() {
    let registry = Registry::parse("http://127.0.0.1:9/", Path::new(".")).unwrap();
    let entry = IndexEntry {
        name: "a".into(),
        version: "0.1.0".into(),
        runtime: "tool".into(),
        url: "file:///etc/passwd".into(),
        sha256: "0".repeat(64),
        size: None,
    };
    let (code, message) = refused(registry.fetch(&entry, 1024, &mut no_progress));
    assert_eq!(code, "E-REG-007");
    assert!(message.contains("file"), "{message}");
}
