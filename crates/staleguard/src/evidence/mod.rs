//! Evidence (SPEC 3): grounded, verbatim quotes from collapsed pages, on a capped track.
//!
//! Facts read on pages that projection collapsed (a price, a confirmation number) must not
//! vanish. Quotes are never summaries: every quote is a substring of a chunk of page text
//! that the browser actually returned, with its URL and observation. The room has four
//! files, each for one question: what a page offers ([`candidates`]), how a chunk is weighed
//! ([`ranking`]), which quotes are carried, automatic and named by the host ([`choice`]),
//! and how they are written ([`writing`]); [`report`] holds what a projection reports.

mod candidates;
mod choice;
mod ranking;
mod report;
mod writing;

pub(crate) use candidates::{gather, target, word_hashes};
pub(crate) use choice::{choose_from, read_before, select, Choice};
pub(crate) use ranking::{bm25, model_hash, model_words, ranked, section_of, Words};
pub(crate) use report::Limits;
pub use report::{DropReason, EvidenceItem, EvidenceReport, Quote};
pub(crate) use writing::{apply, fit, line_of, Block, Written};
