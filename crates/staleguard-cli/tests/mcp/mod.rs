//! An MCP client over standard input and output, the test site, and the real
//! `@playwright/mcp` and `chrome-devtools-mcp` servers the end-to-end tests drive.

#![allow(dead_code)] // Each test binary uses part of this module.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// The two server versions the tests pin: inline snapshots with positional refs, and
/// file-linked snapshots.
pub(crate) const VERSIONS: &[&str] = &["0.0.41", "0.0.83"];

const WAIT: Duration = Duration::from_secs(120);

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The server command for `version`, with the flags the site README gives.
pub(crate) fn server_command(version: &str) -> Vec<String> {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "/usr/bin/chromium is missing: install Debian's Chromium (apt-get install -y chromium), or run scripts/test, which does"
    );
    let dir = workspace().join(format!("tests/mcp/node/pw-{version}"));
    let bin = ["playwright-mcp", "mcp-server-playwright"]
        .iter()
        .map(|b| dir.join("node_modules/.bin").join(b))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "@playwright/mcp {version} is not installed in {}: run `npm ci` there (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1), or run scripts/test, which does",
                dir.display()
            )
        });
    [
        bin.to_string_lossy().into_owned(),
        "--headless".into(),
        "--isolated".into(),
        "--no-sandbox".into(),
        "--executable-path".into(),
        chromium.to_string_lossy().into_owned(),
    ]
    .into()
}

/// The pinned `chrome-devtools-mcp` (tests/mcp/node/cdmcp-1.11.0) with the flags its
/// recordings used (`fixtures/cdmcp-1.11.0/README.md`).
pub(crate) fn cdmcp_command() -> Vec<String> {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "/usr/bin/chromium is missing: install Debian's Chromium (apt-get install -y chromium), or run scripts/test, which does"
    );
    let dir = workspace().join("tests/mcp/node/cdmcp-1.11.0");
    let bin = dir.join("node_modules/.bin/chrome-devtools-mcp");
    assert!(
        bin.exists(),
        "chrome-devtools-mcp 1.11.0 is not installed in {}: run `npm ci` there (PUPPETEER_SKIP_DOWNLOAD=1), or run scripts/test, which does",
        dir.display()
    );
    [
        bin.to_string_lossy().into_owned(),
        "--headless".into(),
        "--isolated".into(),
        format!("--executablePath={}", chromium.display()),
        "--chromeArg=--no-sandbox".into(),
        "--no-usage-statistics".into(),
        "--no-performance-crux".into(),
    ]
    .into()
}

/// `tests/site/pages` (or another folder) served on 127.0.0.1.
pub(crate) struct Site {
    child: Child,
    pub base: String,
}

impl Site {
    pub(crate) fn serve(dir: &Path) -> Site {
        assert!(
            dir.is_dir(),
            "{} is missing: the MCP tests serve the test site in tests/site/pages",
            dir.display()
        );
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("http.server banner");
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let port: u16 = line
            .split("port ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Site {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    pub(crate) fn shared() -> Site {
        Site::serve(&workspace().join("tests/site/pages"))
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line-oriented MCP client of a child process.
pub(crate) struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    pub stderr: Arc<Mutex<String>>,
    /// Disconnects when the standard error reader has read everything.
    stderr_done: Option<Receiver<()>>,
    /// Every message the client received, in order.
    pub received: Vec<Value>,
    /// The name of the ref argument the server's tools take (`ref` or `target`).
    pub ref_key: String,
    /// The working folder, where the server and its browser keep their files.
    cwd: PathBuf,
}

impl Client {
    /// Starts `program args` and initialises the MCP session.
    pub(crate) fn start(program: &str, args: &[String]) -> Client {
        let mut client = Client::spawn(program, args);
        client.initialize();
        client
    }

    /// `staleguard mcp [flags] -- <server>`.
    pub(crate) fn guarded(flags: &[&str], server: &[String]) -> Client {
        let mut args: Vec<String> = vec!["mcp".into()];
        args.extend(flags.iter().map(|s| s.to_string()));
        args.push("--".into());
        args.extend(server.iter().cloned());
        Client::start(env!("CARGO_BIN_EXE_staleguard"), &args)
    }

    pub(crate) fn spawn(program: &str, args: &[String]) -> Client {
        // Servers from 0.0.69 write snapshot files under their working folder.
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cwd =
            std::env::temp_dir().join(format!("staleguard-mcp-e2e-{}-{run}", std::process::id()));
        std::fs::create_dir_all(&cwd).expect("working folder");
        // TMPDIR in the working folder: the browser's profile lands there, so a browser its
        // server left behind is found by its command line when the client goes.
        let mut child = Command::new(program)
            .args(args)
            .current_dir(&cwd)
            .env("TMPDIR", &cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().expect("stderr");
        let (finished, stderr_done) = channel();
        std::thread::spawn(move || {
            let _finished = finished;
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            cwd,
            lines,
            next_id: 0,
            stderr,
            stderr_done: Some(stderr_done),
            received: Vec::new(),
            ref_key: "ref".into(),
        }
    }

    fn initialize(&mut self) {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": false}},
                   "clientInfo": {"name": "staleguard-e2e", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "initialize: {init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let tools = self.tools();
        let click = tools
            .iter()
            .find(|t| t["name"] == "browser_click" || t["name"] == "click")
            .unwrap_or_else(|| panic!("no browser_click or click in {tools:?}"));
        for key in ["target", "uid"] {
            if click["inputSchema"]["properties"].get(key).is_some() {
                self.ref_key = key.into();
            }
        }
    }

    pub(crate) fn tools(&mut self) -> Vec<Value> {
        let list = self.request("tools/list", json!({}));
        list["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("tools/list: {list}"))
    }

    pub(crate) fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    pub(crate) fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    /// The next line from the server, answering its own requests on the way.
    pub(crate) fn receive(&mut self) -> Value {
        loop {
            let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|_| {
                panic!(
                    "no answer in {WAIT:?}; stderr:\n{}",
                    self.stderr.lock().unwrap()
                )
            });
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON from the server ({e}): {line:.300}"));
            self.received.push(message.clone());
            match (message.get("method"), message.get("id")) {
                (Some(method), Some(id)) => {
                    let result = match method.as_str() {
                        Some("roots/list") => json!({"roots": []}),
                        _ => json!({}),
                    };
                    self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
                }
                (Some(_), None) => {}
                _ => return message,
            }
        }
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive();
            if message.get("id") == Some(&id) {
                return message;
            }
        }
    }

    /// A tool call: the result object.
    pub(crate) fn call(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no result: {answer}"))
    }

    /// Closes the client's side and waits for the exit code.
    pub(crate) fn finish(mut self) -> Option<i32> {
        self.finish_keeping_stderr()
    }

    /// [`finish`](Self::finish), keeping the client: once this returns, `stderr` holds
    /// everything the process wrote there.
    pub(crate) fn finish_keeping_stderr(&mut self) -> Option<i32> {
        self.stdin = None;
        let code = wait_timeout(&mut self.child, Duration::from_secs(60));
        // A browser the server left behind may hold the pipe open: wait a while, not forever.
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(Duration::from_secs(10));
        }
        code
    }
}

impl Drop for Client {
    /// Stops the server as an MCP client does, by closing its standard input, so it closes
    /// its browser; kills it if it has not exited within a few seconds, then kills whatever
    /// it left behind in its working folder (a browser is started in a process group of its
    /// own, so it outlives a killed server).
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_processes_under(&self.cwd);
        let _ = std::fs::remove_dir_all(&self.cwd);
    }
}

/// Kills every process whose command line names a path under `dir`. Returns how many.
pub(crate) fn kill_processes_under(dir: &Path) -> usize {
    // With the separator: another client's folder may start with this one's name.
    let needle = format!("{}/", dir.display());
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if pid != std::process::id() && String::from_utf8_lossy(&cmdline).contains(&needle) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            killed += 1;
        }
    }
    killed
}

pub(crate) fn wait_timeout(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        assert!(
            start.elapsed() < limit,
            "the process did not exit in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text parts of a result, joined.
pub(crate) fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// The uid of the element whose Chrome DevTools MCP snapshot line holds `role "name"`.
pub(crate) fn find_uid(page: &str, role: &str, name: &str) -> String {
    token_on_line(page, &format!(" {role} \"{name}\""), "uid=", ' ')
}

/// The ref of the element whose line holds `role "name"`.
pub(crate) fn find_ref(page: &str, role: &str, name: &str) -> String {
    token_on_line(page, &format!("{role} \"{name}\""), "[ref=", ']')
}

/// What follows `start` up to `end` on the first line that holds `needle` and `start`.
fn token_on_line(page: &str, needle: &str, start: &str, end: char) -> String {
    page.lines()
        .filter(|l| l.contains(needle))
        .find_map(|l| {
            let from = l.find(start)? + start.len();
            let to = l[from..].find(end)? + from;
            Some(l[from..to].to_string())
        })
        .unwrap_or_else(|| panic!("no {needle} with {start} in:\n{page}"))
}
