//! `staleguard mcp` in front of the real `@playwright/mcp` (two pinned versions) driving
//! Debian's Chromium through the shared test site. Nothing here is simulated: a missing
//! browser or server package fails the test with what to install.

mod mcp;

use mcp::{find_ref, is_error, server_command, text, Client, Site, VERSIONS};
use serde_json::{json, Value};

/// The page a result shows: its inline tree, or a fresh snapshot when the server linked the
/// tree to a file (0.0.69 and later).
fn page(c: &mut Client, result: &Value) -> String {
    let t = text(result);
    if t.contains("[ref=") {
        return t;
    }
    snapshot(c)
}

fn snapshot(c: &mut Client) -> String {
    let r = ok(c.call("browser_snapshot", json!({})));
    text(&r)
}

fn ok(result: Value) -> Value {
    assert!(
        !is_error(&result),
        "unexpected tool error: {}",
        text(&result)
    );
    result
}

fn args(c: &Client, element: Option<&str>, r: &str) -> Value {
    let mut a = json!({ c.ref_key.clone(): r });
    if let Some(e) = element {
        a["element"] = json!(e);
    }
    a
}

fn refused(result: &Value, what: &str) -> String {
    let t = text(result);
    assert!(is_error(result), "{what}: not refused: {t}");
    assert!(t.contains("staleguard refused this call"), "{what}: {t}");
    t
}

fn no_own_ids_leaked(c: &Client) {
    for m in &c.received {
        let id = m.get("id").and_then(Value::as_str).unwrap_or("");
        assert!(
            !id.starts_with("staleguard"),
            "the guard's own request leaked: {m}"
        );
    }
}

/// The order flow of the recorded 0.0.41 session that cancelled a real order: the stale
/// "Place order" ref is refused (with and without a description), the order stands, a second
/// "Place order" on the unchanged confirm page is refused, fresh refs work, and the
/// history lists every page read-only.
fn order_flow(version: &str) {
    let site = Site::shared();
    let mut c = Client::guarded(&[], &server_command(version));
    let tools = c.tools();
    assert!(
        tools.iter().any(|t| t["name"] == "browser_history"),
        "browser_history is offered"
    );

    let r = ok(c.call(
        "browser_navigate",
        json!({"url": format!("{}/order/form.html", site.base)}),
    ));
    let form = page(&mut c, &r);
    let name = find_ref(&form, "textbox", "Name");
    assert!(
        name.starts_with("d1"),
        "{version}: refs reach the client scoped to their document: {name}"
    );
    let mut a = args(&c, Some("Name textbox"), &name);
    a["text"] = json!("Ada Lovelace");
    ok(c.call("browser_type", a));
    let mut a = args(
        &c,
        Some("Quantity spinbutton"),
        &find_ref(&form, "spinbutton", "Quantity"),
    );
    a["text"] = json!("3");
    ok(c.call("browser_type", a));
    let review = find_ref(&form, "button", "Review order");
    let r = ok(c.call(
        "browser_click",
        args(&c, Some("Review order button"), &review),
    ));
    let confirm = page(&mut c, &r);
    assert!(confirm.contains("Order total"), "{confirm}");
    let place = find_ref(&confirm, "button", "Place order");

    let placed = ok(c.call(
        "browser_click",
        args(&c, Some("Place order button"), &place),
    ));
    // The model acts on the old page's ref before looking at the new page: refused, whether
    // or not the call describes its element. On 0.0.83 the guard takes its own snapshot first.
    let t = refused(
        &c.call(
            "browser_click",
            args(&c, Some("Place order button"), &place),
        ),
        "stale Place order with element",
    );
    assert!(t.contains(&place) && t.contains("snapshot"), "{t}");
    refused(
        &c.call("browser_click", args(&c, None, &place)),
        "stale Place order without element",
    );
    no_own_ids_leaked(&c);
    let done = page(&mut c, &placed);
    let now = snapshot(&mut c);
    for p in [&done, &now] {
        assert!(
            p.contains("WX-1001"),
            "{version}: the order was placed: {p}"
        );
        assert!(
            !p.contains("cancelled"),
            "{version}: the order was cancelled: {p}"
        );
    }

    // Back on the confirm page, unchanged since the order: "Place order" again is refused.
    let r = ok(c.call("browser_navigate_back", json!({})));
    let confirm2 = page(&mut c, &r);
    let place2 = find_ref(&confirm2, "button", "Place order");
    assert_ne!(place2, place, "a new document gets new scoped refs");
    let t = refused(
        &c.call(
            "browser_click",
            args(&c, Some("Place order button"), &place2),
        ),
        "second Place order",
    );
    assert!(
        t.contains("repeats") && t.contains("[staleguard progress]"),
        "{t}"
    );

    // A fresh, valid ref is allowed and works.
    let edit = find_ref(&confirm2, "link", "Edit order");
    let r = ok(c.call("browser_click", args(&c, Some("Edit order link"), &edit)));
    let form2 = page(&mut c, &r);
    assert!(form2.contains("Order a widget"), "{form2}");

    history_is_read_only(&mut c);
    no_own_ids_leaked(&c);
    let code = c.finish_keeping_stderr();
    let stderr = c.stderr.lock().unwrap().clone();
    assert_eq!(
        code,
        Some(0),
        "clean exit when the client closes; stderr:\n{stderr}"
    );
    // Named the way the README names refusal kinds.
    for kind in ["StaleRef", "RepeatedSubmission"] {
        assert!(
            stderr.contains(&format!("staleguard mcp: refused browser_click: {kind}")),
            "the operator sees the {kind} refusal: {stderr}"
        );
    }
    // Only file-linked pages make the guard take a snapshot of its own.
    let own_snapshot = stderr.contains("taking a snapshot before the call");
    assert_eq!(own_snapshot, version == "0.0.83", "{version}: {stderr}");
}

fn history_is_read_only(c: &mut Client) {
    let list = ok(c.call("browser_history", json!({})));
    let list = text(&list);
    for path in ["order/form.html", "order/confirm.html", "order/done.html"] {
        assert!(list.contains(path), "{path} is listed: {list}");
    }
    let ids: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split(" | ").next())
        .collect();
    assert!(ids.len() >= 4, "{list}");
    let old = ok(c.call("browser_history", json!({"id": ids[0]})));
    let parts = old["content"].as_array().expect("content");
    let banner = parts[0]["text"].as_str().unwrap_or("");
    let body = parts[1]["text"].as_str().unwrap_or("");
    assert!(
        banner.contains("STALE") && banner.contains("superseded"),
        "{banner}"
    );
    assert!(body.contains("Order a widget"), "{body}");
    assert!(
        !body.contains("ref="),
        "an old page has no live ref: {body}"
    );
}

#[test]
fn order_flow_0_0_41() {
    order_flow(VERSIONS[0]);
}

#[test]
fn order_flow_0_0_83() {
    order_flow(VERSIONS[1]);
}

/// SPRING25 always fails and the page stays put: the fourth identical submission carries
/// the guidance, the second and third do not.
fn coupon_loop(version: &str) {
    let site = Site::shared();
    let mut c = Client::guarded(&[], &server_command(version));
    let r = ok(c.call(
        "browser_navigate",
        json!({"url": format!("{}/rerender/coupon.html", site.base)}),
    ));
    let form = page(&mut c, &r);
    let mut a = args(
        &c,
        Some("Email textbox"),
        &find_ref(&form, "textbox", "Email"),
    );
    a["text"] = json!("ada@example.com");
    ok(c.call("browser_type", a));
    let mut a = args(
        &c,
        Some("Coupon code textbox"),
        &find_ref(&form, "textbox", "Coupon code"),
    );
    a["text"] = json!("SPRING25");
    let typed = ok(c.call("browser_type", a));
    let filled = page(&mut c, &typed);
    let apply = find_ref(&filled, "button", "Apply coupon");
    let first = ok(c.call(
        "browser_click",
        args(&c, Some("Apply coupon button"), &apply),
    ));
    let shown = page(&mut c, &first);
    assert!(shown.contains("expired"), "{shown}");
    let apply = find_ref(&shown, "button", "Apply coupon");
    for attempt in 2..=4 {
        let r = ok(c.call(
            "browser_click",
            args(&c, Some("Apply coupon button"), &apply),
        ));
        let t = text(&r);
        let guided = t.contains("[staleguard progress]");
        assert_eq!(guided, attempt == 4, "{version}: attempt {attempt}: {t}");
        if guided {
            assert!(t.contains("Read back") && t.contains("hand control"), "{t}");
        }
    }
}

#[test]
fn coupon_loop_0_0_41() {
    coupon_loop(VERSIONS[0]);
}

#[test]
fn coupon_loop_0_0_83() {
    coupon_loop(VERSIONS[1]);
}

/// Digits of file-linked snapshot names are timestamps.
fn normalise(result: &Value) -> String {
    result
        .to_string()
        .split("\\n")
        .map(|l| {
            if l.contains(".playwright-mcp/") {
                l.chars()
                    .map(|ch| if ch.is_ascii_digit() { '0' } else { ch })
                    .collect()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\\n")
}

/// A fixed session: the results, normalised, and the tools.
fn scripted_session(c: &mut Client, base: &str) -> (Vec<String>, Vec<Value>) {
    let tools = c.tools();
    let mut out = Vec::new();
    let mut step = |c: &mut Client, name: &str, a: Value| {
        let r = c.call(name, a);
        out.push(format!("{name}: {}", normalise(&r)));
        r
    };
    step(
        c,
        "browser_navigate",
        json!({"url": format!("{base}/order/form.html")}),
    );
    let s = step(c, "browser_snapshot", json!({}));
    let mut a = args(
        c,
        Some("Name textbox"),
        &find_ref(&text(&s), "textbox", "Name"),
    );
    a["text"] = json!("Grace Hopper");
    step(c, "browser_type", a);
    let review = find_ref(&text(&s), "button", "Review order");
    step(
        c,
        "browser_click",
        args(c, Some("Review order button"), &review),
    );
    let s = step(c, "browser_snapshot", json!({}));
    // A stale ref, passed through: the server decides.
    step(c, "browser_click", args(c, Some("Name textbox"), "e9999"));
    let edit = find_ref(&text(&s), "link", "Edit order");
    step(c, "browser_click", args(c, Some("Edit order link"), &edit));
    step(c, "browser_navigate_back", json!({}));
    step(c, "browser_tabs", json!({"action": "list"}));
    (out, tools)
}

/// With the guard off, a session through the relay gets the same results as one without it.
fn pass_through(version: &str) {
    let site = Site::shared();
    let server = server_command(version);
    let (program, rest) = server.split_first().expect("command");
    let mut direct = Client::start(program, rest);
    let (want, want_tools) = scripted_session(&mut direct, &site.base);
    let mut relayed = Client::guarded(&["--no-guard"], &server);
    let (got, got_tools) = scripted_session(&mut relayed, &site.base);
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "{version}: a result differs through the relay");
    }
    let names = |t: &[Value]| t.iter().map(|t| t["name"].to_string()).collect::<Vec<_>>();
    let mut expected = want_tools.clone();
    expected.push(staleguard_history_definition(&got_tools));
    assert_eq!(
        got_tools, expected,
        "{version}: tools are the server's plus browser_history"
    );
    assert!(names(&got_tools).contains(&"\"browser_history\"".to_string()));
    let mut bare = Client::guarded(&["--no-guard", "--no-history-tool"], &server);
    assert_eq!(
        bare.tools(),
        want_tools,
        "{version}: --no-history-tool leaves tools/list alone"
    );
}

fn staleguard_history_definition(tools: &[Value]) -> Value {
    tools
        .iter()
        .find(|t| t["name"] == "browser_history")
        .cloned()
        .expect("browser_history")
}

#[test]
fn pass_through_0_0_41() {
    pass_through(VERSIONS[0]);
}

#[test]
fn pass_through_0_0_83() {
    pass_through(VERSIONS[1]);
}

/// A malformed line gets a JSON-RPC parse error and the session goes on.
#[test]
fn malformed_line_gets_a_parse_error() {
    let mut c = Client::guarded(&[], &server_command(VERSIONS[0]));
    c.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 77, \"method\": ");
    let error = c.receive();
    assert_eq!(error["error"]["code"], json!(-32700), "{error}");
    assert_eq!(error["id"], Value::Null, "{error}");
    // String ids pass through and come back as strings.
    c.send(&json!({"jsonrpc": "2.0", "id": "list-1", "method": "tools/list", "params": {}}));
    let list = c.receive();
    assert_eq!(list["id"], json!("list-1"));
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 10),
        "{list}"
    );
    // An unknown method is the server's to answer.
    let unknown = c.request("staleguard/no-such-method", json!({}));
    assert!(unknown.get("error").is_some(), "{unknown}");
    assert_eq!(c.finish(), Some(0));
}

/// A 2 MB snapshot passes, its refs scoped, and its last button still works.
#[test]
fn huge_snapshot_passes() {
    let dir = std::env::temp_dir().join(format!("staleguard-mcp-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut html = String::from("<!doctype html><title>Big</title><ul>");
    // Few nodes with long text (the server drops very long button names, not paragraphs):
    // 3,000 nodes snapshot well inside the server's timeout.
    let filler = "lorem ipsum dolor sit amet ".repeat(80);
    for i in 0..1_000 {
        html.push_str(&format!(
            "<li><p>Para {i} {filler}</p><button onclick=\"document.title='Clicked {i}'\">Item {i}</button></li>"
        ));
    }
    html.push_str("</ul>");
    std::fs::write(dir.join("big.html"), html).expect("write page");
    let site = Site::serve(&dir);
    let mut c = Client::guarded(&[], &server_command(VERSIONS[0]));
    let r = ok(c.call(
        "browser_navigate",
        json!({"url": format!("{}/big.html", site.base)}),
    ));
    let t = text(&r);
    assert!(t.len() > 2_000_000, "the snapshot is {} bytes", t.len());
    let last = find_ref(&t, "button", "Item 999");
    assert!(last.starts_with("d1e"), "{last}");
    let r = ok(c.call("browser_click", args(&c, Some("Item 999 button"), &last)));
    assert!(text(&r).contains("Clicked 999"), "{:.2000}", text(&r));
    let _ = std::fs::remove_dir_all(&dir);
}

fn staleguard_mcp(server: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .arg("mcp")
        .arg("--")
        .args(server)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("staleguard mcp")
}

/// The server's exit code is ours, also when a signal ends it; the client's end of input
/// closes the server's.
#[test]
fn exit_codes_are_the_servers() {
    let limit = std::time::Duration::from_secs(30);
    let mut dies = staleguard_mcp(&["sh", "-c", "exit 7"]);
    assert_eq!(mcp::wait_timeout(&mut dies, limit), Some(7));
    let mut killed = staleguard_mcp(&["sh", "-c", "kill -9 $$"]);
    assert_eq!(mcp::wait_timeout(&mut killed, limit), Some(137));
    // The server reads to the end of its input, then exits 5: our stdin's end reaches it.
    let mut reads = staleguard_mcp(&["sh", "-c", "cat >/dev/null; exit 5"]);
    drop(reads.stdin.take());
    assert_eq!(mcp::wait_timeout(&mut reads, limit), Some(5));
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["mcp", "--", "/nonexistent/mcp-server"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.starts_with("staleguard: error: cannot start /nonexistent/mcp-server"),
        "one prefix, then what failed: {err}"
    );
}

/// What the server writes to standard error reaches ours; a server that dies mid-session
/// ends the session with its code.
#[test]
fn server_stderr_and_death_mid_session() {
    let mut child = staleguard_mcp(&["sh", "-c", "echo server says hi >&2; read line; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'; exit 3"]);
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("stdin");
        writeln!(
            stdin,
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{}}}}"
        )
        .expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server says hi"));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"
    );
}

/// The `[mcp]` table of the config file reaches the relay, and a flag wins over it. The
/// server here is a scripted stand-in that answers `tools/list`: only wiring is under test.
#[test]
fn mcp_config_table_and_flags() {
    let server = r#"import sys, json
for line in sys.stdin:
    m = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "browser_click"}]}}), flush=True)
"#;
    let dir = std::env::temp_dir().join(format!("staleguard-mcp-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("staleguard.toml");
    std::fs::write(&config, "[mcp]\nhistory_tool = false\n").expect("config");
    let tools = |flags: &[&str]| {
        let mut args: Vec<String> = vec![
            "mcp".into(),
            "--config".into(),
            config.display().to_string(),
        ];
        args.extend(flags.iter().map(|s| s.to_string()));
        args.extend(["--".into(), "python3".into(), "-c".into(), server.into()]);
        let mut c = Client::spawn(env!("CARGO_BIN_EXE_staleguard"), &args);
        c.tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        tools(&[]),
        ["browser_click"],
        "history_tool = false in the file"
    );
    std::fs::write(&config, "[mcp]\nhistory_tool = true\n").expect("config");
    assert_eq!(tools(&[]), ["browser_click", "browser_history"]);
    assert_eq!(
        tools(&["--no-history-tool"]),
        ["browser_click"],
        "the flag wins"
    );
    std::fs::write(&config, "[mcp]\nhistory = true\n").expect("config");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["mcp", "--config"])
        .arg(&config)
        .args(["--", "true"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("history"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that never answers the guard's own snapshot: the held call is refused after
/// `--snapshot-timeout-secs`, and the session goes on. The server is a scripted stand-in
/// that links every page to a file and ignores `browser_snapshot`.
#[test]
fn an_unanswered_own_snapshot_times_out() {
    let server = r#"import sys, json
page = "\x23\x23\x23 Page\n- Page URL: http://a.test/\n- Page Title: A\n\x23\x23\x23 Snapshot\n- [Snapshot](.playwright-mcp/page.yml)"
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    name = m.get("params", {}).get("name")
    if name == "browser_snapshot":
        continue
    if m.get("method") == "tools/list":
        result = {"tools": [{"name": "browser_click", "inputSchema": {"properties": {"ref": {}}}}]}
    else:
        result = {"content": [{"type": "text", "text": page}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
"#;
    let args: Vec<String> = [
        "mcp",
        "--snapshot-timeout-secs",
        "1",
        "--",
        "python3",
        "-c",
        server,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut c = Client::spawn(env!("CARGO_BIN_EXE_staleguard"), &args);
    ok(c.call("browser_navigate", json!({"url": "http://a.test/"})));
    let started = std::time::Instant::now();
    let t = refused(
        &c.call("browser_click", json!({"ref": "e2"})),
        "unverifiable ref",
    );
    assert!(t.contains("did not answer"), "{t}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(c.tools().len() == 2, "the session goes on");
    no_own_ids_leaked(&c);
}
