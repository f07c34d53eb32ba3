//! `browser_history` (SPEC 6): the core archive as a read-only MCP tool. Past observations
//! stay addressable, but every ref they show is neutralised, so nothing read there can be
//! acted on.

use serde_json::{json, Value};
use staleguard::{Archive, ARCHIVE_TAG};

/// The tool the relay adds to the server's tools.
pub use staleguard::HISTORY_TOOL;

/// The tool result for a call with `arguments`, `now` browser results into the session.
pub fn answer(archive: &Archive, arguments: Option<&Value>, now: usize) -> Value {
    match arguments.and_then(|a| a.get("id")) {
        None | Some(Value::Null) => text_result(vec![archive.list(now)], false),
        Some(Value::String(id)) => match archive.read_back(id.trim(), now) {
            Some(old) => text_result(vec![old.banner, old.text], false),
            None => text_result(
                vec![format!(
                    "{ARCHIVE_TAG} No observation {} is kept. Call {HISTORY_TOOL} without arguments to list them.",
                    Value::String(id.chars().take(64).collect())
                )],
                true,
            ),
        },
        Some(other) => text_result(
            vec![format!(
                "{ARCHIVE_TAG} id must be a string such as \"1a2b3c4d\", not a {}.",
                kind(other)
            )],
            true,
        ),
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
        "description": "List the browser observations of this session, or read one by id. Past pages are read-only: their refs are stale and neutralised, so nothing read here can be clicked or typed into. Use it to look up what an older page said; act only on the newest snapshot.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "description": "Observation id from the list; omit to list them"
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
