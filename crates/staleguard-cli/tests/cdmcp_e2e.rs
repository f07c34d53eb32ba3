//! `staleguard mcp` in front of the real `chrome-devtools-mcp` 1.11.0 driving Debian's
//! Chromium through the shared test site. Its uids persist across snapshots of one document
//! and its action results carry no snapshot, so the guard refuses a uid after a navigation
//! that no snapshot has shown (taking one of its own first, with the call's `pageId`), and a
//! uid of another page. A missing browser or server package fails the test with what to
//! install.

mod mcp;

use mcp::{cdmcp_command, find_uid, is_error, text, Client, Site};
use serde_json::{json, Value};

fn ok(c: &Client, result: Value) -> Value {
    assert!(
        !is_error(&result),
        "unexpected tool error: {}\nstderr:\n{}",
        text(&result),
        c.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    );
    result
}

fn snapshot(c: &mut Client, page: u32) -> String {
    let r = c.call("take_snapshot", json!({"pageId": page}));
    let t = text(&ok(c, r));
    assert!(t.contains("## Latest page snapshot"), "{t}");
    t
}

fn click(c: &mut Client, page: u32, uid: &str) -> Value {
    c.call("click", json!({"pageId": page, "uid": uid}))
}

fn refused(result: &Value, what: &str) -> String {
    let t = text(result);
    assert!(is_error(result), "{what}: not refused: {t}");
    assert!(t.contains("staleguard refused this call"), "{what}: {t}");
    t
}

fn open(c: &mut Client, site: &Site, path: &str) -> String {
    let url = format!("{}/{path}", site.base);
    let r = c.call(
        "navigate_page",
        json!({"pageId": 1, "type": "url", "url": url}),
    );
    ok(c, r);
    snapshot(c, 1)
}

/// Fills the order form and reviews it: the confirm page's snapshot.
fn to_confirm(c: &mut Client, site: &Site) -> String {
    let form = open(c, site, "order/form.html");
    let elements = json!([
        {"uid": find_uid(&form, "textbox", "Name"), "value": "Ada Lovelace"},
        {"uid": find_uid(&form, "spinbutton", "Quantity"), "value": "3"},
    ]);
    let r = c.call("fill_form", json!({"pageId": 1, "elements": elements}));
    ok(c, r);
    let r = click(c, 1, &find_uid(&form, "button", "Review order"));
    assert!(text(&ok(c, r)).contains("Page navigated to"));
    let confirm = snapshot(c, 1);
    assert!(confirm.contains("Order total"), "{confirm}");
    confirm
}

fn stderr(c: &mut Client) -> String {
    let code = c.finish_keeping_stderr();
    let stderr = c.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(code, Some(0), "clean exit; stderr:\n{stderr}");
    stderr
}

/// The order flow of the recordings: "Place order" reused right after the click that
/// navigated is refused before it reaches the browser (the guard snapshots the new page
/// itself and finds the uid stale), the order stands and is not cancelled, and "Place
/// order" on the confirm page again, after going back, is refused as a repeat: no second
/// order.
#[test]
fn order_flow_stale_place_order_is_refused() {
    let site = Site::shared();
    let mut c = Client::guarded(&[], &cdmcp_command());
    assert_eq!(c.ref_key, "uid");
    let r = c.call("list_pages", json!({}));
    ok(&c, r);
    let confirm = to_confirm(&mut c, &site);
    let place = find_uid(&confirm, "button", "Place order");
    let r = click(&mut c, 1, &place);
    assert!(text(&ok(&c, r)).contains("order/done.html"));

    let t = refused(&click(&mut c, 1, &place), "stale Place order");
    assert!(t.contains(&place) && t.contains("stale"), "{t}");
    let done = snapshot(&mut c, 1);
    assert!(done.contains("WX-1001"), "the order was placed: {done}");
    assert!(
        !done.contains("cancelled"),
        "the order was cancelled: {done}"
    );

    let r = c.call("navigate_page", json!({"pageId": 1, "type": "back"}));
    ok(&c, r);
    let again = snapshot(&mut c, 1);
    let place2 = find_uid(&again, "button", "Place order");
    assert_ne!(place2, place, "a new document has new uids");
    let t = refused(&click(&mut c, 1, &place2), "second Place order");
    assert!(t.contains("repeats"), "{t}");
    let now = snapshot(&mut c, 1);
    assert!(
        now.contains("Confirm your order"),
        "still on confirm: {now}"
    );
    assert!(!now.contains("WX-1002"), "a second order: {now}");

    let log = stderr(&mut c);
    assert!(
        log.contains("taking a snapshot before the call"),
        "the guard took its own snapshot after the navigation: {log}"
    );
    assert!(log.contains("refused click"), "{log}");
}

/// A navigation, then a uid of the page before it: refused, and the refusal says which
/// page is current; a uid of the new page works.
#[test]
fn a_uid_from_before_a_navigation_is_refused() {
    let site = Site::shared();
    let mut c = Client::guarded(&[], &cdmcp_command());
    let form = open(&mut c, &site, "order/form.html");
    let review = find_uid(&form, "button", "Review order");
    let r = c.call(
        "navigate_page",
        json!({"pageId": 1, "type": "url", "url": format!("{}/tabs/links.html", site.base)}),
    );
    ok(&c, r);
    let t = refused(&click(&mut c, 1, &review), "uid from before the navigation");
    assert!(t.contains(&review), "{t}");
    let links = snapshot(&mut c, 1);
    let frame = find_uid(&links, "link", "Embedded newsletter (iframe)");
    let r = click(&mut c, 1, &frame);
    assert!(text(&ok(&c, r)).contains("frame.html"));
    stderr(&mut c);
}

/// Two pages: a uid of page 2 sent to page 1 is refused (the guard snapshots page 1 and
/// does not find it); a uid of page 1, after page 2 was snapshotted, is allowed once the
/// guard has seen page 1 again, and works.
#[test]
fn a_page_id_switch_scopes_uids() {
    let site = Site::shared();
    let mut c = Client::guarded(&[], &cdmcp_command());
    let links = open(&mut c, &site, "tabs/links.html");
    let r = c.call(
        "new_page",
        json!({"url": format!("{}/order/form.html", site.base)}),
    );
    let pages = text(&ok(&c, r));
    assert!(
        pages.contains("2: ") && pages.contains("[selected]"),
        "{pages}"
    );
    let form = snapshot(&mut c, 2);
    let name = find_uid(&form, "textbox", "Name");

    let t = refused(
        &c.call("fill", json!({"pageId": 1, "uid": name, "value": "Ada"})),
        "a uid of page 2 on page 1",
    );
    assert!(t.contains(&name), "{t}");

    let frame = find_uid(&links, "link", "Embedded newsletter (iframe)");
    let r = click(&mut c, 1, &frame);
    assert!(
        text(&ok(&c, r)).contains("frame.html"),
        "page 1's uid worked after the guard's own snapshot of page 1"
    );
    let log = stderr(&mut c);
    assert!(log.contains("taking a snapshot before the call"), "{log}");
}
