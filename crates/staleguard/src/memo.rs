//! A memo across requests: a bounded, content-addressed store of what the stages derive
//! from result texts, shared by the requests of a host. It names no analysis: each stage
//! keeps its own values in it, keyed by the content key of the text they were derived from
//! (and a context of the stage's choosing), and the pipeline keeps its saved state in a slot.
//!
//! An agent sends the same history again on every turn, so nearly every result of a request
//! was read one request ago. The memo only saves work: every value kept depends on the key
//! alone, so every answer is the same with the memo cold, warm or off, and a host that keeps
//! one answers no differently for having seen a session.
//!
//! For hosts that serve many requests: the proxy keeps one [`Memo`] (re-exported at the
//! crate root) for all of them and passes it in [`Options::memo`](crate::Options::memo); the
//! MCP guard reads each result through one as it passes.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use quick_cache::sync::Cache;
use quick_cache::Weighter;

/// The default bound: 256 MiB of derived data: the readings of at least 20 MB of results,
/// their evidence scores, and the checkpoints of about twenty sessions of a megabyte.
pub(crate) const DEFAULT_MEMO_BYTES: usize = 256 * 1024 * 1024;

/// Bytes a reading may hold once every part of it is read (tree, chunk words and facts,
/// receipt), bounded from above: a tree line gives a canonical node (32 bytes), a
/// ref (72), a chunk (24), its word hashes and their counts, and the lines of Chrome DevTools
/// MCP trees are short (26 bytes on a recorded long page, which holds 7.1 times its text).
/// Estimated up front, because a cache entry may not change its weight; a test holds every
/// recorded result and pages denser than any recorded one to it.
pub fn weight_of(text_bytes: usize) -> u64 {
    ENTRY_BYTES + BYTES_PER_TEXT_BYTE * text_bytes as u64
}

/// Bytes a hash table of `capacity` entries of `(K, V)` holds: its buckets are at least an
/// eighth more than its capacity, each with a control byte.
pub(crate) fn table_bytes<K, V>(capacity: usize) -> usize {
    capacity * 8 / 7 * (std::mem::size_of::<(K, V)>() + 1)
}

/// The fixed part of [`weight_of`].
pub(crate) const ENTRY_BYTES: u64 = 1024;
/// The part of [`weight_of`] for each byte of text.
pub(crate) const BYTES_PER_TEXT_BYTE: u64 = 8;

/// Which share of the bound a kept value counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    /// Values derived from one text: most of the bound.
    Texts,
    /// Many small values per text (one per context): a sixteenth of the bound, so that they
    /// never push the texts' values out.
    Small,
}

/// The share of the memo's bound that [`Share::Small`] values may take.
const SMALL_SHARE: usize = 16;
/// The share of the memo's bound that slots may take: the pipeline's checkpoints hold
/// a session's history and its projection each, so the default bound holds those of about
/// twenty sessions of a megabyte.
const SLOTS_SHARE: usize = 4;

/// A kept value: which stage's type it is, and what it was derived from.
type Key = (TypeId, u128, u128);

/// A kept value, type-erased, with the weight its stage gave it.
#[derive(Clone)]
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    weight: u64,
}

#[derive(Clone)]
struct ByWeight;

impl Weighter<Key, Entry> for ByWeight {
    fn weight(&self, _key: &Key, entry: &Entry) -> u64 {
        entry.weight
    }
}

/// State a stage keeps in a slot of the memo: one value per type, within the slots' share.
pub(crate) trait Slot: Any + Send + Sync {
    /// Bytes it holds now.
    fn weight(&self) -> usize;
}

/// A slot, as kept: its value, and the same value as `Any` to find it by type.
type KeptSlot = (Arc<dyn Slot>, Arc<dyn Any + Send + Sync>);

/// Where kept values are: bounded caches shared by a host's requests, or a plain table that
/// one request fills and drops.
enum Store {
    Shared {
        texts: Cache<Key, Entry, ByWeight>,
        small: Cache<Key, Entry, ByWeight>,
    },
    Local(Mutex<HashMap<Key, Entry, ahash::RandomState>>),
}

/// A bounded, content-addressed store shared by the requests of a host.
pub struct Memo {
    store: Store,
    slots: Mutex<Vec<KeptSlot>>,
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
            .field("entries", &self.len())
            .field("weight", &self.weight())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl Memo {
    /// The bound of [`Memo::default`], in bytes of derived data: 256 MiB, the readings of at
    /// least 20 MB of results, their evidence scores, and the checkpoints of about twenty
    /// sessions of a megabyte.
    pub const DEFAULT_BYTES: usize = DEFAULT_MEMO_BYTES;

    /// A memo that holds at most about `max_bytes` of derived data.
    pub fn new(max_bytes: usize) -> Memo {
        // quick_cache sizes its table from an estimate of the entry count: results are
        // rarely under 1 KB.
        let items = (max_bytes / 4096).clamp(16, 1 << 20);
        let small_bytes = max_bytes / SMALL_SHARE;
        let slot_bytes = max_bytes / SLOTS_SHARE;
        let small_items = (small_bytes / 512).clamp(16, 1 << 20);
        let texts_bytes = max_bytes - small_bytes - slot_bytes;
        let store = Store::Shared {
            texts: Cache::with_weighter(items, texts_bytes as u64, ByWeight),
            small: Cache::with_weighter(small_items, small_bytes as u64, ByWeight),
        };
        Memo {
            store,
            slots: Mutex::new(Vec::new()),
            resumed: Default::default(),
            max_bytes,
            seed: random_seed(),
        }
    }

    /// A memo for one request and nothing after it: it keeps everything derived from the
    /// request's results, unbounded, in a plain table dropped with it (a host's memo pays for
    /// bounds and sharing that one request does not need).
    pub fn for_request() -> Memo {
        Memo {
            store: Store::Local(Mutex::new(HashMap::default())),
            slots: Mutex::new(Vec::new()),
            resumed: Default::default(),
            max_bytes: usize::MAX,
            seed: random_seed(),
        }
    }

    /// The key of `text` in this memo: a seeded 128-bit hash of its bytes.
    pub fn key(&self, text: &str) -> u128 {
        content_key(text, self.seed)
    }

    /// The value of type `T` kept for content `key` in `context`: the one kept when `valid`
    /// accepts it, or `make`'s, kept from now on under the weight `weigh` gives it (a value
    /// heavier than its whole share is used once and not kept).
    pub(crate) fn kept<T: Any + Send + Sync>(
        &self,
        share: Share,
        (key, context): (u128, u128),
        valid: impl Fn(&T) -> bool,
        make: impl FnOnce() -> T,
        weigh: impl FnOnce(&T) -> u64,
    ) -> Arc<T> {
        let at = (TypeId::of::<T>(), key, context);
        let found = self
            .get(share, &at)
            .and_then(|e| e.value.downcast::<T>().ok());
        if let Some(found) = found.filter(|v| valid(v)) {
            return found;
        }
        let value = Arc::new(make());
        let weight = weigh(&value);
        let entry = Entry {
            value: value.clone(),
            weight,
        };
        self.insert(share, at, entry);
        value
    }

    fn get(&self, share: Share, at: &Key) -> Option<Entry> {
        match &self.store {
            Store::Shared { texts, small } => match share {
                Share::Texts => texts.get(at),
                Share::Small => small.get(at),
            },
            Store::Local(table) => lock(table).get(at).cloned(),
        }
    }

    /// Keeps `entry`, unless it is heavier than its whole share.
    fn insert(&self, share: Share, at: Key, entry: Entry) {
        match &self.store {
            Store::Shared { texts, small } => {
                let cache = match share {
                    Share::Texts => texts,
                    Share::Small => small,
                };
                if entry.weight <= cache.capacity() {
                    cache.insert(at, entry);
                }
            }
            Store::Local(table) => {
                lock(table).insert(at, entry);
            }
        }
    }

    /// The slot of type `T`, made by `make` (given the slots' share of the bound in bytes)
    /// on first use.
    pub(crate) fn slot<T: Slot>(&self, make: impl FnOnce(usize) -> T) -> Arc<T> {
        let mut slots = lock(&self.slots);
        let found = slots
            .iter()
            .find_map(|(_, any)| any.clone().downcast::<T>().ok());
        if let Some(found) = found {
            return found;
        }
        let made = Arc::new(make(self.max_bytes / SLOTS_SHARE));
        slots.push((made.clone(), made.clone()));
        made
    }

    /// The slot of type `T` if one was made, taken out, the rest of the memo dropped.
    pub(crate) fn into_slot<T: Slot>(self) -> Option<T> {
        let slots = self.slots.into_inner().unwrap_or_else(|e| e.into_inner());
        let (slot, any) = slots.into_iter().find(|(_, any)| any.is::<T>())?;
        drop(slot);
        Arc::into_inner(any.downcast::<T>().ok()?)
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

    /// The seed of [`key`](Self::key).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Shared { texts, small } => texts.len() + small.len(),
            Store::Local(table) => lock(table).len(),
        }
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated bytes kept, never more than the bound.
    pub fn weight(&self) -> u64 {
        let slots = lock(&self.slots);
        let slots: usize = slots.iter().map(|(slot, _)| slot.weight()).sum();
        let kept = match &self.store {
            Store::Shared { texts, small } => texts.weight() + small.weight(),
            Store::Local(table) => lock(table).values().map(|e| e.weight).sum(),
        };
        kept + slots as u64
    }
}

impl Default for Memo {
    fn default() -> Self {
        Memo::new(DEFAULT_MEMO_BYTES)
    }
}

/// The lock's guard: a panic elsewhere while it was held leaves nothing half-written here.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

    use super::{Memo, Share};

    /// A value kept in many contexts (the same page text at forty places of a session) is
    /// made once per context: later requests find every one.
    #[test]
    fn values_are_kept_per_key_and_context() {
        let memo = Memo::new(1 << 20);
        let computed = Cell::new(0);
        let ask = |context: u128, len: usize| {
            let make = || {
                computed.set(computed.get() + 1);
                vec![context as u32; len]
            };
            let valid = |v: &Vec<u32>| v.len() == len;
            memo.kept(Share::Small, (7, context), valid, make, |v| {
                96 + 4 * v.len() as u64
            })
        };
        for _ in 0..2 {
            for context in 0..40 {
                assert_eq!(*ask(context, 3), [context as u32; 3]);
            }
        }
        assert_eq!(computed.get(), 40);
        // A kept value that its stage does not accept is made again.
        assert_eq!(ask(0, 4).len(), 4);
        assert_eq!(computed.get(), 41);
        assert!(memo.weight() > 0);
    }

    /// Values of two types under one key are two values.
    #[test]
    fn types_do_not_share_a_key() {
        let memo = Memo::new(1 << 20);
        let a = memo.kept(Share::Texts, (1, 0), |_| true, || 5u32, |_| 8);
        let b = memo.kept(Share::Texts, (1, 0), |_| true, || "five", |_| 8);
        assert_eq!((*a, *b), (5, "five"));
    }
}
