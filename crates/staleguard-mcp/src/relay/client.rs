//! Lines from the client: what each is, and what becomes of it.

use serde_json::Value;

use super::ledger::{id_key, Pending};
use super::wire::{invalid_request, parse_error, to_client};
use super::{Output, Relay};
use crate::jsonrpc::{self, Message};
use crate::texts;

impl Relay {
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

    fn client_line(&mut self, line: &[u8]) -> Vec<Output> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        if self.phase.held().is_some() {
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
            Message::Notification { method } if self.phase.gone().is_none() => {
                if method == "notifications/cancelled" {
                    self.ledger.cancel(&message);
                }
                vec![Output::ToServer(line.to_vec())]
            }
            Message::Response if self.phase.gone().is_none() => {
                vec![Output::ToServer(line.to_vec())]
            }
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
        if let Some(gone) = self.phase.gone() {
            return vec![to_client(&gone.answer(&id))];
        }
        if self.ledger.in_use(&key) {
            self.note("answered a request whose id is already in use: invalid request".into());
            return vec![to_client(&invalid_request(&id, texts::ID_IN_USE))];
        }
        match method {
            "tools/call" => {
                if !tool_call_params_ok(&message) {
                    return vec![to_client(&jsonrpc::error(
                        &id,
                        jsonrpc::INVALID_PARAMS,
                        texts::TOOL_CALL_PARAMS,
                    ))];
                }
                self.tool_call(line, id, message)
            }
            "tools/list" if self.offers_history() => {
                self.ledger.forward(&id, Pending::ToolsList);
                vec![Output::ToServer(line.to_vec())]
            }
            _ => {
                self.ledger.forward(&id, Pending::Other);
                vec![Output::ToServer(line.to_vec())]
            }
        }
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
            return vec![to_client(&invalid_request(
                &Value::Null,
                texts::EMPTY_BATCH,
            ))];
        }
        let errors: Vec<Value> = items
            .iter()
            .filter_map(|item| match jsonrpc::classify(item) {
                Message::Request { id, .. } => Some(invalid_request(id, texts::NO_BATCHES)),
                Message::Invalid { id, why } => Some(invalid_request(&id, why)),
                Message::Batch(_) => Some(invalid_request(&Value::Null, texts::BATCH_IN_BATCH)),
                Message::Notification { .. } | Message::Response | Message::BadResponse(_) => None,
            })
            .collect();
        if errors.is_empty() {
            return Vec::new();
        }
        vec![to_client(&Value::Array(errors))]
    }
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
                    .is_none_or(|a| a.is_object() || a.is_null())
        })
}
