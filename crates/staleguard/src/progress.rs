//! Progress (SPEC 4): a fingerprint of the page after every browser result, a no-progress
//! counter, the stalled state and its guidance, and repeated submissions. Everything is
//! derived from the transcript alone, so a proxy that uses it stays stateless.

use std::collections::HashMap;
use std::sync::Arc;

use crate::appendix::GUIDANCE_HEADER;
use crate::config::Config;
use crate::failure::is_failed;
use crate::fingerprint::{self, Fingerprint, Node};
use crate::observation::{self, Observation, TreeKind};
use crate::tools::BrowserTools;
use crate::transcript::{Item, Transcript};

/// An element a ref named on a page: role and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub role: String,
    pub name: String,
}

/// What a browser result told about the page.
enum Applied {
    Tree,
    Report,
    Nothing,
}

/// The page as last seen: what a fingerprint covers, and the refs it offered.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub url: String,
    pub title: String,
    /// `(index, url, current)` of every tab, when the server listed them.
    pub tabs: Vec<(u32, String, bool)>,
    pub document: String,
    /// The aria tree, with diffs merged onto the page they update.
    pub nodes: Option<Vec<Node>>,
    /// Controls and text, for formats without an aria tree.
    pub flat: Vec<String>,
    /// Every ref of the page and what it names (shared with the history until it changes).
    pub refs: Arc<HashMap<String, Element>>,
    /// The text of a confirmation (order placed, booking confirmed) when the page shows one.
    pub confirms: bool,
    /// Some observation has been seen.
    pub known: bool,
}

impl Page {
    /// Applies one browser result.
    fn apply(&mut self, text: &str) -> Applied {
        match observation::parse(text) {
            Some(obs) if obs.is_observation() => {
                self.apply_observation(&obs);
                Applied::Tree
            }
            Some(report) => {
                self.apply_header(&report);
                Applied::Report
            }
            None => {
                let tabs = observation::tab_list(text);
                if !tabs.is_empty() {
                    self.tabs = tabs
                        .iter()
                        .map(|t| (t.index, t.url.to_string(), t.current))
                        .collect();
                }
                Applied::Nothing
            }
        }
    }

    /// [`apply`](Self::apply) for counting only: a tree is read at header depth and only its
    /// fingerprint is kept (no refs, no confirmation). Other results take the full path.
    fn apply_counting(&mut self, text: &str) -> Applied {
        match observation::parse_header(text) {
            Some(obs) if obs.is_observation() => match obs.tree {
                Some(tree) => {
                    self.apply_tree(&obs, tree);
                    Applied::Tree
                }
                None => self.apply(text),
            },
            _ => self.apply(text),
        }
    }

    fn apply_tree(&mut self, obs: &Observation<'_>, tree: &str) {
        let nodes = fingerprint::nodes(tree);
        let ids = nodes.iter().filter_map(|n| n.id.as_deref());
        let document = observation::document_of_refs(obs.format, ids).unwrap_or_default();
        self.take_page(obs, document, Some(nodes));
        self.flat.clear();
        self.refs = Arc::default();
        self.confirms = false;
    }

    /// Takes in what a tree says of the page: header, tabs, document and nodes, merged onto
    /// the page they update when `obs` is a diff of the same document. Returns whether it was.
    fn take_page(
        &mut self,
        obs: &Observation<'_>,
        document: String,
        nodes: Option<Vec<Node>>,
    ) -> bool {
        let diff = obs.kind == TreeKind::Diff && self.known && document == self.document;
        // A server lists tabs only when there are several; a full page without the list has one.
        if obs.tabs.is_empty() && obs.kind == TreeKind::Full {
            self.tabs.clear();
        }
        self.apply_header(obs);
        self.document = document;
        self.known = true;
        self.nodes = match (nodes, diff, self.nodes.take()) {
            (Some(new), true, Some(base)) => Some(fingerprint::merge(&base, &new)),
            (new, _, _) => new,
        };
        diff
    }

    fn apply_header(&mut self, obs: &Observation<'_>) {
        if let Some(url) = &obs.url {
            self.url = url.to_string();
        }
        if let Some(title) = &obs.title {
            self.title = title.to_string();
        }
        if !obs.tabs.is_empty() {
            self.tabs = obs
                .tabs
                .iter()
                .map(|t| (t.index, t.url.to_string(), t.current))
                .collect();
        }
    }

    fn apply_observation(&mut self, obs: &Observation<'_>) {
        let document = obs.document.as_deref().unwrap_or("").to_string();
        let diff = self.take_page(obs, document, obs.tree.map(fingerprint::nodes));
        if !diff {
            self.refs = Arc::default();
        }
        self.flat = flat(obs);
        let refs = Arc::make_mut(&mut self.refs);
        for r in &obs.refs {
            let known = refs.get(r.id.as_ref()).cloned();
            // `ref=e4 [unchanged]` names no role: it keeps what the base page said.
            let element = match (r.role.is_empty(), known) {
                (true, Some(old)) => old,
                _ => Element {
                    role: r.role.to_string(),
                    name: r.name.to_string(),
                },
            };
            refs.insert(r.id.to_string(), element);
        }
        // A diff replaces subtrees: refs of the nodes it removed are gone from the page.
        if let (true, Some(nodes)) = (diff, &self.nodes) {
            let present: std::collections::HashSet<&str> =
                nodes.iter().filter_map(|n| n.id.as_deref()).collect();
            refs.retain(|id, _| present.contains(id.as_str()));
        }
        self.confirms = obs
            .chunks
            .iter()
            .chain(obs.title.iter())
            .any(|c| reads_as_confirmation(c));
    }

    /// The fingerprint of the page as last seen.
    pub fn fingerprint(&self) -> Fingerprint {
        let current = self
            .tabs
            .iter()
            .find(|t| t.2)
            .map(|t| format!("{}\u{0}{}", t.0, t.1));
        fingerprint::of_parts(
            current.as_deref().unwrap_or(""),
            self.tabs.len(),
            &self.url,
            &self.title,
            &self.document,
            self.nodes.as_deref(),
            &self.flat,
        )
    }
}

fn flat(obs: &Observation<'_>) -> Vec<String> {
    if obs.tree.is_some() {
        return Vec::new();
    }
    let controls = obs.controls.iter().map(|c| {
        let mut states: Vec<&str> = c.states.iter().map(|s| s.as_ref()).collect();
        states.sort_unstable();
        format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            c.role,
            c.name,
            c.value.as_deref().unwrap_or(""),
            states.join(",")
        )
    });
    controls
        .chain(obs.chunks.iter().map(|c| c.to_string()))
        .collect()
}

/// Page text that says a submission went through.
fn reads_as_confirmation(text: &str) -> bool {
    let t = text.to_lowercase();
    [
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
    ]
    .iter()
    .any(|p| t.contains(p))
}

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
    pub fingerprint: Fingerprint,
    /// Consecutive browser results that left the fingerprint unchanged, this one included.
    pub no_progress: u32,
    pub stalled: bool,
}

/// An action on a submit-like control that repeats an earlier one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedSubmission {
    /// Index of the call in the transcript.
    pub call: usize,
    pub element: Element,
    /// Index of the earlier identical call.
    pub earlier: usize,
    /// Why it is flagged: the page is unchanged, or it confirmed the first submission.
    pub reason: &'static str,
}

/// Progress over a whole transcript.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub steps: Vec<Step>,
    pub repeated: Vec<RepeatedSubmission>,
}

impl Progress {
    /// The state after the newest browser result.
    pub fn last(&self) -> Option<&Step> {
        self.steps.last()
    }

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

/// An observation seen earlier in the session, for naming where a stale ref came from.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Index of the result in the transcript.
    pub item: usize,
    /// The short observation ID receipts show.
    pub id: String,
    pub url: String,
    pub refs: Arc<HashMap<String, Element>>,
}

/// The session as the browser results so far describe it: the page, the no-progress
/// counter, submissions, and every observation. Fed item by item, in transcript order.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub page: Page,
    /// Every observation, oldest first.
    pub history: Vec<Seen>,
    /// The newest page-naming result was a page report without a tree (a file-linked
    /// snapshot): the model has not seen the page's current refs.
    pub page_unseen: bool,
    last: Option<Fingerprint>,
    count: u32,
    max_repeats: u32,
    submissions: Vec<Submission>,
    pub progress: Progress,
    /// Only fingerprints and the counter: no refs, history or submissions.
    counting: bool,
}

impl Session {
    pub fn new(config: &Config) -> Self {
        Session {
            max_repeats: config.max_repeats.max(1),
            ..Session::default()
        }
    }

    /// A session that keeps only what the no-progress counter needs: page fingerprints. It
    /// knows no refs, history or submissions, and reads trees at header depth, which makes it
    /// several times cheaper than [`Session::new`] on large pages.
    pub fn counting(config: &Config) -> Self {
        Session {
            counting: true,
            ..Session::new(config)
        }
    }

    /// Replays `transcript`, calling `on_call` before each browser call is taken in.
    pub fn replay(
        transcript: &Transcript<'_>,
        config: &Config,
        on_call: impl FnMut(&Session, usize, &str, &str),
    ) -> Session {
        Session::new(config).replay_from(transcript, config, on_call)
    }

    fn replay_from(
        mut self,
        transcript: &Transcript<'_>,
        config: &Config,
        mut on_call: impl FnMut(&Session, usize, &str, &str),
    ) -> Session {
        let tools = BrowserTools::new(&config.browser_tools);
        let pairs = transcript.pair_calls();
        let session = &mut self;
        for (i, item) in transcript.items.iter().enumerate() {
            match item {
                Item::Call(call) if tools.is_browser(&call.name) => {
                    on_call(session, i, &call.name, &call.arguments);
                    session.call(i, &call.name, &call.arguments);
                }
                Item::Result(result) => {
                    let call = pairs[i].and_then(|c| transcript.call(c));
                    if call.is_some_and(|c| tools.is_browser(&c.name)) {
                        session.result(i, &result.text, result.is_error);
                    }
                }
                _ => {}
            }
        }
        self
    }

    /// Takes in a browser call: remembers submissions, flags repeated ones.
    pub fn call(&mut self, at: usize, tool: &str, arguments: &str) {
        if self.counting {
            return;
        }
        let fingerprint = self.page.fingerprint();
        for id in crate::guard::targets(arguments) {
            let Some(element) = self.page.refs.get(&id).cloned() else {
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
    pub fn repeated_submission(
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
        let reason = if earlier.fingerprint == self.page.fingerprint() {
            "the page is unchanged since the same action"
        } else if earlier.confirmed {
            "a page confirmed the earlier submission"
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

    /// Takes in a browser result: updates the page, the counter and the history.
    pub fn result(&mut self, at: usize, text: &str, is_error: bool) {
        if !(is_error || is_failed(text)) {
            self.apply(at, text);
        }
        if self.page.confirms {
            self.submissions.iter_mut().for_each(|s| s.confirmed = true);
        }
        let fingerprint = self.page.fingerprint();
        self.count = if self.last == Some(fingerprint) {
            self.count + 1
        } else {
            0
        };
        self.last = Some(fingerprint);
        let stalled = self.count >= self.max_repeats;
        self.progress.steps.push(Step {
            item: at,
            fingerprint,
            no_progress: self.count,
            stalled,
        });
    }

    /// Takes in a snapshot the guard fetched itself: the page and its refs are updated, but
    /// no progress step is counted, because the model took no action.
    pub fn refresh(&mut self, at: usize, text: &str) {
        if !is_failed(text) {
            self.apply(at, text);
        }
    }

    /// Bounds memory for long sessions: keeps the newest `keep` observations, progress steps
    /// and submissions. The page itself and the no-progress counter are untouched.
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

    fn apply(&mut self, at: usize, text: &str) {
        if self.counting {
            self.page.apply_counting(text);
            return;
        }
        match self.page.apply(text) {
            Applied::Tree => {
                self.page_unseen = false;
                let id = crate::receipt::observation_id(text);
                self.history.push(Seen {
                    item: at,
                    id,
                    url: self.page.url.clone(),
                    refs: self.page.refs.clone(),
                });
            }
            Applied::Report => self.page_unseen = true,
            Applied::Nothing => {}
        }
    }
}

/// The no-progress steps of a whole transcript: what [`track`] gives, without repeated
/// submissions, at a fraction of the cost (see [`Session::counting`]).
pub fn steps(transcript: &Transcript<'_>, config: &Config) -> Progress {
    Session::counting(config)
        .replay_from(transcript, config, |_, _, _, _| {})
        .progress
}

/// Progress over a whole transcript.
pub fn track(transcript: &Transcript<'_>, config: &Config) -> Progress {
    Session::replay(transcript, config, |_, _, _, _| {}).progress
}

/// The guidance that goes with a refused repeated submission.
pub fn submission_guidance() -> String {
    format!(
        "{GUIDANCE_HEADER} This submission was already made, and the page does not show that it failed. Read back the requested outcome on the page before doing anything else. If it is not there, choose a different method or hand control to the user. Do not repeat a possible submission (submit, place order, pay, send, confirm, book, delete)."
    )
}

/// The guidance appended to the newest browser result when the session is stalled.
pub fn guidance(step: &Step) -> String {
    format!(
        "{GUIDANCE_HEADER} The observed page has not changed for {} browser steps (page fingerprint {}). Read back the requested outcome on the page before doing anything else. If it is not there, choose a different method or hand control to the user. Do not repeat a possible submission (submit, place order, pay, send, confirm, book, delete).",
        step.no_progress,
        step.fingerprint.short()
    )
}
