//! `staleguard mcp`: a guard in front of a browser MCP server.
//!
//! The relay sits between an MCP client and a browser server such as Playwright MCP, speaking
//! newline-delimited JSON-RPC on both sides. It passes through every message it does not act
//! on, keeps the session's observations, and refuses a browser call that names a ref from an
//! older page, or repeats a submission on an unchanged page, before it reaches the browser.
//!
//! ```
//! use staleguard_mcp::{McpConfig, Options, Output, Relay};
//!
//! let mut relay = Relay::new(Options::new(staleguard::Config::default(), &McpConfig::default()));
//! let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url":"http://shop.test/"}}}"#;
//! assert_eq!(relay.from_client(call), vec![Output::ToServer(call.to_vec())]);
//! let page = "### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```";
//! let result = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": page}]}});
//! let out = relay.from_server(result.to_string().as_bytes());
//! // Refs reach the client scoped to the document they belong to.
//! let Output::ToClient(line) = &out[0] else { panic!() };
//! assert!(String::from_utf8_lossy(line).contains("[ref=d1e1]"));
//! ```

mod config;
pub mod history;
mod jsonrpc;
pub mod relay;
mod run;
pub mod scope;
mod texts;

pub use config::McpConfig;
pub use history::HISTORY_TOOL;
pub use relay::{Options, Output, Relay};
pub use run::run;
