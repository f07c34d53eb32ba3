//! `staleguard proxy` as a process under SIGTERM: streams in flight finish, new connections
//! are refused, and `--shutdown-grace-secs` bounds how long that may take. Also the health
//! checks. No Python needed: the upstream is a scripted SSE server on a thread.

#![cfg(unix)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An SSE upstream: each request gets `events` events 100 ms apart (`usize::MAX`: endless),
/// then `data: [DONE]`. Counts the requests it received.
fn sse_upstream(events: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                seen.fetch_add(1, Ordering::SeqCst);
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
                let _ = socket.write_all(head.as_bytes());
                let send = |socket: &mut TcpStream, event: &str| {
                    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                    socket.write_all(chunk.as_bytes())
                };
                for i in 0..events {
                    if send(&mut socket, &format!("data: {{\"n\":{i}}}\n\n")).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = send(&mut socket, "data: [DONE]\n\n");
                let _ = socket.write_all(b"0\r\n\r\n");
            });
        }
    });
    (addr, count)
}

struct Proxy {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_proxy(upstream: SocketAddr, args: &[&str]) -> Proxy {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let child = Command::new(env!("CARGO_BIN_EXE_staleguard"))
        .args(["proxy", "--listen", &addr.to_string()])
        .args(["--upstream", &format!("http://{upstream}")])
        .args(args)
        .env("BROWSER_HISTORY_COMPACTION", "on")
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start staleguard proxy");
    let proxy = Proxy { child, addr };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "the proxy did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    proxy
}

/// A streaming chat request on a connection of its own; the head of the answer is read.
fn start_stream(addr: SocketAddr) -> TcpStream {
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut socket = TcpStream::connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        socket,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 256];
    let n = socket.read(&mut first).unwrap();
    assert!(
        String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first[..n])
    );
    socket
}

fn sigterm(proxy: &Proxy) {
    let status = Command::new("kill")
        .args(["-TERM", &proxy.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

fn wait_exit(proxy: &mut Proxy, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the proxy did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut socket = TcpStream::connect(addr).unwrap();
    write!(
        socket,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn health_checks_are_answered_and_not_forwarded() {
    let (up, seen) = sse_upstream(1);
    let proxy = start_proxy(up, &[]);
    let health = get(proxy.addr, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.ends_with(r#"{"status":"ok"}"#), "{health}");
    let ready = get(proxy.addr, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    assert!(ready.ends_with(r#"{"status":"ready"}"#), "{ready}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "a health check was forwarded"
    );
}

/// A stream in flight at SIGTERM runs to its end; a new connection is refused meanwhile;
/// the proxy then exits 0.
#[test]
fn sigterm_refuses_new_connections_and_finishes_the_stream() {
    let (up, _) = sse_upstream(15);
    let mut proxy = start_proxy(up, &[]);
    let mut stream = start_stream(proxy.addr);
    sigterm(&proxy);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        TcpStream::connect_timeout(&proxy.addr, Duration::from_secs(1)).is_err(),
        "a new connection was accepted after SIGTERM"
    );
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .expect("the stream ends cleanly");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("data: [DONE]"), "the stream was cut: {rest}");
    assert!(
        rest.ends_with("0\r\n\r\n"),
        "the stream did not end whole: {rest}"
    );
    let status = wait_exit(&mut proxy, Duration::from_secs(10));
    assert!(status.success(), "{status}");
}

/// A stream longer than `--shutdown-grace-secs` is cut when the grace is over, and the
/// proxy exits 0 then.
#[test]
fn the_shutdown_grace_bounds_the_wait() {
    let (up, _) = sse_upstream(usize::MAX);
    let mut proxy = start_proxy(up, &["--shutdown-grace-secs", "1"]);
    let mut stream = start_stream(proxy.addr);
    let signalled = Instant::now();
    sigterm(&proxy);
    let status = wait_exit(&mut proxy, Duration::from_secs(6));
    let took = signalled.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took >= Duration::from_millis(900),
        "exited before the grace: {took:?}"
    );
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).contains("[DONE]"),
        "an endless stream ended whole"
    );
}
