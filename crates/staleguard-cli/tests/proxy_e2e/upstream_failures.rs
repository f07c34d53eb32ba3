//! An upstream that fails, is slow or is down: the client gets the error, and the proxy
//! recovers.

use serde_json::{json, Value};

use crate::harness::*;

#[test]
fn upstream_errors_reach_the_client_and_the_proxy_recovers() {
    let work = Work::new("faults");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let v1 = proxy.v1();
    let origin = proxy.origin();
    let calls = [
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            false,
            &[("x-scripted-fault", "500")],
        ),
        sdk("openai-chat", &v1, &chat, false),
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk_with(
            "anthropic-messages",
            &origin,
            &messages,
            false,
            &[("x-scripted-fault", "429")],
        ),
        sdk("anthropic-messages", &origin, &messages, false),
        sdk_with(
            "openai-chat",
            &v1,
            &chat,
            true,
            &[("x-scripted-fault", "reset")],
        ),
        sdk("openai-chat", &v1, &chat, true),
        sdk_with(
            "anthropic-messages",
            &origin,
            &messages,
            true,
            &[("x-scripted-fault", "reset")],
        ),
        sdk("anthropic-messages", &origin, &messages, true),
    ];
    let out = clients(&work, &calls);

    assert_eq!(
        out[0]["status"], 500,
        "500 did not reach the client: {}",
        out[0]
    );
    let body: Value =
        serde_json::from_str(out[0]["body"].as_str().unwrap_or("")).expect("500 body is JSON");
    assert_eq!(
        body["error"]["message"], "scripted internal error",
        "{}",
        out[0]
    );
    assert_ok(&out[1], "a normal call after a 500");

    for (i, what) in [(2, "openai 429"), (3, "anthropic 429")] {
        assert_eq!(out[i]["status"], 429, "{what}: {}", out[i]);
        assert_eq!(
            header(&out[i], "retry-after"),
            Some("7"),
            "{what}: retry-after lost: {}",
            out[i]
        );
        assert!(
            out[i]["body"]
                .as_str()
                .unwrap_or("")
                .contains("scripted rate limit"),
            "{what}: {}",
            out[i]
        );
    }
    assert_ok(&out[4], "a normal call after a 429");

    for (i, what) in [(5, "openai reset"), (7, "anthropic reset")] {
        let normal = &out[i + 1];
        assert_ok(normal, &format!("a normal stream after the {what}"));
        let full = normal["events"].as_u64().unwrap();
        let got = out[i]["events"].as_u64().unwrap_or(0);
        assert!(
            out[i]["ok"] == json!(false) || got < full,
            "{what}: the client saw a complete stream ({got} of {full} events) from an upstream that reset: {}",
            out[i]
        );
    }
    assert_eq!(out[6]["events"], CHAT_STREAM_EVENTS);
    assert_eq!(up.requests().len(), calls.len());
}

#[test]
fn a_slow_upstream_gets_504_and_the_proxy_recovers() {
    let work = Work::new("slow");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--upstream-timeout-secs", "1"],
        &[],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let calls = [
        sdk_with(
            "openai-chat",
            &proxy.v1(),
            &chat,
            false,
            &[("x-scripted-fault", "slow"), ("x-scripted-slow-secs", "4")],
        ),
        sdk("openai-chat", &proxy.v1(), &chat, false),
    ];
    let out = clients(&work, &calls);
    assert_eq!(
        out[0]["status"], 504,
        "upstream slower than the timeout: {}",
        out[0]
    );
    let body = out[0]["body"].as_str().unwrap_or("");
    serde_json::from_str::<Value>(body)
        .unwrap_or_else(|e| panic!("504 body is not JSON ({e}): {body:?}"));
    let took = out[0]["total_s"].as_f64().unwrap();
    assert!(
        took < 3.5,
        "the 504 took {took:.2} s with --upstream-timeout-secs 1"
    );
    assert_ok(&out[1], "a normal call after a 504");
}

#[test]
fn an_upstream_that_is_down_gets_502_and_the_proxy_recovers() {
    let work = Work::new("down");
    let port = free_port();
    let proxy = start_proxy(&work, Some(&format!("http://127.0.0.1:{port}")), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    // Gemini's key in the query must not come back in the error, nor reach the log (Drop).
    let gemini = format!(
        "{}/v1beta/models/m:generateContent?key={GEMINI_KEY}",
        proxy.origin()
    );
    let out = clients(
        &work,
        &[
            sdk("openai-chat", &proxy.v1(), &chat, false),
            raw("POST", &gemini, Some(&gemini_body(&work)), None),
        ],
    );
    for result in &out {
        assert_eq!(
            result["status"], 502,
            "connection refused upstream: {result}"
        );
        let body = result["body"].as_str().unwrap_or("");
        serde_json::from_str::<Value>(body)
            .unwrap_or_else(|e| panic!("502 body is not JSON ({e}): {body:?}"));
        assert!(!body.contains(GEMINI_KEY), "{body}");
    }

    let up = start_upstream(port);
    let out = clients(&work, &[sdk("openai-chat", &proxy.v1(), &chat, false)]);
    assert_ok(&out[0], "a normal call once the upstream is up");
    assert_eq!(up.requests().len(), 1);
}
