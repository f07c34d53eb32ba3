//! What a provider's prompt cache bills for each turn's rendered request.
//!
//! Two models. **Prefix** (OpenAI, and SPEC 9's measure): the bytes a request shares at
//! its start with the previous turn's request are read from the cache, the rest are
//! written; as `tools/cachecost.py` counts. **Breakpoints** (Anthropic's published
//! rules): only `cache_control` breakpoints read or write. At most 4 count. Each breakpoint
//! looks for an entry written by an earlier request at its own block boundary and, walking
//! back, at up to 20 block boundaries before it; the longest hit is read. What follows the hit
//! up to the last breakpoint is written (and becomes entries at each breakpoint), and what
//! follows the last breakpoint is plain input. A request without breakpoints is not cached.
//!
//! Entries live `ttl` seconds from their last write or read. Recorded sessions carry no
//! clocks, so turns are `spacing` seconds apart (0 by default: every turn within the TTL).

use std::collections::HashMap;
use std::rc::Rc;

use serde::Serialize;

use super::render::Rendered;

/// Breakpoints a request may carry; Anthropic rejects more.
pub(super) const MAX_BREAKPOINTS: usize = 4;
/// Block boundaries a breakpoint looks back over for an earlier entry.
pub(super) const LOOKBACK_BLOCKS: usize = 20;
/// What a write costs under a marker that asks for an hour (`"ttl": "1h"`), by Anthropic's
/// price list: 2 times an input token, against 1.25 for the 5-minute cache.
const ONE_HOUR: u64 = 3600;
const ONE_HOUR_WRITE: f64 = 2.0;

/// The cost model, and its prices relative to an uncached input byte.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Pricing {
    pub read: f64,
    pub write: f64,
    /// Lifetime of an entry that names none, in seconds.
    pub ttl_secs: u64,
    /// Seconds between turns.
    pub spacing_secs: u64,
}

/// What one turn's request cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Bill {
    pub sent_bytes: usize,
    pub read_bytes: usize,
    pub written_bytes: usize,
    pub uncached_bytes: usize,
    pub cost: f64,
    /// `cache_control` breakpoints in the request (breakpoint model only).
    pub breakpoints: usize,
}

impl Bill {
    pub(crate) fn add(&mut self, other: &Bill) {
        self.sent_bytes += other.sent_bytes;
        self.read_bytes += other.read_bytes;
        self.written_bytes += other.written_bytes;
        self.uncached_bytes += other.uncached_bytes;
        self.cost += other.cost;
        self.breakpoints += other.breakpoints;
    }
}

/// Which rules bill a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Model {
    Prefix,
    Breakpoints,
}

/// The cache as one strategy's requests leave it, turn after turn.
pub(super) struct Cache {
    model: Model,
    pricing: Pricing,
    /// Prefix model: the previous request and when it was sent.
    previous: Option<(Rc<[u8]>, u64)>,
    /// Breakpoint model: entries by the length of the prefix they hold.
    entries: HashMap<usize, Vec<Entry>>,
}

struct Entry {
    request: Rc<[u8]>,
    ttl: u64,
    expires: u64,
}

impl Entry {
    fn holds(&self, prefix: &[u8], now: u64) -> bool {
        self.expires >= now && self.request.get(..prefix.len()) == Some(prefix)
    }
}

impl Cache {
    pub(super) fn new(model: Model, pricing: Pricing) -> Cache {
        Cache {
            model,
            pricing,
            previous: None,
            entries: HashMap::new(),
        }
    }

    /// Bills the request of turn `turn` (from 0).
    pub(super) fn bill(&mut self, turn: usize, request: &Rendered) -> Bill {
        let now = self.pricing.spacing_secs.saturating_mul(turn as u64);
        match self.model {
            Model::Prefix => self.bill_prefix(request, now),
            Model::Breakpoints => self.bill_breakpoints(request, now),
        }
    }

    fn bill_prefix(&mut self, request: &Rendered, now: u64) -> Bill {
        let bytes: Rc<[u8]> = Rc::from(request.bytes.as_slice());
        let common = match &self.previous {
            Some((previous, at)) if now.saturating_sub(*at) <= self.pricing.ttl_secs => {
                common_prefix(previous, &bytes)
            }
            _ => 0,
        };
        let written = bytes.len() - common;
        self.previous = Some((bytes.clone(), now));
        Bill {
            sent_bytes: bytes.len(),
            read_bytes: common,
            written_bytes: written,
            uncached_bytes: 0,
            cost: common as f64 * self.pricing.read + written as f64 * self.pricing.write,
            breakpoints: 0,
        }
    }

    fn bill_breakpoints(&mut self, request: &Rendered, now: u64) -> Bill {
        let bytes: Rc<[u8]> = Rc::from(request.bytes.as_slice());
        let marked: Vec<usize> = (0..request.blocks.len())
            .filter(|&i| request.blocks[i].breakpoint.is_some())
            .collect();
        let counted = &marked[..marked.len().min(MAX_BREAKPOINTS)];
        let hit = counted
            .iter()
            .filter_map(|&b| self.lookup(request, &bytes, b, now))
            .max()
            .unwrap_or(0);
        if hit > 0 {
            self.refresh(&bytes[..hit], now);
        }
        let mut bill = Bill {
            sent_bytes: bytes.len(),
            read_bytes: hit,
            breakpoints: marked.len(),
            ..Bill::default()
        };
        let mut covered = hit;
        for &b in counted {
            let block = &request.blocks[b];
            if block.end <= covered {
                continue;
            }
            let named = block.breakpoint.flatten();
            let ttl = named.unwrap_or(self.pricing.ttl_secs);
            let price = if named.is_some_and(|t| t >= ONE_HOUR) {
                ONE_HOUR_WRITE
            } else {
                self.pricing.write
            };
            bill.written_bytes += block.end - covered;
            bill.cost += (block.end - covered) as f64 * price;
            covered = block.end;
            self.entries.entry(block.end).or_default().push(Entry {
                request: bytes.clone(),
                ttl,
                expires: now.saturating_add(ttl),
            });
        }
        bill.uncached_bytes = bytes.len() - covered;
        bill.cost += hit as f64 * self.pricing.read + bill.uncached_bytes as f64;
        bill
    }

    /// The longest prefix an earlier request wrote that breakpoint `b` finds: at its own
    /// boundary or one of the `LOOKBACK_BLOCKS` before it.
    fn lookup(&self, request: &Rendered, bytes: &[u8], b: usize, now: u64) -> Option<usize> {
        (b.saturating_sub(LOOKBACK_BLOCKS)..=b).rev().find_map(|i| {
            let end = request.blocks[i].end;
            let prefix = bytes.get(..end)?;
            let found = self.entries.get(&end)?.iter().any(|e| e.holds(prefix, now));
            found.then_some(end)
        })
    }

    /// A read refreshes the entry it read.
    fn refresh(&mut self, prefix: &[u8], now: u64) {
        if let Some(entries) = self.entries.get_mut(&prefix.len()) {
            for e in entries.iter_mut().filter(|e| e.holds(prefix, now)) {
                e.expires = now.saturating_add(e.ttl);
            }
        }
    }
}

/// Bytes two requests share at the start.
pub(super) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::super::render::{Block, Rendered};
    use super::*;

    fn pricing(spacing_secs: u64) -> Pricing {
        Pricing {
            read: 0.1,
            write: 1.25,
            ttl_secs: 300,
            spacing_secs,
        }
    }

    /// A request of blocks of 10 bytes each, the ones in `marks` with a breakpoint.
    fn request(text: &str, marks: &[usize]) -> Rendered {
        let blocks = (0..text.len() / 10)
            .map(|i| Block {
                end: (i + 1) * 10,
                breakpoint: marks.contains(&i).then_some(None),
            })
            .collect();
        Rendered {
            bytes: text.as_bytes().to_vec(),
            message_starts: Vec::new(),
            blocks,
        }
    }

    #[test]
    fn prefix_reads_what_the_previous_request_shares() {
        let mut cache = Cache::new(Model::Prefix, pricing(0));
        let first = cache.bill(0, &request("aaaaaaaaaabbbbbbbbbb", &[]));
        assert_eq!((first.read_bytes, first.written_bytes), (0, 20));
        let second = cache.bill(1, &request("aaaaaaaaaabbbbbcccccdddddddddd", &[]));
        assert_eq!((second.read_bytes, second.written_bytes), (15, 15));
        assert!((second.cost - (15.0 * 0.1 + 15.0 * 1.25)).abs() < 1e-9);
    }

    #[test]
    fn prefix_entries_expire() {
        let mut cache = Cache::new(Model::Prefix, pricing(301));
        cache.bill(0, &request("aaaaaaaaaa", &[]));
        assert_eq!(cache.bill(1, &request("aaaaaaaaaa", &[])).read_bytes, 0);
    }

    #[test]
    fn breakpoints_write_up_to_the_last_and_read_what_an_earlier_one_wrote() {
        let mut cache = Cache::new(Model::Breakpoints, pricing(0));
        let text = "a".repeat(10) + &"b".repeat(10) + &"c".repeat(10);
        let first = cache.bill(0, &request(&text, &[1]));
        assert_eq!(
            (first.read_bytes, first.written_bytes, first.uncached_bytes),
            (0, 20, 10)
        );
        // The same prefix, a breakpoint one block later: the lookback finds block 1.
        let next = text.clone() + &"d".repeat(10);
        let second = cache.bill(1, &request(&next, &[3]));
        assert_eq!(
            (
                second.read_bytes,
                second.written_bytes,
                second.uncached_bytes
            ),
            (20, 20, 0)
        );
    }

    #[test]
    fn no_breakpoint_no_cache() {
        let mut cache = Cache::new(Model::Breakpoints, pricing(0));
        let text = "a".repeat(30);
        for turn in 0..2 {
            let bill = cache.bill(turn, &request(&text, &[]));
            assert_eq!((bill.read_bytes, bill.uncached_bytes), (0, 30));
            assert!((bill.cost - 30.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_lookback_stops_after_20_blocks() {
        let mut cache = Cache::new(Model::Breakpoints, pricing(0));
        let text: String = (0..30).map(|i| format!("{i:>10}")).collect();
        cache.bill(0, &request(&text[..50], &[4]));
        // Block 4 is 21 blocks before block 25: out of reach.
        let far = cache.bill(1, &request(&text, &[25]));
        assert_eq!(far.read_bytes, 0);
        // 20 blocks before block 24: found.
        let mut cache = Cache::new(Model::Breakpoints, pricing(0));
        cache.bill(0, &request(&text[..50], &[4]));
        assert_eq!(cache.bill(1, &request(&text, &[24])).read_bytes, 50);
    }

    #[test]
    fn only_four_breakpoints_count() {
        let mut cache = Cache::new(Model::Breakpoints, pricing(0));
        let text = "a".repeat(60);
        let bill = cache.bill(0, &request(&text, &[0, 1, 2, 3, 5]));
        assert_eq!(bill.breakpoints, 5);
        assert_eq!((bill.written_bytes, bill.uncached_bytes), (40, 20));
    }
}
