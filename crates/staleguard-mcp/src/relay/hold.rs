//! The held call: a browser call held back until the server answers the relay's own fresh
//! snapshot, and the client lines queued behind it.

use serde_json::{json, Value};

use super::guard::arguments_of;
use super::ledger::{id_key, request_key};
use super::rewrite::{is_error, result_text};
use super::wire::{refusal, to_client, to_server};
use super::{Output, Relay};
use crate::jsonrpc::{self, Message};

/// The prefix of the ids of the relay's own requests to the server.
const OWN_ID_PREFIX: &str = "staleguard-fresh-snapshot-";

/// A browser call held back until the relay's own fresh snapshot is answered.
pub(super) struct Parked {
    pub(super) own_id: String,
    pub(super) seq: u64,
    /// The page the relay's own snapshot is of, where the server names pages.
    pub(super) page_id: Option<String>,
    pub(super) id: Value,
    pub(super) message: Value,
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

    /// Holds the call and asks the server for a snapshot of its own.
    pub(super) fn park(&mut self, id: Value, message: Value) -> Vec<Output> {
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
    pub(super) fn fresh_snapshot(&mut self, message: &Value) -> Vec<Output> {
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
}
