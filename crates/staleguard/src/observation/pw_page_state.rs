//! Playwright MCP 0.0.32 to 0.0.56: `### Ran Playwright code` (fenced in 0.0.41, bare in
//! 0.0.56), `### Open tabs`, `### Page state` with `- Page URL:`, `- Page Title:` and
//! `- Page Snapshot:` + ```yaml (incremental from 0.0.51), `### Result`.

use super::model::Observation;
use super::pw_common::{
    build, has_heading, scan, Depth, PlaywrightEra, H_PAGE, H_PAGE_STATE, H_SNAPSHOT,
};

/// Name of this format.
pub(crate) const NAME: &str = "playwright-mcp-0.0.32";

/// Detector for Playwright MCP 0.0.32 to 0.0.56.
pub(crate) const ERA: PlaywrightEra = PlaywrightEra {
    name: NAME,
    parse_at,
};

fn parse_at(text: &str, depth: Depth) -> Option<Observation<'_>> {
    if !has_heading(text, "### Page state") {
        return None;
    }
    let scan = scan(text, depth);
    if scan.headings & H_PAGE_STATE == 0 || scan.headings & (H_PAGE | H_SNAPSHOT) != 0 {
        return None;
    }
    build(NAME, scan, depth, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::model::ObservationFormat;
    use crate::observation::{aria, TreeKind};

    /// Playwright MCP 0.0.41, `order` call_8 (fixtures/pwmcp-0.0.41): fenced code.
    const PLACED: &str = r##"### Ran Playwright code
```js
await page.getByRole('button', { name: 'Place order' }).click();
```

### Page state
- Page URL: http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue
- Page Title: Order placed
- Page Snapshot:
```yaml
- generic [active] [ref=e1]:
  - heading "Order placed" [level=1] [ref=e2]
  - paragraph [ref=e3]: "Confirmation number: WX-1001 (3 x Blue, total $64.50)"
  - paragraph [ref=e4]: No other open order with the same items.
  - paragraph [ref=e6]:
    - button "Cancel this order" [ref=e7]
  - paragraph
  - list [ref=e8]:
    - listitem [ref=e9]: "Estimated delivery: 14 March 2025"
    - listitem [ref=e10]:
      - link "Place another order" [ref=e11] [cursor=pointer]:
        - /url: form.html
```
"##;

    /// 0.0.56 `order` call_10: bare code and an incremental snapshot.
    const CANCELLED_DIFF: &str = r##"### Ran Playwright code
await page.getByRole('button', { name: 'Cancel this order' }).click();

### Page state
- Page URL: http://127.0.0.1:8431/order/done.html?name=Ada+Lovelace&qty=3&colour=Blue
- Page Title: Order placed
- Page Snapshot:
```yaml
- <changed> generic [ref=e1]:
  - ref=e2 [unchanged]
  - ref=e3 [unchanged]
  - ref=e4 [unchanged]
  - paragraph [ref=e6]:
    - button "Cancel this order" [active] [ref=e7]
  - paragraph [ref=e14]: Order WX-1001 has been cancelled.
  - ref=e8 [unchanged]
```
"##;

    /// 0.0.56 `order` call_6: a diff whose changed node is a control with options.
    const COLOUR_DIFF: &str = r##"### Ran Playwright code
await page.getByLabel('Colour Red Blue Green').selectOption(['Blue']);

### Page state
- Page URL: http://127.0.0.1:8431/order/form.html?name=Ada+Lovelace&qty=3&colour=Red
- Page Title: Order a widget
- Page Snapshot:
```yaml
- <changed> combobox "Colour" [ref=e13]:
  - option "Red"
  - option "Blue" [selected]
  - option "Green"
```
"##;

    /// 0.0.56 `tabs_iframe` call_4: tabs, no code.
    const DATASHEET: &str = r##"### Open tabs
- 0: [Links and new tabs] (http://127.0.0.1:8431/tabs/links.html)
- 1: (current) [Northwind H2 datasheet] (http://127.0.0.1:8431/tabs/datasheet.html)

### Page state
- Page URL: http://127.0.0.1:8431/tabs/datasheet.html
- Page Title: Northwind H2 datasheet
- Page Snapshot:
```yaml
- generic [active] [ref=e1]:
  - heading "Northwind H2 datasheet" [level=1] [ref=e2]
  - generic [ref=e3]:
    - term [ref=e10]: Operating temperature
    - definition [ref=e11]: "-20 to 50 °C"
```
"##;

    fn parse(text: &str) -> Option<Observation<'_>> {
        ERA.parse(text)
    }

    #[test]
    fn fenced_code_full_tree() {
        let obs = parse(PLACED).unwrap();
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Full));
        assert_eq!(
            obs.action.as_deref(),
            Some("await page.getByRole('button', { name: 'Place order' }).click();")
        );
        assert_eq!(obs.title.as_deref(), Some("Order placed"));
        let ids: Vec<_> = obs.refs.iter().map(|r| &*r.id).collect();
        assert_eq!(
            ids,
            ["e1", "e2", "e3", "e4", "e6", "e7", "e8", "e9", "e10", "e11"]
        );
        assert_eq!(
            (&*obs.refs[5].role, &*obs.refs[5].name),
            ("button", "Cancel this order")
        );
        assert_eq!(
            obs.chunks,
            [
                "Order placed",
                "Confirmation number: WX-1001 (3 x Blue, total $64.50)",
                "No other open order with the same items.",
                "Estimated delivery: 14 March 2025"
            ]
        );
        assert_eq!(aria::controls_of(&obs).len(), 2);
        assert_eq!(obs.document, None);
    }

    #[test]
    fn bare_code_and_diff() {
        let obs = parse(CANCELLED_DIFF).unwrap();
        assert_eq!(obs.kind, TreeKind::Diff);
        assert_eq!(
            obs.action.as_deref(),
            Some("await page.getByRole('button', { name: 'Cancel this order' }).click();")
        );
        let refs: Vec<_> = obs.refs.iter().map(|r| (&*r.id, &*r.role)).collect();
        assert_eq!(
            refs,
            [
                ("e1", "generic"),
                ("e2", ""),
                ("e3", ""),
                ("e4", ""),
                ("e6", "paragraph"),
                ("e7", "button"),
                ("e14", "paragraph"),
                ("e8", "")
            ]
        );
        assert_eq!(aria::controls_of(&obs)[0].states, Vec::<&str>::new());
        assert_eq!(obs.chunks, ["Order WX-1001 has been cancelled."]);
        assert!(obs.is_observation());
    }

    #[test]
    fn diff_of_a_control() {
        let obs = parse(COLOUR_DIFF).unwrap();
        assert_eq!(obs.kind, TreeKind::Diff);
        let controls = aria::controls_of(&obs);
        let c: Vec<_> = controls
            .iter()
            .map(|c| (&*c.role, &*c.name, c.states.len()))
            .collect();
        assert_eq!(
            c,
            [
                ("combobox", "Colour", 0),
                ("option", "Red", 0),
                ("option", "Blue", 1),
                ("option", "Green", 0)
            ]
        );
        assert_eq!(aria::controls_of(&obs)[2].states, ["selected"]);
    }

    #[test]
    fn tabs_zero_based() {
        let obs = parse(DATASHEET).unwrap();
        assert_eq!(obs.action, None);
        assert_eq!(obs.tabs.len(), 2);
        assert_eq!(obs.tabs[0].index, 0);
        assert_eq!(obs.current_tab().map(|t| t.index), Some(1));
        assert_eq!(obs.tabs[0].title, "Links and new tabs");
        assert_eq!(
            obs.chunks,
            [
                "Northwind H2 datasheet",
                "Operating temperature",
                "-20 to 50 °C"
            ]
        );
    }

    #[test]
    fn not_a_page() {
        let code_only = "### Ran Playwright code\n```js\nawait page.getByRole('textbox', { name: 'Name' }).fill('Ada Lovelace');\n```\n";
        let bare_code_only = "### Ran Playwright code\nawait page.getByRole('button', { name: 'Apply coupon' }).click();\n";
        let tab_list = "### Open tabs\n- 0: (current) [Links and new tabs] (http://127.0.0.1:8431/tabs/links.html)\n";
        let error = "### Result\nError: Ref e13 not found in the current page snapshot. Try capturing new snapshot.";
        let headings = "### Ran Playwright code\n### Page state\n### Result\n";
        for text in [
            "",
            code_only,
            bare_code_only,
            tab_list,
            error,
            headings,
            PLACED.replace("### Page state", "### Page").as_str(),
        ] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn truncated_page_without_closing_fence() {
        let cut = PLACED.find("  - list [ref=e8]").unwrap();
        let obs = parse(&PLACED[..cut]).unwrap();
        assert_eq!(obs.refs.len(), 6);
        let cut = PLACED.find("```yaml").unwrap() + "```yaml".len();
        let obs = parse(&PLACED[..cut]).unwrap();
        assert!(obs.refs.is_empty());
        assert_eq!(obs.kind, TreeKind::Full);
        assert!(!obs.is_observation());
    }

    #[test]
    fn crlf() {
        let crlf = CANCELLED_DIFF.replace('\n', "\r\n");
        // The same observation, apart from the raw tree slice, which keeps its line ends.
        let without_tree = |o: Option<Observation<'_>>| {
            o.map(|mut o| {
                o.tree = None;
                format!("{o:?}")
            })
        };
        assert_eq!(
            without_tree(parse(&crlf)),
            without_tree(parse(CANCELLED_DIFF))
        );
    }

    #[test]
    fn snapshot() {
        insta::assert_debug_snapshot!("page_state_full", parse(PLACED));
        insta::assert_debug_snapshot!("page_state_diff", parse(CANCELLED_DIFF));
    }
}
