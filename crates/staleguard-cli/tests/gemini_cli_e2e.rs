//! Google's Gemini CLI (npm `@google/gemini-cli`, pinned in `tests/mcp/node/gemini-cli-0.61.0`)
//! end to end: run headless (`gemini -p ... --yolo`) with `GOOGLE_GEMINI_BASE_URL` at
//! `staleguard proxy`, whose upstream is a scripted Gemini model
//! (`tests/agents/gemini_model.py`), and chrome-devtools-mcp 1.11.0 behind `staleguard mcp` as
//! its MCP server, on the order flow of the shared site.
//!
//! A recording tap of the scripted model's sits between the CLI and the proxy, so the test
//! compares what the CLI sent with what the model received, request by request. The model acts
//! as a real one would: it reads the newest function response and decides the next call from
//! it, and right after the click on "Place order" navigated it clicks that old uid again.
//!
//! Needs Node.js 20.19 or later on PATH, `npm ci` in the pinned folders (`scripts/test` does
//! it), Debian's Chromium and python3. A missing or broken CLI fails the test with what to
//! install: it never skips.

mod mcp;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp::{cdmcp_command, workspace, Site};
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
const SNAPSHOT: &str = "## Latest page snapshot";
const RECEIPT: &str = "[staleguard receipt]";
const REFUSED: &str = "staleguard refused this call";

// ------------------------------------------------------------------------------------------
// Processes

/// A child process killed when the guard goes.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scratch directory: the CLI's home, temp and working folders; kept when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("staleguard-gemini-e2e-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for sub in [
            "home/.gemini",
            "tmp",
            "work",
            "xdg/config",
            "xdg/cache",
            "xdg/data",
            "xdg/state",
        ] {
            fs::create_dir_all(dir.join(sub)).expect("create the scratch folders");
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        kill_browsers_under(&self.0);
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Kills the Chromium processes whose command line names `dir` (their `--isolated` profile
/// sits in the CLI's TMPDIR): a browser the MCP server left behind, never anyone else's.
fn kill_browsers_under(dir: &Path) {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("chrom") && cmdline.contains(&needle) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

fn wait_for_port(port: u16, child: &mut Running, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.0.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let log = fs::read_to_string(log).unwrap_or_default();
            panic!("{what} is not listening on 127.0.0.1:{port} ({exited:?}); stderr:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The scripted model and its tap, forwarding to the proxy at `proxy_port`.
struct Model {
    _proc: Running,
    port: u16,
    tap: u16,
}

fn start_model(site: &Site, proxy_port: u16) -> Model {
    let script = workspace().join("tests/agents/gemini_model.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&site.base)
        .arg(format!("http://127.0.0.1:{proxy_port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start python3 {}: {e}", script.display()));
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let ports: Vec<u16> = line
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let [port, tap] = ports[..] else {
        panic!("gemini_model.py printed {line:?}, not two ports")
    };
    Model {
        _proc: Running(child),
        port,
        tap,
    }
}

/// `staleguard proxy` on `port` in front of the model, compaction on.
fn start_proxy(scratch: &Scratch, port: u16, model: &Model) -> (Running, PathBuf) {
    let log = scratch.0.join("proxy.stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["proxy", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--upstream", &format!("http://127.0.0.1:{}", model.port)])
        .current_dir(&scratch.0)
        .env("BROWSER_HISTORY_COMPACTION", "on")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).expect("proxy log file"))
        .spawn()
        .expect("start staleguard proxy");
    let mut proxy = Running(child);
    wait_for_port(port, &mut proxy, "staleguard proxy", &log);
    (proxy, log)
}

// ------------------------------------------------------------------------------------------
// The CLI

fn gemini_bin() -> PathBuf {
    let dir = workspace().join(format!("tests/mcp/node/gemini-cli-{VERSION}"));
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
    let dir = &scratch.0;
    let mut cmd = Command::new(gemini_bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.join("home"))
        .env("TMPDIR", dir.join("tmp"))
        .env("XDG_CONFIG_HOME", dir.join("xdg/config"))
        .env("XDG_CACHE_HOME", dir.join("xdg/cache"))
        .env("XDG_DATA_HOME", dir.join("xdg/data"))
        .env("XDG_STATE_HOME", dir.join("xdg/state"))
        .env("NO_COLOR", "1")
        .env("GEMINI_API_KEY", API_KEY)
        .env("GOOGLE_GEMINI_BASE_URL", base_url)
        .current_dir(dir.join("work"));
    cmd
}

/// Runs `cmd` to its end within `limit`: (success, stdout, stderr). Fails loudly when the
/// CLI cannot start or does not finish.
fn run(mut cmd: Command, limit: Duration) -> (bool, String, String) {
    let mut child = Running(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start Gemini CLI ({e}); it needs node (20.19 or later) on PATH")
            }),
    );
    let readers = [
        child.0.stdout.take().map(read_all),
        child.0.stderr.take().map(read_all),
    ];
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            drop(child);
            let err = readers
                .into_iter()
                .nth(1)
                .flatten()
                .map(|r| r.join().unwrap_or_default());
            panic!(
                "Gemini CLI did not finish within {limit:?}; stderr:\n{}",
                err.unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let [out, err] = readers.map(|r| r.map(|r| r.join().unwrap_or_default()).unwrap_or_default());
    (status.success(), out, err)
}

fn read_all<R: Read + Send + 'static>(mut from: R) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = from.read_to_string(&mut s);
        s
    })
}

/// `gemini --version` must answer the pinned version: the CLI starts at all.
fn check_version(scratch: &Scratch) {
    let mut cmd = gemini(scratch, "http://127.0.0.1:9");
    cmd.arg("--version");
    let (ok, out, err) = run(cmd, Duration::from_secs(30));
    assert!(
        ok && out.trim() == VERSION,
        "Gemini CLI {VERSION} cannot start (node 20.19 or later must be on PATH):\nstdout: {out}\nstderr: {err}"
    );
}

// ------------------------------------------------------------------------------------------
// What the model saw

/// A request the tap recorded (what the CLI sent) or the model received, by tap sequence.
#[derive(Debug, Clone)]
struct Record {
    seq: String,
    path: String,
    body: Value,
}

fn records(model: &Model) -> (Vec<Record>, Vec<Record>) {
    let mut stream = TcpStream::connect(("127.0.0.1", model.port)).expect("connect to the model");
    write!(
        stream,
        "GET /_requests HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("ask the model");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read /_requests");
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let all: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("/_requests is not JSON ({e}): {body:.300}"));
    let list = |key: &str| -> Vec<Record> {
        all[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| Record {
                seq: r["seq"].as_str().unwrap_or_default().to_string(),
                path: r["path"].as_str().unwrap_or_default().to_string(),
                body: r["body"].clone(),
            })
            .collect()
    };
    (list("sent"), list("received"))
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
fn assert_only_older_snapshots_changed(sent: &Record, received: &Record) -> usize {
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
fn assert_older_snapshots_collapsed(received: &Record) {
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
fn assert_projected_as_cli(scratch: &Scratch, sent: &Record, received: &Record) {
    let input = scratch.0.join(format!("sent-{}.json", sent.seq));
    fs::write(&input, sent.body.to_string()).expect("write the sent body");
    let out = Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["project", "--format", "gemini"])
        .arg(&input)
        .current_dir(&scratch.0)
        .output()
        .expect("run staleguard project");
    assert!(
        out.status.success(),
        "staleguard project: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let projected: Value = serde_json::from_slice(&out.stdout).expect("project writes JSON");
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
    let scratch = Scratch::new();
    check_version(&scratch);
    let site = Site::shared();
    let proxy_port = free_port();
    let model = start_model(&site, proxy_port);
    let (_proxy, proxy_log) = start_proxy(&scratch, proxy_port, &model);
    let settings_file = scratch.0.join("home/.gemini/settings.json");
    fs::write(
        &settings_file,
        serde_json::to_vec_pretty(&settings()).expect("settings JSON"),
    )
    .expect("write settings.json");

    let mut cmd = gemini(&scratch, &format!("http://127.0.0.1:{}", model.tap));
    cmd.args(["-p", PROMPT, "--yolo", "--output-format", "text"]);
    let (ok, stdout, stderr) = run(cmd, LIMIT);
    assert!(ok, "Gemini CLI failed:\nstdout: {stdout}\nstderr: {stderr}");
    eprintln!("Gemini CLI ran in {:?}", started.elapsed());

    let (sent, received) = records(&model);
    let turns: Vec<&Record> = sent
        .iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    assert_browser_tools_loaded(&turns, &stderr);
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
    assert_one_order(&last, &stdout);
    assert_proxy_log(&proxy_log);
    eprintln!("the whole test took {:?}", started.elapsed());
}

/// The CLI declared the browser server's tools: `staleguard mcp` and chrome-devtools-mcp
/// started (the CLI goes on without an MCP server that fails to start).
fn assert_browser_tools_loaded(turns: &[&Record], stderr: &str) {
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
fn assert_proxy_log(log: &Path) {
    let log = fs::read_to_string(log).unwrap_or_default();
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
