//! What the tests share: the recordings, read with their lone surrogates masked, in every
//! wire format and under every config; their tool results as the core reads them; and the
//! checks of what one projection wrote.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use staleguard::internal::refs::has_ref_token;
use staleguard::{
    Config, LivePage, Options, Projection, RequestFormat, Status, EVIDENCE_HEADER, GUIDANCE_HEADER,
    LEAN_FOLD_TAG, RECEIPT_TAG, STALE_NOTICE, STALE_NOTICE_HISTORY, STALE_WORD,
};

use crate::support;
use crate::support::formats::{
    chat_to_gemini, chat_to_responses, result_slots, strip_new_breakpoints, text_of, untrusted,
    GeminiClient,
};
use crate::support::on;

pub(crate) const SERVERS: [&str; 3] = ["pwmcp-0.0.41", "pwmcp-0.0.83", "cdmcp-1.11.0"];

// ------------------------------------------------------------------------- recordings

fn hostile_dir() -> PathBuf {
    support::fixtures().join("hostile")
}

/// A recorded file of `server`'s folder, unpacked with `gzip -dc`.
fn fixture(server: &str, file: &str) -> String {
    let path = hostile_dir().join(server).join(format!("{file}.gz"));
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("gzip -dc {}: {e} (gzip must be on PATH)", path.display()));
    assert!(out.status.success(), "gzip -dc {} failed", path.display());
    String::from_utf8(out.stdout).expect("a recording is UTF-8")
}

/// The recorded OpenAI Chat body of a session.
pub(crate) fn chat(server: &str, session: &str) -> String {
    fixture(server, &format!("{session}.openai.json"))
}

// JSON with lone surrogates. A page can put a lone UTF-16 surrogate in its text; Playwright
// MCP passes it on as a `\ud800` escape, which JSON allows and serde_json refuses. The tests
// read bodies with serde_json (`Value`), so such an escape is swapped for a private-use
// character of the block below while a body is read, and swapped back in a body written.

/// The stand-ins' block: U+F000 stands for U+D800, ..., U+F7FF for U+DFFF.
const STAND_IN: u32 = 0xF000;

/// `body` with every lone surrogate escape written as its stand-in's escape.
fn mask(body: &str) -> std::borrow::Cow<'_, str> {
    if !(body.contains("\\ud") || body.contains("\\uD")) {
        return std::borrow::Cow::Borrowed(body);
    }
    let b = body.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let mut out = String::with_capacity(body.len());
    let (mut i, mut done) = (0, 0);
    while let Some(p) = body[i..].find('\\') {
        let at = i + p;
        if b.get(at + 1) != Some(&b'u') {
            i = at + 2;
            continue;
        }
        let Some(unit) = hex(at + 2) else {
            i = at + 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && b.get(at + 6..at + 8) == Some(b"\\u")
            && hex(at + 8).is_some_and(|low| (0xDC00..0xE000).contains(&low));
        if paired {
            i = at + 12;
        } else if (0xD800..0xE000).contains(&unit) {
            out.push_str(&body[done..at]);
            out.push_str(&format!("\\u{:04x}", STAND_IN + unit - 0xD800));
            i = at + 6;
            done = i;
        } else {
            i = at + 6;
        }
    }
    out.push_str(&body[done..]);
    std::borrow::Cow::Owned(out)
}

/// JSON text written by serde_json from a masked value, its stand-ins back as escapes.
pub(crate) fn unmask(json: &str) -> String {
    // A stand-in is U+F000..U+F7FF: EF 80..9F in UTF-8.
    let stand_in = json
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == 0xEF && (0x80..0xA0).contains(&w[1]));
    if !stand_in {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match u32::from(c) {
            u @ 0xF000..=0xF7FF => out.push_str(&format!("\\u{:04x}", u - STAND_IN + 0xD800)),
            _ => out.push(c),
        }
    }
    out
}

/// A body read as serde_json reads it, lone surrogates as their stand-ins: the output of a
/// projection must always read.
pub(crate) fn value(body: &str) -> Value {
    serde_json::from_str(&mask(body)).expect("valid JSON")
}

/// The lone surrogate escapes of a body: a recording that has them must keep them where
/// its text is kept.
pub(crate) fn lone_surrogates(body: &str) -> usize {
    mask(body).matches("\\uf").count() - body.matches("\\uf").count()
}

/// A session in every wire format: the recorded bodies, and Responses and Gemini bodies
/// built from the Chat one (as the format suite builds them).
pub(crate) fn bodies(server: &str, session: &str) -> Vec<(&'static str, RequestFormat, String)> {
    let chat = chat(server, session);
    let anthropic = fixture(server, &format!("{session}.anthropic.json"));
    let masked = mask(&chat);
    assert!(
        !chat.contains(|c: char| (0xF000..0xF800).contains(&u32::from(c))),
        "{server}/{session}: stand-ins already in the text"
    );
    let gemini = |client| unmask(&chat_to_gemini(&masked, client));
    vec![
        (
            "responses",
            RequestFormat::Responses,
            unmask(&chat_to_responses(&masked)),
        ),
        (
            "gemini-cli",
            RequestFormat::Gemini,
            gemini(GeminiClient::Cli),
        ),
        (
            "gemini-python",
            RequestFormat::Gemini,
            gemini(GeminiClient::PythonMcp),
        ),
        (
            "gemini-ids",
            RequestFormat::Gemini,
            gemini(GeminiClient::WithIds),
        ),
        ("anthropic", RequestFormat::Anthropic, anthropic),
        ("chat", RequestFormat::OpenAiChat, chat),
    ]
}

/// The texts of the results the server flagged as errors (the Anthropic body's `is_error`,
/// which mirrors MCP's `isError`).
pub(crate) fn failures(server: &str, session: &str) -> Vec<String> {
    let anthropic = value(&fixture(server, &format!("{session}.anthropic.json")));
    let mut failed = Vec::new();
    for m in anthropic["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["is_error"] == true {
                failed.push(text_of(&block["content"]));
            }
        }
    }
    failed
}

/// The configs the property, format, lean and golden suites project under.
pub(crate) fn configs() -> Vec<(&'static str, Config)> {
    let lean = |c: Config| Config {
        live_page: LivePage::Lean,
        ..c
    };
    let guard = Config {
        guard_in_front: Some(true),
        ..on()
    };
    vec![
        ("whole", on()),
        ("lean", lean(on())),
        (
            "bare",
            Config {
                evidence_retention: Some(false),
                progress_tracking: Some(false),
                ..on()
            },
        ),
        (
            "budget",
            Config {
                request_budget_bytes: Some(24 * 1024),
                ..on()
            },
        ),
        ("guard", guard.clone()),
        ("guard-lean", lean(guard)),
    ]
}

pub(crate) fn project(body: &str, format: RequestFormat, config: &Config) -> Projection {
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    staleguard::project(body, format, config, options).expect("a recorded body projects")
}

/// A text as the core reads it: a lone surrogate's stand-in as U+FFFD.
pub(crate) fn as_read(text: &str) -> String {
    text.chars()
        .map(|c| match u32::from(c) {
            0xF000..=0xF7FF => '\u{fffd}',
            _ => c,
        })
        .collect()
}

/// Every tool result of a Chat body: (call id, tool, text as the core reads it).
pub(crate) fn results(body: &str) -> Vec<(String, String, String)> {
    let v = value(body);
    let messages = v["messages"].as_array().expect("messages");
    let mut tools = std::collections::HashMap::new();
    let mut out = Vec::new();
    for m in messages {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or_default().to_string();
            tools.insert(
                id,
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
            let tool = tools.get(&id).cloned().unwrap_or_default();
            out.push((id, tool, as_read(&text_of(&m["content"]))));
        }
    }
    out
}

pub(crate) const SESSIONS: [&str; 3] = ["hostile_text", "hostile_big", "hostile_deep10k"];

// --------------------------------------------------------------------------- the checks

/// What one projection wrote, counted line by line.
#[derive(Debug, Default)]
pub(crate) struct Written {
    receipts: usize,
    notices: usize,
    stale_words: usize,
    headers: usize,
    quotes: usize,
    quote_texts: Vec<String>,
    markers: usize,
    guidance: usize,
}

/// Every SPEC 2 invariant one projection shows, and that no line a reader takes as ours
/// comes from a page: only result contents change; a changed one is a receipt, the result
/// with our parts after it, or (lean) the live page's lean form; failures and everything
/// else are kept byte for byte, key order too; our lines are counted and each is where we
/// write it; projecting again changes nothing.
pub(crate) fn check(
    case: &str,
    input: &str,
    p: &Projection,
    config: &Config,
    failed: &[String],
) -> Written {
    let before = value(input);
    let text = serde_json::to_string(&before).expect("JSON");
    check_read(case, input, (&before, &text), p, config, failed)
}

/// [`check`], the input already read: its value and that value written out.
pub(crate) fn check_read(
    case: &str,
    input: &str,
    (before, before_text): (&Value, &str),
    p: &Projection,
    config: &Config,
    failed: &[String],
) -> Written {
    let mut after = value(&p.body);
    let slots = result_slots(before);
    assert_eq!(
        slots,
        result_slots(&after),
        "{case}: results stay where they were"
    );
    let plan = p.report();
    let mut w = Written::default();
    let mut first_receipt = true;
    for slot in &slots {
        let (b, a) = (
            before.pointer(slot).expect("slot"),
            after.pointer(slot).expect("slot"),
        );
        if a == b {
            continue;
        }
        let (b, a) = (b.clone(), a.clone());
        let (tb, ta) = (text_of(&b), text_of(&a));
        let failure = failed.iter().any(|f| tb == *f || tb == untrusted(f));
        assert!(
            !ta.starts_with(RECEIPT_TAG) || !failure,
            "{case}: a failure collapsed"
        );
        if ta.starts_with(RECEIPT_TAG) {
            check_collapsed(case, &ta, first_receipt, p, &mut w);
            first_receipt = false;
            continue;
        }
        let own = match &b {
            Value::Array(own) => own.len(),
            _ => 1,
        };
        let kept = match (&b, a.as_array()) {
            (Value::Array(own), Some(parts)) => parts.get(..own.len()) == Some(&own[..]),
            (own, Some(parts)) => parts.first().map(|p| &p["text"]) == Some(own),
            _ => false,
        };
        assert!(
            kept || !failure,
            "{case}: a failure is kept byte for byte, parts of ours after it"
        );
        if kept {
            for part in &a.as_array().expect("parts")[own..] {
                let t = part["text"].as_str().expect("a text part of ours");
                check_appended(case, t, &mut w);
            }
            continue;
        }
        // The live page's lean form (its own text, then any part of ours).
        assert_eq!(
            config.live_page,
            LivePage::Lean,
            "{case}: only a lean page changes: {ta:.300}"
        );
        let lean = plan
            .results
            .iter()
            .filter(|r| r.status == Status::Live)
            .filter_map(|r| r.folded)
            .collect::<Vec<_>>();
        assert!(!lean.is_empty(), "{case}: a changed live page is lean");
        // A lean form is written from the page as read: a lone surrogate as U+FFFD.
        check_lean(case, &as_read(&tb), &as_read(&ta), &mut w);
    }
    let collapsed = plan.collapsed();
    assert_eq!(
        w.receipts, collapsed,
        "{case}: one receipt line per collapse"
    );
    assert_eq!(
        w.notices,
        usize::from(collapsed > 0),
        "{case}: one full notice"
    );
    assert_eq!(
        w.stale_words,
        collapsed.saturating_sub(1),
        "{case}: `stale` after the others"
    );
    let runs: usize = plan
        .results
        .iter()
        .filter_map(|r| r.folded)
        .map(|f| f.runs)
        .sum();
    assert_eq!(
        w.markers, runs,
        "{case}: fold markers are the lean pages' runs"
    );
    // Every quote line is a quote the evidence report names (its ref tokens neutralised),
    // and each of those is written.
    let neutralise = staleguard::internal::refs::neutralise;
    let mut named: Vec<String> = p
        .evidence
        .retained
        .iter()
        .map(|q| neutralise(&q.quote).into_owned())
        .collect();
    let mut written = w.quote_texts.clone();
    written.sort_unstable();
    named.sort_unstable();
    assert_eq!(
        written, named,
        "{case}: quote lines and the evidence report"
    );
    // Every byte but the contents of changed results (and our cache breakpoint) is kept,
    // key order included.
    for slot in &slots {
        *after.pointer_mut(slot).expect("slot") = before.pointer(slot).cloned().expect("slot");
    }
    strip_new_breakpoints(before, &mut after);
    assert!(
        serde_json::to_string(&after).ok().as_deref() == Some(before_text),
        "{case}: all else kept, in order"
    );
    // Lone surrogates of kept text are kept as the page wrote them.
    if config.live_page == LivePage::Whole {
        assert!(lone_surrogates(&p.body) <= lone_surrogates(input), "{case}");
    }
    w
}

/// A collapsed result: its receipt (ID, fields JSON-quoted, at most 200 bytes), the notice
/// or `stale`, then only verification lines of the page and evidence blocks of ours.
fn check_collapsed(case: &str, text: &str, first: bool, p: &Projection, w: &mut Written) {
    let mut lines = text.split('\n');
    let receipt = lines.next().unwrap_or("");
    assert!(
        receipt.len() <= 200,
        "{case}: receipt of {} bytes",
        receipt.len()
    );
    let id = receipt
        .strip_prefix("[staleguard receipt] observation=")
        .and_then(|r| r.get(..8))
        .expect("a receipt names its observation");
    assert!(
        p.report()
            .results
            .iter()
            .any(|r| r.status == Status::Collapsed && &*r.observation_id == id),
        "{case}: receipt {id} names a collapsed observation"
    );
    assert_eq!(receipt.matches(RECEIPT_TAG).count(), 1, "{case}: {receipt}");
    w.receipts += 1;
    // Behind the guard, the notice names the way back to a collapsed page.
    let notice = match case.contains(" guard") {
        true => STALE_NOTICE_HISTORY,
        false => STALE_NOTICE,
    };
    match lines.next() {
        Some(line) if first && line == notice => w.notices += 1,
        Some(STALE_WORD) if !first => w.stale_words += 1,
        other => panic!("{case}: after the receipt: {other:?}"),
    }
    let rest: Vec<&str> = lines.collect();
    let mut i = 0;
    while i < rest.len() && !rest[i].starts_with(EVIDENCE_HEADER) {
        let line = rest[i];
        assert!(
            line.starts_with("[verified:")
                || line.starts_with("[UNVERIFIED")
                || (line.starts_with("[staleguard] ")
                    && line.ends_with("verification line(s) omitted.")),
            "{case}: a line in a receipt that is neither a verification line nor ours: {line:.200}"
        );
        i += 1;
    }
    if i < rest.len() {
        check_evidence(case, &rest[i..], w);
    }
    assert!(!has_ref_token(text), "{case}: a ref token in {text:.300}");
}

/// An evidence block: the header, JSON quote lines that parse, notices of ours.
fn check_evidence(case: &str, lines: &[&str], w: &mut Written) {
    assert_eq!(lines.first().copied(), Some(EVIDENCE_HEADER), "{case}");
    w.headers += 1;
    for line in &lines[1..] {
        if line.starts_with("[staleguard] ") {
            continue;
        }
        let quote: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("{case}: an evidence line that is no JSON ({e}): {line:.300}")
        });
        let object = quote.as_object().expect("a quote line is an object");
        assert!(object["quote"].is_string(), "{case}: {line:.300}");
        assert!(
            object
                .keys()
                .all(|k| ["source_url", "observation", "quote"].contains(&k.as_str())),
            "{case}: {line:.300}"
        );
        w.quotes += 1;
        w.quote_texts
            .push(object["quote"].as_str().unwrap_or_default().to_string());
    }
}

/// A part appended after the newest result: an evidence block or guidance, with no ref.
fn check_appended(case: &str, text: &str, w: &mut Written) {
    assert!(
        staleguard::internal::appendix::is_appendix(text),
        "{case}: {text:.300}"
    );
    assert!(!has_ref_token(text), "{case}: a ref token in {text:.300}");
    let lines: Vec<&str> = text.split('\n').collect();
    if text.starts_with(GUIDANCE_HEADER) {
        assert_eq!(lines.len(), 1, "{case}: guidance is one line");
        w.guidance += 1;
    } else {
        check_evidence(case, &lines, w);
    }
}

/// The live page's lean form: every line is the page's, the start of a folded run cut with
/// `…`, or a marker of ours; every control's ref is kept; any block of ours follows it.
fn check_lean(case: &str, whole: &str, lean: &str, w: &mut Written) {
    // Kept lines are the page's, moved left where what held them is hidden; a control's
    // keeps no `[cursor=pointer]` (its role says it).
    let page: HashSet<String> = whole
        .split('\n')
        .map(str::trim_start)
        .flat_map(|l| [l.to_string(), l.replacen(" [cursor=pointer]", "", 1)])
        .collect();
    let (tree, ours) = match lean.find(&format!("\n{EVIDENCE_HEADER}")) {
        Some(at) => (&lean[..at], Some(&lean[at + 1..])),
        None => (lean, None),
    };
    let mut in_tree = false;
    for line in tree.split('\n') {
        if line.trim_start().starts_with(LEAN_FOLD_TAG) {
            assert!(in_tree, "{case}: a marker outside the tree: {line}");
            assert!(!has_ref_token(line), "{case}: {line}");
            w.markers += 1;
            continue;
        }
        let unshifted = page.contains(line.trim_start());
        let cut = line.ends_with('…') || line.ends_with("…\"");
        assert!(
            unshifted || cut,
            "{case}: a lean line that is not the page's: {line:.200}"
        );
        // Inside the tree every line of the page is a YAML item, so none reads as a marker.
        if line.starts_with("```") {
            in_tree = line.starts_with("```yaml");
        } else if in_tree {
            assert!(!line.trim_start().starts_with('#'), "{case}: {line:.200}");
        }
    }
    for line in whole.split('\n') {
        let is_control = line.trim_start().strip_prefix("- ").is_some_and(|rest| {
            let role: String = rest
                .trim_start_matches('\'')
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            staleguard::CONTROL_ROLES.contains(&role.as_str())
        }) || line.contains("[cursor=pointer]");
        if let (true, Some(r)) = (is_control, attribute_ref(line)) {
            assert!(
                lean.contains(&format!("[ref={r}]")),
                "{case}: control {r} folded away"
            );
        }
    }
    if let Some(ours) = ours {
        check_evidence(case, &ours.split('\n').collect::<Vec<_>>(), w);
    }
}

// ------------------------------------------------------------------ Playwright's YAML lines

/// A Playwright snapshot line read as role, name and ref, the way its YAML writes them: the
/// key may be single-quoted (`''` for `'`), the name double-quoted with JSON escapes (a lone
/// surrogate read as U+FFFD), and the ref is the `[ref=…]` attribute after the name.
pub(crate) fn yaml_line(line: &str) -> Option<(String, String, Option<String>)> {
    let body = line.trim_start().strip_prefix("- ")?;
    let key = match body.strip_prefix('\'') {
        Some(quoted) => {
            let mut out = String::new();
            let mut chars = quoted.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\'' if chars.peek() == Some(&'\'') => {
                        chars.next();
                        out.push('\'');
                    }
                    '\'' => break,
                    c => out.push(c),
                }
            }
            out
        }
        None => body.to_string(),
    };
    let role: String = key.chars().take_while(char::is_ascii_lowercase).collect();
    if role.is_empty() {
        return None;
    }
    let mut rest = &key[role.len()..];
    let mut name = String::new();
    if let Some(quoted) = rest.strip_prefix(" \"") {
        let mut escaped = false;
        let end = quoted
            .char_indices()
            .find(|&(_, c)| {
                let end = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                end
            })
            .map(|(i, _)| i)?;
        let literal = format!("\"{}\"", &quoted[..end]);
        name = serde_json::from_str::<String>(&mask(&literal))
            .map(|s| {
                s.chars()
                    .map(|c| {
                        if (0xF000..0xF800).contains(&u32::from(c)) {
                            '\u{fffd}'
                        } else {
                            c
                        }
                    })
                    .collect()
            })
            .ok()?;
        rest = &quoted[end + 1..];
    }
    Some((role, name, attribute_ref(rest)))
}

/// The `[ref=…]` among the attributes at the start of `rest` (after a role and name), or of
/// a whole line: the first bracket that is an attribute, never one inside a name.
fn attribute_ref(rest: &str) -> Option<String> {
    let rest = match rest.trim_start().strip_prefix("- ") {
        Some(line) => yaml_line(&format!("- {line}"))?.2?,
        None => {
            let mut rest = rest;
            while let Some(attr) = rest.strip_prefix(" [") {
                let end = attr.find(']')?;
                if let Some(id) = attr[..end].strip_prefix("ref=") {
                    return Some(id.to_string());
                }
                rest = &attr[end + 1..];
            }
            return None;
        }
    };
    Some(rest)
}
