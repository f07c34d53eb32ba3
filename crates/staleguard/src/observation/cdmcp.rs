//! Chrome DevTools MCP (`chrome-devtools-mcp`, Google) results: message lines, then `## `
//! sections in a fixed order (`## Opened pages`, `## Pages`, `## Latest page snapshot`).
//!
//! ```text
//! Successfully clicked on the element
//! Page navigated to http://127.0.0.1:8431/order/done.html.
//! ## Latest page snapshot
//! uid=7_0 RootWebArea "Order placed" url="http://127.0.0.1:8431/order/done.html"
//!   uid=7_1 heading "Order placed" level="1"
//!   uid=7_2 "Confirmation number: WX-1001"
//!   uid=7_5 button "Cancel this order" focusable focused
//! ```
//!
//! A snapshot line is `<2 spaces per depth>uid=<N_M>[ role][ "name"][ attributes]`; a line
//! without a role is a text node. Names are not escaped, so the name ends at the first `"`
//! after which the rest reads as attributes. A uid persists across snapshots of one
//! document, so fingerprints leave uids (and focus) out. A result without a snapshot is a
//! page report when it names a page (`Page navigated to <url>.`, `Successfully navigated to
//! <url>.`, `## Pages`, `## Opened pages`); action results such as `Successfully filled out
//! the element` name none.
//!
//! Behind opt-in flags the server writes the same tree as data (`cdmcp/data.rs`): TOON under the
//! same heading (`--experimentalDataFormat=toon`), or JSON in `structuredContent`
//! (`--experimentalStructuredContent`), which some clients forward instead of the text. Both
//! read as the text form of the same page: the same uids, roles, names, URL, title and
//! fingerprint nodes. A data form also shows the text children the text form leaves out
//! (`link "Home"` over the text `Home`): their uids are refs too, but not nodes or chunks.

mod data;

use std::borrow::Cow;

use super::aria::{is_control_role, lines, Line};
use super::model::{Control, ElementRef, Node, Observation, ObservationFormat, Tab, TreeKind};
use data::{Printed, Value};

pub use data::is_uid;

/// Name of this format.
pub const NAME: &str = "chrome-devtools-mcp";

const SNAPSHOT: &str = "## Latest page snapshot";
const PAGES: &str = "## Pages";
const OPENED: &str = "## Opened pages";
/// Message lines that name the page the action led to; the URL follows, then `.`.
const NAVIGATED: &[&str] = &[
    "Page navigated to ",
    "Successfully navigated to ",
    "Successfully navigated back to ",
    "Successfully navigated forward to ",
];
/// Attributes that are focus, not page state: left out of controls and fingerprints.
const FOCUS: &[&str] = &["focused", "focusable"];
/// Roles whose name is page text: headings and cells are evidence chunks. Link names are
/// not (as in the Playwright formats, where a link is text only inside a paragraph or list
/// item): on these flat trees they are navigation, and as quotes of their own they would
/// push the page's facts out under the evidence item cap.
const NAMED_TEXT_ROLES: &[&str] = &[
    "heading",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "caption",
];

/// Detector for Chrome DevTools MCP results.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChromeDevTools;

impl ObservationFormat for ChromeDevTools {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        read(text, true)
    }

    fn parse_header<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        read(text, false)
    }

    fn snapshot_tool(&self) -> &'static str {
        "take_snapshot"
    }

    /// A uid (`4_5`) carries the number of the snapshot that first showed the node and
    /// persists while the node lives; the server never reuses one.
    fn refs_unique(&self) -> bool {
        true
    }
}

/// Where a line of the result is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Messages,
    Pages,
    Opened,
    Other,
}

/// Reads the result; with `full`, the snapshot's refs, controls, chunks and nodes too
/// (otherwise its refs are only counted).
fn read(text: &str, full: bool) -> Option<Observation<'_>> {
    if text.trim_start().starts_with('{') {
        return read_structured(text, full);
    }
    let mut obs = Observation::new(NAME, TreeKind::Report);
    let (mut section, mut named) = (Section::Messages, false);
    let (mut opened, mut action_end) = (Vec::new(), None);
    let mut snapshot = None;
    for line in lines(text) {
        let t = line.text.trim_end();
        if t.starts_with("## ") {
            action_end.get_or_insert(line.start);
            if t == SNAPSHOT {
                snapshot = Some(line.next);
                break;
            }
            section = match t {
                PAGES => Section::Pages,
                OPENED => Section::Opened,
                _ => Section::Other,
            };
            continue;
        }
        match section {
            Section::Messages => {
                if let Some(url) = navigated_url(t) {
                    obs.url = Some(Cow::Borrowed(url));
                    named = true;
                }
            }
            Section::Pages => obs.tabs.extend(page_line(t, true)),
            Section::Opened => opened.extend(page_line(t, false)),
            Section::Other => {}
        }
    }
    take_pages(&mut obs, opened, snapshot.is_some(), named);
    obs.action = text
        .get(..action_end.unwrap_or(text.len()))
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(Cow::Borrowed);
    match snapshot {
        Some(start) => read_snapshot(text, start, full, &mut obs)?,
        None if named || !obs.tabs.is_empty() => {}
        None => return None,
    }
    Some(obs)
}

/// The URL of `Page navigated to <url>.` and its kin.
fn navigated_url(line: &str) -> Option<&str> {
    let rest = NAVIGATED.iter().find_map(|p| line.strip_prefix(p))?;
    let url = rest.strip_suffix('.').unwrap_or(rest).trim();
    (!url.is_empty() && !url.contains(' ')).then_some(url)
}

/// `1: Title (url) [selected]`, `1: about:blank [selected]`: a page the server lists.
/// `selectable` is false for `## Opened pages`, which does not change the selected page.
fn page_line(line: &str, selectable: bool) -> Option<Tab<'_>> {
    let (index, rest) = line.split_once(": ")?;
    let index: u32 = index.trim().parse().ok()?;
    let (rest, selected) = match rest.trim_end().strip_suffix(" [selected]") {
        Some(r) => (r, selectable),
        None => (rest.trim_end(), false),
    };
    let (title, url) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
        Some((title, url)) => (title, url),
        None => ("", rest),
    };
    Some(Tab {
        index,
        title: Cow::Borrowed(title),
        url: Cow::Borrowed(url),
        current: selected,
    })
}

/// Reads the snapshot that starts at byte `start`. The root line names the page; the
/// tree runs to the end of the text. A snapshot whose first line is no uid line is read
/// as TOON. `None` when no line carries a uid: no snapshot.
fn read_snapshot<'a>(
    text: &'a str,
    start: usize,
    full: bool,
    obs: &mut Observation<'a>,
) -> Option<()> {
    let tree = text.get(start..)?;
    let mut it = NodeLines {
        tree,
        lines: lines(tree),
    };
    let first = it.next()?;
    let Some(root) = node_line(first.text) else {
        return read_toon(tree, full, obs);
    };
    obs.kind = TreeKind::Full;
    obs.tree = Some(tree);
    obs.title = root.name.map(Cow::Borrowed).or(obs.title.take());
    obs.url = root.attr("url").map(Cow::Borrowed).or(obs.url.take());
    if !full {
        obs.counted_refs = 1 + it.filter(|l| node_line(l.text).is_some()).count();
        return Some(());
    }
    obs.nodes.reserve(tree.len() / 32);
    let mut run = TextRun::default();
    for line in std::iter::once(first).chain(it) {
        add_line(line, &mut run, obs);
    }
    run.flush(obs);
    Some(())
}

/// A TOON snapshot (`--experimentalDataFormat=toon`): the tree runs to the next line that
/// starts with `#` unindented (TOON quotes such a key), or to the end.
fn read_toon<'a>(tree: &'a str, full: bool, obs: &mut Observation<'a>) -> Option<()> {
    let end = lines(tree)
        .find(|l| l.text.starts_with('#'))
        .map_or(tree.len(), |l| l.start);
    let section = tree.get(..end)?;
    let root = data::toon(section)?;
    read_data_tree(root, section, full, obs)
}

/// A snapshot tree decoded from data: a node with a uid and a role at the root.
fn read_data_tree<'a>(
    root: Value<'a>,
    tree: &'a str,
    full: bool,
    obs: &mut Observation<'a>,
) -> Option<()> {
    let has_role = root
        .get("role")
        .and_then(Value::as_str)
        .is_some_and(|r| !r.is_empty());
    if !has_role {
        return None;
    }
    let nodes = data::printed(root)?;
    let first = nodes.first()?;
    obs.kind = TreeKind::Full;
    obs.tree = Some(tree);
    obs.title = first.name.clone().or(obs.title.take());
    obs.url = first.attr("url").cloned().or(obs.url.take());
    if !full {
        obs.counted_refs = nodes.len();
        return Some(());
    }
    obs.nodes.reserve(nodes.len());
    let mut run = TextRun::default();
    for node in nodes {
        let indent = node.depth.saturating_mul(2);
        add_node(indent, node, &mut run, obs);
    }
    run.flush(obs);
    Some(())
}

/// Keys of `structuredContent` (chrome-devtools-mcp 1.11.0, `McpResponse.format`). A JSON
/// text with any other key is not a result of this server.
const STRUCTURED_KEYS: &[&str] = &[
    "reconnected",
    "message",
    "navigatedToUrl",
    "openedPages",
    "networkConditions",
    "navigationTimeout",
    "geolocation",
    "viewport",
    "userAgent",
    "cpuThrottlingRate",
    "colorScheme",
    "forcedColors",
    "prefersContrast",
    "prefersReducedMotion",
    "dialog",
    "pages",
    "extensionPages",
    "extensionServiceWorkers",
    "tabId",
    "traceSummary",
    "traceInsights",
    "lighthouseResult",
    "snapshotFilePath",
    "snapshot",
    "heapSnapshot",
    "pagination",
    "heapSnapshotAggregates",
    "heapSnapshotNodes",
    "heapSnapshotRetainingPaths",
    "heapSnapshotDominators",
    "heapSnapshotClassDiffs",
    "heapSnapshotDetailedClassDiff",
    "heapSnapshotDuplicateStrings",
    "heapSnapshotObjectDetails",
    "heapSnapshotContextAnalysis",
    "networkRequest",
    "networkRequests",
    "consoleMessage",
    "consoleMessages",
    "extensions",
    "thirdPartyDeveloperTools",
    "webmcpTools",
    "comments",
    "commentsSnapshotRegenerated",
    "matchedStyles",
    "errorMessage",
];

/// A result's `structuredContent` as JSON (`--experimentalStructuredContent`, forwarded by
/// a client instead of the text): `message`, `navigatedToUrl`, `pages`, `openedPages` and
/// Takes in the pages a result lists (`## Pages`, else `## Opened pages`): a result that
/// only lists them says nothing changed, and the selected one names the page.
fn take_pages<'a>(obs: &mut Observation<'a>, opened: Vec<Tab<'a>>, snapshot: bool, named: bool) {
    obs.lists_pages = !snapshot && !named && opened.is_empty() && !obs.tabs.is_empty();
    if obs.tabs.is_empty() {
        obs.tabs = opened;
    }
    if let Some(tab) = obs.current_tab().cloned() {
        obs.url = Some(tab.url);
        obs.title = Some(tab.title).filter(|t| !t.is_empty());
    }
}

/// `snapshot` read as the text form's message lines and sections. `None` unless the text
/// is one JSON object of this server's keys that names a page or holds a snapshot tree.
fn read_structured(text: &str, full: bool) -> Option<Observation<'_>> {
    let Value::Obj(fields) = data::json(text)? else {
        return None;
    };
    let mut obs = Observation::new(NAME, TreeKind::Report);
    let (mut message, mut navigated, mut snapshot) = (None, None, None);
    let (mut pages, mut opened) = (None, Vec::new());
    for (key, value) in fields {
        match &*key {
            "message" => message = Some(text_value(value)?),
            "navigatedToUrl" => navigated = Some(text_value(value)?),
            "pages" => pages = Some(structured_pages(value, true)?),
            "openedPages" => opened = structured_pages(value, false)?,
            "snapshot" => snapshot = Some(value),
            k if STRUCTURED_KEYS.contains(&k) => {}
            _ => return None,
        }
    }
    // The text form's message lines: the message, then `Page navigated to <url>.`.
    let navigated_line = navigated.map(|url| format!("{}{url}.", NAVIGATED[0]));
    let mut named = false;
    for line in message.iter().flat_map(|m| m.lines()) {
        if let Some(url) = navigated_url(line.trim_end()) {
            obs.url = Some(Cow::Owned(url.to_string()));
            named = true;
        }
    }
    if let Some(url) = navigated_line.as_deref().and_then(navigated_url) {
        obs.url = Some(Cow::Owned(url.to_string()));
        named = true;
    }
    let action: Vec<&str> = message
        .as_deref()
        .into_iter()
        .chain(navigated_line.as_deref())
        .collect();
    let action = action.join("\n");
    obs.action = Some(action.trim())
        .filter(|a| !a.is_empty())
        .map(|a| Cow::Owned(a.to_string()));
    obs.tabs = pages.unwrap_or_default();
    take_pages(&mut obs, opened, snapshot.is_some(), named);
    match snapshot {
        Some(root) => read_data_tree(root, text, full, &mut obs)?,
        None if named || !obs.tabs.is_empty() => {}
        None => return None,
    }
    Some(obs)
}

/// A string field's text.
fn text_value(value: Value<'_>) -> Option<Cow<'_, str>> {
    match value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// `pages` / `openedPages`: `[{"id":1,"url":"...","title":"...","selected":true}]`, each
/// with exactly these keys and maybe `isolatedContext`. `selectable` is false for
/// `openedPages`, as for `## Opened pages`.
fn structured_pages(value: Value<'_>, selectable: bool) -> Option<Vec<Tab<'_>>> {
    let Value::Arr(items) = value else {
        return None;
    };
    items
        .into_iter()
        .map(|item| {
            let Value::Obj(fields) = item else {
                return None;
            };
            let (mut index, mut url, mut title, mut selected) = (None, None, None, None);
            for (key, value) in fields {
                match (&*key, value) {
                    ("id", Value::Num(n)) => index = Some(n.parse::<u32>().ok()?),
                    ("url", Value::Str(s)) => url = Some(s),
                    ("title", Value::Str(s)) => title = Some(s),
                    ("selected", Value::Bool(b)) => selected = Some(b),
                    ("isolatedContext", Value::Str(_)) => {}
                    _ => return None,
                }
            }
            Some(Tab {
                index: index?,
                title: title?,
                url: url?,
                current: selected? && selectable,
            })
        })
        .collect()
}

/// Consecutive sibling text nodes: the pieces of what a reader sees as paragraphs and table
/// rows. The server prints neither paragraphs nor tables, only their text nodes, so a
/// sentence split by a `<strong>` and a 300-row table come out as flat lines.
#[derive(Default)]
struct TextRun<'a> {
    indent: u32,
    pieces: Vec<Cow<'a, str>>,
    /// The link just before, when the run began with it: no text unless a sentence goes on.
    link: Option<Cow<'a, str>>,
}

/// What a piece of text that goes on from the one before may end with, and what a piece
/// that closes the sentence before it may begin with.
const OPENING: &[char] = &['(', '[', '{'];
const CLOSING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '}'];

impl<'a> TextRun<'a> {
    /// Adds a text node at `indent`; a node at another depth starts a new run.
    fn push(&mut self, indent: u32, text: Cow<'a, str>, obs: &mut Observation<'a>) {
        if text.trim().is_empty() {
            // A space or line break of its own (between two code spans, say) joins what is
            // around it, as a reader sees it.
            let space = if text.contains('\n') { "\n" } else { " " };
            match self.pieces.last_mut() {
                Some(last) if indent == self.indent && !last.ends_with(space) => {
                    last.to_mut().push_str(space);
                }
                _ => {}
            }
            return;
        }
        if indent != self.indent {
            self.flush(obs);
            self.indent = indent;
        }
        let link = self.link.take();
        // A link that began the sentence this text goes on with.
        if let Some(name) = link.filter(|_| text.starts_with(char::is_whitespace)) {
            self.pieces.push(name);
        }
        // Inline markup splits a sentence where its spaces and punctuation are: "fell to " |
        // "$1,140"; "always" | ". The difference".
        let joins = self.pieces.last().is_some_and(|p| {
            p.ends_with(|c: char| c.is_whitespace() || OPENING.contains(&c))
                || text.starts_with(|c: char| c.is_whitespace() || CLOSING.contains(&c))
        });
        match self.pieces.last_mut() {
            Some(last) if joins => last.to_mut().push_str(&text),
            _ => self.pieces.push(text),
        }
    }

    /// Adds a link at `indent`: inside a sentence ("a simple PHP proxy setup with " |
    /// `link "mod_proxy_fcgi"` | " and your backend") its name is part of the text; a link
    /// of its own (navigation, a list of links) is no text, but the sentence that goes on
    /// after it may begin with it.
    fn link(&mut self, indent: u32, name: Cow<'a, str>, obs: &mut Observation<'a>) {
        let inside = indent == self.indent
            && (self.pieces.last()).is_some_and(|p| p.ends_with(char::is_whitespace));
        match self.pieces.last_mut() {
            Some(last) if inside => last.to_mut().push_str(&name),
            _ => {
                self.flush(obs);
                self.indent = indent;
                self.link = Some(name).filter(|n| !n.trim().is_empty());
            }
        }
    }

    /// Turns the run into chunks: a stretch of pieces that repeats a shape every `k`
    /// pieces (`P-0001` | `Hinge 40 mm` | `$1.72`) is a table, one chunk per row, whose
    /// first and last rows are candidates of their own.
    fn flush(&mut self, obs: &mut Observation<'a>) {
        self.link = None;
        let pieces = std::mem::take(&mut self.pieces);
        let shapes: Vec<Shape> = pieces.iter().map(|p| shape(p)).collect();
        let mut at = 0;
        while at < pieces.len() {
            let Some((k, rows)) = table_at(&shapes, at) else {
                obs.chunks.extend(pieces.get(at).cloned());
                at += 1;
                continue;
            };
            let first = obs.chunks.len();
            for row in pieces.get(at..at + k * rows).unwrap_or_default().chunks(k) {
                let joined: Vec<&str> = row.iter().map(|p| p.trim()).collect();
                obs.chunks.push(Cow::Owned(joined.join(" ")));
            }
            let numbered: Vec<usize> = (first..obs.chunks.len())
                .filter(|&i| obs.chunks[i].bytes().any(|b| b.is_ascii_digit()))
                .collect();
            obs.table_ends.extend(numbered.first());
            obs.table_ends
                .extend(numbered.last().filter(|_| numbered.len() > 1));
            at += k * rows;
        }
    }
}

/// What a piece of text looks like, coarsely: its first character's class and whether it
/// holds a digit. Cells of one column share it.
type Shape = (char, bool);

fn shape(text: &str) -> Shape {
    let first = match text.trim_start().chars().next() {
        Some(c) if c.is_uppercase() => 'A',
        Some(c) if c.is_alphabetic() => 'a',
        Some(c) if c.is_ascii_digit() => '9',
        Some(c) => c,
        None => ' ',
    };
    (first, text.bytes().any(|b| b.is_ascii_digit()))
}

/// Widest rows a flat table is looked for with.
const MAX_COLUMNS: usize = 6;

/// The row width and row count of a table starting at `at`: at least two rows whose
/// pieces repeat the shapes of the row before, and whose shapes are not all alike (then
/// any width would do, and nothing says where a row ends).
fn table_at(shapes: &[Shape], at: usize) -> Option<(usize, usize)> {
    (2..=MAX_COLUMNS).find_map(|k| {
        let row = shapes.get(at..at + k)?;
        if row.iter().all(|s| *s == row[0]) {
            return None;
        }
        let repeats = (at..)
            .take_while(|&i| i + k < shapes.len() && shapes[i] == shapes[i + k])
            .count();
        let rows = (repeats + k) / k;
        (repeats >= k).then_some((k, rows))
    })
}

/// One snapshot line: the node's ref, control, chunks and canonical node.
fn add_line<'a>(line: Line<'a>, run: &mut TextRun<'a>, obs: &mut Observation<'a>) {
    let body = line.text.trim_start();
    let indent = u32::try_from(line.text.len() - body.len()).unwrap_or(u32::MAX);
    let Some(node) = node_line(line.text) else {
        // A name that ran over a line break: its text still counts.
        obs.nodes.push(node_of(indent, &[(b't', body)]));
        return;
    };
    let printed = Printed {
        depth: indent / 2,
        uid: Cow::Borrowed(node.uid),
        role: node.role.map(Cow::Borrowed),
        name: node.name.map(Cow::Borrowed),
        attrs: (node.attrs.into_iter())
            .map(|(k, v)| (Cow::Borrowed(k), v.map(Cow::Borrowed)))
            .collect(),
        shown: true,
    };
    add_node(indent, printed, run, obs);
}

/// One node at `indent`, as printed: its ref, and unless the text form hides it, its
/// control, chunks and canonical node.
fn add_node<'a>(indent: u32, node: Printed<'a>, run: &mut TextRun<'a>, obs: &mut Observation<'a>) {
    let value = node.attr("value").cloned();
    let Printed {
        uid,
        role,
        name,
        attrs,
        shown,
        ..
    } = node;
    let role = role.unwrap_or(Cow::Borrowed(""));
    let name = name.unwrap_or(Cow::Borrowed(""));
    obs.refs.push(ElementRef {
        id: uid,
        role: if role.is_empty() {
            Cow::Borrowed("StaticText")
        } else {
            role.clone()
        },
        name: name.clone(),
    });
    if !shown {
        return;
    }
    let mut states: Vec<Cow<'a, str>> = Vec::new();
    let mut parts: Vec<(u8, &str)> = vec![(b'r', &role), (b'n', &name)];
    for (key, v) in &attrs {
        if FOCUS.contains(&&**key) {
            continue;
        }
        match v {
            Some(v) => parts.extend([(b'k', &**key), (b'v', &**v)]),
            None => parts.push((b'a', key)),
        }
        if v.is_none() {
            states.push(key.clone());
        }
    }
    obs.nodes.push(node_of(indent, &parts));
    if is_control_role(&role) {
        states.sort_unstable();
        obs.controls.push(Control {
            role: role.clone(),
            name: name.clone(),
            value,
            states,
        });
    }
    if role.is_empty() {
        return run.push(indent, name, obs);
    }
    if role == "link" {
        return run.link(indent, name, obs);
    }
    run.flush(obs);
    if !name.trim().is_empty() && NAMED_TEXT_ROLES.contains(&&*role) {
        obs.chunks.push(name);
    }
}

/// Lines a name may run over: a text node of a code block prints its line breaks as they
/// are (`uid=1_321 " onsuccess unset X-Foo` and, on the next line, `"`).
const MAX_NAME_LINES: usize = 16;

/// A snapshot's non-blank lines, each node whose name runs over line breaks read as one line
/// (its uid, its whole name, its attributes): else its uid is no ref and its text in no
/// chunk. A name that does not end within [`MAX_NAME_LINES`] lines, before the next node
/// line, leaves the lines as they stand.
struct NodeLines<'a> {
    tree: &'a str,
    lines: super::aria::Lines<'a>,
}

impl<'a> Iterator for NodeLines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        let line = self.lines.find(|l| !l.text.trim().is_empty())?;
        if !is_node_start(line.text) || node_line(line.text).is_some() {
            return Some(line);
        }
        let mut ahead = self.lines.clone();
        for next in ahead.by_ref().take(MAX_NAME_LINES) {
            if is_node_start(next.text) && node_line(next.text).is_some() {
                break;
            }
            if !next.text.contains('"') {
                continue;
            }
            let joined = self.tree.get(line.start..next.start + next.text.len());
            if let Some(text) = joined.filter(|j| node_line(j).is_some()) {
                self.lines = ahead;
                return Some(Line {
                    start: line.start,
                    next: next.next,
                    text,
                });
            }
        }
        Some(line)
    }
}

fn is_node_start(line: &str) -> bool {
    line.trim_start().starts_with("uid=")
}

/// A canonical node: its depth and a hash of its tagged, length-prefixed parts. The uid is
/// not among them, so a re-snapshot of the same page hashes alike.
fn node_of(indent: u32, parts: &[(u8, &str)]) -> Node {
    let mut bytes = Vec::with_capacity(64);
    for (tag, part) in parts {
        bytes.push(*tag);
        bytes.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_le_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    Node {
        indent,
        id: 0,
        unchanged: false,
        hash: xxhash_rust::xxh3::xxh3_128(&bytes),
    }
}

/// A parsed snapshot line.
#[derive(Debug, PartialEq, Eq)]
struct NodeLine<'a> {
    uid: &'a str,
    role: Option<&'a str>,
    name: Option<&'a str>,
    /// `key="value"` attributes and bare boolean words (`None`), in printed order.
    attrs: Vec<(&'a str, Option<&'a str>)>,
}

impl<'a> NodeLine<'a> {
    fn attr(&self, key: &str) -> Option<&'a str> {
        self.attrs.iter().find(|(k, _)| *k == key).and_then(|a| a.1)
    }
}

/// Parses `uid=<N_M>[ role][ "name"][ attrs]` (after any indent).
fn node_line(line: &str) -> Option<NodeLine<'_>> {
    let rest = line.trim().strip_prefix("uid=")?;
    let uid_end = rest.find(' ').unwrap_or(rest.len());
    let (uid, mut rest) = rest.split_at(uid_end);
    if !is_uid(uid) {
        return None;
    }
    // `rest` keeps the space before each part: attributes start with one.
    let mut role = None;
    if let Some(r) = rest.strip_prefix(' ').filter(|r| !r.starts_with('"')) {
        let end = r.find(' ').unwrap_or(r.len());
        role = r.get(..end);
        rest = r.get(end..).unwrap_or("");
    }
    let (name, rest) = match rest.strip_prefix(" \"") {
        Some(quoted) => {
            let (name, tail) = split_name(quoted)?;
            (Some(name), tail)
        }
        None => (None, rest),
    };
    Some(NodeLine {
        uid,
        role,
        name,
        attrs: attributes(rest)?,
    })
}

/// Splits an unescaped name from the attributes after it: the name ends at the first `"`
/// after which the rest of the line reads as attributes.
fn split_name(quoted: &str) -> Option<(&str, &str)> {
    quoted.match_indices('"').find_map(|(i, _)| {
        let tail = quoted.get(i + 1..)?;
        let attrs_ok = tail.is_empty() || (tail.starts_with(' ') && attributes(tail).is_some());
        attrs_ok.then(|| (quoted.get(..i).unwrap_or(""), tail))
    })
}

/// Reads ` key="value"` and ` word` items to the end; `None` when the rest is not that.
fn attributes(mut rest: &str) -> Option<Vec<(&str, Option<&str>)>> {
    let mut attrs = Vec::new();
    while !rest.is_empty() {
        rest = rest.strip_prefix(' ')?;
        let key_len = rest
            .bytes()
            .position(|b| !b.is_ascii_lowercase())
            .unwrap_or(rest.len());
        let key = rest.get(..key_len).filter(|k| !k.is_empty())?;
        rest = rest.get(key_len..)?;
        match rest.strip_prefix("=\"") {
            Some(value) => {
                // The value ends at a `"` followed by a space or the end of the line.
                let end = value.match_indices('"').map(|(i, _)| i).find(|&i| {
                    let after = value.get(i + 1..).unwrap_or("");
                    after.is_empty() || after.starts_with(' ')
                })?;
                attrs.push((key, Some(value.get(..end)?)));
                rest = value.get(end + 1..)?;
            }
            None if rest.is_empty() || rest.starts_with(' ') => attrs.push((key, None)),
            None => return None,
        }
    }
    Some(attrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// order_inline.openai.json, call_9.
    const DONE: &str = "Successfully clicked on the element
Page navigated to http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue.
## Latest page snapshot
uid=7_0 RootWebArea \"Order placed\" url=\"http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue\"
  uid=7_1 heading \"Order placed\" level=\"1\"
  uid=7_2 \"Confirmation number: WX-1001 (3 x Blue, total $64.50)\"
  uid=7_4 form
    uid=7_5 button \"Cancel this order\" focusable focused
  uid=7_7 link \"Place another order\" url=\"http://127.0.0.1:8431/order/form.html\"

";

    fn parse(text: &str) -> Option<Observation<'_>> {
        ChromeDevTools.parse(text)
    }

    #[test]
    fn snapshot_with_action() {
        let obs = parse(DONE).unwrap();
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Full));
        assert_eq!(obs.title.as_deref(), Some("Order placed"));
        assert_eq!(
            obs.url.as_deref(),
            Some("http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue")
        );
        assert!(obs
            .action
            .as_deref()
            .unwrap()
            .starts_with("Successfully clicked"));
        let refs = obs.ref_triples();
        assert_eq!(refs.len(), 6);
        assert_eq!(refs[4], ("7_5", "button", "Cancel this order"));
        assert_eq!(refs[2].1, "StaticText");
        assert_eq!(
            obs.chunks,
            [
                "Order placed",
                "Confirmation number: WX-1001 (3 x Blue, total $64.50)",
            ]
        );
        let button = &obs.controls[0];
        assert!(button.states.is_empty(), "focus is no state");
        let header = ChromeDevTools.parse_header(DONE).unwrap();
        assert_eq!((header.kind, header.ref_count()), (TreeKind::Full, 6));
    }

    /// research (battery-prices-2024.html) and long_page, shortened.
    const ARTICLE: &str = "## Latest page snapshot
uid=4_0 RootWebArea \"Prices\" url=\"http://x.test/a\"
  uid=4_2 \"By Mara Okafor. Published 12 November 2024.\"
  uid=4_3 \"The average installed price fell to \"
  uid=4_4 \"$1,140 per kWh\"
  uid=4_5 \" in the third quarter of 2024.\"
  uid=4_7 \"Quarter\"
  uid=4_8 \"Price per kWh\"
  uid=4_10 \"Q3 2023\"
  uid=4_11 \"$1,320\"
  uid=4_13 \"Q1 2024\"
  uid=4_14 \"$1,250\"
  uid=4_16 \"Q3 2024\"
  uid=4_17 \"$1,140\"
  uid=4_20 \"The survey's next edition is due on 20 May 2025.\"
  uid=4_21 link \"Back to results\" url=\"http://x.test/r\"
";

    #[test]
    fn sentences_and_flat_tables_read_as_a_reader_sees_them() {
        let obs = parse(ARTICLE).unwrap();
        assert_eq!(
            obs.chunks,
            [
                "By Mara Okafor. Published 12 November 2024.",
                "The average installed price fell to $1,140 per kWh in the third quarter of 2024.",
                "Quarter",
                "Price per kWh",
                "Q3 2023 $1,320",
                "Q1 2024 $1,250",
                "Q3 2024 $1,140",
                "The survey's next edition is due on 20 May 2025.",
            ]
        );
        assert_eq!(obs.table_ends, [4, 6]);
        assert_eq!(obs.refs.len(), 15, "every node keeps its uid");
    }

    /// Real lines of the Apache manual (`fixtures/docsets/cdmcp-1.11.0`): links and code
    /// spans inside sentences, a space of its own between two code spans, and a code line
    /// whose text node ends in a line break.
    const MANUAL: &str = "## Latest page snapshot
uid=1_0 RootWebArea \"mod_headers\" url=\"http://x.test/mod_headers.html\"
  uid=1_1 link \"Modules\" url=\"http://x.test/mod/\"
  uid=1_2 link \"Directives\" url=\"http://x.test/dir/\"
  uid=1_3 \"For example, suppose that you have a simple PHP proxy setup with \"
  uid=1_4 link \"mod_proxy_fcgi\" url=\"http://x.test/fcgi.html\"
  uid=1_6 \" and your backend PHP scripts adds the \"
  uid=1_7 \"X-Foo: bar\"
  uid=1_8 \" header.\"
  uid=1_9 link \"mod_proxy_fcgi\" url=\"http://x.test/fcgi.html\"
  uid=1_11 \" uses the \"
  uid=1_12 \"always\"
  uid=1_13 \". The difference is that\"
  uid=1_14 \" \"
  uid=1_15 \"always\"
  uid=1_16 \" is not a superset.\"
  uid=1_17 \"Header\"
  uid=1_18 \" onsuccess unset X-Foo
\"
  uid=1_19 \"Header\"
  uid=1_20 \" always set X-Foo \"
  uid=1_21 \"\"baz\"\"
  uid=1_22 heading \"See also\" level=\"2\"
";

    #[test]
    fn links_and_code_inside_sentences_read_as_a_reader_sees_them() {
        let obs = parse(MANUAL).unwrap();
        assert_eq!(
            obs.chunks,
            [
                "For example, suppose that you have a simple PHP proxy setup with mod_proxy_fcgi \
                 and your backend PHP scripts adds the X-Foo: bar header.",
                "mod_proxy_fcgi uses the always. The difference is that always is not a superset.",
                "Header onsuccess unset X-Foo\nHeader always set X-Foo \"baz\"",
                "See also",
            ]
        );
        // The code line's node keeps its uid: every node of the page is a ref.
        let uids: Vec<&str> = obs.refs.iter().map(|r| &*r.id).collect();
        assert!(uids.contains(&"1_18"), "{uids:?}");
        assert_eq!(obs.refs.len(), 21);
        assert_eq!(
            ChromeDevTools.parse_header(MANUAL).unwrap().counted_refs,
            21
        );
    }

    #[test]
    fn a_name_left_open_joins_no_more_than_its_lines() {
        // A quote that never closes before the next node: each line reads as it stands.
        let open = "## Latest page snapshot\nuid=1_0 RootWebArea \"P\" url=\"http://x.test/\"\n  uid=1_1 \"left open\n  more text\n  uid=1_2 \"Closed.\"\n";
        let obs = parse(open).unwrap();
        let uids: Vec<&str> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(uids, ["1_0", "1_2"]);
        // One that closes past the limit does not join either.
        let far = format!(
            "## Latest page snapshot\nuid=1_0 RootWebArea \"P\" url=\"http://x.test/\"\n  uid=1_1 \"a\n{}\"\n",
            "x\n".repeat(MAX_NAME_LINES + 1)
        );
        let obs = parse(&far).unwrap();
        assert_eq!(obs.refs.len(), 1);
        let near = format!(
            "## Latest page snapshot\nuid=1_0 RootWebArea \"P\" url=\"http://x.test/\"\n  uid=1_1 \"a\n{}\"\n",
            "x\n".repeat(MAX_NAME_LINES - 2)
        );
        assert_eq!(parse(&near).unwrap().refs.len(), 2);
    }

    #[test]
    fn unescaped_names() {
        let line = "  uid=3_1 heading \"3 results for \"home battery\"\" level=\"1\"";
        let node = node_line(line).unwrap();
        assert_eq!(node.name, Some("3 results for \"home battery\""));
        assert_eq!(node.attrs, [("level", Some("1"))]);
        let quote = "uid=4_19 \"\"The drop,\" said Dr. Lena Fenwick.\"";
        let node = node_line(quote).unwrap();
        assert_eq!(node.name, Some("\"The drop,\" said Dr. Lena Fenwick."));
        let text = node_line("uid=1_9 alert atomic live=\"assertive\" relevant=\"additions text\"");
        assert_eq!(
            text.unwrap().attrs,
            [
                ("atomic", None),
                ("live", Some("assertive")),
                ("relevant", Some("additions text"))
            ]
        );
        assert!(node_line("uid=x button \"a\"").is_none());
        assert!(node_line("- button \"a\" [ref=e1]").is_none());
    }

    #[test]
    fn uids_and_focus_leave_the_fingerprint_alone() {
        let renumbered = DONE
            .replace("uid=7_", "uid=9_")
            .replace(" focusable focused", "");
        let (a, b) = (parse(DONE).unwrap(), parse(&renumbered).unwrap());
        assert_eq!(a.nodes, b.nodes);
        let checked = DONE.replace("Cancel this order\"", "Cancel this order\" disabled");
        assert_ne!(a.nodes, parse(&checked).unwrap().nodes);
    }

    #[test]
    fn page_reports() {
        let navigated =
            parse("Successfully clicked on the element\nPage navigated to http://x.test/a.html.")
                .unwrap();
        assert_eq!(
            (navigated.kind, navigated.url.as_deref()),
            (TreeKind::Report, Some("http://x.test/a.html"))
        );
        let pages = parse("Successfully navigated back to http://x.test/b.\n## Pages\n1: Links (http://x.test/l) \n2: Sheet (http://x.test/s) [selected]").unwrap();
        assert_eq!(pages.tabs.len(), 2);
        assert_eq!(
            (pages.url.as_deref(), pages.title.as_deref()),
            (Some("http://x.test/s"), Some("Sheet"))
        );
        let blank = parse("## Pages\n1: about:blank [selected]").unwrap();
        assert_eq!(
            (blank.url.as_deref(), blank.title),
            (Some("about:blank"), None)
        );
        let opened = parse(
            "Successfully clicked on the element\n## Opened pages\n2: Sheet (http://x.test/s)",
        )
        .unwrap();
        assert_eq!((opened.tabs.len(), opened.current_tab()), (1, None));
        for other in [
            "Successfully filled out the element",
            "Successfully pressed key: Enter",
            "Error: Element uid \"6_5\" not found on page 1.",
            "### Page\n- Page URL: http://x.test/\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```",
            "## Latest page snapshot\n- button \"Buy\" [ref=e1]",
            "",
        ] {
            assert!(parse(other).is_none(), "{other}");
        }
    }

    /// [`DONE`] as `--experimentalDataFormat=toon` writes it.
    const DONE_TOON: &str = "Successfully clicked on the element
Page navigated to http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue.
## Latest page snapshot
id: 7_0
role: RootWebArea
name: Order placed
url: \"http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue\"
children[4]:
  - id: 7_1
    role: heading
    name: Order placed
    level: 1
  - id: 7_2
    role: StaticText
    name: \"Confirmation number: WX-1001 (3 x Blue, total $64.50)\"
  - id: 7_4
    role: form
    children[1]{id,role,name,focusable,focused}:
      7_5,button,Cancel this order,true,true
  - id: 7_7
    role: link
    name: Place another order
    url: \"http://127.0.0.1:8431/order/form.html\"
    children[1]{id,role,name}:
      7_8,StaticText,Place another order";

    /// [`DONE`] as `structuredContent` (`--experimentalStructuredContent`).
    const DONE_JSON: &str = r#"{"message":"Successfully clicked on the element","navigatedToUrl":"http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue","snapshot":{"id":"7_0","role":"RootWebArea","name":"Order placed","url":"http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue","children":[{"id":"7_1","role":"heading","name":"Order placed","level":1},{"id":"7_2","role":"StaticText","name":"Confirmation number: WX-1001 (3 x Blue, total $64.50)"},{"id":"7_4","role":"form","children":[{"id":"7_5","role":"button","name":"Cancel this order","focusable":true,"focused":true}]},{"id":"7_7","role":"link","name":"Place another order","url":"http://127.0.0.1:8431/order/form.html","children":[{"id":"7_8","role":"StaticText","name":"Place another order"}]}]}}"#;

    #[test]
    fn data_forms_read_as_the_text() {
        let text = parse(DONE).unwrap();
        for data in [DONE_TOON, DONE_JSON] {
            let obs = parse(data).unwrap_or_else(|| panic!("{data}"));
            assert_eq!(
                (obs.format, obs.kind, &obs.url, &obs.title, &obs.action),
                (text.format, text.kind, &text.url, &text.title, &text.action)
            );
            assert_eq!(
                (&obs.nodes, &obs.chunks, &obs.controls),
                (&text.nodes, &text.chunks, &text.controls)
            );
            // The text child that repeats its link's name is left out of the text form;
            // the data forms show its uid.
            let mut refs = text.ref_triples();
            refs.push(("7_8", "StaticText", "Place another order"));
            assert_eq!(obs.ref_triples(), refs);
            let header = ChromeDevTools.parse_header(data).unwrap();
            assert_eq!((header.kind, header.ref_count()), (TreeKind::Full, 7));
        }
        // Zero-copy where nothing is escaped.
        let obs = parse(DONE_JSON).unwrap();
        assert!(obs.refs.iter().all(|r| matches!(r.id, Cow::Borrowed(_))));
        assert!(matches!(obs.title, Some(Cow::Borrowed(_))));
    }

    #[test]
    fn escaped_names_read_unescaped() {
        let json = r#"{"snapshot":{"id":"3_0","role":"RootWebArea","name":"Results","children":[{"id":"3_1","role":"heading","name":"3 results for \"home battery\"","level":1}]}}"#;
        let text = "## Latest page snapshot\nuid=3_0 RootWebArea \"Results\"\n  uid=3_1 heading \"3 results for \"home battery\"\" level=\"1\"\n";
        let toon = "## Latest page snapshot\nid: 3_0\nrole: RootWebArea\nname: Results\nchildren[1]{id,role,name,level}:\n  3_1,heading,\"3 results for \\\"home battery\\\"\",1";
        let want = parse(text).unwrap();
        for data in [json, toon] {
            let obs = parse(data).unwrap();
            assert_eq!(obs.ref_triples(), want.ref_triples(), "{data}");
            assert_eq!(obs.nodes, want.nodes, "{data}");
        }
    }

    mod robust {
        use super::*;
        use proptest::prelude::*;

        /// Truncates `s` to the char boundary at or before `at`.
        fn cut(s: &str, at: usize) -> &str {
            let mut at = at.min(s.len());
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            &s[..at]
        }

        fn header_agrees(text: &str) -> Result<(), TestCaseError> {
            let (full, header) = (
                ChromeDevTools.parse(text),
                ChromeDevTools.parse_header(text),
            );
            prop_assert_eq!(full.is_some(), header.is_some(), "{:?}", text);
            if let (Some(f), Some(h)) = (full, header) {
                prop_assert_eq!(
                    (f.kind, f.refs.len(), &f.url, &f.title, &f.action, &f.tabs),
                    (h.kind, h.ref_count(), &h.url, &h.title, &h.action, &h.tabs)
                );
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn mutated_data_forms_never_panic(
                sample in 0..2usize,
                at in any::<usize>(),
                len in 0usize..40,
                insert in prop::sample::select(vec![
                    "", "\"", "\\", "\\u", "\\ud83d", "{", "}", "[", "]", ",", ":", ": ",
                    "\n", "\n  ", "  - ", "- ", "[2]", "[1]{id}:", "1_1", "é", "|", "\t",
                ]),
                keep_tail in any::<bool>(),
            ) {
                let text = [DONE_TOON, DONE_JSON][sample];
                let head = cut(text, at % (text.len() + 1));
                header_agrees(head)?;
                let tail_start = cut(text, head.len() + len).len();
                let tail = if keep_tail { &text[tail_start..] } else { "" };
                let mutated = format!("{head}{insert}{tail}");
                header_agrees(&mutated)?;
                header_agrees(&mutated.replace('\n', "\r\n"))?;
                if let Some(obs) = ChromeDevTools.parse(&mutated) {
                    for r in &obs.refs {
                        prop_assert!(is_uid(&r.id));
                    }
                }
            }

            /// Names that run over line breaks, left open, closed on a later line or never:
            /// the full read and the header agree on the refs, and every ref is a uid.
            #[test]
            fn names_over_line_breaks_read_alike_in_full_and_header(
                lines in prop::collection::vec(prop::sample::select(vec![
                    "  uid=1_2 \"open", "  uid=1_3 \"closed\"", "more text", "\"",
                    "  \" tail\" focusable", "  uid=1_4 link \"a\" url=\"http://x.test/\"",
                    "  uid=1_5 LineBreak \"", "  uid=1_6 \" spaced \"", "", "  é\"é",
                    "    uid=1_7 button \"Go", "uid=bad \"x\"",
                ]), 0..40),
            ) {
                let text = format!(
                    "## Latest page snapshot\nuid=1_0 RootWebArea \"P\" url=\"http://x.test/\"\n{}",
                    lines.join("\n")
                );
                header_agrees(&text)?;
                header_agrees(&text.replace('\n', "\r\n"))?;
                let obs = ChromeDevTools.parse(&text);
                prop_assert!(obs.is_some());
                for r in obs.iter().flat_map(|o| &o.refs) {
                    prop_assert!(is_uid(&r.id));
                }
            }

            #[test]
            fn arbitrary_json_and_toon_never_panic(text in "[{}\\[\\]\":,a-z0-9_ \\n\\\\-]{0,200}") {
                header_agrees(&text)?;
                header_agrees(&format!("## Latest page snapshot\n{text}"))?;
            }
        }
    }
}
