//! What a result's own lines say, read before any analysis: its short observation ID,
//! its verification lines, and whether it is already one of our receipts. The reading
//! keeps all three; receipts and the archive write them back.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::failure::{is_verification_line, line_at};
use crate::refs::neutralise;
use crate::texts::{self, RECEIPT_TAG, STALE_NOTICE, STALE_NOTICE_HISTORY, STALE_WORD};

const MAX_VERIFICATION_LINES: usize = 8;
const MAX_VERIFICATION_BYTES: usize = 1024;

/// A short observation ID: 8 hex digits of a hash of the result text. It names the
/// observation itself, so it stays the same when the transcript grows or is trimmed, and
/// whether or not the MCP guard scoped its refs on the way (`d3e7` reads as `e7`), so the
/// proxy's receipt, the guard's refusal and `browser_history` name one page alike.
pub fn observation_id(text: &str) -> String {
    let text = crate::refs::unscoped(text);
    let hash = (xxhash_rust::xxh3::xxh3_64(text.as_bytes()) >> 32) as u32;
    // `format!("{hash:08x}")`, without the formatting machinery: this runs for every result.
    let digit = |i: u32| {
        b"0123456789abcdef"
            .get(((hash >> (28 - 4 * i)) & 0xf) as usize)
            .copied()
    };
    (0..8)
        .map(|i| char::from(digit(i).unwrap_or(b'0')))
        .collect()
}

/// The original's `[verified:` / `[UNVERIFIED` lines, in order, at most 8 lines and 1 KB,
/// then a visible count of any left out. Lines are kept whole or left out.
pub fn verification_lines(original: &str) -> Vec<String> {
    let mut kept = Vec::new();
    let (mut bytes, mut omitted) = (0, 0);
    for at in bracket_line_starts(original) {
        let line = line_at(original, at);
        if !is_verification_line(line) {
            continue;
        }
        let line = neutralise(line.trim_end_matches('\r'));
        if kept.len() < MAX_VERIFICATION_LINES && bytes + line.len() <= MAX_VERIFICATION_BYTES {
            bytes += line.len();
            kept.push(line.into_owned());
        } else {
            omitted += 1;
        }
    }
    if omitted > 0 {
        kept.push(texts::verification_lines_omitted(omitted));
    }
    kept
}

/// Finds a line that starts with `[`, as both kinds of verification line do, so one pass
/// finds both. `[` alone would stop at every ref of a tree.
static LINE_BRACKET: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\n["));

/// Offsets of the lines of `text` that start with `[`, in order.
fn bracket_line_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let first = text.starts_with('[').then_some(0);
    first
        .into_iter()
        .chain(LINE_BRACKET.find_iter(text.as_bytes()).map(|at| at + 1))
}

/// True when a result text is already a collapsed observation: a receipt line, then the
/// stale notice or its one word.
pub(crate) fn is_collapsed(text: &str) -> bool {
    let mut lines = text.lines();
    let receipt = lines.next().is_some_and(|l| l.starts_with(RECEIPT_TAG));
    receipt
        && lines
            .next()
            .is_some_and(|l| [STALE_NOTICE, STALE_NOTICE_HISTORY, STALE_WORD].contains(&l))
}
