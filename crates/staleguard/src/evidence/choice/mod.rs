//! The chooser: which quotes the evidence track carries. A collapsed page's own quotes are
//! chosen when the next observation supersedes it and written inside it; a user message
//! that asks about pages already collapsed gets the quotes that answer it once (SPEC 9, C2
//! and C3); the items a host names are grounded in the chunks the browser returned and
//! fitted within the caps (SPEC 3).
//!
//! Everything here is a function of the transcript up to the point where it is written: the
//! quotes of an observation depend on the transcript up to the result that superseded it,
//! and those of a user message on the transcript up to it. So a later request writes the same
//! bytes again, and the provider reads them from its prompt cache.

mod chosen;
mod host;
mod page;
mod question;

use crate::memo::table_bytes;
use crate::projection::Plan;
use crate::session::Session;
use crate::transcript::{Item, Role, Transcript};

use crate::evidence::report::{Limits, Quote};
use crate::evidence::writing::Block;

use chosen::{Chosen, Context, Event, Events, Furniture, Task};
use page::choose_for_page;
use question::{choose_for_question, collapsed_by, Asked, Index, Page};

pub(crate) use host::select;
pub(crate) use page::read_before;

/// Chooses the quotes of the collapsed observations and follow-up questions of `session`
/// from `choice` on, taking in the events after transcript item `done` (all, without), and
/// gives the quotes chosen. With `snapshot`, also gives the choice as it was after every
/// event at or before that item. The session's memo keeps each page's scores across
/// requests.
pub(crate) fn choose_from(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    plan: &Plan,
    mut choice: Choice,
    done: Option<usize>,
    snapshot: Option<usize>,
) -> (Chosen, Option<Choice>) {
    let events = Events::of(transcript, session, plan);
    let new = done.map_or(0, |done| events.order.partition_point(|e| e.at() <= done));
    let events = &events.order[new..];
    let Some(cut) = snapshot else {
        choice.run(transcript, session, plan, events);
        return (choice.state, None);
    };
    let (before, after) = events.split_at(events.partition_point(|e| e.at() <= cut));
    choice.run(transcript, session, plan, before);
    // A request resumed from here reads nothing before the cut again: the user's words and
    // the pages up to it are taken in now, as the next event would take them in anyway.
    choice.read_task(transcript, cut + 1);
    choice.furniture.read_until(session, cut + 1);
    // Nothing after the cut (the usual case): the choice is kept as it is, and only the
    // quotes are copied for writing.
    if after.is_empty() {
        let chosen = choice.state.clone();
        return (chosen, Some(choice));
    }
    let kept = choice.clone();
    choice.run(transcript, session, plan, after);
    (choice.state, Some(kept))
}

/// The quotes chosen so far and what they were weighed against, between two events. Every
/// part is a function of the transcript up to the last event taken in, so a later request
/// that repeats that transcript resumes from it (a checkpoint keeps it).
#[derive(Clone)]
pub(crate) struct Choice {
    pub(crate) state: Chosen,
    task: Task,
    /// The task's text so far, hashed as it is read: with the model's words, the context a
    /// page's scores are kept for.
    task_hash: xxhash_rust::xxh3::Xxh3,
    furniture: Furniture,
    read_up_to: usize,
    limits: Limits,
}

impl Choice {
    pub(crate) fn new(limits: Limits) -> Choice {
        Choice {
            state: Chosen {
                max_quote_bytes: limits.max_quote_bytes,
                ..Chosen::default()
            },
            task: Task::default(),
            task_hash: xxhash_rust::xxh3::Xxh3::new(),
            furniture: Furniture::default(),
            read_up_to: 0,
            limits,
        }
    }

    /// Takes in `events`, in order.
    fn run(
        &mut self,
        transcript: &Transcript<'_>,
        session: &Session<'_>,
        plan: &Plan,
        events: &[Event],
    ) {
        let mut index = None;
        for event in events {
            let at = event.at().min(transcript.items.len());
            self.read_task(transcript, at);
            self.furniture.read_until(session, at);
            match *event {
                Event::Collapse { step, next, until } => {
                    let page = Page { step, next, until };
                    let context = Context {
                        task_hash: self.task_hash.digest(),
                        furniture: &self.furniture,
                    };
                    let chosen = choose_for_page(
                        transcript,
                        session,
                        page,
                        context,
                        &mut self.task,
                        &self.state,
                    );
                    let block = Block::Inside(session.steps[step].item);
                    let asked = self.task.newest();
                    self.state.add(chosen, block, self.limits, &asked);
                }
                Event::Question { item, target } => {
                    // Only pages collapsed by then answer it: a page whose collapse waited
                    // past the question was there whole (SPEC 9, C5).
                    let by_then = collapsed_by(plan, item);
                    if index.as_ref().is_some_and(|(n, _, _)| *n != by_then.len()) {
                        index = None;
                    }
                    let (_, asked, index) = index.get_or_insert_with(|| {
                        let asked = Asked::of(transcript, events);
                        let index = Index::of(session, &asked.all, &by_then);
                        (by_then.len(), asked, index)
                    });
                    // Every question is a user message, whose words `Asked` read.
                    if let Some(question) = asked.by_item.get(&item) {
                        let chosen = choose_for_question(
                            session,
                            index,
                            target,
                            question,
                            &self.furniture,
                            &self.state,
                        );
                        let block = Block::Appended(session.steps[target].item);
                        self.state.add(chosen, block, self.limits, question);
                    }
                }
            }
        }
    }

    /// Estimated bytes it holds on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        let quote = |q: &Quote| q.quote.len() + q.source_url.len() + q.observation.len() + 96;
        let kept: usize = self
            .state
            .kept
            .iter()
            .map(|k| k.key.len() + k.line.len() + 128)
            .sum();
        let quotes: usize = self.state.kept.iter().map(|k| quote(&k.quote)).sum();
        let refused: usize = self.state.refused.iter().map(|(_, q)| quote(q) + 16).sum();
        let task: usize = self.task.texts.iter().map(|t| t.len() + 32).sum();
        let words = table_bytes::<u64, bool>(self.task.words.0.capacity());
        self.furniture.heap_bytes() + kept + quotes + refused + task + words + 256
    }

    /// Reads the user's messages before transcript item `at` into the task.
    fn read_task(&mut self, transcript: &Transcript<'_>, at: usize) {
        for item in transcript
            .items
            .get(self.read_up_to..at)
            .unwrap_or_default()
        {
            if let Item::Text {
                role: Role::User,
                text,
            } = item
            {
                self.task.texts.push(text.to_string());
                self.task_hash.update(text.as_bytes());
                self.task_hash.update(&[0]);
            }
        }
        self.read_up_to = self.read_up_to.max(at);
    }
}
