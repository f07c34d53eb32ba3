//! Evidence written once (SPEC 9, C2 and C3): an observation's quotes are chosen when it
//! collapses and travel inside its collapsed content, after the receipt; a user message that
//! asks about pages already collapsed gets the quotes that answer it once, as a part of its
//! own on the newest browser result before it.
//!
//! Everything here is a function of the transcript up to the point where it is written: the
//! quotes of an observation depend on the transcript up to the result that superseded it,
//! and those of a user message on the transcript up to it. So a later request writes the same
//! bytes again, and the provider reads them from its prompt cache.

use std::collections::{HashMap, HashSet};

use crate::evidence::{
    chunks_of, line_of, page_words, Chunk, Limits, PageChunks, Quote, EVIDENCE_HEADER,
};
use crate::memo::{table_bytes, Memo, Share};
use crate::projection::{Plan, Status};
use crate::refs::neutralise;
use crate::session::{Session, Step};
use crate::texts;
use crate::transcript::Edit;
use crate::transcript::{Item, Role, Transcript};

/// Maps keyed by page text or its word hashes, which a page chooses: hashed with a random
/// key, and fast.
type Fast = ahash::RandomState;

/// Quotes one collapsed page keeps at most: fewer, better quotes beat many weak ones, and
/// every byte is read again on every later turn.
const MAX_QUOTES_PER_PAGE: usize = 5;

/// Bytes of quote text one collapsed page keeps at most.
const MAX_BYTES_PER_PAGE: usize = 800;

/// Chunks up to this many bytes are labels, cells and values: short facts.
const SHORT_FACT: usize = 64;

/// Quotes a follow-up question adds at most.
const MAX_QUOTES_PER_QUESTION: usize = 3;

/// What a chunk that starts with a word of a follow-up question scores for it: the chunk
/// defines the word.
const DEFINES: u32 = 4;

/// Words in more chunks of the pages ranked than this single nothing out.
const RARE_MAX_CHUNKS: usize = 3;

/// The score a chunk of a collapsed page needs to be quoted: about two rare words of the
/// task, or one number or identifier it names.
const MIN_PAGE_SCORE: u32 = 6;

/// Bytes of a kept list of scores besides its own: its key, the shared pointer's counts
/// and the cache's entry.
const SCORES_ENTRY_BYTES: u64 = 96;

/// `weight`, shared among the `df` chunks that hold the word: a word on every line of a
/// page singles nothing out.
fn rarity(weight: u32, df: usize) -> u32 {
    match df {
        0 => 0,
        df if df > 2 * RARE_MAX_CHUNKS => 0,
        df => weight / df as u32,
    }
}

/// The evidence a request carries: blocks inside collapsed observations, and parts after
/// the newest browser result before a question.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Text to add inside the collapsed content of a result (after its receipt).
    pub inside: Vec<(usize, String)>,
    /// Parts to append to a result (quotes that answer a later question).
    pub appended: Vec<(usize, String)>,
    /// Every quote written, in request order.
    pub quotes: Vec<Quote>,
    /// Chunks that ranked but were over the per-quote limit: refused whole, with a notice.
    pub refused: Vec<Quote>,
    /// Quotes left out by the request budget, with a notice.
    pub omitted: Vec<Quote>,
    /// The block of each quote in `quotes`.
    pub(crate) quote_blocks: Vec<Block>,
    /// The block of each quote in `refused`.
    pub(crate) refused_blocks: Vec<Block>,
}

/// One quote on its way to the request. It owns its text: a checkpoint keeps the quotes
/// chosen so far across requests.
#[derive(Debug, Clone)]
struct Kept {
    /// Its page's normalised URL, which tells quotes of one page apart.
    key: String,
    quote: Quote,
    /// Its line in the request.
    line: String,
    /// The block it is written in.
    block: Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Block {
    /// Inside the collapsed content of transcript item `.0`.
    Inside(usize),
    /// A part appended to transcript item `.0`.
    Appended(usize),
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
                    self.state.add(chosen, block, self.limits);
                }
                Event::Question { item, target } => {
                    let (asked, index) = index.get_or_insert_with(|| {
                        let asked = Asked::of(transcript, events);
                        let index = Index::of(session, plan, &asked.all);
                        (asked, index)
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
                        self.state.add(chosen, block, self.limits);
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
struct Context<'c> {
    task_hash: u64,
    furniture: &'c Furniture,
}

/// The user's messages so far, whose words are read only when a page's scores are not
/// kept: on a later turn every page's are.
#[derive(Default, Clone)]
struct Task {
    texts: Vec<String>,
    words: Words,
    read: usize,
}

impl Task {
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
struct Furniture {
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

/// Words of context, each with whether it holds a digit.
#[derive(Default, Clone)]
struct Words(HashMap<u64, bool, Fast>);

impl Words {
    /// Adds the words of `text`, leaving URLs out: a URL names where the agent goes
    /// (`http://127.0.0.1:8441/os.html`), not what it looks for there, and its host and port
    /// would single out any chunk that lists addresses.
    fn add(&mut self, text: &str) {
        for piece in text.split_whitespace().map(before_url) {
            for (w, digit) in crate::evidence::words_with_digits(piece) {
                self.0.insert(w, digit);
            }
        }
    }

    fn of(text: &str) -> Words {
        let mut words = Words::default();
        words.add(text);
        words
    }

    /// The weight of word `w` in this context: a number or an identifier singles a fact
    /// out far better than a plain word.
    fn weight(&self, w: u64, plain: u32, digits: u32) -> u32 {
        match self.0.get(&w) {
            Some(true) => digits,
            Some(false) => plain,
            None => 0,
        }
    }
}

/// A whitespace-free piece of text up to the URL in it, if any (`{"url":"http://a/b"}`
/// keeps `{"url":"`).
fn before_url(piece: &str) -> &str {
    // Most pieces hold no colon; a substring search costs a searcher's set-up per piece.
    if !piece.as_bytes().contains(&b':') {
        return piece;
    }
    match piece.find("://") {
        Some(at) => {
            let scheme = piece[..at]
                .rfind(|c: char| !c.is_ascii_alphanumeric())
                .map_or(0, |i| i + 1);
            &piece[..scheme]
        }
        None => piece,
    }
}

/// Where quotes are chosen, in transcript order.
#[derive(Debug, Clone, Copy)]
enum Event {
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

impl Block {
    /// The transcript item it is written on.
    pub(crate) fn item(self) -> usize {
        match self {
            Block::Inside(item) | Block::Appended(item) => item,
        }
    }
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

struct Events {
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
            order.push((
                until,
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

    /// Adds `chosen` in `block`; when the caps would be passed, the oldest quotes go until
    /// at most half the caps are used (C3), so the cached prefix breaks rarely, at one place.
    /// The new block's own quotes stay, as many as the caps allow.
    fn add(&mut self, chosen: Picked<'_>, block: Block, limits: Limits) {
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
        let (half_items, half_bytes) = (limits.max_items / 2, limits.max_bytes / 2);
        let mut dropped = 0;
        while dropped < first_new && over(&self.kept[dropped..], half_items, half_bytes) {
            dropped += 1;
        }
        let lowest = self.kept[..dropped].iter().map(|k| k.block.item()).min();
        self.lowest_drop = self.lowest_drop.into_iter().chain(lowest).min();
        self.kept.drain(..dropped);
        if dropped > 0 {
            self.dropped.push((block, dropped));
        }
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
        notices.extend(crate::evidence::refused_notice(
            &refused,
            self.max_quote_bytes,
        ));
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
            notices.push(crate::evidence::omitted_notice(omitted));
        }
        notices
    }
}

fn over(kept: &[Kept], items: usize, bytes: usize) -> bool {
    kept.len() > items || kept.iter().map(|k| k.line.len() + 1).sum::<usize>() > bytes
}

fn quote_of(c: &Chunk<'_>) -> Quote {
    Quote {
        source_url: c.url.to_string(),
        observation: c.observation.to_string(),
        quote: c.text.to_string(),
    }
}

/// A quote's line in `block`: inside its own page's content the receipt above names URL
/// and page.
fn line_in(block: Block, c: &Chunk<'_>) -> String {
    match block {
        Block::Inside(_) => own_line(c.text),
        Block::Appended(_) => line_of(c.url, c.observation, c.text),
    }
}

/// What one page or question picked: the quotes, and the chunks refused whole.
struct Picked<'t> {
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

/// A quote line inside the collapsed content of its own page: the receipt above it names
/// the URL and the observation.
fn own_line(quote: &str) -> String {
    format!(
        r#"{{"quote":{}}}"#,
        crate::json::json_string(&neutralise(quote))
    )
}

/// The texts the model wrote and the arguments it sent between transcript items `from` and
/// `until`.
fn model_texts<'t>(
    transcript: &'t Transcript<'_>,
    from: usize,
    until: usize,
) -> impl Iterator<Item = &'t str> + 't {
    let window = transcript
        .items
        .get(from + 1..until.min(transcript.items.len()));
    window
        .unwrap_or_default()
        .iter()
        .filter_map(|item| match item {
            Item::Text {
                role: Role::Assistant,
                text,
            } => Some(text.as_ref()),
            Item::Call(call) => Some(call.arguments.as_ref()),
            _ => None,
        })
}

/// What the model wrote and did between transcript items `from` and `until`.
fn model_words(transcript: &Transcript<'_>, from: usize, until: usize) -> Words {
    let mut words = Words::default();
    for text in model_texts(transcript, from, until) {
        words.add(text);
    }
    words
}

/// A hash of what the model wrote and did between transcript items `from` and `until`.
fn model_hash(transcript: &Transcript<'_>, from: usize, until: usize) -> u64 {
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    for text in model_texts(transcript, from, until) {
        hash.update(text.as_bytes());
        hash.update(&[0]);
    }
    hash.digest()
}

/// The quotes of the collapsed page `at`, as the step that superseded it left it: the
/// chunks that share rare words with the user's task or with what the model wrote and did
/// after reading it, numbers and identifiers first; none that the next page still shows.
fn choose_for_page<'t>(
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
        | u128::from(model_hash(transcript, page.item, at.until));
    let memo = session.memo;
    let all = PageChunks::of(memo, page);
    let score = || -> Vec<u32> {
        let model = model_words(transcript, page.item, at.until);
        page_scores(memo, page, task.words(), &model)
    };
    let at = (page.key, context_key);
    let len = all.len();
    let same = |s: &Vec<u32>| s.len() == len;
    let weigh = |s: &Vec<u32>| SCORES_ENTRY_BYTES + 4 * s.capacity() as u64;
    let scores = memo.kept(Share::Small, at, same, score, weigh);
    let title = header.and_then(|h| h.title.as_deref()).unwrap_or("");
    // Only chunks that score enough can be chosen: the rest are never looked at again.
    let mut chunks: Vec<(Chunk<'t>, u32)> = scores
        .iter()
        .enumerate()
        .filter(|(_, s)| **s >= MIN_PAGE_SCORE)
        .filter_map(|(i, s)| Some((all.get(i)?, *s)))
        .filter(|(c, _)| c.facts.quotable && c.text != title)
        .filter(|(c, _)| !context.furniture.has(c))
        .collect();
    if let (Some(next), false) = (next, chunks.is_empty()) {
        let shown = shown_on(memo, next);
        chunks.retain(|(c, _)| !shown.contains(&c.facts.hash));
    }
    best(chunks, MIN_PAGE_SCORE, MAX_QUOTES_PER_PAGE, state)
}

/// The score of every chunk of `page` against the user's `task` and what the `model` wrote
/// and did after reading it: the rare words it shares with them, the first and last rows
/// of a table, the section the URL points at, dates, short facts with numbers.
fn page_scores(memo: &Memo, page: &Step<'_>, task: &Words, model: &Words) -> Vec<u32> {
    let header = page.reading.header.as_ref();
    let url = header.and_then(|h| h.url.as_deref()).unwrap_or("");
    let section = section_of(url, chunks_of(memo, page).map(|c| c.text));
    let frequency = &page_words(memo, page).facts.frequency;
    // One lookup per word of the page: the task's and the model's weights, summed. Few
    // words of a page are in either, and only those need their page frequency.
    let mut weights: HashMap<u64, u32, Fast> = HashMap::default();
    for (words, plain, digits) in [(task, 4, 12), (model, 2, 8)] {
        for (&w, &digit) in &words.0 {
            *weights.entry(w).or_default() += if digit { digits } else { plain };
        }
    }
    let score = |(i, c): (usize, Chunk<'_>)| {
        let matched: u32 = c
            .words
            .iter()
            .filter_map(|w| Some((*weights.get(w)?, w)))
            .map(|(weight, w)| rarity(weight, frequency.get(w).copied().unwrap_or(0) as usize))
            .sum();
        // The first and last rows of a table, the section the URL points at (what the
        // agent went there to read) and dates are candidates of their own.
        let end = if section.contains(&i) {
            MIN_PAGE_SCORE
        } else if c.candidate {
            MIN_PAGE_SCORE - 1
        } else {
            0
        };
        let date = if c.facts.date { MIN_PAGE_SCORE - 1 } else { 0 };
        if matched + end + date == 0 {
            return 0;
        }
        // A long paragraph matches many words; a short fact with a number is worth as much.
        let number = c.facts.number;
        let short = if c.text.len() <= SHORT_FACT && number {
            2
        } else {
            0
        };
        matched.min(2 * MIN_PAGE_SCORE) + end + date + short + u32::from(number)
    };
    chunks_of(memo, page).enumerate().map(score).collect()
}

/// The hashes of the texts `step`'s page shows: what is still there needs no quote.
fn shown_on(memo: &Memo, step: &Step<'_>) -> HashSet<u64, Fast> {
    let facts = &page_words(memo, step).facts.chunks;
    facts.iter().map(|f| f.hash).collect()
}

/// Chunks after a heading count as its section, up to this many.
const SECTION_CHUNKS: usize = 10;

/// The chunks of the section that `url`'s fragment names: those after the first chunk whose
/// letters and digits begin with the fragment's (`#event-warning` names "Event: 'warning'",
/// as documentation sites derive anchors from headings). Empty without a fragment.
fn section_of<'x>(url: &str, texts: impl Iterator<Item = &'x str>) -> std::ops::Range<usize> {
    let slug = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let fragment = url
        .split_once('#')
        .map(|(_, f)| slug(f))
        .unwrap_or_default();
    if fragment.len() < 3 || fragment == "top" {
        return 0..0;
    }
    let mut texts = texts.enumerate();
    match texts.find(|(_, t)| t.len() < 200 && slug(t).starts_with(&fragment)) {
        Some((at, _)) => at + 1..at + 1 + SECTION_CHUNKS,
        None => 0..0,
    }
}

/// A collapsed page: its step, the step that superseded it, and that step's transcript item.
#[derive(Debug, Clone, Copy)]
struct Page {
    step: usize,
    next: Option<usize>,
    until: usize,
}

/// Where each asked word occurs among the chunks of the collapsed pages: a question's
/// candidates are found by its words, not by reading every page again for every question.
struct Index<'t> {
    chunks: Vec<(usize, Chunk<'t>)>,
    postings: HashMap<u64, Vec<usize>, Fast>,
}

/// The words of the request's questions, each question's and all of them: the only words
/// the index is looked up by.
struct Asked {
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

impl<'t> Index<'t> {
    /// The quotable chunks of every collapsed page, by the `asked` words they hold.
    fn of(session: &'t Session<'t>, plan: &Plan, asked: &HashSet<u64, Fast>) -> Index<'t> {
        let mut index = Index {
            chunks: Vec::new(),
            postings: HashMap::default(),
        };
        let collapsed = session
            .steps
            .iter()
            .zip(&plan.results)
            .enumerate()
            .filter(|(_, (s, r))| r.status == Status::Collapsed && !s.reading.collapsed)
            .filter(|(_, (s, _))| {
                !is_error_page(s.reading.header.as_ref().and_then(|h| h.url.as_deref()))
            });
        // A page snapshotted again repeats its chunks: each distinct text counts once, at
        // its first step, so a word is as rare as the page makes it. Texts are told apart
        // by their hashes, as the next page's and the live page's chunks are.
        let mut seen: HashSet<(u64, u64), Fast> = HashSet::default();
        for (i, (step, _)) in collapsed {
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
fn choose_for_question<'t>(
    session: &'t Session<'t>,
    index: &Index<'t>,
    target: usize,
    question: &Words,
    furniture: &Furniture,
    state: &Chosen,
) -> Picked<'t> {
    let before = |&at: &usize| index.chunks.get(at).is_some_and(|(step, _)| *step < target);
    // Each word of the question, with the candidate chunks that hold it.
    let mut scores: HashMap<usize, u32, Fast> = HashMap::default();
    for (&w, &digit) in &question.0 {
        // Chunks are indexed in step order: those before `target` are a prefix.
        let postings: &[usize] = index
            .postings
            .get(&w)
            .map_or(&[], |p| &p[..p.partition_point(before)]);
        if postings.len() <= RARE_MAX_CHUNKS {
            for &at in postings {
                *scores.entry(at).or_default() += if digit { 6 } else { 2 };
            }
            continue;
        }
        // A word in a few more chunks still names the one that starts with it: a parameter
        // list's "sep <string> The substring used to delimit ..." defines `sep`.
        if postings.len() <= 2 * RARE_MAX_CHUNKS {
            let defines = |at: &usize| {
                index.chunks.get(*at).is_some_and(|(_, c)| {
                    crate::evidence::words_with_digits(c.text)
                        .next()
                        .map(|(h, _)| h)
                        == Some(w)
                })
            };
            for at in postings.iter().filter(|at| defines(at)) {
                *scores.entry(*at).or_default() += DEFINES;
            }
        }
    }
    if scores.is_empty() {
        return Picked::none();
    }
    let live = shown_on(session.memo, &session.steps[target]);
    let candidates: Vec<Chunk<'t>> = scores
        .keys()
        .filter_map(|&at| index.chunks.get(at))
        .filter(|(_, c)| !live.contains(&c.facts.hash) && !furniture.has(c))
        .map(|(_, c)| c.clone())
        .collect();
    let score = |c: &Chunk<'_>| {
        let matched: u32 = c.words.iter().map(|&w| question.weight(w, 2, 6)).sum();
        matched + u32::from(c.facts.number)
    };
    let mut candidates = candidates;
    // In page order, so ties break the same way on every run.
    candidates.sort_by(|a, b| (a.position, a.text).cmp(&(b.position, b.text)));
    let scored = candidates
        .into_iter()
        .map(|c| {
            let s = score(&c);
            (c, s)
        })
        .collect();
    best(scored, 2, MAX_QUOTES_PER_QUESTION, state)
}

/// The `max` best chunks scoring at least `min`, not written yet, within the per-page bytes,
/// in page order; chunks over the per-quote limit that rank among them are refused whole.
/// Ties go to the newer page, then to page order: deterministic.
fn best<'t>(chunks: Vec<(Chunk<'t>, u32)>, min: u32, max: usize, state: &Chosen) -> Picked<'t> {
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
    for (_, i) in ranked {
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
        if bytes > 0 && bytes + c.text.len() > MAX_BYTES_PER_PAGE {
            continue;
        }
        bytes += c.text.len();
        chosen.push(i);
        if chosen.len() == max {
            break;
        }
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

/// Chromium's error pages (`chrome-error://`) give no evidence.
fn is_error_page(url: Option<&str>) -> bool {
    url.is_some_and(|u| u.starts_with("chrome-error:"))
}

/// Writes `written` into the plan's edits: blocks inside collapsed content go after the
/// receipt of that result; appended parts after its content (inside it, when it collapsed).
pub(crate) fn apply(written: &Written, edits: &mut Vec<Edit>) {
    let mut replaced: HashMap<usize, usize> = HashMap::new();
    for (i, e) in edits.iter().enumerate() {
        if !e.append {
            replaced.insert(e.item, i);
        }
    }
    for (item, text) in written.inside.iter().chain(&written.appended) {
        match replaced.get(item).and_then(|&i| edits.get_mut(i)) {
            Some(edit) => {
                edit.text = format!("{}\n{text}", edit.text).into();
            }
            None => edits.push(Edit {
                item: *item,
                text: text.as_str().into(),
                append: true,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::section_of;

    #[test]
    fn a_fragment_names_the_section_after_its_heading() {
        let texts = [
            "Table of contents",
            "Event: 'exit' #",
            "a",
            "Event: 'warning' #",
            "b",
        ];
        let url = "http://docs.test/process.html#event-warning";
        assert_eq!(section_of(url, texts.iter().copied()), 4..14);
        // No fragment, `#top`, or one that names no chunk: no section.
        for url in [
            "http://docs.test/p.html",
            "http://docs.test/p.html#top",
            "http://d/p#nothing",
        ] {
            assert!(section_of(url, texts.iter().copied()).is_empty(), "{url}");
        }
    }
}
