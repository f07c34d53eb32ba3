//! OpenAI's Codex CLI end to end: `@openai/codex` 0.171.0 (pinned in
//! `tests/mcp/node/codex-0.171.0`; npm installs its linux x64 binary from the optional
//! platform package) runs headless (`codex exec`) with a custom model provider whose
//! `base_url` is `staleguard proxy`, Playwright MCP 0.0.41 behind `staleguard mcp` and Debian's
//! Chromium, on the shared order flow. The model is `tests/agents/responses_model.py`:
//! `model.py`'s scripted model behind the Responses wire format, which decides every answer from
//! the request and reuses the old "Place order" ref after the order is placed, as the recorded
//! sessions did. `model.py --relay` in front of the proxy records what Codex sent, so every
//! request the model got is checked against exactly `staleguard project` of it.
//!
//! What Codex 0.171.0 sends to a custom provider (`[model_providers.<id>]` with
//! `wire_api = "responses"`):
//!
//! - **Transport**: `POST <base_url>/responses`, plain JSON, answered as server-sent events
//!   (`"stream": true`, `accept: text/event-stream`). A custom provider streams over HTTP:
//!   its `supports_websockets` is off by default. The built-in `openai` provider (also when
//!   `openai_base_url` points it elsewhere) first opens a WebSocket (`GET <base>/responses`,
//!   `Upgrade: websocket`, `openai-beta: responses_websockets=2026-02-06`, one message per
//!   request), and falls back to HTTP only after five failed attempts; the proxy does not
//!   speak WebSocket, so Codex goes through it as a custom provider.
//! - **Headers**: `authorization: Bearer` (the provider's `env_key`), `originator: codex_exec`,
//!   `session-id`, `thread-id`, `x-client-request-id`, `x-codex-window-id`,
//!   `x-codex-turn-metadata` (JSON), `x-codex-beta-features`; all pass through.
//! - **Body**: `model`, `stream`, `input`, `tools`, `tool_choice`, `parallel_tool_calls`,
//!   `reasoning`, `store: false`, `include: ["reasoning.encrypted_content"]`,
//!   `prompt_cache_key` (the session id), `text.verbosity`, `client_metadata`. No
//!   `instructions` and no `previous_response_id`: the system prompt is a `developer` message
//!   of `input` and every request carries the whole history, the model's `reasoning` items
//!   (with their `encrypted_content`) included.
//! - **Caching**: no breakpoints. The Responses API caches the longest prefix it has seen,
//!   routed by `prompt_cache_key`; the proxy adds none and only rewrites older browser results.
//! - **Tools**: each MCP server's tools form one `namespace` tool (`mcp__playwright`, tools
//!   `browser_click`, ...), and a call names its tool and namespace apart:
//!   `{"type": "function_call", "namespace": "mcp__playwright", "name": "browser_click"}`. With
//!   `gpt-5.5` the namespace is deferred: a developer message lists `Deferred tool namespaces:
//!   - mcp__playwright`, the tools offer `{"type": "tool_search", "execution": "client"}`, and
//!   the model's `tool_search_call` is answered by Codex with a `tool_search_output` item that
//!   holds the namespace. With a model Codex has no metadata for, the namespace is in `tools`
//!   from the first request. An MCP result is a `function_call_output` of `input_text` parts,
//!   the first Codex's own `Wall time: 0.54 seconds\nOutput:`.
//! - **Code mode**: Codex's default models (`gpt-6.2-sol` and the other `gpt-6*`, `gpt-5.6-*`)
//!   use `tool_mode = "code_mode_only"` instead: no `tools`; an `additional_tools` item of
//!   `input` offers one `exec` custom tool (namespace `functions`) whose JavaScript calls the
//!   MCP tools (`await tools.mcp__playwright__browser_click({...})`, the namespace still only
//!   listed as deferred), and what the script prints comes back as its
//!   `custom_tool_call_output`, after Codex's `Script completed\nWall time 0.7 seconds\nOutput:`
//!   part. The proxy finds the pages there by their content (SPEC 1).
//!
//! The three tests run the flow in each way Codex offers the tools: `gpt-5.5` (tool search),
//! a model Codex has no metadata for (namespace up front) and `gpt-6.2-sol` (code mode). In
//! each, every request the model got is `staleguard project` of what Codex sent, headers but
//! the hop-by-hop ones unchanged; only older browser results changed, each to a receipt; the
//! guard refused the reused "Place order" once, naming the observation its receipt names; the
//! answer has WX-1001 and no cancelled order; the proxy logged each request `format=responses
//! outcome=projected` and never the key.
//!
//! Needs the pinned package installed (`npm ci` in its folder, as `scripts/test` does),
//! `python3`, Node.js for Playwright MCP and `/usr/bin/chromium`; without them the test fails
//! saying what to install. It never skips.

mod agents;
mod common;
// The MCP harness: this test uses its site and server command only.
mod mcp;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agents::{
    free_port, project, repo, run_limited, run_limited_group, Model, Proxy, Record, Scratch,
};
use serde_json::{json, Value};

const VERSION: &str = "0.171.0";
/// A dummy key: the test checks it never reaches the proxy's log.
const API_KEY: &str = "sk-codex-e2e-dummy-key";
/// The environment variable the provider's `env_key` names.
const KEY_VAR: &str = "STALEGUARD_E2E_OPENAI_KEY";
/// The MCP server's name in config.toml: Codex's namespace is `mcp__<name>`.
const NAMESPACE: &str = "mcp__playwright";
/// A run of the flow takes about 7 s here; the whole test stays well under two minutes.
const LIMIT: Duration = Duration::from_secs(90);
const RECEIPT: &str = "[staleguard receipt]";
const REFUSED: &str = "staleguard refused this call";
/// Codex's cwd inside the scratch folder.
const WORK: &str = "work";

/// The pinned `codex`, checked to start and to be the pinned version.
fn codex_bin(scratch: &Scratch) -> PathBuf {
    let dir = repo().join(format!("tests/mcp/node/codex-{VERSION}"));
    let bin = dir.join("node_modules/.bin/codex");
    assert!(
        bin.exists(),
        "Codex CLI {VERSION} is not installed in {}: run `npm ci` there, or run scripts/test, which does",
        dir.display()
    );
    let mut cmd = Command::new(&bin);
    cmd.arg("--version")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(scratch.home_env());
    let run = run_limited(cmd, Duration::from_secs(30), "codex --version");
    assert!(
        run.success && run.stdout.trim() == format!("codex-cli {VERSION}"),
        "Codex CLI {VERSION} cannot start (its launcher needs node on PATH and the platform package \
         @openai/codex-linux-x64, which `npm ci` in {} installs):\nstdout: {}\nstderr: {}",
        dir.display(),
        run.stdout,
        run.stderr
    );
    bin
}

/// A TOML string: JSON's escapes are TOML's for what the test writes.
fn toml_str(s: &str) -> String {
    Value::from(s).to_string()
}

/// `~/.codex/config.toml` of the throwaway home: the model, the proxy (`base_url`) as a custom
/// Responses provider, no update check, analytics, feedback or history, connection failures
/// fatal at once (no retry loop to wait out), and Playwright MCP behind `staleguard mcp`, its
/// tools approved (`codex exec` never asks). `TMPDIR` keeps the browser's profile in the
/// scratch folder, so a browser left behind can be found and killed.
fn write_config(scratch: &Scratch, base_url: &str, model: &str) {
    let mut args = vec!["mcp".to_string(), "--".into()];
    args.extend(mcp::server_command("0.0.41"));
    let args: Vec<String> = args.iter().map(|a| toml_str(a)).collect();
    let config = format!(
        r#"model = {model}
model_provider = "staleguard"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[features]
unbounded_connection_retries = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[model_providers.staleguard]
name = "staleguard proxy"
base_url = {base_url}
wire_api = "responses"
env_key = "{KEY_VAR}"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.playwright]
command = {command}
args = [{args}]
default_tools_approval_mode = "approve"

[mcp_servers.playwright.env]
TMPDIR = {tmp}
"#,
        model = toml_str(model),
        base_url = toml_str(&format!("{base_url}/v1")),
        command = toml_str(env!("CARGO_BIN_EXE_staleguard")),
        args = args.join(", "),
        tmp = toml_str(&scratch.folder("tmp").display().to_string()),
    );
    let file = scratch.folder("home/.codex").join("config.toml");
    fs::write(file, config).expect("write config.toml");
}

/// `codex exec` on the order form at `site` with `base_url` as its provider, within the time
/// limit, with only the environment it needs: a throwaway home and `CODEX_HOME`, the dummy key,
/// and anything not on 127.0.0.1 sent to a closed port. Every process it left is killed.
fn run_codex(scratch: &Scratch, base_url: &str, site: &str, model: &str) -> String {
    let bin = codex_bin(scratch);
    write_config(scratch, base_url, model);
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let answer = scratch.dir.join("answer.txt");
    let prompt = format!(
        "Order 3 Blue widgets for Ada Lovelace at {site}/order/form.html and tell me the confirmation number."
    );
    let mut cmd = Command::new(bin);
    cmd.current_dir(scratch.folder(WORK))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env("CODEX_HOME", scratch.dir.join("home/.codex"))
        .env(KEY_VAR, API_KEY)
        .env("NO_COLOR", "1")
        .env("HTTPS_PROXY", &nowhere)
        .env("HTTP_PROXY", &nowhere)
        .env("ALL_PROXY", &nowhere)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args([
            "exec",
            "--strict-config",
            "--skip-git-repo-check",
            "--ephemeral",
        ])
        .args(["--color", "never", "--output-last-message"])
        .arg(&answer)
        .arg(prompt);
    let run = run_limited_group(cmd, LIMIT, "codex exec");
    let leftovers = agents::kill_processes_under(&scratch.dir);
    eprintln!(
        "codex exec ({model}) took {:.1} s; {leftovers} leftover processes killed",
        run.took.as_secs_f64()
    );
    assert!(
        run.success,
        "codex exec failed:\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    fs::read_to_string(&answer).unwrap_or_else(|e| {
        panic!(
            "codex exec wrote no last message ({e}):\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    })
}

// ------------------------------------------------------------------------------------------
// Reading Responses bodies

/// The Responses requests of a record list, in order.
fn responses(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|r| {
            r.path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/responses"))
        })
        .collect()
}

/// A function call's output in a request: where it is, the call it answers, its text.
#[derive(Debug)]
struct Output {
    at: usize,
    call: String,
    /// `<namespace>__<name>` of its call.
    tool: String,
    arguments: Value,
    text: String,
}

fn items(body: &Value) -> &[Value] {
    body["input"].as_array().map_or(&[], Vec::as_slice)
}

/// The tool and arguments of the one call a code-mode script of the scripted model makes
/// (`const result = await tools.<tool>(<arguments>);`).
fn nested_call(source: &str) -> Option<(String, Value)> {
    let rest = source.split("await tools.").nth(1)?;
    let (tool, rest) = rest.split_once('(')?;
    let (arguments, _) = rest.split_once(");\n")?;
    Some((tool.to_string(), serde_json::from_str(arguments).ok()?))
}

/// Every result of `body` (a `function_call_output`, or in code mode the output of an `exec`
/// script), in order, with the call it answers: in code mode, the call the script made.
fn outputs(body: &Value) -> Vec<Output> {
    let mut calls = HashMap::new();
    let mut found = Vec::new();
    for (at, item) in items(body).iter().enumerate() {
        let field = |key: &str| item[key].as_str().unwrap_or_default().to_string();
        match item["type"].as_str() {
            Some("function_call") => {
                let tool = match item["namespace"].as_str() {
                    Some(ns) => format!("{ns}__{}", field("name")),
                    None => field("name"),
                };
                let arguments = serde_json::from_str(&field("arguments")).unwrap_or(Value::Null);
                calls.insert(field("call_id"), (tool, arguments));
            }
            Some("custom_tool_call") => {
                let nested = nested_call(&field("input")).unwrap_or_default();
                calls.insert(field("call_id"), nested);
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                let call = field("call_id");
                let (tool, arguments) = calls.get(&call).cloned().unwrap_or_default();
                found.push(Output {
                    at,
                    call,
                    tool,
                    arguments,
                    text: common::text_of(&item["output"]),
                });
            }
            _ => {}
        }
    }
    found
}

fn is_browser(tool: &str) -> bool {
    tool.starts_with(&format!("{NAMESPACE}__browser_"))
}

/// A result that shows a page (what staleguard collapses when a newer one follows).
fn shows_page(text: &str) -> bool {
    text.contains("- Page Snapshot:")
}

/// How Codex offers the MCP tools to the model it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A namespace deferred behind Codex's client-side tool search (`gpt-5.5`).
    Searched,
    /// A namespace in `tools` from the first request (a model Codex has no metadata for).
    Upfront,
    /// Code mode: one `exec` tool whose JavaScript calls the MCP tools (Codex's default
    /// models).
    Code,
}

// ------------------------------------------------------------------------------------------
// The checks

/// The proxy forwarded exactly the projection of what Codex sent, request for request, with
/// every header but the hop-by-hop ones unchanged. Returns what the model got in the order
/// Codex sent it.
fn forwarded_projections(scratch: &Scratch, sent: &[Record], got: &[Record]) -> Vec<Record> {
    assert_eq!(
        sent.len(),
        got.len(),
        "every Responses request Codex sent reached the model once"
    );
    let mut paired = Vec::new();
    for (i, s) in sent.iter().enumerate() {
        let seq = (i + 1).to_string();
        let g = got
            .iter()
            .find(|g| g.header("x-e2e-seq") == Some(seq.as_str()))
            .unwrap_or_else(|| panic!("request {i} never reached the model"));
        assert_eq!(s.path, g.path, "request {i}: the path");
        let want = project(scratch, "responses", &s.body);
        assert!(
            g.body == want,
            "request {i}: the model got no `staleguard project` of what Codex sent"
        );
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
        paired.push(Record {
            path: g.path.clone(),
            headers: g.headers.clone(),
            body: g.body.clone(),
            answer: g.answer.clone(),
        });
    }
    paired
}

/// Codex's own shapes are there and reach the model unchanged: its headers, the caching and
/// reasoning fields, the developer messages, the reasoning items with their encrypted content,
/// calls that carry their namespace (in code mode, the `exec` scripts that call the MCP tools),
/// and (with a deferred namespace) the tool search.
fn codex_shapes_pass_through(sent: &[Record], got: &[Record], mode: Mode) {
    let first = &sent[0];
    assert_eq!(first.header("originator"), Some("codex_exec"));
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    for header in ["session-id", "x-codex-turn-metadata", "x-client-request-id"] {
        assert!(first.header(header).is_some(), "Codex sends {header}");
    }
    let mut reasoning = 0;
    let mut namespaced = 0;
    let mut scripts = 0;
    let mut searches = 0;
    for (i, (s, g)) in sent.iter().zip(got).enumerate() {
        let (s, g) = (s.json(), g.json());
        assert_eq!(s["stream"], json!(true), "request {i} streams");
        assert_eq!(s["store"], json!(false), "request {i}");
        assert_eq!(
            s["include"],
            json!(["reasoning.encrypted_content"]),
            "request {i}"
        );
        assert!(s["prompt_cache_key"].is_string(), "request {i}");
        assert!(s.get("instructions").is_none() && s.get("previous_response_id").is_none());
        for key in [
            "model",
            "tools",
            "reasoning",
            "prompt_cache_key",
            "client_metadata",
            "text",
        ] {
            assert_eq!(
                s[key], g[key],
                "request {i}: {key} passes through unchanged"
            );
        }
        for (a, b) in items(&s).iter().zip(items(&g)) {
            if !matches!(
                a["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            ) {
                assert_eq!(a, b, "request {i}: an item other than a result changed");
            }
            match a["type"].as_str() {
                Some("reasoning") => {
                    assert!(a["encrypted_content"].is_string(), "{a}");
                    reasoning += 1;
                }
                Some("function_call") if a["namespace"] == NAMESPACE => namespaced += 1,
                Some("custom_tool_call") if a["name"] == "exec" => {
                    let tool = nested_call(a["input"].as_str().unwrap_or_default());
                    assert!(tool.is_some_and(|(t, _)| is_browser(&t)), "{a}");
                    scripts += 1;
                }
                Some("tool_search_output") => {
                    assert!(a.to_string().contains("browser_history"), "{a}");
                    searches += 1;
                }
                _ => {}
            }
        }
    }
    assert!(reasoning > 0, "Codex sends the reasoning items back");
    let code = mode == Mode::Code;
    assert_eq!(
        (namespaced > 0, scripts > 0),
        (!code, code),
        "Codex names the namespace of each MCP call, or in code mode runs scripts that call them"
    );
    assert_eq!(
        searches > 0,
        mode == Mode::Searched,
        "a tool search loads the deferred namespace when the model defers it"
    );
    if code {
        let first = sent[0].json();
        assert!(first.get("tools").is_none(), "code mode sends no `tools`");
        assert_eq!(
            items(&first)[0]["type"],
            "additional_tools",
            "code mode's tools"
        );
    }
}

/// Only browser results changed, and nothing of them but their output; every page but the
/// newest reached the model as a receipt with no ref left, and the newest as Codex sent it.
/// Returns how many were collapsed.
fn only_old_pages_collapsed(sent: &Value, got: &Value, i: usize) -> usize {
    let (s_out, g_out) = (outputs(sent), outputs(got));
    assert_eq!(s_out.len(), g_out.len(), "request {i}: results kept");
    let mut blank_s = sent.clone();
    let mut blank_g = got.clone();
    for (s, g) in s_out.iter().zip(&g_out) {
        assert_eq!((s.at, &s.call), (g.at, &g.call), "request {i}");
        if s.text != g.text {
            assert!(
                is_browser(&s.tool),
                "request {i}: a {} result changed",
                s.tool
            );
            blank_s["input"][s.at]["output"] = Value::Null;
            blank_g["input"][g.at]["output"] = Value::Null;
        }
    }
    assert!(
        blank_s == blank_g,
        "request {i}: something but a browser result changed"
    );
    let pages: Vec<(&Output, &Output)> = s_out
        .iter()
        .zip(&g_out)
        .filter(|(s, _)| is_browser(&s.tool) && shows_page(&s.text))
        .collect();
    for (n, (s, g)) in pages.iter().enumerate() {
        if n + 1 < pages.len() {
            assert!(
                g.text.starts_with(RECEIPT) && !g.text.contains("[ref="),
                "request {i}: an older page reached the model live: {:.400}",
                g.text
            );
        } else {
            assert!(
                g.text.starts_with(&s.text),
                "request {i}: the newest page is not as Codex sent it:\n{:.400}\n->\n{:.400}",
                s.text,
                g.text
            );
        }
    }
    pages.len().saturating_sub(1)
}

/// The reused "Place order" was refused by `staleguard mcp`, which names the confirm page by
/// the observation ID its receipt carries; it is the same call as the click that placed the
/// order; the page shows the one order, neither cancelled nor repeated. Returns the refusal.
fn stale_click_refused(last: &Value) -> String {
    let results = outputs(last);
    let refusals: Vec<&Output> = results
        .iter()
        .filter(|r| r.text.contains(REFUSED))
        .collect();
    assert_eq!(refusals.len(), 1, "one refusal: {results:#?}");
    let refusal = refusals[0];
    assert_eq!(refusal.tool, format!("{NAMESPACE}__browser_click"));
    let places: Vec<&Output> = results
        .iter()
        .filter(|r| r.arguments["element"] == "Place order button")
        .collect();
    assert_eq!(places.len(), 2, "Place order clicked, then reused");
    assert_eq!(places[0].arguments, places[1].arguments, "the same call");
    assert_eq!(
        places[1].call, refusal.call,
        "the reused call is the refused one"
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
    let at = refusal.text.find(REFUSED).unwrap_or_default();
    refusal.text[at..].to_string()
}

// ------------------------------------------------------------------------------------------
// The tests

/// The order flow through Codex with `model`: every request the model got is `staleguard
/// project` of what Codex sent, with only older pages collapsed; the reused "Place order" is
/// refused; the answer has the one order.
fn order_flow(name: &str, model: &str, mode: Mode) {
    let started = Instant::now();
    let scratch = Scratch::new(name);
    let site = mcp::Site::shared();
    let scripted = Model::script("responses_model.py", &[]);
    let mut proxy = Proxy::start(&scratch, &scripted.origin());
    let relay = Model::start(Some(&proxy.origin()));
    let answer = run_codex(&scratch, &relay.origin(), &site.base, model);
    assert!(
        answer.contains("WX-1001") && !answer.contains("cancelled") && !answer.contains("WX-1002"),
        "Codex's answer: {answer}"
    );

    let sent = responses(relay.requests());
    // Kept with the scratch folder when the test fails.
    for (i, s) in sent.iter().enumerate() {
        fs::write(scratch.dir.join(format!("sent-{i:02}.json")), &s.body).expect("write");
    }
    let got = forwarded_projections(&scratch, &sent, &responses(scripted.requests()));
    let first = &got[0].answer;
    if mode == Mode::Searched {
        assert_eq!(first["tool"], "tool_search", "{first}");
    } else {
        assert_eq!(
            first["tool"],
            format!("{NAMESPACE}__browser_navigate"),
            "{first}"
        );
    }
    codex_shapes_pass_through(&sent, &got, mode);
    let mut collapsed = 0;
    for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
        collapsed += only_old_pages_collapsed(&s.json(), &g.json(), i);
    }
    assert!(
        collapsed >= 8,
        "older pages collapsed across the run: {collapsed}"
    );
    let last = got.last().expect("requests").json();
    let refusal = stale_click_refused(&last);
    eprintln!(
        "{} requests, {collapsed} pages collapsed; the model was told: {refusal}",
        got.len()
    );

    let log = proxy.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    assert_eq!(lines.len(), got.len(), "one log line a request:\n{log}");
    for line in &lines {
        assert!(
            line.contains("path=/v1/responses")
                && line.contains("format=responses")
                && line.contains("outcome=projected"),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");
    eprintln!("the proxy's last line: {}", lines[lines.len() - 1]);
    eprintln!("the whole test took {:?}", started.elapsed());
}

/// `gpt-5.5`, a model Codex drives with function tools: the MCP tools are deferred, and the
/// model loads them with Codex's client-side tool search first.
#[test]
fn codex_order_flow_through_proxy_and_guard() {
    order_flow("codex-gpt-5.5", "gpt-5.5", Mode::Searched);
}

/// `gpt-6.2-sol`, Codex 0.171.0's default model, in code mode: every browser call is an `exec`
/// script, and the pages reach the model inside the scripts' output, where the proxy finds
/// them by their content (SPEC 1) and the guard refuses the stale ref as before.
#[test]
fn codex_code_mode_order_flow_through_proxy_and_guard() {
    order_flow("codex-code-mode", "gpt-6.2-sol", Mode::Code);
}

/// A model Codex has no metadata for (a third-party provider's, say): the MCP tools are
/// offered from the first request.
#[test]
fn codex_with_an_unknown_model_order_flow_through_proxy_and_guard() {
    order_flow("codex-unknown-model", "scripted-model", Mode::Upfront);
}
