//! The follower (SPEC 3, "In the request, or one call away"). For a fact that is not in the
//! request that needs it, it makes each call that request names as a way back (SPEC 2, "The
//! way back") and looks for the fact in what the call returns:
//! - `browser_history` with a collapsed observation's ID, where the stale notice names it,
//!   or with a fold marker's ID and lines: read from the archive the guard would hold,
//!   built from the session so far;
//! - "take a snapshot again": the request is sent on with a snapshot call and the page as
//!   the browser returns it unchanged, projected again, and the fact must be in that result;
//! - `browser_find`: the fact must be in the live page's whole text, which the server
//!   searches.
//!
//! It finds what one call reaches; which of the named calls a model would make is not its
//! question. A call the request does not name is never made.

use serde::Serialize;
use serde_json::{json, Value};
use staleguard::{
    project, Config, Memo, Options, Request, RequestFormat, ResultReport, LEAN_FOLD_TAG,
    RECEIPT_TAG, STALE_NOTICE_HISTORY,
};

use super::facts;
use crate::Failure;

/// The call that reaches a fact the request does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Way {
    /// `browser_history`, through the guard.
    History,
    /// A snapshot of the unchanged page again, sent whole.
    SnapshotAgain,
    /// The server's search in the page.
    Find,
}

impl Way {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Way::History => "history",
            Way::SnapshotAgain => "again",
            Way::Find => "find",
        }
    }
}

/// A strategy's request of one turn, as the follower reads it.
pub(super) struct Turn<'a> {
    /// The turn's request as the agent wrote it.
    pub original: &'a str,
    /// What the strategy sent.
    pub projected: &'a str,
    /// The strategy's results (`None`: it is no projection of staleguard's).
    pub results: &'a [ResultReport],
    /// The strategy's config, to project the request sent on.
    pub config: &'a Config,
    pub memo: &'a Memo,
}

/// What each call the request names returns, with the way it takes, in the order the ways
/// are tried: made once for the request, however many facts it lacks.
pub(super) fn reachable(turn: &Turn<'_>) -> Result<Vec<(Way, String)>, Failure> {
    let projected: Value = serde_json::from_str(turn.projected)?;
    let text = facts::tool_results_text(&projected);
    let request = Request::read(turn.original, RequestFormat::Auto)?;
    let mut out = history_reads(&request, turn.config, &text);
    let Some(live) = turn.results.iter().find(|r| r.folded.is_some()) else {
        return Ok(out);
    };
    let page = request.tool_results().find(|(item, _)| *item == live.item);
    let Some((_, page)) = page else {
        return Ok(out);
    };
    if text.contains("take a snapshot again") {
        out.extend(again_read(turn, live, page)?.map(|t| (Way::SnapshotAgain, t)));
    }
    if text.contains("Read it with browser_find") {
        out.push((Way::Find, page.to_string()));
    }
    Ok(out)
}

/// The way of the first call in `reachable` whose answer holds `fact`.
pub(super) fn way_to(reachable: &[(Way, String)], fact: &str) -> Option<Way> {
    let (way, _) = reachable.iter().find(|(_, text)| text.contains(fact))?;
    Some(*way)
}

/// What each `browser_history` call the request names returns, read from the archive of
/// `request`.
fn history_reads(request: &Request<'_>, config: &Config, text: &str) -> Vec<(Way, String)> {
    let calls = history_calls(text);
    if calls.is_empty() {
        return Vec::new();
    }
    let (archive, now) = request.archive(config);
    let read = |call: &HistoryCall| match call.lines {
        Some((first, last)) => archive.read_lines(&call.id, now, first, last),
        None => archive.read_back(&call.id, now),
    };
    let reads = calls.iter().filter_map(read);
    reads.map(|r| (Way::History, r.text)).collect()
}

/// One `browser_history` call a request names: an ID, and the lines of a fold.
#[derive(Debug, PartialEq, Eq)]
struct HistoryCall {
    id: String,
    lines: Option<(usize, usize)>,
}

/// The `browser_history` calls `text` names: every receipt's ID where the stale notice says
/// to read one back, and every fold marker's lines, under the ID its page's first marker
/// gives.
fn history_calls(text: &str) -> Vec<HistoryCall> {
    let mut calls = Vec::new();
    let receipts = text.contains(STALE_NOTICE_HISTORY);
    let mut page_id: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(RECEIPT_TAG).filter(|_| receipts) {
            let id = rest.trim_start().strip_prefix("observation=");
            let id = id.and_then(|r| r.split_whitespace().next());
            calls.extend(id.map(|id| HistoryCall {
                id: id.to_string(),
                lines: None,
            }));
        }
        let Some(marker) = line.trim_start().strip_prefix(LEAN_FOLD_TAG) else {
            continue;
        };
        if let Some(id) = between(marker, "browser_history with id \"", "\"") {
            page_id = Some(id.to_string());
        }
        let lines = between(marker, "at lines ", ";").or_else(|| marker.split("at lines ").nth(1));
        let lines = lines.and_then(|l| {
            let (first, last) = l.trim().split_once('-')?;
            Some((first.parse().ok()?, last.parse().ok()?))
        });
        if let (Some(id), Some(lines)) = (&page_id, lines) {
            calls.push(HistoryCall {
                id: id.clone(),
                lines: Some(lines),
            });
        }
    }
    calls
}

/// The text of `s` between the first `open` and the next `close` after it.
fn between<'s>(s: &'s str, open: &str, close: &str) -> Option<&'s str> {
    let rest = &s[s.find(open)? + open.len()..];
    Some(&rest[..rest.find(close)?])
}

/// What a snapshot again, of the live page unchanged, shows in the request sent on (SPEC 2,
/// "Ask again, get it whole"); `None` for a body the follower cannot send on.
fn again_read(turn: &Turn<'_>, live: &ResultReport, page: &str) -> Result<Option<String>, Failure> {
    let tool = snapshot_tool(&live.tool);
    let Some(body) = sent_on(turn.original, &tool, page)? else {
        return Ok(None);
    };
    let options = Options {
        memo: Some(turn.memo),
        ..Options::default()
    };
    let projected = project(&body, RequestFormat::Auto, turn.config, options)?;
    let value: Value = serde_json::from_str(&projected.body)?;
    Ok(facts::items(&value).last().map(facts::item_results_text))
}

/// The server's snapshot tool, named as the call of the live page names its tools.
fn snapshot_tool(tool: &str) -> String {
    if tool.ends_with("snapshot") {
        return tool.to_string();
    }
    match tool.rfind("browser_") {
        Some(at) => format!("{}browser_snapshot", &tool[..at]),
        None => "take_snapshot".to_string(),
    }
}

/// The id of the call the follower adds.
const CALL_ID: &str = "staleguard_follower_1";

/// `body` with one more call of `tool` and its result `page` at the end, in the body's own
/// wire format; `None` for a body whose messages it cannot find.
fn sent_on(body: &str, tool: &str, page: &str) -> Result<Option<String>, Failure> {
    let format = Request::read(body, RequestFormat::Auto)?.format();
    let mut value: Value = serde_json::from_str(body)?;
    let (key, call, result) = match format {
        RequestFormat::Anthropic => (
            "/messages",
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": CALL_ID, "name": tool, "input": {}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": CALL_ID, "content": page}]}),
        ),
        RequestFormat::Responses => (
            "/input",
            json!({"type": "function_call", "call_id": CALL_ID, "name": tool, "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": CALL_ID, "output": page}),
        ),
        RequestFormat::Gemini => (
            if value.pointer("/contents").is_some() {
                "/contents"
            } else {
                "/request/contents"
            },
            json!({"role": "model", "parts": [{"functionCall": {"name": tool, "args": {}}}]}),
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": tool, "response": {"output": page}}}]}),
        ),
        _ => (
            "/messages",
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": CALL_ID, "type": "function",
                 "function": {"name": tool, "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": CALL_ID, "content": page}),
        ),
    };
    let Some(items) = value.pointer_mut(key).and_then(Value::as_array_mut) else {
        return Ok(None);
    };
    items.push(call);
    items.push(result);
    Ok(Some(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_calls_are_read_from_receipts_under_the_notice_and_from_fold_markers() {
        let receipt = format!("{RECEIPT_TAG} observation=1a2b3c4d url=\"http://a.test/\"");
        let lean = format!(
            "- main:\n  {LEAN_FOLD_TAG} 30 lines (2.0 KB) of page text at lines 4-33; its refs stay live. Read a fold: browser_history with id \"99aa88bb\" and lines \"4-33\".\n  - button \"Go\" [ref=e9]\n  {LEAN_FOLD_TAG} 5 lines (300 bytes) at lines 40-44"
        );
        // Without the notice that names it, a receipt is no call.
        let plain = format!("{receipt}\nstale\n{lean}");
        let calls = history_calls(&plain);
        let call = |id: &str, lines| HistoryCall {
            id: id.to_string(),
            lines,
        };
        assert_eq!(
            calls,
            [
                call("99aa88bb", Some((4, 33))),
                call("99aa88bb", Some((40, 44)))
            ]
        );
        let named = format!("{receipt}\n{STALE_NOTICE_HISTORY}\n{lean}");
        assert_eq!(history_calls(&named)[0], call("1a2b3c4d", None));
        assert_eq!(history_calls(&named).len(), 3);
        // Markers that name no history give no call.
        let find = format!("{LEAN_FOLD_TAG} 3 lines (90 bytes) of page text; its refs stay live. Read it with browser_find.");
        assert!(history_calls(&find).is_empty());
    }

    #[test]
    fn the_snapshot_tool_is_named_as_the_server_names_its_tools() {
        assert_eq!(snapshot_tool("browser_click"), "browser_snapshot");
        assert_eq!(
            snapshot_tool("mcp__playwright__browser_click"),
            "mcp__playwright__browser_snapshot"
        );
        assert_eq!(snapshot_tool("take_snapshot"), "take_snapshot");
        assert_eq!(snapshot_tool("click"), "take_snapshot");
    }

    #[test]
    fn a_request_is_sent_on_in_its_own_format() {
        let chat = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let on = sent_on(chat, "browser_snapshot", "page").ok().flatten();
        let on = on.expect("sent on");
        let v: Value = serde_json::from_str(&on).expect("JSON");
        assert_eq!(v["messages"][2]["tool_call_id"], CALL_ID);
        assert_eq!(facts::tool_results_text(&v), "page");
        let anthropic = r#"{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
        let on = sent_on(anthropic, "browser_snapshot", "page")
            .ok()
            .flatten();
        let on = on.expect("sent on");
        let v: Value = serde_json::from_str(&on).expect("JSON");
        assert_eq!(v["messages"][1]["content"][0]["name"], "browser_snapshot");
        assert_eq!(facts::tool_results_text(&v), "page");
    }
}
