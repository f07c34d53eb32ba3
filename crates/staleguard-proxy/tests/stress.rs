//! The proxy under stress, in process: upstreams that redirect, stall, half-close or stream
//! to a client that goes away; bodies that lie about their encoding or are over the limit;
//! health checks; shutdown with a stream in flight.
//!
//! Every upstream here is a raw TCP server scripted per test, so each misbehaviour is exact.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use staleguard::Config;
use staleguard_proxy::{Route, Routes, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CHAT: &str = "/v1/chat/completions";
const SMALL: &str = r#"{"model":"m","messages":[{"role":"user","content":"hello"}]}"#;

/// What the scripted upstream saw: each request's head and body.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<(String, Vec<u8>)>>,
}

impl Seen {
    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// Reads one request (head, then `Content-Length` bytes of body); `None` at EOF.
async fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    Some((head, body))
}

/// A scripted upstream: for every connection, reads one request, records it and hands the
/// socket to `answer`.
async fn upstream<F, Fut>(answer: F) -> (SocketAddr, Arc<Seen>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let recorded = Arc::clone(&seen);
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = Arc::clone(&recorded);
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                if let Some(request) = read_request(&mut socket).await {
                    seen.requests.lock().unwrap().push(request);
                    answer(socket).await;
                }
            });
        }
    });
    (addr, seen)
}

fn settings(upstream: SocketAddr) -> Settings {
    Settings {
        routes: Routes(vec![
            Route::everything(&format!("http://{upstream}")).unwrap()
        ]),
        fail_closed: false,
        max_body_bytes: 1 << 20,
        upstream_timeout: Duration::from_secs(2),
        memo_bytes: 0,
        metrics_path: None,
        shutdown_grace: Duration::from_secs(2),
        staleguard: Config {
            browser_history_compaction: true,
            ..Config::default()
        },
    }
}

struct Proxy {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn proxy(settings: Settings) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(staleguard_proxy::serve(settings, listener, async move {
        let _ = stopped.await;
    }));
    Proxy {
        addr,
        stop: Some(stop),
        served,
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Sends `request` raw and reads until the proxy closes, or `limit` passes. Returns what came
/// and how long it took.
async fn raw(addr: SocketAddr, request: &[u8], limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut socket = TcpStream::connect(addr).await.unwrap();
    // A refused write (the proxy answered and closed early) still leaves its answer to read.
    let _ = socket.write_all(request).await;
    let mut got = Vec::new();
    let mut chunk = [0u8; 8192];
    let _ = tokio::time::timeout(limit, async {
        loop {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    (got, started.elapsed())
}

fn post(path: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// An upstream answering `200` with a small JSON body.
async fn ok_upstream() -> (SocketAddr, Arc<Seen>) {
    upstream(|mut s| async move {
        let body = r#"{"ok":true}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = s.write_all(answer.as_bytes()).await;
    })
    .await
}

// ------------------------------------------------------------------------------------------
// Redirects

/// A 3xx reaches the client as the upstream gave it; the body is never sent to `Location`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_not_followed() {
    let (elsewhere, elsewhere_seen) = ok_upstream().await;
    let location = format!("http://{elsewhere}/v1/chat/completions");
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        let to = location.clone();
        let (up, seen) = upstream(move |mut s| {
            let answer =
                format!("HTTP/1.1 {status}\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n");
            async move {
                let _ = s.write_all(answer.as_bytes()).await;
            }
        })
        .await;
        let proxy = proxy(settings(up)).await;
        let response = client()
            .post(format!("http://{}{CHAT}", proxy.addr))
            .header("authorization", "Bearer sk-secret")
            .body(SMALL)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_str(), &status[..3], "{status}");
        assert_eq!(
            response.headers()["location"].to_str().unwrap(),
            location,
            "{status}"
        );
        assert_eq!(seen.count(), 1, "{status}");
    }
    assert_eq!(elsewhere_seen.count(), 0, "the proxy followed a redirect");
}

// ------------------------------------------------------------------------------------------
// The client goes away; the upstream stalls or breaks off

/// An upstream that streams an SSE event every 50 ms until its connection closes, and says
/// when that was.
async fn slow_stream(closed: Arc<Mutex<Option<Instant>>>) -> (SocketAddr, Arc<Seen>) {
    upstream(move |mut s| {
        let closed = Arc::clone(&closed);
        async move {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_ok() {
                let (mut read, mut write) = s.split();
                let mut buf = [0u8; 64];
                let writing = async {
                    for i in 0.. {
                        let event = format!("data: {{\"n\":{i}}}\n\n");
                        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                        if write.write_all(chunk.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                };
                // Either the write fails or the read sees EOF: the proxy closed.
                tokio::select! {
                    () = writing => {}
                    _ = read.read(&mut buf) => {}
                }
            }
            *closed.lock().unwrap() = Some(Instant::now());
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_stream_cancels_the_upstream_request() {
    let closed = Arc::new(Mutex::new(None));
    let (up, seen) = slow_stream(Arc::clone(&closed)).await;
    let proxy = proxy(settings(up)).await;
    for round in 0..3 {
        *closed.lock().unwrap() = None;
        let mut socket = TcpStream::connect(proxy.addr).await.unwrap();
        socket
            .write_all(&post(CHAT, "", SMALL.as_bytes()))
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("\"n\":2") {
            let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut chunk))
                .await
                .expect("the stream goes on")
                .unwrap();
            assert!(n > 0, "the proxy ended the stream early");
            got.extend_from_slice(&chunk[..n]);
        }
        let gone = Instant::now();
        drop(socket);
        let deadline = gone + Duration::from_secs(3);
        let seen_close = loop {
            if let Some(at) = *closed.lock().unwrap() {
                break at;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the upstream connection was still open 3 s after the client went away"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let after = seen_close.saturating_duration_since(gone);
        assert!(after < Duration::from_secs(1), "round {round}: {after:?}");
    }
    assert_eq!(seen.count(), 3);
}

/// The head and part of the body, then `shutdown` of the write side (or silence): the client
/// gets every byte sent, then the end of the connection, and never waits past the upstream
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_breaks_off_ends_the_answer_cleanly() {
    enum Then {
        HalfClose,
        Silence,
    }
    for (framing, then) in [
        ("Content-Length: 1000", Then::HalfClose),
        ("Transfer-Encoding: chunked", Then::HalfClose),
        ("Content-Length: 1000", Then::Silence),
        ("Transfer-Encoding: chunked", Then::Silence),
    ] {
        let half_close = matches!(then, Then::HalfClose);
        let (up, _) = upstream(move |mut s| async move {
            let chunked = framing.starts_with("Transfer");
            let part = if chunked {
                "a\r\ndata: 1\n\n\r\n"
            } else {
                "data: 1\n\n"
            };
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}\r\n\r\n{part}"
            );
            let _ = s.write_all(answer.as_bytes()).await;
            if half_close {
                let _ = s.shutdown().await;
            }
            // Keep the read side open well past the proxy's timeout.
            tokio::time::sleep(Duration::from_secs(10)).await;
        })
        .await;
        let mut settings = settings(up);
        settings.upstream_timeout = Duration::from_secs(1);
        let proxy = proxy(settings).await;
        let (got, took) = raw(
            proxy.addr,
            &post(CHAT, "", SMALL.as_bytes()),
            Duration::from_secs(8),
        )
        .await;
        let text = String::from_utf8_lossy(&got);
        let what = format!("{framing}, half-close {half_close}");
        assert!(text.starts_with("HTTP/1.1 200"), "{what}: {text}");
        assert!(
            text.contains("data: 1"),
            "{what}: the bytes sent were lost: {text}"
        );
        // Never the clean end of a whole answer: the client can tell it was cut.
        assert!(
            !text.ends_with("0\r\n\r\n"),
            "{what}: a cut answer ended as if whole: {text}"
        );
        assert!(
            took < Duration::from_secs(4),
            "{what}: the client waited {took:?}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Bodies

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn status_of(answer: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(answer);
    text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn body_of(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

fn header_of(answer: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(answer);
    let (head, _) = text.split_once("\r\n\r\n")?;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// Bodies whose `Content-Encoding` lies go upstream as they came (fail-open) or get a JSON
/// 400 (fail-closed); a bomb gets 413 naming the limit. Never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_lie_about_their_encoding() {
    let (up, seen) = ok_upstream().await;
    let plain_as_gzip = SMALL.as_bytes().to_vec();
    let whole = zstd::encode_all(SMALL.as_bytes(), 3).unwrap();
    let truncated_zstd = whole[..whole.len() - 4].to_vec();
    let whole_gzip = gzip(SMALL.as_bytes());
    let truncated_gzip = whole_gzip[..whole_gzip.len() - 6].to_vec();
    let liars = [
        ("gzip", plain_as_gzip),
        ("zstd", truncated_zstd),
        ("gzip", truncated_gzip),
        ("br", SMALL.as_bytes().to_vec()),
    ];
    for fail_closed in [false, true] {
        let mut s = settings(up);
        s.fail_closed = fail_closed;
        let proxy = proxy(s).await;
        for (encoding, body) in &liars {
            let before = seen.count();
            let extra = format!("Content-Encoding: {encoding}\r\n");
            let (got, _) = raw(
                proxy.addr,
                &post(CHAT, &extra, body),
                Duration::from_secs(5),
            )
            .await;
            let what = format!(
                "{encoding} ({} bytes), fail-closed {fail_closed}",
                body.len()
            );
            if fail_closed {
                assert_eq!(
                    status_of(&got),
                    400,
                    "{what}: {}",
                    String::from_utf8_lossy(&got)
                );
                let error: serde_json::Value =
                    serde_json::from_str(&body_of(&got)).expect("JSON error");
                assert_eq!(
                    error["error"]["type"], "undecodable_body",
                    "{what}: {error}"
                );
                assert_eq!(seen.count(), before, "{what}: forwarded");
            } else {
                assert_eq!(
                    status_of(&got),
                    200,
                    "{what}: {}",
                    String::from_utf8_lossy(&got)
                );
                let marker = header_of(&got, "x-staleguard").unwrap_or_default();
                assert_eq!(marker, "passthrough; reason=undecodable-body", "{what}");
                let requests = seen.requests.lock().unwrap();
                let (head, sent) = requests.last().unwrap();
                assert_eq!(sent, body, "{what}: not forwarded as it came");
                assert!(
                    head.to_ascii_lowercase()
                        .contains(&format!("content-encoding: {encoding}")),
                    "{what}: {head}"
                );
            }
        }
        // A gzip bomb: 64 MiB of zeros in about 64 KiB, against a 1 MiB limit.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20);
        let before = seen.count();
        let started = Instant::now();
        let (got, _) = raw(
            proxy.addr,
            &post(CHAT, "Content-Encoding: gzip\r\n", &bomb),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(status_of(&got), 413, "{}", String::from_utf8_lossy(&got));
        let message = body_of(&got);
        assert!(
            message.contains(&(1u64 << 20).to_string()),
            "the limit is named: {message}"
        );
        assert_eq!(seen.count(), before, "the bomb was forwarded");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

/// Over `max_body_bytes`: 413 with a JSON error naming the limit, by `Content-Length` or
/// chunked, and the proxy serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_get_413_naming_it() {
    let (up, seen) = ok_upstream().await;
    let mut s = settings(up);
    s.max_body_bytes = 1000;
    let proxy = proxy(s).await;
    let big = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(5000)
    );
    let mut chunked = format!("POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").into_bytes();
    for part in big.as_bytes().chunks(700) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    for (what, request) in [
        ("content-length", post(CHAT, "", big.as_bytes())),
        ("chunked", chunked),
        (
            "content-length, not a model path",
            post("/v1/files", "", big.as_bytes()),
        ),
    ] {
        let (got, _) = raw(proxy.addr, &request, Duration::from_secs(5)).await;
        assert_eq!(
            status_of(&got),
            413,
            "{what}: {}",
            String::from_utf8_lossy(&got)
        );
        let error: serde_json::Value = serde_json::from_str(&body_of(&got)).expect("JSON error");
        assert_eq!(error["error"]["type"], "body_too_large", "{what}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("1000"), "{what}: {message}");
    }
    assert_eq!(seen.count(), 0, "an oversized body was forwarded");
    let (got, _) = raw(
        proxy.addr,
        &post(CHAT, "", SMALL.as_bytes()),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(status_of(&got), 200, "{}", String::from_utf8_lossy(&got));
}

// ------------------------------------------------------------------------------------------
// Health and shutdown

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_are_answered_by_the_proxy() {
    let (up, seen) = ok_upstream().await;
    let proxy = proxy(settings(up)).await;
    for (path, want) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let response = client()
            .get(format!("http://{}{path}", proxy.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let body: serde_json::Value =
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(body["status"], want, "{path}");
    }
    assert_eq!(seen.count(), 0, "a health check was forwarded");
}

/// After the shutdown signal: new connections are refused, the stream in flight goes on,
/// and `serve` returns once the grace is over, cutting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_connections_and_cuts_streams_after_the_grace() {
    let closed = Arc::new(Mutex::new(None));
    let (up, _) = slow_stream(Arc::clone(&closed)).await;
    let mut s = settings(up);
    s.shutdown_grace = Duration::from_secs(1);
    let mut proxy = proxy(s).await;
    let mut socket = TcpStream::connect(proxy.addr).await.unwrap();
    socket
        .write_all(&post(CHAT, "", SMALL.as_bytes()))
        .await
        .unwrap();
    let mut chunk = [0u8; 4096];
    let n = socket.read(&mut chunk).await.unwrap();
    assert!(n > 0);
    let signalled = Instant::now();
    proxy.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        TcpStream::connect(proxy.addr).await.is_err(),
        "a new connection was accepted after the shutdown signal"
    );
    // The stream goes on during the grace.
    let mut during = Vec::new();
    while signalled.elapsed() < Duration::from_millis(700) {
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the stream was cut before the grace was over");
        during.extend_from_slice(&chunk[..n]);
    }
    assert!(!during.is_empty());
    let served = tokio::time::timeout(Duration::from_secs(5), &mut proxy.served)
        .await
        .expect("serve returned after the grace");
    served.unwrap().unwrap();
    assert!(signalled.elapsed() >= Duration::from_secs(1));
}
