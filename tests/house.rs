//! The shape of the source tree, checked: no module of any crate in the workspace imports a
//! module that imports it back, directly or through others; and the crates' dependencies point
//! one way, down the layers of [`LAYERS`].
//!
//! How a reference is counted: every `use` and every path in code that names an item of the
//! same crate (through `crate::`, `super::`, `self::` or a child module's name) is an edge from
//! the file that writes it to the file that defines the item. A public re-export (`pub use`) is
//! a name, not a dependency: a path through it is followed to the module that defines the item,
//! and the re-export itself adds no edge. A `mod` declaration is not an import. Files are the
//! unit; code under `#[cfg(test)]` is left out (tests sit above what they test).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module of a crate: the file that holds it and what it names.
#[derive(Default)]
struct Module {
    file: PathBuf,
    /// Items defined here (types, functions, constants, traits, macros, statics).
    items: BTreeSet<String>,
    /// Child modules by name.
    children: BTreeSet<String>,
    /// Names brought in by `use`, with the path they stand for (relative to this module).
    aliases: BTreeMap<String, Vec<String>>,
    /// Modules glob-imported by `pub use path::*`.
    globs: Vec<Vec<String>>,
}

/// A path as written in a file, and the module it is written in.
type Reference = (Vec<String>, Vec<String>);

/// One crate's modules keyed by their absolute path (`[]` is the crate root).
struct Crate {
    modules: BTreeMap<Vec<String>, Module>,
    /// For each file, the references it writes: (module it is written in, path as written).
    references: BTreeMap<PathBuf, Vec<Reference>>,
}

fn module_file(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Some((flat, dir.join(name)));
    }
    let nested = dir.join(name).join("mod.rs");
    nested.is_file().then(|| (nested, dir.join(name)))
}

impl Crate {
    fn load(root: &Path) -> Crate {
        let mut krate = Crate {
            modules: BTreeMap::new(),
            references: BTreeMap::new(),
        };
        let dir = root.parent().unwrap().to_path_buf();
        krate.load_file(root, &dir, Vec::new());
        krate
    }

    fn load_file(&mut self, file: &Path, dir: &Path, path: Vec<String>) {
        let text = std::fs::read_to_string(file).unwrap();
        let syntax = syn::parse_file(&text)
            .unwrap_or_else(|error| panic!("{} does not parse: {error}", file.display()));
        self.load_items(&syntax.items, file, dir, path);
    }

    fn load_items(&mut self, items: &[syn::Item], file: &Path, dir: &Path, path: Vec<String>) {
        self.modules.entry(path.clone()).or_default().file = file.to_path_buf();
        let items: Vec<&syn::Item> = items.iter().filter(|item| !is_test_only(item)).collect();
        for item in items.iter().copied() {
            let module = self.modules.get_mut(&path).unwrap();
            let name = match item {
                syn::Item::Const(item) => Some(item.ident.to_string()),
                syn::Item::Enum(item) => Some(item.ident.to_string()),
                syn::Item::Fn(item) => Some(item.sig.ident.to_string()),
                syn::Item::Static(item) => Some(item.ident.to_string()),
                syn::Item::Struct(item) => Some(item.ident.to_string()),
                syn::Item::Trait(item) => Some(item.ident.to_string()),
                syn::Item::Type(item) => Some(item.ident.to_string()),
                syn::Item::Union(item) => Some(item.ident.to_string()),
                syn::Item::Macro(item) => item.ident.as_ref().map(|ident| ident.to_string()),
                syn::Item::Use(item) => {
                    collect_aliases(&item.tree, module);
                    None
                }
                syn::Item::Mod(item) => {
                    let name = item.ident.to_string();
                    module.children.insert(name.clone());
                    let mut child = path.clone();
                    child.push(name.clone());
                    match &item.content {
                        Some((_, inner)) => self.load_items(inner, file, dir, child),
                        None => {
                            let (child_file, child_dir) =
                                module_file(dir, &name).unwrap_or_else(|| {
                                    panic!("no file for mod {name} in {}", dir.display())
                                });
                            self.load_file(&child_file, &child_dir, child);
                        }
                    }
                    None
                }
                _ => None,
            };
            if let Some(name) = name {
                self.modules.get_mut(&path).unwrap().items.insert(name);
            }
        }
        let mut collector = References {
            path: path.clone(),
            found: Vec::new(),
        };
        for item in items.iter().copied() {
            // Inline modules were visited on their own, with their own path.
            if !matches!(item, syn::Item::Mod(module) if module.content.is_some()) {
                collector.visit_item(item);
            }
        }
        self.references
            .entry(file.to_path_buf())
            .or_default()
            .extend(collector.found);
    }

    /// The absolute module path a path written in `from` starts at, and the rest of it; `None`
    /// for a path into another crate or the prelude.
    fn anchor(&self, from: &[String], written: &[String]) -> Option<(Vec<String>, Vec<String>)> {
        let first = written.first()?;
        let mut base = from.to_vec();
        let mut rest = written;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &written[1..];
            }
            "self" => rest = &written[1..],
            "super" => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            name => {
                let module = self.modules.get(from)?;
                if !module.children.contains(name) {
                    // A name a `use` brought in: read the path it stands for.
                    let target = module.aliases.get(name)?;
                    if target.len() < 2 || target == written {
                        return None;
                    }
                    let mut expanded = target.clone();
                    expanded.extend_from_slice(&written[1..]);
                    return self.anchor(from, &expanded);
                }
            }
        }
        Some((base, rest.to_vec()))
    }

    /// The file that defines what `rest` names when read inside module `base`.
    fn resolve(&self, base: Vec<String>, rest: &[String], depth: usize) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let module = self.modules.get(&base)?;
        let Some(first) = rest.first() else {
            return Some(module.file.clone());
        };
        if first == "self" {
            return self.resolve(base, &rest[1..], depth + 1);
        }
        if first == "super" {
            let mut parent = base;
            parent.pop();
            return self.resolve(parent, &rest[1..], depth + 1);
        }
        if module.children.contains(first) {
            let mut child = base;
            child.push(first.clone());
            return self.resolve(child, &rest[1..], depth + 1);
        }
        if module.items.contains(first) {
            return Some(module.file.clone());
        }
        if let Some(target) = module.aliases.get(first) {
            let (anchor, target_rest) = self.anchor(&base, target)?;
            let mut full = target_rest;
            full.extend_from_slice(&rest[1..]);
            return self.resolve(anchor, &full, depth + 1);
        }
        for glob in &module.globs {
            if let Some((anchor, mut glob_rest)) = self.anchor(&base, glob) {
                glob_rest.extend_from_slice(rest);
                if let Some(file) = self.resolve(anchor, &glob_rest, depth + 1) {
                    return Some(file);
                }
            }
        }
        None
    }

    /// Every edge between two different files, with one path that makes it.
    fn edges(&self) -> BTreeMap<(PathBuf, PathBuf), String> {
        let mut edges = BTreeMap::new();
        for (file, references) in &self.references {
            for (from, written) in references {
                let Some((anchor, rest)) = self.anchor(from, written) else {
                    continue;
                };
                let Some(target) = self.resolve(anchor, &rest, 0) else {
                    continue;
                };
                if &target != file {
                    edges
                        .entry((file.clone(), target))
                        .or_insert_with(|| written.join("::"));
                }
            }
        }
        // What a file takes from inside another module it takes from that module too: an
        // edge into `grants/tool_registry.rs` from outside `grants` is also one into
        // `grants/mod.rs`, so a parent module's file and another module's children cannot
        // import each other unseen.
        let mut module_of: HashMap<&PathBuf, &Vec<String>> = HashMap::new();
        for (path, module) in &self.modules {
            let entry = module_of.entry(&module.file).or_insert(path);
            if path.len() < entry.len() {
                *entry = path;
            }
        }
        let direct: Vec<((PathBuf, PathBuf), String)> =
            edges.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for ((from, to), written) in direct {
            let (Some(from_module), Some(to_module)) = (module_of.get(&from), module_of.get(&to))
            else {
                continue;
            };
            for depth in 1..to_module.len() {
                let ancestor = &to_module[..depth];
                if from_module.starts_with(ancestor) {
                    continue;
                }
                if let Some(parent) = self.modules.get(ancestor)
                    && parent.file != from
                {
                    edges
                        .entry((from.clone(), parent.file.clone()))
                        .or_insert_with(|| format!("{written}, inside {}", ancestor.join("::")));
                }
            }
        }
        edges
    }
}

/// An item under `#[cfg(test)]`: tests sit above the code they test, so they are left out.
fn is_test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Mod(item) => &item.attrs,
        syn::Item::Fn(item) => &item.attrs,
        syn::Item::Use(item) => &item.attrs,
        syn::Item::Impl(item) => &item.attrs,
        syn::Item::Struct(item) => &item.attrs,
        _ => return false,
    };
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Path>()
                .is_ok_and(|path| path.is_ident("test"))
    })
}

/// The imports of one `use` item, flattened: each path it names with the name it binds
/// (`None` for a glob, whose path is the module it opens).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(path) => {
            let mut prefix = prefix;
            prefix.push(path.ident.to_string());
            flatten_use(&path.tree, prefix, out);
        }
        syn::UseTree::Name(name) if name.ident == "self" => {
            out.push((prefix.last().cloned(), prefix));
        }
        syn::UseTree::Name(name) => {
            let mut target = prefix;
            target.push(name.ident.to_string());
            out.push((Some(name.ident.to_string()), target));
        }
        syn::UseTree::Rename(rename) => {
            let mut target = prefix;
            if rename.ident != "self" {
                target.push(rename.ident.to_string());
            }
            out.push((Some(rename.rename.to_string()), target));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix)),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                flatten_use(tree, prefix.clone(), out);
            }
        }
    }
}

fn collect_aliases(tree: &syn::UseTree, module: &mut Module) {
    let mut imports = Vec::new();
    flatten_use(tree, Vec::new(), &mut imports);
    for (name, target) in imports {
        match name {
            Some(name) => {
                module.aliases.insert(name, target);
            }
            None => module.globs.push(target),
        }
    }
}

/// Collects the paths a file writes: every private `use` and every path in code.
struct References {
    path: Vec<String>,
    found: Vec<Reference>,
}

impl<'ast> Visit<'ast> for References {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // A public re-export is a name for something defined elsewhere, not an import.
        if matches!(item.vis, syn::Visibility::Inherited) {
            let mut imports = Vec::new();
            flatten_use(&item.tree, Vec::new(), &mut imports);
            let path = &self.path;
            self.found.extend(
                imports
                    .into_iter()
                    .map(|(_, written)| (path.clone(), written)),
            );
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let written: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        if written.len() > 1 {
            self.found.push((self.path.clone(), written));
        }
        syn::visit::visit_path(self, path);
    }
}

/// The groups of files (two or more) that reach each other through their imports.
fn cycles(edges: &BTreeMap<(PathBuf, PathBuf), String>) -> Vec<Vec<PathBuf>> {
    let mut next: HashMap<&PathBuf, Vec<&PathBuf>> = HashMap::new();
    let mut nodes: BTreeSet<&PathBuf> = BTreeSet::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        nodes.insert(from);
        nodes.insert(to);
    }
    // Tarjan's strongly connected components.
    struct Walk<'a> {
        next: HashMap<&'a PathBuf, Vec<&'a PathBuf>>,
        index: HashMap<&'a PathBuf, usize>,
        low: HashMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        groups: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a PathBuf) {
        let number = walk.index.len();
        walk.index.insert(node, number);
        walk.low.insert(node, number);
        walk.stack.push(node);
        walk.on_stack.insert(node);
        for target in walk.next.get(node).cloned().unwrap_or_default() {
            if !walk.index.contains_key(target) {
                visit(walk, target);
                let low = walk.low[node].min(walk.low[target]);
                walk.low.insert(node, low);
            } else if walk.on_stack.contains(target) {
                let low = walk.low[node].min(walk.index[target]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut group = Vec::new();
            loop {
                let member = walk.stack.pop().unwrap();
                walk.on_stack.remove(member);
                group.push(member.clone());
                if member == node {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                walk.groups.push(group);
            }
        }
    }
    let mut walk = Walk {
        next,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for node in nodes {
        if !walk.index.contains_key(node) {
            visit(&mut walk, node);
        }
    }
    walk.groups
}

/// The directories of the workspace's members, as its `Cargo.toml` lists them.
fn members(workspace: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap();
    let listed = manifest
        .split("members = [")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    listed
        .split(',')
        .map(|entry| entry.trim().trim_matches('"'))
        .filter(|member| !member.is_empty())
        .map(|member| workspace.join(member))
        .collect()
}

/// Every crate root of the workspace: each member's library and binary, and the test crate.
fn crate_roots(workspace: &Path) -> Vec<PathBuf> {
    let mut roots = vec![workspace.join("tests/main.rs")];
    for member in members(workspace) {
        for root in ["src/lib.rs", "src/main.rs"] {
            let file = member.join(root);
            if file.is_file() {
                roots.push(file);
            }
        }
    }
    roots
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let workspace = workspace();
    let mut report = String::new();
    let roots = crate_roots(&workspace);
    assert!(roots.len() > 10, "found only {} crate roots", roots.len());
    for root in roots {
        let krate = Crate::load(&root);
        let edges = krate.edges();
        for group in cycles(&edges) {
            let name =
                |file: &PathBuf| file.strip_prefix(&workspace).unwrap().display().to_string();
            report.push_str(&format!("a cycle of {} files:\n", group.len()));
            for ((from, to), written) in &edges {
                if group.contains(from) && group.contains(to) {
                    report.push_str(&format!("  {} -> {} ({written})\n", name(from), name(to)));
                }
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

/// The layer of each Murmur crate: a crate depends (outside its tests) only on crates of lower
/// layers. Guest components, which are not listed, use only the guest SDK and the protocol.
const LAYERS: &[(&str, u8)] = &[
    ("murmur-manifest", 0),
    ("murmur-protocol", 0),
    ("murmur-beneath", 0),
    ("murmur-front", 0),
    ("murmur-a2a", 1),
    ("murmur-registry", 1),
    ("murmur-confine", 1),
    ("murmur-trace", 1),
    ("murmur-guest", 1),
    ("murmur-testkit", 1),
    ("murmur-host", 2),
    ("murmur-mcp", 2),
    ("murmur-runtime", 3),
    ("murmur-door", 4),
    ("murmur-eval", 4),
    ("murmur-cli", 5),
];

/// The Murmur crates a member's `Cargo.toml` lists under `[dependencies]`.
fn murmur_dependencies(manifest: &str) -> Vec<String> {
    let mut section = "";
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]"
            && let Some(name) = line.split(['.', ' ', '=']).next()
            && name.starts_with("murmur-")
        {
            found.push(name.to_string());
        }
    }
    found
}

#[test]
fn crate_dependencies_point_one_way() {
    let layer = |name: &str| {
        LAYERS
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|l| l.1)
    };
    let mut report = String::new();
    let mut checked = 0;
    for member in members(&workspace()) {
        let text = std::fs::read_to_string(member.join("Cargo.toml")).unwrap();
        let name = text
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        checked += 1;
        for dependency in murmur_dependencies(&text) {
            let allowed = match (layer(&name), layer(&dependency)) {
                (Some(own), Some(theirs)) => theirs < own,
                (None, _) => matches!(dependency.as_str(), "murmur-guest" | "murmur-protocol"),
                (Some(_), None) => false,
            };
            if !allowed {
                report.push_str(&format!("{name} depends on {dependency}\n"));
            }
        }
    }
    assert!(checked > 10, "found only {checked} members");
    assert!(
        report.is_empty(),
        "dependencies against the layers:\n{report}"
    );
}

#[test]
fn the_dependency_reader_finds_murmur_crates_of_the_dependencies_section_only() {
    let manifest = "[package]\nname = \"murmur-x\"\n\n[dependencies]\nmurmur-a.workspace = true\n\
                    murmur-b = { workspace = true, features = [\"f\"] }\nserde.workspace = true\n\n\
                    [dev-dependencies]\nmurmur-c.workspace = true\n";
    assert_eq!(murmur_dependencies(manifest), ["murmur-a", "murmur-b"]);
}

/// The checker sees a cycle when there is one: through a child, through `super`, through a
/// re-export followed to its source, and through a path in code rather than a `use`.
#[test]
fn the_cycle_check_finds_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a; mod b; mod c; pub mod facade; pub use facade::Deep;\n\
         fn root() {}\n",
    );
    write("a.rs", "use crate::b::Bee;\npub struct Ay;\n");
    write(
        "b.rs",
        "pub struct Bee;\nfn make() -> crate::c::Sea { todo!() }\n",
    );
    // c reaches a through the root's re-export chain: Deep lives in facade/deep.rs, not in lib.rs.
    write(
        "c.rs",
        "pub struct Sea;\nuse super::a::Ay;\nuse crate::Deep;\n",
    );
    write("facade/mod.rs", "mod deep;\npub use deep::Deep;\n");
    write(
        "facade/deep.rs",
        "pub struct Deep;\nfn f() { super::super::root() }\n",
    );
    let krate = Crate::load(&dir.path().join("lib.rs"));
    let groups = cycles(&krate.edges());
    let names: Vec<Vec<String>> = groups
        .iter()
        .map(|group| {
            group
                .iter()
                .map(|file| file.strip_prefix(dir.path()).unwrap().display().to_string())
                .collect()
        })
        .collect();
    // a -> b -> c -> a is one cycle; deep.rs -> lib.rs is not, because lib.rs only re-exports.
    assert_eq!(
        names,
        vec![vec!["a.rs".to_string(), "b.rs".into(), "c.rs".into()]]
    );

    // A parent module's file and another module's child: `engine/mod.rs` takes `State` from
    // `grants/mod.rs`, which takes `Limits` from `engine/limits.rs`. Taking from inside
    // `engine` is taking from `engine`: one cycle, though no two files name each other.
    let other = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let file = other.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("lib.rs", "mod engine; mod grants;\n");
    write(
        "engine/mod.rs",
        "pub mod limits;\nuse crate::grants::State;\nfn run(_: State) {}\n",
    );
    write("engine/limits.rs", "pub struct Limits;\n");
    write(
        "grants/mod.rs",
        "use crate::engine::limits::Limits;\npub struct State(Limits);\n",
    );
    let krate = Crate::load(&other.path().join("lib.rs"));
    let groups: Vec<Vec<String>> = cycles(&krate.edges())
        .iter()
        .map(|group| {
            group
                .iter()
                .map(|file| {
                    file.strip_prefix(other.path())
                        .unwrap()
                        .display()
                        .to_string()
                })
                .collect()
        })
        .collect();
    assert_eq!(
        groups,
        vec![vec!["engine/mod.rs".to_string(), "grants/mod.rs".into()]]
    );
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn secrets_are_compared_in_one_place() {
    // A credential compared by hand (a slice `==`, or `ct_eq` on values of another length)
    // leaks through its timing; the one helper compares digests in constant time.
    let workspace = workspace();
    let helper = workspace.join("crates/front/src/secret.rs");
    let mut files = Vec::new();
    for member in members(&workspace) {
        rust_files(&member.join("src"), &mut files);
    }
    let elsewhere: Vec<String> = files
        .iter()
        .filter(|file| **file != helper)
        .filter(|file| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            text.contains("ct_eq(") || text.contains("ConstantTimeEq")
        })
        .map(|file| file.strip_prefix(&workspace).unwrap().display().to_string())
        .collect();
    assert!(
        elsewhere.is_empty(),
        "secrets compared outside murmur_front::secret: {elsewhere:?}"
    );
    assert!(
        std::fs::read_to_string(&helper).unwrap().contains("ct_eq("),
        "the helper itself compares in constant time"
    );
}
