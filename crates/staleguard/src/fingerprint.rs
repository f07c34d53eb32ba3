//! Page fingerprints (SPEC 4): SHA-256 over what the page is, never over how the server
//! numbered it. Refs, observation IDs, focus, cursor hints and attribute order are left out;
//! structure (which group a control sits in) and values are kept.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// A page fingerprint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The first 8 hex digits, for display.
    pub fn short(&self) -> String {
        self.0[..4].iter().map(|b| format!("{b:02x}")).collect()
    }
}

pub(crate) use crate::observation::Node;

/// A digest of a page's nodes, in order, with their depth: what the fingerprint takes of
/// the tree. Computed once per tree (and once per merged page).
pub(crate) fn digest(nodes: &[Node]) -> u128 {
    // One buffer hashed at once: a streaming hasher costs more per node than a node's bytes.
    let mut bytes = Vec::with_capacity(nodes.len() * 21);
    for n in nodes {
        bytes.extend_from_slice(&n.indent.to_le_bytes());
        bytes.push(u8::from(n.unchanged));
        bytes.extend_from_slice(&n.hash.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_128(&bytes)
}

/// Applies an incremental diff to the page it updates. A diff lists changed subtrees, each
/// rooted at a node the base page has (`- <changed> list [ref=e7]:`); inside them,
/// `ref=eN [unchanged]` stands for the base page's subtree at that ref. Each changed subtree
/// replaces the base subtree with its root's ref; one the base lacks is added at the end.
pub(crate) fn merge(base: &[Node], diff: &[Node]) -> Vec<Node> {
    let expanded = expand(base, diff);
    let mut merged = base.to_vec();
    let mut rest = expanded.as_slice();
    while let Some(root) = rest.first() {
        let len = 1 + rest[1..]
            .iter()
            .take_while(|n| n.indent > root.indent)
            .count();
        let (group, tail) = rest.split_at(len);
        rest = tail;
        let at = (root.id != 0)
            .then(|| merged.iter().position(|n| n.id == root.id))
            .flatten();
        match at {
            Some(at) => {
                let end = at + subtree_len(&merged[at..]);
                let indent = merged[at].indent;
                merged.splice(at..end, reindent(group, indent));
            }
            None => merged.extend(group.iter().cloned()),
        }
    }
    merged
}

/// Nodes in the subtree that starts at `nodes[0]`, its root included.
fn subtree_len(nodes: &[Node]) -> usize {
    let Some(root) = nodes.first() else { return 0 };
    1 + nodes[1..]
        .iter()
        .take_while(|n| n.indent > root.indent)
        .count()
}

fn reindent(group: &[Node], indent: u32) -> Vec<Node> {
    let Some(root) = group.first() else {
        return Vec::new();
    };
    group
        .iter()
        .map(|n| Node {
            indent: n.indent - root.indent + indent,
            ..*n
        })
        .collect()
}

/// The diff with every `ref=eN [unchanged]` replaced by the base page's subtree at `eN`.
fn expand(base: &[Node], diff: &[Node]) -> Vec<Node> {
    let by_id: HashMap<u64, usize> = base
        .iter()
        .enumerate()
        .filter(|(_, n)| n.id != 0)
        .map(|(i, n)| (n.id, i))
        .collect();
    let mut out = Vec::with_capacity(diff.len());
    for n in diff {
        let found = n.unchanged.then(|| by_id.get(&n.id)).flatten();
        match found {
            Some(&at) => out.extend(reindent(&base[at..at + subtree_len(&base[at..])], n.indent)),
            None => out.push(*n),
        }
    }
    out
}

/// The fingerprint of a page: its current tab and tab count, URL, title, document, and
/// either its tree's [`digest`] (aria formats) or its controls and text (`flat`, formats
/// without a tree).
pub(crate) fn of_parts(
    tab: &str,
    tabs: usize,
    url: &str,
    title: &str,
    document: &str,
    tree: Option<u128>,
    flat: Option<u128>,
) -> Fingerprint {
    let mut h = Sha256::new();
    let mut field = |name: &str, parts: &[&[u8]]| {
        h.update(name.as_bytes());
        h.update((parts.iter().map(|p| p.len()).sum::<usize>() as u64).to_le_bytes());
        parts.iter().for_each(|p| h.update(p));
    };
    field("tab", &[tab.as_bytes()]);
    field("tabs", &[&(tabs as u64).to_le_bytes()]);
    field("url", &[url.as_bytes()]);
    field("title", &[title.as_bytes()]);
    field("document", &[document.as_bytes()]);
    if let Some(tree) = tree {
        field("tree", &[&tree.to_le_bytes()]);
    }
    if let Some(flat) = flat {
        field("flat", &[&flat.to_le_bytes()]);
    }
    Fingerprint(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(indent, hash)` of every line: what the fingerprint takes of a tree.
    fn canon(tree: &str) -> Vec<(u32, u128)> {
        shape(&nodes(tree))
    }

    fn shape(nodes: &[Node]) -> Vec<(u32, u128)> {
        nodes.iter().map(|n| (n.indent, n.hash)).collect()
    }

    fn nodes(tree: &str) -> Vec<Node> {
        crate::observation::aria::tree_nodes(tree)
    }

    #[test]
    fn refs_focus_cursor_and_attribute_order_are_ignored() {
        let a = "- generic [active] [ref=e1]:\n  - checkbox \"Gift\" [checked] [disabled] [ref=e7]\n  - link \"Home\" [ref=e9] [cursor=pointer]";
        let b = "- generic [ref=e31]:\n  - checkbox \"Gift\" [ref=e40] [disabled] [checked] [active]\n  - link \"Home\" [cursor=pointer] [ref=e41]";
        assert_eq!(canon(a), canon(b));
        let c = "- heading \"Title\" [level=1, ref=e1]";
        let d = "- heading \"Title\" [ref=e9, level=1]";
        assert_eq!(canon(c), canon(d));
    }

    #[test]
    fn values_states_and_group_membership_are_kept() {
        let base = "- radiogroup \"Shipping\" [ref=e1]:\n  - radio \"Express\" [ref=e2]\n- radiogroup \"Billing\" [ref=e3]:\n  - radio \"Card\" [ref=e4]";
        let moved = "- radiogroup \"Shipping\" [ref=e1]:\n  - radio \"Card\" [ref=e4]\n- radiogroup \"Billing\" [ref=e3]:\n  - radio \"Express\" [ref=e2]";
        assert_ne!(canon(base), canon(moved));
        assert_ne!(
            canon("- textbox \"Qty\" [ref=e1]: \"1\""),
            canon("- textbox \"Qty\" [ref=e1]: \"2\"")
        );
        assert_ne!(
            canon("- checkbox \"A\" [ref=e1]"),
            canon("- checkbox \"A\" [checked] [ref=e1]")
        );
        // A bracket inside the name or the value is page text, not an attribute.
        assert_eq!(
            canon("- button \"a [ref=e5]\" [ref=e1]"),
            canon("- button \"a [ref=e5]\" [ref=e9]")
        );
        assert_ne!(
            canon("- button \"a [ref=e5]\" [ref=e1]"),
            canon("- button \"a\" [ref=e5]")
        );
        assert_ne!(
            canon("- paragraph [ref=e1]: see [ref=e5]"),
            canon("- paragraph [ref=e1]: see")
        );
        // Property lines and prose count as text.
        assert_ne!(
            canon("- link \"A\" [ref=e1]:\n  - /url: a.html"),
            canon("- link \"A\" [ref=e1]:\n  - /url: b.html")
        );
    }

    #[test]
    fn changed_subtrees_replace_theirs_in_the_base() {
        let base = nodes("- generic [ref=e1]:\n  - button \"Refresh list\" [ref=e4]\n  - list [ref=e7]:\n    - listitem [ref=e8]: A-01\n  - status [ref=e9]: Bin A-02");
        let diff = nodes("- <changed> button \"Refresh list\" [active] [ref=e4]\n- <changed> list [ref=e7]:\n  - listitem [ref=e23]: A-01");
        assert_eq!(
            shape(&merge(&base, &diff)),
            shape(&base),
            "an identical re-render merges to the same page"
        );
        let more = nodes(
            "- <changed> list [ref=e7]:\n  - ref=e8 [unchanged]\n  - listitem [ref=e30]: A-02",
        );
        let expected = canon("- generic:\n  - button \"Refresh list\"\n  - list:\n    - listitem: A-01\n    - listitem: A-02\n  - status: Bin A-02");
        assert_eq!(shape(&merge(&base, &more)), expected);
    }

    #[test]
    fn diffs_merge_onto_their_base() {
        let base = nodes("- generic [ref=e1]:\n  - heading \"Done\" [ref=e2]\n  - list [ref=e3]:\n    - listitem [ref=e4]: one\n  - button \"Place order\" [ref=e7]");
        let diff = nodes("- <changed> generic [ref=e1]:\n  - ref=e2 [unchanged]\n  - ref=e3 [unchanged]\n  - <changed> button \"Cancel this order\" [ref=e7]");
        let expected = canon("- generic:\n  - heading \"Done\"\n  - list:\n    - listitem: one\n  - button \"Cancel this order\"");
        assert_eq!(shape(&merge(&base, &diff)), expected);
        assert_ne!(digest(&merge(&base, &diff)), digest(&base));
    }
}
