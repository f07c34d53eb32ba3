//! Playwright MCP up to 0.0.31: `- Ran Playwright code:` + ```js, `- Page URL:`,
//! `- Page Title:`, `- Page Snapshot` + ```yaml, and with several tabs `### Open tabs`
//! (1-based) + `### Current tab`.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::model::Observation;
use super::pw_common::{build, scan, Depth, PlaywrightEra, H_PAGE, H_PAGE_STATE, H_SNAPSHOT};

/// Name of this format.
pub(crate) const NAME: &str = "playwright-mcp-legacy";

/// Detector for Playwright MCP 0.0.31 and earlier.
pub(crate) const ERA: PlaywrightEra = PlaywrightEra {
    name: NAME,
    parse_at,
};

/// Finds the page lines, one of which a result of this era holds. Built once: building a
/// finder costs more than searching a short result.
static PAGE_LINES: LazyLock<[Finder<'static>; 3]> =
    LazyLock::new(|| ["- Page URL:", "- Page Title:", "- Page Snapshot"].map(Finder::new));

fn parse_at(text: &str, depth: Depth) -> Option<Observation<'_>> {
    if !PAGE_LINES.iter().any(|f| f.find(text.as_bytes()).is_some()) {
        return None;
    }
    let scan = scan(text, depth);
    if !scan.page_lines || scan.headings & (H_PAGE | H_PAGE_STATE | H_SNAPSHOT) != 0 {
        return None;
    }
    build(NAME, scan, depth, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::model::ObservationFormat;
    use crate::observation::{aria, TreeKind};

    /// Playwright MCP 0.0.30, `order` call_4 (fixtures/pwmcp-0.0.30/order.openai.json).
    const CONFIRM: &str = r##"- Ran Playwright code:
```js
// Click Review order button
await page.getByRole('button', { name: 'Review order' }).click();
```

- Page URL: http://127.0.0.1:8431/order/confirm.html?name=Ada+Lovelace&qty=3&colour=Red
- Page Title: Confirm order
- Page Snapshot
```yaml
- generic [active] [ref=e1]:
  - heading "Confirm your order" [level=1] [ref=e2]
  - paragraph [ref=e3]: 3 x Red widget for Ada Lovelace at $19.99 each
  - paragraph [ref=e4]: "Order total: $59.97"
  - paragraph [ref=e6]:
    - button "Place order" [ref=e7]
  - paragraph [ref=e8]:
    - link "Edit order" [ref=e9] [cursor=pointer]:
      - /url: form.html?name=Ada+Lovelace&qty=3&colour=Red
```
"##;

    /// 0.0.30 `tabs_iframe` call_4: tab select with two tabs, listed 1-based.
    const TABS: &str = r##"- Ran Playwright code:
```js
// <internal code to select tab 2>
```

### Open tabs
- 1: [Links and new tabs] (http://127.0.0.1:8431/tabs/links.html)
- 2: (current) [Northwind H2 datasheet] (http://127.0.0.1:8431/tabs/datasheet.html)

### Current tab
- Page URL: http://127.0.0.1:8431/tabs/datasheet.html
- Page Title: Northwind H2 datasheet
- Page Snapshot
```yaml
- generic [active] [ref=e1]:
  - heading "Northwind H2 datasheet" [level=1] [ref=e2]
  - generic [ref=e3]:
    - term [ref=e4]: Usable capacity
    - definition [ref=e5]: 13.5 kWh
    - term [ref=e10]: Operating temperature
    - definition [ref=e11]: "-20 to 50 °C"
  - paragraph [ref=e12]: Document revision C, 28 January 2025.
```
"##;

    /// 0.0.30 `tabs_iframe` call_6: iframe refs (`f1e4`) are not a document identity here.
    const IFRAME: &str = r##"- Ran Playwright code:
```js
// Click Embedded newsletter (iframe) link
await page.getByRole('link', { name: 'Embedded newsletter (iframe)' }).click();
```

- Page URL: http://127.0.0.1:8431/tabs/frame.html
- Page Title: Embedded newsletter
- Page Snapshot
```yaml
- generic [active] [ref=e1]:
  - iframe [ref=e4]:
    - generic [active] [ref=f1e1]:
      - textbox "Your email" [ref=f1e4]
      - checkbox "Weekly digest" [checked] [active] [ref=f1e6]
```
"##;

    fn parse(text: &str) -> Option<Observation<'_>> {
        ERA.parse(text)
    }

    #[test]
    fn confirm_page() {
        let obs = parse(CONFIRM).unwrap();
        assert_eq!(obs.format, NAME);
        assert_eq!(obs.kind, TreeKind::Full);
        assert_eq!(
            obs.url.as_deref(),
            Some("http://127.0.0.1:8431/order/confirm.html?name=Ada+Lovelace&qty=3&colour=Red")
        );
        assert_eq!(obs.title.as_deref(), Some("Confirm order"));
        assert_eq!(
            obs.action.as_deref(),
            Some("// Click Review order button\nawait page.getByRole('button', { name: 'Review order' }).click();")
        );
        let refs = obs.ref_triples();
        assert_eq!(
            refs,
            [
                ("e1", "generic", ""),
                ("e2", "heading", "Confirm your order"),
                ("e3", "paragraph", ""),
                ("e4", "paragraph", ""),
                ("e6", "paragraph", ""),
                ("e7", "button", "Place order"),
                ("e8", "paragraph", ""),
                ("e9", "link", "Edit order"),
            ]
        );
        let controls = aria::controls_of(&obs);
        let controls: Vec<_> = controls
            .iter()
            .map(|c| (&*c.role, &*c.name, c.value.is_none(), c.states.len()))
            .collect();
        assert_eq!(
            controls,
            [
                ("button", "Place order", true, 0),
                ("link", "Edit order", true, 0)
            ]
        );
        assert_eq!(
            obs.chunks,
            [
                "Confirm your order",
                "3 x Red widget for Ada Lovelace at $19.99 each",
                "Order total: $59.97"
            ]
        );
        assert!(obs.tabs.is_empty());
        assert_eq!((obs.document.as_deref(), obs.images), (None, 0));
        assert!(obs.is_observation());
    }

    #[test]
    fn tabs_are_one_based() {
        let obs = parse(TABS).unwrap();
        assert_eq!(obs.tabs.len(), 2);
        let cur = obs.current_tab().unwrap();
        assert_eq!((cur.index, &*cur.title), (2, "Northwind H2 datasheet"));
        assert_eq!(cur.url, "http://127.0.0.1:8431/tabs/datasheet.html");
        assert_eq!(obs.title.as_deref(), Some("Northwind H2 datasheet"));
        assert_eq!(
            obs.action.as_deref(),
            Some("// <internal code to select tab 2>")
        );
        assert!(obs.chunks.contains(&"-20 to 50 °C".into()));
        assert!(aria::controls_of(&obs).is_empty());
    }

    #[test]
    fn iframe_refs_are_no_document() {
        let obs = parse(IFRAME).unwrap();
        assert_eq!(obs.refs.len(), 5);
        assert_eq!(obs.document, None);
        assert_eq!(aria::controls_of(&obs)[1].states, ["checked"]);
    }

    #[test]
    fn not_a_page() {
        let tab_list = "### Open tabs\n- 1: (current) [Links and new tabs] (http://127.0.0.1:8431/tabs/links.html)\n- 2: [Northwind H2 datasheet] (http://127.0.0.1:8431/tabs/datasheet.html)";
        let error = "Error: Ref not found, likely because element was removed. Use browser_snapshot to see what elements are currently on the page.";
        let modal = "- Ran Playwright code:\n```js\n// Click Button\nawait page.getByRole('button', { name: 'Button' }).click();\n```\n\n### Modal state\n- [\"alert\" dialog with message \"Alert\"]: can be handled by the \"browser_handle_dialog\" tool";
        for text in [
            "",
            tab_list,
            error,
            modal,
            "- Page URL: ",
            "### Page state\n- Page URL: http://x.test/",
        ] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn truncated_and_crlf() {
        let cut = CONFIRM.find("  - paragraph [ref=e6]").unwrap();
        let obs = parse(&CONFIRM[..cut]).unwrap();
        assert_eq!(obs.refs.len(), 4);
        assert_eq!(obs.kind, TreeKind::Full);
        let crlf = CONFIRM.replace('\n', "\r\n");
        // The same observation, apart from the raw tree slice, which keeps its line ends.
        let without_tree = |mut o: Observation<'static>| {
            o.tree = None;
            o
        };
        let crlf: &'static str = Box::leak(crlf.into_boxed_str());
        assert_eq!(
            without_tree(parse(crlf).unwrap()),
            without_tree(parse(CONFIRM).unwrap())
        );
    }

    #[test]
    fn snapshot() {
        insta::assert_debug_snapshot!(parse(TABS));
    }
}
