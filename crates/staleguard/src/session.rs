//! The session: every browser result of a request, read once.
//!
//! [`Session::read`] pairs calls and results, picks the browser results, and gives each a
//! [`Step`]: its call, its text and a shared [`Reading`] of that text (`reading.rs`), read
//! through a [`Reader`] that keeps readings in the [`Memo`]. Projection reads only headers;
//! progress and evidence share the tree parts. What an analysis derives from a step's text
//! it keeps in the memo too, by the step's content key, and in a typed slot of the step for
//! the rest of the request ([`DerivedKind`]).
//!
//! [`project`](crate::project) builds its session itself, and so do the doors that replay a
//! request for the guard ([`Engine::check_call`](crate::Engine::check_call)) or read it for a
//! host ([`Request`](crate::Request)).

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

use crate::call_args::{file_name, CallArgs};
use crate::memo::{Memo, Share};
use crate::observation::TreeKind;
use crate::reading::{Depth, Header, Reader, Reading, TreeParts};
use crate::tools::{is_find, is_snapshot_tool, BrowserTools};
use crate::transcript::{Item, Transcript};

/// One browser call and its result.
#[derive(Debug, Clone)]
pub(crate) struct Step<'t> {
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
    /// A result of a tool that is no browser tool, taken for a page by its content (a
    /// snapshot file read back, SPEC 1).
    pub by_content: bool,
    /// The call asked for part of the page only (a targeted or depth-limited snapshot, part
    /// of a file): a full tree in its text is a partial observation.
    pub partial: bool,
    /// The page a read-back file shows, as the browser result that linked the file named
    /// it: `(url, title)`.
    pub linked_page: Option<Arc<LinkedPage>>,
    /// A read-back file older than one a browser result had linked before it (its name's
    /// stamp orders it): an old page read again, never the live one.
    pub outdated: bool,
    /// A look, not a step (SPEC 4): a snapshot file read back through a file or shell tool,
    /// or a `browser_find`. Told by the call alone, so a look stays one once collapsed.
    pub look: bool,
    /// What evidence derives from the text ([`PageWordsKind`]), kept in the memo by
    /// [`key`](Self::key) and here for the rest of the request.
    pub(crate) page_words: Slot<PageWordsKind>,
}

/// A kind of value that an analysis derives from a step's text alone, kept in the memo by
/// the step's content key. The analysis names the value's type where it makes it, on its
/// own floor above this one (`impl DerivedKind for …`); a [`Step`] holds one typed slot per
/// kind, so a second kind is a new marker, impl and field, checked by the compiler.
pub(crate) trait DerivedKind {
    /// The value derived.
    type Value: Any + Send + Sync + Debug;
}

/// Evidence's words and facts of a page (`evidence::candidates::PageWords`).
pub(crate) enum PageWordsKind {}

/// A step's slot for the value of kind `K`: empty until an analysis first asks for it.
pub(crate) struct Slot<K: DerivedKind>(OnceLock<Arc<K::Value>>);

impl<K: DerivedKind> Slot<K> {
    fn new() -> Self {
        Slot(OnceLock::new())
    }

    /// The value derived from the text whose content key is `key`: the one `memo` keeps by
    /// that key when `valid` accepts it, else `make`'s, weighed by `weigh`. Kept here for
    /// the rest of the request too, so a borrow of it lives as long as the step.
    pub(crate) fn get(
        &self,
        key: u128,
        memo: &Memo,
        valid: impl Fn(&K::Value) -> bool,
        make: impl FnOnce() -> K::Value,
        weigh: impl FnOnce(&K::Value) -> u64,
    ) -> &K::Value {
        self.0
            .get_or_init(|| memo.kept(Share::Texts, (key, 0), valid, make, weigh))
    }
}

impl<K: DerivedKind> Clone for Slot<K> {
    fn clone(&self) -> Self {
        Slot(self.0.clone())
    }
}

impl<K: DerivedKind> Debug for Slot<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Step<'_> {
    /// The observation kind when the step carries a live-able tree: not failed, with refs.
    pub(crate) fn tree_kind(&self) -> Option<TreeKind> {
        match &self.reading.header {
            Some(h) if !self.failed && h.is_observation() => match h.kind {
                TreeKind::Full if self.partial => Some(TreeKind::Partial),
                kind => Some(kind),
            },
            _ => None,
        }
    }

    /// The tree parts of this step's text.
    pub(crate) fn tree(&self) -> &TreeParts {
        self.reading.tree(self.text)
    }
}

/// The page a browser result named when it linked its tree to a file: what a read of the
/// file shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkedPage {
    /// The page's URL, as the linking result named it.
    pub url: Option<String>,
    /// The page's title, as the linking result named it.
    pub title: Option<String>,
}

/// The snapshot files browser results linked so far, by file name: the page a read of one
/// shows, and the newest stamp (`page-<stamp>.yml`) linked or read.
#[derive(Default)]
struct Links {
    pages: HashMap<String, Arc<LinkedPage>>,
    newest: String,
}

impl Links {
    /// Takes in a browser result's header: the file it links, if any, shows its page.
    fn take(&mut self, header: &Header) {
        let Some(file) = header.linked.as_deref().map(file_name) else {
            return;
        };
        let page = LinkedPage {
            url: header.url.clone(),
            title: header.title.clone(),
        };
        self.stamped(file);
        self.pages.insert(file.to_string(), Arc::new(page));
    }

    /// A read of `file`: the page that linked it, and whether a newer file was linked or
    /// read before.
    fn read(&mut self, file: &str) -> (Option<Arc<LinkedPage>>, bool) {
        let outdated = stamp(file).is_some_and(|s| s < self.newest.as_str());
        if !outdated {
            self.stamped(file);
        }
        (self.pages.get(file).cloned(), outdated)
    }

    fn stamped(&mut self, file: &str) {
        if let Some(s) = stamp(file).filter(|s| *s > self.newest.as_str()) {
            self.newest = s.to_string();
        }
    }
}

/// The stamp of a snapshot file's name (`page-2026-11-30T08-09-13-405Z.yml`): ISO time, so
/// stamps order as strings do.
fn stamp(file: &str) -> Option<&str> {
    let stamp = file.strip_prefix("page-")?.strip_suffix(".yml")?;
    stamp
        .starts_with(|c: char| c.is_ascii_digit())
        .then_some(stamp)
}

/// A browser call, in transcript order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'t> {
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
#[derive(Debug, Clone)]
pub(crate) struct Session<'t> {
    /// Where the readings are kept, and what the stages derive from them.
    pub memo: &'t Memo,
    /// Browser results in order, each with its call.
    pub steps: Vec<Step<'t>>,
    /// Browser calls in order, answered or not.
    pub calls: Vec<Call<'t>>,
    /// Results that name a call ID no call before them has: a request read from a
    /// checkpoint on cannot tell whether their calls were browser calls.
    pub(crate) unpaired: usize,
    /// A request read from a checkpoint on: what the results before the first one read
    /// showed, as far as where the model began reading a page goes (the URL the last of them
    /// that shows one shows, and the transcript item of the first result of the run of results
    /// that showed it); `None` for a whole read. See `evidence::read_before`.
    pub(crate) before: Option<(Arc<str>, usize)>,
}

impl<'t> Session<'t> {
    /// Reads the browser steps of `transcript` at header depth. Identical result texts
    /// share one reading, and so do those `memo` kept from earlier requests.
    pub(crate) fn build(
        transcript: &'t Transcript<'_>,
        tools: &BrowserTools,
        memo: &'t Memo,
    ) -> Session<'t> {
        let reader = Reader {
            memo,
            depth: Depth::Header,
        };
        Session::read(transcript, tools, reader)
    }

    /// [`build`](Self::build), with the readings `reader` gives: read to [`Depth::Full`]
    /// when the analyses will read trees, which saves a header pass over each.
    pub(crate) fn read(
        transcript: &'t Transcript<'_>,
        tools: &BrowserTools,
        reader: Reader<'t>,
    ) -> Session<'t> {
        let pairs = transcript.pair_calls();
        let mut known: HashMap<&str, bool> = HashMap::new();
        let mut is_browser =
            |name: &'t str| *known.entry(name).or_insert_with(|| tools.is_browser(name));
        let memo = reader.memo;
        let mut local: HashMap<u128, Arc<Reading>> = HashMap::new();
        let mut session = Session {
            memo,
            steps: Vec::new(),
            calls: Vec::new(),
            unpaired: 0,
            before: None,
        };
        let mut links = Links::default();
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
                    let browser = is_browser(&c.name);
                    let text: &str = &result.text;
                    let by_content = !browser;
                    let ours = by_content && crate::result_lines::is_collapsed(text);
                    if by_content && !(tools.carries_pages(&c.name) && (ours || may_be_page(text)))
                    {
                        continue;
                    }
                    let key = memo.key(text);
                    // The same length check as the memo's: a hit on text of another size is no hit.
                    let reading = match local.get(&key).filter(|r| r.bytes == text.len()) {
                        Some(reading) => reading.clone(),
                        None => {
                            let reading = reader.reading(key, text);
                            local.insert(key, reading.clone());
                            reading
                        }
                    };
                    // A page read back that a projection collapsed is still that step, so a
                    // projected body projects to itself (SPEC 2): its receipt has no ref.
                    if by_content && !(ours || is_page_by_content(&reading)) {
                        continue;
                    }
                    let args = if by_content || is_snapshot_tool(&c.name) {
                        CallArgs::of(&c.arguments)
                    } else {
                        CallArgs::default()
                    };
                    let (linked_page, outdated) = match &args.file {
                        Some(file) if by_content => links.read(file_name(file)),
                        _ => (None, false),
                    };
                    if let Some(h) = reading.header.as_ref().filter(|_| browser) {
                        links.take(h);
                    }
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
                        by_content,
                        partial: args.partial,
                        linked_page,
                        outdated,
                        look: (by_content && args.file.is_some()) || is_find(&c.name),
                        page_words: Slot::new(),
                    });
                }
                _ => {}
            }
        }
        session
    }

    /// Calls and steps merged in transcript order.
    pub(crate) fn events(&self) -> impl Iterator<Item = Event<'_, 't>> {
        let mut calls = self.calls.iter().peekable();
        let mut steps = self.steps.iter().peekable();
        std::iter::from_fn(move || match (calls.peek(), steps.peek()) {
            (Some(c), Some(s)) if c.item < s.item => calls.next().map(|c| Event::Call(*c)),
            (Some(_), None) => calls.next().map(|c| Event::Call(*c)),
            _ => steps.next().map(Event::Result),
        })
    }
}

/// A cheap first look at a result of a tool that is no browser tool: only text with a ref in
/// it can be a page, and most results (source files, logs) have none.
fn may_be_page(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"[ref=").is_some()
}

/// A result of any tool is a page when a format exact enough for that says so, and it
/// carries refs.
fn is_page_by_content(reading: &Reading) -> bool {
    reading.header.as_ref().is_some_and(|h| {
        h.is_observation()
            && crate::observation::format_named(h.format).is_some_and(|f| f.by_content())
    })
}

/// A browser call or result, for analyses that replay the session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event<'s, 't> {
    /// A browser call.
    Call(Call<'t>),
    /// A browser result, with its call.
    Result(&'s Step<'t>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::observation::aria::{ref_hash, tree_nodes};
    use crate::observation::Observation;
    use crate::pipeline::{project, Options};
    use crate::reading::*;
    use crate::RequestFormat;
    use proptest::prelude::*;

    fn recorded(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn distinct_results(body: &str) -> usize {
        let (request, _, _) =
            crate::adapter::read_request(body, RequestFormat::Auto).expect("request");
        let tools = BrowserTools::new(crate::tools::DEFAULT_BROWSER_TOOLS);
        let memo = Memo::for_request();
        let session = Session::build(request.transcript(), &tools, &memo);
        let mut texts: std::collections::HashSet<&str> =
            session.steps.iter().map(|s| s.text).collect();
        // Results of other tools are read too when they may be pages (SPEC 1), once each.
        let transcript = request.transcript();
        let pairs = transcript.pair_calls();
        for (item, entry) in transcript.items.iter().enumerate() {
            let Item::Result(result) = entry else {
                continue;
            };
            let call = pairs[item].and_then(|c| transcript.call(c));
            if call.is_some_and(|c| !tools.is_browser(&c.name)) && may_be_page(&result.text) {
                texts.insert(&result.text);
            }
        }
        texts.len()
    }

    fn counted(body: &str, config: &Config, options: Options<'_>) -> (usize, usize) {
        let before = counts();
        project(body, RequestFormat::Auto, config, options).expect("projects");
        let after = counts();
        (after.0 - before.0, after.1 - before.1)
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
