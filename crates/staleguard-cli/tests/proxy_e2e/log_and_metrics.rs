//! What the proxy logs and counts: never an API key, what the provider billed in its log
//! lines and on `/metrics`, and `/metrics` itself.

use std::fs;

use serde_json::{json, Value};

use crate::harness::*;

#[test]
fn the_log_never_holds_api_keys() {
    let work = Work::new("secrets");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let calls = [
        sdk("openai-chat", &proxy.v1(), &chat, false),
        sdk("openai-chat", &proxy.v1(), &chat, true),
        sdk_with(
            "openai-chat",
            &proxy.v1(),
            &chat,
            false,
            &[("x-scripted-fault", "500")],
        ),
        sdk("anthropic-messages", &proxy.origin(), &messages, false),
        sdk_with(
            "anthropic-messages",
            &proxy.origin(),
            &messages,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk("anthropic-count-tokens", &proxy.origin(), &messages, false),
    ];
    let out = clients(&work, &calls);
    assert_ok(&out[0], "openai chat");
    assert_ok(&out[3], "anthropic messages");
    let log = proxy.stop();
    assert!(!log.trim().is_empty(), "the proxy wrote nothing to stderr");
    for secret in [OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!log.contains(secret), "the proxy logged {secret:?}:\n{log}");
    }
}

/// `saved_bytes=N` of an `x-staleguard` header.
fn saved_bytes(result: &Value) -> i64 {
    header(result, "x-staleguard")
        .and_then(|v| {
            v.split(';')
                .map(str::trim)
                .find_map(|p| p.strip_prefix("saved_bytes="))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no saved_bytes in {result}"))
}

/// All three formats, streamed and not, plain and gzip-encoded by the model: the SDK gets
/// exactly the usage the model sent, cache fields included, and the proxy's log and
/// `/metrics` count what the model billed.
#[test]
fn cache_usage_passes_through_intact_and_is_counted() {
    let work = Work::new("usage");
    let responses = responses_body(&work);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let mut calls = Vec::new();
    for encoding in [None, Some("gzip")] {
        for stream in [false, true] {
            let headers: Vec<(&str, &str)> = encoding
                .map(|e| vec![("x-scripted-encoding", e)])
                .unwrap_or_default();
            let mut chat_call = sdk_with("openai-chat", &proxy.v1(), &chat, stream, &headers);
            chat_call["include_usage"] = json!(stream);
            calls.push(chat_call);
            calls.push(sdk_with(
                "anthropic-messages",
                &proxy.origin(),
                &messages,
                stream,
                &headers,
            ));
            calls.push(sdk_with(
                "openai-responses",
                &proxy.v1(),
                &responses,
                stream,
                &headers,
            ));
        }
    }
    let with_usage = calls.len();
    // A Chat stream without `include_usage` carries none; neither does an error answer.
    calls.push(sdk("openai-chat", &proxy.v1(), &chat, true));
    calls.push(sdk_with(
        "anthropic-messages",
        &proxy.origin(),
        &messages,
        false,
        &[("x-scripted-fault", "500")],
    ));
    let out = clients(&work, &calls);
    let recs = up.requests();
    assert_eq!(recs.len(), calls.len(), "{recs:#?}");

    let mut bills = Vec::new();
    for (i, (result, rec)) in out.iter().zip(&recs).enumerate().take(with_usage) {
        let what = format!("call {i}: {}", calls[i]);
        assert_ok(result, &what);
        let sent = &rec["usage_sent"];
        assert!(
            sent.as_array().is_some_and(|a| !a.is_empty()),
            "{what}: the scripted model sent no usage: {rec}"
        );
        assert_eq!(
            &result["usage"], sent,
            "{what}: the client did not get the usage the model sent"
        );
        if calls[i]["stream"] == json!(true) {
            assert_streamed(result, &what);
        }
        bills.push(billed(rec));
    }
    assert!(
        bills.iter().all(|&(read, _, _)| read > 0),
        "the scripted model should report cache reads: {bills:?}"
    );
    let missing = &out[with_usage];
    assert_ok(missing, "a Chat stream without include_usage");
    assert_eq!(missing["usage"], json!([]), "{missing}");
    assert_eq!(
        out[with_usage + 1]["status"],
        500,
        "{}",
        out[with_usage + 1]
    );

    let metrics = metrics_after(&work, &proxy, calls.len());
    assert_eq!(requests_of(&metrics, "projected"), calls.len() as f64);
    let tokens = |kind| {
        sample(
            &metrics,
            "staleguard_proxy_input_tokens",
            "staleguard_proxy_input_tokens_total",
            &[("kind", kind)],
        )
    };
    let total = |pick: fn(&(u64, u64, u64)) -> u64| bills.iter().map(pick).sum::<u64>() as f64;
    assert_eq!(tokens("cache_read"), total(|b| b.0), "{metrics}");
    assert_eq!(tokens("cache_write"), total(|b| b.1), "{metrics}");
    assert_eq!(tokens("uncached"), total(|b| b.2), "{metrics}");
    let answers = |usage| {
        sample(
            &metrics,
            "staleguard_proxy_answers",
            "staleguard_proxy_answers_total",
            &[("usage", usage)],
        )
    };
    assert_eq!(answers("read"), with_usage as f64);
    assert_eq!(answers("missing"), 1.0);
    assert_eq!(answers("skipped"), 0.0);

    // Bytes saved: what the headers said, and what the model received.
    let saved: i64 = out.iter().map(saved_bytes).sum();
    assert!(saved > 0);
    assert_eq!(
        sample(
            &metrics,
            "staleguard_proxy_saved_bytes",
            "staleguard_proxy_saved_bytes",
            &[]
        ),
        saved as f64
    );
    let bytes = |stage| {
        sample(
            &metrics,
            "staleguard_proxy_projected_body_bytes",
            "staleguard_proxy_projected_body_bytes_total",
            &[("stage", stage)],
        )
    };
    let forwarded: usize = recs.iter().map(|r| rec_body(r).len()).sum();
    assert_eq!(bytes("forwarded"), forwarded as f64);
    assert_eq!(bytes("received") - bytes("forwarded"), saved as f64);

    let latency = &metrics["families"]["staleguard_proxy_added_latency_seconds"];
    assert_eq!(latency["type"], "histogram", "{latency}");
    let count = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_count",
        &[],
    );
    assert_eq!(count, calls.len() as f64);
    let inf = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_bucket",
        &[("le", "+Inf")],
    );
    assert_eq!(inf, count);

    // One log line per request, written when its answer ended, with the billed split.
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), calls.len(), "{lines:#?}");
    let mut logged: Vec<(u64, u64, u64)> = lines
        .iter()
        .filter(|l| l["usage"] == "read")
        .map(|l| {
            let n = |k: &str| l[k].as_u64().unwrap_or_else(|| panic!("{k} in {l}"));
            (
                n("cache_read_tokens"),
                n("cache_write_tokens"),
                n("uncached_input_tokens"),
            )
        })
        .collect();
    logged.sort_unstable();
    bills.sort_unstable();
    assert_eq!(logged, bills, "the log's token counts");
    // Anthropic requests carry the cache breakpoint of ours; the log says what became of it.
    for l in lines.iter().filter(|l| l["outcome"] == "projected") {
        let anthropic = l["path"].as_str().is_some_and(|p| p.ends_with("/messages"));
        let expected = if anthropic { "added" } else { "-" };
        assert_eq!(l["breakpoint"], expected, "{l}");
    }
    assert_eq!(
        lines.iter().filter(|l| l["usage"] == "missing").count(),
        1,
        "{lines:#?}"
    );
    let streams = calls.iter().filter(|c| c["stream"] == json!(true)).count();
    let long = lines
        .iter()
        .filter(|l| l["total_ms"].as_u64().unwrap_or(0) >= 1000)
        .collect::<Vec<_>>();
    assert_eq!(
        long.len(),
        streams,
        "each stream's line comes after its last event: {lines:#?}"
    );
    // An SDK may hang up right after the last event, before the upstream's end of stream.
    assert!(
        long.iter().all(|l| l["ended"] != "upstream_error"),
        "{long:#?}"
    );
    // A JSON answer is complete once its Content-Length has passed: the server reads its
    // body no further, so no end of stream is ever seen.
    let whole: Vec<_> = lines
        .iter()
        .filter(|l| l["total_ms"].as_u64().unwrap_or(0) < 1000)
        .collect();
    assert!(!whole.is_empty());
    assert!(whole.iter().all(|l| l["ended"] == "complete"), "{whole:#?}");
}

/// `GET /metrics` is the proxy's own; `--metrics-path` moves it (or turns it off) for an
/// upstream that serves a `/metrics` of its own. Requests the proxy answers itself are
/// counted by outcome.
#[test]
fn metrics_are_the_proxys_own_at_a_path_that_can_move() {
    let work = Work::new("metrics_path");
    let up = start_upstream(0);
    let down = free_port();
    let proxy = start_proxy(
        &work,
        None,
        &[
            "--route",
            &format!("/up={}", up.origin()),
            "--route",
            &format!("/down=http://127.0.0.1:{down}"),
            "--max-body-bytes",
            "1000",
            "--fail-closed",
        ],
        &[],
    );
    let json_headers = [("Content-Type", "application/json")];
    let small = br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}]}"#;
    let big = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let answers = [
        http(proxy.port, "GET", "/v1/models", &[], b"").status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            &big,
        )
        .status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            b"{",
        )
        .status,
        http(proxy.port, "GET", "/up/v1/models", &[], b"").status,
        http(
            proxy.port,
            "POST",
            "/down/v1/chat/completions",
            &json_headers,
            small,
        )
        .status,
        http(
            proxy.port,
            "POST",
            "/up/v1/chat/completions",
            &json_headers,
            small,
        )
        .status,
    ];
    assert_eq!(answers, [404, 413, 400, 200, 502, 200]);
    let metrics = metrics_after(&work, &proxy, answers.len());
    for (outcome, n) in [
        ("no_route", 1.0),
        ("too_large", 1.0),
        ("refused", 1.0),
        ("untouched", 1.0),
        ("upstream_unreachable", 1.0),
        ("projected", 1.0),
        ("passthrough", 0.0),
        ("upstream_timeout", 0.0),
    ] {
        assert_eq!(requests_of(&metrics, outcome), n, "{outcome}: {metrics}");
    }
    // Three requests were forwarded (one to an upstream that is down).
    let count = sample(
        &metrics,
        "staleguard_proxy_added_latency_seconds",
        "staleguard_proxy_added_latency_seconds_count",
        &[],
    );
    assert_eq!(count, 3.0);
    assert_eq!(up.requests().len(), 2, "the scripted model got /metrics");

    // A catch-all upstream: /metrics is the proxy's unless moved or turned off.
    up.reset();
    let all = start_proxy(&work, Some(&up.origin()), &[], &[]);
    metrics_at(&work, &format!("{}/metrics", all.origin()));
    assert!(up.requests().is_empty(), "GET /metrics was forwarded");
    let moved = start_proxy(
        &work,
        Some(&up.origin()),
        &["--metrics-path", "/_staleguard/metrics"],
        &[],
    );
    metrics_at(&work, &format!("{}/_staleguard/metrics", moved.origin()));
    let off = start_proxy(&work, Some(&up.origin()), &["--metrics-path", ""], &[]);
    for proxy in [&moved, &off] {
        let r = http(proxy.port, "GET", "/metrics", &[], b"");
        assert_eq!(r.status, 404, "the scripted model has no /metrics");
    }
    let paths: Vec<Value> = up.requests().iter().map(|r| r["path"].clone()).collect();
    assert_eq!(paths, [json!("/metrics"), json!("/metrics")]);
}
