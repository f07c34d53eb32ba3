//! The relay: one MCP session between a client and a browser server, as a state machine
//! over newline-delimited JSON-RPC messages. It does no I/O, so every decision can be
//! tested without a process; [`crate::run`] feeds it lines and writes what it returns.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use staleguard::internal::archive::Archive;
use staleguard::internal::guard;
use staleguard::internal::progress::{self, Tracker};
use staleguard::internal::session::{Depth, Piece, Reader, Reading};
use staleguard::internal::tools::{self, BrowserTools};
use staleguard::{Config, Memo};
use staleguard::{Refusal, Verdict};

use crate::history::HISTORY_TOOL;
use crate::jsonrpc::{self, Message};
use crate::scope;
use crate::McpConfig;

/// The MCP guard's memo bound: one session's results are few and each arrives once, so a
/// small memo serves the repeated snapshots of a stalled page.
pub const DEFAULT_MEMO_BYTES: usize = 32 * 1024 * 1024;

/// The prefix of the ids of the relay's own requests to the server.
const OWN_ID_PREFIX: &str = "staleguard-fresh-snapshot-";

/// Lines from the server of this many bytes and more are read for what they are before they
/// are read whole (if at all): a large result passed through is then held once.
const HEAD_FIRST_BYTES: usize = 4 << 20;

/// Own requests given up on (timed out, or their call cancelled) whose late answers are
/// still dropped; older ones are forgotten.
const ABANDONED_KEPT: usize = 256;

/// Cancelled browser calls still waited for (their results are read if they come); older
/// ones are forgotten.
const CANCELLED_KEPT: usize = 256;

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

/// What the relay does with the answer to a client request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Passes it through.
    Other,
    /// Adds `browser_history` to the tools.
    ToolsList,
    /// Reads the result: the page, its refs, progress.
    BrowserCall,
    /// Reads the result of a look (`browser_find`): the page and its refs, no progress step.
    Look,
}

/// A client request forwarded to the server and not answered yet.
struct InFlight {
    /// The id as the client wrote it, to answer it when the server cannot.
    id: Value,
    kind: Pending,
    /// When the client sent it, among its requests: they are answered in this order when the
    /// server is gone.
    seq: u64,
    /// The client cancelled it: it expects no answer.
    cancelled: bool,
}

/// A browser call held back until the relay's own fresh snapshot is answered.
struct Parked {
    own_id: String,
    seq: u64,
    /// The page the relay's own snapshot is of, where the server names pages.
    page_id: Option<String>,
    id: Value,
    message: Value,
}

/// Documents the model has seen, numbered in order; a new number starts whenever the page
/// (tab, URL, document) differs from the one before.
#[derive(Default)]
struct Documents {
    number: u32,
    key: Option<String>,
    /// `(number, url, observation id)` of recent documents.
    seen: VecDeque<(u32, String, String)>,
}

impl Documents {
    fn enter(&mut self, key: String, url: &str, observation: &str, keep: usize) -> u32 {
        if self.key.as_ref() != Some(&key) {
            self.number += 1;
            self.key = Some(key);
            self.seen
                .push_back((self.number, url.to_string(), observation.to_string()));
            while self.seen.len() > keep {
                self.seen.pop_front();
            }
        } else if let Some(last) = self.seen.back_mut() {
            last.2 = observation.to_string();
        }
        self.number
    }

    fn describe(&self, number: u32) -> Option<String> {
        let (_, url, id) = self.seen.iter().find(|d| d.0 == number)?;
        Some(format!("document {number}, observation {id} at {url}"))
    }
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

    /// Takes one line from the client.
    ///
    /// A line that is not JSON gets a parse error (-32700), one that is not a valid JSON-RPC
    /// request an invalid-request error (-32600) with its id where it has a readable one, a
    /// batch one error per request in it; none of them reaches the server. A notification is
    /// never answered.
    ///
    /// A panic of the relay's own (a bug) never ends the session: the request is answered
    /// with an internal error (-32603) and not forwarded.
    pub fn from_client(&mut self, line: &[u8]) -> Vec<Output> {
        self.contained(
            |relay| relay.client_line(line),
            |relay| relay.internal_error(line),
        )
    }

    /// `work`, or `fallback` when `work` panics (a bug of the relay's): the session goes on.
    fn contained(
        &mut self,
        work: impl FnOnce(&mut Self) -> Vec<Output>,
        fallback: impl FnOnce(&mut Self) -> Vec<Output>,
    ) -> Vec<Output> {
        match panic::catch_unwind(AssertUnwindSafe(|| work(self))) {
            Ok(out) => out,
            Err(_) => fallback(self),
        }
    }

    fn client_line(&mut self, line: &[u8]) -> Vec<Output> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        if self.parked.is_some() {
            if let Some(out) = self.cancel_while_holding(line) {
                return out;
            }
            self.queue.push_back(line.to_vec());
            return Vec::new();
        }
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(e) => {
                self.note("answered a line from the client that is not JSON: parse error".into());
                return vec![to_client(&parse_error(&e))];
            }
        };
        match jsonrpc::classify(&message) {
            Message::Request { id, method } => {
                let (id, method) = (id.clone(), method.to_string());
                self.request(line, id, &method, message)
            }
            Message::Notification { method } if self.gone.is_none() => {
                if method == "notifications/cancelled" {
                    self.cancel_forwarded(&message);
                }
                vec![Output::ToServer(line.to_vec())]
            }
            Message::Response if self.gone.is_none() => vec![Output::ToServer(line.to_vec())],
            Message::Notification { .. } | Message::Response => Vec::new(),
            Message::Batch(items) => self.batch(items),
            Message::Invalid { id, why } => {
                self.note(format!(
                    "answered an invalid request from the client: {why}"
                ));
                vec![to_client(&invalid_request(&id, why))]
            }
            Message::BadResponse(why) => {
                self.note(format!(
                    "dropped an invalid response from the client: {why}"
                ));
                Vec::new()
            }
        }
    }

    /// A valid request from the client.
    fn request(&mut self, line: &[u8], id: Value, method: &str, message: Value) -> Vec<Output> {
        let key = id_key(&id);
        if let Some(how) = &self.gone {
            return vec![to_client(&gone_error(&id, how))];
        }
        if self.pending.contains_key(&key) || self.abandoned.contains(&key) {
            self.note("answered a request whose id is already in use: invalid request".into());
            return vec![to_client(&invalid_request(
                &id,
                "its id is already in use by a request not yet answered",
            ))];
        }
        match method {
            "tools/call" => {
                if !tool_call_params_ok(&message) {
                    return vec![to_client(&jsonrpc::error(
                        &id,
                        jsonrpc::INVALID_PARAMS,
                        "Invalid params: tools/call takes an object with a string \"name\" and an object \"arguments\"",
                    ))];
                }
                self.tool_call(line, id, message)
            }
            "tools/list" if self.offers_history() => {
                self.forwarded(&id, Pending::ToolsList);
                vec![Output::ToServer(line.to_vec())]
            }
            _ => {
                self.forwarded(&id, Pending::Other);
                vec![Output::ToServer(line.to_vec())]
            }
        }
    }

    /// Keeps a request forwarded to the server until it answers.
    fn forwarded(&mut self, id: &Value, kind: Pending) {
        let seq = self.next_request();
        self.pending.insert(
            id_key(id),
            InFlight {
                id: id.clone(),
                kind,
                seq,
                cancelled: false,
            },
        );
    }

    fn next_request(&mut self) -> u64 {
        self.requests += 1;
        self.requests
    }

    /// A batch from the client: MCP has had none since 2025-06-18, and the guard cannot look
    /// inside one, so no part of it reaches the server. Each request in it gets an error (in
    /// a batch of responses, as JSON-RPC answers a batch); a batch of notifications gets
    /// nothing.
    fn batch(&mut self, items: &[Value]) -> Vec<Output> {
        self.note(format!(
            "answered a batch of {} messages from the client: MCP has no batches",
            items.len()
        ));
        if items.is_empty() {
            return vec![to_client(&invalid_request(&Value::Null, "an empty batch"))];
        }
        let errors: Vec<Value> = items
            .iter()
            .filter_map(|item| match jsonrpc::classify(item) {
                Message::Request { id, .. } => Some(invalid_request(
                    id,
                    "MCP has no batches: send each message on a line of its own",
                )),
                Message::Invalid { id, why } => Some(invalid_request(&id, why)),
                Message::Batch(_) => Some(invalid_request(&Value::Null, "a batch in a batch")),
                Message::Notification { .. } | Message::Response | Message::BadResponse(_) => None,
            })
            .collect();
        if errors.is_empty() {
            return Vec::new();
        }
        vec![to_client(&Value::Array(errors))]
    }

    /// `notifications/cancelled` for a request the server has: it goes on to the server, and
    /// the relay no longer answers the request itself should the server be gone.
    fn cancel_forwarded(&mut self, message: &Value) {
        let Some(target) = message.pointer("/params/requestId") else {
            return;
        };
        let key = id_key(target);
        let Some(call) = self.pending.get_mut(&key) else {
            return;
        };
        if call.cancelled {
            return;
        }
        if !matches!(call.kind, Pending::BrowserCall | Pending::Look) {
            // Its late answer, if any, passes through as it would have.
            self.pending.remove(&key);
            return;
        }
        // A late browser result is still read: the page may have changed.
        call.cancelled = true;
        self.cancelled.push_back(key);
        while self.cancelled.len() > CANCELLED_KEPT {
            if let Some(old) = self.cancelled.pop_front() {
                if self.pending.get(&old).is_some_and(|c| c.cancelled) {
                    self.pending.remove(&old);
                }
            }
        }
    }

    /// A line from the client while a call is held: a cancellation is acted on at once (the
    /// held call, or a request queued behind it, is dropped and never answered; a request the
    /// server has gets the cancellation forwarded); any other line waits (`None`).
    fn cancel_while_holding(&mut self, line: &[u8]) -> Option<Vec<Output>> {
        let message: Value = serde_json::from_slice(line).ok()?;
        match jsonrpc::classify(&message) {
            Message::Notification {
                method: "notifications/cancelled",
            } => {}
            _ => return None,
        }
        let key = id_key(message.pointer("/params/requestId")?);
        let parked = self.parked.as_ref()?;
        if id_key(&parked.id) == key {
            let parked = self.parked.take()?;
            self.note("the client cancelled the held call: dropped".into());
            self.abandon(&parked.own_id);
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": parked.own_id, "reason": "the call it was taken for was cancelled"}});
            let mut out = vec![to_server(&cancel)];
            out.extend(self.drain_queue());
            return Some(out);
        }
        if let Some(at) = self
            .queue
            .iter()
            .position(|queued| request_key(queued).as_ref() == Some(&key))
        {
            self.queue.remove(at);
            self.note("the client cancelled a request held behind a call: dropped".into());
            return Some(Vec::new());
        }
        self.cancel_forwarded(&message);
        Some(vec![Output::ToServer(line.to_vec())])
    }

    /// Drops the late answer to an own request.
    fn abandon(&mut self, own_id: &str) {
        self.abandoned.push_back(id_key(&json!(own_id)));
        while self.abandoned.len() > ABANDONED_KEPT {
            self.abandoned.pop_front();
        }
    }

    /// Takes one line from the server.
    ///
    /// A line that is no JSON-RPC message (a log line, a partial line, binary garbage) is
    /// dropped, never forwarded, and described in [`Relay::take_dropped`].
    pub fn from_server(&mut self, line: &[u8]) -> Vec<Output> {
        self.server_line(Cow::Borrowed(line))
    }

    /// [`Relay::from_server`] for a line the caller gives away: a line passed through is
    /// not copied, and one the relay rewrites is freed before its rewrite is written.
    pub fn from_server_owned(&mut self, line: Vec<u8>) -> Vec<Output> {
        self.server_line(Cow::Owned(line))
    }

    /// A panic of the relay's own (a bug) never ends the session: the client request the
    /// line answers gets an internal error (-32603) instead of the server's answer.
    fn server_line(&mut self, line: Cow<'_, [u8]>) -> Vec<Output> {
        self.answering = None;
        self.contained(
            |relay| relay.read_server_line(line),
            Relay::internal_error_for_answer,
        )
    }

    /// After a panic on a client line: an internal error for the request in it, if any.
    fn internal_error(&mut self, line: &[u8]) -> Vec<Output> {
        self.note(
            "internal error while checking a request (a bug in staleguard, please report it); it was not forwarded".into(),
        );
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return Vec::new();
        };
        let Message::Request { id, .. } = jsonrpc::classify(&message) else {
            return Vec::new();
        };
        self.pending.remove(&id_key(id));
        vec![to_client(&internal_error(id, INTERNAL_ERROR_UNSENT))]
    }

    /// After a panic on a server line: the client request it answered, or the call held for
    /// the relay's own snapshot, gets an internal error.
    fn internal_error_for_answer(&mut self) -> Vec<Output> {
        self.note(
            "internal error while reading an answer of the server (a bug in staleguard, please report it); the client got an error instead".into(),
        );
        let Some(key) = self.answering.take() else {
            return Vec::new();
        };
        let why = INTERNAL_ERROR_ANSWER;
        if let Some(parked) = self.parked.take_if(|p| id_key(&json!(p.own_id)) == key) {
            return vec![to_client(&internal_error(&parked.id, why))];
        }
        self.pending.remove(&key);
        match serde_json::from_str::<Value>(&key) {
            Ok(id) => vec![to_client(&internal_error(&id, why))],
            Err(_) => Vec::new(),
        }
    }

    fn read_server_line(&mut self, line: Cow<'_, [u8]>) -> Vec<Output> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        // What it is, and the id of an answer it is: a large line is first read for that
        // alone, its body skipped, so that one passed through is never held twice; a small
        // one is read whole at once (the relay reads most answers whole anyway).
        let (answer, whole) = if line.len() >= HEAD_FIRST_BYTES {
            // Read as text: skipped strings are checked for UTF-8 here.
            let Ok(text) = std::str::from_utf8(&line) else {
                self.drop_line(&line, "not JSON (not UTF-8)");
                return Vec::new();
            };
            match serde_json::from_str::<Head>(text) {
                Ok(head) if head.is_message() => (head.answer_key(), None),
                Ok(_) => {
                    self.drop_line(&line, "JSON but no JSON-RPC message");
                    return Vec::new();
                }
                // Not an object of distinct keys: read whole.
                Err(_) => match self.whole(&line) {
                    Some(value) => (answer_key(&value), Some(value)),
                    None => return Vec::new(),
                },
            }
        } else {
            match self.whole(&line) {
                Some(value) => (answer_key(&value), Some(value)),
                None => return Vec::new(),
            }
        };
        let Some(key) = answer else {
            return vec![Output::ToClient(line.into_owned())];
        };
        self.answering = Some(key.clone());
        if self
            .parked
            .as_ref()
            .is_some_and(|p| id_key(&json!(p.own_id)) == key)
        {
            let answer = read_whole(whole, &line);
            return self.fresh_snapshot(&answer);
        }
        if let Some(at) = self.abandoned.iter().position(|k| *k == key) {
            self.abandoned.remove(at);
            return Vec::new();
        }
        let kind = self.pending.remove(&key).map(|call| call.kind);
        if !matches!(
            kind,
            Some(Pending::ToolsList | Pending::BrowserCall | Pending::Look)
        ) {
            drop(whole);
            return vec![Output::ToClient(line.into_owned())];
        }
        let mut message = read_whole(whole, &line);
        if kind == Some(Pending::ToolsList) {
            return if self.add_history_tool(&mut message) {
                vec![to_client(&message)]
            } else {
                vec![Output::ToClient(line.into_owned())]
            };
        }
        let step = self.next_step();
        // A result with text is most often rewritten by the guard (scoped refs, guidance),
        // and then written from what was read: its line is freed first, so that a large page
        // is held once, not twice. Any other result keeps its line, and passes byte for byte
        // when nothing in it changed.
        let line = if self.options.guard && has_text_part(&message) {
            drop(line);
            None
        } else {
            Some(line)
        };
        let changed = self.browser_result(&mut message, step, kind == Some(Pending::Look));
        match line {
            Some(line) if !changed => {
                drop(message);
                vec![Output::ToClient(line.into_owned())]
            }
            _ => vec![to_client(&message)],
        }
    }

    /// A line from the server read whole, when it is a JSON-RPC message; anything else is
    /// dropped (`None`).
    fn whole(&mut self, line: &[u8]) -> Option<Value> {
        match serde_json::from_slice::<Value>(line) {
            Ok(value) if jsonrpc::is_message(&value) => Some(value),
            Ok(_) => {
                self.drop_line(line, "JSON but no JSON-RPC message");
                None
            }
            Err(_) => {
                self.drop_line(line, "not JSON");
                None
            }
        }
    }

    fn drop_line(&mut self, line: &[u8], what: &str) {
        let shown = &line[..line.len().min(60)];
        let more = if shown.len() < line.len() { "..." } else { "" };
        self.dropped.push(format!(
            "dropped a line from the server that is {what} ({} bytes: \"{}\"{more})",
            line.len(),
            String::from_utf8_lossy(shown).escape_debug()
        ));
    }

    /// The lines from the server dropped since the last call, one description each (its
    /// length and first bytes, escaped), for a log that limits their rate.
    pub fn take_dropped(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dropped)
    }

    /// The server is gone (it exited, or closed its output): every client request it had not
    /// answered, the held call and the requests queued behind it are answered with an error
    /// (-32000) that says `how` it ended, in the order the client sent them; cancelled ones
    /// get nothing. Later requests get the same error at once.
    pub fn server_exited(&mut self, how: &str) -> Vec<Output> {
        if self.gone.is_none() {
            self.gone = Some(how.to_string());
        }
        let mut unanswered: Vec<(u64, Value)> = self
            .pending
            .drain()
            .filter(|(_, call)| !call.cancelled)
            .map(|(_, call)| (call.seq, call.id))
            .collect();
        if let Some(parked) = self.parked.take() {
            unanswered.push((parked.seq, parked.id));
        }
        unanswered.sort_by_key(|(seq, _)| *seq);
        self.cancelled.clear();
        self.abandoned.clear();
        let how = self.gone.clone().unwrap_or_default();
        let mut out: Vec<Output> = unanswered
            .iter()
            .map(|(_, id)| to_client(&gone_error(id, &how)))
            .collect();
        for line in std::mem::take(&mut self.queue) {
            out.extend(self.from_client(&line));
        }
        out
    }

    fn offers_history(&self) -> bool {
        self.options.history_tool && !self.server_has_history
    }

    fn tool_call(&mut self, line: &[u8], id: Value, message: Value) -> Vec<Output> {
        let params = message.get("params");
        let name = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name == HISTORY_TOOL && self.offers_history() {
            let arguments = params.and_then(|p| p.get("arguments"));
            let result = crate::history::answer(&self.archive, arguments, self.browser_results);
            return vec![to_client(&response(&id, result))];
        }
        if !self.tools.is_browser(&name) {
            self.forwarded(&id, Pending::Other);
            return vec![Output::ToServer(line.to_vec())];
        }
        if !self.options.guard {
            self.take_call(&id, &name, &arguments_of(&message).to_string());
            return vec![Output::ToServer(line.to_vec())];
        }
        let arguments = arguments_of(&message);
        let raw = arguments.to_string();
        let has_refs = !staleguard::internal::refs::targets(&raw).is_empty();
        if has_refs && (self.session.page_unseen() || self.session.other_page(&raw).is_some()) {
            return self.park(id, message);
        }
        self.decide(id, message)
    }

    /// Guards one browser call against the newest page: refuses it, or forwards it with its
    /// refs mapped back to the server's.
    fn decide(&mut self, id: Value, mut message: Value) -> Vec<Output> {
        let name = message
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut arguments = arguments_of(&message);
        if self.options.namespace_refs {
            if let Err((why, text)) = self.unscope_arguments(&mut arguments) {
                self.note(format!("refused {name}: {why:?}"));
                return vec![to_client(&refusal(&id, &text))];
            }
        }
        let raw = arguments.to_string();
        match guard::check(&self.session, &name, &raw, &self.tools) {
            Verdict::Refuse { why, message } => {
                let mut text = message;
                if why == Refusal::RepeatedSubmission {
                    let guidance = match self.session.progress().last() {
                        Some(step) if step.stalled => progress::guidance(step),
                        _ => progress::submission_guidance(),
                    };
                    text = format!("{text}\n\n{guidance}");
                }
                if why == Refusal::NeedsSnapshot {
                    text.push_str(" (staleguard could not take one for you.)");
                }
                self.note(format!("refused {name}: {why:?}"));
                vec![to_client(&refusal(&id, &text))]
            }
            Verdict::Allow { .. } => {
                if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
                    params.insert("arguments".into(), arguments);
                }
                self.take_call(&id, &name, &raw);
                vec![to_server(&message)]
            }
        }
    }

    fn take_call(&mut self, id: &Value, name: &str, arguments: &str) {
        let step = self.next_step();
        self.session.call(step, name, arguments);
        let kind = if tools::is_find(name) {
            Pending::Look
        } else {
            Pending::BrowserCall
        };
        self.forwarded(id, kind);
    }

    fn next_step(&mut self) -> usize {
        let step = self.step;
        self.step += 1;
        step
    }

    /// Maps scoped refs back to the server's refs; a ref from another document is refused:
    /// stale when the document is older, unknown when the model has seen no such document.
    fn unscope_arguments(&self, arguments: &mut Value) -> Result<(), (Refusal, String)> {
        let current = self.documents.number;
        let mut failure = None;
        for_each_ref(arguments, |value| {
            let (doc, id) = scope::unscope(value)?;
            if doc == current {
                return Some(id.to_string());
            }
            let why = if doc < current {
                Refusal::StaleRef
            } else {
                Refusal::UnknownRef
            };
            failure.get_or_insert_with(|| (why, self.foreign_ref(value, doc)));
            None
        });
        failure.map_or(Ok(()), Err)
    }

    fn foreign_ref(&self, value: &str, doc: u32) -> String {
        let newest = self
            .documents
            .describe(self.documents.number)
            .unwrap_or_else(|| "no page yet".into());
        let origin = match self.documents.describe(doc) {
            Some(origin) if doc < self.documents.number => {
                format!("comes from an older page ({origin}); it is stale")
            }
            _ if doc < self.documents.number => {
                format!("comes from an older page (document {doc}); it is stale")
            }
            _ => "names no page the model has seen".into(),
        };
        format!(
            "staleguard refused this call: ref {value} {origin}. The newest page is {newest}. Take a fresh snapshot (browser_snapshot) and act only on the refs it shows."
        )
    }

    /// Holds the call and asks the server for a snapshot of its own.
    fn park(&mut self, id: Value, message: Value) -> Vec<Output> {
        self.note("the newest page has no inline tree: taking a snapshot before the call".into());
        self.own_requests += 1;
        let mut own_id = format!("{OWN_ID_PREFIX}{}", self.own_requests);
        // Never an id the client has in flight, or one whose late answer is dropped.
        while self.pending.contains_key(&id_key(&json!(own_id)))
            || self.abandoned.contains(&id_key(&json!(own_id)))
        {
            own_id.push('_');
        }
        // Chrome DevTools MCP resolves uids on the newest snapshot of the call's page.
        let page = arguments_of(&message).get("pageId").cloned();
        let tool = staleguard::internal::observation::snapshot_tool(self.session.page().format);
        let arguments = match &page {
            Some(page) => json!({ "pageId": page }),
            None => json!({}),
        };
        let request = json!({
            "jsonrpc": "2.0",
            "id": own_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        let seq = self.next_request();
        self.parked = Some(Parked {
            own_id,
            seq,
            page_id: page
                .as_ref()
                .and_then(staleguard::internal::refs::page_id_of),
            id,
            message,
        });
        vec![to_server(&request)]
    }

    /// The server answered the relay's own snapshot: take it in, decide the held call, then
    /// the lines that queued behind it.
    fn fresh_snapshot(&mut self, message: &Value) -> Vec<Output> {
        let Some(parked) = self.parked.take() else {
            return Vec::new();
        };
        if let Some(result) = message.get("result") {
            if !is_error(result) {
                let text = result_text(result);
                let step = self.next_step();
                let reading = self.read(&text);
                self.session
                    .refresh(step, text, &reading, parked.page_id.clone());
                self.document_at(step);
            }
        }
        let mut out = self.decide(parked.id, parked.message);
        out.extend(self.drain_queue());
        out
    }

    /// The client lines that waited behind a held call, until one is held again.
    fn drain_queue(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        while self.parked.is_none() {
            let Some(line) = self.queue.pop_front() else {
                break;
            };
            out.extend(self.from_client(&line));
        }
        out
    }

    /// Client requests forwarded to the server and not answered yet (cancelled browser calls
    /// among them, up to a bound: their late results are still read).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Whether a call is held until the server answers the relay's own snapshot.
    pub fn is_waiting(&self) -> bool {
        self.parked.is_some()
    }

    /// The server did not answer the relay's own snapshot in time: the held call is refused,
    /// the lines behind it go on, and the late answer will be dropped.
    pub fn give_up_waiting(&mut self) -> Vec<Output> {
        let Some(parked) = self.parked.take() else {
            return Vec::new();
        };
        self.abandon(&parked.own_id);
        self.note(
            "the server did not answer the guard's own snapshot in time: call refused".into(),
        );
        let tool = staleguard::internal::observation::snapshot_tool(self.session.page().format);
        let text = format!("staleguard refused this call: the newest page state has no inline snapshot, and the server did not answer a fresh snapshot in time, so the page's refs are unknown. Take a fresh snapshot ({tool}) and act on the refs it shows.");
        let mut out = vec![to_client(&refusal(&parked.id, &text))];
        out.extend(self.drain_queue());
        out
    }

    /// The number of the document of the result taken in at `step`, when it carried a tree
    /// (the core session then holds it as its newest observation, ID and URL included).
    fn document_at(&mut self, step: usize) -> Option<u32> {
        let seen = self.session.newest_at(step)?;
        let page = self.session.page();
        let tab = page.tabs.iter().find(|t| t.current).map_or(0, |t| t.index);
        let key = format!("{tab}\u{0}{}\u{0}{}", page.url, page.document);
        let keep = self.options.max_observations;
        Some(self.documents.enter(key, &seen.url, &seen.id, keep))
    }

    /// Takes in a browser result (of a look when `look`) and edits what the client sees.
    /// Returns whether it changed.
    fn browser_result(&mut self, message: &mut Value, step: usize, look: bool) -> bool {
        let Some(result) = message.get_mut("result") else {
            // A JSON-RPC error: a failed step.
            if look {
                self.session.failed_look(step);
            } else {
                self.session.failure(step);
            }
            self.browser_results += 1;
            return false;
        };
        let text = result_text(result);
        let reading = self.read(&text);
        let failed = is_error(result) || reading.failed;
        if look {
            self.session.look(step, text.clone(), &reading, failed);
        } else {
            self.session.result(step, text.clone(), &reading, failed);
        }
        self.session.forget_oldest(self.options.max_observations);
        self.browser_results += 1;
        let mut changed = false;
        if let Some(doc) = self.document_at(step) {
            let page = self.session.page();
            let unique = staleguard::internal::observation::refs_unique(page.format);
            if self.options.guard && self.options.namespace_refs && !unique {
                changed |= match scope_at_refs(result, doc, &reading, &text) {
                    Some(scoped) => scoped,
                    None => scope_result(result, doc, |id| page.refs.contains_key(id)),
                };
            }
        }
        if !failed {
            // The archive keeps the text the relay read: no second copy.
            self.archive
                .record_read(text, &reading, self.browser_results);
        }
        if self.options.guard {
            if let Some(step) = self.session.progress().last().filter(|s| s.stalled) {
                push_text(result, progress::guidance(step));
                self.notes.push(format!(
                    "no page change for {} browser steps: guidance appended",
                    step.no_progress
                ));
                changed = true;
            }
        }
        changed
    }

    /// The reading of a result text: read once, shared by the tracker, the scope and the
    /// archive.
    fn read(&self, text: &str) -> std::sync::Arc<Reading> {
        let reader = Reader {
            memo: &self.memo,
            depth: Depth::Full,
        };
        reader.reading(self.memo.key(text), text)
    }

    /// Appends `browser_history` to the last page of the server's tools.
    fn add_history_tool(&mut self, message: &mut Value) -> bool {
        let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
            return false;
        };
        if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
            return false;
        }
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return false;
        };
        if tools
            .iter()
            .any(|t| t.get("name") == Some(&json!(HISTORY_TOOL)))
        {
            self.server_has_history = true;
            return false;
        }
        tools.push(crate::history::tool_definition());
        true
    }
}

/// The keys of a line from the server that say what it is, its body skipped unread.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a RawValue>,
}

impl Head<'_> {
    fn is_message(&self) -> bool {
        self.jsonrpc
            .and_then(|v| serde_json::from_str::<&str>(v.get()).ok())
            == Some("2.0")
    }

    /// The relay's key of the request this line answers (`None` for a request or a
    /// notification of the server's).
    fn answer_key(&self) -> Option<String> {
        if self.method.is_some() {
            return None;
        }
        let id: Value = serde_json::from_str(self.id?.get()).ok()?;
        Some(id_key(&id))
    }
}

/// A line's message read whole: as it was already, or now.
fn read_whole(whole: Option<Value>, line: &[u8]) -> Value {
    whole
        .or_else(|| serde_json::from_slice(line).ok())
        .unwrap_or(Value::Null)
}

/// [`Head::answer_key`] of a message read whole.
fn answer_key(message: &Value) -> Option<String> {
    if method(message).is_some() {
        return None;
    }
    message.get("id").map(id_key)
}

fn method(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

/// Ids compare as JSON: `1` and `"1"` are different requests.
fn id_key(id: &Value) -> String {
    id.to_string()
}

fn arguments_of(message: &Value) -> Value {
    message
        .pointer("/params/arguments")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()))
}

/// Whether a response's result has a text part.
fn has_text_part(message: &Value) -> bool {
    message
        .pointer("/result/content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        })
}

fn is_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

/// The text parts of a tool result, joined (shared: the guard and the archive keep it).
pub fn result_text(result: &Value) -> std::sync::Arc<str> {
    let parts = result.get("content").and_then(Value::as_array);
    let texts: Vec<&str> = parts
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    match texts.as_slice() {
        // One part, the common case: one copy.
        [only] => (*only).into(),
        _ => texts.join("\n").into(),
    }
}

/// Scopes the refs of a result at the places where the tree parser found them in its text
/// (the text parts joined as [`result_text`] joins them): no search, and page text that
/// merely looks like a ref stays as it is. `None` when the parts no longer add up to that
/// text (then [`scope_result`] scans for ref tokens).
fn scope_at_refs(result: &mut Value, doc: u32, reading: &Reading, text: &str) -> Option<bool> {
    let starts: Vec<usize> = reading
        .tree(text)
        .refs
        .iter()
        .map(|r| match r.id {
            Piece::At(start, _) => Some(start),
            Piece::Own(_) => None,
        })
        .collect::<Option<_>>()?;
    if starts.is_empty() || !starts.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    let prefix = format!("d{doc}");
    let parts = result.get_mut("content").and_then(Value::as_array_mut)?;
    let mut offset = 0;
    let mut changed = false;
    let mut next = starts.iter().copied().peekable();
    for part in parts
        .iter_mut()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
    {
        let Some(Value::String(part_text)) = part.get_mut("text") else {
            continue;
        };
        // The joined text holds this part at `offset`, then a line break.
        if text.get(offset..offset + part_text.len()) != Some(part_text.as_str()) {
            return None;
        }
        let end = offset + part_text.len();
        let mut scoped = String::new();
        let mut done = 0;
        while let Some(start) = next.next_if(|&s| s < end) {
            let at = start.checked_sub(offset)?;
            scoped.push_str(part_text.get(done..at)?);
            scoped.push_str(&prefix);
            done = at;
        }
        if !scoped.is_empty() {
            scoped.push_str(part_text.get(done..)?);
            *part_text = scoped;
            changed = true;
        }
        offset = end + 1;
    }
    Some(changed)
}

fn scope_result(result: &mut Value, doc: u32, is_ref: impl Fn(&str) -> bool) -> bool {
    let mut changed = false;
    let parts = result.get_mut("content").and_then(Value::as_array_mut);
    for part in parts.into_iter().flatten() {
        if part.get("type").and_then(Value::as_str) != Some("text") {
            continue;
        }
        let Some(Value::String(text)) = part.get_mut("text") else {
            continue;
        };
        if let std::borrow::Cow::Owned(scoped) = scope::scope_text(text, doc, &is_ref) {
            *text = scoped;
            changed = true;
        }
    }
    changed
}

/// Adds a text part of its own, so that page text can never pose as it.
fn push_text(result: &mut Value, text: String) {
    if let Some(parts) = result.get_mut("content").and_then(Value::as_array_mut) {
        parts.push(json!({"type": "text", "text": text}));
    } else if let Some(object) = result.as_object_mut() {
        object.insert("content".into(), json!([{"type": "text", "text": text}]));
    }
}

/// Calls `map` on every ref-bearing string of a call's arguments (top level and
/// `fields[]`), replacing the value where it returns one.
fn for_each_ref(arguments: &mut Value, mut map: impl FnMut(&str) -> Option<String>) {
    let mut visit = |object: &mut Map<String, Value>| {
        for key in staleguard::internal::refs::REF_KEYS {
            if let Some(Value::String(value)) = object.get_mut(*key) {
                if let Some(new) = map(value) {
                    *value = new;
                }
            }
        }
    };
    let Some(top) = arguments.as_object_mut() else {
        return;
    };
    visit(top);
    for list in staleguard::internal::refs::REF_LISTS {
        if let Some(Value::Array(items)) = top.get_mut(*list) {
            items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(&mut visit);
        }
    }
}

fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A tool error the model reads: the call never reached the server.
fn refusal(id: &Value, text: &str) -> Value {
    response(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": true}),
    )
}

fn parse_error(e: &serde_json::Error) -> Value {
    jsonrpc::error(
        &Value::Null,
        jsonrpc::PARSE_ERROR,
        &format!("Parse error: {e}"),
    )
}

fn invalid_request(id: &Value, why: &str) -> Value {
    jsonrpc::error(
        id,
        jsonrpc::INVALID_REQUEST,
        &format!("Invalid Request: {why}"),
    )
}

/// What the model reads when the relay failed on its request before sending it on.
const INTERNAL_ERROR_UNSENT: &str = "staleguard mcp: internal error while checking this request (a bug in staleguard, please report it); it was not sent to the browser";

/// What the model reads when the relay failed on the server's answer to its request.
const INTERNAL_ERROR_ANSWER: &str = "staleguard mcp: internal error while reading the browser's answer to this request (a bug in staleguard, please report it); the call may have run: take a fresh snapshot before acting again";

/// The answer to a request the relay failed on: `why` says what became of it.
fn internal_error(id: &Value, why: &str) -> Value {
    jsonrpc::error(id, jsonrpc::INTERNAL_ERROR, why)
}

/// The answer to a request the server can no longer answer.
fn gone_error(id: &Value, how: &str) -> Value {
    jsonrpc::error(
        id,
        jsonrpc::CONNECTION_CLOSED,
        &format!("staleguard mcp: the browser MCP server {how} before it answered this request"),
    )
}

/// `tools/call` names its tool with a string and passes an object of arguments (or none).
fn tool_call_params_ok(message: &Value) -> bool {
    message
        .get("params")
        .and_then(Value::as_object)
        .is_some_and(|params| {
            params.get("name").is_some_and(Value::is_string)
                && params
                    .get("arguments")
                    .map_or(true, |a| a.is_object() || a.is_null())
        })
}

/// The id of a queued line that is a request, as the relay keys it.
fn request_key(line: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(line).ok()?;
    match jsonrpc::classify(&message) {
        Message::Request { id, .. } => Some(id_key(id)),
        _ => None,
    }
}

fn to_client(message: &Value) -> Output {
    Output::ToClient(line_of(message))
}

fn to_server(message: &Value) -> Output {
    Output::ToServer(line_of(message))
}

/// A message as one line. Written straight into bytes: `Value`'s `Display` goes through a
/// formatter for every piece, which costs a fifth more on a large snapshot.
fn line_of(message: &Value) -> Vec<u8> {
    // Sized for the message's strings up front: a large snapshot otherwise grows the line
    // by doubling, copying megabytes into fresh pages at every step.
    let mut line = Vec::with_capacity(64 + string_bytes(message));
    // A `Value` always serialises (its keys are strings); the fallback is never taken.
    match serde_json::to_writer(&mut line, message) {
        Ok(()) => line,
        Err(_) => message.to_string().into_bytes(),
    }
}

/// Bytes of the strings in `value`, keys included: nearly all of a message's length.
fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(|v| string_bytes(v) + 1).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + 4 + string_bytes(v)).sum(),
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay() -> Relay {
        Relay::new(Options::new(Config::default(), &McpConfig::default()))
    }

    fn errors_to_client(out: &[Output]) -> Vec<Value> {
        out.iter()
            .filter_map(|o| match o {
                Output::ToClient(l) => serde_json::from_slice(l).ok(),
                Output::ToServer(_) => None,
            })
            .collect()
    }

    /// A bug of the relay's (a panic) on a client's call answers that call with an internal
    /// error, forwards nothing, and the session goes on.
    #[test]
    fn a_panic_on_a_call_answers_it_with_an_internal_error() {
        let mut r = relay();
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"browser_click","arguments":{"ref":"e1"}}}"#;
        let out = r.contained(|_| panic!("a bug"), |r| r.internal_error(call));
        let answers = errors_to_client(&out);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], 7);
        assert_eq!(answers[0]["error"]["code"], jsonrpc::INTERNAL_ERROR);
        let said = answers[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains("not sent to the browser"), "{said}");
        assert!(r.take_notes().iter().any(|n| n.contains("internal error")));
        // The session goes on: the same id is free again, and a request is forwarded.
        let out = r.from_client(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
        assert!(matches!(out.as_slice(), [Output::ToServer(_)]));
    }

    /// A panic while reading the server's answer to a forwarded call answers the client's
    /// call with an internal error instead of leaving it waiting.
    #[test]
    fn a_panic_on_an_answer_answers_the_call_it_was_for() {
        let mut r = relay();
        let call = br#"{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"browser_snapshot","arguments":{}}}"#;
        assert!(matches!(
            r.from_client(call).as_slice(),
            [Output::ToServer(_)]
        ));
        let answer =
            br#"{"jsonrpc":"2.0","id":"c-1","result":{"content":[{"type":"text","text":"x"}]}}"#;
        let out = r.contained(
            |relay| {
                relay.answering = Some(id_key(&json!("c-1")));
                panic!("a bug while reading {}", answer.len())
            },
            Relay::internal_error_for_answer,
        );
        let answers = errors_to_client(&out);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], "c-1");
        let said = answers[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains("may have run"), "{said}");
        assert_eq!(r.in_flight(), 0);
    }
}
