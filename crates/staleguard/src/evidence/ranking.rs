//! How chunks are weighed: BM25 over a page's chunks, with the user's words and what the
//! model wrote and did after reading the page as the query (rare words weigh most, a long
//! chunk needs more of them), their place on the page, and the section a URL names.

use std::collections::{HashMap, HashSet};

use crate::memo::Memo;
use crate::session::Step;
use crate::transcript::{Item, Role, Transcript};

use super::candidates::{chunks_of, page_words, word_hash, words_with_digits, Chunk, Fast};

/// Chunks up to this many bytes are labels, cells and values: short facts.
pub(crate) const SHORT_FACT: usize = 64;

/// Scores are BM25 times this, as integers: thresholds and ties are exact.
pub(crate) const SCALE: f64 = 20.0;

/// What a chunk that starts with a word of a follow-up question scores for it besides its
/// BM25: the chunk defines the word (a parameter list's "sep The substring used to ...").
pub(crate) const DEFINES: u32 = 20;

/// The score a chunk of a collapsed page needs to be quoted, at least: a word of the task
/// or of the model's that the page does not repeat everywhere.
pub(crate) const MIN_PAGE_SCORE: u32 = 15;

/// The share of a page's best score a chunk needs besides: on a page that answers the
/// task well, a chunk that shares one common word with it is noise.
pub(crate) const MIN_SHARE_OF_BEST: f64 = 0.3;

/// The score of a short line that dates what the page reports (`Published 12 November
/// 2024.`, `Document revision C, 28 January 2025.`): quoted when a page has room left, after
/// every chunk that answers the task.
pub(crate) const DATE_LINE: u32 = 1;

/// The score a chunk needs to answer a follow-up question.
pub(crate) const MIN_QUESTION_SCORE: u32 = 15;

/// BM25's saturation and length normalisation, at their usual values.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// BM25's inverse document frequency of a word in `df` of `n` chunks, divided by the rarest
/// word's, so that a word found in one chunk weighs 1 on a page of 5 chunks as on a page of
/// 5,000, and thresholds hold on both.
pub(crate) fn idf(df: usize, n: usize) -> f64 {
    let raw = |df: usize| {
        let (df, n) = (df.max(1) as f64, n.max(1) as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    };
    raw(df) / raw(1)
}

/// BM25's weight of a word found in a chunk of `len` words, where chunks average `avg`.
pub(crate) fn saturation(len: usize, avg: f64) -> f64 {
    (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * len as f64 / avg.max(1.0)))
}

/// BM25 of each document (its word hashes, as [`super::candidates::word_hashes`] gives
/// them) against weighted words: each `(words, weight of a plain word, of one with a digit)`.
pub(crate) fn bm25(docs: &[&[u64]], query: &[(&Words, f64, f64)]) -> Vec<f64> {
    let n = docs.len();
    let mut df: HashMap<u64, usize, Fast> = HashMap::default();
    for words in docs {
        for &w in words.iter() {
            *df.entry(w).or_default() += 1;
        }
    }
    let avg = docs.iter().map(|w| w.len()).sum::<usize>() as f64 / n.max(1) as f64;
    let mut weights: HashMap<u64, f64, Fast> = HashMap::default();
    for &(words, plain, digits) in query {
        for (&w, &digit) in &words.0 {
            let Some(&d) = df.get(&w) else { continue };
            *weights.entry(w).or_default() += idf(d, n) * if digit { digits } else { plain };
        }
    }
    docs.iter()
        .map(|words| {
            words.iter().filter_map(|w| weights.get(w)).sum::<f64>() * saturation(words.len(), avg)
        })
        .collect()
}

/// The indexes of `scores` at least `min` and `share` of the best, best first (ties in
/// order).
pub(crate) fn ranked(scores: &[f64], min: f64, share: f64) -> Vec<usize> {
    let best = scores.iter().copied().fold(0.0, f64::max);
    let floor = min.max(best * share);
    let mut out: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] >= floor).collect();
    out.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    out
}

/// Words too common in questions to single out a chunk.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "and", "any", "are", "but", "can", "did", "does", "doing",
    "for", "from", "get", "had", "has", "have", "how", "into", "its", "just", "may", "more", "not",
    "now", "one", "our", "out", "see", "should", "some", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "use", "was", "way", "were", "what", "when", "where",
    "which", "while", "who", "why", "will", "with", "would", "you", "your",
];

/// Words of context, each with whether it holds a digit.
#[derive(Default, Clone)]
pub(crate) struct Words(pub(crate) HashMap<u64, bool, Fast>);

impl Words {
    /// Adds the words of `text`, leaving URLs out: a URL names where the agent goes
    /// (`http://127.0.0.1:8441/os.html`), not what it looks for there, and its host and port
    /// would single out any chunk that lists addresses.
    pub(crate) fn add(&mut self, text: &str) {
        for piece in text.split_whitespace().map(before_url) {
            for (w, digit) in words_with_digits(piece) {
                self.0.insert(w, digit);
            }
        }
        for stop in STOP_HASHES.iter() {
            self.0.remove(stop);
        }
    }

    pub(crate) fn of(text: &str) -> Words {
        let mut words = Words::default();
        words.add(text);
        words
    }

    /// The weight of word `w` in this context: a number or an identifier singles a fact
    /// out far better than a plain word.
    pub(crate) fn weight(&self, w: u64, plain: u32, digits: u32) -> u32 {
        match self.0.get(&w) {
            Some(true) => digits,
            Some(false) => plain,
            None => 0,
        }
    }
}

static STOP_HASHES: std::sync::LazyLock<Vec<u64>> =
    std::sync::LazyLock::new(|| STOP_WORDS.iter().map(|w| word_hash(w)).collect());

/// A whitespace-free piece of text up to the URL in it, if any (`{"url":"http://a/b"}`
/// keeps `{"url":"`).
pub(crate) fn before_url(piece: &str) -> &str {
    // Most pieces hold no colon; a substring search costs a searcher's set-up per piece.
    if !piece.as_bytes().contains(&b':') {
        return piece;
    }
    match piece.find("://") {
        Some(at) => {
            // The scheme is the ASCII run before `://`; what precedes it may be any script
            // (`打开https://...`), so the cut goes after the whole character found.
            let scheme = piece[..at]
                .char_indices()
                .rev()
                .find(|&(_, c)| !c.is_ascii_alphanumeric())
                .map_or(0, |(i, c)| i + c.len_utf8());
            &piece[..scheme]
        }
        None => piece,
    }
}

/// The texts the model wrote and the arguments it sent between transcript items `from` and
/// `until`.
pub(crate) fn model_texts<'t>(
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
pub(crate) fn model_words(transcript: &Transcript<'_>, from: usize, until: usize) -> Words {
    let mut words = Words::default();
    for text in model_texts(transcript, from, until) {
        words.add(text);
    }
    words
}

/// A hash of what the model wrote and did between transcript items `from` and `until`.
pub(crate) fn model_hash(transcript: &Transcript<'_>, from: usize, until: usize) -> u64 {
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    for text in model_texts(transcript, from, until) {
        hash.update(text.as_bytes());
        hash.update(&[0]);
    }
    hash.digest()
}

/// The score of every chunk of `page` against the user's `task` and what the `model` wrote
/// and did after reading it: BM25 over the page's quotable chunks, the first and last rows
/// of a table, the section the URL points at, short facts with numbers.
pub(crate) fn page_scores(memo: &Memo, page: &Step<'_>, task: &Words, model: &Words) -> Vec<u32> {
    let header = page.reading.header.as_ref();
    let url = header.and_then(|h| h.url.as_deref()).unwrap_or("");
    let section = section_of(url, chunks_of(memo, page).map(|c| c.text));
    let words = page_words(memo, page);
    let facts = &words.facts;
    let quotable = || {
        facts
            .chunks
            .iter()
            .zip(&words.words)
            .filter(|(f, _)| f.quotable)
    };
    let n = quotable().count();
    let avg = quotable().map(|(_, w)| w.len()).sum::<usize>() as f64 / n.max(1) as f64;
    // One lookup per word of the page: the task's and the model's weights times the word's
    // idf, summed. Few words of a page are in either.
    let mut weights: HashMap<u64, f64, Fast> = HashMap::default();
    for (words, plain, digits) in [(task, 1.0, 2.0), (model, 0.6, 1.5)] {
        for (&w, &digit) in &words.0 {
            let df = facts.frequency.get(&w).copied().unwrap_or(0) as usize;
            if df == 0 {
                continue;
            }
            *weights.entry(w).or_default() += idf(df, n) * if digit { digits } else { plain };
        }
    }
    let score = |(i, c): (usize, Chunk<'_>)| {
        let bm25: f64 = c.words.iter().filter_map(|w| weights.get(w)).sum::<f64>()
            * saturation(c.words.len(), avg);
        let matched = (bm25 * SCALE).round() as u32;
        // The first and last rows of a table and the section the URL points at (what the
        // agent went there to read) are candidates of their own.
        let end = if section.contains(&i) {
            MIN_PAGE_SCORE
        } else if c.candidate {
            MIN_PAGE_SCORE / 2
        } else {
            0
        };
        if matched + end == 0 {
            return u32::from(is_date_line(c.text, c.facts.date)) * DATE_LINE;
        }
        // A short fact with a number is worth as much as a long paragraph.
        let number = c.facts.number;
        let short = if c.text.len() <= SHORT_FACT && number {
            10
        } else {
            0
        };
        matched + end + short + 5 * u32::from(number)
    };
    chunks_of(memo, page).enumerate().map(score).collect()
}

/// A short line that dates the page's content: not a footer's "Last updated" or copyright
/// date, which every page of a site repeats and says nothing about the content.
pub(crate) fn is_date_line(text: &str, date: bool) -> bool {
    const SITE_DATES: &[&str] = &[
        "updated",
        "modified",
        "copyright",
        "©",
        "generated",
        "built",
    ];
    let lower = || text.to_ascii_lowercase();
    date && text.len() <= 80 && !SITE_DATES.iter().any(|w| lower().contains(w))
}

/// The hashes of the texts `step`'s page shows: what is still there needs no quote.
pub(crate) fn shown_on(memo: &Memo, step: &Step<'_>) -> HashSet<u64, Fast> {
    let facts = &page_words(memo, step).facts.chunks;
    facts.iter().map(|f| f.hash).collect()
}

/// Chunks after a heading count as its section, up to this many.
pub(crate) const SECTION_CHUNKS: usize = 10;

/// The chunks of the section that `url`'s fragment names: those after the first chunk whose
/// letters and digits begin with the fragment's (`#event-warning` names "Event: 'warning'",
/// as documentation sites derive anchors from headings). Empty without a fragment.
pub(crate) fn section_of<'x>(
    url: &str,
    texts: impl Iterator<Item = &'x str>,
) -> std::ops::Range<usize> {
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

/// Chromium's error pages (`chrome-error://`) give no evidence.
pub(crate) fn is_error_page(url: Option<&str>) -> bool {
    url.is_some_and(|u| u.starts_with("chrome-error:"))
}

#[cfg(test)]
mod tests {
    use super::{before_url, section_of};

    #[test]
    fn a_url_right_after_any_script_is_cut_after_its_whole_character() {
        // Writers of Chinese and Japanese put no space before a URL (issue 41: this panicked).
        for (piece, kept) in [
            ("打开https://shop.example.com", "打开"),
            ("ページhttps://a.example/", "ページ"),
            ("ދިވެhttps://a.example", "ދިވެ"),
            ("انظرhttp://a.example", "انظر"),
            ("→https://a.example", "→"),
            ("👉https://a.example", "👉"),
            ("{\"url\":\"http://a/b", "{\"url\":\""),
            ("https://a.example", ""),
            ("見て:x://y", "見て:"),
        ] {
            assert_eq!(before_url(piece), kept, "{piece}");
        }
    }

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
