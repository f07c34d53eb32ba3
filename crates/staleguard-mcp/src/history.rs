//! `browser_history` (SPEC 6): the core archive as a read-only MCP tool. Past observations
//! stay addressable, but every ref they show is neutralised, so nothing read there can be
//! acted on.

use serde_json::{json, Value};
use staleguard::{Archive, ARCHIVE_TAG};

/// The tool the relay adds to the server's tools.
pub use staleguard::HISTORY_TOOL;

/// The tool result for a call with `arguments`, `now` browser results into the session. An
/// id or lines it cannot read back answer with the list and what was wrong, so that the
/// model's next call can read what it was after.
pub fn answer(archive: &Archive, arguments: Option<&Value>, now: usize) -> Value {
    let id = match arguments.and_then(|a| a.get("id")) {
        None | Some(Value::Null) => return text_result(vec![archive.list(now)], false),
        Some(Value::String(id)) => id.trim(),
        Some(other) => {
            return text_result(
                vec![format!(
                    "{ARCHIVE_TAG} id must be a string such as \"1a2b3c4d\", not a {}.",
                    kind(other)
                )],
                true,
            )
        }
    };
    let missing = || {
        let missing = format!(
            "{ARCHIVE_TAG} No observation {} is kept. These are:",
            Value::String(id.chars().take(64).collect())
        );
        text_result(vec![missing, archive.list(now)], true)
    };
    let lines = arguments
        .and_then(|a| a.get("lines"))
        .filter(|l| !l.is_null());
    let Some(lines) = lines else {
        return match archive.read_back(id, now) {
            Some(whole) => text_result(vec![whole.banner, whole.text], false),
            None => missing(),
        };
    };
    // The part alone is read: the whole page is read back only to say what was wrong.
    let part = line_range(lines).and_then(|(first, last)| archive.read_lines(id, now, first, last));
    if let Some(part) = part {
        return text_result(vec![part.banner, part.text], false);
    }
    let Some(whole) = archive.read_back(id, now) else {
        return missing();
    };
    let count = whole.text.split_inclusive('\n').count();
    let wrong = format!(
        "{ARCHIVE_TAG} lines must name lines of observation {} as a fold marker does, such as \"12-40\"; it has {count}, and {} names none of them. The observations kept:",
        Value::String(id.to_string()),
        serde_json::to_string(lines).unwrap_or_default().chars().take(64).collect::<String>(),
    );
    text_result(vec![wrong, archive.list(now)], true)
}

/// Lines as a fold marker names them: `"120-158"`, or one line, `"120"` or `120`; `None`
/// for anything else. The CLI's `archive --lines` reads them the same way.
pub fn line_range(lines: &Value) -> Option<(usize, usize)> {
    let number = |s: &str| s.trim().parse::<usize>().ok();
    match lines {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(|n| (n, n)),
        Value::String(s) => match s.split_once('-') {
            Some((first, last)) => Some((number(first)?, number(last)?)),
            None => number(s).map(|n| (n, n)),
        },
        _ => None,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
        Value::Null | Value::String(_) => "string",
    }
}

fn text_result(parts: Vec<String>, is_error: bool) -> Value {
    let content: Vec<Value> = parts
        .into_iter()
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    let mut result = json!({ "content": content });
    if is_error {
        result["isError"] = json!(true);
    }
    result
}

/// The tool as `tools/list` shows it.
pub fn tool_definition() -> Value {
    json!({
        "name": HISTORY_TOOL,
        "description": "List the browser observations of this session, or read one by id (or some of its lines, as a fold marker of a lean page names them). Past pages are read-only: their refs are stale and neutralised, so nothing read here can be clicked or typed into. Use it to look up what an older page said; act only on the newest snapshot.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "description": "Observation id from the list; omit to list them"
                },
                "lines": {
                    "type": "string",
                    "description": "Only these lines of the observation, such as \"120-158\", as a fold marker of a lean page names them; omit for all of it"
                }
            },
            "additionalProperties": false
        },
        "annotations": {
            "title": "Browser history (read-only)",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        }
    })
}
