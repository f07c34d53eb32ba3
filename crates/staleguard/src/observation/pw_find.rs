//! Playwright MCP's `browser_find` (0.0.78 on): windows of the page's tree around the lines
//! that match a text, each under its path from the root, with live refs (SPEC 1, partial
//! observations).
//!
//! ```text
//! ### Result
//! Found 3 matches for "Hex bolt 100 mm":
//!
//! - generic [active] [ref=e1]:
//!   - table [ref=e4]:
//!       ...
//!       - cell "$24.30" [ref=e150]
//!
//! ----
//!
//! - generic [active] [ref=e1]:
//! ```
//!
//! Lines of `...` stand for what a window skips; `----` separates windows.

use super::aria::{self, lines};
use super::model::{Observation, ObservationFormat, TreeKind};
use super::pw_common::document_of;
use super::snapshot_file::tree_indent;

/// Name of this format.
pub(crate) const NAME: &str = "playwright-mcp-find";

/// Detector for `browser_find` results.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlaywrightFind;

impl ObservationFormat for PlaywrightFind {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        let windows = windows(text)?;
        let mut obs = Observation::new(NAME, TreeKind::Partial);
        aria::parse_lines(tree_lines(windows), &mut obs);
        obs.document = document_of(&obs);
        obs.tree = Some(windows);
        (!obs.refs.is_empty()).then_some(obs)
    }

    fn parse_header<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        let windows = windows(text)?;
        let mut obs = Observation::new(NAME, TreeKind::Partial);
        obs.counted_refs = tree_lines(windows).map(|l| aria::count_refs(l).0).sum();
        obs.tree = Some(windows);
        (obs.counted_refs > 0).then_some(obs)
    }
}

/// The windows of a find result: the text after its `Found N matches for ...:` line, up to
/// the next section. `None` unless every line there is a tree line, `...`, `----` or blank.
fn windows(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("### Result")?.trim_start_matches('\r');
    let rest = rest.strip_prefix('\n')?;
    let (found, rest) = rest.split_once('\n')?;
    let found = found.trim_end();
    let says_found = found.starts_with("Found ")
        && (found.contains(" match for ") || found.contains(" matches for "))
        && found.ends_with(':');
    if !says_found {
        return None;
    }
    let end = lines(rest)
        .find(|l| l.text.starts_with("### "))
        .map_or(rest.len(), |l| l.start);
    let windows = rest.get(..end)?;
    let fits = lines(windows).all(|l| {
        let t = l.text.trim();
        t.is_empty() || t == "..." || t == "----" || tree_indent(l.text).is_some()
    });
    fits.then_some(windows)
}

/// The tree lines of the windows, without `...` and `----`.
fn tree_lines(windows: &str) -> impl Iterator<Item = &str> {
    lines(windows)
        .map(|l| l.text)
        .filter(|l| tree_indent(l).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::parse;

    /// `fixtures/pwmcp-0.0.83-agents/find_target`, call_2, cut short.
    const FOUND: &str = "### Result\nFound 2 matches for \"Hex bolt 100 mm\":\n\n- generic [active] [ref=e1]:\n  - table [ref=e4]:\n    - rowgroup [ref=e10]:\n      - row [ref=e147]:\n        ...\n        - cell \"$24.30\" [ref=e150]\n\n----\n\n- generic [active] [ref=e1]:\n  - paragraph [ref=e1211]:\n    - link \"Back to top\" [ref=e1212] [cursor=pointer]:";

    #[test]
    fn find_windows_are_a_partial_observation() {
        let obs = parse(FOUND).expect("a find result");
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Partial));
        let ids: Vec<&str> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(
            ids,
            ["e1", "e4", "e10", "e147", "e150", "e1", "e1211", "e1212"]
        );
        let header = crate::observation::parse_header(FOUND).expect("a find result");
        assert_eq!((header.ref_count(), header.kind), (8, TreeKind::Partial));
    }

    #[test]
    fn no_match_and_other_results_are_no_observation() {
        for text in [
            "### Result\nNo matches found for \"zzz\".",
            "### Result\nFound 1 match for \"x\":\n\nsee [ref=e1] here\n- button \"Go\" [ref=e2]",
            "### Result\nTotal messages: 2 (Errors: 0, Warnings: 1)\n\n[LOG] - button [ref=e1]",
            "Found 1 match for \"x\":\n\n- button \"Go\" [ref=e2]",
        ] {
            assert!(PlaywrightFind.parse(text).is_none(), "{text}");
            assert!(PlaywrightFind.parse_header(text).is_none(), "{text}");
        }
    }
}
