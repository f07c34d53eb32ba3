//! A bug of the relay's own (a panic) never ends the session: the request it was on gets an
//! internal error instead.

use std::panic::{self, AssertUnwindSafe};

use serde_json::Value;

use super::ledger::id_key;
use super::wire::{internal_error, to_client};
use super::{Output, Relay};
use crate::jsonrpc::{self, Message};
use crate::texts;

impl Relay {
    /// `work`, or `fallback` when `work` panics (a bug of the relay's): the session goes on.
    pub(super) fn contained(
        &mut self,
        work: impl FnOnce(&mut Self) -> Vec<Output>,
        fallback: impl FnOnce(&mut Self) -> Vec<Output>,
    ) -> Vec<Output> {
        match panic::catch_unwind(AssertUnwindSafe(|| work(self))) {
            Ok(out) => out,
            Err(_) => fallback(self),
        }
    }

    /// After a panic on a client line: an internal error for the request in it, if any.
    pub(super) fn internal_error(&mut self, line: &[u8]) -> Vec<Output> {
        self.note(
            "internal error while checking a request (a bug in staleguard, please report it); it was not forwarded".into(),
        );
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return Vec::new();
        };
        let Message::Request { id, .. } = jsonrpc::classify(&message) else {
            return Vec::new();
        };
        self.ledger.answered(&id_key(id));
        vec![to_client(&internal_error(id, texts::INTERNAL_ERROR_UNSENT))]
    }

    /// After a panic on a server line: the client request it answered, or the call held for
    /// the relay's own snapshot, gets an internal error.
    pub(super) fn internal_error_for_answer(&mut self) -> Vec<Output> {
        self.note(
            "internal error while reading an answer of the server (a bug in staleguard, please report it); the client got an error instead".into(),
        );
        let Some(key) = self.answering.take() else {
            return Vec::new();
        };
        let why = texts::INTERNAL_ERROR_ANSWER;
        // The relay's own snapshot for a held call: that call gets the error, whether or not
        // reading had taken it out of the phase, and the lines queued behind it go on.
        if let Some(id) = self.answering_held.take() {
            self.phase.take_held_if(|held| held.answered_by(&key));
            let mut out = vec![to_client(&internal_error(&id, why))];
            out.extend(self.drain_queue());
            return out;
        }
        self.ledger.answered(&key);
        match serde_json::from_str::<Value>(&key) {
            Ok(id) => vec![to_client(&internal_error(&id, why))],
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{McpConfig, Options};
    use serde_json::json;
    use staleguard::Config;

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

    /// A panic while reading the relay's own snapshot, after the held call was taken out to
    /// be decided: the held call (not the relay's own request) gets the error, and the line
    /// queued behind it goes on.
    #[test]
    fn a_panic_on_the_guards_own_snapshot_answers_the_held_call() {
        let mut r = relay();
        let line = |v: Value| v.to_string().into_bytes();
        let navigate = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "browser_navigate", "arguments": {"url": "http://a/"}}});
        r.from_client(&line(navigate));
        let report = "### Page\n- Page URL: http://a/\n- Page Title: Shop\n### Snapshot\n- [Snapshot](.playwright-mcp/page-1.yml)";
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": report}]}});
        r.from_server(&line(answer));
        let click = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "browser_click", "arguments": {"target": "e2"}}});
        let own = match r.from_client(&line(click)).as_slice() {
            [Output::ToServer(l)] => serde_json::from_slice::<Value>(l).unwrap()["id"].clone(),
            other => panic!(
                "expected the guard's own snapshot request, got {}",
                other.len()
            ),
        };
        assert!(r.is_waiting());
        let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
        assert!(
            r.from_client(ping).is_empty(),
            "queued behind the held call"
        );
        let own_answer = json!({"jsonrpc": "2.0", "id": own, "result": {"content": []}});
        let out = r.contained(
            |relay| {
                relay.answering = Some(id_key(&own));
                relay.answering_held = Some(json!(2));
                // Reading took the call out of the phase before the bug struck.
                relay.phase.take_held();
                panic!("a bug while reading {own_answer}")
            },
            Relay::internal_error_for_answer,
        );
        let answers = errors_to_client(&out);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], 2, "the held call, not the guard's own id");
        assert_eq!(answers[0]["error"]["code"], jsonrpc::INTERNAL_ERROR);
        let forwarded: Vec<&Output> = out
            .iter()
            .filter(|o| matches!(o, Output::ToServer(_)))
            .collect();
        assert_eq!(forwarded.len(), 1, "the queued ping goes on");
        assert!(!r.is_waiting());
    }
}
