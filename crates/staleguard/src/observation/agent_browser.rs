//! agent-browser (vercel-labs/agent-browser) text snapshots: a bare aria tree whose
//! attributes share one bracket (`- heading "Title" [level=1, ref=e1]`), optionally after a
//! page line (`Page: <title>`, `URL: <url>`) or inside the content boundary markers
//! `--- AGENT_BROWSER_PAGE_CONTENT nonce=<n> origin=<url> ---` ... `--- END_... ---`.
//!
//! It must not take Playwright or seed-format results: those carry `### ` headings,
//! `- Page ...` lines, fences or `Current snapshot:`, and are rejected up front.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::aria::{self, lines};
use super::model::{Observation, ObservationFormat, TreeKind};

/// Name of this format.
pub(crate) const NAME: &str = "agent-browser";

/// Header lines allowed before the tree.
const MAX_HEADER_LINES: usize = 4;
const BOUNDARY: &str = "--- AGENT_BROWSER_PAGE_CONTENT ";

/// Detector for agent-browser snapshots.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AgentBrowser;

impl ObservationFormat for AgentBrowser {
    fn name(&self) -> &'static str {
        NAME
    }

    /// It takes a bare tree after a few lines of anything: exact enough for an
    /// agent-browser tool's results, not for a file read.
    fn by_content(&self) -> bool {
        false
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        if is_other_format(text) {
            return None;
        }
        let mut obs = Observation::new(NAME, TreeKind::Full);
        let mut parser = aria::LineParser::default();
        let mut it = lines(text).filter(|l| !l.text.trim().is_empty());
        let first = header(&mut it, &mut obs)?;
        parser.line(first, &mut obs);
        // The tree must start right after the header; prose that mentions a ref is no tree.
        if parser.stats.nodes == 0 {
            return None;
        }
        for line in it {
            parser.line(line.text, &mut obs);
        }
        let start = (first.as_ptr() as usize).checked_sub(text.as_ptr() as usize);
        obs.tree = start.and_then(|s| text.get(s..));
        if obs.refs.is_empty() {
            return None;
        }
        if parser.stats.diff {
            obs.kind = TreeKind::Diff;
        }
        Some(obs)
    }
}

/// Line starts that mark the Playwright and seed formats, which have their own detectors.
/// Only line starts count: page text may quote them inside a node.
const OTHER_FORMATS: &[&str] = &[
    "\n### ",
    "\n```",
    "\n- Page URL:",
    "\n- Page Snapshot",
    "\nCurrent snapshot:",
];

/// Finders for [`OTHER_FORMATS`], built once: building one costs more than searching a
/// short result.
static OTHER_FINDERS: LazyLock<Vec<Finder<'static>>> =
    LazyLock::new(|| OTHER_FORMATS.iter().map(Finder::new).collect());

fn is_other_format(text: &str) -> bool {
    OTHER_FORMATS
        .iter()
        .zip(OTHER_FINDERS.iter())
        .any(|(m, f)| text.starts_with(&m[1..]) || f.find(text.as_bytes()).is_some())
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
            let origin = rest
                .split_whitespace()
                .find_map(|w| w.strip_prefix("origin="));
            obs.url = origin
                .filter(|o| *o != "unknown")
                .map(Cow::Borrowed)
                .or(obs.url.take());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// agent-browser's native renderer: attributes in one bracket, JSON-quoted names,
    /// cursor hints after the bracket, values unquoted.
    const NATIVE: &str = r#"- heading "Example Domain" [level=1, ref=e1]
- StaticText "This domain is for use in illustrative examples."
- link "More information..." [ref=e2]
- textbox "Email" [required, ref=e3]: ada@example.com
- checkbox "Remember me" [checked=true, ref=e4]
- generic "Card" [ref=e5] clickable [cursor:pointer, onclick]
- button "Submit" [disabled, ref=e6]"#;

    /// The earlier TypeScript renderer: Playwright's aria tree with ` [ref=eN]` inserted after
    /// the name, so the ref comes before the other brackets.
    const TS: &str = r#"- heading "Example Domain" [ref=e1] [level=1]
- paragraph: Some text content
- button "Submit" [ref=e2]
- button "Submit" [ref=e3] [nth=1]
- textbox "Email" [ref=e4]"#;

    fn parse(text: &str) -> Option<Observation<'_>> {
        AgentBrowser.parse(text)
    }

    #[test]
    fn native_tree() {
        let obs = parse(NATIVE).unwrap();
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Full));
        let refs = obs.ref_triples();
        assert_eq!(
            refs,
            [
                ("e1", "heading", "Example Domain"),
                ("e2", "link", "More information..."),
                ("e3", "textbox", "Email"),
                ("e4", "checkbox", "Remember me"),
                ("e5", "generic", "Card"),
                ("e6", "button", "Submit"),
            ]
        );
        let controls = aria::controls_of(&obs);
        let c: Vec<_> = controls
            .iter()
            .map(|c| (&*c.role, c.value.as_deref(), c.states.clone()))
            .collect();
        assert_eq!(
            c,
            [
                ("link", None, vec![]),
                (
                    "textbox",
                    Some("ada@example.com"),
                    vec![Cow::Borrowed("required")]
                ),
                ("checkbox", None, vec!["checked=true".into()]),
                ("button", None, vec!["disabled".into()]),
            ]
        );
        assert_eq!(
            obs.chunks,
            [
                "Example Domain",
                "This domain is for use in illustrative examples."
            ]
        );
        assert_eq!(
            (obs.url, obs.title, obs.action, obs.document),
            (None, None, None, None)
        );
    }

    #[test]
    fn typescript_tree() {
        let obs = parse(TS).unwrap();
        let ids: Vec<_> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(ids, ["e1", "e2", "e3", "e4"]);
        assert!(
            aria::controls_of(&obs).iter().all(|c| c.states.is_empty()),
            "nth is no state"
        );
        assert_eq!(obs.chunks, ["Example Domain", "Some text content"]);
    }

    #[test]
    fn page_lines() {
        let bounded = format!(
            "--- AGENT_BROWSER_PAGE_CONTENT nonce=0a1b origin=https://example.com ---\n{NATIVE}\n--- END_AGENT_BROWSER_PAGE_CONTENT nonce=0a1b ---\n"
        );
        let obs = parse(&bounded).unwrap();
        assert_eq!(obs.url.as_deref(), Some("https://example.com"));
        assert_eq!(obs.refs.len(), 6);
        let titled = format!("Page: Example Site - Home\nURL: https://example.com/\n\n{TS}");
        let obs = parse(&titled).unwrap();
        assert_eq!(obs.title.as_deref(), Some("Example Site - Home"));
        assert_eq!(obs.url.as_deref(), Some("https://example.com/"));
        let unknown = format!("--- AGENT_BROWSER_PAGE_CONTENT nonce=1 origin=unknown ---\n{TS}");
        assert_eq!(parse(&unknown).unwrap().url, None);
    }

    #[test]
    fn leaves_other_formats_alone() {
        let playwright = "### Page\n- Page URL: http://x.test/\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```";
        let legacy = "- Page URL: http://x.test/\n- Page Title: X\n- Page Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```";
        let pw_bare_heading = "- button \"Buy\" [ref=e1]\n### Result\nok";
        let ankita = "Current snapshot:\n# X — http://x.test/\n- [ref=1-0-1] button Buy";
        let prose = "The page said:\n- button \"Buy\" [ref=e1]";
        let quoted = "- paragraph: see [ref=e99] here\n- text: \"[ref=e5]\"";
        let fence_in_text = "- StaticText \"use ``` and ### freely\"\n- button \"Go\" [ref=e1]";
        assert_eq!(parse(fence_in_text).map(|o| o.refs.len()), Some(1));
        for text in [
            "",
            "(empty page)",
            "(no interactive elements)",
            playwright,
            legacy,
            pw_bare_heading,
            ankita,
            prose,
            quoted,
        ] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn diff_markers() {
        let obs = parse("- <changed> generic [ref=e1]:\n  - ref=e2 [unchanged]").unwrap();
        assert_eq!(obs.kind, TreeKind::Diff);
        assert_eq!(obs.refs.len(), 2);
    }

    #[test]
    fn snapshot() {
        insta::assert_debug_snapshot!(parse(NATIVE));
    }
}
