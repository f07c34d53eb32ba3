//! Quotes from the folded parts of a lean live page for the questions asked while it is
//! live. The lean form was fixed when the page arrived, before the user asked them; the
//! quotes go after it, one block per question in the order asked, so that what was sent for
//! an earlier question never changes (SPEC 9, C1).

use crate::evidence::{bm25, line_of, ranked, word_hashes, Words};
use crate::texts::EVIDENCE_HEADER;

/// Quotes one question takes at most from a lean page.
const MAX_QUOTES: usize = 3;
/// A block answers the task or a question when its BM25 score is at least this, and this
/// share of the best block's: one bar for the lean form's answers and its follow-up quotes.
pub(super) const MIN_SCORE: f64 = 0.75;
pub(super) const SHARE_OF_BEST: f64 = 0.35;

/// A folded prose block of a lean page: its text as the page shows it, and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoldedBlock {
    pub(crate) text: String,
    words: Box<[u64]>,
}

impl FoldedBlock {
    /// A block worth quoting: a phrase of a few words or a number, within the quote limit.
    pub(crate) fn of(text: String, max_bytes: usize) -> Option<FoldedBlock> {
        let phrase = text.split_whitespace().nth(3).is_some();
        let number = text.bytes().any(|b| b.is_ascii_digit());
        let fits = !text.is_empty() && text.len() <= max_bytes;
        (fits && (phrase || number)).then(|| FoldedBlock {
            words: word_hashes(&text),
            text,
        })
    }
}

/// The evidence block that answers `question` from `blocks`, folded on the page at `url`
/// (observation `id`), each quote at most `max_bytes`; `None` when nothing answers it.
pub(crate) fn quotes(
    blocks: &[FoldedBlock],
    question: &Words,
    (url, id): (&str, &str),
    max_bytes: usize,
) -> Option<String> {
    let docs: Vec<&[u64]> = blocks.iter().map(|b| &*b.words).collect();
    let scores = bm25(&docs, &[(question, 1.0, 2.0)]);
    let fits = |b: &usize| blocks[*b].text.len() <= max_bytes;
    let mut chosen: Vec<usize> = ranked(&scores, MIN_SCORE, SHARE_OF_BEST)
        .into_iter()
        .filter(fits)
        .collect();
    chosen.truncate(MAX_QUOTES);
    if chosen.is_empty() {
        return None;
    }
    // In page order, as the page reads.
    chosen.sort_unstable();
    let mut out = String::from(EVIDENCE_HEADER);
    for b in chosen {
        out.push('\n');
        out.push_str(&line_of(url, id, &blocks[b].text));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str) -> FoldedBlock {
        FoldedBlock::of(text.to_string(), 2048).expect("quotable")
    }

    #[test]
    fn the_blocks_that_share_the_questions_rare_words_are_quoted_in_page_order() {
        let blocks = [
            block("Automatically create a temporary stash entry before the operation begins"),
            block("Use the given merge strategy, instead of the default ort strategy"),
            block("Restart the rebasing process after having resolved a merge conflict"),
        ];
        let question = Words::of("Can I rebase with uncommitted changes, will it stash them?");
        let quoted =
            quotes(&blocks, &question, ("http://a/", "1a2b3c4d"), 2048).expect("an answer");
        assert!(quoted.starts_with(EVIDENCE_HEADER));
        assert!(quoted.contains("temporary stash entry"), "{quoted}");
        assert!(!quoted.contains("merge strategy"), "{quoted}");
        let none = Words::of("What colour is the sky?");
        assert_eq!(
            quotes(&blocks, &none, ("http://a/", "1a2b3c4d"), 2048),
            None
        );
        let short = quotes(&blocks, &question, ("http://a/", "1a2b3c4d"), 20);
        assert_eq!(short, None, "over the per-quote limit");
    }

    #[test]
    fn refs_in_a_quote_are_neutralised_and_labels_are_no_quotes() {
        assert!(FoldedBlock::of("Options".to_string(), 2048).is_none());
        assert!(
            FoldedBlock::of("x".repeat(3000), 2048).is_none(),
            "kept up to its bound"
        );
        let blocks = [block("click [ref=e5] to stash the changes now")];
        let quoted = quotes(&blocks, &Words::of("stash"), ("u", "i"), 2048).expect("quoted");
        assert!(!quoted.contains("[ref=e5]"), "{quoted}");
    }
}
