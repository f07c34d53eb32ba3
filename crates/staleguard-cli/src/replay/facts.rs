//! Facts are checked where they are needed (SPEC 9): a fact the final answer states must be
//! in the request that produced the answer, a fact a follow-up asks about in the request
//! that carries the follow-up. Checking only the last request would find the answer's facts
//! in the answer itself.
//!
//! A facts file is one fact a line (`fixtures/facts/<scenario>.txt`), with no mark of which
//! kind it is: a fact the final answer contains is an answer fact, any other a follow-up
//! fact. A fact counts as present when the text of the request's tool results holds it
//! (what the browser returned, with what staleguard put there); the model's and the user's
//! own words do not count.

use serde::Serialize;
use serde_json::Value;

/// Which request a fact must be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Need {
    /// The final answer states it: the request that produced the answer.
    Answer,
    /// The follow-up asks about it: the last request, which carries the follow-up.
    FollowUp,
}

impl Need {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Need::Answer => "answer",
            Need::FollowUp => "follow-up",
        }
    }
}

/// A fact and the turn (index into the turn requests) whose request must hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placed {
    pub fact: String,
    pub need: Need,
    pub turn: usize,
}

/// Places each fact. `turn_starts` holds, for each turn request, how many messages (or
/// items) of the session it carries; the last is the whole session.
pub(super) fn place(session: &Value, facts: &[String], turn_starts: &[usize]) -> Vec<Placed> {
    let last = turn_starts.len().saturating_sub(1);
    let answer = final_answer(session).and_then(|(index, text)| {
        let turn = turn_starts.iter().rposition(|&start| start <= index)?;
        Some((turn, text))
    });
    facts
        .iter()
        .map(|fact| match &answer {
            Some((turn, text)) if text.contains(fact.as_str()) => Placed {
                fact: fact.clone(),
                need: Need::Answer,
                turn: *turn,
            },
            _ => Placed {
                fact: fact.clone(),
                need: Need::FollowUp,
                turn: last,
            },
        })
        .collect()
}

/// The final answer: the last assistant message with text and no tool call, its index and
/// its text.
fn final_answer(session: &Value) -> Option<(usize, String)> {
    let items = items(session);
    items.iter().enumerate().rev().find_map(|(i, item)| {
        if !matches!(
            item.get("role").and_then(Value::as_str),
            Some("assistant" | "model")
        ) {
            return None;
        }
        let calls = item
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty());
        // Gemini's model turns hold `parts`, its calls `functionCall` parts.
        let content = item.get("content").or_else(|| item.get("parts"));
        let content = content.unwrap_or(&Value::Null);
        let uses_tool = content.as_array().is_some_and(|parts| {
            parts.iter().any(|p| {
                p.get("type").and_then(Value::as_str) == Some("tool_use")
                    || p.get("functionCall").is_some()
            })
        });
        let text = text_of(content);
        (!calls && !uses_tool && !text.trim().is_empty()).then_some((i, text))
    })
}

/// The messages (or Responses items, or Gemini contents) of a request.
pub(super) fn items(request: &Value) -> &[Value] {
    request
        .get("messages")
        .or_else(|| request.get("input"))
        .or_else(|| request.get("contents"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The text of every tool result of a request, joined by newlines: OpenAI `tool` messages,
/// Anthropic `tool_result` blocks, Responses `*_call_output` items, Gemini
/// `functionResponse` parts, appended parts included.
pub(super) fn tool_results_text(request: &Value) -> String {
    let texts = items(request).iter().map(item_results_text);
    texts
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the tool results one message (or item, or content) holds, joined by
/// newlines.
pub(super) fn item_results_text(item: &Value) -> String {
    let mut out = Vec::new();
    if item.get("role").and_then(Value::as_str) == Some("tool") {
        out.push(text_of(item.get("content").unwrap_or(&Value::Null)));
    }
    if let Some(parts) = item.get("content").and_then(Value::as_array) {
        for part in parts {
            if part.get("type").and_then(Value::as_str) == Some("tool_result") {
                out.push(text_of(part.get("content").unwrap_or(&Value::Null)));
            }
        }
    }
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.ends_with("_call_output") {
        out.push(text_of(item.get("output").unwrap_or(&Value::Null)));
    }
    for part in item
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(response) = part.pointer("/functionResponse/response") {
            out.push(gemini_result_text(response));
        }
    }
    out.join("\n")
}

/// The text of a Gemini function response, under the key its client put it (the keys
/// `adapter::gemini` reads).
fn gemini_result_text(response: &Value) -> String {
    let value = ["output", "content", "result", "error"]
        .into_iter()
        .find_map(|key| response.get(key))
        .unwrap_or(&Value::Null);
    text_of(value.get("content").unwrap_or(value))
}

/// A string, or the text of a list's text parts joined by newlines.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answer_facts_go_to_the_answer_turn_and_the_rest_to_the_last() {
        let session = json!({"messages": [
            {"role": "user", "content": "find the price"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "price $5, code X1"},
            {"role": "assistant", "content": "It costs $5."},
            {"role": "user", "content": "and the code?"},
        ]});
        let facts = vec!["$5".to_string(), "X1".to_string()];
        let placed = place(&session, &facts, &[1, 3, 5]);
        assert_eq!((placed[0].need, placed[0].turn), (Need::Answer, 1));
        assert_eq!((placed[1].need, placed[1].turn), (Need::FollowUp, 2));
        assert_eq!(tool_results_text(&session), "price $5, code X1");
    }
}
