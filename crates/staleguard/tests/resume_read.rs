//! Reading a body from a resume point gives exactly what a full read of it gives: for every
//! recorded body (and rewrites of it with keys moved around and breakpoints added), every
//! message to resume at, and later bodies that share the bytes before it (the same body,
//! one more message, a changed last message, more top-level keys after the array), the tail
//! read answers as the full read does, item for item, and writes the same bytes. Tails the
//! full read rejects (broken JSON, a second `messages`, a known key given twice) are never
//! read.

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use staleguard::internal::adapter::{read_request, read_request_from, ResumeAt, WireRequest};
use staleguard::internal::transcript::Item;
use staleguard::{Breakpoint, Edit, RequestFormat};

/// What a breakpoint of our own adds to a block.
const BREAKPOINT_TEXT: &str = r#","cache_control":{"type":"ephemeral"}"#;

/// A body to resume reads of.
struct Base {
    name: String,
    body: String,
    format: RequestFormat,
}

/// What a later body must give.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// The tail read answers (and as the full read does).
    Resumes,
    /// The full read fails, so the tail read must not answer.
    Fails,
}

// ---------------------------------------------------------------------------------------
// Fixtures and rewrites

fn fixture_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"));
    assert!(dir.is_dir(), "fixtures missing at {}", dir.display());
    dir
}

/// Every recorded OpenAI Chat and Anthropic request body of the shared fixtures.
fn recorded() -> Vec<Base> {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(fixture_dir()).unwrap() {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("pwmcp-") || name.starts_with("cdmcp-")) {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let format = if file.ends_with(".openai.json") {
                RequestFormat::OpenAiChat
            } else if file.ends_with(".anthropic.json") {
                RequestFormat::Anthropic
            } else {
                continue;
            };
            let body = std::fs::read_to_string(&path).unwrap();
            let name = format!("{name}/{file}");
            found.push(Base { name, body, format });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    let openai = found
        .iter()
        .filter(|b| b.format == RequestFormat::OpenAiChat);
    let anthropic = found
        .iter()
        .filter(|b| b.format == RequestFormat::Anthropic);
    assert!(openai.count() >= 15, "OpenAI fixtures missing");
    assert!(anthropic.count() >= 15, "Anthropic fixtures missing");
    found
}

/// The recorded bodies and rewrites of each: OpenAI with known keys before the array,
/// Anthropic without `system`, with `system` and `tools` after the array, and with both
/// before it, with breakpoints on tools, system and content blocks.
fn bases() -> Vec<Base> {
    let mut all = Vec::new();
    for base in recorded() {
        let object: Map<String, Value> = serde_json::from_str(&base.body).unwrap();
        let rewrites = match base.format {
            RequestFormat::OpenAiChat => vec![("keys_before", openai_keys_before(&object))],
            _ => vec![
                ("no_system", without(&object, "system")),
                ("keys_after", anthropic_keys(&object, false)),
                ("keys_before", anthropic_keys(&object, true)),
            ],
        };
        for (i, (what, body)) in rewrites.into_iter().enumerate() {
            // Compact and pretty bodies both.
            let body = if i % 2 == 0 {
                serde_json::to_string(&body).unwrap()
            } else {
                serde_json::to_string_pretty(&body).unwrap()
            };
            let name = format!("{} ({what})", base.name);
            all.push(Base {
                name,
                body,
                format: base.format,
            });
        }
        all.push(base);
    }
    all
}

fn openai_keys_before(object: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("tools".into(), object["tools"].clone());
    out.insert("system".into(), json!("be brief"));
    out.insert("input".into(), Value::Null);
    out.insert("model".into(), object["model"].clone());
    out.insert("messages".into(), object["messages"].clone());
    out.insert("stream".into(), json!(true));
    out
}

fn without(object: &Map<String, Value>, key: &str) -> Map<String, Value> {
    let mut out = object.clone();
    out.shift_remove(key);
    out
}

/// An Anthropic body with breakpoints on the last tool, the system and some content
/// blocks, and `system` and `tools` before or after the array.
fn anthropic_keys(object: &Map<String, Value>, before: bool) -> Map<String, Value> {
    let system = json!([{"type": "text", "text": object["system"],
        "cache_control": {"type": "ephemeral"}}]);
    let mut tools = object["tools"].clone();
    if let Some(last) = tools.as_array_mut().and_then(|t| t.last_mut()) {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut messages = object["messages"].clone();
    for (i, message) in messages.as_array_mut().unwrap().iter_mut().enumerate() {
        let blocks = message["content"].as_array_mut();
        if let (0, Some(last)) = (i % 4, blocks.and_then(|b| b.last_mut())) {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    let mut out = Map::new();
    let keys = [("system", system), ("tools", tools)];
    if before {
        out.extend(keys.clone().map(|(k, v)| (k.to_string(), v)));
    }
    out.insert("model".into(), object["model"].clone());
    out.insert("messages".into(), messages);
    if !before {
        out.extend(keys.map(|(k, v)| (k.to_string(), v)));
    }
    out.insert("max_tokens".into(), object["max_tokens"].clone());
    out
}

// ---------------------------------------------------------------------------------------
// Where things are, told by serde_json alone

#[derive(Deserialize)]
struct Messages<'a> {
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Array<'a> {
    #[serde(borrow)]
    messages: &'a RawValue,
}

fn offset_in(body: &str, raw: &RawValue) -> usize {
    raw.get().as_ptr() as usize - body.as_ptr() as usize
}

/// The byte range of each message of `body`.
fn message_ranges(body: &str) -> Vec<Range<usize>> {
    let messages: Messages = serde_json::from_str(body).unwrap();
    let ranges = messages.messages.iter().map(|raw| {
        let start = offset_in(body, raw);
        start..start + raw.get().len()
    });
    ranges.collect()
}

/// The offset of the `]` that closes the `messages` array.
fn array_end(body: &str) -> usize {
    let array: Array = serde_json::from_str(body).unwrap();
    offset_in(body, array.messages) + array.messages.get().len() - 1
}

fn insert(body: &str, at: usize, text: &str) -> String {
    format!("{}{text}{}", &body[..at], &body[at..])
}

// ---------------------------------------------------------------------------------------
// Later bodies

/// A later body: its name, its text, what it must give, and whether to read it from every
/// message (the others are read from the first, the middle and the last: what they test
/// does not depend on where the read resumes, and reads cost time).
type Later = (String, String, Expect, bool);

/// Later bodies of `base` that share its bytes up to the start of its last message.
fn later_bodies(base: &Base) -> Vec<Later> {
    let body = base.body.as_str();
    let end = array_end(body);
    let last = message_ranges(body).pop().unwrap();
    let object: Map<String, Value> = serde_json::from_str(body).unwrap();
    let extra = extra_keys(&object, base.format);
    let mut out = vec![
        ("same".to_string(), body.to_string(), Expect::Resumes, true),
        (
            "appended".into(),
            appended(body, base.format),
            Expect::Resumes,
            true,
        ),
        (
            "changed_last".into(),
            changed_last(body),
            Expect::Resumes,
            true,
        ),
        (
            "keys_after".into(),
            insert(body, end + 1, &extra),
            Expect::Resumes,
            true,
        ),
    ];
    out.extend(broken(body, end, &last));
    out.extend(known_keys_after(body, end, &object, base.format));
    out
}

fn appended(body: &str, format: RequestFormat) -> String {
    let message = match format {
        RequestFormat::OpenAiChat => json!({"role": "tool", "tool_call_id": "call_new",
            "content": "### Page\n- Page URL: http://x.test/\n```yaml\n- button \"Go\" [ref=e9]\n```"}),
        _ => json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_new",
            "content": [{"type": "text", "text": "new result"}], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "and more"}]}),
    };
    insert(body, array_end(body), &format!(",\n  {message}\n"))
}

/// The body with its last message's texts changed (the message written anew).
fn changed_last(body: &str) -> String {
    let last = message_ranges(body).pop().unwrap();
    let mut message: Value = serde_json::from_str(&body[last.clone()]).unwrap();
    change_texts(&mut message["content"]);
    format!("{}{}{}", &body[..last.start], message, &body[last.end..])
}

fn change_texts(value: &mut Value) {
    match value {
        Value::String(s) => s.push_str(" (changed)"),
        Value::Array(items) => items.iter_mut().for_each(change_texts),
        Value::Object(map) => {
            for key in ["text", "content"] {
                if let Some(v) = map.get_mut(key) {
                    change_texts(v);
                }
            }
        }
        _ => {}
    }
}

/// Top-level keys to add after the array: unknown ones, and for Anthropic a `system` with a
/// breakpoint when the body has none.
fn extra_keys(object: &Map<String, Value>, format: RequestFormat) -> String {
    let mut keys = String::from(
        r#","stream":true, "metadata": {"user_id": "u"},"tools":[{"type":"function","function":{"name":"x"}}]"#,
    );
    if format == RequestFormat::Anthropic {
        keys = String::from(
            r#","stream":true, "metadata": {"user_id": "u"},"tool_choice":{"type":"auto"}"#,
        );
        if !object.contains_key("system") {
            keys.push_str(
                r#","system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]"#,
            );
        }
    }
    keys
}

/// Tails the full read rejects.
fn broken(body: &str, end: usize, last: &Range<usize>) -> Vec<Later> {
    let trimmed = body.trim_end();
    let mut half = last.start + (last.end - last.start) / 2;
    while !body.is_char_boundary(half) {
        half += 1;
    }
    let cases = [
        ("no_closing_brace", trimmed[..trimmed.len() - 1].to_string()),
        ("cut_in_last_message", body[..half].to_string()),
        ("trailing_garbage", format!("{body}x")),
        ("trailing_object", format!("{body}{{}}")),
        (
            "second_messages",
            insert(body, end + 1, r#","messages":[]"#),
        ),
        (
            "second_messages_escaped",
            insert(body, end + 1, r#","m\u0065ssages":null"#),
        ),
        ("trailing_comma_in_array", insert(body, end, ",")),
        ("array_not_closed", format!("{}}}", &body[..end])),
        ("key_without_colon", insert(body, end + 1, r#","k" 1"#)),
        ("key_not_a_string", insert(body, end + 1, r#",1:2"#)),
        (
            "comma_before_brace",
            format!("{},}}", trimmed.strip_suffix('}').unwrap()),
        ),
        ("bad_value_after", insert(body, end + 1, r#","k":tru"#)),
        (
            "bad_last_message",
            format!("{}{{\"role\":}}{}", &body[..last.start], &body[last.end..]),
        ),
        ("duplicate_field_in_last_message", dup_role(body, last)),
    ];
    const EVERY_M: &[&str] = &[
        "no_closing_brace",
        "cut_in_last_message",
        "trailing_garbage",
        "second_messages",
        "duplicate_field_in_last_message",
    ];
    let later = |(n, b): (&str, String)| (n.to_string(), b, Expect::Fails, EVERY_M.contains(&n));
    cases.into_iter().map(later).collect()
}

/// The last message with its `role` given twice: the message reader rejects it.
fn dup_role(body: &str, last: &Range<usize>) -> String {
    let inner = &body[last.start + 1..];
    format!("{}{{\"role\":\"user\",{inner}", &body[..last.start])
}

/// Each known top-level key added after the array, once or twice: the full read rejects a
/// key the body has already, and reads what a new one tells.
fn known_keys_after(
    body: &str,
    end: usize,
    object: &Map<String, Value>,
    format: RequestFormat,
) -> Vec<Later> {
    let keys: &[(&str, &str)] = match format {
        RequestFormat::OpenAiChat => &[
            ("input", "1"),
            ("contents", r#"[{"role":"user","parts":[{"text":"x"}]}]"#),
            ("request", r#"{"contents":[{"parts":[]}]}"#),
            ("system", r#""be brief""#),
            ("anthropic_version", r#""2023-06-01""#),
        ],
        _ => &[
            (
                "system",
                r#"[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]"#,
            ),
            (
                "tools",
                r#"[{"name":"t","input_schema":{},"cache_control":{"type":"ephemeral"}}]"#,
            ),
        ],
    };
    let mut out = Vec::new();
    for (key, value) in keys {
        let expect = if object.contains_key(*key) {
            Expect::Fails
        } else {
            Expect::Resumes
        };
        for value in ["null", value] {
            let text = format!(r#", "{key}" : {value}"#);
            let name = format!("{key}={value}");
            // A key the body has already, given again: at every message.
            let every_m = expect == Expect::Fails && value == "null";
            out.push((name, insert(body, end + 1, &text), expect, every_m));
        }
        let twice = format!(r#","{key}":null,"{key}":null"#);
        let name = format!("{key} twice");
        out.push((name, insert(body, end + 1, &twice), Expect::Fails, true));
    }
    out
}

// ---------------------------------------------------------------------------------------
// The contract

fn full(body: &str, format: RequestFormat) -> WireRequest<'_> {
    read_request(body, format).unwrap().0
}

/// The resume point of every message of `base`, checked against where serde_json puts the
/// messages and against a read of the prefix with one message of our own after it.
fn resume_points(base: &Base, request: &WireRequest<'_>) -> Vec<ResumeAt> {
    let ranges = message_ranges(&base.body);
    assert!(
        request.resume_at(ranges.len()).is_none(),
        "{}: past the end",
        base.name
    );
    let mut points = Vec::new();
    for (m, range) in ranges.iter().enumerate() {
        let at = request
            .resume_at(m)
            .unwrap_or_else(|| panic!("{}: no resume at {m}", base.name));
        assert_eq!(
            (at.message, at.offset),
            (m, range.start),
            "{}: message {m}",
            base.name
        );
        let probe = format!(
            r#"{}{{"role":"user","content":"RESUME-MARK"}}]}}"#,
            &base.body[..at.offset]
        );
        let probe_request = full(&probe, base.format);
        let items = &probe_request.transcript().items;
        assert_eq!(
            items.len(),
            at.item + 1,
            "{}: item of message {m}",
            base.name
        );
        assert!(
            matches!(&items[at.item], Item::Text { text, .. } if text == "RESUME-MARK"),
            "{}: item of message {m}",
            base.name
        );
        points.push(at);
    }
    points
}

/// Reads `later` (`count` messages, when it can be read) from `at`, checks the answer
/// against the full read, and says whether there was one.
fn check(later: &str, count: usize, format: RequestFormat, at: &ResumeAt, what: &str) -> bool {
    assert!(later.is_char_boundary(at.offset), "{what}: bad test body");
    let full2 = read_request(later, format);
    let Some(tail) = read_request_from(later, format, at) else {
        return false;
    };
    let Ok((full2, _, _)) = full2 else {
        panic!("{what}: the tail read took a body the full read rejects");
    };
    compare(&tail, &full2, at, what);
    check_chain(&tail, &full2, count, at, what);
    check_writes(&tail, &full2, later, at, what);
    true
}

fn compare(tail: &WireRequest<'_>, full2: &WireRequest<'_>, at: &ResumeAt, what: &str) {
    let (t, f) = (&tail.transcript().items, &full2.transcript().items);
    assert_eq!(t.len(), f.len(), "{what}: item count");
    assert!(at.item <= f.len(), "{what}: resume item past the end");
    assert!(
        t[..at.item].iter().all(|i| matches!(i, Item::Other)),
        "{what}: prefix items"
    );
    assert_eq!(t[at.item..], f[at.item..], "{what}: items");
    // `offers.find` is a whole read's word only (a lean page, its one user, never resumes).
    let (mut tail_hints, mut full_hints) = (tail.hints, full2.hints);
    tail_hints.offers.find = false;
    full_hints.offers.find = false;
    assert_eq!(tail_hints, full_hints, "{what}: hints");
    assert_eq!(tail.breakpoints, full2.breakpoints, "{what}: breakpoints");
    for i in 0..f.len() {
        let (tb, fb) = (block(tail, i), block(full2, i));
        let expected = if i < at.item { None } else { fb };
        assert_eq!(tb, expected, "{what}: block of item {i}");
    }
}

fn block(request: &WireRequest<'_>, item: usize) -> Option<impl PartialEq + std::fmt::Debug> {
    request.blocks.get(item).copied().flatten()
}

/// Resume points taken from the tail read are the full read's, so reads chain. (The tail
/// read knows where every message of the tail starts; the full read may not.)
fn check_chain(
    tail: &WireRequest<'_>,
    full2: &WireRequest<'_>,
    count: usize,
    at: &ResumeAt,
    what: &str,
) {
    for m in 0..at.message {
        assert!(
            tail.resume_at(m).is_none(),
            "{what}: resume before the tail at {m}"
        );
    }
    for m in at.message..count + 1 {
        let (t, f) = (tail.resume_at(m), full2.resume_at(m));
        assert_eq!(t.is_some(), m < count, "{what}: resume at {m} of {count}");
        if f.is_some() {
            assert_eq!(format!("{t:?}"), format!("{f:?}"), "{what}: resume at {m}");
        }
    }
}

/// Edits on every result from the resume point on: replacements, appends, and both.
fn tail_edits(request: &WireRequest<'_>, from_item: usize) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (i, item) in request
        .transcript()
        .items
        .iter()
        .enumerate()
        .skip(from_item)
    {
        if !matches!(item, Item::Result(_)) {
            continue;
        }
        if i % 3 != 1 {
            edits.push(Edit {
                item: i,
                text: format!("replaced {i}\n\"quoted\"").into(),
                append: false,
            });
        }
        if i % 3 != 0 {
            edits.push(Edit {
                item: i,
                text: format!("appended {i}").into(),
                append: true,
            });
        }
    }
    edits
}

/// The breakpoints worth writing from `from_item` on: none, and our own on the first and
/// the last block that may carry one.
fn breakpoints(request: &WireRequest<'_>, from_item: usize) -> Vec<Option<Breakpoint>> {
    let blocks: Vec<usize> = (from_item..request.transcript().items.len())
        .filter(|&i| block(request, i).is_some())
        .collect();
    let mut out = vec![None];
    out.extend(blocks.first().map(|&i| Some(Breakpoint::Added(i))));
    out.extend(blocks.last().map(|&i| Some(Breakpoint::Added(i))));
    out
}

fn check_writes(
    tail: &WireRequest<'_>,
    full2: &WireRequest<'_>,
    later: &str,
    at: &ResumeAt,
    what: &str,
) {
    let edits = tail_edits(full2, at.item);
    let prefix = &later[..at.offset];
    for bp in breakpoints(full2, at.item) {
        let expected = full2.write_with(&edits, bp);
        let split = tail.write_from(prefix, at.offset, &edits, bp, at.offset);
        assert!(split.body == expected, "{what}: written body with {bp:?}");
        assert_eq!(split.mark, at.offset, "{what}: mark");
        assert_eq!(split.breakpoint, None, "{what}: breakpoint before the mark");
        assert_eq!(tail.write_with(&edits, bp), expected, "{what}: whole write");
    }
    let plain = full2.write(&edits);
    assert_eq!(tail.written_len(&edits), plain.len(), "{what}: written_len");
    assert_eq!(
        full2.written_len(&edits),
        plain.len(),
        "{what}: full written_len"
    );
}

/// Every later body of `base`, read from every message.
fn check_base(base: &Base) -> usize {
    let request = full(&base.body, base.format);
    let points = resume_points(base, &request);
    let mut checked = 0;
    let n = points.len();
    for (what, later, expect, every_m) in later_bodies(base) {
        let full_ok = read_request(&later, base.format).is_ok();
        assert_eq!(
            full_ok,
            expect == Expect::Resumes,
            "{}: {what}: full read",
            base.name
        );
        let count = serde_json::from_str::<Messages>(&later).map_or(0, |m| m.messages.len());
        let some = |m: usize| every_m || m == 0 || m == n / 2 || m == n - 1;
        for at in points.iter().filter(|at| some(at.message)) {
            assert!(
                later.starts_with(&base.body[..at.offset]),
                "{what}: bad test body"
            );
            let name = format!("{}: {what}: message {}", base.name, at.message);
            let resumed = check(&later, count, base.format, at, &name);
            assert_eq!(resumed, expect == Expect::Resumes, "{name}: resumed");
            checked += 1;
        }
    }
    checked
}

// ---------------------------------------------------------------------------------------
// Tests

/// Every later body of the bases of `format`, recorded or rewritten, from every message.
fn check_bases(format: RequestFormat, rewritten: bool) {
    let bases = bases();
    let mine = bases
        .iter()
        .filter(|b| b.format == format && b.name.ends_with(')') == rewritten);
    let checked: usize = mine.map(check_base).sum();
    assert!(checked > 1000, "only {checked} reads checked");
}

#[test]
fn tails_read_as_full_reads_do_openai() {
    check_bases(RequestFormat::OpenAiChat, false);
}

#[test]
fn tails_read_as_full_reads_do_openai_rewritten() {
    check_bases(RequestFormat::OpenAiChat, true);
}

#[test]
fn tails_read_as_full_reads_do_anthropic() {
    check_bases(RequestFormat::Anthropic, false);
}

#[test]
fn tails_read_as_full_reads_do_anthropic_rewritten() {
    check_bases(RequestFormat::Anthropic, true);
}

/// A write split at a resume point, with edits on both sides and our breakpoint, is the
/// whole write; and the mark lands where serde_json finds the message in the output.
#[test]
fn split_writes_are_whole_writes() {
    for base in bases() {
        let request = full(&base.body, base.format);
        let points = resume_points(&base, &request);
        let n = points.len();
        for at in [&points[0], &points[n / 2], &points[n - 1]] {
            let tail = read_request_from(&base.body, base.format, at).unwrap();
            check_marks(&base, &request, &tail, at);
            check_split_with_prefix_edits(&base, &request, at);
        }
    }
}

/// Marks at every later message land where the output has that message, and our
/// breakpoint is reported when it went before the mark.
fn check_marks(base: &Base, request: &WireRequest<'_>, tail: &WireRequest<'_>, at: &ResumeAt) {
    let edits = tail_edits(request, at.item);
    let ranges = message_ranges(&base.body);
    let prefix = &base.body[..at.offset];
    for bp in breakpoints(request, at.item) {
        let out = request.write_with(&edits, bp);
        let unmarked = request.write_with(&edits, None);
        // Where our breakpoint went: the first byte where the two writes differ.
        let inserted = (bp.is_some()).then(|| first_difference(&out, &unmarked));
        if let Some(d) = inserted {
            assert!(
                out[d..].starts_with(BREAKPOINT_TEXT),
                "{}: breakpoint",
                base.name
            );
        }
        let out_ranges = message_ranges(&out);
        for (k, range) in ranges.iter().enumerate().skip(at.message) {
            let split = tail.write_from(prefix, at.offset, &edits, bp, range.start);
            let what = format!("{}: from {} mark {k} {bp:?}", base.name, at.message);
            assert!(split.body == out, "{what}: body");
            assert_eq!(split.mark, out_ranges[k].start, "{what}: mark");
            assert_eq!(
                split.breakpoint,
                inserted.filter(|&d| d < split.mark),
                "{what}: bp"
            );
        }
        let split = tail.write_from(prefix, at.offset, &edits, bp, base.body.len());
        assert_eq!(split.mark, out.len(), "{}: mark at the end", base.name);
    }
}

fn first_difference(a: &str, b: &str) -> usize {
    a.bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// On the full read, edits before the split point go into the prefix's write and edits
/// after it into the rest's: together they are the whole write.
fn check_split_with_prefix_edits(base: &Base, request: &WireRequest<'_>, at: &ResumeAt) {
    let edits = tail_edits(request, 0);
    for bp in breakpoints(request, 0) {
        let whole = request.write_with(&edits, bp);
        let head = request.write_from("", 0, &edits, bp, at.offset);
        assert!(head.body == whole, "{}: head write", base.name);
        let prefix = &head.body[..head.mark];
        let rest = request.write_from(prefix, at.offset, &edits, bp, at.offset);
        let what = format!("{}: split at {} with {bp:?}", base.name, at.message);
        assert!(rest.body == whole, "{what}");
        assert_eq!(rest.mark, head.mark, "{what}: mark");
        assert_eq!(
            rest.breakpoint, None,
            "{what}: nothing inserted before the split"
        );
        let ranges = message_ranges(&whole);
        assert_eq!(
            head.mark, ranges[at.message].start,
            "{what}: mark in the output"
        );
    }
}

/// Other formats, another format asked, and a body that is no object do not resume.
#[test]
fn what_does_not_resume() {
    let base = recorded()
        .into_iter()
        .find(|b| b.format == RequestFormat::Anthropic)
        .unwrap();
    let request = full(&base.body, base.format);
    let at = request.resume_at(1).unwrap();
    for format in [
        RequestFormat::Auto,
        RequestFormat::OpenAiChat,
        RequestFormat::Responses,
    ] {
        assert!(
            read_request_from(&base.body, format, &at).is_none(),
            "{format:?}"
        );
    }
    assert!(read_request_from(&base.body, base.format, &at).is_some());
    let responses = r#"{"input":[{"role":"user","content":"hi"}],"messages":[{"role":"user"}]}"#;
    let request = read_request(responses, RequestFormat::Responses).unwrap().0;
    assert!(request.resume_at(0).is_none(), "responses");
    let gemini = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"messages":[{}]}"#;
    let request = read_request(gemini, RequestFormat::Gemini).unwrap().0;
    assert!(request.resume_at(0).is_none(), "gemini");
    // Read as a struct from an array, as serde allows (every field there): not a top-level
    // `messages` member.
    let array = r#"[[{"role":"user","content":"hi"}], null, null, null, null, null]"#;
    let request = read_request(array, RequestFormat::OpenAiChat).unwrap().0;
    assert_eq!(
        request.transcript().items.len(),
        1,
        "the array body is read"
    );
    assert!(request.resume_at(0).is_none(), "array body");
    let array = r#"[[{"role":"user","content":"hi"}], null, null]"#;
    let request = read_request(array, RequestFormat::Anthropic).unwrap().0;
    assert_eq!(
        request.transcript().items.len(),
        1,
        "the array body is read"
    );
    assert!(request.resume_at(0).is_none(), "array body");
    // With fields missing it fails, as it always did.
    let short = r#"[[{"role":"user","content":"hi"}]]"#;
    for format in [RequestFormat::OpenAiChat, RequestFormat::Anthropic] {
        let err = read_request(short, format).err().expect("short array body");
        assert!(err.to_string().contains("struct Envelope with"), "{err}");
    }
}

/// Elements whose start a full read cannot tell (no object, an escaped first key) are no
/// resume points; the others around them are, and reads from them are exact.
#[test]
fn odd_elements() {
    let body = r#"{"messages": [ 7, {"r\u006fle":"user","content":"a"}, {}, {"role":"user","content":"b"},
        {"role" : "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}, {"role":"tool","tool_call_id":"c1","content":"r"}
        ], "model": "m"}"#;
    let request = full(body, RequestFormat::OpenAiChat);
    let starts: Vec<bool> = (0..7).map(|m| request.resume_at(m).is_some()).collect();
    assert_eq!(starts, [false, false, false, true, true, true, false]);
    let ranges = message_ranges(body);
    for m in 3..6 {
        let at = request.resume_at(m).unwrap();
        assert_eq!(at.offset, ranges[m].start, "message {m}");
        let count = ranges.len();
        assert!(check(
            body,
            count,
            RequestFormat::OpenAiChat,
            &at,
            &format!("odd {m}")
        ));
        // A tail read resumes at any element, odd ones included.
        let later = format!("{}7, {{}}, {}", &body[..at.offset], &body[at.offset..]);
        let what = format!("odd later {m}");
        assert!(check(
            &later,
            count + 2,
            RequestFormat::OpenAiChat,
            &at,
            &what
        ));
        let tail = read_request_from(&later, RequestFormat::OpenAiChat, &at).unwrap();
        let next = tail.resume_at(m + 1).unwrap();
        assert_eq!(&later[next.offset..next.offset + 4], "{}, ", "message {m}");
    }
}
