//! The WIT tree parses as a whole, every package carries a version, and each world imports and
//! exports exactly what `wit/worlds.wit` promises. The shapes fixed for 0.1.0 are
//! checked field by field, so a change to them cannot slip in unversioned.

use std::collections::BTreeSet;
use std::path::Path;

use wit_parser::{InterfaceId, Resolve, Type, TypeDefKind, TypeOwner, WorldItem, WorldKey};

fn resolve() -> Resolve {
    let mut resolve = Resolve::default();
    resolve
        .push_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit"))
        .expect("wit/ parses");
    resolve
}

/// The interfaces whose types an interface of `items` `use`s.
fn type_sources<'a>(
    resolve: &Resolve,
    items: impl IntoIterator<Item = (&'a WorldKey, &'a WorldItem)>,
) -> BTreeSet<InterfaceId> {
    let mut sources = BTreeSet::new();
    for (_, item) in items {
        let WorldItem::Interface { id, .. } = item else {
            continue;
        };
        for type_id in resolve.interfaces[*id].types.values() {
            if let TypeDefKind::Type(Type::Id(used)) = &resolve.types[*type_id].kind
                && let TypeOwner::Interface(owner) = resolve.types[*used].owner
                && owner != *id
            {
                sources.insert(owner);
            }
        }
    }
    sources
}

/// `murmur:pkg/iface` names of a world's imports or exports that carry functions. An
/// interface pulled in only because another one `use`s its types (`murmur:tool/run` under
/// `tool-registry/invoke`, `murmur:conversation/types` under the hook imports) is left out: a
/// component imports it for the types alone.
fn interfaces<'a>(
    resolve: &Resolve,
    items: impl IntoIterator<Item = (&'a WorldKey, &'a WorldItem)> + Clone,
) -> BTreeSet<String> {
    let used_for_types = type_sources(resolve, items.clone());
    items
        .into_iter()
        .filter_map(|(_, item)| match item {
            WorldItem::Interface { id, .. } => {
                let iface = &resolve.interfaces[*id];
                if iface.functions.is_empty() || used_for_types.contains(id) {
                    return None;
                }
                let package = &resolve.packages[iface.package.unwrap()].name;
                Some(format!(
                    "{}:{}/{}",
                    package.namespace,
                    package.name,
                    iface.name.as_deref().unwrap()
                ))
            }
            _ => None,
        })
        .collect()
}

fn world_interfaces(resolve: &Resolve, name: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let package = resolve
        .packages
        .iter()
        .find(|(_, p)| p.name.namespace == "murmur" && p.name.name == "worlds")
        .map(|(id, _)| id)
        .expect("package murmur:worlds");
    let world = resolve.select_world(&[package], Some(name)).expect(name);
    let world = &resolve.worlds[world];
    (
        interfaces(resolve, &world.imports),
        interfaces(resolve, &world.exports),
    )
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_package_is_versioned() {
    let resolve = resolve();
    let mut names = BTreeSet::new();
    for (_, package) in resolve.packages.iter() {
        assert!(
            package.name.version.is_some(),
            "{} has no version",
            package.name
        );
        if package.name.namespace == "murmur" {
            names.insert(package.name.name.clone());
        }
    }
    assert_eq!(
        names,
        set(&[
            "artifact-manager",
            "capsule",
            "conversation",
            "hook",
            "message",
            "runtime",
            "shell",
            "task",
            "task-io",
            "text",
            "tool",
            "tool-registry",
            "worlds",
        ])
    );
}

#[test]
fn each_world_matches_the_seed_table() {
    let resolve = resolve();
    let table: [(&str, &[&str], &[&str]); 5] = [
        (
            "capsule",
            &["murmur:tool-registry/invoke"],
            &["murmur:capsule/run"],
        ),
        (
            "tool",
            &["murmur:task/task", "murmur:text/chunks"],
            &["murmur:tool/run"],
        ),
        ("driver", &["murmur:text/chunks"], &["murmur:tool/run"]),
        (
            "hook",
            &[
                "murmur:runtime/inference",
                "murmur:runtime/tokens",
                "murmur:task-io/read",
                "murmur:conversation/read",
            ],
            &["murmur:hook/lifecycle"],
        ),
        (
            "runtime-host",
            &[
                "murmur:artifact-manager/manage",
                "murmur:shell/execute",
                "murmur:tool-registry/invoke",
                "murmur:message/send",
            ],
            &[],
        ),
    ];
    // Beside the contract's own imports, the tool, driver and hook worlds import the WASI
    // interfaces such a component may use (those only `use`d for their types, such as the
    // clocks, are left out here as above); the others import no WASI.
    let wasi_of = |world: &str| -> BTreeSet<String> {
        match world {
            "tool" | "driver" => set(&[
                "wasi:cli/environment",
                "wasi:filesystem/preopens",
                "wasi:http/outgoing-handler",
                "wasi:random/random",
            ]),
            "hook" => set(&[
                "wasi:cli/environment",
                "wasi:clocks/wall-clock",
                "wasi:http/outgoing-handler",
                "wasi:random/random",
            ]),
            _ => BTreeSet::new(),
        }
    };
    for (world, imports, exports) in table {
        let (found_imports, found_exports) = world_interfaces(&resolve, world);
        let (murmur, wasi): (BTreeSet<String>, BTreeSet<String>) = found_imports
            .into_iter()
            .partition(|name| name.starts_with("murmur:"));
        assert_eq!(murmur, set(imports), "imports of world {world}");
        assert_eq!(wasi, wasi_of(world), "WASI imports of world {world}");
        assert_eq!(found_exports, set(exports), "exports of world {world}");
    }
}

fn interface<'a>(resolve: &'a Resolve, package: &str, name: &str) -> &'a wit_parser::Interface {
    resolve
        .interfaces
        .iter()
        .map(|(_, iface)| iface)
        .find(|iface| {
            iface.name.as_deref() == Some(name)
                && iface
                    .package
                    .is_some_and(|p| resolve.packages[p].name.name == package)
        })
        .unwrap_or_else(|| panic!("interface {package}/{name}"))
}

/// Field names of a record, or case names of a variant/enum, declared in `iface`.
fn members(resolve: &Resolve, iface: &wit_parser::Interface, type_name: &str) -> Vec<String> {
    let id = iface.types[type_name];
    match &resolve.types[id].kind {
        TypeDefKind::Record(record) => record.fields.iter().map(|f| f.name.clone()).collect(),
        TypeDefKind::Variant(variant) => variant.cases.iter().map(|c| c.name.clone()).collect(),
        TypeDefKind::Enum(enum_) => enum_.cases.iter().map(|c| c.name.clone()).collect(),
        TypeDefKind::Type(Type::Id(other)) => match &resolve.types[*other].kind {
            TypeDefKind::Record(record) => record.fields.iter().map(|f| f.name.clone()).collect(),
            TypeDefKind::Enum(enum_) => enum_.cases.iter().map(|c| c.name.clone()).collect(),
            kind => panic!("{type_name} is {kind:?}"),
        },
        kind => panic!("{type_name} is {kind:?}"),
    }
}

fn has_all(found: Vec<String>, wanted: &[&str], what: &str) {
    for name in wanted {
        assert!(
            found.iter().any(|f| f == name),
            "{what} lacks `{name}`: {found:?}"
        );
    }
}

#[test]
fn tool_run_keeps_its_0_1_0_shape() {
    let resolve = resolve();
    let run = interface(&resolve, "tool", "run");
    assert_eq!(
        members(&resolve, run, "status"),
        ["passed", "failed", "error"]
    );
    assert_eq!(members(&resolve, run, "tool-input"), ["data", "log-path"]);
    assert_eq!(
        members(&resolve, run, "tool-result"),
        [
            "status",
            "summary",
            "data",
            "data-path",
            "truncated",
            "metadata"
        ]
    );
    let functions: Vec<&String> = run.functions.keys().collect();
    assert_eq!(functions, ["run"]);
}

#[test]
fn small_guest_packages_keep_their_shapes() {
    let resolve = resolve();
    let fns = |package: &str, name: &str| -> Vec<String> {
        interface(&resolve, package, name)
            .functions
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(fns("task", "task"), ["request-input"]);
    assert_eq!(fns("text", "chunks"), ["emit-chunk", "emit-thinking-chunk"]);
    assert_eq!(fns("tool-registry", "invoke"), ["invoke"]);
    assert_eq!(fns("capsule", "run"), ["run"]);
    has_all(
        fns("artifact-manager", "manage"),
        &[
            "list",
            "describe",
            "diagnostics",
            "pull",
            "search",
            "remove",
        ],
        "artifact-manager/manage",
    );
}

#[test]
fn hook_and_runtime_packages_carry_the_seed_records_and_arms() {
    let resolve = resolve();
    let lifecycle = interface(&resolve, "hook", "lifecycle");
    has_all(
        members(&resolve, lifecycle, "hook-output"),
        &[
            "none",
            "deny",
            "seed-context",
            "reopen-task",
            "replace-context",
            "write-manifests",
            "artifact",
        ],
        "hook-output",
    );
    has_all(
        members(&resolve, lifecycle, "task-start-event"),
        &["context-window", "budget-tokens", "prior-tokens"],
        "task-start-event",
    );
    has_all(
        members(&resolve, lifecycle, "shell-event"),
        &["binary", "command", "argv", "script", "recipe", "outcome"],
        "shell-event",
    );
    has_all(
        members(&resolve, lifecycle, "tool-call-event"),
        &["outcome"],
        "tool-call-event",
    );
    has_all(
        members(&resolve, lifecycle, "compaction-event"),
        &["messages", "model", "system-prompt"],
        "compaction-event",
    );
    let handlers: Vec<String> = lifecycle.functions.keys().cloned().collect();
    assert_eq!(
        handlers,
        [
            "on-stage",
            "on-session-start",
            "on-task-start",
            "on-inference",
            "on-tool-call",
            "on-shell",
            "on-compaction",
            "on-task-end",
            "on-session-end",
        ]
    );
    let types = interface(&resolve, "conversation", "types");
    has_all(
        members(&resolve, types, "message"),
        &["id", "role", "content", "source-id"],
        "message",
    );
    let inference = interface(&resolve, "runtime", "inference");
    assert!(inference.functions.contains_key("run-inference"));
    let tokens = interface(&resolve, "runtime", "tokens");
    assert!(tokens.functions.contains_key("count-tokens"));
    let task_io = interface(&resolve, "task-io", "read");
    has_all(
        task_io.functions.keys().cloned().collect(),
        &["task-input", "task-result"],
        "task-io/read",
    );
    let conversation = interface(&resolve, "conversation", "read");
    assert!(conversation.functions.contains_key("history"));
    let send = interface(&resolve, "message", "send");
    has_all(
        members(&resolve, send, "message"),
        &["message-id", "context-id", "text"],
        "message/send.message",
    );
    has_all(
        members(&resolve, send, "task-result"),
        &["task-id", "context-id", "state"],
        "message/send.task-result",
    );
}
