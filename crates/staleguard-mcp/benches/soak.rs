//! Soak: the memory of the MCP guard (the relay and its process host, `staleguard_mcp::run`)
//! over a long session, run by hand (not in CI). The guard runs as a child process of this
//! bench (the bench binary itself, in its guard role) in front of the fake browser server
//! `tests/mcp/fake_server.py`; the bench is its client and makes calls at `--rate` per
//! second for `--seconds`: navigations to new pages of 50 to 400 buttons (every fifth
//! linked to a file, so the guard takes snapshots of its own), clicks on fresh refs, clicks
//! on stale refs (refused by the guard), snapshots, `browser_history`, and now and then
//! garbage on the server's output, a cancelled call and a malformed line. Every `--report`
//! seconds it prints the calls done and the guard's resident memory (VmRSS); at the end,
//! RSS after `--warmup`, its maximum and last, its slope after warm-up, and whether it
//! stayed within warm-up RSS plus the guard's memo bound (32 MiB).
//!
//! `SOAK=1 cargo bench -p staleguard-mcp --bench soak -- [--seconds 3600] [--rate 20]
//! [--report 30] [--warmup 300]`
//!
//! Without `SOAK=1` it only says how to run it. Exits 1 when a call gets an answer it
//! should not have (or none), or RSS went over the bound.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use staleguard::Config;
use staleguard_mcp::{McpConfig, Options};

const USAGE: &str = "usage: SOAK=1 cargo bench -p staleguard-mcp --bench soak -- [--seconds N (3600)] [--rate CALLS_PER_SECOND (20)] [--report SECONDS (30)] [--warmup SECONDS (300)]";
/// The guard role's marker: the bench binary runs `staleguard_mcp::run` when it is set.
const GUARD_ROLE: &str = "STALEGUARD_SOAK_GUARD";
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

struct Args {
    seconds: u64,
    rate: f64,
    report: u64,
    warmup: u64,
}

fn args() -> Args {
    let mut a = Args {
        seconds: 3600,
        rate: 20.0,
        report: 30,
        warmup: 300,
    };
    fn parsed<T: std::str::FromStr>(name: &str, value: Option<String>) -> T {
        value.and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("soak: {name} needs a number\n{USAGE}");
            std::process::exit(2)
        })
    }
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next());
        match name.as_str() {
            // `cargo bench` passes `--bench` to every bench binary.
            "--bench" => {}
            "--seconds" => a.seconds = parsed(&name, value()),
            "--rate" => a.rate = parsed(&name, value()),
            "--report" => a.report = parsed(&name, value()),
            "--warmup" => a.warmup = parsed(&name, value()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => {
                eprintln!("soak: unknown argument {other:?}\n{USAGE}");
                std::process::exit(2)
            }
        }
    }
    a
}

/// The guard's role: `staleguard mcp -- <the rest of the arguments>` with the defaults.
fn guard() -> ! {
    let command: Vec<std::ffi::OsString> = std::env::args_os()
        .skip_while(|a| a != "--")
        .skip(1)
        .collect();
    let options = Options::new(Config::default(), &McpConfig::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = runtime
        .block_on(staleguard_mcp::run(&command, options))
        .unwrap_or_else(|e| {
            eprintln!("soak guard: {e}");
            2
        });
    std::process::exit(code)
}

/// The client's side of the guard.
struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Client {
    fn start() -> Client {
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/fake_server.py");
        let mut child = Command::new(std::env::current_exe().expect("this bench"))
            .env(GUARD_ROLE, "1")
            .args(["--", "python3", "-u"])
            .arg(server)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the guard");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Client {
            child,
            stdin,
            lines,
            next_id: 0,
        }
    }

    fn send_raw(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write to the guard");
        self.stdin.flush().expect("flush");
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends a request and waits for its answer, skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.id();
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.answer(&json!(id))
    }

    fn answer(&mut self, id: &Value) -> Result<Value, String> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("no answer to {id} in {ANSWER_WITHIN:?}"))?;
            let message: Value =
                serde_json::from_str(&line).map_err(|e| format!("not JSON ({e}): {line:.200}"))?;
            if message.get("method").is_some() {
                continue;
            }
            if &message["id"] == id {
                return Ok(message);
            }
            return Err(format!("an answer to another request: {line:.200}"));
        }
    }

    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| format!("{name}: no result: {answer:.300}"))
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// The first ref the page shows, scoped as the guard scopes it (`d3e1`).
fn first_ref(page: &str) -> Option<String> {
    let from = page.find("[ref=")? + 5;
    let to = page[from..].find(']')? + from;
    Some(page[from..to].to_string())
}

/// One cycle of the session; returns the calls made.
fn cycle(c: &mut Client, n: u64, stale: &mut Option<String>) -> Result<u64, String> {
    let mut calls = 0;
    let buttons = 50 + (n * 37) % 350;
    let linked = n.is_multiple_of(5);
    let r = c.call(
        "browser_navigate",
        json!({"url": format!("http://soak.test/{}/{n}", n % 100), "buttons": buttons, "filler": n % 4, "linked": linked}),
    )?;
    calls += 1;
    let page = text(&r);
    // A fresh ref: from the page, or (linked to a file) as the model reads it there, which
    // makes the guard take a snapshot of its own first.
    let fresh = if linked {
        "e1".to_string()
    } else {
        first_ref(&page).ok_or_else(|| format!("no ref on page {n}: {page:.300}"))?
    };
    let r = c.call(
        "browser_click",
        json!({"ref": fresh, "element": "Button 1"}),
    )?;
    calls += 1;
    if is_error(&r) {
        return Err(format!("a fresh ref was refused: {:.300}", text(&r)));
    }
    let after = c.call("browser_snapshot", json!({}))?;
    calls += 1;
    let now = first_ref(&text(&after));
    if let Some(old) = stale.take() {
        let r = c.call("browser_click", json!({"ref": old, "element": "Button 1"}))?;
        calls += 1;
        if !is_error(&r) || !text(&r).contains("staleguard refused this call") {
            return Err(format!("a stale ref was not refused: {:.300}", text(&r)));
        }
    }
    *stale = now;
    if n.is_multiple_of(10) {
        let list = c.call("browser_history", json!({}))?;
        calls += 1;
        let first_id = text(&list)
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .filter_map(|l| l.split(" | ").next())
            .next()
            .map(str::to_string);
        if let Some(id) = first_id {
            c.call("browser_history", json!({"id": id}))?;
            calls += 1;
        }
    }
    if n.is_multiple_of(7) {
        c.call(
            "fake_garbage",
            json!({"lines": ["a log line on stdout", "{\"level\":30}"]}),
        )?;
        calls += 1;
    }
    if n.is_multiple_of(11) {
        let id = c.id();
        c.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "fake_hold", "arguments": {}}}).to_string());
        c.send_raw(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}).to_string());
        calls += 1;
    }
    if n.is_multiple_of(13) {
        c.send_raw("{\"jsonrpc\": \"2.0\", \"id\": ");
        let e = c.answer(&Value::Null)?;
        if e["error"]["code"] != json!(-32700) {
            return Err(format!("no parse error: {e}"));
        }
        calls += 1;
    }
    Ok(calls)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    if std::env::var_os(GUARD_ROLE).is_some() {
        guard();
    }
    let a = args();
    if std::env::var("SOAK").as_deref() != Ok("1") {
        println!("soak: skipped (it runs for an hour by default): {USAGE}");
        return;
    }
    let mut c = Client::start();
    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}),
    );
    if let Err(e) = init {
        eprintln!("soak: initialize: {e}");
        std::process::exit(1);
    }
    c.send_raw(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    println!(
        "soak: {} s at {} calls/s, guard pid {}, reports every {} s",
        a.seconds,
        a.rate,
        c.child.id(),
        a.report
    );
    let start = Instant::now();
    let end = start + Duration::from_secs(a.seconds);
    let mut next_report = start + Duration::from_secs(a.report);
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let (mut calls, mut n, mut failures) = (0u64, 0u64, 0u64);
    let mut stale = None;
    let mut max_kib = 0;
    while Instant::now() < end {
        n += 1;
        match cycle(&mut c, n, &mut stale) {
            Ok(k) => calls += k,
            Err(e) => {
                failures += 1;
                eprintln!("soak: cycle {n}: {e}");
                if failures >= 5 {
                    break;
                }
            }
        }
        let rss = c.rss_kib();
        max_kib = max_kib.max(rss);
        samples.push((start.elapsed().as_secs_f64(), rss));
        // Paced: `calls` so far at `rate` per second.
        let due = start + Duration::from_secs_f64(calls as f64 / a.rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if Instant::now() >= next_report {
            let t = start.elapsed().as_secs();
            println!(
                "{t:>6} s  {calls:>8} calls ({:.1}/s)  guard RSS {:.1} MiB (max {:.1})",
                calls as f64 / start.elapsed().as_secs_f64(),
                mib(rss),
                mib(max_kib)
            );
            next_report += Duration::from_secs(a.report);
        }
    }
    drop(c.stdin);
    let code = {
        let limit = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = c.child.try_wait() {
                break status.code();
            }
            if Instant::now() > limit {
                let _ = c.child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let after: Vec<&(f64, u64)> = samples
        .iter()
        .filter(|(t, _)| *t >= a.warmup as f64)
        .collect();
    let Some(&&(_, warm)) = after.first() else {
        println!(
            "soak: {calls} calls, {failures} failures; too short for a warm-up of {} s",
            a.warmup
        );
        std::process::exit(i32::from(failures > 0));
    };
    let max_after = after.iter().map(|s| s.1).max().unwrap_or(warm);
    let last = after.last().map_or(warm, |s| s.1);
    // Least squares over the samples after warm-up, in MiB per hour.
    let count = after.len() as f64;
    let (mt, mr) = after
        .iter()
        .fold((0.0, 0.0), |(t, r), s| (t + s.0, r + s.1 as f64));
    let (mt, mr) = (mt / count, mr / count);
    let (num, den) = after.iter().fold((0.0, 0.0), |(num, den), s| {
        (
            num + (s.0 - mt) * (s.1 as f64 - mr),
            den + (s.0 - mt).powi(2),
        )
    });
    let slope = if den > 0.0 {
        num / den * 3600.0 / 1024.0
    } else {
        0.0
    };
    let bound = warm + (32 << 10);
    let pass = max_after <= bound && failures == 0;
    println!(
        "soak: {calls} calls in {:.0} s, {failures} failures, guard exit {code:?}; RSS after {} s warm-up {:.1} MiB, max {:.1} MiB, last {:.1} MiB, slope {slope:+.2} MiB/h; bound {:.1} MiB: {}",
        start.elapsed().as_secs_f64(),
        a.warmup,
        mib(warm),
        mib(max_after),
        mib(last),
        mib(bound),
        if pass { "PASS" } else { "FAIL" }
    );
    std::process::exit(i32::from(!pass));
}
