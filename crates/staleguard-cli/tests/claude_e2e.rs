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

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agents::anthropic::{
    blocks, breakpoints, call_inputs, forwarded_projections, messages, nothing_of_staleguards,
    only_results_changed, proxy_log_checked, refusal_names_the_receipt, tool_results,
    without_breakpoint, Agent, ToolResult, API_KEY,
};
use agents::{
    agent_command, behind_guard, keep_sent, npm_bin, order_placed_once, repo, run_agent,
    shows_page, Chain, Finished, Model, Record, Scratch, REFUSED, WORK,
};
use serde_json::{json, Value};

const VERSION: &str = "2.1.328";
/// A run of the flow takes about 12 s here; the limit is the two minutes.
const LIMIT: Duration = Duration::from_secs(120);
/// Claude Code calls Playwright MCP's tools `mcp__playwright__<tool>` and reads files with
/// `Read` (`file_path`).
const CLAUDE: Agent = Agent {
    name: "Claude Code",
    mcp: "mcp__playwright__",
    read: "Read",
    path: "file_path",
};

/// The pinned `claude` binary, checked to start and to be the pinned version.
fn claude_bin() -> PathBuf {
    let (dir, bin) = npm_bin(
        &format!("claude-code-{VERSION}"),
        "claude",
        &format!("Claude Code {VERSION}"),
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
    let server = behind_guard(mcp::server_command(version), guarded);
    let (command, args) = (&server[0], &server[1..]);
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
    let mut cmd = agent_command(scratch, &claude_bin());
    cmd.env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(["-p", prompt, "--mcp-config"])
        .arg(mcp_config(scratch, guarded, setup.playwright))
        .args(["--strict-mcp-config", "--allowedTools", setup.allowed])
        .args(["--output-format", "json", "--no-session-persistence"]);
    run_agent(scratch, cmd, limit, "claude -p", "")
}

/// Claude Code's final answer (`--output-format json`).
fn final_answer(run: &Finished) -> String {
    let out: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("claude -p printed no JSON ({e}): {}", run.stdout));
    assert_eq!(out["is_error"], json!(false), "{out}");
    out["result"].as_str().unwrap_or_default().to_string()
}

// ------------------------------------------------------------------------------------------
// The checks

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
        !names(&first).iter().any(|(n, _)| CLAUDE.is_browser(n)),
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
    let Some(newest) = results.iter().rev().find(|r| CLAUDE.is_browser(&r.tool)) else {
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

// ------------------------------------------------------------------------------------------
// The tests

#[test]
fn claude_code_order_flow_through_proxy_and_guard() {
    let scratch = Scratch::new("claude-guarded");
    let site = mcp::Site::shared();
    let mut chain = Chain::start(&scratch, "model.py", &[]);
    let run = run_claude(&scratch, &chain.relay.origin(), &site.base, true, &INLINE);
    order_placed_once(&final_answer(&run));

    let (sent, got) = CLAUDE.exchanged(&scratch, &chain);
    // The MCP tools are deferred, so the model's first move is ToolSearch, as a real one's is.
    assert_eq!(got[0].answer["tool"], "ToolSearch", "{}", got[0].answer);
    claude_shapes_pass_through(&sent, &got);
    let mut collapsed = 0;
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        collapsed += CLAUDE.only_old_pages_collapsed(&s, &g, i);
        breakpoints_in_place(&s, &g, i);
    }
    assert!(
        collapsed >= 8,
        "older pages collapsed across the run: {collapsed}"
    );
    let last = got[got.len() - 1].json();
    let refusal = CLAUDE.stale_click_refused_once(&last);
    refusal_names_the_receipt(&last, &refusal);
    eprintln!("the model was told: {refusal}");

    proxy_log_checked(&chain.proxy.stop(), got.len(), false);
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
    nothing_of_staleguards(model.requests());
}

// ------------------------------------------------------------------------------------------
// Snapshots read back through Claude Code's `Read` (SPEC 1)

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
    let mut chain = Chain::start(&scratch, "model.py", &["--readback"]);
    let run = run_claude(&scratch, &chain.relay.origin(), &site.base, true, &READBACK);
    order_placed_once(&final_answer(&run));

    let (sent, got) = CLAUDE.exchanged(&scratch, &chain);
    claude_shapes_pass_through(&sent, &got);
    let work = scratch.dir.join(WORK).display().to_string();
    let (reads, collapsed) = CLAUDE.pages_read_back(&sent, &got, &work, 3, |text, _| {
        numbered_like_claude_code(text)
    });
    // The reused "Place order" was refused; the first one placed the one order.
    let refusal = CLAUDE.stale_click_refused_once(&got[got.len() - 1].json());
    eprintln!(
        "{reads} Read results of snapshot files sent; {collapsed} collapsed across {} requests; refused: {refusal}",
        got.len()
    );

    proxy_log_checked(&chain.proxy.stop(), got.len(), false);
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
    let mut chain = Chain::start(&scratch, "model.py", &args);
    let prompt = prompt(&site.base);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_claude_on(
            &scratch,
            &chain.relay.origin(),
            &prompt,
            true,
            setup,
            CODING_LIMIT,
        )
    }));
    let sent = messages(chain.relay.requests());
    // Kept with the scratch folder when the test fails, also when Claude Code did.
    keep_sent(&scratch, &sent);
    let run = run.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let answer = final_answer(&run);
    let got = forwarded_projections(
        &scratch,
        CLAUDE.name,
        &sent,
        messages(chain.model.requests()),
    );
    claude_shapes_pass_through(&sent, &got);
    // Only pages changed: browser results and snapshot files read back; every file read,
    // command output and listing reached the model as Claude Code sent it.
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        let inputs = call_inputs(&s);
        only_results_changed(&s, &g, i, |r| {
            CLAUDE.is_browser(&r.tool) || CLAUDE.reads_snapshot(r, &inputs)
        });
    }

    // Claude Code also counts the tokens of large files it reads (`/v1/messages/count_tokens`).
    proxy_log_checked(&chain.proxy.stop(), got.len(), true);

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
        let page = (CLAUDE.is_browser(&r.tool)
            && (shows_page(&r.text) || r.text.contains("[ref=")))
            || CLAUDE.reads_snapshot(&r, &inputs);
        if page {
            pages.push((r.tool.clone(), r.text.len(), 0));
        } else if CLAUDE.is_browser(&r.tool) {
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
    order_placed_once(&coding.answer);
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
        .filter(|r| CLAUDE.reads_snapshot(r, &inputs))
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
