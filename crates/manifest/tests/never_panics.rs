//! Whatever text it is given, the loader returns diagnostics rather than panicking, and its
//! result keeps its promises: a manifest exactly when there is no error, every code from the
//! table, every error with a hint, every position inside the text.

use std::path::Path;

use murmur_manifest::{CODES, Loaded, Manifest, load_str};
use proptest::prelude::*;

const FILE: &str = "/nonexistent-murmur-proptest/murmur.yaml";

fn check(text: &str) -> Loaded<Manifest> {
    let loaded = load_str(text, Path::new(FILE), &|name| {
        (name == "SET").then(|| "value".to_string())
    });
    assert_eq!(loaded.manifest.is_some(), !loaded.has_errors());
    let lines = text.lines().count() + 1;
    for d in &loaded.diagnostics {
        assert!(
            CODES.iter().any(|c| c.code == d.code),
            "unlisted code {}",
            d.code
        );
        if d.is_error() {
            assert!(d.hint.is_some(), "error without a hint: {d}");
        }
        assert_eq!(d.file.as_deref(), Some(Path::new(FILE)));
        if let Some(line) = d.line {
            assert!(
                (1..=lines).contains(&line),
                "line {line} outside the text: {d}"
            );
            assert!(d.column.is_some_and(|c| c >= 1));
        }
        let _ = d.to_string();
    }
    loaded
}

/// Words a manifest holds, so random documents reach deep into the types.
const KEYS: &[&str] = &[
    "name",
    "version",
    "runtime",
    "description",
    "component",
    "build",
    "cargo",
    "package",
    "command",
    "artifacts",
    "path",
    "gateway",
    "endpoint",
    "api_key",
    "config",
    "capabilities",
    "network",
    "allow",
    "filesystem",
    "read_only",
    "shell",
    "env",
    "limits",
    "memory_bytes",
    "deadline_seconds",
    "containment",
    "resources",
    "max_processes",
    "cpu_percent",
    "open_files",
    "file_size_bytes",
    "workdir_max_bytes",
    "unix_sockets",
    "workdir_exec",
    "interpreter_runtime",
    "inference",
    "transport",
    "model",
    "driver",
    "artifact",
    "alternates",
    "system_prompt",
    "system_prompt_file",
    "max_turns",
    "max_tokens",
    "max_session_tokens",
    "compaction",
    "threshold",
    "context",
    "seed_budget",
    "lifecycle",
    "task_acceptance",
    "after_task",
    "conversation",
    "input_timeout_secs",
    "max_task_reopens",
    "control",
    "settings",
    "secrets",
    "agent_settings",
    "trace",
    "include_tool_output",
    "observability",
    "otel_endpoint",
    "input_schema",
    "upstream_auth",
    "header",
    "value",
    "binding",
    "execution_mode",
    "commit_policy",
    "skill",
    "peers",
    "url",
    "bearer",
    "<<",
    "1",
    "true",
];

const SCALARS: &[&str] = &[
    "1",
    "0",
    "-5",
    "1.0",
    "1.10",
    "0.9",
    "1e400",
    ".nan",
    ".inf",
    "true",
    "false",
    "null",
    "~",
    "\"1.0.0\"",
    "\"\"",
    "' '",
    "${SET}",
    "${UNSET}",
    "\"${\"",
    "$${X}",
    "http",
    "process",
    "tool",
    "driver",
    "hook",
    "skill",
    "capsule",
    "on-stage",
    "on-task-end",
    "reopen-task",
    "deny",
    "async",
    "blocking",
    "https://api.anthropic.com",
    "\"*\"",
    "\"ftp://x\"",
    "api.example.com:0",
    "[::1]:80",
    "MURMUR_X",
    "inference.driver",
    "./docs",
    "/",
    "[]",
    "{}",
    "&a x",
    "*a",
    "!!int x",
    "!custom y",
    "|\n  block",
    "\"\\u0000\"",
    "primary",
    "driver-anthropic",
    "ask-researcher",
    "researcher",
    "\"http://127.0.0.1:9000\"",
    "advisory",
    "scoped",
    "sealed",
    "1048576",
    "102400",
    "4294967296",
    "18446744073709551616",
];

#[derive(Debug, Clone)]
enum Node {
    Scalar(String),
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z_]{1,8}",
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SCALARS).prop_map(str::to_string),
        1 => "[a-zA-Z0-9 ._:/$-]{0,12}",
    ]
}

fn node() -> impl Strategy<Value = Node> {
    scalar()
        .prop_map(Node::Scalar)
        .prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec((key(), inner.clone()), 0..6).prop_map(Node::Map),
                prop::collection::vec(inner, 0..4).prop_map(Node::Seq),
            ]
        })
}

fn render(node: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match node {
        Node::Scalar(s) => out.push_str(&format!("{pad}{s}\n")),
        Node::Map(entries) => {
            for (k, v) in entries {
                match v {
                    Node::Scalar(s) => out.push_str(&format!("{pad}{k}: {s}\n")),
                    Node::Map(m) if m.is_empty() => out.push_str(&format!("{pad}{k}: {{}}\n")),
                    Node::Seq(s) if s.is_empty() => out.push_str(&format!("{pad}{k}: []\n")),
                    _ => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        render(v, indent + 2, out);
                    }
                }
            }
        }
        Node::Seq(items) => {
            for item in items {
                match item {
                    Node::Scalar(s) => out.push_str(&format!("{pad}- {s}\n")),
                    _ => {
                        out.push_str(&format!("{pad}-\n"));
                        render(item, indent + 2, out);
                    }
                }
            }
        }
    }
}

fn document() -> impl Strategy<Value = String> {
    prop::collection::vec((key(), node()), 0..10).prop_map(|entries| {
        let mut out = String::new();
        render(&Node::Map(entries), 0, &mut out);
        out
    })
}

const SPEC_EXAMPLE: &str = include_str!("fixtures/spec-example/murmur.yaml");

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn yaml_flavoured_text_never_panics(
        pieces in prop::collection::vec(
            prop_oneof![
                prop::sample::select(&[
                    ":", ": ", "- ", "\n", "  ", "{", "}", "[", "]", ",", "&a ", "*a", "!!str ",
                    "\"", "'", "#", "---\n", "? ", "|", ">", "\t", "%YAML 1.2\n", "...\n",
                ][..]).prop_map(str::to_string),
                prop::sample::select(KEYS).prop_map(str::to_string),
                prop::sample::select(SCALARS).prop_map(str::to_string),
            ],
            0..80,
        )
    ) {
        check(&pieces.concat());
    }

    #[test]
    fn generated_documents_never_panic(text in document()) {
        check(&text);
    }

    #[test]
    fn mutations_of_the_spec_example_never_panic(
        line in 0usize..40,
        replacement in prop_oneof![
            scalar().prop_map(|s| format!("  {s}")),
            (key(), scalar()).prop_map(|(k, s)| format!("{k}: {s}")),
            (key(), scalar()).prop_map(|(k, s)| format!("  {k}: {s}")),
            Just(String::new()),
        ],
    ) {
        let mut lines: Vec<String> = SPEC_EXAMPLE.lines().map(str::to_string).collect();
        let at = line % lines.len();
        lines[at] = replacement;
        check(&lines.join("\n"));
    }
}

/// A manifest holding `keys` (none known to any type) with `value` each, in the mapping
/// `spot` names (0 the top level, 1 an artifact entry, 2 `trace`), block or flow style.
fn unknown_keys_manifest(keys: &[String], value: &str, spot: usize, flow: bool) -> String {
    let head = "name: x, version: \"1.0.0\"";
    let entry = "name: d, version: \"1.0.0\", runtime: driver";
    if flow {
        let pairs: String = keys.iter().map(|k| format!(", {k}: {value}")).collect();
        return match spot {
            0 => format!("{{{head}{pairs}}}\n"),
            1 => format!("{{{head}, artifacts: [{{{entry}{pairs}}}]}}\n"),
            _ => format!("{{{head}, trace: {{include_tool_output: true{pairs}}}}}\n"),
        };
    }
    let (opening, indent) = match spot {
        0 => ("", ""),
        1 => (
            "artifacts:\n  - name: d\n    version: \"1.0.0\"\n    runtime: driver\n",
            "    ",
        ),
        _ => ("trace:\n  include_tool_output: true\n", "  "),
    };
    let lines: String = keys
        .iter()
        .map(|k| format!("{indent}{k}: {value}\n"))
        .collect();
    format!("name: x\nversion: \"1.0.0\"\n{opening}{lines}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Unknown keys by the hundred, anywhere, never panic, and are warned about one by one up
    /// to 100, then in one more warning.
    #[test]
    fn manifests_of_many_unknown_keys_never_panic(
        keys in prop::collection::btree_set("zz[a-zA-Z0-9_ä-]{0,10}", 0..400),
        value in prop::sample::select(&["1", "x", "1.50", "true", "", "[1]", "{ a: 1 }", "é"][..]),
        spot in 0usize..3,
        flow in any::<bool>(),
    ) {
        let keys: Vec<String> = keys.into_iter().collect();
        let text = unknown_keys_manifest(&keys, value, spot, flow);
        let loaded = check(&text);
        let warned = loaded.diagnostics.iter().filter(|d| d.code == "W-MAN-013").count();
        let expected = keys.len().min(100) + usize::from(keys.len() > 100);
        prop_assert_eq!(warned, expected, "{:#?}", loaded.diagnostics);
    }
}

#[test]
fn errors_carry_codes_on_a_few_known_bad_inputs() {
    for text in [
        "",
        "[",
        "a: *nope",
        "- x",
        "name: [",
        "\u{feff}\u{feff}a: b",
        "a: !!int x",
    ] {
        let loaded = check(text);
        assert!(loaded.has_errors(), "`{text}` loaded");
    }
}

/// A value for a containment key: in range, at a bound, past one, of another type, or junk.
fn containment_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &[
                "0",
                "1",
                "15",
                "16",
                "1048575",
                "1048576",
                "1048577",
                "102400",
                "102401",
                "4294967295",
                "4294967296",
                "18446744073709551615",
                "18446744073709551616",
                "-1",
                "1.5",
                "1e3",
                "true",
                "\"64\"",
                "sealed",
                "scoped",
                "advisory",
                "seald",
                "",
                "[]",
                "{}",
                "null",
                "/usr/lib",
                "./nope",
                "[ /usr, ./x ]",
            ][..]
        )
        .prop_map(str::to_string),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

/// The keys of `capabilities` and below that ask for containment, by their parent.
const CONTAINMENT_KEYS: &[(&str, &str)] = &[
    ("", "containment"),
    ("resources", "max_processes"),
    ("resources", "memory_bytes"),
    ("resources", "cpu_percent"),
    ("resources", "open_files"),
    ("resources", "file_size_bytes"),
    ("resources", "workdir_max_bytes"),
    ("resources", "resouces"),
    ("network", "unix_sockets"),
    ("filesystem", "workdir_exec"),
    ("shell", "interpreter_runtime"),
    ("shell", "interpreter"),
    ("", "resouces"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `capabilities` holding any mix of the containment keys, with any values, never panics;
    /// every problem is an error with a code and a hint (checked by `check`), and a manifest
    /// loads only when each value it kept is within its range.
    #[test]
    fn containment_keys_with_any_values_never_panic(
        picks in prop::collection::vec((0..CONTAINMENT_KEYS.len(), containment_value()), 0..8),
    ) {
        let mut by_parent: std::collections::BTreeMap<&str, Vec<(&str, String)>> = Default::default();
        for (i, value) in picks {
            let (parent, key) = CONTAINMENT_KEYS[i];
            let keys = by_parent.entry(parent).or_default();
            if !keys.iter().any(|(k, _)| *k == key) {
                keys.push((key, value));
            }
        }
        let mut text = String::from("name: x\nversion: \"1.0.0\"\ncapabilities:\n");
        for (parent, keys) in &by_parent {
            let indent = if parent.is_empty() { "  " } else { "    " };
            if !parent.is_empty() {
                text.push_str(&format!("  {parent}:\n"));
            }
            for (key, value) in keys {
                text.push_str(&format!("{indent}{key}: {value}\n"));
            }
        }
        let loaded = check(&text);
        if let Some(Manifest::Capsule(capsule)) = &loaded.manifest {
            let r = &capsule.capabilities.resources;
            prop_assert!(r.max_processes.is_none_or(|n| n >= 1));
            prop_assert!(r.memory_bytes.is_none_or(|n| n >= 1 << 20));
            prop_assert!(r.cpu_percent.is_none_or(|n| (1..=102_400).contains(&n)));
            prop_assert!(r.open_files.is_none_or(|n| (16..=1 << 20).contains(&n)));
            prop_assert!(r.file_size_bytes.is_none_or(|n| n >= 1));
            prop_assert!(r.workdir_max_bytes.is_none_or(|n| n >= 1));
            prop_assert!(!text.contains("resouces") && !text.contains("interpreter:"), "{}", text);
        }
    }
}
