//! A browser call from the client against the newest page: forwarded, held, or refused.

use serde_json::{Map, Value};
use staleguard::{Refusal, Verdict};

use super::ledger::Pending;
use super::wire::{refusal, response, to_client, to_server};
use super::{Output, Relay};
use crate::history::HISTORY_TOOL;
use crate::texts;

impl Relay {
    /// Whether the relay offers `browser_history` (and answers it itself).
    pub(super) fn offers_history(&self) -> bool {
        self.options.history_tool && !self.server_has_history
    }

    /// A `tools/call`: `browser_history` answered here, another tool's call forwarded, a
    /// browser call guarded (or held first, when the newest page's refs are unknown).
    pub(super) fn tool_call(&mut self, line: &[u8], id: Value, message: Value) -> Vec<Output> {
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
        if !self.engine.is_browser_tool(&name) {
            self.ledger.forward(&id, Pending::Other);
            return vec![Output::ToServer(line.to_vec())];
        }
        if !self.options.guard {
            self.take_call(&id, &name, &arguments_of(&message).to_string());
            return vec![Output::ToServer(line.to_vec())];
        }
        if self
            .tracker
            .needs_snapshot(&arguments_of(&message).to_string())
        {
            return self.park(id, message);
        }
        self.decide(id, message)
    }

    /// Guards one browser call against the newest page: refuses it, or forwards it with its
    /// refs mapped back to the server's.
    pub(super) fn decide(&mut self, id: Value, mut message: Value) -> Vec<Output> {
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
        match self.engine.check_tracked(&self.tracker, &name, &raw) {
            Verdict::Refuse { why, message } => {
                let mut text = message;
                if why == Refusal::RepeatedSubmission {
                    let guidance = self.tracker.submission_guidance();
                    text = format!("{text}\n\n{guidance}");
                }
                if why == Refusal::NeedsSnapshot {
                    text.push_str(texts::COULD_NOT_SNAPSHOT);
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

    /// Forwards a browser call: the tracker takes it in, the ledger waits for its result.
    fn take_call(&mut self, id: &Value, name: &str, arguments: &str) {
        let step = self.next_step();
        self.tracker.call(step, name, arguments);
        let kind = if self.engine.is_look(name) {
            Pending::Look
        } else {
            Pending::BrowserCall
        };
        self.ledger.forward(id, kind);
    }

    pub(super) fn next_step(&mut self) -> usize {
        let step = self.step;
        self.step += 1;
        step
    }
}

/// A call's arguments (an empty object for none).
pub(super) fn arguments_of(message: &Value) -> Value {
    message
        .pointer("/params/arguments")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()))
}
