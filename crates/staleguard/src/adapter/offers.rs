//! Which ways back a request offers the model (SPEC 2, "The way back"): the MCP guard's
//! `browser_history` tool (SPEC 9, C5: a collapse may wait only where the guard stands between
//! the model and the browser), and Playwright MCP's `browser_find`. A request offers a tool
//! by declaring it among its tools (`name`, `function.name`, Gemini's
//! `functionDeclarations[].name`, the `tools[].name` of a Responses `namespace`, where Codex puts
//! each MCP server's tools; Responses bodies also declare the tools a `tool_search_output` item
//! loaded), or by naming it alone on a line of a system text, as
//! agents that load tools on demand list them (Claude Code's deferred tools). Only the
//! agent's own parts are read: tool results, where page text arrives, never count.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::tools::{is_find, is_own, FIND_TOOL, HISTORY_TOOL};

/// The ways back a request offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    /// The MCP guard's `browser_history`: the guard stands between the model and the
    /// browser.
    pub history: bool,
    /// The server's `browser_find`: a search in the live page.
    pub find: bool,
}

impl Offered {
    fn of(name: &str) -> Offered {
        Offered {
            history: is_own(name),
            find: is_find(name),
        }
    }
}

impl std::ops::BitOr for Offered {
    type Output = Offered;

    fn bitor(self, other: Offered) -> Offered {
        Offered {
            history: self.history || other.history,
            find: self.find || other.find,
        }
    }
}

impl std::ops::BitOrAssign for Offered {
    fn bitor_assign(&mut self, other: Offered) {
        *self = *self | other;
    }
}

/// One declared tool, in any of the providers' shapes; every field optional.
#[derive(Deserialize)]
struct Declared<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<Named<'a>>,
    #[serde(
        rename = "functionDeclarations",
        alias = "function_declarations",
        borrow
    )]
    declarations: Option<Vec<Named<'a>>>,
    /// A `namespace`'s tools; read only for a namespace, as any other tool may use the key.
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// The ways back a list of tools names.
pub(super) fn in_tools(raw: Option<&RawValue>) -> Offered {
    let Some(Ok(tools)) = raw.map(|r| serde_json::from_str::<Vec<Declared<'_>>>(r.get())) else {
        return Offered::default();
    };
    let mut offered = Offered::default();
    for tool in &tools {
        let namespace = tool
            .tools
            .filter(|_| tool.kind.as_deref() == Some("namespace"))
            .and_then(|raw| serde_json::from_str::<Vec<Named<'_>>>(raw.get()).ok())
            .unwrap_or_default();
        let nested = tool
            .function
            .iter()
            .chain(tool.declarations.iter().flatten())
            .chain(&namespace);
        let names = tool
            .name
            .iter()
            .chain(nested.filter_map(|n| n.name.as_ref()));
        for name in names {
            offered |= Offered::of(name);
        }
    }
    offered
}

/// The ways back the top-level `tools` (or Chat Completions' legacy `functions`, Gemini Code
/// Assist's `request.tools`) name, or the Responses `instructions` or Gemini's
/// `systemInstruction` list, read only when the body names `browser_history` at all (every
/// request of a guarded agent, and only those: the server's `browser_find` alone is read on
/// demand, [`top_level_find`]). Read apart from the envelope, so that a body that gives a key
/// twice is read as it always was.
pub(super) fn in_body(body: &str) -> Offered {
    match body.contains(HISTORY_TOOL) {
        true => declared(body, 0),
        false => Offered::default(),
    }
}

/// Whether the top-level declarations [`in_body`] reads offer `browser_find`, for a body
/// [`in_body`] did not read.
pub(super) fn top_level_find(body: &str) -> bool {
    !body.contains(HISTORY_TOOL) && body.contains(FIND_TOOL) && declared(body, 0).find
}

/// What the top-level declarations offer; `depth` 1 inside Gemini Code Assist's `request`.
fn declared(body: &str, depth: u8) -> Offered {
    #[derive(Deserialize)]
    struct Declares<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
        #[serde(borrow)]
        functions: Option<&'a RawValue>,
        #[serde(borrow)]
        instructions: Option<&'a RawValue>,
        #[serde(rename = "systemInstruction", alias = "system_instruction", borrow)]
        system_instruction: Option<&'a RawValue>,
        #[serde(borrow)]
        request: Option<&'a RawValue>,
    }
    let Ok(d) = serde_json::from_str::<Declares<'_>>(body) else {
        return Offered::default();
    };
    let wrapped = match d.request {
        Some(r) if depth == 0 => declared(r.get(), 1),
        _ => Offered::default(),
    };
    in_tools(d.tools)
        | in_tools(d.functions)
        | in_system(d.instructions)
        | in_content(d.system_instruction)
        | wrapped
}

/// The ways back a Gemini content (`{"parts": [{"text": ...}]}`, or a plain string) lists:
/// Gemini's system text.
fn in_content(raw: Option<&RawValue>) -> Offered {
    #[derive(Deserialize)]
    struct Content<'a> {
        #[serde(borrow)]
        parts: Option<&'a RawValue>,
    }
    match raw.map(|r| serde_json::from_str::<Content<'_>>(r.get())) {
        Some(Ok(content)) => in_system(content.parts),
        _ => in_system(raw),
    }
}

/// The ways back a system prompt (a string, or blocks with `text`) lists.
pub(super) fn in_system(raw: Option<&RawValue>) -> Offered {
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(borrow)]
        text: Option<Cow<'a, str>>,
    }
    let Some(raw) = raw else {
        return Offered::default();
    };
    if let Ok(text) = serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        return in_text(&text);
    }
    let blocks = serde_json::from_str::<Vec<Block<'_>>>(raw.get()).unwrap_or_default();
    let texts = blocks.iter().filter_map(|b| b.text.as_deref());
    texts.map(in_text).fold(Offered::default(), |a, b| a | b)
}

/// The ways back `text` lists: a line that is a tool's name and nothing else (a list item's
/// marker aside).
pub(super) fn in_text(text: &str) -> Offered {
    let names = text.lines().filter_map(|line| {
        let name = line.trim().trim_start_matches(['-', '*']).trim_start();
        (!name.contains(char::is_whitespace)).then_some(name)
    });
    names
        .map(Offered::of)
        .fold(Offered::default(), |a, b| a | b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).expect("raw JSON")
    }

    #[test]
    fn tools_name_it_in_every_providers_shape() {
        let offered = [
            r#"[{"name":"mcp__pw__browser_click"},{"name":"mcp__pw__browser_history"}]"#,
            r#"[{"type":"function","function":{"name":"browser_history"}}]"#,
            r#"[{"type":"function","name":"browser_history","parameters":{}}]"#,
            r#"[{"functionDeclarations":[{"name":"mcp_pw_browser_history"}]}]"#,
            r#"[{"type":"namespace","name":"mcp__playwright","tools":[{"type":"function","name":"browser_click"},{"type":"function","name":"browser_history"}]}]"#,
        ];
        for tools in offered {
            assert!(in_tools(Some(&raw(tools))).history, "{tools}");
        }
        let not = [
            r#"[{"name":"browser_click"},{"name":"browser_history_export"}]"#,
            r#"[{"name":"Bash","description":"browser_history"}]"#,
            r#"{"name":"browser_history"}"#,
            r#"[{"type":"namespace","name":"mcp__playwright","tools":[{"type":"function","name":"browser_click"}]}]"#,
            // Only a namespace's tools are its own.
            r#"[{"type":"mcp","name":"x","tools":[{"name":"browser_history"}]}]"#,
            // A namespace whose tools are no list declares nothing, and spoils no other tool.
            r#"[{"type":"namespace","name":"mcp__x","tools":{"name":"browser_history"}}]"#,
            "null",
        ];
        for tools in not {
            assert!(!in_tools(Some(&raw(tools))).history, "{tools}");
        }
        assert!(!in_tools(None).history);
    }

    #[test]
    fn a_body_declares_it_at_the_top_or_inside_gemini_code_assists_wrapper() {
        let offered = [
            r#"{"messages":[],"tools":[{"type":"function","function":{"name":"browser_history"}}]}"#,
            r#"{"input":[],"instructions":"Deferred tools:\nmcp__pw__browser_history"}"#,
            r#"{"input":[],"tools":[{"type":"namespace","name":"mcp__pw","tools":[{"type":"function","name":"browser_history"}]}]}"#,
            r#"{"model":"m","request":{"contents":[],"tools":[{"functionDeclarations":[{"name":"mcp_pw_browser_history"}]}]}}"#,
            // Gemini's system text lists it as other agents' system texts do (found by the
            // `gemini_body` fuzz target: the same session as a Chat body waited, as Gemini not).
            r#"{"contents":[],"systemInstruction":{"parts":[{"text":"Deferred tools:\nmcp__pw__browser_history"}]}}"#,
            r#"{"contents":[],"system_instruction":{"parts":[{"text":"x"},{"text":"- browser_history"}]}}"#,
            r#"{"model":"m","request":{"contents":[],"systemInstruction":"browser_history"}}"#,
        ];
        for body in offered {
            assert!(in_body(body).history, "{body}");
        }
        let not = [
            // Named in a tool result only: page text offers nothing.
            r#"{"messages":[{"role":"tool","content":"browser_history"}],"tools":[]}"#,
            // A key given twice is no declaration, and no error either.
            r#"{"tools":[{"name":"browser_history"}],"tools":[]}"#,
            r#"{"messages":[],"tools":[{"name":"browser_click"}]}"#,
            r#"{"contents":[],"systemInstruction":{"parts":[{"text":"Use browser_history to read old pages."}]}}"#,
            r#"{"contents":[],"systemInstruction":{"role":"user","text":"browser_history"}}"#,
        ];
        for body in not {
            assert!(!in_body(body).history, "{body}");
        }
    }

    #[test]
    fn a_system_text_lists_it_alone_on_a_line() {
        let deferred = "The following deferred tools are now available:\nmcp__playwright__browser_click\nmcp__playwright__browser_history\nmcp__playwright__browser_hover";
        assert!(in_text(deferred).history);
        assert!(in_text("- browser_history").history);
        assert!(!in_text("Use browser_history to read old pages.").history);
        assert!(!in_text("mcp__playwright__browser_history_export").history);
        let blocks = serde_json::json!([{"type": "text", "text": deferred}]).to_string();
        assert!(in_system(Some(&raw(&blocks))).history);
        let string = serde_json::to_string(deferred).expect("JSON string");
        assert!(in_system(Some(&raw(&string))).history);
        assert!(!in_system(Some(&raw("42"))).history);
    }

    #[test]
    fn the_servers_find_is_offered_as_the_history_is() {
        let tools = r#"[{"name":"mcp__pw__browser_click"},{"name":"mcp__pw__browser_find"}]"#;
        let offered = in_tools(Some(&raw(tools)));
        assert_eq!((offered.history, offered.find), (false, true));
        let body = r#"{"messages":[],"tools":[{"type":"function","function":{"name":"browser_find"}},{"type":"function","function":{"name":"browser_history"}}]}"#;
        assert_eq!(
            in_body(body),
            Offered {
                history: true,
                find: true
            }
        );
        assert!(in_text("Deferred tools:\nmcp__pw__browser_find").find);
        assert!(!in_text("Use browser_find to search.").find);
        let named_in_a_result =
            r#"{"messages":[{"role":"tool","content":"browser_find"}],"tools":[]}"#;
        assert_eq!(in_body(named_in_a_result), Offered::default());
        assert!(!top_level_find(named_in_a_result));
    }

    #[test]
    fn a_body_is_read_for_find_only_when_asked() {
        let body =
            r#"{"messages":[],"tools":[{"type":"function","function":{"name":"browser_find"}}]}"#;
        assert_eq!(in_body(body), Offered::default(), "the read passes it by");
        assert!(top_level_find(body), "asked, it reads the tools");
        let gemini = r#"{"model":"m","request":{"contents":[],"tools":[{"functionDeclarations":[{"name":"mcp_pw_browser_find"}]}]}}"#;
        assert!(top_level_find(gemini));
        assert!(!top_level_find(
            r#"{"messages":[],"tools":[{"name":"browser_click"}]}"#
        ));
    }
}
