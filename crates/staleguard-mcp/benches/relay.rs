//! What the relay costs per message, against parsing and writing the same lines as JSON
//! values (the least a JSON-aware relay does), interleaved in one run. Inputs: every recorded
//! 0.0.41 MCP session replayed line by line, and one 2 MB snapshot result.
//! Run with `cargo bench -p staleguard-mcp --bench relay`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use staleguard::Config;
use staleguard_mcp::{McpConfig, Options, Relay};

use scenarios::SCENARIOS;

#[path = "../../staleguard/tests/support/scenarios.rs"]
mod scenarios;

const ROUNDS: usize = 31;

/// `(from_client, line)` of every recorded session.
fn sessions() -> Vec<(bool, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/pwmcp-0.0.41");
    let mut lines = Vec::new();
    for s in SCENARIOS {
        let text = std::fs::read_to_string(root.join(format!("{s}.mcp.jsonl"))).expect("fixture");
        for l in text.lines() {
            let record: Value = serde_json::from_str(l).expect("record");
            let msg = record["msg"].to_string().into_bytes();
            lines.push((record["dir"] == "client->server", msg));
        }
    }
    lines
}

/// A navigation to a page whose snapshot is 2 MB, and its result.
fn huge() -> Vec<(bool, Vec<u8>)> {
    let mut tree = String::new();
    let mut i = 0;
    while tree.len() < 2 * 1024 * 1024 {
        tree.push_str(&format!(
            "  - listitem [ref=e{}]:\n    - button \"Item {i} of the catalogue\" [ref=e{}]\n",
            2 * i,
            2 * i + 1
        ));
        i += 1;
    }
    let text = format!("### Page state\n- Page URL: http://a/big\n- Page Title: Big\n- Page Snapshot:\n```yaml\n- list [ref=e0]:\n{tree}```");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "browser_navigate", "arguments": {"url": "http://a/big"}}});
    let result =
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
    vec![
        (true, call.to_string().into_bytes()),
        (false, result.to_string().into_bytes()),
    ]
}

fn through_relay(lines: &[(bool, Vec<u8>)]) -> usize {
    let mut relay = Relay::new(Options::new(Config::default(), &McpConfig::default()));
    let mut out = 0;
    for (from_client, line) in lines {
        out += if *from_client {
            relay.from_client(line).len()
        } else {
            relay.from_server(line).len()
        };
    }
    out
}

fn as_values(lines: &[(bool, Vec<u8>)]) -> usize {
    lines
        .iter()
        .map(|(_, l)| {
            let value = serde_json::from_slice::<Value>(l);
            value.map_or(0, |v| serde_json::to_vec(&v).map_or(0, |w| w.len()))
        })
        .sum()
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn compare(name: &str, lines: &[(bool, Vec<u8>)]) {
    let (mut relay, mut values) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        std::hint::black_box(through_relay(lines));
        relay.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(as_values(lines));
        values.push(t.elapsed());
    }
    let (r, v) = (median(relay), median(values));
    let bytes: usize = lines.iter().map(|(_, l)| l.len()).sum();
    println!(
        "{name}: {} lines, {bytes} bytes: relay {:.2} ms, Value round trip {:.2} ms, ratio {:.2}",
        lines.len(),
        r.as_secs_f64() * 1e3,
        v.as_secs_f64() * 1e3,
        r.as_secs_f64() / v.as_secs_f64()
    );
}

/// `cargo bench -p staleguard-mcp --bench relay -- snapshot` runs only the cases whose name
/// contains `snapshot` (for a profile of one case).
fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if wanted("recorded 0.0.41 sessions") {
        compare("recorded 0.0.41 sessions", &sessions());
    }
    if wanted("2 MB snapshot") {
        compare("2 MB snapshot", &huge());
    }
}
