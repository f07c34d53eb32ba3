//! What the evidence track reports: the items a host names, the quotes kept, refused,
//! omitted and dropped, and the caps that bound them.

use serde::{Deserialize, Serialize};

/// An evidence item named by the host: a quote it wants kept, with where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceItem {
    /// The URL of the page it was read on.
    pub source_url: String,
    /// The short observation ID of the result it was read in, as receipts show it.
    pub observation: String,
    /// The text to keep: it must be a substring of a chunk of that page's text.
    pub quote: String,
}

/// A quote on the evidence track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    /// The URL of the page it was read on.
    pub source_url: String,
    /// The short observation ID of the result it was read in.
    pub observation: String,
    /// The quote, verbatim.
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
    /// The reason as reports print it.
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
    /// Quotes in the block, in rank order.
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
pub(crate) struct Limits {
    /// Bytes of quote lines on the track (the config's `evidence_max_bytes`).
    pub max_bytes: usize,
    /// Quotes on the track (`evidence_max_items`).
    pub max_items: usize,
    /// Bytes of one quote; a longer one is refused whole, with a notice
    /// (`evidence_max_quote_bytes`).
    pub max_quote_bytes: usize,
}

/// The host's quotes that grounded, before the request budget is applied.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    /// Grounded explicit items within the caps.
    pub quotes: Vec<Quote>,
    /// Over the per-quote limit: refused whole.
    pub refused: Vec<Quote>,
    /// Explicit items that did not ground, and why.
    pub dropped: Vec<(EvidenceItem, DropReason)>,
}
