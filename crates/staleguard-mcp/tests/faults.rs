//! The relay under faults, without a process (issue 31): a server that is gone with calls
//! pending, garbage on the server's output, answers out of order around the guard's own
//! snapshot, malformed client messages, and cancellations. The same faults through the
//! `staleguard mcp` process are in `crates/staleguard-cli/tests/mcp_faults.rs`.

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

fn cancel(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}})
}

fn tree(url: &str, lines: &str) -> String {
    format!("### Page state\n- Page URL: {url}\n- Page Title: Shop\n- Page Snapshot:\n```yaml\n{lines}\n```")
}

fn report(url: &str) -> String {
    format!("### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n- [Snapshot](.playwright-mcp/page-1.yml)")
}

fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// A relay whose newest page is file-linked, holding click `id` (`ref: e2`) for its own
/// snapshot; returns the own request's id.
fn holding(r: &mut Relay, id: Value) -> Value {
    r.from_client(&line(&call(
        json!("nav"),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    r.from_server(&line(&result(json!("nav"), &report("http://a/"))));
    let out = r.from_client(&line(&call(id, "browser_click", json!({"ref": "e2"}))));
    assert!(r.is_waiting());
    to_server(&out)[0]["id"].clone()
}

#[test]
fn a_server_gone_answers_every_pending_request_in_order() {
    let mut r = relay();
    let sent = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
        call(json!("b"), "browser_navigate", json!({"url": "http://a/"})),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        call(json!(4), "get_weather", json!({})),
    ];
    for m in &sent {
        assert_eq!(to_server(&r.from_client(&line(m))).len(), 1);
    }
    // The server answers 1, and the client cancels 4: neither is answered again.
    r.from_server(&line(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
    r.from_client(&line(&cancel(json!(4))));
    let out = to_client(&r.server_exited("exited with status 3"));
    let ids: Vec<&Value> = out.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!("b"), &json!(3)]);
    for m in &out {
        assert_eq!(m["error"]["code"], json!(-32000), "{m}");
        let message = m["error"]["message"].as_str().unwrap();
        assert!(message.contains("exited with status 3"), "{message}");
        assert!(message.contains("browser MCP server"), "{message}");
    }
    // Later requests get the same answer at once; notifications and responses go nowhere.
    let late =
        to_client(&r.from_client(&line(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))));
    assert_eq!(late[0]["id"], json!(9));
    assert_eq!(late[0]["error"]["code"], json!(-32000));
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .is_empty());
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","id":"s1","result":{}}"#)
        .is_empty());
    assert!(r.server_exited("exited with status 3").is_empty());
}

#[test]
fn a_server_gone_answers_the_held_call_and_the_lines_behind_it() {
    let mut r = relay();
    r.from_client(&line(&call(json!(1), "fake_sleep", json!({}))));
    holding(&mut r, json!(2));
    // Behind the held call: a request, a notification, a malformed line, a cancelled request.
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        .is_empty());
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#)
        .is_empty());
    assert!(r.from_client(b"{oops").is_empty());
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .is_empty());
    assert!(r.from_client(&line(&cancel(json!(4)))).is_empty());
    let out = r.server_exited("was killed by signal 9 (SIGKILL)");
    assert!(to_server(&out).is_empty());
    let out = to_client(&out);
    let ids: Vec<&Value> = out.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3), &Value::Null]);
    assert!(out[1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("killed by signal 9 (SIGKILL)"));
    assert_eq!(out[3]["error"]["code"], json!(-32700));
    assert!(!r.is_waiting());
}

#[test]
fn garbage_from_the_server_is_dropped_and_described() {
    let mut r = relay();
    let garbage: [&[u8]; 7] = [
        b"Debugger listening on ws://127.0.0.1:9229/0f2c",
        br#"{"level":30,"msg":"server started"}"#,
        br#"{"jsonrpc":"2.0","id":"#,
        b"42",
        b"\x00\xff\xfe\x1b[31mred",
        b"[]",
        b"[1,2]",
    ];
    for g in garbage {
        assert!(
            r.from_server(g).is_empty(),
            "{:?}",
            String::from_utf8_lossy(g)
        );
    }
    assert!(r.from_server(b"  ").is_empty(), "blank lines are dropped");
    let dropped = r.take_dropped();
    assert_eq!(dropped.len(), garbage.len(), "{dropped:#?}");
    assert!(
        dropped[0].contains("not JSON (46 bytes: \"Debugger listening"),
        "{}",
        dropped[0]
    );
    assert!(
        dropped[1].contains("JSON but no JSON-RPC message"),
        "{}",
        dropped[1]
    );
    assert!(dropped[4].contains("\\0"), "escaped: {}", dropped[4]);
    assert!(r.take_dropped().is_empty());
    let long = vec![b'x'; 10_000];
    r.from_server(&long);
    let d = r.take_dropped();
    assert!(d[0].len() < 200 && d[0].ends_with("...)"), "{}", d[0]);
    // The relay goes on.
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(r.from_client(ping), vec![Output::ToServer(ping.to_vec())]);
    let pong = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    assert_eq!(r.from_server(pong), vec![Output::ToClient(pong.to_vec())]);
    let batch = br#"[{"jsonrpc":"2.0","method":"notifications/message"}]"#;
    assert_eq!(r.from_server(batch), vec![Output::ToClient(batch.to_vec())]);
}

#[test]
fn answers_out_of_order_reach_their_own_ids() {
    let mut r = relay();
    r.from_client(&line(&call(
        json!(1),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    r.from_client(&line(&call(json!(2), "browser_snapshot", json!({}))));
    r.from_client(&line(
        &json!({"jsonrpc": "2.0", "id": "2", "method": "tools/list"}),
    ));
    // Answered 2, "2", then 1, with notifications between.
    let page2 = tree("http://a/", "- button \"Two\" [ref=e1]");
    let out = to_client(&r.from_server(&line(&result(json!(2), &page2))));
    assert_eq!(out[0]["id"], json!(2));
    assert!(text(&out[0]).contains("[ref=d1e1]"), "{}", out[0]);
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}});
    assert_eq!(
        to_client(&r.from_server(&line(&note))),
        std::slice::from_ref(&note)
    );
    let tools =
        json!({"jsonrpc": "2.0", "id": "2", "result": {"tools": [{"name": "browser_click"}]}});
    let out = to_client(&r.from_server(&line(&tools)));
    assert_eq!(out[0]["id"], json!("2"));
    assert_eq!(
        out[0]["result"]["tools"][1]["name"],
        json!("browser_history")
    );
    let page1 = tree("http://a/", "- button \"One\" [ref=e1]");
    let out = to_client(&r.from_server(&line(&result(json!(1), &page1))));
    assert_eq!(out[0]["id"], json!(1));
    assert!(text(&out[0]).contains("One"));
}

/// A client request in flight with the id the guard's own snapshot would take, answered
/// before the own snapshot: each answer goes where it belongs, and the client never sees the
/// guard's request or its answer.
#[test]
fn own_requests_are_never_confused_with_the_clients() {
    let mut r = relay();
    let own_like = json!("staleguard-fresh-snapshot-1");
    r.from_client(&line(&call(own_like.clone(), "fake_sleep", json!({}))));
    let own_id = holding(&mut r, json!(7));
    assert_ne!(own_id, own_like, "the guard's id is not one in flight");
    // The client's request is answered first, then a notification, then the own snapshot.
    let out = to_client(&r.from_server(&line(&result(own_like.clone(), "slept"))));
    assert_eq!(out[0]["id"], own_like);
    assert_eq!(text(&out[0]), "slept");
    assert!(r.is_waiting(), "still waiting for its own snapshot");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
    assert_eq!(to_client(&r.from_server(&line(&note))).len(), 1);
    let fresh = tree("http://a/", "- button \"Buy\" [ref=e2]");
    let out = r.from_server(&line(&result(own_id.clone(), &fresh)));
    assert!(
        to_client(&out).is_empty(),
        "the own snapshot is never shown"
    );
    assert_eq!(to_server(&out)[0]["id"], json!(7), "the held click goes on");
    // A client request may not take the id of an own request whose answer is awaited.
    let (mut r, own_id) = {
        let mut r = relay();
        let own = holding(&mut r, json!(1));
        r.give_up_waiting();
        (r, own)
    };
    let out = to_client(&r.from_client(&line(&call(own_id.clone(), "fake_sleep", json!({})))));
    assert_eq!(out[0]["error"]["code"], json!(-32600), "{}", out[0]);
    assert!(r
        .from_server(&line(&result(own_id, &report("http://a/"))))
        .is_empty());
}

/// Each malformed message, what the client gets (`None`: nothing), and nothing reaches the
/// server.
#[test]
fn malformed_client_messages_get_the_errors_json_rpc_asks_for() {
    let cases: Vec<(String, Option<(i64, Value)>)> = vec![
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, ".into(), Some((-32700, Value::Null))),
        ("\u{0}\u{1}binary".into(), Some((-32700, Value::Null))),
        (format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000)), Some((-32700, Value::Null))),
        (r#"{"id":7,"method":"ping"}"#.into(), Some((-32600, json!(7)))),
        (r#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#.into(), Some((-32600, json!("x")))),
        (r#"{"jsonrpc":"2.0","id":8}"#.into(), Some((-32600, json!(8)))),
        (r#"{"jsonrpc":"2.0","id":9,"method":5}"#.into(), Some((-32600, json!(9)))),
        (r#"{"jsonrpc":"2.0","id":10,"method":"ping","params":"x"}"#.into(), Some((-32600, json!(10)))),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#.into(), Some((-32700, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","method":"notifications/x","params":3}"#.into(), Some((-32600, Value::Null))),
        (r#"{"method":"notifications/initialized"}"#.into(), Some((-32600, Value::Null))),
        (r#"{}"#.into(), Some((-32600, Value::Null))),
        (r#""a string""#.into(), Some((-32600, Value::Null))),
        (r#"null"#.into(), Some((-32600, Value::Null))),
        (r#"[]"#.into(), Some((-32600, Value::Null))),
        (r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}"#.into(), Some((-32602, json!(11)))),
        (r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"browser_click","arguments":"e1"}}"#.into(), Some((-32602, json!(12)))),
        (r#"{"jsonrpc":"2.0","id":13,"method":"tools/call"}"#.into(), Some((-32602, json!(13)))),
        (r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":[]}"#.into(), Some((-32602, json!(14)))),
        // A response that breaks the rules is never answered.
        (r#"{"id":5,"result":{}}"#.into(), None),
        (r#"{"jsonrpc":"2.0","id":5,"result":{},"error":{}}"#.into(), None),
        (r#"[{"jsonrpc":"2.0","method":"notifications/x"}]"#.into(), None),
    ];
    for (text, want) in cases {
        let mut r = relay();
        let out = r.from_client(text.as_bytes());
        assert!(to_server(&out).is_empty(), "{text:.80} reached the server");
        let got = to_client(&out);
        match want {
            None => assert!(got.is_empty(), "{text:.80}: {got:?}"),
            Some((code, id)) => {
                assert_eq!(got.len(), 1, "{text:.80}");
                assert_eq!(
                    got[0]["error"]["code"],
                    json!(code),
                    "{text:.80}: {}",
                    got[0]
                );
                assert_eq!(got[0]["id"], id, "{text:.80}: {}", got[0]);
                assert_eq!(got[0]["jsonrpc"], json!("2.0"));
            }
        }
    }
}

#[test]
fn a_batch_gets_one_error_per_request_in_it() {
    let mut r = relay();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "browser_click", "arguments": {"ref": "d9e1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "ping"},
        {"id": 3},
        {"jsonrpc": "2.0", "id": 4, "result": {}},
        7,
    ]);
    let out = r.from_client(&line(&batch));
    assert!(
        to_server(&out).is_empty(),
        "no part of a batch reaches the server"
    );
    let answer = &to_client(&out)[0];
    let ids: Vec<&Value> = answer
        .as_array()
        .expect("a batch of errors")
        .iter()
        .map(|e| &e["id"])
        .collect();
    assert_eq!(ids, [&json!(1), &json!("two"), &json!(3), &Value::Null]);
    assert!(answer[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no batches"));
}

/// Large ids that are integers of 64 bits or strings pass and come back as they were sent.
#[test]
fn large_valid_ids_round_trip() {
    for id in [
        json!(u64::MAX),
        json!(i64::MIN),
        json!("x".repeat(100_000)),
        json!("\u{e9}\u{6f22}\"\\"),
    ] {
        let mut r = relay();
        let request = call(id.clone(), "browser_navigate", json!({"url": "http://a/"}));
        let out = to_server(&r.from_client(&line(&request)));
        assert_eq!(out[0]["id"], id);
        let page = tree("http://a/", "- button \"Buy\" [ref=e1]");
        let out = to_client(&r.from_server(&line(&result(id.clone(), &page))));
        assert_eq!(out[0]["id"], id);
        assert!(
            text(&out[0]).contains("[ref=d1e1]"),
            "read as a browser result"
        );
        let refused =
            to_client(&r.from_client(&line(&call(id.clone(), "browser_history", json!({})))));
        assert_eq!(
            refused[0]["id"], id,
            "answered by the guard with the same id"
        );
    }
}

#[test]
fn a_request_with_an_id_in_flight_is_refused() {
    let mut r = relay();
    let first = call(json!(1), "browser_navigate", json!({"url": "http://a/"}));
    assert_eq!(to_server(&r.from_client(&line(&first))).len(), 1);
    let again = call(json!(1), "get_weather", json!({}));
    let out = r.from_client(&line(&again));
    assert!(to_server(&out).is_empty());
    assert_eq!(to_client(&out)[0]["error"]["code"], json!(-32600));
    let page = tree("http://a/", "- button \"Buy\" [ref=e1]");
    let out = to_client(&r.from_server(&line(&result(json!(1), &page))));
    assert!(
        text(&out[0]).contains("[ref=d1e1]"),
        "still read as the browser call"
    );
}

#[test]
fn a_cancelled_held_call_is_dropped_and_never_answered() {
    let mut r = relay();
    let own_id = holding(&mut r, json!(7));
    let ping = br#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;
    assert!(r.from_client(ping).is_empty(), "held behind the call");
    let out = r.from_client(&line(&cancel(json!(7))));
    assert!(!r.is_waiting());
    assert!(to_client(&out).is_empty());
    let sent = to_server(&out);
    assert_eq!(sent[0]["method"], json!("notifications/cancelled"));
    assert_eq!(
        sent[0]["params"]["requestId"], own_id,
        "its own snapshot is cancelled"
    );
    assert_eq!(sent[1]["id"], json!(8), "the lines behind it go on");
    assert_eq!(sent.len(), 2, "the cancelled call never reaches the server");
    // The late own snapshot is dropped; nothing is ever sent for 7.
    let fresh = tree("http://a/", "- button \"Buy\" [ref=e2]");
    assert!(r.from_server(&line(&result(own_id, &fresh))).is_empty());
    assert!(r.give_up_waiting().is_empty());
    assert!(to_client(&r.server_exited("exited with status 1"))
        .iter()
        .all(|m| m["id"] != json!(7)));
}

#[test]
fn a_cancelled_request_behind_a_held_call_never_reaches_the_server() {
    let mut r = relay();
    let own_id = holding(&mut r, json!(7));
    assert!(r
        .from_client(br#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#)
        .is_empty());
    assert!(r.from_client(&line(&cancel(json!(8)))).is_empty());
    // A cancellation for a request the server has goes to it at once, ahead of the queue.
    let out = to_server(&r.from_client(&line(&cancel(json!("nav")))));
    assert_eq!(out[0]["params"]["requestId"], json!("nav"));
    let fresh = tree("http://a/", "- button \"Buy\" [ref=e2]");
    let out = to_server(&r.from_server(&line(&result(own_id, &fresh))));
    let ids: Vec<&Value> = out.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!(7)], "the click, and not the cancelled ping");
}

#[test]
fn a_cancelled_forwarded_call_is_forwarded_and_not_answered_by_the_guard() {
    let mut r = relay();
    r.from_client(&line(&call(
        json!(1),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    r.from_client(&line(&call(json!(2), "fake_hold", json!({}))));
    for id in [1, 2] {
        let c = line(&cancel(json!(id)));
        assert_eq!(r.from_client(&c), vec![Output::ToServer(c.clone())]);
    }
    // A late browser result is still read (and passed on: the client ignores it).
    let page = tree("http://a/", "- button \"Buy\" [ref=e1]");
    let out = to_client(&r.from_server(&line(&result(json!(1), &page))));
    assert!(text(&out[0]).contains("[ref=d1e1]"));
    assert!(r.server_exited("exited with status 0").is_empty());
}

/// Many cancelled calls the server never answers: what the relay keeps of them is bounded.
#[test]
fn cancelled_calls_the_server_never_answers_are_forgotten() {
    let mut r = relay();
    for i in 0..5_000 {
        r.from_client(&line(&call(json!(i), "browser_snapshot", json!({}))));
        r.from_client(&line(&cancel(json!(i))));
    }
    assert!(r.in_flight() <= 300, "{} kept", r.in_flight());
    r.from_client(&line(&call(json!("last"), "browser_snapshot", json!({}))));
    let out = to_client(&r.server_exited("exited with status 1"));
    assert_eq!(out.len(), 1, "only the call not cancelled is answered");
}

/// Lines of 4 MiB and more are first read for what they are (their body skipped): they are
/// dropped, passed or read exactly as small lines are.
#[test]
fn large_lines_are_taken_as_small_ones_are() {
    let big = "x".repeat(5 << 20);
    let mut r = relay();
    r.from_client(&line(&call(json!(1), "get_weather", json!({}))));
    let other = line(&result(json!(1), &big));
    assert_eq!(
        r.from_server_owned(other.clone()),
        vec![Output::ToClient(other)]
    );
    // A log line, JSON that is no message, invalid UTF-8 inside a string: dropped.
    let mut not_utf8 = line(&result(json!(2), &big));
    not_utf8[100] = 0xff;
    for garbage in [
        big.clone().into_bytes(),
        line(&json!({"level": 30, "msg": big})),
        not_utf8,
    ] {
        assert!(r.from_server_owned(garbage).is_empty());
    }
    assert_eq!(r.take_dropped().len(), 3);
    // A browser result is read: its refs are scoped.
    r.from_client(&line(&call(
        json!(3),
        "browser_navigate",
        json!({"url": "http://a/"}),
    )));
    let page = tree(
        "http://a/",
        &format!("- paragraph: {big}\n- button \"Buy\" [ref=e1]"),
    );
    let out = to_client(&r.from_server_owned(line(&result(json!(3), &page))));
    assert!(text(&out[0]).ends_with("- button \"Buy\" [ref=d1e1]\n```"));
}
