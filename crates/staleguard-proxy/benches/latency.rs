//! Added latency of the proxy for a 1 MB recorded request: the same requests sent directly
//! to a local scripted upstream and through the proxy, interleaved, in one run. Prints p50
//! and p99 of both, the difference, and requests per second through the proxy, for two
//! shapes of request: the recorded sessions repeated as they are, and repeated with each
//! copy's pages made distinct (one long session of different pages).
//! Run with `cargo bench -p staleguard-proxy --bench latency [-- --sessions N]`.
//!
//! `-- --processes BIN` measures the `staleguard proxy` binary at BIN instead, three of them
//! as processes of their own (as users run it), and `--pin` with it gives them CPU 1 and
//! this bench (client and scripted upstream, which stand for an agent and a remote model)
//! CPU 0, so that the proxies' figures are not the client's scheduling. `--keep-awake` with
//! them runs a busy loop at the lowest priority (`SCHED_IDLE`) on CPU 1: on a VM whose idle
//! vCPUs halt into the host (Firecracker's do), waking the proxies' CPU for a request took
//! up to 10 ms in about 4% of requests, whatever the proxy did; the loop keeps the vCPU
//! from halting and yields to the proxies at once. Linux only (`taskset`, `chrt`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use staleguard::Config;
use support::{proxy, upstream};

mod support;

const TARGET_BYTES: usize = 1024 * 1024;
const ROUNDS: usize = 200;

/// The recorded order and research sessions, repeated with fresh call IDs up to 1 MB. With
/// `distinct`, each copy's pages are made its own (their URLs name the copy), as in one long
/// session of different pages; without, the same page texts recur in every copy, each
/// weighed in a context of its own, which the memo keeps one of per page.
fn request(distinct: bool) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pwmcp-0.0.41");
    let mut messages = Vec::new();
    let mut round = 0;
    while serde_json::to_string(&messages).map_or(0, |s| s.len()) < TARGET_BYTES {
        // Four of the six recorded scenarios (the core's test support lists them all): the
        // figures in BENCHMARKS.md were measured on this request.
        for s in ["order", "research", "rerender", "tabs_iframe"] {
            let text =
                std::fs::read_to_string(root.join(format!("{s}.openai.json"))).expect("fixture");
            let v: Value = serde_json::from_str(&text).expect("JSON");
            for mut m in v["messages"].as_array().cloned().unwrap_or_default() {
                if let Some(id) = m["tool_call_id"].as_str() {
                    m["tool_call_id"] = format!("r{round}_{id}").into();
                }
                if let Some(calls) = m["tool_calls"].as_array_mut() {
                    for c in calls {
                        let id = format!("r{round}_{}", c["id"].as_str().unwrap_or(""));
                        c["id"] = id.into();
                    }
                }
                if let (true, Some(text)) = (distinct, m["content"].as_str()) {
                    let own = text.replace("127.0.0.1:8431/", &format!("127.0.0.1:8431/r{round}/"));
                    m["content"] = own.into();
                }
                messages.push(m);
            }
        }
        round += 1;
    }
    json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

/// `-- --sessions N`: sessions measured one after another, each with its own bytes, their
/// turns pooled (1 unless told: 200 turns give a p99 of their second slowest).
fn sessions() -> usize {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--sessions");
    at.and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1)
}

/// `-- --processes BIN`: the proxy binary to run as processes.
fn processes() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--processes")?;
    args.get(at + 1).cloned()
}

/// `--pin`, with `--processes`.
fn pinned() -> bool {
    processes().is_some() && std::env::args().any(|a| a == "--pin")
}

/// `--keep-awake`, with `--pin`.
fn kept_awake() -> bool {
    pinned() && std::env::args().any(|a| a == "--keep-awake")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The requests of a session, turn by turn: `body`, then each turn with one more browser
/// call and its result (a new page: the newest one, with a line of its own), as an agent's
/// next request repeats the previous one and adds what is new.
struct Turns {
    /// `{"messages":[...` up to the end of the last message of `body`.
    head: String,
    page: String,
}

impl Turns {
    /// The turns of `body`'s session, told apart from other sessions of the same body by
    /// `session` (a first user message of its own: its bytes, and so its checkpoints, are
    /// its own).
    fn of(body: &str, session: usize) -> Turns {
        let v: Value = serde_json::from_str(body).expect("JSON");
        let messages = v["messages"].as_array().expect("messages");
        let page = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_string();
        let mut messages = messages.clone();
        messages.insert(
            0,
            json!({"role": "user", "content": format!("Session {session}")}),
        );
        let list = serde_json::to_string(&messages).expect("JSON");
        Turns {
            head: format!("{{\"messages\":{}", &list[..list.len() - 1]),
            page,
        }
    }

    /// The request of turn `round`: `round` calls and results after the session's own.
    fn turn(&self, round: usize) -> String {
        let mut body = self.head.clone();
        for i in 0..round {
            let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("t{i}"),
                "type": "function", "function": {"name": "browser_snapshot", "arguments": "{}"}}]});
            let page = turn_page(&self.page, i);
            let result = json!({"role": "tool", "tool_call_id": format!("t{i}"), "content": page});
            body.push(',');
            body.push_str(&call.to_string());
            body.push(',');
            body.push_str(&result.to_string());
        }
        body.push_str("],\"model\":\"gpt-4.1\"}");
        body
    }
}

/// The page of turn `i`: the session's newest page and a line of its own after it, or with
/// `TURN_PAGES=distinct` inside its tree, so that each turn shows a page of its own (an
/// agent that acts, rather than one that asks for the same page again and again).
fn turn_page(page: &str, i: usize) -> String {
    let distinct = std::env::var("TURN_PAGES").is_ok_and(|v| v == "distinct");
    match page.rfind("\n```").filter(|_| distinct) {
        Some(end) => format!("{}\n- text: turn {i}{}", &page[..end], &page[end..]),
        None => format!("{page}\n- text: turn {i}"),
    }
}

/// Projection with the defaults, or with evidence and progress as `EVIDENCE` and
/// `PROGRESS` say (`on` or anything else), and the live page lean with `LIVE_PAGE=lean`
/// (from 1 KB with `LEAN_MIN_BYTES=1024`: the recorded pages are smaller than the default).
fn config() -> Config {
    let defaults = Config::default();
    let lean_min_bytes = std::env::var("LEAN_MIN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok());
    Config {
        browser_history_compaction: true,
        evidence_retention: std::env::var("EVIDENCE").ok().map(|v| v == "on"),
        progress_tracking: std::env::var("PROGRESS").ok().map(|v| v == "on"),
        live_page: match std::env::var("LIVE_PAGE").as_deref() {
            Ok("lean") => staleguard::LivePage::Lean,
            _ => defaults.live_page,
        },
        lean_min_bytes: lean_min_bytes.unwrap_or(defaults.lean_min_bytes),
        ..defaults
    }
}

async fn send(client: &reqwest::Client, addr: std::net::SocketAddr, body: String) -> Duration {
    let t = Instant::now();
    let r = client
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("send");
    let _ = r.bytes().await.expect("body");
    t.elapsed()
}

/// Requests per second with `n` concurrent clients sending `body`.
async fn throughput(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    body: &str,
    n: usize,
) -> f64 {
    let t = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, body) = (client.clone(), body.to_string());
            tokio::spawn(async move { send(&client, addr, body).await })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// `-- --profile-warm`: only what the warm proxy computes, in this process, for a profiler:
/// every turn of the distinct-pages request (`-- --profile-warm repeated`: of the repeated
/// sessions) projected with one memo; prints the times.
fn profile_warm() {
    let body = request(!std::env::args().any(|a| a == "repeated"));
    let memo = staleguard::Memo::new(staleguard::Memo::DEFAULT_BYTES);
    let session = Turns::of(&body, 0);
    let turns: Vec<String> = (0..ROUNDS).map(|r| session.turn(r)).collect();
    let options = || staleguard::Options {
        memo: Some(&memo),
        ..staleguard::Options::default()
    };
    let config = config();
    let mut times = Vec::new();
    for body in &turns {
        let t = Instant::now();
        let projected = staleguard::project(
            body,
            staleguard::RequestFormat::OpenAiChat,
            &config,
            options(),
        );
        std::hint::black_box(projected.map(|p| p.body.len()).ok());
        times.push(t.elapsed());
    }
    // The first turn fills the memo; the rest are warm.
    let mut warm = times.split_off(1);
    warm.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "projection in process, {} warm turns of {} bytes: p50 {:.2} ms, p99 {:.2} ms (first turn {:.2} ms)",
        warm.len(),
        body.len(),
        ms(percentile(&warm, 0.5)),
        ms(percentile(&warm, 0.99)),
        ms(times[0])
    );
}

fn main() {
    if std::env::args().any(|a| a == "--profile-warm") {
        return profile_warm();
    }
    let logged = tracing_subscriber::layer::SubscriberExt::with(
        tracing_subscriber::registry(),
        added::Logged,
    );
    tracing::subscriber::set_global_default(logged).expect("the bench's log subscriber");
    if pinned() {
        external::pin_self("0");
    }
    run();
}

/// What each proxy logs as its own `added_ms` (from a request's arrival until it went
/// upstream): the proxy's part of the added latency, without the client's and the
/// upstream's scheduling, which dominate the p99 of the difference on a noisy machine.
mod added {
    use std::fmt::Debug;
    use std::sync::Mutex;

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer};

    /// `added_ms` of each request line: resumed (warm), projected whole, and untouched
    /// (the hop alone).
    #[derive(Default)]
    pub(crate) struct Added {
        pub resumed: Vec<f64>,
        pub whole: Vec<f64>,
        pub untouched: Vec<f64>,
    }

    static SEEN: Mutex<Added> = Mutex::new(Added {
        resumed: Vec::new(),
        whole: Vec::new(),
        untouched: Vec::new(),
    });

    /// What was logged since the last call.
    pub(crate) fn take() -> Added {
        SEEN.lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// A proxy process's JSON log line (`--log-json`).
    pub(crate) fn record_json(line: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return;
        };
        let f = &v["fields"];
        let (Some("request"), Some(ms), Ok(mut seen)) =
            (f["message"].as_str(), f["added_ms"].as_f64(), SEEN.lock())
        else {
            return;
        };
        let resumed = f["resumed"].as_bool().unwrap_or(false);
        seen.record(f["outcome"].as_str().unwrap_or(""), resumed, ms);
    }

    impl Added {
        fn record(&mut self, outcome: &str, resumed: bool, ms: f64) {
            match (outcome, resumed) {
                ("projected", true) => self.resumed.push(ms),
                ("projected", false) => self.whole.push(ms),
                ("untouched", _) => self.untouched.push(ms),
                _ => {}
            }
        }
    }

    pub(crate) struct Logged;

    #[derive(Default)]
    struct Line {
        request: bool,
        outcome: String,
        resumed: bool,
        added_ms: Option<f64>,
    }

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
            match field.name() {
                "message" => self.request = format!("{value:?}") == "request",
                "outcome" => self.outcome = format!("{value:?}"),
                _ => {}
            }
        }

        fn record_bool(&mut self, field: &Field, value: bool) {
            if field.name() == "resumed" {
                self.resumed = value;
            }
        }

        fn record_f64(&mut self, field: &Field, value: f64) {
            if field.name() == "added_ms" {
                self.added_ms = Some(value);
            }
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Logged {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut line = Line::default();
            event.record(&mut line);
            let (true, Some(ms), Ok(mut seen)) = (line.request, line.added_ms, SEEN.lock()) else {
                return;
            };
            seen.record(&line.outcome, line.resumed, ms);
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn run() {
    let up_addr = upstream().await;
    let _children;
    let _awake = kept_awake().then(|| external::keep_awake("1"));
    println!(
        "proxies: {}",
        match (processes(), pinned(), kept_awake()) {
            (None, ..) =>
                "in this process, on its runtime (2 workers) with the client and the upstream"
                    .to_string(),
            (Some(bin), false, _) => format!("{bin} as processes of their own"),
            (Some(bin), true, awake) => format!(
                "{bin} as processes of their own on CPU 1, the client and the upstream on CPU 0{}",
                if awake { ", CPU 1 kept awake" } else { "" }
            ),
        }
    );
    let (warm, cold, hop) = if let Some(bin) = processes() {
        let cpus = pinned().then_some("1");
        let memo = staleguard::Memo::DEFAULT_BYTES;
        _children = [
            external::Proxy::spawn(&bin, up_addr, memo, true, cpus),
            external::Proxy::spawn(&bin, up_addr, 0, true, cpus),
            external::Proxy::spawn(&bin, up_addr, 0, false, cpus),
        ];
        (_children[0].addr, _children[1].addr, _children[2].addr)
    } else {
        let warm = proxy(up_addr, staleguard::Memo::DEFAULT_BYTES, config()).await;
        let cold = proxy(up_addr, 0, config()).await;
        // The hop alone: a proxy that forwards without projecting.
        let off = Config {
            browser_history_compaction: false,
            ..config()
        };
        (warm, cold, proxy(up_addr, 0, off).await)
    };
    let client = reqwest::Client::new();
    for (shape, distinct) in [("repeated sessions", false), ("distinct pages", true)] {
        let proxies = Proxies { warm, cold, hop };
        measure(&client, up_addr, proxies, &request(distinct), shape).await;
    }
}

/// The three proxies in front of one upstream.
#[derive(Clone, Copy)]
struct Proxies {
    warm: std::net::SocketAddr,
    cold: std::net::SocketAddr,
    hop: std::net::SocketAddr,
}

async fn measure(
    client: &reqwest::Client,
    up_addr: std::net::SocketAddr,
    Proxies { warm, cold, hop }: Proxies,
    body: &str,
    shape: &str,
) {
    let (mut direct, mut warmed, mut colds, mut hops) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut logged = added::Added::default();
    let mut session = Turns::of(body, 0);
    for k in 0..sessions() {
        session = Turns::of(body, k);
        for i in 0..10 {
            send(client, up_addr, session.turn(i)).await;
            send(client, warm, session.turn(i)).await;
            send(client, cold, session.turn(i)).await;
            send(client, hop, session.turn(i)).await;
        }
        // The warm-up's lines are dropped (a line is logged when its answer has ended, so
        // the last may still come among the measured ones: the counts say).
        added::take();
        for round in 10..10 + ROUNDS {
            // Each turn brings one result the warm proxy has not seen.
            let next = session.turn(round);
            direct.push(send(client, up_addr, next.clone()).await);
            warmed.push(send(client, warm, next.clone()).await);
            colds.push(send(client, cold, next.clone()).await);
            hops.push(send(client, hop, next).await);
        }
        let seen = added::take();
        logged.resumed.extend(seen.resumed);
        logged.whole.extend(seen.whole);
        logged.untouched.extend(seen.untouched);
    }
    for list in [&mut direct, &mut warmed, &mut colds, &mut hops] {
        list.sort();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} to {} byte requests of {shape}, {} sessions of {ROUNDS} turns, each with one more browser call and result; direct, through the proxy with its memo (warm), with the memo off (cold) and with projection off (hop), interleaved:",
        session.turn(10).len(),
        session.turn(10 + ROUNDS - 1).len(),
        sessions()
    );
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let d = percentile(&direct, p);
        let (w, c) = (percentile(&warmed, p), percentile(&colds, p));
        let h = percentile(&hops, p);
        println!(
            "  {name}: direct {:.2} ms; warm {:.2} ms (added {:.2} ms); cold {:.2} ms (added {:.2} ms); hop {:.2} ms (added {:.2} ms)",
            ms(d),
            ms(w),
            ms(w) - ms(d),
            ms(c),
            ms(c) - ms(d),
            ms(h),
            ms(h) - ms(d)
        );
    }
    for list in [
        &mut logged.resumed,
        &mut logged.whole,
        &mut logged.untouched,
    ] {
        list.sort_by(f64::total_cmp);
    }
    let at = |list: &[f64], p: f64| {
        let i = ((list.len() as f64 - 1.0) * p).round() as usize;
        list.get(i).copied().unwrap_or(f64::NAN)
    };
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        println!(
            "  {name} in the proxy (its own added_ms, arrival until upstream): resumed {:.2} ms (of {}), projected whole {:.2} ms (of {}), untouched {:.2} ms (of {})",
            at(&logged.resumed, p),
            logged.resumed.len(),
            at(&logged.whole, p),
            logged.whole.len(),
            at(&logged.untouched, p),
            logged.untouched.len()
        );
    }
    let n = 100;
    // The newest turn again: each warm proxy has seen it.
    let last = session.turn(10 + ROUNDS - 1);
    let rps_direct = throughput(client, up_addr, &last, n).await;
    let rps_warm = throughput(client, warm, &last, n).await;
    let rps_cold = throughput(client, cold, &last, n).await;
    println!(
        "  throughput, {n} concurrent 1 MB requests: direct {rps_direct:.0}/s, warm {rps_warm:.0}/s, cold {rps_cold:.0}/s"
    );
}

/// Proxies as processes of the real binary, their log lines read into [`added`].
mod external {
    use std::io::{BufRead, BufReader};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    pub(crate) struct Proxy {
        child: Child,
        pub addr: SocketAddr,
    }

    impl Proxy {
        /// `bin proxy` in front of `upstream` with a memo of `memo_bytes`, projecting when
        /// `compaction`, on `cpus` (a `taskset` list) when given.
        pub(crate) fn spawn(
            bin: &str,
            upstream: SocketAddr,
            memo_bytes: usize,
            compaction: bool,
            cpus: Option<&str>,
        ) -> Proxy {
            // A free port, handed to the proxy: another process could take it in between,
            // which a bench may risk.
            let addr = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port");
            let mut cmd = match cpus {
                Some(cpus) => {
                    let mut c = Command::new("taskset");
                    c.args(["-c", cpus, bin]);
                    c
                }
                None => Command::new(bin),
            };
            let (listen, up) = (addr.to_string(), format!("http://{upstream}"));
            let memo = memo_bytes.to_string();
            cmd.args(["proxy", "--listen", &listen, "--upstream", &up])
                .args(["--memo-bytes", &memo, "--log-json"])
                .env(
                    "BROWSER_HISTORY_COMPACTION",
                    if compaction { "on" } else { "off" },
                )
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("the proxy binary starts");
            let stderr = child.stderr.take().expect("its stderr");
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    super::added::record_json(&line);
                }
            });
            for _ in 0..400 {
                if TcpStream::connect(addr).is_ok() {
                    return Proxy { child, addr };
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("the proxy at {addr} did not start listening");
        }
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A busy loop at the lowest priority on `cpus`, until dropped.
    pub(crate) struct Awake(Child);

    pub(crate) fn keep_awake(cpus: &str) -> Awake {
        let spin = [
            "-i",
            "0",
            "taskset",
            "-c",
            cpus,
            "sh",
            "-c",
            "while :; do :; done",
        ];
        Awake(
            Command::new("chrt")
                .args(spin)
                .spawn()
                .expect("chrt and taskset"),
        )
    }

    impl Drop for Awake {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Every thread of this process on `cpus`.
    pub(crate) fn pin_self(cpus: &str) {
        let pid = std::process::id().to_string();
        let ok = Command::new("taskset")
            .args(["-a", "-p", "-c", cpus, &pid])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "taskset could not pin the bench to CPU {cpus}");
    }
}
