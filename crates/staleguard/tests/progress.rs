//! SPEC 4 and 5: fingerprints, no-progress guidance, repeated submissions and the guard,
//! on the seed system's cases, the recorded sessions and generated transcripts.

mod support;

use proptest::prelude::*;
use serde_json::Value;
use staleguard::internal::progress;
use staleguard::GUIDANCE_HEADER;
use staleguard::{Refusal, Verdict};
use support::*;

fn seed_form(n: u32, quantity: u32) -> String {
    format!(
        "Current snapshot:\n# Order a widget — https://shop.example/order\n- [ref=1-0-{n}1] textbox Name (type=text, value=Ada)\n- [ref=1-0-{n}2] spinbutton Quantity (type=number, value={quantity})\n- [ref=1-0-{n}4] button Review order\nVisible page text (not action refs): Order a widget.\nObservation: 00000000-0000-4000-8000-00000000000{n}"
    )
}

fn guidance_of(p: &staleguard::Projection) -> Option<String> {
    let i = appended_message(p)?;
    let parts = messages(&p.body)[i]["content"].as_array()?.clone();
    parts
        .iter()
        .filter_map(|p| p["text"].as_str())
        .find(|t| t.starts_with(GUIDANCE_HEADER))
        .map(str::to_string)
}

#[test]
fn seed_renumbered_pages_stall_and_a_changed_value_clears_it() {
    let steps: Vec<(&str, String)> = (1..=4).map(|n| ("browser", seed_form(n, 1))).collect();
    let steps_ref: Vec<(&str, &str)> = steps.iter().map(|(t, s)| (*t, s.as_str())).collect();
    let body = chat_session(&steps_ref, "Is it done?");
    let p = project(&body);
    check_invariants(&body, &p);
    let guidance = guidance_of(&p).expect("stalled: guidance appended");
    for needle in [
        "has not changed",
        "Read back the requested outcome",
        "different method",
        "hand control",
        "Do not repeat a possible submission",
    ] {
        assert!(guidance.contains(needle), "{needle}: {guidance}");
    }
    let progress = support::track(&transcript(&body), &on());
    let counts: Vec<u32> = progress.steps.iter().map(|s| s.no_progress).collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    assert!(progress.stalled());

    let mut more = steps_ref.clone();
    let changed = seed_form(5, 2);
    more.push(("browser", &changed));
    let body = chat_session(&more, "Is it done?");
    let p = project(&body);
    assert!(guidance_of(&p).is_none(), "a changed quantity is progress");
    assert!(!support::track(&transcript(&body), &on()).stalled());
}

fn recorded(version: &str, scenario: &str) -> String {
    read(&fixtures().join(format!("pwmcp-{version}/{scenario}.openai.json")))
}

const VERSIONS: [&str; 4] = ["0.0.30", "0.0.41", "0.0.56", "0.0.83"];

#[test]
fn invalid_form_ends_stalled_with_guidance() {
    for v in VERSIONS {
        let body = recorded(v, "invalid_form");
        let p = project(&body);
        check_invariants(&body, &p);
        assert!(
            guidance_of(&p).is_some(),
            "{v}: the same invalid coupon four times must stall"
        );
    }
}

#[test]
fn research_and_tabs_never_stall() {
    for v in VERSIONS {
        for scenario in ["research", "tabs_iframe"] {
            let body = recorded(v, scenario);
            let progress = support::track(&transcript(&body), &on());
            let worst = progress
                .steps
                .iter()
                .map(|s| s.no_progress)
                .max()
                .unwrap_or(0);
            assert!(
                progress.steps.iter().all(|s| !s.stalled),
                "{v} {scenario}: stalled (max count {worst})"
            );
            assert!(guidance_of(&project(&body)).is_none());
        }
    }
}

/// The call items of a transcript with their tool names and the target's description.
fn calls(body: &str) -> Vec<(usize, String, String)> {
    let t = transcript(body);
    t.items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            staleguard::internal::transcript::Item::Call(c) => {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                Some((
                    i,
                    c.name.to_string(),
                    args["element"].as_str().unwrap_or("").to_string(),
                ))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn rerender_refresh_is_no_progress_and_load_more_is_progress() {
    for v in VERSIONS {
        let body = recorded(v, "rerender");
        let t = transcript(&body);
        let progress = support::track(&t, &on());
        let verdicts = calls(&body);
        let step_after = |call_item: usize| {
            progress
                .steps
                .iter()
                .find(|s| s.item > call_item)
                .expect("a result")
        };
        let (mut refreshes, mut loads) = (Vec::new(), Vec::new());
        for (i, _, element) in &verdicts {
            if element.starts_with("Refresh list") {
                refreshes.push(step_after(*i).no_progress);
            }
            if element.starts_with("Load more") {
                // The page it changed shows in the next tree: a file-linked result (0.0.83)
                // has none, and the snapshot after it does.
                let next_action = verdicts
                    .iter()
                    .filter(|c| !c.2.is_empty())
                    .map(|c| c.0)
                    .find(|&j| j > *i);
                let seen = progress
                    .steps
                    .iter()
                    .filter(|s| s.item > *i && next_action.is_none_or(|j| s.item < j));
                loads.push(seen.map(|s| s.no_progress).min().unwrap_or(u32::MAX));
            }
        }
        assert_eq!(refreshes.len(), 2, "{v}");
        assert!(
            refreshes[1] > refreshes[0],
            "{v}: the second identical re-render is no progress: {refreshes:?}"
        );
        assert!(
            !loads.is_empty() && loads.iter().all(|n| *n == 0),
            "{v}: Load more is progress: {loads:?}"
        );
    }
}

#[test]
fn order_stale_place_order_is_refused_and_the_second_submission_flagged() {
    for v in VERSIONS {
        let body = recorded(v, "order");
        let t = transcript(&body);
        let verdicts = support::verdicts(&t, &on());
        let place_orders: Vec<(usize, &Verdict)> = calls(&body)
            .iter()
            .filter(|(_, _, element)| element.starts_with("Place order"))
            .filter_map(|(i, _, _)| {
                verdicts
                    .iter()
                    .find(|(at, _)| at == i)
                    .map(|(at, v)| (*at, v))
            })
            .collect();
        assert_eq!(
            place_orders.len(),
            3,
            "{v}: the first order, the stale reuse, the second order"
        );
        assert!(
            place_orders[0].1.is_allowed(),
            "{v}: a ref from the newest page, described by its own name"
        );
        match place_orders[1].1 {
            Verdict::Refuse { why, message } => {
                assert!(
                    matches!(
                        why,
                        Refusal::ReusedRef | Refusal::StaleRef | Refusal::NeedsSnapshot
                    ),
                    "{v}: {why:?}"
                );
                if v != "0.0.83" {
                    assert_eq!(*why, Refusal::ReusedRef, "{v}");
                    assert!(
                        message.contains("Cancel this order") && message.contains("Place order"),
                        "{message}"
                    );
                }
            }
            other => panic!("{v}: the stale Place order must be refused, got {other:?}"),
        }
        let progress = support::track(&t, &on());
        assert!(
            progress
                .repeated
                .iter()
                .any(|r| r.call == place_orders[2].0),
            "{v}: the second Place order after the confirmation page is flagged"
        );
    }
}

/// Renumbers every `eN` ref (`e5` -> `e1005`, `f2e5` -> `f2e1005`) in tool results.
fn renumber(body: &str) -> String {
    let mut v: Value = serde_json::from_str(body).unwrap();
    for m in v["messages"].as_array_mut().unwrap() {
        if let Some(text) = m["content"].as_str() {
            let mut out = String::new();
            let mut rest = text;
            while let Some(i) = rest.find("ref=") {
                out.push_str(&rest[..i + 4]);
                rest = &rest[i + 4..];
                let prefix_len = rest
                    .find('e')
                    .filter(|&e| rest[..e].chars().all(|c| c == 'f' || c.is_ascii_digit()))
                    .map_or(0, |e| e + 1);
                let digits = rest[prefix_len..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .count();
                if prefix_len > 0 && digits > 0 {
                    let n: u64 = rest[prefix_len..prefix_len + digits].parse().unwrap();
                    out.push_str(&rest[..prefix_len]);
                    out.push_str(&(n + 1000).to_string());
                    rest = &rest[prefix_len + digits..];
                }
            }
            out.push_str(rest);
            m["content"] = Value::String(out);
        }
    }
    v.to_string()
}

fn all_recorded() -> Vec<String> {
    let mut bodies = Vec::new();
    for v in VERSIONS {
        for s in SCENARIOS {
            bodies.push(recorded(v, s));
        }
    }
    bodies
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn renumbering_refs_changes_no_fingerprint(pick in 0..VERSIONS.len() * SCENARIOS.len()) {
        let body = &all_recorded()[pick];
        let renumbered = renumber(body);
        prop_assert_ne!(body, &renumbered);
        let a: Vec<_> = support::track(&transcript(body), &on()).steps.iter().map(|s| s.fingerprint).collect();
        let b: Vec<_> = support::track(&transcript(&renumbered), &on()).steps.iter().map(|s| s.fingerprint).collect();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn the_guard_never_refuses_a_ref_of_the_newest_observation(pick in 0..VERSIONS.len() * SCENARIOS.len(), cut in any::<prop::sample::Index>(), which in any::<prop::sample::Index>()) {
        let body = &all_recorded()[pick];
        let n = messages(body).len();
        let prefix = truncate(body, 1 + cut.index(n));
        let t = transcript(&prefix);
        let session = progress::replayed(&t, &on(), false);
        let page = progress::page_refs(&session);
        prop_assume!(!page.is_empty());
        let mut refs: Vec<_> = page.iter().collect();
        refs.sort_by(|a, b| a.0.cmp(b.0));
        let (id, element) = &refs[which.index(refs.len())];
        prop_assume!(!progress::is_submit_like(element));
        let args = serde_json::json!({"element": format!("{} {}", element.name, element.role), "ref": id, "target": id}).to_string();
        // The model has read the newest page's refs: no snapshot is missing.
        prop_assume!(!session.needs_snapshot(&args));
        let verdict = support::check(&t, "browser_click", &args, &on());
        prop_assert!(verdict.is_allowed(), "{id} {element:?}: {verdict:?}");
    }
}

#[test]
fn rerender_stale_ref_is_refused_in_every_version() {
    for v in VERSIONS {
        let body = recorded(v, "rerender");
        let t = transcript(&body);
        let verdicts = support::verdicts(&t, &on());
        // The model clicks "Details A-03" twice: first with the ref from before the refreshes.
        let details: Vec<&Verdict> = calls(&body)
            .iter()
            .filter(|(_, _, element)| element.starts_with("Details A-03"))
            .filter_map(|(i, _, _)| verdicts.iter().find(|(at, _)| at == i).map(|(_, v)| v))
            .collect();
        assert_eq!(details.len(), 2, "{v}");
        // In 0.0.83 the refresh's linked snapshot keeps the page and its document: the ref
        // is refused because the newest tree the model read no longer has it.
        match details[0] {
            Verdict::Refuse { why, .. } => assert_eq!(*why, Refusal::StaleRef, "{v}"),
            other => panic!("{v}: the ref from before the re-render must be refused: {other:?}"),
        }
        assert!(details[1].is_allowed(), "{v}: the fresh ref is allowed");
    }
}

/// The counting session (what guidance uses) gives the very steps of the full one on every
/// recorded session, the repository's own recordings and the seed format included.
#[test]
fn counting_steps_equal_full_tracking_everywhere() {
    let mut bodies: Vec<String> = openai_fixtures().iter().map(|p| read(p)).collect();
    bodies.extend(all_recorded());
    bodies.extend(all_recorded().iter().map(|b| renumber(b)));
    let mut steps = 0;
    for body in &bodies {
        let t = transcript(body);
        let full = support::track(&t, &on()).steps;
        let counted = support::steps(&t, &on()).steps;
        let key = |s: &staleguard::ProgressStep| (s.item, s.fingerprint, s.no_progress, s.stalled);
        assert_eq!(
            full.iter().map(key).collect::<Vec<_>>(),
            counted.iter().map(key).collect::<Vec<_>>()
        );
        steps += full.len();
    }
    assert!(steps > 300, "{steps} steps compared");
}

/// `browser_history` is staleguard's own tool: reading it acts on no page. Four reads after
/// a page are no browser steps (no stall guidance), and the page's refs stay actionable,
/// even though each read names an older page's URL and title.
#[test]
fn reading_browser_history_is_no_browser_step() {
    let body = recorded("0.0.41", "order");
    let results: Vec<String> = messages(&body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    let live = results
        .iter()
        .rfind(|t| t.contains("[ref="))
        .expect("a page");
    let old = results
        .iter()
        .find(|t| t.contains("Confirm order"))
        .expect("the confirm page");
    let archived = format!(
        "{} STALE observation 6480e3d7. This copy is read-only.\n{}",
        staleguard::ARCHIVE_TAG,
        staleguard::internal::refs::neutralise(old)
    );
    let mut steps = vec![("browser_snapshot", live.clone())];
    for _ in 0..4 {
        steps.push(("mcp__playwright__browser_history", archived.clone()));
    }
    let steps: Vec<(&str, &str)> = steps.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let session = chat_session(&steps, "What was the order total?");
    let p = project(&session);
    assert_eq!(guidance_of(&p), None, "history reads drew stall guidance");
    assert_eq!(
        support::track(&transcript(&session), &on()).steps.len(),
        1,
        "one browser step: the snapshot"
    );
    let r = live
        .lines()
        .find_map(|l| Some(l.split("[ref=").nth(1)?.split(']').next()?.to_string()))
        .expect("a ref");
    let verdict = support::check(
        &transcript(&session),
        "browser_click",
        &format!("{{\"ref\":\"{r}\"}}"),
        &on(),
    );
    assert!(verdict.is_allowed(), "{verdict:?}");
}

/// Found by the `page_by_content` fuzz target: a page report, a navigation to another page,
/// the first page reported again, then a find. The navigation collapses to a receipt, which
/// names no tree; read as a step that left the page as it was, it made the projected request
/// count four unchanged steps and stall, where the original counted one. Projecting the
/// projected request must change nothing (SPEC 2), and progress depends on the observations
/// alone (SPEC 4).
#[test]
fn a_receipt_makes_no_stall_when_projected_again() {
    let report = "### Page\n- Page URL: http://127.0.0.1:8431/long/catalog.html\n- Page Title: Parts catalog\n### Snapshot\n- [Snapshot](.playwright-mcp/page-2026-12-02T10-42-27-865Z.yml)";
    let links = "### Page state\n- Page URL: http://127.0.0.1:8431/tabs/links.html\n- Page Title: Links and new tabs\n- Page Snapshot:\n```yaml\n- heading \"Links and new tabs\" [level=1] [ref=e2]\n- link \"Home\" [ref=e3] [cursor=pointer]:\n  - /url: index.html\n```";
    let find = "### Result\nFound 1 match for \"Hex bolt\":\n\n- row [ref=e14]:\n  - cell \"Hex bolt 100 mm\" [ref=e15]";
    let steps = [
        ("browser_click", report),
        ("browser_navigate", links),
        ("browser_click", report),
        ("browser_find", find),
    ];
    let body = chat_session(&steps, "Which parts match?");
    let p = project(&body);
    check_invariants(&body, &p);
    assert_eq!(p.report().collapsed(), 1, "the links page collapses");
    assert_eq!(guidance_of(&p), None, "one unchanged step is no stall");

    let again = project(&p.body);
    assert_eq!(guidance_of(&again), None, "a receipt is no unchanged page");
    assert_eq!(again.body, p.body, "idempotent");
    let counts = |body: &str| -> Vec<u32> {
        let progress = support::track(&transcript(body), &on());
        progress.steps.iter().map(|s| s.no_progress).collect()
    };
    assert_eq!(counts(&body), [0, 0, 0, 0], "a find is a look");
    assert_eq!(
        counts(&p.body),
        [0, 0, 0, 0],
        "the page after a receipt is unknown"
    );
}

/// The coupon page of the test site as `browser_snapshot` (0.0.83) shows it.
const COUPON_PAGE: &str = "### Page\n- Page URL: http://127.0.0.1:8431/rerender/coupon.html\n- Page Title: Apply a coupon\n### Snapshot\n```yaml\n- heading \"Apply a coupon\" [level=1] [ref=e2]\n- textbox \"Coupon code\" [ref=e10]\n- button \"Apply coupon\" [ref=e12]\n```";

/// Found by the `page_by_content` fuzz target: a stalled session whose newest browser
/// result is an old snapshot file read again. That read collapses to a receipt, which
/// replaces the result whole, so the guidance meant for it was never written; projected
/// again, the receipt needs no rewrite and the guidance was appended after it. Nothing of
/// ours rides on a collapsed result, on either pass (SPEC 2, idempotence).
#[test]
fn no_guidance_rides_on_a_collapsed_read_back() {
    let navigate = "### Ran Playwright code\n```js\nawait page.goto('http://127.0.0.1:8431/rerender/coupon.html');\n```\n### Page\n- Page URL: http://127.0.0.1:8431/rerender/coupon.html\n- Page Title: Apply a coupon\n### Snapshot\n- [Snapshot](.playwright-mcp/page-2026-11-30T08-09-26-584Z.yml)";
    let typed = "### Ran Playwright code\n```js\nawait page.getByRole('textbox', { name: 'Coupon code' }).fill('SPRING25');\n```";
    let read =
        "- heading \"Apply a coupon\" [level=1] [ref=e2]\n- button \"Apply coupon\" [ref=e12]";
    let older = r#"{"file_path":".playwright-mcp/page-2026-11-30T08-09-13-405Z.yml"}"#;
    let steps = [
        ("browser_navigate", "{}", navigate),
        ("browser_snapshot", "{}", COUPON_PAGE),
        ("browser_type", "{}", typed),
        ("browser_click", "{}", ""),
        ("browser_click", "{}", ""),
        ("read", older, read),
    ];
    let body = chat_calls(&steps, None);
    let counts = |body: &str| -> Vec<u32> {
        let progress = support::steps(&transcript(body), &on());
        progress.steps.iter().map(|s| s.no_progress).collect()
    };
    assert_eq!(counts(&body), [0, 0, 1, 2, 3, 3], "stalled at the read");

    let p = project(&body);
    check_invariants(&body, &p);
    let statuses: Vec<_> = p.report().results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses.last(),
        Some(&staleguard::Status::Collapsed),
        "an old file read again"
    );
    assert!(
        !p.body.contains(GUIDANCE_HEADER),
        "no guidance on a receipt"
    );

    let again = project(&p.body);
    assert!(
        !again.body.contains(GUIDANCE_HEADER),
        "none when projected again"
    );
    assert_eq!(again.body, p.body, "idempotent");
    let (first, second) = (counts(&body), counts(&p.body));
    assert!(
        first.iter().zip(&second).all(|(a, b)| b <= a),
        "no more unchanged steps projected: {first:?} {second:?}"
    );
}

/// SPEC 4: a snapshot file read back through a file tool and a `browser_find` are looks. They
/// show the page and count toward nothing, so an agent that reads the page back between its
/// actions stalls after as many unchanged actions as one that does not (it stalled after
/// two when reads counted).
#[test]
fn looks_count_toward_nothing() {
    let pressed = "### Ran Playwright code\n```js\nawait page.keyboard.press('Tab');\n```";
    let file = "- heading \"Apply a coupon\" [level=1] [ref=e2]\n- textbox \"Coupon code\" [ref=e10]\n- button \"Apply coupon\" [ref=e12]";
    let read = r#"{"file_path":".playwright-mcp/page-2026-11-30T08-09-26-584Z.yml"}"#;
    let find = "### Result\nFound 1 match for \"Apply\":\n\n- button \"Apply coupon\" [ref=e12]";
    let steps = [
        ("browser_snapshot", "{}", COUPON_PAGE),
        ("browser_press_key", "{}", pressed),
        ("Read", read, file),
        ("browser_press_key", "{}", pressed),
        ("browser_find", r#"{"text":"Apply"}"#, find),
        ("browser_find", r#"{"text":"Apply"}"#, find),
        ("browser_press_key", "{}", pressed),
    ];
    let progress = |n: usize| support::steps(&transcript(&chat_calls(&steps[..n], None)), &on());
    let whole = progress(steps.len());
    let looks: Vec<bool> = whole.steps.iter().map(|s| s.look).collect();
    assert_eq!(looks, [false, false, true, false, true, true, false]);
    let counts: Vec<u32> = whole.steps.iter().map(|s| s.no_progress).collect();
    assert_eq!(
        counts,
        [0, 1, 1, 2, 2, 2, 3],
        "looks neither count nor reset"
    );
    assert!(whole.stalled(), "three unchanged actions");
    for n in 1..steps.len() {
        assert!(!progress(n).stalled(), "no stall after {n} steps");
    }

    let p = project(&chat_calls(&steps, None));
    check_invariants(&chat_calls(&steps, None), &p);
    assert!(
        guidance_of(&p).is_some(),
        "guidance on the third unchanged action"
    );
    let before = chat_calls(&steps[..6], None);
    assert_eq!(
        guidance_of(&project(&before)),
        None,
        "none after two and three looks"
    );
}

/// A Playwright MCP 0.0.83 snapshot of `url` with a button "Checkout" at ref e5.
fn checkout_page(url: &str) -> String {
    format!(
        "### Page\n- Page URL: {url}\n- Page Title: Cart\n### Snapshot\n```yaml\n- generic [ref=e1]:\n  - heading \"Your cart\" [level=1] [ref=e2]\n  - button \"Checkout\" [ref=e5]\n```"
    )
}

/// A Playwright MCP 0.0.83 action result that links its page as a file.
fn linked(code: &str, url: &str) -> String {
    format!(
        "### Ran Playwright code\n```js\n{code}\n```\n### Page\n- Page URL: {url}\n- Page Title: Cart\n### Snapshot\n- [Snapshot](.playwright-mcp/page-1.yml)"
    )
}

/// The guard's verdict on a click of e5 ("Checkout button") after `steps`.
fn click_after(steps: &[(&str, &str, String)]) -> Verdict {
    let steps: Vec<(&str, &str, &str)> =
        steps.iter().map(|(n, a, t)| (*n, *a, t.as_str())).collect();
    let body = chat_calls(&steps, None);
    let args = r#"{"element":"Checkout button","ref":"e5"}"#;
    check(&transcript(&body), "browser_click", args, &on())
}

/// SPEC 5, what the transcript says read right (issue 44): a navigation to the same URL
/// and a closed browser make every earlier ref stale. A result of the navigation that only
/// names the page (Playwright MCP 0.0.83 links it as a file) read as "no navigation", and
/// the old ref went through (the server answered "Ref not found").
#[test]
fn a_navigation_to_the_same_url_and_a_closed_browser_leave_no_ref_live() {
    let url = "http://shop.test/cart";
    let goto = format!("await page.goto('{url}');");
    let nav = format!(r#"{{"url":"{url}"}}"#);
    let seen = ("browser_snapshot", "{}", checkout_page(url));
    assert!(click_after(std::slice::from_ref(&seen)).is_allowed());
    let again = ("browser_navigate", nav.as_str(), linked(&goto, url));
    let v = click_after(&[seen.clone(), again.clone()]);
    assert!(!v.is_allowed(), "navigated to the same URL: {v:?}");
    let closed = (
        "browser_close",
        "{}",
        "### Result\nNo open tabs. Navigate to a URL to create one.".to_string(),
    );
    let v = click_after(&[seen.clone(), closed.clone()]);
    assert!(!v.is_allowed(), "closed: {v:?}");
    let v = click_after(&[seen.clone(), closed, again.clone()]);
    assert!(!v.is_allowed(), "closed, then the same URL: {v:?}");
    // Behind an MCP prefix, as Claude Code and opencode name the tools.
    for prefixed in ["mcp__playwright__browser_close", "pw_browser_close"] {
        let closed = (prefixed, "{}", "### Result\nNo open tabs.".to_string());
        let v = click_after(&[seen.clone(), closed]);
        assert!(!v.is_allowed(), "{prefixed}: {v:?}");
    }
    // A snapshot after the navigation shows the refs again.
    let v = click_after(&[
        seen.clone(),
        again,
        ("browser_snapshot", "{}", checkout_page(url)),
    ]);
    assert!(v.is_allowed(), "{v:?}");
    // An action that only names the page it stays on keeps the refs.
    let typed = linked("await page.getByRole('textbox').fill('x');", url);
    assert!(click_after(&[seen, ("browser_type", "{}", typed)]).is_allowed());
}

/// A fragment that is a route of a single-page app (`#/basket`) names another page; one
/// that names a section (`#install`) does not.
#[test]
fn a_route_fragment_is_a_navigation_and_a_section_fragment_is_not() {
    let home = "http://shop.test/#/home";
    let seen = ("browser_snapshot", "{}", checkout_page(home));
    let click = |to: &str| {
        let code = "await page.getByRole('link').click();";
        click_after(&[seen.clone(), ("browser_click", "{}", linked(code, to))])
    };
    assert!(!click("http://shop.test/#/basket").is_allowed());
    assert!(!click("http://shop.test/#!/basket").is_allowed());
    assert!(click("http://shop.test/#/home").is_allowed());
    let page = "http://shop.test/docs";
    let seen = ("browser_snapshot", "{}", checkout_page(page));
    let code = "await page.getByRole('link').click();";
    let v = click_after(&[
        seen,
        (
            "browser_click",
            "{}",
            linked(code, "http://shop.test/docs#install"),
        ),
    ]);
    assert!(v.is_allowed(), "{v:?}");
}

/// SPEC 5: the server acts on the tab its result's page lines name. A click that opened a
/// second tab left `### Page` on the first while `### Open tabs` marked the second current;
/// the server went on acting on the first, and the guard, following the list, refused its
/// refs as stale (issue 44).
#[test]
fn the_page_lines_name_the_tab_the_server_acts_on() {
    let links = "http://shop.test/links";
    let seen = format!(
        "### Open tabs\n- 0: (current) [Links]({links})\n### Page\n- Page URL: {links}\n- Page Title: Links\n### Snapshot\n```yaml\n- generic [ref=e1]:\n  - link \"Datasheet\" [ref=e3]\n  - button \"Checkout\" [ref=e5]\n```"
    );
    let opened = format!(
        "### Ran Playwright code\n```js\nawait page.getByRole('link', {{ name: 'Datasheet' }}).click();\n```\n### Open tabs\n- 0: [Links]({links})\n- 1: (current) [Datasheet](http://shop.test/datasheet)\n### Page\n- Page URL: {links}\n- Page Title: Links\n"
    );
    let v = click_after(&[
        ("browser_snapshot", "{}", seen.clone()),
        ("browser_click", "{}", opened),
    ]);
    assert!(v.is_allowed(), "{v:?}");
    // Page lines that name the new tab leave the first tab's refs unseen.
    let moved = format!(
        "### Ran Playwright code\n```js\nawait page.getByRole('link', {{ name: 'Datasheet' }}).click();\n```\n### Open tabs\n- 0: [Links]({links})\n- 1: (current) [Datasheet](http://shop.test/datasheet)\n### Page\n- Page URL: http://shop.test/datasheet\n- Page Title: Datasheet\n"
    );
    let v = click_after(&[
        ("browser_snapshot", "{}", seen),
        ("browser_click", "{}", moved),
    ]);
    assert!(!v.is_allowed(), "{v:?}");
}
