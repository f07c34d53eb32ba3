//! Structure shared by the Playwright MCP eras: `###` sections, page lines, tab lists and
//! fenced code and snapshot blocks. One pass over the lines collects everything; each era's
//! detector then checks its own markers and builds the observation.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::aria::{self, lines};
use super::model::{Observation, ObservationFormat, Tab, TreeKind};
use crate::failure::{line_starts_found, HEADING};

pub(super) const H_RAN_CODE: u16 = 1;
pub(super) const H_OPEN_TABS: u16 = 1 << 1;
pub(super) const H_PAGE: u16 = 1 << 2;
pub(super) const H_PAGE_STATE: u16 = 1 << 3;
pub(super) const H_CURRENT_TAB: u16 = 1 << 4;
pub(super) const H_SNAPSHOT: u16 = 1 << 5;
pub(super) const H_RESULT: u16 = 1 << 6;
pub(super) const H_ERROR: u16 = 1 << 7;
pub(super) const H_OTHER: u16 = 1 << 8;

/// How much of a result to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Depth {
    /// Header, and every ref, control and chunk of the tree.
    Full,
    /// Header, and only the tree's kind and ref count.
    Header,
}

/// A Playwright MCP era's detector: its name and how it tells and reads its results. The
/// eras differ only there (which headings or page lines a result of theirs holds), so one
/// `ObservationFormat` serves all three.
#[derive(Clone, Copy)]
pub(crate) struct PlaywrightEra {
    pub(super) name: &'static str,
    pub(super) parse_at: for<'a> fn(&'a str, Depth) -> Option<Observation<'a>>,
}

impl ObservationFormat for PlaywrightEra {
    fn name(&self) -> &'static str {
        self.name
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        (self.parse_at)(text, Depth::Full)
    }

    fn parse_header<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        (self.parse_at)(text, Depth::Header)
    }
}

/// What one pass over a Playwright MCP result found.
#[derive(Debug, Default)]
pub(super) struct Scan<'a> {
    /// `H_*` flags of the `### ` headings seen at line start, outside fences.
    pub headings: u16,
    /// A `- Page URL:`, `- Page Title:` or `- Page Snapshot` line was seen.
    pub page_lines: bool,
    pub url: Option<&'a str>,
    pub title: Option<&'a str>,
    /// The code under "Ran Playwright code", fences removed, not yet trimmed.
    pub code: Option<&'a str>,
    pub tabs: Vec<Tab<'a>>,
    /// The inline ```yaml snapshot, up to the closing fence or the end of the text.
    pub tree: Option<&'a str>,
    /// At header depth, the tree's ref count and whether it is a diff.
    pub counted: Option<(usize, bool)>,
    /// The file a `### Snapshot` section links instead of an inline tree
    /// (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`).
    pub linked: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Top,
    Code,
    Tabs,
    Page,
    Snapshot,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    Code,
    Tree,
    Other,
}

struct Scanner<'a> {
    text: &'a str,
    scan: Scan<'a>,
    section: Section,
    fence: Option<Fence>,
    /// Start of the open fence's content: the start of the line after the opening fence.
    fence_start: Option<usize>,
    /// A `- Page Snapshot` line was seen: the next ```yaml fence is the tree.
    want_tree: bool,
    /// A `- Ran Playwright code:` line was seen (legacy): the next fence is the code.
    want_code: bool,
    /// Unfenced code lines under `### Ran Playwright code` (0.0.56): first start, last end.
    bare_code: Option<(usize, usize)>,
}

/// Scans `text` once. At header depth the tree's refs are counted on the way.
pub(super) fn scan(text: &str, depth: Depth) -> Scan<'_> {
    let mut s = Scanner {
        text,
        scan: Scan::default(),
        section: Section::Top,
        fence: None,
        fence_start: None,
        want_tree: false,
        want_code: false,
        bare_code: None,
    };
    let mut it = lines(text);
    while let Some(line) = it.next() {
        s.line(line.start, line.text);
        // A tree can be MBs: jump to its closing fence instead of looking at every line.
        if s.fence == Some(Fence::Tree) && s.fence_start.is_none() {
            s.fence_start = Some(line.next);
            let end = match depth {
                Depth::Header => {
                    let (count, diff, end) = aria::count_refs_to_fence(text, line.next);
                    s.scan.counted = Some((count, diff));
                    end
                }
                Depth::Full => closing_fence(text, line.next),
            };
            it.seek(end);
        }
    }
    s.finish()
}

impl<'a> Scanner<'a> {
    fn line(&mut self, start: usize, line: &'a str) {
        if let Some(kind) = self.fence {
            self.fence_start.get_or_insert(start);
            if line.trim_end() == "```" {
                self.close_fence(
                    kind,
                    self.text.get(self.fence_start.unwrap_or(start)..start),
                );
            }
            return;
        }
        if let Some(lang) = line.strip_prefix("```") {
            self.open_fence(lang.trim());
        } else if let Some(h) = line.strip_prefix("### ") {
            self.heading(h.trim());
        } else {
            match self.section {
                Section::Code => self.code_line(start, line),
                Section::Tabs => self.scan.tabs.extend(parse_tab(line)),
                Section::Top | Section::Page => self.page_line(line),
                Section::Snapshot => self.snapshot_line(line),
                Section::Other => {}
            }
        }
    }

    fn open_fence(&mut self, lang: &str) {
        let want_tree =
            self.scan.tree.is_none() && (self.want_tree || self.section == Section::Snapshot);
        let kind = if lang == "yaml" && want_tree {
            Fence::Tree
        } else if self.want_code || self.section == Section::Code {
            Fence::Code
        } else {
            Fence::Other
        };
        self.want_code = false;
        self.fence = Some(kind);
        self.fence_start = None;
    }

    fn close_fence(&mut self, kind: Fence, content: Option<&'a str>) {
        match kind {
            Fence::Tree => {
                self.scan.tree = content;
                self.want_tree = false;
            }
            Fence::Code => self.scan.code = self.scan.code.or(content),
            Fence::Other => {}
        }
        self.fence = None;
    }

    fn heading(&mut self, h: &str) {
        let (flag, section) = match h {
            "Ran Playwright code" => (H_RAN_CODE, Section::Code),
            "Open tabs" => (H_OPEN_TABS, Section::Tabs),
            "Page" => (H_PAGE, Section::Page),
            "Page state" => (H_PAGE_STATE, Section::Page),
            "Current tab" => (H_CURRENT_TAB, Section::Page),
            "Snapshot" => (H_SNAPSHOT, Section::Snapshot),
            "Result" => (H_RESULT, Section::Other),
            "Error" => (H_ERROR, Section::Other),
            _ => (H_OTHER, Section::Other),
        };
        self.scan.headings |= flag;
        self.section = section;
        self.want_tree = false;
        self.want_code = false;
    }

    fn code_line(&mut self, start: usize, line: &str) {
        if !line.trim().is_empty() {
            let first = self.bare_code.map_or(start, |(a, _)| a);
            self.bare_code = Some((first, start + line.len()));
        }
    }

    fn page_line(&mut self, line: &'a str) {
        if let Some(v) = line.strip_prefix("- Page URL:") {
            self.scan.url = self.scan.url.or(non_empty(v));
        } else if let Some(v) = line.strip_prefix("- Page Title:") {
            self.scan.title = self.scan.title.or(non_empty(v));
        } else if line.starts_with("- Page Snapshot") {
            self.want_tree = true;
        } else {
            if line.starts_with("- Ran Playwright code") {
                self.want_code = true;
            }
            return;
        }
        self.scan.page_lines = true;
    }

    fn snapshot_line(&mut self, line: &'a str) {
        let link = line
            .trim()
            .strip_prefix("- [Snapshot](")
            .and_then(|l| l.strip_suffix(')'));
        self.scan.linked = self.scan.linked.or(link.filter(|l| !l.is_empty()));
    }

    fn finish(mut self) -> Scan<'a> {
        if let Some(kind) = self.fence {
            // A truncated block: keep what is there.
            let rest = self.text.get(self.fence_start.unwrap_or(self.text.len())..);
            self.close_fence(kind, rest);
        }
        if self.scan.code.is_none() {
            self.scan.code = self.bare_code.and_then(|(a, b)| self.text.get(a..b));
        }
        self.scan
    }
}

/// Finds the fences around code and trees.
static FENCE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("```"));

/// Start of the first line at or after `from` that is a bare closing fence, or the end.
fn closing_fence(text: &str, from: usize) -> usize {
    let Some(rest) = text.get(from..) else {
        return text.len();
    };
    let bytes = rest.as_bytes();
    FENCE
        .find_iter(bytes)
        .filter(|&at| at == 0 || bytes.get(at - 1) == Some(&b'\n'))
        .find(|&at| {
            let line = &bytes[at..];
            let end = memchr::memchr(b'\n', line).unwrap_or(line.len());
            line[..end].iter().skip(3).all(u8::is_ascii_whitespace)
        })
        .map_or(text.len(), |at| from + at)
}

fn non_empty(v: &str) -> Option<&str> {
    Some(v.trim()).filter(|v| !v.is_empty())
}

/// Borrows `s` unless it has CRLF line breaks, which are normalised so that the same action
/// reads the same whatever the transport did to line endings.
fn lf_lines(s: &str) -> Cow<'_, str> {
    if s.contains('\r') {
        Cow::Owned(s.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(s)
    }
}

/// Parses a tab line: `- 1: (current) [Title] (url)` (up to 0.0.56) or
/// `- 0: (current) [Title](url)` (0.0.57 on).
pub(crate) fn parse_tab(line: &str) -> Option<Tab<'_>> {
    let rest = line.strip_prefix("- ")?;
    let (index, rest) = rest.split_once(": ")?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index = index.parse().ok()?;
    let (current, rest) = match rest.strip_prefix("(current) ") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let body = rest.strip_prefix('[')?.strip_suffix(')')?;
    // The separator is the last `](` or `] (`: titles may contain brackets, URLs rarely do.
    let spaced = body.rfind("] (").map(|i| (i, i + 3));
    let tight = body.rfind("](").map(|i| (i, i + 2));
    let (title_end, url_start) = match (spaced, tight) {
        (Some(s), Some(t)) => Some(if s.0 > t.0 { s } else { t }),
        (s, t) => s.or(t),
    }?;
    Some(Tab {
        index,
        title: Cow::Borrowed(body.get(..title_end)?),
        url: Cow::Borrowed(body.get(url_start..)?),
        current,
    })
}

/// True when `heading` (e.g. `### Page`) stands alone on a line of `text`. A cheap filter
/// before the full scan.
pub(super) fn has_heading(text: &str, heading: &str) -> bool {
    has_any_heading(text, &[heading])
}

/// True when any of `headings` (each starting with `### `) stands alone on a line of `text`.
/// One pass over the `### ` line starts checks them all.
pub(super) fn has_any_heading(text: &str, headings: &[&str]) -> bool {
    let bytes = text.as_bytes();
    line_starts_found(text, &HEADING).any(|at| {
        headings.iter().any(|heading| {
            let end = at + heading.len();
            bytes.get(at..end) == Some(heading.as_bytes())
                && matches!(bytes.get(end), None | Some(b'\n' | b'\r'))
        })
    })
}

/// Length of the frame prefix of a ref like `f3e7` (`f3`); `None` for `e7` and others.
pub(super) fn frame_prefix_len(id: &str) -> Option<usize> {
    let b = id.as_bytes();
    if b.first() != Some(&b'f') {
        return None;
    }
    let digits = b
        .get(1..)?
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    let tail = b.get(digits + 2..)?;
    let ok = digits > 0 && b.get(digits + 1) == Some(&b'e') && !tail.is_empty();
    (ok && tail.iter().all(u8::is_ascii_digit)).then_some(digits + 1)
}

/// Document identity for Playwright MCP 0.0.57 on, which gives every new document of a tab a
/// new frame prefix (`f3e1`) and each iframe the next one. The main frame's prefix is the
/// lowest in the tree: in a full tree that is the first ref's. An unprefixed ref (`e1`) means
/// the tab's first document, which has no identity beyond its URL.
pub(super) fn document_of<'a>(obs: &Observation<'a>) -> Option<Cow<'a, str>> {
    frame_document(obs.refs.iter().map(|r| r.id.as_ref())).map(Cow::Owned)
}

/// The document a tree's refs name: their smallest frame prefix (`f3` of `f3e7`), or `None`
/// when any ref has none.
pub(crate) fn frame_document<'s>(ids: impl Iterator<Item = &'s str>) -> Option<String> {
    let mut best: Option<(u64, &str)> = None;
    for id in ids {
        let n = frame_prefix_len(id)?;
        let num = id.get(1..n)?.parse::<u64>().ok()?;
        if best.is_none_or(|(b, _)| num < b) {
            best = Some((num, id.get(..n)?));
        }
    }
    best.map(|(_, prefix)| prefix.to_string())
}

/// Builds the observation or page report from a scan. `None` when the result names no page
/// (code only, a tab list only, an error): it is not a page report. `frame_documents` is
/// set for eras whose frame prefixes name documents; before 0.0.57 `f1e5` is an iframe ref.
pub(super) fn build<'a>(
    format: &'static str,
    scan: Scan<'a>,
    depth: Depth,
    frame_documents: bool,
) -> Option<Observation<'a>> {
    if scan.url.is_none() && scan.title.is_none() && scan.tree.is_none() {
        return None;
    }
    let mut obs = Observation::new(format, TreeKind::Report);
    if let (Some(tree), Depth::Header) = (scan.tree, depth) {
        let (count, diff) = scan.counted.unwrap_or_else(|| aria::count_refs(tree));
        obs.counted_refs = count;
        obs.kind = if diff { TreeKind::Diff } else { TreeKind::Full };
    } else if let Some(tree) = scan.tree {
        let stats = aria::parse_tree(tree, &mut obs);
        obs.kind = if stats.diff {
            TreeKind::Diff
        } else {
            TreeKind::Full
        };
        if frame_documents {
            obs.document = document_of(&obs);
        }
    }
    obs.tree = scan.tree;
    obs.url = scan.url.map(Cow::Borrowed);
    obs.title = scan.title.map(Cow::Borrowed);
    obs.action = scan.code.and_then(non_empty).map(lf_lines);
    obs.linked = scan.linked.map(Cow::Borrowed);
    obs.tabs = scan.tabs;
    follow_current_tab(&mut obs);
    Some(obs)
}

/// Where `### Open tabs` marks a tab `(current)` and the page lines name another page, the
/// page lines win: the server acts on the page they name (SPEC 5), and the tab that shows
/// it is the current one (a `### Page` section can stay on tab 0 after another tab was
/// marked current). With no tab at that URL, the list stands as it is.
fn follow_current_tab(obs: &mut Observation<'_>) {
    let Some(url) = obs.url.as_deref() else {
        return;
    };
    if obs.tabs.iter().any(|t| t.current && t.url == url) {
        return;
    }
    let Some(at) = obs.tabs.iter().position(|t| t.url == url) else {
        return;
    };
    for (i, tab) in obs.tabs.iter_mut().enumerate() {
        tab.current = i == at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_both_styles() {
        let t = parse_tab("- 1: (current) [Links [new] (x)] (http://a.test/x)").unwrap();
        assert_eq!((t.index, t.current), (1, true));
        assert_eq!(t.title, "Links [new] (x)");
        assert_eq!(t.url, "http://a.test/x");
        let t =
            parse_tab("- 0: [Northwind H2 datasheet](http://127.0.0.1:8431/tabs/datasheet.html)")
                .unwrap();
        assert_eq!((t.index, t.current), (0, false));
        assert_eq!(t.title, "Northwind H2 datasheet");
        for bad in [
            "- x: [a](b)",
            "- : [a](b)",
            "- +1: [a](b)",
            "- 1: a](b)",
            "- 1: [a]",
            "- 99999999999: [a](b)",
        ] {
            assert!(parse_tab(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn frame_prefixes() {
        assert_eq!(frame_prefix_len("f3e7"), Some(2));
        assert_eq!(frame_prefix_len("f12e1"), Some(3));
        for id in ["e7", "f", "fe1", "f1", "f1e", "f1ex", "s1e2", "f1e2x"] {
            assert_eq!(frame_prefix_len(id), None, "{id}");
        }
    }

    #[test]
    fn heading_filter() {
        assert!(has_heading("### Page\n- Page URL: x", "### Page"));
        assert!(has_heading("x\r\n### Page\r\n", "### Page"));
        assert!(has_heading("x\n### Page", "### Page"));
        assert!(!has_heading("### Page state\n", "### Page"));
        assert!(!has_heading("- text: ### Page\n", "### Page"));
    }
}
