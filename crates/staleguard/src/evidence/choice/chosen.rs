//! What every chooser shares: the caps, the quotes kept so far and what they answer, and
//! how the best chunks of a page or a question are picked.

use std::collections::{HashMap, HashSet};

use crate::memo::{table_bytes, Memo};
use crate::projection::{Plan, Status};
use crate::session::{Session, Step};
use crate::texts::{self, EVIDENCE_HEADER};
use crate::transcript::{Item, Role, Transcript};

use crate::evidence::candidates::{page_words, Chunk, Fast};
use crate::evidence::ranking::{is_date_line, Words};
use crate::evidence::report::{Limits, Quote};
use crate::evidence::writing::{
    line_in, line_of, omitted_notice, quote_of, refused_notice, Block, Written,
};

/// Quotes one collapsed page keeps at most: fewer, better quotes beat many weak ones, and
/// every byte is read again on every later turn.
pub(crate) const MAX_QUOTES_PER_PAGE: usize = 5;

/// Quotes a page that answers the task in many places keeps at most: its share of the caps
/// follows how much it answers.
pub(crate) const MAX_QUOTES_PER_ANSWERING_PAGE: usize = 8;

/// Page text per quote a page keeps besides its own: a 345 KB reference page holds answers
/// to many more questions than a 10 KB one, and its quotes cost a hundredth of its bytes.
pub(super) const PAGE_BYTES_PER_QUOTE: usize = 8 * 1024;

/// Quotes the largest page keeps at most.
pub(super) const MAX_QUOTES_PER_LARGE_PAGE: usize = 40;

/// Lines that date a page's content (published, on sale from, revised) one page keeps
/// besides its quotes.
pub(super) const DATE_LINES_PER_PAGE: usize = 2;

/// Bytes of quote text one page or question keeps at most, whatever its quotes.
pub(super) const MIN_BYTES_PER_PAGE: usize = 800;

/// The quotes a page keeps first, whatever their bytes: two long ones must not crowd out a
/// third that ranks as high.
pub(super) const TOP_QUOTES: usize = 3;

/// Bytes of quote text one collapsed page keeps at most, per quote it may keep.
pub(crate) const BYTES_PER_PAGE_QUOTE: usize = 160;

/// A chunk scoring this share of its page's best answers the task as well as the best.
pub(super) const STRONG_SHARE_OF_BEST: f64 = 0.6;

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
    pub(super) key: String,
    pub(super) quote: Quote,
    /// Its line in the request.
    pub(super) line: String,
    /// The block it is written in.
    block: Block,
}

/// What a page's quotes are weighed against: the user's words so far, and the text every
/// page of the site repeats.
#[derive(Clone, Copy)]
pub(crate) struct Context<'c> {
    pub(super) task_hash: u64,
    pub(super) furniture: &'c Furniture,
}

/// The user's messages so far, whose words are read only when a page's scores are not
/// kept: on a later turn every page's are.
#[derive(Default, Clone)]
pub(crate) struct Task {
    pub(super) texts: Vec<String>,
    pub(super) words: Words,
    read: usize,
}

impl Task {
    /// The words of the newest user message so far.
    pub(super) fn newest(&self) -> Words {
        self.texts
            .last()
            .map_or_else(Words::default, |t| Words::of(t))
    }

    pub(super) fn words(&mut self) -> &Words {
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
    pub(super) fn read_until(&mut self, session: &Session<'_>, at: usize) {
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
    pub(super) fn heap_bytes(&self) -> usize {
        let keys: usize = self.pages.iter().map(|k| k.len() + 32).sum();
        table_bytes::<u64, u32>(self.first_seen.capacity())
            + table_bytes::<u64, ()>(self.repeated.capacity())
            + keys
    }

    pub(super) fn has(&self, chunk: &Chunk<'_>) -> bool {
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
    pub(super) fn at(&self) -> usize {
        match *self {
            Event::Collapse { until, .. } => until,
            Event::Question { item, .. } => item,
        }
    }
}

pub(crate) struct Events {
    pub(super) order: Vec<Event>,
}

impl Events {
    pub(super) fn of(transcript: &Transcript<'_>, session: &Session<'_>, plan: &Plan) -> Events {
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
    pub(super) kept: Vec<Kept>,
    /// Quotes dropped by the caps, per block that announces it.
    pub(super) dropped: Vec<(Block, usize)>,
    /// Chunks over the per-quote limit, refused whole, per block that announces it.
    pub(super) refused: Vec<(Block, Quote)>,
    pub(super) max_quote_bytes: usize,
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
    pub(super) fn has(&self, chunk: &Chunk<'_>) -> bool {
        self.kept
            .iter()
            .any(|k| *k.key == *chunk.key && k.quote.quote.contains(chunk.text))
    }

    /// Adds `chosen` in `block`. When the caps would be passed, quotes go (C3): first those
    /// that answer nothing of the newest user message (`asked`), oldest first, until at most
    /// half the caps are used, so the cached prefix breaks rarely, at one place; then, while
    /// still over the caps, a kept quote goes only for a new one that answers `asked`
    /// better, and otherwise the new one waits.
    pub(super) fn add(&mut self, chosen: Picked<'_>, block: Block, limits: Limits, asked: &Words) {
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
            .extend(std::iter::repeat_n(block, refused.len()));
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
    let words = crate::evidence::candidates::word_hashes(quote);
    words.iter().map(|&w| asked.weight(w, 1, 2)).sum()
}

/// What one page or question picked: the quotes, and the chunks refused whole.
pub(crate) struct Picked<'t> {
    chunks: Vec<Chunk<'t>>,
    refused: Vec<Chunk<'t>>,
}

impl Picked<'_> {
    pub(super) fn none() -> Self {
        Picked {
            chunks: Vec::new(),
            refused: Vec::new(),
        }
    }
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
        // The page's best quotes may each take up to the per-quote limit.
        if chosen.len() >= TOP_QUOTES
            && bytes + c.text.len() > (max * BYTES_PER_PAGE_QUOTE).max(MIN_BYTES_PER_PAGE)
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
    pub(super) url: &'c str,
    /// `url`, normalised.
    pub(super) key: String,
    pub(super) observation: &'c str,
    pub(super) text: &'c str,
}

impl Candidate<'_> {
    pub(super) fn quote(&self) -> Quote {
        Quote {
            source_url: self.url.to_string(),
            observation: self.observation.to_string(),
            quote: self.text.to_string(),
        }
    }

    /// Bytes of its line in the block, newline included.
    pub(super) fn size(&self) -> usize {
        line_of(self.url, self.observation, self.text).len() + 1
    }

    /// Its text is inside `other`'s, on the same page.
    pub(super) fn is_inside(&self, other: &Candidate<'_>) -> bool {
        other.text.contains(self.text) && other.key == self.key
    }
}
