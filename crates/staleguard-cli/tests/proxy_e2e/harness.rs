//! What the tests share: scratch directories, the scripted model, the proxy and the clients
//! that talk to them, and readers of what they answered, forwarded, logged and counted.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;

pub(crate) const OPENAI_KEY: &str = "sk-test-secret";
pub(crate) const ANTHROPIC_KEY: &str = "sk-ant-test-secret";
/// What `clients.py` sends as `x-goog-api-key`, and the raw calls as `?key=`.
pub(crate) const GEMINI_KEY: &str = "AIza-test-secret";
/// The scripted model's pause between SSE events, in seconds.
pub(crate) const PAUSE: f64 = 0.3;
/// SSE events the scripted model sends for a Chat Completions stream, as the SDK counts them.
pub(crate) const CHAT_STREAM_EVENTS: u64 = 5;

// ------------------------------------------------------------------------------------------
// Paths, prerequisites, scratch directories

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn script(name: &str) -> PathBuf {
    let path = repo().join("tests/proxy").join(name);
    assert!(path.is_file(), "missing {}", path.display());
    path
}

pub(crate) fn fixture(rel: &str) -> PathBuf {
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
pub(crate) struct Work {
    pub(crate) dir: PathBuf,
    files: AtomicUsize,
}

impl Work {
    pub(crate) fn new(name: &str) -> Work {
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

    pub(crate) fn file(&self, stem: &str, data: &[u8]) -> PathBuf {
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

pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}

/// A child process that is killed when the guard goes.
pub(crate) struct Running {
    pub(crate) child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command to its end within `limit`, killing it otherwise. Returns (status, stdout, stderr).
pub(crate) fn run_limited(mut cmd: Command, limit: Duration, what: &str) -> (bool, String, String) {
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

pub(crate) struct RawResponse {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl RawResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
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

/// A Chat Completions body POSTed over a plain socket; the answer must be 200.
pub(crate) fn post_chat(port: u16, body: &[u8]) -> RawResponse {
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer sk-test-secret"),
    ];
    let r = http(port, "POST", "/v1/chat/completions", &headers, body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r
}

// ------------------------------------------------------------------------------------------
// The scripted model

pub(crate) struct Upstream {
    _proc: Running,
    port: u16,
}

/// Starts `upstream.py` on `port` (0: any free port).
pub(crate) fn start_upstream(port: u16) -> Upstream {
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
    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn v1(&self) -> String {
        format!("{}/v1", self.origin())
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        let r = http(self.port, "GET", "/_requests", &[], b"");
        assert_eq!(r.status, 200);
        serde_json::from_slice(&r.body).expect("/_requests is JSON")
    }

    pub(crate) fn reset(&self) {
        assert_eq!(http(self.port, "POST", "/_reset", &[], b"").status, 200);
    }
}

pub(crate) fn rec_body(rec: &Value) -> &str {
    rec["body"].as_str().expect("recorded body")
}

pub(crate) fn rec_header<'a>(rec: &'a Value, name: &str) -> Option<&'a str> {
    rec["headers"].as_array()?.iter().find_map(|pair| {
        let k = pair[0].as_str()?;
        k.eq_ignore_ascii_case(name)
            .then(|| pair[1].as_str())
            .flatten()
    })
}

// ------------------------------------------------------------------------------------------
// The proxy

pub(crate) struct Proxy {
    pub(crate) proc: Option<Running>,
    pub(crate) port: u16,
    log: PathBuf,
}

pub(crate) fn start_proxy(
    work: &Work,
    upstream: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> Proxy {
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
    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn v1(&self) -> String {
        format!("{}/v1", self.origin())
    }

    pub(crate) fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the proxy and returns everything it wrote to stderr.
    pub(crate) fn stop(&mut self) -> String {
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

pub(crate) fn sdk(cmd: &str, base_url: &str, body: &Path, stream: bool) -> Value {
    json!({"cmd": cmd, "base_url": base_url, "body_file": body, "stream": stream})
}

pub(crate) fn sdk_with(
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

pub(crate) fn raw(method: &str, url: &str, body: Option<&Path>, encoding: Option<&str>) -> Value {
    json!({"cmd": "raw", "method": method, "url": url, "body_file": body, "encoding": encoding})
}

/// Runs the calls one after another in one `clients.py batch` process; one result per call.
pub(crate) fn clients(work: &Work, calls: &[Value]) -> Vec<Value> {
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

pub(crate) fn header<'a>(result: &'a Value, name: &str) -> Option<&'a str> {
    result["headers"][name].as_str()
}

pub(crate) fn assert_ok(result: &Value, what: &str) {
    assert!(
        result["ok"] == json!(true) && result["status"] == json!(200),
        "{what}: the SDK call failed: {result}"
    );
}

/// `x-staleguard: projected; collapsed=N; ...` and N.
pub(crate) fn collapsed(value: Option<&str>, what: &str) -> u64 {
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
pub(crate) fn echo_of(result: &Value) -> &str {
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
pub(crate) fn assert_streamed(result: &Value, what: &str) {
    let first = result["first_event_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no event: {result}"));
    let total = result["total_s"].as_f64().unwrap();
    assert!(
        first < total - PAUSE,
        "{what}: the stream was buffered: first event at {first:.3} s, stream ended at {total:.3} s"
    );
}

/// The recorded `order` session as a Responses request body.
pub(crate) fn responses_body(work: &Work) -> PathBuf {
    converted(work, "chat-to-responses", "order.responses.json")
}

/// The recorded `order` session as Gemini CLI would send it, with a `model` for the SDK.
pub(crate) fn gemini_body(work: &Work) -> PathBuf {
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

// ------------------------------------------------------------------------------------------
// Projection

/// `staleguard project --format auto` of a body: what the proxy must forward.
pub(crate) fn project(work: &Work, body: &[u8]) -> Vec<u8> {
    common::project_file(&work.file("body.json", body), "auto")
}

pub(crate) fn assert_same_bytes(work: &Work, got: &[u8], want: &[u8], what: &str) {
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

// ------------------------------------------------------------------------------------------
// What the provider billed, and the metrics

/// `GET url` parsed by `prometheus_client`'s text parser (a page that does not parse fails).
pub(crate) fn metrics_at(work: &Work, url: &str) -> Value {
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
pub(crate) fn sample(metrics: &Value, family: &str, sample: &str, labels: &[(&str, &str)]) -> f64 {
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

pub(crate) fn requests_of(metrics: &Value, outcome: &str) -> f64 {
    sample(
        metrics,
        "staleguard_proxy_requests",
        "staleguard_proxy_requests_total",
        &[("outcome", outcome)],
    )
}

/// The proxy's metrics once `n` requests have ended (an answer is counted when its body
/// has gone out, just after the client has it).
pub(crate) fn metrics_after(work: &Work, proxy: &Proxy, n: usize) -> Value {
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
pub(crate) fn request_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["fields"].clone())
        .filter(|f| f["message"] == "request")
        .collect()
}

/// The scripted model's bill of one request: (cache read, cache write, uncached).
pub(crate) fn billed(rec: &Value) -> (u64, u64, u64) {
    let b = &rec["billed"];
    let n = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("billed {k}: {rec}"));
    (n("cache_read"), n("cache_write"), n("uncached"))
}
