//! Observation formats: one detector per format behind [`ObservationFormat`].
//!
//! A detector decides from the text's line structure whether a browser result is an
//! observation (a page tree with actionable refs), a page report (URL and title, no tree),
//! or neither, and parses it into an [`Observation`]. Strings borrow from the result text
//! wherever they can, because projection parses every browser result of a request.
//!
//! The pipeline reads results through a [`Reading`](crate::reading::Reading), which keeps what it
//! needs of an [`Observation`] and borrows nothing. Tests that look at one result on its own
//! (the fixture tests, the fuzz targets) reach the parsers through
//! `staleguard::internal::observation`.

pub(crate) mod agent_browser;
pub(crate) mod ankita;
pub(crate) mod aria;
pub(crate) mod cdmcp;
mod model;
mod pw_common;
pub(crate) mod pw_find;
pub(crate) mod pw_legacy;
pub(crate) mod pw_page;
pub(crate) mod pw_page_state;
pub(crate) mod roles;
pub(crate) mod snapshot_file;
#[cfg(test)]
mod tests;

pub use model::TreeKind;
pub(crate) use model::{ElementRef, Node, Tab};
pub(crate) use model::{Observation, ObservationFormat};

/// Every supported format, most specific first.
pub static FORMATS: &[&dyn ObservationFormat] = &[
    &pw_find::PlaywrightFind,
    &pw_page::ERA,
    &pw_page_state::ERA,
    &pw_legacy::ERA,
    &ankita::Ankita,
    &snapshot_file::SnapshotFile,
    &agent_browser::AgentBrowser,
    &cdmcp::ChromeDevTools,
];

/// The format named `name` ([`ObservationFormat::name`]), as a [`Page`](crate::progress::Page)
/// or a header records it.
pub(crate) fn format_named(name: &str) -> Option<&'static dyn ObservationFormat> {
    FORMATS.iter().copied().find(|f| f.name() == name)
}

/// `ObservationFormat::snapshot_tool` of the format named `name`; `browser_snapshot` when
/// no format named the page yet.
pub(crate) fn snapshot_tool(name: &str) -> &'static str {
    format_named(name).map_or("browser_snapshot", |f| f.snapshot_tool())
}

/// `ObservationFormat::refs_unique` of the format named `name`.
pub(crate) fn refs_unique(name: &str) -> bool {
    format_named(name).is_some_and(|f| f.refs_unique())
}

/// `ObservationFormat::action_in_call` of the format named `name`.
pub(crate) fn action_in_call(name: &str) -> bool {
    format_named(name).is_none_or(|f| f.action_in_call())
}

/// Parses `text` with the first format that recognises it.
pub fn parse(text: &str) -> Option<Observation<'_>> {
    FORMATS.iter().find_map(|f| f.parse(text))
}

/// The tabs a tab-list result names (`### Open tabs` / `### Result` with `- 0: (current)
/// [Title](url)` lines), for results that are no observation.
pub(crate) fn tab_list(text: &str) -> Vec<Tab<'_>> {
    if !["### Open tabs", "### Result"]
        .iter()
        .any(|h| text.contains(h))
    {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| pw_common::parse_tab(l.trim_end_matches('\r')))
        .collect()
}

/// [`parse`], at header depth: see `ObservationFormat::parse_header`.
pub fn parse_header(text: &str) -> Option<Observation<'_>> {
    FORMATS.iter().find_map(|f| f.parse_header(text))
}
