//! Projection time against body size on the hostile pages (issue 31), scaled 1x, 2x, 4x and
//! 8x from the Playwright MCP 0.0.41 recording (`fixtures/hostile/pwmcp-0.0.41/hostile_big`):
//!
//! - the long line: the 1 MB paragraph repeated, one line of 1 to 8 MB;
//! - the deep tree: 1,400 levels of nested groups, the deepest the server returns; a tree's
//!   text grows with the square of its depth (two spaces of indent a level), so the scaled
//!   trees are 1.41, 2 and 2.83 times as deep (1,980, 2,800 and 3,960 levels);
//! - the wide tree: 100,000 list items, then 200,000, 400,000 and 800,000.
//!
//! Each page is projected as an older page that collapses (a small newest page after it),
//! with the defaults (receipts, evidence, progress) and with evidence and progress off, and
//! as the live page under `live_page = "lean"`. Each time is the median of several runs, beside two baselines over
//! the same bytes, measured interleaved: a serde_json validation pass, and a copy of the
//! body read once more (memory traffic alone). The ratios show whether time grows with size
//! alone: a time ratio near the size ratio is linear; a step in both time and the copy, with
//! the ratio to the copy flat, is the body outgrowing the processor's cache, not the code.
//!
//! `cargo bench -p staleguard --bench hostile`; after `--`: `--runs N` (5 by default),
//! `--quick` (1x and 2x), `--scales 1,2,3` (any), `--only deep` (a page: `long`, `deep`,
//! `wide`). The recording is read with `gzip -dc`.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use staleguard::{Config, LivePage, Options, RequestFormat};

/// The recorded session, unpacked.
fn recording() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/hostile/pwmcp-0.0.41/hostile_big.openai.json.gz");
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("gzip -dc {}: {e}", path.display()));
    assert!(out.status.success(), "gzip -dc {}", path.display());
    serde_json::from_slice(&out.stdout).expect("a recorded body")
}

/// The recorded result of the call whose URL contains `page`.
fn result(rec: &Value, page: &str) -> String {
    let messages = rec["messages"].as_array().expect("messages");
    let at = messages
        .iter()
        .position(|m| {
            m["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .is_some_and(|a| a.contains(page))
        })
        .unwrap_or_else(|| panic!("no call to {page}"));
    messages[at + 1]["content"]
        .as_str()
        .expect("a text result")
        .to_string()
}

/// `[ref=eN]` in `line` as `[ref=e{N + by}]`.
fn shift_refs(line: &str, by: i64) -> String {
    match line.split_once("[ref=e") {
        Some((head, tail)) => {
            let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
            let n: i64 = digits.parse().expect("a ref number");
            format!("{head}[ref=e{}{}", n + by, &tail[digits.len()..])
        }
        None => line.to_string(),
    }
}

/// The long line's page with its paragraph `k` times as long.
fn long_line(page: &str, k: usize) -> String {
    page.lines()
        .map(|line| match line.split_once("[ref=e5]: \"") {
            Some((head, text)) => {
                let inner = text.strip_suffix('"').expect("a quoted paragraph");
                format!("{head}[ref=e5]: \"{}\"", vec![inner; k].join(" "))
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The deep tree's page at `depth` levels, as the server writes it: group `L` at an indent
/// of `2L`, its text at `2L + 2`, the deepest button inside the last group.
fn deep_tree(page: &str, depth: usize) -> String {
    let lines: Vec<&str> = page.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.trim_start().starts_with("- group \"Group 1\""))
        .expect("the first group");
    let button = lines
        .iter()
        .position(|l| l.trim_start().starts_with("- button \"Deepest button"))
        .expect("the deepest button");
    let recorded = (button - first) / 2;
    let mut out: Vec<String> = lines[..first].iter().map(|l| l.to_string()).collect();
    for level in 1..=depth {
        let pad = " ".repeat(2 * level);
        out.push(format!(
            "{pad}- group \"Group {level}\" [ref=e{}]:",
            6 + level
        ));
        out.push(format!("{pad}  - text: Level {level}"));
    }
    let pad = " ".repeat(2 * depth + 2);
    out.push(format!(
        "{pad}- button \"Deepest button (level {depth})\" [ref=e{}]",
        7 + depth
    ));
    let by = depth as i64 - recorded as i64;
    out.extend(lines[button + 1..].iter().map(|l| shift_refs(l, by)));
    out.join("\n")
}

/// The wide tree's page with `n` list items.
fn wide_tree(page: &str, n: usize) -> String {
    let lines: Vec<&str> = page.lines().collect();
    let items: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim_start().starts_with("- listitem [ref="))
        .collect();
    let (first, last) = (items[0], *items.last().expect("items"));
    let mut out: Vec<String> = lines[..first].iter().map(|l| l.to_string()).collect();
    for i in 1..=n {
        let text = match i {
            50_000 => "\"Item 50000: the spare key is in locker 4471.\"".to_string(),
            i => format!("Item {i}"),
        };
        out.push(format!("    - listitem [ref=e{}]: {text}", 5 + i));
    }
    let by = n as i64 - items.len() as i64;
    out.extend(lines[last + 1..].iter().map(|l| shift_refs(l, by)));
    out.join("\n")
}

/// A request whose history holds `page`: with `live`, as its newest result; otherwise
/// followed by the recorded home page, so that it collapses.
fn request(rec: &Value, page: &str, home: &str, live: bool) -> String {
    let call = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "browser_navigate", "arguments": "{\"url\":\"http://127.0.0.1:8461/\"}"}}]})
    };
    let mut messages = vec![rec["messages"][0].clone(), rec["messages"][1].clone()];
    messages.push(call("call_1"));
    messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": page}));
    if !live {
        messages.push(call("call_2"));
        messages.push(json!({"role": "tool", "tool_call_id": "call_2", "content": home}));
    }
    messages.push(json!({"role": "user", "content": "What did the page say about the warranty, the deepest button and item 50,000?"}));
    json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

fn project(body: &str, config: &Config) -> usize {
    staleguard::project(body, RequestFormat::OpenAiChat, config, Options::default())
        .map(|p| p.body.len())
        .expect("projects")
}

fn validate(body: &str) -> usize {
    serde_json::from_str::<serde::de::IgnoredAny>(body)
        .map(|_| body.len())
        .expect("valid JSON")
}

/// A copy of the body, then one pass over the copy: what any stage that reads the body and
/// its decoded text costs in memory traffic alone.
fn copy(body: &str) -> usize {
    let owned = black_box(body.to_string());
    memchr_count(owned.as_bytes())
}

fn memchr_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Median times of `project`, `validate` and `copy` over `runs` interleaved runs.
fn measure(body: &str, config: &Config, runs: usize) -> [Duration; 3] {
    let (mut p, mut v, mut c) = (Vec::new(), Vec::new(), Vec::new());
    black_box(project(body, config));
    for _ in 0..runs {
        let t = Instant::now();
        black_box(project(black_box(body), config));
        p.push(t.elapsed());
        let t = Instant::now();
        black_box(validate(black_box(body)));
        v.push(t.elapsed());
        let t = Instant::now();
        black_box(copy(black_box(body)));
        c.push(t.elapsed());
    }
    [median(p), median(v), median(c)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5);
    let option = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1).cloned()
    };
    let scales: Vec<usize> = match (option("--scales"), args.iter().any(|a| a == "--quick")) {
        (Some(list), _) => list.split(',').filter_map(|k| k.parse().ok()).collect(),
        (None, true) => vec![1, 2],
        (None, false) => vec![1, 2, 4, 8],
    };
    let only = option("--only");
    let rec = recording();
    let (long, deep, wide) = (
        result(&rec, "long-line.html"),
        result(&rec, "depth=1400"),
        result(&rec, "wide.html"),
    );
    let home = result(&rec, "index.html");
    let defaults = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    let lean = Config {
        live_page: LivePage::Lean,
        ..defaults.clone()
    };
    let bare = Config {
        evidence_retention: Some(false),
        progress_tracking: Some(false),
        ..defaults.clone()
    };
    type Scale = fn(&str, usize) -> String;
    let families: [(&str, &str, Scale); 3] = [
        ("long line", &long, |p, k| long_line(p, k)),
        ("deep tree", &deep, |p, k| {
            deep_tree(p, (1400.0 * (k as f64).sqrt()).round() as usize)
        }),
        ("wide tree", &wide, |p, k| wide_tree(p, 100_000 * k)),
    ];
    println!("median of {runs} runs; time/1x and size/1x against the 1x body of the same row kind");
    println!(
        "| page | as | scale | body MB | project ms | ms per MB | time/1x | size/1x | project / validate | project / copy |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, page, scale) in families {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let kinds = [
            ("collapsed", false, &defaults),
            ("collapsed, no evidence", false, &bare),
            ("live, lean", true, &lean),
        ];
        for (kind, live, config) in kinds {
            let mut first: Option<(f64, f64)> = None;
            for &k in &scales {
                let body = request(&rec, &scale(page, k), &home, live);
                let [p, v, c] = measure(&body, config, runs);
                let (ms, mb) = (p.as_secs_f64() * 1e3, body.len() as f64 / 1e6);
                let (t1, s1) = *first.get_or_insert((ms, mb));
                println!(
                    "| {name} | {kind} | {k}x | {mb:.1} | {ms:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} |",
                    ms / mb,
                    ms / t1,
                    mb / s1,
                    p.as_secs_f64() / v.as_secs_f64(),
                    p.as_secs_f64() / c.as_secs_f64()
                );
            }
        }
    }
}
