//! Playwright MCP 0.0.57 on: `### Ran Playwright code`, `### Open tabs`, `### Page`,
//! `### Snapshot` (an inline ```yaml tree, full or incremental, or a link to a `.yml` file),
//! `### Result`, `### Error`, `### Events`.

use super::model::Observation;
use super::pw_common::{build, has_any_heading, scan, Depth, PlaywrightEra, H_PAGE, H_SNAPSHOT};

/// Name of this format.
pub(crate) const NAME: &str = "playwright-mcp-0.0.57";

/// Detector for Playwright MCP 0.0.57 and later.
pub(crate) const ERA: PlaywrightEra = PlaywrightEra {
    name: NAME,
    parse_at,
};

fn parse_at(text: &str, depth: Depth) -> Option<Observation<'_>> {
    if !has_any_heading(text, &["### Page", "### Snapshot"]) {
        return None;
    }
    let scan = scan(text, depth);
    if scan.headings & (H_PAGE | H_SNAPSHOT) == 0 {
        return None;
    }
    build(NAME, scan, depth, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::model::ObservationFormat;
    use crate::observation::{aria, TreeKind};

    /// Playwright MCP 0.0.83, `order` call_1 (fixtures/pwmcp-0.0.83): a file-linked snapshot.
    const LINKED: &str = r##"### Ran Playwright code
```js
await page.goto('http://127.0.0.1:8431/order/form.html');
```
### Page
- Page URL: http://127.0.0.1:8431/order/form.html
- Page Title: Order a widget
### Snapshot
- [Snapshot](.playwright-mcp/page-2026-11-30T08-09-13-405Z.yml)"##;

    /// 0.0.83 `order` call_12: `browser_snapshot` of the second document (`f3`).
    const CONFIRM: &str = r##"### Page
- Page URL: http://127.0.0.1:8431/order/confirm.html?name=Ada+Lovelace&qty=3&colour=Blue
- Page Title: Confirm order
### Snapshot
```yaml
- generic [active] [ref=f3e1]:
  - heading "Confirm your order" [level=1] [ref=f3e2]
  - paragraph [ref=f3e3]: 3 x Blue widget for Ada Lovelace at $21.50 each
  - paragraph [ref=f3e4]: "Order total: $64.50"
  - paragraph [ref=f3e6]:
    - button "Place order" [ref=f3e7]
  - paragraph [ref=f3e8]:
    - link "Edit order" [ref=f3e9] [cursor=pointer]:
      - /url: form.html?name=Ada+Lovelace&qty=3&colour=Blue
```"##;

    /// 0.0.83 `tabs_iframe` call_3: tabs without a space before the URL, linked snapshot.
    const TABS: &str = r##"### Ran Playwright code
```js
await page.getByRole('link', { name: 'Open the H2 datasheet' }).click();
```
### Open tabs
- 0: (current) [Links and new tabs](http://127.0.0.1:8431/tabs/links.html)
- 1: [Northwind H2 datasheet](http://127.0.0.1:8431/tabs/datasheet.html)
### Page
- Page URL: http://127.0.0.1:8431/tabs/links.html
- Page Title: Links and new tabs
### Snapshot
- [Snapshot](.playwright-mcp/page-2026-11-30T08-09-30-464Z.yml)"##;

    /// 0.0.83 `tabs_iframe` call_13: main frame `f1`, iframe `f2`.
    const IFRAME: &str = r##"### Page
- Page URL: http://127.0.0.1:8431/tabs/frame.html
- Page Title: Embedded newsletter
### Snapshot
```yaml
- generic [ref=f1e1]:
  - heading "Newsletter" [level=1] [ref=f1e2]
  - iframe [active] [ref=f1e4]:
    - generic [ref=f2e1]:
      - generic [ref=f2e2]:
        - generic [ref=f2e3]:
          - text: Your email
          - textbox "Your email" [ref=f2e4]: ada@example.com
        - generic [ref=f2e5]:
          - checkbox "Weekly digest" [checked] [active] [ref=f2e6]
          - text: Weekly digest
        - button "Subscribe" [ref=f2e7]
      - status
```"##;

    /// An incremental tree in this era (shape of Playwright MCP's own snapshot-mode tests),
    /// after a `### Result` and with a console line.
    const DIFF: &str = r##"### Result
Waited for 3
### Ran Playwright code
```js
await new Promise(f => setTimeout(f, 3 * 1000));
```
### Page
- Page URL: http://shop.test/
- Page Title: Shop
- Console: 1 errors, 0 warnings
### Snapshot
```yaml
- <changed> generic [active] [ref=e1]:
  - ref=e2 [unchanged]
  - button "Button 2" [ref=e3]
```
### Events
- [Console](.playwright-mcp/console.log)"##;

    fn parse(text: &str) -> Option<Observation<'_>> {
        ERA.parse(text)
    }

    #[test]
    fn linked_snapshot_is_a_report() {
        let obs = parse(LINKED).unwrap();
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Report));
        assert_eq!(
            obs.url.as_deref(),
            Some("http://127.0.0.1:8431/order/form.html")
        );
        assert_eq!(obs.title.as_deref(), Some("Order a widget"));
        assert_eq!(
            obs.action.as_deref(),
            Some("await page.goto('http://127.0.0.1:8431/order/form.html');")
        );
        assert!(obs.refs.is_empty() && obs.chunks.is_empty() && obs.document.is_none());
        assert!(!obs.is_observation());
    }

    #[test]
    fn inline_snapshot_with_document() {
        let obs = parse(CONFIRM).unwrap();
        assert_eq!(obs.kind, TreeKind::Full);
        assert_eq!(obs.action, None);
        assert_eq!(obs.document.as_deref(), Some("f3"));
        let refs = obs.ref_triples();
        assert_eq!(refs[5], ("f3e7", "button", "Place order"));
        assert_eq!(refs.len(), 8);
        assert_eq!(
            obs.chunks,
            [
                "Confirm your order",
                "3 x Blue widget for Ada Lovelace at $21.50 each",
                "Order total: $64.50"
            ]
        );
    }

    /// A `### Page` section that stayed on tab 0 while `### Open tabs` marks tab 1 current
    /// (seen in real sessions): the server acted on the page the page lines name (issue 44:
    /// a click on it was refused as stale when the list's tab named the page), so they name
    /// it, and the tab that shows it is the current one.
    #[test]
    fn the_page_lines_name_the_page_and_its_tab() {
        let text = TABS
            .replace("- 0: (current) [Links", "- 0: [Links")
            .replace("- 1: [Northwind", "- 1: (current) [Northwind");
        let obs = parse(&text).expect("a page report");
        assert_eq!(
            obs.url.as_deref(),
            Some("http://127.0.0.1:8431/tabs/links.html")
        );
        assert_eq!(obs.title.as_deref(), Some("Links and new tabs"));
        let current: Vec<u32> = (obs.tabs.iter())
            .filter(|t| t.current)
            .map(|t| t.index)
            .collect();
        assert_eq!(current, [0]);
        let same = parse(TABS).expect("a page report");
        assert_eq!(same.url, obs.url);
        assert_eq!(same.tabs, obs.tabs);
    }

    #[test]
    fn tabs_without_space() {
        let obs = parse(TABS).unwrap();
        assert_eq!(obs.kind, TreeKind::Report);
        let tabs: Vec<_> = obs
            .tabs
            .iter()
            .map(|t| (t.index, &*t.title, &*t.url, t.current))
            .collect();
        assert_eq!(
            tabs,
            [
                (
                    0,
                    "Links and new tabs",
                    "http://127.0.0.1:8431/tabs/links.html",
                    true
                ),
                (
                    1,
                    "Northwind H2 datasheet",
                    "http://127.0.0.1:8431/tabs/datasheet.html",
                    false
                )
            ]
        );
    }

    #[test]
    fn iframe_controls_and_document() {
        let obs = parse(IFRAME).unwrap();
        assert_eq!(obs.document.as_deref(), Some("f1"));
        let controls = aria::controls_of(&obs);
        let c: Vec<_> = controls
            .iter()
            .map(|c| (&*c.role, &*c.name, c.value.as_deref(), c.states.clone()))
            .collect();
        assert_eq!(
            c,
            [
                ("textbox", "Your email", Some("ada@example.com"), vec![]),
                ("checkbox", "Weekly digest", None, vec!["checked".into()]),
                ("button", "Subscribe", None, vec![]),
            ]
        );
        assert_eq!(obs.chunks, ["Newsletter", "Your email", "Weekly digest"]);
    }

    #[test]
    fn incremental_snapshot() {
        let obs = parse(DIFF).unwrap();
        assert_eq!(obs.kind, TreeKind::Diff);
        assert_eq!(
            obs.action.as_deref(),
            Some("await new Promise(f => setTimeout(f, 3 * 1000));")
        );
        let ids: Vec<_> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(ids, ["e1", "e2", "e3"]);
        assert_eq!(obs.document, None);
    }

    #[test]
    fn not_a_page() {
        let tab_list = "### Result\n- 0: (current) [Links and new tabs](http://127.0.0.1:8431/tabs/links.html)\n- 1: [Northwind H2 datasheet](http://127.0.0.1:8431/tabs/datasheet.html)";
        let error = "### Error\nError: Ref f3e7 not found in the current page snapshot. Try capturing new snapshot.";
        let code_only = "### Ran Playwright code\n```js\nawait page.getByRole('textbox', { name: 'Name' }).fill('Ada Lovelace');\n```";
        let headings = "### Page\n### Snapshot\n";
        let quoted = "### Result\n- text: \"### Page\"\n### Page state";
        for text in ["", tab_list, error, code_only, headings, quoted] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn hostile_tree() {
        let text = "### Page\r\n- Page URL: http://x.test/\r\n- Page Title: A — B\r\n### Snapshot\r\n```yaml\r\n- paragraph [ref=e3]: see [ref=e99] here\r\n- text: \"[ref=e5]\"\r\n- button \"Say \\\"hi\\\"\" [ref=e4]\r\n- heading \"It’s 20 °C\" [level=2] [ref=e6]";
        let obs = parse(text).unwrap();
        let ids: Vec<_> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(ids, ["e3", "e4", "e6"]);
        assert_eq!(obs.refs[1].name, "Say \"hi\"");
        assert_eq!(obs.title.as_deref(), Some("A — B"));
        assert_eq!(obs.chunks, ["see [ref=e99] here", "[ref=e5]", "It’s 20 °C"]);
    }

    #[test]
    fn snapshot() {
        insta::assert_debug_snapshot!("page_linked", parse(TABS));
        insta::assert_debug_snapshot!("page_iframe", parse(IFRAME));
    }
}
