//! Small requests through the proxy against an upstream that writes each answer's head and
//! body in two writes, with Nagle's algorithm on (Python's `http.server` does): the proxy's
//! time over going direct, sequentially over kept-alive connections.
//!
//! ```sh
//! cargo bench -p staleguard-proxy --bench nagle [-- --requests 200] [--route-quickack]
//! ```
//!
//! `--route-quickack` (Linux, root or `CAP_NET_ADMIN`) measures once more, side by side in the
//! same run, with the loopback route asking for quick ACKs (`quickack 1`, the workaround that
//! `deploy/README.md` gave before the proxy re-armed `TCP_QUICKACK` itself), and puts the route
//! back as it was. With the route as installed, the bench's own client (reqwest, kept alive)
//! waits for the upstream's Nagle like any client would: "direct" then pays about 40 ms that
//! the proxy does not. See BENCHMARKS.md, "Proxy and Nagle".

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use staleguard::Config;
use staleguard_proxy::{Route, Routes, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An upstream in the manner of Python's `http.server`: keep-alive, Nagle on, the head and
/// the body of each answer written separately.
async fn two_write_upstream(nodelay: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let _ = socket.set_nodelay(nodelay);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request: its head, then Content-Length bytes of body.
                    let (head_end, length) = loop {
                        if let Some(end) = find(&buf, b"\r\n\r\n") {
                            break (end + 4, content_length(&buf[..end]));
                        }
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    while buf.len() < head_end + length {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + length);
                    let body = [b'x'; 100];
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    // The body a moment later, as a model's first tokens come.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if socket.write_all(&body).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

async fn proxy(upstream: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let settings = Settings {
        routes: Routes(vec![
            Route::everything(&format!("http://{upstream}")).expect("route")
        ]),
        fail_closed: false,
        max_body_bytes: 1 << 20,
        upstream_timeout: Duration::from_secs(30),
        memo_bytes: 0,
        metrics_path: None,
        shutdown_grace: Duration::from_secs(1),
        staleguard: Config::default(),
    };
    tokio::spawn(staleguard_proxy::serve(
        settings,
        listener,
        std::future::pending(),
    ));
    addr
}

/// Median milliseconds of `n` sequential small POSTs to `url` over one kept-alive connection.
async fn median_ms(client: &reqwest::Client, url: &str, n: usize) -> f64 {
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 5 {
        let started = Instant::now();
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .body(r#"{"model":"m","input":"hello"}"#)
            .send()
            .await
            .expect("send");
        assert!(response.status().is_success(), "{}", response.status());
        let body = response.bytes().await.expect("body");
        assert_eq!(body.len(), 100);
        if i >= 5 {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The loopback routes as Linux installs them: connections to 127.0.0.1 take the second
/// where it exists. Each with `quickack 1` appended asks for quick ACKs.
const LOOPBACK_ROUTES: &[&str] = &["127.0.0.0/8", "127.0.0.1"];

fn loopback_route(destination: &str) -> Vec<&str> {
    let route = [
        "route",
        "change",
        "local",
        destination,
        "dev",
        "lo",
        "proto",
        "kernel",
    ];
    let rest = ["scope", "host", "src", "127.0.0.1", "table", "local"];
    [&route[..], &rest[..]].concat()
}

/// Asks for quick ACKs on the loopback routes while alive; puts back those it changed when
/// dropped.
struct RouteQuickack(Vec<&'static str>);

impl RouteQuickack {
    fn on() -> RouteQuickack {
        let changed = LOOPBACK_ROUTES
            .iter()
            .copied()
            .filter(|d| ip(&[loopback_route(d), vec!["quickack", "1"]].concat()))
            .collect::<Vec<_>>();
        assert!(!changed.is_empty(), "no loopback route could be changed");
        RouteQuickack(changed)
    }
}

impl Drop for RouteQuickack {
    fn drop(&mut self) {
        for destination in &self.0 {
            assert!(
                ip(&loopback_route(destination)),
                "route {destination} not put back"
            );
        }
    }
}

fn ip(args: &[&str]) -> bool {
    let status = std::process::Command::new("ip").args(args).status();
    status.is_ok_and(|s| s.success())
}

fn main() {
    let mut requests = 200;
    let mut route_quickack = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--requests" => {
                requests = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--requests N");
            }
            "--route-quickack" => route_quickack = true,
            _ => {}
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("{requests} sequential POSTs, 100-byte answers written as head, then body 1 ms later; p50 in ms");
    println!("route           upstream      client connections   direct   proxy   difference");
    runtime.block_on(table("as installed", requests));
    if route_quickack {
        let _route = RouteQuickack::on();
        runtime.block_on(table("quickack 1", requests));
    }
}

/// One row per upstream and client connection.
async fn table(route: &str, requests: usize) {
    for nagle in [true, false] {
        let upstream = two_write_upstream(!nagle).await;
        let proxy = proxy(upstream).await;
        for kept in [true, false] {
            // Kept alive: one pooled connection, as an SDK keeps; else one per request, as curl.
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(if kept { 1 } else { 0 })
                .build()
                .expect("client");
            let direct = median_ms(&client, &format!("http://{upstream}/v1/x"), requests).await;
            let through = median_ms(&client, &format!("http://{proxy}/v1/x"), requests).await;
            println!(
                "{route:<15} {:<13} {:<20} {direct:>6.2} {through:>7.2} {:>+10.2}",
                if nagle { "Nagle on" } else { "TCP_NODELAY" },
                if kept {
                    "kept alive"
                } else {
                    "new per request"
                },
                through - direct
            );
        }
    }
}
