//! The reading of one result text: what its grammar gives, and nothing an analysis derives.
//!
//! A [`Reading`] holds everything the observation grammar gives of one text: its ID
//! (hashed once), whether it failed (decided once), whether it is already a receipt, its
//! header, its verification lines, and, on first use, its tree parts from ONE pass of the
//! aria grammar (refs, chunks, canonical nodes for the fingerprint). It borrows nothing, so
//! a [`Memo`] keeps it across requests: the same bytes give the same reading. What the
//! analyses derive from it (evidence's facts, the rendered receipt) they keep themselves,
//! in tables of the memo keyed by the same content key.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::failure::is_failed;
use crate::memo::{weight_of, Memo, Share};
use crate::observation::{self, Node, Observation, TreeKind};
use crate::result_lines;

/// A piece of a result's text: a byte range of it, or, where the parser had to unescape, a
/// string of its own. Ranges keep a reading free of borrows, so it can outlive the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// `text[start..end]`.
    At(usize, usize),
    /// Text that is not in the result as it is (an unescaped name).
    Own(Box<str>),
}

impl Piece {
    /// `s` as a range of `text` when it lies inside it, else a copy.
    fn of(text: &str, s: &str) -> Piece {
        let base = text.as_ptr() as usize;
        let at = (s.as_ptr() as usize).wrapping_sub(base);
        match at.checked_add(s.len()) {
            Some(end) if at <= text.len() && end <= text.len() => Piece::At(at, end),
            _ => Piece::Own(s.into()),
        }
    }

    /// The piece's text, given the result text it was read from.
    pub(crate) fn get<'s>(&'s self, text: &'s str) -> &'s str {
        match self {
            Piece::At(a, b) => text.get(*a..*b).unwrap_or(""),
            Piece::Own(s) => s,
        }
    }
}

/// A tab as the observation lists it: index, title, URL, current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tab {
    /// Index as the server prints it (0- or 1-based, depending on the server).
    pub index: u32,
    /// The tab's page title.
    pub title: String,
    /// The tab's URL.
    pub url: String,
    /// The tab the browser acts on.
    pub current: bool,
}

/// What a result says of its page, read at header depth: enough to project it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// Name of the format that recognised the text.
    pub format: &'static str,
    /// A full tree, a diff, or a page report.
    pub kind: TreeKind,
    /// The page URL, when the text names one.
    pub url: Option<String>,
    /// The page title, when the text names one.
    pub title: Option<String>,
    /// The browser's tabs, when the server lists them.
    pub tabs: Vec<Tab>,
    /// The action that produced it, trimmed.
    pub action: Option<String>,
    /// Actionable refs of its tree.
    pub refs: usize,
    /// Images that arrived inside the text.
    pub images: usize,
    /// It only lists the browser's pages ([`Observation::lists_pages`]).
    pub lists_pages: bool,
    /// The file it links its tree to instead of carrying it ([`Observation::linked`]).
    pub linked: Option<String>,
}

impl Header {
    fn of(obs: &Observation<'_>) -> Header {
        Header {
            format: obs.format,
            kind: obs.kind,
            url: obs.url.as_deref().map(str::to_string),
            title: obs.title.as_deref().map(str::to_string),
            tabs: obs.tabs.iter().map(tab).collect(),
            action: obs.action.as_deref().map(str::to_string),
            refs: obs.ref_count(),
            images: obs.images,
            lists_pages: obs.lists_pages,
            linked: obs.linked.as_deref().map(str::to_string),
        }
    }

    /// True when the result carries actionable refs (a full tree or a diff).
    pub(crate) fn is_observation(&self) -> bool {
        self.kind != TreeKind::Report && self.refs > 0
    }

    /// The current tab, when tabs are listed.
    pub(crate) fn current_tab(&self) -> Option<&Tab> {
        self.tabs.iter().find(|t| t.current)
    }
}

fn tab(t: &observation::Tab<'_>) -> Tab {
    Tab {
        index: t.index,
        title: t.title.to_string(),
        url: t.url.to_string(),
        current: t.current,
    }
}

/// An actionable ref and the element it names, as pieces of the result text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefPiece {
    /// The ref as the model sends it back (`e12`).
    pub id: Piece,
    /// The element's role; empty for `ref=eN [unchanged]`.
    pub role: Piece,
    /// The element's accessible name.
    pub name: Piece,
}

/// A chunk of a page-text read-back (the seed format's `Source: <url>` sections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadBackPiece {
    /// The read-back's own observation ID.
    pub observation: Piece,
    /// The `Source:` URL of the chunk.
    pub url: Piece,
    /// The page text.
    pub text: Piece,
}

/// The parts of a result that need its whole tree, from one full parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TreeParts {
    /// The full parse found a tree (aria formats): the fingerprint takes `nodes`.
    pub has_tree: bool,
    /// Every actionable ref of the tree and the element it names, in order.
    pub refs: Vec<RefPiece>,
    /// Page text: text nodes, paragraphs, headings, cells.
    pub chunks: Vec<Piece>,
    /// Indices into `chunks` of the first and last numbered rows of each table.
    pub table_ends: Vec<usize>,
    /// Indices into `chunks` of headings.
    pub headings: Vec<usize>,
    /// Every tree line in canonical form (the parse's own vector, shared, not copied).
    pub nodes: Arc<Vec<Node>>,
    /// A digest of `nodes` (depth, marker and hash of every line): what the page
    /// fingerprint takes of the tree, computed once.
    pub digest: u128,
    /// A digest of the controls and text, for the fingerprint of formats without an aria
    /// tree; `None` for aria trees and for pages without either.
    pub flat: Option<u128>,
    /// Document identity where the format has one (the Playwright frame prefix `f3`).
    pub document: Option<String>,
    /// The format's own ID for the observation (the seed format's UUIDs).
    pub observation_id: Option<Piece>,
    /// The page shows that a submission went through (order placed, booking confirmed).
    pub confirms: bool,
    /// Read-back chunks, for results that are no observation.
    pub read_backs: Vec<ReadBackPiece>,
    /// Tabs a tab-list result names, for results that are no observation.
    pub tab_list: Vec<Tab>,
}

// `TreeParts::of` converts the parse's refs and chunks in place, reusing their memory:
// that holds only while the pieces are as large as the strings they replace.
const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<RefPiece>() == size_of::<observation::ElementRef<'static>>());
    assert!(align_of::<RefPiece>() == align_of::<observation::ElementRef<'static>>());
    assert!(size_of::<Piece>() == size_of::<Cow<'static, str>>());
};

impl TreeParts {
    /// Bytes its parts hold on the heap (see [`Reading::heap_bytes`]).
    fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let own = |p: &Piece| match p {
            Piece::Own(s) => s.len(),
            Piece::At(..) => 0,
        };
        let refs = self
            .refs
            .iter()
            .map(|r| own(&r.id) + own(&r.role) + own(&r.name));
        let read_backs = self
            .read_backs
            .iter()
            .map(|r| own(&r.observation) + own(&r.url) + own(&r.text));
        self.refs.capacity() * size_of::<RefPiece>()
            + refs.sum::<usize>()
            + self.chunks.capacity() * size_of::<Piece>()
            + self.chunks.iter().map(own).sum::<usize>()
            + self.table_ends.capacity() * size_of::<usize>()
            + self.headings.capacity() * size_of::<usize>()
            + self.nodes.capacity() * size_of::<Node>()
            + self.document.as_ref().map_or(0, String::capacity)
            + self.observation_id.as_ref().map_or(0, own)
            + self.read_backs.capacity() * size_of::<ReadBackPiece>()
            + read_backs.sum::<usize>()
            + tabs_heap_bytes(&self.tab_list)
    }

    fn read(text: &str) -> TreeParts {
        count(&TREE_PARSES);
        TreeParts::of(text, observation::parse(text))
    }

    /// The parts of `text`, given its full parse.
    fn of<'a>(text: &'a str, parsed: Option<Observation<'a>>) -> TreeParts {
        let Some(obs) = parsed else {
            return TreeParts {
                read_backs: observation::ankita::read_back(text)
                    .into_iter()
                    .map(|c| ReadBackPiece {
                        observation: Piece::of(text, c.observation),
                        url: Piece::of(text, c.url),
                        text: Piece::of(text, c.text),
                    })
                    .collect(),
                tab_list: observation::tab_list(text).iter().map(tab).collect(),
                ..TreeParts::default()
            };
        };
        let piece = |s: &str| Piece::of(text, s);
        // An owned string (an unescaped name) is never inside the text: it is kept, not copied.
        let take = |c: Cow<'_, str>| match c {
            Cow::Borrowed(s) => Piece::of(text, s),
            Cow::Owned(s) => Piece::Own(s.into_boxed_str()),
        };
        let has_tree = obs.tree.is_some();
        let flat = if has_tree { None } else { flat_digest(&obs) };
        let confirms = obs
            .chunks
            .iter()
            .chain(obs.title.iter())
            .any(|c| reads_as_confirmation(c));
        // A dense page has a ref and a node on nearly every line: its parts take over the
        // parse's vectors (the pieces are as large as the strings they replace) instead of
        // copying megabytes into fresh memory.
        let mut nodes = if has_tree { obs.nodes } else { Vec::new() };
        nodes.shrink_to_fit();
        let nodes = Arc::new(nodes);
        let mut refs: Vec<RefPiece> = obs
            .refs
            .into_iter()
            .map(|r| RefPiece {
                id: take(r.id),
                role: take(r.role),
                name: take(r.name),
            })
            .collect();
        // The parse sized its vectors for a node and a ref on every line, and grew its chunks
        // by doubling; a memo keeps them.
        refs.shrink_to_fit();
        let mut chunks: Vec<Piece> = obs.chunks.into_iter().map(take).collect();
        chunks.shrink_to_fit();
        TreeParts {
            has_tree,
            refs,
            chunks,
            table_ends: obs.table_ends,
            headings: obs.headings,
            digest: crate::fingerprint::digest(&nodes),
            nodes,
            flat,
            document: obs.document.map(String::from),
            observation_id: obs.observation_id.as_deref().map(piece),
            confirms,
            read_backs: Vec::new(),
            tab_list: Vec::new(),
        }
    }
}

/// Bytes a list of tabs holds on the heap (see [`Reading::heap_bytes`]).
fn tabs_heap_bytes(tabs: &Vec<Tab>) -> usize {
    let strings = tabs.iter().map(|t| t.title.capacity() + t.url.capacity());
    tabs.capacity() * std::mem::size_of::<Tab>() + strings.sum::<usize>()
}

/// A digest of the controls and text of a page without an aria tree, for its fingerprint;
/// `None` when it has neither. Each control and text is length-prefixed, so no two pages'
/// lists collide by moving bytes from one entry to the next.
fn flat_digest(obs: &Observation<'_>) -> Option<u128> {
    if obs.controls.is_empty() && obs.chunks.is_empty() {
        return None;
    }
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut entry = |parts: &[&str]| {
        let len: usize = parts.iter().map(|p| p.len()).sum::<usize>() + parts.len();
        h.update(&(len as u64).to_le_bytes());
        for p in parts {
            h.update(p.as_bytes());
            h.update(&[0]);
        }
    };
    for c in &obs.controls {
        let mut states: Vec<&str> = c.states.iter().map(|s| s.as_ref()).collect();
        states.sort_unstable();
        let states = states.join(",");
        entry(&[&c.role, &c.name, c.value.as_deref().unwrap_or(""), &states]);
    }
    for chunk in &obs.chunks {
        entry(&[chunk]);
    }
    Some(h.digest128())
}

/// Phrases of page text that say a submission went through (lower case).
pub(crate) const CONFIRMATIONS: &[&str] = &[
    "order placed",
    "order confirmed",
    "order received",
    "confirmation number",
    "confirmation code",
    "thank you for your order",
    "booking confirmed",
    "payment received",
    "has been placed",
    "has been submitted",
    "has been booked",
    "has been sent",
];

/// Finds [`CONFIRMATIONS`] in ASCII text in one pass, whatever the case: every text chunk
/// of every page is read for them.
static CONFIRMATION_FINDER: std::sync::LazyLock<Option<aho_corasick::AhoCorasick>> =
    std::sync::LazyLock::new(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(CONFIRMATIONS)
            .ok()
    });

/// Page text that says a submission went through.
pub(crate) fn reads_as_confirmation(text: &str) -> bool {
    // For ASCII text, ASCII case folding is exactly `to_lowercase`; other text takes the
    // Unicode way (a Kelvin sign lowercases to `k`).
    match CONFIRMATION_FINDER.as_ref() {
        Some(finder) if text.is_ascii() => finder.is_match(text),
        _ => {
            let t = text.to_lowercase();
            CONFIRMATIONS.iter().any(|p| t.contains(p))
        }
    }
}

/// Everything derived from one result text alone. It borrows nothing: a [`Memo`] keeps it
/// across requests, keyed by a hash of the text's bytes.
#[derive(Debug)]
pub(crate) struct Reading {
    /// The short observation ID receipts show ([`observation_id`](crate::result_lines::observation_id)).
    pub id: String,
    /// The text reads as a failure (the wire format's own error flag is the step's).
    pub failed: bool,
    /// The text is already a collapsed observation (a projected request).
    pub collapsed: bool,
    /// The page it names, read at header depth; `None` when it names none.
    pub header: Option<Header>,
    /// Its verification lines, for observations that may collapse.
    pub verification: Vec<String>,
    /// Bytes of the text it was read from.
    pub bytes: usize,
    tree: OnceLock<TreeParts>,
}

impl Reading {
    /// Reads `text` at header depth; tree parts wait for their first use.
    pub(crate) fn new(text: &str) -> Reading {
        count(&DETECTIONS);
        let header = observation::parse_header(text).map(|o| Header::of(&o));
        Reading::with(text, header, OnceLock::new())
    }

    /// Reads `text` in full: for callers that will need its tree parts, one pass gives the
    /// header and the tree.
    pub(crate) fn full(text: &str) -> Reading {
        count(&DETECTIONS);
        count(&TREE_PARSES);
        let parsed = observation::parse(text);
        let header = parsed.as_ref().map(Header::of);
        let tree = OnceLock::from(TreeParts::of(text, parsed));
        Reading::with(text, header, tree)
    }

    fn with(text: &str, header: Option<Header>, tree: OnceLock<TreeParts>) -> Reading {
        let failed = is_failed(text);
        let verification = match &header {
            Some(h) if !failed && h.is_observation() => result_lines::verification_lines(text),
            _ => Vec::new(),
        };
        Reading {
            id: result_lines::observation_id(text),
            failed,
            collapsed: result_lines::is_collapsed(text),
            header,
            verification,
            bytes: text.len(),
            tree,
        }
    }

    /// Bytes this reading holds on the heap, itself included, as far as it has been read
    /// (its parts are derived on first use): what a [`Memo`] entry of it costs.
    /// Counted by capacity, so an over-allocated vector counts in full; the allocator's own
    /// bookkeeping is not counted.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let string = |s: &String| s.capacity();
        let mut bytes = size_of::<Reading>() + string(&self.id);
        bytes += self.verification.capacity() * size_of::<String>();
        bytes += self.verification.iter().map(string).sum::<usize>();
        if let Some(h) = &self.header {
            let text = [&h.url, &h.title, &h.action, &h.linked];
            bytes += text
                .iter()
                .filter_map(|s| s.as_ref())
                .map(string)
                .sum::<usize>();
            bytes += tabs_heap_bytes(&h.tabs);
        }
        if let Some(tree) = self.tree.get() {
            bytes += tree.heap_bytes();
        }
        bytes
    }

    /// The tree parts of `text`, which must be the text this reading was made from.
    pub(crate) fn tree(&self, text: &str) -> &TreeParts {
        self.tree.get_or_init(|| TreeParts::read(text))
    }
}

/// How far to read a result when it is first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// The header only; the tree when first asked for.
    Header,
    /// Header and tree in one pass.
    Full,
}

impl Depth {
    /// A reading of `text` to this depth.
    pub(crate) fn read(self, text: &str) -> Reading {
        match self {
            Depth::Header => Reading::new(text),
            Depth::Full => Reading::full(text),
        }
    }
}

/// Where a session gets its readings: the one a memo keeps for the same bytes, or one
/// read now to `depth` and kept from now on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'m> {
    /// Keeps readings across results and requests.
    pub memo: &'m Memo,
    /// How far a result not kept is read.
    pub depth: Depth,
}

impl Reader<'_> {
    /// The reading of `text`, whose key in the memo is `key`.
    pub(crate) fn reading(&self, key: u128, text: &str) -> Arc<Reading> {
        // 128 bits make a collision unlikely; the length check (see `Reading::bytes`)
        // makes a wrong hit on text of another size impossible.
        let same = |r: &Reading| r.bytes == text.len();
        let weight = |_: &Reading| weight_of(text.len());
        let key = (key, 0);
        self.memo
            .kept(Share::Texts, key, same, || self.depth.read(text), weight)
    }
}

/// A tool result's text, read once: what the grammar finds in it (its observation ID, whether
/// it failed, the page it names and, on first use, its tree), kept with the text. A host that
/// follows a browser session result by result (the MCP guard) reads each result once and
/// gives the same `ResultText` to its [`Tracker`](crate::Tracker), its
/// [`Archive`](crate::Archive) and its own edits of the text; cloning it shares both.
///
/// ```
/// use staleguard::{Memo, ResultText};
///
/// let memo = Memo::default();
/// let page = "### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```";
/// let result = ResultText::read(page, &memo);
/// assert!(!result.failed());
/// let starts = result.ref_starts().unwrap();
/// assert_eq!(&page[starts[0]..starts[0] + 2], "e1");
/// ```
#[derive(Debug, Clone)]
pub struct ResultText {
    text: Arc<str>,
    reading: Arc<Reading>,
}

impl ResultText {
    /// Reads `text`, tree included, through `memo`: a text whose reading the memo keeps is
    /// not read again. A text given as an `Arc<str>` or a `String` is kept without a copy.
    pub fn read(text: impl Into<Arc<str>>, memo: &Memo) -> ResultText {
        let text = text.into();
        let reader = Reader {
            memo,
            depth: Depth::Full,
        };
        let reading = reader.reading(memo.key(&text), &text);
        ResultText { text, reading }
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text reads as a failure: an error the browser server wrote (the protocol's own
    /// error flag is the host's to add).
    pub fn failed(&self) -> bool {
        self.reading.failed
    }

    /// The short observation ID that receipts and the [`Archive`](crate::Archive) show.
    pub fn observation_id(&self) -> &str {
        &self.reading.id
    }

    /// Where the ID of each ref of the text's tree starts, as byte offsets into the text, in
    /// the tree's order (empty without a tree): where a host that rewrites refs in place
    /// puts its prefix, so that page text that merely looks like a ref stays as it is.
    /// `None` when an ID is not in the text as it stands (the parser unescaped it).
    pub fn ref_starts(&self) -> Option<Vec<usize>> {
        let refs = &self.reading.tree(&self.text).refs;
        refs.iter()
            .map(|r| match r.id {
                Piece::At(start, _) => Some(start),
                Piece::Own(_) => None,
            })
            .collect()
    }

    /// The text, shared.
    pub(crate) fn shared_text(&self) -> Arc<str> {
        self.text.clone()
    }

    /// The reading.
    pub(crate) fn reading(&self) -> &Arc<Reading> {
        &self.reading
    }
}

#[cfg(test)]
thread_local! {
    static DETECTIONS_COUNT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static TREE_PARSES_COUNT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Which counter: results detected, trees parsed in full.
#[derive(Clone, Copy)]
enum Counter {
    Detections,
    TreeParses,
}
const DETECTIONS: Counter = Counter::Detections;
const TREE_PARSES: Counter = Counter::TreeParses;

/// Test builds count detections and full parses on this thread, to show that each result is
/// read once; other builds count nothing.
#[cfg(test)]
fn count(counter: &Counter) {
    let cell = match counter {
        Counter::Detections => &DETECTIONS_COUNT,
        Counter::TreeParses => &TREE_PARSES_COUNT,
    };
    cell.with(|c| c.set(c.get() + 1));
}

#[cfg(not(test))]
fn count(_: &Counter) {}

/// `(detections, full tree parses)` on this thread so far (test builds).
#[cfg(test)]
pub(crate) fn counts() -> (usize, usize) {
    (
        DETECTIONS_COUNT.with(|c| c.get()),
        TREE_PARSES_COUNT.with(|c| c.get()),
    )
}
