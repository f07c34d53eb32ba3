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

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agents::anthropic::{
    blocks, breakpoints, call_inputs, nothing_of_staleguards, proxy_log_checked,
    refusal_names_the_receipt, tool_results, Agent, ToolResult, API_KEY,
};
use agents::{
    agent_command, behind_guard, npm_bin, order_placed_once, run_agent, Chain, Finished, Model,
    Record, Scratch, WORK,
};
use serde_json::{json, Value};

const VERSION: &str = "1.18.33";
/// The model opencode is told to use (`--model`), one of its bundled models.dev snapshot.
const MODEL: &str = "anthropic/claude-sonnet-4-5";
/// The MCP server's name in `opencode.json`: opencode calls its tools `playwright_<tool>`.
const SERVER: &str = "playwright";
/// A run of the flow takes 7-15 s here; the limit is the two minutes.
const LIMIT: Duration = Duration::from_secs(120);
/// opencode calls Playwright MCP's tools `playwright_<tool>` (`SERVER`) and reads files with
/// `read` (`filePath`).
const OPENCODE: Agent = Agent {
    name: "opencode",
    mcp: "playwright_",
    read: "read",
    path: "filePath",
};

// ------------------------------------------------------------------------------------------
// opencode

/// The pinned `opencode` binary, checked to start and to be the pinned version (in the
/// scratch home: even `--version` makes opencode's folders in `$HOME`).
fn opencode_bin(scratch: &Scratch) -> PathBuf {
    let (dir, bin) = npm_bin(
        &format!("opencode-{VERSION}"),
        "opencode",
        &format!("opencode {VERSION}"),
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
    let command = behind_guard(mcp::server_command(version), guarded);
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
    let mut cmd = agent_command(scratch, &opencode_bin(scratch));
    cmd.env(
        "OPENCODE_CONFIG",
        config(scratch, base_url, guarded, version),
    )
    .env("ANTHROPIC_API_KEY", API_KEY)
    .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
    .args(["run", "--format", "json", "--model", MODEL, &prompt]);
    let log = format!(
        " (its log is in {}/home/.local/share/opencode/log)",
        scratch.dir.display()
    );
    run_agent(scratch, cmd, LIMIT, "opencode run", &log)
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

// ------------------------------------------------------------------------------------------
// The tests

/// opencode with Playwright MCP 0.0.41 (the page inline in every action result) behind the
/// guard, through the proxy: every request projected, older pages collapsed to receipts, the
/// reused "Place order" refused, no order cancelled.
#[test]
fn opencode_order_flow_through_proxy_and_guard() {
    let scratch = Scratch::new("opencode-guarded");
    let site = mcp::Site::shared();
    let mut chain = Chain::start(&scratch, "model.py", &[]);
    let run = run_opencode(&scratch, &chain.relay.origin(), &site.base, true, "0.0.41");
    order_placed_once(&final_answer(&run));

    let (sent, got) = OPENCODE.exchanged(&scratch, &chain);
    opencode_shapes_pass_through(&sent, &got);
    let (mut collapsed, mut added) = (0, 0);
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        collapsed += OPENCODE.only_old_pages_collapsed(&s, &g, i);
        added += usize::from(breakpoints_in_place(&s, &g, i, |r| {
            OPENCODE.is_browser(&r.tool)
        }));
    }
    assert!(
        collapsed >= 8,
        "older pages collapsed across the run: {collapsed}"
    );
    let last = got[got.len() - 1].json();
    let refusal = OPENCODE.stale_click_refused_once(&last);
    refusal_names_the_receipt(&last, &refusal);
    eprintln!(
        "{} requests, {collapsed} pages collapsed, {added} breakpoints added; the model was told: {refusal}",
        got.len()
    );

    let log = chain.proxy.stop();
    assert_eq!(
        proxy_log_checked(&log, got.len(), false),
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
    nothing_of_staleguards(model.requests());
}

// ------------------------------------------------------------------------------------------
// Snapshots read back through opencode's `read` (SPEC 1)

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

/// opencode with Playwright MCP 0.0.83 behind `staleguard mcp`: every action result only links
/// its snapshot (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`), and the model (`model.py
/// --readback`) reads the file with opencode's own `read` instead of calling browser_snapshot,
/// and acts on the refs of what it read. The proxy collapses every page read back but the
/// newest; the guard refuses the reused "Place order".
#[test]
fn opencode_reads_linked_snapshots_back_through_proxy_and_guard() {
    let scratch = Scratch::new("opencode-readback");
    let site = mcp::Site::shared();
    let mut chain = Chain::start(&scratch, "model.py", &["--readback"]);
    let run = run_opencode(&scratch, &chain.relay.origin(), &site.base, true, "0.0.83");
    order_placed_once(&final_answer(&run));

    let (sent, got) = OPENCODE.exchanged(&scratch, &chain);
    opencode_shapes_pass_through(&sent, &got);
    let mut added = 0;
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        let (s, g) = (s.json(), g.json());
        let inputs = call_inputs(&s);
        let is_page =
            |r: &ToolResult| OPENCODE.is_browser(&r.tool) || OPENCODE.reads_snapshot(r, &inputs);
        added += usize::from(breakpoints_in_place(&s, &g, i, is_page));
    }
    let work = scratch.dir.join(WORK).display().to_string();
    let (reads, collapsed) = OPENCODE.pages_read_back(&sent, &got, &work, 4, read_like_opencode);
    let refusal = OPENCODE.stale_click_refused_once(&got[got.len() - 1].json());
    eprintln!(
        "{reads} read results of snapshot files sent; {collapsed} collapsed across {} requests; {added} breakpoints added; refused: {refusal}",
        got.len()
    );

    let log = chain.proxy.stop();
    assert_eq!(
        proxy_log_checked(&log, got.len(), false),
        added,
        "breakpoint=added:\n{log}"
    );
    assert!(
        !sent[sent.len() - 1].body.contains(API_KEY),
        "the request body holds the API key"
    );
}
