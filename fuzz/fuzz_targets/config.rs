//! `Config::load` on any TOML text and environment: the text, then after a `\0` one
//! `NAME=value` line per variable. Also the MCP guard's `[mcp]` table from the same text.
//!
//! Asserts: never a panic; a file that is TOML and is refused is refused naming the key
//! (`key: ...`, `key = ...` or `unknown key `key``); a file that is no TOML is refused with
//! its line; an environment error names a variable that was set, with its value; what
//! loads projects a small session (every track, the guard's verdicts) to JSON.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use staleguard::{Config, ConfigError, Engine, Options, RequestFormat};
use staleguard_fuzz::check::is_json;

fuzz_target!(|text: &str| {
    let (file, env_text) = text.split_once('\0').unwrap_or((text, ""));
    let env: HashMap<&str, &str> = env_text.lines().filter_map(|l| l.split_once('=')).collect();
    let lookup = |name: &str| env.get(name).map(|v| v.to_string());
    let _ = staleguard_mcp::McpConfig::from_toml(file);
    let loaded = Config::load(Some(file), lookup);
    let config = match loaded {
        Ok(config) => config,
        Err(ConfigError::File(message)) => {
            match file.parse::<toml::Table>() {
                Ok(table) => assert!(
                    table.keys().any(|k| {
                        message.starts_with(&format!("{k}:"))
                            || message.starts_with(&format!("{k} ="))
                            || message.starts_with(&format!("unknown key `{k}`"))
                    }),
                    "a refused key goes unnamed: {message:?}"
                ),
                Err(_) => assert!(
                    message.starts_with("line "),
                    "a syntax error says nothing: {message:?}"
                ),
            }
            return;
        }
        Err(ConfigError::Env { name, value, .. }) => {
            assert_eq!(env.get(name.as_str()), Some(&value.as_str()), "{name}");
            return;
        }
    };
    if let Some(n) = env
        .get("STALEGUARD_MAX_REPEATS")
        .and_then(|v| v.trim().parse::<u32>().ok())
    {
        assert_eq!(config.max_repeats, n, "the environment wins");
    }
    let _ = staleguard_mcp::Options::new(config.clone(), &Default::default());
    let engine = Engine::new(config);
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    for format in [RequestFormat::OpenAiChat, RequestFormat::Auto] {
        let p = engine
            .project(&session(), format, options)
            .expect("the session projects under any config");
        assert!(is_json(&p.body), "projected to invalid JSON");
    }
});

/// Three Playwright MCP pages, a click between them, a read-back of a snapshot file.
fn session() -> String {
    let page = |n: u32, button: &str| {
        format!("### Page\n- Page URL: http://shop.test/{n}\n- Page Title: Shop {n}\n### Snapshot\n```yaml\n- generic [ref=e1]:\n  - heading \"Order a widget\" [level=1] [ref=e2]\n  - paragraph [ref=e3]: Unit prices: Red $19.99, Blue $24.50\n  - button \"{button}\" [ref=e{n}5]\n```")
    };
    let call = |id: &str, name: &str, args: &str| {
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
    };
    let result = |id: &str, text: String| serde_json::json!({"role": "tool", "tool_call_id": id, "content": text});
    serde_json::json!({"model": "gpt-4.1", "messages": [
        {"role": "user", "content": "Order a red widget and tell me the unit price"},
        call("c1", "browser_navigate", r#"{"url":"http://shop.test/1"}"#),
        result("c1", page(1, "Review order")),
        call("c2", "browser_click", r#"{"element":"Review order button","ref":"e15"}"#),
        result("c2", page(2, "Place order")),
        call("c3", "Read", r#"{"file_path":".playwright-mcp/page-2026-11-30T08-09-13-405Z.yml"}"#),
        result("c3", "     1→- generic [ref=e1]:\n     2→  - button \"Place order\" [ref=e25]".to_string()),
        call("c4", "browser_click", r#"{"element":"Place order","ref":"e25"}"#),
        result("c4", page(3, "Done")),
    ]})
    .to_string()
}
