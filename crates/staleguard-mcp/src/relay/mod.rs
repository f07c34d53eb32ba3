//! The relay: one MCP session between a client and a browser server, as a state machine
//! over newline-delimited JSON-RPC messages. It does no I/O, so every decision can be
//! tested without a process; [`crate::run`] feeds it lines and writes what it returns.

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

use std::collections::{HashMap, VecDeque};

use staleguard::internal::archive::Archive;
use staleguard::internal::progress::Tracker;
use staleguard::internal::tools::BrowserTools;
use staleguard::{Config, Memo};

use crate::McpConfig;
use documents::Documents;
use hold::Parked;
use ledger::InFlight;

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
    tools: BrowserTools,
    session: Tracker,
    /// Readings of results seen before in this session (a repeated snapshot is read once).
    memo: Memo,
    /// Index of the next call or result, as the core's session counts them.
    step: usize,
    /// Client requests forwarded to the server, by id, until it answers them.
    pending: HashMap<String, InFlight>,
    /// Client requests taken in so far (the next one's `seq`).
    requests: u64,
    /// Ids of cancelled browser calls, oldest first (bounds what `pending` keeps of them).
    cancelled: VecDeque<String>,
    parked: Option<Parked>,
    /// Client lines that arrived while a call was parked, in order.
    queue: VecDeque<Vec<u8>>,
    own_requests: u64,
    documents: Documents,
    archive: Archive,
    /// Browser results so far (the session's own list is bounded).
    browser_results: usize,
    /// The server offers its own `browser_history`: the relay then leaves that name alone.
    server_has_history: bool,
    /// What the relay did, for the operator's log; never page text or arguments.
    notes: Vec<String>,
    /// Ids of own snapshots given up on, oldest first: their late answers are dropped.
    abandoned: VecDeque<String>,
    /// Lines from the server that were no JSON-RPC message, described, for a rate-limited log.
    dropped: Vec<String>,
    /// How the server ended, once it has: every request is then answered with an error.
    gone: Option<String>,
    /// The key of the answer being read from the server, for the error that replaces it
    /// should reading it fail.
    answering: Option<String>,
}

impl Relay {
    pub fn new(options: Options) -> Self {
        Relay {
            tools: BrowserTools::new(&options.config.browser_tools),
            session: Tracker::new(options.config.max_repeats),
            memo: Memo::new(options.memo_bytes),
            archive: Archive::new(options.max_observations),
            browser_results: 0,
            options,
            step: 0,
            pending: HashMap::new(),
            requests: 0,
            cancelled: VecDeque::new(),
            parked: None,
            queue: VecDeque::new(),
            own_requests: 0,
            documents: Documents::default(),
            server_has_history: false,
            notes: Vec::new(),
            abandoned: VecDeque::new(),
            dropped: Vec::new(),
            gone: None,
            answering: None,
        }
    }

    /// The core tracker of pages, progress and submissions, for tests and reports.
    pub fn session(&self) -> &Tracker {
        &self.session
    }

    /// What the relay did since the last call (refusals, its own snapshots, guidance), one
    /// line each, for standard error.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn note(&mut self, line: String) {
        self.notes.push(line);
    }
}
