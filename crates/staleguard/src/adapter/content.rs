//! Tool result content as OpenAI-style wire formats carry it: a string, a string holding
//! JSON-wrapped text parts (as some agent SDKs forward MCP results), or an array of parts.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::appendix::is_appendix;

/// How a result's content was written, so a replacement keeps the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// A plain string.
    Str,
    /// A string holding `{"type":"text","text":...}`.
    WrappedPart,
    /// A string holding `[{"type":"text","text":...}, ...]`.
    WrappedParts,
    /// An array of content parts.
    Parts,
}

/// How the format writes a text part, so replacements read as the format's own: the part
/// type (`text`, or `input_text` in OpenAI Responses) and the `cache_control` of the
/// content's last part that had one (Anthropic), which a replacement keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Style {
    pub text_type: &'static str,
    pub cache_control: Option<String>,
}

impl Style {
    pub(super) fn plain(text_type: &'static str) -> Self {
        Style {
            text_type,
            cache_control: None,
        }
    }

    fn part(&self, text: &str) -> String {
        let text = crate::json::json_string(text);
        match &self.cache_control {
            Some(cc) => format!(
                r#"{{"type":"{}","text":{text},"cache_control":{cc}}}"#,
                self.text_type
            ),
            None => format!(r#"{{"type":"{}","text":{text}}}"#, self.text_type),
        }
    }
}

/// Text read out of a content value.
pub(super) struct Content<'a> {
    pub text: Cow<'a, str>,
    pub images: usize,
    pub shape: Shape,
    pub style: Style,
    /// The content ends with parts staleguard appended (evidence, guidance).
    pub appendix: bool,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "super::strings::lossy_text")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cache_control: Option<&'a RawValue>,
}

const TEXT_PARTS: &[&str] = &["text", "input_text", "output_text"];

const IMAGE_PARTS: &[&str] = &["image_url", "image", "input_image"];

/// Reads a content value whose text parts are of type `text_type` unless its parts say
/// otherwise. `None` when it is not text we may replace: `null`, a number, an object, or
/// parts of a kind we do not know (those must reach the model unchanged).
pub(super) fn read<'a>(raw: &'a RawValue, text_type: &'static str) -> Option<Content<'a>> {
    let json = raw.get();
    let mut content = match json.as_bytes().first()? {
        b'"' => {
            let text: Cow<'_, str> = super::strings::string_of(raw)?;
            unwrap_string(text)
        }
        b'[' => {
            let parts: Vec<Part<'_>> = serde_json::from_str(json).ok()?;
            let style = style_of(&parts, text_type);
            let mut content = read_parts(parts)?;
            content.style = style;
            content
        }
        _ => return None,
    };
    if content.shape != Shape::Parts {
        content.style = Style::plain(text_type);
    }
    Some(content)
}

/// The part type and cache control the parts use.
fn style_of(parts: &[Part<'_>], default: &'static str) -> Style {
    let text_type = parts
        .iter()
        .filter_map(|p| p.kind.as_deref())
        .find_map(|k| TEXT_PARTS.iter().find(|t| **t == k).copied())
        .unwrap_or(default);
    let cache_control = parts
        .iter()
        .rev()
        .find_map(|p| p.cache_control)
        .map(|c| c.get().to_string());
    Style {
        text_type,
        cache_control,
    }
}

fn read_parts(mut parts: Vec<Part<'_>>) -> Option<Content<'_>> {
    let appendix = split_appendix(&mut parts);
    if let [Part {
        kind: Some(kind),
        text: Some(text),
        ..
    }] = parts.as_slice()
    {
        if appendix && TEXT_PARTS.contains(&kind.as_ref()) {
            // Our own parts after a string content: read the string as it was.
            let mut content = unwrap_string(Cow::Owned(text.to_string()));
            content.shape = Shape::Parts;
            content.appendix = true;
            return Some(content);
        }
    }
    let own = match parts.as_slice() {
        [first, _, ..] if is_call_report(first) => &parts[1..],
        _ => &parts[..],
    };
    let (text, images) = join_parts(own)?;
    Some(Content {
        text: Cow::Owned(text),
        images,
        shape: Shape::Parts,
        style: Style::plain("text"),
        appendix,
    })
}

/// Codex's report on a call, a part of its own before what the tool returned: `Wall time:
/// 0.5406 seconds\nOutput:` before an MCP tool's content, `Script completed\nWall time 0.9
/// seconds\nOutput:\n` before what a code-mode `exec` script printed. It is no part of the
/// tool's output, so it is not read as the result's text: the page, and its observation ID,
/// are what the MCP guard saw. The part stays in the body (a collapse replaces the whole
/// content).
fn is_call_report(part: &Part<'_>) -> bool {
    let Some(text) = part
        .kind
        .as_deref()
        .filter(|k| TEXT_PARTS.contains(k))
        .and(part.text.as_deref())
    else {
        return false;
    };
    let wall_time = |line: &str| {
        let seconds = line
            .strip_prefix("Wall time")
            .map(|l| l.strip_prefix(':').unwrap_or(l))
            .and_then(|l| l.strip_prefix(' '))
            .and_then(|l| l.strip_suffix(" seconds"));
        seconds.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect();
    match lines.as_slice() {
        [wall, "Output:"] => wall_time(wall),
        [script, wall, "Output:"] => script.starts_with("Script ") && wall_time(wall),
        _ => false,
    }
}

/// Drops the trailing parts staleguard appended; true if there were any. The first part is
/// never one: it is the result's own.
fn split_appendix(parts: &mut Vec<Part<'_>>) -> bool {
    let own = parts.len();
    while parts.len() > 1 {
        let ours = parts.last().is_some_and(|p| {
            let text_part = p.kind.as_deref().is_some_and(|k| TEXT_PARTS.contains(&k));
            text_part && p.text.as_deref().is_some_and(is_appendix)
        });
        if !ours {
            break;
        }
        parts.pop();
    }
    parts.len() < own
}

fn plain<'a>(text: Cow<'a, str>, shape: Shape) -> Content<'a> {
    Content {
        text,
        images: 0,
        shape,
        style: Style::plain("text"),
        appendix: false,
    }
}

/// A string whose whole text is JSON text parts is read as those parts.
fn unwrap_string(text: Cow<'_, str>) -> Content<'_> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) || !trimmed.contains("\"text\"") {
        return plain(text, Shape::Str);
    }
    if trimmed.starts_with('{') {
        return match serde_json::from_str::<Part>(trimmed) {
            Ok(Part {
                kind: Some(kind),
                text: Some(inner),
                ..
            }) if kind == "text" => plain(Cow::Owned(inner.into_owned()), Shape::WrappedPart),
            _ => plain(text, Shape::Str),
        };
    }
    match serde_json::from_str::<Vec<Part>>(trimmed)
        .ok()
        .and_then(|p| join_parts(&p))
    {
        Some((inner, 0)) => plain(Cow::Owned(inner), Shape::WrappedParts),
        _ => plain(text, Shape::Str),
    }
}

/// Joins text parts with `\n` and counts images; `None` if any part is of another kind.
fn join_parts(parts: &[Part<'_>]) -> Option<(String, usize)> {
    let mut text = String::new();
    let mut images = 0;
    let mut first = true;
    for part in parts {
        match (part.kind.as_deref(), &part.text) {
            (Some(kind), Some(t)) if TEXT_PARTS.contains(&kind) => {
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
/// added as a part of its own after it. The original stays byte for byte inside the new
/// value. Appended parts carry no cache control: they must not move a cache breakpoint.
pub(super) fn append(shape: Shape, style: &Style, original: &str, texts: &[&str]) -> String {
    let plain = Style::plain(style.text_type);
    let parts = texts
        .iter()
        .map(|t| plain.part(t))
        .collect::<Vec<_>>()
        .join(",");
    match shape {
        Shape::Parts => {
            let open = original.trim_end().strip_suffix(']').unwrap_or(original);
            format!("{open},{parts}]")
        }
        Shape::Str | Shape::WrappedPart | Shape::WrappedParts => {
            format!(
                r#"[{{"type":"{}","text":{original}}},{parts}]"#,
                style.text_type
            )
        }
    }
}

/// The JSON value that replaces a content of `shape` with `text` (images dropped). A parts
/// array keeps its text part type and cache control.
pub(super) fn write(shape: Shape, style: &Style, text: &str) -> String {
    let wrapped = Style::plain("text");
    match shape {
        Shape::Str => crate::json::json_string(text),
        Shape::WrappedPart => crate::json::json_string(&wrapped.part(text)),
        Shape::WrappedParts => crate::json::json_string(&format!("[{}]", wrapped.part(text))),
        Shape::Parts => format!("[{}]", style.part(text)),
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
            let c = read(&r, "text").unwrap();
            assert_eq!((c.shape, c.text.as_ref()), (shape, text), "{json}");
            let written = write(shape, &c.style, "new");
            let again = raw(&written);
            let c2 = read(&again, "text").unwrap();
            assert_eq!(
                (c2.shape, c2.text.as_ref(), c2.images),
                (shape, "new", 0),
                "{written}"
            );
        }
    }

    #[test]
    fn codexs_call_report_is_not_read_as_the_tools_output() {
        for report in [
            "Wall time: 0.5406 seconds\\nOutput:",
            "Script completed\\nWall time 0.9 seconds\\nOutput:\\n",
        ] {
            let codex = format!(
                r####"[{{"type":"input_text","text":"{report}"}},{{"type":"input_text","text":"### Page state"}}]"####
            );
            let r = raw(&codex);
            let c = read(&r, "input_text").unwrap();
            assert_eq!(
                (c.shape, c.text.as_ref()),
                (Shape::Parts, "### Page state"),
                "{codex}"
            );
        }
        // Alone, or worded otherwise, it is the result's own text.
        for own in [
            r####"[{"type":"input_text","text":"Wall time: 0.5406 seconds\nOutput:"}]"####,
            r####"[{"type":"input_text","text":"Wall time: soon seconds\nOutput:"},{"type":"input_text","text":"b"}]"####,
            r####"[{"type":"input_text","text":"Wall time: 1 seconds\nOutput: a"},{"type":"input_text","text":"b"}]"####,
            r####"[{"type":"input_text","text":"Done\nWall time 1 seconds\nOutput:\n"},{"type":"input_text","text":"b"}]"####,
        ] {
            let r = raw(own);
            let c = read(&r, "input_text").unwrap();
            assert!(c.text.contains("Wall time"), "{own}");
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
            let before = read(&before_raw, "text").unwrap();
            assert_eq!(before.shape, shape);
            let appended = append(shape, &before.style, json, &[&block]);
            assert!(
                appended.contains(json.trim_end().trim_end_matches(']')),
                "{appended}"
            );
            let after_raw = raw(&appended);
            let after = read(&after_raw, "text").unwrap();
            assert!(after.appendix, "{appended}");
            assert_eq!(after.text, before.text, "{appended}");
        }
        // A result whose only part reads like our header is the result's own text.
        let own = format!(
            r#"[{{"type":"text","text":{}}}]"#,
            serde_json::Value::from(block.as_str())
        );
        let own_raw = raw(&own);
        assert!(!read(&own_raw, "text").unwrap().appendix);
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
            assert!(read(&raw(json), "text").is_none(), "{json}");
        }
        let note = raw(r####""{\"type\":\"note\",\"text\":\"x\"}""####);
        let c = read(&note, "text").unwrap();
        assert_eq!(c.shape, Shape::Str);
    }
}
