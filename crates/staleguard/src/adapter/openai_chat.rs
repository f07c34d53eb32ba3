//! OpenAI Chat Completions request bodies (`messages` with `tool_calls` and `role: "tool"`,
//! legacy `function_call` / `role: "function"`, `custom` tool calls).
//!
//! The body is read lazily: each message's fields are borrowed as raw JSON, and only the
//! contents are decoded.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::content;
use super::lenient::List;
use super::request::{Hints, WireRequest};
use super::{json_error, raw_text, string_of};
use crate::error::Error;
use crate::transcript::{Item, Role, ToolCall};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    messages: Option<List<Message<'a>>>,
    input: Option<IgnoredAny>,
    #[serde(borrow)]
    contents: Option<&'a RawValue>,
    /// Gemini Code Assist's wrapper around a Gemini request.
    #[serde(borrow)]
    request: Option<&'a RawValue>,
    system: Option<IgnoredAny>,
    anthropic_version: Option<IgnoredAny>,
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
pub fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|e| json_error(&e, body, "openai"))?;
    let hints = Hints {
        has_messages: envelope.messages.is_some(),
        has_input: envelope.input.is_some(),
        has_contents: envelope.contents.is_some_and(super::gemini::has_parts),
        wrapped_contents: envelope.request.is_some_and(super::gemini::wraps_contents),
        has_system: envelope.system.is_some() || envelope.anthropic_version.is_some(),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    request.read_list(envelope.messages, read_message);
    Ok(request)
}

fn read_message<'a>(request: &mut WireRequest<'a>, index: usize, m: Message<'a>) {
    if let Some(c) = m.content {
        request.hints.has_anthropic_blocks |= super::looks_anthropic(c);
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
