//! Format-neutral test support: where each wire format keeps tool result contents, the
//! SPEC 2 invariant checker for any format, and converters from recorded OpenAI Chat
//! sessions to OpenAI Responses and Gemini bodies.
#![allow(dead_code)]

use serde_json::{json, Value};
use staleguard::{Config, Projection, RequestFormat};

/// JSON pointers to every tool result content, in order: Chat `messages[i].content` of
/// `role: tool`, Anthropic `messages[i].content[j].content` of `tool_result` blocks,
/// Responses `input[i].output` of `function_call_output` items, Gemini
/// `functionResponse.response` text values ([`gemini_slots`]).
pub(crate) fn result_slots(v: &Value) -> Vec<String> {
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
        if item["type"] == "function_call_output" {
            slots.push(format!("/input/{i}/output"));
        }
    }
    gemini_slots(v, &mut slots);
    slots
}

/// The text of a content value (string, text parts joined, or a string holding JSON text
/// parts, as some agent SDKs forward MCP results).
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) if s.contains("\"text\"") => {
                text_of(&match inner {
                    Value::Object(_) => Value::Array(vec![inner]),
                    other => other,
                })
            }
            _ => s.clone(),
        },
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub(crate) fn project_as(body: &str, format: RequestFormat) -> Projection {
    let config = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    staleguard::project(body, format, &config, staleguard::Options::default()).expect("projects")
}

/// Every SPEC 2 invariant one projection can show, for any format: only result contents
/// change; each changed one is a receipt or the original with our parts after it; every
/// other byte and key order is kept; projecting again changes nothing.
pub(crate) fn check_any(input: &str, p: &Projection, format: RequestFormat) {
    let before: Value = serde_json::from_str(input).expect("valid JSON in");
    let mut after: Value = serde_json::from_str(&p.body).expect("valid JSON out");
    let slots = result_slots(&before);
    assert_eq!(slots, result_slots(&after), "results stay where they were");
    let mut collapsed = 0;
    for slot in &slots {
        let (b, a) = (
            &before.pointer(slot).cloned().unwrap(),
            after.pointer(slot).cloned().unwrap(),
        );
        if *b == a {
            continue;
        }
        let text = text_of(&a);
        if text.starts_with(staleguard::RECEIPT_TAG) {
            collapsed += 1;
            let receipt = text.lines().next().unwrap_or("");
            assert!(
                receipt.len() <= 200,
                "receipt {} bytes: {receipt}",
                receipt.len()
            );
            // The full notice in the first collapsed observation only, `stale` after it.
            let stale = match collapsed {
                1 => staleguard::STALE_NOTICE,
                _ => staleguard::STALE_WORD,
            };
            assert_eq!(text.lines().nth(1), Some(stale));
            assert!(!staleguard::internal::refs::has_ref_token(&text), "{text}");
        } else {
            let parts = a.as_array().expect("appended parts");
            let own = match b {
                Value::Array(own) => {
                    assert_eq!(own[..], parts[..own.len()]);
                    own.len()
                }
                own => {
                    assert_eq!(own, &parts[0]["text"]);
                    1
                }
            };
            for part in &parts[own..] {
                let t = part["text"].as_str().unwrap_or("");
                assert!(staleguard::internal::appendix::is_appendix(t), "{t}");
                assert!(!staleguard::internal::refs::has_ref_token(t), "{t}");
            }
        }
    }
    assert_eq!(collapsed, p.report().collapsed());
    for slot in &slots {
        *after.pointer_mut(slot).unwrap() = before.pointer(slot).cloned().unwrap();
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
    if ours == 1 {
        assert!(breakpoints(&before) < staleguard::internal::adapter::MAX_BREAKPOINTS);
    }
    assert_eq!(
        serde_json::to_string(&before).ok(),
        serde_json::to_string(&after).ok(),
        "all else kept, in order"
    );
    let again = project_as(&p.body, format);
    assert_eq!(again.body, p.body, "idempotent");
}

/// Removes from `after` the `cache_control` of every message content block that has none in
/// `before`; how many there were.
pub(crate) fn strip_new_breakpoints(before: &Value, after: &mut Value) -> usize {
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

/// The `cache_control` breakpoints of an Anthropic body: tools, system and message blocks.
pub(crate) fn breakpoints(body: &Value) -> usize {
    let marked = |list: &Value| {
        list.as_array().map_or(0, |l| {
            l.iter().filter(|b| !b["cache_control"].is_null()).count()
        })
    };
    let nested = body["messages"].as_array().map_or(0, |ms| {
        ms.iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .map(|b| marked(&b["content"]))
            .sum()
    });
    let blocks: usize = body["messages"]
        .as_array()
        .map_or(0, |ms| ms.iter().map(|m| marked(&m["content"])).sum());
    marked(&body["tools"]) + marked(&body["system"]) + blocks + nested
}

/// `after` with the breakpoint of ours that `before` lacks taken out, byte for byte: the
/// bytes of our breakpoint, inserted once.
pub(crate) fn without_our_breakpoint(before: &str, after: &str) -> String {
    const OURS: &str = r#","cache_control":{"type":"ephemeral"}"#;
    let first = before
        .bytes()
        .zip(after.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(before.len().min(after.len()));
    for at in first.saturating_sub(OURS.len())..=first {
        if after.get(at..).is_some_and(|rest| rest.starts_with(OURS)) {
            let out = format!("{}{}", &after[..at], &after[at + OURS.len()..]);
            if out == before {
                return out;
            }
        }
    }
    after.to_string()
}

/// An OpenAI Chat session as an Anthropic Messages body: the system message as `system`, each
/// assistant message as a text block and its `tool_use` blocks (arguments parsed), each tool
/// result as a `tool_result` block of text.
pub(crate) fn chat_to_anthropic(chat: &str) -> String {
    let v: Value = serde_json::from_str(chat).expect("chat JSON");
    let mut system = String::new();
    let mut out = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let text = m["content"].as_str().unwrap_or_default();
        match m["role"].as_str() {
            Some("system") => system = text.to_string(),
            Some("user") => out.push(json!({"role": "user", "content": text})),
            Some("assistant") => {
                let mut blocks = vec![json!({"type": "text", "text": text})];
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let input: Value =
                        serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("{}"))
                            .expect("arguments JSON");
                    blocks.push(json!({"type": "tool_use", "id": c["id"],
                        "name": c["function"]["name"], "input": input}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            _ => out.push(json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": m["tool_call_id"], "content": [{"type": "text", "text": text}]}]})),
        }
    }
    json!({"model": "claude", "max_tokens": 1024, "system": system, "messages": out}).to_string()
}

/// A recorded OpenAI Chat session as an OpenAI Responses body, with a reasoning item
/// (encrypted) before every turn of tool calls.
pub(crate) fn chat_to_responses(chat: &str) -> String {
    let v: Value = serde_json::from_str(chat).expect("chat JSON");
    let mut input = Vec::new();
    for (n, m) in v["messages"].as_array().into_iter().flatten().enumerate() {
        let text = text_of(&m["content"]);
        match m["role"].as_str() {
            Some("system") | Some("user") => input.push(json!({"type": "message", "role": m["role"], "content": [{"type": "input_text", "text": text}]})),
            Some("assistant") => {
                if m["tool_calls"].is_array() {
                    input.push(json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": format!("gAAAA{n}secret")}));
                }
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"], "id": format!("fc_{}", c["id"].as_str().unwrap_or(""))}));
                }
            }
            Some("tool") => input.push(json!({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})),
            _ => {}
        }
    }
    json!({"model": "gpt-4.1", "input": input, "store": false, "include": ["reasoning.encrypted_content"]}).to_string()
}

/// How a Gemini client writes calls and results, for [`chat_to_gemini`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GeminiClient {
    /// Gemini CLI (0.61.0): the API's calls carry no `id`, the CLI answers with ids of its
    /// own and `{"output": text}`, the MCP text inside `<untrusted_context>` tags.
    Cli,
    /// `google-genai` (Python) calling MCP tools: no ids, `{"result": CallToolResult}`.
    PythonMcp,
    /// Calls and responses with the same `id` (the recorded call IDs), `{"output": text}`.
    WithIds,
}

/// A recorded OpenAI Chat session as a Gemini `generateContent` body, written the way
/// `client` writes it: the system prompt as `systemInstruction`, tools as
/// `functionDeclarations`, the results of one turn's calls in one user content, and a
/// thought signature on every turn's first call.
pub(crate) fn chat_to_gemini(chat: &str, client: GeminiClient) -> String {
    let v: Value = serde_json::from_str(chat).expect("chat JSON");
    let mut contents: Vec<Value> = Vec::new();
    let mut names = std::collections::HashMap::new();
    let mut system = None;
    for m in v["messages"].as_array().into_iter().flatten() {
        let text = text_of(&m["content"]);
        match m["role"].as_str() {
            Some("system") => system = Some(json!({"parts": [{"text": text}]})),
            Some("user") => contents.push(json!({"role": "user", "parts": [{"text": text}]})),
            Some("assistant") => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for (k, c) in m["tool_calls"].as_array().into_iter().flatten().enumerate() {
                    let name = c["function"]["name"].clone();
                    names.insert(c["id"].as_str().unwrap_or("").to_string(), name.clone());
                    let args: Value = c["function"]["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or_else(|| json!({}));
                    let mut call = json!({"name": name, "args": args});
                    if client == GeminiClient::WithIds {
                        call["id"] = c["id"].clone();
                    }
                    let mut part = json!({"functionCall": call});
                    if k == 0 {
                        part["thoughtSignature"] = json!("CiQBcsjafD8=");
                    }
                    parts.push(part);
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                let name = names.get(id).cloned().unwrap_or(Value::Null);
                let response = match client {
                    GeminiClient::PythonMcp => {
                        json!({"result": {"content": [{"type": "text", "text": text}], "isError": false}})
                    }
                    GeminiClient::Cli => json!({"output": untrusted(&text)}),
                    GeminiClient::WithIds => json!({"output": m["content"]}),
                };
                let mut part = json!({"name": name, "response": response});
                match client {
                    GeminiClient::Cli => {
                        part["id"] =
                            json!(format!("{}-1764550000-{id}", name.as_str().unwrap_or("")))
                    }
                    GeminiClient::WithIds => part["id"] = json!(id),
                    GeminiClient::PythonMcp => {}
                }
                let part = json!({"functionResponse": part});
                match contents.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && !last["parts"][0]["functionResponse"].is_null() =>
                    {
                        last["parts"].as_array_mut().expect("parts").push(part)
                    }
                    _ => contents.push(json!({"role": "user", "parts": [part]})),
                }
            }
            _ => {}
        }
    }
    let declarations: Vec<Value> = v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| json!({"name": t["function"]["name"], "description": t["function"]["description"], "parametersJsonSchema": t["function"]["parameters"]}))
        .collect();
    let mut body = json!({"contents": contents, "tools": [{"functionDeclarations": declarations}], "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}, "generationConfig": {"temperature": 0, "thinkingConfig": {"includeThoughts": true}}});
    if let Some(system) = system {
        body["systemInstruction"] = system;
    }
    body.to_string()
}

/// MCP text as Gemini CLI hands it to the model (its `wrapUntrusted`).
pub(crate) fn untrusted(text: &str) -> String {
    let escaped = text.replace("</untrusted_context>", "&lt;/untrusted_context&gt;");
    format!("<untrusted_context>\n{escaped}\n</untrusted_context>")
}

/// JSON pointers to the text value of every Gemini `functionResponse` that holds one in
/// a shape clients send (`output`, `content`, `result`/`error` as a string or holding a
/// `CallToolResult`).
fn gemini_slots(v: &Value, slots: &mut Vec<String>) {
    for (i, c) in v["contents"].as_array().into_iter().flatten().enumerate() {
        for (j, p) in c["parts"].as_array().into_iter().flatten().enumerate() {
            let response = &p["functionResponse"]["response"];
            let at = format!("/contents/{i}/parts/{j}/functionResponse/response");
            let key = ["output", "content", "result", "error"]
                .into_iter()
                .find(|k| !response[k].is_null());
            match key {
                Some(k) if response[k].is_object() => slots.push(format!("{at}/{k}/content")),
                Some(k) => slots.push(format!("{at}/{k}")),
                None => {}
            }
        }
    }
}
