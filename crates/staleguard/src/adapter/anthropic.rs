//! Anthropic Messages request bodies: `tool_use` blocks in assistant messages, and
//! `tool_result` blocks (`tool_use_id`, `content` as a string or blocks, `is_error`) in the
//! user message after them. Only the `content` of a collapsed `tool_result` is replaced:
//! its `tool_use_id`, `is_error`, `cache_control` and the block order stay; top-level
//! `system`, `thinking` blocks and their signatures are never touched.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

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
    system: Seen<'a>,
    #[serde(default, borrow)]
    tools: Seen<'a>,
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
        system: Option<&'a RawValue>,
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
    }

    impl<'a> From<Envelope<'a>> for super::Envelope<'a> {
        fn from(l: Envelope<'a>) -> Self {
            super::Envelope {
                messages: l.messages,
                system: Seen(l.system),
                tools: Seen(l.tools),
            }
        }
    }
}

/// The envelope's keys besides `messages`, for a read resumed after the array.
const ENVELOPE: tail::Envelope = tail::Envelope {
    keys: &["system", "tools"],
    tells,
};

/// What the top-level key `name` with value `raw` (`None` for `null`) says: `system` marks
/// the format, and both may carry breakpoints.
fn tells(name: &str, raw: Option<&RawValue>) -> (Hints, usize) {
    let hints = Hints {
        has_system: name == "system" && raw.is_some(),
        offers: match name {
            "tools" => offers::in_tools(raw),
            _ => offers::in_system(raw),
        },
        ..Hints::default()
    };
    (hints, breakpoints_in(raw))
}

/// Whatever has a `cache_control`: a tool, a system block, a content block.
#[derive(Deserialize)]
struct Marked {
    cache_control: Option<IgnoredAny>,
}

/// The `cache_control` breakpoints among the elements of `raw`, when it is a list.
fn breakpoints_in(raw: Option<&RawValue>) -> usize {
    raw.filter(|r| r.get().starts_with('['))
        .and_then(|r| serde_json::from_str::<Vec<Marked>>(r.get()).ok())
        .map_or(0, |list| {
            list.iter().filter(|m| m.cache_control.is_some()).count()
        })
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

/// A content block, every field optional and raw where its type may vary.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    is_error: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "super::strings::lossy_text")]
    text: Option<Cow<'a, str>>,
    cache_control: Option<IgnoredAny>,
}

/// Block types that may carry a `cache_control` breakpoint (thinking blocks may not).
const MARKABLE: &[&str] = &["text", "image", "document", "tool_use", "tool_result"];

/// Reads a Messages body.
pub(crate) fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let envelope = if is_object(body) {
        serde_json::from_str(body)
    } else {
        serde_json::from_str::<listed::Envelope>(body).map(Envelope::from)
    };
    let envelope = envelope.map_err(|e| json_error(&e, body, "anthropic"))?;
    let hints = Hints {
        has_messages: envelope.messages.is_some(),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    request.resumable(RequestFormat::Anthropic);
    request.read_messages(envelope.messages, read_message);
    // After the messages: each message notes the breakpoints of the messages before it.
    request.note_key("system", envelope.system, tells);
    request.note_key("tools", envelope.tools, tells);
    Ok(request)
}

/// Reads a Messages body from `at` on; `None` where the full read could answer otherwise
/// (see [`super::read_request_from`]).
pub(crate) fn read_from<'a>(body: &'a str, at: &ResumeAt) -> Option<WireRequest<'a>> {
    tail::read::<Message<'a>>(body, at, &ENVELOPE, read_message)
}

fn read_message<'a>(request: &mut WireRequest<'a>, index: usize, m: Message<'a>) {
    let role = match m.role.and_then(string_of).as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => {
            // Kept as it is; it may list the tools loaded on demand.
            request.hints.offers |= offers::in_system(m.content);
            return request.push(Item::Other);
        }
        _ => return request.push(Item::Other),
    };
    let Some(content) = m.content else {
        return request.push(Item::Other);
    };
    if let Some(text) = string_of(content) {
        return request.push(Item::Text { role, text });
    }
    let Ok(blocks) = serde_json::from_str::<Vec<&RawValue>>(content.get()) else {
        return request.push(Item::Other);
    };
    for raw in blocks {
        match serde_json::from_str::<Block<'a>>(raw.get()) {
            Ok(block) => {
                let marked = block.cache_control.is_some();
                let markable = block.kind.as_deref().is_some_and(|k| MARKABLE.contains(&k));
                if block.kind.as_deref() == Some("tool_result") {
                    request.breakpoints += breakpoints_in(block.content);
                }
                request.breakpoints += usize::from(marked);
                read_block(request, index, role, block);
                request.mark_block(raw, markable, marked);
            }
            Err(_) => request.push(Item::Other),
        }
    }
}

fn read_block<'a>(request: &mut WireRequest<'a>, index: usize, role: Role, b: Block<'a>) {
    match (b.kind.as_deref(), b.id, b.name) {
        (Some("text"), ..) => match b.text {
            Some(text) => request.push(Item::Text { role, text }),
            None => request.push(Item::Other),
        },
        (Some("tool_use"), Some(id), Some(name)) => {
            let call = ToolCall {
                id,
                name,
                arguments: raw_text(b.input),
                message: index,
            };
            request.push(Item::Call(call));
        }
        (Some("tool_result"), ..) => {
            read_result(request, index, b.tool_use_id, b.content, b.is_error)
        }
        _ => request.push(Item::Other),
    }
}

fn read_result<'a>(
    request: &mut WireRequest<'a>,
    index: usize,
    call_id: Option<Cow<'a, str>>,
    body: Option<&'a RawValue>,
    is_error: Option<&RawValue>,
) {
    let is_error = is_error.is_some_and(|e| e.get() == "true");
    request.push_result(index, call_id, body, "text", is_error);
}
