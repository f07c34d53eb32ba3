//! The official SDKs through the proxy, a format at a time: OpenAI Chat and Responses,
//! Anthropic Messages and count_tokens, Gemini's `generate_content` and Gemini Code Assist,
//! and route prefixes. Each call goes straight to the scripted model and then through the
//! proxy, and the two are checked as a pair.

use std::fs;

use serde_json::Value;

use crate::harness::*;

/// One call sent straight to the scripted model, then the same call through the proxy: the
/// proxy forwarded the projection of what the SDK sent, and the SDK parsed the answer.
fn check_pair(
    work: &Work,
    direct: (&Value, &Value),
    proxied: (&Value, &Value),
    path: &str,
    what: &str,
) {
    let (direct_out, direct_rec) = direct;
    let (out, rec) = proxied;
    assert_ok(
        direct_out,
        &format!("{what} (straight to the scripted model)"),
    );
    assert_ok(out, &format!("{what} through the proxy"));
    assert_eq!(rec["method"], "POST", "{what}");
    assert_eq!(rec["path"], path, "{what}: forwarded to the wrong path");
    assert_eq!(direct_rec["path"], path, "{what}");
    let sent = rec_body(direct_rec).as_bytes();
    let want = project(work, sent);
    assert_ne!(
        want, sent,
        "{what}: the fixture should have observations to collapse"
    );
    assert_same_bytes(work, rec_body(rec).as_bytes(), &want, what);
    assert!(
        collapsed(header(out, "x-staleguard"), what) > 0,
        "{what}: nothing collapsed: {out}"
    );
    assert_eq!(rec_header(rec, "content-encoding"), None, "{what}");
    for name in [
        "authorization",
        "x-api-key",
        "x-goog-api-key",
        "anthropic-version",
        "anthropic-beta",
        "content-type",
        "user-agent",
    ] {
        assert_eq!(
            rec_header(rec, name),
            rec_header(direct_rec, name),
            "{what}: the proxy changed the request header {name}"
        );
    }
    if out["cmd"] == "anthropic-count-tokens" {
        let (d, p) = (
            direct_out["input_tokens"].as_u64().unwrap(),
            out["input_tokens"].as_u64().unwrap(),
        );
        assert!(
            p < d,
            "{what}: the projected body should count fewer tokens ({p} vs {d})"
        );
    } else {
        assert_eq!(
            echo_of(out),
            echo_of(direct_out),
            "{what}: the SDK did not get its answer"
        );
    }
    if out["events"].as_u64().unwrap_or(0) > 0 || direct_out["events"].as_u64().unwrap_or(0) > 0 {
        assert_eq!(
            out["events"], direct_out["events"],
            "{what}: events lost: {out}"
        );
        assert_eq!(out["event_types"], direct_out["event_types"], "{what}");
        assert_streamed(out, what);
    }
}

/// Runs each call straight to the scripted model and then through the proxy, and checks each pair.
fn run_pairs(work: &Work, up: &Upstream, calls: &[(Value, Value, &str, String)]) {
    let batch: Vec<Value> = calls
        .iter()
        .flat_map(|(d, p, _, _)| [d.clone(), p.clone()])
        .collect();
    let out = clients(work, &batch);
    let recs = up.requests();
    assert_eq!(
        recs.len(),
        batch.len(),
        "the scripted model got {} requests, expected {}",
        recs.len(),
        batch.len()
    );
    for (i, (_, _, path, what)) in calls.iter().enumerate() {
        check_pair(
            work,
            (&out[2 * i], &recs[2 * i]),
            (&out[2 * i + 1], &recs[2 * i + 1]),
            path,
            what,
        );
    }
}

#[test]
fn openai_chat_is_projected_streamed_and_parsed() {
    let work = Work::new("openai_chat");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let mut calls = Vec::new();
    for name in ["order", "long_page"] {
        let body = fixture(&format!("pwmcp-0.0.41/{name}.openai.json"));
        for stream in [false, true] {
            calls.push((
                sdk("openai-chat", &up.v1(), &body, stream),
                sdk("openai-chat", &proxy.v1(), &body, stream),
                "/v1/chat/completions",
                format!("openai chat {name} stream={stream}"),
            ));
        }
    }
    run_pairs(&work, &up, &calls);
    for rec in up.requests() {
        assert_eq!(
            rec_header(&rec, "authorization"),
            Some("Bearer sk-test-secret")
        );
    }

    // The same fixture as raw bytes over a plain socket: the header is there and the
    // forwarded body is the projection of the file itself.
    up.reset();
    let file = fixture("pwmcp-0.0.41/order.openai.json");
    let bytes = fs::read(&file).unwrap();
    let r = post_chat(proxy.port, &bytes);
    assert!(collapsed(r.header("x-staleguard"), "raw order.openai.json") > 0);
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        &project(&work, &bytes),
        "raw order.openai.json",
    );
    let answer: Value = serde_json::from_slice(&r.body).expect("JSON answer");
    assert_eq!(answer["object"], "chat.completion");
}

#[test]
fn anthropic_messages_and_count_tokens_are_projected() {
    let work = Work::new("anthropic");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let body = fixture("pwmcp-0.0.41/order.anthropic.json");
    let mut calls = Vec::new();
    for stream in [false, true] {
        calls.push((
            sdk("anthropic-messages", &up.origin(), &body, stream),
            sdk("anthropic-messages", &proxy.origin(), &body, stream),
            "/v1/messages",
            format!("anthropic messages stream={stream}"),
        ));
    }
    calls.push((
        sdk("anthropic-count-tokens", &up.origin(), &body, false),
        sdk("anthropic-count-tokens", &proxy.origin(), &body, false),
        "/v1/messages/count_tokens",
        "anthropic count_tokens".to_string(),
    ));
    run_pairs(&work, &up, &calls);
    for rec in up.requests() {
        // Depending on its version the SDK sends the key as x-api-key or as a bearer token.
        let bearer = format!("Bearer {ANTHROPIC_KEY}");
        assert!(
            rec_header(&rec, "x-api-key") == Some(ANTHROPIC_KEY)
                || rec_header(&rec, "authorization") == Some(bearer.as_str()),
            "no Anthropic key in {}",
            rec["headers"]
        );
        assert!(rec_header(&rec, "anthropic-version").is_some());
    }
}

#[test]
fn openai_responses_are_projected() {
    let work = Work::new("responses");
    let responses = responses_body(&work);
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let calls: Vec<_> = [false, true]
        .into_iter()
        .map(|stream| {
            (
                sdk("openai-responses", &up.v1(), &responses, stream),
                sdk("openai-responses", &proxy.v1(), &responses, stream),
                "/v1/responses",
                format!("openai responses stream={stream}"),
            )
        })
        .collect();
    run_pairs(&work, &up, &calls);
    let recs = up.requests();
    let sent: Value = serde_json::from_str(rec_body(&recs[1])).unwrap();
    let kinds: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    for kind in ["message", "function_call", "function_call_output"] {
        assert!(
            kinds.contains(&kind),
            "the Responses body has no {kind} item"
        );
    }
}

/// `google-genai` pointed at the proxy with `GOOGLE_GEMINI_BASE_URL`: `generate_content` and
/// `generate_content_stream` (`?alt=sse`) go upstream projected and their answers come back
/// as the model sent them; Gemini's default stream (one JSON array) and a `?key=` in the
/// query too. The log and `/metrics` count what `usageMetadata` billed; no key is logged.
#[test]
fn gemini_generate_content_is_projected_streamed_and_counted() {
    let work = Work::new("gemini");
    let body = gemini_body(&work);
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    // google-genai's default API version.
    let model = "/v1/models/gemini-2.5-flash";
    let paths = [
        format!("{model}:generateContent"),
        format!("{model}:streamGenerateContent?alt=sse"),
    ];
    let calls: Vec<_> = [false, true]
        .into_iter()
        .zip(&paths)
        .map(|(stream, path)| {
            (
                sdk("gemini-generate", &up.origin(), &body, stream),
                sdk("gemini-generate", &proxy.origin(), &body, stream),
                path.as_str(),
                format!("gemini stream={stream}"),
            )
        })
        .collect();
    run_pairs(&work, &up, &calls);
    let sdk_out = clients(
        &work,
        &[
            sdk("gemini-generate", &proxy.origin(), &body, false),
            sdk("gemini-generate", &proxy.origin(), &body, true),
        ],
    );
    let recs = up.requests();
    let sent = rec_body(&recs[0]).as_bytes().to_vec();
    for rec in &recs {
        assert_eq!(rec_header(rec, "x-goog-api-key"), Some(GEMINI_KEY));
    }
    for (out, rec) in sdk_out.iter().zip(&recs[4..]) {
        assert_ok(out, "gemini usage");
        assert_eq!(
            &out["usage"], &rec["usage_sent"],
            "the SDK did not get the usageMetadata the model sent"
        );
    }

    // Gemini's default stream, a JSON array, with the key in the query.
    up.reset();
    let file = work.file("gemini-sdk-body.json", &sent);
    let url = format!(
        "{}{model}:streamGenerateContent?key={GEMINI_KEY}",
        proxy.origin()
    );
    let raw_out = clients(&work, &[raw("POST", &url, Some(&file), None)]).remove(0);
    assert_eq!(raw_out["status"], 200, "{raw_out}");
    assert!(collapsed(header(&raw_out, "x-staleguard"), "JSON-array stream") > 0);
    let answers: Value =
        serde_json::from_str(raw_out["body"].as_str().unwrap()).expect("JSON array");
    let text: String = answers
        .as_array()
        .expect("an array of answers")
        .iter()
        .filter_map(|a| a["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert!(text.starts_with("echo: "), "{raw_out}");
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        recs[0]["path"],
        format!("{model}:streamGenerateContent?key={GEMINI_KEY}"),
        "the query goes upstream"
    );
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        &project(&work, &sent),
        "JSON-array stream",
    );
    let last = answers.as_array().unwrap().last().unwrap();
    let (read, _, uncached) = billed(&recs[0]);
    assert_eq!(last["usageMetadata"]["cachedContentTokenCount"], read);

    // Each request's line: format gemini, and the billed split read from usageMetadata.
    let metrics = metrics_after(&work, &proxy, 5);
    assert_eq!(requests_of(&metrics, "projected"), 5.0);
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), 5, "{lines:#?}");
    for l in &lines {
        assert_eq!(l["format"], "gemini", "{l}");
        assert_eq!(l["usage"], "read", "{l}");
        assert_eq!(l["breakpoint"], "-", "{l}");
        assert!(!l["path"].as_str().unwrap_or("").contains(GEMINI_KEY));
    }
    let last_line = lines.last().unwrap();
    assert_eq!(last_line["cache_read_tokens"], read, "{last_line}");
    assert_eq!(last_line["uncached_input_tokens"], uncached, "{last_line}");
    assert_eq!(last_line["cache_write_tokens"], 0, "{last_line}");
}

/// Gemini CLI signed in with Google talks to Gemini Code Assist (`CODE_ASSIST_ENDPOINT` at
/// the proxy): `/v1internal:generateContent` and `:streamGenerateContent` with the request
/// wrapped in `{"model", "project", "request"}` and answers wrapped in `{"response"}`. The
/// inner request is projected as `staleguard project` does it, and the usage is read.
#[test]
fn gemini_code_assist_is_projected_inside_its_wrapper() {
    let work = Work::new("code-assist");
    let inner = std::fs::read_to_string(gemini_body(&work)).expect("converted body");
    let wrapped = format!(
        r#"{{"model":"gemini-2.5-pro","project":"p-1","user_prompt_id":"u-1","request":{inner}}}"#
    );
    let file = work.file("code-assist.json", wrapped.as_bytes());
    let want = project(&work, wrapped.as_bytes());
    let up = start_upstream(0);
    let mut proxy = start_proxy(&work, Some(&up.origin()), &["--log-json"], &[]);
    let calls: Vec<Value> = [
        "/v1internal:generateContent",
        "/v1internal:streamGenerateContent?alt=sse",
    ]
    .iter()
    .map(|path| {
        raw(
            "POST",
            &format!("{}{path}", proxy.origin()),
            Some(&file),
            None,
        )
    })
    .collect();
    for out in clients(&work, &calls) {
        assert_eq!(out["status"], 200, "{out}");
        assert!(collapsed(header(&out, "x-staleguard"), "code assist") > 0);
        assert!(
            out["body"].as_str().unwrap_or("").contains("\"traceId\""),
            "{out}"
        );
    }
    let recs = up.requests();
    assert_eq!(recs.len(), 2);
    for rec in &recs {
        assert_same_bytes(&work, rec_body(rec).as_bytes(), &want, "code assist");
        let sent: Value = serde_json::from_str(rec_body(rec)).expect("JSON sent");
        assert_eq!(sent["project"], "p-1", "the wrapper is kept");
    }
    let lines = request_lines(&proxy.stop());
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for (l, rec) in lines.iter().zip(&recs) {
        assert_eq!(l["format"], "gemini", "{l}");
        assert_eq!(
            l["usage"], "read",
            "usage read from response.usageMetadata: {l}"
        );
        let (read, _, uncached) = billed(rec);
        assert_eq!(l["cache_read_tokens"], read, "{l}");
        assert_eq!(l["uncached_input_tokens"], uncached, "{l}");
    }
}

#[test]
fn route_prefixes_are_stripped() {
    let work = Work::new("routes");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        None,
        &[
            "--route",
            &format!("/openai={}", up.origin()),
            "--route",
            &format!("/anthropic={}", up.origin()),
        ],
        &[],
    );
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let messages = fixture("pwmcp-0.0.41/order.anthropic.json");
    let calls = [
        (
            sdk("openai-chat", &up.v1(), &chat, false),
            sdk(
                "openai-chat",
                &format!("{}/openai/v1", proxy.origin()),
                &chat,
                false,
            ),
            "/v1/chat/completions",
            "openai chat via --route /openai".to_string(),
        ),
        (
            sdk("anthropic-messages", &up.origin(), &messages, true),
            sdk(
                "anthropic-messages",
                &format!("{}/anthropic", proxy.origin()),
                &messages,
                true,
            ),
            "/v1/messages",
            "anthropic messages via --route /anthropic".to_string(),
        ),
    ];
    run_pairs(&work, &up, &calls);
}
