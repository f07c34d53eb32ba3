//! The server is gone: every request it had not answered, and every later one, gets an error.

use serde_json::Value;

use super::wire::to_client;
use super::{Output, Relay};
use crate::jsonrpc;

impl Relay {
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
}

/// The answer to a request the server can no longer answer.
pub(super) fn gone_error(id: &Value, how: &str) -> Value {
    jsonrpc::error(
        id,
        jsonrpc::CONNECTION_CLOSED,
        &format!("staleguard mcp: the browser MCP server {how} before it answered this request"),
    )
}
