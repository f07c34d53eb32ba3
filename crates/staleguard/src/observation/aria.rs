//! Shared parser for Playwright-style aria snapshot lines.
//!
//! Playwright MCP (every era) and agent-browser print a page as YAML-like lines:
//! `<indent>- <role>[ "<name>"][ [attr]...][: <text>|:]`. Refs are read only from the
//! attribute brackets that directly follow the role and name, never from the text after
//! `: ` or from inside a quoted name, so page text that merely contains `[ref=x]` never
//! becomes a ref. The parser borrows from the input and allocates only to unescape.

use std::borrow::Cow;

use memchr::memchr;

use super::model::{Control, ElementRef, Node, Observation};
pub(crate) use super::roles::is_control_role;
pub use super::roles::CONTROL_ROLES;
use super::roles::{READING_BLOCK_ROLES, TABLE_ROLES};

/// Roles whose accessible name is page text that is not repeated as a text child.
/// `StaticText` is how agent-browser prints text nodes.
const NAMED_TEXT_ROLES: &[&str] = &[
    "heading",
    "row",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "StaticText",
];

/// Attributes that are not page state: refs, focus, cursor hints, agent-browser's duplicate
/// index and link targets. Leaving them out keeps fingerprints stable across re-renders.
const NON_STATE_PREFIXES: &[&str] = &["ref=", "cursor=", "nth=", "url="];

/// What a parsed tree contained, beyond what it added to the observation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeStats {
    /// Lines that parsed as nodes (including `ref=eN [unchanged]` lines).
    pub nodes: usize,
    /// True when the tree is an incremental diff: it has `<changed>` or `[unchanged]` lines.
    pub diff: bool,
}

/// Parses every line of `tree` and appends its refs, nodes and chunks to `obs`.
pub(crate) fn parse_tree<'a>(tree: &'a str, obs: &mut Observation<'a>) -> TreeStats {
    // Nearly every line is a node with a ref: size once instead of growing MBs of parts.
    let count = memchr::memchr_iter(b'\n', tree.as_bytes()).count() + 1;
    obs.nodes.reserve(count);
    obs.refs.reserve(count);
    parse_lines(lines(tree).map(|l| l.text), obs)
}

/// [`parse_tree`] of a tree given line by line, for a tree whose lines carry more than the
/// tree (a file tool's line numbers).
pub(crate) fn parse_lines<'a>(
    tree: impl Iterator<Item = &'a str>,
    obs: &mut Observation<'a>,
) -> TreeStats {
    let mut parser = LineParser::default();
    let mut blocks = Blocks::default();
    for line in tree {
        let body = trim_indent(line);
        if body.is_empty() {
            continue;
        }
        let indent = line.len() - body.len();
        blocks.close_at(indent, obs);
        let before = obs.chunks.len();
        parser.links_are_text = blocks.in_block();
        parser.body(indent, body, obs);
        blocks.open(indent, body, before, obs);
    }
    blocks.close_all(obs);
    // A table's header row is noted when the table closes, after the headings inside it.
    obs.headings.sort_unstable();
    obs.headings.dedup();
    parser.stats
}

/// `line` without its indentation (leading whitespace, as `str::trim_start` reads it).
/// Indents are ASCII spaces, skipped a word at a time; anything else takes the Unicode way.
fn trim_indent(line: &str) -> &str {
    let rest = line.get(skip_spaces(line.as_bytes(), 0)..).unwrap_or("");
    match rest.as_bytes().first() {
        Some(&b) if is_plain_ascii(b) => rest,
        _ => rest.trim_start(),
    }
}

/// What a block is to a reader, where it matters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    /// A table row: the table notes it.
    Row,
    /// A cell: its link names are its text.
    Cell,
    /// A heading or caption: a label, no evidence alone.
    Label,
    /// A description list's term: read with the definition after it.
    Term,
    /// A description list's definition: read after its term.
    Definition,
    /// A paragraph, list item, quote.
    Text,
    /// Bold or emphasised text with children of its own (`strong` with `code` inside).
    Bold,
}

impl BlockKind {
    fn of(role: &str) -> BlockKind {
        match role {
            "row" => BlockKind::Row,
            "cell" | "gridcell" => BlockKind::Cell,
            "heading" | "caption" => BlockKind::Label,
            "term" => BlockKind::Term,
            "definition" => BlockKind::Definition,
            "strong" | "emphasis" => BlockKind::Bold,
            _ => BlockKind::Text,
        }
    }
}

/// A node whose children are being read.
enum Frame {
    /// A block: its indent, the index of its first chunk, whether it is a row or a cell.
    /// When it closes, the chunks its children gave become one chunk, joined in reading
    /// order, so no sentence loses its number to a `strong` child or a link's name.
    Block {
        indent: usize,
        first: usize,
        kind: BlockKind,
    },
    /// A node that gave its name as a chunk (a heading, a row, a link in a sentence): its
    /// children's text repeats the name, so it is left out when the node closes.
    Named { indent: usize, at: usize },
    /// A table: its indent and the chunks of its rows.
    Table { indent: usize, rows: Vec<usize> },
}

impl Frame {
    fn indent(&self) -> usize {
        match self {
            Frame::Block { indent, .. }
            | Frame::Named { indent, .. }
            | Frame::Table { indent, .. } => *indent,
        }
    }
}

/// The blocks and tables the parser is inside of, and which chunks are link names: a
/// block of link names alone is a link list (navigation, a table of contents), no text.
#[derive(Default)]
struct Blocks {
    frames: Vec<Frame>,
    /// Indices of chunks that are link names, ascending.
    links: Vec<usize>,
    /// The chunk of the last term read, which the definition right after it joins.
    term: Option<usize>,
    /// Indices of chunks that are a `strong` or `emphasis` node's text, ascending.
    bold: Vec<usize>,
}

impl Blocks {
    /// True when a line now would be read inside a block: a link's name there is part of
    /// a sentence.
    fn in_block(&self) -> bool {
        self.frames.iter().rev().find_map(|f| match f {
            Frame::Block { .. } => Some(true),
            Frame::Table { .. } => Some(false),
            Frame::Named { .. } => None,
        }) == Some(true)
    }

    /// Opens a block when `body` (a line without its `indent`) is a block node whose text
    /// is in its children, or a table; notes a named row, a heading and a link's name.
    /// `first` is the number of chunks before the line.
    fn open(&mut self, indent: usize, body: &str, first: usize, obs: &mut Observation<'_>) {
        let Some(rest) = body.strip_prefix("- ") else {
            return;
        };
        let rest = rest.strip_prefix("<changed> ").unwrap_or(rest);
        let rest = rest.strip_prefix('\'').unwrap_or(rest);
        let has_children = trim_end(rest).ends_with(':');
        let gave_text = obs.chunks.len() > first;
        // Most lines are leaves that gave no text: nothing opens, no role to read.
        if !has_children && !gave_text {
            return;
        }
        let role_end = rest
            .bytes()
            .position(|b| matches!(b, b' ' | b':' | b'['))
            .unwrap_or(rest.len());
        let role = rest.get(..role_end).unwrap_or(rest);
        if gave_text {
            match role {
                "row" => self.add_row(first),
                "heading" | "caption" => obs.headings.extend(first..obs.chunks.len()),
                "link" => self.links.extend(first..obs.chunks.len()),
                "strong" | "emphasis" => self.bold.extend(first..obs.chunks.len()),
                "term" => self.term = Some(first),
                _ => {}
            }
        }
        if !has_children {
            return;
        }
        if TABLE_ROLES.contains(&role) {
            self.frames.push(Frame::Table {
                indent,
                rows: Vec::new(),
            });
        } else if gave_text {
            self.frames.push(Frame::Named { indent, at: first });
        } else if READING_BLOCK_ROLES.contains(&role) {
            let kind = BlockKind::of(role);
            self.frames.push(Frame::Block {
                indent,
                first,
                kind,
            });
        }
    }

    /// Tells the innermost table that chunk `at` is one of its rows.
    fn add_row(&mut self, at: usize) {
        let table = self.frames.iter_mut().rev().find_map(|f| match f {
            Frame::Table { rows, .. } => Some(rows),
            _ => None,
        });
        if let Some(rows) = table {
            rows.push(at);
        }
    }

    /// Closes the frames that a line at `indent` is not inside of.
    fn close_at(&mut self, indent: usize, obs: &mut Observation<'_>) {
        while self.frames.last().is_some_and(|f| indent <= f.indent()) {
            self.close_last(obs);
        }
    }

    fn close_all(&mut self, obs: &mut Observation<'_>) {
        while !self.frames.is_empty() {
            self.close_last(obs);
        }
    }

    /// Drops the chunks from `first` on, and what was noted of them.
    fn truncate(&mut self, first: usize, obs: &mut Observation<'_>) {
        obs.chunks.truncate(first);
        obs.table_ends.retain(|&i| i < first);
        obs.headings.retain(|&i| i < first);
        self.links.retain(|&i| i < first);
        self.bold.retain(|&i| i < first);
    }

    fn close_last(&mut self, obs: &mut Observation<'_>) {
        match self.frames.pop() {
            Some(Frame::Block { first, kind, .. }) => self.close_block(first, kind, obs),
            Some(Frame::Named { at, .. }) => self.truncate(at + 1, obs),
            // A label table's rows are its last chunks, none of them empty.
            Some(Frame::Table { rows, .. }) if self.is_label_table(&rows, obs) => {
                if let Some(&first) = rows.first() {
                    self.join_from(first, obs);
                }
            }
            Some(Frame::Table { rows, .. }) => {
                let numbered: Vec<usize> = rows
                    .iter()
                    .copied()
                    .filter(|&i| {
                        obs.chunks
                            .get(i)
                            .is_some_and(|c| c.bytes().any(|b| b.is_ascii_digit()))
                    })
                    .collect();
                obs.table_ends.extend(numbered.first());
                obs.table_ends
                    .extend(numbered.last().filter(|_| numbered.len() > 1));
                // A first row without numbers above rows with numbers is the table's header:
                // labels, as a heading is.
                let first = rows.first().copied();
                if first.is_some_and(|at| !numbered.is_empty() && !numbered.contains(&at)) {
                    obs.headings.extend(first);
                }
            }
            None => {}
        }
    }

    /// Joins the chunks a block's children gave into one; a block of link names alone is
    /// a link list and gives none, but for a cell, whose row reads it. A definition joins
    /// the term right before it: `--cached Use this option to ...`.
    fn close_block(&mut self, first: usize, kind: BlockKind, obs: &mut Observation<'_>) {
        let linked = self.links.iter().any(|&i| i >= first);
        // Link names and punctuation between them (`git-rm(1) , git-add(1)`) are a list.
        let words = |i: usize| {
            obs.chunks
                .get(i)
                .is_some_and(|c| c.chars().any(char::is_alphanumeric))
        };
        let mut text = (first..obs.chunks.len()).filter(|i| self.links.binary_search(i).is_err());
        let only_links = linked && !text.any(words);
        if only_links && kind != BlockKind::Cell {
            self.truncate(first, obs);
            return;
        }
        let kind = match kind {
            BlockKind::Text if self.bold_label(first, obs) => BlockKind::Label,
            kind => kind,
        };
        let term = self
            .term
            .filter(|&t| kind == BlockKind::Definition && t + 1 == first);
        let from = term.unwrap_or(first);
        if obs.chunks.len() >= from + 2 {
            self.join_from(from, obs);
            if only_links {
                self.links.push(from);
            }
        }
        let gave = obs.chunks.len() > first;
        match kind {
            BlockKind::Row if gave => self.add_row(first),
            BlockKind::Label if gave => obs.headings.push(first),
            BlockKind::Term if gave => self.term = Some(first),
            BlockKind::Bold if gave => self.bold.push(first),
            _ => {}
        }
    }
}

impl Blocks {
    /// A short table whose every row is a label and its value (`Default: SSLProtocol all
    /// -SSLv3`), its rows the table's last chunks: a reader reads it whole, as a definition
    /// list, and a value is found by the label beside it.
    fn is_label_table(&self, rows: &[usize], obs: &Observation<'_>) -> bool {
        let Some(&first) = rows.first() else {
            return false;
        };
        let contiguous = rows.iter().copied().eq(first..obs.chunks.len());
        let chunks = obs.chunks.get(first..).unwrap_or_default();
        let bytes: usize = chunks.iter().map(|c| c.len() + 1).sum();
        let labelled = |c: &Cow<'_, str>| {
            c.split_once(": ").is_some_and(|(label, _)| {
                !label.is_empty() && label.len() <= MAX_LABEL && !label.contains(':')
            })
        };
        contiguous
            && (2..=MAX_LABEL_ROWS).contains(&rows.len())
            && bytes <= MAX_LABEL_TABLE
            && chunks.iter().all(labelled)
    }

    /// The chunks from `first` on as one, in reading order (a block's pieces, a label
    /// table's rows).
    fn join_from(&mut self, first: usize, obs: &mut Observation<'_>) {
        let pieces = obs.chunks.get(first..).unwrap_or_default();
        let joined = pieces
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        self.truncate(first, obs);
        obs.chunks.push(Cow::Owned(joined));
    }

    /// A paragraph that is one short bold line, no sentence (`Table 28.1. Dynamic
    /// Statistics Views`, `Note`): a caption or heading in all but its role.
    fn bold_label(&self, first: usize, obs: &Observation<'_>) -> bool {
        let chunks = obs.chunks.get(first..).unwrap_or_default();
        let all_bold = (first..obs.chunks.len()).all(|i| self.bold.binary_search(&i).is_ok());
        let text_len: usize = chunks.iter().map(|c| c.trim().len()).sum();
        let sentence = chunks
            .last()
            .is_some_and(|c| c.trim_end().ends_with(['.', '!', '?']));
        !chunks.is_empty() && all_bold && text_len <= MAX_BOLD_LABEL && !sentence
    }
}

/// Rows of a label table at most (Apache's directive summaries have 5 to 7).
const MAX_LABEL_ROWS: usize = 8;

/// Bytes of a label table's text at most: it must fit one quote.
const MAX_LABEL_TABLE: usize = 1024;

/// Bytes of a label (`Compatibility`) at most.
const MAX_LABEL: usize = 24;

/// Bytes of a bold line that reads as a caption or heading at most.
const MAX_BOLD_LABEL: usize = 100;

/// The canonical nodes of `tree`, as a full parse finds them.
pub fn tree_nodes(tree: &str) -> Vec<Node> {
    let mut obs = Observation::new("aria", super::model::TreeKind::Full);
    parse_tree(tree, &mut obs);
    obs.nodes
}

/// One line of text: its start offset, the offset of the next line, and the text without
/// the line break (`\n` or `\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// Offset of the line's first byte.
    pub start: usize,
    /// Offset of the next line's first byte (past the line break).
    pub next: usize,
    /// The line, without its line break.
    pub text: &'a str,
}

/// Iterates the lines of `text` with `memchr`.
pub(crate) fn lines(text: &str) -> Lines<'_> {
    Lines { text, pos: 0 }
}

/// Iterator returned by [`lines`].
#[derive(Debug, Clone)]
pub(crate) struct Lines<'a> {
    text: &'a str,
    pos: usize,
}

impl Lines<'_> {
    /// Continues at byte `pos` of the text (the start of a line).
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        let start = self.pos;
        let rest = self.text.get(start..).filter(|r| !r.is_empty())?;
        let len = memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        self.pos = start + len + 1;
        // `\n` is ASCII, so `len` is always a char boundary.
        let line = rest.get(..len).unwrap_or(rest);
        let text = line.strip_suffix('\r').unwrap_or(line);
        Some(Line {
            start,
            next: self.pos.min(self.text.len()),
            text,
        })
    }
}

/// Parses tree lines one at a time, keeping the buffer the node hashes are built in from
/// one line to the next.
#[derive(Default)]
pub(crate) struct LineParser {
    /// What the lines parsed so far contained.
    pub stats: TreeStats,
    canon: Vec<u8>,
    /// List controls in [`Observation::controls`] (only the tests' `controls` does).
    controls: bool,
    /// The next line is read inside a block, where a link's name is part of a sentence.
    links_are_text: bool,
}

/// The controls of an aria tree: every node of a [`CONTROL_ROLES`] role, with its name,
/// value and sorted states. A parse leaves them out of `Observation::controls`: the tree's
/// nodes already carry them into the fingerprint, and on a dense page of buttons listing them
/// took a third of the parse's memory. Tests of each format's parse list them.
#[cfg(test)]
pub(crate) fn controls(tree: &str) -> Vec<Control<'_>> {
    let mut obs = Observation::new("aria", super::model::TreeKind::Full);
    let mut parser = LineParser {
        controls: true,
        ..LineParser::default()
    };
    for line in lines(tree) {
        parser.line(line.text, &mut obs);
    }
    obs.controls
}

/// The controls of an observation's tree, for tests of each format's parse.
#[cfg(test)]
pub(crate) fn controls_of<'a>(obs: &Observation<'a>) -> Vec<Control<'a>> {
    controls(obs.tree.unwrap_or(""))
}

impl LineParser {
    /// Parses one tree line into `obs`: its canonical `Node` for the fingerprint, and, for
    /// node lines, its ref and text chunks. Lines that are not nodes (property
    /// lines such as `- /url: ...`, prose, broken quoting) add only their text to the
    /// fingerprint.
    pub(crate) fn line<'a>(&mut self, line: &'a str, obs: &mut Observation<'a>) {
        let body = trim_indent(line);
        if !body.is_empty() {
            self.body(line.len() - body.len(), body, obs);
        }
    }

    /// Parses a non-empty line given without its `indent`.
    fn body<'a>(&mut self, indent: usize, body: &'a str, obs: &mut Observation<'a>) {
        let indent = u32::try_from(indent).unwrap_or(u32::MAX);
        let Some(rest) = body.strip_prefix("- ") else {
            obs.nodes.push(Node::text(&mut self.canon, indent, body));
            return;
        };
        let rest = match rest.strip_prefix("<changed> ") {
            Some(changed) => {
                self.stats.diff = true;
                changed
            }
            None => rest,
        };
        if let Some(id) = unchanged_ref(rest) {
            self.stats.diff = true;
            self.stats.nodes += 1;
            obs.nodes.push(Node {
                indent,
                id: ref_hash(id),
                unchanged: true,
                hash: 0,
            });
            obs.refs.push(ElementRef {
                id: Cow::Borrowed(id),
                role: Cow::Borrowed(""),
                name: Cow::Borrowed(""),
            });
            return;
        }
        let Some((src, key, after)) = split_key(rest) else {
            obs.nodes.push(Node::text(&mut self.canon, indent, rest));
            return;
        };
        self.stats.nodes += 1;
        let what = Emit {
            controls: self.controls,
            links_are_text: self.links_are_text,
        };
        let (id, hash) = emit(&src, &key, after, obs, &mut self.canon, what);
        obs.nodes.push(Node {
            indent,
            id: id.map_or(0, ref_hash),
            unchanged: false,
            hash,
        });
    }
}

/// The hash a `Node` keeps of its ref, to merge diffs: never part of the fingerprint.
pub(crate) fn ref_hash(id: &str) -> u64 {
    // 0 stands for "no ref".
    xxhash_rust::xxh3::xxh3_64(id.as_bytes()).max(1)
}

/// Counts the refs [`parse_tree`] would find, and tells whether the tree is a diff, without
/// building anything. Trees can be MBs with a ref on nearly every line, so each line is read
/// once, in place, by a byte-level reader; lines it does not vouch for go to the same key
/// parser as [`LineParser::line`].
pub(crate) fn count_refs(tree: &str) -> (usize, bool) {
    let (count, diff, _) = count_lines(tree, 0, false);
    (count, diff)
}

/// [`count_refs`] of the tree that starts at `from` in `text` and runs to the first bare
/// closing fence line (`` ``` `` and ASCII whitespace) or the end; also returns where that
/// line starts. One walk, instead of a search for the fence and then a count.
pub(crate) fn count_refs_to_fence(text: &str, from: usize) -> (usize, bool, usize) {
    count_lines(text, from, true)
}

fn count_lines(text: &str, from: usize, stop_at_fence: bool) -> (usize, bool, usize) {
    let b = text.as_bytes();
    let (mut count, mut diff) = (0, false);
    let mut start = from;
    while start < b.len() {
        let (verdict, read_to) = fast_line_ref(b, start);
        let end = line_end(b, read_to);
        if stop_at_fence
            && b.get(start) == Some(&b'`')
            && is_fence_line(b.get(start..end).unwrap_or(&[]))
        {
            return (count, diff, start);
        }
        let (has_ref, changed) = match verdict {
            Some(has_ref) => (has_ref, false),
            None => {
                // `\n` is ASCII, so both ends are char boundaries.
                let line = text.get(start..end).unwrap_or("");
                line_ref(line.strip_suffix('\r').unwrap_or(line))
            }
        };
        count += usize::from(has_ref);
        diff |= changed;
        start = end + 1;
    }
    (count, diff, b.len())
}

/// A line that closes a fence: `` ``` `` and nothing but ASCII whitespace.
fn is_fence_line(line: &[u8]) -> bool {
    line.strip_prefix(b"```")
        .is_some_and(|rest| rest.iter().all(u8::is_ascii_whitespace))
}

/// Whether the line starting at `start` carries a ref, when it has the common shape
/// `<spaces>- role[ "name"][ [attr]...]...`; it then is no diff line. Also returns how far
/// it read, never past the line's `\n`. `None` when the line may need more than that
/// (diff lines, quoted keys, regex names, other whitespace, unusual brackets): the caller
/// asks [`line_ref`], so both always agree.
fn fast_line_ref(b: &[u8], start: usize) -> (Option<bool>, usize) {
    let mut i = skip_spaces(b, start);
    match (b.get(i), b.get(i + 1)) {
        (Some(b'-'), Some(b' ')) => i += 2,
        // Nothing but spaces, or a first byte that is neither whitespace nor `- `: no node.
        (None | Some(b'\n'), _) => return (Some(false), i),
        (Some(&c), _) => return ((c.is_ascii() && !is_ascii_space(c)).then_some(false), i),
    }
    match b.get(i) {
        // `<changed> `, `ref=e4 [unchanged]`, a single-quoted key: the exact reader decides.
        Some(b'<' | b'\'') => return (None, i),
        Some(b'r') if b.get(i..i + 4) == Some(b"ref=") => return (None, i),
        // What follows `- ` must start with a letter to be a node (see `parse_key`).
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return (Some(false), i),
    }
    while b.get(i).is_some_and(|&c| is_role_byte(c)) {
        i += 1;
    }
    if b.get(i) == Some(&b' ') {
        match b.get(i + 1) {
            // An unterminated name makes the line no node at all.
            Some(b'"') => match closing_quote_in_line(b, i + 2) {
                Some(close) => i = close + 1,
                None => return (Some(false), i),
            },
            Some(b'/') => return (None, i),
            _ => {}
        }
    }
    attrs_have_ref(b, i)
}

/// Reads the attribute brackets at `i` as `parse_key` does, up to the line's end.
fn attrs_have_ref(b: &[u8], mut i: usize) -> (Option<bool>, usize) {
    let mut found = false;
    while b.get(i) == Some(&b' ') && b.get(i + 1) == Some(&b'[') {
        let content = b.get(i + 2..).unwrap_or(&[]);
        // A bracket left open on its line ends the attributes.
        let Some(close) =
            find_any(content, [b']', b'\n', b'\n']).filter(|&c| content.get(c) == Some(&b']'))
        else {
            break;
        };
        match bracket_has_ref(content.get(..close).unwrap_or(&[])) {
            Some(has) => found |= has,
            None => return (None, i),
        }
        i += 2 + close + 1;
    }
    (Some(found), i)
}

/// Offset of the `\n` that ends the line holding `at` (or the end of `b`). What is left of
/// a tree line after its attributes is mostly nothing or `:`, so look close first.
fn line_end(b: &[u8], at: usize) -> usize {
    let rest = b.get(at..).unwrap_or(&[]);
    let near = rest.get(..8).unwrap_or(rest);
    let found = match near.iter().position(|&c| c == b'\n') {
        Some(i) => Some(i),
        None => memchr(b'\n', rest),
    };
    at + found.unwrap_or(rest.len())
}

/// Offset of the first byte at or after `i` that is not a space, a word at a time:
/// indentation runs deep in large trees.
fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::MAX / 255;
    while let Some(Ok(chunk)) = b.get(i..i + 8).map(<[u8; 8]>::try_from) {
        let x = u64::from_le_bytes(chunk) ^ (ONES * u64::from(b' '));
        // Flags every byte of `x` that is not zero, that is every byte that is not a space.
        let other = (((x & (ONES * 0x7f)) + ONES * 0x7f) | x) & (ONES << 7);
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// Offset of the `"` that closes a name whose text starts at `from`, as [`closing_double_quote`]
/// finds it in the line; `None` when the line ends first.
fn closing_quote_in_line(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let at = i + find_any(b.get(i..)?, [b'"', b'\\', b'\n'])?;
        match b.get(at) {
            Some(b'"') => return Some(at),
            // A backslash escapes the byte after it, unless that ends the line.
            Some(b'\\') if b.get(at + 1) != Some(&b'\n') => i = at + 2,
            _ => return None,
        }
    }
}

/// Whether one attribute bracket's content holds a `ref=<id>` item, as [`attr_items`] splits
/// it. `None` when the content has a `[` (which restarts an item there) or non-ASCII bytes
/// (which `trim` may treat as whitespace).
fn bracket_has_ref(content: &[u8]) -> Option<bool> {
    // Playwright's own shape, `[ref=e12]`, needs no splitting.
    if let Some(id) = content.strip_prefix(b"ref=") {
        if !id.is_empty() && id.iter().all(|&c| is_role_byte(c)) {
            return Some(true);
        }
    }
    if content.iter().any(|&c| c == b'[' || !c.is_ascii()) {
        return None;
    }
    let is_ref = |item: &[u8]| {
        let start = item
            .iter()
            .position(|&c| !is_ascii_space(c))
            .unwrap_or(item.len());
        let end = item
            .iter()
            .rposition(|&c| !is_ascii_space(c))
            .map_or(start, |e| e + 1);
        let id = item.get(start..end).and_then(|t| t.strip_prefix(b"ref="));
        id.is_some_and(|id| !id.is_empty() && id.iter().all(|&c| is_role_byte(c)))
    };
    Some(content.split(|&c| c == b',').any(is_ref))
}

/// Index of the first byte of `hay` that is one of `bytes`, a word at a time: names and
/// attribute brackets are too short for a `memchr` call to pay off.
fn find_any(hay: &[u8], bytes: [u8; 3]) -> Option<usize> {
    const ONES: u64 = u64::MAX / 255;
    let mut at = 0;
    while let Some(word) = hay.get(at..at + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let w = u64::from_le_bytes(chunk);
        // A zero byte of `w ^ splat(x)` is a match; its lowest flagged bit marks the first
        // one, as borrows only spill upward.
        let zero = |x: u8| {
            let v = w ^ (ONES * u64::from(x));
            v.wrapping_sub(ONES) & !v
        };
        let found = (zero(bytes[0]) | zero(bytes[1]) | zero(bytes[2])) & (ONES << 7);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = hay.get(at..)?;
    tail.iter().position(|c| bytes.contains(c)).map(|i| at + i)
}

/// `s.trim()`, answered without decoding when `s` starts and ends with ASCII that is no
/// space (a continuation byte is never ASCII, so the last byte is then the last char).
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(&a), Some(&z)) if is_plain_ascii(a) && is_plain_ascii(z) => s,
        _ => s.trim(),
    }
}

/// `s.trim_end()`, answered without decoding when `s` ends with ASCII that is no space.
fn trim_end(s: &str) -> &str {
    match s.as_bytes().last() {
        Some(&z) if is_plain_ascii(z) => s,
        _ => s.trim_end(),
    }
}

/// An ASCII byte that is no whitespace.
fn is_plain_ascii(b: u8) -> bool {
    b.is_ascii() && !is_ascii_space(b)
}

/// The ASCII bytes `char::is_whitespace` accepts (unlike `u8::is_ascii_whitespace`, which
/// leaves out vertical tab).
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// A byte of a role: `[A-Za-z0-9_-]`. A table lookup: this runs on most bytes of a tree.
fn is_role_byte(c: u8) -> bool {
    ROLE_BYTES[usize::from(c)]
}

static ROLE_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        table[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        c += 1;
    }
    table
};

/// Whether a tree line carries a ref, and whether it is a diff line, as
/// [`LineParser::line`] reads it.
fn line_ref(line: &str) -> (bool, bool) {
    let Some(rest) = line.trim_start().strip_prefix("- ") else {
        return (false, false);
    };
    let (rest, changed) = match rest.strip_prefix("<changed> ") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    if unchanged_ref(rest).is_some() {
        return (true, true);
    }
    let Some((src, key, _)) = split_key(rest) else {
        return (false, changed);
    };
    let mut found = false;
    attr_items(&src, key.attrs, |(a, b)| {
        let item = src.get(a..b).unwrap_or("");
        found |= item.strip_prefix("ref=").is_some_and(is_ref_id);
    });
    (found, changed)
}

/// `ref=e4 [unchanged]`: a subtree the diff leaves as it was; its ref is still on the page.
fn unchanged_ref(rest: &str) -> Option<&str> {
    let (id, tail) = rest.strip_prefix("ref=")?.split_once(' ')?;
    (tail.trim_end() == "[unchanged]" && is_ref_id(id)).then_some(id)
}

pub(crate) use crate::refs::is_ref_id;

/// Byte range into the key source.
type Span = (usize, usize);

/// The key of a node line: its role, the raw (still escaped) quoted name, and the region
/// holding the attribute brackets.
#[derive(Debug, Clone, Copy)]
struct Key {
    role: Span,
    name: Option<Span>,
    /// The name may hold backslash escapes (a quoted name had one; a bare `/regex/` name
    /// is not searched).
    escaped: bool,
    attrs: Span,
}

/// A tree line as the grammar reads it, for a reader that works line by line (the lean
/// page): the same reading [`LineParser`] makes of each line, without what it emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind<'a> {
    /// `- role ["name"] [attrs][: text]`: a node.
    Node(NodeLine<'a>),
    /// `- /url: ...`: a property of the node above it.
    Property,
    /// Anything else: the rest of a value begun above, or a line that is no node (a broken
    /// quote), whose text is only text.
    Text,
}

/// A node line's parts, borrowed from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeLine<'a> {
    pub(crate) role: &'a str,
    /// What follows the role: the name, the attribute brackets, `: text` or `:` (and the
    /// closing quote of a YAML-quoted key).
    pub(crate) after_role: &'a str,
    /// The node has a name in double quotes (`link "Docs"`).
    pub(crate) quoted_name: bool,
}

/// Reads `body`, a tree line without its indent.
pub(crate) fn line_kind(body: &str) -> LineKind<'_> {
    let Some(rest) = body.strip_prefix("- ") else {
        return LineKind::Text;
    };
    let rest = rest.strip_prefix("<changed> ").unwrap_or(rest);
    if rest.starts_with('/') {
        return LineKind::Property;
    }
    let Some((_, key, _)) = split_key(rest) else {
        return LineKind::Text;
    };
    // The role's bytes are the same in the line and in an unquoted key: it holds no quote.
    let written = rest.strip_prefix('\'').unwrap_or(rest);
    let end = key.role.1;
    let (Some(role), Some(after_role)) = (written.get(..end), written.get(end..)) else {
        return LineKind::Text;
    };
    LineKind::Node(NodeLine {
        role,
        after_role,
        quoted_name: after_role.starts_with(" \""),
    })
}

/// Splits a node line (after `- `) into its key and what follows the key. YAML single-quotes
/// a key that contains `: ` (`- 'link "Review: X" [ref=e8]':`); such a key is unquoted first,
/// into an owned string only when it contains a doubled quote.
#[inline(always)]
fn split_key(rest: &str) -> Option<(Cow<'_, str>, Key, &str)> {
    if let Some(quoted) = rest.strip_prefix('\'') {
        let end = single_quote_end(quoted)?;
        let inner = quoted.get(..end)?;
        let after = quoted.get(end + 1..)?;
        let src = if inner.contains("''") {
            Cow::Owned(inner.replace("''", "'"))
        } else {
            Cow::Borrowed(inner)
        };
        let (key, _) = parse_key(&src)?;
        return Some((src, key, after));
    }
    let (key, used) = parse_key(rest)?;
    Some((Cow::Borrowed(rest), key, rest.get(used..)?))
}

/// Index of the quote that closes a YAML single-quoted scalar (`''` is an escaped quote).
fn single_quote_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            if b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Parses `role[ "name"][ [attrs]...]` at the start of `s`; returns the key and its length.
#[inline(always)]
fn parse_key(s: &str) -> Option<(Key, usize)> {
    let b = s.as_bytes();
    let role_end = b.iter().position(|&c| !is_role_byte(c)).unwrap_or(b.len());
    // Property lines (`/url:`) and anything else that does not start with a letter are no node.
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let (name, escaped, mut pos) = match name_at(s, role_end)? {
        Some((span, escaped, end)) => (Some(span), escaped, end),
        None => (None, false, role_end),
    };
    let attrs_start = pos;
    // Bytewise: every position compared is ASCII, so every slice ends on a char boundary.
    while b.get(pos..pos + 2) == Some(b" [") {
        // Brackets are short: a plain scan beats setting up a vector search.
        let Some(close) = b
            .get(pos + 2..)
            .and_then(|r| r.iter().position(|&c| c == b']'))
        else {
            break;
        };
        pos += 2 + close + 1;
    }
    let attrs = (attrs_start, pos);
    if b.get(pos) == Some(&b' ') {
        pos += hint_len(s.get(pos..).unwrap_or(""));
    }
    Some((
        Key {
            role: (0, role_end),
            name,
            escaped,
            attrs,
        },
        pos,
    ))
}

/// The name after the role, whether it may hold escapes, and where it ends: `Some(None)`
/// when there is none, `None` when it is broken (an unterminated quote), so a broken line
/// yields no ref at all.
fn name_at(s: &str, pos: usize) -> Option<Option<(Span, bool, usize)>> {
    let rest = s.get(pos..)?;
    if !rest.starts_with(' ') {
        return Some(None);
    }
    if let Some(q) = rest.strip_prefix(" \"") {
        let (end, escaped) = closing_double_quote(q)?;
        let start = pos + 2;
        return Some(Some(((start, start + end), escaped, start + end + 1)));
    }
    // Playwright prints a name that starts and ends with `/` bare, as a regex would be.
    if let Some(r) = rest.strip_prefix(" /") {
        let stop = r.find(" [").unwrap_or(r.trim_end_matches(':').len());
        let last = r.get(..stop)?.rfind('/').map_or(0, |i| i + 1);
        let start = pos + 1;
        return Some(Some(((start, start + 1 + last), true, start + 1 + last)));
    }
    Some(None)
}

/// Index of the unescaped `"` that closes a double-quoted string, and whether a backslash
/// came before it. Jumps between quotes and backslashes with `memchr2`: names are read on
/// every line of every tree.
fn closing_double_quote(s: &str) -> Option<(usize, bool)> {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(at) = b
        .get(i..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        if b.get(i + at) == Some(&b'"') {
            return Some((i + at, i > 0));
        }
        // A backslash escapes the byte after it.
        i += at + 2;
    }
    None
}

/// agent-browser prints cursor-interactive hints after the attributes:
/// ` clickable [cursor:pointer, onclick]`. They are skipped, and never read for refs.
fn hint_len(rest: &str) -> usize {
    for kind in [" clickable [", " focusable [", " editable ["] {
        if let Some(r) = rest.strip_prefix(kind) {
            return memchr(b']', r.as_bytes()).map_or(0, |close| kind.len() + close + 1);
        }
    }
    0
}

/// The text after the key: `: <text>` (YAML-unquoted), or nothing for `:` and bare keys.
fn value_of(after: &str) -> Option<Cow<'_, str>> {
    let v = trim(after.strip_prefix(':')?);
    (!v.is_empty()).then(|| unquote(v))
}

/// Removes YAML quoting from a scalar: `"..."` (JSON escapes), `'...'` (`''`), or plain.
pub(crate) fn unquote(v: &str) -> Cow<'_, str> {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return unescape(v.get(1..v.len() - 1).unwrap_or(""));
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        let inner = v.get(1..v.len() - 1).unwrap_or("");
        return if inner.contains("''") {
            Cow::Owned(inner.replace("''", "'"))
        } else {
            Cow::Borrowed(inner)
        };
    }
    Cow::Borrowed(v)
}

/// Resolves the backslash escapes of a double-quoted string (JSON / YAML style). Borrows
/// when there is no escape.
pub(crate) fn unescape(raw: &str) -> Cow<'_, str> {
    if memchr(b'\\', raw.as_bytes()).is_none() {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('0') => out.push('\0'),
            Some('u') => out.push(unicode_escape(&mut chars)),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// Decodes the `XXXX` of a `\uXXXX` escape, joining surrogate pairs; U+FFFD when invalid.
fn unicode_escape(chars: &mut std::str::Chars<'_>) -> char {
    let Some(high) = hex4(chars) else {
        return '\u{FFFD}';
    };
    if (0xD800..0xDC00).contains(&high) {
        let mut look = chars.clone();
        if look.as_str().starts_with("\\u") {
            look.nth(1);
            if let Some(low @ 0xDC00..=0xDFFF) = hex4(&mut look) {
                *chars = look;
                let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(c).unwrap_or('\u{FFFD}');
            }
        }
    }
    char::from_u32(high).unwrap_or('\u{FFFD}')
}

/// Reads four hex digits from `chars`.
fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let s = chars.as_str();
    let digits = s.get(..4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u32::from_str_radix(digits, 16).ok()?;
    *chars = s.get(4..)?.chars();
    Some(v)
}

/// A slice of the key source with the source's lifetime (borrowed when the source is).
#[inline(always)]
fn span<'a>(src: &Cow<'a, str>, (a, b): Span) -> Cow<'a, str> {
    match src {
        Cow::Borrowed(s) => Cow::Borrowed(s.get(a..b).unwrap_or("")),
        Cow::Owned(s) => Cow::Owned(s.get(a..b).unwrap_or("").to_owned()),
    }
}

/// Unescapes a name taken from the key source, keeping the borrow when possible.
fn unescape_cow(raw: Cow<'_, str>) -> Cow<'_, str> {
    match raw {
        Cow::Borrowed(s) => unescape(s),
        Cow::Owned(s) => Cow::Owned(unescape(&s).into_owned()),
    }
}

/// Calls `f` with the span of every comma-separated item of every attribute bracket:
/// `[level=1] [ref=e2]` and `[level=1, ref=e1]` both give `level=1` and the ref.
fn attr_items(src: &str, (start, end): Span, mut f: impl FnMut(Span)) {
    let Some(region) = src.get(start..end) else {
        return;
    };
    let bytes = region.as_bytes();
    let (mut item, mut at) = (0, 0);
    // Jumps between bracket and comma bytes, a word at a time: this runs on every node line.
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| find_any(rest, [b'[', b',', b']']))
    {
        let i = at + found;
        if bytes.get(i) == Some(&b'[') {
            item = i + 1;
        } else {
            let text = region.get(item..i).unwrap_or("");
            let trimmed = trim(text);
            let lead = trimmed.as_ptr() as usize - text.as_ptr() as usize;
            if !trimmed.is_empty() {
                let a = start + item + lead;
                f((a, a + trimmed.len()));
            }
            item = i + 1;
        }
        at = i + 1;
    }
}

/// True for an attribute that describes page state (kept in the control's states).
fn is_state(attr: &str) -> bool {
    attr != "active" && !NON_STATE_PREFIXES.iter().any(|p| attr.starts_with(p))
}

/// Adds the node's ref and text chunks (and its control, when `controls`) to `obs`;
/// returns its ref and the hash of its canonical form: role, name, state attributes in
/// sorted order and the text after the key. Refs, focus and cursor hints are left out, so a
/// re-render that only renumbered refs hashes alike.
// `&Cow` rather than `&str`: whether the source borrows from the input decides whether the
// parts can borrow with the input's lifetime.
#[allow(clippy::ptr_arg)]
fn emit<'a, 's>(
    src: &'s Cow<'a, str>,
    key: &Key,
    after: &'a str,
    obs: &mut Observation<'a>,
    canon: &mut Vec<u8>,
    what: Emit,
) -> (Option<&'s str>, u128) {
    let controls = what.controls;
    let role = span(src, key.role);
    let raw_name = key.name.and_then(|n| src.get(n.0..n.1));
    let name = key.name.map(|n| match key.escaped {
        true => unescape_cow(span(src, n)),
        false => span(src, n),
    });
    let control = is_control_role(&role);
    let keep_control = control && controls;
    let mut id = None;
    let mut ref_text = None;
    let mut states = Vec::new();
    let mut attrs = Attrs::default();
    let region = src.get(key.attrs.0..key.attrs.1).unwrap_or("");
    // Most node lines carry exactly one bracket, their ref: read it without the general walk.
    let only_ref = region
        .strip_prefix(" [ref=")
        .and_then(|r| r.strip_suffix(']'))
        .filter(|r| is_ref_id(r));
    if let Some(r) = only_ref {
        let at = key.attrs.0 + " [ref=".len();
        id = Some(span(src, (at, at + r.len())));
        ref_text = Some(r);
    }
    let walk = if only_ref.is_some() {
        (0, 0)
    } else {
        key.attrs
    };
    attr_items(src, walk, |item| {
        let text = src.get(item.0..item.1).unwrap_or("");
        if let Some(r) = text.strip_prefix("ref=") {
            if id.is_none() && is_ref_id(r) {
                id = Some(span(src, (item.0 + 4, item.1)));
                ref_text = src.get(item.0 + 4..item.1);
            }
        } else if is_state(text) {
            attrs.push(item);
            if keep_control {
                states.push(span(src, item));
            }
        }
    });
    let hash = node_hash(canon, src, &role, raw_name, &mut attrs, trim_end(after));
    if let Some(id) = id {
        // A generic node (a clickable `div`) without a name that shows its text inline
        // (`- generic [ref=e7]: Resend in 39s`) goes by that text: it is what the model
        // calls it. A control's inline text is its value; a paragraph's is page text.
        let shown = || (&*role == "generic").then(|| value_of(after)).flatten();
        obs.refs.push(ElementRef {
            id,
            role: role.clone(),
            name: name.clone().or_else(shown).unwrap_or(Cow::Borrowed("")),
        });
    }
    if control {
        // A link's name inside a paragraph or list item is a word of its sentence.
        if what.links_are_text && &*role == "link" {
            obs.chunks
                .extend(name.clone().filter(|n| !n.trim().is_empty()));
        }
        // A control's value is its own, not page text.
        if keep_control {
            states.sort();
            obs.controls.push(Control {
                role,
                name: name.unwrap_or(Cow::Borrowed("")),
                value: value_of(after),
                states,
            });
        }
        return (ref_text, hash);
    }
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        if NAMED_TEXT_ROLES.contains(&role.as_ref()) {
            obs.chunks.push(name);
        }
    }
    obs.chunks.extend(value_of(after));
    (ref_text, hash)
}

/// What [`emit`] takes from a node besides its text.
#[derive(Clone, Copy)]
struct Emit {
    /// List controls.
    controls: bool,
    /// A link's name is page text (the node is inside a block).
    links_are_text: bool,
}

/// State attribute spans of one node, inline up to a handful (nearly every node has fewer).
#[derive(Default)]
struct Attrs {
    inline: [Span; 6],
    len: usize,
    spill: Vec<Span>,
}

impl Attrs {
    fn push(&mut self, span: Span) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = span;
                self.len += 1;
            }
            None => self.spill.push(span),
        }
    }

    fn sorted<'s, 'x>(&'x mut self, src: &'s str) -> impl Iterator<Item = &'s str> + 'x
    where
        's: 'x,
    {
        let text = move |s: &Span| src.get(s.0..s.1).unwrap_or("");
        if self.spill.is_empty() {
            self.inline[..self.len].sort_unstable_by_key(text);
        } else {
            self.spill.extend_from_slice(&self.inline[..self.len]);
            self.len = 0;
            self.spill.sort_unstable_by_key(text);
        }
        self.inline[..self.len]
            .iter()
            .chain(self.spill.iter())
            .map(text)
    }
}

/// Hash of a node's canonical form. Each part is length-prefixed, so no two forms collide
/// by shifting bytes between parts. The parts go into one buffer hashed at once (a streaming
/// hasher costs more to set up than a node line costs to hash), kept from line to line.
fn node_hash(
    canon: &mut Vec<u8>,
    src: &str,
    role: &str,
    name: Option<&str>,
    attrs: &mut Attrs,
    after: &str,
) -> u128 {
    canon.clear();
    part(canon, b'r', role.as_bytes());
    if let Some(name) = name {
        part(canon, b'n', name.as_bytes());
    }
    for attr in attrs.sorted(src) {
        part(canon, b'a', attr.as_bytes());
    }
    part(canon, b'v', after.as_bytes());
    xxhash_rust::xxh3::xxh3_128(canon)
}

/// Appends one length-prefixed part of a node's canonical form.
fn part(canon: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    let [a, b, c, d] = u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes();
    canon.reserve(5 + bytes.len());
    canon.extend_from_slice(&[tag, a, b, c, d]);
    canon.extend_from_slice(bytes);
}

impl Node {
    /// A line that is no node (prose, a property line such as `- /url: x`): its text counts.
    fn text(canon: &mut Vec<u8>, indent: u32, text: &str) -> Node {
        canon.clear();
        part(canon, b't', text.as_bytes());
        Node {
            indent,
            id: 0,
            unchanged: false,
            hash: xxhash_rust::xxh3::xxh3_128(canon),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::TreeKind;

    fn tree(text: &str) -> (Observation<'_>, TreeStats) {
        let mut obs = Observation::new("test", TreeKind::Full);
        let stats = parse_tree(text, &mut obs);
        obs.tree = Some(text);
        (obs, stats)
    }

    fn ids<'a>(obs: &'a Observation<'_>) -> Vec<&'a str> {
        obs.refs.iter().map(|r| r.id.as_ref()).collect()
    }

    fn chunks<'a>(obs: &'a Observation<'_>) -> Vec<&'a str> {
        obs.chunks.iter().map(|c| c.as_ref()).collect()
    }

    /// Reader-level chunks (SPEC 3), on lines as Playwright MCP prints real documentation
    /// pages: a link's name stays in its sentence, a link list gives no text, a heading and
    /// a table's header row are labels, a definition is read with its term.
    #[test]
    fn chunks_read_as_a_reader_reads() {
        let page = r##"- paragraph [ref=e1]:
  - code [ref=e2]: tomllib
  - text: ": For parsing TOML. See"
  - link "PEP 680" [ref=e3] [cursor=pointer]:
    - /url: https://peps.python.org/pep-0680/
  - text: for more details.
- list [ref=e4]:
  - listitem [ref=e5]:
    - link "git-rm(1)" [ref=e6] [cursor=pointer]:
      - /url: git-rm.html
  - listitem [ref=e7]:
    - link "git-add(1)" [ref=e8] [cursor=pointer]
- paragraph [ref=e9]:
  - link "git-rm(1)" [ref=e10] [cursor=pointer]
  - text: ","
  - link "git-check-ignore(1)" [ref=e11] [cursor=pointer]
- 'heading "os.EOL #" [level=3] [ref=e12]':
  - code [ref=e13]: os.EOL
  - link "#" [ref=e14] [cursor=pointer]
- term [ref=e15]: "--cached"
- definition [ref=e16]:
  - paragraph [ref=e17]: Use this option to unstage and remove paths only from the index.
- table [ref=e18]:
  - row "Quarter Price" [ref=e19]:
    - cell "Quarter" [ref=e20]
    - cell "Price" [ref=e21]
  - row "Q3 2024 $1,140" [ref=e22]:
    - cell "Q3 2024" [ref=e23]
    - cell "$1,140" [ref=e24]
"##;
        let (obs, _) = tree(page);
        assert_eq!(
            chunks(&obs),
            [
                "tomllib : For parsing TOML. See PEP 680 for more details.",
                "os.EOL #",
                "--cached Use this option to unstage and remove paths only from the index.",
                "Quarter Price",
                "Q3 2024 $1,140",
            ]
        );
        // The heading and the header row above numbered rows are labels.
        assert_eq!(obs.headings, [1, 3]);
        assert_eq!(obs.table_ends, [4]);
        // Every link keeps its ref: only the text changed.
        assert_eq!(obs.refs.len(), 24);
    }

    /// A paragraph that is one short bold line is a caption in all but its role (DocBook's
    /// `Table 28.3. pg_stat_activity View`); a bold sentence, or bold inside a sentence, is
    /// text.
    #[test]
    fn a_short_bold_line_alone_is_a_label() {
        let page = r##"- paragraph [ref=e1]:
  - strong [ref=e2]: Table 28.1. Dynamic Statistics Views
- paragraph [ref=e3]:
  - strong [ref=e4]:
    - text: Table 28.3.
    - code [ref=e5]: pg_stat_activity
    - text: View
- paragraph [ref=e6]:
  - strong [ref=e7]: Never run VACUUM FULL on a busy table.
- paragraph [ref=e8]:
  - text: The
  - strong [ref=e9]: n_dead_tup
  - text: column estimates dead rows
"##;
        let (obs, _) = tree(page);
        assert_eq!(
            chunks(&obs),
            [
                "Table 28.1. Dynamic Statistics Views",
                "Table 28.3. pg_stat_activity View",
                "Never run VACUUM FULL on a busy table.",
                "The n_dead_tup column estimates dead rows",
            ]
        );
        assert_eq!(obs.headings, [0, 1]);
    }

    /// A short table of labels and values (Apache's directive summary) is one chunk, so the
    /// default is found with the description beside it; a data table keeps a chunk a row.
    #[test]
    fn a_short_table_of_labels_and_values_reads_whole() {
        let page = r##"- table [ref=e1]:
  - rowgroup [ref=e2]:
    - 'row "Description: Number of seconds before an SSL session expires" [ref=e3]':
      - cell "Description:" [ref=e4]
      - cell "Number of seconds before an SSL session expires" [ref=e5]
    - 'row "Default: SSLSessionCacheTimeout 300" [ref=e6]':
      - cell "Default:" [ref=e7]
      - cell "SSLSessionCacheTimeout 300" [ref=e8]
- table [ref=e9]:
  - row "Quarter Price" [ref=e10]
  - row "Q3 2024 $1,140" [ref=e11]
  - row "Q4 2024 $1,100" [ref=e12]
"##;
        let (obs, _) = tree(page);
        assert_eq!(
            chunks(&obs),
            [
                "Description: Number of seconds before an SSL session expires Default: SSLSessionCacheTimeout 300",
                "Quarter Price",
                "Q3 2024 $1,140",
                "Q4 2024 $1,100",
            ]
        );
        assert_eq!(obs.headings, [1]);
        assert_eq!(obs.table_ends, [2, 3]);
    }

    #[test]
    fn control_roles_are_the_listed_ones() {
        for role in CONTROL_ROLES {
            assert!(is_control_role(role), "{role}");
        }
        for role in [
            "", "Button", "buttons", "heading", "generic", "tablist", "menu",
        ] {
            assert!(!is_control_role(role), "{role}");
        }
    }

    #[test]
    fn fast_trims_agree_with_str() {
        for s in [
            "",
            " ",
            "a",
            " a ",
            "a\u{b}",
            "\u{a0}x",
            "x\u{2003}",
            "é",
            " é ",
            "ref=e1",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
            assert_eq!(trim_end(s), s.trim_end(), "{s:?}");
        }
    }

    #[test]
    fn playwright_separate_brackets() {
        let (obs, stats) = tree(
            "- heading \"Order a widget\" [level=1] [ref=e2]\n\
             - link \"Home\" [ref=e17] [cursor=pointer]:\n  - /url: ../index.html\n\
             - checkbox \"Weekly digest\" [checked] [active] [ref=f2e6]\n\
             - textbox \"Name\" [ref=e7]: Ada Lovelace\n\
             - paragraph [ref=e4]: \"Order total: $59.97\"\n\
             - text: Name\n\
             - option \"Red\" [selected]",
        );
        assert_eq!(ids(&obs), ["e2", "e17", "f2e6", "e7", "e4"]);
        assert_eq!(obs.refs[0].role, "heading");
        assert_eq!(obs.refs[0].name, "Order a widget");
        assert_eq!(obs.refs[4].name, "");
        assert_eq!(
            stats,
            TreeStats {
                nodes: 7,
                diff: false
            }
        );
        let controls = controls_of(&obs);
        let c: Vec<_> = controls
            .iter()
            .map(|c| {
                (
                    c.role.as_ref(),
                    c.name.as_ref(),
                    c.value.as_deref(),
                    c.states.clone(),
                )
            })
            .collect();
        assert_eq!(
            c,
            [
                ("link", "Home", None, vec![]),
                (
                    "checkbox",
                    "Weekly digest",
                    None,
                    vec![Cow::Borrowed("checked")]
                ),
                ("textbox", "Name", Some("Ada Lovelace"), vec![]),
                ("option", "Red", None, vec![Cow::Borrowed("selected")]),
            ]
        );
        assert_eq!(
            chunks(&obs),
            ["Order a widget", "Order total: $59.97", "Name"]
        );
    }

    #[test]
    fn agent_browser_single_bracket() {
        let (obs, _) = tree(
            "- heading \"Title\" [level=1, ref=e1]\n\
             - button \"Submit\" [ref=e4]\n\
             - checkbox \"Terms\" [checked=false, required, ref=e5]\n\
             - link \"Docs\" [ref=e6, url=https://x.test/docs] clickable [cursor:pointer, onclick]\n\
             - StaticText \"Hello there\"",
        );
        assert_eq!(ids(&obs), ["e1", "e4", "e5", "e6"]);
        assert_eq!(controls_of(&obs)[1].states, ["checked=false", "required"]);
        assert!(controls_of(&obs)[2].states.is_empty());
        assert_eq!(chunks(&obs), ["Title", "Hello there"]);
    }

    #[test]
    fn refs_only_from_attribute_brackets() {
        let (obs, _) = tree(
            "- paragraph [ref=e3]: see [ref=e99] here\n\
             - text: \"[ref=e5]\"\n\
             - button \"Click [ref=e8] now\" [ref=e9]\n\
             - button \"unterminated [ref=e10]\n\
             - generic: x [ref=e11]",
        );
        assert_eq!(ids(&obs), ["e3", "e9"]);
        assert_eq!(obs.refs[1].name, "Click [ref=e8] now");
        assert_eq!(
            chunks(&obs),
            ["see [ref=e99] here", "[ref=e5]", "x [ref=e11]"]
        );
    }

    #[test]
    fn escaped_names_and_quoted_keys() {
        let (obs, _) = tree(
            "- heading \"3 results for \\\"home battery\\\"\" [level=1] [ref=f2e2]\n\
             - 'link \"Review: Northwind H2 home battery\" [ref=f2e8] [cursor=pointer]':\n\
             - 'heading \"It''s: here\" [level=2] [ref=e3]'\n\
             - paragraph [ref=e4]: \"\\\"The drop,\\\" said \\u00e9\\ud83d\\ude00\"",
        );
        assert_eq!(ids(&obs), ["f2e2", "f2e8", "e3", "e4"]);
        assert_eq!(obs.refs[0].name, "3 results for \"home battery\"");
        assert!(matches!(obs.refs[1].name, Cow::Borrowed(_)));
        assert_eq!(obs.refs[1].name, "Review: Northwind H2 home battery");
        assert_eq!(obs.refs[2].name, "It's: here");
        assert_eq!(obs.chunks[2], "\"The drop,\" said é😀");
    }

    #[test]
    fn diff_lines() {
        let (obs, stats) = tree(
            "- <changed> generic [active] [ref=e1]:\n  - ref=e2 [unchanged]\n  - button \"Button 2\" [ref=e3]\n- <changed> generic:",
        );
        assert!(stats.diff);
        assert_eq!(ids(&obs), ["e1", "e2", "e3"]);
        assert_eq!(obs.refs[1].role, "");
        assert_eq!(obs.refs[2].role, "button");
    }

    #[test]
    fn crlf_and_non_ascii() {
        let (obs, _) = tree("- definition [ref=e11]: \"-20 to 50 °C\"\r\n- heading \"This site can’t be reached\" [level=1] [ref=e7]\r\n");
        assert_eq!(ids(&obs), ["e11", "e7"]);
        assert_eq!(chunks(&obs), ["-20 to 50 °C", "This site can’t be reached"]);
    }

    #[test]
    fn regex_like_names() {
        let (obs, _) = tree("- link / [ref=e5]\n- link /a/b/ [ref=e6]:");
        assert_eq!(ids(&obs), ["e5", "e6"]);
        assert_eq!(obs.refs[0].name, "/");
        assert_eq!(obs.refs[1].name, "/a/b/");
    }

    #[test]
    fn line_kinds_are_the_parsers_reading() {
        let node = |body| match line_kind(body) {
            LineKind::Node(n) => Some((n.role, n.after_role, n.quoted_name)),
            _ => None,
        };
        assert_eq!(
            node("- link \"Docs\" [ref=e2]:"),
            Some(("link", " \"Docs\" [ref=e2]:", true))
        );
        assert_eq!(
            node("- 'link \"Review: X\" [ref=e8]':"),
            Some(("link", " \"Review: X\" [ref=e8]':", true))
        );
        assert_eq!(node("- text: Hello"), Some(("text", ": Hello", false)));
        assert_eq!(line_kind("- /url: a.html"), LineKind::Property);
        // What the parser reads as no node is text to every reader.
        assert_eq!(line_kind("- link \"unterminated [ref=e3]"), LineKind::Text);
        assert_eq!(line_kind("- \"quoted\""), LineKind::Text);
        assert_eq!(line_kind("continued text"), LineKind::Text);
        for body in ["- link \"unterminated [ref=e3]", "- \"quoted\""] {
            let (obs, stats) = tree(body);
            assert_eq!((stats.nodes, obs.refs.len()), (0, 0), "{body}");
        }
    }

    #[test]
    fn malformed_lines_are_skipped() {
        for line in [
            "",
            "-",
            "- ",
            "- [",
            "- \"",
            "- '",
            "- 'x",
            "- a \"",
            "- a \\",
            "- a [ref=",
            "- ref=",
            "- ref=e1",
            "- ref=e1 [unch",
            "- a \"\\u12",
            "- a \"\\ud800\\u",
            "- é [ref=e1]",
        ] {
            let (obs, _) = tree(line);
            assert!(obs.refs.is_empty(), "{line:?}");
        }
        assert_eq!(unescape("\\ud800x"), "\u{FFFD}x");
        assert_eq!(unescape("\\u+041"), "\u{FFFD}+041");
        assert_eq!(unescape("a\\"), "a\\");
    }

    #[test]
    fn lines_offsets() {
        let l: Vec<_> = lines("a\r\nbc\n\nd").collect();
        assert_eq!(l.len(), 4);
        assert_eq!((l[1].start, l[1].next, l[1].text), (3, 6, "bc"));
        assert_eq!(l[0].text, "a");
        assert_eq!(l[3].next, 8);
    }

    /// One tree line built slot by slot (indent, dash, role, name, brackets, rest), each slot
    /// mostly well-formed and sometimes not, so every branch of the fast counter is reached.
    fn tree_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let pick = |v: Vec<&'static str>| proptest::sample::select(v);
        let indent = pick(vec![
            "",
            "  ",
            "          ",
            "\t",
            "\u{b}",
            "\u{a0}",
            " \r",
            "é",
        ]);
        let dash = pick(vec![
            "- ",
            "- ",
            "-",
            "",
            "- <changed> ",
            "- '",
            "- ref=e4 [unchanged]",
        ]);
        let role = pick(vec![
            "button", "cell", "x", "", "/url", "é", "a_b-1", "ref=e1",
        ]);
        let name = pick(vec![
            "",
            " \"Name\"",
            " \"a [ref=e9] \\\" b\"",
            " \"x\\",
            " \"x",
            " /a/",
            " \"é\\\\\"",
            "\"",
        ]);
        let bracket = pick(vec![
            " [ref=e1]",
            " [ref=f2e3]",
            " [level=1]",
            " [ref=]",
            " [ref=e1 ]",
            " [ ref=e1]",
            " [level=1, ref=e2]",
            " [ref=e1,x]",
            " [a[ref=e3]",
            " [ref=é]",
            " [\u{a0}ref=e5]",
            " [\u{b}ref=e6]",
            " [\tref=e7,\u{c}]",
            " [ref=e1",
            "[ref=e1]",
            " [ref=e1\r]",
        ]);
        let rest = pick(vec![
            "",
            ":",
            ": text [ref=e8]",
            " clickable [cursor:pointer]",
            "\r",
            "'",
            "':",
        ]);
        let end = pick(vec!["\n", "\r\n", ""]);
        (
            indent,
            dash,
            role,
            name,
            proptest::collection::vec(bracket, 0..3),
            rest,
            end,
        )
            .prop_map(|(i, d, r, n, b, t, e)| format!("{i}{d}{r}{n}{}{t}{e}", b.concat()))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The fast counter must tell exactly what the full parse finds.
        #[test]
        fn count_refs_agrees_with_parse_tree(lines in proptest::collection::vec(tree_line(), 0..6)) {
            let text = lines.concat();
            let (obs, stats) = tree(&text);
            proptest::prop_assert_eq!(count_refs(&text), (obs.refs.len(), stats.diff), "{:?}", text);
        }
    }

    #[test]
    fn count_refs_edge_lines() {
        for text in [
            "",
            "\n",
            "- a \"x\\\n\" [ref=e1]",
            "- a \"x\\\r\n\" [ref=e1]",
            "- a [ref=e1\n]",
            "- a [ref=e1]\r\n- b [ref=e2]",
            "  \t- a [ref=e1]",
            "\u{a0}- a [ref=e1]",
            "- a [\u{a0}ref=e1]",
            "- a [x [ref=e1]",
            "- <changed> text: x",
            "- ref=e2 [unchanged]",
            "- 'a [ref=e1]':",
            "- a /b/ [ref=e1]",
            "- a\r [ref=e1]",
            "-  a [ref=e1]",
        ] {
            let (obs, stats) = tree(text);
            assert_eq!(count_refs(text), (obs.refs.len(), stats.diff), "{text:?}");
        }
    }
}
