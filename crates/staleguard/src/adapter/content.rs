//! Tool result content as OpenAI-style wire formats carry it: a string, a string holding
//! JSON-wrapped text parts (as some agent SDKs forward MCP results), or an array of parts.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::appendix::is_appendix;

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
    /// The content ends with parts staleguard appended (evidence, guidance).
    pub appendix: bool,
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
            let mut parts: Vec<Part<'_>> = serde_json::from_str(json).ok()?;
            let appendix = split_appendix(&mut parts);
            if let [Part {
                kind: Some(kind),
                text: Some(text),
            }] = parts.as_slice()
            {
                if appendix && kind == "text" {
                    // Our own parts after a string content: read the string as it was.
                    let mut content = unwrap_string(Cow::Owned(text.to_string()));
                    content.shape = Shape::Parts;
                    content.appendix = true;
                    return Some(content);
                }
            }
            let (text, images) = join_parts(&parts)?;
            Some(Content {
                text: Cow::Owned(text),
                images,
                shape: Shape::Parts,
                appendix,
            })
        }
        _ => None,
    }
}

/// Drops the trailing parts staleguard appended; true if there were any. The first part is
/// never one: it is the result's own.
fn split_appendix(parts: &mut Vec<Part<'_>>) -> bool {
    let own = parts.len();
    while parts.len() > 1 {
        match parts.last() {
            Some(Part {
                kind: Some(k),
                text: Some(t),
            }) if k == "text" && is_appendix(t) => parts.pop(),
            _ => break,
        };
    }
    parts.len() < own
}

/// A string whose whole text is JSON text parts is read as those parts.
fn unwrap_string(text: Cow<'_, str>) -> Content<'_> {
    let plain = |text| Content {
        text,
        images: 0,
        shape: Shape::Str,
        appendix: false,
    };
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) || !trimmed.contains("\"text\"") {
        return plain(text);
    }
    if trimmed.starts_with('{') {
        if let Ok(Part {
            kind: Some(kind),
            text: Some(inner),
        }) = serde_json::from_str::<Part>(trimmed)
        {
            if kind == "text" {
                let inner = inner.into_owned();
                return Content {
                    text: Cow::Owned(inner),
                    images: 0,
                    shape: Shape::WrappedPart,
                    appendix: false,
                };
            }
        }
        return plain(text);
    }
    match serde_json::from_str::<Vec<Part>>(trimmed)
        .ok()
        .and_then(|p| join_parts(&p))
    {
        Some((inner, 0)) => Content {
            text: Cow::Owned(inner),
            images: 0,
            shape: Shape::WrappedParts,
            appendix: false,
        },
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

/// The JSON value of a content whose original JSON is `original`, with each of `texts`
/// added as a part of its own after it. The original stays byte for byte inside the new value.
pub fn append(shape: Shape, original: &str, texts: &[&str]) -> String {
    let part = texts
        .iter()
        .map(|t| {
            format!(
                r#"{{"type":"text","text":{}}}"#,
                serde_json::Value::from(*t)
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    match shape {
        Shape::Parts => {
            let open = original.trim_end().strip_suffix(']').unwrap_or(original);
            format!("{open},{part}]")
        }
        Shape::Str | Shape::WrappedPart | Shape::WrappedParts => {
            format!(r#"[{{"type":"text","text":{original}}},{part}]"#)
        }
    }
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
            (
                r####""{\"type\":\"text\",\"text\":\"### Page\"}""####,
                Shape::WrappedPart,
                "### Page",
            ),
            (
                r####""[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]""####,
                Shape::WrappedParts,
                "a\nb",
            ),
            (
                r####"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:"}}]"####,
                Shape::Parts,
                "a",
            ),
        ];
        for (json, shape, text) in cases {
            let r = raw(json);
            let c = read(&r).unwrap();
            assert_eq!((c.shape, c.text.as_ref()), (shape, text), "{json}");
            let written = write(shape, "new");
            let again = raw(&written);
            let c2 = read(&again).unwrap();
            assert_eq!(
                (c2.shape, c2.text.as_ref(), c2.images),
                (shape, "new", 0),
                "{written}"
            );
        }
    }

    #[test]
    fn appended_parts_keep_the_original_and_are_recognised() {
        let block = format!("{}\n{{\"quote\":\"x\"}}", crate::appendix::EVIDENCE_HEADER);
        for (json, shape) in [
            (r####""### Page\nline""####, Shape::Str),
            (
                r####""{\"type\":\"text\",\"text\":\"### Page\"}""####,
                Shape::WrappedPart,
            ),
            (
                r####"[{"type":"text","text":"a"}, {"type":"text","text":"b"} ]"####,
                Shape::Parts,
            ),
        ] {
            let before_raw = raw(json);
            let before = read(&before_raw).unwrap();
            assert_eq!(before.shape, shape);
            let appended = append(shape, json, &[&block]);
            assert!(
                appended.contains(json.trim_end().trim_end_matches(']')),
                "{appended}"
            );
            let after_raw = raw(&appended);
            let after = read(&after_raw).unwrap();
            assert!(after.appendix, "{appended}");
            assert_eq!(after.text, before.text, "{appended}");
        }
        // A result whose only part reads like our header is the result's own text.
        let own = format!(
            r#"[{{"type":"text","text":{}}}]"#,
            serde_json::Value::from(block.as_str())
        );
        let own_raw = raw(&own);
        assert!(!read(&own_raw).unwrap().appendix);
    }

    #[test]
    fn unknown_content_is_not_read() {
        for json in [
            "null",
            "3",
            "{}",
            r####"[{"type":"file","file":{}}]"####,
            "[]",
        ] {
            assert!(read(&raw(json)).is_none(), "{json}");
        }
        let note = raw(r####""{\"type\":\"note\",\"text\":\"x\"}""####);
        let c = read(&note).unwrap();
        assert_eq!(c.shape, Shape::Str);
    }
}
