//! The relay as a state machine: pass-through, ids, the guard's own snapshots, bad input,
//! bounded memory, and the recorded 0.0.41 session that cancelled an order.

use serde_json::{json, Value};
use staleguard::Config;
use staleguard_mcp::{McpConfig, Options, Output, Relay};

fn relay() -> Relay {
    Relay::new(Options::new(Config::default(), &McpConfig::default()))
}

fn line(v: &Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn to_client(out: &[Output]) -> Vec<Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::ToClient(l) => Some(serde_json::from_slice(l).expect("JSON to the client")),
            _ => None,
        })
        .collect()
}

fn to_server(out: &[Output]) -> Vec<Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::ToServer(l) => Some(serde_json::from_slice(l).expect("JSON to the server")),
            _ => None,
        })
        .collect()
}

fn call(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn result(id: Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
}

fn tree(url: &str, lines: &str) -> String {
    format!("### Page state\n- Page URL: {url}\n- Page Title: Shop\n- Page Snapshot:\n```yaml\n{lines}\n```")
}

fn report(url: &str) -> String {
    format!("### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n- [Snapshot](.playwright-mcp/page-1.yml)")
}

/// Valid JSON-RPC it does not act on passes byte for byte (a batch, or a server line that is
/// no JSON-RPC message, does not: `tests/faults.rs`).
#[test]
fn what_it_does_not_act_on_passes_byte_for_byte() {
    let mut r = relay();
    let client_lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc": "2.0", "id": "r-1", "result": {"roots": []}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_weather","arguments":{"ref":"e1"}}}"#,
        r#"{"jsonrpc":"2.0","id":10,"method":"resources/list"}"#,
    ];
    for l in client_lines {
        assert_eq!(
            r.from_client(l.as_bytes()),
            vec![Output::ToServer(l.as_bytes().to_vec())]
        );
    }
    let server_lines = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2099-01-01","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        r#"{"jsonrpc":"2.0","id":"r-1","method":"roots/list"}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"[ref=e1] sunny"}]}}"#,
    ];
    for l in server_lines {
        assert_eq!(
            r.from_server(l.as_bytes()),
            vec![Output::ToClient(l.as_bytes().to_vec())]
        );
    }
}

#[test]
fn ids_match_as_json_values() {
    let mut r = relay();
    r.from_client(&line(
        &json!({"jsonrpc": "2.0", "id": "7", "method": "tools/list"}),
    ));
    r.from_client(&line(&call(
        json!(7),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    let page = tree("http://a/", "- button \"Buy\" [ref=e1]");
    let out = to_client(&r.from_server(&line(&result(json!(7), &page))));
    assert_eq!(out[0]["id"], json!(7));
    assert!(out[0].to_string().contains("[ref=d1e1]"), "{}", out[0]);
    let tools =
        json!({"jsonrpc": "2.0", "id": "7", "result": {"tools": [{"name": "browser_click"}]}});
    let out = to_client(&r.from_server(&line(&tools)));
    assert_eq!(out[0]["id"], json!("7"));
    assert_eq!(
        out[0]["result"]["tools"][1]["name"],
        json!("browser_history")
    );
}

#[test]
fn a_paged_tool_list_gets_the_tool_on_its_last_page() {
    let mut r = relay();
    r.from_client(&line(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ));
    let first = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "p2"}});
    assert_eq!(
        r.from_server(&line(&first)),
        vec![Output::ToClient(line(&first))]
    );
    r.from_client(&line(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "p2"}}),
    ));
    let last =
        json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "browser_history"}]}});
    // The server has its own browser_history: the relay leaves the name to it.
    assert_eq!(
        r.from_server(&line(&last)),
        vec![Output::ToClient(line(&last))]
    );
    let own = line(&call(json!(3), "browser_history", json!({})));
    assert_eq!(r.from_client(&own), vec![Output::ToServer(own.clone())]);
}

#[test]
fn malformed_lines_get_a_parse_error_and_the_session_goes_on() {
    let mut r = relay();
    let out = to_client(&r.from_client(b"{\"jsonrpc\": \"2.0\", \"id\": 1, "));
    assert_eq!(out[0]["error"]["code"], json!(-32700));
    assert_eq!(out[0]["id"], Value::Null);
    assert!(r.from_client(b"   ").is_empty(), "blank lines are dropped");
    let ping = br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(r.from_client(ping), vec![Output::ToServer(ping.to_vec())]);
}

/// A relay whose newest page is a file-linked report: its refs are unknown.
fn on_file_linked_page() -> Relay {
    let mut r = relay();
    r.from_client(&line(&call(
        json!(1),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    r.from_server(&line(&result(json!(1), &report("http://a/"))));
    r
}

/// A relay holding click #2 (`target: e2`) on a file-linked page, and its own request id.
fn holding_a_click() -> (Relay, Value) {
    let mut r = on_file_linked_page();
    let out = r.from_client(&line(&call(
        json!(2),
        "browser_click",
        json!({"target": "e2"}),
    )));
    let own_id = to_server(&out)[0]["id"].clone();
    (r, own_id)
}

/// A file-linked page: the guard asks for a snapshot of its own, holds the call and every
/// line behind it, and never shows its own request to the client.
#[test]
fn file_linked_pages_get_a_fresh_snapshot_first() {
    let mut r = on_file_linked_page();
    // The model read the refs from the snapshot file: raw refs.
    let click = call(
        json!(2),
        "browser_click",
        json!({"element": "Buy button", "target": "e2"}),
    );
    let out = r.from_client(&line(&click));
    let own = to_server(&out);
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["params"]["name"], json!("browser_snapshot"));
    let own_id = own[0]["id"].clone();
    assert!(to_client(&out).is_empty());
    let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    assert!(r.from_client(ping).is_empty(), "held behind the call");
    let fresh = tree("http://a/", "- button \"Buy\" [ref=e2]");
    let out = r.from_server(&line(&result(own_id.clone(), &fresh)));
    let forwarded = to_server(&out);
    assert_eq!(forwarded[0]["id"], json!(2));
    assert_eq!(forwarded[0]["params"]["arguments"]["target"], json!("e2"));
    assert_eq!(forwarded[1]["id"], json!(3), "then the held ping");
    assert!(
        to_client(&out).is_empty(),
        "the own snapshot is never shown"
    );
    // A stale ref after a navigation the model has not looked at.
    r.from_server(&line(&result(json!(2), &report("http://a/done"))));
    let out = r.from_client(&line(&call(
        json!(4),
        "browser_click",
        json!({"target": "e2"}),
    )));
    let own_id = to_server(&out)[0]["id"].clone();
    let done = tree("http://a/done", "- button \"Cancel this order\" [ref=e3]");
    let out = to_client(&r.from_server(&line(&result(own_id, &done))));
    assert_eq!(out[0]["id"], json!(4));
    assert_eq!(out[0]["result"]["isError"], json!(true), "{}", out[0]);
}

#[test]
fn a_failed_fresh_snapshot_refuses_the_call() {
    let (mut r, own_id) = holding_a_click();
    let error =
        json!({"jsonrpc": "2.0", "id": own_id, "error": {"code": -32603, "message": "closed"}});
    let out = to_client(&r.from_server(&line(&error)));
    assert_eq!(out[0]["id"], json!(2));
    let text = out[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(text.contains("fresh snapshot"), "{text}");
}

#[test]
fn memory_is_bounded() {
    let mut options = Options::new(Config::default(), &McpConfig::default());
    options.max_observations = 3;
    let mut r = Relay::new(options);
    for i in 0..10 {
        r.from_client(&line(&call(
            json!(i),
            "browser_navigate",
            json!({"url": format!("http://a/{i}")}),
        )));
        let page = tree(
            &format!("http://a/{i}"),
            &format!("- button \"B{i}\" [ref=e{i}]"),
        );
        r.from_server(&line(&result(json!(i), &page)));
    }
    assert!(r.session().history().len() <= 3);
    assert!(r.session().progress().steps.len() <= 3);
    let out = to_client(&r.from_client(&line(&call(json!(99), "browser_history", json!({})))));
    let list = out[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert_eq!(
        list.lines().filter(|l| l.starts_with("- ")).count(),
        3,
        "{list}"
    );
    assert!(
        list.contains("http://a/9") && !list.contains("http://a/6"),
        "{list}"
    );
}

/// The JSON-RPC lines of the recorded 0.0.41 `order` session.
fn recorded_order() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/pwmcp-0.0.41/order.mcp.jsonl"
    );
    std::fs::read_to_string(path).expect("the 0.0.41 order recording")
}

/// The recorded 0.0.41 session, replayed through the relay with the recorded client's raw
/// refs: the call that cancelled the order, and the second "Place order", never reach the
/// server.
#[test]
fn the_recorded_order_session_loses_no_order() {
    let text = recorded_order();
    let mut r = relay();
    let mut forwarded = std::collections::HashSet::new();
    let mut refused = Vec::new();
    for l in text.lines() {
        let record: Value = serde_json::from_str(l).expect("record");
        let msg = &record["msg"];
        if record["dir"] == "client->server" {
            let out = r.from_client(&line(msg));
            for m in to_server(&out) {
                forwarded.insert(m["id"].to_string());
            }
            for m in to_client(&out) {
                refused.push((
                    m["id"].clone(),
                    m["result"]["content"][0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ));
            }
        } else if msg.get("method").is_some() || forwarded.contains(&msg["id"].to_string()) {
            r.from_server(&line(msg));
        }
    }
    let ids: Vec<&Value> = refused.iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [&json!(11), &json!(13)], "{refused:?}");
    assert!(
        refused[0].1.contains("Cancel this order"),
        "{}",
        refused[0].1
    );
    assert!(refused[1].1.contains("repeats"), "{}", refused[1].1);
}

/// Issue 41: text in any script right against a URL, in every text the relay reads (a
/// call's description and typed text, the pages' text, names and titles): the recorded
/// session so rewritten is relayed as the recorded one is: the same two calls refused, the
/// same answers, and no internal error.
#[test]
fn the_recorded_order_with_chinese_against_urls_loses_no_order() {
    let zh = "打开http://127.0.0.1:8431/order/form.html";
    let recorded = recorded_order();
    let text = recorded
        .replace("Ada Lovelace", &format!("Ada Lovelace {zh}然后"))
        .replace("Place order button", &format!("Place order button →{zh}"))
        .replace(
            "Confirm your order",
            &format!("确认订单{zh} Confirm your order"),
        );
    assert!(text.matches(zh).count() > 10);
    let english = relayed(&recorded);
    let chinese = relayed(&text);
    assert_eq!(chinese.0, [json!(11), json!(13)]);
    assert_eq!(chinese.0, english.0, "refused");
    assert_eq!(chinese.1, english.1, "answers and errors to the client");
    assert!(english.1 > 10);
    assert!(
        !chinese.2.iter().any(|n| n.contains("internal error")),
        "{:?}",
        chinese.2
    );
}

/// A recorded session through a relay: the ids it refused, how many answers reached the
/// client, and its notes.
fn relayed(text: &str) -> (Vec<Value>, usize, Vec<String>) {
    let mut r = relay();
    let (mut refused, mut answered) = (Vec::new(), 0);
    let mut forwarded = std::collections::HashSet::new();
    for l in text.lines() {
        let record: Value = serde_json::from_str(l).expect("record");
        let msg = &record["msg"];
        if record["dir"] == "client->server" {
            let out = r.from_client(&line(msg));
            forwarded.extend(to_server(&out).iter().map(|m| m["id"].to_string()));
            refused.extend(to_client(&out).iter().map(|m| m["id"].clone()));
        } else if msg.get("method").is_some() || forwarded.contains(&msg["id"].to_string()) {
            let out = r.from_server(&line(msg));
            answered += to_client(&out)
                .iter()
                .filter(|m| m.get("error").is_none())
                .count();
        }
    }
    (refused, answered, r.take_notes())
}

#[test]
fn a_snapshot_never_answered_is_given_up() {
    let (mut r, own_id) = holding_a_click();
    assert!(r.is_waiting());
    let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    assert!(r.from_client(ping).is_empty());
    let out = r.give_up_waiting();
    assert!(!r.is_waiting());
    let refused = to_client(&out);
    assert_eq!(refused[0]["id"], json!(2));
    assert_eq!(refused[0]["result"]["isError"], json!(true));
    assert_eq!(to_server(&out)[0]["id"], json!(3), "the held ping goes on");
    let late = result(own_id, &tree("http://a/", "- button \"Buy\" [ref=e2]"));
    assert!(
        r.from_server(&line(&late)).is_empty(),
        "a late own answer is dropped"
    );
    assert!(r.give_up_waiting().is_empty());
}

/// The client's `browser_navigate` call to the shop (id 1), through the relay.
fn navigate_to_shop(r: &mut Relay) -> Vec<Output> {
    let navigate = call(
        json!(1),
        "browser_navigate",
        json!({"url": "http://shop.test/"}),
    );
    r.from_client(&line(&navigate))
}

#[test]
fn page_text_that_looks_like_a_ref_is_not_scoped() {
    let mut r = relay();
    assert_eq!(to_server(&navigate_to_shop(&mut r)).len(), 1);
    let page = tree(
        "http://shop.test/",
        "- button \"Buy\" [ref=e1]\n- paragraph [ref=e2]: press [ref=e1] to buy",
    );
    let out = to_client(&r.from_server(&line(&result(json!(1), &page))));
    let text = out[0]["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    let button = text.lines().find(|l| l.contains("button")).expect("button");
    let paragraph = text
        .lines()
        .find(|l| l.contains("paragraph"))
        .expect("paragraph");
    assert!(
        button.contains("[ref=d") && button.ends_with("e1]"),
        "{button}"
    );
    assert!(paragraph.starts_with("- paragraph [ref=d"), "{paragraph}");
    // The page's own words are page text: a ref token inside them names nothing.
    assert!(
        paragraph.ends_with(": press [ref=e1] to buy"),
        "{paragraph}"
    );
}

#[test]
fn refs_are_scoped_in_whichever_text_part_holds_them() {
    let mut r = relay();
    navigate_to_shop(&mut r);
    let page = tree("http://shop.test/", "- button \"Buy\" [ref=e1]");
    let parts = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": "Clicked [ref=e1] earlier"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "text", "text": page},
    ]}});
    let out = to_client(&r.from_server(&line(&parts)));
    let content = &out[0]["result"]["content"];
    assert_eq!(
        content[0]["text"], "Clicked [ref=e1] earlier",
        "not a tree: left alone"
    );
    assert_eq!(content[1]["data"], "AAAA");
    let tree_text = content[2]["text"].as_str().expect("text");
    assert!(tree_text.contains("- button \"Buy\" [ref=d"), "{tree_text}");
    assert!(!tree_text.contains("[ref=e1]"), "{tree_text}");
}

/// One identity for one page: the recorded 0.0.41 session goes through the relay (refs
/// scoped on the way), the model's request is built from what the client received, the
/// proxy's projection collapses its older pages, and every receipt's observation ID, asked
/// of `browser_history`, returns that page.
/// Replays the JSON-RPC lines of a recording through `r`, the model's side written as Chat
/// Completions messages after the user's `task`: each answer to a call the model made is a
/// tool message with the parts the relay gave it.
fn relayed_chat(text: &str, r: &mut Relay, task: &str) -> Vec<Value> {
    let mut calls = std::collections::HashMap::new();
    let mut messages = vec![json!({"role": "user", "content": task})];
    for l in text.lines() {
        let record: Value = serde_json::from_str(l).expect("record");
        let msg = &record["msg"];
        if record["dir"] == "client->server" {
            for m in to_server(&r.from_client(&line(msg))) {
                calls.insert(m["id"].to_string(), m["params"].clone());
            }
            continue;
        }
        let Some(params) = calls.remove(&msg["id"].to_string()) else {
            r.from_server(&line(msg));
            continue;
        };
        for answer in to_client(&r.from_server(&line(msg))) {
            let Some(parts) = answer["result"]["content"].as_array() else {
                continue;
            };
            let id = format!("call_{}", messages.len());
            messages.push(
                json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": id, "type": "function", "function": {
                    "name": params["name"], "arguments": params["arguments"].to_string()}}]}),
            );
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": parts}));
        }
    }
    messages
}

/// A Chat Completions body as the proxy projects it.
fn project_chat(body: &str, config: &Config) -> staleguard::Projection {
    let format = staleguard::RequestFormat::OpenAiChat;
    staleguard::project(body, format, config, staleguard::Options::default()).expect("projects")
}

#[test]
fn a_receipt_id_leads_to_its_page_in_browser_history() {
    let text = recorded_order();
    let mut r = relay();
    let messages = relayed_chat(&text, &mut r, "Order 3 widgets for Ada.");
    let body = json!({"model": "m", "messages": messages}).to_string();
    assert!(body.contains("[ref=d1e"), "the model was sent scoped refs");
    let config = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    let projected = project_chat(&body, &config);
    let collapsed: Vec<_> = projected
        .report()
        .results
        .iter()
        .filter(|res| res.status == staleguard::Status::Collapsed)
        .collect();
    assert!(collapsed.len() >= 3, "{} collapsed", collapsed.len());
    for (n, res) in collapsed.iter().enumerate() {
        let ask = call(
            json!(format!("h{n}")),
            "browser_history",
            json!({"id": &*res.observation_id}),
        );
        let out = to_client(&r.from_client(&line(&ask)));
        let page = out[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            page.starts_with("[staleguard archive]") && page.contains(&*res.observation_id),
            "receipt {} not in browser_history: {page:.200}",
            res.observation_id
        );
        let url = res.url.as_deref().unwrap_or("?");
        assert!(page.contains(url), "{url} not in {page:.300}");
    }
}

/// SPEC 2, "The way back": behind the guard, every fold of a lean page names the lines that
/// `browser_history` reads it back with, and they are the page's own lines, read-only.
#[test]
fn every_fold_of_a_lean_page_reads_back_through_browser_history() {
    let mut folds = 0;
    for name in [
        "django-secure_cookies",
        "sqlite-wal_mode",
        "git-fixup_commits",
    ] {
        let path = format!(
            "{}/../../fixtures/docsets/pwmcp-0.0.83/{name}.mcp.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("the docset recording");
        let mut r = relay();
        let mut messages = relayed_chat(&text, &mut r, "What does the page say?");
        // Up to the largest page, which is then the live one.
        let largest = (0..messages.len())
            .filter(|&i| messages[i]["role"] == "tool")
            .max_by_key(|&i| {
                messages[i]["content"][0]["text"]
                    .as_str()
                    .map_or(0, str::len)
            })
            .expect("a page");
        messages.truncate(largest + 1);
        let tools = json!([{"type": "function", "function": {"name": "browser_history"}}]);
        let body = json!({"model": "m", "messages": messages, "tools": tools}).to_string();
        let config = Config {
            live_page: staleguard::LivePage::Lean,
            ..Config::default()
        };
        let projected = project_chat(&body, &config);
        let sent: Value = serde_json::from_str(projected.body.as_str()).expect("JSON");
        let live = sent["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
            .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
            .unwrap_or_default();
        let markers: Vec<&str> = live
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with(staleguard::LEAN_FOLD_TAG))
            .collect();
        assert!(!markers.is_empty(), "{name}: the live page is lean");
        let id = markers[0]
            .split("with id \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("{name}: the first marker names the page: {}", markers[0]));
        let page = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"][0]["text"].as_str())
            .expect("the page as the relay sent it");
        let page_lines: Vec<&str> = page.split_inclusive('\n').collect();
        for marker in &markers {
            let range = marker
                .split("at lines ")
                .nth(1)
                .and_then(|rest| rest.split([';', ' ']).next())
                .unwrap_or_else(|| panic!("{name}: a marker without its lines: {marker}"));
            let (first, last) = range.split_once('-').expect("a range");
            let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
            let ask = call(
                json!(format!("fold{folds}")),
                "browser_history",
                json!({"id": id, "lines": range}),
            );
            folds += 1;
            let out = to_client(&r.from_client(&line(&ask)));
            let read = out[0]["result"]["content"][1]["text"]
                .as_str()
                .unwrap_or("");
            let expected = &page_lines[first - 1..last];
            let got: Vec<&str> = read.split_inclusive('\n').collect();
            assert_eq!(got.len(), expected.len(), "{name} {range}: {read:.300}");
            for (got, expected) in got.iter().zip(expected) {
                let expected = staleguard::internal::refs::neutralise(expected);
                assert_eq!(without_refs(got), without_refs(&expected), "{name} {range}");
            }
        }
    }
    assert!(folds >= 6, "{folds} folds read back");
}

/// A line with its ref tokens left out, live (`[ref=d1e2]`) or neutralised (`[ref:e2]`).
fn without_refs(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("[ref") {
        out.push_str(&rest[..at]);
        rest = rest[at..].split_once(']').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}

/// SPEC 4: `browser_find` is a look. Its results show the page but count toward nothing, so
/// the guidance comes with the third unchanged action, however many finds lie between (it
/// came with the second find when finds counted).
#[test]
fn finds_count_toward_nothing() {
    let mut r = relay();
    navigate_to_shop(&mut r);
    let page = tree("http://shop.test/", "- button \"Buy\" [ref=e1]");
    r.from_server(&line(&result(json!(1), &page)));
    let find = "### Result\nFound 1 match for \"Buy\":\n\n- button \"Buy\" [ref=e1]";
    let steps = [
        ("browser_press_key", &page[..]),
        ("browser_find", find),
        ("browser_find", find),
        ("browser_press_key", &page[..]),
        ("browser_find", find),
        ("browser_press_key", &page[..]),
    ];
    let mut guided = Vec::new();
    for (i, (name, text)) in steps.into_iter().enumerate() {
        let id = json!(i + 2);
        let forwarded = to_server(&r.from_client(&line(&call(id.clone(), name, json!({})))));
        assert_eq!(forwarded.len(), 1, "{name} reaches the server");
        let answer = to_client(&r.from_server(&line(&result(id, text))));
        let texts = answer[0]["result"]["content"].to_string();
        guided.push(texts.contains(staleguard::GUIDANCE_HEADER));
    }
    assert_eq!(guided, [false, false, false, false, false, true]);
}

/// `browser_history`'s answers are tool results: the list, an old page read-only (its refs
/// neutralised), and errors for an unknown or a wrongly typed id.
#[test]
fn history_answers_as_tool_results() {
    use staleguard::internal::refs::has_ref_token;
    use staleguard::{Archive, Memo, ResultText};
    use staleguard_mcp::history::answer;

    let page = |url: &str| {
        format!("### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```")
    };
    let mut archive = Archive::new(5);
    archive.record(&page("http://a/"), 1);
    archive.record(&page("http://b/"), 2);
    let list = answer(&archive, None, 2);
    assert!(list["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("http://b/"));
    let first = ResultText::read(page("http://a/"), &Memo::default());
    let old = answer(&archive, Some(&json!({"id": first.observation_id()})), 2);
    assert!(old["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("STALE"));
    assert!(!has_ref_token(old["content"][1]["text"].as_str().unwrap()));
    let unknown = answer(&archive, Some(&json!({"id": "x"})), 2);
    assert_eq!(unknown["isError"], json!(true));
    assert!(
        unknown["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("http://b/"),
        "an unknown id answers with the list: {unknown}"
    );
    assert_eq!(
        answer(&archive, Some(&json!({"id": 7})), 2)["isError"],
        json!(true)
    );
}

/// `browser_history` reads some lines of an observation, as a fold marker names them: those
/// lines alone, read-only, under a banner that says which; lines it cannot read answer with
/// the list.
#[test]
fn history_reads_the_lines_a_fold_names() {
    use staleguard::internal::refs::has_ref_token;
    use staleguard::{Archive, Memo, ResultText};
    use staleguard_mcp::history::answer;

    let text = "### Page\n- Page URL: http://a/\n- Page Title: Docs\n### Snapshot\n```yaml\n- paragraph [ref=e1]: First\n- paragraph [ref=e2]: Second\n- paragraph [ref=e3]: Third\n```";
    let mut archive = Archive::new(5);
    archive.record(text, 1);
    let id = ResultText::read(text.to_string(), &Memo::default())
        .observation_id()
        .to_string();
    let part = answer(&archive, Some(&json!({"id": id, "lines": "7-8"})), 1);
    let (banner, lines) = (
        part["content"][0]["text"].as_str().unwrap(),
        part["content"][1]["text"].as_str().unwrap(),
    );
    assert!(banner.contains("lines 7-8 of 9"), "{banner}");
    assert!(
        lines.contains("Second") && lines.contains("Third"),
        "{lines}"
    );
    assert!(!lines.contains("First") && !has_ref_token(lines), "{lines}");
    assert_eq!(part.get("isError"), None);
    // One line, as a number or a string; a range past the end stops at the last line.
    for (lines, expected) in [
        (json!(6), "First"),
        (json!("6"), "First"),
        (json!("9-400"), "```"),
    ] {
        let one = answer(&archive, Some(&json!({"id": id, "lines": lines})), 1);
        let got = one["content"][1]["text"].as_str().unwrap();
        assert!(got.contains(expected), "{lines}: {got}");
    }
    for wrong in [
        json!("0-3"),
        json!("10-12"),
        json!("8-7"),
        json!("all"),
        json!(true),
    ] {
        let answered = answer(&archive, Some(&json!({"id": id, "lines": wrong})), 1);
        assert_eq!(answered["isError"], json!(true), "{wrong}");
        let list = answered["content"][1]["text"].as_str().unwrap();
        assert!(
            list.contains(&id) && list.contains("http://a/"),
            "{wrong}: {list}"
        );
    }
}
