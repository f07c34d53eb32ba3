//! `staleguard proxy` end to end, with real clients: the official `openai`, `anthropic` and
//! `google-genai` Python SDKs (`tests/proxy/clients.py`) talk to the proxy, and a scripted
//! model (`tests/proxy/upstream.py`) stands in for the provider and records what it received.
//!
//! Needs `python3` with `pip install openai anthropic google-genai zstandard prometheus_client`.
//! Without them every test fails with a message saying so: these tests never skip.
//!
//! Every test has its own scripted model and its own proxy on their own ports. What the SDK
//! sends is learned by sending the same call straight to the scripted model first; the proxy
//! must then forward exactly `staleguard project` of those bytes.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

const OPENAI_KEY: &str = "sk-test-secret";
const ANTHROPIC_KEY: &str = "sk-ant-test-secret";
/// What `clients.py` sends as `x-goog-api-key`, and the raw calls as `?key=`.
const GEMINI_KEY: &str = "AIza-test-secret";
/// The scripted model's pause between SSE events, in seconds.
const PAUSE: f64 = 0.3;
/// SSE events the scripted model sends for a Chat Completions stream, as the SDK counts them.
const CHAT_STREAM_EVENTS: u64 = 5;

// ------------------------------------------------------------------------------------------
// Paths, prerequisites, scratch directories

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script(name: &str) -> PathBuf {
    let path = repo().join("tests/proxy").join(name);
    assert!(path.is_file(), "missing {}", path.display());
    path
}

fn fixture(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    assert!(path.is_file(), "missing fixture {}", path.display());
    path
}

/// python3 with the SDKs, checked once per test binary. Missing means FAIL, never skip.
fn require_python() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let out = Command::new("python3")
            .args([
                "-c",
                "import openai, anthropic, google.genai, zstandard, prometheus_client.parser; print(openai.__version__, anthropic.__version__, google.genai.__version__)",
            ])
            .output()
            .map_err(|e| format!("cannot run python3: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "python3 cannot import the SDKs: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    });
    if let Err(why) = ready {
        panic!(
            "the proxy end-to-end tests need python3 and `pip install openai anthropic google-genai zstandard prometheus_client`: {why}"
        );
    }
}

/// A scratch directory for one test; kept (and named) when the test fails.
struct Work {
    dir: PathBuf,
    files: AtomicUsize,
}

impl Work {
    fn new(name: &str) -> Work {
        require_python();
        let dir = std::env::temp_dir().join(format!(
            "staleguard-proxy-e2e-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create scratch dir");
        Work {
            dir,
            files: AtomicUsize::new(0),
        }
    }

    fn file(&self, stem: &str, data: &[u8]) -> PathBuf {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{n:03}-{stem}"));
        fs::write(&path, data).expect("write scratch file");
        path
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}

/// A child process that is killed when the guard goes.
struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command to its end within `limit`, killing it otherwise. Returns (status, stdout, stderr).
fn run_limited(mut cmd: Command, limit: Duration, what: &str) -> (bool, String, String) {
    let mut child = Running {
        child: cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}")),
    };
    let mut out = child.child.stdout.take().unwrap();
    let mut err = child.child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.child.kill();
            let _ = child.child.wait();
            let err = err_reader.join().unwrap_or_default();
            panic!("{what} did not finish within {limit:?}; stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.success(),
        out_reader.join().unwrap_or_default(),
        err_reader.join().unwrap_or_default(),
    )
}

// ------------------------------------------------------------------------------------------
// Plain HTTP over std TcpStream

struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> RawResponse {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut data = Vec::new();
    stream
        .read_to_end(&mut data)
        .unwrap_or_else(|e| panic!("read response from {port}{path}: {e}"));
    let split = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&data)));
    let head = String::from_utf8_lossy(&data[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = data[split + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        body = dechunk(&body);
    }
    RawResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size =
            usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if size == 0 || data.len() < eol + 2 + size {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[(eol + 4 + size).min(data.len())..];
    }
}

// ------------------------------------------------------------------------------------------
// The scripted model

struct Upstream {
    _proc: Running,
    port: u16,
}

/// Starts `upstream.py` on `port` (0: any free port).
fn start_upstream(port: u16) -> Upstream {
    let mut child = Command::new("python3")
        .arg(script("upstream.py"))
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python3 tests/proxy/upstream.py");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read the scripted model's port");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("upstream.py printed {line:?}, not a port"));
    Upstream {
        _proc: Running { child },
        port,
    }
}

impl Upstream {
    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn v1(&self) -> String {
        format!("{}/v1", self.origin())
    }

    fn requests(&self) -> Vec<Value> {
        let r = http(self.port, "GET", "/_requests", &[], b"");
        assert_eq!(r.status, 200);
        serde_json::from_slice(&r.body).expect("/_requests is JSON")
    }

    fn reset(&self) {
        assert_eq!(http(self.port, "POST", "/_reset", &[], b"").status, 200);
    }
}

fn rec_body(rec: &Value) -> &str {
    rec["body"].as_str().expect("recorded body")
}

fn rec_header<'a>(rec: &'a Value, name: &str) -> Option<&'a str> {
    rec["headers"].as_array()?.iter().find_map(|pair| {
        let k = pair[0].as_str()?;
        k.eq_ignore_ascii_case(name)
            .then(|| pair[1].as_str())
            .flatten()
    })
}

// ------------------------------------------------------------------------------------------
// The proxy

struct Proxy {
    proc: Option<Running>,
    port: u16,
    log: PathBuf,
}

fn start_proxy(work: &Work, upstream: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Proxy {
    let port = free_port();
    let log = work.dir.join(format!("proxy-{port}.stderr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_staleguard"));
    cmd.arg("proxy")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .current_dir(&work.dir)
        .env("BROWSER_HISTORY_COMPACTION", "on")
        .env_remove("BROWSER_EVIDENCE_RETENTION")
        .env_remove("BROWSER_PROGRESS_TRACKING");
    if let Some(url) = upstream {
        cmd.args(["--upstream", url]);
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            fs::File::create(work.dir.join("proxy.stdout")).unwrap(),
        ))
        .stderr(Stdio::from(fs::File::create(&log).unwrap()))
        .spawn()
        .expect("start staleguard proxy");
    let mut proxy = Proxy {
        proc: Some(Running { child }),
        port,
        log,
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return proxy;
        }
        let proc = proxy.proc.as_mut().unwrap();
        if let Some(status) = proc.child.try_wait().unwrap() {
            panic!(
                "staleguard proxy {args:?} exited at start-up ({status}); stderr:\n{}",
                proxy.log_text()
            );
        }
        if Instant::now() > deadline {
            panic!(
                "staleguard proxy did not accept connections on {addr} within 10 s; stderr:\n{}",
                proxy.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Proxy {
    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn v1(&self) -> String {
        format!("{}/v1", self.origin())
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the proxy and returns everything it wrote to stderr.
    fn stop(&mut self) -> String {
        self.proc.take();
        self.log_text()
    }
}

/// Whatever a test did, the proxy's log never holds an API key.
impl Drop for Proxy {
    fn drop(&mut self) {
        let log = self.stop();
        if !std::thread::panicking() {
            for secret in [OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY] {
                assert!(
                    !log.contains(secret),
                    "the proxy logged the API key {secret:?}:\n{log}"
                );
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The clients

fn sdk(cmd: &str, base_url: &str, body: &Path, stream: bool) -> Value {
    json!({"cmd": cmd, "base_url": base_url, "body_file": body, "stream": stream})
}

fn sdk_with(
    cmd: &str,
    base_url: &str,
    body: &Path,
    stream: bool,
    headers: &[(&str, &str)],
) -> Value {
    let mut call = sdk(cmd, base_url, body, stream);
    call["headers"] = headers
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    call
}

fn raw(method: &str, url: &str, body: Option<&Path>, encoding: Option<&str>) -> Value {
    json!({"cmd": "raw", "method": method, "url": url, "body_file": body, "encoding": encoding})
}

/// Runs the calls one after another in one `clients.py batch` process; one result per call.
fn clients(work: &Work, calls: &[Value]) -> Vec<Value> {
    let file = work.file(
        "calls.json",
        serde_json::to_string_pretty(calls).unwrap().as_bytes(),
    );
    let mut cmd = Command::new("python3");
    cmd.arg(script("clients.py")).arg("batch").arg(&file);
    let (ok, out, err) = run_limited(cmd, Duration::from_secs(120), "clients.py batch");
    assert!(ok, "clients.py batch failed:\n{err}");
    let results: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("clients.py line {l:?}: {e}")))
        .collect();
    assert_eq!(
        results.len(),
        calls.len(),
        "clients.py answered {out}\nstderr:\n{err}"
    );
    results
}

fn header<'a>(result: &'a Value, name: &str) -> Option<&'a str> {
    result["headers"][name].as_str()
}

fn assert_ok(result: &Value, what: &str) {
    assert!(
        result["ok"] == json!(true) && result["status"] == json!(200),
        "{what}: the SDK call failed: {result}"
    );
}

/// `x-staleguard: projected; collapsed=N; ...` and N.
fn collapsed(value: Option<&str>, what: &str) -> u64 {
    let value = value.unwrap_or_else(|| panic!("{what}: no x-staleguard header"));
    assert!(
        value.starts_with("projected"),
        "{what}: x-staleguard is {value:?}, not projected"
    );
    value
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("collapsed="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: x-staleguard {value:?} has no collapsed=N"))
}

/// The answer text without the scripted model's request number.
fn echo_of(result: &Value) -> &str {
    let text = result["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"));
    assert!(
        text.starts_with("echo: "),
        "not the scripted answer: {result}"
    );
    text.split(" (request ").next().unwrap()
}

/// The client had the first event before the scripted model sent the last one.
fn assert_streamed(result: &Value, what: &str) {
    let first = result["first_event_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no event: {result}"));
    let total = result["total_s"].as_f64().unwrap();
    assert!(
        first < total - PAUSE,
        "{what}: the stream was buffered: first event at {first:.3} s, stream ended at {total:.3} s"
    );
}

// ------------------------------------------------------------------------------------------
// Projection

/// `staleguard project --format auto` of a body: what the proxy must forward.
fn project(work: &Work, body: &[u8]) -> Vec<u8> {
    common::project_file(&work.file("body.json", body), "auto")
}

fn assert_same_bytes(work: &Work, got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let got_file = work.file("got.json", got);
    let want_file = work.file("want.json", want);
    let show = |b: &[u8]| {
        String::from_utf8_lossy(&b[at.saturating_sub(80)..(at + 80).min(b.len())]).into_owned()
    };
    panic!(
        "{what}: the upstream got {} bytes, expected {} bytes; first difference at byte {at}:\n  got:  {:?}\n  want: {:?}\n(files {} and {})",
        got.len(),
        want.len(),
        show(got),
        show(want),
        got_file.display(),
        want_file.display()
    );
}

/// One call sent straight to the scripted model, then the same call through the proxy: the
/// proxy forwarded the projection of what the SDK sent, and the SDK parsed the answer.
fn check_pair(
    work: &Work,
    direct: (&Value, &Value),
    proxied: (&Value, &Value),
    path: &str,
    what: &str,
) {
    let (direct_out, direct_rec) = direct;
    let (out, rec) = proxied;
    assert_ok(
        direct_out,
        &format!("{what} (straight to the scripted model)"),
    );
    assert_ok(out, &format!("{what} through the proxy"));
    assert_eq!(rec["method"], "POST", "{what}");
    assert_eq!(rec["path"], path, "{what}: forwarded to the wrong path");
    assert_eq!(direct_rec["path"], path, "{what}");
    let sent = rec_body(direct_rec).as_bytes();
    let want = project(work, sent);
    assert_ne!(
        want, sent,
        "{what}: the fixture should have observations to collapse"
    );
    assert_same_bytes(work, rec_body(rec).as_bytes(), &want, what);
    assert!(
        collapsed(header(out, "x-staleguard"), what) > 0,
        "{what}: nothing collapsed: {out}"
    );
    assert_eq!(rec_header(rec, "content-encoding"), None, "{what}");
    for name in [
        "authorization",
        "x-api-key",
        "x-goog-api-key",
        "anthropic-version",
        "anthropic-beta",
        "content-type",
        "user-agent",
    ] {
        assert_eq!(
            rec_header(rec, name),
            rec_header(direct_rec, name),
            "{what}: the proxy changed the request header {name}"
        );
    }
    if out["cmd"] == "anthropic-count-tokens" {
        let (d, p) = (
            direct_out["input_tokens"].as_u64().unwrap(),
            out["input_tokens"].as_u64().unwrap(),
        );
        assert!(
            p < d,
            "{what}: the projected body should count fewer tokens ({p} vs {d})"
        );
    } else {
        assert_eq!(
            echo_of(out),
            echo_of(direct_out),
            "{what}: the SDK did not get its answer"
        );
    }
    if out["events"].as_u64().unwrap_or(0) > 0 || direct_out["events"].as_u64().unwrap_or(0) > 0 {
        assert_eq!(
            out["events"], direct_out["events"],
            "{what}: events lost: {out}"
        );
        assert_eq!(out["event_types"], direct_out["event_types"], "{what}");
        assert_streamed(out, what);
    }
}

/// Runs each call straight to the scripted model and then through the proxy, and checks each pair.
fn run_pairs(work: &Work, up: &Upstream, calls: &[(Value, Value, &str, String)]) {
    let batch: Vec<Value> = calls
        .iter()
        .flat_map(|(d, p, _, _)| [d.clone(), p.clone()])
        .collect();
    let out = clients(work, &batch);
    let recs = up.requests();
    assert_eq!(
        recs.len(),
        batch.len(),
        "the scripted model got {} requests, expected {}",
        recs.len(),
        batch.len()
    );
    for (i, (_, _, path, what)) in calls.iter().enumerate() {
        check_pair(
            work,
            (&out[2 * i], &recs[2 * i]),
            (&out[2 * i + 1], &recs[2 * i + 1]),
            path,
            what,
        );
    }
}

// ------------------------------------------------------------------------------------------
// Tests

#[test]
fn openai_chat_is_projected_streamed_and_parsed() {
    let work = Work::new("openai_chat");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut calls = Vec::new();
    for name in ["order", "long_page"] {
        let body = fixture(&format!("pwmcp-0.0.41/{name}.openai.json"));
        for stream in [false, true] {
            calls.push((
                sdk("openai-chat", &up.v1(), &body, stream),
                sdk("openai-chat", &proxy.v1(), &body, stream),
                "/v1/chat/completions",
                format!("openai chat {name} stream={stream}"),
            ));
        }
    }
    run_pairs(&work, &up, &calls);
    for rec in up.requests() {
        assert_eq!(
            rec_header(&rec, "authorization"),
            Some("Bearer sk-test-secret")
        );
    }

    // The same fixture as raw bytes over a plain socket: the header is there and the
    // forwarded body is the projection of the file itself.
    up.reset();
    let file = fixture("pwmcp-0.0.41/order.openai.json");
    let bytes = fs::read(&file).unwrap();
    let r = post_chat(proxy.port, &bytes);
    assert!(collapsed(r.header("x-staleguard"), "raw order.openai.json") > 0);
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        &project(&work, &bytes),
        "raw order.openai.json",
    );
    let answer: Value = serde_json::from_slice(&r.body).expect("JSON answer");
    assert_eq!(answer["object"], "chat.completion");
}

/// With `live_page = "lean"` (the proxy's `./staleguard.toml`), a large live page goes
/// upstream lean, as `staleguard project` makes it under the same file, and both the response
/// header and the log line say so.
#[test]
fn a_lean_live_page_is_forwarded_as_the_cli_makes_it_and_logged() {
    let work = Work::new("lean");
    fs::write(work.dir.join("staleguard.toml"), "live_page = \"lean\"\n").unwrap();
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let recorded = fs::read(fixture("pwmcp-0.0.41/long_page.openai.json")).unwrap();
    let mut body: Value = serde_json::from_slice(&recorded).unwrap();
    // The catalog's first snapshot (55 KB) as the live page.
    body["messages"].as_array_mut().unwrap().truncate(4);
    let bytes = body.to_string().into_bytes();
    let r = post_chat(proxy.port, &bytes);
    let said = r.header("x-staleguard").expect("x-staleguard");
    assert!(said.ends_with("; live_page=lean"), "{said}");
    assert!(
        said.contains("collapsed=0;"),
        "a lean page is no collapse: {said}"
    );
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    let sent = rec_body(&recs[0]).as_bytes();
    assert!(
        sent.len() * 4 < bytes.len(),
        "{} of {} bytes",
        sent.len(),
        bytes.len()
    );
    assert_same_bytes(&work, sent, &project(&work, &bytes), "lean long_page");
    let log = proxy.stop();
    assert!(log.contains("live_page=lean "), "{log}");
}

/// A Chat Completions body POSTed over a plain socket; the answer must be 200.
fn post_chat(port: u16, body: &[u8]) -> RawResponse {
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer sk-test-secret"),
    ];
    let r = http(port, "POST", "/v1/chat/completions", &headers, body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r
}

/// Each turn of the recorded request body in `file`, as an agent sends it: the turn's number
/// (its messages) and its body.
fn turns(file: &Path) -> Vec<(usize, Vec<u8>)> {
    let body: Value = serde_json::from_slice(&fs::read(file).unwrap()).unwrap();
    let messages = body["messages"].as_array().expect("messages").clone();
    (1..=messages.len())
        .map(|n| {
            let mut turn = body.clone();
            turn["messages"] = Value::Array(messages[..n].to_vec());
            (n, serde_json::to_vec(&turn).unwrap())
        })
        .collect()
}

/// What an agent sends with each turn, for either provider.
const TURN_HEADERS: [(&str, &str); 4] = [
    ("Content-Type", "application/json"),
    ("Authorization", "Bearer sk-test-secret"),
    ("x-api-key", "sk-test-secret"),
    ("anthropic-version", "2023-06-01"),
];

/// A session sent turn by turn, as an agent sends it: from the second turn on the proxy
/// resumes from the checkpoint the previous turn left (its log says `resumed=true`), and
/// every forwarded body is still the projection the CLI makes of that turn alone.
#[test]
fn a_session_turn_by_turn_resumes_and_forwards_the_same_bytes() {
    let work = Work::new("turn_by_turn");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    for (name, path) in [
        ("order.openai.json", "/v1/chat/completions"),
        ("order.anthropic.json", "/v1/messages"),
    ] {
        for (n, bytes) in turns(&fixture(&format!("pwmcp-0.0.41/{name}"))) {
            up.reset();
            let r = http(proxy.port, "POST", path, &TURN_HEADERS, &bytes);
            assert_eq!(r.status, 200, "{name} turn {n}");
            let recs = up.requests();
            let what = format!("{name} turn {n}");
            let sent = rec_body(&recs[0]);
            assert_same_bytes(&work, sent.as_bytes(), &project(&work, &bytes), &what);
            // A resumed body goes upstream in chunks, still with its length: providers
            // are not asked to take a chunked upload.
            let length = sent.len().to_string();
            assert_eq!(
                rec_header(&recs[0], "content-length"),
                Some(&*length),
                "{what}"
            );
            assert_eq!(rec_header(&recs[0], "transfer-encoding"), None, "{what}");
        }
    }
    let log = proxy.stop();
    let resumed = log.matches("resumed=true").count();
    let projected = log.matches("outcome=projected").count();
    assert!(
        resumed * 2 > projected,
        "{resumed} of {projected} projected turns resumed:\n{log}"
    );
}

/// Issue 41: a task with Chinese right against a URL made the projection panic, and the
/// proxy forwarded every turn unprojected. Each turn of the recorded order session so
/// written, in both formats, is now projected to the CLI's bytes, and no projection fails.
#[test]
fn a_task_with_chinese_before_a_url_is_projected_every_turn() {
    let work = Work::new("unicode");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut sent = 0;
    for (name, path) in [
        ("order_zh.openai.json", "/v1/chat/completions"),
        ("order_zh.anthropic.json", "/v1/messages"),
    ] {
        for (n, bytes) in turns(&repo().join("fixtures/unicode").join(name)) {
            up.reset();
            let r = http(proxy.port, "POST", path, &TURN_HEADERS, &bytes);
            let what = format!("{name} turn {n}");
            assert_eq!(r.status, 200, "{what}");
            let said = r.header("x-staleguard").unwrap_or_default();
            assert!(said.starts_with("projected;"), "{what}: {said}");
            let forwarded = rec_body(&up.requests()[0]).to_string();
            assert_same_bytes(&work, forwarded.as_bytes(), &project(&work, &bytes), &what);
            sent += 1;
        }
    }
    let metrics = metrics_after(&work, &proxy, sent);
    assert_eq!(requests_of(&metrics, "projected"), sent as f64);
    for reason in ["internal-error", "unreadable-body", "undecodable-body"] {
        let failures = sample(
            &metrics,
            "staleguard_proxy_projection_failures",
            "staleguard_proxy_projection_failures_total",
            &[("reason", reason)],
        );
        assert_eq!(failures, 0.0, "{reason}");
    }
    let log = proxy.stop();
    assert!(
        !log.contains("passthrough") && !log.contains("internal error"),
        "{log}"
    );
}

#[test]
fn anthropic_messages_and_count_tokens_are_projected() {
    let work = Work::new("anthropic");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let body = fixture("pwmcp-0.0.41/order.anthropic.json");
    let mut calls = Vec::new();
    for stream in [false, true] {
        calls.push((
            sdk("anthropic-messages", &up.origin(), &body, stream),
            sdk("anthropic-messages", &proxy.origin(), &body, stream),
            "/v1/messages",
            format!("anthropic messages stream={stream}"),
        ));
    }
    calls.push((
        sdk("anthropic-count-tokens", &up.origin(), &body, false),
        sdk("anthropic-count-tokens", &proxy.origin(), &body, false),
        "/v1/messages/count_tokens",
        "anthropic count_tokens".to_string(),
    ));
    run_pairs(&work, &up, &calls);
    for rec in up.requests() {
        // Depending on its version the SDK sends the key as x-api-key or as a bearer token.
        let bearer = format!("Bearer {ANTHROPIC_KEY}");
        assert!(
            rec_header(&rec, "x-api-key") == Some(ANTHROPIC_KEY)
                || rec_header(&rec, "authorization") == Some(bearer.as_str()),
            "no Anthropic key in {}",
            rec["headers"]
        );
        assert!(rec_header(&rec, "anthropic-version").is_some());
    }
}

/// The recorded `order` session as a Responses request body.
fn responses_body(work: &Work) -> PathBuf {
    converted(work, "chat-to-responses", "order.responses.json")
}

/// The recorded `order` session as Gemini CLI would send it, with a `model` for the SDK.
fn gemini_body(work: &Work) -> PathBuf {
    converted(work, "chat-to-gemini", "order.gemini.json")
}

/// The recorded `order` session converted by `clients.py <cmd>` into `name`.
fn converted(work: &Work, cmd: &str, name: &str) -> PathBuf {
    let out = work.dir.join(name);
    let mut command = Command::new("python3");
    command
        .arg(script("clients.py"))
        .arg(cmd)
        .arg(fixture("pwmcp-0.0.41/order.openai.json"))
        .arg(&out);
    let (ok, _, err) = run_limited(
        command,
        Duration::from_secs(30),
        &format!("clients.py {cmd}"),
    );
    assert!(ok, "{err}");
    out
}

#[test]
fn openai_responses_are_projected() {
    let work = Work::new("responses");
    let responses = responses_body(&work);
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let calls: Vec<_> = [false, true]
        .into_iter()
        .map(|stream| {
            (
                sdk("openai-responses", &up.v1(), &responses, stream),
                sdk("openai-responses", &proxy.v1(), &responses, stream),
                "/v1/responses",
                format!("openai responses stream={stream}"),
            )
        })
        .collect();
    run_pairs(&work, &up, &calls);
    let recs = up.requests();
    let sent: Value = serde_json::from_str(rec_body(&recs[1])).unwrap();
    let kinds: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    for kind in ["message", "function_call", "function_call_output"] {
        assert!(
            kinds.contains(&kind),
            "the Responses body has no {kind} item"
        );
    }
}

/// `google-genai` pointed at the proxy with `GOOGLE_GEMINI_BASE_URL`: `generate_content` and
/// `generate_content_stream` (`?alt=sse`) go upstream projected and their answers come back
/// as the model sent them; Gemini's default stream (one JSON array) and a `?key=` in the
/// query too. The log and `/metrics` count what `usageMetadata` billed; no key is logged.
#[test]
fn gemini_generate_content_is_projected_streamed_and_counted() {
    let work = Work::new("gemini");
    let body = gemini_body(&work);
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    // google-genai's default API version.
    let model = "/v1/models/gemini-2.5-flash";
    let paths = [
        format!("{model}:generateContent"),
        format!("{model}:streamGenerateContent?alt=sse"),
    ];
    let calls: Vec<_> = [false, true]
        .into_iter()
        .zip(&paths)
        .map(|(stream, path)| {
            (
                sdk("gemini-generate", &up.origin(), &body, stream),
                sdk("gemini-generate", &proxy.origin(), &body, stream),
                path.as_str(),
                format!("gemini stream={stream}"),
            )
        })
        .collect();
    run_pairs(&work, &up, &calls);
    let sdk_out = clients(
        &work,
        &[
            sdk("gemini-generate", &proxy.origin(), &body, false),
            sdk("gemini-generate", &proxy.origin(), &body, true),
        ],
    );
    let recs = up.requests();
    let sent = rec_body(&recs[0]).as_bytes().to_vec();
    for rec in &recs {
        assert_eq!(rec_header(rec, "x-goog-api-key"), Some(GEMINI_KEY));
    }
    for (out, rec) in sdk_out.iter().zip(&recs[4..]) {
        assert_ok(out, "gemini usage");
        assert_eq!(
            &out["usage"], &rec["usage_sent"],
            "the SDK did not get the usageMetadata the model sent"
        );
    }

    // Gemini's default stream, a JSON array, with the key in the query.
    up.reset();
    let file = work.file("gemini-sdk-body.json", &sent);
    let url = format!(
        "{}{model}:streamGenerateContent?key={GEMINI_KEY}",
        proxy.origin()
    );
    let raw_out = clients(&work, &[raw("POST", &url, Some(&file), None)]).remove(0);
    assert_eq!(raw_out["status"], 200, "{raw_out}");
    assert!(collapsed(header(&raw_out, "x-staleguard"), "JSON-array stream") > 0);
    let answers: Value =
        serde_json::from_str(raw_out["body"].as_str().unwrap()).expect("JSON array");
    let text: String = answers
        .as_array()
        .expect("an array of answers")
        .iter()
        .filter_map(|a| a["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert!(text.starts_with("echo: "), "{raw_out}");
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        recs[0]["path"],
        format!("{model}:streamGenerateContent?key={GEMINI_KEY}"),
        "the query goes upstream"
    );
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        &project(&work, &sent),
        "JSON-array stream",
    );
    let last = answers.as_array().unwrap().last().unwrap();
    let (read, _, uncached) = billed(&recs[0]);
    assert_eq!(last["usageMetadata"]["cachedContentTokenCount"], read);

    // Each request's line: format gemini, and the billed split read from usageMetadata.
    let metrics = metrics_after(&work, &proxy, 5);
    assert_eq!(requests_of(&metrics, "projected"), 5.0);
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), 5, "{lines:#?}");
    for l in &lines {
        assert_eq!(l["format"], "gemini", "{l}");
        assert_eq!(l["usage"], "read", "{l}");
        assert_eq!(l["breakpoint"], "-", "{l}");
        assert!(!l["path"].as_str().unwrap_or("").contains(GEMINI_KEY));
    }
    let last_line = lines.last().unwrap();
    assert_eq!(last_line["cache_read_tokens"], read, "{last_line}");
    assert_eq!(last_line["uncached_input_tokens"], uncached, "{last_line}");
    assert_eq!(last_line["cache_write_tokens"], 0, "{last_line}");
}

/// Gemini CLI signed in with Google talks to Gemini Code Assist (`CODE_ASSIST_ENDPOINT` at
/// the proxy): `/v1internal:generateContent` and `:streamGenerateContent` with the request
/// wrapped in `{"model", "project", "request"}` and answers wrapped in `{"response"}`. The
/// inner request is projected as `staleguard project` does it, and the usage is read.
#[test]
fn gemini_code_assist_is_projected_inside_its_wrapper() {
    let work = Work::new("code-assist");
    let inner = std::fs::read_to_string(gemini_body(&work)).expect("converted body");
    let wrapped = format!(
        r#"{{"model":"gemini-2.5-pro","project":"p-1","user_prompt_id":"u-1","request":{inner}}}"#
    );
    let file = work.file("code-assist.json", wrapped.as_bytes());
    let want = project(&work, wrapped.as_bytes());
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let calls: Vec<Value> = [
        "/v1internal:generateContent",
        "/v1internal:streamGenerateContent?alt=sse",
    ]
    .iter()
    .map(|path| {
        raw(
            "POST",
            &format!("{}{path}", proxy.origin()),
            Some(&file),
            None,
        )
    })
    .collect();
    for out in clients(&work, &calls) {
        assert_eq!(out["status"], 200, "{out}");
        assert!(collapsed(header(&out, "x-staleguard"), "code assist") > 0);
        assert!(
            out["body"].as_str().unwrap_or("").contains("\"traceId\""),
            "{out}"
        );
    }
    let recs = up.requests();
    assert_eq!(recs.len(), 2);
    for rec in &recs {
        assert_same_bytes(&work, rec_body(rec).as_bytes(), &want, "code assist");
        let sent: Value = serde_json::from_str(rec_body(rec)).expect("JSON sent");
        assert_eq!(sent["project"], "p-1", "the wrapper is kept");
    }
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for (l, rec) in lines.iter().zip(&recs) {
        assert_eq!(l["format"], "gemini", "{l}");
        assert_eq!(
            l["usage"], "read",
            "usage read from response.usageMetadata: {l}"
        );
        let (read, _, uncached) = billed(rec);
        assert_eq!(l["cache_read_tokens"], read, "{l}");
        assert_eq!(l["uncached_input_tokens"], uncached, "{l}");
    }
}

#[test]
fn route_prefixes_are_stripped() {
    let work = Work::new("routes");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        None,
        &[
            "--route",
            &format!("/openai={}", up.origin()),
            "--route",
            &format!("/anthropic={}", up.origin()),
        ],
        &[],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let calls = [
        (
            sdk("openai-chat", &up.v1(), &chat, false),
            sdk(
                "openai-chat",
                &format!("{}/openai/v1", proxy.origin()),
                &chat,
                false,
            ),
            "/v1/chat/completions",
            "openai chat via --route /openai".to_string(),
        ),
        (
            sdk("anthropic-messages", &up.origin(), &messages, true),
            sdk(
                "anthropic-messages",
                &format!("{}/anthropic", proxy.origin()),
                &messages,
                true,
            ),
            "/v1/messages",
            "anthropic messages via --route /anthropic".to_string(),
        ),
    ];
    run_pairs(&work, &up, &calls);
}

#[test]
fn upstream_errors_reach_the_client_and_the_proxy_recovers() {
    let work = Work::new("faults");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let v1 = proxy.v1();
    let origin = proxy.origin();
    let calls = [
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            false,
            &[("x-scripted-fault", "500")],
        ),
        sdk("openai-chat", &v1, &chat, false),
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk_with(
            "anthropic-messages",
            &origin,
            &messages,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk("anthropic-messages", &origin, &messages, false),
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            true,
            &[("x-scripted-fault", "reset")],
        ),
        sdk("openai-chat", &v1, &chat, true),
        sdk_with(
            "anthropic-messages",
            &origin,
            &messages,
            true,
            &[("x-scripted-fault", "reset")],
        ),
        sdk("anthropic-messages", &origin, &messages, true),
    ];
    let out = clients(&work, &calls);

    assert_eq!(
        out[0]["status"], 500,
        "500 did not reach the client: {}",
        out[0]
    );
    let body: Value =
        serde_json::from_str(out[0]["body"].as_str().unwrap_or("")).expect("500 body is JSON");
    assert_eq!(
        body["error"]["message"], "scripted internal error",
        "{}",
        out[0]
    );
    assert_ok(&out[1], "a normal call after a 500");

    for (i, what) in [(2, "openai 429"), (3, "anthropic 429")] {
        assert_eq!(out[i]["status"], 429, "{what}: {}", out[i]);
        assert_eq!(
            header(&out[i], "retry-after"),
            Some("7"),
            "{what}: retry-after lost: {}",
            out[i]
        );
        assert!(
            out[i]["body"]
                .as_str()
                .unwrap_or("")
                .contains("scripted rate limit"),
            "{what}: {}",
            out[i]
        );
    }
    assert_ok(&out[4], "a normal call after a 429");

    for (i, what) in [(5, "openai reset"), (7, "anthropic reset")] {
        let normal = &out[i + 1];
        assert_ok(normal, &format!("a normal stream after the {what}"));
        let full = normal["events"].as_u64().unwrap();
        let got = out[i]["events"].as_u64().unwrap_or(0);
        assert!(
            out[i]["ok"] == json!(false) || got < full,
            "{what}: the client saw a complete stream ({got} of {full} events) from an upstream that reset: {}",
            out[i]
        );
    }
    assert_eq!(out[6]["events"], CHAT_STREAM_EVENTS);
    assert_eq!(up.requests().len(), calls.len());
}

#[test]
fn a_slow_upstream_gets_504_and_the_proxy_recovers() {
    let work = Work::new("slow");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--upstream-timeout-secs", "1"],
        &[],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let calls = [
        sdk_with(
            "openai-chat",
            &proxy.v1(),
            &chat,
            false,
            &[("x-scripted-fault", "slow"), ("x-scripted-slow-secs", "4")],
        ),
        sdk("openai-chat", &proxy.v1(), &chat, false),
    ];
    let out = clients(&work, &calls);
    assert_eq!(
        out[0]["status"], 504,
        "upstream slower than the timeout: {}",
        out[0]
    );
    let body = out[0]["body"].as_str().unwrap_or("");
    serde_json::from_str::<Value>(body)
        .unwrap_or_else(|e| panic!("504 body is not JSON ({e}): {body:?}"));
    let took = out[0]["total_s"].as_f64().unwrap();
    assert!(
        took < 3.5,
        "the 504 took {took:.2} s with --upstream-timeout-secs 1"
    );
    assert_ok(&out[1], "a normal call after a 504");
}

#[test]
fn an_upstream_that_is_down_gets_502_and_the_proxy_recovers() {
    let work = Work::new("down");
    let port = free_port();
    let proxy = start_proxy(&work, Some(&format!("http://127.0.0.1:{port}")), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    // Gemini's key in the query must not come back in the error, nor reach the log (Drop).
    let gemini = format!(
        "{}/v1beta/models/m:generateContent?key={GEMINI_KEY}",
        proxy.origin()
    );
    let out = clients(
        &work,
        &[
            sdk("openai-chat", &proxy.v1(), &chat, false),
            raw("POST", &gemini, Some(&gemini_body(&work)), None),
        ],
    );
    for result in &out {
        assert_eq!(
            result["status"], 502,
            "connection refused upstream: {result}"
        );
        let body = result["body"].as_str().unwrap_or("");
        serde_json::from_str::<Value>(body)
            .unwrap_or_else(|e| panic!("502 body is not JSON ({e}): {body:?}"));
        assert!(!body.contains(GEMINI_KEY), "{body}");
    }

    let up = start_upstream(port);
    let out = clients(&work, &[sdk("openai-chat", &proxy.v1(), &chat, false)]);
    assert_ok(&out[0], "a normal call once the upstream is up");
    assert_eq!(up.requests().len(), 1);
}

#[test]
fn bad_and_odd_input_over_raw_http() {
    let work = Work::new("bad_input");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let chat_bytes = fs::read(&chat).unwrap();
    let invalid: &[u8] =
        b"{\"model\": \"gpt-4.1\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}";
    let invalid_file = work.file("invalid.json", invalid);
    let unknown: &[u8] = b"{ \"prompt\" :  \"hi\",\n  \"n\": 1.50, \"nested\": {\"a\": [1,2, 3]}, \"x\": \"\\u00e9\" }";
    let unknown_file = work.file("unknown.json", unknown);
    let url = format!("{}/v1/chat/completions", proxy.origin());
    let calls = [
        raw("POST", &url, Some(&invalid_file), None),
        raw("POST", &url, Some(&chat), Some("gzip")),
        raw("POST", &url, Some(&chat), Some("zstd")),
        raw("POST", &url, Some(&unknown_file), None),
        raw(
            "GET",
            &format!("{}/v1/models?limit=2", proxy.origin()),
            None,
            None,
        ),
        raw(
            "GET",
            &format!("{}/v1/models?limit=2", up.origin()),
            None,
            None,
        ),
        raw(
            "POST",
            &format!("{}/v1/embeddings", proxy.origin()),
            Some(&unknown_file),
            None,
        ),
    ];
    let out = clients(&work, &calls);
    let recs = up.requests();
    assert_eq!(recs.len(), calls.len(), "{recs:#?}");

    // Invalid JSON: fail-open, forwarded unchanged, marked.
    assert_eq!(out[0]["status"], 200, "{}", out[0]);
    let mark =
        header(&out[0], "x-staleguard").unwrap_or_else(|| panic!("no x-staleguard: {}", out[0]));
    assert!(
        mark.starts_with("passthrough"),
        "invalid JSON marked {mark:?}"
    );
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        invalid,
        "invalid JSON (fail-open)",
    );

    // gzip and zstd: decoded, projected, forwarded plain.
    let want = project(&work, &chat_bytes);
    for (i, what) in [(1, "gzip body"), (2, "zstd body")] {
        assert_eq!(out[i]["status"], 200, "{what}: {}", out[i]);
        assert!(collapsed(header(&out[i], "x-staleguard"), what) > 0);
        assert_eq!(
            rec_header(&recs[i], "content-encoding"),
            None,
            "{what}: forwarded with Content-Encoding"
        );
        assert_same_bytes(&work, rec_body(&recs[i]).as_bytes(), &want, what);
    }

    // JSON of unknown shape: byte for byte.
    assert_eq!(out[3]["status"], 200, "{}", out[3]);
    assert_same_bytes(
        &work,
        rec_body(&recs[3]).as_bytes(),
        unknown,
        "JSON of unknown shape",
    );

    // Another path passes through, query included, answer unchanged.
    assert_eq!(out[4]["status"], 200, "{}", out[4]);
    assert_eq!(recs[4]["method"], "GET");
    assert_eq!(recs[4]["path"], "/v1/models?limit=2");
    assert_eq!(
        out[4]["body"], out[5]["body"],
        "GET /v1/models answer changed"
    );
    assert_eq!(out[4]["headers"]["x-scripted-path"], "/v1/models?limit=2");

    // An upstream 404 on a path the proxy does not rewrite reaches the client as it was.
    assert_eq!(out[6]["status"], 404, "{}", out[6]);
    assert_eq!(recs[6]["path"], "/v1/embeddings");
    assert_same_bytes(
        &work,
        rec_body(&recs[6]).as_bytes(),
        unknown,
        "POST /v1/embeddings",
    );
    assert!(out[6]["body"]
        .as_str()
        .unwrap()
        .contains("no route for POST /v1/embeddings"));
}

#[test]
fn fail_closed_refuses_unparseable_bodies() {
    let work = Work::new("fail_closed");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &["--fail-closed"], &[]);
    let invalid: &[u8] = b"{\"model\": \"gpt-4.1\", \"messages\": [";
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        invalid,
    );
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    serde_json::from_slice::<Value>(&r.body).unwrap_or_else(|e| {
        panic!(
            "400 body is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&r.body)
        )
    });
    assert!(up.requests().is_empty(), "fail-closed forwarded the body");

    let bytes = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        &bytes,
    );
    assert_eq!(r.status, 200);
    assert!(collapsed(r.header("x-staleguard"), "after a refused body") > 0);
    assert_eq!(up.requests().len(), 1);
}

/// A model request that is not UTF-8: forwarded byte for byte when failing open, refused
/// with 400 when failing closed.
#[test]
fn bodies_that_are_not_utf8_are_forwarded_as_they_came_or_refused() {
    let work = Work::new("not_utf8");
    let up = start_upstream(0);
    let body: &[u8] = b"{\"model\":\"gpt-4.1\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3\xa9 \xff \xe2\x82\"}]}";
    let json = [("Content-Type", "application/json")];
    let open = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let r = http(open.port, "POST", "/v1/chat/completions", &json, body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mark = r.header("x-staleguard").unwrap_or_default();
    assert!(mark.starts_with("passthrough"), "marked {mark:?}");
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    let sent = recs[0]["body_b64"].as_str().expect("body_b64");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(sent)
        .expect("base64");
    assert_eq!(sent, body, "forwarded bytes differ");

    let closed = start_proxy(&work, Some(&up.origin()), &["--fail-closed"], &[]);
    let r = http(closed.port, "POST", "/v1/chat/completions", &json, body);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        String::from_utf8_lossy(&r.body).contains("not UTF-8"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(up.requests().len(), 1, "fail-closed forwarded the body");
}

#[test]
fn bodies_over_the_limit_get_413() {
    let work = Work::new("too_big");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--max-body-bytes", "1000"],
        &[],
    );
    let bytes = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        &bytes,
    );
    assert_eq!(
        r.status,
        413,
        "{} byte body with --max-body-bytes 1000",
        bytes.len()
    );
    assert!(up.requests().is_empty(), "an oversized body was forwarded");

    let small = br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"small"}]}"#;
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        small,
    );
    assert_eq!(r.status, 200, "a small body after a 413");
    assert_eq!(up.requests().len(), 1);
}

/// A gzip body under the limit that decodes to far more than the limit is never decoded
/// and forwarded: the proxy refuses it with 413, as it refuses a plain body over the limit.
#[test]
fn compressed_bodies_are_limited_after_decoding() {
    let work = Work::new("gzip_bomb");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--max-body-bytes", "1000"],
        &[],
    );
    let padding = " ".repeat(200_000);
    let body =
        format!(r#"{{"model":"gpt-4.1","messages":[{{"role":"user","content":"{padding}"}}]}}"#);
    let file = work.file("bomb.json", body.as_bytes());
    let url = format!("{}/v1/chat/completions", proxy.origin());
    let small = work.file(
        "small.json",
        br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"small"}]}"#,
    );
    let out = clients(
        &work,
        &[
            raw("POST", &url, Some(&file), Some("gzip")),
            raw("POST", &url, Some(&small), None),
        ],
    );
    let recs = up.requests();
    let what = format!(
        "gzip body decoding to {} bytes with --max-body-bytes 1000",
        body.len()
    );
    assert_eq!(out[0]["status"], 413, "{what}: {}", out[0]);
    assert_eq!(recs.len(), 1, "{what}: refused, yet forwarded");
    assert_eq!(
        out[1]["status"], 200,
        "a small body after the gzip bomb: {}",
        out[1]
    );
}

#[test]
fn the_log_never_holds_api_keys() {
    let work = Work::new("secrets");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let calls = [
        sdk("openai-chat", &proxy.v1(), &chat, false),
        sdk("openai-chat", &proxy.v1(), &chat, true),
        sdk_with(
            "openai-chat",
            &proxy.v1(),
            &chat,
            false,
            &[("x-scripted-fault", "500")],
        ),
        sdk("anthropic-messages", &proxy.origin(), &messages, false),
        sdk_with(
            "anthropic-messages",
            &proxy.origin(),
            &messages,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk("anthropic-count-tokens", &proxy.origin(), &messages, false),
    ];
    let out = clients(&work, &calls);
    assert_ok(&out[0], "openai chat");
    assert_ok(&out[3], "anthropic messages");
    let log = proxy.stop();
    assert!(!log.trim().is_empty(), "the proxy wrote nothing to stderr");
    for secret in [OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!log.contains(secret), "the proxy logged {secret:?}:\n{log}");
    }
}

#[test]
fn compaction_off_forwards_the_sdk_body_unchanged() {
    let work = Work::new("compaction_off");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &[],
        &[("BROWSER_HISTORY_COMPACTION", "off")],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let out = clients(
        &work,
        &[
            sdk("openai-chat", &up.v1(), &chat, false),
            sdk("openai-chat", &proxy.v1(), &chat, false),
        ],
    );
    assert_ok(&out[1], "openai chat with compaction off");
    let recs = up.requests();
    assert_same_bytes(
        &work,
        rec_body(&recs[1]).as_bytes(),
        rec_body(&recs[0]).as_bytes(),
        "compaction off",
    );
    assert!(
        !proxy.log_text().trim().is_empty(),
        "no start-up line on stderr"
    );
}

#[test]
fn two_hundred_concurrent_streams_each_get_their_own_answer() {
    let work = Work::new("load");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut cmd = Command::new("python3");
    cmd.arg(script("clients.py"))
        .args(["load", &proxy.v1(), "200"]);
    let (ok, out, err) = run_limited(cmd, Duration::from_secs(90), "clients.py load");
    assert!(ok, "200 concurrent streams through the proxy: {out}\n{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("load result");
    assert_eq!(result["ok"], 200, "{result}");
    assert_eq!(up.requests().len(), 200);
}

/// SIGTERM lets the streams in flight finish, then the proxy exits cleanly.
#[test]
fn sigterm_finishes_streams_in_flight() {
    let work = std::sync::Arc::new(Work::new("sigterm"));
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let body = fixture("pwmcp-0.0.41/order.openai.json");
    let call = sdk("openai-chat", &proxy.v1(), &body, true);
    let streaming = {
        let work = std::sync::Arc::clone(&work);
        std::thread::spawn(move || clients(&work, &[call]))
    };
    // Wait until the upstream has the request, so the stream is in flight.
    let deadline = Instant::now() + Duration::from_secs(20);
    while up.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the streaming request never reached the upstream"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = proxy.proc.as_ref().unwrap().child.id();
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = streaming.join().expect("client thread");
    assert_streamed(&out[0], "a stream in flight at SIGTERM");
    let status = {
        let proc = proxy.proc.as_mut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = proc.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(
        status.success(),
        "exit status after SIGTERM: {status}; log:\n{}",
        proxy.log_text()
    );
}

// ------------------------------------------------------------------------------------------
// What the provider billed, and the metrics

/// `GET url` parsed by `prometheus_client`'s text parser (a page that does not parse fails).
fn metrics_at(work: &Work, url: &str) -> Value {
    let out = clients(work, &[json!({"cmd": "metrics", "url": url})]).remove(0);
    assert!(
        out["ok"] == json!(true),
        "{url} is not Prometheus text: {out}"
    );
    assert_eq!(out["status"], 200, "{url}: {out}");
    let content_type = out["content_type"].as_str().unwrap_or("");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{url}: content-type {content_type:?}"
    );
    out
}

/// The value of one sample: `family` as the parser names it (counters without `_total`),
/// `sample` as written, with exactly these labels.
fn sample(metrics: &Value, family: &str, sample: &str, labels: &[(&str, &str)]) -> f64 {
    let fam = &metrics["families"][family];
    let want: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    fam["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("no family {family} in {metrics}"))
        .iter()
        .find(|s| s[0] == sample && s[1] == Value::Object(want.clone()))
        .and_then(|s| s[2].as_f64())
        .unwrap_or_else(|| panic!("no sample {sample} {labels:?} in {fam}"))
}

fn requests_of(metrics: &Value, outcome: &str) -> f64 {
    sample(
        metrics,
        "staleguard_proxy_requests",
        "staleguard_proxy_requests_total",
        &[("outcome", outcome)],
    )
}

/// The proxy's metrics once `n` requests have ended (an answer is counted when its body
/// has gone out, just after the client has it).
fn metrics_after(work: &Work, proxy: &Proxy, n: usize) -> Value {
    let url = format!("{}/metrics", proxy.origin());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = metrics_at(work, &url);
        let ended: f64 = metrics["families"]["staleguard_proxy_requests"]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s[2].as_f64())
            .sum();
        if ended as usize >= n || Instant::now() > deadline {
            assert_eq!(ended as usize, n, "requests counted: {metrics}");
            return metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `request` lines of a `--log-json` log, as their fields.
fn request_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["fields"].clone())
        .filter(|f| f["message"] == "request")
        .collect()
}

/// The scripted model's bill of one request: (cache read, cache write, uncached).
fn billed(rec: &Value) -> (u64, u64, u64) {
    let b = &rec["billed"];
    let n = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("billed {k}: {rec}"));
    (n("cache_read"), n("cache_write"), n("uncached"))
}

/// `saved_bytes=N` of an `x-staleguard` header.
fn saved_bytes(result: &Value) -> i64 {
    header(result, "x-staleguard")
        .and_then(|v| {
            v.split(';')
                .map(str::trim)
                .find_map(|p| p.strip_prefix("saved_bytes="))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no saved_bytes in {result}"))
}

/// All three formats, streamed and not, plain and gzip-encoded by the model: the SDK gets
/// exactly the usage the model sent, cache fields included, and the proxy's log and
/// `/metrics` count what the model billed.
#[test]
fn cache_usage_passes_through_intact_and_is_counted() {
    let work = Work::new("usage");
    let responses = responses_body(&work);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let mut calls = Vec::new();
    for encoding in [None, Some("gzip")] {
        for stream in [false, true] {
            let headers: Vec<(&str, &str)> = encoding
                .map(|e| vec![("x-scripted-encoding", e)])
                .unwrap_or_default();
            let mut chat_call = sdk_with("openai-chat", &proxy.v1(), &chat, stream, &headers);
            chat_call["include_usage"] = json!(stream);
            calls.push(chat_call);
            calls.push(sdk_with(
                "anthropic-messages",
                &proxy.origin(),
                &messages,
                stream,
                &headers,
            ));
            calls.push(sdk_with(
                "openai-responses",
                &proxy.v1(),
                &responses,
                stream,
                &headers,
            ));
        }
    }
    let with_usage = calls.len();
    // A Chat stream without `include_usage` carries none; neither does an error answer.
    calls.push(sdk("openai-chat", &proxy.v1(), &chat, true));
    calls.push(sdk_with(
        "anthropic-messages",
        &proxy.origin(),
        &messages,
        false,
        &[("x-scripted-fault", "500")],
    ));
    let out = clients(&work, &calls);
    let recs = up.requests();
    assert_eq!(recs.len(), calls.len(), "{recs:#?}");

    let mut bills = Vec::new();
    for (i, (result, rec)) in out.iter().zip(&recs).enumerate().take(with_usage) {
        let what = format!("call {i}: {}", calls[i]);
        assert_ok(result, &what);
        let sent = &rec["usage_sent"];
        assert!(
            sent.as_array().is_some_and(|a| !a.is_empty()),
            "{what}: the scripted model sent no usage: {rec}"
        );
        assert_eq!(
            &result["usage"], sent,
            "{what}: the client did not get the usage the model sent"
        );
        if calls[i]["stream"] == json!(true) {
            assert_streamed(result, &what);
        }
        bills.push(billed(rec));
    }
    assert!(
        bills.iter().all(|&(read, _, _)| read > 0),
        "the scripted model should report cache reads: {bills:?}"
    );
    let missing = &out[with_usage];
    assert_ok(missing, "a Chat stream without include_usage");
    assert_eq!(missing["usage"], json!([]), "{missing}");
    assert_eq!(
        out[with_usage + 1]["status"],
        500,
        "{}",
        out[with_usage + 1]
    );

    let metrics = metrics_after(&work, &proxy, calls.len());
    assert_eq!(requests_of(&metrics, "projected"), calls.len() as f64);
    let tokens = |kind| {
        sample(
            &metrics,
            "staleguard_proxy_input_tokens",
            "staleguard_proxy_input_tokens_total",
            &[("kind", kind)],
        )
    };
    let total = |pick: fn(&(u64, u64, u64)) -> u64| bills.iter().map(pick).sum::<u64>() as f64;
    assert_eq!(tokens("cache_read"), total(|b| b.0), "{metrics}");
    assert_eq!(tokens("cache_write"), total(|b| b.1), "{metrics}");
    assert_eq!(tokens("uncached"), total(|b| b.2), "{metrics}");
    let answers = |usage| {
        sample(
            &metrics,
            "staleguard_proxy_answers",
            "staleguard_proxy_answers_total",
            &[("usage", usage)],
        )
    };
    assert_eq!(answers("read"), with_usage as f64);
    assert_eq!(answers("missing"), 1.0);
    assert_eq!(answers("skipped"), 0.0);

    // Bytes saved: what the headers said, and what the model received.
    let saved: i64 = out.iter().map(saved_bytes).sum();
    assert!(saved > 0);
    assert_eq!(
        sample(
            &metrics,
            "staleguard_proxy_saved_bytes",
            "staleguard_proxy_saved_bytes",
            &[]
        ),
        saved as f64
    );
    let bytes = |stage| {
        sample(
            &metrics,
            "staleguard_proxy_projected_body_bytes",
            "staleguard_proxy_projected_body_bytes_total",
            &[("stage", stage)],
        )
    };
    let forwarded: usize = recs.iter().map(|r| rec_body(r).len()).sum();
    assert_eq!(bytes("forwarded"), forwarded as f64);
    assert_eq!(bytes("received") - bytes("forwarded"), saved as f64);

    let latency = &metrics["families"]["staleguard_proxy_added_latency_seconds"];
    assert_eq!(latency["type"], "histogram", "{latency}");
    let count = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_count",
        &[],
    );
    assert_eq!(count, calls.len() as f64);
    let inf = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_bucket",
        &[("le", "+Inf")],
    );
    assert_eq!(inf, count);

    // One log line per request, written when its answer ended, with the billed split.
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), calls.len(), "{lines:#?}");
    let mut logged: Vec<(u64, u64, u64)> = lines
        .iter()
        .filter(|l| l["usage"] == "read")
        .map(|l| {
            let n = |k: &str| l[k].as_u64().unwrap_or_else(|| panic!("{k} in {l}"));
            (
                n("cache_read_tokens"),
                n("cache_write_tokens"),
                n("uncached_input_tokens"),
            )
        })
        .collect();
    logged.sort_unstable();
    bills.sort_unstable();
    assert_eq!(logged, bills, "the log's token counts");
    // Anthropic requests carry the cache breakpoint of ours; the log says what became of it.
    for l in lines.iter().filter(|l| l["outcome"] == "projected") {
        let anthropic = l["path"].as_str().is_some_and(|p| p.ends_with("/messages"));
        let expected = if anthropic { "added" } else { "-" };
        assert_eq!(l["breakpoint"], expected, "{l}");
    }
    assert_eq!(
        lines.iter().filter(|l| l["usage"] == "missing").count(),
        1,
        "{lines:#?}"
    );
    let streams = calls.iter().filter(|c| c["stream"] == json!(true)).count();
    let long = lines
        .iter()
        .filter(|l| l["total_ms"].as_u64().unwrap_or(0) >= 1000)
        .collect::<Vec<_>>();
    assert_eq!(
        long.len(),
        streams,
        "each stream's line comes after its last event: {lines:#?}"
    );
    // An SDK may hang up right after the last event, before the upstream's end of stream.
    assert!(
        long.iter().all(|l| l["ended"] != "upstream_error"),
        "{long:#?}"
    );
    // A JSON answer is complete once its Content-Length has passed: the server reads its
    // body no further, so no end of stream is ever seen.
    let whole: Vec<_> = lines
        .iter()
        .filter(|l| l["total_ms"].as_u64().unwrap_or(0) < 1000)
        .collect();
    assert!(!whole.is_empty());
    assert!(whole.iter().all(|l| l["ended"] == "complete"), "{whole:#?}");
}

/// `GET /metrics` is the proxy's own; `--metrics-path` moves it (or turns it off) for an
/// upstream that serves a `/metrics` of its own. Requests the proxy answers itself are
/// counted by outcome.
#[test]
fn metrics_are_the_proxys_own_at_a_path_that_can_move() {
    let work = Work::new("metrics_path");
    let up = start_upstream(0);
    let down = free_port();
    let proxy = start_proxy(
        &work,
        None,
        &[
            "--route",
            &format!("/up={}", up.origin()),
            "--route",
            &format!("/down=http://127.0.0.1:{down}"),
            "--max-body-bytes",
            "1000",
            "--fail-closed",
        ],
        &[],
    );
    let json_headers = [("Content-Type", "application/json")];
    let small = br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}]}"#;
    let big = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let answers = [
        http(proxy.port, "GET", "/v1/models", &[], b"").status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            &big,
        )
        .status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            b"{",
        )
        .status,
        http(proxy.port, "GET", "/up/v1/models", &[], b"").status,
        http(
            proxy.port,
            "POST",
            "/down/v1/chat/completions",
            &json_headers,
            small,
        )
        .status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            small,
        )
        .status,
    ];
    assert_eq!(answers, [404, 413, 400, 200, 502, 200]);
    let metrics = metrics_after(&work, &proxy, answers.len());
    for (outcome, n) in [
        ("no_route", 1.0),
        ("too_large", 1.0),
        ("refused", 1.0),
        ("untouched", 1.0),
        ("upstream_unreachable", 1.0),
        ("projected", 1.0),
        ("passthrough", 0.0),
        ("upstream_timeout", 0.0),
    ] {
        assert_eq!(requests_of(&metrics, outcome), n, "{outcome}: {metrics}");
    }
    // Three requests were forwarded (one to an upstream that is down).
    let count = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_count",
        &[],
    );
    assert_eq!(count, 3.0);
    assert_eq!(up.requests().len(), 2, "the scripted model got /metrics");

    // A catch-all upstream: /metrics is the proxy's unless moved or turned off.
    up.reset();
    let all = start_proxy(&work, Some(&up.origin()), &[], &[]);
    metrics_at(&work, &format!("{}/metrics", all.origin()));
    assert!(up.requests().is_empty(), "GET /metrics was forwarded");
    let moved = start_proxy(
        &work,
        Some(&up.origin()),
        &["--metrics-path", "/_staleguard/metrics"],
        &[],
    );
    metrics_at(&work, &format!("{}/_staleguard/metrics", moved.origin()));
    let off = start_proxy(&work, Some(&up.origin()), &["--metrics-path", ""], &[]);
    for proxy in [&moved, &off] {
        let r = http(proxy.port, "GET", "/metrics", &[], b"");
        assert_eq!(r.status, 404, "the scripted model has no /metrics");
    }
    let paths: Vec<Value> = up.requests().iter().map(|r| r["path"].clone()).collect();
    assert_eq!(paths, [json!("/metrics"), json!("/metrics")]);
}
