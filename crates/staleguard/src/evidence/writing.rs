//! How quotes are written: one line per quote, the blocks inside a collapsed page and after
//! the newest browser result, the notices of what was refused or omitted, and the edits
//! that carry them.

use std::collections::HashMap;

use crate::refs::neutralise;
use crate::texts::{self, EVIDENCE_HEADER};
use crate::transcript::Edit;

use super::candidates::Chunk;
use super::report::{EvidenceReport, Quote, Selection};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Block {
    /// Inside the collapsed content of transcript item `.0`.
    Inside(usize),
    /// A part appended to transcript item `.0`.
    Appended(usize),
}

impl Block {
    /// The transcript item it is written on.
    pub(crate) fn item(self) -> usize {
        match self {
            Block::Inside(item) | Block::Appended(item) => item,
        }
    }
}

pub(crate) fn quote_of(c: &Chunk<'_>) -> Quote {
    Quote {
        source_url: c.url.to_string(),
        observation: c.observation.to_string(),
        quote: c.text.to_string(),
    }
}

/// A quote's line in `block`: inside its own page's content the receipt above names URL
/// and page.
pub(crate) fn line_in(block: Block, c: &Chunk<'_>) -> String {
    match block {
        Block::Inside(_) => own_line(c.text),
        Block::Appended(_) => line_of(c.url, c.observation, c.text),
    }
}

/// A quote line inside the collapsed content of its own page: the receipt above it names
/// the URL and the observation.
pub(crate) fn own_line(quote: &str) -> String {
    format!(
        r#"{{"quote":{}}}"#,
        crate::json::json_string(&neutralise(quote))
    )
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

/// One JSON line per quote; ref tokens inside are neutralised, so no quote can act.
pub(crate) fn line(quote: &Quote) -> String {
    line_of(&quote.source_url, &quote.observation, &quote.quote)
}

pub(crate) fn line_of(source_url: &str, observation: &str, quote: &str) -> String {
    format!(
        r#"{{"source_url":{},"observation":{},"quote":{}}}"#,
        crate::json::json_string(&neutralise(source_url)),
        crate::json::json_string(observation),
        crate::json::json_string(&neutralise(quote))
    )
}

/// The block: header, quote lines, notices.
pub(crate) fn render(quotes: &[Quote], notices: &[String]) -> String {
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
pub(crate) fn refused_notice(refused: &[Quote], max_quote_bytes: usize) -> Option<String> {
    let first = refused.first()?;
    Some(texts::quotes_refused(
        refused.len(),
        max_quote_bytes,
        first.quote.len(),
        &first.observation,
        &serde_json::Value::String(neutralise(&first.source_url).into_owned()).to_string(),
    ))
}

/// The notice for quotes omitted by the request budget.
pub(crate) fn omitted_notice(omitted: usize) -> String {
    texts::quotes_omitted(omitted)
}

/// Applies the request budget: the most quotes (in rank order) whose block still fits, as
/// told by `fits`. Room for the omission notice is reserved first, so it never goes missing.
pub(crate) fn fit(
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
