//! Page fingerprints (SPEC 4): SHA-256 over what the page is, never over how the server
//! numbered it. Refs, observation IDs, focus, cursor hints and attribute order are left out;
//! structure (which group a control sits in) and values are kept.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// A page fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The first 8 hex digits, for display.
    pub fn short(&self) -> String {
        self.0[..4].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// One node of an aria tree, canonical: no ref, no focus or cursor, attributes sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub indent: usize,
    /// The ref the server gave the node (kept to merge diffs, never hashed).
    pub id: Option<String>,
    /// `ref=eN [unchanged]`: the node stands for the base page's subtree at that ref.
    pub unchanged: bool,
    pub canon: String,
}

/// The nodes of an aria tree (Playwright or agent-browser lines).
pub fn nodes(tree: &str) -> Vec<Node> {
    tree.lines().filter_map(node).collect()
}

fn node(line: &str) -> Option<Node> {
    let line = line.trim_end_matches('\r');
    let body = line.trim_start();
    if body.is_empty() {
        return None;
    }
    let indent = line.len() - body.len();
    let Some(rest) = body.strip_prefix("- ") else {
        return Some(Node {
            indent,
            id: None,
            unchanged: false,
            canon: body.to_string(),
        });
    };
    let rest = rest.strip_prefix("<changed> ").unwrap_or(rest);
    if let Some(id) = rest
        .strip_prefix("ref=")
        .and_then(|r| r.strip_suffix(" [unchanged]"))
    {
        return Some(Node {
            indent,
            id: Some(id.to_string()),
            unchanged: true,
            canon: String::new(),
        });
    }
    let (canon, id) = canonical(rest);
    Some(Node {
        indent,
        id,
        unchanged: false,
        canon,
    })
}

/// Splits `role "name" [a] [b=c]: value` into a canonical form and its ref. Brackets are
/// read only before the value, outside the quoted name.
fn canonical(rest: &str) -> (String, Option<String>) {
    let mut in_quote = false;
    let mut escaped = false;
    let mut head_end = rest.len();
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quote => escaped = true,
            '"' => in_quote = !in_quote,
            '[' | ':' if !in_quote => {
                head_end = i;
                break;
            }
            _ => {}
        }
    }
    let (head, mut tail) = rest.split_at(head_end);
    let mut attrs: Vec<&str> = Vec::new();
    let mut id = None;
    while let Some(inner) = tail.trim_start().strip_prefix('[') {
        let Some(close) = inner.find(']') else { break };
        for item in inner[..close]
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if let Some(r) = item.strip_prefix("ref=") {
                id = Some(r.to_string());
            } else if item != "active"
                && !item.starts_with("cursor=")
                && !item.starts_with("cursor:")
            {
                attrs.push(item);
            }
        }
        tail = &inner[close + 1..];
    }
    attrs.sort_unstable();
    let canon = format!("{} [{}]{}", head.trim_end(), attrs.join(","), tail);
    (canon, id)
}

/// Applies an incremental diff to the page it updates. A diff lists changed subtrees, each
/// rooted at a node the base page has (`- <changed> list [ref=e7]:`); inside them,
/// `ref=eN [unchanged]` stands for the base page's subtree at that ref. Each changed subtree
/// replaces the base subtree with its root's ref; one the base lacks is added at the end.
pub fn merge(base: &[Node], diff: &[Node]) -> Vec<Node> {
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
        let at = root
            .id
            .as_deref()
            .and_then(|id| merged.iter().position(|n| n.id.as_deref() == Some(id)));
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

fn reindent(group: &[Node], indent: usize) -> Vec<Node> {
    let Some(root) = group.first() else {
        return Vec::new();
    };
    group
        .iter()
        .map(|n| Node {
            indent: n.indent - root.indent + indent,
            ..n.clone()
        })
        .collect()
}

/// The diff with every `ref=eN [unchanged]` replaced by the base page's subtree at `eN`.
fn expand(base: &[Node], diff: &[Node]) -> Vec<Node> {
    let by_id: HashMap<&str, usize> = base
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((n.id.as_deref()?, i)))
        .collect();
    let mut out = Vec::with_capacity(diff.len());
    for n in diff {
        let found = n
            .unchanged
            .then(|| n.id.as_deref().and_then(|id| by_id.get(id)))
            .flatten();
        match found {
            Some(&at) => out.extend(reindent(&base[at..at + subtree_len(&base[at..])], n.indent)),
            None => out.push(n.clone()),
        }
    }
    out
}

/// The fingerprint of a page: its current tab and tab count, URL, title, document, and
/// either its tree (aria formats) or its controls and text (`flat`, formats without a tree).
pub fn of_parts(
    tab: &str,
    tabs: usize,
    url: &str,
    title: &str,
    document: &str,
    nodes: Option<&[Node]>,
    flat: &[String],
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
    for n in nodes.unwrap_or_default() {
        field(
            "node",
            &[&(n.indent as u64).to_le_bytes(), n.canon.as_bytes()],
        );
    }
    for f in flat {
        field("flat", &[f.as_bytes()]);
    }
    Fingerprint(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(tree: &str) -> Vec<String> {
        nodes(tree).into_iter().map(|n| n.canon).collect()
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
            canon("- button \"a [ref=e5]\" [ref=e1]")[0],
            "button \"a [ref=e5]\" []"
        );
        assert_eq!(
            canon("- paragraph [ref=e1]: see [ref=e5]")[0],
            "paragraph []: see [ref=e5]"
        );
    }

    #[test]
    fn changed_subtrees_replace_theirs_in_the_base() {
        let base = nodes("- generic [ref=e1]:\n  - button \"Refresh list\" [ref=e4]\n  - list [ref=e7]:\n    - listitem [ref=e8]: A-01\n  - status [ref=e9]: Bin A-02")
            ;
        let diff = nodes("- <changed> button \"Refresh list\" [active] [ref=e4]\n- <changed> list [ref=e7]:\n  - listitem [ref=e23]: A-01");
        let canon = |ns: &[Node]| {
            ns.iter()
                .map(|n| format!("{}{}", " ".repeat(n.indent), n.canon))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            canon(&merge(&base, &diff)),
            canon(&base),
            "an identical re-render merges to the same page"
        );
        let more = nodes(
            "- <changed> list [ref=e7]:\n  - ref=e8 [unchanged]\n  - listitem [ref=e30]: A-02",
        );
        assert_eq!(
            canon(&merge(&base, &more))[3..5],
            [
                "    listitem []: A-01".to_string(),
                "    listitem []: A-02".to_string()
            ]
        );
    }

    #[test]
    fn diffs_merge_onto_their_base() {
        let base = nodes("- generic [ref=e1]:\n  - heading \"Done\" [ref=e2]\n  - list [ref=e3]:\n    - listitem [ref=e4]: one\n  - button \"Place order\" [ref=e7]");
        let diff = nodes("- <changed> generic [ref=e1]:\n  - ref=e2 [unchanged]\n  - ref=e3 [unchanged]\n  - <changed> button \"Cancel this order\" [ref=e7]");
        let merged: Vec<String> = merge(&base, &diff)
            .into_iter()
            .map(|n| format!("{}{}", " ".repeat(n.indent), n.canon))
            .collect();
        assert_eq!(
            merged,
            [
                "generic []:",
                "  heading \"Done\" []",
                "  list []:",
                "    listitem []: one",
                "  button \"Cancel this order\" []",
            ]
        );
    }
}
