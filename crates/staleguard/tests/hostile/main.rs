//! Hostile pages (issue 31): sessions recorded through the real servers (Playwright MCP
//! 0.0.41 and 0.0.83, Chrome DevTools MCP 1.11.0) over `tests/site/hostile`, pages
//! built to break a projection: text that imitates our receipts, notices, evidence blocks,
//! fold markers and tool calls; refs in text and in accessible names; zero-width and bidi
//! characters; every escape the snapshot writers use, lone surrogates included; a 1 MB line;
//! the deepest tree each server returns; 100,000 siblings; a tree that crashes the page.
//!
//! Every recording is projected in every wire format the property tests use (the recorded
//! OpenAI Chat and Anthropic bodies, Responses and Gemini bodies built from them as the
//! format suite builds them) under every config they use (whole and lean live page,
//! evidence and progress off, a request budget, the guard in front; the big sessions take
//! the whole and lean page in the built formats), and cut after each browser result. SPEC 2
//! holds, no line a reader takes as ours comes from a page, the guard reads refs only where
//! the format puts them and lets every call the server ran through, the archive lists and
//! reads back every page, and nothing panics. Two regressions found on these pages have a
//! module of their own: a lone surrogate that hid a page, and a description rule that an
//! unnamed element on an older page switched off.
//!
//! The recordings are gzip files (`fixtures/hostile/README.md`): the big sessions are 5 to
//! 12 MB a body and compress tenfold to a hundredfold, and the golden digests, which walk
//! every plain `*.openai.json` of `fixtures/` and read bodies with serde_json (which refuses
//! a lone surrogate), keep to the sessions they were taken on.

#[path = "../support/mod.rs"]
mod support;

mod harness;

mod archive;
mod invariants;
mod refs;
mod regressions;
