//! Shared test support: fixture discovery and the SPEC 2 invariant checker.
#![allow(dead_code)]

mod scenarios;

use std::path::{Path, PathBuf};

use serde_json::Value;
use staleguard::internal::progress::replayed;
use staleguard::{Config, Projection, RequestFormat, Status};

// Not every test binary uses it.
#[allow(unused_imports)]
pub(crate) use scenarios::SCENARIOS;

/// The recorded sessions (`fixtures/`). Tests that need them fail loudly without them.
pub(crate) fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    assert!(dir.is_dir(), "fixtures missing at {}", dir.display());
    dir
}

/// Every OpenAI Chat fixture: shared 0.0.41, 0.0.83 and the seed format, plus the
/// repository's own recordings of 0.0.30 and 0.0.56.
pub(crate) fn openai_fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let dirs = [
        fixtures().join("pwmcp-0.0.41"),
        fixtures().join("pwmcp-0.0.83"),
        fixtures().join("ankita"),
        fixtures().join("pwmcp-0.0.30"),
        fixtures().join("pwmcp-0.0.56"),
    ];
    for dir in dirs {
        files.extend(openai_fixtures_in(&dir));
    }
    files
}

/// The OpenAI Chat fixtures of `dir`, sorted; at least one.
pub(crate) fn openai_fixtures_in(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("fixture dir {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".openai.json"))
        .collect();
    assert!(!found.is_empty(), "no OpenAI fixtures in {}", dir.display());
    found.sort();
    found
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(crate) fn on() -> Config {
    Config {
        browser_history_compaction: true,
        ..Config::default()
    }
}

/// `body` projected as `format` under [`on`].
pub(crate) fn project_on(
    body: &str,
    format: RequestFormat,
) -> Result<Projection, staleguard::Error> {
    staleguard::project(body, format, &on(), staleguard::Options::default())
}

pub(crate) fn project(body: &str) -> Projection {
    project_on(body, RequestFormat::OpenAiChat).expect("projection")
}

pub(crate) fn messages(body: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(body).expect("valid JSON");
    v["messages"].as_array().cloned().unwrap_or_default()
}

/// Index of the first message of the live page state, if any.
pub(crate) fn live_message(p: &Projection) -> Option<usize> {
    p.report()
        .results
        .iter()
        .filter(|r| r.status == Status::Live)
        .map(|r| r.message)
        .min()
}

/// Checks every SPEC 2 invariant that one projection can show on its own.
pub(crate) fn check_invariants(input: &str, p: &Projection) {
    let before = messages(input);
    let after = messages(&p.body);
    assert_eq!(before.len(), after.len(), "message count");
    let collapsed: Vec<usize> = p
        .report()
        .results
        .iter()
        .filter(|r| r.status == Status::Collapsed && r.bytes_before != r.bytes_after)
        .map(|r| r.message)
        .collect();
    assert_eq!(
        collapsed.len(),
        p.report().collapsed(),
        "one edit per collapsed result"
    );
    let appended = appended_message(p);
    // The live page may be sent in its lean form (SPEC 2): "byte-identical or its lean form".
    let lean: Vec<usize> = (p.report().results.iter())
        .filter(|r| r.folded.is_some())
        .map(|r| r.message)
        .collect();
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if collapsed.contains(&i) {
            check_collapsed(b, a, collapsed.first() == Some(&i));
        } else if Some(i) == appended {
            check_appended(b, a);
        } else if lean.contains(&i) {
            let text = a["content"].to_string();
            assert!(
                text.contains(staleguard::LEAN_FOLD_TAG),
                "message {i}: lean form"
            );
            let (mut b, mut a) = (b.clone(), a.clone());
            (b["content"], a["content"]) = (Value::Null, Value::Null);
            assert_eq!(b, a, "message {i}: only its content is lean");
        } else {
            assert_eq!(b, a, "message {i} must be untouched");
        }
    }
    // Key order and every other byte: restoring the old contents gives the input back.
    let mut restored: Value = serde_json::from_str(&p.body).expect("valid JSON out");
    for &i in collapsed.iter().chain(&appended).chain(&lean) {
        restored["messages"][i]["content"] = before[i]["content"].clone();
    }
    let original: Value = serde_json::from_str(input).expect("valid JSON in");
    assert_eq!(
        serde_json::to_string(&original).ok(),
        serde_json::to_string(&restored).ok()
    );
    // Idempotent.
    let again = project(&p.body);
    assert_eq!(again.body, p.body, "projection must be idempotent");
    assert_eq!(again.report().edits.len(), 0);
}

/// The message that carries the evidence block or guidance, if one was added.
pub(crate) fn appended_message(p: &Projection) -> Option<usize> {
    let item = p.report().edits.iter().find(|e| e.append)?.item;
    p.report()
        .results
        .iter()
        .find(|r| r.item == item)
        .map(|r| r.message)
}

/// The newest result keeps its content byte for byte; evidence and guidance follow as parts
/// of their own.
fn check_appended(before: &Value, after: &Value) {
    let parts = after["content"]
        .as_array()
        .expect("content with an appended part");
    let own = match &before["content"] {
        Value::Array(own) => {
            assert_eq!(own[..], parts[..own.len()]);
            own.len()
        }
        own => {
            assert_eq!(own, &parts[0]["text"]);
            1
        }
    };
    assert!(parts.len() > own, "something was appended");
    for part in &parts[own..] {
        let text = part["text"].as_str().expect("appended text part");
        assert!(staleguard::internal::appendix::is_appendix(text), "{text}");
        assert!(
            !staleguard::internal::refs::has_ref_token(text),
            "ref token in {text}"
        );
    }
}

/// A collapsed result: its receipt, then the full stale notice when it is the request's
/// first collapsed observation (`first`), `stale` otherwise.
fn check_collapsed(before: &Value, after: &Value, first: bool) {
    for key in before
        .as_object()
        .map(|o| o.keys().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if key != "content" {
            assert_eq!(before[key], after[key], "field {key} kept");
        }
    }
    let text = content_text(after);
    let receipt = text.lines().next().unwrap_or("");
    assert!(receipt.starts_with(staleguard::RECEIPT_TAG), "{text}");
    assert!(receipt.len() <= 200, "receipt {} bytes", receipt.len());
    let stale = match first {
        true => staleguard::STALE_NOTICE,
        false => staleguard::STALE_WORD,
    };
    assert_eq!(text.lines().nth(1), Some(stale));
    assert!(
        !staleguard::internal::refs::has_ref_token(&text),
        "ref token in {text}"
    );
}

/// The text of a message's content (a string, or text parts joined), evidence included.
pub(crate) fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The message where A's frozen content ends: its live page state or its newest browser
/// result, whichever comes first (SPEC 9 C1). Guidance is appended to the newest browser
/// result, so that result moves on even when no observation is live.
pub(crate) fn frozen_message(p: &Projection) -> usize {
    let live = live_message(p);
    let newest = p.report().results.last().map(|r| r.message);
    live.into_iter().chain(newest).min().unwrap_or(usize::MAX)
}

/// Prefix stability: everything before A's frozen end is byte-identical in projected(B).
pub(crate) fn check_prefix_stable(a: &Projection, b: &Projection) {
    let (ma, mb) = (messages(&a.body), messages(&b.body));
    let stop = frozen_message(a).min(ma.len());
    for i in 0..stop {
        assert_eq!(
            serde_json::to_string(&ma[i]).ok(),
            serde_json::to_string(&mb[i]).ok(),
            "message {i} changed between prefixes"
        );
    }
}

/// The body with only its first `n` messages.
pub(crate) fn truncate(body: &str, n: usize) -> String {
    let mut v: Value = serde_json::from_str(body).expect("valid JSON");
    if let Some(list) = v["messages"].as_array_mut() {
        list.truncate(n);
    }
    serde_json::to_string(&v).expect("serialise")
}

/// An OpenAI Chat body: a user task, one call and result per step, then `question`.
pub(crate) fn chat_session(steps: &[(&str, &str)], question: &str) -> String {
    let steps: Vec<_> = steps
        .iter()
        .map(|&(name, text)| (name, "{}", text))
        .collect();
    chat_calls(&steps, Some(question))
}

/// An OpenAI Chat body: a user task, one call `(name, arguments, result)` per step, then
/// `question` when there is one.
pub(crate) fn chat_calls(steps: &[(&str, &str, &str)], question: Option<&str>) -> String {
    let mut messages = vec![serde_json::json!({"role": "user", "content": "do the task"})];
    for (i, (name, arguments, text)) in steps.iter().enumerate() {
        let id = format!("call_{}", i + 1);
        messages.push(
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
        );
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": text}));
    }
    if let Some(question) = question {
        messages.push(serde_json::json!({"role": "user", "content": question}));
    }
    serde_json::json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

/// A Playwright MCP 0.0.41 page at `url` titled `title`: a button "Go", then the paragraph
/// `text(n)` for refs e2, e3, ... until the page holds `bytes` bytes.
pub(crate) fn playwright_page(
    url: &str,
    title: &str,
    bytes: usize,
    text: impl Fn(usize) -> String,
) -> String {
    let mut page = format!(
        "### Page state\n- Page URL: {url}\n- Page Title: {title}\n- Page Snapshot:\n```yaml\n- button \"Go\" [ref=e1]\n"
    );
    let mut n = 2;
    while page.len() < bytes {
        page.push_str(&format!("- paragraph [ref=e{n}]: {}\n", text(n)));
        n += 1;
    }
    page.push_str("```");
    page
}

/// All tool result text of a body (what the model can quote), without assistant messages.
pub(crate) fn tool_text(body: &str) -> String {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(content_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The evidence block appended to a projected body, if any.
pub(crate) fn evidence_block(p: &Projection) -> Option<String> {
    let i = appended_message(p)?;
    let parts = messages(&p.body)[i]["content"].as_array()?.clone();
    parts
        .iter()
        .filter_map(|p| p["text"].as_str())
        .find(|t| t.starts_with(staleguard::EVIDENCE_HEADER))
        .map(str::to_string)
}
pub(crate) mod formats;

/// Progress over a whole transcript, repeated submissions included, as the guard replays it.
pub(crate) fn track(
    transcript: &staleguard::internal::transcript::Transcript<'_>,
    config: &Config,
) -> staleguard::Progress {
    replayed(transcript, config, false).progress().clone()
}

/// The no-progress steps of a transcript, as projection counts them.
pub(crate) fn steps(
    transcript: &staleguard::internal::transcript::Transcript<'_>,
    config: &Config,
) -> staleguard::Progress {
    replayed(transcript, config, true).progress().clone()
}

/// The guard's verdict on every browser call of `transcript`: `(item index, verdict)`.
pub(crate) fn verdicts(
    transcript: &staleguard::internal::transcript::Transcript<'_>,
    config: &Config,
) -> Vec<(usize, staleguard::Verdict)> {
    staleguard::internal::guard::verdicts(transcript, config)
}

/// The guard's verdict on a call proposed after the whole `transcript`.
pub(crate) fn check(
    transcript: &staleguard::internal::transcript::Transcript<'_>,
    name: &str,
    arguments: &str,
    config: &Config,
) -> staleguard::Verdict {
    let tracker = replayed(transcript, config, false);
    staleguard::Engine::new(config.clone()).check_tracked(&tracker, name, arguments)
}

/// The neutral transcript of a request body (any wire format).
pub(crate) fn transcript(body: &str) -> staleguard::internal::transcript::Transcript<'_> {
    staleguard::internal::adapter::read_transcript(body).expect("reads")
}

/// Every browser call that names a ref, with the guard's verdict before it (default config)
/// and what the server answered: `(call id, verdict, server text)`.
pub(crate) fn uid_calls(body: &str) -> Vec<(String, staleguard::Verdict, String)> {
    use staleguard::internal::transcript::Item;
    let t = transcript(body);
    let answer = |id: &str| {
        t.items.iter().find_map(|i| match i {
            Item::Result(r) if r.call_id.as_deref() == Some(id) => Some(r.text.to_string()),
            _ => None,
        })
    };
    verdicts(&t, &Config::default())
        .into_iter()
        .filter_map(|(item, verdict)| match &t.items[item] {
            Item::Call(c) if !staleguard::internal::refs::targets(&c.arguments).is_empty() => {
                Some((c.id.to_string(), verdict, answer(&c.id).unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}
