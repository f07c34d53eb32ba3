//! Evidence (SPEC 3): grounded, verbatim quotes from collapsed pages, on a capped track.
//!
//! Facts read on pages that projection collapsed (a price, a confirmation number) must not
//! vanish. Quotes are never summaries: every quote is a substring of a chunk of page text
//! that the browser actually returned, with its URL and observation.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::refs::neutralise;
use crate::projection::{Plan, Status};
use crate::session::{Session, Step};
use crate::transcript::{Item, Role, Transcript};
use crate::urlnorm::normalise;

pub use crate::appendix::EVIDENCE_HEADER;

/// An evidence item named by the host: a quote it wants kept, with where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceItem {
    pub source_url: String,
    pub observation: String,
    pub quote: String,
}

/// A chunk of page text as the browser returned it.
#[derive(Debug, Clone)]
pub struct Chunk<'t> {
    pub url: Cow<'t, str>,
    /// `url`, normalised once for all the chunks of a page.
    pub key: Arc<str>,
    /// The short observation ID (as receipts show it), shared by the chunks of a result.
    pub observation: Arc<str>,
    /// The format's own ID for the observation, when it has one (the seed's UUIDs).
    pub document: Option<Cow<'t, str>>,
    pub text: Cow<'t, str>,
    /// Its words, hashed ([`word_hashes`]).
    pub words: &'t [u64],
    /// Position of the result in the transcript: later is newer.
    pub position: usize,
}

/// A quote on the evidence track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    pub source_url: String,
    pub observation: String,
    pub quote: String,
}

/// Why an explicit item was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// No browser result in the request has this observation ID.
    UnknownObservation,
    /// The observation exists, but not at this URL.
    UrlMismatch,
    /// The quote is not a substring of any chunk of that page.
    NotInPage,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::UnknownObservation => "unknown observation",
            DropReason::UrlMismatch => "URL does not match the observation",
            DropReason::NotInPage => "quote not found in the page text",
        }
    }
}

/// What the evidence track did, for `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EvidenceReport {
    pub retained: Vec<Quote>,
    /// Over the per-quote limit: refused whole, with a notice.
    pub refused: Vec<Quote>,
    /// Left out by the request budget, with a notice.
    pub omitted: Vec<Quote>,
    /// Explicit items that did not ground.
    pub dropped: Vec<(EvidenceItem, DropReason)>,
    /// Bytes of the rendered block.
    pub bytes: usize,
}

/// The caps of the evidence track.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_items: usize,
    pub max_quote_bytes: usize,
}

/// What the model said and was asked, to rank chunks by use.
#[derive(Debug, Default)]
pub struct Context<'t> {
    /// Assistant text and tool-call arguments, with their positions.
    pub model_text: Vec<(usize, &'t str)>,
    /// The newest user message.
    pub question: &'t str,
}

/// Ranked candidates before the request budget is applied.
#[derive(Debug, Default)]
pub struct Selection {
    pub quotes: Vec<Quote>,
    pub refused: Vec<Quote>,
    pub dropped: Vec<(EvidenceItem, DropReason)>,
}

/// Grounds explicit items in every chunk, ranks collapsed chunks, dedups and applies the
/// caps.
pub fn select(explicit: &[EvidenceItem], g: &Gathered<'_>, limits: Limits) -> Selection {
    let mut selection = Selection::default();
    let mut candidates = Vec::new();
    for item in explicit {
        match ground(item, g.all()) {
            Ok(quote) => candidates.push(quote),
            Err(reason) => selection.dropped.push((item.clone(), reason)),
        }
    }
    candidates.extend(rank(&g.collapsed, &g.live, &g.context));
    let mut seen: HashSet<[u8; 32]> = HashSet::new();
    let mut bytes = 0;
    for quote in candidates {
        if !seen.insert(digest(&quote)) || is_redundant(&quote, &selection.quotes) {
            continue;
        }
        if quote.quote.len() > limits.max_quote_bytes {
            selection.refused.push(quote);
            continue;
        }
        // A longer quote that holds kept ones replaces them.
        let (inside, others): (Vec<Quote>, Vec<Quote>) = std::mem::take(&mut selection.quotes)
            .into_iter()
            .partition(|k| is_redundant(k, std::slice::from_ref(&quote)));
        selection.quotes = others;
        bytes -= inside.iter().map(|k| line(k).len() + 1).sum::<usize>();
        let size = line(&quote).len() + 1;
        if selection.quotes.len() >= limits.max_items || bytes + size > limits.max_bytes {
            bytes += inside.iter().map(|k| line(k).len() + 1).sum::<usize>();
            selection.quotes.extend(inside);
            continue;
        }
        bytes += size;
        selection.quotes.push(quote);
    }
    selection
}

/// A quote already inside a kept quote from the same page adds nothing.
fn is_redundant(quote: &Quote, kept: &[Quote]) -> bool {
    let url = normalise(&quote.source_url);
    kept.iter()
        .any(|k| k.quote.contains(quote.quote.as_str()) && normalise(&k.source_url) == url)
}

/// Checks an explicit item against the chunks the browser returned.
fn ground<'c, 't: 'c>(
    item: &EvidenceItem,
    chunks: impl Iterator<Item = &'c Chunk<'t>>,
) -> Result<Quote, DropReason> {
    let of_observation: Vec<&Chunk> = chunks
        .filter(|c| {
            *c.observation == *item.observation || c.document.as_deref() == Some(&item.observation)
        })
        .collect();
    if of_observation.is_empty() {
        return Err(DropReason::UnknownObservation);
    }
    let url = normalise(&item.source_url);
    let at_url: Vec<&&Chunk> = of_observation.iter().filter(|c| *c.key == *url).collect();
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

/// Chunks up to this many bytes are cells, labels and values.
const SHORT_CHUNK: usize = 64;

/// Words that occur in more chunks than this carry no weight: they do not single out a fact.
const RARE_MAX_CHUNKS: usize = 5;

/// Collapsed chunks, most useful first: used by the model later or sharing rare words
/// with the question; then from more recent pages; then short chunks with numbers or IDs.
/// Chunks still on the live page are left out: they are not stale.
fn rank(collapsed: &[Chunk<'_>], live: &[Chunk<'_>], context: &Context<'_>) -> Vec<Quote> {
    let live_keys: HashSet<(Arc<str>, &str)> = live
        .iter()
        .map(|c| (c.key.clone(), c.text.as_ref()))
        .collect();
    let frequency = document_frequency(collapsed.iter().chain(live));
    let question: HashSet<u64> = word_hashes(context.question).into_vec().into_iter().collect();
    let last_use = last_use(context);
    let unique = unique_chunks(collapsed);
    let mut scores: Vec<u32> = unique
        .iter()
        .map(|&(oldest, chunk)| {
            let words = chunk.words;
            // The model may have used the fact after any copy of the chunk: count from the oldest.
            let used = |w: u64| last_use.get(&w).is_some_and(|&at| at > oldest);
            // What is asked now weighs more than what was used before.
            relevance(words, &frequency, used)
                + 3 * relevance(words, &frequency, |w| question.contains(&w))
        })
        .collect();
    spread_to_neighbours(&unique, &mut scores);
    let mut order: Vec<usize> = (0..unique.len())
        .filter(|&i| {
            let c = unique[i].1;
            !c.text.trim().is_empty() && !live_keys.contains(&(c.key.clone(), c.text.as_ref()))
        })
        .collect();
    // Highest score, then newest page, then short facts, then page order: deterministic.
    order.sort_by(|&a, &b| {
        let (ca, cb) = (unique[a].1, unique[b].1);
        scores[b]
            .cmp(&scores[a])
            .then(cb.position.cmp(&ca.position))
            .then(is_short_fact(&cb.text).cmp(&is_short_fact(&ca.text)))
            .then(a.cmp(&b))
    });
    order
        .into_iter()
        .map(|i| {
            let c = unique[i].1;
            Quote {
                source_url: c.url.to_string(),
                observation: c.observation.to_string(),
                quote: c.text.to_string(),
            }
        })
        .collect()
}

/// Weight of the rare `words` that `wanted` accepts: rarer words weigh more.
fn relevance(
    words: &[u64],
    frequency: &HashMap<u64, usize>,
    wanted: impl Fn(u64) -> bool,
) -> u32 {
    words
        .iter()
        .filter(|w| wanted(**w))
        .filter_map(|w| {
            frequency
                .get(w)
                .copied()
                .filter(|&df| df <= RARE_MAX_CHUNKS)
        })
        .map(|df| 1000 / df.max(1) as u32)
        .sum()
}

/// A fact is often split over neighbouring short chunks (the cells of one table row, a label
/// and its value): short chunks next to a relevant one, on the same page, get half its weight,
/// and a quarter two chunks away.
fn spread_to_neighbours(unique: &[(usize, &Chunk<'_>)], scores: &mut [u32]) {
    let base = scores.to_vec();
    for (i, &score) in base.iter().enumerate().filter(|(_, s)| **s > 0) {
        let page = &unique[i].1.observation;
        for j in i.saturating_sub(2)..(i + 3).min(unique.len()) {
            let neighbour = unique[j].1;
            if j != i && &neighbour.observation == page && neighbour.text.len() <= SHORT_CHUNK {
                let share = if j.abs_diff(i) == 1 {
                    score / 2
                } else {
                    score / 4
                };
                scores[j] = scores[j].max(share);
            }
        }
    }
}

/// One entry per distinct (URL, text): the newest chunk, which names the observation (the
/// newest observation's ID wins), with the position of the oldest copy.
fn unique_chunks<'c, 't>(chunks: &'c [Chunk<'t>]) -> Vec<(usize, &'c Chunk<'t>)> {
    let mut index: HashMap<(Arc<str>, &str), usize> = HashMap::new();
    let mut unique: Vec<(usize, &Chunk)> = Vec::new();
    for chunk in chunks {
        let key = (chunk.key.clone(), chunk.text.as_ref());
        match index.get(&key) {
            Some(&i) => {
                let (oldest, newest) = unique[i];
                let newer = if chunk.position >= newest.position {
                    chunk
                } else {
                    newest
                };
                unique[i] = (oldest.min(chunk.position), newer);
            }
            None => {
                index.insert(key, unique.len());
                unique.push((chunk.position, chunk));
            }
        }
    }
    unique
}

/// For every word the model wrote (text or tool arguments), the last position it wrote it
/// at: a chunk was used later when one of its words was written after it.
fn last_use(context: &Context<'_>) -> HashMap<u64, usize> {
    let mut last = HashMap::new();
    for (at, text) in &context.model_text {
        for &w in word_hashes(text).iter() {
            let slot = last.entry(w).or_insert(*at);
            *slot = (*slot).max(*at);
        }
    }
    last
}

/// In how many distinct chunks each word occurs.
fn document_frequency<'c, 't: 'c>(
    chunks: impl Iterator<Item = &'c Chunk<'t>>,
) -> HashMap<u64, usize> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut frequency = HashMap::new();
    for chunk in chunks {
        if !seen.insert(chunk.text.as_ref()) {
            continue;
        }
        for &w in chunk.words {
            *frequency.entry(w).or_insert(0) += 1;
        }
    }
    frequency
}

/// Lower-cased words of at least 3 characters, or 2 with a digit; `$1,140`, `WX-1001`
/// and `P-0237` stay whole.
pub fn words(text: &str) -> HashSet<String> {
    word_iter(text).map(|w| w.to_lowercase()).collect()
}

fn word_iter(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        !(c.is_alphanumeric() || matches!(c, '-' | '$' | '.' | ',' | '%' | '€' | '£'))
    })
    .map(|w| w.trim_matches(|c: char| matches!(c, '.' | ',' | '-')))
    .filter(|w| w.chars().count() >= 3 || w.chars().any(|c| c.is_ascii_digit()))
}

/// [`words`], each hashed (64-bit xxh3 of its lower-cased form), sorted and distinct:
/// ranking only compares words, and a hash costs no allocation for ASCII words.
pub fn word_hashes(text: &str) -> Box<[u64]> {
    let mut buf = [0u8; 64];
    let mut out: Vec<u64> = word_iter(text)
        .map(|w| match buf.get_mut(..w.len()) {
            Some(slot) if w.is_ascii() => {
                slot.copy_from_slice(w.as_bytes());
                slot.make_ascii_lowercase();
                xxhash_rust::xxh3::xxh3_64(slot)
            }
            _ => xxhash_rust::xxh3::xxh3_64(w.to_lowercase().as_bytes()),
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out.into_boxed_slice()
}

fn is_short_fact(text: &str) -> bool {
    text.len() <= 200 && text.chars().any(|c| c.is_ascii_digit())
}

fn digest(quote: &Quote) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(normalise(&quote.source_url).as_bytes());
    hasher.update([0]);
    hasher.update(quote.quote.as_bytes());
    hasher.finalize().into()
}

/// One JSON line per quote; ref tokens inside are neutralised, so no quote can act.
pub fn line(quote: &Quote) -> String {
    let value = serde_json::json!({
        "source_url": neutralise(&quote.source_url),
        "observation": quote.observation,
        "quote": neutralise(&quote.quote),
    });
    value.to_string()
}

/// The block: header, quote lines, notices.
pub fn render(quotes: &[Quote], notices: &[String]) -> String {
    let mut out = String::from(EVIDENCE_HEADER);
    for q in quotes {
        out.push('\n');
        out.push_str(&line(q));
    }
    for n in notices {
        out.push('\n');
        out.push_str(n);
    }
    out
}

/// The notice for quotes refused by the per-quote limit.
pub fn refused_notice(refused: &[Quote], max_quote_bytes: usize) -> Option<String> {
    let first = refused.first()?;
    Some(format!(
        "[staleguard] {} quote(s) over the {max_quote_bytes}-byte limit were not retained (first: {} bytes from observation {} at {}). Use a targeted find or read on that page for the exact text.",
        refused.len(),
        first.quote.len(),
        first.observation,
        serde_json::Value::String(neutralise(&first.source_url).into_owned()),
    ))
}

/// The notice for quotes omitted by the request budget.
pub fn omitted_notice(omitted: usize) -> String {
    format!("[staleguard] {omitted} quote(s) omitted to keep the request within its byte budget. Read back the page to check those facts before relying on them.")
}

/// Applies the request budget: the most quotes (in rank order) whose block still fits, as
/// told by `fits`. Room for the omission notice is reserved first, so it never goes missing.
pub fn fit(
    selection: Selection,
    max_quote_bytes: usize,
    fits: impl Fn(&str) -> bool,
) -> (Option<String>, EvidenceReport) {
    let refused_notice = refused_notice(&selection.refused, max_quote_bytes);
    let mut report = EvidenceReport {
        refused: selection.refused,
        dropped: selection.dropped,
        ..Default::default()
    };
    let base_notices: Vec<String> = refused_notice.into_iter().collect();
    let total = selection.quotes.len();
    for keep in (0..=total).rev() {
        let mut notices = base_notices.clone();
        if keep < total {
            notices.push(omitted_notice(total - keep));
        }
        let (kept, omitted) = selection.quotes.split_at(keep);
        if kept.is_empty() && notices.is_empty() {
            return (
                None,
                EvidenceReport {
                    omitted: omitted.to_vec(),
                    ..report
                },
            );
        }
        let block = render(kept, &notices);
        if fits(&block) || keep == 0 {
            report.retained = kept.to_vec();
            report.omitted = omitted.to_vec();
            report.bytes = block.len();
            return (Some(block), report);
        }
    }
    (None, report)
}

/// The chunks and context evidence needs from a request.
#[derive(Debug, Default)]
pub struct Gathered<'t> {
    /// Chunks of collapsed observations.
    pub collapsed: Vec<Chunk<'t>>,
    /// Chunks of the live page state.
    pub live: Vec<Chunk<'t>>,
    /// Chunks of every other non-failed browser result (page reports, read-backs).
    pub others: Vec<Chunk<'t>>,
    pub context: Context<'t>,
}

impl<'t> Gathered<'t> {
    /// Every chunk of every non-failed browser result.
    pub fn all(&self) -> impl Iterator<Item = &Chunk<'t>> {
        self.collapsed.iter().chain(&self.live).chain(&self.others)
    }
}

/// Reads the chunks of every browser result the plan saw, and what the model said.
pub fn gather<'t>(
    transcript: &'t Transcript<'_>,
    session: &'t Session<'_>,
    plan: &Plan,
) -> Gathered<'t> {
    let mut g = Gathered::default();
    for (step, r) in session.steps.iter().zip(&plan.results) {
        if r.status == Status::Failed {
            continue;
        }
        let chunks = chunks_of(step);
        match r.status {
            Status::Collapsed => g.collapsed.extend(chunks),
            Status::Live => g.live.extend(chunks),
            _ => g.others.extend(chunks),
        }
    }
    for (at, item) in transcript.items.iter().enumerate() {
        match item {
            Item::Text {
                role: Role::Assistant,
                text,
            } => g.context.model_text.push((at, text)),
            Item::Call(call) => g.context.model_text.push((at, &call.arguments)),
            Item::Text {
                role: Role::User,
                text,
            } => g.context.question = text,
            _ => {}
        }
    }
    g
}

/// The page text of one browser result: an observation's chunks, or a read-back's.
fn chunks_of<'t>(step: &'t Step<'_>) -> Vec<Chunk<'t>> {
    let text = step.text;
    let reading = &step.reading;
    let observation: Arc<str> = reading.id.as_str().into();
    let tree = reading.tree(text);
    let words = reading.chunk_words(text);
    if reading.header.is_some() {
        let url = reading
            .header
            .as_ref()
            .and_then(|h| h.url.as_deref())
            .unwrap_or("");
        let key: Arc<str> = normalise(url).into();
        let document = tree.observation_id.as_ref().map(|p| Cow::Borrowed(p.get(text)));
        return tree
            .chunks
            .iter()
            .zip(words)
            .map(|(chunk, words)| Chunk {
                url: Cow::Borrowed(url),
                key: key.clone(),
                observation: observation.clone(),
                document: document.clone(),
                text: Cow::Borrowed(chunk.get(text)),
                words,
                position: step.item,
            })
            .collect();
    }
    tree.read_backs
        .iter()
        .zip(&words[tree.chunks.len()..])
        .map(|(c, words)| {
            let url = c.url.get(text);
            Chunk {
                url: Cow::Borrowed(url),
                key: normalise(url).into(),
                observation: observation.clone(),
                document: Some(Cow::Borrowed(c.observation.get(text))),
                text: Cow::Borrowed(c.text.get(text)),
                words,
                position: step.item,
            }
        })
        .collect()
}

/// The result the evidence block rides on: the newest non-failed browser result. `None`
/// when there is none, or when it already carries a block (a projected request).
pub fn target(session: &Session<'_>, plan: &Plan) -> Option<usize> {
    let (step, _) = session
        .steps
        .iter()
        .zip(&plan.results)
        .rev()
        .find(|(_, r)| r.status != Status::Failed)?;
    (!step.appendix).then_some(step.item)
}
