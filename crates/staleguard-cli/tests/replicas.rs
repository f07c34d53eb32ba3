//! More than one machine: two `staleguard proxy` replicas behind Debian's nginx, configured by
//! `deploy/nginx.conf` (only its ports changed), against a single proxy on its own.
//!
//! Twelve recorded sessions (`fixtures/pwmcp-0.0.41`, OpenAI Chat and Anthropic
//! Messages) are sent turn by turn, interleaved, each turn the session's history so far, as an
//! agent sends it, with the session header of Claude Code, Codex, opencode or Gemini CLI (the
//! ones `deploy/nginx.conf` hashes, see deploy/README.md). A scripted model in this test
//! records what each request brought, and streams one answer, which must reach the client
//! event by event; a WebSocket handshake must get the proxy's 426. The checks:
//!
//! - every turn is answered 200, and every body the model received through nginx is
//!   byte-identical to the one it received for the same turn from the single proxy (as are
//!   the answer and its `x-staleguard` header);
//! - each session's turns all reach one replica (told by which replica's log gained the
//!   turn's line), both replicas get sessions, and most turns after a session's first resume
//!   from the checkpoint the previous turn left (`resumed=true`), at least as many as on the
//!   single proxy;
//! - without the session header, and with a header that changes every turn (so a session's
//!   turns land on either replica, warm or cold), the bodies are still the same bytes.
//!
//! Needs `/usr/sbin/nginx` (Debian's `nginx` package; `scripts/test` installs it): without it
//! the test fails saying so, it never skips. nginx and the proxies run in process groups of
//! their own, killed when the test ends, whether it passes or not.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

const NGINX: &str = "/usr/sbin/nginx";
const REPLICAS: usize = 2;
/// What a proxy may take to write a request's log line once its answer has ended.
const LOG_WAIT: Duration = Duration::from_secs(10);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    let path = repo().join("fixtures").join(rel);
    assert!(path.is_file(), "missing fixture {}", path.display());
    path
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

// ------------------------------------------------------------------------------------------
// Scratch folder and processes

/// The test's folder: configs and logs. Kept when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("staleguard-replicas-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the scratch folder");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A child in a process group of its own, the whole group killed when this goes (nginx's
/// workers with their master).
struct Group {
    child: Child,
}

impl Group {
    fn spawn(mut cmd: Command, stderr: &Path, what: &str) -> Group {
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                fs::File::create(stderr).expect("create a log file"),
            ))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Group { child }
    }

    /// Waits until `port` accepts connections; panics with `log` if the process ended first.
    fn wait_for_port(&mut self, port: u16, what: &str, log: &Path) {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "{what} exited at start-up ({status}):\n{}",
                    fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{what} did not listen on {addr} within 15 s:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// SIGTERM to the group, so nginx's master reaps its workers, then SIGKILL to what is left.
impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let signal = |name: &str| {
            let _ = Command::new("kill")
                .args([name, "--", &group])
                .stderr(Stdio::null())
                .status();
        };
        signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        signal("-KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------------------------------
// Plain HTTP/1.1 over std's TcpStream

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One request on a connection of its own (`Connection: close`).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    // One write: a head and a body written apart wait on Nagle and delayed ACKs (40 ms).
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).unwrap();
    let mut reader = BufReader::new(stream);
    let (line, headers) = read_head(&mut reader).expect("an HTTP answer");
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let body = match read_body(&mut reader, &headers) {
        Some(body) => body,
        None => {
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).expect("read the answer");
            rest
        }
    };
    Response {
        status,
        headers,
        body,
    }
}

type Head = (String, Vec<(String, String)>);

/// The start line and the headers of a message; `None` at the end of the stream.
fn read_head(reader: &mut impl BufRead) -> Option<Head> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let start = line.trim_end().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            return Some((start, headers));
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

/// A body framed by `Content-Length` or chunked; `None` when neither says where it ends.
fn read_body(reader: &mut impl BufRead, headers: &[(String, String)]) -> Option<Vec<u8>> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                return Some(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let length: usize = get("content-length")?.parse().ok()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

// ------------------------------------------------------------------------------------------
// The scripted model: answers at once and keeps what each request brought

struct Model {
    port: u16,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// The scripted model's pause between its two events when it streams.
const STREAM_PAUSE: Duration = Duration::from_millis(800);

const CHAT_ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}"#;
const MESSAGES_ANSWER: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":1}}"#;

impl Model {
    fn start() -> Model {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the model's port");
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || Model::serve(conn, &kept));
            }
        });
        Model { port, bodies }
    }

    /// Answers the requests of one kept-alive connection.
    fn serve(conn: TcpStream, kept: &Mutex<Vec<Vec<u8>>>) {
        let mut writer = conn.try_clone().expect("clone the connection");
        let mut reader = BufReader::new(conn);
        while let Some((line, headers)) = read_head(&mut reader) {
            let body = read_body(&mut reader, &headers).unwrap_or_default();
            let mut parts = line.split(' ');
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let answer = match (method, path.ends_with("/messages")) {
                ("POST", true) => MESSAGES_ANSWER,
                ("POST", false) => CHAT_ANSWER,
                _ => "{}",
            };
            kept.lock().unwrap().push(body);
            if headers.iter().any(|(k, _)| k == "x-test-stream") {
                // Server-sent events: one, a pause, then the second and the end.
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let event = |data: &str| {
                    let data = format!("data: {data}\n\n");
                    format!("{:x}\r\n{data}\r\n", data.len())
                };
                let first = format!("{head}{}", event("one"));
                if writer.write_all(first.as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(STREAM_PAUSE);
                let rest = format!("{}0\r\n\r\n", event("two"));
                if writer.write_all(rest.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            let message = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            if writer.write_all(message.as_bytes()).is_err() {
                return;
            }
        }
    }

    fn received(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }

    fn body(&self, index: usize) -> Vec<u8> {
        self.bodies.lock().unwrap()[index].clone()
    }
}

// ------------------------------------------------------------------------------------------
// The proxies and nginx

struct Proxy {
    _group: Group,
    port: u16,
    log: PathBuf,
}

impl Proxy {
    fn start(scratch: &Scratch, name: &str, model: &Model) -> Proxy {
        let dir = scratch.0.join(name);
        fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let log = scratch.0.join(format!("{name}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_staleguard"));
        cmd.arg("proxy")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--upstream", &format!("http://127.0.0.1:{}", model.port)])
            .current_dir(&dir)
            .env("BROWSER_HISTORY_COMPACTION", "on")
            .env_remove("BROWSER_EVIDENCE_RETENTION")
            .env_remove("BROWSER_PROGRESS_TRACKING");
        let what = format!("staleguard proxy ({name})");
        let mut group = Group::spawn(cmd, &log, &what);
        group.wait_for_port(port, &what, &log);
        // Ready when it says so itself (its answer, not the model's).
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let r = http(port, "GET", "/readyz", &[], b"");
            if r.status == 200 && r.body == br#"{"status":"ready"}"# {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what} was not ready in 15 s: GET /readyz answered {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Proxy {
            _group: group,
            port,
            log,
        }
    }

    /// The proxy's log lines for model requests, in order.
    fn lines(&self) -> Vec<String> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" request ") && l.contains("path=/v1/"))
            .map(str::to_string)
            .collect()
    }
}

/// Debian's nginx is there: missing means FAIL, never skip.
fn require_nginx() {
    assert!(
        Path::new(NGINX).is_file(),
        "this test runs Debian's nginx ({NGINX}), which is missing: install it with \
         `sudo apt-get install -y nginx` (scripts/test does)"
    );
}

struct Nginx {
    _group: Group,
    port: u16,
}

impl Nginx {
    /// nginx under `scratch/nginx` with `deploy/nginx.conf`, its `listen` and `server` ports
    /// replaced by a free port and the replicas'.
    fn start(scratch: &Scratch, replicas: &[Proxy]) -> Nginx {
        let template =
            fs::read_to_string(repo().join("deploy/nginx.conf")).expect("read deploy/nginx.conf");
        let port = free_port();
        let mut servers = replicas.iter();
        let mut listens = 0;
        let mut config = String::new();
        for line in template.lines() {
            let code = line.split('#').next().unwrap_or("").trim();
            let line = if code.starts_with("listen 127.0.0.1:") {
                listens += 1;
                line.replacen(
                    &code[..code.find(';').expect("listen ends with ;")],
                    &format!("listen 127.0.0.1:{port}"),
                    1,
                )
            } else if code.starts_with("server 127.0.0.1:") {
                let replica = servers
                    .next()
                    .expect("deploy/nginx.conf names more replicas than the test starts");
                let old = code
                    .split_whitespace()
                    .nth(1)
                    .unwrap()
                    .trim_end_matches(';');
                line.replacen(old, &format!("127.0.0.1:{}", replica.port), 1)
            } else {
                line.to_string()
            };
            config.push_str(&line);
            config.push('\n');
        }
        assert_eq!(
            listens, 1,
            "deploy/nginx.conf: one `listen 127.0.0.1:PORT;` line"
        );
        assert!(
            servers.next().is_none(),
            "deploy/nginx.conf names fewer replicas than the test starts"
        );
        let prefix = scratch.0.join("nginx");
        fs::create_dir_all(prefix.join("logs")).unwrap();
        fs::write(prefix.join("nginx.conf"), config).unwrap();
        let stderr = prefix.join("logs/stderr");
        let mut cmd = Command::new(NGINX);
        cmd.arg("-p").arg(&prefix).args([
            "-e",
            "logs/error.log",
            "-c",
            "nginx.conf",
            "-g",
            "daemon off;",
        ]);
        let mut group = Group::spawn(cmd, &stderr, "nginx");
        group.wait_for_port(port, "nginx", &stderr);
        Nginx {
            _group: group,
            port,
        }
    }
}

/// A streamed answer through `port`: when its first event arrived, and when it ended.
fn stream_timing(port: u16) -> (Duration, Duration) {
    let body = br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\ncontent-type: application/json\r\nx-test-stream: 1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    let start = Instant::now();
    stream.write_all(&message).unwrap();
    let (mut data, mut first) = (Vec::new(), None);
    let mut buf = [0; 4096];
    loop {
        let n = stream.read(&mut buf).expect("read the stream");
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if first.is_none() && text.contains("data: one") {
            first = Some(start.elapsed());
        }
    }
    let text = String::from_utf8_lossy(&data);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.contains("data: two"),
        "{text}"
    );
    (first.expect("the first event"), start.elapsed())
}

// ------------------------------------------------------------------------------------------
// The sessions

struct Session {
    name: String,
    path: &'static str,
    /// The header that names the session, as the client it stands for sends it.
    header: &'static [&'static str],
    turns: Vec<Vec<u8>>,
}

/// Each recorded session as its turns: the first `n` messages of the recording.
fn sessions() -> Vec<Session> {
    // Claude Code, Codex, opencode, another client, Gemini CLI (its installation's ID).
    const CLIENTS: [&[&str]; 5] = [
        &["x-claude-code-session-id"],
        &["session-id"],
        &["x-session-id", "x-session-affinity"],
        &["x-session-id"],
        &["x-gemini-api-privileged-user-id"],
    ];
    let mut out = Vec::new();
    for (format, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
    ] {
        for name in common::SCENARIOS {
            let file = fixture(&format!("pwmcp-0.0.41/{name}.{format}.json"));
            let body: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
            let messages = body["messages"].as_array().expect("messages").clone();
            let turns = (1..=messages.len())
                .map(|n| {
                    let mut turn = body.clone();
                    turn["messages"] = Value::Array(messages[..n].to_vec());
                    serde_json::to_vec(&turn).unwrap()
                })
                .collect();
            let header = CLIENTS[out.len() % CLIENTS.len()];
            out.push(Session {
                name: format!("{name}.{format}"),
                path,
                header,
                turns,
            });
        }
    }
    out
}

/// Every turn of every session, interleaved as concurrent agents send them: (session, turn).
fn schedule(sessions: &[Session]) -> Vec<(usize, usize)> {
    let longest = sessions.iter().map(|s| s.turns.len()).max().unwrap_or(0);
    (0..longest)
        .flat_map(|t| {
            sessions
                .iter()
                .enumerate()
                .filter(move |(_, s)| t < s.turns.len())
                .map(move |(i, _)| (i, t))
        })
        .collect()
}

/// How a run names sessions.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Naming {
    /// The session's header, the same every turn.
    Session,
    /// No session header at all.
    None,
    /// The session's header with a new value every turn.
    EveryTurn,
}

/// What one turn brought: the body the model received, the answer, and the log line.
struct Turn {
    sent: Vec<u8>,
    answer: Vec<u8>,
    staleguard: Option<String>,
    /// The replica whose log gained the turn's line, and the line.
    replica: usize,
    line: String,
}

/// Sends every turn in `order` to `port`, one at a time, and tells which of `proxies` took it.
fn run(
    port: u16,
    proxies: &[&Proxy],
    model: &Model,
    sessions: &[Session],
    order: &[(usize, usize)],
    naming: Naming,
) -> BTreeMap<(usize, usize), Turn> {
    let mut seen: Vec<usize> = proxies.iter().map(|p| p.lines().len()).collect();
    let mut out = BTreeMap::new();
    for &(s, t) in order {
        let session = &sessions[s];
        let what = format!("{} turn {} ({naming:?})", session.name, t + 1);
        let id = match naming {
            Naming::EveryTurn => format!("{}-{s}-turn-{t}", session.name),
            _ => format!("5e55{s:04}-{}", session.name),
        };
        let mut headers = vec![
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-test-secret"),
            ("x-api-key", "sk-ant-test-secret"),
            ("anthropic-version", "2023-06-01"),
        ];
        if naming != Naming::None {
            headers.extend(session.header.iter().map(|h| (*h, id.as_str())));
        }
        let before = model.received();
        let r = http(port, "POST", session.path, &headers, &session.turns[t]);
        assert_eq!(
            r.status,
            200,
            "{what}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(model.received(), before + 1, "{what}: one request upstream");
        // The proxy writes its line when the answer has ended: wait for it.
        let deadline = Instant::now() + LOG_WAIT;
        let (replica, line) = loop {
            let grown: Vec<(usize, Vec<String>)> = proxies
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p.lines()))
                .filter(|(i, lines)| lines.len() > seen[*i])
                .collect();
            match grown.as_slice() {
                [] => {}
                [(i, lines)] => {
                    assert_eq!(lines.len(), seen[*i] + 1, "{what}: one log line");
                    break (*i, lines[seen[*i]].clone());
                }
                _ => panic!("{what}: more than one proxy logged it"),
            }
            assert!(Instant::now() < deadline, "{what}: no proxy logged it");
            std::thread::sleep(Duration::from_millis(2));
        };
        seen[replica] += 1;
        out.insert(
            (s, t),
            Turn {
                sent: model.body(before),
                answer: r.body.clone(),
                staleguard: r.header("x-staleguard").map(str::to_string),
                replica,
                line,
            },
        );
    }
    out
}

/// Every turn of `got` forwarded and answered as the single proxy did it.
fn assert_same(
    scratch: &Scratch,
    sessions: &[Session],
    want: &BTreeMap<(usize, usize), Turn>,
    got: &BTreeMap<(usize, usize), Turn>,
    naming: Naming,
) {
    assert_eq!(want.len(), got.len());
    for ((s, t), w) in want {
        let g = &got[&(*s, *t)];
        let what = format!("{} turn {} ({naming:?})", sessions[*s].name, t + 1);
        if g.sent != w.sent {
            let stem = format!("{}-turn{}-{naming:?}", sessions[*s].name, t + 1);
            fs::write(scratch.0.join(format!("{stem}.single.json")), &w.sent).unwrap();
            fs::write(scratch.0.join(format!("{stem}.nginx.json")), &g.sent).unwrap();
            panic!(
                "{what}: through nginx the model received other bytes than from the single proxy \
                 ({stem}.single.json and .nginx.json in {})",
                scratch.0.display()
            );
        }
        assert_eq!(g.answer, w.answer, "{what}: answer");
        assert_eq!(g.staleguard, w.staleguard, "{what}: x-staleguard");
        assert!(w.line.contains("outcome=projected"), "{what}: {}", w.line);
    }
}

fn resumed(turns: &BTreeMap<(usize, usize), Turn>) -> usize {
    turns
        .values()
        .filter(|t| t.line.contains("resumed=true"))
        .count()
}

#[test]
fn replicas_behind_nginx_forward_what_one_proxy_does() {
    require_nginx();
    let started = Instant::now();
    let scratch = Scratch::new();
    let model = Model::start();
    let sessions = sessions();
    let order = schedule(&sessions);

    let single = Proxy::start(&scratch, "single", &model);
    let want = run(
        single.port,
        &[&single],
        &model,
        &sessions,
        &order,
        Naming::Session,
    );

    let replicas: Vec<Proxy> = (0..REPLICAS)
        .map(|i| Proxy::start(&scratch, &format!("replica{i}"), &model))
        .collect();
    let nginx = Nginx::start(&scratch, &replicas);
    let proxies: Vec<&Proxy> = replicas.iter().collect();

    // Codex's WebSocket handshake gets the proxy's 426 through nginx, and goes no further.
    let before = model.received();
    let upgrade = [
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let r = http(nginx.port, "GET", "/v1/responses", &upgrade, b"");
    assert_eq!(r.status, 426, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(model.received(), before);

    // An answer streams through nginx event by event, not once it has ended.
    let (first, total) = stream_timing(nginx.port);
    assert!(
        first + STREAM_PAUSE / 2 < total && total >= STREAM_PAUSE,
        "the first event came after {first:?}, the answer ended after {total:?}"
    );

    // With the session header: one replica per session, as warm as the single proxy.
    let got = run(
        nginx.port,
        &proxies,
        &model,
        &sessions,
        &order,
        Naming::Session,
    );
    assert_same(&scratch, &sessions, &want, &got, Naming::Session);
    let mut used = BTreeSet::new();
    for (s, session) in sessions.iter().enumerate() {
        let on: BTreeSet<usize> = (0..session.turns.len())
            .map(|t| got[&(s, t)].replica)
            .collect();
        assert_eq!(
            on.len(),
            1,
            "{} ({}) went to replicas {on:?}",
            session.name,
            session.header[0]
        );
        used.extend(on);
    }
    assert_eq!(
        used.len(),
        REPLICAS,
        "the session headers hashed to replicas {used:?} only"
    );
    let after_first = order.len() - sessions.len();
    let (resumed_single, resumed_nginx) = (resumed(&want), resumed(&got));
    assert!(
        resumed_nginx * 2 > after_first,
        "{resumed_nginx} of {after_first} turns after the first resumed through nginx"
    );
    // Each replica holds only its own sessions' checkpoints: it resumes at least as often.
    assert!(
        resumed_nginx >= resumed_single,
        "{resumed_nginx} turns resumed through nginx, {resumed_single} on the single proxy"
    );

    // Without it (all from one address, so one replica, warm for some sessions and cold for
    // the others), and with a new name every turn (the turns of a session spread over both).
    let bare = run(
        nginx.port,
        &proxies,
        &model,
        &sessions,
        &order,
        Naming::None,
    );
    assert_same(&scratch, &sessions, &want, &bare, Naming::None);
    let spread = run(
        nginx.port,
        &proxies,
        &model,
        &sessions,
        &order,
        Naming::EveryTurn,
    );
    assert_same(&scratch, &sessions, &want, &spread, Naming::EveryTurn);
    let split = (0..sessions.len())
        .filter(|&s| {
            let on: BTreeSet<usize> = (0..sessions[s].turns.len())
                .map(|t| spread[&(s, t)].replica)
                .collect();
            on.len() > 1
        })
        .count();
    assert!(
        split > 0,
        "no session's turns were spread over the replicas"
    );

    eprintln!(
        "{} turns x 4 runs in {:.1} s: resumed {resumed_single} (single), {resumed_nginx} \
         (nginx), {} (no header), {} (spread); {split} of {} sessions spread",
        order.len(),
        started.elapsed().as_secs_f64(),
        resumed(&bare),
        resumed(&spread),
        sessions.len()
    );
}
