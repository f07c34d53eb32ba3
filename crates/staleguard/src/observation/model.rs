//! What a detector reads of a browser result: an [`Observation`] of its page, and the one
//! small trait every format implements ([`ObservationFormat`]).

use std::borrow::Cow;

/// What a browser result carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeKind {
    /// A complete page tree with actionable refs.
    Full,
    /// An incremental diff (`- <changed> ...`, `- ref=e4 [unchanged]`) against the last full
    /// tree of the same document.
    Diff,
    /// The page is named (URL, title) but no tree is inline, e.g. a file-linked snapshot.
    Report,
    /// Part of the page's tree with live refs: `browser_find` windows, a targeted or
    /// depth-limited snapshot, part of a snapshot file. It refines the full tree before it.
    Partial,
}

/// A browser tab as listed by the observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tab<'a> {
    /// Index as the server prints it (0- or 1-based, depending on the server).
    pub index: u32,
    /// The tab's page title.
    pub title: Cow<'a, str>,
    /// The tab's URL.
    pub url: Cow<'a, str>,
    /// The tab the browser acts on.
    pub current: bool,
}

/// An actionable ref and the element it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementRef<'a> {
    /// The ref as the model must send it back (`e12`, `f1e3`, `1-0-4`, `33`).
    pub id: Cow<'a, str>,
    /// The element's role (`button`, `link`, `textbox`, ...).
    pub role: Cow<'a, str>,
    /// The element's accessible name; empty when it has none.
    pub name: Cow<'a, str>,
}

/// An interactive element with its state, independent of its ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control<'a> {
    /// The control's role.
    pub role: Cow<'a, str>,
    /// The control's accessible name.
    pub name: Cow<'a, str>,
    /// Its value (a text field's text, a combobox's choice), when it shows one.
    pub value: Option<Cow<'a, str>>,
    /// States such as `checked`, `disabled`, `expanded`, `selected`, sorted, without focus
    /// (`active`) or cursor hints.
    pub states: Vec<Cow<'a, str>>,
}

/// One line of an aria tree in canonical form, as the fingerprint sees it: its depth and a
/// hash of its role, name, state attributes and text. Refs, focus and cursor hints are not
/// in the hash; the ref is kept apart, hashed, to merge incremental diffs onto their base.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// The line's depth in the tree (its indentation).
    pub indent: u32,
    /// [`aria::ref_hash`](super::aria::ref_hash) of the node's ref; 0 when it has none.
    pub id: u64,
    /// `ref=eN [unchanged]`: the node stands for the base page's subtree at that ref.
    pub unchanged: bool,
    /// Hash of the line's role, name, state attributes and text: what the page shows.
    pub hash: u128,
}

impl std::fmt::Debug for Node {
    /// One short line a node: snapshots of parsed trees stay readable.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match (self.unchanged, self.id != 0) {
            (true, _) => "unchanged",
            (false, true) => "ref",
            (false, false) => "-",
        };
        write!(
            f,
            "Node({} {kind} {:08x})",
            self.indent,
            (self.hash >> 96) as u32
        )
    }
}

/// A parsed browser observation or page report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation<'a> {
    /// Name of the format that recognised the text (see [`ObservationFormat::name`]).
    pub format: &'static str,
    /// A full tree, a diff, or a page report.
    pub kind: TreeKind,
    /// The page URL, when the text names one.
    pub url: Option<Cow<'a, str>>,
    /// The page title, when the text names one.
    pub title: Option<Cow<'a, str>>,
    /// The browser's tabs, when the server lists them (usually only when there are several).
    pub tabs: Vec<Tab<'a>>,
    /// The action that produced the observation (`Ran Playwright code`, the text before
    /// `Current snapshot:`), trimmed.
    pub action: Option<Cow<'a, str>>,
    /// Every actionable ref of the tree, in order (full parses only).
    pub refs: Vec<ElementRef<'a>>,
    /// The page tree as the format printed it, for formats that print one (aria YAML).
    pub tree: Option<&'a str>,
    /// Refs counted without parsing the tree ([`ObservationFormat::parse_header`]), when
    /// `refs` was left empty. Use [`Observation::ref_count`].
    pub counted_refs: usize,
    /// Interactive elements and their states, for formats without an aria tree (full parses
    /// only): their fingerprint takes them. An aria tree's nodes carry its controls into the
    /// fingerprint; the tests' `aria::controls` lists them.
    pub controls: Vec<Control<'a>>,
    /// Page text as the browser returned it: text nodes, paragraphs, headings, cells.
    pub chunks: Vec<Cow<'a, str>>,
    /// Indices into `chunks` of the first and last rows of each table that hold numbers:
    /// evidence candidates of their own ("the last part in the list").
    pub table_ends: Vec<usize>,
    /// Indices into `chunks` of headings: a heading alone is no evidence (SPEC 3).
    pub headings: Vec<usize>,
    /// Every line of the tree in canonical form, for the page fingerprint (full parses of
    /// aria trees only).
    pub nodes: Vec<Node>,
    /// Images that arrived inside the text (rare; image parts are counted by the adapter).
    pub images: usize,
    /// Document identity where the format has one (the Playwright frame prefix `f3`).
    pub document: Option<Cow<'a, str>>,
    /// The format's own ID for this observation, where it prints one (the seed format's
    /// `Observation: <uuid>`). It names the observation, not the page, so fingerprints
    /// leave it out.
    pub observation_id: Option<Cow<'a, str>>,
    /// The file the result links its tree to instead of carrying it
    /// (`.playwright-mcp/page-<stamp>.yml`): the page has a tree the model has not read.
    pub linked: Option<Cow<'a, str>>,
    /// The result only lists the browser's pages (Chrome DevTools MCP's `list_pages`): it
    /// says nothing changed, unless the page it lists as selected is not the one last seen.
    pub lists_pages: bool,
}

impl<'a> Observation<'a> {
    /// An empty observation of `format` and `kind`; detectors fill in the rest.
    pub fn new(format: &'static str, kind: TreeKind) -> Self {
        Observation {
            format,
            kind,
            url: None,
            title: None,
            tabs: Vec::new(),
            action: None,
            refs: Vec::new(),
            counted_refs: 0,
            tree: None,
            controls: Vec::new(),
            chunks: Vec::new(),
            table_ends: Vec::new(),
            headings: Vec::new(),
            nodes: Vec::new(),
            images: 0,
            document: None,
            observation_id: None,
            linked: None,
            lists_pages: false,
        }
    }

    /// True when the result carries actionable refs (a full tree or a diff).
    pub fn is_observation(&self) -> bool {
        self.kind != TreeKind::Report && self.ref_count() > 0
    }

    /// How many refs the tree carries, whether it was parsed in full or only counted.
    pub fn ref_count(&self) -> usize {
        self.refs.len().max(self.counted_refs)
    }

    /// `(id, role, name)` of every ref, for tests and reports.
    pub fn ref_triples(&self) -> Vec<(&str, &str, &str)> {
        self.refs
            .iter()
            .map(|r| (&*r.id, &*r.role, &*r.name))
            .collect()
    }

    /// The current tab, when tabs are listed.
    pub fn current_tab(&self) -> Option<&Tab<'a>> {
        self.tabs.iter().find(|t| t.current)
    }
}

/// One observation format. Adding a format means adding an implementation to [`FORMATS`](super::FORMATS);
/// projection does not change.
pub trait ObservationFormat: Sync {
    /// Short stable name, e.g. `playwright-mcp-0.0.57`.
    fn name(&self) -> &'static str;
    /// Parses `text` if it is in this format: an observation or a page report.
    /// Returns `None` when the text is not this format, or names no page at all.
    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>>;
    /// Like [`parse`](Self::parse), but a format may skip the tree's refs, controls and
    /// chunks and only count its refs ([`Observation::counted_refs`]) and set its kind.
    /// Projection needs no more, and runs on every browser result of a request.
    fn parse_header<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        self.parse(text)
    }
    /// The tool that takes a fresh snapshot on this format's server: what refusals tell
    /// the model to call, and what the MCP guard calls itself.
    fn snapshot_tool(&self) -> &'static str {
        "browser_snapshot"
    }
    /// True when the server never reuses a ref id within its process, so the MCP guard
    /// leaves refs as they are instead of naming their document.
    fn refs_unique(&self) -> bool {
        false
    }
    /// True when the detector is exact enough to find pages in the results of any tool (a
    /// file read, a shell command), not only of browser tools (SPEC 1).
    fn by_content(&self) -> bool {
        true
    }
    /// True when the call paired with a result shows the action the result reports (a
    /// click and its element), so a receipt need not repeat it (SPEC 2). Formats whose
    /// results report what the call does not show (a batch's steps) say false.
    fn action_in_call(&self) -> bool {
        true
    }
}
