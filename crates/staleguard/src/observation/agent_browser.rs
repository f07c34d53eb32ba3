//! agent-browser (vercel-labs/agent-browser) text snapshots: a bare aria tree whose
//! attributes share one bracket (`- heading "Title" [level=1, ref=e1]`), optionally after a
//! page line (`Page: <title>`, `URL: <url>`) or inside the content boundary markers
//! `--- AGENT_BROWSER_PAGE_CONTENT nonce=<n> origin=<url> ---` ... `--- END_... ---`.
//!
//! It must not take Playwright or seed-format results: those carry `### ` headings,
//! `- Page ...` lines, fences or `Current snapshot:`, and are rejected up front.

use std::borrow::Cow;

use super::aria::{self, lines, TreeStats};
use super::pw_common::contains;
use super::{Observation, ObservationFormat, TreeKind};

/// Name of this format.
pub const NAME: &str = "agent-browser";

/// Header lines allowed before the tree.
const MAX_HEADER_LINES: usize = 4;
const BOUNDARY: &str = "--- AGENT_BROWSER_PAGE_CONTENT ";

/// Detector for agent-browser snapshots.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentBrowser;

impl ObservationFormat for AgentBrowser {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        if is_other_format(text) {
            return None;
        }
        let mut obs = Observation::new(NAME, TreeKind::Full);
        let mut stats = TreeStats::default();
        let mut it = lines(text).filter(|l| !l.text.trim().is_empty());
        let first = header(&mut it, &mut obs)?;
        aria::parse_line(first, &mut obs, &mut stats);
        // The tree must start right after the header; prose that mentions a ref is no tree.
        if stats.nodes == 0 {
            return None;
        }
        for line in it {
            aria::parse_line(line.text, &mut obs, &mut stats);
        }
        if obs.refs.is_empty() {
            return None;
        }
        if stats.diff {
            obs.kind = TreeKind::Diff;
        }
        Some(obs)
    }
}

/// Markers of the Playwright and seed formats, which have their own detectors.
fn is_other_format(text: &str) -> bool {
    text.starts_with("### ")
        || ["\n### ", "```", "- Page URL:", "- Page Snapshot", "Current snapshot:"]
            .iter()
            .any(|m| contains(text, m))
}

/// Reads the page lines before the tree; returns the first tree line.
fn header<'a>(
    it: &mut impl Iterator<Item = aria::Line<'a>>,
    obs: &mut Observation<'a>,
) -> Option<&'a str> {
    for _ in 0..=MAX_HEADER_LINES {
        let line = it.next()?.text;
        let t = line.trim();
        if t.starts_with("- ") {
            return Some(line);
        }
        if let Some(rest) = t.strip_prefix(BOUNDARY) {
            let origin = rest.split_whitespace().find_map(|w| w.strip_prefix("origin="));
            obs.url = origin.filter(|o| *o != "unknown").map(Cow::Borrowed).or(obs.url.take());
        } else if let Some(u) = t.strip_prefix("URL:") {
            obs.url = Some(Cow::Borrowed(u.trim())).filter(|u| !u.is_empty());
        } else if let Some(p) = t.strip_prefix("Page:").or_else(|| t.strip_prefix("Title:")) {
            obs.title = Some(Cow::Borrowed(p.trim())).filter(|p| !p.is_empty());
        } else {
            return None;
        }
    }
    None
}
