//! Arbitrary lines on both sides: the relay never panics, and writes only JSON of its own
//! or lines it was given.

use proptest::prelude::*;
use serde_json::{json, Value};
use staleguard::Config;
use staleguard_mcp::{McpConfig, Options, Output, Relay};

fn page(url: &str, refs: &[u8]) -> String {
    let lines: Vec<String> = refs
        .iter()
        .map(|r| format!("- button \"Place order {r}\" [ref=e{r}]"))
        .collect();
    format!(
        "### Page state\n- Page URL: {url}\n- Page Title: T\n- Page Snapshot:\n```yaml\n{}\n```",
        lines.join("\n")
    )
}

fn client_line() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u8..6, "[a-z_]{0,12}", prop::option::of(0u32..4), 0u8..20).prop_map(|(id, tool, doc, r)| {
            let reference = match doc {
                Some(d) => format!("d{d}e{r}"),
                None => format!("e{r}"),
            };
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": format!("browser_{tool}"), "arguments": {"ref": reference, "element": "Place order"}}})
            .to_string()
        }),
        (0u8..6).prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string()),
        (0u8..6, "[a-z0-9]{0,8}").prop_map(|(id, h)| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "browser_history", "arguments": {"id": h}}}).to_string()
        }),
        ".{0,40}",
        "\\{\"jsonrpc\":\"2.0\",\"id\":[0-9],\"method\":\"tools/call\",\"params\":.{0,20}\\}",
        (0u8..6).prop_map(|id| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}).to_string()),
        (0u8..6).prop_map(|id| json!([{"jsonrpc": "2.0", "id": id, "method": "ping"}, {"jsonrpc": "2.0", "method": "x"}]).to_string()),
    ]
}

fn server_line() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u8..6, 0u8..3, prop::collection::vec(0u8..20, 0..5), any::<bool>()).prop_map(|(id, url, refs, err)| {
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": page(&format!("http://a/{url}"), &refs)}], "isError": err}}).to_string()
        }),
        (0u8..6).prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "browser_click"}]}}).to_string()),
        (1u8..4).prop_map(|n| json!({"jsonrpc": "2.0", "id": format!("staleguard-fresh-snapshot-{n}"), "result": {"content": [{"type": "text", "text": page("http://a/0", &[1, 2])}]}}).to_string()),
        (0u8..6).prop_map(|id| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "x"}}).to_string()),
        ".{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn arbitrary_sessions(steps in prop::collection::vec((any::<bool>(), client_line(), server_line()), 1..40)) {
        let mut options = Options::new(Config::default(), &McpConfig::default());
        options.max_observations = 4;
        let mut relay = Relay::new(options);
        let mut given: Vec<Vec<u8>> = Vec::new();
        for (from_client, c, s) in steps {
            let line = if from_client { c } else { s };
            given.push(line.clone().into_bytes());
            let out = if from_client { relay.from_client(line.as_bytes()) } else { relay.from_server(line.as_bytes()) };
            for o in out {
                let bytes = match o { Output::ToClient(b) | Output::ToServer(b) => b };
                let ours = serde_json::from_slice::<Value>(&bytes).is_ok();
                prop_assert!(ours || given.contains(&bytes), "unknown line {:?}", String::from_utf8_lossy(&bytes));
            }
        }
        // The server is gone: whatever was pending gets errors, nothing goes to the server.
        for o in relay.server_exited("exited with status 1") {
            let Output::ToClient(bytes) = o else {
                return Err(TestCaseError::fail("a line for a server that is gone"));
            };
            prop_assert!(serde_json::from_slice::<Value>(&bytes).is_ok());
        }
    }
}
