//! `staleguard proxy` end to end, with real clients: the official `openai`, `anthropic` and
//! `google-genai` Python SDKs (`tests/proxy/clients.py`) talk to the proxy, and a scripted
//! model (`tests/proxy/upstream.py`) stands in for the provider and records what it received.
//!
//! Needs `python3` with `pip install openai anthropic google-genai zstandard prometheus_client`.
//! Without them every test fails with a message saying so: these tests never skip.
//!
//! Every test has its own scripted model and its own proxy on their own ports. What the SDK
//! sends is learned by sending the same call straight to the scripted model first; the proxy
//! must then forward exactly `staleguard project` of those bytes.

#[path = "../common/mod.rs"]
mod common;
mod harness;

mod bad_input;
mod config;
mod log_and_metrics;
mod sdks;
mod streams;
mod turns;
mod upstream_failures;
