//! What the client sees of a result: browser results taken in and their refs scoped, guidance
//! appended, `browser_history` added to the server's tools.

use serde_json::{json, Value};
use staleguard::ResultText;

use super::Relay;
use crate::history::HISTORY_TOOL;
use crate::scope;

impl Relay {
    /// Takes in a browser result (of a look when `look`) and edits what the client sees.
    /// Returns whether it changed.
    pub(super) fn browser_result(&mut self, message: &mut Value, step: usize, look: bool) -> bool {
        let Some(result) = message.get_mut("result") else {
            // A JSON-RPC error: a failed step.
            if look {
                self.tracker.failed_look(step);
            } else {
                self.tracker.failure(step);
            }
            self.browser_results += 1;
            return false;
        };
        let read = self.read(result_text(result));
        let failed = is_error(result) || read.failed();
        if look {
            self.tracker.look(step, &read, failed);
        } else {
            self.tracker.result(step, &read, failed);
        }
        self.tracker.forget_oldest(self.options.max_observations);
        self.browser_results += 1;
        let mut changed = false;
        if let Some(doc) = self.document_at(step) {
            let tracker = &self.tracker;
            if self.options.guard && self.options.namespace_refs && !tracker.refs_unique() {
                changed |= match scope_at_refs(result, doc, &read) {
                    Some(scoped) => scoped,
                    None => scope_result(result, doc, |id| tracker.offers_ref(id)),
                };
            }
        }
        if !failed {
            // The archive keeps the text the relay read: no second copy.
            self.archive.record_result(&read, self.browser_results);
        }
        if self.options.guard {
            if let Some(guidance) = self.tracker.stall_guidance() {
                push_text(result, guidance);
                let steps = self.tracker.progress().last().map_or(0, |s| s.no_progress);
                self.log.notes.push(format!(
                    "no page change for {steps} browser steps: guidance appended"
                ));
                changed = true;
            }
        }
        changed
    }

    /// A result text, read: read once, shared by the tracker, the scope and the archive.
    pub(super) fn read(&self, text: std::sync::Arc<str>) -> ResultText {
        ResultText::read(text, &self.memo)
    }

    /// Appends `browser_history` to the last page of the server's tools.
    pub(super) fn add_history_tool(&mut self, message: &mut Value) -> bool {
        let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
            return false;
        };
        if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
            return false;
        }
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return false;
        };
        if tools
            .iter()
            .any(|t| t.get("name") == Some(&json!(HISTORY_TOOL)))
        {
            self.server_has_history = true;
            return false;
        }
        tools.push(crate::history::tool_definition());
        true
    }
}

/// Whether a response's result has a text part.
pub(super) fn has_text_part(message: &Value) -> bool {
    message
        .pointer("/result/content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        })
}

pub(super) fn is_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

/// The text parts of a tool result, joined (shared: the guard and the archive keep it).
pub fn result_text(result: &Value) -> std::sync::Arc<str> {
    let parts = result.get("content").and_then(Value::as_array);
    let texts: Vec<&str> = parts
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    match texts.as_slice() {
        // One part, the common case: one copy.
        [only] => (*only).into(),
        _ => texts.join("\n").into(),
    }
}

/// Scopes the refs of a result at the places where the tree parser found them in its text
/// (the text parts joined as [`result_text`] joins them): no search, and page text that
/// merely looks like a ref stays as it is. `None` when the parts no longer add up to that
/// text (then [`scope_result`] scans for ref tokens).
fn scope_at_refs(result: &mut Value, doc: u32, read: &ResultText) -> Option<bool> {
    let text = read.text();
    let starts = read.ref_starts()?;
    if starts.is_empty() || !starts.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    let prefix = format!("d{doc}");
    let parts = result.get_mut("content").and_then(Value::as_array_mut)?;
    let mut offset = 0;
    let mut changed = false;
    let mut next = starts.iter().copied().peekable();
    for part in parts
        .iter_mut()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
    {
        let Some(Value::String(part_text)) = part.get_mut("text") else {
            continue;
        };
        // The joined text holds this part at `offset`, then a line break.
        if text.get(offset..offset + part_text.len()) != Some(part_text.as_str()) {
            return None;
        }
        let end = offset + part_text.len();
        let mut scoped = String::new();
        let mut done = 0;
        while let Some(start) = next.next_if(|&s| s < end) {
            let at = start.checked_sub(offset)?;
            scoped.push_str(part_text.get(done..at)?);
            scoped.push_str(&prefix);
            done = at;
        }
        if !scoped.is_empty() {
            scoped.push_str(part_text.get(done..)?);
            *part_text = scoped;
            changed = true;
        }
        offset = end + 1;
    }
    Some(changed)
}

fn scope_result(result: &mut Value, doc: u32, is_ref: impl Fn(&str) -> bool) -> bool {
    let mut changed = false;
    let parts = result.get_mut("content").and_then(Value::as_array_mut);
    for part in parts.into_iter().flatten() {
        if part.get("type").and_then(Value::as_str) != Some("text") {
            continue;
        }
        let Some(Value::String(text)) = part.get_mut("text") else {
            continue;
        };
        if let std::borrow::Cow::Owned(scoped) = scope::scope_text(text, doc, &is_ref) {
            *text = scoped;
            changed = true;
        }
    }
    changed
}

/// Adds a text part of its own, so that page text can never pose as it.
fn push_text(result: &mut Value, text: String) {
    if let Some(parts) = result.get_mut("content").and_then(Value::as_array_mut) {
        parts.push(json!({"type": "text", "text": text}));
    } else if let Some(object) = result.as_object_mut() {
        object.insert("content".into(), json!([{"type": "text", "text": text}]));
    }
}
