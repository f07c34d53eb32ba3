//! OpenAI's Codex CLI end to end: `@openai/codex` 0.171.0 (pinned in
//! `tests/mcp/node/codex-0.171.0`; npm installs its linux x64 binary from the optional
//! platform package) runs headless (`codex exec`) with `staleguard proxy` as its model API,
//! Playwright MCP 0.0.41 behind `staleguard mcp` and Debian's Chromium, on the shared order
//! flow. The model is `tests/agents/responses_model.py`: `model.py`'s scripted model behind the
//! Responses wire format, which decides every answer from the request and reuses the old "Place
//! order" ref after the order is placed, as the recorded sessions did. `model.py --relay` in
//! front of the proxy records what Codex sent, so every request the model got is checked against
//! exactly `staleguard project` of it.
//!
//! What Codex 0.171.0 sends (`[model_providers.<id>]` with `wire_api = "responses"`, or the
//! built-in `openai` provider moved with `openai_base_url`):
//!
//! - **Transport**: `POST <base_url>/responses`, plain JSON, answered as server-sent events
//!   (`"stream": true`, `accept: text/event-stream`). A custom provider streams over HTTP only:
//!   its `supports_websockets` is off by default. The built-in `openai` provider (also when
//!   `openai_base_url` points it elsewhere) first opens a WebSocket (`GET <base>/responses`,
//!   `Upgrade: websocket`, `openai-beta: responses_websockets=2026-02-06`) when the session
//!   starts. Codex falls back to HTTP for the rest of the session at once when that handshake
//!   is answered `426 Upgrade Required`, which `staleguard proxy` does on every model path;
//!   any other failure is retried (`stream_max_retries`, 5 by default, with backoff from
//!   200 ms: about 6 s) before Codex falls back. Over the WebSocket Codex sends a warm-up
//!   `response.create` (`generate: false`), then each request as `previous_response_id` and
//!   only the items added since (a single `function_call_output` a step), so there would be no
//!   older page in a message to collapse there anyway.
//! - **Headers**: `authorization: Bearer` (the provider's `env_key`, or for the built-in
//!   provider `CODEX_API_KEY`: `codex exec` does not read `OPENAI_API_KEY`),
//!   `originator: codex_exec`, `session-id`, `thread-id`, `x-client-request-id`,
//!   `x-codex-window-id`, `x-codex-turn-metadata` (JSON), `x-codex-beta-features`; all pass
//!   through.
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
//! Five runs. Three run the flow through a custom provider in each way Codex offers the tools:
//! `gpt-5.5` (tool search), a model Codex has no metadata for (namespace up front) and
//! `gpt-6.2-sol` (code mode). One runs it through the built-in provider at the proxy, as most
//! users configure Codex: one WebSocket handshake, answered 426, and every model request on
//! HTTP from then on, the first within moments of Codex's start. In each of these four, every
//! request the model got is `staleguard project` of what Codex sent, headers but the hop-by-hop
//! ones unchanged; only older browser results changed, each to a receipt; the guard refused the
//! reused "Place order" once, naming the observation its receipt names; the answer has WX-1001
//! and no cancelled order; the proxy logged each request `format=responses outcome=projected`
//! and never the key. The fifth runs the flow without staleguard (the model straight behind
//! Codex, no guard), where the reused ref cancels the order: what the others prevent is real.
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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agents::{
    agent_command, behind_guard, headers_passed_through, keep_sent, nothing_of_staleguards_in,
    npm_bin, only_newest_page_live, order_placed_once, project, refusal_names_a_receipt, run_agent,
    run_limited, shows_page, Chain, Finished, Model, Record, Scratch, REFUSED,
};
use serde_json::{json, Value};

const VERSION: &str = "0.171.0";
/// A dummy key: the test checks it never reaches the proxy's log.
const API_KEY: &str = "sk-codex-e2e-dummy-key";
/// The environment variable a custom provider's `env_key` names.
const KEY_VAR: &str = "STALEGUARD_E2E_OPENAI_KEY";
/// The MCP server's name in config.toml: Codex's namespace is `mcp__<name>`.
const NAMESPACE: &str = "mcp__playwright";
/// A run of the flow takes about 7 s here; the whole test stays well under two minutes.
const LIMIT: Duration = Duration::from_secs(90);

/// How Codex reaches the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    /// A provider of the config's own (`[model_providers.staleguard]`, `wire_api =
    /// "responses"`, its key in `KEY_VAR`, no retries): HTTP only.
    Custom,
    /// Codex's built-in `openai` provider with `openai_base_url`, its key in `CODEX_API_KEY`
    /// and Codex's default retries: a WebSocket first.
    BuiltIn,
}

/// The pinned `codex`, checked to start and to be the pinned version.
fn codex_bin(scratch: &Scratch) -> PathBuf {
    let (dir, bin) = npm_bin(
        &format!("codex-{VERSION}"),
        "codex",
        &format!("Codex CLI {VERSION}"),
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

/// `~/.codex/config.toml` of the throwaway home: the model, `base_url` as Codex's model API
/// (`provider` says how), no update check, analytics, feedback or history, and Playwright MCP
/// (behind `staleguard mcp` when `guarded`), its tools approved (`codex exec` never asks).
/// A custom provider's connection failures are fatal at once (no retry loop to wait out); the
/// built-in provider keeps Codex's defaults, as its users have them. `TMPDIR` keeps the
/// browser's profile in the scratch folder, so a browser left behind can be found and killed.
fn write_config(scratch: &Scratch, base_url: &str, model: &str, provider: Provider, guarded: bool) {
    let mut server = behind_guard(mcp::server_command("0.0.41"), guarded);
    let command = server.remove(0);
    let args: Vec<String> = server.iter().map(|a| toml_str(a)).collect();
    let base_url = toml_str(&format!("{base_url}/v1"));
    let (top, section) = match provider {
        Provider::Custom => (
            r#"model_provider = "staleguard""#.to_string(),
            format!(
                r#"
[model_providers.staleguard]
name = "staleguard proxy"
base_url = {base_url}
wire_api = "responses"
env_key = "{KEY_VAR}"
request_max_retries = 0
stream_max_retries = 0
"#
            ),
        ),
        Provider::BuiltIn => (format!("openai_base_url = {base_url}"), String::new()),
    };
    let config = format!(
        r#"model = {model}
{top}
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
{section}
[mcp_servers.playwright]
command = {command}
args = [{args}]
default_tools_approval_mode = "approve"
startup_timeout_sec = 60

[mcp_servers.playwright.env]
TMPDIR = {tmp}
"#,
        model = toml_str(model),
        command = toml_str(&command),
        args = args.join(", "),
        tmp = toml_str(&scratch.folder("tmp").display().to_string()),
    );
    let file = scratch.folder("home/.codex").join("config.toml");
    fs::write(file, config).expect("write config.toml");
}

/// A run of `codex exec` to its end.
struct CodexRun {
    /// Its last message.
    answer: String,
    /// When Codex was started, in seconds since the Unix epoch (what the relay's records say).
    started: f64,
    run: Finished,
}

/// `codex exec` on the order form at `site` with `base_url` as its model API (`provider` says
/// how), within the time limit, with only the environment it needs: a throwaway home and
/// `CODEX_HOME`, the dummy key, and anything not on 127.0.0.1 sent to a closed port. Every
/// process it left is killed.
fn run_codex(
    scratch: &Scratch,
    base_url: &str,
    site: &str,
    model: &str,
    provider: Provider,
    guarded: bool,
) -> CodexRun {
    let bin = codex_bin(scratch);
    write_config(scratch, base_url, model, provider, guarded);
    let answer = scratch.dir.join("answer.txt");
    let prompt = format!(
        "Order 3 Blue widgets for Ada Lovelace at {site}/order/form.html and tell me the confirmation number."
    );
    let mut cmd = agent_command(scratch, &bin);
    // Codex's HTTP client reads ALL_PROXY too: the same closed port.
    let nowhere = cmd
        .get_envs()
        .find(|(k, _)| *k == "HTTPS_PROXY")
        .and_then(|(_, v)| v.map(|v| v.to_os_string()))
        .expect("agent_command sets HTTPS_PROXY");
    let key = match provider {
        Provider::Custom => KEY_VAR,
        // `codex exec` takes an API key from `CODEX_API_KEY` (or a `codex login`); it does not
        // read OPENAI_API_KEY.
        Provider::BuiltIn => "CODEX_API_KEY",
    };
    cmd.env("ALL_PROXY", nowhere)
        .env("CODEX_HOME", scratch.dir.join("home/.codex"))
        .env(key, API_KEY)
        .env("NO_COLOR", "1")
        .args([
            "exec",
            "--strict-config",
            "--skip-git-repo-check",
            "--ephemeral",
        ])
        .args(["--color", "never", "--output-last-message"])
        .arg(&answer)
        .arg(prompt);
    // One Codex at a time: run side by side on a loaded 2-core machine, Codex began its
    // session before its MCP server had listed its tools (no browser tools offered).
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64();
    let run = run_agent(scratch, cmd, LIMIT, &format!("codex exec ({model})"), "");
    let answer = fs::read_to_string(&answer).unwrap_or_else(|e| {
        panic!(
            "codex exec wrote no last message ({e}):\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    });
    CodexRun {
        answer,
        started,
        run,
    }
}

// ------------------------------------------------------------------------------------------
// Reading Responses bodies

/// The Responses requests (`POST .../responses`) of a record list, in order.
fn responses(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|r| {
            r.method == "POST"
                && r.path
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

/// The proxy forwarded exactly the projection of what Codex sent, request for request (paired
/// by the relay's `x-e2e-seq`), with every header but the hop-by-hop ones unchanged. Returns
/// what the model got in the order Codex sent it.
fn forwarded_projections(scratch: &Scratch, sent: &[Record], mut got: Vec<Record>) -> Vec<Record> {
    assert_eq!(
        sent.len(),
        got.len(),
        "every Responses request Codex sent reached the model once"
    );
    let mut paired = Vec::new();
    for (i, s) in sent.iter().enumerate() {
        let at = got
            .iter()
            .position(|g| s.forwarded_as(g))
            .unwrap_or_else(|| panic!("request {i} never reached the model"));
        let g = got.remove(at);
        assert_eq!(s.path, g.path, "request {i}: the path");
        let want = project(scratch, "responses", &s.body);
        assert!(
            g.body == want,
            "request {i}: the model got no `staleguard project` of what Codex sent"
        );
        headers_passed_through(i, s, &g);
        paired.push(g);
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
    let pages: Vec<(&str, &str)> = s_out
        .iter()
        .zip(&g_out)
        .filter(|(s, _)| is_browser(&s.tool) && shows_page(&s.text))
        .map(|(s, g)| (s.text.as_str(), g.text.as_str()))
        .collect();
    only_newest_page_live(i, &pages)
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
    let places = place_order_clicks(&results);
    assert_eq!(
        places[1].call, refusal.call,
        "the reused call is the refused one"
    );
    refusal_names_a_receipt(&refusal.text, results.iter().map(|r| r.text.as_str()));
    let page = &results.last().expect("a final result").text;
    assert!(page.contains("Confirmation number: WX-1001"), "{page}");
    assert!(
        !page.contains("cancelled") && !page.contains("WX-1002"),
        "{page}"
    );
    let at = refusal.text.find(REFUSED).unwrap_or_default();
    refusal.text[at..].to_string()
}

/// The two "Place order" clicks among `results`: the one that placed the order, then the same
/// call reused.
fn place_order_clicks(results: &[Output]) -> Vec<&Output> {
    let places: Vec<&Output> = results
        .iter()
        .filter(|r| r.arguments["element"] == "Place order button")
        .collect();
    assert_eq!(places.len(), 2, "Place order clicked, then reused");
    assert_eq!(places[0].arguments, places[1].arguments, "the same call");
    places
}

/// The proxy's log of a run in which `requests` Responses requests reached the model and
/// `upgrades` WebSocket handshakes were made: one line a request, each Responses request
/// projected, each handshake answered 426 at once, nothing else, and the API key in no line.
/// Returns the last line of a projected request.
fn proxy_log_checked(log: &str, requests: usize, upgrades: usize) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" request ")).collect();
    let (posts, others): (Vec<&str>, Vec<&str>) =
        lines.iter().partition(|l| l.contains(" method=POST "));
    assert_eq!(posts.len(), requests, "one log line a request:\n{log}");
    for line in &posts {
        assert!(
            line.contains(" path=/v1/responses ")
                && line.contains(" format=responses ")
                && line.contains(" outcome=projected "),
            "{line}"
        );
    }
    assert_eq!(others.len(), upgrades, "one line a handshake:\n{log}");
    for line in &others {
        assert!(
            line.contains(" method=GET path=/v1/responses ")
                && line.contains(" outcome=websocket_refused ")
                && line.contains(" status=426 "),
            "{line}"
        );
    }
    assert!(!log.contains(API_KEY), "the proxy logged the API key");
    posts.last().map_or_else(String::new, |l| l.to_string())
}

// ------------------------------------------------------------------------------------------
// The tests

/// The order flow through Codex with `model` and `provider`: every request the model got is
/// `staleguard project` of what Codex sent, with only older pages collapsed; the reused "Place
/// order" is refused; the answer has the one order. With the built-in provider, Codex's one
/// WebSocket handshake was answered 426 and every model request went on over HTTP.
fn order_flow(name: &str, model: &str, mode: Mode, provider: Provider) {
    let started = Instant::now();
    let scratch = Scratch::new(name);
    let site = mcp::Site::shared();
    let mut chain = Chain::start(&scratch, "responses_model.py", &[]);
    let codex = run_codex(
        &scratch,
        &chain.relay.origin(),
        &site.base,
        model,
        provider,
        true,
    );
    order_placed_once(&codex.answer);

    let records = chain.relay.requests();
    let upgrades = websocket_handshakes(&records, &codex, provider);
    let sent = responses(records);
    keep_sent(&scratch, &sent);
    let got = forwarded_projections(&scratch, &sent, responses(chain.model.requests()));
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

    let line = proxy_log_checked(&chain.proxy.stop(), got.len(), upgrades);
    eprintln!("the proxy's last line: {line}");
    eprintln!("the whole test took {:?}", started.elapsed());
}

/// The WebSocket handshakes among the relay's `records` of a run: none through a custom
/// provider; through the built-in one a single handshake (`GET .../responses`, `Upgrade:
/// websocket`, Codex's `responses_websockets` beta), before any model request and answered
/// 426, so that Codex went on over HTTP without a retry or a fallback warning. Returns how
/// many.
fn websocket_handshakes(records: &[Record], codex: &CodexRun, provider: Provider) -> usize {
    let handshakes: Vec<&Record> = records
        .iter()
        .filter(|r| r.is_websocket_upgrade())
        .collect();
    let first_post = records
        .iter()
        .find(|r| r.method == "POST")
        .expect("a model request");
    eprintln!(
        "{provider:?} provider: {} WebSocket handshakes; the first model request {:.2} s after Codex started",
        handshakes.len(),
        first_post.at - codex.started
    );
    if provider == Provider::Custom {
        assert!(
            handshakes.is_empty(),
            "a custom provider opens no WebSocket"
        );
        return 0;
    }
    assert_eq!(
        handshakes.len(),
        1,
        "one handshake, no retries: {:?}",
        handshakes
            .iter()
            .map(|r| r.at - codex.started)
            .collect::<Vec<_>>()
    );
    let handshake = handshakes[0];
    assert!(
        handshake.method == "GET"
            && handshake.path == "/v1/responses"
            && handshake
                .header("openai-beta")
                .is_some_and(|v| v.contains("responses_websockets=")),
        "{} {} {:?}",
        handshake.method,
        handshake.path,
        handshake.headers
    );
    assert!(
        handshake.number < first_post.number,
        "the handshake came first"
    );
    let output = format!("{}\n{}", codex.run.stdout, codex.run.stderr);
    for said in ["Falling back from WebSockets", "Reconnecting"] {
        assert!(!output.contains(said), "Codex said {said:?}:\n{output}");
    }
    1
}

/// `gpt-5.5`, a model Codex drives with function tools: the MCP tools are deferred, and the
/// model loads them with Codex's client-side tool search first.
#[test]
fn codex_order_flow_through_proxy_and_guard() {
    order_flow("codex-gpt-5.5", "gpt-5.5", Mode::Searched, Provider::Custom);
}

/// `gpt-6.2-sol`, Codex 0.171.0's default model, in code mode: every browser call is an `exec`
/// script, and the pages reach the model inside the scripts' output, where the proxy finds
/// them by their content (SPEC 1) and the guard refuses the stale ref as before.
#[test]
fn codex_code_mode_order_flow_through_proxy_and_guard() {
    order_flow(
        "codex-code-mode",
        "gpt-6.2-sol",
        Mode::Code,
        Provider::Custom,
    );
}

/// A model Codex has no metadata for (a third-party provider's, say): the MCP tools are
/// offered from the first request.
#[test]
fn codex_with_an_unknown_model_order_flow_through_proxy_and_guard() {
    order_flow(
        "codex-unknown-model",
        "scripted-model",
        Mode::Upfront,
        Provider::Custom,
    );
}

/// Codex's built-in `openai` provider with `openai_base_url` at the proxy, the way most users
/// point Codex at a gateway: its WebSocket handshake is answered 426 at once, Codex goes on over
/// HTTP without retrying, and every model request is projected as through a custom provider.
#[test]
fn codex_builtin_provider_order_flow_through_proxy_and_guard() {
    order_flow(
        "codex-builtin-provider",
        "gpt-5.5",
        Mode::Searched,
        Provider::BuiltIn,
    );
}

/// Without staleguard the same script cancels the order: the model is straight behind Codex,
/// Playwright MCP is not behind the guard, and the reused "Place order" ref lands on "Cancel
/// this order". What the guarded tests prevent is real with Codex too.
#[test]
fn codex_without_staleguard_cancels_the_order() {
    let scratch = Scratch::new("codex-unguarded");
    let site = mcp::Site::shared();
    let model = Model::script("responses_model.py", &[]);
    let codex = run_codex(
        &scratch,
        &model.origin(),
        &site.base,
        "gpt-5.5",
        Provider::Custom,
        false,
    );
    assert!(
        codex.answer.contains("has been cancelled"),
        "{}",
        codex.answer
    );
    let got = responses(model.requests());
    let last = got.last().expect("requests").json();
    let results = outputs(&last);
    nothing_of_staleguards_in(results.iter().map(|r| r.text.as_str()));
    place_order_clicks(&results);
    let page = &results.last().expect("a final result").text;
    assert!(page.contains("Order WX-1001 has been cancelled"), "{page}");
}
