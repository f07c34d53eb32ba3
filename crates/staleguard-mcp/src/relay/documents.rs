//! The documents the model has seen, and refs scoped to them: a call's scoped refs are mapped
//! back to the server's, or refused when they name another document.

use std::collections::VecDeque;

use serde_json::{Map, Value};
use staleguard::Refusal;

use super::Relay;
use crate::scope;
use crate::texts;

/// Documents the model has seen, numbered in order; a new number starts whenever the page
/// (tab, URL, document) differs from the one before.
#[derive(Default)]
pub(super) struct Documents {
    /// The newest document's number (0 before the first).
    number: u32,
    /// What the newest document is: its tab, URL and document.
    key: Option<String>,
    /// Recent documents, oldest first.
    seen: VecDeque<Seen>,
}

/// A document the model has seen, as a refusal names it.
struct Seen {
    number: u32,
    url: String,
    /// The ID of its newest observation.
    observation: String,
}

impl Documents {
    fn enter(&mut self, key: String, url: &str, observation: &str, keep: usize) -> u32 {
        if self.key.as_ref() != Some(&key) {
            self.number += 1;
            self.key = Some(key);
            self.seen.push_back(Seen {
                number: self.number,
                url: url.to_string(),
                observation: observation.to_string(),
            });
            while self.seen.len() > keep {
                self.seen.pop_front();
            }
        } else if let Some(last) = self.seen.back_mut() {
            last.observation = observation.to_string();
        }
        self.number
    }

    fn describe(&self, number: u32) -> Option<String> {
        let seen = self.seen.iter().find(|seen| seen.number == number)?;
        Some(texts::document(number, &seen.observation, &seen.url))
    }
}

impl Relay {
    /// The number of the document of the result taken in at `step`, when it carried a tree
    /// (the core session then holds it as its newest observation, ID and URL included).
    pub(super) fn document_at(&mut self, step: usize) -> Option<u32> {
        let seen = self.tracker.newest_at(step)?;
        let key = self.tracker.document_key();
        let keep = self.options.max_observations;
        Some(self.documents.enter(key, &seen.url, &seen.id, keep))
    }

    /// Maps scoped refs back to the server's refs; a ref from another document is refused:
    /// stale when the document is older, unknown when the model has seen no such document.
    pub(super) fn unscope_arguments(&self, arguments: &mut Value) -> Result<(), (Refusal, String)> {
        let current = self.documents.number;
        let mut failure = None;
        for_each_ref(arguments, |value| {
            let (doc, id) = scope::unscope(value)?;
            if doc == current {
                return Some(id.to_string());
            }
            let why = if doc < current {
                Refusal::StaleRef
            } else {
                Refusal::UnknownRef
            };
            failure.get_or_insert_with(|| (why, self.foreign_ref(value, doc)));
            None
        });
        failure.map_or(Ok(()), Err)
    }

    /// The refusal of a call whose scoped ref `value` names document `doc`, not the newest.
    fn foreign_ref(&self, value: &str, doc: u32) -> String {
        let newest = self
            .documents
            .describe(self.documents.number)
            .unwrap_or_else(|| texts::NO_PAGE_YET.into());
        let origin = if doc < self.documents.number {
            let document = self
                .documents
                .describe(doc)
                .unwrap_or_else(|| texts::document_forgotten(doc));
            texts::from_older_page(&document)
        } else {
            texts::FROM_NO_PAGE.into()
        };
        texts::foreign_ref(value, &origin, &newest)
    }
}

/// Calls `map` on every ref-bearing string of a call's arguments (top level and
/// `fields[]`), replacing the value where it returns one.
fn for_each_ref(arguments: &mut Value, mut map: impl FnMut(&str) -> Option<String>) {
    let mut visit = |object: &mut Map<String, Value>| {
        for key in staleguard::REF_KEYS {
            if let Some(Value::String(value)) = object.get_mut(*key) {
                if let Some(new) = map(value) {
                    *value = new;
                }
            }
        }
    };
    let Some(top) = arguments.as_object_mut() else {
        return;
    };
    visit(top);
    for list in staleguard::REF_LISTS {
        if let Some(Value::Array(items)) = top.get_mut(*list) {
            items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(&mut visit);
        }
    }
}
