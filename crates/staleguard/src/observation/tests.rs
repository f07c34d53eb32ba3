//! Tests across formats: dispatch through [`FORMATS`] and robustness of [`parse`].

use proptest::prelude::*;

use super::*;

/// One real result per format, used for dispatch and as seeds for mutation.
const SAMPLES: &[(&str, &str)] = &[
    (
        pw_find::NAME,
        "### Result\nFound 1 match for \"Back\":\n\n- generic [active] [ref=e1]:\n  ...\n  - paragraph [ref=e1211]:\n    - link \"Back to top\" [ref=e1212] [cursor=pointer]:",
    ),
    (
        snapshot_file::NAME,
        "     1\u{2192}- generic [active] [ref=f2e1]:\n     2\u{2192}  - heading \"Order a widget\" [level=1] [ref=f2e2]\n     3\u{2192}  - button \"Review order\" [ref=f2e15]\n",
    ),
    (
        pw_page::NAME,
        "### Ran Playwright code\n```js\nawait page.getByRole('link', { name: 'Open the H2 datasheet' }).click();\n```\n### Open tabs\n- 0: (current) [Links and new tabs](http://127.0.0.1:8431/tabs/links.html)\n- 1: [Northwind H2 datasheet](http://127.0.0.1:8431/tabs/datasheet.html)\n### Page\n- Page URL: http://127.0.0.1:8431/tabs/links.html\n- Page Title: Links and new tabs\n### Snapshot\n```yaml\n- generic [ref=f1e1]:\n  - heading \"3 results for \\\"home battery\\\"\" [level=1] [ref=f1e2]\n  - 'link \"Review: Northwind H2 home battery\" [ref=f1e8] [cursor=pointer]':\n    - /url: articles/northwind-h2-review.html\n  - paragraph [ref=f1e9]: \"-20 to 50 °C\"\n  - textbox \"Name\" [ref=f1e7]: Ada Lovelace\n```",
    ),
    (
        pw_page_state::NAME,
        "### Ran Playwright code\nawait page.getByRole('button', { name: 'Cancel this order' }).click();\n\n### Page state\n- Page URL: http://127.0.0.1:8431/order/done.html\n- Page Title: Order placed\n- Page Snapshot:\n```yaml\n- <changed> generic [ref=e1]:\n  - ref=e2 [unchanged]\n  - paragraph [ref=e6]:\n    - button \"Cancel this order\" [active] [ref=e7]\n  - paragraph [ref=e14]: Order WX-1001 has been cancelled.\n```\n",
    ),
    (
        pw_legacy::NAME,
        "- Ran Playwright code:\n```js\n// Click Place order button\nawait page.getByRole('button', { name: 'Place order' }).click();\n```\n\n- Page URL: http://127.0.0.1:8431/order/done.html\n- Page Title: Order placed\n- Page Snapshot\n```yaml\n- generic [active] [ref=e1]:\n  - heading \"This site can’t be reached\" [level=1] [ref=e2]\n  - checkbox \"Weekly digest\" [checked] [active] [ref=f1e6]\n  - listitem [ref=e10]: \"Estimated delivery: 14 March 2025\"\n```\n",
    ),
    (
        ankita::NAME,
        "Filled 3 fields.\nCurrent snapshot:\n# Order a widget — https://shop.example/order\n- [ref=1-0-21] textbox Name (type=text, value=Ada)\n- [ref=1-0-24] button Review order\nVisible page text (not action refs): Order a widget. Price: $19.99 per widget.\nObservation: 00000000-0000-4000-8000-000000000002\n[UNVERIFIED: side effect needs a read-back check before claiming success.]",
    ),
    (
        agent_browser::NAME,
        "--- AGENT_BROWSER_PAGE_CONTENT nonce=0a origin=https://example.com ---\n- heading \"Example Domain\" [level=1, ref=e1]\n- StaticText \"It’s 20 °C\"\n- textbox \"Email\" [required, ref=e3]: ada@example.com\n- generic \"Card\" [ref=e5] clickable [cursor:pointer]\n--- END_AGENT_BROWSER_PAGE_CONTENT nonce=0a ---",
    ),
    (
        cdmcp::NAME,
        "Successfully clicked on the element\nPage navigated to http://127.0.0.1:8431/order/done.html.\n## Latest page snapshot\nuid=7_0 RootWebArea \"Order placed\" url=\"http://127.0.0.1:8431/order/done.html\"\n  uid=7_1 heading \"3 results for \"home battery\"\" level=\"1\"\n  uid=7_2 \"It’s 20 °C\"\n  uid=7_4 form\n    uid=7_5 button \"Cancel this order\" focusable focused\n    uid=7_6 checkbox \"Weekly digest\" checked\n\n",
    ),
];

#[test]
fn dispatch_picks_the_right_format() {
    for (name, text) in SAMPLES {
        let obs = parse(text).unwrap_or_else(|| panic!("{name} not recognised"));
        assert_eq!(obs.format, *name);
        assert!(obs.is_observation(), "{name}");
        assert_eq!(obs.images, 0);
    }
    let names: Vec<_> = FORMATS.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            pw_find::NAME,
            pw_page::NAME,
            pw_page_state::NAME,
            pw_legacy::NAME,
            ankita::NAME,
            snapshot_file::NAME,
            agent_browser::NAME,
            cdmcp::NAME
        ]
    );
}

#[test]
fn non_observations() {
    for text in [
        "",
        "\n\n",
        "### Page\n### Snapshot\n### Page state\n",
        "### Result\nError: Ref e13 not found in the current page snapshot. Try capturing new snapshot.",
        "notes.md\n- [ref=1-0-31] was the Place order button",
        "{\"type\":\"text\",\"text\":\"hello\"}",
        "```yaml\n- button \"Buy\" [ref=e1]\n```",
    ] {
        assert!(parse(text).is_none(), "{text:?}");
    }
}

/// Tokens that steer random input into the parsers' interesting paths.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "- ",
        "  ",
        "\n",
        "\r\n",
        "[ref=e1]",
        "[ref=",
        "]",
        "[",
        " [",
        "\"",
        "\\",
        "\\u",
        "\\ud83d",
        "'",
        "''",
        ":",
        ": ",
        "<changed> ",
        "ref=e4 [unchanged]",
        "button",
        "text",
        "heading",
        " \"Name\"",
        "### Page",
        "### Page state",
        "### Snapshot",
        "### Open tabs",
        "### Ran Playwright code",
        "- Page URL: ",
        "- Page Title: ",
        "- Page Snapshot",
        "```yaml",
        "```js",
        "```",
        "- 0: (current) [T](u)",
        "- 1: [T] (u)",
        "Current snapshot:",
        "# T — u",
        "- [ref=1-0-1] ",
        "(value=x)",
        "Visible page text (not action refs): ",
        "Observation: ",
        "°C",
        "’",
        "é",
        "f1e2",
        "/",
        " — ",
    ])
}

/// Truncates `s` to the char boundary at or before `at`.
fn cut(s: &str, at: usize) -> &str {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    &s[..at]
}

/// A header parse must tell exactly what a full parse tells about kind, refs and header.
fn header_agrees(text: &str) -> Result<(), TestCaseError> {
    let (full, header) = (parse(text), parse_header(text));
    prop_assert_eq!(full.is_some(), header.is_some(), "{:?}", text);
    if let (Some(f), Some(h)) = (full, header) {
        prop_assert_eq!((f.format, f.kind), (h.format, h.kind), "{:?}", text);
        prop_assert_eq!(f.refs.len(), h.ref_count(), "{:?}", text);
        prop_assert_eq!(
            (&f.url, &f.title, &f.action, &f.tabs),
            (&h.url, &h.title, &h.action, &h.tabs)
        );
    }
    Ok(())
}

#[test]
fn header_parse_agrees_on_every_sample() {
    for (name, text) in SAMPLES {
        header_agrees(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_token_soup(tokens in prop::collection::vec(token(), 0..64)) {
        let text = tokens.concat();
        header_agrees(&text)?;
        header_agrees(&format!("### Page\n- Page URL: x\n### Snapshot\n```yaml\n{text}\n```"))?;
    }

    #[test]
    fn never_panics_on_mutated_samples(
        sample in 0..SAMPLES.len(),
        at in any::<usize>(),
        len in 0usize..40,
        insert in "\\PC{0,8}",
        keep_tail in any::<bool>(),
    ) {
        let text = SAMPLES[sample].1;
        let head = cut(text, at % (text.len() + 1));
        let _ = parse(head);
        let tail_start = cut(text, head.len() + len).len();
        let mutated = format!("{head}{insert}{}", if keep_tail { &text[tail_start..] } else { "" });
        header_agrees(&mutated)?;
        header_agrees(&mutated.replace('\n', "\r\n"))?;
    }

    #[test]
    fn borrowed_refs_come_from_the_text(sample in 0..SAMPLES.len(), at in any::<usize>()) {
        let text = SAMPLES[sample].1;
        let head = cut(text, at % (text.len() + 1));
        if let Some(obs) = parse(head) {
            for r in &obs.refs {
                prop_assert!(head.contains(&*r.id));
                prop_assert!(!r.id.is_empty());
            }
        }
    }
}
