//! Reading the Anthropic Messages bodies an agent sent and the scripted model received, and
//! the checks every Anthropic agent test makes of them: the model got exactly `staleguard
//! project` of what the agent sent, and only the results a test allows changed on the way.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{project, Record, Scratch};

/// A tool result of a request: where it is, what it answers, its text.
pub(crate) struct ToolResult {
    /// (message, block) in `messages`.
    pub at: (usize, usize),
    /// The `tool_use_id`.
    pub call: String,
    /// The name of the tool its call used.
    pub tool: String,
    pub text: String,
    pub is_error: bool,
}

/// The content blocks of a message (a string content is one text block).
pub(crate) fn content(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        _ => Vec::new(),
    }
}

/// Every content block of `body`'s messages with where it sits (message, block).
pub(crate) fn blocks(body: &Value) -> Vec<((usize, usize), Value)> {
    let messages = body["messages"].as_array().into_iter().flatten();
    messages
        .enumerate()
        .flat_map(|(m, message)| {
            content(message)
                .into_iter()
                .enumerate()
                .map(move |(b, block)| ((m, b), block))
        })
        .collect()
}

/// Every tool result of `body`, in order, named by the tool its call used.
pub(crate) fn tool_results(body: &Value) -> Vec<ToolResult> {
    let mut tools = HashMap::new();
    let mut results = Vec::new();
    for (at, block) in blocks(body) {
        let field = |key: &str| block[key].as_str().unwrap_or_default().to_string();
        match block["type"].as_str() {
            Some("tool_use") => {
                tools.insert(field("id"), field("name"));
            }
            Some("tool_result") => {
                let call = field("tool_use_id");
                results.push(ToolResult {
                    at,
                    tool: tools.get(&call).cloned().unwrap_or_default(),
                    call,
                    text: crate::common::text_of(&block["content"]),
                    is_error: block["is_error"] == json!(true),
                });
            }
            _ => {}
        }
    }
    results
}

/// Every `tool_use` input of `body`, by its ID.
pub(crate) fn call_inputs(body: &Value) -> HashMap<String, Value> {
    blocks(body)
        .into_iter()
        .filter(|(_, b)| b["type"] == "tool_use")
        .map(|(_, b)| {
            (
                b["id"].as_str().unwrap_or_default().to_string(),
                b["input"].clone(),
            )
        })
        .collect()
}

/// Where every `cache_control` of `body` sits: ("tools", 3, 0), ("system", 1, 0),
/// ("messages", 4, 0) for block 0 of message 4.
pub(crate) fn breakpoints(body: &Value) -> Vec<(&'static str, usize, usize)> {
    let mut at = Vec::new();
    for key in ["tools", "system"] {
        for (i, item) in body[key].as_array().into_iter().flatten().enumerate() {
            if item.get("cache_control").is_some() {
                at.push((key, i, 0));
            }
        }
    }
    for ((m, b), block) in blocks(body) {
        if block.get("cache_control").is_some() {
            at.push(("messages", m, b));
        }
    }
    at
}

/// The Messages requests of a record list, in order.
pub(crate) fn messages(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|r| {
            r.path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/v1/messages"))
        })
        .collect()
}

/// `got` with the `cache_control` keys that `sent` has not, removed.
pub(crate) fn without_breakpoint(got: &Value, sent: &Value) -> Value {
    match (got, sent) {
        (Value::Object(g), Value::Object(s)) => Value::Object(
            g.iter()
                .filter(|(k, _)| *k != "cache_control" || s.contains_key(*k))
                .map(|(k, v)| {
                    (
                        k.clone(),
                        without_breakpoint(v, s.get(k).unwrap_or(&Value::Null)),
                    )
                })
                .collect(),
        ),
        (Value::Array(g), Value::Array(s)) => Value::Array(
            g.iter()
                .enumerate()
                .map(|(i, v)| without_breakpoint(v, s.get(i).unwrap_or(&Value::Null)))
                .collect(),
        ),
        _ => got.clone(),
    }
}

/// The proxy forwarded exactly the projection of what `agent` sent, request for request, with
/// every header but the hop-by-hop ones unchanged. Returns what the model got in the order the
/// agent sent it (requests in flight together may reach the model in another order).
pub(crate) fn forwarded_projections(
    scratch: &Scratch,
    agent: &str,
    sent: &[Record],
    mut got: Vec<Record>,
) -> Vec<Record> {
    assert_eq!(
        sent.len(),
        got.len(),
        "every Messages request {agent} sent reached the model once"
    );
    let mut paired = Vec::new();
    for (i, s) in sent.iter().enumerate() {
        let want = project(scratch, "auto", &s.body);
        let Some(j) = got.iter().position(|g| g.body == want) else {
            panic!("request {i}: the model got no `staleguard project` of what {agent} sent");
        };
        let g = got.remove(j);
        for (name, value) in &s.headers {
            let hop = ["host", "content-length", "connection", "transfer-encoding"];
            if !hop.contains(&name.to_ascii_lowercase().as_str()) {
                assert_eq!(
                    g.header(name),
                    Some(value.as_str()),
                    "request {i}: header {name} changed on the way"
                );
            }
        }
        paired.push(g);
    }
    paired
}

/// Calls and results pair one to one as the agent sent them, only results `may_change`
/// accepts changed, and everything else is as it was sent (a breakpoint aside). Gives the
/// results as sent and as received.
pub(crate) fn only_results_changed(
    sent: &Value,
    got: &Value,
    i: usize,
    may_change: impl Fn(&ToolResult) -> bool,
) -> (Vec<ToolResult>, Vec<ToolResult>) {
    let (s_results, g_results) = (tool_results(sent), tool_results(got));
    assert_eq!(
        s_results.len(),
        g_results.len(),
        "request {i}: results kept"
    );
    let mut changed = Vec::new();
    for (s, g) in s_results.iter().zip(&g_results) {
        assert_eq!(
            (&s.call, s.at, s.is_error),
            (&g.call, g.at, g.is_error),
            "request {i}"
        );
        if s.text != g.text {
            assert!(may_change(s), "request {i}: a {} result changed", s.tool);
            changed.push(s.at);
        }
    }
    let ids: Vec<&String> = g_results.iter().map(|r| &r.call).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids.len(), unique.len(), "request {i}: one result per call");
    let mut stripped = without_breakpoint(got, sent);
    let mut original = sent.clone();
    for (m, b) in &changed {
        stripped["messages"][m]["content"][b]["content"] = Value::Null;
        original["messages"][m]["content"][b]["content"] = Value::Null;
    }
    assert!(
        stripped == original,
        "request {i}: something but a page result changed"
    );
    (s_results, g_results)
}
