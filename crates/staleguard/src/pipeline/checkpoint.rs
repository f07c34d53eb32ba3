//! Checkpoints: the analyses' state where a request's frozen history ends (SPEC 9, C1),
//! kept across requests, so that the next turn of a session is read and analysed from
//! there on instead of from its first message.
//!
//! An agent's next request repeats the previous one's bytes up to its newest browser
//! result and adds what is new. Everything before that point was projected, weighed and
//! tracked one request ago and comes out the same (C1 freezes it), so a checkpoint keeps
//! what the analyses had at that point: the projected bytes, the reports, the evidence
//! choice, the progress tracker and where reading resumes. A later body whose bytes up to
//! there hash the same (128 bits, seeded with the memo's secret seed, so that page text
//! cannot be crafted to collide) resumes there. Anything the new
//! messages would change before the checkpoint (a cap dropping an old quote, a question, a
//! breakpoint or a live page state reaching back) makes the request go the whole way
//! instead: a checkpoint only saves work, and every answer is the same with it or without.
//!
//! A session's checkpoints share what they have in common: each holds the previous one's
//! parts (bytes, projected bytes, reports) by reference and adds its own.

use std::sync::{Arc, Mutex};

use xxhash_rust::xxh3::Xxh3;

use crate::adapter::{RequestFormat, ResumeAt};
use crate::evidence::Quote;
use crate::evidence::{Block, Choice};
use crate::memo::{Memo, Slot};
use crate::progress::Tracker;
use crate::projection::ResultReport;
use crate::transcript::Edit;

/// Where an edit goes in a plan's list: receipts, then guidance, then evidence appended
/// inside collapsed content, then the answers to questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EditGroup {
    Receipt,
    Guidance,
    Inside,
    Appended,
}

/// A list kept in shared parts: the next checkpoint of a session shares this one's and adds
/// a part of its own. Parts are never joined: that would copy a session's history at once,
/// on one turn, which is the cost checkpoints exist to spread; a part costs a pointer.
#[derive(Debug)]
pub(crate) struct Shared<T: ?Sized> {
    parts: Vec<Arc<T>>,
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            parts: self.parts.clone(),
        }
    }
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared { parts: Vec::new() }
    }
}

impl<T: ?Sized> Shared<T> {
    /// These parts, then those of `after`.
    pub(crate) fn then(mut self, after: Shared<T>) -> Shared<T> {
        self.parts.extend(after.parts);
        self
    }
}

impl Shared<str> {
    fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    pub(crate) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.parts.push(Arc::from(text));
    }

    pub(crate) fn parts(&self) -> &[Arc<str>] {
        &self.parts
    }

    fn heap_bytes(&self) -> usize {
        self.len() + self.parts.len() * 32
    }
}

impl<T> Shared<[T]> {
    pub(crate) fn push(&mut self, items: Vec<T>) {
        if items.is_empty() {
            return;
        }
        self.parts.push(Arc::from(items));
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.parts.iter().flat_map(|p| p.iter())
    }

    fn parts(&self) -> usize {
        self.parts.len()
    }
}

/// The analyses' state at the start of one message of a request.
pub(crate) struct Checkpoint {
    /// How many of the body's bytes a later body must repeat: up to the start of the
    /// message of the newest observation of the frozen history (`chosen_until`).
    pub hashed: usize,
    /// Their hash, seeded with the memo's seed, and the hash's state there: the next
    /// checkpoint of the session hashes only what is new.
    hash: u128,
    pub hasher: Box<Xxh3>,
    /// Their last bytes (up to [`END`]): a cheap first test, as sessions differ in their
    /// newest messages.
    end: Box<[u8]>,
    /// The first item of that message.
    pub hashed_item: usize,
    /// What the analyses read of the items from `hashed_item` to `chosen_until`.
    pub items: u128,
    /// Some result before `resume.item` is an observation.
    pub observations: bool,
    /// The format and settings the answer was computed under.
    context: u64,
    /// Where reading resumes: the first message read again.
    pub resume: ResumeAt,
    /// The projected form of the body's bytes before `resume.offset`, without a breakpoint
    /// of ours (the next request puts its own further on).
    pub written: Shared<str>,
    /// Reports and edits of the results before `resume.item`, in plan order.
    pub results: Shared<[ResultReport]>,
    pub edits: Shared<[(EditGroup, Edit)]>,
    /// Observations collapsed before `resume.item`.
    pub collapsed: usize,
    /// Evidence written before `resume.item`: quotes and refusals by block, and bytes.
    pub quotes: Vec<(Block, Quote)>,
    pub refused: Vec<(Block, Quote)>,
    pub evidence_bytes: usize,
    /// The evidence choice after every event at or before transcript item `chosen_until`.
    pub choice: Option<Choice>,
    pub chosen_until: usize,
    /// The progress tracker after every call and result before `resume.item`.
    pub tracker: Option<Tracker>,
    /// What the results before `resume.item` showed, as far as where the model began reading
    /// a page goes (`evidence::read_before`), and the model's texts and calls' arguments from
    /// there to `resume.item`, by transcript item: the tail's session and transcript get them
    /// back.
    pub before: Option<(Arc<str>, usize)>,
    pub model_before: Vec<(usize, Box<str>)>,
    /// What a lean live page in the tail reads from before `resume.item`.
    pub lean: LeanBefore,
}

/// What a checkpoint keeps for a live page made lean in the tail read from it (SPEC 2): the
/// user's messages before the resume point and the model's newest texts since the last of
/// them (`lean::users_before`, `lean::model_window`), what "ask again" knows of the first step read again
/// (`lean::first_from`; `None`: the tail cannot be made lean as a whole read makes it), and
/// whether the request offers `browser_find` (its declarations may be before the tail).
#[derive(Debug, Clone, Default)]
pub(crate) struct LeanBefore {
    pub users: Vec<(usize, Arc<str>)>,
    pub model: Vec<(usize, Box<str>)>,
    pub first: Option<crate::lean::First>,
    pub find: bool,
}

impl LeanBefore {
    fn heap_bytes(&self) -> usize {
        let users = self.users.iter().map(|(_, t)| t.len() + 48);
        let model = self.model.iter().map(|(_, t)| t.len() + 32);
        users.sum::<usize>() + model.sum::<usize>()
    }
}

impl Checkpoint {
    /// A checkpoint of a body's first `hashed` bytes, which `hasher` has taken in, without
    /// any analysis; `before` ends where they end (all of them, or the part after a resume
    /// point).
    pub(crate) fn bare(
        context: u64,
        resume: ResumeAt,
        before: &[u8],
        (hasher, hashed): (Xxh3, usize),
    ) -> Checkpoint {
        Checkpoint {
            hashed,
            hash: hasher.digest128(),
            hasher: Box::new(hasher),
            end: before[before.len().saturating_sub(END)..].into(),
            hashed_item: 0,
            items: 0,
            observations: false,
            context,
            resume,
            written: Shared::default(),
            results: Shared::default(),
            edits: Shared::default(),
            collapsed: 0,
            quotes: Vec::new(),
            refused: Vec::new(),
            evidence_bytes: 0,
            choice: None,
            chosen_until: 0,
            tracker: None,
            before: None,
            model_before: Vec::new(),
            lean: LeanBefore::default(),
        }
    }

    /// True when `body` starts with this checkpoint's bytes, with the memo's `seed`.
    fn starts(&self, body: &Parts<'_>, seed: u64) -> bool {
        let Some(end_at) = self.hashed.checked_sub(self.end.len()) else {
            return false;
        };
        if body.len() < self.hashed || !body.slices(end_at..self.hashed).eq_bytes(&self.end) {
            return false;
        }
        let mut hasher = Xxh3::with_seed(seed);
        body.slices(0..self.hashed).for_each(|s| hasher.update(s));
        hasher.digest128() == self.hash
    }

    /// The format and settings it was computed under, hashed.
    pub(crate) fn context(&self) -> u64 {
        self.context
    }

    /// Estimated bytes it holds, the parts it shares with the checkpoint it replaced
    /// included.
    fn weight(&self) -> usize {
        let edits: usize = self.edits.iter().map(|(_, e)| e.text.len() + 80).sum();
        let quote = |(_, q): &(Block, Quote)| q.quote.len() + q.source_url.len() + 64;
        let quotes: usize = self.quotes.iter().chain(&self.refused).map(quote).sum();
        // A report: its fields, and five shared strings (call ID, tool, ID, URL, title).
        let report = |r: &ResultReport| {
            let text = |t: Option<&str>| t.map_or(0, |t| t.len() + 32);
            let texts = text(r.call_id.as_deref())
                + text(Some(&r.tool))
                + text(Some(&r.observation_id))
                + text(r.url.as_deref())
                + text(r.title.as_deref());
            std::mem::size_of::<ResultReport>() + texts
        };
        let results: usize = self.results.iter().map(report).sum();
        let held = std::mem::size_of::<Xxh3>()
            + self.written.heap_bytes()
            + results
            + self.results.parts() * 32
            + self.resume.keys_bytes()
            + edits
            + quotes
            + self.choice.as_ref().map_or(0, Choice::heap_bytes)
            + self.tracker.as_ref().map_or(0, Tracker::heap_bytes)
            + self.before.as_ref().map_or(0, |(url, _)| url.len() + 32)
            + (self.model_before.iter())
                .map(|(_, t)| t.len() + 32)
                .sum::<usize>()
            + self.lean.heap_bytes();
        // The allocator's own headers, and room for what the estimate leaves out: a test
        // holds every recorded session's checkpoints to it.
        held * 5 / 4 + 1024
    }
}

/// The checkpoints a memo keeps, newest last, within a bound in bytes.
#[derive(Default)]
pub(crate) struct Checkpoints {
    kept: Mutex<Vec<(Arc<Checkpoint>, usize)>>,
    max_bytes: usize,
}

impl Checkpoints {
    pub(crate) fn new(max_bytes: usize) -> Checkpoints {
        Checkpoints {
            kept: Mutex::new(Vec::new()),
            max_bytes,
        }
    }

    /// The newest checkpoint whose bytes `body` starts with, under `context`.
    pub(crate) fn find(
        &self,
        body: &Parts<'_>,
        context: u64,
        seed: u64,
    ) -> Option<Arc<Checkpoint>> {
        let candidates: Vec<Arc<Checkpoint>> = {
            let kept = self.kept.lock().ok()?;
            kept.iter()
                .rev()
                .filter(|(c, _)| c.context == context && c.hashed <= body.len())
                .map(|(c, _)| c.clone())
                .collect()
        };
        // Compared outside the lock: other requests go on meanwhile.
        let found = candidates.into_iter().find(|c| c.starts(body, seed))?;
        self.touch(&found);
        Some(found)
    }

    /// Keeps `checkpoint` in place of `replaces` (the checkpoint of the session's previous
    /// turn, which the new one extends: a request that matched the old one matches the new
    /// one too), dropping the oldest ones over the bound.
    pub(crate) fn keep(&self, checkpoint: Checkpoint, replaces: Option<&Checkpoint>) {
        let weight = checkpoint.weight();
        if weight > self.max_bytes {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        if let Some(old) = replaces {
            kept.retain(|(c, _)| !std::ptr::eq(&**c, old));
        }
        kept.push((Arc::new(checkpoint), weight));
        let mut total: usize = kept.iter().map(|(_, w)| w).sum();
        while total > self.max_bytes && !kept.is_empty() {
            total -= kept.remove(0).1;
        }
    }

    /// True when a checkpoint of the same first bytes as `like` (as many, hashed alike) is
    /// kept under its context.
    pub(crate) fn has(&self, like: &Checkpoint) -> bool {
        let Ok(kept) = self.kept.lock() else {
            return false;
        };
        kept.iter().any(|(c, _)| {
            c.hashed == like.hashed && c.context == like.context && c.hash == like.hash
        })
    }

    /// Moves `found` to the newest place, where eviction reaches it last.
    fn touch(&self, found: &Arc<Checkpoint>) {
        if let Ok(mut kept) = self.kept.lock() {
            if let Some(at) = kept.iter().position(|(c, _)| Arc::ptr_eq(c, found)) {
                let entry = kept.remove(at);
                kept.push(entry);
            }
        }
    }

    /// Every checkpoint kept, with its weight, as opaque values.
    pub(crate) fn into_kept(self) -> Vec<(Box<dyn std::any::Any>, usize)> {
        let kept = self.kept.into_inner().unwrap_or_default();
        kept.into_iter()
            .map(|(c, w)| (Box::new(c) as Box<dyn std::any::Any>, w))
            .collect()
    }

    /// Estimated bytes kept.
    pub(crate) fn weight(&self) -> usize {
        self.kept
            .lock()
            .map_or(0, |kept| kept.iter().map(|(_, w)| w).sum())
    }
}

impl Slot for Checkpoints {
    fn weight(&self) -> usize {
        Checkpoints::weight(self)
    }
}

/// The checkpoints `memo` keeps, within the share of its bound that slots take.
pub(crate) fn kept_in(memo: &Memo) -> Arc<Checkpoints> {
    memo.slot(Checkpoints::new)
}

/// The checkpoints `memo` keeps, taken out with the weight it counts for each, the rest of
/// the memo dropped: a test drops them one by one and counts what that frees.
pub(crate) fn into_kept(memo: Memo) -> Vec<(Box<dyn std::any::Any>, usize)> {
    memo.into_slot::<Checkpoints>()
        .map_or_else(Vec::new, Checkpoints::into_kept)
}

/// A body as consecutive byte parts: one for a string, or a request's frames as they
/// arrived.
pub(crate) struct Parts<'a> {
    parts: &'a [&'a [u8]],
    len: usize,
}

impl<'a> Parts<'a> {
    pub(crate) fn new(parts: &'a [&'a [u8]]) -> Parts<'a> {
        let len = parts.iter().map(|p| p.len()).sum();
        Parts { parts, len }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The pieces of the parts that make up `range`, in order.
    pub(crate) fn slices(&self, range: std::ops::Range<usize>) -> Slices<'a> {
        Slices {
            parts: self.parts.iter(),
            at: 0,
            range,
        }
    }
}

/// The pieces of a range of [`Parts`].
pub(crate) struct Slices<'a> {
    parts: std::slice::Iter<'a, &'a [u8]>,
    /// Where the next part starts in the body.
    at: usize,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for Slices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        while self.at < self.range.end {
            let part = *self.parts.next()?;
            let start = self.at;
            self.at += part.len();
            let from = self.range.start.max(start) - start;
            let to = self.range.end.min(self.at) - start;
            if from < to {
                return part.get(from..to);
            }
        }
        None
    }
}

impl Slices<'_> {
    /// Whether the pieces, joined, are `bytes`.
    fn eq_bytes(self, mut bytes: &[u8]) -> bool {
        for piece in self {
            match bytes.strip_prefix(piece) {
                Some(rest) => bytes = rest,
                None => return false,
            }
        }
        bytes.is_empty()
    }
}

/// Bytes of the end of a checkpoint's prefix compared before its hash is computed.
const END: usize = 64;

/// The hash a checkpoint is found by, having taken in `bytes`.
pub(crate) fn hasher(seed: u64, bytes: &[u8]) -> Xxh3 {
    let mut hasher = Xxh3::with_seed(seed);
    hasher.update(bytes);
    hasher
}

/// What an answer depends on besides the body: the format and every setting. Hashed by
/// their derived `Hash`, which covers every field a config gains (a `Debug` text is no
/// contract: it may leave a field out or print two values alike).
pub(crate) fn context_of(format: RequestFormat, config: &crate::Config) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = Xxh3::new();
    (format, config).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every setting is part of the context: a checkpoint taken under one config never
    /// answers under another, down to a field left unset rather than off.
    #[test]
    fn every_setting_changes_the_context() {
        use crate::{Config, LivePage};
        let base = Config::default();
        let of = |c: &Config| context_of(RequestFormat::OpenAiChat, c);
        let variants = [
            Config {
                live_page: LivePage::Whole,
                ..base.clone()
            },
            Config {
                guard_in_front: Some(false),
                ..base.clone()
            },
            Config {
                evidence_retention: Some(true),
                ..base.clone()
            },
            Config {
                lean_min_bytes: base.lean_min_bytes + 1,
                ..base.clone()
            },
            Config {
                page_tools: vec!["Read".into()],
                ..base.clone()
            },
            Config {
                browser_tools: vec![],
                ..base.clone()
            },
            Config {
                request_budget_bytes: Some(0),
                ..base.clone()
            },
        ];
        let mut seen = vec![of(&base)];
        for v in &variants {
            let c = of(v);
            assert!(!seen.contains(&c), "{v:?}");
            seen.push(c);
        }
        assert_eq!(of(&base.clone()), seen[0]);
        assert_ne!(context_of(RequestFormat::Anthropic, &base), seen[0]);
    }

    proptest! {
        /// Any range of a body cut into any parts reads as the same range of the whole.
        #[test]
        fn slices_of_parts_are_the_range_of_the_whole(
            body in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
            ends in (any::<usize>(), any::<usize>()),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
            at.sort_unstable();
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for to in at.into_iter().chain([body.len()]) {
                parts.push(&body[from..to]);
                from = to;
            }
            let whole = Parts::new(&parts);
            prop_assert_eq!(whole.len(), body.len());
            let (a, b) = (ends.0 % (body.len() + 1), ends.1 % (body.len() + 1));
            let range = a.min(b)..a.max(b);
            let joined: Vec<u8> = whole.slices(range.clone()).flatten().copied().collect();
            prop_assert_eq!(&joined[..], &body[range.clone()]);
            prop_assert!(whole.slices(range.clone()).eq_bytes(&body[range.clone()]));
            let mut other = body[range.clone()].to_vec();
            other.push(0);
            prop_assert!(!whole.slices(range).eq_bytes(&other));
        }
    }
}
