//! A memo across requests: what the analyses derived from a result's text, keyed by a
//! 128-bit hash of its bytes and bounded by size.
//!
//! An agent sends the same history again on every turn, so nearly every result of a request
//! was read one request ago. The memo only saves work: a [`Reading`] depends on the text
//! alone, so every answer is the same with the memo cold, warm or off, and a host that
//! keeps one answers no differently for having seen a session.
//!
//! For hosts that serve many requests: the proxy keeps one [`Memo`] (re-exported at the
//! crate root) for all of them and passes it in [`Options::memo`](crate::Options::memo); the
//! MCP guard reads each result through one as it passes.

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use crate::checkpoint::Checkpoints;
use crate::session::{Depth, Reading};

/// The default bound: 256 MiB of derived data: the readings of at least 20 MB of results,
/// their evidence scores, and the checkpoints of about twenty sessions of a megabyte.
pub const DEFAULT_MEMO_BYTES: usize = 256 * 1024 * 1024;

/// Bytes a reading may hold once every part of it is read (tree, chunk words and facts,
/// receipt), bounded from above: a tree line gives a canonical node (32 bytes), a
/// ref (72), a chunk (24), its word hashes and their counts, and the lines of Chrome DevTools
/// MCP trees are short (26 bytes on a recorded long page, which holds 7.1 times its text).
/// Estimated up front, because a cache entry may not change its weight; a test holds every
/// recorded result and pages denser than any recorded one to it
/// ([`Reading::heap_bytes`](crate::session::Reading::heap_bytes) at most this).
pub fn weight_of(text_bytes: usize) -> u64 {
    ENTRY_BYTES + BYTES_PER_TEXT_BYTE * text_bytes as u64
}

/// Bytes a hash table of `capacity` entries of `(K, V)` holds: its buckets are at least an
/// eighth more than its capacity, each with a control byte.
pub(crate) fn table_bytes<K, V>(capacity: usize) -> usize {
    capacity * 8 / 7 * (std::mem::size_of::<(K, V)>() + 1)
}

/// The fixed part of [`weight_of`].
pub const ENTRY_BYTES: u64 = 1024;

/// The part of [`weight_of`] for each byte of text.
pub const BYTES_PER_TEXT_BYTE: u64 = 8;

#[derive(Clone)]
struct ByBytes;

/// Evidence scores of a page in one context, by the page's content key and the context's.
type ScoresKey = (u128, u128);

#[derive(Clone)]
struct ScoreBytes;

impl Weighter<ScoresKey, Arc<[u32]>> for ScoreBytes {
    fn weight(&self, _key: &ScoresKey, scores: &Arc<[u32]>) -> u64 {
        SCORES_ENTRY_BYTES + 4 * scores.len() as u64
    }
}

/// Bytes of a kept list of scores besides its own: its key, the shared pointer's counts
/// and the cache's entry.
const SCORES_ENTRY_BYTES: u64 = 96;

/// The share of the memo's bound that scores may take. A page is weighed in the same
/// context on every later turn; a page text that recurs in a session is weighed in a
/// context per place.
const SCORES_SHARE: usize = 16;

/// The share of the memo's bound that checkpoints may take: a session keeps one, holding
/// its history's bytes and their projection, so the default bound holds those of about
/// twenty sessions of a megabyte (and the readings of their new results).
const CHECKPOINTS_SHARE: usize = 4;

impl Weighter<u128, Arc<Reading>> for ByBytes {
    fn weight(&self, _key: &u128, reading: &Arc<Reading>) -> u64 {
        weight_of(reading.bytes)
    }
}

/// A bounded, content-addressed memo of [`Reading`]s, shared by the requests of a host.
pub struct Memo {
    cache: Cache<u128, Arc<Reading>, ByBytes>,
    /// Evidence scores per page and context, within a sixteenth of the bound.
    scores: Cache<ScoresKey, Arc<[u32]>, ScoreBytes>,
    /// The analyses' state where recent requests' frozen history ends, within a quarter of
    /// the bound.
    pub(crate) checkpoints: Checkpoints,
    /// Requests projected from a checkpoint on.
    resumed: std::sync::atomic::AtomicU64,
    max_bytes: usize,
    /// Seeds the content hash: page text cannot be crafted to collide with another result's
    /// without knowing it.
    seed: u64,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("entries", &self.cache.len())
            .field("weight", &self.cache.weight())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl Memo {
    /// A memo that holds at most about `max_bytes` of derived data.
    pub fn new(max_bytes: usize) -> Memo {
        // quick_cache sizes its table from an estimate of the entry count: results are
        // rarely under 1 KB.
        let items = (max_bytes / 4096).clamp(16, 1 << 20);
        let scores_bytes = max_bytes / SCORES_SHARE;
        let checkpoint_bytes = max_bytes / CHECKPOINTS_SHARE;
        let scores_items = (scores_bytes / 512).clamp(16, 1 << 20);
        Memo {
            cache: Cache::with_weighter(
                items,
                (max_bytes - scores_bytes - checkpoint_bytes) as u64,
                ByBytes,
            ),
            scores: Cache::with_weighter(scores_items, scores_bytes as u64, ScoreBytes),
            checkpoints: Checkpoints::new(checkpoint_bytes),
            resumed: Default::default(),
            max_bytes,
            seed: random_seed(),
        }
    }

    /// The key of `text` in this memo: a seeded 128-bit hash of its bytes.
    pub fn key(&self, text: &str) -> u128 {
        content_key(text, self.seed)
    }

    /// The reading of `text`, whose [`key`](Self::key) is `key`: the one kept, or a new
    /// one, kept from now on.
    pub fn reading(&self, key: u128, text: &str, depth: Depth) -> Arc<Reading> {
        if let Some(found) = self.cache.get(&key).filter(|r| r.bytes == text.len()) {
            // 128 bits make a collision unlikely; the length check (see `Reading::bytes`)
            // makes a wrong hit on text of another size impossible.
            return found;
        }
        let reading = Arc::new(depth.read(text));
        // A reading larger than the whole memo is used once and not kept.
        if weight_of(text.len()) <= self.max_bytes as u64 {
            self.cache.insert(key, reading.clone());
        }
        reading
    }

    /// The evidence scores of the page whose key is `key` in the context whose hash is
    /// `context`, `len` of them: the ones kept, or `score`'s, kept from now on.
    pub(crate) fn scores(
        &self,
        key: u128,
        context: u128,
        len: usize,
        score: impl FnOnce() -> Arc<[u32]>,
    ) -> Arc<[u32]> {
        let at = (key, context);
        if let Some(found) = self.scores.get(&at).filter(|s| s.len() == len) {
            return found;
        }
        let scores = score();
        self.scores.insert(at, scores.clone());
        scores
    }

    /// How many requests were projected from a checkpoint on: the next turn of a session
    /// whose previous turn this memo saw, read and analysed only from its newest
    /// observation on.
    pub fn resumed(&self) -> u64 {
        self.resumed.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_resumed(&self) {
        self.resumed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The checkpoints this memo keeps, taken out with the weight it counts for each, the
    /// rest of the memo dropped: a test drops them one by one and counts what that frees.
    #[doc(hidden)]
    pub fn into_checkpoints(self) -> Vec<(Box<dyn std::any::Any>, usize)> {
        self.checkpoints.into_kept()
    }

    /// The seed of [`key`](Self::key).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Estimated bytes kept, never more than the bound.
    pub fn weight(&self) -> u64 {
        self.cache.weight() + self.scores.weight() + self.checkpoints.weight() as u64
    }
}

impl Default for Memo {
    fn default() -> Self {
        Memo::new(DEFAULT_MEMO_BYTES)
    }
}

/// The content address of `text` under `seed`: a 128-bit hash of its bytes.
pub(crate) fn content_key(text: &str, seed: u64) -> u128 {
    xxhash_rust::xxh3::xxh3_128_with_seed(text.as_bytes(), seed)
}

/// A seed no page can know: drawn from the standard library's per-process random keys.
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::Arc;

    use super::Memo;

    /// A page weighed in many contexts (the same page text at forty places of a session) is
    /// scored once per context: later requests find every one.
    #[test]
    fn scores_are_kept_per_page_and_context() {
        let memo = Memo::new(1 << 20);
        let computed = Cell::new(0);
        let ask = |context: u128, len: usize| {
            memo.scores(7, context, len, || {
                computed.set(computed.get() + 1);
                Arc::from(vec![context as u32; len])
            })
        };
        for _ in 0..2 {
            for context in 0..40 {
                assert_eq!(*ask(context, 3), [context as u32; 3]);
            }
        }
        assert_eq!(computed.get(), 40);
        // Scores of another length are another page's, whatever the key says.
        assert_eq!(ask(0, 4).len(), 4);
        assert_eq!(computed.get(), 41);
        assert!(memo.weight() > 0);
    }
}
