//! What the targets assert about a projection, as the crate's tests assert it about the
//! recorded sessions (`crates/staleguard/tests/support/formats.rs`).

use serde_json::Value;
use staleguard::{Config, Options, Projection, RequestFormat, Status};

/// Whether `body` is JSON by the grammar of RFC 8259, which allows a `\uXXXX` escape of a
/// lone surrogate (the core reads one as U+FFFD and writes it back as it came); serde_json
/// refuses it, so every surrogate escape is read as `\ufffd` first.
pub fn is_json(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(&surrogates_replaced(body)).is_ok()
}

/// `body` with every `\uD800`-`\uDFFF` escape as `\ufffd`; other escapes (`\\` too) as
/// they are. Outside a string a backslash is no JSON anyway, so strings need no tracking.
fn surrogates_replaced(body: &str) -> std::borrow::Cow<'_, str> {
    if !body.contains("\\u") {
        return body.into();
    }
    let b = body.as_bytes();
    let mut out = String::with_capacity(body.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let hex = body.get(i + 2..i + 6).filter(|_| b.get(i + 1) == Some(&b'u'));
        let code = hex.and_then(|h| u32::from_str_radix(h, 16).ok());
        if code.is_some_and(|c| (0xD800..=0xDFFF).contains(&c)) {
            out.push_str(&body[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
            i += 6;
        } else {
            i += 2;
        }
    }
    out.push_str(&body[copied.min(body.len())..]);
    out.into()
}

/// The config the fixture tests project under: compaction on, the rest as it comes.
pub fn on() -> Config {
    Config {
        browser_history_compaction: true,
        ..Config::default()
    }
}

/// The observation IDs of the collapsed results, in order.
pub fn collapsed_ids(p: &Projection) -> Vec<String> {
    p.report()
        .results
        .iter()
        .filter(|r| r.status == Status::Collapsed)
        .map(|r| r.observation_id.to_string())
        .collect()
}

/// Whether the guard lets each browser call through, in order.
pub fn allowed(p: &Projection) -> Vec<bool> {
    p.verdicts.iter().map(|v| v.verdict.is_allowed()).collect()
}

/// Asserts that `script` written as an OpenAI Chat body projects as `p` did: the same
/// observations collapse, the same evidence is kept, the guard says the same.
pub fn same_as_chat(
    p: &Projection,
    script: &crate::script::Script,
    config: &Config,
    options: Options,
) {
    let chat = script.chat().to_string();
    let pc = staleguard::project(&chat, RequestFormat::OpenAiChat, config, options)
        .expect("a Chat body projects");
    assert_eq!(
        collapsed_ids(p),
        collapsed_ids(&pc),
        "same observations collapse"
    );
    assert_eq!(p.evidence.retained, pc.evidence.retained, "same evidence");
    assert_eq!(allowed(p), allowed(&pc), "the guard says the same");
}

/// Asserts that two projections of the same body answer alike (what `tests/memo.rs`
/// compares).
pub fn same(a: &Projection, b: &Projection, what: &str) {
    assert_eq!(a.body, b.body, "{what}: body");
    assert_eq!(a.report(), b.report(), "{what}: report");
    assert_eq!(b.collapsed(), b.report().collapsed(), "{what}: collapsed");
    assert_eq!(a.evidence, b.evidence, "{what}: evidence");
    assert_eq!(a.verdicts, b.verdicts, "{what}: verdicts");
    assert_eq!(a.breakpoint, b.breakpoint, "{what}: breakpoint");
    let steps = |p: &Projection| {
        p.progress.as_ref().map(|g| {
            g.steps
                .iter()
                .map(|s| (s.fingerprint, s.no_progress))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(steps(a), steps(b), "{what}: progress");
}

/// JSON pointers to every tool result content: Chat `messages[i].content` of `role: tool`,
/// Anthropic `tool_result` blocks' `content`, Responses `input[i].output`, Gemini
/// `functionResponse.response` text values (inside a Code Assist wrapper too).
pub fn result_slots(v: &Value) -> Vec<String> {
    let mut slots = Vec::new();
    for (i, m) in v["messages"].as_array().into_iter().flatten().enumerate() {
        if m["role"] == "tool" || m["role"] == "function" {
            slots.push(format!("/messages/{i}/content"));
        }
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            if b["type"] == "tool_result" {
                slots.push(format!("/messages/{i}/content/{j}/content"));
            }
        }
    }
    for (i, item) in v["input"].as_array().into_iter().flatten().enumerate() {
        if item["type"] == "function_call_output" || item["type"] == "custom_tool_call_output" {
            slots.push(format!("/input/{i}/output"));
        }
    }
    let (inner, at) = match v.get("contents") {
        None if v["request"]["contents"].is_array() => (&v["request"], "/request"),
        _ => (v, ""),
    };
    for (i, c) in inner["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, p) in c["parts"].as_array().into_iter().flatten().enumerate() {
            let key = ["functionResponse", "function_response"]
                .into_iter()
                .find(|k| !p[k].is_null())
                .unwrap_or("functionResponse");
            let response = &p[key]["response"];
            let slot = format!("{at}/contents/{i}/parts/{j}/{key}/response");
            let found = ["output", "content", "result", "error"]
                .into_iter()
                .find(|k| !response[k].is_null());
            match found {
                Some(k) if response[k].is_object() => slots.push(format!("{slot}/{k}/content")),
                Some(k) => slots.push(format!("{slot}/{k}")),
                None => {}
            }
        }
    }
    slots
}

/// The text of a content value: a string, or its text parts joined.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Every SPEC 2 invariant one projection under `config` (its live page whole) can show, in any format: only result
/// contents change; a changed one is a receipt (with the stale notice, no ref token) or the
/// original with our parts after it; every other byte and key order is kept (but an
/// Anthropic breakpoint of ours); projecting again changes nothing.
pub fn check_any(input: &str, p: &Projection, format: RequestFormat, config: &Config) {
    let before: Value = serde_json::from_str(input).expect("valid JSON in");
    let mut after: Value = serde_json::from_str(&p.body).expect("valid JSON out");
    let slots = result_slots(&before);
    assert_eq!(slots, result_slots(&after), "results stay where they were");
    let mut collapsed = 0;
    for slot in &slots {
        let b = before.pointer(slot).cloned().unwrap_or(Value::Null);
        let a = after.pointer(slot).cloned().unwrap_or(Value::Null);
        if b == a {
            continue;
        }
        let text = text_of(&a);
        // A page's own text may begin with our receipt tag: parts appended after it are
        // still the original with ours after it, not a receipt.
        if text.starts_with(staleguard::RECEIPT_TAG) && !keeps_original(&b, &a) {
            collapsed += 1;
            let receipt = text.lines().next().unwrap_or("");
            assert!(
                receipt.len() <= 200,
                "receipt {} bytes: {receipt}",
                receipt.len()
            );
            let stale = match collapsed {
                1 => staleguard::STALE_NOTICE,
                _ => staleguard::STALE_WORD,
            };
            assert_eq!(text.lines().nth(1), Some(stale), "{text}");
            assert!(
                !staleguard::internal::refs::has_ref_token(&text),
                "ref in {text}"
            );
        } else {
            let parts = a
                .as_array()
                .unwrap_or_else(|| panic!("{slot}: not parts: {a}"));
            let own = match &b {
                Value::Array(own) => {
                    assert_eq!(own[..], parts[..own.len().min(parts.len())], "{slot}");
                    own.len()
                }
                own => {
                    assert_eq!(own, &parts[0]["text"], "{slot}");
                    1
                }
            };
            for part in parts.iter().skip(own) {
                let t = part["text"].as_str().unwrap_or("");
                assert!(
                    staleguard::internal::appendix::is_appendix(t),
                    "not ours: {t}"
                );
                assert!(!staleguard::internal::refs::has_ref_token(t), "ref in {t}");
            }
        }
    }
    assert_eq!(collapsed, p.report().collapsed(), "receipts");
    for slot in &slots {
        if let (Some(a), Some(b)) = (after.pointer_mut(slot), before.pointer(slot)) {
            *a = b.clone();
        }
    }
    let ours = usize::from(matches!(
        p.breakpoint,
        Some(staleguard::Breakpoint::Added(_))
    ));
    assert_eq!(
        strip_new_breakpoints(&before, &mut after),
        ours,
        "one breakpoint of ours at most"
    );
    assert_eq!(
        serde_json::to_string(&before).ok(),
        serde_json::to_string(&after).ok(),
        "all else kept, in order"
    );
    let again = staleguard::project(&p.body, format, config, Options::default())
        .expect("a projected body projects again");
    assert_eq!(again.body, p.body, "idempotent");
}

/// True when result content `after` is `before` with parts after it: `before`'s parts (or
/// its string as the first part's text) come first, unchanged.
fn keeps_original(before: &Value, after: &Value) -> bool {
    let Some(parts) = after.as_array() else {
        return false;
    };
    match before {
        Value::Array(own) => parts.len() > own.len() && parts[..own.len()] == own[..],
        own => parts.len() > 1 && parts[0]["text"] == *own,
    }
}

/// Removes from `after` the `cache_control` of every message content block that has none in
/// `before`; how many there were.
fn strip_new_breakpoints(before: &Value, after: &mut Value) -> usize {
    let mut added = 0;
    let Some(messages) = after.get_mut("messages").and_then(Value::as_array_mut) else {
        return 0;
    };
    for (i, m) in messages.iter_mut().enumerate() {
        let Some(blocks) = m["content"].as_array_mut() else {
            continue;
        };
        for (j, block) in blocks.iter_mut().enumerate() {
            let had = !before["messages"][i]["content"][j]["cache_control"].is_null();
            if let (false, Some(object)) = (had, block.as_object_mut()) {
                added += usize::from(object.remove("cache_control").is_some());
            }
        }
    }
    added
}
