//! A page's lines as the lean form reads them: each line's kind (outside the tree, an
//! item and its role, a property, a continuation), as the aria grammar reads it, and the
//! subtree it spans.

use crate::observation::aria::{self, LineKind, NodeLine};
use crate::observation::roles::{is_control_role, PATH_ROLES};
use crate::texts;

/// Whether an item's line gives its accessible name (`link "Docs" [ref=e2]`).
pub(super) fn is_named(line: &Line<'_>) -> bool {
    matches!(line.kind, Kind::Item(node) if node.quoted_name)
}

/// Whether an item is shown on the way to a kept line below it.
pub(super) fn is_path(line: &Line<'_>) -> bool {
    line.role().is_some_and(|role| PATH_ROLES.contains(&role))
}

/// One line of the page, with its line break.
pub(super) struct Line<'t> {
    pub(super) text: &'t str,
    pub(super) indent: usize,
    pub(super) kind: Kind<'t>,
    /// The item this line belongs to or under: its parent item, or for a property or a
    /// continuation, the item it belongs to.
    pub(super) parent: Option<usize>,
    /// One past the last line of its subtree (itself alone but for items).
    pub(super) end: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind<'t> {
    /// Outside the YAML tree: headers, fences, events.
    Outside,
    /// `- role ...`: a node, as the aria grammar reads it.
    Item(NodeLine<'t>),
    /// `- /url: ...`: a property of the item above it.
    Property,
    /// Any other line inside the tree: the rest of the line above it.
    Continuation,
}

impl Line<'_> {
    pub(super) fn role(&self) -> Option<&str> {
        match self.kind {
            Kind::Item(node) => Some(node.role),
            _ => None,
        }
    }

    pub(super) fn actionable(&self) -> bool {
        self.role()
            .is_some_and(|r| is_control_role(r) || self.text.contains("[cursor=pointer]"))
    }

    /// The line's text, without its indent and line break.
    pub(super) fn body(&self) -> &str {
        self.text.trim()
    }

    /// An item's text after its role (` "Docs" [ref=e2]:`, a YAML quote around the item
    /// left out); any other line's text.
    pub(super) fn after_role(&self) -> &str {
        match self.kind {
            Kind::Item(node) => node.after_role,
            _ => self.body(),
        }
    }
}

/// Whether `text` is a lean form already: a fold marker stands on a line of its own inside
/// its tree, where no page text can print one.
pub(super) fn is_lean(text: &str) -> bool {
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("```") {
            inside = !inside && line == "```yaml";
        } else if inside && line.starts_with(texts::LEAN_FOLD_TAG) {
            return true;
        }
    }
    false
}

/// The page's lines, with the tree inside its ```yaml fences parsed; `None` when it has no
/// tree or is already lean.
pub(super) fn parse(text: &str) -> Option<Vec<Line<'_>>> {
    let mut lines = Vec::new();
    let mut inside = false;
    let mut trees = 0;
    // Open items as (indent, line index).
    let mut open: Vec<(usize, usize)> = Vec::new();
    for raw in text.split_inclusive('\n') {
        let body = raw.trim();
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let at = lines.len();
        let fence = body.starts_with("```");
        if fence || !inside {
            if fence {
                inside = !inside && body == "```yaml";
                trees += usize::from(inside);
                close(&mut lines, &mut open, 0, at);
            }
            lines.push(Line {
                text: raw,
                indent,
                kind: Kind::Outside,
                parent: None,
                end: at + 1,
            });
            continue;
        }
        if body.starts_with(texts::LEAN_FOLD_TAG) {
            return None;
        }
        let kind = match aria::line_kind(body) {
            LineKind::Node(node) => Kind::Item(node),
            LineKind::Property => Kind::Property,
            LineKind::Text => Kind::Continuation,
        };
        if matches!(kind, Kind::Item(_)) {
            close(&mut lines, &mut open, indent, at);
        }
        let parent = open.last().map(|&(_, i)| i);
        lines.push(Line {
            text: raw,
            indent,
            kind,
            parent,
            end: at + 1,
        });
        if matches!(kind, Kind::Item(_)) {
            open.push((indent, at));
        } else if let Some(p) = parent {
            lines[p].end = at + 1;
        }
    }
    let end = lines.len();
    close(&mut lines, &mut open, 0, end);
    (trees > 0).then_some(lines)
}

/// Closes the open items at `indent` or deeper: their subtrees end before line `at`.
pub(super) fn close(
    lines: &mut [Line<'_>],
    open: &mut Vec<(usize, usize)>,
    indent: usize,
    at: usize,
) {
    while let Some(&(i, line)) = open.last() {
        if i < indent {
            break;
        }
        lines[line].end = lines[line].end.max(at);
        open.pop();
    }
}

/// A line has words when it carries text beyond its role and attributes.
pub(super) fn has_words(body: &str) -> bool {
    body.contains(": ") || body.contains('"')
}
