//! OpenAI Responses request bodies: `input` items, with `function_call` (`call_id`, `name`,
//! `arguments`) and `function_call_output` (`call_id`, `output` as a string or as
//! `input_text` / `input_image` parts), and their `custom_tool_call` twins. A call to a tool
//! of a `namespace` carries the namespace beside its name (Codex puts each MCP server's tools
//! in one: `"namespace": "mcp__playwright", "name": "browser_click"`); it is read as
//! `mcp__playwright__browser_click`, the name Claude Code gives the same tool. The tools a
//! `tool_search_output` item loaded are declared as the top-level `tools` are. `reasoning`
//! items and encrypted content are never touched. With `previous_response_id` or
//! `conversation`, earlier turns live on the server: what the request holds is projected.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::content;
use super::lenient::List;
use super::offers;
use super::request::{Hints, WireRequest};
use super::strings::{json_error, raw_text, string_of};
use crate::error::Error;
use crate::transcript::{Item, Role, ToolCall};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    input: Option<List<InputItem<'a>>>,
    messages: Option<IgnoredAny>,
    previous_response_id: Option<IgnoredAny>,
    conversation: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct InputItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    output: Option<&'a RawValue>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
}

/// Reads a Responses body.
pub(crate) fn read(body: &str) -> Result<WireRequest<'_>, Error> {
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|e| json_error(&e, body, "responses"))?;
    let hints = Hints {
        has_input: envelope.input.is_some(),
        has_messages: envelope.messages.is_some(),
        server_side_history: envelope.previous_response_id.is_some()
            || envelope.conversation.is_some(),
        offers: offers::in_body(body),
        ..Hints::default()
    };
    let mut request = WireRequest::new(body, hints);
    request.read_list(envelope.input, read_item);
    Ok(request)
}

fn read_item<'a>(request: &mut WireRequest<'a>, index: usize, item: InputItem<'a>) {
    match item.kind.as_deref() {
        Some("message") | None => read_message(request, item),
        Some("function_call") | Some("custom_tool_call") => {
            let arguments = item.arguments.or(item.input);
            match (item.call_id, item.name) {
                (Some(id), Some(name)) => request.push(Item::Call(ToolCall {
                    id,
                    name: qualified(item.namespace, name),
                    arguments: raw_text(arguments),
                    message: index,
                })),
                _ => request.push(Item::Other),
            }
        }
        Some("function_call_output") | Some("custom_tool_call_output") => {
            read_output(request, index, item)
        }
        Some("tool_search_output") => {
            // The tools a client-side tool search loaded (Codex defers MCP tools behind one):
            // the agent's own declaration, as the top-level `tools` are.
            request.hints.offers |= offers::in_tools(item.tools);
            request.push(Item::Other)
        }
        _ => request.push(Item::Other),
    }
}

/// A call's tool name with its namespace, if any, before it: `<namespace>__<name>`.
fn qualified<'a>(namespace: Option<Cow<'a, str>>, name: Cow<'a, str>) -> Cow<'a, str> {
    match namespace.as_deref().map(|n| n.trim_end_matches('_')) {
        Some(namespace) if !namespace.is_empty() => Cow::Owned(format!("{namespace}__{name}")),
        _ => name,
    }
}

fn read_message<'a>(request: &mut WireRequest<'a>, item: InputItem<'a>) {
    let role = match item.role.and_then(string_of).as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system" | "developer") => Role::System,
        _ => return request.push(Item::Other),
    };
    match item
        .content
        .and_then(|raw| content::read(raw, "input_text"))
    {
        Some(c) => {
            // A system text may list the tools loaded on demand.
            if role == Role::System {
                request.hints.offers |= offers::in_text(&c.text);
            }
            request.push(Item::Text { role, text: c.text })
        }
        None => request.push(Item::Other),
    }
}

fn read_output<'a>(request: &mut WireRequest<'a>, index: usize, item: InputItem<'a>) {
    request.push_result(index, item.call_id, item.output, "input_text", false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_call_is_named_with_its_namespace() {
        let body = r#"{"input":[
            {"type":"function_call","call_id":"c1","namespace":"mcp__playwright","name":"browser_click","arguments":"{}"},
            {"type":"function_call","call_id":"c2","name":"exec_command","arguments":"{}"},
            {"type":"function_call","call_id":"c3","namespace":"","name":"browser_type","arguments":"{}"}]}"#;
        let request = read(body).expect("reads");
        let names: Vec<&str> = request
            .transcript()
            .items
            .iter()
            .filter_map(|item| match item {
                Item::Call(call) => Some(call.name.as_ref()),
                _ => None,
            })
            .collect();
        assert_eq!(
            names,
            [
                "mcp__playwright__browser_click",
                "exec_command",
                "browser_type"
            ]
        );
    }

    #[test]
    fn a_tool_search_output_declares_the_tools_it_loaded() {
        let output = |tool: &str| {
            format!(
                r#"{{"input":[{{"type":"tool_search_call","call_id":"s1","execution":"client","arguments":{{"query":"browser"}}}},
                {{"type":"tool_search_output","call_id":"s1","execution":"client","tools":[{{"type":"namespace","name":"mcp__playwright","tools":[{{"type":"function","name":"{tool}"}}]}}]}}],
                "tools":[{{"type":"tool_search","execution":"client"}}]}}"#
            )
        };
        let offered = output("browser_history");
        assert!(read(&offered).expect("reads").hints.offers.history);
        let not = output("browser_click");
        assert!(!read(&not).expect("reads").hints.offers.history);
    }
}
