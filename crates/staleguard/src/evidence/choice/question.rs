//! The quotes that answer a user message about pages already collapsed, found by its words.

use std::collections::{HashMap, HashSet};

use crate::projection::{Plan, Status};
use crate::session::Session;
use crate::transcript::{Item, Transcript};

use crate::evidence::candidates::{page_words, Chunk, Fast, PageChunks};
use crate::evidence::ranking::{
    idf, is_error_page, saturation, shown_on, Words, DEFINES, MIN_QUESTION_SCORE, SCALE,
};

use super::chosen::{best, Chosen, Event, Furniture, Picked, MAX_QUOTES_PER_QUESTION};

/// A collapsed page: its step, the step that superseded it, and that step's transcript item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page {
    pub(super) step: usize,
    pub(super) next: Option<usize>,
    pub(super) until: usize,
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
    pub(super) by_item: HashMap<usize, Words, Fast>,
    pub(super) all: HashSet<u64, Fast>,
}

impl Asked {
    pub(super) fn of(transcript: &Transcript<'_>, events: &[Event]) -> Asked {
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
pub(super) fn collapsed_by(plan: &Plan, item: usize) -> Vec<usize> {
    let done = |i: usize| {
        plan.collapsed_at
            .get(i)
            .is_none_or(|at| at.is_some_and(|at| at <= item))
    };
    (0..plan.results.len())
        .filter(|&i| plan.results[i].status == Status::Collapsed && done(i))
        .collect()
}

impl<'t> Index<'t> {
    /// The quotable chunks of the collapsed pages `steps` ([`collapsed_by`]), by the `asked`
    /// words they hold.
    pub(super) fn of(
        session: &'t Session<'t>,
        asked: &HashSet<u64, Fast>,
        steps: &[usize],
    ) -> Index<'t> {
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
                crate::evidence::candidates::words_with_digits(c.text)
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
