//! staleguard: before every model call, only the newest browser observation is real.
//!
//! LLM agents that drive a browser receive page snapshots as tool results. Every old
//! snapshot stays in the conversation and its refs look live. This crate projects a model
//! request so that every browser observation but the newest is collapsed to a small
//! receipt, without touching the stored transcript, IDs, or call/result pairing.
//!
//! ```
//! use staleguard::{project_request, Config, RequestFormat};
//!
//! let body = r#"{"model":"gpt-4.1","messages":[
//!   {"role":"user","content":"Order a widget"},
//!   {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
//!     "function":{"name":"browser_navigate","arguments":"{\"url\":\"http://shop.test/\"}"}}]},
//!   {"role":"tool","tool_call_id":"call_1","content":"### Page\n- Page URL: http://shop.test/\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```"},
//!   {"role":"assistant","content":null,"tool_calls":[{"id":"call_2","type":"function",
//!     "function":{"name":"browser_click","arguments":"{\"ref\":\"e1\"}"}}]},
//!   {"role":"tool","tool_call_id":"call_2","content":"### Page\n- Page URL: http://shop.test/done\n- Page Title: Done\n### Snapshot\n```yaml\n- link \"Home\" [ref=e1]\n```"}
//! ]}"#;
//!
//! let mut config = Config::default();
//! config.browser_history_compaction = true;
//! let projected = project_request(body, RequestFormat::Auto, &config).unwrap();
//! assert_eq!(projected.report.collapsed(), 1);
//! assert!(!projected.body.contains("\\\"Buy\\\" [ref=e1]"));
//! assert!(projected.body.contains("\\\"Home\\\" [ref=e1]"));
//! ```

pub mod adapter;
pub mod config;
mod error;
pub mod failure;
pub mod neutralise;
pub mod observation;
pub mod projection;
pub mod receipt;
pub mod tools;
pub mod transcript;

pub use adapter::{project_request, Projected, RequestFormat};
pub use config::Config;
pub use error::{ConfigError, Error};
pub use observation::{Observation, ObservationFormat, TreeKind};
pub use projection::{Plan, ResultReport, Status};
pub use transcript::{Item, ToolResult, Transcript};
