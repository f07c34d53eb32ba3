//! Soak: the memory of the proxy under a steady stream of varied sessions, run by hand
//! (not in CI). A scripted upstream and the proxy (compaction, evidence and progress on, a
//! memo of `--memo-bytes`) run in this process; a few senders replay every recorded session
//! of `fixtures/{pwmcp-0.0.41,pwmcp-0.0.83,cdmcp-1.11.0}` (OpenAI and Anthropic),
//! turn by turn, at `--rate` requests per second for `--seconds`. Every cycle over the
//! recordings appends its number to every tool result, so the memo keeps meeting new
//! results and has to evict once it is full. Every 30 s it prints the requests done, the
//! errors and the resident memory of the process (VmRSS); at the end, RSS after warm-up,
//! its max and last, and whether it stayed within warm-up RSS plus the memo bound.
//!
//! `cargo bench -p staleguard-proxy --bench soak -- [--seconds 600] [--rate 20]
//! [--senders 4] [--memo-bytes 67108864] [--warmup 60]`
//!
//! Exits 1 when a request fails (not 2xx), a body was passed through unprojected, or RSS
//! went over the bound.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use staleguard::{Config, RequestFormat};
use support::{proxy, upstream};

mod support;

const DIRS: [&str; 3] = ["pwmcp-0.0.41", "pwmcp-0.0.83", "cdmcp-1.11.0"];
const REPORT_EVERY: Duration = Duration::from_secs(30);
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
const USAGE: &str = "usage: soak [--seconds N (600)] [--rate R per second (20)] [--senders N (4)] [--memo-bytes N (67108864)] [--warmup N seconds (60)]";
/// How many failed requests are shown as they happen; all are counted.
const SHOWN_ERRORS: u64 = 5;

struct Args {
    seconds: u64,
    rate: f64,
    senders: usize,
    memo_bytes: usize,
    warmup: u64,
}

fn args() -> Args {
    let mut a = Args {
        seconds: 600,
        rate: 20.0,
        senders: 4,
        memo_bytes: 64 << 20,
        warmup: 60,
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
            "--senders" => a.senders = parsed(&name, value()),
            "--memo-bytes" => a.memo_bytes = parsed(&name, value()),
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
    if a.rate <= 0.0 || a.senders == 0 || a.seconds == 0 {
        eprintln!("soak: --seconds, --rate and --senders must be above 0\n{USAGE}");
        std::process::exit(2)
    }
    a
}

/// One recorded session: its body and where it goes.
struct Recording {
    name: String,
    path: &'static str,
    body: Value,
}

impl Recording {
    fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map_or(&[], |m| m.as_slice())
    }
}

fn recordings() -> Vec<Recording> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut out = Vec::new();
    for dir in DIRS {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("soak: cannot read {}: {e}", root.join(dir).display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let path = if name.ends_with(".openai.json") {
                "/v1/chat/completions"
            } else if name.ends_with(".anthropic.json") {
                "/v1/messages"
            } else {
                continue;
            };
            let text = std::fs::read_to_string(&file).expect("fixture");
            let body: Value = serde_json::from_str(&text).expect("fixture JSON");
            out.push(Recording {
                name: format!("{dir}/{name}"),
                path,
                body,
            });
        }
    }
    assert!(
        !out.is_empty(),
        "soak: no recordings under {}",
        root.display()
    );
    out
}

fn tag(cycle: u64) -> String {
    format!("\n[soak cycle {cycle}]")
}

/// The tool result texts of a message: an OpenAI `tool` message's content, the `content`
/// of every Anthropic `tool_result` block. A text given as parts is its last text part.
fn results(message: &mut Value) -> Vec<&mut String> {
    fn text(content: &mut Value) -> Option<&mut String> {
        match content {
            Value::String(s) => Some(s),
            Value::Array(parts) => parts
                .iter_mut()
                .rev()
                .find(|p| p["type"] == "text")
                .and_then(|p| match p.get_mut("text") {
                    Some(Value::String(s)) => Some(s),
                    _ => None,
                }),
            _ => None,
        }
    }
    if message["role"] == "tool" {
        return message
            .get_mut("content")
            .and_then(text)
            .into_iter()
            .collect();
    }
    match message.get_mut("content") {
        Some(Value::Array(blocks)) => blocks
            .iter_mut()
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| b.get_mut("content").and_then(text))
            .collect(),
        _ => Vec::new(),
    }
}

/// `body` with its first `k` messages, every tool result of them marked with `cycle`.
fn request(body: &Value, k: usize, cycle: u64) -> Vec<u8> {
    let tag = tag(cycle);
    let mut out = serde_json::Map::new();
    for (key, value) in body.as_object().expect("request object") {
        if key == "messages" {
            let mut messages = value.as_array().expect("messages")[..k].to_vec();
            for m in &mut messages {
                for text in results(m) {
                    text.push_str(&tag);
                }
            }
            out.insert(key.clone(), Value::Array(messages));
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    serde_json::to_vec(&out).expect("JSON")
}

/// One request of a cycle: a recording and how many of its messages.
struct Turn {
    recording: usize,
    messages: usize,
    /// Tool result texts this turn sends for the first time in its cycle (texts shared by
    /// the OpenAI and Anthropic copies of a session count once), and their bytes.
    new_texts: u64,
    new_bytes: u64,
}

fn cycle_plan(recordings: &[Recording]) -> Vec<Turn> {
    let mut seen = HashSet::new();
    let mut plan = Vec::new();
    for (r, rec) in recordings.iter().enumerate() {
        for (i, message) in rec.messages().iter().enumerate() {
            let mut m = message.clone();
            let (mut new_texts, mut new_bytes) = (0, 0);
            for text in results(&mut m) {
                if seen.insert(text.clone()) {
                    new_texts += 1;
                    new_bytes += text.len() as u64;
                }
            }
            plan.push(Turn {
                recording: r,
                messages: i + 1,
                new_texts,
                new_bytes,
            });
        }
    }
    plan
}

/// The memo's estimate of what the readings of `texts` texts of `bytes` in all hold
/// ([`staleguard::internal::memo::weight_of`], a cost per entry and one per text byte).
fn memo_weight(texts: u64, bytes: u64) -> u64 {
    use staleguard::internal::memo::weight_of;
    let (entry, per_byte) = (weight_of(0), weight_of(1) - weight_of(0));
    entry * texts + per_byte * bytes
}

#[derive(Default)]
struct Stats {
    done: AtomicU64,
    errors: AtomicU64,
    projected: AtomicU64,
    passthrough: AtomicU64,
    collapsed: AtomicU64,
    /// Upper bound of the weight offered to the memo: every distinct tool result text sent,
    /// weighed by the memo's rule (only browser results are kept).
    intake: AtomicU64,
}

fn config() -> Config {
    Config {
        browser_history_compaction: true,
        evidence_retention: Some(true),
        progress_tracking: Some(true),
        ..Config::default()
    }
}

/// Marking must not change what the proxy does: the whole of every recording collapses as
/// many results with the cycle tag as without.
fn check_marking(recordings: &[Recording]) {
    let config = config();
    let (mut total, mut changed) = (0, 0);
    for rec in recordings {
        let plain = rec.body.to_string();
        let marked = String::from_utf8(request(&rec.body, rec.messages().len(), 1)).expect("UTF-8");
        let collapsed = |body: &str| {
            staleguard::project(
                body,
                RequestFormat::Auto,
                &config,
                staleguard::Options::default(),
            )
            .map(|p| p.collapsed())
            .unwrap_or_else(|e| panic!("soak: {} does not project: {e}", rec.name))
        };
        let (a, b) = (collapsed(&plain), collapsed(&marked));
        if a != b {
            eprintln!(
                "soak: WARNING: {}: the cycle tag changes the projection ({a} collapsed without it, {b} with it)",
                rec.name
            );
            changed += 1;
        }
        total += b;
    }
    if changed == 0 {
        println!("marking check: the whole recordings collapse {total} results with the cycle tag, as many as without it");
    }
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

fn mib_of_kib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

struct Sender {
    client: reqwest::Client,
    proxy: std::net::SocketAddr,
    recordings: Arc<Vec<Recording>>,
    plan: Arc<Vec<Turn>>,
    next: Arc<AtomicU64>,
    stats: Arc<Stats>,
}

impl Sender {
    /// Sends the next request of the plan every `period`, from `start` until `end`.
    async fn run(self, start: tokio::time::Instant, period: Duration, end: Instant) {
        let mut ticker = tokio::time::interval_at(start, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if Instant::now() >= end {
                return;
            }
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let cycle = i / self.plan.len() as u64;
            let turn = &self.plan[(i % self.plan.len() as u64) as usize];
            let rec = &self.recordings[turn.recording];
            let tag_bytes = tag(cycle).len() as u64;
            self.stats.intake.fetch_add(
                memo_weight(turn.new_texts, turn.new_bytes + turn.new_texts * tag_bytes),
                Ordering::Relaxed,
            );
            let body = request(&rec.body, turn.messages, cycle);
            self.send(i, rec, turn.messages, body).await;
        }
    }

    async fn send(&self, i: u64, rec: &Recording, k: usize, body: Vec<u8>) {
        let stats = &self.stats;
        let failed = |what: String| {
            let n = stats.errors.fetch_add(1, Ordering::Relaxed) + 1;
            if n <= SHOWN_ERRORS {
                eprintln!(
                    "soak: ERROR: request {i} ({}, {k} messages): {what}",
                    rec.name
                );
            }
        };
        let sent = self
            .client
            .post(format!("http://{}{}", self.proxy, rec.path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return failed(format!("no response: {e}")),
        };
        let status = response.status();
        let outcome = response
            .headers()
            .get("x-staleguard")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let answer = response.bytes().await;
        stats.done.fetch_add(1, Ordering::Relaxed);
        match answer {
            Ok(b) if !status.is_success() => {
                let text = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
                return failed(format!("{status}: {text}"));
            }
            Err(e) => return failed(format!("{status}, body not read: {e}")),
            Ok(_) => {}
        }
        if outcome.starts_with("projected") {
            stats.projected.fetch_add(1, Ordering::Relaxed);
            let collapsed = outcome
                .split(';')
                .find_map(|p| p.trim().strip_prefix("collapsed="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            stats.collapsed.fetch_add(collapsed, Ordering::Relaxed);
        } else {
            let n = stats.passthrough.fetch_add(1, Ordering::Relaxed) + 1;
            if n <= SHOWN_ERRORS {
                eprintln!(
                    "soak: ERROR: request {i} ({}, {k} messages) not projected: x-staleguard: {outcome:?}",
                    rec.name
                );
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();
    let recordings = recordings();
    check_marking(&recordings);
    let plan = cycle_plan(&recordings);
    let per_cycle_weight = memo_weight(
        plan.iter().map(|t| t.new_texts).sum(),
        plan.iter().map(|t| t.new_bytes).sum(),
    );
    let up = upstream().await;
    let proxy = proxy(up, args.memo_bytes, config()).await;
    let memo = args.memo_bytes as u64;
    println!(
        "soak: {} recordings ({}), {} requests per cycle (every session turn by turn), each cycle's tool results made new; memo intake per cycle <= {:.1} MiB (distinct result texts x the memo's weight rule, staleguard::internal::memo::weight_of)",
        recordings.len(),
        DIRS.join(", "),
        plan.len(),
        mib(per_cycle_weight)
    );
    println!(
        "soak: proxy in this process (compaction, evidence and progress on; memo bound {memo} bytes = {:.1} MiB) with its scripted upstream and the senders: RSS is the whole process (VmRSS of /proc/self/status)",
        mib(memo)
    );
    println!(
        "soak: {} s at {} requests/s from {} senders; warm-up {} s; RSS before the first request {:.1} MiB",
        args.seconds,
        args.rate,
        args.senders,
        args.warmup,
        mib_of_kib(rss_kib())
    );

    let recordings = Arc::new(recordings);
    let plan = Arc::new(plan);
    let stats = Arc::new(Stats::default());
    let next = Arc::new(AtomicU64::new(0));
    let client = reqwest::Client::new();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(args.seconds);
    // Each sender sends every `senders / rate` seconds, the senders evenly staggered.
    let period = Duration::from_secs_f64(args.senders as f64 / args.rate);
    let start = tokio::time::Instant::now();
    let senders: Vec<_> = (0..args.senders)
        .map(|s| {
            let sender = Sender {
                client: client.clone(),
                proxy,
                recordings: recordings.clone(),
                plan: plan.clone(),
                next: next.clone(),
                stats: stats.clone(),
            };
            let offset = Duration::from_secs_f64(s as f64 / args.rate);
            tokio::spawn(sender.run(start + offset, period, end))
        })
        .collect();

    let report = |elapsed: Duration, rss: u64| {
        let done = stats.done.load(Ordering::Relaxed);
        let intake = stats.intake.load(Ordering::Relaxed);
        println!(
            "{:>6.0} s  requests {done:>6} ({:>5.1}/s)  errors {}  not projected {}  RSS {:>7.1} MiB  memo bound {:.1} MiB  memo intake <= {:.1} MiB{}",
            elapsed.as_secs_f64(),
            done as f64 / elapsed.as_secs_f64(),
            stats.errors.load(Ordering::Relaxed),
            stats.passthrough.load(Ordering::Relaxed),
            mib_of_kib(rss),
            mib(memo),
            mib(intake),
            if intake > memo { " (over the bound: evicting)" } else { "" }
        );
    };

    // Samples every second (for the max); a line every 30 s.
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    let mut next_report = REPORT_EVERY;
    let mut ticker = tokio::time::interval(SAMPLE_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let elapsed = t0.elapsed();
        if Instant::now() >= end {
            break;
        }
        let rss = rss_kib();
        samples.push((elapsed, rss));
        if elapsed >= next_report {
            report(elapsed, rss);
            next_report += REPORT_EVERY;
        }
    }
    for s in senders {
        s.await.expect("sender");
    }
    let elapsed = t0.elapsed();
    let last = rss_kib();
    samples.push((elapsed, last));
    report(elapsed, last);

    let done = stats.done.load(Ordering::Relaxed);
    let errors = stats.errors.load(Ordering::Relaxed);
    let passthrough = stats.passthrough.load(Ordering::Relaxed);
    let intake = stats.intake.load(Ordering::Relaxed);
    println!();
    println!(
        "done: {done} requests in {:.1} s ({:.1}/s, {} full cycles), errors (not 2xx) {errors}, projected {}, not projected {passthrough}, results collapsed {}",
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64(),
        done / plan.len() as u64,
        stats.projected.load(Ordering::Relaxed),
        stats.collapsed.load(Ordering::Relaxed)
    );
    println!(
        "memo: bound {:.1} MiB; intake <= {:.1} MiB: {}",
        mib(memo),
        mib(intake),
        if intake > memo {
            "over the bound, so the memo has evicted"
        } else {
            "under the bound, so eviction is not certain (longer run or smaller --memo-bytes)"
        }
    );
    let (max_at, max) = samples
        .iter()
        .copied()
        .max_by_key(|&(_, rss)| rss)
        .expect("a sample");
    let peak = status_kib("VmHWM:");
    let warm = samples
        .iter()
        .copied()
        .find(|&(at, _)| at >= Duration::from_secs(args.warmup));
    let mut failed = false;
    match warm {
        Some((at, warm)) => {
            println!(
                "RSS of this process (proxy, upstream and senders): warm-up {:.1} MiB (at {:.0} s), max {:.1} MiB (at {:.0} s), last {:.1} MiB, max - warm-up {:+.1} MiB (kernel high-water mark VmHWM {:.1} MiB)",
                mib_of_kib(warm),
                at.as_secs_f64(),
                mib_of_kib(max),
                max_at.as_secs_f64(),
                mib_of_kib(last),
                mib_of_kib(max) - mib_of_kib(warm),
                mib_of_kib(peak)
            );
            let limit = warm * 1024 + memo;
            if max * 1024 <= limit {
                println!(
                    "verdict: PASS: RSS stayed within warm-up RSS + memo bound (max {:.1} MiB <= {:.1} + {:.1} = {:.1} MiB)",
                    mib_of_kib(max),
                    mib_of_kib(warm),
                    mib(memo),
                    mib(limit)
                );
            } else {
                println!(
                    "verdict: FAIL: RSS went over warm-up RSS + memo bound (max {:.1} MiB > {:.1} + {:.1} = {:.1} MiB)",
                    mib_of_kib(max),
                    mib_of_kib(warm),
                    mib(memo),
                    mib(limit)
                );
                failed = true;
            }
        }
        None => println!(
            "RSS of this process: max {:.1} MiB, last {:.1} MiB; verdict: none, the run ended before the {} s warm-up",
            mib_of_kib(max),
            mib_of_kib(last),
            args.warmup
        ),
    }
    if errors > 0 {
        eprintln!(
            "soak: FAIL: {errors} requests failed (not 2xx or no answer); there must be none"
        );
        failed = true;
    }
    if passthrough > 0 {
        eprintln!("soak: FAIL: {passthrough} requests went through unprojected");
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
}
