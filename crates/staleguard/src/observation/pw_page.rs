//! Playwright MCP 0.0.57 on: `### Ran Playwright code`, `### Open tabs`, `### Page`,
//! `### Snapshot` (an inline ```yaml tree, full or incremental, or a link to a `.yml` file),
//! `### Result`, `### Error`, `### Events`.

use super::pw_common::{build, has_heading, scan, H_PAGE, H_SNAPSHOT};
use super::{Observation, ObservationFormat};

/// Name of this format.
pub const NAME: &str = "playwright-mcp-0.0.57";

/// Detector for Playwright MCP 0.0.57 and later.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaywrightPage;

impl ObservationFormat for PlaywrightPage {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        if !has_heading(text, "### Page") && !has_heading(text, "### Snapshot") {
            return None;
        }
        let scan = scan(text);
        if scan.headings & (H_PAGE | H_SNAPSHOT) == 0 {
            return None;
        }
        build(NAME, scan)
    }
}
