//! SPEC 9: what stays frozen from turn to turn (C1) on every recording in the OpenAI,
//! Anthropic and Gemini request formats, and the `cache_control` breakpoint of our own in
//! Anthropic requests.

mod support;

use serde_json::{json, Value};
use staleguard::{Breakpoint, RequestFormat};
use support::formats::{chat_to_gemini, project_as, strip_new_breakpoints, GeminiClient};
use support::*;

/// The requests an agent sent during a recorded session: the body cut before every
/// assistant turn, and the whole body.
fn turns(body: &str) -> Vec<String> {
    let list = messages(body);
    let mut cuts: Vec<usize> = (1..list.len())
        .filter(|&i| list[i]["role"] == "assistant" && list[i - 1]["role"] != "assistant")
        .collect();
    cuts.push(list.len());
    cuts.into_iter().map(|n| truncate(body, n)).collect()
}

/// The projected messages, without the breakpoint of ours (providers do not bill a marker
/// as content, and it moves with the frozen end on every turn).
fn frozen_view(input: &str, p: &staleguard::Projection) -> Vec<Value> {
    let before: Value = serde_json::from_str(input).expect("JSON");
    let mut after: Value = serde_json::from_str(&p.body).expect("JSON");
    strip_new_breakpoints(&before, &mut after);
    after["messages"].as_array().cloned().unwrap_or_default()
}

/// C1: if request B extends request A, projected(B) is identical to projected(A) up to the
/// start of A's live page state or of A's newest browser result, whichever comes first. On
/// every pair of turns of every recording, OpenAI and Anthropic bodies.
#[test]
fn history_stays_frozen_on_every_turn_of_every_recording() {
    let mut pairs = 0;
    for path in openai_fixtures() {
        let anthropic = path.with_file_name(
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .replace(".openai.json", ".anthropic.json"),
        );
        let mut bodies = vec![read(&path)];
        if anthropic.exists() {
            bodies.push(read(&anthropic));
        }
        for body in bodies {
            let requests = turns(&body);
            let projected: Vec<_> = requests
                .iter()
                .map(|r| (r, project_as(r, RequestFormat::Auto)))
                .collect();
            for (k, (a_in, a)) in projected.iter().enumerate() {
                let frozen = frozen_view(a_in, a);
                let stop = frozen_message(a).min(frozen.len());
                for (b_in, b) in &projected[k + 1..] {
                    let later = frozen_view(b_in, b);
                    assert_eq!(
                        frozen[..stop],
                        later[..stop],
                        "{}: turn {k} changed before message {stop}",
                        path.display()
                    );
                    pairs += 1;
                }
            }
        }
    }
    assert!(pairs > 500, "{pairs} pairs of turns checked");
}

/// C1 on Gemini bodies: every recording as Gemini CLI writes it, cut before every model
/// turn; `contents` stay frozen up to A's frozen end.
#[test]
fn gemini_history_stays_frozen_on_every_turn_of_every_recording() {
    let mut pairs = 0;
    for path in openai_fixtures() {
        let body = chat_to_gemini(&read(&path), GeminiClient::Cli);
        let v: Value = serde_json::from_str(&body).expect("JSON");
        let list = v["contents"].as_array().cloned().unwrap_or_default();
        let mut cuts: Vec<usize> = (1..list.len())
            .filter(|&i| list[i]["role"] == "model")
            .collect();
        cuts.push(list.len());
        let projected: Vec<_> = cuts
            .into_iter()
            .map(|n| {
                let mut cut = v.clone();
                cut["contents"] = Value::Array(list[..n].to_vec());
                project_as(&cut.to_string(), RequestFormat::Auto)
            })
            .collect();
        let contents = |p: &staleguard::Projection| {
            let out: Value = serde_json::from_str(&p.body).expect("JSON");
            out["contents"].as_array().cloned().unwrap_or_default()
        };
        for (k, a) in projected.iter().enumerate() {
            assert_eq!(a.format, RequestFormat::Gemini);
            let frozen = contents(a);
            let stop = frozen_message(a).min(frozen.len());
            for b in &projected[k + 1..] {
                assert_eq!(
                    frozen[..stop],
                    contents(b)[..stop],
                    "{}: turn {k} changed before content {stop}",
                    path.display()
                );
                pairs += 1;
            }
        }
    }
    assert!(pairs > 250, "{pairs} pairs of turns checked");
}

/// An Anthropic request gains one breakpoint, on the block just before its newest browser
/// result; projecting it again changes nothing.
#[test]
fn the_breakpoint_goes_just_before_the_newest_page() {
    let body = read(&fixtures().join("pwmcp-0.0.41/order.anthropic.json"));
    let cut = turns(&body)[6].clone();
    let p = project_as(&cut, RequestFormat::Anthropic);
    let Some(Breakpoint::Added(_)) = p.breakpoint else {
        panic!("no breakpoint: {:?}", p.breakpoint);
    };
    let before: Value = serde_json::from_str(&cut).unwrap();
    let after: Value = serde_json::from_str(&p.body).unwrap();
    let frozen = frozen_message(&p);
    // The block before the frozen end is the last block of the message before it.
    let marked = after["messages"][frozen - 1]["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .expect("a block");
    assert_eq!(marked["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(marked["type"], "tool_use");
    let mut stripped = after.clone();
    assert_eq!(strip_new_breakpoints(&before, &mut stripped), 1);
    let again = project_as(&p.body, RequestFormat::Anthropic);
    assert_eq!(again.body, p.body, "idempotent");
    assert!(matches!(
        again.breakpoint,
        Some(Breakpoint::AlreadyThere(_))
    ));
}

/// Four breakpoints of the client's own: no room for ours, and none moved or dropped.
#[test]
fn no_room_leaves_the_clients_breakpoints_alone() {
    let body = read(&fixtures().join("pwmcp-0.0.41/order.anthropic.json"));
    let mut v: Value = serde_json::from_str(&body).unwrap();
    v["system"] = json!([{"type": "text", "text": "You drive a browser.", "cache_control": {"type": "ephemeral"}}]);
    let tools = v["tools"].as_array_mut().expect("tools");
    tools[0]["cache_control"] = json!({"type": "ephemeral"});
    tools[1]["cache_control"] = json!({"type": "ephemeral"});
    let list = v["messages"].as_array_mut().unwrap();
    let last = list.last_mut().unwrap();
    last["content"] = json!([{"type": "text", "text": "Which confirmation number should I keep?", "cache_control": {"type": "ephemeral"}}]);
    let body = v.to_string();
    let p = project_as(&body, RequestFormat::Anthropic);
    assert_eq!(p.breakpoint, Some(Breakpoint::NoRoom));
    let after: Value = serde_json::from_str(&p.body).unwrap();
    assert_eq!(formats::breakpoints(&after), 4);
    let mut stripped = after.clone();
    assert_eq!(strip_new_breakpoints(&v, &mut stripped), 0);
}

/// A thinking block may not carry a breakpoint: ours goes on the nearest block before it
/// that may.
#[test]
fn the_breakpoint_skips_thinking_blocks() {
    let chat = messages(&read(&fixtures().join("pwmcp-0.0.41/order.openai.json")));
    let page = chat[3]["content"].as_str().expect("a page").to_string();
    let body = json!({
        "model": "claude", "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Open the page."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "browser_navigate", "input": {}},
                {"type": "redacted_thinking", "data": "x"},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": page},
            ]},
        ]
    });
    let p = project_as(&body.to_string(), RequestFormat::Anthropic);
    assert!(
        matches!(p.breakpoint, Some(Breakpoint::Added(_))),
        "{:?}",
        p.breakpoint
    );
    let after: Value = serde_json::from_str(&p.body).unwrap();
    let blocks = &after["messages"][1]["content"];
    assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
    assert!(blocks[1]["cache_control"].is_null());
}
