//! Where each field of a loaded manifest sits in its file.
//!
//! A field is named by its path: keys joined by `.`, sequence indices in brackets,
//! `inference.alternates[0].driver`; the top level is the empty path. The [`SourceMap`] maps
//! each path the YAML held to its line and column (1-based), so a diagnostic raised on a typed
//! value can point back at the text. A path the file does not hold (a missing field) is placed
//! at its nearest ancestor that it does.

use std::collections::HashMap;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    /// Where the key naming this node starts, for a mapping value.
    key: Option<Place>,
    /// Where a diagnostic about the node points: the value for a scalar, the key for a
    /// collection or an empty value under a key (so `alternates:` rather than its first item).
    at: Place,
    /// The source text of a scalar that is not a string (`1.10`, `true`), to quote it back.
    raw: Option<String>,
}

/// Paths to places; see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SourceMap {
    nodes: HashMap<String, Node>,
}

impl SourceMap {
    pub(crate) fn insert(
        &mut self,
        path: String,
        key: Option<Place>,
        at: Place,
        raw: Option<String>,
    ) {
        self.nodes.insert(path, Node { key, at, raw });
    }

    /// Where a diagnostic about `path` points: the node itself, else its nearest ancestor.
    pub(crate) fn locate(&self, path: &str) -> Option<Place> {
        let mut current = Some(path);
        while let Some(p) = current {
            if let Some(node) = self.nodes.get(p) {
                return Some(node.at);
            }
            current = parent(p);
        }
        None
    }

    /// Where the key of `path` is written, else [`SourceMap::locate`].
    pub(crate) fn locate_key(&self, path: &str) -> Option<Place> {
        self.nodes
            .get(path)
            .and_then(|node| node.key)
            .or_else(|| self.locate(path))
    }

    /// Places `to` where `from` is written (a key read under another path keeps its line).
    pub(crate) fn alias(&mut self, from: &str, to: String) {
        if let Some(node) = self.nodes.get(from).cloned() {
            self.nodes.insert(to, node);
        }
    }

    /// The source text of the non-string scalar at `path`.
    pub(crate) fn raw(&self, path: &str) -> Option<&str> {
        self.nodes.get(path).and_then(|node| node.raw.as_deref())
    }
}

/// `parent.key`, or `key` at the top level.
pub(crate) fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[index]`.
pub(crate) fn join_index(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// The path one level up, `None` for the top level.
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

/// The last key of `path` (`driver` for `inference.alternates[0].driver`), if it ends in one.
pub(crate) fn last_key(path: &str) -> Option<&str> {
    if path.ends_with(']') || path.is_empty() {
        return None;
    }
    Some(path.rfind('.').map_or(path, |i| &path[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_walk_up() {
        assert_eq!(
            parent("inference.alternates[0].driver"),
            Some("inference.alternates[0]")
        );
        assert_eq!(
            parent("inference.alternates[0]"),
            Some("inference.alternates")
        );
        assert_eq!(parent("inference"), Some(""));
        assert_eq!(parent(""), None);
        assert_eq!(last_key("inference.alternates[0].driver"), Some("driver"));
        assert_eq!(last_key("name"), Some("name"));
        assert_eq!(last_key("artifacts[0]"), None);
    }

    #[test]
    fn a_missing_path_is_placed_at_its_nearest_ancestor() {
        let mut map = SourceMap::default();
        let at = Place { line: 3, column: 1 };
        map.insert("inference".into(), Some(at), at, None);
        assert_eq!(map.locate("inference.driver.artifact"), Some(at));
        assert_eq!(map.locate("context"), None);
    }
}
