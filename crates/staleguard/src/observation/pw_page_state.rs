//! Playwright MCP 0.0.32 to 0.0.56: `### Ran Playwright code` (fenced in 0.0.41, bare in
//! 0.0.56), `### Open tabs`, `### Page state` with `- Page URL:`, `- Page Title:` and
//! `- Page Snapshot:` + ```yaml (incremental from 0.0.51), `### Result`.

use super::pw_common::{build, has_heading, scan, H_PAGE, H_PAGE_STATE, H_SNAPSHOT};
use super::{Observation, ObservationFormat};

/// Name of this format.
pub const NAME: &str = "playwright-mcp-0.0.32";

/// Detector for Playwright MCP 0.0.32 to 0.0.56.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaywrightPageState;

impl ObservationFormat for PlaywrightPageState {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        if !has_heading(text, "### Page state") {
            return None;
        }
        let scan = scan(text);
        if scan.headings & H_PAGE_STATE == 0 || scan.headings & (H_PAGE | H_SNAPSHOT) != 0 {
            return None;
        }
        build(NAME, scan)
    }
}
