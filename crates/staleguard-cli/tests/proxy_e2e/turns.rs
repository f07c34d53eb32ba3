//! Sessions sent turn by turn, as an agent sends them: every turn is forwarded as the CLI
//! projects it.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::harness::*;

/// Each turn of the recorded request body in `file`, as an agent sends it: the turn's number
/// (its messages) and its body.
fn turns(file: &Path) -> Vec<(usize, Vec<u8>)> {
    let body: Value = serde_json::from_slice(&fs::read(file).unwrap()).unwrap();
    let messages = body["messages"].as_array().expect("messages").clone();
    (1..=messages.len())
        .map(|n| {
            let mut turn = body.clone();
            turn["messages"] = Value::Array(messages[..n].to_vec());
            (n, serde_json::to_vec(&turn).unwrap())
        })
        .collect()
}

/// What an agent sends with each turn, for either provider.
const TURN_HEADERS: [(&str, &str); 4] = [
    ("Content-Type", "application/json"),
    ("Authorization", "Bearer sk-test-secret"),
    ("x-api-key", "sk-test-secret"),
    ("anthropic-version", "2023-06-01"),
];

/// A session sent turn by turn, as an agent sends it: from the second turn on the proxy
/// resumes from the checkpoint the previous turn left (its log says `resumed=true`), and
/// every forwarded body is still the projection the CLI makes of that turn alone.
#[test]
fn a_session_turn_by_turn_resumes_and_forwards_the_same_bytes() {
    let work = Work::new("turn_by_turn");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    for (name, path) in [
        ("order.openai.json", "/v1/chat/completions"),
        ("order.anthropic.json", "/v1/messages"),
    ] {
        for (n, bytes) in turns(&fixture(&format!("pwmcp-0.0.41/{name}"))) {
            up.reset();
            let r = http(proxy.port, "POST", path, &TURN_HEADERS, &bytes);
            assert_eq!(r.status, 200, "{name} turn {n}");
            let recs = up.requests();
            let what = format!("{name} turn {n}");
            let sent = rec_body(&recs[0]);
            assert_same_bytes(&work, sent.as_bytes(), &project(&work, &bytes), &what);
            // A resumed body goes upstream in chunks, still with its length: providers
            // are not asked to take a chunked upload.
            let length = sent.len().to_string();
            assert_eq!(
                rec_header(&recs[0], "content-length"),
                Some(&*length),
                "{what}"
            );
            assert_eq!(rec_header(&recs[0], "transfer-encoding"), None, "{what}");
        }
    }
    let log = proxy.stop();
    let resumed = log.matches("resumed=true").count();
    let projected = log.matches("outcome=projected").count();
    assert!(
        resumed * 2 > projected,
        "{resumed} of {projected} projected turns resumed:\n{log}"
    );
}

/// Issue 41: a task with Chinese right against a URL made the projection panic, and the
/// proxy forwarded every turn unprojected. Each turn of the recorded order session so
/// written, in both formats, is now projected to the CLI's bytes, and no projection fails.
#[test]
fn a_task_with_chinese_before_a_url_is_projected_every_turn() {
    let work = Work::new("unicode");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut sent = 0;
    for (name, path) in [
        ("order_zh.openai.json", "/v1/chat/completions"),
        ("order_zh.anthropic.json", "/v1/messages"),
    ] {
        for (n, bytes) in turns(&repo().join("fixtures/unicode").join(name)) {
            up.reset();
            let r = http(proxy.port, "POST", path, &TURN_HEADERS, &bytes);
            let what = format!("{name} turn {n}");
            assert_eq!(r.status, 200, "{what}");
            let said = r.header("x-staleguard").unwrap_or_default();
            assert!(said.starts_with("projected;"), "{what}: {said}");
            let forwarded = rec_body(&up.requests()[0]).to_string();
            assert_same_bytes(&work, forwarded.as_bytes(), &project(&work, &bytes), &what);
            sent += 1;
        }
    }
    let metrics = metrics_after(&work, &proxy, sent);
    assert_eq!(requests_of(&metrics, "projected"), sent as f64);
    for reason in ["internal-error", "unreadable-body", "undecodable-body"] {
        let failures = sample(
            &metrics,
            "staleguard_proxy_projection_failures",
            "staleguard_proxy_projection_failures_total",
            &[("reason", reason)],
        );
        assert_eq!(failures, 0.0, "{reason}");
    }
    let log = proxy.stop();
    assert!(
        !log.contains("passthrough") && !log.contains("internal error"),
        "{log}"
    );
}
