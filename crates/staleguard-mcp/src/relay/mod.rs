//! The relay: one MCP session between a client and a browser server, as a state machine
//! over newline-delimited JSON-RPC messages. It does no I/O, so every decision can be
//! tested without a process; [`crate::run()`] feeds it lines and writes what it returns.
//!
//! One file per concern, each adding the methods of its concern to [`Relay`]:
//! - `client.rs`: lines from the client, and what each is (requests, notifications, batches);
//! - `guard.rs`: a browser call against the newest page: forwarded, held, or refused;
//! - `server.rs`: lines from the server, and which request each answers;
//! - `rewrite.rs`: what the client sees of a result (scoped refs, guidance, the history tool);
//! - `documents.rs`: the documents the model has seen, and the scoped refs that name them;
//! - `ledger.rs`: the requests in flight (forwarded, cancelled, own ones given up on);
//! - `hold.rs` and `gone.rs`: the two states besides relaying (`Phase`): a call held for
//!   the relay's own snapshot, and the server gone;
//! - `contain.rs`: a bug of the relay's own (a panic) never ends the session;
//! - `wire.rs`: the messages the relay writes itself, as lines.
//!
//! What the model reads of the relay's own is in `texts.rs` of the crate.

mod client;
mod contain;
mod documents;
mod gone;
mod guard;
mod hold;
mod ledger;
mod rewrite;
mod server;
mod wire;

use std::collections::VecDeque;

use serde_json::Value;

use staleguard::{Archive, Config, Engine, Memo, Tracker};

use crate::McpConfig;
use documents::Documents;
use gone::Gone;
use hold::Held;
use ledger::Ledger;

pub use rewrite::result_text;

/// The MCP guard's memo bound: one session's results are few and each arrives once, so a
/// small memo serves the repeated snapshots of a stalled page.
pub const DEFAULT_MEMO_BYTES: usize = 32 * 1024 * 1024;

/// How the relay behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Refuse stale refs and repeated submissions, namespace refs, append guidance.
    pub guard: bool,
    /// Rewrite refs to document-scoped forms (with the guard only).
    pub namespace_refs: bool,
    /// Offer `browser_history`.
    pub history_tool: bool,
    /// Observations kept for the guard and the history tool.
    pub max_observations: usize,
    /// How long a held call waits for the relay's own snapshot before it is refused.
    pub snapshot_timeout: std::time::Duration,
    /// Bound of the memo of result readings, in bytes of derived data.
    pub memo_bytes: usize,
    pub config: Config,
}

impl Options {
    /// The defaults of `staleguard mcp` with the core `config` and the `[mcp]` table
    /// (`McpConfig::default()` for none).
    pub fn new(config: Config, mcp: &McpConfig) -> Self {
        Options {
            guard: mcp.guard.unwrap_or(true),
            namespace_refs: mcp.namespace_refs.unwrap_or(true),
            history_tool: mcp.history_tool.unwrap_or(true),
            max_observations: mcp.max_observations.unwrap_or(200).max(1),
            snapshot_timeout: std::time::Duration::from_secs(
                mcp.snapshot_timeout_secs.unwrap_or(30),
            ),
            memo_bytes: mcp.memo_bytes.unwrap_or(DEFAULT_MEMO_BYTES),
            config,
        }
    }
}

/// A line to write, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    ToServer(Vec<u8>),
    ToClient(Vec<u8>),
}

/// One MCP session.
pub struct Relay {
    options: Options,
    /// The core config, compiled: which calls are browser calls, and the guard.
    engine: Engine,
    /// The core tracker of pages, progress and submissions.
    tracker: Tracker,
    /// Readings of results seen before in this session (a repeated snapshot is read once).
    memo: Memo,
    /// Index of the next call or result, as the core's session counts them.
    step: usize,
    /// Requests in flight, and own requests given up on.
    ledger: Ledger,
    /// Relaying, holding a call, or the server gone.
    phase: Phase,
    /// Client lines that arrived while a call was held, in order.
    queue: VecDeque<Vec<u8>>,
    documents: Documents,
    archive: Archive,
    /// Browser results so far (the session's own list is bounded).
    browser_results: usize,
    /// The server offers its own `browser_history`: the relay then leaves that name alone.
    server_has_history: bool,
    log: Log,
    /// The key of the answer being read from the server, for the error that replaces it
    /// should reading it fail.
    answering: Option<String>,
    /// The client's id of the held call while the answer being read is the relay's own
    /// snapshot for it: reading it takes the call out of the phase before deciding it.
    answering_held: Option<Value>,
}

/// Where the relay stands with the server. Each state besides relaying is a type of its own
/// that holds only what that state needs, as rustls's connection states do: a held call
/// exists only while the relay holds one, and how the server ended only once it has.
enum Phase {
    /// Every line is taken as it comes.
    Relaying,
    /// A browser call is held until the server answers the relay's own snapshot.
    Holding(Held),
    /// The server is gone: every request is answered with an error.
    Gone(Gone),
}

impl Phase {
    /// The call held, if any.
    fn held(&self) -> Option<&Held> {
        match self {
            Phase::Holding(held) => Some(held),
            Phase::Relaying | Phase::Gone(_) => None,
        }
    }

    /// Ends holding the call, if one is held and `which` says so: the relay relays again.
    fn take_held_if(&mut self, which: impl FnOnce(&Held) -> bool) -> Option<Held> {
        match std::mem::replace(self, Phase::Relaying) {
            Phase::Holding(held) if which(&held) => Some(held),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Ends holding the call, if one is held.
    fn take_held(&mut self) -> Option<Held> {
        self.take_held_if(|_| true)
    }

    /// How the server ended, once it has.
    fn gone(&self) -> Option<&Gone> {
        match self {
            Phase::Gone(gone) => Some(gone),
            Phase::Relaying | Phase::Holding(_) => None,
        }
    }
}

/// What the relay tells the operator, on standard error: never page text or arguments.
#[derive(Default)]
struct Log {
    /// What the relay did, one line each.
    notes: Vec<String>,
    /// Lines from the server that were no JSON-RPC message, described, for a rate-limited log.
    dropped: Vec<String>,
}

impl Relay {
    pub fn new(options: Options) -> Self {
        Relay {
            engine: Engine::new(options.config.clone()),
            tracker: Tracker::new(options.config.max_repeats),
            memo: Memo::new(options.memo_bytes),
            archive: Archive::new(options.max_observations),
            browser_results: 0,
            options,
            step: 0,
            ledger: Ledger::default(),
            phase: Phase::Relaying,
            queue: VecDeque::new(),
            documents: Documents::default(),
            server_has_history: false,
            log: Log::default(),
            answering: None,
            answering_held: None,
        }
    }

    /// The core tracker of this session's pages, progress and submissions, for tests and
    /// reports.
    pub fn session(&self) -> &Tracker {
        &self.tracker
    }

    /// What the relay did since the last call (refusals, its own snapshots, guidance), one
    /// line each, for standard error.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log.notes)
    }

    fn note(&mut self, line: String) {
        self.log.notes.push(line);
    }
}
