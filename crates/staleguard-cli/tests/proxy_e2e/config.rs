//! What the proxy's configuration changes: a lean live page (`./staleguard.toml`), and
//! compaction turned off.

use std::fs;

use serde_json::Value;

use crate::harness::*;

/// With `live_page = "lean"` (the proxy's `./staleguard.toml`), a large live page goes
/// upstream lean, as `staleguard project` makes it under the same file, and both the response
/// header and the log line say so.
#[test]
fn a_lean_live_page_is_forwarded_as_the_cli_makes_it_and_logged() {
    let work = Work::new("lean");
    fs::write(work.dir.join("staleguard.toml"), "live_page = \"lean\"\n").unwrap();
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let recorded = fs::read(fixture("pwmcp-0.0.41/long_page.openai.json")).unwrap();
    let mut body: Value = serde_json::from_slice(&recorded).unwrap();
    // The catalog's first snapshot (55 KB) as the live page.
    body["messages"].as_array_mut().unwrap().truncate(4);
    let bytes = body.to_string().into_bytes();
    let r = post_chat(proxy.port, &bytes);
    let said = r.header("x-staleguard").expect("x-staleguard");
    assert!(said.ends_with("; live_page=lean"), "{said}");
    assert!(
        said.contains("collapsed=0;"),
        "a lean page is no collapse: {said}"
    );
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    let sent = rec_body(&recs[0]).as_bytes();
    assert!(
        sent.len() * 4 < bytes.len(),
        "{} of {} bytes",
        sent.len(),
        bytes.len()
    );
    assert_same_bytes(&work, sent, &project(&work, &bytes), "lean long_page");
    let log = proxy.stop();
    assert!(log.contains("live_page=lean "), "{log}");
}

#[test]
fn compaction_off_forwards_the_sdk_body_unchanged() {
    let work = Work::new("compaction_off");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &[],
        &[("BROWSER_HISTORY_COMPACTION", "off")],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let out = clients(
        &work,
        &[
            sdk("openai-chat", &up.v1(), &chat, false),
            sdk("openai-chat", &proxy.v1(), &chat, false),
        ],
    );
    assert_ok(&out[1], "openai chat with compaction off");
    let recs = up.requests();
    assert_same_bytes(
        &work,
        rec_body(&recs[1]).as_bytes(),
        rec_body(&recs[0]).as_bytes(),
        "compaction off",
    );
    assert!(
        !proxy.log_text().trim().is_empty(),
        "no start-up line on stderr"
    );
}
