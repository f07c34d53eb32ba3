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

use agents::{project, repo, run_limited, Model, Proxy, Record, Scratch};
use mcp::{cdmcp_command, Site};
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
    let dir = repo().join(format!("tests/mcp/node/gemini-cli-{VERSION}"));
    let bin = dir.join("node_modules/.bin/gemini");
    assert!(
        bin.exists(),
        "Gemini CLI {VERSION} is not installed in {}: run `npm ci` there, or run scripts/test, which does",
        dir.display()
    );
    bin
}

/// The settings the test writes to `~/.gemini/settings.json`: no telemetry, usage statistics
/// or auto-update, API-key auth, no folder-trust prompt, and the browser server behind
/// `staleguard mcp` (without chrome-devtools-mcp's update check, which asks the npm registry).
fn settings() -> Value {
    let mut args = vec!["mcp".to_string(), "--".to_string()];
    args.extend(cdmcp_command());
    json!({
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
        "mcpServers": {SERVER: {
            "command": env!("CARGO_BIN_EXE_staleguard"),
            "args": args,
            "trust": true,
            "env": {"CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1", "CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1"}
        }}
    })
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
    let settings_file = scratch.folder("home/.gemini").join("settings.json");
    fs::write(
        &settings_file,
        serde_json::to_vec_pretty(&settings()).expect("settings JSON"),
    )
    .expect("write settings.json");

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
