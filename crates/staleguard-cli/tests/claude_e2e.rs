//! Claude Code end to end: Anthropic's CLI (`@anthropic-ai/claude-code` 2.1.328, pinned in
//! `tests/mcp/node/claude-code-2.1.328`) runs headless (`claude -p`) with
//! `ANTHROPIC_BASE_URL` at `staleguard proxy`, Playwright MCP 0.0.41 behind `staleguard mcp`
//! and Debian's Chromium, on the shared order flow. The model is `tests/agents/model.py`,
//! which acts as a real model would (it reads the newest page it was sent), and reuses the
//! old "Place order" ref after the order is placed, as the recorded sessions did.
//!
//! A relay in front of the proxy records what Claude Code sent, so every request the model
//! got is checked against exactly `staleguard project` of what the agent sent, and field by
//! field: only browser results changed, Claude Code's own shapes (a `role: "system"` message
//! in `messages`, `anthropic-beta` flags, adaptive thinking, `context_management`,
//! `tool_reference` blocks from its ToolSearch) pass through.
//!
//! A third run puts Playwright MCP 0.0.83 behind the guard, whose action results only link
//! their snapshot file: the model reads each file back with Claude Code's own `Read`, and the
//! proxy collapses the pages read back as it does browser results (SPEC 1, "Snapshots read
//! back through another tool").
//!
//! Three more runs (`model.py --coding`) work like a coding agent that checks pages while it
//! works: between two pages the model runs Claude Code's `Bash` and `Read` on large real files
//! (20-90 KB of output), on the order flow with 0.0.41 and 0.0.83 and on the long catalog and
//! research pages with 0.0.83; with `STALEGUARD_RECORD_FIXTURE=1` they record
//! `fixtures/claude-code-coding/` (SPEC 9, C5).
//!
//! Needs the pinned package installed (`npm ci` in its folder, as `scripts/test` does),
//! `python3`, Node.js for Playwright MCP and `/usr/bin/chromium`; without them the tests fail
//! saying what to install.

mod agents;
mod common;
// The MCP harness: this test uses its site and server command only.
mod mcp;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agents::{
    free_port, project, repo, run_limited_group, Finished, Model, Proxy, Record, Scratch,
};
use serde_json::{json, Value};

const VERSION: &str = "2.1.328";
const API_KEY: &str = "sk-ant-e2e-dummy-key";
/// A run of the flow takes about 12 s here; the limit is the two minutes.
const LIMIT: Duration = Duration::from_secs(120);
const RECEIPT: &str = "[staleguard receipt]";
const REFUSED: &str = "staleguard refused this call";

/// The pinned `claude` binary, checked to start and to be the pinned version.
fn claude_bin() -> PathBuf {
    let dir = repo().join(format!("tests/mcp/node/claude-code-{VERSION}"));
    let bin = dir.join("node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "Claude Code {VERSION} is not installed in {}: run `npm ci` there, or run scripts/test, which does",
        dir.display()
    );
    let out = Command::new(&bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && version.contains(VERSION),
        "{} --version said {version:?} (stderr {:?}): reinstall it with `npm ci` in {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr),
        dir.display()
    );
    bin
}

/// What Claude Code runs with: the Playwright MCP version and the tools it may use unasked.
struct Setup {
    playwright: &'static str,
    allowed: &'static str,
}

/// Playwright MCP 0.0.41 (snapshots inline), its tools only.
const INLINE: Setup = Setup {
    playwright: "0.0.41",
    allowed: "mcp__playwright",
};

/// Playwright MCP 0.0.83 (action results link the snapshot file), its tools and `Read`.
const READBACK: Setup = Setup {
    playwright: "0.0.83",
    allowed: "mcp__playwright,Read",
};

/// The MCP config the test hands Claude Code: Playwright MCP `version`, behind `staleguard mcp`
/// when `guarded`. `TMPDIR` keeps the browser's profile in the scratch folder, so a browser
/// left behind can be found and killed.
fn mcp_config(scratch: &Scratch, guarded: bool, version: &str) -> PathBuf {
    let server = mcp::server_command(version);
    let (command, args) = if guarded {
        let mut args = vec!["mcp".to_string(), "--".into()];
        args.extend(server);
        (env!("CARGO_BIN_EXE_staleguard").to_string(), args)
    } else {
        (server[0].clone(), server[1..].to_vec())
    };
    let tmp = scratch.folder("tmp").display().to_string();
    let config = json!({"mcpServers": {"playwright": {
        "type": "stdio", "command": command, "args": args, "env": {"TMPDIR": tmp}}}});
    let path = scratch.dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).expect("write the MCP config");
    path
}

/// `claude -p` on the order form at `site`, with `base_url` as its Anthropic API, in the
/// scratch folder `work` (where Playwright MCP 0.0.83 writes `.playwright-mcp/`).
fn run_claude(
    scratch: &Scratch,
    base_url: &str,
    site: &str,
    guarded: bool,
    setup: &Setup,
) -> Finished {
    let prompt = format!(
        "Order 3 Blue widgets for Ada Lovelace at {site}/order/form.html and tell me the confirmation number."
    );
    run_claude_on(scratch, base_url, &prompt, guarded, setup, LIMIT)
}

/// `claude -p prompt`, as `run_claude` runs it, within `limit`.
fn run_claude_on(
    scratch: &Scratch,
    base_url: &str,
    prompt: &str,
    guarded: bool,
    setup: &Setup,
    limit: Duration,
) -> Finished {
    let bin = claude_bin();
    // Anything not on 127.0.0.1 goes to a closed port: no network beyond this machine.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let mut cmd = Command::new(&bin);
    cmd.current_dir(scratch.folder(WORK))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("HTTPS_PROXY", &nowhere)
        .env("HTTP_PROXY", &nowhere)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args(["-p", prompt, "--mcp-config"])
        .arg(mcp_config(scratch, guarded, setup.playwright))
        .args(["--strict-mcp-config", "--allowedTools", setup.allowed])
        .args(["--output-format", "json", "--no-session-persistence"]);
    let run = run_limited_group(cmd, limit, "claude -p");
    let leftovers = agents::kill_processes_under(&scratch.dir);
    eprintln!(
        "claude -p took {:.1} s; {leftovers} leftover processes killed",
        run.took.as_secs_f64()
    );
    assert!(
        run.success,
        "claude -p failed:\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    run
}

/// Claude Code's final answer (`--output-format json`).
fn final_answer(run: &Finished) -> String {
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("claude -p printed no JSON ({e}): {}", run.stdout));
    assert_eq!(out["is_error"], json!(false), "{out}");
    out["result"].as_str().unwrap_or_default().to_string()
}

// ------------------------------------------------------------------------------------------
// Reading Anthropic bodies

/// A tool result of a request: where it is, what it answers, its text.
struct ToolResult {
    at: (usize, usize),
    call: String,
    tool: String,
    text: String,
    is_error: bool,
}

fn content(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        _ => Vec::new(),
    }
}

/// Every content block of `body`'s messages with where it sits (message, block).
fn blocks(body: &Value) -> Vec<((usize, usize), Value)> {
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
fn tool_results(body: &Value) -> Vec<ToolResult> {
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
                    text: common::text_of(&block["content"]),
                    is_error: block["is_error"] == json!(true),
                });
            }
            _ => {}
        }
    }
    results
}

fn is_browser(tool: &str) -> bool {
    tool.starts_with("mcp__playwright__browser_")
}

/// A result that shows a page (what staleguard collapses when a newer one follows).
fn shows_page(text: &str) -> bool {
    text.contains("- Page Snapshot:")
}

/// Where every `cache_control` of `body` sits: ("tools", 3, 0), ("system", 1, 0),
/// ("messages", 4, 0) for block 0 of message 4.
fn breakpoints(body: &Value) -> Vec<(&'static str, usize, usize)> {
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
fn messages(records: Vec<Record>) -> Vec<Record> {
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

// ------------------------------------------------------------------------------------------
// The checks

/// The proxy forwarded exactly the projection of what Claude Code sent, request for request,
/// with every header but the hop-by-hop ones unchanged. Returns what the model got in the order
/// Claude Code sent it (requests in flight together may reach the model in another order).
fn forwarded_projections(scratch: &Scratch, sent: &[Record], mut got: Vec<Record>) -> Vec<Record> {
    assert_eq!(
        sent.len(),
        got.len(),
        "every Messages request Claude Code sent reached the model once"
    );
    let mut paired = Vec::new();
    for (i, s) in sent.iter().enumerate() {
        let want = project(scratch, "auto", &s.body);
        let Some(j) = got.iter().position(|g| g.body == want) else {
            panic!("request {i}: the model got no `staleguard project` of what Claude Code sent");
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

/// Claude Code's own request shapes are there and reach the model unchanged.
fn claude_shapes_pass_through(sent: &[Record], got: &[Record]) {
    let betas = sent[0].header("anthropic-beta").unwrap_or_default();
    for beta in [
        "context-management-2025-06-27",
        "advanced-tool-use-2025-11-20",
    ] {
        assert!(betas.contains(beta), "Claude Code sends {beta}: {betas}");
    }
    assert!(
        betas.split(',').count() >= 8,
        "eight beta flags or more: {betas}"
    );
    let mut system_messages = 0;
    let mut references = 0;
    for (s, g) in sent.iter().zip(got) {
        let (s, g) = (s.json(), g.json());
        for key in [
            "system",
            "tools",
            "thinking",
            "context_management",
            "metadata",
            "model",
        ] {
            assert_eq!(s[key], g[key], "{key} passes through unchanged");
        }
        assert_eq!(g["thinking"]["type"], "adaptive", "{}", g["thinking"]);
        assert!(
            g["context_management"]["edits"].is_array(),
            "{}",
            g["context_management"]
        );
        let pairs = s["messages"].as_array().into_iter().flatten();
        for (a, b) in pairs.zip(g["messages"].as_array().into_iter().flatten()) {
            if a["role"] == "system" {
                system_messages += 1;
                assert_eq!(
                    without_breakpoint(b, a),
                    *a,
                    "a system message passes through"
                );
            }
        }
        // ToolSearch's results; that they reach the model unchanged is checked with every
        // other non-browser block in only_old_pages_collapsed.
        for (_, block) in blocks(&g) {
            let parts = block["content"].as_array().into_iter().flatten();
            references += parts.filter(|p| p["type"] == "tool_reference").count();
        }
    }
    assert!(
        system_messages > 0,
        "Claude Code sends role: \"system\" messages"
    );
    assert!(
        references > 0,
        "ToolSearch's tool_reference blocks reach the model"
    );
    // The MCP tools are deferred: the first request defines none of them, later ones define
    // them with defer_loading once ToolSearch has returned their references.
    let first = sent[0].json();
    let names = |body: &Value| -> Vec<(String, bool)> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["name"].as_str().unwrap_or_default().to_string(),
                    t["defer_loading"] == json!(true),
                )
            })
            .collect()
    };
    assert!(
        !names(&first).iter().any(|(n, _)| is_browser(n)),
        "the first request defines no browser tool: {:?}",
        names(&first)
    );
    let last = names(&sent[sent.len() - 1].json());
    assert!(
        last.iter()
            .any(|(n, deferred)| n.ends_with("browser_navigate") && *deferred),
        "{last:?}"
    );
}

/// `got` with the `cache_control` keys that `sent` has not, removed.
fn without_breakpoint(got: &Value, sent: &Value) -> Value {
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

/// Calls and results pair one to one as Claude Code sent them, only results `may_change`
/// accepts changed, and everything else is as it was sent (a breakpoint aside). Gives the
/// results as sent and as received.
fn only_results_changed(
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

/// Nothing but browser results changed, calls and results pair one to one, and every page
/// but the newest reached the model as a receipt.
fn only_old_pages_collapsed(sent: &Value, got: &Value, i: usize) -> usize {
    let (s_results, g_results) = only_results_changed(sent, got, i, |r| is_browser(&r.tool));
    let pages: Vec<&ToolResult> = s_results.iter().filter(|r| shows_page(&r.text)).collect();
    for (n, page) in pages.iter().enumerate() {
        let forwarded = &g_results
            .iter()
            .find(|r| r.at == page.at)
            .expect("paired")
            .text;
        if n + 1 < pages.len() {
            assert!(
                forwarded.starts_with(RECEIPT) && !forwarded.contains("[ref="),
                "request {i}: an older page reached the model live: {forwarded:.400}"
            );
        } else {
            assert_eq!(
                forwarded, &page.text,
                "request {i}: the newest page is live"
            );
        }
    }
    pages.len().saturating_sub(1)
}

/// SPEC 9: where Claude Code left room (fewer than 4 breakpoints), the proxy added one, before
/// the newest browser result; never more than 4 in all.
fn breakpoints_in_place(sent: &Value, got: &Value, i: usize) {
    let (before, after) = (breakpoints(sent), breakpoints(got));
    assert!(
        after.len() <= 4,
        "request {i}: {} breakpoints: {after:?}",
        after.len()
    );
    let results = tool_results(sent);
    let Some(newest) = results.iter().rev().find(|r| is_browser(&r.tool)) else {
        assert_eq!(
            before, after,
            "request {i}: no browser result, no breakpoint of ours"
        );
        return;
    };
    if before.len() >= 4 {
        assert_eq!(before, after, "request {i}: no room, nothing added");
        return;
    }
    let added: Vec<_> = after.iter().filter(|a| !before.contains(a)).collect();
    assert!(
        before.iter().all(|b| after.contains(b)) && added.len() == 1,
        "request {i}: Claude Code's breakpoints {before:?} kept and one added: {after:?}"
    );
    let (key, m, b) = *added[0];
    assert!(
        key == "messages" && (m, b) < newest.at,
        "request {i}: our breakpoint {:?} is not before the newest browser result {:?}",
        added[0],
        newest.at
    );
}

/// The reused "Place order" was refused by `staleguard mcp`, naming the confirm page by the
/// observation ID its receipt carries; the page shows the one order, neither cancelled nor
/// repeated.
fn stale_click_refused(last: &Value) -> String {
    let results = tool_results(last);
    let refusal = results
        .iter()
        .find(|r| r.text.contains(REFUSED))
        .unwrap_or_else(|| {
            panic!(
                "no refusal reached the model: {:?}",
                results.iter().map(|r| &r.text).collect::<Vec<_>>()
            )
        });
    assert!(
        refusal.is_error && refusal.tool.ends_with("browser_click"),
        "{}",
        refusal.text
    );
    let id = refusal
        .text
        .split("observation ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no observation ID in {}", refusal.text));
    let receipt = results
        .iter()
        .find(|r| r.text.starts_with(RECEIPT) && r.text.contains("confirm.html"))
        .expect("the confirm page's receipt");
    assert!(
        receipt.text.contains(&format!("observation={id}")),
        "the refusal names observation {id}, the receipt says: {}",
        receipt.text
    );
    let page = &results.last().expect("a final result").text;
    assert!(page.contains("Confirmation number: WX-1001"), "{page}");
    assert!(
        !page.contains("cancelled") && !page.contains("WX-1002"),
        "{page}"
    );
    refusal.text.clone()
}

// ------------------------------------------------------------------------------------------
// The tests

#[test]
fn claude_code_order_flow_through_proxy_and_guard() {
    let scratch = Scratch::new("claude-guarded");
    let site = mcp::Site::shared();
    let model = Model::start(None);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let run = run_claude(&scratch, &relay.origin(), &site.base, true, &INLINE);
    let answer = final_answer(&run);
    assert!(
        answer.contains("WX-1001") && !answer.contains("cancelled"),
        "{answer}"
    );

    let sent = messages(relay.requests());
    let got = forwarded_projections(&scratch, &sent, messages(model.requests()));
    // The MCP tools are deferred, so the model's first move is ToolSearch, as a real one's is.
    assert_eq!(got[0].answer["tool"], "ToolSearch", "{}", got[0].answer);
    claude_shapes_pass_through(&sent, &got);
    let mut collapsed = 0;
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        collapsed += only_old_pages_collapsed(&s, &g, i);
        breakpoints_in_place(&s, &g, i);
    }
    assert!(
        collapsed >= 8,
        "older pages collapsed across the run: {collapsed}"
    );
    let refusal = stale_click_refused(&got[got.len() - 1].json());
    eprintln!("the model was told: {refusal}");

    let log = proxy.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(lines.len(), got.len(), "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("format=anthropic") && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");
}

/// Without staleguard the same script cancels the order: the reused ref lands on "Cancel this
/// order". What the guarded test prevents is real.
#[test]
fn claude_code_without_staleguard_cancels_the_order() {
    let scratch = Scratch::new("claude-unguarded");
    let site = mcp::Site::shared();
    let model = Model::start(None);
    let run = run_claude(&scratch, &model.origin(), &site.base, false, &INLINE);
    let answer = final_answer(&run);
    assert!(answer.contains("has been cancelled"), "{answer}");
    let got = messages(model.requests());
    let last = got.last().expect("requests").json();
    assert!(
        !tool_results(&last)
            .iter()
            .any(|r| r.text.contains(REFUSED) || r.text.starts_with(RECEIPT)),
        "nothing of staleguard's is in the unguarded run"
    );
}

// ------------------------------------------------------------------------------------------
// Snapshots read back through Claude Code's `Read` (SPEC 1)

/// Where Claude Code's cwd is inside the scratch folder (`run_claude`).
const WORK: &str = "work";

/// Every `tool_use` input of `body`, by its ID.
fn call_inputs(body: &Value) -> HashMap<String, Value> {
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

/// A `Read` of a snapshot file Playwright MCP linked (`<cwd>/.playwright-mcp/page-*.yml`)
/// that returned the page tree.
fn reads_snapshot(r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
    let path = inputs.get(&r.call).and_then(|i| i["file_path"].as_str());
    r.tool == "Read"
        && !r.is_error
        && path.is_some_and(|p| p.contains("/.playwright-mcp/page-") && p.ends_with(".yml"))
}

/// A result that holds a page tree: a snapshot file read back, or a browser result with the
/// tree inline (0.0.83's `browser_snapshot`).
fn holds_tree(r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
    (reads_snapshot(r, inputs) || is_browser(&r.tool)) && r.text.contains("[ref=")
}

/// What one request shows of the read-back pages.
#[derive(Default, Debug)]
struct Readback {
    reads: usize,
    reads_collapsed: usize,
    newest_read_live: bool,
}

/// Only browser results and snapshot files read back changed; every page tree but the newest
/// (read back or inline) reached the model as a receipt with no ref of its tree left, and the
/// newest as Claude Code sent it.
fn only_old_reads_collapsed(sent: &Value, got: &Value, i: usize) -> Readback {
    let inputs = call_inputs(sent);
    let may_change = |r: &ToolResult| is_browser(&r.tool) || reads_snapshot(r, &inputs);
    let (s_results, g_results) = only_results_changed(sent, got, i, may_change);
    let mut seen = Readback::default();
    let pages: Vec<(&ToolResult, &ToolResult)> = s_results
        .iter()
        .zip(&g_results)
        .filter(|(s, _)| holds_tree(s, &inputs))
        .collect();
    for (n, (s, g)) in pages.iter().enumerate() {
        let read = reads_snapshot(s, &inputs);
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

/// Claude Code sends a `Read` result as its file's lines, numbered: `1\t- ...` in 2.1.328
/// (other versions write `     1→- ...`).
fn numbered_like_claude_code(text: &str) {
    let first = text.lines().next().unwrap_or_default().trim_start();
    assert!(
        (first.starts_with("1\t- ") || first.starts_with("1\u{2192}- ")) && first.contains("[ref="),
        "a Read result starts `1<tab>- ... [ref=` or `     1→- ... [ref=`: {text:.300}"
    );
}

/// Claude Code 2.1.328 with Playwright MCP 0.0.83 behind `staleguard mcp`: every action result
/// only links its snapshot (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`), and the model
/// (`model.py --readback`) reads the file with Claude Code's own `Read` instead of calling
/// browser_snapshot, and acts on the refs of what it read. The proxy collapses every page read
/// back but the newest; the guard refuses the reused "Place order".
///
/// With `STALEGUARD_RECORD_FIXTURE=1` the last request Claude Code sent is saved, as sent, to
/// `fixtures/claude-code-readback/order.anthropic.json`.
#[test]
fn claude_code_reads_linked_snapshots_back_through_proxy_and_guard() {
    let scratch = Scratch::new("claude-readback");
    let site = mcp::Site::shared();
    let model = Model::script("model.py", &["--readback"]);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let run = run_claude(&scratch, &relay.origin(), &site.base, true, &READBACK);
    let answer = final_answer(&run);
    assert!(
        answer.contains("WX-1001") && !answer.contains("cancelled") && !answer.contains("WX-1002"),
        "{answer}"
    );

    let sent = messages(relay.requests());
    // Kept with the scratch folder when the test fails.
    for (i, s) in sent.iter().enumerate() {
        std::fs::write(scratch.dir.join(format!("sent-{i:02}.json")), &s.body).expect("write");
    }
    let got = messages(model.requests());
    for g in &got {
        let seq = g.header("x-e2e-seq").unwrap_or("none");
        std::fs::write(scratch.dir.join(format!("got-seq{seq}.json")), &g.body).expect("write");
    }
    let got = forwarded_projections(&scratch, &sent, got);
    claude_shapes_pass_through(&sent, &got);
    let seen: Vec<Readback> = sent
        .iter()
        .zip(&got)
        .enumerate()
        .map(|(i, (s, g))| only_old_reads_collapsed(&s.json(), &g.json(), i))
        .collect();
    let collapsed: usize = seen.iter().map(|r| r.reads_collapsed).sum();
    let live = seen.iter().filter(|r| r.newest_read_live).count();

    // The last request holds the whole run.
    let last_sent = sent[sent.len() - 1].json();
    let last_got = got[got.len() - 1].json();
    let inputs = call_inputs(&last_sent);
    let work = scratch.dir.join(WORK).display().to_string();
    let results = tool_results(&last_sent);
    let reads: Vec<&ToolResult> = results
        .iter()
        .filter(|r| reads_snapshot(r, &inputs))
        .collect();
    assert!(
        reads.len() >= 3,
        "Read results of snapshot files: {}",
        reads.len()
    );
    for r in &reads {
        numbered_like_claude_code(&r.text);
        let path = inputs[&r.call]["file_path"].as_str().unwrap_or_default();
        assert!(
            path.starts_with(&format!("{work}/.playwright-mcp/page-")),
            "{path} is in Claude Code's working folder {work}"
        );
    }
    // Every page the model acted on was read back: browser_snapshot was called once, after
    // the refusal.
    let snapshots: Vec<&ToolResult> = results
        .iter()
        .filter(|r| r.tool.ends_with("browser_snapshot"))
        .collect();
    assert_eq!(
        snapshots.len(),
        1,
        "one browser_snapshot, after the refusal"
    );
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

    // The reused "Place order" was refused; the first one placed the one order.
    let forwarded = tool_results(&last_got);
    let refusals: Vec<&ToolResult> = forwarded
        .iter()
        .filter(|r| r.text.contains(REFUSED))
        .collect();
    assert_eq!(refusals.len(), 1, "one refusal");
    let refusal = refusals[0];
    assert!(
        refusal.is_error
            && refusal.tool.ends_with("browser_click")
            && refusal.text.contains("order/confirm.html"),
        "the stale ref is named as the confirm page's: {}",
        refusal.text
    );
    let place: Vec<&Value> = results
        .iter()
        .filter(|r| r.tool.ends_with("browser_click"))
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
    let page = &forwarded.last().expect("a final result").text;
    assert!(page.contains("Confirmation number: WX-1001"), "{page}");
    assert!(
        !page.contains("cancelled") && !page.contains("WX-1002"),
        "{page}"
    );
    eprintln!(
        "{} Read results of snapshot files sent; {collapsed} collapsed across {} requests; {} refused: {}",
        reads.len(),
        got.len(),
        refusals.len(),
        refusal.text
    );

    let log = proxy.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(lines.len(), got.len(), "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("format=anthropic") && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");

    let body = &sent[sent.len() - 1].body;
    assert!(
        !body.contains(API_KEY),
        "the request body holds the API key"
    );
    if std::env::var_os("STALEGUARD_RECORD_FIXTURE").is_some() {
        let dir = repo().join("fixtures/claude-code-readback");
        std::fs::create_dir_all(&dir).expect("create the fixture folder");
        std::fs::write(dir.join("order.anthropic.json"), body).expect("write the fixture");
    }
}

// ------------------------------------------------------------------------------------------
// A coding agent checking pages between shell and file output (SPEC 9, C5)

/// Playwright MCP 0.0.41 (pages inline), its tools, `Read` and `Bash`.
const CODING_INLINE: Setup = Setup {
    playwright: "0.0.41",
    allowed: "mcp__playwright,Read,Bash",
};

/// Playwright MCP 0.0.83 (action results link the snapshot file), its tools, `Read` and `Bash`.
const CODING_READBACK: Setup = Setup {
    playwright: "0.0.83",
    allowed: "mcp__playwright,Read,Bash",
};

/// A coding session makes two to three times the requests of the bare flow (about 20 s here).
const CODING_LIMIT: Duration = Duration::from_secs(120);

/// Where the coding sessions are recorded (`STALEGUARD_RECORD_FIXTURE=1`).
const CODING_FIXTURES: &str = "fixtures/claude-code-coding";

/// The least output of other tools (bytes of result text) between two pages of a session.
const LEAST_BETWEEN: usize = 20_000;

/// A recorded coding session: what Claude Code sent and what the model got, in order, and
/// Claude Code's final answer.
struct Coding {
    sent: Vec<Record>,
    got: Vec<Record>,
    answer: String,
}

/// Runs `claude -p prompt` through the relay, `staleguard proxy` and `staleguard mcp` with
/// `model.py --coding` (and `model_args`), checks that only pages changed on the way, and
/// with `STALEGUARD_RECORD_FIXTURE=1` saves the last request Claude Code sent to
/// `fixtures/claude-code-coding/<name>.anthropic.json`.
fn coding_session(
    name: &str,
    setup: &Setup,
    model_args: &[&str],
    prompt: impl Fn(&str) -> String,
) -> Coding {
    // Short: Chromium's singleton socket path, under the scratch TMPDIR, must stay under 108 bytes.
    let scratch = Scratch::new(&format!(
        "code-{}",
        name.split('_').next_back().unwrap_or(name)
    ));
    let site = mcp::Site::shared();
    let mut args = vec!["--coding"];
    args.extend(model_args);
    let model = Model::script("model.py", &args);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let prompt = prompt(&site.base);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_claude_on(
            &scratch,
            &relay.origin(),
            &prompt,
            true,
            setup,
            CODING_LIMIT,
        )
    }));
    let sent = messages(relay.requests());
    // Kept with the scratch folder when the test fails, also when Claude Code did.
    for (i, s) in sent.iter().enumerate() {
        std::fs::write(scratch.dir.join(format!("sent-{i:02}.json")), &s.body).expect("write");
    }
    let run = run.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let answer = final_answer(&run);
    let got = forwarded_projections(&scratch, &sent, messages(model.requests()));
    claude_shapes_pass_through(&sent, &got);
    // Only pages changed: browser results and snapshot files read back; every file read,
    // command output and listing reached the model as Claude Code sent it.
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        let inputs = call_inputs(&s);
        only_results_changed(&s, &g, i, |r| {
            is_browser(&r.tool) || reads_snapshot(r, &inputs)
        });
    }

    let log = proxy.stop();
    // Claude Code also counts the tokens of large files it reads (`/v1/messages/count_tokens`).
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" request ") && l.contains(" path=/v1/messages "))
        .collect();
    assert_eq!(lines.len(), got.len(), "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("format=anthropic") && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");

    let last = sent.last().expect("requests");
    assert!(
        !last.body.contains(API_KEY),
        "the request body holds the API key"
    );
    between_pages(&last.json());
    if std::env::var_os("STALEGUARD_RECORD_FIXTURE").is_some() {
        let dir = repo().join(CODING_FIXTURES);
        std::fs::create_dir_all(&dir).expect("create the fixture folder");
        std::fs::write(dir.join(format!("{name}.anthropic.json")), &last.body)
            .expect("write the fixture");
    }
    Coding { sent, got, answer }
}

/// The shape of a session: every page (a browser result that shows one, or a snapshot file
/// read back) and the bytes of other tools' results between it and the next browser call;
/// each page is followed by `LEAST_BETWEEN` or more before the next page. Printed, and
/// returned as (tool, page bytes, bytes of other tools after it).
fn between_pages(body: &Value) -> Vec<(String, usize, usize)> {
    let inputs = call_inputs(body);
    let mut pages: Vec<(String, usize, usize)> = Vec::new();
    let (mut browser, mut other) = (0, 0);
    for r in tool_results(body) {
        let page = (is_browser(&r.tool) && (shows_page(&r.text) || r.text.contains("[ref=")))
            || reads_snapshot(&r, &inputs);
        if page {
            pages.push((r.tool.clone(), r.text.len(), 0));
        } else if is_browser(&r.tool) {
            browser += r.text.len();
        } else if let Some(last) = pages.last_mut() {
            last.2 += r.text.len();
            other += r.text.len();
        }
    }
    eprintln!(
        "{} pages ({} bytes), {browser} bytes of browser results without a page, {other} bytes of other tools' results after the first page:",
        pages.len(),
        pages.iter().map(|p| p.1).sum::<usize>()
    );
    for (n, (tool, size, after)) in pages.iter().enumerate() {
        eprintln!(
            "  page {:>2}: {tool} {size} bytes, then {after} bytes of other tools",
            n + 1
        );
    }
    for (n, (tool, _, after)) in pages.iter().enumerate().take(pages.len().saturating_sub(1)) {
        assert!(
            *after >= LEAST_BETWEEN,
            "page {} ({tool}) is followed by {after} bytes of other tools' output, not {LEAST_BETWEEN}",
            n + 1
        );
    }
    pages
}

/// The order flow's end as the model got it: the reused "Place order" refused by the guard,
/// the page after it showing the one order, neither cancelled nor repeated.
fn order_refused_once(coding: &Coding) {
    assert!(
        coding.answer.contains("WX-1001")
            && !coding.answer.contains("cancelled")
            && !coding.answer.contains("WX-1002"),
        "{}",
        coding.answer
    );
    let last = coding.got.last().expect("requests").json();
    let results = tool_results(&last);
    let refusals: Vec<&ToolResult> = results
        .iter()
        .filter(|r| r.text.contains(REFUSED))
        .collect();
    assert_eq!(refusals.len(), 1, "one refusal");
    assert!(
        refusals[0].is_error && refusals[0].tool.ends_with("browser_click"),
        "{}",
        refusals[0].text
    );
    let page = results
        .iter()
        .rfind(|r| r.tool.ends_with("browser_snapshot"))
        .expect("a browser_snapshot after the refusal");
    assert!(
        page.text.contains("Confirmation number: WX-1001"),
        "{}",
        page.text
    );
    assert!(
        !page.text.contains("cancelled") && !page.text.contains("WX-1002"),
        "{}",
        page.text
    );
    eprintln!(
        "{} requests; the model was told: {}",
        coding.got.len(),
        refusals[0].text
    );
}

fn order_prompt(site: &str) -> String {
    format!(
        "I am changing how the shop's checkout pages are served. Check that the order flow still works: \
         order 3 Blue widgets for Ada Lovelace at {site}/order/form.html and tell me the confirmation number."
    )
}

/// (a) Claude Code with Playwright MCP 0.0.41 (the page inline in every action result) on the
/// order flow, the model (`model.py --coding`) running `Bash` (`ls -laR`, `sed -n`, `curl -s`,
/// doctests) and `Read` of 10-60 KB files after every page; the guard refuses the reused
/// "Place order". Recorded as `order_inline.anthropic.json`.
#[test]
fn claude_code_mixes_shell_output_with_inline_pages() {
    let coding = coding_session("order_inline", &CODING_INLINE, &[], order_prompt);
    order_refused_once(&coding);
    assert!(coding.sent.len() >= 20, "{} requests", coding.sent.len());
}

/// (b) The same with Playwright MCP 0.0.83: every page the model acts on is read back from
/// the snapshot file its action result links, with `Read` (`model.py --coding --readback`).
/// Recorded as `order_readback.anthropic.json`.
#[test]
fn claude_code_mixes_shell_output_with_pages_read_back() {
    let coding = coding_session(
        "order_readback",
        &CODING_READBACK,
        &["--readback"],
        order_prompt,
    );
    order_refused_once(&coding);
    let last = coding.sent.last().expect("requests").json();
    let inputs = call_inputs(&last);
    let reads = tool_results(&last)
        .iter()
        .filter(|r| reads_snapshot(r, &inputs))
        .count();
    assert!(reads >= 4, "snapshot files read back: {reads}");
}

/// (c) A longer session on Playwright MCP 0.0.83, every page read back with `Read`: the
/// 300-row parts catalog (a 60 KB snapshot file) visited three times, the knowledge base's
/// search, results and two articles between, and 20-90 KB of `Bash` and `Read` output after
/// every page (one `cat` past Claude Code's 30,000-character limit, which it saves to a file
/// and sends a 2 KB preview of). Not 0.0.41: Claude Code saves an MCP result over 50,000
/// characters, such as the catalog's inline snapshot, to a file and sends only a 2 KB preview.
/// Recorded as `catalog_research.anthropic.json`.
#[test]
fn claude_code_revisits_long_pages_between_shell_output() {
    let coding = coding_session(
        "catalog_research",
        &CODING_READBACK,
        &["--readback"],
        |site| {
            format!(
            "While I fix the price export, look up parts P-0042, P-0137 and P-0300 in the catalog at \
             {site}/long/catalog.html, and what home batteries cost in the knowledge base at \
             {site}/research/search.html; tell me the parts' prices and the articles' prices and dates."
        )
        },
    );
    for row in [
        "P-0042: Wood screw 60 mm, steel, $9.89",
        "P-0137: Cabinet handle M6, steel, $20.04",
        "P-0300: Hex bolt 100 mm, zinc, $3.35",
    ] {
        assert!(coding.answer.contains(row), "{row}: {}", coding.answer);
    }
    eprintln!("{} requests; answer: {}", coding.got.len(), coding.answer);
    let last = coding.sent.last().expect("requests").json();
    let inputs = call_inputs(&last);
    let visits = tool_results(&last)
        .iter()
        .filter(|r| {
            r.tool.ends_with("browser_navigate")
                && inputs[&r.call]["url"]
                    .as_str()
                    .is_some_and(|u| u.ends_with("/long/catalog.html"))
        })
        .count();
    assert_eq!(visits, 3, "the catalog visited three times");
}
