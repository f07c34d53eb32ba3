//! `staleguard replay`: the prompt-cache measure of SPEC 9, checked against the reference
//! implementation `tools/cachecost.py` (run with python3 at test time), the
//! `newest-only` strategy, Anthropic's breakpoint rules, where facts are checked, and Gemini
//! bodies replayed as their OpenAI twins.

#[path = "../common/mod.rs"]
mod common;
mod harness;

mod breakpoints;
mod cost_targets;
mod docsets;
mod facts;
mod follower;
mod output;
mod recordings;
mod reference;
mod strategies;
