//! Reading the Anthropic Messages bodies an agent sent and the scripted model received, and
//! the checks every Anthropic agent test makes of them: the model got exactly `staleguard
//! project` of what the agent sent, and only the results a test allows changed on the way.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{
    headers_passed_through, keep_sent, nothing_of_staleguards_in, only_newest_page_live, project,
    refusal_names_a_receipt, shows_page, Chain, Record, Scratch, RECEIPT, REFUSED,
};

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
        headers_passed_through(i, s, &g);
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

// ------------------------------------------------------------------------------------------
// The checks of an agent's browser and read-back results

/// The dummy API key the Anthropic agents are given; no log line or body may hold it.
pub(crate) const API_KEY: &str = "sk-ant-e2e-dummy-key";

/// How an Anthropic agent names what the checks look for.
pub(crate) struct Agent {
    /// Its name in messages: `Claude Code`, `opencode`.
    pub name: &'static str,
    /// What it puts before a tool of Playwright MCP (the MCP server `playwright`):
    /// `mcp__playwright__` (`mcp__playwright__browser_click`), `playwright_`.
    pub mcp: &'static str,
    /// Its own tool that reads a file: `Read`, `read`.
    pub read: &'static str,
    /// That tool's argument with the file's (absolute) path: `file_path`, `filePath`.
    pub path: &'static str,
}

/// What one request shows of the read-back pages.
#[derive(Default, Debug)]
pub(crate) struct Readback {
    pub reads: usize,
    pub reads_collapsed: usize,
    pub newest_read_live: bool,
}

impl Agent {
    /// What a guarded run through `chain` exchanged: the Messages requests the agent sent, and
    /// what the model got for each, in the same order (`forwarded_projections`). Both are kept
    /// in the scratch folder for when the test fails: `sent-00.json`, ... and
    /// `got-seq1.json`, ... (numbered by the relay's `x-e2e-seq`).
    pub(crate) fn exchanged(&self, scratch: &Scratch, chain: &Chain) -> (Vec<Record>, Vec<Record>) {
        let sent = messages(chain.relay.requests());
        keep_sent(scratch, &sent);
        let got = messages(chain.model.requests());
        for g in &got {
            let seq = g.header("x-e2e-seq").unwrap_or("none");
            let file = scratch.dir.join(format!("got-seq{seq}.json"));
            std::fs::write(file, &g.body).expect("write");
        }
        let got = forwarded_projections(scratch, self.name, &sent, got);
        (sent, got)
    }

    /// Playwright MCP's tool `name` as the agent calls it: `browser_click` is
    /// `mcp__playwright__browser_click` to Claude Code.
    pub(crate) fn tool(&self, name: &str) -> String {
        format!("{}{name}", self.mcp)
    }

    pub(crate) fn is_browser(&self, tool: &str) -> bool {
        tool.starts_with(&self.tool("browser_"))
    }

    /// The path the agent's file-reading call that `r` answers read.
    pub(crate) fn read_path<'a>(
        &self,
        r: &ToolResult,
        inputs: &'a HashMap<String, Value>,
    ) -> Option<&'a str> {
        let input = inputs.get(&r.call).filter(|_| r.tool == self.read);
        input.and_then(|i| i[self.path].as_str())
    }

    /// A read of a snapshot file Playwright MCP linked (`<cwd>/.playwright-mcp/page-*.yml`),
    /// with the agent's own tool, that did not fail.
    pub(crate) fn reads_snapshot(&self, r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
        !r.is_error
            && self
                .read_path(r, inputs)
                .is_some_and(|p| p.contains("/.playwright-mcp/page-") && p.ends_with(".yml"))
    }

    /// A result that holds a page tree: a snapshot file read back, or a browser result with
    /// the tree inline (0.0.83's `browser_snapshot`).
    pub(crate) fn holds_tree(&self, r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
        (self.reads_snapshot(r, inputs) || self.is_browser(&r.tool)) && r.text.contains("[ref=")
    }

    /// Nothing but browser results changed, calls and results pair one to one, and every page
    /// but the newest reached the model as a receipt. Returns how many pages collapsed.
    pub(crate) fn only_old_pages_collapsed(&self, sent: &Value, got: &Value, i: usize) -> usize {
        let (s_results, g_results) =
            only_results_changed(sent, got, i, |r| self.is_browser(&r.tool));
        let pages: Vec<(&str, &str)> = s_results
            .iter()
            .filter(|r| shows_page(&r.text))
            .map(|page| {
                let forwarded = g_results.iter().find(|r| r.at == page.at).expect("paired");
                (page.text.as_str(), forwarded.text.as_str())
            })
            .collect();
        only_newest_page_live(i, &pages)
    }

    /// Only browser results and snapshot files read back changed; every page tree but the
    /// newest (read back or inline) reached the model as a receipt with no ref of its tree
    /// left, and the newest as the agent sent it.
    pub(crate) fn only_old_reads_collapsed(&self, sent: &Value, got: &Value, i: usize) -> Readback {
        let inputs = call_inputs(sent);
        let may_change =
            |r: &ToolResult| self.is_browser(&r.tool) || self.reads_snapshot(r, &inputs);
        let (s_results, g_results) = only_results_changed(sent, got, i, may_change);
        let mut seen = Readback::default();
        let pages: Vec<(&ToolResult, &ToolResult)> = s_results
            .iter()
            .zip(&g_results)
            .filter(|(s, _)| self.holds_tree(s, &inputs))
            .collect();
        for (n, (s, g)) in pages.iter().enumerate() {
            let read = self.reads_snapshot(s, &inputs);
            seen.reads += usize::from(read);
            if n + 1 < pages.len() {
                assert!(
                    g.text.contains(RECEIPT) && !g.text.contains("[ref="),
                    "request {i}: an older page ({}) reached the model live: {:.600}",
                    s.tool,
                    g.text
                );
                seen.reads_collapsed += usize::from(read);
            } else {
                assert_eq!(g.text, s.text, "request {i}: the newest page is live");
                seen.newest_read_live = read;
            }
        }
        seen
    }

    /// A run in which the model read every page it acted on back from the snapshot file its
    /// action result linked, request for request (`sent` as the agent sent them, `got` as the
    /// model got them): only old pages collapsed in each (`only_old_reads_collapsed`). The
    /// last request holds the whole run: `least` or more snapshot files read back, each from
    /// the agent's working folder `work` and printed as `read_like(text, path)` expects;
    /// browser_snapshot was called once, after the refusal; every page read back reached the
    /// model live while it was the newest, and after the browser_snapshot every one is a
    /// receipt. Returns (pages read back, receipts of pages read back across the requests).
    pub(crate) fn pages_read_back(
        &self,
        sent: &[Record],
        got: &[Record],
        work: &str,
        least: usize,
        read_like: impl Fn(&str, &str),
    ) -> (usize, usize) {
        let seen: Vec<Readback> = sent
            .iter()
            .zip(got)
            .enumerate()
            .map(|(i, (s, g))| self.only_old_reads_collapsed(&s.json(), &g.json(), i))
            .collect();
        let collapsed: usize = seen.iter().map(|r| r.reads_collapsed).sum();
        let live = seen.iter().filter(|r| r.newest_read_live).count();

        let last_sent = sent[sent.len() - 1].json();
        let inputs = call_inputs(&last_sent);
        let results = tool_results(&last_sent);
        let reads: Vec<&ToolResult> = results
            .iter()
            .filter(|r| self.reads_snapshot(r, &inputs))
            .collect();
        assert!(
            reads.len() >= least,
            "{} results of snapshot files: {}",
            self.read,
            reads.len()
        );
        for r in &reads {
            let path = self.read_path(r, &inputs).unwrap_or_default();
            assert!(
                path.starts_with(&format!("{work}/.playwright-mcp/page-")),
                "{path} is in {}'s working folder {work}",
                self.name
            );
            read_like(&r.text, path);
        }
        // Every page the model acted on was read back: browser_snapshot was called once, after
        // the refusal.
        let snapshot = self.tool("browser_snapshot");
        let snapshots = results.iter().filter(|r| r.tool == snapshot).count();
        assert_eq!(snapshots, 1, "one browser_snapshot, after the refusal");
        assert!(
            live >= reads.len(),
            "every page read back reached the model live: {live} requests"
        );
        let last_seen = &seen[seen.len() - 1];
        assert_eq!(
            (last_seen.reads, last_seen.reads_collapsed),
            (reads.len(), reads.len()),
            "after the browser_snapshot every page read back is a receipt"
        );
        (reads.len(), collapsed)
    }

    /// The reused "Place order" was refused by `staleguard mcp` once, as an MCP error the agent
    /// passed on, naming the stale ref as the confirm page's; it is the same call as the click
    /// that placed the order; the browser_snapshot after it shows the one order, neither
    /// cancelled nor repeated. Returns the refusal.
    pub(crate) fn stale_click_refused_once(&self, last: &Value) -> String {
        let results = tool_results(last);
        let inputs = call_inputs(last);
        let click = self.tool("browser_click");
        let refusals: Vec<&ToolResult> = results
            .iter()
            .filter(|r| r.text.contains(REFUSED))
            .collect();
        assert_eq!(refusals.len(), 1, "one refusal");
        let refusal = refusals[0];
        assert!(
            refusal.is_error
                && refusal.tool == click
                && refusal.text.contains("order/confirm.html"),
            "the stale ref is named as the confirm page's: {}",
            refusal.text
        );
        let place: Vec<&Value> = results
            .iter()
            .filter(|r| r.tool == click)
            .map(|r| &inputs[&r.call])
            .filter(|i| i["element"] == "Place order button")
            .collect();
        assert_eq!(
            place.len(),
            2,
            "Place order clicked, then reused: {place:?}"
        );
        assert_eq!(place[0], place[1], "the reused call is the same call");
        assert_eq!(inputs[&refusal.call], *place[1]);
        let snapshot = results.last().expect("a final result");
        assert_eq!(
            snapshot.tool,
            self.tool("browser_snapshot"),
            "after the refusal"
        );
        let page = &snapshot.text;
        assert!(page.contains("Confirmation number: WX-1001"), "{page}");
        assert!(
            !page.contains("cancelled") && !page.contains("WX-1002"),
            "{page}"
        );
        refusal.text.clone()
    }
}

/// The refusal names the confirm page by the observation ID its receipt in `last` carries.
pub(crate) fn refusal_names_the_receipt(last: &Value, refusal: &str) {
    let results = tool_results(last);
    refusal_names_a_receipt(refusal, results.iter().map(|r| r.text.as_str()));
}

/// Nothing of staleguard's (no refusal, no receipt) is in the last Messages request of
/// `records`, those of an unguarded run.
pub(crate) fn nothing_of_staleguards(records: Vec<Record>) {
    let got = messages(records);
    let last = got.last().expect("requests").json();
    nothing_of_staleguards_in(tool_results(&last).iter().map(|r| r.text.as_str()));
}

/// The proxy's log of a run whose `requests` Messages requests reached the model: one line a
/// request, each projected as Anthropic, and the API key in no line. The lines of other
/// requests (Claude Code's `/v1/messages/count_tokens`) are passed over where `others` allows
/// them, and fail the check where not. Returns how many lines say the proxy added a
/// breakpoint.
pub(crate) fn proxy_log_checked(log: &str, requests: usize, others: bool) -> usize {
    let all: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    let lines: Vec<&str> = all
        .iter()
        .copied()
        .filter(|l| l.contains(" path=/v1/messages "))
        .collect();
    if !others {
        assert_eq!(all, lines, "only Messages requests:\n{log}");
    }
    assert_eq!(lines.len(), requests, "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("format=anthropic") && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");
    // `breakpoint="added"` (quoted in the text log), `already_there`, or `-`.
    let added = |l: &&&str| l.contains(" breakpoint=\"added\"") || l.contains(" breakpoint=added ");
    lines.iter().filter(added).count()
}
