//! The provider-neutral view of a transcript.
//!
//! Adapters read a request body into a [`Transcript`]: tool calls, tool results and
//! message text in order, with the wire format's IDs. Projection, evidence and progress
//! see only this view; the adapter writes their edits back into the body.
//!
//! For hosts and tests that read a request without projecting it
//! ([`adapter::read_transcript`](crate::adapter::read_transcript)) and then ask the guard,
//! the archive or progress about it.

use std::borrow::Cow;

/// One thing in a transcript, in request order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item<'a> {
    /// A tool call made by the model.
    Call(ToolCall<'a>),
    /// The result of a tool call.
    Result(ToolResult<'a>),
    /// Text of a user or assistant message.
    Text {
        /// Who wrote it.
        role: Role,
        /// Its text, its text parts joined with `\n`.
        text: Cow<'a, str>,
    },
    /// Anything the adapter does not interpret (kept byte for byte).
    Other,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The system (or developer) prompt.
    System,
}

/// A tool call: ID, tool name and its arguments as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall<'a> {
    /// The call ID its result answers with.
    pub id: Cow<'a, str>,
    /// The tool's name, as the request spells it (MCP prefix included).
    pub name: Cow<'a, str>,
    /// The arguments, as JSON text.
    pub arguments: Cow<'a, str>,
    /// Index of the message or item that carries the call.
    pub message: usize,
}

/// A tool result: the call ID it answers and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult<'a> {
    /// The call ID it answers; `None` when the wire format gave none.
    pub call_id: Option<Cow<'a, str>>,
    /// The result's text parts, joined with `\n`.
    pub text: Cow<'a, str>,
    /// The wire format flagged it as an error (`is_error`, `isError`).
    pub is_error: bool,
    /// Image parts (screenshots) carried beside the text.
    pub images: usize,
    /// staleguard already appended evidence or guidance to it (a projected request).
    pub appendix: bool,
    /// Index of the message or item that carries the result.
    pub message: usize,
}

/// A transcript in request order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript<'a> {
    /// Calls, results and text, one item per thing the request holds, in its order.
    pub items: Vec<Item<'a>>,
}

impl<'a> Transcript<'a> {
    /// For every item, the index of the call a result answers: the nearest call with the
    /// same ID before it. IDs that repeat across the request resolve locally, never by a
    /// global set. `None` for orphans and for items that are not results.
    pub fn pair_calls(&self) -> Vec<Option<usize>> {
        // Call IDs come from the request: a keyed hasher, and a fast one (a request has
        // thousands of calls).
        let mut latest: std::collections::HashMap<&str, usize, ahash::RandomState> =
            Default::default();
        let mut pairs = Vec::with_capacity(self.items.len());
        for (i, item) in self.items.iter().enumerate() {
            match item {
                Item::Call(call) => {
                    latest.insert(call.id.as_ref(), i);
                    pairs.push(None);
                }
                Item::Result(result) => {
                    let call = result
                        .call_id
                        .as_deref()
                        .and_then(|id| latest.get(id).copied());
                    pairs.push(call);
                }
                _ => pairs.push(None),
            }
        }
        pairs
    }

    /// The call at `index`, if it is one.
    pub fn call(&self, index: usize) -> Option<&ToolCall<'a>> {
        match self.items.get(index) {
            Some(Item::Call(call)) => Some(call),
            _ => None,
        }
    }
}

/// A replacement of one result's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Index of the item in the transcript.
    pub item: usize,
    /// The new text of the result (image parts are dropped), or, when `append` is set,
    /// text added after the result's own content, which stays byte-identical. Shared: a
    /// report of a long session lists thousands, and checkpoints keep them.
    pub text: std::sync::Arc<str>,
    /// Add `text` after the result's content instead of replacing it (evidence, guidance).
    pub append: bool,
}
