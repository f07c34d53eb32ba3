//! Progress (SPEC 4): a fingerprint of the page after every browser result, a no-progress
//! counter, the stalled state and its guidance, and repeated submissions. Everything is
//! derived from the transcript alone, so a proxy that uses it stays stateless.
//!
//! [`project`](crate::project) tracks progress itself and returns it in
//! [`Projection::progress`](crate::Projection::progress), and the guard replays a session
//! with a [`Tracker`]. The tracker is public too, for the hosts that follow a session as it
//! happens: the MCP guard feeds it one call and one result at a time.

use std::sync::Arc;

use crate::fingerprint::{self, Fingerprint, Node};
use crate::observation::TreeKind;
pub(crate) use crate::page_refs::{Element, PageRefs};
use crate::reading::{Header, Reading, ResultText, Tab, TreeParts};
use crate::session::{Event, Session};
use crate::texts;

/// What a browser result told about the page.
enum Applied {
    Tree,
    /// Part of the page's tree (SPEC 1, partial observations): its refs join the page's.
    Part,
    /// The page was named without a tree; `unseen` when it is another page than the one
    /// last seen, whose refs the model has not read.
    Report {
        unseen: bool,
    },
    Nothing,
}

/// The page as last seen: what a fingerprint covers, and the refs it offered.
#[derive(Debug, Clone, Default)]
pub(crate) struct Page {
    /// The URL of the page as last named.
    pub url: String,
    /// The title of the page as last named.
    pub title: String,
    /// Every tab, when the server listed them.
    pub tabs: Vec<Tab>,
    /// Document identity where the format has one (the Playwright frame prefix `f3`):
    /// a diff updates the page only within the same document.
    pub document: String,
    /// The aria tree, with diffs merged onto the page they update.
    nodes: Option<Arc<Vec<Node>>>,
    /// [`fingerprint::digest`] of `nodes`.
    digest: Option<u128>,
    /// A digest of controls and text, for formats without an aria tree.
    flat: Option<u128>,
    /// Every ref of the page and what it names (shared with the history until it changes).
    /// Kept only when refs are tracked ([`Tracker::new`]).
    pub refs: PageRefs,
    /// The page shows a confirmation (order placed, booking confirmed).
    pub confirms: bool,
    /// Some observation has been seen.
    pub known: bool,
    /// The format that last named the page (which snapshot tool to ask for, for one).
    pub format: &'static str,
    /// The page ID the newest tree was taken on, where calls name one (Chrome DevTools
    /// MCP's `pageId`): its refs are for that page only.
    pub page_id: Option<String>,
}

impl Page {
    /// Applies one browser result; `partial` when it shows part of the page (it says so, or
    /// its call asked for part).
    fn apply<T>(
        &mut self,
        text: T,
        reading: &Arc<Reading>,
        with_refs: bool,
        partial: bool,
    ) -> Applied
    where
        T: AsRef<str> + Into<Arc<str>>,
    {
        match &reading.header {
            Some(header) if header.lists_pages && self.lists_same_page(header) => {
                self.apply_header(header);
                Applied::Nothing
            }
            Some(header) if header.is_observation() && partial => {
                self.known = true;
                if with_refs {
                    self.refs = self.refs.with_diff(text.into(), reading.clone(), None);
                }
                Applied::Part
            }
            Some(header) if header.is_observation() => {
                self.apply_observation(header, text, reading, with_refs);
                Applied::Tree
            }
            Some(header) => {
                let navigated = self.known
                    && header
                        .url
                        .as_deref()
                        .is_some_and(|u| !same_page(u, &self.url));
                // A linked snapshot of the same page is newer than the tree the model has,
                // but the refs it has still name what they named (servers that link keep a
                // document's refs): only another page makes them unknown.
                let unseen = navigated || !self.known;
                self.apply_header(header);
                Applied::Report { unseen }
            }
            None => {
                let tabs = &reading.tree(text.as_ref()).tab_list;
                if !tabs.is_empty() {
                    self.tabs.clone_from(tabs);
                }
                Applied::Nothing
            }
        }
    }

    /// Takes in what a tree says of the page: header, tabs, document and nodes, merged onto
    /// the page they update when it is a diff of the same document. Returns whether it was.
    fn take_page(&mut self, header: &Header, tree: &TreeParts) -> bool {
        let document = tree.document.as_deref().unwrap_or("");
        let diff = header.kind == TreeKind::Diff && self.known && document == self.document;
        // A server lists tabs only when there are several; a full page without the list has one.
        if header.tabs.is_empty() && header.kind == TreeKind::Full {
            self.tabs.clear();
        }
        self.apply_header(header);
        self.document = document.to_string();
        self.known = true;
        let (nodes, digest) = match (tree.has_tree, diff, self.nodes.take()) {
            (true, true, Some(base)) => {
                let merged = fingerprint::merge(&base, &tree.nodes);
                let digest = fingerprint::digest(&merged);
                (Some(Arc::new(merged)), Some(digest))
            }
            (true, _, _) => (Some(tree.nodes.clone()), Some(tree.digest)),
            (false, _, _) => (None, None),
        };
        self.nodes = nodes;
        self.digest = digest;
        self.flat = tree.flat;
        diff
    }

    /// True when a page list names the page last seen as the selected one: listing pages
    /// changed nothing, so the page's refs stay as they were.
    fn lists_same_page(&self, header: &Header) -> bool {
        let selected = |tabs: &[Tab]| tabs.iter().find(|t| t.current).map(|t| t.index);
        let same_tab = match (selected(&self.tabs), selected(&header.tabs)) {
            (Some(was), Some(now)) => was == now,
            _ => true,
        };
        self.known && same_tab && header.url.as_deref() == Some(self.url.as_str())
    }

    fn apply_header(&mut self, header: &Header) {
        self.format = header.format;
        if let Some(url) = &header.url {
            self.url.clone_from(url);
        }
        if let Some(title) = &header.title {
            self.title.clone_from(title);
        }
        if !header.tabs.is_empty() {
            self.tabs.clone_from(&header.tabs);
        }
    }

    /// Takes in a tree. Its refs are kept as the tree itself (`text` and its `reading`),
    /// looked up only when a call names one.
    fn apply_observation<T>(
        &mut self,
        header: &Header,
        text: T,
        reading: &Arc<Reading>,
        with_refs: bool,
    ) where
        T: AsRef<str> + Into<Arc<str>>,
    {
        let tree = reading.tree(text.as_ref());
        let diff = self.take_page(header, tree);
        if !with_refs {
            return;
        }
        self.confirms = tree.confirms;
        self.refs = if diff {
            let merged = self.nodes.clone();
            self.refs.with_diff(text.into(), reading.clone(), merged)
        } else {
            PageRefs::of_tree(text.into(), reading.clone())
        };
    }

    /// The fingerprint of the page as last seen.
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        let current = self
            .tabs
            .iter()
            .find(|t| t.current)
            .map(|t| format!("{}\u{0}{}", t.index, t.url));
        fingerprint::of_parts(
            current.as_deref().unwrap_or(""),
            self.tabs.len(),
            &self.url,
            &self.title,
            &self.document,
            self.digest,
            self.flat,
        )
    }
}

/// Two URLs name the same page when they differ at most in a fragment that names a section
/// (`#top`, `#install`): a jump within the page keeps its tree. A fragment that is a route
/// of a single-page app (`#/basket`, `#!/basket`) names another page.
fn same_page(a: &str, b: &str) -> bool {
    fn page(url: &str) -> &str {
        match url.split_once('#') {
            Some((_, route)) if route.starts_with('/') || route.starts_with("!/") => url,
            Some((page, _)) => page,
            None => url,
        }
    }
    page(a) == page(b)
}

/// What a browser call does to the document, as its tool says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loading {
    None,
    /// It loads a document (`browser_navigate`, Chrome DevTools MCP's `navigate_page`), the
    /// same URL too.
    Navigate,
    /// It closes the browser or the page.
    Close,
}

impl Loading {
    /// What `tool` does, behind any MCP prefix (`mcp__playwright__browser_close`,
    /// opencode's `pw_browser_close`), as the tools' other rules read names.
    fn of(tool: &str) -> Loading {
        let named = |names: &[&str]| crate::tools::bare_names(tool).any(|n| names.contains(&n));
        if named(NAVIGATING_TOOLS) {
            Loading::Navigate
        } else if named(CLOSING_TOOLS) {
            Loading::Close
        } else {
            Loading::None
        }
    }
}

/// Tools that load a document (the same URL too).
const NAVIGATING_TOOLS: &[&str] = &[
    "browser_navigate",
    "browser_navigate_back",
    "browser_navigate_forward",
    "navigate_page",
    "new_page",
];

/// Tools that close the browser or a page.
const CLOSING_TOOLS: &[&str] = &["browser_close", "close_page"];

/// Names of controls whose activation may submit something that must not happen twice.
const SUBMIT_WORDS: &[&str] = &[
    "submit",
    "place order",
    "order now",
    "pay",
    "buy",
    "purchase",
    "checkout",
    "check out",
    "confirm",
    "send",
    "book",
    "delete",
    "remove",
    "transfer",
];

/// True for a button or link whose name reads like a submission, or a `type=submit` control.
pub fn is_submit_like(element: &Element) -> bool {
    let role = element.role.to_lowercase();
    let name = element.name.to_lowercase();
    let clickable = matches!(role.as_str(), "button" | "link" | "menuitem" | "input")
        || role.contains("submit");
    clickable
        && (SUBMIT_WORDS.iter().any(|w| contains_word(&name, w)) || name.contains("type=submit"))
}

fn contains_word(haystack: &str, word: &str) -> bool {
    haystack.match_indices(word).any(|(i, _)| {
        let before = haystack[..i].chars().next_back();
        let after = haystack[i + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// One browser result, as progress saw it.
#[derive(Debug, Clone)]
pub struct Step {
    /// Index of the result in the transcript.
    pub item: usize,
    /// The fingerprint of the page after this result.
    pub fingerprint: Fingerprint,
    /// Consecutive browser results that left the fingerprint unchanged, this one included.
    pub no_progress: u32,
    /// `no_progress` reached [`Config::max_repeats`](crate::Config::max_repeats): the
    /// session is stalled. Projection appends guidance to the newest result when its step is
    /// ([`Tracker::stall_guidance`]).
    pub stalled: bool,
    /// A look (a snapshot file read back, a `browser_find`): it updated the page but left
    /// `no_progress` as the step before it had it (SPEC 4).
    pub look: bool,
}

/// An action on a submit-like control that repeats an earlier one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedSubmission {
    /// Index of the call in the transcript.
    pub call: usize,
    /// The control it acts on.
    pub element: Element,
    /// Index of the earlier identical call.
    pub earlier: usize,
    /// Why it is flagged: the page is unchanged, or it confirmed the first submission.
    pub reason: &'static str,
}

/// Progress over a whole transcript.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// One step per browser result, in order.
    pub steps: Vec<Step>,
    /// Calls that repeat an earlier submission, in order.
    pub repeated: Vec<RepeatedSubmission>,
}

impl Progress {
    /// The state after the newest browser result.
    pub fn last(&self) -> Option<&Step> {
        self.steps.last()
    }

    /// True when the newest browser result left the session stalled.
    pub fn stalled(&self) -> bool {
        self.last().is_some_and(|s| s.stalled)
    }
}

/// A submission made earlier: the element, the page fingerprint, and whether a confirmation
/// was seen after it.
#[derive(Debug, Clone)]
struct Submission {
    call: usize,
    tool: String,
    element: Element,
    fingerprint: Fingerprint,
    confirmed: bool,
}

/// An observation a [`Tracker`] keeps: a tree the model read, for naming where a stale ref
/// came from (re-exported as `SeenObservation`).
#[derive(Debug, Clone)]
pub struct Seen {
    /// Where the result was taken in: its transcript index, or the step number a host gave
    /// [`Tracker::result`].
    pub item: usize,
    /// The short observation ID receipts show.
    pub id: String,
    /// The page's URL when it was seen.
    pub url: String,
    /// The refs the page offered then, and what they named.
    pub(crate) refs: PageRefs,
}

/// A browser session as its calls and results so far describe it: the page and its refs,
/// the no-progress counter, submissions, and the observations the model read. Fed one call
/// and one result at a time, in the order the model saw them; the guard
/// ([`Engine::check_tracked`](crate::Engine::check_tracked)) asks about a proposed call
/// against it.
///
/// [`project`](crate::project) replays a whole request with one itself. A host that stands
/// between the model and the browser (the MCP guard) keeps one for the session instead: it
/// numbers the calls and results it forwards (`at`, increasing), gives each call to
/// [`call`](Self::call) and each result, read once as a [`ResultText`], to
/// [`result`](Self::result) (or [`look`](Self::look), for a call that only looks). Nothing
/// in it depends on anything but what it was fed.
///
/// ```
/// use staleguard::{Config, Engine, Memo, ResultText, Tracker, Verdict};
///
/// let engine = Engine::new(Config::default());
/// let memo = Memo::default();
/// let page = |button: &str| format!(
///     "### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"{button}\" [ref=e1]\n```"
/// );
/// let mut tracker = Tracker::new(3);
/// tracker.call(0, "browser_navigate", r#"{"url": "http://shop.test/"}"#);
/// tracker.result(1, &ResultText::read(page("Buy"), &memo), false);
/// let click = r#"{"element": "Buy button", "ref": "e1"}"#;
/// assert!(engine.check_tracked(&tracker, "browser_click", click).is_allowed());
/// let unknown = r#"{"element": "Pay button", "ref": "e7"}"#;
/// assert!(matches!(
///     engine.check_tracked(&tracker, "browser_click", unknown),
///     Verdict::Refuse { .. }
/// ));
/// ```
#[derive(Debug, Clone)]
pub struct Tracker {
    page: Page,
    history: Vec<Seen>,
    page_unseen: bool,
    /// What the newest browser call did to the document, read when its result comes.
    loading: Loading,
    /// The fingerprint of the page as it stands.
    current: Fingerprint,
    last: Option<Fingerprint>,
    count: u32,
    max_repeats: u32,
    submissions: Vec<Submission>,
    progress: Progress,
    /// Only fingerprints and the counter: no refs, history or submissions.
    counting: bool,
    /// The page ID the newest call named, for the tree its result may carry.
    call_page: Option<String>,
    /// A collapsed observation (our receipt: a projected request) was taken in since the
    /// last full tree that named its page: the page it stood for is unknown, so no step is
    /// counted as leaving it unchanged (SPEC 2, idempotence; SPEC 4).
    past_receipt: bool,
}

impl Tracker {
    /// The page as the newest results describe it.
    pub(crate) fn page(&self) -> &Page {
        &self.page
    }

    /// Every observation still kept ([`forget_oldest`](Self::forget_oldest)), oldest first.
    pub fn history(&self) -> &[Seen] {
        &self.history
    }

    /// The newest observation, when it was taken in at `item`: the result given there
    /// carried a tree (whole or part) the model has now read.
    pub fn newest_at(&self, item: usize) -> Option<&Seen> {
        self.history.last().filter(|s| s.item == item)
    }

    /// True when the newest page-naming result was a page report without a tree (a
    /// file-linked snapshot, a navigation, another page selected): the model has not seen
    /// the page's current refs.
    pub(crate) fn page_unseen(&self) -> bool {
        self.page_unseen
    }

    /// The page a call acts on when it is not the page of the newest tree: the call names
    /// a page ID (Chrome DevTools MCP's `pageId`) other than the one that tree was taken on.
    pub(crate) fn other_page(&self, arguments: &str) -> Option<String> {
        let wanted = crate::refs::page_id(arguments)?;
        let newest = self.page.page_id.as_deref()?;
        (wanted != newest).then_some(wanted)
    }

    /// True when a call with these `arguments` (JSON text) names refs that the model cannot
    /// have read on the page it acts on: the newest page arrived without a tree, or the call
    /// names another page (`pageId`) than the newest tree's. The guard refuses such a call
    /// ([`Refusal::NeedsSnapshot`](crate::Refusal::NeedsSnapshot)); a host that can ask the
    /// server for a fresh snapshot ([`snapshot_tool`](Self::snapshot_tool)) first, and give
    /// it to [`refresh`](Self::refresh), may hold the call until it has one.
    pub fn needs_snapshot(&self, arguments: &str) -> bool {
        !crate::refs::targets(arguments).is_empty()
            && (self.page_unseen || self.other_page(arguments).is_some())
    }

    /// The tool that takes a fresh snapshot on the server that named the newest page
    /// (`browser_snapshot`, Chrome DevTools MCP's `take_snapshot`); `browser_snapshot` before
    /// any page.
    pub fn snapshot_tool(&self) -> &'static str {
        crate::observation::snapshot_tool(self.page.format)
    }

    /// True when the server that named the newest page never reuses a ref on another
    /// document (Chrome DevTools MCP's uids): a host that scopes refs to the document they
    /// were read on need not scope these.
    pub fn refs_unique(&self) -> bool {
        crate::observation::refs_unique(self.page.format)
    }

    /// True when the newest page offers ref `id`, as its server spells it.
    pub fn offers_ref(&self, id: &str) -> bool {
        self.page.refs.contains_key(id)
    }

    /// Which document the newest page is: its selected tab, its URL and the document
    /// identity its format gives (Playwright's frame prefix), as one key. Two observations
    /// with equal keys are of the same document; the MCP guard numbers documents by it.
    pub fn document_key(&self) -> String {
        let page = &self.page;
        let tab = page.tabs.iter().find(|t| t.current).map_or(0, |t| t.index);
        format!("{tab}\u{0}{}\u{0}{}", page.url, page.document)
    }

    /// The steps and repeated submissions so far.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// When the newest step left the session stalled
    /// ([`Config::max_repeats`](crate::Config::max_repeats) results without a page change),
    /// the guidance for the model that projection appends to the newest result.
    pub fn stall_guidance(&self) -> Option<String> {
        self.progress.last().filter(|s| s.stalled).map(guidance)
    }

    /// The guidance that goes with a refused repeated submission: the stall guidance when
    /// the session is stalled, else what to check before submitting again.
    pub fn submission_guidance(&self) -> String {
        self.stall_guidance().unwrap_or_else(submission_guidance)
    }

    /// Estimated bytes it holds on the heap (a checkpoint keeps it).
    pub(crate) fn heap_bytes(&self) -> usize {
        let page = &self.page;
        // The page's tree is shared with its reading, and outlives it in a checkpoint.
        let nodes = page
            .nodes
            .as_ref()
            .map_or(0, |n| n.capacity() * std::mem::size_of::<Node>() + 64);
        let tabs: usize = page
            .tabs
            .iter()
            .map(|t| t.title.len() + t.url.len() + 96)
            .sum();
        let strings = page.url.len() + page.title.len() + page.document.len() + 96;
        self.progress.steps.capacity() * std::mem::size_of::<Step>()
            + self.progress.repeated.capacity() * 256
            + self.history.len() * 512
            + self.submissions.len() * 128
            + nodes
            + tabs
            + strings
            + 1024
    }

    /// The progress, taken out.
    pub(crate) fn into_progress(self) -> Progress {
        self.progress
    }

    /// A tracker of everything: the page's refs, history and submissions, for the guard. A
    /// session is stalled after `max_repeats` results without a page change (at least one;
    /// [`Config::max_repeats`](crate::Config::max_repeats)).
    pub fn new(max_repeats: u32) -> Self {
        let page = Page::default();
        Tracker {
            current: page.fingerprint(),
            page,
            history: Vec::new(),
            page_unseen: false,
            loading: Loading::None,
            last: None,
            count: 0,
            max_repeats: max_repeats.max(1),
            submissions: Vec::new(),
            progress: Progress::default(),
            counting: false,
            call_page: None,
            past_receipt: false,
        }
    }

    /// A tracker that keeps only what the no-progress counter needs: page fingerprints. It
    /// knows no refs, history or submissions.
    pub(crate) fn counting(max_repeats: u32) -> Self {
        Tracker {
            counting: true,
            ..Tracker::new(max_repeats)
        }
    }

    /// Replays `session`, calling `on_call` before each browser call is taken in.
    pub(crate) fn replay(
        self,
        session: &Session<'_>,
        on_call: impl FnMut(&Tracker, usize, &str, &str),
    ) -> Tracker {
        self.replay_items(session, 0..usize::MAX, on_call)
    }

    /// [`replay`](Self::replay), only the calls and results at transcript items in `items`:
    /// a checkpoint keeps the tracker between two of them.
    pub(crate) fn replay_items(
        mut self,
        session: &Session<'_>,
        items: std::ops::Range<usize>,
        mut on_call: impl FnMut(&Tracker, usize, &str, &str),
    ) -> Tracker {
        let at = |e: &Event<'_, '_>| match e {
            Event::Call(call) => call.item,
            Event::Result(step) => step.item,
        };
        let events = session.events().skip_while(|e| at(e) < items.start);
        for event in events.take_while(|e| at(e) < items.end) {
            match event {
                Event::Call(call) if crate::tools::is_own(call.tool) => {}
                Event::Result(step) if crate::tools::is_own(step.tool) => {}
                Event::Call(call) => {
                    on_call(&self, call.item, call.tool, call.arguments);
                    self.call(call.item, call.tool, call.arguments);
                }
                Event::Result(step) if step.look => self.take_look(
                    step.item,
                    step.text,
                    &step.reading,
                    step.failed,
                    (step.partial, step.outdated),
                ),
                Event::Result(step) => self.result_of_part(
                    step.item,
                    step.text,
                    &step.reading,
                    step.failed,
                    step.partial,
                ),
            }
        }
        self
    }

    /// Takes in a browser call of `tool` with `arguments` (JSON text) at `at`: remembers
    /// submissions, flags repeated ones.
    pub fn call(&mut self, at: usize, tool: &str, arguments: &str) {
        self.loading = Loading::of(tool);
        if self.counting {
            return;
        }
        self.call_page = crate::refs::page_id(arguments);
        let fingerprint = self.current;
        for id in crate::refs::targets(arguments) {
            let Some(element) = self.page.refs.get(id.as_str()) else {
                continue;
            };
            if !is_submit_like(&element) {
                continue;
            }
            if let Some(flag) = self.repeated_submission(at, tool, &element) {
                self.progress.repeated.push(flag);
            }
            let submission = Submission {
                call: at,
                tool: tool.to_string(),
                element,
                fingerprint,
                confirmed: false,
            };
            self.submissions.push(submission);
        }
    }

    /// Whether acting with `tool` on `element` now repeats an earlier submission.
    pub(crate) fn repeated_submission(
        &self,
        at: usize,
        tool: &str,
        element: &Element,
    ) -> Option<RepeatedSubmission> {
        let earlier = self
            .submissions
            .iter()
            .rev()
            .find(|s| s.tool == tool && &s.element == element)?;
        let reason = if earlier.fingerprint == self.current {
            texts::SUBMISSION_ON_UNCHANGED_PAGE
        } else if earlier.confirmed {
            texts::SUBMISSION_ALREADY_CONFIRMED
        } else {
            return None;
        };
        Some(RepeatedSubmission {
            call: at,
            element: element.clone(),
            earlier: earlier.call,
            reason,
        })
    }

    /// Takes in a browser result at `at` (`failed` by the protocol's own error flag; a
    /// text that reads as a failure is one whatever the flag says): updates the page, the
    /// no-progress counter and the history. A tree's text is kept, shared, for its refs.
    pub fn result(&mut self, at: usize, result: &ResultText, failed: bool) {
        let failed = failed || result.failed();
        self.result_of_part(at, result.shared_text(), result.reading(), failed, false);
    }

    /// Takes in a browser result (`failed` by its text or its wire flag): updates the page,
    /// the counter and the history; when `partial`, of a call that asked for part of the
    /// page (a targeted or depth-limited snapshot, part of a file), whose tree is part of
    /// the page and whose refs join the page's. A tree's text is kept for its refs: pass an
    /// `Arc<str>` to share it, a `&str` to have it copied.
    pub(crate) fn result_of_part<T>(
        &mut self,
        at: usize,
        text: T,
        reading: &Arc<Reading>,
        failed: bool,
        partial: bool,
    ) where
        T: AsRef<str> + Into<Arc<str>>,
    {
        if failed {
            return self.failure(at);
        }
        self.apply(at, text, reading, partial);
        self.count_step(at);
    }

    /// Takes in a look (SPEC 4), a result of a call that only looks at the page
    /// ([`Engine::is_look`](crate::Engine::is_look): `browser_find`): what it shows updates
    /// the page as a result would, but the no-progress counter neither grows nor starts
    /// again, because the model acted on nothing. `failed` as for [`result`](Self::result).
    pub fn look(&mut self, at: usize, result: &ResultText, failed: bool) {
        let failed = failed || result.failed();
        let text = result.shared_text();
        self.take_look(at, text, result.reading(), failed, (false, false));
    }

    /// [`look`](Self::look) of part of the page when `partial`, of an old snapshot file
    /// read again when `outdated`.
    fn take_look<T>(
        &mut self,
        at: usize,
        text: T,
        reading: &Arc<Reading>,
        failed: bool,
        (partial, outdated): (bool, bool),
    ) where
        T: AsRef<str> + Into<Arc<str>>,
    {
        if failed {
            return self.failed_look(at);
        }
        if outdated {
            self.keep_seen_again(at, text, reading);
        } else {
            self.apply(at, text, reading, partial);
        }
        self.mark_confirmed();
        self.push_step(at, true);
    }

    /// Takes in a failed look without a text (a protocol error): nothing changes but the
    /// list of steps.
    pub fn failed_look(&mut self, at: usize) {
        self.push_step(at, true);
    }

    /// Keeps an old page read again (a snapshot file older than one linked since) in the
    /// history, before the newest entry: its refs are stale, the page stays as it was.
    fn keep_seen_again<T>(&mut self, at: usize, text: T, reading: &Arc<Reading>)
    where
        T: AsRef<str> + Into<Arc<str>>,
    {
        if !self.counting && reading.header.as_ref().is_some_and(|h| h.is_observation()) {
            // The newest entry stays the page as it is: the guard reads it as the live one.
            let before_newest = self.history.len().saturating_sub(1);
            let seen = Seen {
                item: at,
                id: reading.id.clone(),
                url: String::new(),
                refs: PageRefs::of_tree(text.into(), reading.clone()),
            };
            self.history.insert(before_newest, seen);
        }
    }

    /// Takes in a failed browser result without a text (a protocol error): the page stays
    /// as it was, and the step counts.
    pub fn failure(&mut self, at: usize) {
        self.count_step(at);
    }

    /// Counts a progress step after a browser result.
    fn count_step(&mut self, at: usize) {
        self.mark_confirmed();
        let fingerprint = self.current;
        self.count = if !self.past_receipt && self.last == Some(fingerprint) {
            self.count + 1
        } else {
            0
        };
        self.last = (!self.past_receipt).then_some(fingerprint);
        self.push_step(at, false);
    }

    /// Records the step of result `at` as the page and the counter now stand.
    fn push_step(&mut self, at: usize, look: bool) {
        self.progress.steps.push(Step {
            item: at,
            fingerprint: self.current,
            no_progress: self.count,
            stalled: self.count >= self.max_repeats,
            look,
        });
    }

    /// A page that confirms marks every submission before it confirmed.
    fn mark_confirmed(&mut self) {
        if self.page.confirms {
            self.submissions.iter_mut().for_each(|s| s.confirmed = true);
        }
    }

    /// Takes in a snapshot a host fetched itself at `at`, for a call with `arguments` (JSON
    /// text: the page it names, where the server names pages, is the snapshot's page): the
    /// page and its refs are updated, but no progress step is counted, because the model
    /// took no action. A snapshot that reads as a failure changes nothing.
    pub fn refresh(&mut self, at: usize, result: &ResultText, arguments: &str) {
        if !result.failed() {
            self.call_page = crate::refs::page_id(arguments);
            self.apply(at, result.shared_text(), result.reading(), false);
        }
    }

    /// Bounds memory for long sessions: keeps the newest `keep` observations, progress steps
    /// and submissions. The page itself and the no-progress counter are untouched; a ref
    /// only a forgotten observation showed is no longer told stale, but unknown.
    pub fn forget_oldest(&mut self, keep: usize) {
        fn trim<T>(list: &mut Vec<T>, keep: usize) {
            let excess = list.len().saturating_sub(keep);
            list.drain(..excess);
        }
        trim(&mut self.history, keep);
        trim(&mut self.progress.steps, keep);
        trim(&mut self.progress.repeated, keep);
        trim(&mut self.submissions, keep);
    }

    fn apply<T>(&mut self, at: usize, text: T, reading: &Arc<Reading>, partial: bool)
    where
        T: AsRef<str> + Into<Arc<str>>,
    {
        let part = partial
            || reading
                .header
                .as_ref()
                .is_some_and(|h| h.kind == TreeKind::Partial);
        match std::mem::replace(&mut self.loading, Loading::None) {
            // A closed browser keeps no element: every earlier ref is stale.
            Loading::Close => {
                self.page.refs = PageRefs::default();
                self.page_unseen = true;
            }
            // A navigation loads a new document even at the same URL: a result without a
            // tree leaves the model without its refs.
            Loading::Navigate if !reading.header.as_ref().is_some_and(|h| h.is_observation()) => {
                self.page_unseen = true;
            }
            Loading::Navigate | Loading::None => {}
        }
        if part && self.page_unseen {
            // The tree it would refine is gone: the page changed since.
            self.page.refs = PageRefs::default();
        }
        if reading.collapsed {
            // A receipt keeps neither the tree nor every field the page took from it: what
            // follows cannot be compared with the page it stood for.
            self.past_receipt = true;
        } else if names_whole_page(reading, part) {
            self.past_receipt = false;
        }
        match self.page.apply(text, reading, !self.counting, part) {
            Applied::Part => self.took_tree(at, reading),
            Applied::Tree => {
                self.page.page_id.clone_from(&self.call_page);
                self.took_tree(at, reading);
            }
            Applied::Report { unseen } => self.page_unseen |= unseen,
            Applied::Nothing => {}
        }
        self.current = self.page.fingerprint();
    }

    /// The page took in a tree, whole or part: the model has seen its refs, and the history
    /// keeps them as they stand.
    fn took_tree(&mut self, at: usize, reading: &Reading) {
        self.page_unseen = false;
        if !self.counting {
            self.history.push(Seen {
                item: at,
                id: reading.id.clone(),
                url: self.page.url.clone(),
                refs: self.page.refs.clone(),
            });
        }
    }
}

/// True when `reading` sets every part of the page's fingerprint itself (a full tree that
/// names its URL and title), whatever the page was before it.
fn names_whole_page(reading: &Reading, part: bool) -> bool {
    reading.header.as_ref().is_some_and(|h| {
        !part
            && h.kind == TreeKind::Full
            && h.is_observation()
            && !h.lists_pages
            && h.url.is_some()
            && h.title.is_some()
    })
}

/// The guidance that goes with a refused repeated submission.
pub(crate) fn submission_guidance() -> String {
    texts::submission_guidance()
}

/// The guidance appended to the newest browser result when the session is stalled.
pub(crate) fn guidance(step: &Step) -> String {
    texts::stalled_guidance(step.no_progress, &step.fingerprint.short())
}
