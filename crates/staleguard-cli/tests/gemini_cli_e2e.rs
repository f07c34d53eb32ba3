//! Google's Gemini CLI (npm `@google/gemini-cli`, pinned in `tests/mcp/node/gemini-cli-0.61.0`)
//! end to end: run headless (`gemini -p ... --yolo`) with `GOOGLE_GEMINI_BASE_URL` at
//! `staleguard proxy`, whose upstream is a scripted Gemini model
//! (`tests/agents/gemini_model.py`), and chrome-devtools-mcp 1.11.0 behind `staleguard mcp` as
//! its MCP server, on the order flow of the shared site.
//!
//! The harness is the Claude Code test's (`agents`): `tests/agents/model.py` as a recording
//! relay sits between the CLI and the proxy and numbers what it forwards, so the test compares
//! what the CLI sent with what the model received, request by request. The model acts
//! as a real one would: it reads the newest function response and decides the next call from
//! it, and right after the click on "Place order" navigated it clicks that old uid again.
//!
//! A second run puts Playwright MCP 0.0.83 behind the guard instead, whose action results only
//! link their snapshot file (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`): the model
//! (`gemini_model.py --readback`) reads each file back with Gemini CLI's own `read_file`, and
//! the proxy collapses the pages read back as it does browser results (SPEC 1, "Snapshots read
//! back through another tool").
//!
//! Needs Node.js 20.19 or later on PATH, `npm ci` in the pinned folders (`scripts/test` does
//! it), Debian's Chromium and python3. A missing or broken CLI fails the test with what to
//! install: it never skips.

mod agents;
mod common;
mod mcp;

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agents::{npm_bin, project, repo, run_limited, Model, Proxy, Record, Scratch};
use mcp::{cdmcp_command, server_command, Site};
use serde_json::{json, Value};

const VERSION: &str = "0.61.0";
/// A dummy key: the test checks it never reaches the proxy's log.
const API_KEY: &str = "gemini-e2e-dummy-key";
const PROMPT: &str =
    "Order 3 widgets for Ada Lovelace on the test site, then tell me the confirmation number.";
/// The name of the MCP server in settings.json: Gemini CLI calls its tools `mcp_browser_<tool>`.
const SERVER: &str = "browser";
/// The CLI's run; the whole test stays under two minutes.
const LIMIT: Duration = Duration::from_secs(90);
/// What `run_limited` calls the CLI when it cannot start it.
const CLI: &str = "Gemini CLI (it needs node 20.19 or later on PATH)";
const SNAPSHOT: &str = "## Latest page snapshot";
const RECEIPT: &str = "[staleguard receipt]";
const REFUSED: &str = "staleguard refused this call";

// ------------------------------------------------------------------------------------------
// The CLI

fn gemini_bin() -> PathBuf {
    let (_, bin) = npm_bin(
        &format!("gemini-cli-{VERSION}"),
        "gemini",
        &format!("Gemini CLI {VERSION}"),
    );
    bin
}

/// The settings the test writes to `~/.gemini/settings.json`: no telemetry, usage statistics
/// or auto-update, API-key auth, no folder-trust prompt, and the MCP `servers`.
fn settings(servers: Value) -> Value {
    json!({
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
        "mcpServers": servers
    })
}

/// chrome-devtools-mcp behind `staleguard mcp` (without its update check, which asks the npm
/// registry).
fn cdmcp_servers() -> Value {
    let mut args = vec!["mcp".to_string(), "--".to_string()];
    args.extend(cdmcp_command());
    json!({SERVER: {
        "command": env!("CARGO_BIN_EXE_staleguard"),
        "args": args,
        "trust": true,
        "env": {"CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1", "CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1"}
    }})
}

/// Writes `settings` to the throwaway home's `~/.gemini/settings.json`.
fn write_settings(scratch: &Scratch, settings: &Value) {
    let file = scratch.folder("home/.gemini").join("settings.json");
    fs::write(
        &file,
        serde_json::to_vec_pretty(settings).expect("settings JSON"),
    )
    .expect("write settings.json");
}

/// `gemini` with only the environment it needs: a throwaway home, temp and XDG folders, the
/// dummy key and the base URL; nothing of the caller's (no real credentials, no proxies).
fn gemini(scratch: &Scratch, base_url: &str) -> Command {
    let mut cmd = Command::new(gemini_bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env("NO_COLOR", "1")
        .env("GEMINI_API_KEY", API_KEY)
        .env("GOOGLE_GEMINI_BASE_URL", base_url)
        .current_dir(scratch.folder("work"));
    cmd
}

/// `gemini --version` must answer the pinned version: the CLI starts at all.
fn check_version(scratch: &Scratch) {
    let mut cmd = gemini(scratch, "http://127.0.0.1:9");
    cmd.arg("--version");
    let run = run_limited(cmd, Duration::from_secs(30), CLI);
    assert!(
        run.success && run.stdout.trim() == VERSION,
        "Gemini CLI {VERSION} cannot start (node 20.19 or later must be on PATH):\nstdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
}

// ------------------------------------------------------------------------------------------
// What the model saw

/// A request the relay recorded (what the CLI sent) or the model received, with its body
/// parsed; `seq` is the number the relay gave it.
#[derive(Debug, Clone)]
struct Request {
    seq: String,
    path: String,
    body: Value,
}

impl Request {
    fn new(record: &Record, seq: String) -> Request {
        Request {
            seq,
            path: record.path.clone(),
            body: record.json(),
        }
    }
}

/// What the CLI sent (the relay's records, numbered from 1) and what the model received.
fn requests(relay: &Model, model: &Model) -> (Vec<Request>, Vec<Request>) {
    let sent = relay.requests().into_iter().enumerate();
    let sent = sent.map(|(i, r)| Request::new(&r, (i + 1).to_string()));
    let received = model.requests().into_iter().map(|r| {
        let seq = r.header("x-e2e-seq").unwrap_or_default().to_string();
        Request::new(&r, seq)
    });
    (sent.collect(), received.collect())
}

/// The functionResponse parts of a body, in order: (name, id, text of its response).
fn results(body: &Value) -> Vec<(String, Value, String)> {
    parts(body)
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["id"].clone(),
                strings(&r["response"]),
            )
        })
        .collect()
}

fn parts(body: &Value) -> impl Iterator<Item = &Value> {
    contents(body).flat_map(|c| c["parts"].as_array().into_iter().flatten())
}

fn contents(body: &Value) -> impl Iterator<Item = &Value> {
    body["contents"].as_array().into_iter().flatten()
}

/// Every string inside a JSON value, joined by newlines.
fn strings(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(strings).collect::<Vec<_>>().join("\n"),
        Value::Object(map) => map.values().map(strings).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The index (among functionResponse parts) of the newest one that holds a page snapshot.
fn newest_snapshot(body: &Value) -> Option<usize> {
    results(body)
        .iter()
        .rposition(|(_, _, text)| text.contains(SNAPSHOT))
}

/// The `key` fields (`functionCall`, `functionResponse`) of a content's parts, in order.
fn fields<'a>(content: &'a Value, key: &str) -> Vec<&'a Value> {
    content["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.get(key))
        .collect()
}

/// Every model turn's functionCall parts are answered, one for one and in order, by the
/// functionResponse parts of the user turn after it: same names, same ids.
fn assert_pairs(body: &Value, what: &str) {
    let turns: Vec<&Value> = contents(body).collect();
    for (i, turn) in turns.iter().enumerate() {
        let calls = fields(turn, "functionCall");
        if calls.is_empty() {
            continue;
        }
        assert_eq!(
            turn["role"], "model",
            "{what}: calls in a non-model turn {i}"
        );
        let Some(next) = turns.get(i + 1) else {
            continue;
        };
        let answers = fields(next, "functionResponse");
        assert_eq!(
            calls.len(),
            answers.len(),
            "{what}: turn {i} has {} calls and {} responses",
            calls.len(),
            answers.len()
        );
        for (call, answer) in calls.iter().zip(&answers) {
            assert_eq!(call["name"], answer["name"], "{what}: turn {i}");
            assert_eq!(call["id"], answer["id"], "{what}: turn {i}");
        }
    }
    let calls = parts(body)
        .filter(|p| p.get("functionCall").is_some())
        .count();
    assert_eq!(calls, results(body).len(), "{what}: calls and responses");
}

/// What the model received is what the CLI sent with only older page snapshots replaced by
/// receipts: every other part, and every key beside `contents`, is the same.
fn assert_only_older_snapshots_changed(sent: &Request, received: &Request) -> usize {
    let what = format!("request {} ({})", sent.seq, sent.path);
    assert_eq!(sent.path, received.path, "{what}: the path");
    let (s, r) = (&sent.body, &received.body);
    for (key, value) in s
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "contents")
    {
        assert_eq!(Some(value), r.get(key), "{what}: {key} changed");
    }
    let newest = newest_snapshot(s);
    let mut response = 0;
    let mut collapsed = 0;
    let sc: Vec<&Value> = contents(s).collect();
    let rc: Vec<&Value> = contents(r).collect();
    assert_eq!(sc.len(), rc.len(), "{what}: contents");
    for (a, b) in sc.iter().zip(&rc) {
        assert_eq!(a["role"], b["role"], "{what}");
        let (ap, bp) = (
            a["parts"].as_array().cloned().unwrap_or_default(),
            b["parts"].as_array().cloned().unwrap_or_default(),
        );
        assert_eq!(ap.len(), bp.len(), "{what}: parts");
        for (pa, pb) in ap.iter().zip(&bp) {
            let is_response = pa.get("functionResponse").is_some();
            if pa != pb {
                let (fa, fb) = (&pa["functionResponse"], &pb["functionResponse"]);
                let (old, new) = (strings(&fa["response"]), strings(&fb["response"]));
                assert!(
                    is_response,
                    "{what}: a part other than a function response changed:\n{pa}\n->\n{pb}"
                );
                assert_eq!((&fa["name"], &fa["id"]), (&fb["name"], &fb["id"]), "{what}");
                let name = fa["name"].as_str().unwrap_or_default();
                assert!(
                    name.starts_with(&format!("mcp_{SERVER}_")),
                    "{what}: {name}'s result changed"
                );
                assert!(old.contains(SNAPSHOT) && Some(response) != newest, "{what}: response {response} changed but was no older snapshot:\n{old}\n->\n{new}");
                assert!(
                    new.starts_with(RECEIPT) && !new.contains("uid="),
                    "{what}: response {response}: {new}"
                );
                collapsed += 1;
            }
            response += usize::from(is_response);
        }
    }
    collapsed
}

/// In what the model received every page snapshot but the newest is a receipt.
fn assert_older_snapshots_collapsed(received: &Request) {
    let snapshots: Vec<String> = results(&received.body)
        .into_iter()
        .filter(|(name, _, _)| name.ends_with("_take_snapshot"))
        .map(|(_, _, text)| text)
        .collect();
    let Some((newest, older)) = snapshots.split_last() else {
        return;
    };
    assert!(
        newest.contains(SNAPSHOT),
        "request {}: the newest snapshot is not live:\n{newest}",
        received.seq
    );
    for (i, text) in older.iter().enumerate() {
        assert!(
            text.starts_with(RECEIPT),
            "request {}: the older snapshot {i} reached the model:\n{text}",
            received.seq
        );
    }
}

/// The proxy forwarded exactly `staleguard project` of what the CLI sent.
fn assert_projected_as_cli(scratch: &Scratch, sent: &Request, received: &Request) {
    let projected = project(scratch, "gemini", &sent.body.to_string());
    let projected: Value = serde_json::from_str(&projected).expect("project writes JSON");
    assert_eq!(
        projected, received.body,
        "request {}: the proxy's projection differs from `staleguard project`",
        sent.seq
    );
}

// ------------------------------------------------------------------------------------------
// The test

/// The order flow through Gemini CLI: every request the model received has its older
/// snapshots collapsed, and nothing else changed; calls and responses pair one for one; the
/// old "Place order" uid, reused right after the click that navigated, is refused by
/// `staleguard mcp`, and the site shows one order, not cancelled.
#[test]
fn gemini_cli_order_flow_through_proxy_and_mcp_guard() {
    let started = Instant::now();
    let scratch = Scratch::new("gemini-cli");
    check_version(&scratch);
    let site = Site::shared();
    let model = Model::script("gemini_model.py", &[&site.base]);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    write_settings(&scratch, &settings(cdmcp_servers()));

    let mut cmd = gemini(&scratch, &relay.origin());
    cmd.args(["-p", PROMPT, "--yolo", "--output-format", "text"]);
    let run = run_limited(cmd, LIMIT, CLI);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert!(
        run.success,
        "Gemini CLI failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    eprintln!("Gemini CLI ran in {:?}", run.took);

    let (sent, received) = requests(&relay, &model);
    let turns: Vec<&Request> = sent
        .iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    assert_browser_tools_loaded(&turns, stderr);
    assert!(
        turns.len() >= 9,
        "the agent's turns: {}; stderr:\n{stderr}",
        turns.len()
    );
    let mut collapsed = 0;
    for s in &sent {
        let r = received
            .iter()
            .find(|r| r.seq == s.seq)
            .unwrap_or_else(|| panic!("request {} never reached the model", s.seq));
        assert_pairs(&s.body, &format!("sent {}", s.seq));
        assert_pairs(&r.body, &format!("received {}", r.seq));
        collapsed += assert_only_older_snapshots_changed(s, r);
        assert_older_snapshots_collapsed(r);
        assert_projected_as_cli(&scratch, s, r);
    }
    assert!(collapsed > 0, "no snapshot was ever collapsed");

    let last = turns.last().expect("a turn").body.clone();
    let refusal = assert_stale_place_order_refused(&last);
    let newest = received
        .iter()
        .find(|r| r.seq == turns.last().expect("a turn").seq)
        .expect("the last turn reached the model");
    assert_one_identity(&refusal, &newest.body);
    assert_one_order(&last, stdout);
    assert_proxy_log(&proxy.stop());
    eprintln!("the whole test took {:?}", started.elapsed());
}

/// The CLI declared the browser server's tools: `staleguard mcp` and chrome-devtools-mcp
/// started (the CLI goes on without an MCP server that fails to start).
fn assert_browser_tools_loaded(turns: &[&Request], stderr: &str) {
    let snapshot = format!("mcp_{SERVER}_take_snapshot");
    let declared = turns.first().is_some_and(|t| {
        t.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .any(|d| d["name"] == snapshot.as_str())
    });
    assert!(
        declared,
        "Gemini CLI did not load the MCP server `staleguard mcp -- chrome-devtools-mcp` (no {snapshot}); \
         chrome-devtools-mcp 1.11.0 needs Node.js 20.19 or later on PATH. stderr:\n{stderr}"
    );
}

/// The click that reused the confirm page's "Place order" uid after it navigated was refused
/// by `staleguard mcp`, and the CLI sent the refusal back to the model: its text.
fn assert_stale_place_order_refused(last: &Value) -> String {
    let clicks: Vec<(&Value, &Value)> = parts(last)
        .filter_map(|p| p.get("functionCall"))
        .filter(|c| c["name"] == format!("mcp_{SERVER}_click"))
        .map(|c| (&c["args"]["uid"], &c["id"]))
        .collect();
    let found = results(last);
    let refused: Vec<&(String, Value, String)> = found
        .iter()
        .filter(|(_, _, t)| t.contains(REFUSED))
        .collect();
    assert_eq!(refused.len(), 1, "one refusal in the history: {found:#?}");
    let (_, id, text) = refused[0];
    let uid = clicks
        .iter()
        .find(|(_, cid)| *cid == id)
        .map(|(u, _)| *u)
        .expect("the refused call");
    let uses = clicks.iter().filter(|(u, _)| *u == uid).count();
    assert_eq!(
        uses, 2,
        "the refused click reused the uid {uid} of an earlier click"
    );
    let uid = uid.as_str().unwrap_or_default();
    assert!(text.contains(uid) && text.contains("stale"), "{text}");
    text.clone()
}

/// The refusal names the confirm page by the observation ID the proxy's receipt of that page
/// gives it (one identity for one page, through Gemini CLI's `<untrusted_context>` tags).
fn assert_one_identity(refusal: &str, received: &Value) {
    let id_after = |text: &str, marker: &str| -> Option<String> {
        let from = text.find(marker)? + marker.len();
        Some(
            text[from..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect(),
        )
    };
    let id = id_after(refusal, "(observation ").expect("the refusal names an observation");
    let receipt = results(received)
        .into_iter()
        .map(|(_, _, text)| text)
        .find(|t| t.starts_with(RECEIPT) && t.contains("title=\"Confirm order\""))
        .expect("a receipt of the confirm page");
    assert_eq!(
        id_after(&receipt, "observation=").as_deref(),
        Some(id.as_str()),
        "the refusal and the receipt name the page alike:\n{refusal}\n{receipt}"
    );
}

/// The site shows the order placed once and not cancelled.
fn assert_one_order(last: &Value, stdout: &str) {
    let found = results(last);
    let page = &found[newest_snapshot(last).expect("a snapshot")].2;
    assert!(
        page.contains("Order placed") && page.contains("WX-1001"),
        "the order was placed: {page}"
    );
    assert!(
        !page.contains("cancelled"),
        "the order was cancelled: {page}"
    );
    assert!(!page.contains("WX-1002"), "a second order: {page}");
    assert!(stdout.contains("WX-1001"), "the CLI's answer: {stdout}");
}

/// The proxy projected Gemini requests and never logged the key.
fn assert_proxy_log(log: &str) {
    assert!(log.contains("format=gemini outcome=projected"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("collapsed=") && !l.contains("collapsed=0")),
        "{log}"
    );
    assert!(
        !log.contains(API_KEY),
        "the API key reached the log:\n{log}"
    );
}

// ------------------------------------------------------------------------------------------
// Snapshots read back through Gemini CLI's `read_file` (SPEC 1)

/// The Playwright MCP version whose action results only link their snapshot file.
const LINKING: &str = "0.0.83";
/// The name of the Playwright server in settings.json: its tools are `mcp_playwright_browser_*`.
const PLAYWRIGHT: &str = "playwright";
/// Gemini CLI's own file tool.
const READ_FILE: &str = "read_file";
/// Where Gemini CLI (and so Playwright MCP, which it starts there) runs in the scratch folder.
const WORK: &str = "work";
const REF: &str = "[ref=";

/// Playwright MCP 0.0.83 behind `staleguard mcp`. `TMPDIR` keeps the browser's profile in the
/// scratch folder, so a browser left behind can be found and killed.
fn playwright_servers(scratch: &Scratch) -> Value {
    let mut args = vec!["mcp".to_string(), "--".to_string()];
    args.extend(server_command(LINKING));
    let tmp = scratch.folder("tmp").display().to_string();
    json!({PLAYWRIGHT: {
        "command": env!("CARGO_BIN_EXE_staleguard"),
        "args": args,
        "trust": true,
        "env": {"TMPDIR": tmp}
    }})
}

fn is_playwright(name: &str) -> bool {
    name.starts_with(&format!("mcp_{PLAYWRIGHT}_browser_"))
}

/// A function response of a body with the call it answers.
#[derive(Debug)]
struct Answered {
    name: String,
    args: Value,
    text: String,
}

/// Every functionResponse of `body` with the arguments of its call (Gemini CLI answers a
/// turn's calls one for one and in order: `assert_pairs`).
fn answered(body: &Value) -> Vec<Answered> {
    let calls: Vec<&Value> = parts(body).filter_map(|p| p.get("functionCall")).collect();
    parts(body)
        .filter_map(|p| p.get("functionResponse"))
        .enumerate()
        .map(|(i, r)| Answered {
            name: r["name"].as_str().unwrap_or_default().to_string(),
            args: calls.get(i).map_or(Value::Null, |c| c["args"].clone()),
            text: response_text(&r["response"]),
        })
        .collect()
}

/// The text of a functionResponse's `response`: Gemini CLI sends `{"output": "..."}` (or
/// `{"error": "..."}`); where staleguard appended guidance or evidence, `output` is a list of
/// text parts, the original first.
fn response_text(response: &Value) -> String {
    match response.get("output").or_else(|| response.get("error")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|p| {
                p["text"]
                    .as_str()
                    .map_or_else(|| strings(p), str::to_string)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => strings(response),
    }
}

/// A `read_file` of a snapshot file Playwright MCP linked (`.../.playwright-mcp/page-*.yml`).
fn reads_snapshot(a: &Answered) -> bool {
    a.name == READ_FILE && snapshot_path(a).is_some()
}

fn snapshot_path(a: &Answered) -> Option<&str> {
    ["file_path", "absolute_path", "path"]
        .iter()
        .find_map(|k| a.args[*k].as_str())
        .filter(|p| p.contains("/.playwright-mcp/page-") && p.ends_with(".yml"))
}

/// A result that holds a page tree: a snapshot file read back, or a browser result with the
/// tree inline (0.0.83's `browser_snapshot`).
fn holds_tree(a: &Answered) -> bool {
    (reads_snapshot(a) || is_playwright(&a.name)) && a.text.contains(REF)
}

/// What one request shows of the pages read back.
#[derive(Default, Debug)]
struct Readback {
    reads: usize,
    reads_collapsed: usize,
    newest_read_live: bool,
}

/// Only browser results and snapshot files read back changed, and nothing of them but their
/// text; every page tree but the newest (read back or inline) reached the model as a receipt
/// with no ref of its tree left, and the newest as Gemini CLI sent it (guidance may follow).
fn only_old_reads_collapsed(sent: &Request, received: &Request) -> Readback {
    let what = format!("request {} ({})", sent.seq, sent.path);
    assert_eq!(sent.path, received.path, "{what}: the path");
    let (s, r) = (answered(&sent.body), answered(&received.body));
    assert_eq!(s.len(), r.len(), "{what}: responses kept");
    let changed: Vec<bool> = s.iter().zip(&r).map(|(a, b)| a.text != b.text).collect();
    for (a, _) in s.iter().zip(&changed).filter(|(_, c)| **c) {
        assert!(
            is_playwright(&a.name) || reads_snapshot(a),
            "{what}: a {} result changed",
            a.name
        );
    }
    // Everything but the changed responses is as Gemini CLI sent it.
    let blank = |body: &Value| -> Value {
        let mut body = body.clone();
        let mut i = 0;
        for content in body["contents"].as_array_mut().into_iter().flatten() {
            for part in content["parts"].as_array_mut().into_iter().flatten() {
                if let Some(f) = part.get_mut("functionResponse") {
                    if changed[i] {
                        f["response"] = Value::Null;
                    }
                    i += 1;
                }
            }
        }
        body
    };
    assert!(
        blank(&sent.body) == blank(&received.body),
        "{what}: something but a page result changed"
    );
    let pages: Vec<(&Answered, &Answered)> =
        s.iter().zip(&r).filter(|(a, _)| holds_tree(a)).collect();
    for (a, b) in s.iter().zip(&r).filter(|(a, _)| !holds_tree(a)) {
        assert!(
            b.text.starts_with(&a.text),
            "{what}: a {} result that shows no page lost text:\n{:.600}\n->\n{:.600}",
            a.name,
            a.text,
            b.text
        );
    }
    let mut seen = Readback::default();
    for (n, (a, b)) in pages.iter().enumerate() {
        let read = reads_snapshot(a);
        seen.reads += usize::from(read);
        if n + 1 < pages.len() {
            assert!(
                b.text.contains(RECEIPT) && !b.text.contains(REF),
                "{what}: an older page ({}) reached the model live: {:.600}",
                a.name,
                b.text
            );
            seen.reads_collapsed += usize::from(read);
        } else {
            assert!(
                b.text.starts_with(&a.text),
                "{what}: the newest page is not as Gemini CLI sent it:\n{:.600}\n->\n{:.600}",
                a.text,
                b.text
            );
            seen.newest_read_live = read;
        }
    }
    seen
}

/// The processes the run left behind, as `pid command line`: any that runs in Gemini CLI's
/// working folder (`staleguard mcp`, Playwright MCP, which it started there) or whose command
/// line names the scratch folder (a browser whose profile sits in the scratch `TMPDIR`).
/// Gemini CLI may exit before its MCP server has: they get a few seconds to go. Whatever is
/// still there is killed by its pid (and then reported).
fn leftovers(scratch: &Scratch) -> Vec<String> {
    let work = scratch.dir.join(WORK);
    let needle = format!("{}/", scratch.dir.display());
    let find = || -> Vec<(u32, String)> {
        let mut found = Vec::new();
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let cwd = fs::read_link(entry.path().join("cwd")).unwrap_or_default();
            if pid != std::process::id() && (cwd.starts_with(&work) || cmdline.contains(&needle)) {
                found.push((pid, cmdline));
            }
        }
        found
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut found = find();
    while !found.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        found = find();
    }
    for (pid, _) in &found {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    found
        .into_iter()
        .map(|(pid, cmd)| format!("{pid} {cmd}"))
        .collect()
}

/// Gemini CLI 0.61.0 with Playwright MCP 0.0.83 behind `staleguard mcp`: every action result
/// only links its snapshot (`- [Snapshot](.playwright-mcp/page-<stamp>.yml)`), and the model
/// (`gemini_model.py --readback`) reads the file with Gemini CLI's own `read_file` instead of
/// calling browser_snapshot, and acts on the refs of what it read. The proxy forwards exactly
/// `staleguard project` of every request and collapses every page read back but the newest;
/// the guard refuses the reused "Place order", and the site shows one order, not cancelled.
///
/// With `STALEGUARD_RECORD_FIXTURE=1` the last request Gemini CLI sent is saved, as sent, to
/// `fixtures/gemini-cli-readback/order.gemini.json`.
#[test]
fn gemini_cli_reads_linked_snapshots_back_through_proxy_and_guard() {
    let started = Instant::now();
    let scratch = Scratch::new("gemini-readback");
    check_version(&scratch);
    let site = Site::shared();
    let model = Model::script("gemini_model.py", &["--readback", &site.base]);
    let mut proxy = Proxy::start(&scratch, &model.origin());
    let relay = Model::start(Some(&proxy.origin()));
    write_settings(&scratch, &settings(playwright_servers(&scratch)));

    let prompt = format!(
        "Order 3 Blue widgets for Ada Lovelace at {}/order/form.html and tell me the confirmation number.",
        site.base
    );
    let mut cmd = gemini(&scratch, &relay.origin());
    cmd.args(["-p", &prompt, "--yolo", "--output-format", "text"]);
    let run = run_limited(cmd, LIMIT, CLI);
    let left = leftovers(&scratch);
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    eprintln!("Gemini CLI ran in {:?}", run.took);
    assert!(
        run.success,
        "Gemini CLI failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(left.is_empty(), "processes left behind (killed): {left:#?}");

    let (sent, received) = requests(&relay, &model);
    // Kept with the scratch folder when the test fails.
    for s in &sent {
        let file = scratch.dir.join(format!("sent-{:0>2}.json", s.seq));
        fs::write(file, s.body.to_string()).expect("write");
    }
    for r in &received {
        let file = scratch.dir.join(format!("got-{:0>2}.json", r.seq));
        fs::write(file, r.body.to_string()).expect("write");
    }
    let turns: Vec<&Request> = sent
        .iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    let navigate = format!("mcp_{PLAYWRIGHT}_browser_navigate");
    let declared: Vec<&Value> = turns
        .first()
        .map(|t| {
            t.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        declared.iter().any(|d| d["name"] == navigate.as_str())
            && declared.iter().any(|d| d["name"] == READ_FILE),
        "Gemini CLI declared no {navigate} or no {READ_FILE} (did `staleguard mcp -- playwright-mcp` start?); stderr:\n{stderr}"
    );
    let mut seen = Vec::new();
    for s in &sent {
        let r = received
            .iter()
            .find(|r| r.seq == s.seq)
            .unwrap_or_else(|| panic!("request {} never reached the model", s.seq));
        assert_pairs(&s.body, &format!("sent {}", s.seq));
        assert_pairs(&r.body, &format!("received {}", r.seq));
        assert_projected_as_cli(&scratch, s, r);
        seen.push(only_old_reads_collapsed(s, r));
    }
    let collapsed: usize = seen.iter().map(|r| r.reads_collapsed).sum();
    let live = seen.iter().filter(|r| r.newest_read_live).count();

    // The last turn holds the whole run.
    let last = turns.last().expect("a turn");
    let all = answered(&last.body);
    let work = scratch.dir.join(WORK).display().to_string();
    let reads: Vec<&Answered> = all.iter().filter(|a| reads_snapshot(a)).collect();
    assert!(
        reads.len() >= 2,
        "read_file results of snapshot files: {}",
        reads.len()
    );
    for a in &reads {
        let path = snapshot_path(a).unwrap_or_default();
        assert!(
            path.starts_with(&format!("{work}/.playwright-mcp/page-")),
            "{path} is in Gemini CLI's workspace {work}"
        );
        assert!(
            a.text.contains(REF),
            "a read returned the tree: {:.300}",
            a.text
        );
    }
    // Every page the model acted on was read back: browser_snapshot was called once, after
    // the refusal.
    let snapshots = all
        .iter()
        .filter(|a| a.name == format!("mcp_{PLAYWRIGHT}_browser_snapshot"))
        .count();
    assert_eq!(snapshots, 1, "one browser_snapshot, after the refusal");
    assert!(
        live >= reads.len(),
        "every page read back reached the model live: {live} requests"
    );
    let last_seen = seen
        .iter()
        .zip(&sent)
        .find(|(_, s)| s.seq == last.seq)
        .map(|(r, _)| r)
        .expect("the last turn");
    assert_eq!(
        (last_seen.reads, last_seen.reads_collapsed),
        (reads.len(), reads.len()),
        "after the browser_snapshot every page read back is a receipt"
    );

    // The reused "Place order" was refused; the first one placed the one order.
    let got = received
        .iter()
        .find(|r| r.seq == last.seq)
        .expect("the last turn reached the model");
    let forwarded = answered(&got.body);
    let refusals: Vec<(usize, &Answered)> = forwarded
        .iter()
        .enumerate()
        .filter(|(_, a)| a.text.contains(REFUSED))
        .collect();
    assert_eq!(refusals.len(), 1, "one refusal: {forwarded:#?}");
    let (at, refusal) = refusals[0];
    assert!(
        refusal.name == format!("mcp_{PLAYWRIGHT}_browser_click")
            && refusal.text.contains("order/confirm.html"),
        "the stale ref is named as the confirm page's: {}",
        refusal.text
    );
    let place: Vec<(usize, &Value)> = all
        .iter()
        .enumerate()
        .filter(|(_, a)| is_playwright(&a.name) && a.args["element"] == "Place order button")
        .map(|(i, a)| (i, &a.args))
        .collect();
    assert_eq!(
        place.len(),
        2,
        "Place order clicked, then reused: {place:?}"
    );
    assert_eq!(place[0].1, place[1].1, "the reused call is the same call");
    assert_eq!(place[1].0, at, "the reused call is the refused one");
    let page = &forwarded.last().expect("a final result").text;
    assert!(page.contains("Confirmation number: WX-1001"), "{page}");
    assert!(
        !page.contains("cancelled") && !page.contains("WX-1002"),
        "{page}"
    );
    assert!(
        stdout.contains("WX-1001") && !stdout.contains("cancelled"),
        "the CLI's answer: {stdout}"
    );
    eprintln!(
        "{} read_file results of snapshot files sent; {collapsed} collapsed across {} requests; {} refused: {}",
        reads.len(),
        received.len(),
        refusals.len(),
        refusal.text
    );

    assert_proxy_log(&proxy.stop());
    let body = &relay
        .requests()
        .into_iter()
        .nth(last.seq.parse::<usize>().expect("a number") - 1)
        .expect("the last turn's record")
        .body;
    assert!(
        !body.contains(API_KEY),
        "the request body holds the API key"
    );
    if std::env::var_os("STALEGUARD_RECORD_FIXTURE").is_some() {
        let dir = repo().join("fixtures/gemini-cli-readback");
        fs::create_dir_all(&dir).expect("create the fixture folder");
        fs::write(dir.join("order.gemini.json"), body).expect("write the fixture");
    }
    eprintln!("the whole test took {:?}", started.elapsed());
}
