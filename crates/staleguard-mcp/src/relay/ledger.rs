//! The ledger of client requests in flight: forwarded, cancelled, and own requests given up on.

use serde_json::{json, Value};

use super::Relay;
use crate::jsonrpc::{self, Message};

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
pub(super) struct InFlight {
    /// The id as the client wrote it, to answer it when the server cannot.
    pub(super) id: Value,
    pub(super) kind: Pending,
    /// When the client sent it, among its requests: they are answered in this order when the
    /// server is gone.
    pub(super) seq: u64,
    /// The client cancelled it: it expects no answer.
    pub(super) cancelled: bool,
}

impl Relay {
    /// Keeps a request forwarded to the server until it answers.
    pub(super) fn forwarded(&mut self, id: &Value, kind: Pending) {
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

    pub(super) fn next_request(&mut self) -> u64 {
        self.requests += 1;
        self.requests
    }

    /// `notifications/cancelled` for a request the server has: it goes on to the server, and
    /// the relay no longer answers the request itself should the server be gone.
    pub(super) fn cancel_forwarded(&mut self, message: &Value) {
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

    /// Client requests forwarded to the server and not answered yet (cancelled browser calls
    /// among them, up to a bound: their late results are still read).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
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
