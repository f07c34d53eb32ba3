//! Where facts are checked: each in the request that needs it, the answer's or the
//! follow-up's.

use serde_json::json;

use crate::harness::*;

#[test]
fn facts_are_checked_in_the_request_that_needs_them() {
    let page = |url: &str, title: &str, tree: &str| {
        format!("### Page\n- Page URL: {url}\n- Page Title: {title}\n### Snapshot\n```yaml\n{tree}\n```")
    };
    let call = |id: &str, name: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]})
    };
    let body = json!({"model": "gpt-4.1", "messages": [
        {"role": "user", "content": "What is the total due?"},
        call("call_1", "browser_navigate"),
        {"role": "tool", "tool_call_id": "call_1", "content": page("http://shop.test/", "Checkout",
            "- paragraph [ref=e1]: \"Total due: $5.00\"\n- paragraph [ref=e2]: Reference CODE-9\n- button \"Pay\" [ref=e3]")},
        call("call_2", "browser_click"),
        {"role": "tool", "tool_call_id": "call_2", "content": page("http://shop.test/done", "Thanks",
            "- heading \"Thanks\" [ref=e1]")},
        {"role": "assistant", "content": "The total due is $5.00. I saw it on the checkout page."},
        {"role": "user", "content": "What was the reference?"},
    ]});
    let dir = scratch("facts");
    let session = write_session(&dir, "checkout.openai.json", &body);
    let facts = dir.join("checkout.txt");
    std::fs::write(&facts, "$5.00\nCODE-9\nI saw it\n").unwrap();
    let v = &replay(&["--facts", facts.to_str().unwrap()], &[session])[0];
    let f = v["facts"].as_array().unwrap();
    assert_eq!(f.len(), 3);
    // The answer's fact: in the request that produced the answer (5 messages, turn 3), where
    // the checkout page is an older observation; newest-only has lost it there.
    assert_eq!(
        (
            &f[0]["fact"],
            &f[0]["needed_in"],
            &f[0]["turn"],
            &f[0]["request_messages"]
        ),
        (&json!("$5.00"), &json!("answer"), &json!(3), &json!(5))
    );
    assert!(present(&f[0], "none") && !present(&f[0], "newest-only"));
    // The follow-up's fact: in the last request, which carries the follow-up.
    assert_eq!(
        (&f[1]["needed_in"], &f[1]["turn"], &f[1]["request_messages"]),
        (&json!("follow-up"), &json!(4), &json!(7))
    );
    assert!(present(&f[1], "none") && !present(&f[1], "newest-only"));
    // Words that only the answer has are no page's fact: the answer itself does not count.
    assert_eq!(f[2]["needed_in"], "answer");
    assert!(STRATEGIES.iter().all(|s| !present(&f[2], s)), "{}", f[2]);
    let table = run(
        &["--facts", facts.to_str().unwrap()],
        &[dir.join("checkout.openai.json")],
    );
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("answer        3  yes   NO "), "{table}");
    std::fs::remove_dir_all(&dir).ok();
}
