//! The held call ([`Phase::Holding`]): a browser call on a page whose refs the relay does not
//! know (no inline tree) is held back while the relay asks the server for a fresh snapshot of
//! its own; the client lines that arrive meanwhile queue behind it. The answer, a timeout or a
//! cancellation ends the hold.

use serde_json::{json, Value};

use super::guard::arguments_of;
use super::ledger::{id_key, request_key};
use super::rewrite::{is_error, result_text};
use super::wire::{refusal, to_client, to_server};
use super::{Output, Phase, Relay};
use crate::jsonrpc::{self, Message};
use crate::texts;

/// A browser call held back until the relay's own fresh snapshot is answered.
pub(super) struct Held {
    /// The id of the relay's own snapshot request.
    own_id: String,
    /// When the client sent the call, among its requests.
    pub(super) seq: u64,
    /// The call's id, as the client wrote it.
    pub(super) id: Value,
    /// The call.
    message: Value,
}

impl Held {
    /// Whether the server's answer keyed `key` ([`id_key`]) answers the relay's own snapshot.
    pub(super) fn answered_by(&self, key: &str) -> bool {
        id_key(&json!(self.own_id)) == key
    }
}

impl Relay {
    /// A line from the client while a call is held: a cancellation is acted on at once (the
    /// held call, or a request queued behind it, is dropped and never answered; a request the
    /// server has gets the cancellation forwarded); any other line waits (`None`).
    pub(super) fn cancel_while_holding(&mut self, line: &[u8]) -> Option<Vec<Output>> {
        let message: Value = serde_json::from_slice(line).ok()?;
        match jsonrpc::classify(&message) {
            Message::Notification {
                method: "notifications/cancelled",
            } => {}
            _ => return None,
        }
        let key = id_key(message.pointer("/params/requestId")?);
        let held = self.phase.held()?;
        if id_key(&held.id) == key {
            let held = self.phase.take_held()?;
            self.note("the client cancelled the held call: dropped".into());
            self.ledger.abandon(&held.own_id);
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": held.own_id, "reason": "the call it was taken for was cancelled"}});
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
        self.ledger.cancel(&message);
        Some(vec![Output::ToServer(line.to_vec())])
    }

    /// Holds the call and asks the server for a snapshot of its own.
    pub(super) fn park(&mut self, id: Value, message: Value) -> Vec<Output> {
        self.note("the newest page has no inline tree: taking a snapshot before the call".into());
        let own_id = self.ledger.own_id();
        // Chrome DevTools MCP resolves uids on the newest snapshot of the call's page.
        let page = arguments_of(&message).get("pageId").cloned();
        let tool = self.tracker.snapshot_tool();
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
        let seq = self.ledger.next_seq();
        self.phase = Phase::Holding(Held {
            own_id,
            seq,
            id,
            message,
        });
        vec![to_server(&request)]
    }

    /// The server answered the relay's own snapshot: take it in, decide the held call, then
    /// the lines that queued behind it.
    pub(super) fn fresh_snapshot(&mut self, message: &Value) -> Vec<Output> {
        let Some(held) = self.phase.take_held() else {
            return Vec::new();
        };
        if let Some(result) = message.get("result") {
            if !is_error(result) {
                let step = self.next_step();
                let read = self.read(result_text(result));
                // The snapshot is of the page the held call names, where the server names
                // pages (the relay asked for that page).
                let arguments = arguments_of(&held.message).to_string();
                self.tracker.refresh(step, &read, &arguments);
                self.document_at(step);
            }
        }
        let mut out = self.decide(held.id, held.message);
        out.extend(self.drain_queue());
        out
    }

    /// The client lines that waited behind a held call, until one is held again.
    pub(super) fn drain_queue(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        while self.phase.held().is_none() {
            let Some(line) = self.queue.pop_front() else {
                break;
            };
            out.extend(self.from_client(&line));
        }
        out
    }

    /// Whether a call is held until the server answers the relay's own snapshot.
    pub fn is_waiting(&self) -> bool {
        self.phase.held().is_some()
    }

    /// The server did not answer the relay's own snapshot in time: the held call is refused,
    /// the lines behind it go on, and the late answer will be dropped.
    pub fn give_up_waiting(&mut self) -> Vec<Output> {
        let Some(held) = self.phase.take_held() else {
            return Vec::new();
        };
        self.ledger.abandon(&held.own_id);
        self.note(
            "the server did not answer the guard's own snapshot in time: call refused".into(),
        );
        let text = texts::snapshot_timed_out(self.tracker.snapshot_tool());
        let mut out = vec![to_client(&refusal(&held.id, &text))];
        out.extend(self.drain_queue());
        out
    }
}
