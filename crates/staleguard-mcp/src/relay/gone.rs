//! The server is gone ([`Phase::Gone`]): every request it had not answered, and every later
//! one, gets an error that says how it ended.

use serde_json::Value;

use super::wire::to_client;
use super::{Output, Phase, Relay};
use crate::jsonrpc;
use crate::texts;

/// How the server ended.
pub(super) struct Gone {
    /// As the host said it (`exited with code 1`, `closed its output`): the first time only.
    how: String,
}

impl Gone {
    /// The answer to a request the server can no longer answer.
    pub(super) fn answer(&self, id: &Value) -> Value {
        jsonrpc::error(
            id,
            jsonrpc::CONNECTION_CLOSED,
            &texts::server_gone(&self.how),
        )
    }
}

impl Relay {
    /// The server is gone (it exited, or closed its output): every client request it had not
    /// answered, the held call and the requests queued behind it are answered with an error
    /// (-32000) that says `how` it ended, in the order the client sent them; cancelled ones
    /// get nothing. Later requests get the same error at once.
    pub fn server_exited(&mut self, how: &str) -> Vec<Output> {
        let held = self.phase.take_held();
        if self.phase.gone().is_none() {
            self.phase = Phase::Gone(Gone {
                how: how.to_string(),
            });
        }
        let mut unanswered = self.ledger.close();
        if let Some(held) = held {
            unanswered.push((held.seq, held.id));
        }
        unanswered.sort_by_key(|(seq, _)| *seq);
        let mut out: Vec<Output> = match self.phase.gone() {
            Some(gone) => unanswered
                .iter()
                .map(|(_, id)| to_client(&gone.answer(id)))
                .collect(),
            None => Vec::new(),
        };
        for line in std::mem::take(&mut self.queue) {
            out.extend(self.from_client(&line));
        }
        out
    }
}
