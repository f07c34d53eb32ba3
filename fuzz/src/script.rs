//! A browser session as a script the fuzzer mutates, written out in every wire format.
//!
//! The seeds are the recorded sessions, one step a record, so the fuzzer starts from real
//! pages and real calls and changes them where it likes; the targets write the same steps
//! as the bodies each format's clients send, and compare what staleguard makes of them.
//!
//! A script is text. Records are separated by `\x1e`; the first record holds flag bytes
//! ([`Script::flag`]) that pick the shape of the bodies, each later record starts with its
//! kind:
//!
//! - `S<text>`: a system text (every format puts them first);
//! - `U<text>`: a user text;
//! - `A<text>`: an assistant text;
//! - `T<name>\x1f<arguments>\x1f<result>`: a tool call and its result, in a turn of its own;
//! - `P<name>\x1f<arguments>\x1f<result>`: the same, in the turn of the call before
//!   (parallel calls: the results follow all the turn's calls, in order).
//!
//! Anything else is skipped. Arguments that are no JSON object are `{}` in every format.

use serde_json::{json, Map, Value};

/// Separates records.
pub const RECORD: char = '\u{1e}';
/// Separates a tool step's fields.
pub const FIELD: char = '\u{1f}';

/// One call and its result.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tool's name, as the request spells it (MCP prefix included).
    pub name: String,
    /// The call's arguments: always an object.
    pub args: Map<String, Value>,
    /// The result's text.
    pub result: String,
}

/// A step of the session.
#[derive(Debug, Clone)]
pub enum Step {
    /// The user's words.
    User(String),
    /// The assistant's words, without a call.
    Assistant(String),
    /// One assistant turn of calls, then their results.
    Tools(Vec<Call>),
}

/// A parsed script.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Flag bytes.
    pub flags: Vec<u8>,
    /// System texts, written first.
    pub system: Vec<String>,
    /// The steps.
    pub steps: Vec<Step>,
}

impl Script {
    /// Reads `text`.
    pub fn parse(text: &str) -> Script {
        let mut records = text.split(RECORD);
        let mut script = Script {
            flags: records.next().unwrap_or("").bytes().collect(),
            ..Script::default()
        };
        for record in records {
            let mut chars = record.chars();
            let kind = chars.next();
            let rest = chars.as_str();
            match kind {
                Some('S') => script.system.push(rest.to_string()),
                Some('U') => script.steps.push(Step::User(rest.to_string())),
                Some('A') => script.steps.push(Step::Assistant(rest.to_string())),
                Some(k @ ('T' | 'P')) => {
                    let mut fields = rest.splitn(3, FIELD);
                    let name = fields.next().unwrap_or("").to_string();
                    let args = match serde_json::from_str(fields.next().unwrap_or("{}")) {
                        Ok(Value::Object(map)) => map,
                        _ => Map::new(),
                    };
                    let result = fields.next().unwrap_or("").to_string();
                    let call = Call { name, args, result };
                    match (k, script.steps.last_mut()) {
                        ('P', Some(Step::Tools(calls))) => calls.push(call),
                        _ => script.steps.push(Step::Tools(vec![call])),
                    }
                }
                _ => {}
            }
        }
        script
    }

    /// Flag byte `i`, 0 when there is none.
    pub fn flag(&self, i: usize) -> u8 {
        self.flags.get(i).copied().unwrap_or(0)
    }

    /// Every call, in order, with its ID (`call_<n>`, from 1).
    pub fn calls(&self) -> impl Iterator<Item = (String, &Call)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Tools(calls) => Some(calls.iter()),
                _ => None,
            })
            .flatten()
            .enumerate()
            .map(|(i, c)| (format!("call_{}", i + 1), c))
    }

    /// An OpenAI Chat body: one message a step, a turn's calls in one assistant message.
    pub fn chat(&self) -> Value {
        let mut messages: Vec<Value> = self
            .system
            .iter()
            .map(|s| json!({"role": "system", "content": s}))
            .collect();
        let mut n = 0;
        for step in &self.steps {
            match step {
                Step::User(t) => messages.push(json!({"role": "user", "content": t})),
                Step::Assistant(t) => messages.push(json!({"role": "assistant", "content": t})),
                Step::Tools(calls) => {
                    let ids = next_ids(&mut n, calls.len());
                    let tool_calls: Vec<Value> = calls
                        .iter()
                        .zip(&ids)
                        .map(|(c, id)| json!({"id": id, "type": "function", "function": {"name": c.name, "arguments": Value::Object(c.args.clone()).to_string()}}))
                        .collect();
                    messages.push(
                        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                    );
                    for (c, id) in calls.iter().zip(&ids) {
                        messages
                            .push(json!({"role": "tool", "tool_call_id": id, "content": c.result}));
                    }
                }
            }
        }
        json!({"model": "gpt-4.1", "messages": messages})
    }

    /// An Anthropic Messages body; flag 1 bit 0 puts a `cache_control` breakpoint on the
    /// last block, as Claude Code does.
    pub fn anthropic(&self) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        let mut n = 0;
        for step in &self.steps {
            match step {
                Step::User(t) => {
                    messages.push(json!({"role": "user", "content": [{"type": "text", "text": t}]}))
                }
                Step::Assistant(t) => messages
                    .push(json!({"role": "assistant", "content": [{"type": "text", "text": t}]})),
                Step::Tools(calls) => {
                    let ids = next_ids(&mut n, calls.len());
                    let uses: Vec<Value> = calls
                        .iter()
                        .zip(&ids)
                        .map(|(c, id)| json!({"type": "tool_use", "id": id, "name": c.name, "input": c.args}))
                        .collect();
                    messages.push(json!({"role": "assistant", "content": uses}));
                    let results: Vec<Value> = calls
                        .iter()
                        .zip(&ids)
                        .map(|(c, id)| json!({"type": "tool_result", "tool_use_id": id, "content": c.result}))
                        .collect();
                    messages.push(json!({"role": "user", "content": results}));
                }
            }
        }
        if self.flag(1) & 1 == 1 {
            if let Some(Value::Array(blocks)) = messages.last_mut().map(|m| &mut m["content"]) {
                if let Some(Value::Object(block)) = blocks.last_mut() {
                    block.insert("cache_control".into(), json!({"type": "ephemeral"}));
                }
            }
        }
        let mut body =
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages});
        if !self.system.is_empty() {
            body["system"] = self.system.join("\n").into();
        }
        body
    }

    /// An OpenAI Responses body, shaped by flag 2: bit 0 a namespace for `mcp__<server>__`
    /// names (as Codex sends them), bit 1 outputs as `input_text` parts, bit 2
    /// `custom_tool_call`s, bit 3 a reasoning item before each turn of calls, bit 4
    /// `previous_response_id`, bit 5 a `tool_search_output` that loads `browser_history`.
    pub fn responses(&self) -> Value {
        let shape = self.flag(2);
        let mut input: Vec<Value> = self
            .system
            .iter()
            .map(|s| json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": s}]}))
            .collect();
        if shape & 32 != 0 {
            input.push(json!({"type": "tool_search_call", "call_id": "search_1", "execution": "client", "arguments": {"query": "browser"}}));
            input.push(json!({"type": "tool_search_output", "call_id": "search_1", "execution": "client", "tools": [{"type": "namespace", "name": "mcp__playwright", "tools": [{"type": "function", "name": "browser_history"}]}]}));
        }
        let mut n = 0;
        for step in &self.steps {
            match step {
                Step::User(t) => input.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]})),
                Step::Assistant(t) => input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t, "annotations": []}]})),
                Step::Tools(calls) => {
                    if shape & 8 != 0 {
                        input.push(json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": "gAAAAsecret"}));
                    }
                    let ids = next_ids(&mut n, calls.len());
                    for (c, id) in calls.iter().zip(&ids) {
                        let arguments = Value::Object(c.args.clone()).to_string();
                        let mut item = match shape & 4 {
                            0 => json!({"type": "function_call", "call_id": id, "name": c.name, "arguments": arguments}),
                            _ => json!({"type": "custom_tool_call", "call_id": id, "name": c.name, "input": arguments}),
                        };
                        if let (true, Some((namespace, name))) =
                            (shape & 1 != 0, c.name.rsplit_once("__"))
                        {
                            // `qualified` trims a namespace's trailing `_`: only names it gives back whole.
                            if !namespace.is_empty() && !namespace.ends_with('_') && !name.is_empty() {
                                item["namespace"] = namespace.into();
                                item["name"] = name.into();
                            }
                        }
                        input.push(item);
                    }
                    for (c, id) in calls.iter().zip(&ids) {
                        let output = match shape & 2 {
                            0 => json!(c.result),
                            _ => json!([{"type": "input_text", "text": c.result}]),
                        };
                        let kind = match shape & 4 {
                            0 => "function_call_output",
                            _ => "custom_tool_call_output",
                        };
                        input.push(json!({"type": kind, "call_id": id, "output": output}));
                    }
                }
            }
        }
        let mut body = json!({"model": "gpt-5", "input": input, "store": false});
        if shape & 16 != 0 {
            body["previous_response_id"] = "resp_1".into();
        }
        body
    }

    /// A Gemini `generateContent` body as the client flag 3 names writes it (see
    /// [`GeminiClient`]); flag 4: bit 0 the Code Assist wrapper, bit 1 snake_case part keys,
    /// bit 2 `cachedContent`, bit 3 no thought signatures.
    pub fn gemini(&self) -> Value {
        let client = GeminiClient::of(self.flag(3));
        let shape = self.flag(4);
        let (call_key, response_key) = match shape & 2 {
            0 => ("functionCall", "functionResponse"),
            _ => ("function_call", "function_response"),
        };
        let mut contents: Vec<Value> = Vec::new();
        let mut n = 0;
        for step in &self.steps {
            match step {
                Step::User(t) => contents.push(json!({"role": "user", "parts": [{"text": t}]})),
                Step::Assistant(t) => {
                    contents.push(json!({"role": "model", "parts": [{"text": t}]}))
                }
                Step::Tools(calls) => {
                    let ids = next_ids(&mut n, calls.len());
                    let mut parts = Vec::new();
                    for (k, (c, id)) in calls.iter().zip(&ids).enumerate() {
                        let mut call = json!({"name": c.name, "args": c.args});
                        if client == GeminiClient::WithIds {
                            call["id"] = id.as_str().into();
                        }
                        let mut part = json!({call_key: call});
                        if k == 0 && shape & 8 == 0 {
                            part["thoughtSignature"] = "CiQBcsjafD8=".into();
                        }
                        parts.push(part);
                    }
                    contents.push(json!({"role": "model", "parts": parts}));
                    let mut answers = Vec::new();
                    for (c, id) in calls.iter().zip(&ids) {
                        let text = &c.result;
                        let response = match client {
                            GeminiClient::Cli => json!({"output": untrusted(text)}),
                            GeminiClient::PythonMcp => {
                                json!({"result": {"content": [{"type": "text", "text": text}], "isError": false}})
                            }
                            GeminiClient::WithIds => json!({"output": text}),
                            GeminiClient::GenaiMcp => {
                                json!({"content": [{"type": "text", "text": text}]})
                            }
                        };
                        let mut answer = json!({"name": c.name, "response": response});
                        match client {
                            GeminiClient::Cli => {
                                answer["id"] = format!("{}-1764550000-{id}", c.name).into()
                            }
                            GeminiClient::WithIds => answer["id"] = id.as_str().into(),
                            _ => {}
                        }
                        answers.push(json!({response_key: answer}));
                    }
                    contents.push(json!({"role": "user", "parts": answers}));
                }
            }
        }
        let mut body = json!({"contents": contents, "generationConfig": {"temperature": 0}});
        if !self.system.is_empty() {
            let parts: Vec<Value> = self.system.iter().map(|s| json!({"text": s})).collect();
            body["systemInstruction"] = json!({"parts": parts});
        }
        if shape & 4 != 0 {
            body["cachedContent"] = "cachedContents/abc".into();
        }
        if shape & 1 != 0 {
            body = json!({"model": "gemini-2.5-pro", "project": "p-1", "user_prompt_id": "u-1", "request": body});
        }
        body
    }
}

/// How a Gemini client writes calls and results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeminiClient {
    /// Gemini CLI: calls without ids, answered with ids of its own and `{"output": text}`,
    /// the text inside `<untrusted_context>` tags.
    Cli,
    /// `google-genai` (Python) calling MCP tools: no ids, `{"result": CallToolResult}`.
    PythonMcp,
    /// Calls and responses with the same `id`, `{"output": text}`.
    WithIds,
    /// The `@google/genai` MCP adapter: no ids, the `CallToolResult` itself.
    GenaiMcp,
}

impl GeminiClient {
    fn of(flag: u8) -> GeminiClient {
        match flag % 4 {
            0 => GeminiClient::Cli,
            1 => GeminiClient::PythonMcp,
            2 => GeminiClient::WithIds,
            _ => GeminiClient::GenaiMcp,
        }
    }
}

/// MCP text as Gemini CLI hands it to the model (its `wrapUntrusted`).
pub fn untrusted(text: &str) -> String {
    let escaped = text.replace("</untrusted_context>", "&lt;/untrusted_context&gt;");
    format!("<untrusted_context>\n{escaped}\n</untrusted_context>")
}

/// The IDs of the next `count` calls after the `n`th (`call_<n>`, from 1), counting on.
fn next_ids(n: &mut usize, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            *n += 1;
            format!("call_{n}")
        })
        .collect()
}
