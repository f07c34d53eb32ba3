//! Collapses that pay (SPEC 9, C5): where the guard stands in front of the browser, a
//! collapse that would make the provider write again far more than it saves waits, and
//! waiting collapses are done together at one place once they pay. Checked turn by turn on
//! a coding agent's session: pages with shell output between them.

mod support;

use serde_json::{json, Value};
use staleguard::{Config, Projection, RequestFormat, Status};
use support::{messages, on};

/// A Playwright MCP 0.0.41 page of about `bytes` bytes at `url`.
fn page(url: &str, bytes: usize) -> String {
    support::playwright_page(url, url, bytes, |n| {
        format!("line {n} of the page at {url}, words to read")
    })
}

fn call(id: &str, name: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": name, "arguments": "{}"}}]})
}

fn result(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

/// Shell output of `bytes` bytes; `extra` is a line of it.
fn shell(bytes: usize, extra: &str) -> String {
    let mut text = format!("{extra}\n");
    while text.len() < bytes {
        text.push_str("drwxr-xr-x 2 user user 4096 Dec  2 10:00 some/folder/of/files\n");
    }
    text
}

const P1: usize = 2;
const P2: usize = 6;
const P3: usize = 10;

/// Three pages: P1 (10 KB), 30 KB of shell output, P2 (30 KB), 2 KB of it, P3 (1 KB), 1 KB.
fn session(tools: &[&str], shell_line: &str) -> Value {
    let declared: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t, "parameters": {}}}))
        .collect();
    json!({"model": "gpt-4.1", "tools": declared, "messages": [
        {"role": "user", "content": "Check the shop while I fix the build."},
        call("c1", "browser_navigate"),
        result("c1", &page("http://shop.test/a", 10_000)),
        call("c2", "bash"),
        result("c2", &shell(30_000, shell_line)),
        call("c3", "browser_click"),
        result("c3", &page("http://shop.test/b", 30_000)),
        call("c4", "bash"),
        result("c4", &shell(2_000, "")),
        call("c5", "browser_click"),
        result("c5", &page("http://shop.test/c", 1_000)),
        call("c6", "bash"),
        result("c6", &shell(1_000, "")),
    ]})
}

/// The session's request of every model turn: its first `k` messages, `k` before each
/// assistant message and the whole.
fn turns(body: &Value) -> Vec<String> {
    let all = body["messages"].as_array().expect("messages");
    let mut ends: Vec<usize> = (1..all.len())
        .filter(|&k| all[k]["role"] == "assistant")
        .collect();
    ends.push(all.len());
    ends.iter()
        .map(|&k| {
            let mut turn = body.clone();
            turn["messages"] = Value::Array(all[..k].to_vec());
            turn.to_string()
        })
        .collect()
}

fn project(body: &str, config: &Config) -> Projection {
    staleguard::project(
        body,
        RequestFormat::OpenAiChat,
        config,
        staleguard::Options::default(),
    )
    .expect("projection")
}

/// The status of the result in message `message`.
fn status(p: &Projection, message: usize) -> Option<Status> {
    let results = &p.report().results;
    results
        .iter()
        .find(|r| r.message == message)
        .map(|r| r.status)
}

/// Byte offset in `body` where message `message` starts. The bodies here are serde_json's
/// compact writing, so a message written again is found as it is.
fn message_start(body: &str, message: usize) -> usize {
    let v: Value = serde_json::from_str(body).expect("JSON");
    let text = serde_json::to_string(&v["messages"][message]).expect("message");
    body.find(&text)
        .unwrap_or_else(|| panic!("message {message} in the body"))
}

/// Where the next request may first differ from `p` (SPEC 9, C1): its live page state or
/// its newest browser result, whichever is first.
fn frozen_end(p: &Projection) -> usize {
    let results = &p.report().results;
    let live = results
        .iter()
        .filter(|r| r.status == Status::Live)
        .map(|r| r.message);
    let newest = results.last().map(|r| r.message);
    live.chain(newest)
        .min()
        .map_or(0, |message| message_start(&p.body, message))
}

/// `text` as it stands inside a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("string");
    quoted[1..quoted.len() - 1].to_string()
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[test]
fn a_page_followed_by_shell_output_waits_and_collapses_once_it_pays() {
    let body = session(
        &[
            "browser_navigate",
            "browser_click",
            "bash",
            "browser_history",
        ],
        "",
    );
    let config = on();
    let projected: Vec<Projection> = turns(&body).iter().map(|t| project(t, &config)).collect();
    let at = |turn: usize, message: usize| status(&projected[turn], message);
    // Turn 4 holds P2: P1 is older, followed by 30 KB of shell output, and waits.
    assert_eq!(at(3, P1), Some(Status::Waiting));
    assert_eq!(at(3, P2), Some(Status::Live));
    // Turn 5: still, as the shell output after P1 outweighs what P1 saves.
    assert_eq!(at(4, P1), Some(Status::Waiting));
    assert_eq!(at(4, P2), Some(Status::Live));
    assert_eq!(projected[4].report().batch, None);
    // Turn 6 holds P3: P1 and P2 together save more than what follows P1, so both collapse,
    // at one place, reported as the batch.
    assert_eq!(at(5, P1), Some(Status::Collapsed));
    assert_eq!(at(5, P2), Some(Status::Collapsed));
    assert_eq!(at(5, P3), Some(Status::Live));
    let batch = projected[5].report().batch;
    let p1_item = projected[5].report().results[0].item;
    assert_eq!(batch, Some(p1_item));
    // The full stale notice in the oldest collapsed observation, naming the guard's
    // `browser_history` as the way back (SPEC 2); waiting pages show whole.
    assert_eq!(
        projected[5].body.matches("refs are not actionable").count(),
        1
    );
    assert_eq!(
        projected[5]
            .body
            .matches(&json_escaped(staleguard::STALE_NOTICE_HISTORY))
            .count(),
        1
    );
    let waiting = messages(&projected[4].body)[P1]["content"].to_string();
    assert!(
        waiting.contains("http://shop.test/a") && !waiting.contains(staleguard::RECEIPT_TAG),
        "{waiting}"
    );
    // C1 on every turn: the next request repeats this one's bytes up to its live page, but
    // for the batch, which breaks it at P1 and nowhere before.
    for (k, pair) in projected.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        let need = match b.report().batch {
            Some(_) => message_start(&a.body, P1),
            None => frozen_end(a),
        };
        let same = common_prefix(&a.body, &b.body);
        assert!(same >= need, "turn {}: {same} < {need}", k + 2);
    }
    // The batch is the one break: the last turn changes nothing before its live page.
    assert_eq!(projected[6].report().batch, None);
    assert_eq!(
        messages(&projected[6].body)[P2],
        messages(&projected[5].body)[P2]
    );
}

#[test]
fn without_the_guard_every_older_page_collapses_at_once() {
    // No `browser_history` among the tools; the shell output naming it is no offer.
    let body = session(
        &["browser_navigate", "browser_click", "bash"],
        "browser_history",
    );
    let plain = on();
    let told_off = Config {
        guard_in_front: Some(false),
        ..on()
    };
    let guarded = session(&["browser_click", "browser_history"], "");
    let cases = [(&body, &plain), (&guarded, &told_off)];
    for (body, config) in cases {
        for turn in turns(body) {
            let p = project(&turn, config);
            let statuses = p.report().results.iter().map(|r| r.status);
            assert!(statuses.clone().all(|s| s != Status::Waiting), "{turn}");
            assert_eq!(p.report().batch, None);
            // The notice names no way back that the guard is not there to answer.
            assert!(!p.body.contains("Read one back"), "{}", p.body);
        }
    }
    // The config can say the guard stands in front where the request does not show it.
    let told_on = Config {
        guard_in_front: Some(true),
        ..on()
    };
    let last = turns(&body).pop().expect("turns");
    let p = project(&last, &told_on);
    assert_eq!(status(&p, P3), Some(Status::Live));
    let waiting = |p: &Projection| {
        p.report()
            .results
            .iter()
            .filter(|r| r.status == Status::Waiting)
            .count()
    };
    let third = &turns(&body)[3];
    assert_eq!(waiting(&project(third, &told_on)), 1);
    assert_eq!(waiting(&project(third, &plain)), 0);
}

#[test]
fn pages_between_few_bytes_collapse_at_once_under_the_guard() {
    // A browser agent's session: nothing but calls between pages. Under the guard, as without
    // it, every older page collapses as soon as the next arrives.
    let body = json!({"tools": [{"type": "function", "function": {"name": "browser_history"}}],
        "messages": [
        {"role": "user", "content": "Order a widget."},
        call("c1", "browser_navigate"),
        result("c1", &page("http://shop.test/a", 600)),
        call("c2", "browser_click"),
        result("c2", &page("http://shop.test/b", 600)),
        call("c3", "browser_click"),
        result("c3", &page("http://shop.test/c", 600)),
    ]});
    for turn in turns(&body) {
        let p = project(&turn, &on());
        let results = &p.report().results;
        let live = results.iter().filter(|r| r.status == Status::Live).count();
        assert!(live <= 1, "{turn}");
        assert!(
            results.iter().all(|r| r.status != Status::Waiting),
            "{turn}"
        );
    }
}
