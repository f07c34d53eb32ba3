//! Bodies the proxy cannot or must not project: invalid JSON and JSON of unknown shape,
//! compressed bodies, other paths, refusals when failing closed, bodies that are not UTF-8
//! and bodies over the limit.

use std::fs;

use base64::Engine as _;
use serde_json::Value;

use crate::harness::*;

#[test]
fn bad_and_odd_input_over_raw_http() {
    let work = Work::new("bad_input");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let chat = fixture("pwmcp-0.0.41/order.openai.json");
    let chat_bytes = fs::read(&chat).unwrap();
    let invalid: &[u8] =
        b"{\"model\": \"gpt-4.1\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}";
    let invalid_file = work.file("invalid.json", invalid);
    let unknown: &[u8] = b"{ \"prompt\" :  \"hi\",\n  \"n\": 1.50, \"nested\": {\"a\": [1,2, 3]}, \"x\": \"\\u00e9\" }";
    let unknown_file = work.file("unknown.json", unknown);
    let url = format!("{}/v1/chat/completions", proxy.origin());
    let calls = [
        raw("POST", &url, Some(&invalid_file), None),
        raw("POST", &url, Some(&chat), Some("gzip")),
        raw("POST", &url, Some(&chat), Some("zstd")),
        raw("POST", &url, Some(&unknown_file), None),
        raw(
            "GET",
            &format!("{}/v1/models?limit=2", proxy.origin()),
            None,
            None,
        ),
        raw(
            "GET",
            &format!("{}/v1/models?limit=2", up.origin()),
            None,
            None,
        ),
        raw(
            "POST",
            &format!("{}/v1/embeddings", proxy.origin()),
            Some(&unknown_file),
            None,
        ),
    ];
    let out = clients(&work, &calls);
    let recs = up.requests();
    assert_eq!(recs.len(), calls.len(), "{recs:#?}");

    // Invalid JSON: fail-open, forwarded unchanged, marked.
    assert_eq!(out[0]["status"], 200, "{}", out[0]);
    let mark =
        header(&out[0], "x-staleguard").unwrap_or_else(|| panic!("no x-staleguard: {}", out[0]));
    assert!(
        mark.starts_with("passthrough"),
        "invalid JSON marked {mark:?}"
    );
    assert_same_bytes(
        &work,
        rec_body(&recs[0]).as_bytes(),
        invalid,
        "invalid JSON (fail-open)",
    );

    // gzip and zstd: decoded, projected, forwarded plain.
    let want = project(&work, &chat_bytes);
    for (i, what) in [(1, "gzip body"), (2, "zstd body")] {
        assert_eq!(out[i]["status"], 200, "{what}: {}", out[i]);
        assert!(collapsed(header(&out[i], "x-staleguard"), what) > 0);
        assert_eq!(
            rec_header(&recs[i], "content-encoding"),
            None,
            "{what}: forwarded with Content-Encoding"
        );
        assert_same_bytes(&work, rec_body(&recs[i]).as_bytes(), &want, what);
    }

    // JSON of unknown shape: byte for byte.
    assert_eq!(out[3]["status"], 200, "{}", out[3]);
    assert_same_bytes(
        &work,
        rec_body(&recs[3]).as_bytes(),
        unknown,
        "JSON of unknown shape",
    );

    // Another path passes through, query included, answer unchanged.
    assert_eq!(out[4]["status"], 200, "{}", out[4]);
    assert_eq!(recs[4]["method"], "GET");
    assert_eq!(recs[4]["path"], "/v1/models?limit=2");
    assert_eq!(
        out[4]["body"], out[5]["body"],
        "GET /v1/models answer changed"
    );
    assert_eq!(out[4]["headers"]["x-scripted-path"], "/v1/models?limit=2");

    // An upstream 404 on a path the proxy does not rewrite reaches the client as it was.
    assert_eq!(out[6]["status"], 404, "{}", out[6]);
    assert_eq!(recs[6]["path"], "/v1/embeddings");
    assert_same_bytes(
        &work,
        rec_body(&recs[6]).as_bytes(),
        unknown,
        "POST /v1/embeddings",
    );
    assert!(out[6]["body"]
        .as_str()
        .unwrap()
        .contains("no route for POST /v1/embeddings"));
}

#[test]
fn fail_closed_refuses_unparseable_bodies() {
    let work = Work::new("fail_closed");
    let up = start_upstream(0);
    let proxy = start_proxy(&work, Some(&up.origin()), &["--fail-closed"], &[]);
    let invalid: &[u8] = b"{\"model\": \"gpt-4.1\", \"messages\": [";
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        invalid,
    );
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    serde_json::from_slice::<Value>(&r.body).unwrap_or_else(|e| {
        panic!(
            "400 body is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&r.body)
        )
    });
    assert!(up.requests().is_empty(), "fail-closed forwarded the body");

    let bytes = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        &bytes,
    );
    assert_eq!(r.status, 200);
    assert!(collapsed(r.header("x-staleguard"), "after a refused body") > 0);
    assert_eq!(up.requests().len(), 1);
}

/// A model request that is not UTF-8: forwarded byte for byte when failing open, refused
/// with 400 when failing closed.
#[test]
fn bodies_that_are_not_utf8_are_forwarded_as_they_came_or_refused() {
    let work = Work::new("not_utf8");
    let up = start_upstream(0);
    let body: &[u8] = b"{\"model\":\"gpt-4.1\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3\xa9 \xff \xe2\x82\"}]}";
    let json = [("Content-Type", "application/json")];
    let open = start_proxy(&work, Some(&up.origin()), &[], &[]);
    let r = http(open.port, "POST", "/v1/chat/completions", &json, body);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mark = r.header("x-staleguard").unwrap_or_default();
    assert!(mark.starts_with("passthrough"), "marked {mark:?}");
    let recs = up.requests();
    assert_eq!(recs.len(), 1);
    let sent = recs[0]["body_b64"].as_str().expect("body_b64");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(sent)
        .expect("base64");
    assert_eq!(sent, body, "forwarded bytes differ");

    let closed = start_proxy(&work, Some(&up.origin()), &["--fail-closed"], &[]);
    let r = http(closed.port, "POST", "/v1/chat/completions", &json, body);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        String::from_utf8_lossy(&r.body).contains("not UTF-8"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(up.requests().len(), 1, "fail-closed forwarded the body");
}

#[test]
fn bodies_over_the_limit_get_413() {
    let work = Work::new("too_big");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--max-body-bytes", "1000"],
        &[],
    );
    let bytes = fs::read(fixture("pwmcp-0.0.41/order.openai.json")).unwrap();
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        &bytes,
    );
    assert_eq!(
        r.status,
        413,
        "{} byte body with --max-body-bytes 1000",
        bytes.len()
    );
    assert!(up.requests().is_empty(), "an oversized body was forwarded");

    let small = br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"small"}]}"#;
    let r = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        &[("Content-Type", "application/json")],
        small,
    );
    assert_eq!(r.status, 200, "a small body after a 413");
    assert_eq!(up.requests().len(), 1);
}

/// A gzip body under the limit that decodes to far more than the limit is never decoded
/// and forwarded: the proxy refuses it with 413, as it refuses a plain body over the limit.
#[test]
fn compressed_bodies_are_limited_after_decoding() {
    let work = Work::new("gzip_bomb");
    let up = start_upstream(0);
    let proxy = start_proxy(
        &work,
        Some(&up.origin()),
        &["--max-body-bytes", "1000"],
        &[],
    );
    let padding = " ".repeat(200_000);
    let body =
        format!(r#"{{"model":"gpt-4.1","messages":[{{"role":"user","content":"{padding}"}}]}}"#);
    let file = work.file("bomb.json", body.as_bytes());
    let url = format!("{}/v1/chat/completions", proxy.origin());
    let small = work.file(
        "small.json",
        br#"{"model":"gpt-4.1","messages":[{"role":"user","content":"small"}]}"#,
    );
    let out = clients(
        &work,
        &[
            raw("POST", &url, Some(&file), Some("gzip")),
            raw("POST", &url, Some(&small), None),
        ],
    );
    let recs = up.requests();
    let what = format!(
        "gzip body decoding to {} bytes with --max-body-bytes 1000",
        body.len()
    );
    assert_eq!(out[0]["status"], 413, "{what}: {}", out[0]);
    assert_eq!(recs.len(), 1, "{what}: refused, yet forwarded");
    assert_eq!(
        out[1]["status"], 200,
        "a small body after the gzip bomb: {}",
        out[1]
    );
}
