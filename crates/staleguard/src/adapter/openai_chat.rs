//! OpenAI Chat Completions request bodies.
//!
//! The body is read lazily: each message's fields are borrowed as raw JSON, and only the
//! content of tool results is decoded. Writing copies the original bytes and splices in
//! the replaced contents, so everything else, key order and spacing included, is kept.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::de::{
    self, value::MapAccessDeserializer, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::content::{self, Shape};
use crate::error::Error;
use crate::projection::Edit;
use crate::transcript::{Item, Role, ToolCall, ToolResult, Transcript};

/// A Chat Completions body, read.
pub struct ChatRequest<'a> {
    body: &'a str,
    transcript: Transcript<'a>,
    /// For each item, where its content sits in the body and how it is shaped.
    spans: Vec<Option<Span>>,
    pub hints: Hints,
}

/// Where a result's content value sits in the body.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    shape: Shape,
}

/// What the body says about its own format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hints {
    pub has_messages: bool,
    pub has_input: bool,
    pub has_system: bool,
    pub has_anthropic_blocks: bool,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    messages: Option<Messages<'a>>,
    input: Option<IgnoredAny>,
    system: Option<IgnoredAny>,
    anthropic_version: Option<IgnoredAny>,
}

/// The `messages` value: an array of entries, or something else we leave alone.
enum Messages<'a> {
    List(Vec<Entry<'a>>),
    NotAList,
}

/// One element of `messages`: a message object, or anything else (`null`, a number...).
enum Entry<'a> {
    Message(Message<'a>),
    Other,
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

impl<'a> ChatRequest<'a> {
    /// Reads `body`. Fails only on invalid JSON or a body that is not an object.
    pub fn read(body: &'a str) -> Result<Self, Error> {
        let envelope: Envelope<'a> = serde_json::from_str(body).map_err(|e| {
            if e.is_data() {
                Error::Shape {
                    format: "openai",
                    reason: e.to_string(),
                }
            } else {
                Error::json(&e, body)
            }
        })?;
        let mut request = ChatRequest {
            body,
            transcript: Transcript::default(),
            spans: Vec::new(),
            hints: Hints {
                has_messages: envelope.messages.is_some(),
                has_input: envelope.input.is_some(),
                has_system: envelope.system.is_some() || envelope.anthropic_version.is_some(),
                has_anthropic_blocks: false,
            },
        };
        if let Some(Messages::List(entries)) = envelope.messages {
            for (index, entry) in entries.into_iter().enumerate() {
                if let Entry::Message(m) = entry {
                    request.read_message(index, m);
                }
            }
        }
        Ok(request)
    }

    pub fn transcript(&self) -> &Transcript<'a> {
        &self.transcript
    }

    pub fn into_transcript(self) -> Transcript<'a> {
        self.transcript
    }

    fn push(&mut self, item: Item<'a>, span: Option<Span>) {
        self.transcript.items.push(item);
        self.spans.push(span);
    }

    fn read_message(&mut self, index: usize, m: Message<'a>) {
        if let Some(c) = m.content {
            self.hints.has_anthropic_blocks |= looks_anthropic(c);
        }
        let role = m
            .role
            .and_then(|r| serde_json::from_str::<Cow<'a, str>>(r.get()).ok());
        match role.as_deref() {
            Some("tool") => self.read_result(index, m.tool_call_id, m.content),
            // Legacy function calling pairs a `function` message with the call by name.
            Some("function") => self.read_result(index, m.name, m.content),
            Some("assistant") => self.read_assistant(index, &m),
            Some("user") => self.read_text(Role::User, m.content),
            Some("system" | "developer") => self.read_text(Role::System, m.content),
            _ => self.push(Item::Other, None),
        }
    }

    fn read_result(&mut self, index: usize, id: Option<&'a RawValue>, body: Option<&'a RawValue>) {
        let call_id = id.and_then(|r| serde_json::from_str::<Cow<'a, str>>(r.get()).ok());
        let Some((raw, content)) = body.and_then(|raw| Some((raw, content::read(raw)?))) else {
            return self.push(Item::Other, None);
        };
        let span = self.span_of(raw, content.shape);
        let result = ToolResult {
            call_id,
            text: content.text,
            is_error: false,
            images: content.images,
            appendix: content.appendix,
            message: index,
        };
        self.push(Item::Result(result), span);
    }

    fn read_assistant(&mut self, index: usize, m: &Message<'a>) {
        self.read_text(Role::Assistant, m.content);
        if let Some(calls) = m
            .tool_calls
            .and_then(|r| serde_json::from_str::<Vec<&RawValue>>(r.get()).ok())
        {
            for raw in calls {
                let call = serde_json::from_str::<CallJson<'a>>(raw.get())
                    .ok()
                    .and_then(|c| tool_call(c, index));
                self.push(call.map_or(Item::Other, Item::Call), None);
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
                arguments: arguments_text(arguments),
                message: index,
            };
            self.push(Item::Call(call), None);
        }
    }

    fn read_text(&mut self, role: Role, content: Option<&'a RawValue>) {
        if let Some(c) = content.and_then(content::read) {
            self.push(Item::Text { role, text: c.text }, None);
        }
    }

    /// The byte range of `raw` in the body. RawValue borrows from the body, so this is
    /// pointer arithmetic on one allocation, checked anyway.
    fn span_of(&self, raw: &RawValue, shape: Shape) -> Option<Span> {
        let start = (raw.get().as_ptr() as usize).checked_sub(self.body.as_ptr() as usize)?;
        let end = start.checked_add(raw.get().len())?;
        (end <= self.body.len()).then_some(Span { start, end, shape })
    }

    /// The body with each edit applied; all other bytes are copied. Appends to one result
    /// become parts of their own, in edit order.
    pub fn write(&self, edits: &[Edit]) -> String {
        let spliced = self.by_span(edits);
        let extra: usize = edits.iter().map(|e| e.text.len() + 64).sum();
        let mut out = String::with_capacity(self.body.len() + extra);
        let mut at = 0;
        for (span, group) in spliced {
            if span.start < at {
                continue;
            }
            out.push_str(&self.body[at..span.start]);
            out.push_str(&self.content_json(span, &group));
            at = span.end;
        }
        out.push_str(&self.body[at..]);
        out
    }

    /// Edits grouped by the content they touch, in body order.
    fn by_span<'e>(&self, edits: &'e [Edit]) -> Vec<(Span, Vec<&'e Edit>)> {
        let mut groups: Vec<(Span, Vec<&Edit>)> = Vec::new();
        for e in edits {
            let Some(span) = self.spans.get(e.item).copied().flatten() else {
                continue;
            };
            match groups.iter_mut().find(|(s, _)| s.start == span.start) {
                Some((_, group)) => group.push(e),
                None => groups.push((span, vec![e])),
            }
        }
        groups.sort_by_key(|(span, _)| span.start);
        groups
    }

    /// A replacement wins over appends to the same content.
    fn content_json(&self, span: Span, group: &[&Edit]) -> String {
        if let Some(replace) = group.iter().find(|e| !e.append) {
            return content::write(span.shape, &replace.text);
        }
        let texts: Vec<&str> = group.iter().map(|e| e.text.as_str()).collect();
        content::append(span.shape, &self.body[span.start..span.end], &texts)
    }

    /// The length [`write`](Self::write) would give, without writing.
    pub fn written_len(&self, edits: &[Edit]) -> usize {
        self.by_span(edits)
            .into_iter()
            .fold(self.body.len(), |len, (span, group)| {
                len - (span.end - span.start) + self.content_json(span, &group).len()
            })
    }
}

fn tool_call<'a>(c: CallJson<'a>, message: usize) -> Option<ToolCall<'a>> {
    let id = c.id?;
    let (name, arguments) = match (c.function, c.custom) {
        (Some(f), _) => (f.name?, arguments_text(f.arguments)),
        (None, Some(custom)) => (custom.name?, arguments_text(custom.input)),
        (None, None) => return None,
    };
    Some(ToolCall {
        id,
        name,
        arguments,
        message,
    })
}

/// Arguments as JSON text: decoded when a string, the raw JSON otherwise.
fn arguments_text(raw: Option<&RawValue>) -> Cow<'_, str> {
    match raw {
        None => Cow::Borrowed(""),
        Some(r) => serde_json::from_str::<Cow<'_, str>>(r.get()).unwrap_or(Cow::Borrowed(r.get())),
    }
}

/// Content arrays with Anthropic block types mark an Anthropic body.
fn looks_anthropic(content: &RawValue) -> bool {
    let json = content.get();
    json.starts_with('[')
        && ["\"tool_use\"", "\"tool_result\"", "\"thinking\""]
            .iter()
            .any(|t| json.contains(t))
        && serde_json::from_str::<Vec<BlockType>>(json).is_ok_and(|blocks| {
            blocks.iter().any(|b| {
                matches!(
                    b.kind.as_deref(),
                    Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                )
            })
        })
}

#[derive(Deserialize)]
struct BlockType {
    #[serde(rename = "type")]
    kind: Option<String>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Messages<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessagesVisitor(PhantomData))
    }
}

struct MessagesVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for MessagesVisitor<'a> {
    type Value = Messages<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(16));
        while let Some(entry) = seq.next_element::<Entry<'a>>()? {
            entries.push(entry);
        }
        Ok(Messages::List(entries))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        IgnoredAny::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Messages::NotAList)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Messages::NotAList)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Entry<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntryVisitor(PhantomData))
    }
}

struct EntryVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for EntryVisitor<'a> {
    type Value = Entry<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Message::deserialize(MapAccessDeserializer::new(map)).map(Entry::Message)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Entry::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Entry::Other)
    }
}
