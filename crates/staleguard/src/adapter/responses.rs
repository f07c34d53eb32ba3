//! OpenAI Responses request bodies: `input` items, with `function_call` (`call_id`, `name`,
//! `arguments`) and `function_call_output` (`call_id`, `output` as a string or as
//! `input_text` / `input_image` parts), and their `custom_tool_call` twins. `reasoning`
//! items and encrypted content are never touched. With `previous_response_id` or
//! `conversation`, earlier turns live on the server: what the request holds is projected.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::content;
use super::lenient::List;
use super::offers;
use super::request::{Hints, WireRequest};
use super::strings::{json_error, raw_text, string_of};
use crate::error::Error;
use crate::transcript::{Item, Role, ToolCall};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    input: Option<List<InputItem<'a>>>,
    messages: Option<IgnoredAny>,
    previous_response_id: Option<IgnoredAny>,
    conversation: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct InputItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    output: Option<&'a RawValue>,
}

/// Reads a Responses body.
pub(crate) fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|e| json_error(&e, body, "responses"))?;
    let hints = Hints {
        has_input: envelope.input.is_some(),
        has_messages: envelope.messages.is_some(),
        server_side_history: envelope.previous_response_id.is_some()
            || envelope.conversation.is_some(),
        offers_history: offers::in_body(body),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    request.read_list(envelope.input, read_item);
    Ok(request)
}

fn read_item<'a>(request: &mut WireRequest<'a>, index: usize, item: InputItem<'a>) {
    match item.kind.as_deref() {
        Some("message") | None => read_message(request, item),
        Some("function_call") | Some("custom_tool_call") => {
            let arguments = item.arguments.or(item.input);
            match (item.call_id, item.name) {
                (Some(id), Some(name)) => request.push(Item::Call(ToolCall {
                    id,
                    name,
                    arguments: raw_text(arguments),
                    message: index,
                })),
                _ => request.push(Item::Other),
            }
        }
        Some("function_call_output") | Some("custom_tool_call_output") => {
            read_output(request, index, item)
        }
        _ => request.push(Item::Other),
    }
}

fn read_message<'a>(request: &mut WireRequest<'a>, item: InputItem<'a>) {
    let role = match item.role.and_then(string_of).as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system" | "developer") => Role::System,
        _ => return request.push(Item::Other),
    };
    match item
        .content
        .and_then(|raw| content::read(raw, "input_text"))
    {
        Some(c) => {
            // A system text may list the tools loaded on demand.
            request.hints.offers_history |= role == Role::System && offers::in_text(&c.text);
            request.push(Item::Text { role, text: c.text })
        }
        None => request.push(Item::Other),
    }
}

fn read_output<'a>(request: &mut WireRequest<'a>, index: usize, item: InputItem<'a>) {
    request.push_result(index, item.call_id, item.output, "input_text", false);
}
