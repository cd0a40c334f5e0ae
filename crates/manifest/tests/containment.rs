//! The manifest keys a capsule asks for containment with: `capabilities.containment`,
//! `capabilities.resources`, `network.unix_sockets`, `filesystem.workdir_exec`,
//! `shell.interpreter_runtime`. Each parses to its typed value; each bad value is a coded error
//! at its line; and an unknown key anywhere under `capabilities` is an error (`E-MAN-033`),
//! never a warning that drops it.

use crate::common;

use common::*;
use murmur_manifest::capsule::{CapsuleManifest, Containment, RESOURCE_RANGES, Resources};
use murmur_manifest::{Loaded, Manifest, Severity};

/// A capsule that loads without a word; the tests add a `capabilities:` block to it.
const BASE: &str = "name: boxed\nversion: \"1.0.0\"\n";

fn capsule(loaded: &Loaded<Manifest>) -> CapsuleManifest {
    match &loaded.manifest {
        Some(Manifest::Capsule(capsule)) => capsule.clone(),
        _ => panic!("not a capsule: {:#?}", loaded.diagnostics),
    }
}

fn with(capabilities: &str) -> String {
    format!("{BASE}capabilities:\n{capabilities}")
}

#[test]
fn containment_parses_each_class_and_absent_is_none() {
    for (word, class) in [
        ("advisory", Containment::Advisory),
        ("scoped", Containment::Scoped),
        ("sealed", Containment::Sealed),
    ] {
        let loaded = load_text(&with(&format!("  containment: {word}\n")));
        assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
        assert_eq!(capsule(&loaded).capabilities.containment, Some(class));
        assert_eq!(class.as_str(), word);
    }
    for text in [BASE.to_string(), with("  containment:\n")] {
        let loaded = load_text(&text);
        assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
        assert_eq!(capsule(&loaded).capabilities.containment, None);
    }
}

#[test]
fn classes_are_ordered_and_the_stronger_wins() {
    use Containment::{Advisory, Scoped, Sealed};
    assert!(Advisory < Scoped && Scoped < Sealed);
    assert_eq!(Containment::DEFAULT, Scoped);
    assert_eq!(Containment::stronger(Advisory, Sealed), Sealed);
    assert_eq!(Containment::stronger(Sealed, Scoped), Sealed);
    assert_eq!(Containment::stronger(Advisory, Advisory), Advisory);
    // Neither named: the default. One named: that one, even `advisory`. Both: the stronger.
    assert_eq!(Containment::resolve(None, None), Scoped);
    assert_eq!(Containment::resolve(Some(Advisory), None), Advisory);
    assert_eq!(Containment::resolve(None, Some(Advisory)), Advisory);
    assert_eq!(Containment::resolve(Some(Sealed), Some(Advisory)), Sealed);
    assert_eq!(Containment::resolve(Some(Advisory), Some(Scoped)), Scoped);
}

#[test]
fn e_cap_012_an_unknown_class_is_refused_with_the_closest() {
    let text = with("  containment: seald\n");
    let loaded = load_text(&text);
    assert!(loaded.manifest.is_none());
    let d = only(&loaded, "E-CAP-012");
    assert_eq!(d.message, "unknown containment class `seald`");
    assert_at(&d, &text, "seald");
    assert_hint(&d, "advisory, scoped, sealed");
    assert_hint(&d, "did you mean `sealed`?");
    // Not a word at all: a type error at the same place.
    let text = with("  containment: 3\n");
    let d = only(&load_text(&text), "E-MAN-003");
    assert_at(&d, &text, "3");
}

#[test]
fn every_resource_key_parses_and_absent_keys_are_none() {
    let text = with(
        "  resources:\n    max_processes: 64\n    memory_bytes: 536870912\n    cpu_percent: 150\n    open_files: 256\n    file_size_bytes: 10485760\n    workdir_max_bytes: 104857600\n",
    );
    let loaded = load_text(&text);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    assert_eq!(
        capsule(&loaded).capabilities.resources,
        Resources {
            max_processes: Some(64),
            memory_bytes: Some(512 << 20),
            cpu_percent: Some(150),
            open_files: Some(256),
            file_size_bytes: Some(10 << 20),
            workdir_max_bytes: Some(100 << 20),
        }
    );
    let loaded = load_text(&with("  resources: { cpu_percent: 50 }\n"));
    let resources = capsule(&loaded).capabilities.resources;
    assert_eq!(resources.cpu_percent, Some(50));
    assert_eq!(resources.memory_bytes, None);
    assert_eq!(resources.max_processes, None);
    let loaded = load_text(&with("  resources:\n"));
    assert_eq!(
        capsule(&loaded).capabilities.resources,
        Resources::default()
    );
}

#[test]
fn each_resource_bound_is_taken_and_one_past_it_is_e_cap_013() {
    let cases: &[(&str, &str, bool)] = &[
        ("max_processes", "1", true),
        ("max_processes", "4294967295", true),
        ("max_processes", "0", false),
        ("max_processes", "4294967296", false),
        ("max_processes", "-1", false),
        ("memory_bytes", "1048576", true),
        ("memory_bytes", "1048575", false),
        ("memory_bytes", "2.5", false),
        ("cpu_percent", "1", true),
        ("cpu_percent", "102400", true),
        ("cpu_percent", "0", false),
        ("cpu_percent", "102401", false),
        ("open_files", "16", true),
        ("open_files", "1048576", true),
        ("open_files", "15", false),
        ("open_files", "1048577", false),
        ("file_size_bytes", "1", true),
        ("file_size_bytes", "0", false),
        // The largest whole number YAML gives (`i64::MAX`); past it YAML reads a float.
        ("workdir_max_bytes", "9223372036854775807", true),
        ("workdir_max_bytes", "18446744073709551616", false),
        ("workdir_max_bytes", "0", false),
        ("workdir_max_bytes", "-4096", false),
    ];
    for &(key, value, taken) in cases {
        let text = with(&format!("  resources:\n    {key}: {value}\n"));
        let loaded = load_text(&text);
        if taken {
            assert!(
                loaded.diagnostics.is_empty(),
                "{key}: {value}: {:#?}",
                loaded.diagnostics
            );
            let resources = capsule(&loaded).capabilities.resources;
            let kept = serde_json::to_value(&resources).unwrap()[key].to_string();
            assert_eq!(kept, value, "{key}");
            continue;
        }
        assert!(loaded.manifest.is_none(), "{key}: {value} loaded");
        let d = only(&loaded, "E-CAP-013");
        assert_eq!(d.severity(), Severity::Error);
        // A whole number past `i64::MAX` reaches the loader as a float, and is shown as one.
        let shown = value
            .parse::<f64>()
            .ok()
            .filter(|f| *f > 9.3e18)
            .map_or(value.to_string(), |f| f.to_string());
        assert!(
            d.message.starts_with(&format!(
                "`capabilities.resources.{key}` is {shown}; it must be a whole number"
            )),
            "{d}"
        );
        assert_at(&d, &text, &format!("{value}\n"));
        let range = RESOURCE_RANGES.iter().find(|r| r.key == key).unwrap();
        assert_hint(&d, &format!("{}", range.least));
        assert_hint(&d, "remove it to take the runtime's default");
    }
}

#[test]
fn the_resource_ranges_are_the_documented_ones() {
    let ranges: Vec<(&str, u64, u64)> = RESOURCE_RANGES
        .iter()
        .map(|r| (r.key, r.least, r.most))
        .collect();
    assert_eq!(
        ranges,
        [
            ("max_processes", 1, u64::from(u32::MAX)),
            ("memory_bytes", 1 << 20, u64::MAX),
            ("cpu_percent", 1, 102_400),
            ("open_files", 16, 1_048_576),
            ("file_size_bytes", 1, u64::MAX),
            ("workdir_max_bytes", 1, u64::MAX),
        ]
    );
}

#[test]
fn a_resource_of_the_wrong_type_is_e_man_003_at_its_line() {
    let text = with("  resources:\n    memory_bytes: \"512MiB\"\n");
    let loaded = load_text(&text);
    let d = only(&loaded, "E-MAN-003");
    assert_at(&d, &text, "\"512MiB\"");
    assert!(loaded.manifest.is_none());
}

#[test]
fn unix_sockets_and_workdir_exec_are_off_unless_set() {
    let loaded = load_text(BASE);
    let c = capsule(&loaded).capabilities;
    assert!(!c.network.unix_sockets);
    assert!(!c.filesystem.workdir_exec);
    let loaded = load_text(&with(
        "  network: { allow: [ api.example.com ], unix_sockets: true }\n  filesystem: { workdir_exec: true }\n",
    ));
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let c = capsule(&loaded).capabilities;
    assert!(c.network.unix_sockets);
    assert!(c.filesystem.workdir_exec);
    assert_eq!(c.network.allow.len(), 1);
    let text = with("  network: { unix_sockets: yes please }\n");
    let d = only(&load_text(&text), "E-MAN-003");
    assert_at(&d, &text, "yes please");
    assert_hint(&d, "`true` or `false`");
}

#[test]
fn interpreter_runtime_resolves_against_the_manifest_directory() {
    let text = with("  shell:\n    allow: [ python3 ]\n    interpreter_runtime: [ ./py, /usr ]\n");
    let written = write(&text);
    std::fs::create_dir(written.dir.path().join("py")).unwrap();
    let loaded = written.load();
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
    let shell = capsule(&loaded).capabilities.shell;
    assert_eq!(
        shell.interpreter_runtime[0].raw,
        std::path::Path::new("./py")
    );
    assert_eq!(
        shell.interpreter_runtime_resolved(),
        [written.dir.path().join("py"), "/usr".into()]
    );
}

#[test]
fn e_cap_014_a_missing_or_plain_file_interpreter_runtime_is_refused_at_its_line() {
    let text =
        with("  shell:\n    allow: [ python3 ]\n    interpreter_runtime: [ ./gone, ./file ]\n");
    let written = write(&text);
    written.add("file", "not a directory");
    let loaded = written.load();
    assert!(loaded.manifest.is_none());
    assert_eq!(codes(&loaded), ["E-CAP-014", "E-CAP-014"]);
    let (gone, file) = (&loaded.diagnostics[0], &loaded.diagnostics[1]);
    assert!(gone.message.contains("`./gone` does not exist"), "{gone}");
    assert!(
        file.message.contains("`./file` is not a directory"),
        "{file}"
    );
    assert_at(gone, &text, "./gone");
    assert_at(file, &text, "./file");
    assert_hint(gone, "relative to the manifest's directory");
}

#[test]
fn e_man_033_a_misspelt_key_under_capabilities_is_an_error_suggesting_the_key() {
    let text = with("  resouces:\n    max_processes: 64\n");
    let loaded = load_text(&text);
    assert!(
        loaded.manifest.is_none(),
        "an unknown capabilities key stops the load"
    );
    let d = only(&loaded, "E-MAN-033");
    assert_eq!(d.severity(), Severity::Error);
    assert!(
        d.message
            .starts_with("unknown key `resouces` in `capabilities`"),
        "{d}"
    );
    assert_at(&d, &text, "resouces");
    assert_hint(&d, "did you mean `resources`?");
    assert!(codes(&loaded).iter().all(|c| *c != "W-MAN-013"));
}

#[test]
fn e_man_033_an_unknown_key_under_capabilities_shell_is_an_error() {
    let text = with("  shell:\n    allow: [ git ]\n    seccomp: off\n");
    let loaded = load_text(&text);
    assert!(loaded.manifest.is_none());
    let d = only(&loaded, "E-MAN-033");
    assert!(
        d.message
            .starts_with("unknown key `seccomp` in `capabilities.shell`"),
        "{d}"
    );
    assert_at(&d, &text, "seccomp");
    // No close key: the hint lists the known ones.
    assert_hint(&d, "allow, interpreter_runtime");
    // Deeper, and in every part of `capabilities`.
    for (block, key) in [
        ("  resources: { max_procs: 3 }\n", "max_procs"),
        ("  network: { allow: [], udp: true }\n", "udp"),
        ("  filesystem: { read_write: [ /tmp ] }\n", "read_write"),
        ("  limits: { cpu_seconds: 3 }\n", "cpu_seconds"),
        ("  env: { deny: [ HOME ] }\n", "deny"),
        ("  sandbox: none\n", "sandbox"),
    ] {
        let text = with(block);
        let loaded = load_text(&text);
        let d = only(&loaded, "E-MAN-033");
        assert_at(&d, &text, key);
        assert!(d.hint.is_some(), "{d}");
        assert!(loaded.manifest.is_none(), "{block}");
    }
}

#[test]
fn e_man_033_an_artifact_entrys_capabilities_are_held_to_the_same_rule() {
    // An MCP server's own `capabilities.network` takes `allow` alone: the capsule-wide switches
    // are not narrowed per entry, so naming one there is refused, not dropped.
    for (capabilities, key) in [
        (
            "{ network: { allow: [], unix_sockets: true } }",
            "unix_sockets",
        ),
        ("{ containment: sealed }", "containment"),
        ("{ filesystem: { scope: read, mode: x } }", "mode"),
    ] {
        let text = format!(
            "{BASE}artifacts:\n  - {{ name: notes, runtime: mcp, server: {{ command: notes-server }}, capabilities: {capabilities} }}\n"
        );
        let loaded = load_text(&text);
        assert!(loaded.manifest.is_none(), "{capabilities}");
        let d = only(&loaded, "E-MAN-033");
        assert_at(&d, &text, key);
        assert!(d.message.contains("in `artifacts[0].capabilities"), "{d}");
    }
    // A misspelt `capabilities` on an entry is refused too, suggesting it.
    let text = format!(
        "{BASE}artifacts:\n  - {{ name: t, version: \"0.1.0\", runtime: tool, capabilites: {{ network: {{ allow: [] }} }} }}\n"
    );
    let d = only(&load_text(&text), "E-MAN-033");
    assert_at(&d, &text, "capabilites");
    assert_hint(&d, "did you mean `capabilities`?");
}

#[test]
fn e_man_033_a_misspelt_top_level_capabilities_is_an_error_and_other_keys_stay_warnings() {
    let text =
        format!("{BASE}capabilites:\n  containment: sealed\ncolour: blue\ntrace: {{ zzz: 1 }}\n");
    let loaded = load_text(&text);
    assert!(loaded.manifest.is_none());
    let d = only(&loaded, "E-MAN-033");
    assert_at(&d, &text, "capabilites");
    assert_hint(&d, "did you mean `capabilities`?");
    let warned: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == "W-MAN-013")
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        warned,
        [
            "unknown key `colour` at the top level",
            "unknown key `zzz` in `trace`"
        ]
    );
    // Without the misspelling, the same warnings alone do not stop the load.
    let text = format!("{BASE}colour: blue\ntrace: {{ zzz: 1 }}\n");
    let loaded = load_text(&text);
    assert_eq!(codes(&loaded), ["W-MAN-013", "W-MAN-013"]);
    assert!(loaded.manifest.is_some());
}

#[test]
fn many_unknown_capabilities_keys_are_each_an_error_up_to_the_cap_beside_the_warnings() {
    let mut text = format!("{BASE}trace:\n");
    for i in 0..150 {
        text.push_str(&format!("  w{i}: 1\n"));
    }
    text.push_str("capabilities:\n");
    for i in 0..150 {
        text.push_str(&format!("  e{i}: 1\n"));
    }
    let loaded = load_text(&text);
    assert!(loaded.manifest.is_none());
    let of = |code: &str| -> Vec<&murmur_manifest::Diagnostic> {
        loaded
            .diagnostics
            .iter()
            .filter(|d| d.code == code)
            .collect()
    };
    let (errors, warnings) = (of("E-MAN-033"), of("W-MAN-013"));
    assert_eq!((errors.len(), warnings.len()), (101, 101));
    assert!(
        errors[0]
            .message
            .starts_with("unknown key `e0` in `capabilities`"),
        "{}",
        errors[0]
    );
    assert_at(errors[0], &text, "e0:");
    assert_eq!(
        errors[100].message,
        "50 more unknown keys about capabilities, from `capabilities.e100` on, are not listed one by one"
    );
    assert_at(errors[100], &text, "e100:");
    assert!(errors.iter().all(|d| d.hint.is_some()));
    assert_eq!(
        warnings[100].message,
        "50 more unknown keys, from `trace.w100` on, are not listed one by one"
    );
}
