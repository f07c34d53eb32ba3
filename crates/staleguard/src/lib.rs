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
//! track kept ([`EvidenceReport`]), page fingerprints and no-progress counts ([`Progress`]),
//! and, when [`Options`] ask for them, the guard's [`Verdict`] on every browser call. A body
//! that cannot be read is an [`Error`], never a panic. A host that projects many requests
//! under one config keeps an [`Engine`], which also answers the guard's question about one
//! proposed call ([`Engine::check_call`]).
//!
//! The answer depends on the body, the config and the evidence items named alone: a
//! [`Memo`] only saves work, so a host may keep one across requests (and any number of
//! copies of a host may run side by side) without answering differently. With one, the
//! next turn of a session the memo has seen resumes from the checkpoint the earlier turn
//! left (about a millisecond for a megabyte). [`project_resumed_parts`] takes such a body as
//! the frames it arrived in, and copies and reads as text only the bytes after the
//! checkpoint: a server can run it where the request arrived and give only the rest a
//! thread of its own, as the proxy does.
//!
//! A host that stands between the model and the browser follows the session call by call
//! instead: a [`Tracker`] takes each call and each result (read once as a [`ResultText`]),
//! [`Engine::check_tracked`] is the guard's verdict on the next call, and an [`Archive`]
//! keeps the observations the MCP guard's `browser_history` reads back. A host that looks
//! at a body's tool results without projecting it reads a [`Request`].
//!
//! The tests and fuzz targets reach a few functions beyond this through [`internal`], which
//! is not part of the stable interface. ARCHITECTURE.md says how the crate is built.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(unreachable_pub)]

mod adapter;
mod appendix;
mod archive;
mod body;
mod call_args;
mod config;
mod description;
mod error;
mod evidence;
mod failure;
mod fingerprint;
mod guard;
mod json;
mod lean;
mod memo;
mod observation;
mod page_refs;
mod pipeline;
mod progress;
mod projection;
mod reading;
mod receipt;
mod refs;
mod result_lines;
mod session;
mod texts;
mod tools;
mod transcript;
mod urlnorm;
mod waiting;

pub mod internal;

// Project a request body, and read what happened to it:
pub use pipeline::{project, project_resumed_parts, CallVerdict, Engine, Options, Projection};
// What it reads, and why a body or a config cannot be read:
pub use adapter::{Breakpoint, RequestFormat};
pub use body::{Body, BodyChunk};
pub use config::{Config, LivePage};
pub use error::{ConfigError, Error};
// What a projection reports: per result, evidence, progress, the guard's verdicts:
pub use evidence::{DropReason, EvidenceItem, EvidenceReport, Quote};
pub use fingerprint::Fingerprint;
pub use guard::{Refusal, Verdict};
pub use progress::{Progress, RepeatedSubmission, Step as ProgressStep};
pub use projection::{Folded, Plan, ResultReport, Status};
pub use transcript::Edit;
// Kept across requests by a host:
pub use memo::Memo;
// For hosts that follow a browser session call by call (the MCP guard): the session, each
// result read once, the archive `browser_history` reads, refs scoped to their document:
pub use archive::{Archive, ReadBack};
pub use progress::{Seen as SeenObservation, Tracker};
pub use reading::ResultText;
pub use refs::{rescope, split_scoped, REF_KEYS, REF_LISTS};
pub use tools::HISTORY_TOOL;
// For hosts that read a body's tool results themselves (the CLI's `archive` and `replay`):
pub use observation::aria::CONTROL_ROLES;
pub use pipeline::Request;
// The texts staleguard writes into a request, for hosts and tests that recognise them:
pub use texts::{
    ARCHIVE_TAG, EVIDENCE_HEADER, GUIDANCE_HEADER, LEAN_FOLD_TAG, RECEIPT_TAG, STALE_NOTICE,
    STALE_NOTICE_HISTORY, STALE_WORD,
};
