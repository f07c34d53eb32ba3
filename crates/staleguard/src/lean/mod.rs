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

use std::sync::Arc;

use follow_ups::{FoldedBlock, MIN_SCORE, SHARE_OF_BEST};

use crate::evidence::{
    bm25, model_hash, model_words, ranked, section_of, word_hashes, Words, Written,
};
use crate::memo::{Memo, Share};
use crate::observation::{aria::is_control_role, TreeKind};
use crate::projection::{Folded, Plan, Status};
use crate::session::{Session, Step};
use crate::texts;
use crate::transcript::{Edit, Item, Role, Transcript};

/// A run of foldable lines under this many bytes is kept as it is: its marker would cost
/// about as much as it saves.
const FOLD_MIN_BYTES: usize = 300;
/// The start a folded run keeps: its first sentence, up to this many bytes.
const START_MAX_BYTES: usize = 100;
/// Bytes of prose kept for its words: what the rest leaves of [`TARGET_SHARE`] of the page,
/// at most [`BUDGET_SHARE`] of it and at least [`MIN_BUDGET`].
const TARGET_SHARE: f64 = 0.28;
const BUDGET_SHARE: f64 = 0.15;
const MIN_BUDGET: usize = 4 * 1024;
/// A folded block is kept for follow-up quotes up to this many bytes (the quotes' own
/// limit is the config's, at most this).
const QUOTE_MAX_BYTES: usize = 8 * 1024;
/// A short block right after an answer is kept with it, up to this many bytes.
const NEXT_MAX_BYTES: usize = 400;
/// A container with this many children of one role is a repetition: its first and last
/// [`REPEAT_ENDS`] children are kept whole.
const REPEAT_MIN: usize = 12;
const REPEAT_ENDS: usize = 2;
/// A repeated child kept at an end is a row or an item, not a section: at most this many
/// bytes.
const REPEAT_MAX_BYTES: usize = 600;

/// Roles whose nodes are prose blocks: the units ranked and folded.
const BLOCK_ROLES: &[&str] = &[
    "paragraph",
    "listitem",
    "row",
    "term",
    "definition",
    "blockquote",
    "figure",
    "note",
    "caption",
    "article",
];

/// Roles whose children may repeat: lists and tables.
const LIST_ROLES: &[&str] = &[
    "list",
    "table",
    "rowgroup",
    "grid",
    "treegrid",
    "tree",
    "menu",
    "listbox",
    "tablist",
    "directory",
];

/// Roles shown on the way to a kept line: landmarks, tables and their rows (a row's name
/// tells which item its button acts on), groups.
const PATH_ROLES: &[&str] = &[
    "banner",
    "navigation",
    "main",
    "contentinfo",
    "complementary",
    "region",
    "form",
    "search",
    "dialog",
    "alertdialog",
    "table",
    "grid",
    "treegrid",
    "row",
    "menu",
    "menubar",
    "tablist",
    "toolbar",
    "tree",
    "group",
    "tabpanel",
    "article",
];

/// Whether an item's line gives its accessible name (`link "Docs" [ref=e2]`).
fn is_named(line: &Line<'_>) -> bool {
    line.role().is_some() && line.after_role().starts_with(" \"")
}

/// Whether an item is shown on the way to a kept line below it.
fn is_path(line: &Line<'_>) -> bool {
    line.role().is_some_and(|role| PATH_ROLES.contains(&role))
}

/// Roles kept whole wherever they stand: what the page says about the agent's last action.
const WHOLE_ROLES: &[&str] = &["alert", "alertdialog", "status", "dialog", "log"];

/// A page's lean form and what it folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lean {
    pub(crate) text: String,
    pub(crate) folded: Folded,
    /// The prose blocks it folded, for the questions asked while it is live.
    blocks: Vec<FoldedBlock>,
}

/// How pages are made lean.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Pages under this many bytes are sent whole.
    pub(crate) min_bytes: usize,
    /// The guard stands in front: a folded part is read back by the page's ID.
    pub(crate) guard: bool,
    /// Bytes of a follow-up quote at most; `None`: evidence is off, no follow-up quotes.
    pub(crate) quote_bytes: Option<usize>,
}

/// How the model reads a folded part back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadBack<'a> {
    /// The guard's `browser_history`, by the observation's ID.
    History(&'a str),
    /// The server's own tools: a search, or a snapshot of part of the page.
    Server,
}

/// What prose is weighed against: the user's words, and the model's since the last of them.
pub(crate) struct Query<'q> {
    pub(crate) task: &'q Words,
    pub(crate) model: &'q Words,
    /// The page's URL: its fragment names the section the agent went to read.
    pub(crate) url: &'q str,
}

/// Sends every live (or waiting) page of `session` of at least `min_bytes` in its lean form:
/// the plan gets the replacement (with whatever was to be appended to the page after it),
/// the quotes of its folded part for each question asked since, and the page's report what
/// was folded.
pub(crate) fn add(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    options: Options,
) {
    let Options {
        min_bytes,
        guard,
        quote_bytes,
    } = options;
    for (i, step) in session.steps.iter().enumerate() {
        let shown = plan
            .results
            .get(i)
            .is_some_and(|r| matches!(r.status, Status::Live | Status::Waiting));
        let Some(header) = step.reading.header.as_ref().filter(|_| shown) else {
            continue;
        };
        if !applies(header.format, header.kind) || step.partial || step.images > 0 {
            continue;
        }
        let read_back = match guard {
            true => ReadBack::History(&step.reading.id),
            false => ReadBack::Server,
        };
        let Some(lean) = kept(session.memo, transcript, step, read_back, min_bytes) else {
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
    read_back: ReadBack<'_>,
    min_bytes: usize,
) -> Option<Arc<Option<Lean>>> {
    if step.text.len() < min_bytes.max(1) {
        return None;
    }
    let asked = last_user_text(transcript, step.item);
    let mut context = xxhash_rust::xxh3::Xxh3::new();
    for text in user_texts(transcript, step.item) {
        context.update(text.as_bytes());
        context.update(&[0]);
    }
    context.update(&model_hash(transcript, asked, step.item).to_le_bytes());
    if let ReadBack::History(id) = read_back {
        context.update(id.as_bytes());
    }
    context.update(&min_bytes.to_le_bytes());
    let render = || {
        let mut task = Words::default();
        for text in user_texts(transcript, step.item) {
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

/// One line of the page, with its line break.
struct Line<'t> {
    text: &'t str,
    indent: usize,
    kind: Kind<'t>,
    /// The item this line belongs to or under: its parent item, or for a property or a
    /// continuation, the item it belongs to.
    parent: Option<usize>,
    /// One past the last line of its subtree (itself alone but for items).
    end: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind<'t> {
    /// Outside the YAML tree: headers, fences, events.
    Outside,
    /// `- role ...`: a node.
    Item(&'t str),
    /// `- /url: ...`: a property of the item above it.
    Property,
    /// Any other line inside the tree: the rest of the line above it.
    Continuation,
}

impl Line<'_> {
    fn role(&self) -> Option<&str> {
        match self.kind {
            Kind::Item(role) => Some(role),
            _ => None,
        }
    }

    fn actionable(&self) -> bool {
        self.role()
            .is_some_and(|r| is_control_role(r) || self.text.contains("[cursor=pointer]"))
    }

    /// The line's text, without its indent and line break.
    fn body(&self) -> &str {
        self.text.trim()
    }

    /// An item's text after its role (` "Docs" [ref=e2]:`, a YAML quote around the item
    /// left out); any other line's text.
    fn after_role(&self) -> &str {
        let body = self.body();
        let Some(role) = self.role() else {
            return body;
        };
        let item = body
            .strip_prefix("- ")
            .unwrap_or(body)
            .trim_start_matches('\'');
        item.get(role.len()..).unwrap_or("")
    }
}

/// The page's lines, with the tree inside its ```yaml fences parsed; `None` when it has no
/// tree or is already lean.
fn parse(text: &str) -> Option<Vec<Line<'_>>> {
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
        let kind = match body.strip_prefix("- ") {
            Some(rest) if rest.starts_with('/') => Kind::Property,
            Some(rest) => Kind::Item(role_of(rest.trim_start_matches('\''))),
            None => Kind::Continuation,
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
fn close(lines: &mut [Line<'_>], open: &mut Vec<(usize, usize)>, indent: usize, at: usize) {
    while let Some(&(i, line)) = open.last() {
        if i < indent {
            break;
        }
        lines[line].end = lines[line].end.max(at);
        open.pop();
    }
}

/// The role word of an item (`link "Buy" [ref=e2]`: `link`; `text: Hello`: `text`).
fn role_of(rest: &str) -> &str {
    let end = rest.find([' ', ':', '"', '[']).unwrap_or(rest.len());
    &rest[..end]
}

/// How each line is kept: `hard` lines are kept and end a folded run; `soft` lines (the
/// controls and the path to them) are kept inside a run without ending it; `echo` lines
/// under a named control say again what its name says (and its `/url`), and are left out.
struct Keep {
    hard: Vec<bool>,
    soft: Vec<bool>,
    echo: Vec<bool>,
}

impl Keep {
    fn of(lines: &[Line<'_>], query: &Query<'_>, page_bytes: usize) -> Keep {
        let n = lines.len();
        let mut keep = Keep {
            hard: vec![false; n],
            soft: vec![false; n],
            echo: vec![false; n],
        };
        for (i, line) in lines.iter().enumerate() {
            match line.role() {
                None if line.kind == Kind::Outside => keep.hard[i] = true,
                Some("heading") => keep.heading(lines, i),
                Some(role) if WHOLE_ROLES.contains(&role) => keep.whole(lines, i),
                _ if line.actionable() => keep.control(lines, i),
                _ => {}
            }
        }
        for i in repetition_ends(lines) {
            keep.whole(lines, i);
        }
        keep.paths(lines);
        keep.wrappers(lines);
        // Prose gets what the page's controls leave of the target, within its bounds.
        let kept: usize = (0..n)
            .filter(|&i| keep.hard[i] || keep.soft[i])
            .map(|i| lines[i].text.len())
            .sum();
        let share = |s: f64| (page_bytes as f64 * s) as usize;
        let budget = share(TARGET_SHARE)
            .saturating_sub(kept)
            .clamp(MIN_BUDGET, share(BUDGET_SHARE).max(MIN_BUDGET));
        let skip: Vec<bool> = (0..n).map(|i| keep.echo[i] || keep.soft[i]).collect();
        for i in answers(lines, query, budget, &skip) {
            keep.whole(lines, i);
        }
        keep.paths(lines);
        keep.wrappers(lines);
        keep
    }

    /// Items that only wrap others (`- listitem [ref=e4]:`, `- code [ref=e9]:`) hold no
    /// page text: unless on a path or kept whole, they are left out, their children moved
    /// up in their place.
    fn wrappers(&mut self, lines: &[Line<'_>]) {
        for (i, line) in lines.iter().enumerate() {
            let wraps = line.end > i + 1 && line.role().is_some() && !has_words(line.body());
            self.echo[i] |= wraps && !self.hard[i] && !self.soft[i] && !line.actionable();
        }
    }

    /// A heading: its line, and the text under it when its line does not name it.
    fn heading(&mut self, lines: &[Line<'_>], i: usize) {
        if !is_named(&lines[i]) {
            return self.whole(lines, i);
        }
        self.hard[i] = true;
        let under = i + 1..lines[i].end;
        for (echo, line) in self.echo[under.clone()].iter_mut().zip(&lines[under]) {
            *echo |= !line.actionable();
        }
    }

    fn whole(&mut self, lines: &[Line<'_>], i: usize) {
        for h in &mut self.hard[i..lines[i].end] {
            *h = true;
        }
    }

    /// A control: its line, and its properties (but a link's `/url`: the model follows a
    /// link by its ref) and continuations.
    fn control(&mut self, lines: &[Line<'_>], i: usize) {
        self.soft[i] = true;
        // An unnamed control is named by the text inside it: all of it is kept.
        let named = is_named(&lines[i]);
        for (j, line) in lines.iter().enumerate().take(lines[i].end).skip(i + 1) {
            let own = !named || (line.parent == Some(i) && !matches!(line.kind, Kind::Item(_)));
            let url = line.body().starts_with("- /url:");
            self.soft[j] |= own && !url;
            self.echo[j] |= url || (named && !self.soft[j] && !line.actionable());
        }
    }

    /// The landmarks, tables and named nodes above a kept line are kept, softly: the path
    /// to it. Unnamed wrappers (`generic`, `listitem`, `paragraph`) fold with the prose.
    /// A table row is on the path to a control other than a link only: its name tells
    /// which item a button acts on, where a link's own name says where it goes.
    fn paths(&mut self, lines: &[Line<'_>]) {
        let needs_row = |l: &Line<'_>| l.actionable() && l.role() != Some("link");
        for rows in [true, false] {
            let mut walked = vec![false; lines.len()];
            for i in (0..lines.len()).rev() {
                let kept = self.hard[i] || self.soft[i];
                if !kept || needs_row(&lines[i]) != rows {
                    continue;
                }
                let mut up = lines[i].parent;
                while let Some(p) = up.filter(|&p| !walked[p]) {
                    walked[p] = true;
                    let role = lines[p].role();
                    self.soft[p] |= is_path(&lines[p]) && (rows || role != Some("row"));
                    up = lines[p].parent;
                }
            }
        }
    }
}

/// The prose blocks: innermost items of a block role, and items with no children that no
/// block holds. Each as (first line, end).
fn blocks(lines: &[Line<'_>]) -> Vec<(usize, usize)> {
    let is_block = |i: usize| lines[i].role().is_some_and(|r| BLOCK_ROLES.contains(&r));
    // Whether an item's subtree holds a block below it.
    let mut holds = vec![false; lines.len()];
    for i in (0..lines.len()).rev() {
        if let Some(p) = lines[i].parent {
            holds[p] |= holds[i] || is_block(i);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let leaf =
            line.role().is_some() && lines[i + 1..line.end].iter().all(|l| l.role().is_none());
        if (is_block(i) && !holds[i]) || (leaf && line.role() != Some("heading")) {
            out.push((i, line.end));
            i = line.end;
        } else {
            i += 1;
        }
    }
    out
}

/// The first line of every block that answers the query, best first within a byte budget.
fn answers(lines: &[Line<'_>], query: &Query<'_>, budget: usize, skip: &[bool]) -> Vec<usize> {
    let blocks = blocks(lines);
    // A block's words are those the lean form would not show anyway: a control's name is.
    let texts: Vec<String> = blocks
        .iter()
        .map(|&(a, b)| {
            let mut text = String::new();
            for (line, _) in lines[a..b].iter().zip(&skip[a..b]).filter(|(_, &s)| !s) {
                text.push_str(page_words(line).trim());
                text.push(' ');
            }
            text
        })
        .collect();
    let words: Vec<Box<[u64]>> = texts.iter().map(|t| word_hashes(t)).collect();
    let docs: Vec<&[u64]> = words.iter().map(|w| &**w).collect();
    // The user's words weigh more than the model's, numbers more than plain words.
    let mut scores = bm25(&docs, &[(query.task, 1.0, 2.0), (query.model, 0.6, 1.5)]);
    // The section the URL points at is what the agent went there to read.
    let section = section_of(query.url, texts.iter().map(|t| t.trim()));
    let best = scores.iter().copied().fold(0.0, f64::max);
    let end = section.end.min(scores.len());
    for score in scores
        .get_mut(section.start.min(end)..end)
        .unwrap_or_default()
    {
        *score = score.max(best);
    }
    let bytes = |b: usize| -> usize {
        let (first, end) = blocks[b];
        lines[first..end].iter().map(|l| l.text.len()).sum()
    };
    let mut spent = 0;
    let mut out = Vec::new();
    for b in ranked(&scores, MIN_SCORE, SHARE_OF_BEST) {
        if spent > 0 && spent + bytes(b) > budget {
            continue;
        }
        spent += bytes(b);
        out.push(blocks[b].0);
        // An answer's example or its last words often follow it in a short block.
        if let Some(next) = blocks.get(b + 1).filter(|_| bytes(b + 1) <= NEXT_MAX_BYTES) {
            out.push(next.0);
        }
    }
    out
}

/// The page's words on a line: its name and text, not its role, ref or other attributes.
fn page_words(line: &Line<'_>) -> String {
    let rest = line.after_role();
    let mut out = String::with_capacity(rest.len());
    let mut at = 0;
    while let Some(open) = rest[at..].find(" [").map(|o| at + o) {
        out.push_str(&rest[at..open]);
        let attr = &rest[open + 2..];
        let name_end = attr
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(0);
        match attr[name_end..].find(']') {
            Some(close)
                if name_end > 0 && matches!(attr.as_bytes().get(name_end), Some(b'=' | b']')) =>
            {
                at = open + 2 + name_end + close + 1;
            }
            _ => {
                out.push_str(" [");
                at = open + 2;
            }
        }
    }
    out.push_str(&rest[at..]);
    out
}

/// The first line of the first and last children of every container whose children repeat
/// one role many times (a catalog's rows, a long list).
fn repetition_ends(lines: &[Line<'_>]) -> Vec<usize> {
    let mut children: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for (i, line) in lines.iter().enumerate() {
        if let (Some(p), Some(_)) = (line.parent, line.role()) {
            children.entry(p).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for (&parent, kids) in &children {
        if !lines[parent]
            .role()
            .is_some_and(|r| LIST_ROLES.contains(&r))
        {
            continue;
        }
        let mut by_role: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for &k in kids {
            by_role
                .entry(lines[k].role().unwrap_or(""))
                .or_default()
                .push(k);
        }
        let small = |&&k: &&usize| {
            let bytes: usize = lines[k..lines[k].end].iter().map(|l| l.text.len()).sum();
            bytes <= REPEAT_MAX_BYTES
        };
        for same in by_role.values().filter(|s| s.len() >= REPEAT_MIN) {
            out.extend(same.iter().take(REPEAT_ENDS).filter(small));
            out.extend(same.iter().rev().take(REPEAT_ENDS).filter(small));
        }
    }
    out
}

/// Writes the lean form: kept lines as they are, each folded run as its start and a marker.
fn render(lines: &[Line<'_>], keep: &Keep, read_back: ReadBack<'_>) -> Lean {
    let mut shown: Vec<Shown> = (0..lines.len())
        .map(|i| match keep.echo[i] && !keep.hard[i] {
            true => Shown::Hidden,
            false => Shown::Line,
        })
        .collect();
    let mut folded = Folded::default();
    let mut i = 0;
    while i < lines.len() {
        if keep.hard[i] {
            i += 1;
            continue;
        }
        let end = (i..lines.len())
            .find(|&j| keep.hard[j])
            .unwrap_or(lines.len());
        let run = Run {
            lines: &lines[i..end],
            soft: &keep.soft[i..end],
            echo: &keep.echo[i..end],
        };
        run.fold(&mut shown[i..end], read_back, &mut folded);
        i = end;
    }
    let shift = shifts(lines, &shown);
    let mut text = String::new();
    for ((line, shown), shift) in lines.iter().zip(shown).zip(shift) {
        match shown {
            Shown::Line if is_control_role(line.role().unwrap_or("")) => {
                // The role says it is clickable: the cursor hint says nothing more.
                let bare = unindent(line.text, shift);
                text.push_str(&bare.replacen(" [cursor=pointer]", "", 1));
            }
            Shown::Line => text.push_str(unindent(line.text, shift)),
            Shown::Hidden => {}
            Shown::Marker(head, marker) => {
                if let Some(head) = head {
                    text.push_str(unindent(&head, shift));
                }
                text.push_str(&" ".repeat(line.indent.saturating_sub(shift)));
                text.push_str(&marker);
                text.push('\n');
            }
        }
    }
    Lean {
        text,
        folded,
        blocks: Vec::new(),
    }
}

/// The prose blocks the lean form does not show, as the page reads them.
fn folded_blocks(lines: &[Line<'_>], keep: &Keep) -> Vec<FoldedBlock> {
    blocks(lines)
        .into_iter()
        .filter(|&(first, _)| !keep.hard[first])
        .filter_map(|(first, end)| {
            let words: Vec<String> = lines[first..end].iter().filter_map(shown_text).collect();
            FoldedBlock::of(words.join(" "), QUOTE_MAX_BYTES)
        })
        .collect()
}

/// The text a line shows a reader: a node's name or its value, unquoted; nothing for
/// properties and bare containers.
fn shown_text(line: &Line<'_>) -> Option<String> {
    line.role()?;
    let words = page_words(line);
    let words = words.trim().trim_end_matches(':');
    let text = match words.strip_prefix(": ") {
        Some(value) => value,
        None if words.starts_with('"') => words,
        None => return None,
    };
    let text = crate::observation::aria::unquote(text.trim());
    (!text.trim().is_empty()).then(|| text.trim().to_string())
}

/// How a line of the page is written in its lean form.
#[derive(Clone)]
enum Shown {
    Line,
    Hidden,
    /// Its first sentence (when it has words) and the run's marker after it.
    Marker(Option<String>, String),
}

/// Spaces each line moves left: the indent steps of the items above it that are hidden, so
/// what is shown nests under what is shown.
fn shifts(lines: &[Line<'_>], shown: &[Shown]) -> Vec<usize> {
    let mut shift = vec![0; lines.len()];
    for i in 0..lines.len() {
        if let Some(p) = lines[i].parent {
            let step = match shown[p] {
                Shown::Hidden => lines[i].indent.saturating_sub(lines[p].indent),
                _ => 0,
            };
            shift[i] = shift[p] + step;
        }
    }
    shift
}

/// `line` without `shift` of its leading spaces.
fn unindent(line: &str, shift: usize) -> &str {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    &line[shift.min(spaces)..]
}

/// A run of lines between hard-kept ones, with which of them are kept softly.
struct Run<'r, 't> {
    lines: &'r [Line<'t>],
    soft: &'r [bool],
    echo: &'r [bool],
}

impl Run<'_, '_> {
    /// Leaves a small run whole; folds a larger one to its kept lines, its start and a
    /// marker after the start.
    fn fold(&self, shown: &mut [Shown], read_back: ReadBack<'_>, folded: &mut Folded) {
        let folds = |j: usize| !self.soft[j] && !self.echo[j];
        let foldable = || {
            (0..self.lines.len())
                .filter(|&j| folds(j))
                .map(|j| &self.lines[j])
        };
        let bytes: usize = foldable().map(|l| l.text.len()).sum();
        if bytes < FOLD_MIN_BYTES {
            return;
        }
        let start = (0..self.lines.len()).find(|&j| {
            let line = &self.lines[j];
            folds(j) && line.role().is_some() && has_words(line.body())
        });
        let head = start.map(|s| first_sentence(self.lines[s].text));
        let head_bytes = start
            .zip(head.as_ref())
            .map_or(0, |(s, h)| h.len().min(self.lines[s].text.len()));
        let hidden_lines = foldable().count() - usize::from(start.is_some());
        let hidden_bytes = bytes - head_bytes;
        for (j, slot) in shown.iter_mut().enumerate() {
            if !self.soft[j] {
                *slot = Shown::Hidden;
            }
        }
        let marker_at =
            start.unwrap_or_else(|| (0..self.lines.len()).find(|&j| folds(j)).unwrap_or(0));
        let marker = marker(hidden_lines, hidden_bytes, read_back, folded.runs == 0);
        if let Some(slot) = shown.get_mut(marker_at) {
            *slot = Shown::Marker(head, marker);
        }
        folded.lines += hidden_lines;
        folded.bytes += hidden_bytes;
        folded.runs += 1;
    }
}

/// A run's marker: the first of a page says how to read folded parts back, the others how
/// much they fold.
fn marker(lines: usize, bytes: usize, read_back: ReadBack<'_>, first: bool) -> String {
    match read_back {
        _ if !first => texts::lean_fold(lines, bytes),
        ReadBack::History(id) => texts::lean_fold_history(lines, bytes, id),
        ReadBack::Server => texts::lean_fold_server(lines, bytes),
    }
}

/// A line has words when it carries text beyond its role and attributes.
fn has_words(body: &str) -> bool {
    body.contains(": ") || body.contains('"')
}

/// `line` cut after its first sentence (or at [`START_MAX_BYTES`], on a word's end), with
/// a visible `…` and the quote it cut closed; short lines stay whole. Keeps its line break.
fn first_sentence(line: &str) -> String {
    let bare = line.trim_end_matches(['\n', '\r']);
    if bare.len() <= START_MAX_BYTES {
        return line.to_string();
    }
    let indent = bare.len() - bare.trim_start().len();
    let window = floor_boundary(bare, START_MAX_BYTES.max(indent + 40));
    let sentence = bare[..window]
        .match_indices(['.', '?', '!'])
        .map(|(at, _)| at + 1)
        .find(|&at| at > indent + 24 && bare[at..].starts_with(' '));
    let cut = sentence.unwrap_or_else(|| {
        bare[..window]
            .rfind(' ')
            .filter(|&a| a > indent)
            .unwrap_or(window)
    });
    let mut head = bare[..cut].to_string();
    head.push('…');
    if open_quote(&head) {
        head.push('"');
    }
    head.push('\n');
    head
}

/// Whether `s` ends inside a double-quoted string.
fn open_quote(s: &str) -> bool {
    let (mut inside, mut escaped) = (false, false);
    for c in s.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if inside => escaped = true,
            '"' => inside = !inside,
            _ => {}
        }
    }
    inside
}

fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
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
        lean(text, &query, ReadBack::Server, 1).expect("a lean form")
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
    fn a_page_already_lean_is_left_as_it_is() {
        let text = page(&format!("- main [ref=e1]:\n{}", prose(40)));
        let once = lean_of(&text, "unrelated");
        let (task, model) = (Words::of("unrelated"), Words::default());
        let query = Query {
            task: &task,
            model: &model,
            url: "",
        };
        assert_eq!(lean(&once.text, &query, ReadBack::Server, 1), None);
    }
}
