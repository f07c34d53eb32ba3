//! staleguard: before every model call, only the newest browser observation is real.
//!
//! LLM agents that drive a browser receive page snapshots as tool results. Every old
//! snapshot stays in the conversation and its refs look live. This crate projects a model
//! request so that every browser observation but the newest is collapsed to a small
//! receipt, without touching the stored transcript, IDs, or call/result pairing.
//!
//! ```
//! use serde_json::json;
//! use staleguard::{project_request, Config, RequestFormat};
//!
//! let page = |url: &str, button: &str| format!(
//!     "### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"{button}\" [ref=e1]\n```"
//! );
//! let call = |id: &str, name: &str| json!({"role": "assistant", "content": null, "tool_calls": [
//!     {"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]});
//! let body = json!({"model": "gpt-4.1", "messages": [
//!     {"role": "user", "content": "Order a widget"},
//!     call("call_1", "browser_navigate"),
//!     {"role": "tool", "tool_call_id": "call_1", "content": page("http://shop.test/", "Buy")},
//!     call("call_2", "browser_click"),
//!     {"role": "tool", "tool_call_id": "call_2", "content": page("http://shop.test/done", "Home")},
//! ]}).to_string();
//!
//! // Compaction is opt-in (SPEC 7): the `project` command and this example turn it on.
//! let config = Config { browser_history_compaction: true, ..Config::default() };
//! let projected = project_request(&body, RequestFormat::Auto, &config).unwrap();
//! assert_eq!(projected.report.collapsed(), 1);
//! assert!(!projected.body.contains("Buy"));                 // the old page is a receipt now
//! assert!(projected.body.contains("[staleguard receipt]"));
//! assert!(projected.body.contains(r#"\"Home\" [ref=e1]"#));  // the newest page is live
//! //! ```

pub mod adapter;
pub mod appendix;
pub mod archive;
pub mod config;
mod error;
pub mod evidence;
pub mod failure;
pub mod fingerprint;
pub mod guard;
pub mod memo;
pub mod observation;
pub mod pipeline;
pub mod progress;
pub mod projection;
pub mod receipt;
pub mod refs;
pub mod session;
pub mod texts;
pub mod tools;
pub mod transcript;
pub mod urlnorm;

pub use adapter::RequestFormat;
pub use memo::Memo;
pub use pipeline::{
    project, project_request, project_request_with, CallVerdict, Options, Projected, Projection,
};
pub use config::{Config, McpConfig, ProxyConfig};
pub use error::{ConfigError, Error};
pub use evidence::{EvidenceItem, EvidenceReport};
pub use observation::{Observation, ObservationFormat, TreeKind};
pub use projection::{Plan, ResultReport, Status};
pub use transcript::{Item, ToolResult, Transcript};
