//! What a page offers the evidence track: its chunks of text, their words and facts (kept in
//! the memo by the page's content key), and the results quotes may come from.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::memo::Memo;
use crate::projection::{Plan, Status};
use crate::session::{DerivedKind, PageWordsKind, Session, Step};
use crate::urlnorm::normalise;

/// A chunk of page text as the browser returned it.
#[derive(Debug, Clone)]
pub(crate) struct Chunk<'t> {
    /// The URL of the page it was read on.
    pub url: &'t str,
    /// `url`, normalised once for all the chunks of a page (and kept with its reading).
    pub key: Cow<'t, str>,
    /// The short observation ID (as receipts show it), shared by the chunks of a result.
    pub observation: &'t str,
    /// The format's own ID for the observation, when it has one (the seed's UUIDs).
    pub document: Option<&'t str>,
    /// The page text.
    pub text: &'t str,
    /// Its words, hashed ([`word_hashes`]).
    pub words: &'t [u64],
    /// Position of the result in the transcript: later is newer.
    pub position: usize,
    /// A candidate of its own, whatever its words: the first or last numbered row of a
    /// table.
    pub candidate: bool,
    /// What evidence asks of its text, read once per result text.
    pub facts: ChunkFacts,
}

/// What evidence asks of a chunk's text: computed once per result text (and kept with its
/// reading across requests), because every collapsed page is weighed again on every turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChunkFacts {
    /// Worth quoting: a number, or a phrase of a few words; not a bare label.
    pub quotable: bool,
    /// It holds a date (a month name and a year).
    pub date: bool,
    /// It holds a digit.
    pub number: bool,
    /// A hash of its text, to tell whether the next page still shows it.
    pub hash: u64,
}

/// The evidence facts of a page's chunks, and in how many of its quotable chunks each word
/// occurs.
#[derive(Debug, Default)]
pub(crate) struct PageFacts {
    /// One per chunk: the tree's chunks, then its read-backs' (as [`PageWords`] orders them).
    pub chunks: Vec<ChunkFacts>,
    /// Word hash to the number of quotable chunks that hold it.
    pub frequency: HashMap<u64, u32, Words>,
}

impl PageFacts {
    /// Bytes it holds on the heap: a hash table's buckets are at least an eighth more than
    /// its capacity, each with a control byte.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<ChunkFacts>()
            + crate::memo::table_bytes::<u64, u32>(self.frequency.capacity())
    }

    /// The facts of `texts`, whose word hashes are `words`; the chunks at `headings` are
    /// headings, which are no evidence alone (SPEC 3).
    pub(crate) fn of<'x>(
        texts: impl Iterator<Item = &'x str>,
        words: &[Box<[u64]>],
        headings: &[usize],
    ) -> PageFacts {
        let mut facts = PageFacts::default();
        for (i, (text, words)) in texts.zip(words).enumerate() {
            let number = text.bytes().any(|b| b.is_ascii_digit());
            let phrase = number || text.split_whitespace().nth(3).is_some();
            let quotable = phrase && headings.binary_search(&i).is_err();
            if quotable {
                for &w in words.iter() {
                    *facts.frequency.entry(w).or_insert(0) += 1;
                }
            }
            facts.chunks.push(ChunkFacts {
                quotable,
                date: has_date(text),
                number,
                hash: xxhash_rust::xxh3::xxh3_64(text.as_bytes()),
            });
        }
        facts
    }
}

/// What evidence derives from one page's reading: the words of every chunk of its tree
/// (read-back chunks after them), their facts, and the page's URL as evidence compares URLs.
/// Kept in the memo by the page's content key: every collapsed page is weighed again on
/// every turn.
#[derive(Debug)]
pub(crate) struct PageWords {
    /// Bytes of the text it was derived from: a kept one of another size is another page's.
    bytes: usize,
    /// Each chunk's words, as [`word_hashes`] gives them.
    pub(crate) words: Vec<Box<[u64]>>,
    pub(crate) facts: PageFacts,
    /// The page URL, normalised; empty when the page names none.
    pub(crate) url_key: Box<str>,
}

impl PageWords {
    fn of(step: &Step<'_>) -> PageWords {
        let (reading, text) = (&step.reading, step.text);
        let tree = reading.tree(text);
        let chunks = || {
            let read_backs = tree.read_backs.iter().map(|r| &r.text);
            tree.chunks.iter().chain(read_backs).map(|c| c.get(text))
        };
        let words: Vec<Box<[u64]>> = chunks().map(word_hashes).collect();
        let facts = PageFacts::of(chunks(), &words, &tree.headings);
        let url = reading.header.as_ref().and_then(|h| h.url.as_deref());
        PageWords {
            bytes: text.len(),
            words,
            facts,
            url_key: normalise(url.unwrap_or("")).into(),
        }
    }

    fn heap_bytes(&self) -> usize {
        let words = self.words.iter().map(|w| w.len() * 8).sum::<usize>();
        let boxes = self.words.capacity() * std::mem::size_of::<Box<[u64]>>();
        std::mem::size_of::<Self>() + words + boxes + self.facts.heap_bytes() + self.url_key.len()
    }
}

impl DerivedKind for PageWordsKind {
    type Value = PageWords;
}

/// The words and facts of `step`'s page, derived once per text.
pub(crate) fn page_words<'s>(memo: &Memo, step: &'s Step<'_>) -> &'s PageWords {
    let same = |p: &PageWords| p.bytes == step.text.len();
    let weigh = |p: &PageWords| p.heap_bytes() as u64;
    let make = || PageWords::of(step);
    step.page_words.get(step.key, memo, same, make, weigh)
}

/// Month names, as dates on pages spell them.
pub(crate) const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A date: a month name and a four-digit year (`12 November 2024`, `March 3, 2025`).
pub(crate) fn has_date(text: &str) -> bool {
    let year = text
        .split(|c: char| !c.is_ascii_digit())
        .any(|d| d.len() == 4 && (d.starts_with("19") || d.starts_with("20")));
    year && MONTHS.iter().any(|m| text.contains(m))
}

/// Hashes sets keyed by page text, which a hostile page chooses: the hasher is keyed at
/// random (no crafted collisions) and fast on short keys.
pub(crate) type Fast = ahash::RandomState;

/// Maps keyed by word hashes ([`word_hashes`]): those are fixed-seed hashes of page text, so
/// they are hashed again with a random key.
pub(crate) type Words = ahash::RandomState;

/// Words of at least 3 characters, or 2 with a digit; `$1,140`, `WX-1001` and `P-0237`
/// stay whole.
pub(crate) fn word_iter(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        !(c.is_alphanumeric() || matches!(c, '-' | '$' | '.' | ',' | '%' | '€' | '£'))
    })
    .map(|w| w.trim_matches(|c: char| matches!(c, '.' | ',' | '-')))
    .filter(|w| w.chars().count() >= 3 || w.chars().any(|c| c.is_ascii_digit()))
}

/// The words of `text` (see `word_iter`), each hashed (64-bit xxh3 of its lower-cased form),
/// sorted and distinct: ranking only compares words, and a hash costs no allocation for
/// ASCII words.
pub(crate) fn word_hashes(text: &str) -> Box<[u64]> {
    let mut out: Vec<u64> = word_iter(text).map(word_hash).collect();
    out.sort_unstable();
    out.dedup();
    out.into_boxed_slice()
}

/// The words of `text` as [`word_hashes`] hashes them, each with whether it holds a digit
/// (a number, a price, an identifier): those single out a fact.
pub(crate) fn words_with_digits(text: &str) -> impl Iterator<Item = (u64, bool)> + '_ {
    word_iter(text).map(|w| (word_hash(w), w.bytes().any(|b| b.is_ascii_digit())))
}

/// A word's hash: 64-bit xxh3 of its lower-cased Snowball English stem (`tracking` asks
/// about `tracked`, `prices` about `price`), without allocating for most ASCII words. Words
/// with digits or signs (`WX-1001`, `$1,140`) are hashed as they are, a plural `s` left off.
pub(crate) fn word_hash(w: &str) -> u64 {
    let mut buf = [0u8; 64];
    match buf.get_mut(..w.len()) {
        Some(slot) if w.is_ascii() => {
            slot.copy_from_slice(w.as_bytes());
            slot.make_ascii_lowercase();
            if slot.len() >= 4 && slot.iter().all(u8::is_ascii_lowercase) {
                // Lower-case ASCII letters are UTF-8.
                let word = std::str::from_utf8(slot).unwrap_or_default();
                return xxhash_rust::xxh3::xxh3_64(STEMMER.stem(word).as_bytes());
            }
            let n = slot.len();
            let plural = n > 4 && slot[n - 1] == b's' && slot[n - 2].is_ascii_alphabetic();
            let plural = plural && slot[n - 2] != b's';
            let stem = if plural { &slot[..n - 1] } else { &slot[..] };
            xxhash_rust::xxh3::xxh3_64(stem)
        }
        _ => xxhash_rust::xxh3::xxh3_64(w.to_lowercase().as_bytes()),
    }
}

static STEMMER: std::sync::LazyLock<rust_stemmers::Stemmer> =
    std::sync::LazyLock::new(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English));

/// The browser results explicit items ground in.
#[derive(Debug)]
pub(crate) struct Gathered<'t> {
    memo: &'t Memo,
    /// Every non-failed browser result.
    sources: Vec<&'t Step<'t>>,
}

impl<'t> Gathered<'t> {
    /// Every chunk of every non-failed browser result.
    pub(crate) fn all(&self) -> impl Iterator<Item = Chunk<'t>> + '_ {
        self.sources
            .iter()
            .flat_map(|step| chunks_of(self.memo, step))
    }
}

/// The browser results of `session` that the plan did not find failed.
pub(crate) fn gather<'t>(session: &'t Session<'t>, plan: &Plan) -> Gathered<'t> {
    let sources = session
        .steps
        .iter()
        .zip(&plan.results)
        .filter(|(_, r)| r.status != Status::Failed)
        .map(|(step, _)| step)
        .collect();
    Gathered {
        memo: session.memo,
        sources,
    }
}

/// The page text of one browser result: an observation's chunks, or a read-back's.
pub(crate) fn chunks_of<'t>(
    memo: &Memo,
    step: &'t Step<'t>,
) -> impl Iterator<Item = Chunk<'t>> + 't {
    let page = PageChunks::of(memo, step);
    (0..page.len()).filter_map(move |i| page.get(i))
}

/// The chunks of one browser result, each built when asked for: most of a collapsed page's
/// chunks score too little to be looked at on a later turn.
pub(crate) struct PageChunks<'t> {
    step: &'t Step<'t>,
    tree: &'t crate::reading::TreeParts,
    words: &'t [Box<[u64]>],
    facts: &'t [ChunkFacts],
    url_key: &'t str,
    /// Where this page's chunks start in `words` and `facts`: read-backs follow the tree's
    /// chunks there.
    first: usize,
    len: usize,
}

impl<'t> PageChunks<'t> {
    pub(crate) fn of(memo: &Memo, step: &'t Step<'t>) -> PageChunks<'t> {
        let reading = &step.reading;
        let tree = reading.tree(step.text);
        let page = page_words(memo, step);
        let words = &page.words;
        // The tree's chunks on a page, else the read-backs'.
        let (first, count) = match reading.header {
            Some(_) => (0, tree.chunks.len()),
            None => (tree.chunks.len(), tree.read_backs.len()),
        };
        PageChunks {
            step,
            tree,
            words,
            facts: &page.facts.chunks,
            url_key: &page.url_key,
            first,
            len: count.min(words.len().saturating_sub(first)),
        }
    }

    /// How many chunks it has.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What evidence asks of chunk `i`'s text.
    pub(crate) fn facts(&self, i: usize) -> ChunkFacts {
        self.facts.get(self.first + i).copied().unwrap_or_default()
    }

    /// The hashed words of chunk `i`.
    pub(crate) fn words(&self, i: usize) -> &'t [u64] {
        self.words.get(self.first + i).map_or(&[], |w| w)
    }

    /// Chunk `i`.
    pub(crate) fn get(&self, i: usize) -> Option<Chunk<'t>> {
        let (step, text) = (self.step, self.step.text);
        let reading = &step.reading;
        let words = self.words.get(self.first + i)?;
        let facts = self.facts(i);
        let observation: &str = &reading.id;
        if let Some(header) = &reading.header {
            let chunk = self.tree.chunks.get(i)?;
            return Some(Chunk {
                url: header.url.as_deref().unwrap_or(""),
                key: Cow::Borrowed(self.url_key),
                observation,
                document: self.tree.observation_id.as_ref().map(|p| p.get(text)),
                text: chunk.get(text),
                words,
                position: step.item,
                candidate: self.tree.table_ends.contains(&i),
                facts,
            });
        }
        let c = self.tree.read_backs.get(i)?;
        let url = c.url.get(text);
        Some(Chunk {
            url,
            key: Cow::Owned(normalise(url)),
            observation,
            document: Some(c.observation.get(text)),
            text: c.text.get(text),
            words,
            position: step.item,
            candidate: false,
            facts,
        })
    }
}

/// The result the evidence block and guidance ride on: the newest non-failed browser result
/// at or after the live page state. With no live page state, only the newest browser result
/// qualifies: text appended to an older one would move when the session goes on, and SPEC 9
/// C1 freezes everything before the newest browser result. `None` when nothing qualifies,
/// when the target already carries a block (a projected request), or when it is collapsed
/// (an old file read again after the live page): its receipt replaces it whole, so text
/// appended to it would be lost on the first pass and written on the second, after the
/// receipt that then needs no rewrite (SPEC 2, idempotence).
pub(crate) fn target(session: &Session<'_>, plan: &Plan) -> Option<usize> {
    let live = plan.results.iter().any(|r| r.status == Status::Live);
    let mut newest_first = session.steps.iter().zip(&plan.results).rev();
    let (step, result) = if live {
        newest_first.find(|(_, r)| r.status != Status::Failed)?
    } else {
        newest_first
            .next()
            .filter(|(_, r)| r.status != Status::Failed)?
    };
    (!step.appendix && result.status != Status::Collapsed).then_some(step.item)
}
