//! Playwright MCP up to 0.0.31: `- Ran Playwright code:` + ```js, `- Page URL:`,
//! `- Page Title:`, `- Page Snapshot` + ```yaml, and with several tabs `### Open tabs`
//! (1-based) + `### Current tab`.

use super::pw_common::{build, contains, scan, H_PAGE, H_PAGE_STATE, H_SNAPSHOT};
use super::{Observation, ObservationFormat};

/// Name of this format.
pub const NAME: &str = "playwright-mcp-legacy";

/// Detector for Playwright MCP 0.0.31 and earlier.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaywrightLegacy;

impl ObservationFormat for PlaywrightLegacy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        if !["- Page URL:", "- Page Title:", "- Page Snapshot"].iter().any(|m| contains(text, m)) {
            return None;
        }
        let scan = scan(text);
        if !scan.page_lines || scan.headings & (H_PAGE | H_PAGE_STATE | H_SNAPSHOT) != 0 {
            return None;
        }
        build(NAME, scan)
    }
}
