//! Lines from the server: what each is, and which request it answers.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::ledger::{id_key, Pending};
use super::rewrite::has_text_part;
use super::wire::to_client;
use super::{Output, Relay};
use crate::jsonrpc;

/// Lines from the server of this many bytes and more are read for what they are before they
/// are read whole (if at all): a large result passed through is then held once.
const HEAD_FIRST_BYTES: usize = 4 << 20;

impl Relay {
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
        self.answering_held = None;
        self.contained(
            |relay| relay.read_server_line(line),
            Relay::internal_error_for_answer,
        )
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
        if let Some(held) = self.phase.held().filter(|held| held.answered_by(&key)) {
            self.answering_held = Some(held.id.clone());
            let answer = read_whole(whole, &line);
            return self.fresh_snapshot(&answer);
        }
        if self.ledger.answered_abandoned(&key) {
            return Vec::new();
        }
        let kind = self.ledger.answered(&key);
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
        self.log.dropped.push(format!(
            "dropped a line from the server that is {what} ({} bytes: \"{}\"{more})",
            line.len(),
            String::from_utf8_lossy(shown).escape_debug()
        ));
    }

    /// The lines from the server dropped since the last call, one description each (its
    /// length and first bytes, escaped), for a log that limits their rate.
    pub fn take_dropped(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log.dropped)
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
