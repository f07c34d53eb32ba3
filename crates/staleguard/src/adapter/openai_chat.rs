//! OpenAI Chat Completions request bodies (`messages` with `tool_calls` and `role: "tool"`,
//! legacy `function_call` / `role: "function"`, `custom` tool calls).
//!
//! The body is read lazily: each message's fields are borrowed as raw JSON, and only the
//! contents are decoded.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::content;
use super::format::RequestFormat;
use super::lenient::{is_object, List, Located, Seen};
use super::offers;
use super::request::{Hints, ResumeAt, WireRequest};
use super::strings::{json_error, raw_text, string_of};
use super::tail;
use crate::error::Error;
use crate::transcript::{Item, Role, ToolCall};

/// The top-level keys besides `messages`; kept as [`Seen`], so that a read resumed after
/// the array knows which came before it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    messages: Option<List<Located<Message<'a>>>>,
    #[serde(default, borrow)]
    input: Seen<'a>,
    #[serde(default, borrow)]
    contents: Seen<'a>,
    /// Gemini Code Assist's wrapper around a Gemini request.
    #[serde(default, borrow)]
    request: Seen<'a>,
    #[serde(default, borrow)]
    system: Seen<'a>,
    #[serde(default, borrow)]
    anthropic_version: Seen<'a>,
}

/// [`Envelope`] as it was before it kept [`Seen`] keys, for a body that is an array: serde
/// reads it field by field, and every field then has to be there, as it always had to (its
/// errors name the type: the same name).
mod listed {
    use super::{List, Located, Message, RawValue, Seen};
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub(super) struct Envelope<'a> {
        #[serde(borrow)]
        messages: Option<List<Located<Message<'a>>>>,
        #[serde(borrow)]
        input: Option<&'a RawValue>,
        #[serde(borrow)]
        contents: Option<&'a RawValue>,
        #[serde(borrow)]
        request: Option<&'a RawValue>,
        #[serde(borrow)]
        system: Option<&'a RawValue>,
        #[serde(borrow)]
        anthropic_version: Option<&'a RawValue>,
    }

    impl<'a> From<Envelope<'a>> for super::Envelope<'a> {
        fn from(l: Envelope<'a>) -> Self {
            super::Envelope {
                messages: l.messages,
                input: Seen(l.input),
                contents: Seen(l.contents),
                request: Seen(l.request),
                system: Seen(l.system),
                anthropic_version: Seen(l.anthropic_version),
            }
        }
    }
}

/// The envelope's keys besides `messages`, for a read resumed after the array.
const ENVELOPE: tail::Envelope = tail::Envelope {
    keys: &[
        "input",
        "contents",
        "request",
        "system",
        "anthropic_version",
    ],
    tells,
};

/// What the top-level key `name` with value `raw` (`None` for `null`) says of the format.
fn tells(name: &str, raw: Option<&RawValue>) -> (Hints, usize) {
    let mut hints = Hints::default();
    match name {
        "input" => hints.has_input = raw.is_some(),
        "contents" => hints.has_contents = raw.is_some_and(super::gemini::has_parts),
        "request" => hints.wrapped_contents = raw.is_some_and(super::gemini::wraps_contents),
        "system" | "anthropic_version" => hints.has_system = raw.is_some(),
        _ => {}
    }
    (hints, 0)
}

/// A message, every field kept raw so that no field of an unexpected type fails the body.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_call_id: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_calls: Option<&'a RawValue>,
    #[serde(borrow)]
    function_call: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallJson<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionJson<'a>>,
    #[serde(borrow)]
    custom: Option<CustomJson<'a>>,
}

#[derive(Deserialize)]
struct FunctionJson<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CustomJson<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

/// Reads a Chat Completions body. Fails only on invalid JSON or a body that is not an object;
/// the hints tell whether it is one at all.
pub(crate) fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let envelope = if is_object(body) {
        serde_json::from_str(body)
    } else {
        serde_json::from_str::<listed::Envelope>(body).map(Envelope::from)
    };
    let envelope = envelope.map_err(|e| json_error(&e, body, "openai"))?;
    let hints = Hints {
        has_messages: envelope.messages.is_some(),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    request.resumable(RequestFormat::OpenAiChat);
    request.read_messages(envelope.messages, read_message);
    let keys = [
        ("input", envelope.input),
        ("contents", envelope.contents),
        ("request", envelope.request),
        ("system", envelope.system),
        ("anthropic_version", envelope.anthropic_version),
    ];
    for (name, seen) in keys {
        request.note_key(name, seen, tells);
    }
    // `tools` is no key of the envelope: a body that gives it twice is read as it always was.
    request.hints.offers |= offers::in_body(body);
    Ok(request)
}

/// Reads a Chat Completions body from `at` on; `None` where the full read could answer
/// otherwise (see [`super::read_request_from`]).
pub(crate) fn read_from<'a>(body: &'a str, at: &ResumeAt) -> Option<WireRequest<'a>> {
    tail::read::<Message<'a>>(body, at, &ENVELOPE, read_message)
}

fn read_message<'a>(request: &mut WireRequest<'a>, index: usize, m: Message<'a>) {
    if let Some(c) = m.content {
        request.hints.has_anthropic_blocks |= super::strings::looks_anthropic(c);
    }
    match m.role.and_then(string_of).as_deref() {
        Some("tool") => read_result(request, index, m.tool_call_id, m.content),
        // Legacy function calling pairs a `function` message with the call by name.
        Some("function") => read_result(request, index, m.name, m.content),
        Some("assistant") => read_assistant(request, index, &m),
        Some("user") => read_text(request, Role::User, m.content),
        Some("system" | "developer") => read_text(request, Role::System, m.content),
        _ => request.push(Item::Other),
    }
}

fn read_result<'a>(
    request: &mut WireRequest<'a>,
    index: usize,
    id: Option<&'a RawValue>,
    body: Option<&'a RawValue>,
) {
    request.push_result(index, id.and_then(string_of), body, "text", false);
}

fn read_assistant<'a>(request: &mut WireRequest<'a>, index: usize, m: &Message<'a>) {
    read_text(request, Role::Assistant, m.content);
    if let Some(calls) = m
        .tool_calls
        .and_then(|r| serde_json::from_str::<Vec<&RawValue>>(r.get()).ok())
    {
        for raw in calls {
            let call = serde_json::from_str::<CallJson<'a>>(raw.get())
                .ok()
                .and_then(|c| tool_call(c, index));
            request.push(call.map_or(Item::Other, Item::Call));
        }
    }
    let legacy = m
        .function_call
        .and_then(|r| serde_json::from_str::<FunctionJson<'a>>(r.get()).ok());
    if let Some(FunctionJson {
        name: Some(name),
        arguments,
    }) = legacy
    {
        let call = ToolCall {
            id: name.clone(),
            name,
            arguments: raw_text(arguments),
            message: index,
        };
        request.push(Item::Call(call));
    }
}

fn read_text<'a>(request: &mut WireRequest<'a>, role: Role, content: Option<&'a RawValue>) {
    if let Some(c) = content.and_then(|raw| content::read(raw, "text")) {
        // A system text may list the tools loaded on demand.
        if role == Role::System {
            request.hints.offers |= offers::in_text(&c.text);
        }
        request.push(Item::Text { role, text: c.text });
    }
}

fn tool_call<'a>(c: CallJson<'a>, message: usize) -> Option<ToolCall<'a>> {
    let id = c.id?;
    let (name, arguments) = match (c.function, c.custom) {
        (Some(f), _) => (f.name?, raw_text(f.arguments)),
        (None, Some(custom)) => (custom.name?, raw_text(custom.input)),
        (None, None) => return None,
    };
    Some(ToolCall {
        id,
        name,
        arguments,
        message,
    })
}
