//! The harness of the real-agent end-to-end tests: a throwaway home for the agent, the
//! scripted model (`tests/agents/model.py`, as the model or as a recording relay, or another
//! provider's, such as `tests/agents/gemini_model.py`), the proxy, and the agent run to its
//! end within a time limit.
//!
//! The chain an agent test builds: agent -> relay (records what the agent sent) -> `staleguard
//! proxy` -> scripted model (records what the proxy forwarded and answers as a real model
//! would), with the agent's browser MCP server behind `staleguard mcp`.

#![allow(dead_code)] // Each test binary uses part of this module.

pub(crate) mod anthropic;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How a receipt of staleguard's starts: what an older page collapsed to.
pub(crate) const RECEIPT: &str = "[staleguard receipt]";
/// What `staleguard mcp` says when it refuses a call on a stale ref.
pub(crate) const REFUSED: &str = "staleguard refused this call";
/// Where an agent's working directory is inside the scratch folder (`agent_command`);
/// Playwright MCP 0.0.83 writes `.playwright-mcp/` there.
pub(crate) const WORK: &str = "work";

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory for one test, kept (and named) when the test fails.
pub(crate) struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "staleguard-agent-e2e-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch { dir }
    }

    /// A folder of the scratch directory, created.
    pub(crate) fn folder(&self, name: &str) -> PathBuf {
        let path = self.dir.join(name);
        fs::create_dir_all(&path).expect("create a scratch folder");
        path
    }

    /// A throwaway home: `HOME`, the XDG folders and `TMPDIR` inside the scratch directory,
    /// as (name, value) pairs for the agent's environment.
    pub(crate) fn home_env(&self) -> Vec<(String, String)> {
        let home = self.folder("home");
        let mut env = vec![("HOME".to_string(), home.display().to_string())];
        for (key, sub) in [
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_STATE_HOME", ".local/state"),
        ] {
            let path = home.join(sub);
            fs::create_dir_all(&path).expect("create an XDG folder");
            env.push((key.into(), path.display().to_string()));
        }
        env.push(("TMPDIR".into(), self.folder("tmp").display().to_string()));
        env
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        kill_processes_under(&self.dir);
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Kills every process whose command line names a path under a folder (a browser whose
/// profile sits in the scratch `TMPDIR` and that its MCP server left behind).
pub(crate) use crate::mcp::kill_processes_under;

pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// A child process that is killed when the guard goes.
pub(crate) struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1: (status, body).
pub(crate) fn http_get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send the request");
    let mut data = Vec::new();
    stream.read_to_end(&mut data).expect("read the answer");
    let split = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers from :{port}{path}"));
    let head = String::from_utf8_lossy(&data[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, data[split + 4..].to_vec())
}

/// One request the scripted model (or relay) received. A relay numbers what it forwards in an
/// `x-e2e-seq` header from 1, in the order of its records, so a request the model received is
/// paired with the one the agent sent even when requests in flight together cross.
pub(crate) struct Record {
    /// Its place in the server's records, from 1: for a relay's record, the `x-e2e-seq` it
    /// was forwarded with.
    pub number: usize,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The model's answer: `{"tool", "arguments", "text"}` (the relay answers nothing).
    pub answer: Value,
    /// When it was received, in seconds since the Unix epoch.
    pub at: f64,
}

impl Record {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{} body is not JSON ({e}): {:.300}", self.path, self.body))
    }

    /// The request asked to open a WebSocket (`Upgrade: websocket`).
    pub(crate) fn is_websocket_upgrade(&self) -> bool {
        self.header("upgrade")
            .is_some_and(|v| v.to_ascii_lowercase().contains("websocket"))
    }

    /// The received request `received` (the model's) is this one (a relay's) forwarded.
    pub(crate) fn forwarded_as(&self, received: &Record) -> bool {
        received.header("x-e2e-seq") == Some(self.number.to_string().as_str())
    }
}

/// A scripted server of `tests/agents`: `model.py` as the model or, with `--relay URL`, as a
/// recording relay to URL, or another provider's scripted model such as `gemini_model.py`.
pub(crate) struct Model {
    _proc: Running,
    pub port: u16,
}

impl Model {
    /// `model.py`: the scripted model, or with `relay` a recording relay to it.
    pub(crate) fn start(relay: Option<&str>) -> Model {
        match relay {
            Some(url) => Model::script("model.py", &["--relay", url]),
            None => Model::script("model.py", &[]),
        }
    }

    /// `python3 tests/agents/<script> <args>`: a server that prints the port it listens on as
    /// its first line and lists what it received at `GET /_requests`.
    pub(crate) fn script(script: &str, args: &[&str]) -> Model {
        let script = repo().join("tests/agents").join(script);
        assert!(script.is_file(), "missing {}", script.display());
        let mut child = Command::new("python3")
            .arg(&script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 {}: {e}", script.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the scripted server's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{} printed {line:?}, not a port", script.display()));
        Model {
            _proc: Running(child),
            port,
        }
    }

    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received so far, in order.
    pub(crate) fn requests(&self) -> Vec<Record> {
        let (status, body) = http_get(self.port, "/_requests");
        assert_eq!(status, 200, "GET /_requests");
        let list: Vec<Value> = serde_json::from_slice(&body).expect("/_requests is JSON");
        list.iter()
            .enumerate()
            .map(|(i, rec)| record(i + 1, rec))
            .collect()
    }
}

fn record(number: usize, rec: &Value) -> Record {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Record {
        number,
        method: text(&rec["method"]),
        path: text(&rec["path"]),
        headers: rec["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|pair| (text(&pair[0]), text(&pair[1])))
            .collect(),
        body: text(&rec["body"]),
        answer: rec["answer"].clone(),
        at: rec["at"].as_f64().unwrap_or_default(),
    }
}

/// `staleguard proxy` with compaction on, in front of `upstream`.
pub(crate) struct Proxy {
    proc: Option<Running>,
    pub port: u16,
    log: PathBuf,
}

impl Proxy {
    pub(crate) fn start(scratch: &Scratch, upstream: &str) -> Proxy {
        let port = free_port();
        let log = scratch.dir.join("proxy.stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_staleguard"))
            .args(["proxy", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--upstream", upstream])
            .env("BROWSER_HISTORY_COMPACTION", "on")
            .env_remove("BROWSER_EVIDENCE_RETENTION")
            .env_remove("BROWSER_PROGRESS_TRACKING")
            .current_dir(&scratch.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(&log).expect("proxy log")))
            .spawn()
            .expect("start staleguard proxy");
        let mut proxy = Proxy {
            proc: Some(Running(child)),
            port,
            log,
        };
        proxy.wait_ready();
        proxy
    }

    fn wait_ready(&mut self) {
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(Running(child)) = self.proc.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "staleguard proxy exited at start-up ({status}):\n{}",
                        self.log_text()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "staleguard proxy did not listen on {addr} within 10 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the proxy (its log lines are written when each answer has ended) and returns
    /// its log.
    pub(crate) fn stop(&mut self) -> String {
        self.proc.take();
        self.log_text()
    }
}

/// What an agent run left: its exit, standard output and standard error.
pub(crate) struct Finished {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// Runs `cmd` to its end within `limit`, killing it otherwise (and then failing).
pub(crate) fn run_limited(cmd: Command, limit: Duration, what: &str) -> Finished {
    run_limited_with(cmd, limit, what, false)
}

/// `run_limited` with `cmd` the leader of a process group of its own, and the whole group
/// (the tools it ran, the servers it started that stayed in it) killed when it has ended, in
/// time or not, and when the caller fails.
pub(crate) fn run_limited_group(cmd: Command, limit: Duration, what: &str) -> Finished {
    run_limited_with(cmd, limit, what, true)
}

/// Kills, when it goes, the process group it names (by the leader's process id).
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn run_limited_with(mut cmd: Command, limit: Duration, what: &str, group: bool) -> Finished {
    use std::os::unix::process::CommandExt;
    let start = Instant::now();
    if group {
        cmd.process_group(0);
    }
    let mut child = Running(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}")),
    );
    // Dropped before `child` (declared later): the whole group is killed, then the leader reaped.
    let _group = Group(group.then(|| child.0.id()));
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(child.0.stdout.take().expect("stdout")));
    let err = read_all(Box::new(child.0.stderr.take().expect("stderr")));
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait for the agent") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.0.kill();
            let _ = child.0.wait();
            let err = err.join().unwrap_or_default();
            panic!("{what} did not finish within {limit:?}; stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Finished {
        success: status.success(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        took: start.elapsed(),
    }
}

/// The chain of a guarded run, in front of the agent: a recording relay (`relay`, the agent's
/// API), `staleguard proxy`, and the scripted model (`tests/agents/<script> <args>`).
pub(crate) struct Chain {
    pub relay: Model,
    pub proxy: Proxy,
    pub model: Model,
}

impl Chain {
    pub(crate) fn start(scratch: &Scratch, script: &str, args: &[&str]) -> Chain {
        let model = Model::script(script, args);
        let proxy = Proxy::start(scratch, &model.origin());
        let relay = Model::start(Some(&proxy.origin()));
        Chain {
            relay,
            proxy,
            model,
        }
    }
}

/// The command line of the MCP server `server` (its program first), behind `staleguard mcp`
/// when `guarded`.
pub(crate) fn behind_guard(server: Vec<String>, guarded: bool) -> Vec<String> {
    if !guarded {
        return server;
    }
    let mut command = vec![
        env!("CARGO_BIN_EXE_staleguard").to_string(),
        "mcp".into(),
        "--".into(),
    ];
    command.extend(server);
    command
}

/// The program `bin` of the npm package pinned in `tests/mcp/node/<folder>` (`what` names it),
/// checked to be installed: (the package's folder, the program).
pub(crate) fn npm_bin(folder: &str, bin: &str, what: &str) -> (PathBuf, PathBuf) {
    let dir = repo().join("tests/mcp/node").join(folder);
    let path = dir.join("node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "{what} is not installed in {}: run `npm ci` there, or run scripts/test, which does",
        dir.display()
    );
    (dir, path)
}

/// The agent `bin`, to run in the scratch folder `WORK` with only the environment it needs to
/// start: `PATH`, a throwaway home, and anything not on 127.0.0.1 sent to a closed port (no
/// network beyond this machine).
pub(crate) fn agent_command(scratch: &Scratch, bin: &Path) -> Command {
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let mut cmd = Command::new(bin);
    cmd.current_dir(scratch.folder(WORK))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(scratch.home_env())
        .env("HTTPS_PROXY", &nowhere)
        .env("HTTP_PROXY", &nowhere)
        .env("NO_PROXY", "127.0.0.1,localhost");
    cmd
}

/// Runs the agent `cmd` (`what`) as `run_limited_group` does, kills what it left behind under
/// the scratch folder, and fails unless it succeeded (saying `hint`, such as where its log is,
/// and what it printed).
pub(crate) fn run_agent(
    scratch: &Scratch,
    cmd: Command,
    limit: Duration,
    what: &str,
    hint: &str,
) -> Finished {
    let run = run_limited_group(cmd, limit, what);
    let leftovers = kill_processes_under(&scratch.dir);
    eprintln!(
        "{what} took {:.1} s; {leftovers} leftover processes killed",
        run.took.as_secs_f64()
    );
    assert!(
        run.success,
        "{what} failed{hint}:\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    run
}

/// The agent's answer on the order flow names the one order, neither cancelled nor repeated.
pub(crate) fn order_placed_once(answer: &str) {
    assert!(
        answer.contains("WX-1001") && !answer.contains("cancelled") && !answer.contains("WX-1002"),
        "{answer}"
    );
}

/// A result that shows a page inline (Playwright MCP 0.0.41's action results): what
/// staleguard collapses when a newer one follows.
pub(crate) fn shows_page(text: &str) -> bool {
    text.contains("- Page Snapshot:")
}

/// The pages of request `i` as the agent sent them and as the model got them, in order: every
/// one but the newest reached the model as a receipt with no ref left, and the newest as the
/// agent sent it. Returns how many were collapsed.
pub(crate) fn only_newest_page_live(i: usize, pages: &[(&str, &str)]) -> usize {
    for (n, (sent, got)) in pages.iter().enumerate() {
        if n + 1 < pages.len() {
            assert!(
                got.starts_with(RECEIPT) && !got.contains("[ref="),
                "request {i}: an older page reached the model live: {got:.400}"
            );
        } else {
            assert_eq!(got, sent, "request {i}: the newest page is live");
        }
    }
    pages.len().saturating_sub(1)
}

/// The refusal names the confirm page by the observation ID its receipt carries, among
/// `results` (the text of every result of the request).
pub(crate) fn refusal_names_a_receipt<'a>(
    refusal: &str,
    results: impl IntoIterator<Item = &'a str>,
) {
    let id = refusal
        .split("observation ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no observation ID in {refusal}"));
    let receipt = results
        .into_iter()
        .find(|r| r.starts_with(RECEIPT) && r.contains("confirm.html"))
        .expect("the confirm page's receipt");
    assert!(
        receipt.contains(&format!("observation={id}")),
        "the refusal names observation {id}, the receipt says: {receipt}"
    );
}

/// Nothing of staleguard's (no refusal, no receipt) is among `results`, the text of every
/// result of an unguarded run's last request.
pub(crate) fn nothing_of_staleguards_in<'a>(results: impl IntoIterator<Item = &'a str>) {
    for r in results {
        assert!(
            !r.contains(REFUSED) && !r.starts_with(RECEIPT),
            "something of staleguard's is in the unguarded run: {r:.400}"
        );
    }
}

/// Every header of `sent` (the agent's request) reached the model in `got` (request `i`)
/// unchanged, but the hop-by-hop ones.
pub(crate) fn headers_passed_through(i: usize, sent: &Record, got: &Record) {
    let hop = ["host", "content-length", "connection", "transfer-encoding"];
    for (name, value) in &sent.headers {
        if !hop.contains(&name.to_ascii_lowercase().as_str()) {
            assert_eq!(
                got.header(name),
                Some(value.as_str()),
                "request {i}: header {name} changed on the way"
            );
        }
    }
}

/// Keeps the requests `sent` in the scratch folder (`sent-00.json`, ...), for when the test
/// fails.
pub(crate) fn keep_sent(scratch: &Scratch, sent: &[Record]) {
    for (i, s) in sent.iter().enumerate() {
        fs::write(scratch.dir.join(format!("sent-{i:02}.json")), &s.body).expect("write");
    }
}

/// `staleguard project --format <format>` of `body` under the proxy's configuration: what the
/// proxy must have forwarded for it.
pub(crate) fn project(scratch: &Scratch, format: &str, body: &str) -> String {
    let file = scratch.dir.join("sent-body.json");
    fs::write(&file, body).expect("write the body to project");
    let out = crate::common::project_file(&file, format);
    String::from_utf8(out).expect("the projection is UTF-8")
}
