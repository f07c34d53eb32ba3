//! A WebSocket handshake at the proxy: answered `426 Upgrade Required` at once on a model path
//! (Codex CLI's built-in provider opens one on `GET /v1/responses`, and on that answer alone
//! goes on over HTTP without retrying), never sent upstream, logged as one line without its
//! headers; on any other path it goes upstream as before.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use staleguard::Config;
use staleguard_proxy::{Route, Routes, Settings, DEFAULT_METRICS_PATH};

/// What Codex 0.171.0 sends to open its Responses WebSocket, but for the path.
fn handshake(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
         authorization: Bearer sk-websocket-test-secret\r\n\
         openai-beta: responses_websockets=2026-02-06\r\noriginator: codex_exec\r\n\r\n"
    )
}

/// An answer's status, headers and body, read to the end of its `Content-Length`.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends `request` on `stream` and reads one answer.
fn exchange(stream: &mut TcpStream, request: &str) -> Answer {
    stream.write_all(request.as_bytes()).expect("send");
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                let body = String::from_utf8_lossy(&data[end + 4..end + 4 + length]).to_string();
                return Answer { status, head, body };
            }
        }
        let n = stream.read(&mut buf).expect("read the answer");
        assert!(
            n > 0,
            "the connection closed: {:?}",
            String::from_utf8_lossy(&data)
        );
        data.extend_from_slice(&buf[..n]);
    }
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
}

/// A loopback upstream that answers every request `200 upstream` and keeps each request's
/// head.
fn upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            kept.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).to_string());
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nupstream",
            );
        }
    });
    (port, seen)
}

/// Everything the proxy logs in this test binary, through a global subscriber.
fn captured_log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        log
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The proxy, compaction on, in front of the upstream on `upstream`: its port.
fn proxy(runtime: &tokio::runtime::Runtime, upstream: u16) -> u16 {
    let settings = Settings {
        routes: Routes(vec![Route::everything(&format!(
            "http://127.0.0.1:{upstream}"
        ))
        .expect("route")]),
        fail_closed: false,
        max_body_bytes: 1 << 20,
        upstream_timeout: Duration::from_secs(10),
        memo_bytes: 0,
        metrics_path: Some(DEFAULT_METRICS_PATH.to_string()),
        shutdown_grace: Duration::from_secs(1),
        staleguard: Config {
            browser_history_compaction: true,
            ..Config::default()
        },
    };
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(staleguard_proxy::serve(
            settings,
            listener,
            std::future::pending(),
        ));
        port
    })
}

#[test]
fn a_websocket_handshake_on_a_model_path_is_answered_426_at_once() {
    let log = captured_log();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (up, seen) = upstream();
    let port = proxy(&runtime, up);

    for path in ["/v1/responses", "/v1/chat/completions", "/v1/messages"] {
        let mut stream = connect(port);
        let answer = exchange(&mut stream, &handshake(path));
        assert_eq!(
            answer.status, 426,
            "{path}: {}\n{}",
            answer.head, answer.body
        );
        assert!(!answer
            .head
            .to_ascii_lowercase()
            .contains("upgrade: websocket"));
        let body: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
        assert_eq!(body["error"]["type"], "websocket_not_supported", "{body}");
        assert_eq!(body["error"]["source"], "staleguard-proxy", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("POST {path}"))),
            "{body}"
        );
        // The connection stays an HTTP one: the client may go on with its POST on it.
        let metrics = exchange(
            &mut stream,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        );
        assert_eq!(metrics.status, 200, "{}", metrics.body);
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "a handshake went upstream: {:?}",
        seen.lock().unwrap()
    );

    // A handshake elsewhere goes upstream as before, as a plain GET.
    let mut stream = connect(port);
    let answer = exchange(&mut stream, &handshake("/v1/realtime"));
    assert_eq!((answer.status, answer.body.as_str()), (200, "upstream"));
    let forwarded = seen.lock().unwrap().clone();
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    assert!(forwarded[0].starts_with("GET /v1/realtime HTTP/1.1\r\n"));
    assert!(!forwarded[0].to_ascii_lowercase().contains("upgrade:"));

    let mut stream = connect(port);
    let metrics = exchange(
        &mut stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    );
    assert!(
        metrics
            .body
            .contains("staleguard_proxy_requests_total{outcome=\"websocket_refused\"} 3"),
        "{}",
        metrics.body
    );

    let text = String::from_utf8(log.lock().unwrap().clone()).expect("UTF-8");
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("outcome=websocket_refused"))
        .collect();
    assert_eq!(refused.len(), 3, "one line a handshake:\n{text}");
    for line in &refused {
        assert!(
            line.contains(" request ")
                && line.contains("method=GET")
                && line.contains("status=426"),
            "{line}"
        );
    }
    assert!(refused[0].contains("path=/v1/responses"), "{}", refused[0]);
    assert!(!text.contains("sk-websocket-test-secret"), "{text}");
    runtime.shutdown_background();
}
