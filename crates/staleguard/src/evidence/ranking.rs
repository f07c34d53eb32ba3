//! How chunks are weighed: the rare words they share with the user's task and with what the
//! model wrote and did after reading them, their place on the page, and the section a URL
//! names. The next issue changes how quotes are ranked: it changes this file.

use std::collections::{HashMap, HashSet};

use crate::memo::Memo;
use crate::session::Step;
use crate::transcript::{Item, Role, Transcript};

use super::candidates::{chunks_of, page_words, words_with_digits, Chunk, Fast};

/// Chunks up to this many bytes are labels, cells and values: short facts.
pub(crate) const SHORT_FACT: usize = 64;

/// What a chunk that starts with a word of a follow-up question scores for it: the chunk
/// defines the word.
pub(crate) const DEFINES: u32 = 4;

/// Words in more chunks of the pages ranked than this single nothing out.
pub(crate) const RARE_MAX_CHUNKS: usize = 3;

/// The score a chunk of a collapsed page needs to be quoted: about two rare words of the
/// task, or one number or identifier it names.
pub(crate) const MIN_PAGE_SCORE: u32 = 6;

/// `weight`, shared among the `df` chunks that hold the word: a word on every line of a
/// page singles nothing out.
pub(crate) fn rarity(weight: u32, df: usize) -> u32 {
    match df {
        0 => 0,
        df if df > 2 * RARE_MAX_CHUNKS => 0,
        df => weight / df as u32,
    }
}

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

/// A whitespace-free piece of text up to the URL in it, if any (`{"url":"http://a/b"}`
/// keeps `{"url":"`).
pub(crate) fn before_url(piece: &str) -> &str {
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
/// and did after reading it: the rare words it shares with them, the first and last rows
/// of a table, the section the URL points at, dates, short facts with numbers.
pub(crate) fn page_scores(memo: &Memo, page: &Step<'_>, task: &Words, model: &Words) -> Vec<u32> {
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
