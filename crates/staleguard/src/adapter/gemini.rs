//! Google Gemini `generateContent` request bodies: `contents` of `role: "user"` / `"model"`,
//! each a list of `parts`. A model turn carries `functionCall` parts (`name`, `args`, an
//! optional `id`); the user turn after it answers with `functionResponse` parts (`name`,
//! `response`, an optional `id`). A response pairs with the call of the latest model turn
//! that has its `id`, else with the first unanswered call of its name there: Gemini CLI
//! sends ids of its own for calls the API sent without one.
//!
//! `response` is any JSON object; the text of a tool result sits under a key the client
//! chose. The shapes real clients send are read:
//! - `{"output": "..."}`: Gemini CLI, for MCP tools too (their text parts joined with
//!   `\n`, each wrapped in `<untrusted_context>` tags, which the transcript leaves out so
//!   that a page has the ID the MCP guard gives it); `{"error": "..."}` for a failed call.
//! - `{"content": [MCP content], "isError": ...}`: an MCP `CallToolResult` as it is, as
//!   the `@google/genai` MCP adapter passes it on.
//! - `{"result": ...}` / `{"error": ...}` holding a string or a `CallToolResult`:
//!   `google-genai` (Python) automatic function calling, MCP sessions included.
//!
//! Only that value is replaced, and the images of a collapsed result are dropped (SPEC 2):
//! those inside the response (`parts`, which Gemini CLI fills for Gemini 3 models; emptied)
//! and the `inlineData` / `fileData` parts right after it (Gemini CLI's place for them with
//! other models; removed). Text under any other key, `systemInstruction`, `tools`,
//! `toolConfig`, `generationConfig`, `cachedContent` and thought signatures pass through
//! as they are. A request with `cachedContent` holds only the turns after the cached ones.
//! Gemini Code Assist (Gemini CLI signed in with Google) sends the same request inside
//! `{"model", "project", "user_prompt_id", "request": {...}}`: the inner one is read, and
//! everything around it is kept.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::lenient::List;
use super::offers;
use super::request::{Hints, WireRequest};
use super::strings::{json_error, raw_text, string_of};
use crate::error::Error;
use crate::transcript::{Item, Role, ToolCall};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    contents: Option<List<Content<'a>>>,
    messages: Option<IgnoredAny>,
    input: Option<IgnoredAny>,
    #[serde(rename = "cachedContent", alias = "cached_content")]
    cached_content: Option<IgnoredAny>,
    /// Gemini Code Assist (Gemini CLI signed in with Google) wraps the request:
    /// `{"model", "project", "user_prompt_id", "request": {"contents", ...}}`.
    #[serde(borrow)]
    request: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    /// Read twice: as parts, and as raw values for where each part lies.
    #[serde(borrow)]
    parts: Option<&'a RawValue>,
}

/// A part, with the fields that tell its kind. The REST API takes snake_case names too.
#[derive(Deserialize)]
struct Part<'a> {
    #[serde(default, borrow, deserialize_with = "super::strings::lossy_text")]
    text: Option<Cow<'a, str>>,
    /// A thought summary is the model's, not the conversation's text.
    thought: Option<&'a RawValue>,
    #[serde(rename = "functionCall", alias = "function_call", borrow)]
    function_call: Option<Call<'a>>,
    #[serde(rename = "functionResponse", alias = "function_response", borrow)]
    function_response: Option<Response<'a>>,
    #[serde(rename = "inlineData", alias = "inline_data")]
    inline_data: Option<IgnoredAny>,
    #[serde(rename = "fileData", alias = "file_data")]
    file_data: Option<IgnoredAny>,
}

impl Part<'_> {
    /// Media and nothing else: what Gemini CLI puts after a response whose tool returned an
    /// image, for models that take no images inside a response.
    fn is_media(&self) -> bool {
        (self.inline_data.is_some() || self.file_data.is_some())
            && self.text.is_none()
            && self.function_call.is_none()
            && self.function_response.is_none()
    }
}

/// An element of a response's own `parts` (multimodal function responses).
#[derive(Deserialize)]
struct MediaPart {
    #[serde(rename = "inlineData", alias = "inline_data")]
    inline_data: Option<IgnoredAny>,
    #[serde(rename = "fileData", alias = "file_data")]
    file_data: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
    /// Images the tool returned, inside the response (Gemini 3 models).
    #[serde(borrow)]
    parts: Option<&'a RawValue>,
}

/// The keys of `response` that hold a tool result's text, as clients write them.
#[derive(Deserialize)]
struct ResponseValue<'a> {
    #[serde(borrow)]
    output: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(rename = "isError", alias = "is_error")]
    is_error: Option<&'a RawValue>,
}

/// An MCP `CallToolResult` nested under `result` or `error`.
#[derive(Deserialize)]
struct CallToolResult<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(rename = "isError", alias = "is_error")]
    is_error: Option<&'a RawValue>,
}

/// The calls of the latest model turn (one or more model contents in a row), which the
/// responses after them answer.
#[derive(Default)]
struct Turn<'a> {
    calls: Vec<Pending<'a>>,
    /// The content read last was the model's: a model content after it continues the turn.
    in_model_turn: bool,
}

/// A call of the latest model turn: the id its response is paired by, and whether a
/// response took it already.
struct Pending<'a> {
    id: Cow<'a, str>,
    /// The call carried this id itself (a response may name it).
    explicit: bool,
    name: Cow<'a, str>,
    answered: bool,
}

/// Reads a `generateContent` body.
pub(crate) fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let mut envelope: Envelope =
        serde_json::from_str(body).map_err(|e| json_error(&e, body, "gemini"))?;
    let wrapped = envelope.contents.is_none() && envelope.request.is_some_and(wraps_contents);
    if let (true, Some(inner)) = (wrapped, envelope.request) {
        // The inner request borrows from the body too: its spans are the body's.
        envelope = serde_json::from_str(inner.get()).map_err(|e| json_error(&e, body, "gemini"))?;
    }
    let hints = Hints {
        wrapped_contents: wrapped,
        has_contents: envelope.contents.is_some(),
        has_messages: envelope.messages.is_some(),
        has_input: envelope.input.is_some(),
        server_side_history: envelope.cached_content.is_some(),
        offers: offers::in_body(body),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    let mut turn = Turn::default();
    if let Some(List::Items(contents)) = envelope.contents {
        for (index, content) in contents.into_iter().enumerate() {
            match content {
                Some(c) => read_content(&mut request, &mut turn, index, c),
                None => request.push(Item::Other),
            }
        }
    }
    Ok(request)
}

fn read_content<'a>(
    request: &mut WireRequest<'a>,
    turn: &mut Turn<'a>,
    index: usize,
    content: Content<'a>,
) {
    // A content without a role is the user's (single-turn requests leave it out).
    let role = match content.role.map(string_of) {
        None => Role::User,
        Some(role) => match role.as_deref() {
            Some("user" | "function" | "tool") => Role::User,
            Some("model") => Role::Assistant,
            _ => return request.push(Item::Other),
        },
    };
    // Each part with its raw value, for where it lies (to drop the media of a collapsed
    // result). A part whose fields have unexpected types leaves the content as it is.
    let raw = content
        .parts
        .and_then(|r| serde_json::from_str::<Vec<&'a RawValue>>(r.get()).ok());
    let parts: Option<Vec<(&RawValue, Option<Part<'a>>)>> =
        raw.and_then(|raw| raw.into_iter().map(|r| Some((r, part_of(r)?))).collect());
    let Some(parts) = parts else {
        return request.push(Item::Other);
    };
    let model = role == Role::Assistant;
    if model && !turn.in_model_turn {
        turn.calls.clear();
    }
    turn.in_model_turn = model;
    // The result the media parts that follow belong to, and where the part before ends.
    let mut owner: Option<usize> = None;
    let mut previous_end = None;
    for (at, (raw, part)) in parts.into_iter().enumerate() {
        let place = request.range_of(raw);
        match part {
            Some(part) if part.is_media() && role == Role::User => {
                request.push(Item::Other);
                if let (Some(item), Some(from), Some((_, end))) = (owner, previous_end, place) {
                    // The part and the comma before it: the list stays valid JSON.
                    request.images_of(item, (from, end), "", 1);
                }
            }
            Some(part) => {
                let item = request.next_item();
                let is_response = part.function_response.is_some();
                read_part(request, &mut turn.calls, (index, at), role, part);
                owner = is_response.then_some(item);
            }
            None => {
                request.push(Item::Other);
                owner = None;
            }
        }
        previous_end = place.map(|(_, end)| end);
    }
}

/// A part read from its raw value: `Some(None)` for anything but an object (an odd part),
/// `None` for an object whose fields have unexpected types.
fn part_of<'a>(raw: &'a RawValue) -> Option<Option<Part<'a>>> {
    let json = raw.get();
    if !json.starts_with('{') {
        return Some(None);
    }
    serde_json::from_str(json).ok().map(Some)
}

fn read_part<'a>(
    request: &mut WireRequest<'a>,
    pending: &mut Vec<Pending<'a>>,
    (index, at): (usize, usize),
    role: Role,
    part: Part<'a>,
) {
    if let (Some(call), Role::Assistant) = (part.function_call, role) {
        return read_call(request, pending, (index, at), call);
    }
    if let (Some(response), Role::User) = (part.function_response, role) {
        let call_id = pair(pending, response.id, response.name.as_deref());
        let item = request.next_item();
        read_response(request, index, call_id, response.response);
        return media_inside(request, item, response.parts);
    }
    match (part.text, part.thought) {
        (Some(text), None) => request.push(Item::Text { role, text }),
        _ => request.push(Item::Other),
    }
}

/// Counts the media a response carries in its own `parts` as the result's images, which
/// an empty list replaces when it collapses.
fn media_inside(request: &mut WireRequest<'_>, item: usize, parts: Option<&RawValue>) {
    let Some(parts) = parts else { return };
    let Ok(List::Items(media)) = serde_json::from_str::<List<MediaPart>>(parts.get()) else {
        return;
    };
    let count = media
        .iter()
        .flatten()
        .filter(|m| m.inline_data.is_some() || m.file_data.is_some())
        .count();
    if let (true, Some(range)) = (count > 0, request.range_of(parts)) {
        request.images_of(item, range, "[]", count);
    }
}

fn read_call<'a>(
    request: &mut WireRequest<'a>,
    pending: &mut Vec<Pending<'a>>,
    (index, at): (usize, usize),
    call: Call<'a>,
) {
    let Some(name) = call.name else {
        return request.push(Item::Other);
    };
    let explicit = call.id.is_some();
    // A call without an id gets one that no wire id looks like: where it sits.
    let id = call
        .id
        .unwrap_or_else(|| Cow::Owned(format!("{name}@{index}.{at}")));
    pending.push(Pending {
        id: id.clone(),
        explicit,
        name: name.clone(),
        answered: false,
    });
    request.push(Item::Call(ToolCall {
        id,
        name,
        arguments: raw_text(call.args),
        message: index,
    }));
}

/// The id of the call a response answers: the one whose id it names, else the first
/// unanswered one of its name; its own id (or none) when no call of the turn fits.
fn pair<'a>(
    pending: &mut [Pending<'a>],
    id: Option<Cow<'a, str>>,
    name: Option<&str>,
) -> Option<Cow<'a, str>> {
    let by_id = id
        .as_deref()
        .and_then(|id| pending.iter().position(|p| p.explicit && p.id == id));
    let by_name = || {
        pending
            .iter()
            .position(|p| !p.answered && Some(p.name.as_ref()) == name)
    };
    match by_id.or_else(by_name) {
        Some(found) => {
            pending[found].answered = true;
            Some(pending[found].id.clone())
        }
        None => id,
    }
}

fn read_response<'a>(
    request: &mut WireRequest<'a>,
    index: usize,
    call_id: Option<Cow<'a, str>>,
    response: Option<&'a RawValue>,
) {
    match response.and_then(result_text) {
        Some((raw, is_error)) => request.push_result(index, call_id, Some(raw), "text", is_error),
        None => return request.push(Item::Other),
    }
    if let Some(result) = request.last_result() {
        if let Some(own) = unwrap_untrusted(&result.text) {
            result.text = Cow::Owned(own);
        }
    }
}

const UNTRUSTED_OPEN: &str = "<untrusted_context>\n";
const UNTRUSTED_CLOSE: &str = "\n</untrusted_context>";

/// The tool's own text of a result Gemini CLI wrapped: each MCP text block as
/// `<untrusted_context>\n{text}\n</untrusted_context>` (a closing tag inside escaped as
/// `&lt;/untrusted_context&gt;`), the blocks joined with `\n`. `None` unless the whole text
/// is such blocks: anything else is kept as it is.
fn unwrap_untrusted(text: &str) -> Option<String> {
    let mut rest = text.strip_prefix(UNTRUSTED_OPEN)?;
    let mut own = String::with_capacity(text.len());
    loop {
        let end = rest.find(UNTRUSTED_CLOSE)?;
        own.push_str(&rest[..end].replace("&lt;/untrusted_context&gt;", "</untrusted_context>"));
        rest = &rest[end + UNTRUSTED_CLOSE.len()..];
        if rest.is_empty() {
            return Some(own);
        }
        rest = rest.strip_prefix('\n')?.strip_prefix(UNTRUSTED_OPEN)?;
        own.push('\n');
    }
}

/// The value that holds a result's text in a `response` object, and whether it reports an
/// error; `None` when no key clients use for it is there.
fn result_text(response: &RawValue) -> Option<(&RawValue, bool)> {
    let value: ResponseValue<'_> = serde_json::from_str(response.get()).ok()?;
    let flag = |raw: Option<&RawValue>| raw.is_some_and(|r| r.get() == "true");
    if let Some(output) = value.output {
        return Some((output, false));
    }
    if let Some(content) = value.content {
        return Some((content, flag(value.is_error)));
    }
    let (raw, is_error) = match (value.result, value.error) {
        (Some(result), _) => (result, false),
        (None, Some(error)) => (error, true),
        (None, None) => return None,
    };
    if !raw.get().starts_with('{') {
        return Some((raw, is_error));
    }
    let nested: CallToolResult<'_> = serde_json::from_str(raw.get()).ok()?;
    Some((nested.content?, is_error || flag(nested.is_error)))
}

/// Whether `request` is an object whose `contents` is a list of objects with `parts`: a
/// Gemini body as Gemini Code Assist wraps it.
pub(crate) fn wraps_contents(request: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct Wrapped<'a> {
        #[serde(borrow)]
        contents: Option<&'a RawValue>,
    }
    serde_json::from_str::<Wrapped<'_>>(request.get())
        .ok()
        .and_then(|w| w.contents)
        .is_some_and(has_parts)
}

/// Whether `contents` is a list whose objects have `parts`: a Gemini body.
pub(crate) fn has_parts(contents: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct WithParts {
        parts: Option<IgnoredAny>,
    }
    match serde_json::from_str::<List<WithParts>>(contents.get()) {
        Ok(List::Items(items)) => items.iter().flatten().any(|c| c.parts.is_some()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(body: &str) -> Vec<Item<'_>> {
        read(body).unwrap().into_transcript().items
    }

    #[test]
    fn responses_pair_by_id_then_by_name_and_order() {
        let body = r#"{"contents":[
            {"role":"user","parts":[{"text":"go"}]},
            {"role":"model","parts":[{"functionCall":{"name":"a","args":{}}},{"functionCall":{"name":"a","args":{"x":1}}},{"functionCall":{"id":"k","name":"b","args":{}}}]},
            {"role":"user","parts":[{"functionResponse":{"id":"cli-1","name":"a","response":{"output":"one"}}},{"functionResponse":{"id":"k","name":"b","response":{"error":"bad"}}},{"functionResponse":{"name":"a","response":{"output":"two"}}}]}
        ]}"#;
        let t = read(body).unwrap().into_transcript();
        let pairs = t.pair_calls();
        assert_eq!(pairs[4..], [Some(1), Some(3), Some(2)]);
        let Item::Result(r) = &t.items[5] else {
            panic!("{:?}", t.items[5])
        };
        assert!(r.is_error);
        assert_eq!(r.text, "bad");
    }

    #[test]
    fn a_turn_is_the_model_contents_in_a_row_and_ends_at_the_next() {
        let body = r#"{"contents":[
            {"role":"model","parts":[{"text":"thinking aloud"}]},
            {"role":"model","parts":[{"functionCall":{"name":"a"}}]},
            {"role":"model","parts":[{"functionCall":{"name":"b"}}]},
            {"role":"user","parts":[{"functionResponse":{"name":"b","response":{"output":"1"}}},{"functionResponse":{"name":"a","response":{"output":"2"}}}]},
            {"role":"model","parts":[{"text":"next"}]},
            {"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"late"}}}]}
        ]}"#;
        let t = read(body).unwrap().into_transcript();
        assert_eq!(t.pair_calls()[3..], [Some(2), Some(1), None, None]);
    }

    #[test]
    fn gemini_clis_untrusted_context_tags_are_left_out() {
        let wrap = |t: &str| format!("<untrusted_context>\n{t}\n</untrusted_context>");
        let cases = [
            (wrap("### Page"), Some("### Page".to_string())),
            (
                format!("{}\n{}", wrap("a"), wrap("b &lt;/untrusted_context&gt; c")),
                Some("a\nb </untrusted_context> c".to_string()),
            ),
            (wrap(""), Some(String::new())),
            (
                format!("{}\n[Tool 'x' provided image data]", wrap("a")),
                None,
            ),
            (format!("note {}", wrap("a")), None),
            ("<untrusted_context>\nunclosed".to_string(), None),
        ];
        for (text, want) in cases {
            assert_eq!(unwrap_untrusted(&text), want, "{text:?}");
        }
    }

    #[test]
    fn client_shapes_are_read_and_others_kept() {
        let shapes = [
            (r#"{"output":"page"}"#, Some(("page", false))),
            (
                r#"{"content":[{"type":"text","text":"page"}],"isError":true}"#,
                Some(("page", true)),
            ),
            (
                r#"{"result":{"content":[{"type":"text","text":"page"}],"isError":false}}"#,
                Some(("page", false)),
            ),
            (r#"{"result":"page"}"#, Some(("page", false))),
            (
                r#"{"error":{"content":[{"type":"text","text":"page"}],"isError":true}}"#,
                Some(("page", true)),
            ),
            (r#"{"answer":"page"}"#, None),
            (r#"{"result":{"rows":3}}"#, None),
            (r#""page""#, None),
        ];
        for (response, want) in shapes {
            let body = format!(
                r#"{{"contents":[{{"role":"model","parts":[{{"functionCall":{{"name":"t"}}}}]}},{{"role":"user","parts":[{{"functionResponse":{{"name":"t","response":{response}}}}}]}}]}}"#
            );
            let got = match &items(&body)[1] {
                Item::Result(r) => Some((r.text.to_string(), r.is_error)),
                _ => None,
            };
            let want = want.map(|(t, e)| (t.to_string(), e));
            assert_eq!(got, want, "{response}");
        }
    }

    #[test]
    fn text_thoughts_and_odd_parts() {
        let body = r#"{"systemInstruction":{"parts":[{"text":"sys"}]},"contents":[
            {"parts":[{"text":"hi"}]},
            {"role":"model","parts":[{"text":"plan","thought":true},{"text":"ok","thoughtSignature":"c2ln"},3]},
            {"role":"critic","parts":[]}
        ]}"#;
        let got = items(body);
        assert_eq!(got.len(), 5);
        assert!(matches!(&got[0], Item::Text { role: Role::User, text } if text == "hi"));
        assert_eq!(got[1], Item::Other);
        assert!(matches!(&got[2], Item::Text { role: Role::Assistant, text } if text == "ok"));
        assert_eq!(got[3..], [Item::Other, Item::Other]);
    }

    /// Found by the `gemini_body` fuzz target: a session whose system text lists the guard's
    /// `browser_history` (Claude Code's deferred tools) let a collapse wait as an OpenAI Chat
    /// body, and not as a Gemini body, whose system text is `systemInstruction`.
    #[test]
    fn a_system_instruction_that_lists_the_history_tool_offers_it() {
        let body = |system: &str| {
            let system = serde_json::to_string(system).expect("JSON string");
            format!(
                r#"{{"systemInstruction":{{"parts":[{{"text":{system}}}]}},"contents":[{{"role":"user","parts":[{{"text":"hi"}}]}}]}}"#
            )
        };
        let listed = body(
            "Deferred tools:\nmcp__playwright__browser_click\nmcp__playwright__browser_history",
        );
        assert!(read(&listed).expect("reads").hints.offers.history);
        let wrapped = format!(r#"{{"model":"m","project":"p","request":{listed}}}"#);
        assert!(read(&wrapped).expect("reads").hints.offers.history);
        let named = body("Use browser_history to read old pages.");
        assert!(!read(&named).expect("reads").hints.offers.history);
    }
}
