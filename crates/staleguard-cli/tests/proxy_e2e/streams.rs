//! Streams in flight: two hundred at once, and SIGTERM while one runs.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

#[test]
fn two_hundred_concurrent_streams_each_get_their_own_answer() {
    let work = Work::new("load");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut cmd = Command::new("python3");
    cmd.arg(script("clients.py"))
        .args(["load", &proxy.v1(), "200"]);
    let (ok, out, err) = run_limited(cmd, Duration::from_secs(90), "clients.py load");
    assert!(ok, "200 concurrent streams through the proxy: {out}\n{err}");
    let result: Value = serde_json::from_str(out.trim()).expect("load result");
    assert_eq!(result["ok"], 200, "{result}");
    assert_eq!(up.requests().len(), 200);
}

/// SIGTERM lets the streams in flight finish, then the proxy exits cleanly.
#[test]
fn sigterm_finishes_streams_in_flight() {
    let work = std::sync::Arc::new(Work::new("sigterm"));
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let body = fixture("pwmcp-0.0.41/order.openai.json");
    let call = sdk("openai-chat", &proxy.v1(), &body, true);
    let streaming = {
        let work = std::sync::Arc::clone(&work);
        std::thread::spawn(move || clients(&work, &[call]))
    };
    // Wait until the upstream has the request, so the stream is in flight.
    let deadline = Instant::now() + Duration::from_secs(20);
    while up.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the streaming request never reached the upstream"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = proxy.proc.as_ref().unwrap().child.id();
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = streaming.join().expect("client thread");
    assert_streamed(&out[0], "a stream in flight at SIGTERM");
    let status = {
        let proc = proxy.proc.as_mut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = proc.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(
        status.success(),
        "exit status after SIGTERM: {status}; log:\n{}",
        proxy.log_text()
    );
}
