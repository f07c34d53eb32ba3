//! The session: every browser result of a request, read once.
//!
//! [`Session::build`] pairs calls and results, picks the browser results, and gives each a
//! [`Step`]: its call, its text and a shared [`Reading`] of that text. A reading holds
//! everything derived from the text alone: its ID (hashed once), whether it failed (decided
//! once), its header, and, on first use, its tree parts from ONE pass of the aria grammar
//! (refs, chunks, canonical nodes for the fingerprint). Projection reads only headers;
//! progress and evidence share the tree parts. A reading borrows nothing, so a [`Memo`] can
//! keep it across requests: the same bytes give the same reading.
//!
//! [`project`](crate::project) builds its session itself. This module is public for the
//! hosts that drive one step by step: the MCP guard reads each result as it passes
//! ([`Depth::read`], or a [`Memo`]) and feeds the [`Reading`] to a
//! [`Tracker`](crate::progress::Tracker); the CLI's `replay` builds a [`Session`] per turn.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::failure::is_failed;
use crate::memo::Memo;
use crate::observation::{self, Node, Observation, TreeKind};
use crate::receipt;
use crate::tools::BrowserTools;
use crate::transcript::{Item, Transcript};

/// A piece of a result's text: a byte range of it, or, where the parser had to unescape, a
/// string of its own. Ranges keep a reading free of borrows, so it can outlive the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
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
    pub fn get<'s>(&'s self, text: &'s str) -> &'s str {
        match self {
            Piece::At(a, b) => text.get(*a..*b).unwrap_or(""),
            Piece::Own(s) => s,
        }
    }
}

/// A tab as the observation lists it: index, title, URL, current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tab {
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
pub struct Header {
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
        }
    }

    /// True when the result carries actionable refs (a full tree or a diff).
    pub fn is_observation(&self) -> bool {
        self.kind != TreeKind::Report && self.refs > 0
    }

    /// The current tab, when tabs are listed.
    pub fn current_tab(&self) -> Option<&Tab> {
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
pub struct RefPiece {
    /// The ref as the model sends it back (`e12`).
    pub id: Piece,
    /// The element's role; empty for `ref=eN [unchanged]`.
    pub role: Piece,
    /// The element's accessible name.
    pub name: Piece,
}

/// A chunk of a page-text read-back (the seed format's `Source: <url>` sections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBackPiece {
    /// The read-back's own observation ID.
    pub observation: Piece,
    /// The `Source:` URL of the chunk.
    pub url: Piece,
    /// The page text.
    pub text: Piece,
}

/// The parts of a result that need its whole tree, from one full parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeParts {
    /// The full parse found a tree (aria formats): the fingerprint takes `nodes`.
    pub has_tree: bool,
    /// Every actionable ref of the tree and the element it names, in order.
    pub refs: Vec<RefPiece>,
    /// Page text: text nodes, paragraphs, headings, cells.
    pub chunks: Vec<Piece>,
    /// Indices into `chunks` of the first and last numbered rows of each table.
    pub table_ends: Vec<usize>,
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
const CONFIRMATIONS: &[&str] = &[
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
fn reads_as_confirmation(text: &str) -> bool {
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
pub struct Reading {
    /// The short observation ID receipts show ([`receipt::observation_id`]).
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
    words: OnceLock<Vec<Box<[u64]>>>,
    facts: OnceLock<crate::evidence::PageFacts>,
    url_key: OnceLock<Box<str>>,
    receipt: OnceLock<KeptReceipt>,
}

/// A rendered receipt and what it was rendered for: a collapsed result is collapsed again
/// on every later turn, nearly always by the same tool under the same config.
#[derive(Debug)]
struct KeptReceipt {
    tool: Box<str>,
    images: usize,
    max_bytes: usize,
    text: String,
}

impl Reading {
    /// Reads `text` at header depth; tree parts wait for their first use.
    pub fn new(text: &str) -> Reading {
        count(&DETECTIONS);
        let header = observation::parse_header(text).map(|o| Header::of(&o));
        Reading::with(text, header, OnceLock::new())
    }

    /// Reads `text` in full: for callers that will need its tree parts, one pass gives the
    /// header and the tree.
    pub fn full(text: &str) -> Reading {
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
            Some(h) if !failed && h.is_observation() => receipt::verification_lines(text),
            _ => Vec::new(),
        };
        Reading {
            id: receipt::observation_id(text),
            failed,
            collapsed: receipt::is_collapsed(text),
            header,
            verification,
            bytes: text.len(),
            tree,
            words: OnceLock::new(),
            facts: OnceLock::new(),
            url_key: OnceLock::new(),
            receipt: OnceLock::new(),
        }
    }

    /// Bytes this reading holds on the heap, itself included, as far as it has been read
    /// (its parts are derived on first use): what a [`Memo`] entry of it costs.
    /// Counted by capacity, so an over-allocated vector counts in full; the allocator's own
    /// bookkeeping is not counted.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let string = |s: &String| s.capacity();
        let mut bytes = size_of::<Reading>() + string(&self.id);
        bytes += self.verification.capacity() * size_of::<String>();
        bytes += self.verification.iter().map(string).sum::<usize>();
        if let Some(h) = &self.header {
            let text = [&h.url, &h.title, &h.action];
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
        if let Some(words) = self.words.get() {
            bytes += words.capacity() * size_of::<Box<[u64]>>();
            bytes += words
                .iter()
                .map(|w| w.len() * size_of::<u64>())
                .sum::<usize>();
        }
        if let Some(facts) = self.facts.get() {
            bytes += facts.heap_bytes();
        }
        bytes += self.url_key.get().map_or(0, |k| k.len());
        if let Some(r) = self.receipt.get() {
            bytes += r.tool.len() + r.text.capacity();
        }
        bytes
    }

    /// What evidence asks of every chunk of [`tree`](Self::tree) (read-back chunks after
    /// them), in the order of [`chunk_words`](Self::chunk_words).
    pub fn page_facts(&self, text: &str) -> &crate::evidence::PageFacts {
        self.facts.get_or_init(|| {
            let tree = self.tree(text);
            let texts = tree
                .chunks
                .iter()
                .chain(tree.read_backs.iter().map(|r| &r.text))
                .map(|c| c.get(text));
            crate::evidence::PageFacts::of(texts, self.chunk_words(text))
        })
    }

    /// The page URL, normalised as evidence compares URLs; empty when it names none.
    pub fn url_key(&self) -> &str {
        self.url_key.get_or_init(|| {
            let url = self.header.as_ref().and_then(|h| h.url.as_deref());
            crate::urlnorm::normalise(url.unwrap_or("")).into()
        })
    }

    /// The collapsed form of this reading's observation, produced by `tool` with `images`
    /// images beside its text: rendered once and kept for those inputs; other inputs are
    /// rendered afresh. `None` when the reading names no page.
    pub(crate) fn receipt(&self, tool: &str, images: usize, max_bytes: usize) -> Option<String> {
        let header = self.header.as_ref()?;
        let render = || {
            let input = receipt::ReceiptInput {
                id: &self.id,
                tool,
                header,
                images_dropped: images + header.images,
            };
            receipt::collapse_with(&input, &self.verification, max_bytes)
        };
        let kept = self.receipt.get_or_init(|| KeptReceipt {
            tool: tool.into(),
            images,
            max_bytes,
            text: render(),
        });
        if (&*kept.tool, kept.images, kept.max_bytes) == (tool, images, max_bytes) {
            Some(kept.text.clone())
        } else {
            Some(render())
        }
    }

    /// The tree parts of `text`, which must be the text this reading was made from.
    pub fn tree(&self, text: &str) -> &TreeParts {
        self.tree.get_or_init(|| TreeParts::read(text))
    }

    /// The words of every chunk of [`tree`](Self::tree) (read-back chunks when it has none),
    /// as evidence ranks them: hashed, sorted, distinct.
    pub fn chunk_words(&self, text: &str) -> &[Box<[u64]>] {
        self.words.get_or_init(|| {
            let tree = self.tree(text);
            let chunks = tree
                .chunks
                .iter()
                .chain(tree.read_backs.iter().map(|r| &r.text));
            chunks
                .map(|c| crate::evidence::word_hashes(c.get(text)))
                .collect()
        })
    }
}

/// How far to read a result when it is first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The header only; the tree when first asked for.
    Header,
    /// Header and tree in one pass.
    Full,
}

impl Depth {
    /// A reading of `text` to this depth.
    pub fn read(self, text: &str) -> Reading {
        match self {
            Depth::Header => Reading::new(text),
            Depth::Full => Reading::full(text),
        }
    }
}

/// One browser call and its result.
#[derive(Debug, Clone)]
pub struct Step<'t> {
    /// Index of the result in the transcript.
    pub item: usize,
    /// Index of the message (or item) that carries the result in the request.
    pub message: usize,
    /// The browser tool called, as the request spells it.
    pub tool: &'t str,
    /// The call ID the result answers, when the wire format gives one.
    pub call_id: Option<&'t str>,
    /// The result's text.
    pub text: &'t str,
    /// Image parts carried beside the text.
    pub images: usize,
    /// staleguard already appended evidence or guidance to it.
    pub appendix: bool,
    /// Failed: flagged by the wire format or read as a failure.
    pub failed: bool,
    /// What the text says, read once (and shared with identical texts and the memo).
    pub reading: Arc<Reading>,
    /// The text's content key: a seeded 128-bit hash of its bytes (the memo's, with one).
    pub key: u128,
    /// Index of its call in the transcript.
    pub call_item: usize,
}

impl Step<'_> {
    /// The observation kind when the step carries a live-able tree: not failed, with refs.
    pub fn tree_kind(&self) -> Option<TreeKind> {
        match &self.reading.header {
            Some(h) if !self.failed && h.is_observation() => Some(h.kind),
            _ => None,
        }
    }

    /// The tree parts of this step's text.
    pub fn tree(&self) -> &TreeParts {
        self.reading.tree(self.text)
    }
}

/// A browser call, in transcript order.
#[derive(Debug, Clone, Copy)]
pub struct Call<'t> {
    /// Index of the call in the transcript.
    pub item: usize,
    /// Index of the message (or item) that carries the call in the request.
    pub message: usize,
    /// The browser tool called, as the request spells it.
    pub tool: &'t str,
    /// The call's arguments, as JSON text.
    pub arguments: &'t str,
}

/// Every browser call and result of a transcript, read once.
#[derive(Debug, Clone, Default)]
pub struct Session<'t> {
    /// Browser results in order, each with its call.
    pub steps: Vec<Step<'t>>,
    /// Browser calls in order, answered or not.
    pub calls: Vec<Call<'t>>,
    /// Results that name a call ID no call before them has: a request read from a
    /// checkpoint on cannot tell whether their calls were browser calls.
    pub(crate) unpaired: usize,
}

impl<'t> Session<'t> {
    /// Reads the browser steps of `transcript`. Identical result texts share one reading;
    /// with a `memo`, so do those seen in earlier requests.
    pub fn build(
        transcript: &'t Transcript<'_>,
        tools: &BrowserTools,
        memo: Option<&Memo>,
    ) -> Session<'t> {
        Session::read(transcript, tools, memo, Depth::Header)
    }

    /// [`build`](Self::build), reading every result to `depth`: [`Depth::Full`] when the
    /// analyses will read trees, which saves a header pass over each.
    pub fn read(
        transcript: &'t Transcript<'_>,
        tools: &BrowserTools,
        memo: Option<&Memo>,
        depth: Depth,
    ) -> Session<'t> {
        let pairs = transcript.pair_calls();
        let mut known: HashMap<&str, bool> = HashMap::new();
        let mut is_browser =
            |name: &'t str| *known.entry(name).or_insert_with(|| tools.is_browser(name));
        let seed = memo.map_or_else(crate::memo::random_seed, Memo::seed);
        let mut local: HashMap<u128, Arc<Reading>> = HashMap::new();
        let mut session = Session::default();
        for (item, entry) in transcript.items.iter().enumerate() {
            match entry {
                Item::Call(call) if is_browser(&call.name) => session.calls.push(Call {
                    item,
                    message: call.message,
                    tool: &call.name,
                    arguments: &call.arguments,
                }),
                Item::Result(result) => {
                    let Some((call_item, c)) =
                        pairs[item].and_then(|c| Some((c, transcript.call(c)?)))
                    else {
                        session.unpaired += usize::from(result.call_id.is_some());
                        continue;
                    };
                    if !is_browser(&c.name) {
                        continue;
                    }
                    let text: &str = &result.text;
                    let key = crate::memo::content_key(text, seed);
                    // The same length check as the memo's: a hit on text of another size is no hit.
                    let reading = match local.get(&key).filter(|r| r.bytes == text.len()) {
                        Some(reading) => reading.clone(),
                        None => {
                            let reading = match memo {
                                Some(memo) => memo.reading(key, text, depth),
                                None => Arc::new(depth.read(text)),
                            };
                            local.insert(key, reading.clone());
                            reading
                        }
                    };
                    session.steps.push(Step {
                        item,
                        message: result.message,
                        tool: &c.name,
                        call_id: result.call_id.as_deref(),
                        text,
                        images: result.images,
                        appendix: result.appendix,
                        failed: result.is_error || reading.failed,
                        reading,
                        key,
                        call_item,
                    });
                }
                _ => {}
            }
        }
        session
    }

    /// Calls and steps merged in transcript order.
    pub fn events(&self) -> impl Iterator<Item = Event<'_, 't>> {
        let mut calls = self.calls.iter().peekable();
        let mut steps = self.steps.iter().peekable();
        std::iter::from_fn(move || match (calls.peek(), steps.peek()) {
            (Some(c), Some(s)) if c.item < s.item => calls.next().map(|c| Event::Call(*c)),
            (Some(_), None) => calls.next().map(|c| Event::Call(*c)),
            _ => steps.next().map(Event::Result),
        })
    }
}

/// A browser call or result, for analyses that replay the session.
#[derive(Debug, Clone, Copy)]
pub enum Event<'s, 't> {
    /// A browser call.
    Call(Call<'t>),
    /// A browser result, with its call.
    Result(&'s Step<'t>),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::observation::aria::{ref_hash, tree_nodes};
    use crate::pipeline::{project, Options};
    use crate::RequestFormat;
    use proptest::prelude::*;

    fn recorded(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn distinct_results(body: &str) -> usize {
        let (request, _, _) =
            crate::adapter::read_request(body, RequestFormat::Auto).expect("request");
        let tools = BrowserTools::new(crate::tools::DEFAULT_BROWSER_TOOLS);
        let session = Session::build(request.transcript(), &tools, None);
        let texts: std::collections::HashSet<&str> = session.steps.iter().map(|s| s.text).collect();
        texts.len()
    }

    fn counted(body: &str, config: &Config, options: Options<'_>) -> (usize, usize) {
        let before = counts();
        project(body, RequestFormat::Auto, config, options).expect("projects");
        let after = counts();
        (after.0 - before.0, after.1 - before.1)
    }

    /// A kept receipt is only reused for the inputs it was rendered for.
    #[test]
    fn kept_receipts_match_a_fresh_rendering() {
        let text = "### Page state\n- Page URL: http://a.test/\n- Page Title: A\n```yaml\n- button \"Go\" [ref=e1]\n```";
        let reading = Reading::new(text);
        let fresh =
            |tool: &str, images: usize, max: usize| Reading::new(text).receipt(tool, images, max);
        let cases = [
            ("browser_click", 0, 4096),
            ("browser_snapshot", 0, 4096),
            ("browser_click", 2, 4096),
            ("browser_click", 0, 40),
            ("browser_click", 0, 4096),
        ];
        for (tool, images, max) in cases {
            let kept = reading.receipt(tool, images, max);
            let whole = max < 100 || kept.as_deref().is_some_and(|r| r.contains(tool));
            assert!(whole, "{kept:?}");
            assert_eq!(kept, fresh(tool, images, max), "{tool} {images} {max}");
        }
    }

    #[test]
    fn confirmations_read_alike_in_any_case() {
        for (text, expected) in [
            ("Order PLACED: #123", true),
            ("Your booking confirmed today", true),
            ("BOO\u{212A}ING CONFIRMED", true),
            ("Thank you for your ORDER", true),
            ("order plac", false),
            ("Ordered placed", false),
            ("", false),
        ] {
            assert_eq!(reads_as_confirmation(text), expected, "{text}");
            let unicode = text.to_lowercase();
            let reference = CONFIRMATIONS.iter().any(|p| unicode.contains(p));
            assert_eq!(reads_as_confirmation(text), reference, "{text}");
        }
    }

    #[test]
    fn each_result_is_detected_once_and_each_tree_parsed_at_most_once() {
        let on = Config {
            browser_history_compaction: true,
            ..Config::default()
        };
        let only_projection = Config {
            evidence_retention: Some(false),
            progress_tracking: Some(false),
            ..on.clone()
        };
        let everything = Options {
            verdicts: true,
            ..Options::default()
        };
        for name in [
            "pwmcp-0.0.41/order.openai.json",
            "pwmcp-0.0.41/rerender.anthropic.json",
            "pwmcp-0.0.83/research.openai.json",
            "ankita/order.openai.json",
        ] {
            let body = recorded(name);
            let distinct = distinct_results(&body);
            assert!(distinct > 3, "{name}");
            // Projection, evidence, progress and the guard's verdicts all run: one
            // detection and at most one full parse per distinct result text.
            let (detected, parsed) = counted(&body, &on, everything);
            assert_eq!(detected, distinct, "{name}: detections");
            assert!(
                parsed <= distinct && parsed > 0,
                "{name}: {parsed} tree parses"
            );
            // Projection alone reads headers only.
            let (detected, parsed) = counted(&body, &only_projection, Options::default());
            assert_eq!(
                (detected, parsed),
                (distinct, 0),
                "{name}: projection alone"
            );
            // With a warm memo nothing is read again.
            let memo = Memo::default();
            counted(
                &body,
                &on,
                Options {
                    memo: Some(&memo),
                    ..everything
                },
            );
            let again = counted(
                &body,
                &on,
                Options {
                    memo: Some(&memo),
                    ..everything
                },
            );
            assert_eq!(again, (0, 0), "{name}: warm memo");
        }
    }

    /// Tree lines: nodes with and without refs and attributes, values, property lines,
    /// prose, unchanged refs and changed markers, at any depth.
    fn tree_line() -> impl Strategy<Value = String> {
        let role = prop::sample::select(vec![
            "button",
            "link",
            "heading",
            "paragraph",
            "generic",
            "listitem",
            "textbox",
        ]);
        let name = "[a-zA-Z0-9 $:\\[\\]=]{0,12}";
        let attr = prop::sample::select(vec![
            "",
            " [checked]",
            " [level=1]",
            " [active]",
            " [cursor=pointer]",
            " [disabled]",
        ]);
        let value = prop::sample::select(vec![
            "",
            ":",
            ": text",
            ": \"quoted [ref=e9]\"",
            ": see [ref=e5]",
        ]);
        let node = (0usize..4, role, name, attr, 1u32..50, any::<bool>(), value).prop_map(
            |(depth, role, name, attr, id, changed, value)| {
                let marker = if changed { "<changed> " } else { "" };
                format!(
                    "{}- {marker}{role} \"{name}\"{attr} [ref=e{id}]{value}",
                    "  ".repeat(depth)
                )
            },
        );
        prop_oneof![
            6 => node,
            1 => (0usize..4, 1u32..50).prop_map(|(d, id)| format!("{}- ref=e{id} [unchanged]", "  ".repeat(d))),
            1 => (0usize..4).prop_map(|d| format!("{}- /url: page.html", "  ".repeat(d))),
            1 => "[a-z ]{1,10}".prop_map(|t| t.to_string()),
        ]
    }

    proptest! {
        /// The fingerprint's nodes come from the observation's own grammar: the ref of every
        /// node is the ref the observation found on that line, in the same order.
        #[test]
        fn node_refs_are_the_observation_refs(lines in prop::collection::vec(tree_line(), 1..30)) {
            let tree = lines.join("\n");
            let mut obs = Observation::new("test", TreeKind::Full);
            crate::observation::aria::parse_tree(&tree, &mut obs);
            let from_nodes: Vec<u64> = obs.nodes.iter().map(|n| n.id).filter(|&id| id != 0).collect();
            let from_refs: Vec<u64> = obs.refs.iter().map(|r| ref_hash(&r.id)).collect();
            prop_assert_eq!(from_nodes, from_refs);
            prop_assert_eq!(obs.nodes.len(), tree.lines().filter(|l| !l.trim().is_empty()).count());
        }

        /// Renumbering refs leaves every node hash as it was: refs are not page state.
        #[test]
        fn renumbered_refs_hash_alike(lines in prop::collection::vec(tree_line(), 1..30), shift in 1u32..100) {
            // Ref-like page text is page text: renumbering it would change the page.
            let tree = lines.join("\n").replace(": see [ref=e5]", ": see").replace("quoted [ref=e9]", "quoted");
            prop_assume!(tree.matches("ref=e").count() == tree.matches(" [ref=e").count() + tree.matches("- ref=e").count());
            let renumbered: String = tree
                .split("ref=e")
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        return part.to_string();
                    }
                    let digits = part.bytes().take_while(u8::is_ascii_digit).count();
                    let n: u32 = part[..digits].parse().unwrap_or(0);
                    format!("ref=e{}{}", n + shift, &part[digits..])
                })
                .collect();
            let hashes = |t: &str| tree_nodes(t).iter().map(|n| (n.indent, n.hash, n.unchanged)).collect::<Vec<_>>();
            prop_assert_eq!(hashes(&tree), hashes(&renumbered));
        }
    }
}
