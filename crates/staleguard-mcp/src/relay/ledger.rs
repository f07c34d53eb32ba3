//! The ledger of requests in flight: client requests forwarded to the server and not yet
//! answered (cancelled ones among them), and the relay's own requests given up on, whose late
//! answers are dropped. Requests are keyed by their id as JSON ([`id_key`]).

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

use super::Relay;
use crate::jsonrpc::{self, Message};

/// The prefix of the ids of the relay's own requests to the server.
const OWN_ID_PREFIX: &str = "staleguard-fresh-snapshot-";

/// Own requests given up on (timed out, or their call cancelled) whose late answers are
/// still dropped; older ones are forgotten.
const ABANDONED_KEPT: usize = 256;

/// Cancelled browser calls still waited for (their results are read if they come); older
/// ones are forgotten.
const CANCELLED_KEPT: usize = 256;

/// What the relay does with the answer to a client request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pending {
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

/// Requests in flight between the client, the relay and the server.
#[derive(Default)]
pub(super) struct Ledger {
    /// Client requests forwarded to the server, by id, until it answers them.
    pending: HashMap<String, InFlight>,
    /// Client requests taken in so far (the next one's `seq`).
    requests: u64,
    /// Ids of cancelled browser calls, oldest first (bounds what `pending` keeps of them).
    cancelled: VecDeque<String>,
    /// Own requests sent so far (numbers their ids).
    own_requests: u64,
    /// Ids of own snapshots given up on, oldest first: their late answers are dropped.
    abandoned: VecDeque<String>,
}

impl Ledger {
    /// Keeps a request forwarded to the server until it answers.
    pub(super) fn forward(&mut self, id: &Value, kind: Pending) {
        let seq = self.next_seq();
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

    /// Counts one more client request taken in: its place in the order the client sent them.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.requests += 1;
        self.requests
    }

    /// Whether `key` names a request not yet answered: forwarded, or an own one whose late
    /// answer is still dropped.
    pub(super) fn in_use(&self, key: &str) -> bool {
        self.pending.contains_key(key) || self.abandoned.iter().any(|k| k == key)
    }

    /// The id of a new own request: never one the client has in flight, or one whose late
    /// answer is dropped.
    pub(super) fn own_id(&mut self) -> String {
        self.own_requests += 1;
        let mut own_id = format!("{OWN_ID_PREFIX}{}", self.own_requests);
        while self.pending.contains_key(&id_key(&json!(own_id)))
            || self.abandoned.contains(&id_key(&json!(own_id)))
        {
            own_id.push('_');
        }
        own_id
    }

    /// `notifications/cancelled` for a request the server has: it goes on to the server, and
    /// the relay no longer answers the request itself should the server be gone.
    pub(super) fn cancel(&mut self, message: &Value) {
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

    /// Drops the late answer to an own request.
    pub(super) fn abandon(&mut self, own_id: &str) {
        self.abandoned.push_back(id_key(&json!(own_id)));
        while self.abandoned.len() > ABANDONED_KEPT {
            self.abandoned.pop_front();
        }
    }

    /// The server answered `key`: whether it was an own request given up on, now forgotten
    /// (its answer is dropped).
    pub(super) fn answered_abandoned(&mut self, key: &str) -> bool {
        match self.abandoned.iter().position(|k| k == key) {
            Some(at) => {
                self.abandoned.remove(at);
                true
            }
            None => false,
        }
    }

    /// The server answered `key`, or the relay answered it itself: what was forwarded under
    /// it, if anything, is forgotten. Returns what to do with the answer.
    pub(super) fn answered(&mut self, key: &str) -> Option<Pending> {
        self.pending.remove(key).map(|call| call.kind)
    }

    /// The server is gone: the ids of the client requests it never answered (cancelled ones
    /// expect nothing), each with its `seq`, and the ledger is emptied.
    pub(super) fn close(&mut self) -> Vec<(u64, Value)> {
        let unanswered = self
            .pending
            .drain()
            .filter(|(_, call)| !call.cancelled)
            .map(|(_, call)| (call.seq, call.id))
            .collect();
        self.cancelled.clear();
        self.abandoned.clear();
        unanswered
    }
}

impl Relay {
    /// Client requests forwarded to the server and not answered yet (cancelled browser calls
    /// among them, up to a bound: their late results are still read).
    pub fn in_flight(&self) -> usize {
        self.ledger.pending.len()
    }
}

/// Ids compare as JSON: `1` and `"1"` are different requests.
pub(super) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The id of a queued line that is a request, as the relay keys it.
pub(super) fn request_key(line: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(line).ok()?;
    match jsonrpc::classify(&message) {
        Message::Request { id, .. } => Some(id_key(id)),
        _ => None,
    }
}
