//! The same suite over the four wire formats: recorded Anthropic bodies, Responses and
//! Gemini bodies built from the recorded sessions, and generated transcripts.

mod support;

use proptest::prelude::*;
use serde_json::Value;
use staleguard::{RequestFormat, Status};
use support::formats::*;
use support::*;

fn versions() -> Vec<std::path::PathBuf> {
    vec![
        fixtures().join("pwmcp-0.0.41"),
        fixtures().join("pwmcp-0.0.83"),
    ]
}

fn collapsed_ids(p: &staleguard::Projection) -> Vec<String> {
    p.report()
        .results
        .iter()
        .filter(|r| r.status == Status::Collapsed)
        .map(|r| r.observation_id.to_string())
        .collect()
}

/// The guard's verdict on every browser call, by call ID.
fn verdicts(body: &str) -> Vec<(String, bool)> {
    let t = staleguard::internal::adapter::read_transcript(body).expect("reads");
    support::verdicts(&t, &on())
        .into_iter()
        .filter_map(|(item, v)| match &t.items[item] {
            staleguard::internal::transcript::Item::Call(c) => {
                Some((c.id.to_string(), v.is_allowed()))
            }
            _ => None,
        })
        .collect()
}

fn stall_steps(body: &str) -> Vec<u32> {
    let t = staleguard::internal::adapter::read_transcript(body).expect("reads");
    support::track(&t, &on())
        .steps
        .iter()
        .map(|s| s.no_progress)
        .collect()
}

#[test]
fn anthropic_and_responses_match_openai_on_every_recorded_session() {
    for dir in versions() {
        for scenario in SCENARIOS {
            let chat = read(&dir.join(format!("{scenario}.openai.json")));
            let anthropic = read(&dir.join(format!("{scenario}.anthropic.json")));
            let responses = chat_to_responses(&chat);
            let name = format!("{}/{scenario}", dir.display());
            let pc = project_as(&chat, RequestFormat::Auto);
            let pa = project_as(&anthropic, RequestFormat::Auto);
            let pr = project_as(&responses, RequestFormat::Auto);
            assert_eq!(
                (pa.format, pr.format),
                (RequestFormat::Anthropic, RequestFormat::Responses),
                "{name}"
            );
            check_any(&chat, &pc, RequestFormat::Auto);
            check_any(&anthropic, &pa, RequestFormat::Auto);
            check_any(&responses, &pr, RequestFormat::Auto);
            assert!(!collapsed_ids(&pc).is_empty(), "{name}");
            assert_eq!(
                collapsed_ids(&pa),
                collapsed_ids(&pc),
                "{name}: same observations collapse"
            );
            assert_eq!(collapsed_ids(&pr), collapsed_ids(&pc), "{name}");
            assert_eq!(
                pa.evidence.retained, pc.evidence.retained,
                "{name}: same evidence"
            );
            assert_eq!(pr.evidence.retained, pc.evidence.retained, "{name}");
            assert_eq!(
                stall_steps(&anthropic),
                stall_steps(&chat),
                "{name}: stalls at the same steps"
            );
            assert_eq!(stall_steps(&responses), stall_steps(&chat), "{name}");
            assert_eq!(
                verdicts(&anthropic),
                verdicts(&chat),
                "{name}: the guard says the same"
            );
            assert_eq!(verdicts(&responses), verdicts(&chat), "{name}");
        }
    }
}

/// The guard's verdicts alone, in call order: Gemini calls without an `id` get ids of
/// their own.
fn allowed(body: &str) -> Vec<bool> {
    verdicts(body)
        .into_iter()
        .map(|(_, allowed)| allowed)
        .collect()
}

#[test]
fn gemini_matches_openai_on_every_recorded_session_as_each_client_writes_it() {
    let clients = [
        GeminiClient::Cli,
        GeminiClient::PythonMcp,
        GeminiClient::WithIds,
    ];
    for dir in versions() {
        for scenario in SCENARIOS {
            let chat = read(&dir.join(format!("{scenario}.openai.json")));
            let pc = project_as(&chat, RequestFormat::Auto);
            for client in clients {
                let gemini = chat_to_gemini(&chat, client);
                let name = format!("{}/{scenario} {client:?}", dir.display());
                let pg = project_as(&gemini, RequestFormat::Auto);
                assert_eq!(pg.format, RequestFormat::Gemini, "{name}");
                assert_eq!(pg.breakpoint, None, "{name}: Gemini has no breakpoints");
                check_any(&gemini, &pg, RequestFormat::Auto);
                check_any(
                    &gemini,
                    &project_as(&gemini, RequestFormat::Gemini),
                    RequestFormat::Gemini,
                );
                assert_eq!(
                    collapsed_ids(&pg),
                    collapsed_ids(&pc),
                    "{name}: same observations collapse"
                );
                assert_eq!(
                    pg.evidence.retained, pc.evidence.retained,
                    "{name}: same evidence"
                );
                assert_eq!(
                    stall_steps(&gemini),
                    stall_steps(&chat),
                    "{name}: stalls at the same steps"
                );
                assert_eq!(
                    allowed(&gemini),
                    allowed(&chat),
                    "{name}: the guard says the same"
                );
                if client == GeminiClient::WithIds {
                    assert_eq!(verdicts(&gemini), verdicts(&chat), "{name}");
                }
            }
        }
    }
}

#[test]
fn gemini_keeps_everything_but_result_values() {
    let chat = read(&fixtures().join("pwmcp-0.0.83/order.openai.json"));
    let body = chat_to_gemini(&chat, GeminiClient::Cli);
    let mut v: Value = serde_json::from_str(&body).unwrap();
    v["cachedContent"] = "cachedContents/abc123".into();
    let results = response_contents(&v);
    // A key of the client's own beside the text, and a result in a shape we do not read.
    let first = &mut v["contents"][results[0]]["parts"][0]["functionResponse"]["response"];
    first["__binary_injection__"] = serde_json::json!([]);
    let odd = &mut v["contents"][results[1]]["parts"][0]["functionResponse"]["response"];
    *odd = serde_json::json!({"rows": odd["output"].take()});
    let body = v.to_string();
    let p = project_as(&body, RequestFormat::Auto);
    check_any(&body, &p, RequestFormat::Auto);
    assert!(
        p.server_side_history,
        "cachedContent holds the earlier turns"
    );
    assert!(p.report().collapsed() > 0);
    let out: Value = serde_json::from_str(&p.body).unwrap();
    for key in [
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "cachedContent",
    ] {
        assert_eq!(out[key], v[key], "{key}");
    }
    let first = &out["contents"][results[0]]["parts"][0]["functionResponse"]["response"];
    assert_eq!(first["__binary_injection__"], serde_json::json!([]));
    assert_eq!(
        out["contents"][results[1]], v["contents"][results[1]],
        "text under a key no client uses for it is kept"
    );
    let signatures = |v: &Value| v.to_string().matches("thoughtSignature").count();
    assert_eq!(signatures(&out), signatures(&v));
    // Python's MCP results are collapsed inside their CallToolResult, `isError` kept.
    let python = chat_to_gemini(&chat, GeminiClient::PythonMcp);
    let out: Value = serde_json::from_str(&project_as(&python, RequestFormat::Auto).body).unwrap();
    let receipts: Vec<&Value> = response_contents(&out)
        .into_iter()
        .flat_map(|i| out["contents"][i]["parts"].as_array().unwrap())
        .map(|p| &p["functionResponse"]["response"]["result"])
        .filter(|r| {
            r["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with(staleguard::RECEIPT_TAG))
        })
        .collect();
    assert!(!receipts.is_empty());
    assert!(receipts.iter().all(|r| r["isError"] == false));
}

/// Screenshots as Gemini CLI sends them: inside the response (`parts`, Gemini 3 models) or
/// as parts after it (older models). A collapsed result keeps neither and its receipt
/// counts them; results that stay keep theirs; all else is kept; projecting again changes
/// nothing.
#[test]
fn gemini_media_of_collapsed_results_are_dropped() {
    let chat = read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
    let body = chat_to_gemini(&chat, GeminiClient::Cli);
    let mut v: Value = serde_json::from_str(&body).unwrap();
    let results = response_contents(&v);
    let png = serde_json::json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo"}});
    let file =
        serde_json::json!({"fileData": {"mimeType": "image/png", "fileUri": "gs://b/shot.png"}});
    // navigate (collapses), the two typings (no page: kept), the review click (collapses),
    // and the newest page (live).
    let (inside, typed, after, live) =
        (results[0], results[1], results[2], *results.last().unwrap());
    v["contents"][inside]["parts"][0]["functionResponse"]["parts"] = serde_json::json!([png, png]);
    for at in [typed, after, live] {
        let parts = v["contents"][at]["parts"].as_array_mut().unwrap();
        parts.insert(1, png.clone());
        parts.insert(2, file.clone());
    }
    let body = v.to_string();
    let p = project_as(&body, RequestFormat::Auto);
    let out: Value = serde_json::from_str(&p.body).expect("valid JSON");
    let output = |at: usize| {
        out["contents"][at]["parts"][0]["functionResponse"]["response"]["output"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    for at in [inside, after] {
        assert!(
            output(at).starts_with(staleguard::RECEIPT_TAG),
            "{}",
            output(at)
        );
        assert!(output(at).contains("images_dropped=2"), "{}", output(at));
    }
    // What the output should be: the input without those media, with every response as
    // projected.
    let mut expected = v.clone();
    expected["contents"][inside]["parts"][0]["functionResponse"]["parts"] = serde_json::json!([]);
    expected["contents"][after]["parts"]
        .as_array_mut()
        .unwrap()
        .drain(1..3);
    for at in &results {
        let parts = expected["contents"][*at]["parts"].as_array_mut().unwrap();
        for (i, part) in parts.iter_mut().enumerate() {
            if !part["functionResponse"].is_null() {
                part["functionResponse"]["response"] =
                    out["contents"][*at]["parts"][i]["functionResponse"]["response"].clone();
            }
        }
    }
    assert_eq!(out, expected);
    // The newest keeps its media and its text (a follow-up's quotes may follow that text).
    let (got, sent) = (
        &out["contents"][live]["parts"],
        &v["contents"][live]["parts"],
    );
    assert_eq!(got.as_array().unwrap()[1..], sent.as_array().unwrap()[1..]);
    let own = &sent[0]["functionResponse"]["response"]["output"];
    let kept = &got[0]["functionResponse"]["response"]["output"];
    assert!(
        kept == own || kept[0]["text"] == *own,
        "the newest keeps its text"
    );
    assert_eq!(
        out["contents"][typed], v["contents"][typed],
        "no page, nothing collapsed"
    );
    let again = project_as(&p.body, RequestFormat::Auto);
    assert_eq!(again.body, p.body, "idempotent");
}

/// Gemini Code Assist (Gemini CLI signed in with Google) wraps the request in
/// `{"model", "project", "user_prompt_id", "request"}`: the inner request is projected as the
/// bare one is, every other key and byte is kept, and the format is told from the body.
#[test]
fn gemini_code_assist_bodies_are_projected_inside_their_wrapper() {
    let chat = read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
    let bare = chat_to_gemini(&chat, GeminiClient::Cli);
    let body = format!(
        r#"{{"model":"gemini-2.5-pro","project":"p-1","user_prompt_id":"u-7","request":{bare},"enabled_credit_types":[]}}"#
    );
    let p = project_as(&body, RequestFormat::Auto);
    assert_eq!(p.format, RequestFormat::Gemini);
    assert!(
        p.format_reason.contains("Code Assist"),
        "{}",
        p.format_reason
    );
    let alone = project_as(&bare, RequestFormat::Gemini);
    assert!(alone.report().collapsed() > 0);
    assert_eq!(p.report().collapsed(), alone.report().collapsed());
    let want = format!(
        r#"{{"model":"gemini-2.5-pro","project":"p-1","user_prompt_id":"u-7","request":{},"enabled_credit_types":[]}}"#,
        alone.body
    );
    assert_eq!(p.body, want);
    assert_eq!(
        project_as(&p.body, RequestFormat::Gemini).body,
        p.body,
        "idempotent"
    );
    // A wrapper whose request is not a Gemini one is no Gemini body.
    let err = project_on(r#"{"request":{"contents":"x"}}"#, RequestFormat::Auto);
    assert!(err.is_err());
}

/// The indices of the contents that carry function responses.
fn response_contents(v: &Value) -> Vec<usize> {
    (0..v["contents"].as_array().unwrap().len())
        .filter(|&i| !v["contents"][i]["parts"][0]["functionResponse"].is_null())
        .collect()
}

#[test]
fn gemini_shapes_that_are_not_requests_are_clear_errors() {
    let err = project_on("{\"messages\":[]}", RequestFormat::Gemini).unwrap_err();
    assert!(err.to_string().contains("no `contents`"), "{err}");
    // `contents` whose items have no `parts` is not told to be Gemini.
    let err = project_on("{\"contents\":[{\"text\":\"x\"}]}", RequestFormat::Auto).unwrap_err();
    assert!(err.to_string().contains("nor `contents`"), "{err}");
    assert_eq!("Gemini".parse::<RequestFormat>(), Ok(RequestFormat::Gemini));
    // Odd contents, parts and responses are kept byte for byte; the rest is projected.
    let chat = read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
    let mut v: Value = serde_json::from_str(&chat_to_gemini(&chat, GeminiClient::Cli)).unwrap();
    let odd = serde_json::json!([null, 3, {"role": 7, "parts": []}, {"role": "user", "parts": "x"},
        {"role": "user", "parts": [null, {"functionResponse": {"name": "browser_click", "response": 5}},
        {"functionResponse": {"name": "nobody", "response": {"output": "orphan"}}}, {"functionCall": {"name": "x"}}]},
        {"role": "model", "parts": [{"functionCall": {"args": {}}}, {"functionResponse": {"name": "y", "response": {"output": "z"}}}]},
        {"role": "user", "parts": [{"text": 5}, {"inlineData": {"data": "x"}}]},
        {"role": "user", "parts": [{"inlineData": {"data": "x"}}, {"functionResponse": {"name": "z", "response": {"output": "q"}, "parts": 3}}]}]);
    let contents = v["contents"].as_array_mut().unwrap();
    for (k, item) in odd.as_array().unwrap().iter().enumerate() {
        contents.insert(1 + k, item.clone());
    }
    let body = v.to_string();
    let p = project_as(&body, RequestFormat::Auto);
    assert_eq!(p.format, RequestFormat::Gemini);
    assert!(p.report().collapsed() > 0);
    check_any(&body, &p, RequestFormat::Auto);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A Gemini body cut and spliced anywhere never panics, and what is projected is JSON.
    #[test]
    fn damaged_gemini_bodies_never_panic(cut in 0usize..30_000, junk in ".{0,8}") {
        let chat = read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
        let body = chat_to_gemini(&chat, GeminiClient::PythonMcp);
        let mut at = cut.min(body.len());
        while !body.is_char_boundary(at) {
            at -= 1;
        }
        let damaged = format!("{}{}{}", &body[..at], junk, &body[at..]);
        for format in [RequestFormat::Auto, RequestFormat::Gemini] {
            if let Ok(p) = project_on(&damaged, format) {
                prop_assert!(serde_json::from_str::<Value>(&p.body).is_ok());
            }
        }
    }
}

#[test]
fn anthropic_keeps_ids_errors_cache_control_system_and_thinking() {
    let path = fixtures().join("pwmcp-0.0.41/order.anthropic.json");
    let mut v: Value = serde_json::from_str(&read(&path)).unwrap();
    v["system"] = serde_json::json!([{"type": "text", "text": "You drive a browser.", "cache_control": {"type": "ephemeral"}}]);
    v["context_management"] = serde_json::json!({"edits": [{"type": "clear_tool_uses_20250919"}]});
    let messages = v["messages"].as_array_mut().unwrap();
    let first_result = messages
        .iter()
        .position(|m| m["content"][0]["type"] == "tool_result")
        .unwrap();
    // The first result as blocks with a cache breakpoint on the block and inside it.
    let block = &mut messages[first_result]["content"][0];
    let text = block["content"].as_str().unwrap().to_string();
    block["content"] = serde_json::json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]);
    block["cache_control"] = serde_json::json!({"type": "ephemeral"});
    let first_call = messages
        .iter()
        .position(|m| m["role"] == "assistant")
        .unwrap();
    messages[first_call]["content"].as_array_mut().unwrap().insert(0, serde_json::json!({"type": "thinking", "thinking": "Open the form.", "signature": "EqQBCgIYAhIM"}));
    let body = v.to_string();
    let p = project_as(&body, RequestFormat::Auto);
    check_any(&body, &p, RequestFormat::Auto);
    let out: Value = serde_json::from_str(&p.body).unwrap();
    let block = &out["messages"][first_result]["content"][0];
    assert_eq!(
        block["cache_control"],
        serde_json::json!({"type": "ephemeral"})
    );
    assert_eq!(
        block["content"].as_array().unwrap().len(),
        1,
        "the image is dropped"
    );
    assert_eq!(
        block["content"][0]["cache_control"],
        serde_json::json!({"type": "ephemeral"}),
        "inner cache control kept"
    );
    assert!(block["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("images_dropped=1"));
    assert_eq!(out["system"], v["system"]);
    assert_eq!(out["context_management"], v["context_management"]);
    assert_eq!(
        out["messages"][first_call]["content"][0],
        v["messages"][first_call]["content"][0]
    );
    let errors = |v: &Value| v.to_string().matches("\"is_error\":true").count();
    assert_eq!(errors(&out), errors(&v));
}

#[test]
fn responses_keep_reasoning_and_handle_server_side_history() {
    let chat = read(&fixtures().join("pwmcp-0.0.83/research.openai.json"));
    let body = chat_to_responses(&chat);
    let p = project_as(&body, RequestFormat::Auto);
    check_any(&body, &p, RequestFormat::Auto);
    let out: Value = serde_json::from_str(&p.body).unwrap();
    let reasoning = |v: &Value| {
        v["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "reasoning")
            .cloned()
            .collect::<Vec<_>>()
    };
    let original: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reasoning(&out), reasoning(&original));
    assert!(!p.server_side_history);
    // A follow-up turn: the older history is on the server; only the newest items are sent.
    let mut follow: Value = serde_json::from_str(&body).unwrap();
    let items = follow["input"].as_array().unwrap().clone();
    let tail = items.len() - 5;
    follow["input"] = Value::Array(items[tail..].to_vec());
    follow["previous_response_id"] = "resp_123".into();
    let follow = follow.to_string();
    let p = project_as(&follow, RequestFormat::Auto);
    assert!(p.server_side_history);
    check_any(&follow, &p, RequestFormat::Auto);
}

#[test]
fn nothing_to_collapse_round_trips_byte_for_byte() {
    let chat = read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
    let anthropic = read(&fixtures().join("pwmcp-0.0.41/order.anthropic.json"));
    let cut = |body: &str, list: &str, keep: usize| {
        let mut v: Value = serde_json::from_str(body).unwrap();
        v[list].as_array_mut().unwrap().truncate(keep);
        // Pretty-printed, with its own key order, to see that bytes, not values, are kept.
        serde_json::to_string_pretty(&v).unwrap()
    };
    let responses = chat_to_responses(&chat);
    let gemini = chat_to_gemini(&chat, GeminiClient::Cli);
    for (body, format) in [
        (cut(&chat, "messages", 4), RequestFormat::OpenAiChat),
        (cut(&anthropic, "messages", 3), RequestFormat::Anthropic),
        (cut(&responses, "input", 5), RequestFormat::Responses),
        (cut(&gemini, "contents", 3), RequestFormat::Gemini),
    ] {
        let p = project_as(&body, RequestFormat::Auto);
        assert_eq!(p.format, format);
        assert_eq!(p.report().collapsed(), 0);
        // Anthropic requests gain one breakpoint of ours before the newest browser result,
        // so that the next turn, which collapses it, still reads all before it from the cache.
        let expected = match format {
            RequestFormat::Anthropic => {
                assert!(matches!(
                    p.breakpoint,
                    Some(staleguard::Breakpoint::Added(_))
                ));
                without_our_breakpoint(&body, &p.body)
            }
            _ => p.body.to_string(),
        };
        assert_eq!(expected, body, "{format:?}");
    }
}

/// A generated session in all four formats, from real recorded results.
fn four_formats(steps: &[(usize, u8)]) -> Vec<(String, RequestFormat)> {
    let chat = support_build(steps);
    let v: Value = serde_json::from_str(&chat).unwrap();
    let mut messages = Vec::new();
    for m in v["messages"].as_array().unwrap() {
        match m["role"].as_str() {
            Some("assistant") => {
                let calls: Vec<Value> = m["tool_calls"].as_array().unwrap().iter().map(|c| serde_json::json!({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": {}})).collect();
                messages.push(serde_json::json!({"role": "assistant", "content": calls}));
            }
            Some("tool") => messages.push(serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}]})),
            _ => messages.push(m.clone()),
        }
    }
    let anthropic =
        serde_json::json!({"model": "claude", "max_tokens": 1024, "messages": messages})
            .to_string();
    let responses = chat_to_responses(&chat);
    let gemini = chat_to_gemini(&chat, GeminiClient::Cli);
    vec![
        (chat, RequestFormat::OpenAiChat),
        (anthropic, RequestFormat::Anthropic),
        (responses, RequestFormat::Responses),
        (gemini, RequestFormat::Gemini),
    ]
}

fn support_build(steps: &[(usize, u8)]) -> String {
    let pool = pool();
    let mut messages = vec![serde_json::json!({"role": "user", "content": "do the task"})];
    for &(i, id) in steps {
        let (name, text) = &pool[i % pool.len()];
        let id = format!("call_{id}");
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": text}));
    }
    serde_json::json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

fn pool() -> Vec<(String, String)> {
    let mut pool = Vec::new();
    for dir in versions() {
        for s in ["order", "rerender", "tabs_iframe"] {
            let body = read(&dir.join(format!("{s}.openai.json")));
            let msgs = messages(&body);
            let names: std::collections::HashMap<String, String> = msgs
                .iter()
                .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
                .map(|c| {
                    (
                        c["id"].as_str().unwrap_or("").to_string(),
                        c["function"]["name"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            for m in msgs.iter().filter(|m| m["role"] == "tool") {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                pool.push((
                    names.get(id).cloned().unwrap_or_default(),
                    m["content"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    pool
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn pairing_and_order_hold_in_every_format(steps in prop::collection::vec((any::<usize>(), 0u8..10), 1..16)) {
        let mut collapsed = Vec::new();
        for (body, format) in four_formats(&steps) {
            let p = project_as(&body, RequestFormat::Auto);
            prop_assert_eq!(p.format, format);
            check_any(&body, &p, RequestFormat::Auto);
            collapsed.push(collapsed_ids(&p));
        }
        prop_assert_eq!(&collapsed[0], &collapsed[1]);
        prop_assert_eq!(&collapsed[0], &collapsed[2]);
        prop_assert_eq!(&collapsed[0], &collapsed[3]);
    }
}

#[test]
fn chat_variants_parts_legacy_functions_custom_calls_and_wrapped_text() {
    let tree = |title: &str| {
        format!("### Page\n- Page URL: http://a.test/{title}\n- Page Title: {title}\n### Snapshot\n```yaml\n- button \"Go {title}\" [ref=e1]\n```")
    };
    let wrapped = serde_json::json!({"type": "text", "text": tree("C")}).to_string();
    let body = serde_json::json!({"model": "gpt-4.1", "messages": [
        {"role": "assistant", "content": null, "function_call": {"name": "browser_snapshot", "arguments": "{}"}},
        {"role": "function", "name": "browser_snapshot", "content": [{"type": "text", "text": tree("A")}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "custom", "custom": {"name": "browser_navigate", "input": "http://a.test/B"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": tree("B")}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "mcp__playwright__browser_click", "arguments": "{\"ref\":\"e1\"}"}}]},
        {"role": "tool", "tool_call_id": "c3", "content": wrapped},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c4", "type": "function", "function": {"name": "browser_snapshot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c4", "content": tree("D")},
    ]})
    .to_string();
    let p = project_as(&body, RequestFormat::Auto);
    check_any(&body, &p, RequestFormat::Auto);
    let statuses: Vec<Status> = p.report().results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            Status::Collapsed,
            Status::Collapsed,
            Status::Collapsed,
            Status::Live
        ]
    );
    let out: Value = serde_json::from_str(&p.body).unwrap();
    assert!(out["messages"][1]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("[staleguard receipt]"));
    assert_eq!(
        out["messages"][3]["content"].as_array().unwrap().len(),
        1,
        "image dropped"
    );
    assert!(out["messages"][3]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("images_dropped=1"));
    // The wrapped result stays wrapped: a string holding a text part.
    let inner: Value =
        serde_json::from_str(out["messages"][5]["content"].as_str().unwrap()).unwrap();
    assert_eq!(inner["type"], "text");
    assert!(inner["text"]
        .as_str()
        .unwrap()
        .starts_with("[staleguard receipt]"));
}
