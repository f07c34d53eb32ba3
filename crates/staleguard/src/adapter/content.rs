//! Tool result content as OpenAI-style wire formats carry it: a string, a string holding
//! JSON-wrapped text parts (as some agent SDKs forward MCP results), or an array of parts.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// How a result's content was written, so a replacement keeps the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A plain string.
    Str,
    /// A string holding `{"type":"text","text":...}`.
    WrappedPart,
    /// A string holding `[{"type":"text","text":...}, ...]`.
    WrappedParts,
    /// An array of content parts.
    Parts,
}

/// Text read out of a content value.
pub struct Content<'a> {
    pub text: Cow<'a, str>,
    pub images: usize,
    pub shape: Shape,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

const IMAGE_PARTS: &[&str] = &["image_url", "image", "input_image"];

/// Reads a content value. `None` when it is not text we may replace: `null`, a number,
/// an object, or parts of a kind we do not know (those must reach the model unchanged).
pub fn read(raw: &RawValue) -> Option<Content<'_>> {
    let json = raw.get();
    match json.as_bytes().first()? {
        b'"' => {
            let text: Cow<'_, str> = serde_json::from_str(json).ok()?;
            Some(unwrap_string(text))
        }
        b'[' => {
            let parts: Vec<Part<'_>> = serde_json::from_str(json).ok()?;
            let (text, images) = join_parts(&parts)?;
            Some(Content { text: Cow::Owned(text), images, shape: Shape::Parts })
        }
        _ => None,
    }
}

/// A string whose whole text is JSON text parts is read as those parts.
fn unwrap_string(text: Cow<'_, str>) -> Content<'_> {
    let plain = |text| Content { text, images: 0, shape: Shape::Str };
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) || !trimmed.contains("\"text\"") {
        return plain(text);
    }
    if trimmed.starts_with('{') {
        if let Ok(Part { kind: Some(kind), text: Some(inner) }) = serde_json::from_str::<Part>(trimmed) {
            if kind == "text" {
                let inner = inner.into_owned();
                return Content { text: Cow::Owned(inner), images: 0, shape: Shape::WrappedPart };
            }
        }
        return plain(text);
    }
    match serde_json::from_str::<Vec<Part>>(trimmed).ok().and_then(|p| join_parts(&p)) {
        Some((inner, 0)) => Content { text: Cow::Owned(inner), images: 0, shape: Shape::WrappedParts },
        _ => plain(text),
    }
}

/// Joins text parts with `\n` and counts images; `None` if any part is of another kind.
fn join_parts(parts: &[Part<'_>]) -> Option<(String, usize)> {
    let mut text = String::new();
    let mut images = 0;
    let mut first = true;
    for part in parts {
        match (part.kind.as_deref(), &part.text) {
            (Some("text" | "input_text" | "output_text"), Some(t)) => {
                if !first {
                    text.push('\n');
                }
                text.push_str(t);
                first = false;
            }
            (Some(kind), _) if IMAGE_PARTS.contains(&kind) => images += 1,
            _ => return None,
        }
    }
    (!first).then_some((text, images))
}

/// The JSON value that replaces a content of `shape` with `text` (images dropped).
pub fn write(shape: Shape, text: &str) -> String {
    let part = || {
        let mut map = serde_json::Map::new();
        map.insert("type".into(), "text".into());
        map.insert("text".into(), text.into());
        serde_json::Value::Object(map)
    };
    let json = |v: &serde_json::Value| v.to_string();
    match shape {
        Shape::Str => json(&text.into()),
        Shape::WrappedPart => json(&json(&part()).into()),
        Shape::WrappedParts => json(&json(&serde_json::Value::Array(vec![part()])).into()),
        Shape::Parts => json(&serde_json::Value::Array(vec![part()])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn shapes_round_trip() {
        let cases = [
            (r####""### Page""####, Shape::Str, "### Page"),
            (r####""{\"type\":\"text\",\"text\":\"### Page\"}""####, Shape::WrappedPart, "### Page"),
            (r####""[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]""####, Shape::WrappedParts, "a\nb"),
            (r####"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:"}}]"####, Shape::Parts, "a"),
        ];
        for (json, shape, text) in cases {
            let r = raw(json);
            let c = read(&r).unwrap();
            assert_eq!((c.shape, c.text.as_ref()), (shape, text), "{json}");
            let written = write(shape, "new");
            let again = raw(&written);
            let c2 = read(&again).unwrap();
            assert_eq!((c2.shape, c2.text.as_ref(), c2.images), (shape, "new", 0), "{written}");
        }
    }

    #[test]
    fn unknown_content_is_not_read() {
        for json in ["null", "3", "{}", r####"[{"type":"file","file":{}}]"####, "[]"] {
            assert!(read(&raw(json)).is_none(), "{json}");
        }
        let note = raw(r####""{\"type\":\"note\",\"text\":\"x\"}""####);
        let c = read(&note).unwrap();
        assert_eq!(c.shape, Shape::Str);
    }
}
