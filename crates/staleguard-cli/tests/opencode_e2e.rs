//! opencode end to end: the `opencode-ai` CLI (1.18.33, pinned in
//! `tests/mcp/node/opencode-1.18.33`) runs headless (`opencode run --format json`) with its
//! built-in `anthropic` provider pointed at `staleguard proxy`, Playwright MCP behind
//! `staleguard mcp` as its MCP server, and Debian's Chromium, on the shared order flow. The
//! model is `tests/agents/model.py`, which decides every answer from the request it was sent
//! and reuses the old "Place order" ref after the order is placed, as the recorded sessions did.
//!
//! **The provider.** opencode ships `@ai-sdk/anthropic` inside its binary, and
//! `provider.anthropic.options.baseURL` in `opencode.json` is how its users point it at a
//! gateway; the model (`anthropic/claude-sonnet-4-5`) comes from the models.dev snapshot the
//! binary carries. A custom `@ai-sdk/openai-compatible` provider would work too, but is the
//! rarer setup and needs the model declared by hand. With `OPENCODE_DISABLE_MODELS_FETCH=1`
//! (no models.dev) and `OPENCODE_DISABLE_AUTOUPDATE=1` (no version check) opencode itself
//! connects to nothing but 127.0.0.1 (checked with strace: only Chromium's background
//! requests try the closed proxy port); it downloads no provider package at run time.
//!
//! **What opencode 1.18.33 sends.** `POST /v1/messages` under the base URL, always `stream:
//! true` (SSE back), HTTP/1.1 kept alive, with `x-api-key`, `anthropic-version: 2023-06-01`,
//! `x-session-id` and `x-session-affinity` (the session's ID), `User-Agent: opencode/1.18.33
//! ai-sdk/provider-utils/... runtime/bun/...`, and `anthropic-beta:
//! structured-outputs-2025-11-13` on the agent's own requests. The body: `model`, `max_tokens`,
//! `system` (text blocks), `messages`, `tools` (each with `eager_input_streaming: true`),
//! `tool_choice: {"type": "auto"}`, `stream`. Beside the agent's requests it sends a title
//! request in parallel to the first one (the small model, `claude-haiku-4-5-20251001`, with
//! `thinking` on and no tools). Tool results are `tool_result` blocks whose `content` is a
//! plain string; an MCP error (the guard's refusal) is `is_error: true` with its text.
//! **Caching**: opencode marks `cache_control: {"type": "ephemeral"}` on the first two system
//! blocks (it sends one) and on the last block of the last two messages, so three
//! breakpoints; the proxy adds the fourth before the newest page when that block has none
//! (`breakpoint=added`), and adds nothing when opencode's own mark is there
//! (`breakpoint=already_there`).
//!
//! **Tool names.** Its own tools are `bash`, `edit`, `glob`, `grep`, `read`, `skill`, `task`,
//! `todowrite`, `webfetch`, `write`; an MCP tool is `<server>_<tool>`:
//! `playwright_browser_click`, and the guard's `playwright_browser_history`. staleguard's
//! default browser patterns take `playwright_browser_*` for browser tools.
//!
//! **`read`** (argument `filePath`, absolute) prints a file as
//! `<path>/abs/file</path>\n<type>file</type>\n<content>\n1: first line\n2: ...\n\n(End of file -
//! total N lines)\n</content>`.
//!
//! **The config** (`opencode.json`, handed over with `OPENCODE_CONFIG`): the provider's
//! `baseURL` (with `/v1`: the SDK appends `/messages`), the MCP server as a `local` command
//! (`staleguard mcp -- <Playwright MCP>`) with a `timeout` of 60 s (opencode's default of
//! 5 s a request is short for Chromium's start on a busy machine), and `permission` allowing
//! `playwright_*` and `read` (opencode's default allows them too; the key is matched against
//! MCP tool names, `"deny"` removes the tools from the request).
//!
//! Three runs: Playwright MCP 0.0.41 (the page inline in every action result) behind the guard
//! and through the proxy; the same without staleguard, where the reused ref cancels the order;
//! and Playwright MCP 0.0.83, whose action results only link their snapshot file: the model
//! (`model.py --readback`) reads each file back with `read`, and the proxy collapses the pages
//! read back as it does browser results (SPEC 1, "Snapshots read back through another tool").
//! A relay (`model.py --relay`) in front of the proxy records what opencode sent, so every
//! request the model got is checked against exactly `staleguard project` of it.
//!
//! Needs the pinned package installed (`npm ci` in its folder, as `scripts/test` does; its
//! postinstall links the `opencode-linux-x64` binary), `python3`, Node.js for Playwright MCP
//! and `/usr/bin/chromium`; without them the tests fail saying what to install.

mod agents;
mod common;
// The MCP harness: this test uses its site and server command only.
mod mcp;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agents::anthropic::{
    blocks, breakpoints, call_inputs, forwarded_projections, messages, only_results_changed,
    tool_results, ToolResult,
};
use agents::{free_port, repo, run_limited_group, Finished, Model, Proxy, Record, Scratch};
use serde_json::{json, Value};

const VERSION: &str = "1.18.33";
const API_KEY: &str = "sk-ant-e2e-dummy-key";
/// The model opencode is told to use (`--model`), one of its bundled models.dev snapshot.
const MODEL: &str = "anthropic/claude-sonnet-4-5";
/// The MCP server's name in `opencode.json`: opencode calls its tools `playwright_<tool>`.
const SERVER: &str = "playwright";
/// A run of the flow takes 7-15 s here; the limit is the two minutes.
const LIMIT: Duration = Duration::from_secs(120);
/// Where opencode's working directory is inside the scratch folder; Playwright MCP 0.0.83
/// writes `.playwright-mcp/` there.
const WORK: &str = "work";
const RECEIPT: &str = "[staleguard receipt]";
const REFUSED: &str = "staleguard refused this call";

// ------------------------------------------------------------------------------------------
// opencode

/// The pinned `opencode` binary, checked to start and to be the pinned version (in the
/// scratch home: even `--version` makes opencode's folders in `$HOME`).
fn opencode_bin(scratch: &Scratch) -> PathBuf {
    let dir = repo().join(format!("tests/mcp/node/opencode-{VERSION}"));
    let bin = dir.join("node_modules/.bin/opencode");
    assert!(
        bin.exists(),
        "opencode {VERSION} is not installed in {}: run `npm ci` there, or run scripts/test, which does",
        dir.display()
    );
    let out = Command::new(&bin)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && version.trim() == VERSION,
        "{} --version said {version:?} (stderr {:?}): reinstall it with `npm ci` in {} (its postinstall script \
         links the platform binary, so not with --ignore-scripts)",
        bin.display(),
        String::from_utf8_lossy(&out.stderr),
        dir.display()
    );
    bin
}

/// The `opencode.json` the test hands opencode (`OPENCODE_CONFIG`): the Anthropic provider at
/// `base_url`, and Playwright MCP `version` as the MCP server `playwright`, behind `staleguard
/// mcp` when `guarded`. `TMPDIR` keeps the browser's profile in the scratch folder, so a
/// browser left behind can be found and killed; the timeout covers Chromium's start on a busy
/// machine (opencode's default is 5 s a request).
fn config(scratch: &Scratch, base_url: &str, guarded: bool, version: &str) -> PathBuf {
    let server = mcp::server_command(version);
    let command: Vec<String> = if guarded {
        let mut command = vec![
            env!("CARGO_BIN_EXE_staleguard").to_string(),
            "mcp".into(),
            "--".into(),
        ];
        command.extend(server);
        command
    } else {
        server
    };
    let tmp = scratch.folder("tmp").display().to_string();
    let config = json!({
        "autoupdate": false,
        "share": "disabled",
        "provider": {"anthropic": {"options": {"baseURL": format!("{base_url}/v1")}}},
        "mcp": {SERVER: {
            "type": "local", "command": command, "environment": {"TMPDIR": tmp}, "timeout": 60000}},
        "permission": {"playwright_*": "allow", "read": "allow"}
    });
    let path = scratch.dir.join("opencode.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("JSON")).expect("write");
    path
}

/// `opencode run` on the order form at `site`, with `base_url` as its Anthropic API, in the
/// scratch folder `work`, with only the environment it needs: a throwaway home, the dummy
/// key, no models.dev, no update check, and anything not on 127.0.0.1 sent to a closed port.
fn run_opencode(
    scratch: &Scratch,
    base_url: &str,
    site: &str,
    guarded: bool,
    version: &str,
) -> Finished {
    let prompt = format!(
        "Order 3 Blue widgets for Ada Lovelace at {site}/order/form.html and tell me the confirmation number."
    );
    let bin = opencode_bin(scratch);
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let mut cmd = Command::new(&bin);
    cmd.current_dir(scratch.folder(WORK))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env(
            "OPENCODE_CONFIG",
            config(scratch, base_url, guarded, version),
        )
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("HTTPS_PROXY", &nowhere)
        .env("HTTP_PROXY", &nowhere)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args(["run", "--format", "json", "--model", MODEL, &prompt]);
    let run = run_limited_group(cmd, LIMIT, "opencode run");
    let leftovers = agents::kill_processes_under(&scratch.dir);
    eprintln!(
        "opencode run took {:.1} s; {leftovers} leftover processes killed",
        run.took.as_secs_f64()
    );
    assert!(
        run.success,
        "opencode run failed (its log is in {}/home/.local/share/opencode/log):\nstdout:\n{}\nstderr:\n{}",
        scratch.dir.display(),
        run.stdout,
        run.stderr
    );
    run
}

/// opencode's final answer: the text of the last `text` event of `--format json`. An `error`
/// event fails the test.
fn final_answer(run: &Finished) -> String {
    let mut answer = None;
    for line in run.stdout.lines().filter(|l| !l.trim().is_empty()) {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("opencode printed a line that is no JSON ({e}): {line}"));
        match event["type"].as_str() {
            Some("error") => panic!(
                "opencode reported an error: {event}\nstderr:\n{}",
                run.stderr
            ),
            Some("text") => answer = event["part"]["text"].as_str().map(str::to_string),
            _ => {}
        }
    }
    answer.unwrap_or_else(|| panic!("opencode gave no answer:\n{}", run.stdout))
}

// ------------------------------------------------------------------------------------------
// What opencode sent

fn is_browser(tool: &str) -> bool {
    tool.starts_with("playwright_browser_")
}

/// A result that shows a page inline (Playwright MCP 0.0.41).
fn shows_page(text: &str) -> bool {
    text.contains("- Page Snapshot:")
}

/// opencode's own request shapes are there and reach the model unchanged.
fn opencode_shapes_pass_through(sent: &[Record], got: &[Record]) {
    let mut agent_requests = 0;
    for (i, (s, g)) in sent.iter().zip(got).enumerate() {
        let agent = s
            .header("user-agent")
            .unwrap_or_else(|| panic!("request {i} has no User-Agent"));
        assert!(
            agent.starts_with(&format!("opencode/{VERSION} ")),
            "{agent}"
        );
        assert_eq!(s.header("x-api-key"), Some(API_KEY), "request {i}");
        assert_eq!(s.header("anthropic-version"), Some("2023-06-01"));
        assert!(s.header("x-session-id").is_some(), "request {i}");
        let (s, g) = (s.json(), g.json());
        assert_eq!(s["stream"], json!(true), "request {i}: opencode streams");
        for key in [
            "model",
            "max_tokens",
            "system",
            "tools",
            "tool_choice",
            "thinking",
        ] {
            assert_eq!(
                s[key], g[key],
                "request {i}: {key} passes through unchanged"
            );
        }
        for (_, block) in blocks(&s)
            .iter()
            .filter(|(_, b)| b["type"] == "tool_result")
        {
            assert!(
                block["content"].is_string(),
                "request {i}: opencode sends a tool result's content as a string: {block}"
            );
        }
        let tools: Vec<&str> = s["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        if tools.is_empty() {
            continue; // The title request.
        }
        agent_requests += 1;
        for name in [
            "read",
            "playwright_browser_click",
            "playwright_browser_history",
        ] {
            assert!(
                tools.contains(&name),
                "request {i} offers {name}: {tools:?}"
            );
        }
        let own = breakpoints(&s);
        assert!(
            own.len() <= 3 && own.iter().any(|(key, _, _)| *key == "system"),
            "request {i}: opencode marks its system prompt and the last two messages: {own:?}"
        );
    }
    assert!(agent_requests >= 5, "{agent_requests} agent requests");
}

/// SPEC 9: the request reached the model with a breakpoint before its newest browser result
/// (or page read back: `is_page` says which results count), opencode's own or one the proxy
/// added where opencode left room; never more than 4 in all. Returns whether the proxy added
/// one.
fn breakpoints_in_place(
    sent: &Value,
    got: &Value,
    i: usize,
    is_page: impl Fn(&ToolResult) -> bool,
) -> bool {
    let (before, after) = (breakpoints(sent), breakpoints(got));
    assert!(
        after.len() <= 4,
        "request {i}: {} breakpoints: {after:?}",
        after.len()
    );
    assert!(
        before.iter().all(|b| after.contains(b)),
        "request {i}: opencode's breakpoints {before:?} are kept: {after:?}"
    );
    let added: Vec<_> = after.iter().filter(|a| !before.contains(a)).collect();
    let results = tool_results(sent);
    let Some(newest) = results.iter().rev().find(|r| is_page(r)) else {
        assert!(
            added.is_empty(),
            "request {i}: no browser result, no breakpoint of ours"
        );
        return false;
    };
    assert!(
        added.len() <= 1,
        "request {i}: one breakpoint of ours at most: {added:?}"
    );
    assert!(
        after
            .iter()
            .any(|&(key, m, b)| key == "messages" && (m, b) < newest.at),
        "request {i}: no breakpoint before the newest page result {:?}: {after:?}",
        newest.at
    );
    if let Some(&&(key, m, b)) = added.first() {
        assert!(
            key == "messages" && (m, b) < newest.at,
            "request {i}: our breakpoint {:?} is not before the newest page result {:?}",
            added[0],
            newest.at
        );
    }
    !added.is_empty()
}

/// Nothing but browser results changed, calls and results pair one to one, and every page
/// but the newest reached the model as a receipt. Returns how many pages collapsed.
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

/// The reused "Place order" was refused by `staleguard mcp` once, as an MCP error opencode
/// passed on; it is the same call as the click that placed the order; the page after it shows
/// the one order, neither cancelled nor repeated. Returns the refusal.
fn stale_click_refused_once(last: &Value) -> String {
    let results = tool_results(last);
    let inputs = call_inputs(last);
    let refusals: Vec<&ToolResult> = results
        .iter()
        .filter(|r| r.text.contains(REFUSED))
        .collect();
    assert_eq!(refusals.len(), 1, "one refusal");
    let refusal = refusals[0];
    assert!(
        refusal.is_error
            && refusal.tool == "playwright_browser_click"
            && refusal.text.contains("order/confirm.html"),
        "the stale ref is named as the confirm page's: {}",
        refusal.text
    );
    let place: Vec<&Value> = results
        .iter()
        .filter(|r| r.tool == "playwright_browser_click")
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
        snapshot.tool, "playwright_browser_snapshot",
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

/// Every request the proxy logged was projected as Anthropic; the API key is in no line.
/// Returns how many lines say the proxy added a breakpoint.
fn proxy_log_checked(log: &str, requests: usize) -> usize {
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(lines.len(), requests, "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("path=/v1/messages ")
                && line.contains("format=anthropic")
                && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");
    // `breakpoint="added"` (quoted in the text log), `already_there`, or `-`.
    let added = |l: &&&str| l.contains(" breakpoint=\"added\"") || l.contains(" breakpoint=added ");
    lines.iter().filter(added).count()
}

// ------------------------------------------------------------------------------------------
// The tests

/// opencode with Playwright MCP 0.0.41 (the page inline in every action result) behind the
/// guard, through the proxy: every request projected, older pages collapsed to receipts, the
/// reused "Place order" refused, no order cancelled.
#[test]
fn opencode_order_flow_through_proxy_and_guard() {
    let scratch = Scratch::new("opencode-guarded");
    let site = mcp::Site::shared();
    let model = Model::start(None);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let run = run_opencode(&scratch, &relay.origin(), &site.base, true, "0.0.41");
    let answer = final_answer(&run);
    assert!(
        answer.contains("WX-1001") && !answer.contains("cancelled") && !answer.contains("WX-1002"),
        "{answer}"
    );

    let sent = messages(relay.requests());
    let got = forwarded_projections(&scratch, "opencode", &sent, messages(model.requests()));
    opencode_shapes_pass_through(&sent, &got);
    let (mut collapsed, mut added) = (0, 0);
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        collapsed += only_old_pages_collapsed(&s, &g, i);
        added += usize::from(breakpoints_in_place(&s, &g, i, |r| is_browser(&r.tool)));
    }
    assert!(
        collapsed >= 8,
        "older pages collapsed across the run: {collapsed}"
    );
    let last = got[got.len() - 1].json();
    let refusal = stale_click_refused_once(&last);
    // The refusal names the confirm page by the observation ID its receipt carries.
    let id = refusal
        .split("observation ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no observation ID in {refusal}"));
    let results = tool_results(&last);
    let receipt = results
        .iter()
        .find(|r| r.text.starts_with(RECEIPT) && r.text.contains("confirm.html"))
        .expect("the confirm page's receipt");
    assert!(
        receipt.text.contains(&format!("observation={id}")),
        "the refusal names observation {id}, the receipt says: {}",
        receipt.text
    );
    eprintln!(
        "{} requests, {collapsed} pages collapsed, {added} breakpoints added; the model was told: {refusal}",
        got.len()
    );

    let log = proxy.stop();
    assert_eq!(
        proxy_log_checked(&log, got.len()),
        added,
        "breakpoint=added:\n{log}"
    );
}

/// Without staleguard the same script cancels the order: the reused ref lands on "Cancel this
/// order". What the guarded test prevents is real with opencode too.
#[test]
fn opencode_without_staleguard_cancels_the_order() {
    let scratch = Scratch::new("opencode-unguarded");
    let site = mcp::Site::shared();
    let model = Model::start(None);
    let run = run_opencode(&scratch, &model.origin(), &site.base, false, "0.0.41");
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
// Snapshots read back through opencode's `read` (SPEC 1)

/// A `read` of a snapshot file Playwright MCP linked (`<cwd>/.playwright-mcp/page-*.yml`).
fn reads_snapshot(r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
    let path = inputs.get(&r.call).and_then(|i| i["filePath"].as_str());
    r.tool == "read"
        && !r.is_error
        && path.is_some_and(|p| p.contains("/.playwright-mcp/page-") && p.ends_with(".yml"))
}

/// A result that holds a page tree: a snapshot file read back, or a browser result with the
/// tree inline (0.0.83's `browser_snapshot`).
fn holds_tree(r: &ToolResult, inputs: &HashMap<String, Value>) -> bool {
    (reads_snapshot(r, inputs) || is_browser(&r.tool)) && r.text.contains("[ref=")
}

/// opencode prints a file read as its path, its type, and its lines numbered `1: `, inside
/// `<content>` and closed by the count of lines.
fn read_like_opencode(text: &str, path: &str) {
    let head = format!("<path>{path}</path>\n<type>file</type>\n<content>\n1: - ");
    assert!(
        text.starts_with(&head)
            && text.contains("[ref=")
            && text.contains("\n\n(End of file - total ")
            && text.ends_with(" lines)\n</content>"),
        "a read result is `{head}...(End of file - total N lines)\\n</content>`: {text:.400}"
    );
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
/// newest as opencode sent it.
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

/// opencode with Playwright MCP 0.0.83 behind `staleguard mcp`: every action result only links
/// its snapshot (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`), and the model (`model.py
/// --readback`) reads the file with opencode's own `read` instead of calling browser_snapshot,
/// and acts on the refs of what it read. The proxy collapses every page read back but the
/// newest; the guard refuses the reused "Place order".
#[test]
fn opencode_reads_linked_snapshots_back_through_proxy_and_guard() {
    let scratch = Scratch::new("opencode-readback");
    let site = mcp::Site::shared();
    let model = Model::script("model.py", &["--readback"]);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let run = run_opencode(&scratch, &relay.origin(), &site.base, true, "0.0.83");
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
    let got = forwarded_projections(&scratch, "opencode", &sent, messages(model.requests()));
    opencode_shapes_pass_through(&sent, &got);
    let mut added = 0;
    let seen: Vec<Readback> = sent
        .iter()
        .zip(&got)
        .enumerate()
        .map(|(i, (s, g))| {
            let (s, g) = (s.json(), g.json());
            let inputs = call_inputs(&s);
            let is_page = |r: &ToolResult| is_browser(&r.tool) || reads_snapshot(r, &inputs);
            added += usize::from(breakpoints_in_place(&s, &g, i, is_page));
            only_old_reads_collapsed(&s, &g, i)
        })
        .collect();
    let collapsed: usize = seen.iter().map(|r| r.reads_collapsed).sum();
    let live = seen.iter().filter(|r| r.newest_read_live).count();

    // The last request holds the whole run.
    let last_sent = sent[sent.len() - 1].json();
    let inputs = call_inputs(&last_sent);
    let work = scratch.dir.join(WORK).display().to_string();
    let results = tool_results(&last_sent);
    let reads: Vec<&ToolResult> = results
        .iter()
        .filter(|r| reads_snapshot(r, &inputs))
        .collect();
    assert!(
        reads.len() >= 4,
        "read results of snapshot files: {}",
        reads.len()
    );
    for r in &reads {
        let path = inputs[&r.call]["filePath"].as_str().unwrap_or_default();
        assert!(
            path.starts_with(&format!("{work}/.playwright-mcp/page-")),
            "{path} is in opencode's working directory {work}"
        );
        read_like_opencode(&r.text, path);
    }
    // Every page the model acted on was read back: browser_snapshot was called once, after
    // the refusal.
    let snapshots = results
        .iter()
        .filter(|r| r.tool == "playwright_browser_snapshot")
        .count();
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
    let refusal = stale_click_refused_once(&got[got.len() - 1].json());
    eprintln!(
        "{} read results of snapshot files sent; {collapsed} collapsed across {} requests; {added} breakpoints added; refused: {refusal}",
        reads.len(),
        got.len()
    );

    let log = proxy.stop();
    assert_eq!(
        proxy_log_checked(&log, got.len()),
        added,
        "breakpoint=added:\n{log}"
    );
    assert!(
        !sent[sent.len() - 1].body.contains(API_KEY),
        "the request body holds the API key"
    );
}
