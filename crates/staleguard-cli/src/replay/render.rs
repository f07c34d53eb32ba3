//! A request as the provider renders it for its prompt cache (SPEC 9 "Measure").
//!
//! Providers cache the prompt, not the JSON body: tools, then system, then each message in
//! order. Comparing bodies as JSON in key order puts `tools` after `messages` and makes every
//! strategy look as if it rewrote all tool definitions on every turn. The rendering here is
//! byte for byte the one of the reference measure `tools/cachecost.py`, so the two
//! agree: the tools as one JSON array (sorted keys, ASCII escapes), then each message as
//! its JSON head (every field but `content`, sorted keys) and a newline and the text of its
//! content, parts joined by newlines: a text part gives its text, a `tool_result` its head
//! and then its own content the same way, any other part its JSON. So a string and a list
//! of text parts holding the same text render alike. Pieces are joined by newlines.
//!
//! Two additions the reference has no need of, as its bodies are OpenAI Chat ones: a
//! top-level `system` (Anthropic), `instructions` (Responses) or `systemInstruction`
//! (Gemini) is rendered after the tools, and Responses items render their `output`, Gemini
//! contents their `parts`, where messages have `content`. For the
//! breakpoint model the rendering also records where each cacheable block ends and which of
//! them carry `cache_control`, and leaves `cache_control` itself out (a marker is not
//! prompt text: moving it does not change what is cached).

use serde_json::{Map, Value};

/// Where a cacheable block (a tool, a system block, a content block of a message) ends in
/// the rendering, and the breakpoint it carries.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    /// Byte offset just after the block.
    pub end: usize,
    /// `Some` when the block carries `cache_control`: its own lifetime in seconds when it
    /// names one (`"ttl": "1h"`), else `None` inside.
    pub breakpoint: Option<Option<u64>>,
}

/// One request, rendered.
#[derive(Debug, Clone, Default)]
pub(super) struct Rendered {
    /// The bytes in cache order.
    pub bytes: Vec<u8>,
    /// Where each message (or Responses item) starts in `bytes`.
    pub message_starts: Vec<usize>,
    /// The cacheable blocks, in order.
    pub blocks: Vec<Block>,
}

/// How `cache_control` markers are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Markers {
    /// Kept where the reference keeps them: in message and `tool_result` heads (text parts
    /// render their text alone, so a marker there never shows).
    AsReference,
    /// Left out of every block's head: the breakpoint model reads them as breakpoints.
    Stripped,
}

const CACHE_CONTROL: &str = "cache_control";

/// Renders a request body (`messages`, Responses `input` or Gemini `contents`).
pub(super) fn render(body: &Value, markers: Markers) -> Rendered {
    let mut r = Renderer {
        out: String::new(),
        blocks: Vec::new(),
        markers,
    };
    r.tools(body.get("tools"));
    let system = body.get("system").or_else(|| body.get("instructions"));
    if let Some(system) = system.or_else(|| body.pointer("/systemInstruction/parts")) {
        r.out.push('\n');
        r.top_content(system);
    }
    let (list, content_key) = match (body.get("messages"), body.get("contents")) {
        (Some(messages), _) => (messages, "content"),
        (None, Some(contents)) => (contents, "parts"),
        (None, None) => (body.get("input").unwrap_or(&Value::Null), "output"),
    };
    let mut message_starts = Vec::new();
    for item in list.as_array().map(Vec::as_slice).unwrap_or_default() {
        r.out.push('\n');
        message_starts.push(r.out.len());
        r.message(item, content_key);
    }
    if let Some(control) = body.get(CACHE_CONTROL) {
        // Automatic caching: the provider puts the breakpoint on the last cacheable block.
        if let Some(last) = r.blocks.last_mut() {
            last.breakpoint.get_or_insert(ttl_of(control));
        }
    }
    Rendered {
        bytes: r.out.into_bytes(),
        message_starts,
        blocks: r.blocks,
    }
}

struct Renderer {
    out: String,
    blocks: Vec<Block>,
    markers: Markers,
}

impl Renderer {
    /// The tools as one JSON array with ASCII escapes, each tool one block.
    fn tools(&mut self, tools: Option<&Value>) {
        let Some(Value::Array(tools)) = tools else {
            let empty = Value::Array(Vec::new());
            py_json(tools.unwrap_or(&empty), true, &mut self.out);
            return;
        };
        self.out.push('[');
        for (i, tool) in tools.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            match tool {
                Value::Object(map) => {
                    let skip = self.stripped();
                    py_object(map, skip, true, &mut self.out);
                }
                other => py_json(other, true, &mut self.out),
            }
            self.close_block(tool);
        }
        self.out.push(']');
    }

    /// A message: its head, a newline, the text of its content.
    fn message(&mut self, item: &Value, content_key: &'static str) {
        let Value::Object(map) = item else {
            py_json(item, false, &mut self.out);
            self.close_block(&Value::Null);
            return;
        };
        let key = if map.contains_key("content") || content_key == "content" {
            "content"
        } else {
            content_key
        };
        // A message's own marker (rare) is a field of its head, as the reference has it.
        py_object(map, &[key], false, &mut self.out);
        self.out.push('\n');
        self.top_content(map.get(key).unwrap_or(&Value::Null));
    }

    /// Content whose parts are blocks (a message's, the system prompt's).
    fn top_content(&mut self, content: &Value) {
        let Value::Array(parts) = content else {
            content_text(content, &[], &mut self.out);
            self.close_block(&Value::Null);
            return;
        };
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                self.out.push('\n');
            }
            self.part(part);
            self.close_block(part);
        }
    }

    fn part(&mut self, part: &Value) {
        let skip = self.stripped();
        part_text(part, skip, &mut self.out);
    }

    /// The keys a block's head leaves out.
    fn stripped(&self) -> &'static [&'static str] {
        match self.markers {
            Markers::AsReference => &[],
            Markers::Stripped => &[CACHE_CONTROL],
        }
    }

    fn close_block(&mut self, block: &Value) {
        let breakpoint = block.get(CACHE_CONTROL).map(ttl_of);
        self.blocks.push(Block {
            end: self.out.len(),
            breakpoint,
        });
    }
}

/// The lifetime a `cache_control` names (`"ttl": "1h"` or `"5m"`), in seconds.
fn ttl_of(control: &Value) -> Option<u64> {
    let ttl = control.get("ttl")?.as_str()?;
    let (number, unit) = ttl.split_at(ttl.len().checked_sub(1)?);
    let n: u64 = number.parse().ok()?;
    match unit {
        "s" => Some(n),
        "m" => Some(n * 60),
        "h" => Some(n * 3600),
        _ => None,
    }
}

/// Text of content: a string, its parts joined by newlines, or its JSON; `skip` names keys
/// left out of part heads.
fn content_text(content: &Value, skip: &[&str], out: &mut String) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Array(parts) => {
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                part_text(part, skip, out);
            }
        }
        other => py_json(other, false, out),
    }
}

/// One content part: a text part's text, a `tool_result`'s head and content, or its JSON.
fn part_text(part: &Value, skip: &[&str], out: &mut String) {
    let Value::Object(map) = part else {
        py_json(part, false, out);
        return;
    };
    let kind = map.get("type").and_then(Value::as_str);
    match kind {
        Some("text" | "input_text" | "output_text") => match map.get("text") {
            Some(Value::String(text)) => out.push_str(text),
            Some(other) => py_json(other, false, out),
            None => {}
        },
        Some("tool_result") => {
            let mut head_skip = vec!["content"];
            head_skip.extend_from_slice(skip);
            py_object(map, &head_skip, false, out);
            out.push('\n');
            content_text(map.get("content").unwrap_or(&Value::Null), skip, out);
        }
        _ => py_object(map, skip, false, out),
    }
}

/// `json.dumps(value, sort_keys=True, ensure_ascii=ascii)` of Python.
pub(super) fn py_json(value: &Value, ascii: bool, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !(n.is_i64() || n.is_u64()) => out.push_str(&py_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => py_string(s, ascii, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_json(item, ascii, out);
            }
            out.push(']');
        }
        Value::Object(map) => py_object(map, &[], ascii, out),
    }
}

/// An object without the keys in `skip`, keys sorted by code point as Python sorts them.
fn py_object(map: &Map<String, Value>, skip: &[&str], ascii: bool, out: &mut String) {
    let mut keys: Vec<&String> = map.keys().filter(|k| !skip.contains(&k.as_str())).collect();
    keys.sort();
    out.push('{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        py_string(key, ascii, out);
        out.push_str(": ");
        py_json(&map[key], ascii, out);
    }
    out.push('}');
}

fn py_string(s: &str, ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ascii && !(' '..='~').contains(&c)) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr` of a float: the shortest digits that round-trip, in fixed notation for
/// exponents from -4 to 15 and in scientific notation (`1e-05`, `1e+16`) otherwise.
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        }
        .to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        if point <= 0 {
            let zeros = "0".repeat(point.unsigned_abs() as usize);
            return format!("{sign}0.{zeros}{digits}");
        }
        let point = point as usize;
        let whole = format!("{digits:0<point$}");
        let (int, frac) = whole.split_at(point);
        let frac = if frac.is_empty() { "0" } else { frac };
        return format!("{sign}{int}.{frac}");
    }
    let (first, rest) = digits.split_at(1);
    let rest = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let esign = if exponent < 0 { '-' } else { '+' };
    format!("{sign}{first}{rest}e{esign}{:02}", exponent.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_as_python_writes_them() {
        for (f, python) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-0.0, "-0.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456.789, "123456.789"),
            (1e15, "1000000000000000.0"),
            (2.5e-7, "2.5e-07"),
        ] {
            assert_eq!(py_float(f), python, "{f}");
        }
    }

    #[test]
    fn strings_as_python_escapes_them() {
        let mut ascii = String::new();
        py_string("é\u{1F600}\u{7f}\"\n\u{1}", true, &mut ascii);
        assert_eq!(ascii, r#""\u00e9\ud83d\ude00\u007f\"\n\u0001""#);
        let mut plain = String::new();
        py_string("é\u{7f}", false, &mut plain);
        assert_eq!(plain, "\"é\u{7f}\"");
    }

    #[test]
    fn a_string_and_text_parts_render_alike() {
        let a = json!({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "a\nb"}]});
        let b = json!({"messages": [{"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]});
        let (a, b) = (
            render(&a, Markers::AsReference),
            render(&b, Markers::AsReference),
        );
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(
            String::from_utf8(a.bytes).unwrap(),
            "[]\n{\"role\": \"tool\", \"tool_call_id\": \"c1\"}\na\nb"
        );
    }

    #[test]
    fn tools_come_first_and_markers_become_breakpoints() {
        let body = json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
            "system": "sys",
            "tools": [{"name": "t", "cache_control": {"type": "ephemeral"}}]});
        let r = render(&body, Markers::Stripped);
        let text = String::from_utf8(r.bytes.clone()).unwrap();
        assert_eq!(text, "[{\"name\": \"t\"}]\nsys\n{\"role\": \"user\"}\nhi");
        let ends: Vec<usize> = r.blocks.iter().map(|b| b.end).collect();
        assert_eq!(ends, vec![14, 19, text.len()]);
        let marks: Vec<_> = r.blocks.iter().map(|b| b.breakpoint).collect();
        assert_eq!(marks, vec![Some(None), None, Some(Some(3600))]);
        assert_eq!(r.message_starts, vec![20]);
    }
}
