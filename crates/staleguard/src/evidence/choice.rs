//! The chooser: which quotes the evidence track carries. A collapsed page's own quotes are
//! chosen when the next observation supersedes it and written inside it; a user message
//! that asks about pages already collapsed gets the quotes that answer it once (SPEC 9, C2
//! and C3); the items a host names are grounded in the chunks the browser returned and
//! fitted within the caps (SPEC 3).
//!
//! Everything here is a function of the transcript up to the point where it is written: the
//! quotes of an observation depend on the transcript up to the result that superseded it,
//! and those of a user message on the transcript up to it. So a later request writes the same
//! bytes again, and the provider reads them from its prompt cache.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::memo::{table_bytes, Memo, Share};
use crate::projection::{Plan, Status};
use crate::session::{Session, Step};
use crate::texts::{self, EVIDENCE_HEADER};
use crate::transcript::{Item, Role, Transcript};
use crate::urlnorm::normalise;

use super::candidates::{page_words, Chunk, Fast, Gathered, PageChunks};
use super::ranking::{
    idf, is_date_line, is_error_page, model_hash, model_words, page_scores, saturation, shown_on,
    Words, DATE_LINE, DEFINES, MIN_PAGE_SCORE, MIN_QUESTION_SCORE, MIN_SHARE_OF_BEST, SCALE,
};
use super::report::{DropReason, EvidenceItem, Limits, Quote, Selection};
use super::writing::{line_in, line_of, omitted_notice, quote_of, refused_notice, Block, Written};

/// Quotes one collapsed page keeps at most: fewer, better quotes beat many weak ones, and
/// every byte is read again on every later turn.
pub(crate) const MAX_QUOTES_PER_PAGE: usize = 5;

/// Quotes a page that answers the task in many places keeps at most: its share of the caps
/// follows how much it answers.
pub(crate) const MAX_QUOTES_PER_ANSWERING_PAGE: usize = 8;

/// Page text per quote a page keeps besides its own: a 345 KB reference page holds answers
/// to many more questions than a 10 KB one, and its quotes cost a hundredth of its bytes.
const PAGE_BYTES_PER_QUOTE: usize = 8 * 1024;

/// Quotes the largest page keeps at most.
const MAX_QUOTES_PER_LARGE_PAGE: usize = 40;

/// Lines that date a page's content (published, on sale from, revised) one page keeps
/// besides its quotes.
const DATE_LINES_PER_PAGE: usize = 2;

/// Bytes of quote text one page or question keeps at most, whatever its quotes.
const MIN_BYTES_PER_PAGE: usize = 800;

/// Bytes of quote text one collapsed page keeps at most, per quote it may keep.
pub(crate) const BYTES_PER_PAGE_QUOTE: usize = 160;

/// A chunk scoring this share of its page's best answers the task as well as the best.
const STRONG_SHARE_OF_BEST: f64 = 0.6;

/// Quotes a follow-up question adds at most.
pub(crate) const MAX_QUOTES_PER_QUESTION: usize = 3;

/// Bytes of a kept list of scores besides its own: its key, the shared pointer's counts
/// and the cache's entry.
pub(crate) const SCORES_ENTRY_BYTES: u64 = 96;

/// One quote on its way to the request. It owns its text: a checkpoint keeps the quotes
/// chosen so far across requests.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    /// Its page's normalised URL, which tells quotes of one page apart.
    key: String,
    quote: Quote,
    /// Its line in the request.
    line: String,
    /// The block it is written in.
    block: Block,
}

/// Chooses the quotes of the collapsed observations and follow-up questions of `session`
/// from `choice` on, taking in the events after transcript item `done` (all, without), and
/// gives the quotes chosen. With `snapshot`, also gives the choice as it was after every
/// event at or before that item. The session's memo keeps each page's scores across
/// requests.
pub(crate) fn choose_from(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    plan: &Plan,
    mut choice: Choice,
    done: Option<usize>,
    snapshot: Option<usize>,
) -> (Chosen, Option<Choice>) {
    let events = Events::of(transcript, session, plan);
    let new = done.map_or(0, |done| events.order.partition_point(|e| e.at() <= done));
    let events = &events.order[new..];
    let Some(cut) = snapshot else {
        choice.run(transcript, session, plan, events);
        return (choice.state, None);
    };
    let (before, after) = events.split_at(events.partition_point(|e| e.at() <= cut));
    choice.run(transcript, session, plan, before);
    // A request resumed from here reads nothing before the cut again: the user's words and
    // the pages up to it are taken in now, as the next event would take them in anyway.
    choice.read_task(transcript, cut + 1);
    choice.furniture.read_until(session, cut + 1);
    // Nothing after the cut (the usual case): the choice is kept as it is, and only the
    // quotes are copied for writing.
    if after.is_empty() {
        let chosen = choice.state.clone();
        return (chosen, Some(choice));
    }
    let kept = choice.clone();
    choice.run(transcript, session, plan, after);
    (choice.state, Some(kept))
}

/// The quotes chosen so far and what they were weighed against, between two events. Every
/// part is a function of the transcript up to the last event taken in, so a later request
/// that repeats that transcript resumes from it (a checkpoint keeps it).
#[derive(Clone)]
pub(crate) struct Choice {
    pub(crate) state: Chosen,
    task: Task,
    /// The task's text so far, hashed as it is read: with the model's words, the context a
    /// page's scores are kept for.
    task_hash: xxhash_rust::xxh3::Xxh3,
    furniture: Furniture,
    read_up_to: usize,
    limits: Limits,
}

impl Choice {
    pub(crate) fn new(limits: Limits) -> Choice {
        Choice {
            state: Chosen {
                max_quote_bytes: limits.max_quote_bytes,
                ..Chosen::default()
            },
            task: Task::default(),
            task_hash: xxhash_rust::xxh3::Xxh3::new(),
            furniture: Furniture::default(),
            read_up_to: 0,
            limits,
        }
    }

    /// Takes in `events`, in order.
    fn run(
        &mut self,
        transcript: &Transcript<'_>,
        session: &Session<'_>,
        plan: &Plan,
        events: &[Event],
    ) {
        let mut index = None;
        for event in events {
            let at = event.at().min(transcript.items.len());
            self.read_task(transcript, at);
            self.furniture.read_until(session, at);
            match *event {
                Event::Collapse { step, next, until } => {
                    let page = Page { step, next, until };
                    let context = Context {
                        task_hash: self.task_hash.digest(),
                        furniture: &self.furniture,
                    };
                    let chosen = choose_for_page(
                        transcript,
                        session,
                        page,
                        context,
                        &mut self.task,
                        &self.state,
                    );
                    let block = Block::Inside(session.steps[step].item);
                    let asked = self.task.newest();
                    self.state.add(chosen, block, self.limits, &asked);
                }
                Event::Question { item, target } => {
                    // Only pages collapsed by then answer it: a page whose collapse waited
                    // past the question was there whole (SPEC 9, C5).
                    let by_then = collapsed_by(plan, item);
                    if index.as_ref().is_some_and(|(n, _, _)| *n != by_then.len()) {
                        index = None;
                    }
                    let (_, asked, index) = index.get_or_insert_with(|| {
                        let asked = Asked::of(transcript, events);
                        let index = Index::of(session, &asked.all, &by_then);
                        (by_then.len(), asked, index)
                    });
                    // Every question is a user message, whose words `Asked` read.
                    if let Some(question) = asked.by_item.get(&item) {
                        let chosen = choose_for_question(
                            session,
                            index,
                            target,
                            question,
                            &self.furniture,
                            &self.state,
                        );
                        let block = Block::Appended(session.steps[target].item);
                        self.state.add(chosen, block, self.limits, question);
                    }
                }
            }
        }
    }

    /// Estimated bytes it holds on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        let quote = |q: &Quote| q.quote.len() + q.source_url.len() + q.observation.len() + 96;
        let kept: usize = self
            .state
            .kept
            .iter()
            .map(|k| k.key.len() + k.line.len() + 128)
            .sum();
        let quotes: usize = self.state.kept.iter().map(|k| quote(&k.quote)).sum();
        let refused: usize = self.state.refused.iter().map(|(_, q)| quote(q) + 16).sum();
        let task: usize = self.task.texts.iter().map(|t| t.len() + 32).sum();
        let words = table_bytes::<u64, bool>(self.task.words.0.capacity());
        self.furniture.heap_bytes() + kept + quotes + refused + task + words + 256
    }

    /// Reads the user's messages before transcript item `at` into the task.
    fn read_task(&mut self, transcript: &Transcript<'_>, at: usize) {
        for item in transcript
            .items
            .get(self.read_up_to..at)
            .unwrap_or_default()
        {
            if let Item::Text {
                role: Role::User,
                text,
            } = item
            {
                self.task.texts.push(text.to_string());
                self.task_hash.update(text.as_bytes());
                self.task_hash.update(&[0]);
            }
        }
        self.read_up_to = self.read_up_to.max(at);
    }
}

/// What a page's quotes are weighed against: the user's words so far, and the text every
/// page of the site repeats.
#[derive(Clone, Copy)]
pub(crate) struct Context<'c> {
    task_hash: u64,
    furniture: &'c Furniture,
}

/// The user's messages so far, whose words are read only when a page's scores are not
/// kept: on a later turn every page's are.
#[derive(Default, Clone)]
pub(crate) struct Task {
    texts: Vec<String>,
    words: Words,
    read: usize,
}

impl Task {
    /// The words of the newest user message so far.
    fn newest(&self) -> Words {
        self.texts
            .last()
            .map_or_else(Words::default, |t| Words::of(t))
    }

    fn words(&mut self) -> &Words {
        for text in self.texts.get(self.read..).unwrap_or_default() {
            self.words.add(text);
        }
        self.read = self.texts.len();
        &self.words
    }
}

/// Text that pages at more than one URL showed (navigation, footers, the site's name): it
/// says nothing about any one page. Read from the pages before each point where quotes are
/// chosen, so the choice depends on the transcript up to there alone.
#[derive(Default, Clone)]
pub(crate) struct Furniture {
    /// The page each text was first seen on, by its index in `pages`.
    first_seen: HashMap<u64, u32, Fast>,
    /// The keys of the pages read, in the order they first showed a text.
    pages: Vec<Box<str>>,
    repeated: HashSet<u64, Fast>,
    /// Every step before this transcript item has been read.
    read_before: usize,
}

impl Furniture {
    /// Reads the pages of the steps before transcript item `at`.
    fn read_until(&mut self, session: &Session<'_>, at: usize) {
        let first = session.steps.partition_point(|s| s.item < self.read_before);
        for step in session.steps[first..].iter().take_while(|s| s.item < at) {
            self.read_before = step.item + 1;
            if step.failed || step.reading.header.is_none() {
                continue;
            }
            self.read(session.memo, step);
        }
        self.read_before = self.read_before.max(at);
    }

    fn read(&mut self, memo: &Memo, step: &Step<'_>) {
        let words = page_words(memo, step);
        let key = &*words.url_key;
        let page = self.pages.len() as u32;
        let mut pushed = false;
        for chunk in &words.facts.chunks {
            match self.first_seen.get(&chunk.hash) {
                Some(&first) => {
                    if self.pages.get(first as usize).is_some_and(|k| **k != *key) {
                        self.repeated.insert(chunk.hash);
                    }
                }
                None => {
                    if !pushed {
                        self.pages.push(key.into());
                        pushed = true;
                    }
                    self.first_seen.insert(chunk.hash, page);
                }
            }
        }
    }

    /// Estimated bytes it holds on the heap.
    fn heap_bytes(&self) -> usize {
        let keys: usize = self.pages.iter().map(|k| k.len() + 32).sum();
        table_bytes::<u64, u32>(self.first_seen.capacity())
            + table_bytes::<u64, ()>(self.repeated.capacity())
            + keys
    }

    fn has(&self, chunk: &Chunk<'_>) -> bool {
        self.repeated.contains(&chunk.facts.hash)
    }
}

/// Where quotes are chosen, in transcript order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    /// Step `step` was superseded by step `next`, the observation at transcript item
    /// `until`.
    Collapse {
        step: usize,
        next: Option<usize>,
        until: usize,
    },
    /// The user message at transcript item `item`, after collapsed pages; `target` is the
    /// newest non-failed browser step before it.
    Question { item: usize, target: usize },
}

impl Event {
    /// Where in the transcript it happens.
    fn at(&self) -> usize {
        match *self {
            Event::Collapse { until, .. } => until,
            Event::Question { item, .. } => item,
        }
    }
}

pub(crate) struct Events {
    order: Vec<Event>,
}

impl Events {
    fn of(transcript: &Transcript<'_>, session: &Session<'_>, plan: &Plan) -> Events {
        let mut order = Vec::new();
        let steps = &session.steps;
        // The observation after each step, found in one pass from the end.
        let mut next_observation = vec![None; steps.len()];
        let mut seen = None;
        for (i, step) in steps.iter().enumerate().rev() {
            next_observation[i] = seen;
            if step.tree_kind().is_some() {
                seen = Some(i);
            }
        }
        for (i, (step, report)) in steps.iter().zip(&plan.results).enumerate() {
            if report.status != Status::Collapsed || step.reading.collapsed {
                continue;
            }
            let next = next_observation[i];
            let until = next.map_or(usize::MAX, |n| steps[n].item);
            // Quotes are chosen from what came before `until` (C2); a collapse that waited
            // (C5) takes its place in the caps' history where it was done, so the choices
            // made before then stay as they were.
            let done = plan.collapsed_at.get(i).copied().flatten().unwrap_or(0);
            order.push((
                until.max(done),
                Event::Collapse {
                    step: i,
                    next,
                    until,
                },
            ));
        }
        let first_collapse = order.iter().map(|(until, _)| *until).min();
        for (item, entry) in transcript.items.iter().enumerate() {
            let asked_after_collapse = first_collapse.is_some_and(|at| at < item);
            if !asked_after_collapse
                || !matches!(
                    entry,
                    Item::Text {
                        role: Role::User,
                        ..
                    }
                )
            {
                continue;
            }
            // Steps are in transcript order: the newest non-failed one before the message.
            let before = steps.partition_point(|s| s.item < item);
            let target = (0..before).rev().find(|&i| {
                plan.results
                    .get(i)
                    .is_some_and(|r| r.status != Status::Failed)
            });
            if let Some(target) = target.filter(|&t| !steps[t].appendix) {
                order.push((item, Event::Question { item, target }));
            }
        }
        // A page's quotes are chosen when it is superseded; a question's when it is asked.
        order.sort_by_key(|(at, _)| *at);
        Events {
            order: order.into_iter().map(|(_, e)| e).collect(),
        }
    }
}

/// The quotes chosen so far, in request order, and what the caps and the per-quote limit
/// did.
#[derive(Debug, Default, Clone)]
pub(crate) struct Chosen {
    kept: Vec<Kept>,
    /// Quotes dropped by the caps, per block that announces it.
    dropped: Vec<(Block, usize)>,
    /// Chunks over the per-quote limit, refused whole, per block that announces it.
    refused: Vec<(Block, Quote)>,
    max_quote_bytes: usize,
    /// The lowest transcript item whose block lost quotes to the caps since this was last
    /// reset: a resumed choice that drops a quote written before its resume point cannot
    /// keep the prefix it resumed from.
    pub(crate) lowest_drop: Option<usize>,
}

impl Chosen {
    /// How many quotes were chosen.
    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }

    /// True when `chunk` (or a quote holding it, on the same page) is already written.
    fn has(&self, chunk: &Chunk<'_>) -> bool {
        self.kept
            .iter()
            .any(|k| *k.key == *chunk.key && k.quote.quote.contains(chunk.text))
    }

    /// Adds `chosen` in `block`. When the caps would be passed, quotes go (C3): first those
    /// that answer nothing of the newest user message (`asked`), oldest first, until at most
    /// half the caps are used, so the cached prefix breaks rarely, at one place; then, while
    /// still over the caps, a kept quote goes only for a new one that answers `asked`
    /// better, and otherwise the new one waits.
    fn add(&mut self, chosen: Picked<'_>, block: Block, limits: Limits, asked: &Words) {
        self.refused
            .extend(chosen.refused.iter().map(|c| (block, quote_of(c))));
        let first_new = self.kept.len();
        let (mut items, mut bytes) = (0, 0);
        for chunk in chosen.chunks {
            let line = line_in(block, &chunk);
            let size = line.len() + 1;
            if items + 1 > limits.max_items || bytes + size > limits.max_bytes {
                break;
            }
            items += 1;
            bytes += size;
            self.kept.push(Kept {
                key: chunk.key.to_string(),
                quote: quote_of(&chunk),
                line,
                block,
            });
        }
        if self.kept.len() == first_new || !over(&self.kept, limits.max_items, limits.max_bytes) {
            return;
        }
        let gone = self.make_room(first_new, limits, asked);
        let dropped = gone.iter().take(first_new).filter(|g| **g).count();
        let lowest = (self.kept.iter().zip(&gone).take(first_new))
            .filter(|(_, g)| **g)
            .map(|(k, _)| k.block.item())
            .min();
        self.lowest_drop = self.lowest_drop.into_iter().chain(lowest).min();
        let mut gone = gone.into_iter();
        self.kept.retain(|_| !gone.next().unwrap_or(false));
        if dropped > 0 {
            self.dropped.push((block, dropped));
        }
    }

    /// Which quotes go, by index, when the quotes from `first_new` on pass the caps (see
    /// [`add`](Self::add)).
    fn make_room(&self, first_new: usize, limits: Limits, asked: &Words) -> Vec<bool> {
        let mut gone = vec![false; self.kept.len()];
        let used = |gone: &[bool]| {
            (self.kept.iter().zip(gone))
                .filter(|(_, g)| !**g)
                .fold((0, 0), |(n, b), (k, _)| (n + 1, b + k.line.len() + 1))
        };
        let over = |gone: &[bool], items: usize, bytes: usize| {
            let (n, b) = used(gone);
            n > items || b > bytes
        };
        // Least useful first; among equals, the oldest (the lowest index).
        let useful = |i: usize| (answers(&self.kept[i].quote.quote, asked), i);
        let mut old: Vec<(u32, usize)> = (0..first_new).map(useful).collect();
        old.sort_unstable();
        let mut new: Vec<(u32, usize)> = (first_new..self.kept.len()).map(useful).collect();
        new.sort_unstable();
        let (half_items, half_bytes) = (limits.max_items / 2, limits.max_bytes / 2);
        let mut old = old.into_iter().peekable();
        while let Some(&(0, i)) = old.peek() {
            if !over(&gone, half_items, half_bytes) {
                break;
            }
            gone[i] = true;
            old.next();
        }
        let mut new = new.into_iter().peekable();
        while over(&gone, limits.max_items, limits.max_bytes) {
            let Some(&(answer, waits)) = new.peek() else {
                break;
            };
            match old.peek() {
                Some(&(kept, i)) if kept < answer => {
                    gone[i] = true;
                    old.next();
                }
                _ => {
                    gone[waits] = true;
                    new.next();
                }
            }
        }
        gone
    }

    /// The blocks to write, with the first `keep` quotes (in request order); the rest are
    /// omitted, with a notice in the newest block.
    pub(crate) fn render(&self, keep: usize) -> Written {
        self.render_from(keep, 0)
    }

    /// [`render`](Self::render), only the blocks at transcript item `from` and after.
    pub(crate) fn render_from(&self, keep: usize, from: usize) -> Written {
        let mut blocks: Vec<Block> = self.kept.iter().map(|k| k.block).collect();
        blocks.extend(self.dropped.iter().map(|(b, _)| *b));
        blocks.extend(self.refused.iter().map(|(b, _)| *b));
        blocks.sort();
        blocks.dedup();
        let omitted = self.kept.len().saturating_sub(keep);
        let newest = blocks.last().copied();
        let mut written = Written::default();
        for block in blocks.into_iter().filter(|b| b.item() >= from) {
            let mut text = String::from(EVIDENCE_HEADER);
            let mut any = false;
            for (i, k) in self
                .kept
                .iter()
                .enumerate()
                .filter(|(_, k)| k.block == block)
            {
                if i >= keep {
                    written.omitted.push(k.quote.clone());
                    continue;
                }
                text.push('\n');
                text.push_str(&k.line);
                written.quotes.push(k.quote.clone());
                written.quote_blocks.push(block);
                any = true;
            }
            let notices = self.notices(block, omitted, newest == Some(block), &mut written);
            if !any && notices.is_empty() {
                continue;
            }
            for n in notices {
                text.push('\n');
                text.push_str(&n);
            }
            match block {
                Block::Inside(item) => written.inside.push((item, text)),
                Block::Appended(item) => written.appended.push((item, text)),
            }
        }
        written
    }

    /// The notices of `block`: refused quotes, quotes dropped by the caps, and (in the
    /// newest block) quotes omitted by the request budget.
    fn notices(
        &self,
        block: Block,
        omitted: usize,
        newest: bool,
        written: &mut Written,
    ) -> Vec<String> {
        let mut notices = Vec::new();
        let refused: Vec<Quote> = self
            .refused
            .iter()
            .filter(|(b, _)| *b == block)
            .map(|(_, q)| q.clone())
            .collect();
        notices.extend(refused_notice(&refused, self.max_quote_bytes));
        written
            .refused_blocks
            .extend(std::iter::repeat(block).take(refused.len()));
        written.refused.extend(refused);
        let dropped: usize = self
            .dropped
            .iter()
            .filter(|(b, _)| *b == block)
            .map(|(_, n)| n)
            .sum();
        if dropped > 0 {
            notices.push(texts::quotes_dropped_by_caps(dropped));
        }
        if newest && omitted > 0 {
            notices.push(omitted_notice(omitted));
        }
        notices
    }
}

pub(crate) fn over(kept: &[Kept], items: usize, bytes: usize) -> bool {
    kept.len() > items || kept.iter().map(|k| k.line.len() + 1).sum::<usize>() > bytes
}

/// How well `quote` answers a user message whose words are `asked`: the asked words it
/// holds, a number or identifier counting twice.
fn answers(quote: &str, asked: &Words) -> u32 {
    let words = super::candidates::word_hashes(quote);
    words.iter().map(|&w| asked.weight(w, 1, 2)).sum()
}

/// What one page or question picked: the quotes, and the chunks refused whole.
pub(crate) struct Picked<'t> {
    chunks: Vec<Chunk<'t>>,
    refused: Vec<Chunk<'t>>,
}

impl Picked<'_> {
    fn none() -> Self {
        Picked {
            chunks: Vec::new(),
            refused: Vec::new(),
        }
    }
}

/// The quotes of the collapsed page `at`, as the step that superseded it left it: the
/// chunks that share rare words with the user's task or with what the model wrote and did
/// after reading it, numbers and identifiers first; none that the next page still shows.
pub(crate) fn choose_for_page<'t>(
    transcript: &'t Transcript<'_>,
    session: &'t Session<'t>,
    at: Page,
    context: Context<'_>,
    task: &mut Task,
    state: &Chosen,
) -> Picked<'t> {
    let page = &session.steps[at.step];
    let header = page.reading.header.as_ref();
    if is_error_page(header.and_then(|h| h.url.as_deref())) {
        return Picked::none();
    }
    // What the next page still shows is not lost yet; the same text is the same reading.
    let next = at.next.and_then(|n| session.steps.get(n));
    if next.is_some_and(|n| std::sync::Arc::ptr_eq(&n.reading, &page.reading)) {
        return Picked::none();
    }
    let context_key = (u128::from(context.task_hash) << 64)
        | u128::from(model_hash(
            transcript,
            read_from(session, at.step),
            at.until,
        ));
    let memo = session.memo;
    let all = PageChunks::of(memo, page);
    let score = || -> Vec<u32> {
        let model = model_words(transcript, read_from(session, at.step), at.until);
        page_scores(memo, page, task.words(), &model)
    };
    let at = (page.key, context_key);
    let len = all.len();
    let same = |s: &Vec<u32>| s.len() == len;
    let weigh = |s: &Vec<u32>| SCORES_ENTRY_BYTES + 4 * s.capacity() as u64;
    let scores = memo.kept(Share::Small, at, same, score, weigh);
    let title = header.and_then(|h| h.title.as_deref()).unwrap_or("");
    // Only chunks that score enough can be chosen: the rest are never looked at again.
    let quotable = |i: usize| all.facts(i).quotable;
    let best_score = (scores.iter().enumerate())
        .filter(|(i, _)| quotable(*i))
        .map(|(_, s)| *s)
        .max()
        .unwrap_or(0);
    let min = MIN_PAGE_SCORE.max((f64::from(best_score) * MIN_SHARE_OF_BEST) as u32);
    // The first and last numbered rows of a table qualify whatever the best chunk scores
    // ("the last part in the list" names no word of the row), and so do lines that date the
    // page's content, which `best` keeps besides the page's quotes.
    let qualifies = |c: &Chunk<'_>, s: u32| {
        s >= min || is_date_line(c.text, c.facts.date) || (c.candidate && s >= MIN_PAGE_SCORE)
    };
    let mut chunks: Vec<(Chunk<'t>, u32)> = scores
        .iter()
        .enumerate()
        .filter(|(_, s)| **s >= DATE_LINE)
        .filter_map(|(i, s)| Some((all.get(i)?, *s)))
        .filter(|(c, s)| qualifies(c, *s))
        .filter(|(c, _)| c.facts.quotable && c.text != title)
        .filter(|(c, _)| !context.furniture.has(c))
        .collect();
    if let (Some(next), false) = (next, chunks.is_empty()) {
        let shown = shown_on(memo, next);
        chunks.retain(|(c, _)| !shown.contains(&c.facts.hash));
    }
    let strong = (f64::from(best_score) * STRONG_SHARE_OF_BEST) as u32;
    let answering = chunks.iter().filter(|(_, s)| *s >= strong).count();
    let max = answering.clamp(MAX_QUOTES_PER_PAGE, MAX_QUOTES_PER_ANSWERING_PAGE);
    let max = (max + page.text.len() / PAGE_BYTES_PER_QUOTE).min(MAX_QUOTES_PER_LARGE_PAGE);
    best(chunks, DATE_LINE, max, state, true)
}

/// Where the model began reading the page of step `at`: the first of the results right
/// before it that showed the same URL (results that show none between them aside). Its text
/// was read there first, so what the model wrote since may repeat it, though a later snapshot
/// of the page was the one to collapse.
fn read_from(session: &Session<'_>, at: usize) -> usize {
    match url_of(session, at) {
        Some(page) => run_start(session, at, page),
        None => session.steps.get(at).map_or(0, |s| s.item),
    }
}

fn url_of<'s>(session: &'s Session<'_>, at: usize) -> Option<&'s str> {
    let header = session.steps.get(at)?.reading.header.as_ref()?;
    header.url.as_deref()
}

/// The transcript item of the first result of the run of results up to step `at` that
/// showed `page`: before the first step of a request read from a checkpoint on, as the
/// session's `before` says.
fn run_start(session: &Session<'_>, at: usize, page: &str) -> usize {
    let mut first = session.steps.get(at).map_or(0, |s| s.item);
    for i in (0..at).rev() {
        match url_of(session, i) {
            Some(u) if u == page => first = session.steps[i].item,
            Some(_) => return first,
            None => {}
        }
    }
    match &session.before {
        Some((url, item)) if **url == *page => *item,
        _ => first,
    }
}

/// What a read that starts at transcript item `at` (a checkpoint's resume point) must know
/// of the results before it, so that [`read_from`] answers there as it does on the whole
/// request: the URL the last of them that shows one shows, and the item where the model
/// began reading it. The words the model wrote from that item on weigh the quotes of a page
/// read from `at` on that shows the same URL.
pub(crate) fn read_before(session: &Session<'_>, at: usize) -> Option<(Arc<str>, usize)> {
    let end = session.steps.partition_point(|s| s.item < at);
    let last = (0..end).rev().find_map(|i| Some((i, url_of(session, i)?)));
    match last {
        Some((i, url)) => Some((Arc::from(url), run_start(session, i, url))),
        None => session.before.clone(),
    }
}

/// A collapsed page: its step, the step that superseded it, and that step's transcript item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page {
    step: usize,
    next: Option<usize>,
    until: usize,
}

/// Where each asked word occurs among the chunks of the collapsed pages: a question's
/// candidates are found by its words, not by reading every page again for every question.
pub(crate) struct Index<'t> {
    chunks: Vec<(usize, Chunk<'t>)>,
    postings: HashMap<u64, Vec<usize>, Fast>,
    /// Per collapsed step, in order: the quotable chunks and their words up to and with it,
    /// what BM25 counts its frequencies and lengths against.
    totals: Vec<(usize, usize, usize)>,
}

/// The words of the request's questions, each question's and all of them: the only words
/// the index is looked up by.
pub(crate) struct Asked {
    by_item: HashMap<usize, Words, Fast>,
    all: HashSet<u64, Fast>,
}

impl Asked {
    fn of(transcript: &Transcript<'_>, events: &[Event]) -> Asked {
        let mut asked = Asked {
            by_item: HashMap::default(),
            all: HashSet::default(),
        };
        for event in events {
            if let Event::Question { item, .. } = *event {
                if let Some(Item::Text { text, .. }) = transcript.items.get(item) {
                    let words = Words::of(text);
                    asked.all.extend(words.0.keys().copied());
                    asked.by_item.insert(item, words);
                }
            }
        }
        asked
    }
}

/// The steps collapsed at or before transcript item `item`: every collapsed one, unless
/// collapses waited.
fn collapsed_by(plan: &Plan, item: usize) -> Vec<usize> {
    let done = |i: usize| {
        plan.collapsed_at
            .get(i)
            .map_or(true, |at| at.is_some_and(|at| at <= item))
    };
    (0..plan.results.len())
        .filter(|&i| plan.results[i].status == Status::Collapsed && done(i))
        .collect()
}

impl<'t> Index<'t> {
    /// The quotable chunks of the collapsed pages `steps` ([`collapsed_by`]), by the `asked`
    /// words they hold.
    fn of(session: &'t Session<'t>, asked: &HashSet<u64, Fast>, steps: &[usize]) -> Index<'t> {
        let mut index = Index {
            chunks: Vec::new(),
            postings: HashMap::default(),
            totals: Vec::new(),
        };
        let collapsed = steps
            .iter()
            .filter_map(|&i| Some((i, session.steps.get(i)?)))
            .filter(|(_, s)| !s.reading.collapsed)
            .filter(|(_, s)| {
                !is_error_page(s.reading.header.as_ref().and_then(|h| h.url.as_deref()))
            });
        // A page snapshotted again repeats its chunks: each distinct text counts once, at
        // its first step, so a word is as rare as the page makes it. Texts are told apart
        // by their hashes, as the next page's and the live page's chunks are.
        let mut seen: HashSet<(u64, u64), Fast> = HashSet::default();
        for (i, step) in collapsed {
            let title = step
                .reading
                .header
                .as_ref()
                .and_then(|h| h.title.as_deref());
            // Chunks carry their step's page key: hashed once per step, not per chunk.
            let words = page_words(session.memo, step);
            let step_key = &*words.url_key;
            let step_hash = xxhash_rust::xxh3::xxh3_64(step_key.as_bytes());
            // The asked words this page's quotable chunks hold: few, so each chunk's words
            // are matched against a short list instead of the request's whole set.
            let frequency = &words.facts.frequency;
            let (mut chunks, mut lengths) = index.totals.last().map_or((0, 0), |t| (t.1, t.2));
            for (f, w) in words.facts.chunks.iter().zip(&words.words) {
                if f.quotable {
                    chunks += 1;
                    lengths += w.len();
                }
            }
            index.totals.push((i, chunks, lengths));
            let hits: Vec<u64> = if asked.len() <= frequency.len() {
                asked
                    .iter()
                    .copied()
                    .filter(|w| frequency.contains_key(w))
                    .collect()
            } else {
                frequency
                    .keys()
                    .copied()
                    .filter(|w| asked.contains(w))
                    .collect()
            };
            if hits.is_empty() {
                continue;
            }
            let page = PageChunks::of(session.memo, step);
            for c in 0..page.len() {
                // Only chunks holding an asked word are ever looked up; their text decides
                // their words, so a repeated text is skipped alike.
                let asks = |w: &&u64| hits.contains(*w);
                if !page.facts(c).quotable || !page.words(c).iter().any(|w| asks(&w)) {
                    continue;
                }
                let Some(chunk) = page.get(c).filter(|c| Some(c.text) != title) else {
                    continue;
                };
                let key = if *chunk.key == *step_key {
                    step_hash
                } else {
                    xxhash_rust::xxh3::xxh3_64(chunk.key.as_bytes())
                };
                if !seen.insert((key, chunk.facts.hash)) {
                    continue;
                }
                let at = index.chunks.len();
                for &w in chunk.words.iter().filter(asks) {
                    index.postings.entry(w).or_default().push(at);
                }
                index.chunks.push((i, chunk));
            }
        }
        index
    }
}

/// The quotes that answer a user message, whose words are `question`: chunks of pages
/// collapsed before step `target` that share its rare words, and that the request does not
/// carry yet.
pub(crate) fn choose_for_question<'t>(
    session: &'t Session<'t>,
    index: &Index<'t>,
    target: usize,
    question: &Words,
    furniture: &Furniture,
    state: &Chosen,
) -> Picked<'t> {
    let before = |&at: &usize| index.chunks.get(at).is_some_and(|(step, _)| *step < target);
    // Steps are indexed in order: those before `target` are a prefix.
    let totals = &index.totals[..index.totals.partition_point(|t| t.0 < target)];
    let (n, lengths) = totals.last().map_or((0, 0), |t| (t.1, t.2));
    let avg = lengths as f64 / n.max(1) as f64;
    // BM25 of each candidate chunk against the question's words.
    let mut scores: HashMap<usize, f64, Fast> = HashMap::default();
    let mut defines: HashMap<usize, u32, Fast> = HashMap::default();
    for (&w, &digit) in &question.0 {
        let postings: &[usize] = index
            .postings
            .get(&w)
            .map_or(&[], |p| &p[..p.partition_point(before)]);
        let weight = idf(postings.len(), n) * if digit { 2.0 } else { 1.0 };
        for &at in postings {
            *scores.entry(at).or_default() += weight;
        }
        // A chunk that starts with the word defines it: a parameter list's "sep <string>
        // The substring used to delimit ...".
        let starts_with = |at: &&usize| {
            index.chunks.get(**at).is_some_and(|(_, c)| {
                super::candidates::words_with_digits(c.text)
                    .next()
                    .map(|(h, _)| h)
                    == Some(w)
            })
        };
        for &at in postings.iter().filter(starts_with) {
            *defines.entry(at).or_default() += DEFINES;
        }
    }
    if scores.is_empty() {
        return Picked::none();
    }
    let live = shown_on(session.memo, &session.steps[target]);
    let mut candidates: Vec<(Chunk<'t>, u32)> = scores
        .iter()
        .filter_map(|(&at, &bm25)| {
            let (_, c) = index.chunks.get(at)?;
            let matched = bm25 * saturation(c.words.len(), avg) * SCALE;
            let extra = defines.get(&at).copied().unwrap_or(0) + 10 * u32::from(c.facts.number);
            Some((c.clone(), matched.round() as u32 + extra))
        })
        .filter(|(c, _)| !live.contains(&c.facts.hash) && !furniture.has(c))
        .collect();
    // In page order, so ties break the same way on every run.
    candidates.sort_by(|(a, _), (b, _)| (a.position, a.text).cmp(&(b.position, b.text)));
    best(
        candidates,
        MIN_QUESTION_SCORE,
        MAX_QUOTES_PER_QUESTION,
        state,
        false,
    )
}

/// The `max` best chunks scoring at least `min`, not written yet, within the per-page bytes,
/// in page order; chunks over the per-quote limit that rank among them are refused whole.
/// Ties go to the newer page, then to page order: deterministic. With `dated`, short lines
/// that date the page's content are kept besides, up to two in all: an answer cites when
/// what it quotes was published.
pub(crate) fn best<'t>(
    chunks: Vec<(Chunk<'t>, u32)>,
    min: u32,
    max: usize,
    state: &Chosen,
    dated: bool,
) -> Picked<'t> {
    let (chunks, scores): (Vec<Chunk<'t>>, Vec<u32>) = chunks.into_iter().unzip();
    let mut ranked: Vec<(u32, usize)> = scores
        .iter()
        .enumerate()
        .map(|(i, s)| (*s, i))
        .filter(|(s, i)| *s >= min && !state.has(&chunks[*i]))
        .collect();
    ranked.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(chunks[b.1].position.cmp(&chunks[a.1].position))
            .then(a.1.cmp(&b.1))
    });
    let (mut chosen, mut refused): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let mut bytes = 0;
    for &(_, i) in &ranked {
        let c = &chunks[i];
        let inside = chosen
            .iter()
            .any(|&j| chunks[j].key == c.key && chunks[j].text.contains(c.text));
        if inside {
            continue;
        }
        if c.text.len() > state.max_quote_bytes {
            refused.push(i);
            continue;
        }
        // The page's first quote may take up to the per-quote limit.
        if bytes > 0 && bytes + c.text.len() > (max * BYTES_PER_PAGE_QUOTE).max(MIN_BYTES_PER_PAGE)
        {
            continue;
        }
        bytes += c.text.len();
        chosen.push(i);
        if chosen.len() == max {
            break;
        }
    }
    if dated {
        let date = |i: &usize| is_date_line(chunks[*i].text, chunks[*i].facts.date);
        let have = chosen.iter().filter(|i| date(i)).count();
        let more: Vec<usize> = (ranked.iter().map(|(_, i)| *i))
            .filter(|i| date(i) && !chosen.contains(i))
            .filter(|i| chunks[*i].text.len() <= state.max_quote_bytes)
            .take(DATE_LINES_PER_PAGE.saturating_sub(have))
            .collect();
        chosen.extend(more);
    }
    chosen.sort_unstable();
    let mut chunks: Vec<Option<Chunk<'t>>> = chunks.into_iter().map(Some).collect();
    let mut take = |ids: Vec<usize>| -> Vec<Chunk<'t>> {
        ids.into_iter()
            .filter_map(|i| chunks.get_mut(i).and_then(Option::take))
            .collect()
    };
    Picked {
        chunks: take(chosen),
        refused: take(refused),
    }
}

/// A grounded explicit item, borrowed until it is kept or refused.
pub(crate) struct Candidate<'c> {
    url: &'c str,
    /// `url`, normalised.
    key: String,
    observation: &'c str,
    text: &'c str,
}

impl Candidate<'_> {
    fn quote(&self) -> Quote {
        Quote {
            source_url: self.url.to_string(),
            observation: self.observation.to_string(),
            quote: self.text.to_string(),
        }
    }

    /// Bytes of its line in the block, newline included.
    fn size(&self) -> usize {
        line_of(self.url, self.observation, self.text).len() + 1
    }

    /// Its text is inside `other`'s, on the same page.
    fn is_inside(&self, other: &Candidate<'_>) -> bool {
        other.text.contains(self.text) && other.key == self.key
    }
}

/// Grounds explicit items in every chunk, dedups them and applies the caps. The collapsed
/// pages' own quotes are not chosen here: they are written inside them (SPEC 9, C2).
pub(crate) fn select(explicit: &[EvidenceItem], g: &Gathered<'_>, limits: Limits) -> Selection {
    let mut selection = Selection::default();
    let mut grounded = Vec::new();
    for item in explicit {
        match ground(item, g.all()) {
            Ok(quote) => grounded.push(quote),
            Err(reason) => selection.dropped.push((item.clone(), reason)),
        }
    }
    let explicit = grounded.iter().map(|q| Candidate {
        url: &q.source_url,
        key: normalise(&q.source_url),
        observation: &q.observation,
        text: &q.quote,
    });
    let mut seen: HashSet<(String, &str), Fast> = HashSet::default();
    // Kept quotes with their sizes, in order.
    let mut kept: Vec<(Candidate<'_>, usize)> = Vec::new();
    let mut bytes = 0;
    for candidate in explicit {
        if !seen.insert((candidate.key.clone(), candidate.text))
            || kept.iter().any(|(k, _)| candidate.is_inside(k))
        {
            continue;
        }
        if candidate.text.len() > limits.max_quote_bytes {
            selection.refused.push(candidate.quote());
            continue;
        }
        // A longer quote that holds kept ones replaces them.
        let inside: Vec<bool> = kept.iter().map(|(k, _)| k.is_inside(&candidate)).collect();
        let replaced = inside.iter().filter(|&&i| i).count();
        let freed: usize = kept
            .iter()
            .zip(&inside)
            .filter(|(_, &i)| i)
            .map(|((_, size), _)| size)
            .sum();
        // Its line is rendered only when the item cap leaves room for it.
        let size = (kept.len() - replaced < limits.max_items)
            .then(|| candidate.size())
            .filter(|size| bytes - freed + size <= limits.max_bytes);
        if replaced > 0 {
            // Kept quotes inside this one move behind the others, whether it is kept or not.
            let (inner, others): (Vec<_>, Vec<_>) =
                kept.into_iter().zip(inside).partition(|(_, i)| *i);
            kept = others.into_iter().map(|(k, _)| k).collect();
            if size.is_some() {
                bytes -= freed;
            } else {
                kept.extend(inner.into_iter().map(|(k, _)| k));
            }
        }
        if let Some(size) = size {
            bytes += size;
            kept.push((candidate, size));
        }
    }
    selection.quotes = kept.iter().map(|(k, _)| k.quote()).collect();
    selection
}

/// Checks an explicit item against the chunks the browser returned.
pub(crate) fn ground<'t>(
    item: &EvidenceItem,
    chunks: impl Iterator<Item = Chunk<'t>>,
) -> Result<Quote, DropReason> {
    let of_observation: Vec<Chunk> = chunks
        .filter(|c| c.observation == item.observation || c.document == Some(&item.observation))
        .collect();
    if of_observation.is_empty() {
        return Err(DropReason::UnknownObservation);
    }
    let url = normalise(&item.source_url);
    let at_url: Vec<&Chunk> = of_observation.iter().filter(|c| *c.key == *url).collect();
    if at_url.is_empty() {
        return Err(DropReason::UrlMismatch);
    }
    if item.quote.trim().is_empty() || !at_url.iter().any(|c| c.text.contains(item.quote.as_str()))
    {
        return Err(DropReason::NotInPage);
    }
    Ok(Quote {
        source_url: item.source_url.clone(),
        observation: item.observation.clone(),
        quote: item.quote.clone(),
    })
}
