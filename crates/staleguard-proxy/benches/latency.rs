//! Added latency of the proxy for a 1 MB recorded request: the same requests sent directly
//! to a local scripted upstream and through the proxy, interleaved, in one run. Prints p50
//! and p99 of both, the difference, and requests per second through the proxy.
//! Run with `cargo bench -p staleguard-proxy --bench latency`.

use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::Router;
use serde_json::{json, Value};
use staleguard::Config;
use staleguard_proxy::{Route, Routes, Settings};

const TARGET_BYTES: usize = 1024 * 1024;
const ROUNDS: usize = 200;

/// The recorded order and research sessions, repeated with fresh call IDs up to 1 MB.
fn request() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/pwmcp-0.0.41");
    let mut messages = Vec::new();
    let mut round = 0;
    while serde_json::to_string(&messages).map_or(0, |s| s.len()) < TARGET_BYTES {
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
                messages.push(m);
            }
        }
        round += 1;
    }
    json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let up_addr = upstream.local_addr().expect("addr");
    let scripted = Router::new().fallback(|body: Bytes| async move {
        format!(r#"{{"id":"chatcmpl-1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"received {} bytes"}},"finish_reason":"stop"}}]}}"#, body.len())
    });
    tokio::spawn(async move { axum::serve(upstream, scripted).await });
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let proxy_addr = proxy.local_addr().expect("addr");
    let settings = Settings {
        routes: Routes(vec![
            Route::everything(&format!("http://{up_addr}")).expect("route")
        ]),
        fail_closed: false,
        max_body_bytes: 64 << 20,
        upstream_timeout: Duration::from_secs(30),
        memo_bytes: std::env::var("MEMO_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(staleguard::memo::DEFAULT_MEMO_BYTES),
        staleguard: Config {
            browser_history_compaction: true,
            evidence_retention: std::env::var("EVIDENCE").ok().map(|v| v == "on"),
            progress_tracking: std::env::var("PROGRESS").ok().map(|v| v == "on"),
            ..Config::default()
        },
    };
    tokio::spawn(staleguard_proxy::serve(
        settings,
        proxy,
        std::future::pending(),
    ));
    let body = request();
    let client = reqwest::Client::new();
    let send = |addr: std::net::SocketAddr| {
        let (client, body) = (client.clone(), body.clone());
        async move {
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
    };
    for _ in 0..10 {
        send(up_addr).await;
        send(proxy_addr).await;
    }
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        direct.push(send(up_addr).await);
        proxied.push(send(proxy_addr).await);
    }
    direct.sort();
    proxied.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} byte request, {ROUNDS} rounds, direct and through the proxy interleaved:",
        body.len()
    );
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (d, x) = (percentile(&direct, p), percentile(&proxied, p));
        println!(
            "  {name}: direct {:.2} ms, proxy {:.2} ms, added {:.2} ms",
            ms(d),
            ms(x),
            ms(x) - ms(d)
        );
    }
    let t = Instant::now();
    let n = 100;
    let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(send(proxy_addr))).collect();
    for task in tasks {
        task.await.expect("task");
    }
    println!(
        "  throughput: {:.0} requests/s through the proxy ({n} concurrent 1 MB requests)",
        n as f64 / t.elapsed().as_secs_f64()
    );
}
