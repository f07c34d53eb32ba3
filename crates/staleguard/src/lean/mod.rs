//! Lean live page (SPEC 2): the newest observation of a large page, sent with every control
//! kept and the prose the task does not need folded.
//!
//! The lean form is a render decision made from the page text and the transcript up to it
//! alone, so it is the same on every later turn until the page collapses (SPEC 9, C1): the
//! provider writes it to its cache once. What is kept, line for line as the server wrote it:
//! - every actionable node (a control role, or `[cursor=pointer]`) with its properties
//!   (`/url`), and every node on the way to it, headings and landmarks included;
//! - every heading, and alerts, statuses and dialogs whole;
//! - the prose blocks that answer the user's words and what the model wrote since (ranked
//!   as evidence ranks chunks: BM25 over the page's blocks), whole;
//! - the first and last rows of a long table or list.
//!
//! The rest folds, a run at a time, to its first sentence and a marker line (a YAML comment,
//! which no page text can print inside the server's tree) that says how much was folded and
//! how to read it back. Refs inside a folded part stay live: the guard reads the page, not
//! the lean form.

mod follow_ups;
mod keep;
mod lines;
mod render;

use std::sync::Arc;

use keep::Keep;
pub(crate) use keep::Query;
use lines::parse;
use render::{folded_blocks, render};
pub(crate) use render::{Lean, ReadBack};

use crate::evidence::{model_hash, model_words, Words, Written};
use crate::memo::{Memo, Share};
use crate::observation::TreeKind;
use crate::projection::{Plan, Status};
use crate::session::{Session, Step};
use crate::transcript::{Edit, Item, Role, Transcript};

/// How pages are made lean.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options<'b> {
    /// Pages under this many bytes are sent whole.
    pub(crate) min_bytes: usize,
    /// The guard stands in front: a folded part is read back by the page's ID.
    pub(crate) guard: bool,
    /// The request offers the server's `browser_find`, which reads a folded part back.
    pub(crate) find: bool,
    /// Bytes of a follow-up quote at most; `None`: evidence is off, no follow-up quotes.
    pub(crate) quote_bytes: Option<usize>,
    /// Where the transcript is a tail read from a checkpoint, the user's messages before its
    /// resume point, with their items, which the tail does not hold ([`users_before`]);
    /// else empty.
    pub(crate) users_before: &'b [(usize, Arc<str>)],
    /// Where the transcript is a tail, what "Ask again" knows of its first step ([`First`]).
    pub(crate) first: Option<First>,
}

/// What "Ask again, get it whole" knows of the first step of a tail read from a checkpoint,
/// from the request the checkpoint was cut in ([`first_from`]): whether that step asks
/// again, whether it was sent lean, and how many steps of the same page came right before
/// it (at most [`MAX_RUN`]). The tail does not hold the steps before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct First {
    pub(crate) asks_again: bool,
    pub(crate) sent_lean: bool,
    pub(crate) run_before: usize,
}

/// [`First`] for the step of `session` first read again from transcript item `resume`;
/// `None` when no step is read again.
pub(crate) fn first_from(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    options: Options<'_>,
    resume: usize,
) -> Option<First> {
    let f = session.steps.iter().position(|s| s.item >= resume)?;
    let looks = Looks {
        transcript,
        session,
        options,
    };
    let start = looks.run_start(f);
    let carried = match start {
        0 => options.first.map_or(0, |first| first.run_before),
        _ => 0,
    };
    Some(First {
        asks_again: looks.asks_again(f),
        sent_lean: looks.sent_lean(f),
        run_before: (f - start + carried).min(MAX_RUN),
    })
}

/// Sends every live (or waiting) page of `session` of at least `min_bytes` in its lean form:
/// the plan gets the replacement (with whatever was to be appended to the page after it),
/// the quotes of its folded part for each question asked since, and the page's report what
/// was folded.
pub(crate) fn add(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    options: Options<'_>,
) {
    let quote_bytes = options.quote_bytes;
    let looks = Looks {
        transcript,
        session,
        options,
    };
    for (i, step) in session.steps.iter().enumerate() {
        let shown = plan
            .results
            .get(i)
            .is_some_and(|r| matches!(r.status, Status::Live | Status::Waiting));
        let Some(header) = step.reading.header.as_ref().filter(|_| shown) else {
            continue;
        };
        // A page under the threshold is sent whole: decided before "ask again", which
        // parses the trees of the page and the one before it.
        let small = step.text.len() < options.min_bytes.max(1);
        if small || !has_lean_form(step) || looks.asks_again(i) {
            continue;
        }
        let Some(lean) = kept(session.memo, transcript, step, options) else {
            continue;
        };
        let Some(lean) = lean.as_ref() else { continue };
        replace(plan, step.item, &lean.text);
        if let Some(limit) = quote_bytes {
            let page = (
                header.url.as_deref().unwrap_or(""),
                step.reading.id.as_str(),
            );
            // Written after the newest browser result before each question, as evidence
            // writes a question's quotes.
            let appended = asked_while_live(transcript, session, i)
                .into_iter()
                .filter_map(|(question, target)| {
                    let block = follow_ups::quotes(&lean.blocks, &Words::of(question), page, limit);
                    Some((target, block?))
                })
                .collect();
            let written = Written {
                appended,
                ..Written::default()
            };
            crate::evidence::apply(&written, &mut plan.edits);
        }
        if let Some(report) = plan.results.get_mut(i) {
            report.bytes_after = lean.text.len();
            report.folded = Some(lean.folded);
        }
    }
}

impl Options<'_> {
    /// How the model reads a folded part of `step` back, of the ways the request offers.
    fn read_back<'s>(&self, step: &'s Step<'_>) -> ReadBack<'s> {
        match (self.guard, self.find) {
            (true, _) => ReadBack::History(&step.reading.id),
            (false, true) => ReadBack::Find,
            (false, false) => ReadBack::SnapshotAgain,
        }
    }
}

/// Whether `step` could be sent lean: a whole Playwright tree, not failed, with no images.
fn has_lean_form(step: &Step<'_>) -> bool {
    let header = step.reading.header.as_ref().filter(|_| !step.failed);
    header.is_some_and(|h| applies(h.format, h.kind)) && !step.partial && step.images == 0
}

/// The pages of one request, as "Ask again, get it whole" (SPEC 2) looks back over them.
#[derive(Clone, Copy)]
struct Looks<'r, 't> {
    transcript: &'r Transcript<'t>,
    session: &'r Session<'t>,
    options: Options<'r>,
}

/// A run of the same page asked for again and again alternates: lean, whole, lean... A run
/// is followed back this far at most, so the decision costs the same in any session.
pub(crate) const MAX_RUN: usize = 32;

impl Looks<'_, '_> {
    /// Step `i` shows the page of the browser result right before it, unchanged (the same
    /// tree, refs aside), and that one was sent lean: the model asked for the page again, so
    /// it gets it whole. Decided from the transcript up to step `i` alone, so the answer
    /// stays the same on every later turn (SPEC 9, C1).
    fn asks_again(self, i: usize) -> bool {
        if let (0, Some(first)) = (i, self.options.first) {
            return first.asks_again;
        }
        let Some(before) = i.checked_sub(1).and_then(|j| self.session.steps.get(j)) else {
            return false;
        };
        projected(before) || (same_page(self.session, i) && self.sent_lean(i - 1))
    }

    /// Whether step `j` was sent lean while it was the newest page: it has a lean form and
    /// was no second look at a lean page.
    fn sent_lean(self, j: usize) -> bool {
        let start = self.run_start(j);
        let mut lean_before = false;
        for k in start..=j {
            // A tail's first step: as the request its checkpoint was cut in decided.
            lean_before = match (k, self.options.first) {
                (0, Some(first)) => first.sent_lean,
                _ => !(k > start && lean_before) && self.has_kept_form(k),
            };
        }
        lean_before
    }

    /// The first step of the run of the same page that step `j` ends, followed back
    /// [`MAX_RUN`] steps at most.
    fn run_start(self, j: usize) -> usize {
        let mut start = j;
        while start > 0 && j - start < MAX_RUN && same_page(self.session, start) {
            start -= 1;
        }
        start
    }

    /// Step `k` has a lean form worth sending.
    fn has_kept_form(self, k: usize) -> bool {
        let step = &self.session.steps[k];
        let lean = kept(self.session.memo, self.transcript, step, self.options);
        lean.is_some_and(|l| l.is_some())
    }
}

/// The step is our own writing: a receipt, or a lean form (of a page whose collapse waits).
/// Then the request was projected before, and the page after it went as it was sent: lean
/// (its markers keep it so) or whole, which a page after one of ours only is when it was
/// asked for again or has no lean form. Keeping it whole keeps projection idempotent.
fn projected(step: &Step<'_>) -> bool {
    step.reading.collapsed || lines::is_lean(step.text)
}

/// The user's messages before transcript item `resume`, with their items: what a page's lean
/// form reads of them ([`Options::users_before`]), which a checkpoint cut at `resume` keeps
/// for the tail read from there (with the model's texts from [`model_window`] on).
pub(crate) fn users_before(transcript: &Transcript<'_>, resume: usize) -> Vec<(usize, Arc<str>)> {
    let end = resume.min(transcript.items.len());
    let items = transcript.items[..end].iter().enumerate();
    items
        .filter_map(|(i, item)| match item {
            Item::Text {
                role: Role::User,
                text,
            } => Some((i, Arc::from(text.as_ref()))),
            _ => None,
        })
        .collect()
}

/// Step `i` shows the page of the step before it unchanged, and both could be sent lean.
fn same_page(session: &Session<'_>, i: usize) -> bool {
    let (Some(before), Some(step)) = (session.steps.get(i.wrapping_sub(1)), session.steps.get(i))
    else {
        return false;
    };
    if !has_lean_form(before) || !has_lean_form(step) {
        return false;
    }
    let (now, then) = (step.tree(), before.tree());
    now.has_tree && then.has_tree && now.digest == then.digest && url(step) == url(before)
}

/// The URL a step's result names, if any.
fn url<'s>(step: &'s Step<'_>) -> Option<&'s str> {
    step.reading.header.as_ref()?.url.as_deref()
}

/// The user's messages after step `i` of `session` (a live page), each with the transcript
/// item of the newest browser result before it, where quotes that answer it go (as
/// evidence puts the quotes for a question).
fn asked_while_live<'t>(
    transcript: &'t Transcript<'_>,
    session: &Session<'_>,
    i: usize,
) -> Vec<(&'t str, usize)> {
    let mut asked = Vec::new();
    let mut target = session.steps[i].item;
    let mut next = i + 1;
    for (at, item) in transcript.items.iter().enumerate().skip(target + 1) {
        while let Some(step) = session.steps.get(next).filter(|s| s.item < at) {
            target = if step.failed { target } else { step.item };
            next += 1;
        }
        if let Item::Text {
            role: Role::User,
            text,
        } = item
        {
            asked.push((text.as_ref(), target));
        }
    }
    asked
}

/// The lean form of `step`, made once for its text and what came before it, and kept in
/// the memo: a live page is sent again on every turn until it collapses.
fn kept(
    memo: &Memo,
    transcript: &Transcript<'_>,
    step: &Step<'_>,
    options: Options<'_>,
) -> Option<Arc<Option<Lean>>> {
    let (read_back, min_bytes) = (options.read_back(step), options.min_bytes);
    if step.text.len() < min_bytes.max(1) {
        return None;
    }
    let before = options.users_before;
    let last_user = last_user_text(transcript, step.item).max(before.last().map_or(0, |u| u.0));
    let asked = model_window(transcript, last_user, step.item);
    let users = || (before.iter().map(|u| &*u.1)).chain(user_texts(transcript, step.item));
    let mut context = xxhash_rust::xxh3::Xxh3::new();
    for text in users() {
        context.update(text.as_bytes());
        context.update(&[0]);
    }
    context.update(&model_hash(transcript, asked, step.item).to_le_bytes());
    match read_back {
        ReadBack::History(id) => context.update(id.as_bytes()),
        ReadBack::Find => context.update(&[1]),
        ReadBack::SnapshotAgain => context.update(&[2]),
    }
    context.update(&min_bytes.to_le_bytes());
    let render = || {
        let mut task = Words::default();
        for text in users() {
            task.add(text);
        }
        let model = model_words(transcript, asked, step.item);
        let url = step.reading.header.as_ref().and_then(|h| h.url.as_deref());
        let query = Query {
            task: &task,
            model: &model,
            url: url.unwrap_or(""),
        };
        lean(step.text, &query, read_back, min_bytes)
    };
    let weigh = |l: &Option<Lean>| {
        let blocks = |l: &Lean| {
            l.blocks
                .iter()
                .map(|b| b.text.len() * 2 + 64)
                .sum::<usize>()
        };
        (256 + l.as_ref().map_or(0, |l| l.text.capacity() + blocks(l))) as u64
    };
    Some(memo.kept(
        Share::Texts,
        (step.key, context.digest128()),
        |_| true,
        render,
        weigh,
    ))
}

/// The user's messages before transcript item `until`.
fn user_texts<'t>(transcript: &'t Transcript<'_>, until: usize) -> impl Iterator<Item = &'t str> {
    transcript.items[..until.min(transcript.items.len())]
        .iter()
        .filter_map(|item| match item {
            Item::Text {
                role: Role::User,
                text,
            } => Some(text.as_ref()),
            _ => None,
        })
}

/// What the model wrote and did since the user's last message counts for a lean page's prose
/// up to this many bytes, the newest first: its last steps say what it is after, and the
/// page's cost stays the same however long the session grows.
const MODEL_TEXT_BYTES: usize = 32 * 1024;

/// The transcript item after which the model's text a page at `until` is weighed against
/// starts: `asked` (the user's last message), or later, so that the newest
/// [`MODEL_TEXT_BYTES`] of it count, from the item that passes them on.
pub(crate) fn model_window(transcript: &Transcript<'_>, asked: usize, until: usize) -> usize {
    let until = until.min(transcript.items.len());
    let mut bytes = 0;
    for at in (asked + 1..until).rev() {
        bytes += match &transcript.items[at] {
            Item::Text {
                role: Role::Assistant,
                text,
            } => text.len(),
            Item::Call(call) => call.arguments.len(),
            _ => 0,
        };
        if bytes >= MODEL_TEXT_BYTES {
            return at - 1;
        }
    }
    asked
}

/// The transcript item of the last user message before `until` (0 when there is none).
fn last_user_text(transcript: &Transcript<'_>, until: usize) -> usize {
    transcript.items[..until.min(transcript.items.len())]
        .iter()
        .rposition(|item| {
            matches!(
                item,
                Item::Text {
                    role: Role::User,
                    ..
                }
            )
        })
        .unwrap_or(0)
}

/// Puts `text` in place of transcript item `item`; what was to be appended to it follows,
/// as evidence writes quotes after a receipt.
fn replace(plan: &mut Plan, item: usize, text: &str) {
    let mut replacement = text.to_string();
    plan.edits.retain(|e| {
        if e.item != item {
            return true;
        }
        if e.append {
            replacement.push('\n');
            replacement.push_str(&e.text);
        }
        false
    });
    plan.edits.push(Edit {
        item,
        text: replacement.into(),
        append: false,
    });
}

/// Whether a page of `format` and `kind` has a lean form: a whole Playwright tree.
pub(crate) fn applies(format: &str, kind: TreeKind) -> bool {
    kind == TreeKind::Full && format.starts_with("playwright-mcp") && !format.ends_with("-find")
}

/// The lean form of `text`, a page tree of at least `min_bytes`; `None` when the page is
/// smaller, holds no YAML tree, is already lean, or folding saves nothing.
pub(crate) fn lean(
    text: &str,
    query: &Query<'_>,
    read_back: ReadBack<'_>,
    min_bytes: usize,
) -> Option<Lean> {
    if text.len() < min_bytes.max(1) {
        return None;
    }
    let lines = parse(text)?;
    let keep = Keep::of(&lines, query, text.len());
    let mut lean = render(&lines, &keep, read_back);
    lean.blocks = folded_blocks(&lines, &keep);
    (lean.folded.bytes > 0 && lean.text.len() < text.len()).then_some(lean)
}

#[cfg(test)]
mod tests {
    use super::render::first_sentence;
    use super::*;

    fn page(tree: &str) -> String {
        format!("### Page\n- Page URL: http://a.test/\n### Snapshot\n```yaml\n{tree}```\n")
    }

    fn lean_of(text: &str, task: &str) -> Lean {
        let (task, model) = (Words::of(task), Words::default());
        let query = Query {
            task: &task,
            model: &model,
            url: "http://a.test/",
        };
        lean(text, &query, ReadBack::SnapshotAgain, 1).expect("a lean form")
    }

    fn prose(n: usize) -> String {
        (0..n)
            .map(|i| format!("  - paragraph [ref=p{i}]: Sentence {i} about nothing in particular. More words follow it here.\n"))
            .collect()
    }

    #[test]
    fn an_unnamed_control_keeps_the_text_that_names_it() {
        let text = page(&format!(
            "- main [ref=e1]:\n{}  - link [ref=e2] [cursor=pointer]:\n    - /url: a.html\n    - text: The Purpose of GNU\n    - code [ref=e3]: gettext\n{}",
            prose(20),
            prose(20)
        ));
        let lean = lean_of(&text, "unrelated");
        assert!(lean.text.contains("- link [ref=e2]:"), "{}", lean.text);
        assert!(lean.text.contains("- text: The Purpose of GNU"));
        assert!(lean.text.contains("- code [ref=e3]: gettext"));
        assert!(!lean.text.contains("/url"), "a link's target is left out");
        assert!(
            lean.folded.runs >= 1 && lean.folded.lines >= 30,
            "{:?}",
            lean.folded
        );
    }

    #[test]
    fn only_whole_playwright_trees_have_a_lean_form() {
        assert!(applies("playwright-mcp-0.0.57", TreeKind::Full));
        assert!(!applies("playwright-mcp-0.0.57", TreeKind::Partial));
        assert!(!applies("playwright-mcp-0.0.57", TreeKind::Diff));
        assert!(!applies("playwright-mcp-find", TreeKind::Full));
        assert!(!applies(crate::observation::cdmcp::NAME, TreeKind::Full));
    }

    #[test]
    fn a_folded_run_keeps_its_first_sentence_and_closes_its_quote() {
        let line = "  - paragraph [ref=e5]: \"The first sentence is here and long enough. The second one goes on and on for a good while longer than the limit.\"\n";
        let head = first_sentence(line);
        assert_eq!(
            head,
            "  - paragraph [ref=e5]: \"The first sentence is here and long enough.…\"\n"
        );
        assert_eq!(first_sentence("  - text: short\n"), "  - text: short\n");
        let long = format!("  - text: {}\n", "é".repeat(200));
        assert!(
            first_sentence(&long).ends_with("…\n"),
            "cut on a character boundary"
        );
    }

    #[test]
    fn a_page_weighs_the_newest_model_text_alone_however_long_the_session() {
        let text = |role, n: usize| Item::Text {
            role,
            text: "w".repeat(n).into(),
        };
        // The user asks (item 0), then the model writes 40 times 2 KB, results between.
        let mut items = vec![text(Role::User, 10)];
        for _ in 0..40 {
            items.push(text(Role::Assistant, 2048));
            items.push(Item::Other);
        }
        let transcript = Transcript { items };
        let until = transcript.items.len();
        let from = model_window(&transcript, 0, until);
        let window: usize = transcript.items[from + 1..until]
            .iter()
            .map(|item| match item {
                Item::Text { text, .. } => text.len(),
                _ => 0,
            })
            .sum();
        assert!(
            (MODEL_TEXT_BYTES..MODEL_TEXT_BYTES + 2048).contains(&window),
            "{window}"
        );
        // A short session is weighed whole, from the user's message on.
        assert_eq!(model_window(&transcript, 0, 9), 0);
        assert_eq!(model_window(&transcript, 70, until), 70);
    }

    #[test]
    fn a_page_already_lean_is_left_as_it_is() {
        let text = page(&format!("- main [ref=e1]:\n{}", prose(40)));
        let once = lean_of(&text, "unrelated");
        let (task, model) = (Words::of("unrelated"), Words::default());
        let query = Query {
            task: &task,
            model: &model,
            url: "",
        };
        assert_eq!(lean(&once.text, &query, ReadBack::SnapshotAgain, 1), None);
    }
}
