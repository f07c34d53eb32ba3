//! staleguard: before every model call, only the newest browser observation is real.
//!
//! LLM agents that drive a browser receive page snapshots as tool results. Every old
//! snapshot stays in the conversation and its refs look live. This crate projects a model
//! request so that every browser observation but the newest is collapsed to a small
//! receipt, without touching the stored transcript, IDs, or call/result pairing.
//!
//! ```
//! use serde_json::json;
//! use staleguard::{project, Config, Memo, Options, RequestFormat};
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
//! // An explicit call projects: `browser_history_compaction` (off by default, SPEC 7) is for
//! // hosts such as the proxy, which read it before they call.
//! let config = Config::default();
//! // A host that sees the same history on every turn keeps one memo for all its requests.
//! let memo = Memo::default();
//! let options = Options { memo: Some(&memo), ..Options::default() };
//! let projection = project(&body, RequestFormat::Auto, &config, options).unwrap();
//! assert_eq!(projection.collapsed(), 1);
//! assert!(!projection.body.contains("Buy"));                 // the old page is a receipt now
//! assert!(projection.body.contains("[staleguard receipt]"));
//! assert!(projection.body.contains(r#"\"Home\" [ref=e1]"#));  // the newest page is live
//! ```
//!
//! # The API
//!
//! [`project`] reads a request body in any [`RequestFormat`], projects it under a
//! [`Config`] and returns a [`Projection`]: the [`Body`] to send (read as a `str`, or sent
//! as the [`BodyChunk`]s a resumed request shares with the memo), a [`ResultReport`] per
//! browser result (its [`Status`], URL, title, bytes, refs withheld), what the evidence
//! track kept ([`EvidenceReport`]), page fingerprints and no-progress counts, and, when
//! [`Options`] ask for them, the guard's [`Verdict`] on every browser call.
//! [`project_request`] and [`project_request_with`] are the short forms without options. A
//! body that cannot be read is an [`Error`], never a panic.
//!
//! The answer depends on the body, the config and the evidence items named alone: a
//! [`Memo`] only saves work, so a host may keep one across requests (and any number of
//! copies of a host may run side by side) without answering differently. With one,
//! [`project_resumed`] answers only the next turn of a session the memo has seen (about a
//! millisecond for a megabyte, from the checkpoint the earlier turn left), with what
//! [`project`] would: a server can run it where the request arrived and give only the rest
//! a thread of its own, as the proxy does. [`project_resumed_parts`] takes the body as the
//! frames it arrived in, and copies and reads as text only the bytes after the checkpoint.
//!
//! # The pipeline, and the modules for hosts
//!
//! ```text
//! body --adapter--> Transcript --Session::build--> Session (one Reading per result text)
//!      --projection, progress, evidence, guard--> edits --adapter--> body
//! ```
//!
//! The modules stay public for the hosts that drive the stages themselves (the MCP guard,
//! the CLI, the proxy) and for tests; each says who it is for. [`adapter`] reads and writes
//! the wire formats into a [`transcript`]; [`session`] reads every browser result once
//! ([`Session`], [`Reading`], cached by [`memo`]); [`observation`] holds the format
//! detectors and the aria grammar, [`refs`] the ref grammar; [`projection`], [`progress`],
//! [`evidence`] and [`guard`] are the analyses, [`receipt`], [`appendix`] and [`archive`]
//! what they write; [`tools`] says which calls are browser calls; [`config`] loads the
//! settings.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod adapter;
pub mod appendix;
pub mod archive;
mod body;
mod checkpoint;
pub mod config;
mod error;
pub mod evidence;
mod failure;
mod fingerprint;
pub mod guard;
pub mod memo;
pub mod observation;
mod page_refs;
mod pipeline;
pub mod progress;
pub mod projection;
pub mod receipt;
pub mod refs;
pub mod session;
mod texts;
pub mod tools;
pub mod transcript;
mod urlnorm;
mod written;

// The main API: everything a caller that projects needs.
// Project a request body, and read what happened to it:
pub use pipeline::{
    project, project_request, project_request_with, project_resumed, project_resumed_parts,
    CallVerdict, Options, Projected, Projection,
};
// What it reads, and why a body or a config cannot be read:
pub use adapter::{Breakpoint, RequestFormat};
pub use body::{Body, BodyChunk};
pub use config::Config;
pub use error::{ConfigError, Error};
// What a projection reports: per result, evidence, page fingerprints, the guard's verdicts:
pub use evidence::{EvidenceItem, EvidenceReport};
pub use fingerprint::Fingerprint;
pub use guard::{Refusal, Verdict};
pub use projection::{Plan, ResultReport, Status};
// For hosts that keep readings across requests or drive a session step by step:
pub use memo::Memo;
pub use session::{Reading, Session};
